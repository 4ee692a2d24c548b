//! The one error type at the HTTP edge, mapped to `application/problem+json` in one place.
//! 5xx bodies say nothing of internals; their cause is logged once, here.

use super::problem::Problem;
use crate::db::StoreError;
use crate::ledger::bounds::BalanceError;
use crate::ledger::transactions::{ItemError, WriteError};
use crate::problem::FieldError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `Retry-After` seconds of a 503.
pub const RETRY_AFTER_SECONDS: u64 = 1;

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    #[error("unsupported media type")]
    UnsupportedMediaType,
    #[error("payload too large")]
    PayloadTooLarge,
    /// The client did not send the body it announced within `--body-read-timeout-ms`.
    #[error("the body did not arrive in time")]
    BodyTimeout,
    #[error("neither an id nor an Idempotency-Key")]
    IdRequired,
    /// A header that carries meaning (`Authorization`, `Idempotency-Key`) sent more than once:
    /// which one counts would be a guess.
    #[error("the {0} header was sent more than once")]
    DuplicateHeader(&'static str),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    /// A query string that does not say what to read: an unknown, malformed or out-of-range
    /// parameter. 400, not 422 like a body's fields: the request's address itself is wrong,
    /// and a list must never answer as if a misspelt filter had not been sent.
    #[error("invalid query")]
    InvalidQuery(Vec<FieldError>),
    #[error("unknown accounts {0:?}")]
    UnknownAccounts(Vec<String>),
    #[error("idempotency mismatch")]
    IdempotencyMismatch(Vec<String>),
    #[error("{0} not found")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("invalid transition from {current}")]
    InvalidTransition { current: String, detail: String },
    /// An account that already has the most velocity limits it may have.
    #[error("the account has {0} limits already")]
    TooManyLimits(i64),
    /// An account that already has the most balance monitors it may have.
    #[error("the account has {0} monitors already")]
    TooManyMonitors(i64),
    /// A member that would make the set contain itself.
    #[error("set {0} would contain itself")]
    SetCycle(String),
    #[error("account not empty")]
    AccountNotEmpty(String),
    /// A balance outside ±(2^53 − 1), left by postings from before the range was enforced for
    /// system accounts: no number can be answered for it.
    #[error("balance of {0} out of range")]
    BalanceOutOfRange(String),
    #[error("batch item {index} failed")]
    BatchFailed {
        index: usize,
        problem: serde_json::Value,
    },
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The database went away under the request (its connection failed, its node was
    /// demoted, or no connection could be had): answered as `Unavailable`, and marked
    /// [`DatabaseLost`] on the response so that `failover.rs` may try the request again.
    #[error("unavailable: {cause}")]
    DatabaseLost { cause: String, pool_timeout: bool },
    /// A COMMIT of the request was sent and its answer lost (`ledger::caller`): it may have
    /// been written. Unlike every other 503, this one does not mean "nothing was written".
    #[error("the outcome of the request's commit is unknown")]
    OutcomeUnknown,
    #[error("no valid API key")]
    Unauthenticated,
    #[error("the key's scope is {held}, {needed} is needed")]
    InsufficientScope {
        needed: &'static str,
        held: &'static str,
    },
    #[error("rate limited")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl ApiError {
    pub fn validation(
        field: impl Into<String>,
        code: &str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError::Validation(vec![FieldError::new(field, code, message)])
    }

    /// One query parameter's error (400 `invalid_query`).
    pub fn query(field: impl Into<String>, code: &str, message: impl Into<String>) -> ApiError {
        ApiError::InvalidQuery(vec![FieldError::new(field, code, message)])
    }

    pub fn problem(&self) -> Problem {
        match self {
            ApiError::MalformedJson(detail) => {
                Problem::new(400, "malformed_json", "Malformed JSON", detail.clone())
            }
            ApiError::UnsupportedMediaType => Problem::new(
                415,
                "unsupported_media_type",
                "Unsupported media type",
                "send the body as application/json",
            ),
            ApiError::PayloadTooLarge => Problem::new(
                413,
                "payload_too_large",
                "Payload too large",
                "the request body exceeds the configured limit",
            ),
            ApiError::BodyTimeout => Problem::new(
                408,
                "body_timeout",
                "Body timeout",
                "the request body did not arrive within the time allowed; nothing was done, send the request again",
            ),
            ApiError::DuplicateHeader(name) => Problem::new(
                400,
                "duplicate_header",
                "Duplicate header",
                format!("the {name} header was sent more than once; send it once"),
            ),
            ApiError::IdRequired => Problem::new(
                400,
                "id_required",
                "Id required",
                "send an `id` in the body (to rotate a webhook secret: the `secret`) or an Idempotency-Key header, so that a retry cannot apply twice",
            ),
            ApiError::Validation(errors) => {
                field_problem(422, "validation_failed", "Validation failed", errors)
            }
            ApiError::InvalidQuery(errors) => {
                field_problem(400, "invalid_query", "Invalid query", errors)
            }
            ApiError::UnknownAccounts(ids) => Problem::new(
                422,
                "unknown_account",
                "Unknown account",
                format!(
                    "no account {}: create it, then retry with the same id",
                    ids.join(", ")
                ),
            ),
            ApiError::IdempotencyMismatch(fields) => {
                let mut p = Problem::new(
                    422,
                    "idempotency_mismatch",
                    "Idempotency mismatch",
                    format!(
                        "this id was first used with a different request ({}); a new request needs a new id",
                        fields.join(", ")
                    ),
                );
                p.differing_fields = fields.clone();
                p
            }
            ApiError::NotFound(what) => {
                Problem::new(404, "not_found", "Not found", format!("{what} not found"))
            }
            ApiError::MethodNotAllowed => Problem::new(
                405,
                "method_not_allowed",
                "Method not allowed",
                "this path does not take that method",
            ),
            ApiError::InvalidTransition { current, detail } => {
                let mut p = Problem::new(
                    409,
                    "invalid_transition",
                    "Invalid transition",
                    detail.clone(),
                );
                p.current_status = Some(current.clone());
                p
            }
            ApiError::TooManyLimits(most) => Problem::new(
                409,
                "too_many_limits",
                "Too many limits",
                format!("the account has {most} limits, the most it may have; delete one first"),
            ),
            ApiError::TooManyMonitors(most) => Problem::new(
                409,
                "too_many_monitors",
                "Too many monitors",
                format!("the account has {most} monitors, the most it may have; delete one first"),
            ),
            ApiError::SetCycle(set) => Problem::new(
                409,
                "set_cycle",
                "Set cycle",
                format!("the member is the set {set} or contains it: a set cannot contain itself"),
            ),
            ApiError::AccountNotEmpty(detail) => Problem::new(
                409,
                "account_not_empty",
                "Account not empty",
                detail.clone(),
            ),
            ApiError::BalanceOutOfRange(account) => Problem::new(
                409,
                "balance_out_of_range",
                "Balance out of range",
                format!(
                    "a balance of account {account} is outside ±9007199254740991 (written before that range was enforced); `wallet-ledger verify` reports it and an operator must correct it"
                ),
            ),
            ApiError::BatchFailed { index, problem } => {
                let mut p = Problem::new(
                    422,
                    "batch_failed",
                    "Batch failed",
                    format!(
                        "item {index} could not be created, so nothing in this atomic batch was"
                    ),
                );
                p.index = Some(*index);
                p.problem = Some(problem.clone());
                p
            }
            ApiError::Unavailable(_) | ApiError::DatabaseLost { .. } => Problem::new(
                503,
                "unavailable",
                "Service unavailable",
                "the ledger cannot serve this request right now; nothing of it was written; retry with the same id",
            ),
            ApiError::OutcomeUnknown => Problem::new(
                503,
                "outcome_unknown",
                "Outcome unknown",
                "the database connection was lost after the request's commit was sent: it may or may not have been written; retry with the same id to learn which",
            ),
            ApiError::Unauthenticated => Problem::new(
                401,
                "unauthenticated",
                "Unauthenticated",
                "send `Authorization: Bearer <token>` with a valid, unrevoked API key",
            ),
            ApiError::InsufficientScope { needed, held } => Problem::new(
                403,
                "insufficient_scope",
                "Insufficient scope",
                format!("this request needs a key with scope {needed}; this key's scope is {held}"),
            ),
            ApiError::RateLimited(_) => Problem::new(
                429,
                "rate_limited",
                "Rate limited",
                "this API key sent more requests than its rate allows; retry after the delay given",
            ),
            ApiError::Internal(_) => Problem::new(
                500,
                "internal",
                "Internal error",
                "an unexpected error occurred; retry with the same id",
            ),
        }
    }
}

/// The most field errors one answer lists; the detail gives the whole count.
pub const MAX_LISTED_ERRORS: usize = 100;

/// A problem that lists field errors (`errors`), in a body or in a query string.
fn field_problem(status: u16, code: &str, title: &str, errors: &[FieldError]) -> Problem {
    let mut p = Problem::new(status, code, title, summary(errors));
    // Bounded: a body of 20,000 bad items must not make an answer of megabytes.
    p.errors = errors.iter().take(MAX_LISTED_ERRORS).cloned().collect();
    p
}

fn summary(errors: &[FieldError]) -> String {
    match errors {
        [one] => format!("{}: {}", one.field, one.message),
        many if many.len() > MAX_LISTED_ERRORS => format!(
            "{} fields are invalid; the first {MAX_LISTED_ERRORS} are listed",
            many.len()
        ),
        many => format!("{} fields are invalid", many.len()),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Internal(cause) => tracing::error!(error = ?cause, "internal error"),
            ApiError::Unavailable(cause) | ApiError::DatabaseLost { cause, .. } => {
                tracing::warn!(%cause, "unavailable")
            }
            ApiError::OutcomeUnknown => tracing::warn!("a commit's answer was lost"),
            _ => {}
        }
        let problem = self.problem();
        let mut response = problem_response(
            problem.status,
            serde_json::to_string(&problem).unwrap_or_default(),
        );
        if let ApiError::DatabaseLost { pool_timeout, .. } = &self {
            response.extensions_mut().insert(DatabaseLost {
                pool_timeout: *pool_timeout,
            });
        }
        let headers = response.headers_mut();
        match &self {
            ApiError::Unavailable(_) | ApiError::DatabaseLost { .. } | ApiError::OutcomeUnknown => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            }
            // Whole seconds, rounded up: a client that waits as told finds a token.
            ApiError::RateLimited(wait) => {
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
            }
            ApiError::Unauthenticated => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

/// On a 503 response: the database went away under the request (see [`ApiError::DatabaseLost`]).
#[derive(Debug, Clone, Copy)]
pub struct DatabaseLost {
    /// Only no connection could be had in time: a failover, or merely a saturated pool.
    pub pool_timeout: bool,
}

/// A readiness probe's 503 `unavailable`, without the log line an `ApiError` writes: the
/// probe's caller logs changes of readiness only (see `telemetry::ProbeLog`).
pub fn not_ready(why: &str) -> Response {
    let problem = ApiError::Unavailable(format!("readiness: {why}")).problem();
    let mut response = problem_response(
        problem.status,
        serde_json::to_string(&problem).unwrap_or_default(),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    response
}

/// A response whose body is an already rendered problem (also used to replay stored refusals).
pub fn problem_response(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        )],
        body,
    )
        .into_response()
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> ApiError {
        StoreError::from(error).into()
    }
}

