//! `/v1/reconciliations`: the stored reconciliation runs, newest first, and one run whole.

use super::AppState;
use super::accounts::PageQuery;
use super::error::{ApiError, Result};
use super::extract::{PathParam, QueryParams};
use super::problem::Problem;
use super::responses::json;
use crate::ledger::transactions::paginate;
use crate::reconcile::model::{Exception, ExceptionCode, RunReport, Summary};
use crate::reconcile::stored;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// The tag of this file's `reconciliations` cursors: issued and checked with the same value.
const RECONCILIATIONS_LIST: &str = "reconciliations";

/// A run as listed: what it compared and what it found, without the detail.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunSummary {
    pub id: Uuid,
    pub provider: String,
    pub clean: bool,
    pub created_at: DateTime<Utc>,
    /// `null` only if a stored run predates the current summary format.
    pub summary: Option<Summary>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RunPage {
    pub data: Vec<RunSummary>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/reconciliations", tag = "reconciliations", operation_id = "list_reconciliations", params(PageQuery),
    responses((status = 200, description = "stored runs, newest first", body = RunPage)))]
pub async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<PageQuery>,
) -> Result<Response> {
    let (limit, cursor) = (query.limit()?, query.cursor(RECONCILIATIONS_LIST)?);
    let rows = stored::list(&state.pool, cursor, limit + 1).await?;
    let (data, next) = paginate(
        rows,
        limit,
        |r| r.seq,
        |r| RunSummary {
            id: r.id,
            provider: r.provider,
            clean: r.clean,
            created_at: r.created_at,
            summary: serde_json::from_value(r.summary).ok(),
        },
    );
    let next_cursor = next.map(|n| super::accounts::next_cursor(RECONCILIATIONS_LIST, n));
    json(StatusCode::OK, &RunPage { data, next_cursor })
}

#[utoipa::path(get, path = "/v1/reconciliations/{id}", tag = "reconciliations", operation_id = "get_reconciliation", params(("id" = Uuid, Path)),
    responses((status = 200, description = "the whole run: summary, exceptions with their reasons, matches, payouts, invariant findings", body = RunReport),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(State(state): State<AppState>, PathParam(id): PathParam) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("reconciliation {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let report = stored::report(&state.pool, uuid)
        .await?
        .ok_or_else(not_found)?;
    // Served as stored: the same document the job wrote as report.json.
    json(StatusCode::OK, &report)
}

/// `GET /v1/reconciliations/{id}/exceptions`: the run's listed exceptions, a page at a time.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExceptionsQuery {
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged: opaque, tagged with
    /// its list; any other value (a made-up one, another list's) is 400 `cursor`.
    pub cursor: Option<String>,
    /// Only exceptions of this code (`missing_in_ledger`, ..., `unparsable_row`).
    #[param(schema_with = exception_code)]
    pub code: Option<String>,
}

/// `code` of the exceptions list: the names `ExceptionCode::parse` accepts.
fn exception_code() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ExceptionCode::ALL.map(|c| c.as_str())))
        .into()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExceptionPage {
    pub data: Vec<Exception>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/reconciliations/{id}/exceptions", tag = "reconciliations", operation_id = "list_reconciliation_exceptions",
    params(("id" = Uuid, Path), ExceptionsQuery),
    responses((status = 200, description = "the run's listed exceptions in report order, a page at a time (`summary.exceptions` has the exact counts)", body = ExceptionPage),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn exceptions(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<ExceptionsQuery>,
) -> Result<Response> {
    let page = PageQuery {
        limit: query.limit,
        cursor: query.cursor.clone(),
    };
    let list = format!("exceptions/{id}");
    let (limit, cursor) = (page.limit()?, page.cursor(&list)?);
    let code = match query.code.as_deref() {
        None => None,
        Some(name) => Some(ExceptionCode::parse(name).ok_or_else(|| {
            let names: Vec<&str> = ExceptionCode::ALL.iter().map(|c| c.as_str()).collect();
            ApiError::query(
                "/code",
                "invalid_type",
                format!("one of {}", names.join(", ")),
            )
        })?),
    };
    let not_found = || ApiError::NotFound(format!("reconciliation {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let rows = stored::exceptions(&state.pool, uuid, cursor, code, limit + 1)
        .await?
        .ok_or_else(not_found)?;
    let (data, next) = paginate(rows, limit, |r| r.0, |r| r.1);
    let data = data
        .into_iter()
        .filter_map(|e| serde_json::from_value(e).ok())
        .collect();
    let next_cursor = next.map(|n| super::accounts::next_cursor(&list, n));
    json(StatusCode::OK, &ExceptionPage { data, next_cursor })
}
