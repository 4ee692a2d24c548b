//! `GET /metrics`: requests by route and status with latency histograms (recorded by `track`,
//! a route layer, so the route is the matched pattern, never a raw path with ids in it), the
//! pool's connections, and the outbox's backlog and dead deliveries (read at scrape time).
//! The stream consumer serves its own counts and lag on its `--metrics-addr`.

use super::AppState;
use crate::outbox::deliveries;
use crate::telemetry;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::{Duration, Instant};

/// How long a scrape waits for the database's counts before it leaves them out.
const SCRAPE_QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// The outermost route layer: every answer of a route is counted, refusals (401, 403, 429)
/// included, under the route's pattern.
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(req).await;
    count(method, &route, &response);
    metrics::histogram!("wallet_ledger_http_request_duration_seconds",
        "method" => method, "route" => route)
    .record(started.elapsed().as_secs_f64());
    response
}

/// A request method as a label value, from a closed set: a client may send any token as a
/// method, and every distinct label value is a series kept for the life of the process.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// Counts one answer (also used by the fallback, which no route layer wraps). `route` is a
/// matched route template or `unmatched`, never a raw path.
pub fn count(method: &'static str, route: &str, response: &Response) {
    metrics::counter!("wallet_ledger_http_requests_total",
        "method" => method, "route" => route.to_owned(),
        "status" => response.status().as_u16().to_string())
    .increment(1);
}

#[utoipa::path(get, path = "/metrics", tag = "operations", operation_id = "get_metrics",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let pool = &state.pool;
    let idle = pool.num_idle() as f64;
    metrics::gauge!("wallet_ledger_db_pool_connections", "state" => "idle").set(idle);
    metrics::gauge!("wallet_ledger_db_pool_connections", "state" => "in_use")
        .set(f64::from(pool.size()) - idle);
    metrics::gauge!("wallet_ledger_db_pool_max_connections")
        .set(f64::from(pool.options().get_max_connections()));
    let counts = async {
        let mut conn = pool.acquire().await?;
        deliveries::counts(&mut conn).await
    };
    match tokio::time::timeout(SCRAPE_QUERY_TIMEOUT, counts).await {
        Ok(Ok((dead, pending))) => {
            metrics::gauge!("wallet_ledger_outbox_dead_deliveries").set(dead as f64);
            metrics::gauge!("wallet_ledger_outbox_pending_deliveries").set(pending as f64);
        }
        _ => tracing::warn!("metrics: the outbox counts could not be read in time"),
    }
    match telemetry::recorder() {
        Ok(handle) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            )],
            telemetry::render(&handle),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "no metrics recorder");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
