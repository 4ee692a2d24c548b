//! `GET /v1/transactions/{id}/events`: the outbox events a transaction wrote, each with its
//! webhook deliveries, for the console's transaction page. Admin, like `/v1/deliveries`
//! (`auth::required_scope`): a delivery shows its subscription's URL and the receiver's errors.

use super::AppState;
use super::accounts::{PageQuery, next_cursor};
use super::error::{ApiError, Result};
use super::extract::{PathParam, QueryParams};
use super::problem::Problem;
use super::responses::json;
use crate::ledger::views::Page;
use crate::outbox::events::{self, TransactionEventView};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use uuid::Uuid;

#[utoipa::path(get, path = "/v1/transactions/{id}/events", tag = "webhooks", operation_id = "list_transaction_events",
    params(("id" = Uuid, Path), PageQuery),
    responses((status = 200, description = "the transaction's outbox events, oldest first, each with its first 20 webhook deliveries (oldest first) and how many it has", body = Page<TransactionEventView>),
        (status = 404, description = "not_found: no transaction has this id", body = Problem, content_type = "application/problem+json")))]
pub async fn list(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<PageQuery>,
) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {id}"));
    // The query is checked before the id, as on the other lists of one resource.
    let limit = query.limit()?;
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    // One list per transaction: a cursor of another transaction's events is refused.
    let list = format!("events/{uuid}");
    let cursor = query.cursor(&list)?;
    let mut conn = state.pool.acquire().await?;
    if !events::transaction_exists(&mut conn, uuid).await? {
        return Err(not_found());
    }
    let (data, next) = events::of_transaction(&mut conn, uuid, cursor, limit).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|n| next_cursor(&list, n)),
        },
    )
}
