//! `/v1/accounts/{id}/limits`: velocity limits of a wallet (`ledger::limits`), added once per
//! id, listed, and deleted.

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, PathPair, PathParam};
use super::problem::Problem;
use super::responses::{created, json};
use super::validate;
use crate::ledger::limits::store::{self, AddError, LimitView, NewLimit};
use crate::ledger::limits::{
    Bound, Direction, MAX_WINDOW_SECONDS, MIN_WINDOW_SECONDS, Owner, VelocityLimit,
};
use crate::ledger::money::Amount;
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
pub struct CreateLimitRequest {
    /// The caller's id; without it an `Idempotency-Key` header derives one.
    pub id: Option<Uuid>,
    /// What counts: `debit` (money leaving), `credit` (arriving), or `both` (gross).
    pub direction: Direction,
    /// The rolling window in seconds: 60 (a minute) to 2,678,400 (31 days).
    #[serde(deserialize_with = "validate::integer::required")]
    #[schema(minimum = 60, maximum = 2678400)]
    pub window_seconds: i64,
    /// At most this much moved per window, in minor units of the account's currency. Exactly
    /// one of `amount` and `count`.
    #[validate(custom(function = "validate::positive_amount"))]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    pub amount: Option<i64>,
    /// At most this many movements per window. Exactly one of `amount` and `count`.
    #[validate(custom(function = "validate::positive_amount"))]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    pub count: Option<i64>,
}

impl CreateLimitRequest {
    /// The limit it asks for; what is wrong with it otherwise.
    fn limit(&self, id: Uuid) -> Result<VelocityLimit> {
        let bound = match (self.amount, self.count) {
            (Some(amount), None) => Amount::new(amount).map(Bound::Amount),
            (None, Some(count)) => Some(Bound::Count(count)),
            _ => None,
        }
        .ok_or_else(|| {
            ApiError::validation(
                "/amount",
                "required",
                "give exactly one of amount and count",
            )
        })?;
        let window_seconds = i32::try_from(self.window_seconds)
            .ok()
            .filter(|w| (MIN_WINDOW_SECONDS..=MAX_WINDOW_SECONDS).contains(w))
            .ok_or_else(|| {
                let message = format!(
                    "must be between {MIN_WINDOW_SECONDS} and {MAX_WINDOW_SECONDS} seconds"
                );
                ApiError::validation("/window_seconds", "range", message)
            })?;
        Ok(VelocityLimit {
            id,
            direction: self.direction,
            bound,
            window_seconds,
        })
    }
}

/// The limits of an account that count.
#[derive(Debug, Serialize, ToSchema)]
pub struct LimitList {
    pub data: Vec<LimitView>,
}

#[utoipa::path(post, path = "/v1/accounts/{id}/limits", tag = "limits", operation_id = "create_limit", request_body = CreateLimitRequest,
    params(("id" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "added: every posting that locks the wallet from now on is held to it", body = LimitView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = LimitView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "too_many_limits: the account already has 20", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`required`: not exactly one of amount and count; `range`), idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    PathParam(account): PathParam,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateLimitRequest>,
) -> Result<Response> {
    add(state, Owner::Account(account), key, req).await
}

#[utoipa::path(post, path = "/v1/account-sets/{id}/limits", tag = "limits", operation_id = "create_set_limit", request_body = CreateLimitRequest,
    params(("id" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "added: every posting of a wallet counted in the set from now on is held to it, against the movements of all of them", body = LimitView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = LimitView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "too_many_limits: the set already has 20", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`required`: not exactly one of amount and count; `range`), idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create_on_set(
    State(state): State<AppState>,
    PathParam(set): PathParam,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateLimitRequest>,
) -> Result<Response> {
    add(state, Owner::Set(set), key, req).await
}

async fn add(
    state: AppState,
    owner: Owner,
    key: IdempotencyKey,
    req: CreateLimitRequest,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let limit = req.limit(id)?;
    let new = NewLimit {
        id,
        request: canonical_request(&owner, &limit),
        owner,
        limit,
    };
    let mut conn = state.pool.acquire().await?;
    match store::add(&mut conn, &new).await {
        Ok(outcome) => created(outcome),
        Err(AddError::UnknownOwner) => Err(ApiError::NotFound(new.owner.label())),
        Err(AddError::TooMany) => Err(ApiError::TooManyLimits(
            crate::ledger::limits::MAX_LIMITS_PER_ACCOUNT,
        )),
        Err(AddError::Store(e)) => Err(e.into()),
    }
}

/// What a retry is compared with: the limit as understood, so that `"amount": 5` and an
/// Idempotency-Key retry with the same values match, and another owner's path does not.
fn canonical_request(owner: &Owner, limit: &VelocityLimit) -> serde_json::Value {
    let (amount, count) = match limit.bound {
        Bound::Amount(a) => (Some(a.minor_units()), None),
        Bound::Count(c) => (None, Some(c)),
    };
    let mut request = json!({
        "direction": limit.direction,
        "window_seconds": limit.window_seconds,
        "amount": amount,
        "count": count,
    });
    // A wallet's limit keeps the form it was first stored in (its retries compare with it).
    let (field, id) = owner.request_key();
    request[field] = json!(id);
    request
}

#[utoipa::path(get, path = "/v1/accounts/{id}/limits", tag = "limits", operation_id = "list_limits", params(("id" = String, Path)),
    responses((status = 200, description = "the account's limits that count, oldest first (at most 20)", body = LimitList),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn list(
    State(state): State<AppState>,
    PathParam(account): PathParam,
) -> Result<Response> {
    list_of(state, Owner::Account(account)).await
}

#[utoipa::path(get, path = "/v1/account-sets/{id}/limits", tag = "limits", operation_id = "list_set_limits", params(("id" = String, Path)),
    responses((status = 200, description = "the set's limits that count, oldest first (at most 20)", body = LimitList),
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
    json(StatusCode::OK, &LimitList { data })
}

#[utoipa::path(delete, path = "/v1/accounts/{id}/limits/{limit_id}", tag = "limits", operation_id = "delete_limit",
    params(("id" = String, Path), ("limit_id" = Uuid, Path)),
    responses((status = 200, description = "deleted: postings that lock the wallet from now on no longer count it (a repeat answers the same)", body = LimitView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete(
    State(state): State<AppState>,
    PathPair(account, limit): PathPair,
) -> Result<Response> {
    delete_of(state, Owner::Account(account), &limit).await
}

#[utoipa::path(delete, path = "/v1/account-sets/{id}/limits/{limit_id}", tag = "limits", operation_id = "delete_set_limit",
    params(("id" = String, Path), ("limit_id" = Uuid, Path)),
    responses((status = 200, description = "deleted: postings of the set's wallets from now on no longer count it (a repeat answers the same)", body = LimitView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete_on_set(
    State(state): State<AppState>,
    PathPair(set, limit): PathPair,
) -> Result<Response> {
    delete_of(state, Owner::Set(set), &limit).await
}

async fn delete_of(state: AppState, owner: Owner, limit: &str) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("limit {limit} of {}", owner.label()));
    let id = Uuid::parse_str(limit).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let view = store::delete(&mut conn, &owner, id)
        .await?
        .ok_or_else(not_found)?;
    json(StatusCode::OK, &view)
}