impl From<BalanceError> for ApiError {
    fn from(error: BalanceError) -> ApiError {
        match error {
            BalanceError::OutOfRange(out) => ApiError::BalanceOutOfRange(out.0),
            BalanceError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            // Only a database that went away is worth waiting out on a new primary.
            StoreError::Unavailable(_) | StoreError::Stopped => ApiError::DatabaseLost {
                pool_timeout: error.is_pool_timeout(),
                cause: error.to_string(),
            },
            error if error.is_transient() => ApiError::Unavailable(error.to_string()),
            error => ApiError::Internal(error.into()),
        }
    }
}

impl From<WriteError> for ApiError {
    fn from(error: WriteError) -> ApiError {
        match error {
            WriteError::Item(item) => item.into(),
            WriteError::Database(e) => e.into(),
            WriteError::Contention => {
                ApiError::Unavailable("ids kept being taken concurrently".into())
            }
            WriteError::CallerGone => ApiError::Unavailable("request timed out".into()),
        }
    }
}

impl From<ItemError> for ApiError {
    fn from(error: ItemError) -> ApiError {
        match error {
            ItemError::UnknownAccounts(ids) => ApiError::UnknownAccounts(ids),
            ItemError::Invalid(errors) => ApiError::Validation(errors),
        }
    }
}

/// The broker behind the admin endpoints of the consumer's streams: an outage (by
/// `broker::is_outage`, the consumer's own test) answers 503, like a database that went away;
/// anything else (a key of the wrong type) is a 500.
impl From<redis::RedisError> for ApiError {
    fn from(error: redis::RedisError) -> ApiError {
        if crate::broker::is_outage(&error) {
            ApiError::Unavailable(format!("the broker: {error}"))
        } else {
            ApiError::Internal(error.into())
        }
    }
}

impl From<crate::consumer::dlq::DlqError> for ApiError {
    fn from(error: crate::consumer::dlq::DlqError) -> ApiError {
        use crate::consumer::dlq::DlqError;
        match error {
            DlqError::Missing { ids, .. } => {
                ApiError::NotFound(format!("dead letter {}", ids.join(", ")))
            }
            refused @ DlqError::NothingToReplay { .. } => ApiError::InvalidTransition {
                current: "empty".to_owned(),
                detail: refused.to_string(),
            },
            DlqError::Redis(e) => e.into(),
            reply @ DlqError::Reply(_) => ApiError::Internal(reply.into()),
        }
    }
}
