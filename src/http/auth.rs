//! Authentication, authorization and the per-key rate limit, in the order the contract fixes:
//! 401 (no key, unknown or revoked key), then 403 (the scope is short), then 429 (the key's
//! rate), all before the body is read, so body errors and business rules come after. The
//! request then runs as its key's actor: its writes are audited with the key id, owner and
//! request id, and `Idempotency-Key` ids are derived per owner.

use super::AppState;
use super::error::ApiError;
use super::key_lookups::LookupFailed;
use crate::api_keys::Principal;
use crate::api_keys::Scope;
use crate::ledger::audit::{self, Actor};
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The paths (and everything under them) that only admin keys reach, reads included.
pub const ADMIN_AREAS: [&str; 6] = [
    "/v1/webhooks",
    "/v1/deliveries",
    "/v1/reconciliations",
    "/v1/dead-letters",
    "/v1/consumer",
    "/v1/stats",
];

/// The scope a request needs, from its method and path; `None` for the open paths (health,
/// readiness, the OpenAPI document, and metrics unless configured otherwise).
pub fn required_scope(method: &Method, path: &str, metrics_require_key: bool) -> Option<Scope> {
    if path == "/metrics" {
        return metrics_require_key.then_some(Scope::Admin);
    }
    if path != "/v1" && !path.starts_with("/v1/") {
        return None;
    }
    let reading = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    let admin_area = ADMIN_AREAS
        .iter()
        .any(|area| path == *area || path.starts_with(&format!("{area}/")))
        || admin_under_transactions(path);
    Some(if admin_area {
        Scope::Admin
    } else if is_under(path, "/v1/accounts") || is_under(path, "/v1/account-sets") {
        if reading { Scope::Read } else { Scope::Admin }
    } else if reading {
        Scope::Read
    } else {
        Scope::Write
    })
}

/// `area` itself or a path below it (`/v1/accounts/x`, never `/v1/accounts-x`).
fn is_under(path: &str, area: &str) -> bool {
    path.strip_prefix(area)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `/v1/transactions/{id}/events` and below: a transaction's events carry their webhook
/// deliveries, whose subscription URLs and receivers' errors are admin data, as on
/// `/v1/deliveries`. `/v1/transactions/{id}/metadata-erasure`: erasing data is an operator's
/// act on data, as changing an account's metadata is, not a money movement. Decided by
/// segment, so no other spelling of the path falls back to `read` or `write`.
fn admin_under_transactions(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    matches!(
        segments.as_slice(),
        [
            "",
            "v1",
            "transactions",
            _,
            "events" | "metadata-erasure",
            ..
        ]
    )
}

fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The request's key, or the 401 (or 503 when the keys cannot be read) that answers it.
async fn principal(state: &AppState, token: Option<String>) -> Result<Principal, ApiError> {
    let token = token.ok_or(ApiError::Unauthenticated)?;
    match state.keys.principal(&token).await {
        Ok(found) => found.ok_or(ApiError::Unauthenticated),
        Err(LookupFailed::Unavailable(why)) => Err(ApiError::Unavailable(why)),
        Err(LookupFailed::Failed(why)) => Err(ApiError::Internal(anyhow::anyhow!(why))),
    }
}

/// The route middleware: authenticates `/v1` requests (and `/metrics` when configured),
/// checks the scope and the rate, then runs the rest of the request as the key's actor.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(needed) = required_scope(
        req.method(),
        req.uri().path(),
        state.config.metrics_require_key,
    ) else {
        return next.run(req).await;
    };
    if req
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
    {
        return ApiError::DuplicateHeader("Authorization").into_response();
    }
    let token = bearer(&req).map(str::to_owned);
    let principal = match principal(&state, token).await {
        Ok(principal) => principal,
        Err(refused) => return refused.into_response(),
    };
    if principal.scope < needed {
        return ApiError::InsufficientScope {
            needed: needed.as_str(),
            held: principal.scope.as_str(),
        }
        .into_response();
    }
    if let Err(retry_after) = state.limiter.check(principal.key_id) {
        return ApiError::RateLimited(retry_after).into_response();
    }
    let actor = Actor {
        key_id: Some(principal.key_id),
        owner: principal.owner.clone(),
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    req.extensions_mut().insert::<Principal>(principal);
    audit::scope(actor, next.run(req)).await
}

/// The answer to a path no route matches (404).
pub async fn not_found(State(state): State<AppState>, req: Request) -> Response {
    unmatched(state, req, ApiError::NotFound("path".into())).await
}

/// The answer to a method a path does not take (405).
pub async fn method_not_allowed(State(state): State<AppState>, req: Request) -> Response {
    unmatched(state, req, ApiError::MethodNotAllowed).await
}

/// Under `/v1` a caller without a valid key learns nothing of which paths and methods exist
/// (401); one with a key gets `answer`. Route layers do not wrap these, so they count here.
async fn unmatched(state: AppState, req: Request, answer: ApiError) -> Response {
    let needs_key = required_scope(req.method(), req.uri().path(), false).is_some();
    let token = bearer(&req).map(str::to_owned);
    let method = super::metrics::method_label(req.method());
    drop(req);
    let response = match needs_key {
        true => match principal(&state, token).await {
            Ok(_) => answer,
            Err(refused) => refused,
        },
        false => answer,
    }
    .into_response();
    super::metrics::count(method, "unmatched", &response);
    response
}

