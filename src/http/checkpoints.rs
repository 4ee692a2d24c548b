//! `/v1/checkpoints`: the signed checkpoints of the journal (`wallet-ledger seal`,
//! docs/verification.md), newest first, one whole, and the proof that a wallet's chain head is
//! sealed in one, and the proof that a transaction is (`/v1/transactions/{id}/proof`), which
//! `wallet-ledger verify-proof` checks offline. Read scope: auditors read them with a read key.

use super::AppState;
use super::accounts::PageQuery;
use super::error::{ApiError, Result};
use super::extract::{PathPair, PathParam, QueryParams};
use super::problem::Problem;
use super::responses::json;
use crate::ledger::seals::{
    self,
    proof::{CheckpointView, HeadProof},
    transaction_proof::TransactionProof,
};
use crate::ledger::transactions::paginate;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// The tag of this file's cursors: issued and checked with the same value.
const CHECKPOINTS_LIST: &str = "checkpoints";

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckpointPage {
    pub data: Vec<CheckpointView>,
    pub next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/checkpoints", tag = "checkpoints", operation_id = "list_checkpoints", params(PageQuery),
    responses((status = 200, description = "signed checkpoints, newest first", body = CheckpointPage)))]
pub async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<PageQuery>,
) -> Result<Response> {
    let (limit, before) = (query.limit()?, query.cursor(CHECKPOINTS_LIST)?);
    let mut conn = state.pool.acquire().await?;
    let rows = seals::page(&mut conn, before, limit + 1).await?;
    let (data, next) = paginate(
        rows,
        limit,
        |s| s.checkpoint.n,
        |s| CheckpointView::from(&s),
    );
    let next_cursor = next.map(|n| super::accounts::next_cursor(CHECKPOINTS_LIST, n));
    json(StatusCode::OK, &CheckpointPage { data, next_cursor })
}

/// A checkpoint number from the path; anything else names no checkpoint.
fn number(n: &str) -> Result<i64> {
    n.parse::<i64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| ApiError::NotFound(format!("checkpoint {n}")))
}

#[utoipa::path(get, path = "/v1/checkpoints/{n}", tag = "checkpoints", operation_id = "get_checkpoint", params(("n" = i64, Path, minimum = 1)),
    responses((status = 200, description = "the checkpoint", body = CheckpointView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(State(state): State<AppState>, PathParam(n): PathParam) -> Result<Response> {
    let number = number(&n)?;
    let mut conn = state.pool.acquire().await?;
    let sealed = seals::one(&mut conn, number)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("checkpoint {n}")))?;
    json(StatusCode::OK, &CheckpointView::from(&sealed))
}

#[utoipa::path(get, path = "/v1/checkpoints/{n}/heads/{account}", tag = "checkpoints", operation_id = "get_checkpoint_head_proof",
    params(("n" = i64, Path, minimum = 1), ("account" = String, Path)),
    responses((status = 200, description = "the wallet's chain head at the checkpoint, with its audit path to the signed root: `wallet-ledger verify-proof` checks it offline", body = HeadProof),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn head(
    State(state): State<AppState>,
    PathPair(n, account): PathPair,
) -> Result<Response> {
    let number = number(&n)?;
    let mut conn = state.pool.acquire().await?;
    let proof = seals::head_proof(&mut conn, number, &account)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("a head of {account} in checkpoint {n}")))?;
    json(StatusCode::OK, &proof)
}

#[utoipa::path(get, path = "/v1/transactions/{id}/proof", tag = "checkpoints", operation_id = "get_transaction_proof",
    params(("id" = Uuid, Path)),
    responses((status = 200, description = "the transaction's entries and metadata digest as sealed, with the audit path from its leaf to the signed root: `wallet-ledger verify-proof` checks it offline", body = TransactionProof),
        (status = 404, description = "not_found: no transaction has this id, or no checkpoint sealed it yet (the first checkpoint after its entries were written seals it; a refusal or a pending hold has no entries)", body = Problem, content_type = "application/problem+json")))]
pub async fn transaction(
    State(state): State<AppState>,
    PathParam(id): PathParam,
) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("a sealed transaction {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let proof = seals::transaction_proof(&mut conn, uuid)
        .await?
        .ok_or_else(not_found)?;
    json(StatusCode::OK, &proof)
}
