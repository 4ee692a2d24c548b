//! `POST /v1/transactions/{id}/metadata-erasure`: erase a transaction's metadata, which may hold
//! personal data, without breaking the seals over it (`ledger::erasure`). Admin scope, like the
//! other actions on data rather than on money (`auth::required_scope`).

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{JsonBody, PathParam};
use super::problem::Problem;
use super::responses::{REPLAYED_HEADER, json};
use crate::ledger::caller;
use crate::ledger::erasure::{self, Erasure, MAX_REASON_CHARS};
use crate::ledger::views::TransactionView;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;
use validator::{Validate, ValidationError};

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"reason": "erasure request 2026-118 (GDPR art. 17)"})))]
pub struct MetadataErasureRequest {
    /// Why the metadata is erased, kept in the audit log with who erased it: 1-500 characters,
    /// not all blank, no control characters. It is not sent in the event.
    #[validate(custom(function = "reason"))]
    #[schema(min_length = 1, max_length = 500)]
    pub reason: String,
}

fn reason(value: &str) -> std::result::Result<(), ValidationError> {
    let chars = value.chars().count();
    if (1..=MAX_REASON_CHARS).contains(&chars)
        && !value.trim().is_empty()
        && !value.chars().any(char::is_control)
    {
        return Ok(());
    }
    Err(ValidationError::new("reason")
        .with_message("must be 1-500 characters, not all blank, without control characters".into()))
}

#[utoipa::path(post, path = "/v1/transactions/{id}/metadata-erasure", tag = "transactions", operation_id = "erase_transaction_metadata",
    params(("id" = Uuid, Path, example = "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f01")),
    request_body = MetadataErasureRequest,
    responses(
        (status = 200, description = "erased: `metadata` is `{}` and `metadata_erased_at` says when; a repeat answers the same, writes nothing (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`reason`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn erase(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    JsonBody(req): JsonBody<MetadataErasureRequest>,
) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    match erasure::erase(&state.store, uuid, &req.reason).await? {
        Erasure::Erased(view) => json(StatusCode::OK, &view),
        // The service's own retry after this request's COMMIT answer was lost found that
        // COMMIT's work: answered as done, as a capture is (`transactions::resolve`).
        Erasure::AlreadyErased(view) if own_commit_found() => json(StatusCode::OK, &view),
        Erasure::AlreadyErased(view) => {
            let mut response = json(StatusCode::OK, &view)?;
            response
                .headers_mut()
                .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
            Ok(response)
        }
        Erasure::NotFound => Err(not_found()),
    }
}

/// Whether a COMMIT of the current request was sent and its answer lost.
fn own_commit_found() -> bool {
    caller::current().is_some_and(|c| c.state().commit_unknown)
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn a_reason_is_short_printable_text() {
        assert!(reason("customer request 42").is_ok());
        assert!(reason(&"é".repeat(500)).is_ok());
        for bad in ["", "   ", "a\nb", "\u{0}", &"x".repeat(501)] {
            assert!(reason(bad).is_err(), "{bad:?}");
        }
    }
}