/// A per-key limit of `rate` requests a second with bursts of up to `burst`, as the generic
/// cell rate algorithm: each key keeps only the moment its next request is "due" (its
/// theoretical arrival time), so the arithmetic is whole `Duration`s, no floating point.
/// In memory, per process: with several API processes each grants the rate (documented).
pub struct RateLimiter {
    /// The spacing of requests at the sustained rate.
    interval: Duration,
    /// How far ahead of its due time a request may come: `burst - 1` intervals.
    tolerance: Duration,
    due: Mutex<HashMap<uuid::Uuid, Instant>>,
}

impl RateLimiter {
    pub fn new(rate_per_second: u32, burst: u32) -> RateLimiter {
        let interval = Duration::from_secs(1) / rate_per_second.max(1);
        RateLimiter {
            interval,
            tolerance: interval * (burst.max(1) - 1),
            due: Mutex::new(HashMap::new()),
        }
    }

    /// Admits a request of `key`, or says how long until one would be admitted.
    pub fn check(&self, key: uuid::Uuid) -> Result<(), Duration> {
        let now = Instant::now();
        let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
        let next = due.get(&key).copied().unwrap_or(now).max(now);
        let earliest = next.checked_sub(self.tolerance).unwrap_or(now);
        if now < earliest {
            return Err(earliest - now);
        }
        due.insert(key, next + self.interval);
        Ok(())
    }
}

/// The longest `x-request-id` taken from a caller.
pub const MAX_REQUEST_ID_LEN: usize = 200;

/// Runs before the request id is set: a caller's `x-request-id` is kept only when it is one
/// header of 1-200 visible ASCII characters (`!` to `~`). Anything else (non-ASCII, which the
/// audit log could not store as text and recorded as NULL while the response echoed it; 60,000
/// characters, stored whole; a repeated header) is dropped, so the service generates a UUID
/// as for a request without one. The id is only a correlation tag, so it is replaced rather
/// than refused, and the response, the log line and the audit row all carry the same value.
pub async fn bound_request_id(mut req: Request, next: Next) -> Response {
    let mut sent = req.headers().get_all("x-request-id").iter();
    let keep = match (sent.next(), sent.next()) {
        (Some(id), None) => {
            (1..=MAX_REQUEST_ID_LEN).contains(&id.len())
                && id.as_bytes().iter().all(u8::is_ascii_graphic)
        }
        (None, _) => true,
        _ => false,
    };
    if !keep {
        req.headers_mut().remove("x-request-id");
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_by_method_and_path() {
        let s = |m: Method, p: &str| required_scope(&m, p, false);
        assert_eq!(s(Method::GET, "/healthz"), None);
        assert_eq!(s(Method::GET, "/readyz"), None);
        assert_eq!(s(Method::GET, "/metrics"), None);
        assert_eq!(
            required_scope(&Method::GET, "/metrics", true),
            Some(Scope::Admin)
        );
        assert_eq!(s(Method::GET, "/v1/accounts/a"), Some(Scope::Read));
        assert_eq!(s(Method::POST, "/v1/accounts"), Some(Scope::Admin));
        assert_eq!(s(Method::PATCH, "/v1/accounts/a"), Some(Scope::Admin));
        assert_eq!(s(Method::POST, "/v1/account-sets"), Some(Scope::Admin));
        assert_eq!(
            s(Method::DELETE, "/v1/account-sets/s/members/account:a"),
            Some(Scope::Admin)
        );
        assert_eq!(s(Method::GET, "/v1/account-sets/s"), Some(Scope::Read));
        assert_eq!(s(Method::POST, "/v1/transfers"), Some(Scope::Write));
        assert_eq!(
            s(Method::POST, "/v1/transactions/x/post"),
            Some(Scope::Write)
        );
        assert_eq!(s(Method::GET, "/v1/transactions"), Some(Scope::Read));
        assert_eq!(
            s(Method::POST, "/v1/transactions/x/metadata-erasure"),
            Some(Scope::Admin)
        );
        assert_eq!(s(Method::GET, "/v1/webhooks"), Some(Scope::Admin));
        assert_eq!(s(Method::GET, "/v1/reconciliations/x"), Some(Scope::Admin));
        assert_eq!(s(Method::GET, "/v1/dead-letters"), Some(Scope::Admin));
        assert_eq!(
            s(Method::POST, "/v1/dead-letters/0/1-0/replay"),
            Some(Scope::Admin)
        );
        assert_eq!(s(Method::GET, "/v1/consumer"), Some(Scope::Admin));
        assert_eq!(s(Method::GET, "/v1/stats/volumes"), Some(Scope::Admin));
        assert_eq!(s(Method::GET, "/v1/nothing-here"), Some(Scope::Read));
        assert_eq!(s(Method::GET, "/v1webhooks"), None);
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let limiter = RateLimiter::new(10, 2);
        let key = uuid::Uuid::new_v4();
        assert!(limiter.check(key).is_ok());
        assert!(limiter.check(key).is_ok());
        let wait = limiter.check(key).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(
            limiter.check(uuid::Uuid::new_v4()).is_ok(),
            "keys are limited apart"
        );
        std::thread::sleep(Duration::from_millis(120));
        assert!(limiter.check(key).is_ok());
    }
}
