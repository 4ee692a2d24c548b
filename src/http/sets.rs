//! `/v1/account-sets`: named groups of wallets and of other sets (`ledger::sets`), created once
//! per id, their members added and removed idempotently, and their balances read now or at a
//! past moment.

use super::AppState;
use super::accounts::{AccountQuery, PageQuery, id_and_currency, next_key_cursor};
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, PathPair, PathParam, QueryParams};
use super::problem::Problem;
use super::responses::{created, json};
use super::validate;
use crate::ledger::accounts::final_instant;
use crate::ledger::sets::Member;
use crate::ledger::sets::membership::{self, MembershipError};
use crate::ledger::sets::store::{self, MemberKind, MemberView, NewSet, SetView};
use crate::ledger::store::reads;
use crate::ledger::views::Page;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json as json_value};
use utoipa::{IntoParams, ToSchema};
use validator::Validate;

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "team-eu", "currency": "SAR", "metadata": {"region": "eu"}})))]
pub struct CreateSetRequest {
    /// The caller's id, `[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}` (sets have their own ids: a set
    /// may share one with an account). Without it, an `Idempotency-Key` header derives one.
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub id: Option<String>,
    /// ISO 4217 code: every member's currency.
    #[validate(custom(function = "validate::currency"))]
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub currency: String,
    #[validate(custom(function = "validate::metadata"))]
    #[serde(default, deserialize_with = "validate::metadata_field::optional")]
    #[schema(value_type = Option<crate::ledger::views::Metadata>)]
    pub metadata: Option<Map<String, Value>>,
}

#[utoipa::path(post, path = "/v1/account-sets", tag = "account sets", operation_id = "create_account_set", request_body = CreateSetRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "created, with no members", body = SetView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = SetView),
        (status = 422, description = "validation_failed, idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateSetRequest>,
) -> Result<Response> {
    let (id, currency) = id_and_currency(req.id, &key, &req.currency)?;
    let metadata = req.metadata.unwrap_or_default();
    let new = NewSet {
        request: json_value!({"currency": currency.code(), "metadata": metadata}),
        id: id.to_string(),
        currency,
        metadata,
    };
    let mut conn = state.pool.acquire().await?;
    created(store::create(&mut conn, &new).await?)
}

#[utoipa::path(get, path = "/v1/account-sets/{id}", tag = "account sets", operation_id = "get_account_set", params(("id" = String, Path, example = "team-eu"), AccountQuery),
    responses((status = 200, description = "the set with its balances: sums over the wallets that count in it (posted only, at `as_of`)", body = SetView),
        (status = 400, description = "invalid_query", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "balance_out_of_range: the members' sum is outside ±(2^53 − 1)", body = Problem, content_type = "application/problem+json")))]
pub async fn get(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<AccountQuery>,
) -> Result<Response> {
    let asked = query.asked()?;
    let mut conn = state.pool.acquire().await?;
    // The horizon is read before the snapshot is taken, as for an account.
    let as_of = match asked {
        Some((at, axis)) => {
            let horizon = reads::final_horizon(&mut state.store.on(&mut conn)).await?;
            Some((final_instant(at, horizon), axis))
        }
        None => None,
    };
    let (set, balances) = store::read(&mut conn, &id, as_of)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account set {id}")))?;
    json(StatusCode::OK, &set.view(balances, as_of.map(|(at, _)| at)))
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"type": "account", "id": "carol"})))]
pub struct AddMemberRequest {
    /// `account` (a wallet in the set's currency) or `set` (another set in it; never the set
    /// itself or one that contains it).
    #[serde(rename = "type")]
    pub kind: MemberKind,
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub id: String,
}

#[utoipa::path(post, path = "/v1/account-sets/{id}/members", tag = "account sets", operation_id = "add_account_set_member", request_body = AddMemberRequest,
    params(("id" = String, Path, example = "team-eu")),
    responses(
        (status = 201, description = "added: the member's wallets count in the set (and in every set above it) from now on, with their balances of now", body = MemberView),
        (status = 200, description = "already a member: nothing changed", body = MemberView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "set_cycle: the member is the set or contains it", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (`/id`: `unknown_member`, `not_a_wallet`, `currency_mismatch`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn add_member(
    State(state): State<AppState>,
    PathParam(set): PathParam,
    JsonBody(req): JsonBody<AddMemberRequest>,
) -> Result<Response> {
    let member = match req.kind {
        MemberKind::Account => Member::Account(req.id),
        MemberKind::Set => Member::Set(req.id),
    };
    let mut conn = state.pool.acquire().await?;
    let (view, added) = membership::add(&mut state.store.on(&mut conn), &set, &member)
        .await
        .map_err(|e| membership_error(e, &set))?;
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json(status, &view)
}

#[utoipa::path(delete, path = "/v1/account-sets/{id}/members/{member}", tag = "account sets", operation_id = "remove_account_set_member",
    params(("id" = String, Path, example = "team-eu"), ("member" = String, Path, description = "`account:<id>` or `set:<id>`", pattern = "^(account|set):[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$", example = "account:carol")),
    responses(
        (status = 204, description = "not a member (any more): its wallets no longer count in the set, from now on; a repeat answers the same"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn remove_member(
    State(state): State<AppState>,
    PathPair(set, reference): PathPair,
) -> Result<Response> {
    let member = Member::parse(&reference).ok_or_else(|| {
        ApiError::NotFound(format!(
            "member {reference} (name it account:<id> or set:<id>)"
        ))
    })?;
    let mut conn = state.pool.acquire().await?;
    membership::remove(&mut state.store.on(&mut conn), &set, &member)
        .await
        .map_err(|e| membership_error(e, &set))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The list's tag in its cursors.
const MEMBERS_LIST: &str = "set-members";

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct MembersQuery {
    /// 1-500, default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged; any other value is
    /// 400 `cursor`.
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/account-sets/{id}/members", tag = "account sets", operation_id = "list_account_set_members",
    params(("id" = String, Path, example = "team-eu"), MembersQuery),
    responses((status = 200, description = "the set's direct members (wallets and sets) in reference order", body = Page<MemberView>),
        (status = 400, description = "invalid_query", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn list_members(
    State(state): State<AppState>,
    PathParam(set): PathParam,
    QueryParams(query): QueryParams<MembersQuery>,
) -> Result<Response> {
    let page = PageQuery {
        limit: query.limit,
        cursor: query.cursor,
    };
    let after = page.key_cursor(MEMBERS_LIST, |key| Member::parse(key).is_some())?;
    let limit = page.limit()?;
    let mut conn = state.pool.acquire().await?;
    let (data, next) = store::members_page(&mut conn, &set, after.as_deref(), limit)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account set {set}")))?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|key| next_key_cursor(MEMBERS_LIST, &key)),
        },
    )
}

fn membership_error(error: MembershipError, set: &str) -> ApiError {
    let member = |code: &str, message: String| ApiError::validation("/id", code, message);
    match error {
        MembershipError::UnknownSet => ApiError::NotFound(format!("account set {set}")),
        MembershipError::UnknownMember => {
            member("unknown_member", "no such account or set".to_owned())
        }
        MembershipError::NotAWallet => member(
            "not_a_wallet",
            "only wallets (and sets of them) are members: a system account is not".to_owned(),
        ),
        MembershipError::CurrencyMismatch {
            set,
            member: theirs,
        } => member(
            "currency_mismatch",
            format!("the set is in {set}, the member in {theirs}"),
        ),
        MembershipError::Cycle => ApiError::SetCycle(set.to_owned()),
        MembershipError::Store(e) => e.into(),
    }
}
