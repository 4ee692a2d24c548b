//! The shape of every error answer: RFC 9457 problem details with a stable `code`. Only the
//! API renders it: `http::error` decides which problem an error becomes, and
//! `http::responses` renders a stored refusal's from the ledger's typed outcome.

use crate::problem::FieldError;
use serde::Serialize;
use utoipa::ToSchema;

/// `application/problem+json` body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem: `/problems/{code}`, documented in `docs/api.md`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code (`insufficient_funds`, `validation_failed`, ...).
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// For `idempotency_mismatch`: JSON pointers of the fields that differ from the stored request.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differing_fields: Vec<String>,
    /// For `invalid_transition`: the status the resource is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_status: Option<String>,
    /// For `batch_failed`: the index of the first item that could not be created...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// ...and the problem its single call would have answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = problem_ref)]
    pub problem: Option<serde_json::Value>,
}

/// `problem` is a whole problem of its own: a reference, so a typed client reads `Problem`.
fn problem_ref() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name("Problem")
}

impl Problem {
    pub fn new(status: u16, code: &str, title: &str, detail: impl Into<String>) -> Problem {
        Problem {
            kind: format!("/problems/{code}"),
            title: title.to_owned(),
            status,
            detail: detail.into(),
            code: code.to_owned(),
            instance: None,
            errors: Vec::new(),
            differing_fields: Vec::new(),
            current_status: None,
            index: None,
            problem: None,
        }
    }
}
