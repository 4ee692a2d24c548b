//! `/v1/accounts/{id}/monitors` and `/v1/account-sets/{id}/monitors`: balance monitors of a
//! wallet or of an account set (`ledger::monitors`), added once per id, listed, read with their
//! state now, and deleted.

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, PathPair, PathParam};
use super::problem::Problem;
use super::responses::{created, json};
use super::validate;
use crate::ledger::accounts;
use crate::ledger::money::Amount;
use crate::ledger::monitors::store::{self, AddError, MonitorState, MonitorView, NewMonitor};
use crate::ledger::monitors::{Balances, Condition, Field, MAX_MONITORS_PER_ACCOUNT, Operator};
use crate::ledger::owner::Owner;
use crate::ledger::sets;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;
use validator::Validate;

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMonitorRequest {
    /// The caller's id; without it an `Idempotency-Key` header derives one.
    pub id: Option<Uuid>,
    /// The balance watched: `posted`, `available` (posted − pending_out) or `pending_out`.
    pub field: Field,
    /// `lt` (<), `lte` (<=), `gt` (>) or `gte` (>=) the value.
    pub operator: Operator,
    /// In minor units of the account's currency, within ±9007199254740991.
    #[serde(deserialize_with = "validate::integer::required")]
    #[schema(minimum = -9007199254740991_i64, maximum = 9007199254740991_i64)]
    pub value: i64,
}

impl CreateMonitorRequest {
    fn condition(&self) -> Result<Condition> {
        let value = Amount::new(self.value).ok_or_else(|| {
            ApiError::validation("/value", "range", "must be within ±9007199254740991")
        })?;
        Ok(Condition {
            field: self.field,
            operator: self.operator,
            value: value.minor_units(),
        })
    }
}

/// The monitors of an account (or a set) that fire.
#[derive(Debug, Serialize, ToSchema)]
pub struct MonitorList {
    pub data: Vec<MonitorView>,
}

#[utoipa::path(post, path = "/v1/accounts/{id}/monitors", tag = "monitors", operation_id = "create_monitor", request_body = CreateMonitorRequest,
    params(("id" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "added: every change that locks the wallet from now on evaluates it", body = MonitorView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "too_many_monitors: the account already has 20", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`range`, `invalid_type`, `unknown_field`), idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    PathParam(account): PathParam,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateMonitorRequest>,
) -> Result<Response> {
    add(state, Owner::Account(account), key, req).await
}

