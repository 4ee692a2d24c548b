//! Trying a request again when the database went away under it, with several database hosts
//! (a failover): within the request's own time budget, on the new primary.
//!
//! Safe because every request tried again is naturally idempotent: a read, or a ledger write
//! keyed by its id. A write whose transaction failed before COMMIT left nothing and runs again;
//! one whose COMMIT answer was lost is found by its id on the new primary and answered as
//! the creation it is (201: the request knows its COMMIT was sent, `ledger::caller`). Past the budget the request timeout answers `503 unavailable` with `Retry-After`,
//! and a client's own retry with the same id is just as safe. With one host there is nowhere
//! else to go: the 503 is answered at once and the client's retry policy decides.

use super::AppState;
use super::body;
use super::error::DatabaseLost;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// Whether a request may run twice with one effect: reads, and the ledger's writes, each keyed
/// by the id in its path or body. Webhook writes are not (a second create makes a second
/// subscription; a second rotation a second secret).
pub fn may_run_again(method: &Method, route: &str) -> bool {
    match *method {
        Method::GET | Method::HEAD => true,
        Method::POST | Method::PATCH => {
            route.starts_with("/v1/accounts")
                || route.starts_with("/v1/transactions")
                || route == "/v1/transfers"
                || route == "/v1/payments"
        }
        _ => false,
    }
}

/// Whether a response says the database went away in a way worth waiting out: a failed
/// connection always; no connection at all only while no host takes writes (otherwise it is a
/// saturated pool, and waiting would only deepen the queue).
fn lost_database(response: &Response, primary_lost: bool) -> bool {
    response
        .extensions()
        .get::<DatabaseLost>()
        .is_some_and(|lost| !lost.pool_timeout || primary_lost)
}

pub async fn retry_on_failover(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(primary) = state.primary.clone() else {
        return next.run(request).await;
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    if !may_run_again(request.method(), &route) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // The body is read once, under the route's limits, and given to each attempt. The batch
    // route's own limit is set by a layer inside this one, so it is applied here too.
    let mut reading = Request::from_parts(parts.clone(), body);
    if route == super::BATCH_ROUTE
        && let Some(policy) = reading.extensions_mut().get_mut::<body::BodyPolicy>()
    {
        policy.limit_bytes = state.config.batch_body_limit_bytes;
    }
    let bytes = match body::read(reading).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let mut pause = FIRST_PAUSE;
    loop {
        let attempt = Request::from_parts(parts.clone(), Body::from(bytes.clone()));
        let response = next.clone().run(attempt).await;
        if !lost_database(&response, primary.is_lost()) {
            return response;
        }
        primary.suspect();
        metrics::counter!("wallet_ledger_http_failover_retries_total").increment(1);
        tracing::info!(route = %route, retry_in = ?pause, "the database went away under the request; trying it again");
        // The request timeout around this layer ends the loop with a 503.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_ledger_writes_run_again_and_webhook_writes_do_not() {
        for (method, route) in [
            (Method::GET, "/v1/webhooks/{id}"),
            (Method::POST, "/v1/transactions"),
            (Method::POST, "/v1/transactions/{id}/post"),
            (Method::POST, "/v1/transactions/batch"),
            (Method::POST, "/v1/accounts/{id}/freeze"),
            (Method::PATCH, "/v1/accounts/{id}"),
            (Method::POST, "/v1/transfers"),
            (Method::POST, "/v1/payments"),
        ] {
            assert!(may_run_again(&method, route), "{method} {route}");
        }
        for (method, route) in [
            (Method::POST, "/v1/webhooks"),
            (Method::POST, "/v1/webhooks/{id}/rotate-secret"),
            (Method::POST, "/v1/deliveries/{id}/redeliver"),
            (Method::DELETE, "/v1/webhooks/{id}"),
            (Method::POST, ""),
        ] {
            assert!(!may_run_again(&method, route), "{method} {route}");
        }
    }

    #[test]
    fn a_saturated_pool_is_not_waited_out_while_a_primary_answers() {
        let marked = |pool_timeout| {
            let mut response = Response::new(Body::empty());
            response
                .extensions_mut()
                .insert(DatabaseLost { pool_timeout });
            response
        };
        assert!(lost_database(&marked(false), false));
        assert!(!lost_database(&marked(true), false));
        assert!(lost_database(&marked(true), true));
        assert!(!lost_database(&Response::new(Body::empty()), true));
    }
}
