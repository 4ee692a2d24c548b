//! Turning ledger answers into HTTP responses: created, replayed, refused.

use super::error::{ApiError, problem_response};
use super::problem::Problem;
use crate::ledger::transactions::RefusalCode;
use crate::ledger::{Created, Outcome, Refusal};
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

/// 201 for a new resource, 422 for a refusal, the stored answer with
/// `Idempotent-Replayed: true` for a replay (200 for a resource, the same 422 for a
/// refusal), 422 `idempotency_mismatch` otherwise.
pub fn created(outcome: Created) -> Result<Response, ApiError> {
    // After this request's own COMMIT answer was lost, the row the service's retry finds is
    // that COMMIT's: answered as the creation it is.
    Ok(match crate::ledger::caller::recognise(outcome) {
        Created::First(outcome) => answer(outcome, StatusCode::CREATED),
        Created::Replayed(outcome) => {
            let mut response = answer(outcome, StatusCode::OK);
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

/// A stored outcome as its response: the resource's body with `created` (201 the first
/// time, 200 on a replay), or the refusal's 422 problem.
fn answer(outcome: Outcome, created: StatusCode) -> Response {
    let refused = matches!(outcome, Outcome::Refused(_));
    let (status, body) = status_and_body(outcome, created);
    if refused {
        problem_response(status.as_u16(), body)
    } else {
        json_response(status, body)
    }
}

/// A stored outcome's status and body: what a single call answers, and what a batch item
/// carries (`batch::item_answer`).
pub(super) fn status_and_body(outcome: Outcome, created: StatusCode) -> (StatusCode, String) {
    match outcome {
        Outcome::Created { body } => (created, body),
        Outcome::Refused(refusal) => (REFUSED, refusal_body(refusal)),
    }
}

/// The status of a business refusal, first or replayed.
const REFUSED: StatusCode = StatusCode::UNPROCESSABLE_ENTITY;

/// The problem body of a stored refusal; a retry gets these exact bytes again: the answer a
/// refusal stored before the outcome migration kept, else rendered from its code and detail
/// as that answer was.
fn refusal_body(refusal: Refusal) -> String {
    if let Some(answer) = refusal.recorded_answer {
        return answer;
    }
    let code = refusal.code;
    let mut problem = Problem::new(
        REFUSED.as_u16(),
        code.as_str(),
        refusal_title(code),
        refusal.detail,
    );
    problem.instance = Some(format!("/v1/transactions/{}", refusal.transaction));
    serde_json::to_string(&problem).expect("a problem always serializes")
}

/// The problem's `title` of each refusal.
fn refusal_title(code: RefusalCode) -> &'static str {
    match code {
        RefusalCode::InsufficientFunds => "Insufficient funds",
        RefusalCode::AccountFrozen => "Account frozen",
        RefusalCode::AccountClosed => "Account closed",
        RefusalCode::ReversalExceedsOriginal => "Reversal exceeds the original",
        RefusalCode::VelocityLimitExceeded => "Velocity limit exceeded",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn each_refusal_has_its_own_title() {
        let titles: HashSet<&str> = RefusalCode::ALL.into_iter().map(refusal_title).collect();
        assert_eq!(titles.len(), RefusalCode::ALL.len());
        assert_eq!(
            refusal_title(RefusalCode::ReversalExceedsOriginal),
            "Reversal exceeds the original"
        );
    }

    /// The bytes a refusal's answer had when the ledger stored them (before migration
    /// 20261205140000), and that a refusal rendered now still has.
    #[test]
    fn a_refusal_renders_as_stored_refusals_were() {
        let id = uuid::Uuid::nil();
        let refusal = |recorded_answer| Refusal {
            transaction: id,
            code: RefusalCode::AccountFrozen,
            detail: "account w1 is frozen".into(),
            recorded_answer,
        };
        assert_eq!(
            refusal_body(refusal(None)),
            format!(
                r#"{{"type":"/problems/account_frozen","title":"Account frozen","status":422,"detail":"account w1 is frozen","code":"account_frozen","instance":"/v1/transactions/{id}"}}"#
            )
        );
        assert_eq!(refusal_body(refusal(Some("as stored".into()))), "as stored");
    }
}