#[utoipa::path(post, path = "/v1/account-sets/{id}/monitors", tag = "monitors", operation_id = "create_set_monitor", request_body = CreateMonitorRequest,
    params(("id" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "added: every change of a wallet counted in the set from now on evaluates it, on the set's balances", body = MonitorView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "too_many_monitors: the set already has 20", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`range`, `invalid_type`, `unknown_field`), idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create_on_set(
    State(state): State<AppState>,
    PathParam(set): PathParam,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateMonitorRequest>,
) -> Result<Response> {
    add(state, Owner::Set(set), key, req).await
}

async fn add(
    state: AppState,
    owner: Owner,
    key: IdempotencyKey,
    req: CreateMonitorRequest,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let condition = req.condition()?;
    // What a retry is compared with: the monitor as understood, under its owner's key (a
    // wallet's monitor keeps the form it was first stored in).
    let (key, owner_id) = owner.request_key();
    let mut request = json!({
        "field": condition.field, "operator": condition.operator, "value": condition.value,
    });
    request[key] = json!(owner_id);
    let new = NewMonitor {
        id,
        request,
        owner,
        condition,
    };
    let mut conn = state.pool.acquire().await?;
    match store::add(&mut conn, &new).await {
        Ok(outcome) => created(outcome),
        Err(AddError::UnknownOwner) => Err(ApiError::NotFound(new.owner.label())),
        Err(AddError::TooMany) => Err(ApiError::TooManyMonitors(MAX_MONITORS_PER_ACCOUNT)),
        Err(AddError::Store(e)) => Err(e.into()),
    }
}

#[utoipa::path(get, path = "/v1/accounts/{id}/monitors", tag = "monitors", operation_id = "list_monitors", params(("id" = String, Path)),
    responses((status = 200, description = "the account's monitors that fire, oldest first (at most 20), with their last firing", body = MonitorList),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn list(
    State(state): State<AppState>,
    PathParam(account): PathParam,
) -> Result<Response> {
    list_of(state, Owner::Account(account)).await
}

#[utoipa::path(get, path = "/v1/account-sets/{id}/monitors", tag = "monitors", operation_id = "list_set_monitors", params(("id" = String, Path)),
    responses((status = 200, description = "the set's monitors that fire, oldest first (at most 20), with their last firing", body = MonitorList),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn list_on_set(
    State(state): State<AppState>,
    PathParam(set): PathParam,
) -> Result<Response> {
    list_of(state, Owner::Set(set)).await
}

async fn list_of(state: AppState, owner: Owner) -> Result<Response> {
    let mut conn = state.pool.acquire().await?;
    let data = store::list(&mut conn, &owner)
        .await?
        .ok_or_else(|| ApiError::NotFound(owner.label()))?;
    json(StatusCode::OK, &MonitorList { data })
}

#[utoipa::path(get, path = "/v1/accounts/{id}/monitors/{monitor_id}", tag = "monitors", operation_id = "get_monitor",
    params(("id" = String, Path), ("monitor_id" = Uuid, Path)),
    responses((status = 200, description = "the monitor, its `state` on the balances now (`triggered` when its condition holds, else `armed`) and its last firing", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(
    State(state): State<AppState>,
    PathPair(account, monitor): PathPair,
) -> Result<Response> {
    get_of(state, Owner::Account(account), &monitor).await
}

#[utoipa::path(get, path = "/v1/account-sets/{id}/monitors/{monitor_id}", tag = "monitors", operation_id = "get_set_monitor",
    params(("id" = String, Path), ("monitor_id" = Uuid, Path)),
    responses((status = 200, description = "the monitor, its `state` on the set's balances now (`triggered` when its condition holds, else `armed`) and its last firing", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_on_set(
    State(state): State<AppState>,
    PathPair(set, monitor): PathPair,
) -> Result<Response> {
    get_of(state, Owner::Set(set), &monitor).await
}

async fn get_of(state: AppState, owner: Owner, monitor: &str) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("monitor {monitor} of {}", owner.label()));
    let id = Uuid::parse_str(monitor).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let (mut view, condition) = store::find(&mut conn, &owner, id)
        .await?
        .ok_or_else(not_found)?;
    let now = match &owner {
        Owner::Account(account) => {
            let db = &mut state.store.on(&mut conn);
            let (_, now, _) = accounts::read(db, account, None)
                .await?
                .ok_or_else(not_found)?;
            Balances {
                posted: now.posted.minor_units(),
                pending_in: now.pending_in.minor_units(),
                pending_out: now.pending_out.minor_units(),
            }
        }
        Owner::Set(set) => {
            // Saturated past the range, as the write path reads it: a state, not an amount.
            let (posted, pending_in, pending_out) =
                sets::store::balances_now(&mut conn, set).await?;
            Balances {
                posted,
                pending_in,
                pending_out,
            }
        }
    };
    view.state = Some(if condition.holds(&now) {
        MonitorState::Triggered
    } else {
        MonitorState::Armed
    });
    json(StatusCode::OK, &view)
}

#[utoipa::path(delete, path = "/v1/accounts/{id}/monitors/{monitor_id}", tag = "monitors", operation_id = "delete_monitor",
    params(("id" = String, Path), ("monitor_id" = Uuid, Path)),
    responses((status = 200, description = "deleted: changes that lock the wallet from now on no longer evaluate it (a repeat answers the same)", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete(
    State(state): State<AppState>,
    PathPair(account, monitor): PathPair,
) -> Result<Response> {
    delete_of(state, Owner::Account(account), &monitor).await
}

#[utoipa::path(delete, path = "/v1/account-sets/{id}/monitors/{monitor_id}", tag = "monitors", operation_id = "delete_set_monitor",
    params(("id" = String, Path), ("monitor_id" = Uuid, Path)),
    responses((status = 200, description = "deleted: changes of the set's wallets from now on no longer evaluate it (a repeat answers the same)", body = MonitorView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete_on_set(
    State(state): State<AppState>,
    PathPair(set, monitor): PathPair,
) -> Result<Response> {
    delete_of(state, Owner::Set(set), &monitor).await
}

async fn delete_of(state: AppState, owner: Owner, monitor: &str) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("monitor {monitor} of {}", owner.label()));
    let id = Uuid::parse_str(monitor).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let view = store::delete(&mut conn, &owner, id)
        .await?
        .ok_or_else(not_found)?;
    json(StatusCode::OK, &view)
}
