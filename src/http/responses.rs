//! Turning ledger answers into HTTP responses: created, replayed, refused.

use super::error::{ApiError, problem_response};
use crate::ledger::Created;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A JSON body that is already rendered (a stored creation response), sent byte for byte.
pub fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_string(value).map_err(|e| ApiError::Internal(e.into()))?;
    Ok(json_response(status, body))
}

/// 201 for a new resource, 422 for a stored refusal, the stored answer with
/// `Idempotent-Replayed: true` for a replay, 422 `idempotency_mismatch` otherwise.
pub fn created(outcome: Created) -> Result<Response, ApiError> {
    // After this request's own COMMIT answer was lost, the row the service's retry finds is
    // that COMMIT's: answered as the creation it is.
    Ok(match crate::ledger::caller::recognise(outcome) {
        Created::New { body } => json_response(StatusCode::CREATED, body),
        Created::Refused { body } => problem_response(422, body),
        Created::Replayed { status, body } => {
            let mut response = if status >= 400 {
                problem_response(status, body)
            } else {
                json_response(StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body)
            };
            response
                .headers_mut()
                .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
            response
        }
        Created::Mismatch { differing_fields } => {
            return Err(ApiError::IdempotencyMismatch(differing_fields));
        }
    })
}
