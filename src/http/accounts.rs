//! `/v1/accounts`: create (idempotent on the caller's id), read with balances, metadata
//! versioning, entries, and the lifecycle transitions.

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, OptionalJsonBody, PathParam, QueryParams};
use super::problem::Problem;
use super::responses::{created, json};
use super::validate;
use crate::ledger::accounts::{
    self, Account, AccountType, Action, NewAccount, TimeAxis, Transition,
};
use crate::ledger::ids::AccountId;
use crate::ledger::money::Currency;
use crate::ledger::store::Db;
use crate::ledger::transactions;
use crate::ledger::views::{AccountView, BalancesView, EntryView, HoldsPage, Page};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use validator::Validate;

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountTypeRequest {
    Wallet,
    System,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "carol", "currency": "SAR", "type": "wallet", "metadata": {"customer": "c-7"}})))]
pub struct CreateAccountRequest {
    /// The caller's id, `[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}`. Without it, an
    /// `Idempotency-Key` header derives one (a UUID).
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub id: Option<String>,
    /// ISO 4217 code.
    #[validate(custom(function = "validate::currency"))]
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub currency: String,
    #[serde(rename = "type")]
    pub kind: AccountTypeRequest,
    /// Wallets only: how far below zero the wallet may go, in minor units (default 0).
    #[validate(custom(function = "validate::non_negative"))]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub overdraft_limit: Option<i64>,
    #[validate(custom(function = "validate::metadata"))]
    #[serde(default, deserialize_with = "validate::metadata_field::optional")]
    #[schema(value_type = Option<crate::ledger::views::Metadata>)]
    pub metadata: Option<Map<String, Value>>,
}

#[utoipa::path(post, path = "/v1/accounts", tag = "accounts", operation_id = "create_account", request_body = CreateAccountRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "created", body = AccountView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = AccountView),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateAccountRequest>,
) -> Result<Response> {
    let (id, currency) = id_and_currency(req.id, &key, &req.currency)?;
    let kind = match req.kind {
        AccountTypeRequest::Wallet => AccountType::Wallet,
        AccountTypeRequest::System => AccountType::System,
    };
    let overdraft_limit = req.overdraft_limit.unwrap_or(0);
    if kind == AccountType::System && overdraft_limit != 0 {
        return Err(ApiError::validation(
            "/overdraft_limit",
            "not_applicable",
            "system accounts are never balance-checked; an overdraft limit applies to wallets only",
        ));
    }
    let new = NewAccount {
        id,
        currency,
        kind,
        overdraft_limit,
        metadata: req.metadata.unwrap_or_default(),
    };
    if let Some(message) = new.reserved_id_refusal() {
        return Err(ApiError::validation("/id", "reserved_id", message));
    }
    let mut conn = state.pool.acquire().await?;
    created(accounts::create(&mut conn, &new).await?)
}

/// The id of a create (the body's, else one derived from the `Idempotency-Key`) and its
/// currency, as accounts and account sets take them.
pub(super) fn id_and_currency(
    id: Option<String>,
    key: &IdempotencyKey,
    currency: &str,
) -> Result<(AccountId, Currency)> {
    let id = match id {
        Some(id) => id,
        None => key.resolve(None)?.to_string(),
    };
    let id = AccountId::parse(&id)
        .ok_or_else(|| ApiError::validation("/id", "account_id", "invalid id"))?;
    let currency = Currency::parse(currency)
        .ok_or_else(|| ApiError::validation("/currency", "currency", "unknown currency"))?;
    Ok((id, currency))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AccountQuery {
    /// RFC 3339: the posted balance at that moment instead of now; a moment not final yet is
    /// answered at the finality horizon, which the response's `as_of` names.
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub as_of: Option<DateTime<Utc>>,
    /// Which clock `as_of` reads: `ledger` (default: when entries were written) or `effective`
    /// (when they count: a backdated transaction from its `effective_at` on). Only with `as_of`.
    #[param(inline)]
    pub time: Option<AsOfTime>,
}

impl AccountQuery {
    /// The moment asked for and the clock it is read on; `time` without `as_of` is 400.
    pub(super) fn asked(&self) -> Result<Option<(DateTime<Utc>, TimeAxis)>> {
        if self.time.is_some() && self.as_of.is_none() {
            return Err(ApiError::query(
                "/time",
                "not_applicable",
                "time chooses the clock of as_of: give as_of too",
            ));
        }
        let axis = match self.time {
            None | Some(AsOfTime::Ledger) => TimeAxis::Ledger,
            Some(AsOfTime::Effective) => TimeAxis::Effective,
        };
        Ok(self.as_of.map(|t| (t, axis)))
    }
}

/// `time` of an `as_of` read.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AsOfTime {
    Ledger,
    Effective,
}

#[utoipa::path(get, path = "/v1/accounts/{id}", tag = "accounts", operation_id = "get_account", params(("id" = String, Path), AccountQuery),
    responses((status = 200, description = "the account with its balances (posted only, at `as_of`)", body = AccountView), (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "balance_out_of_range: a balance of the account is outside ±(2^53 − 1), left by rows from before that range was enforced", body = Problem, content_type = "application/problem+json")))]
pub async fn get(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<AccountQuery>,
) -> Result<Response> {
    let asked = query.asked()?;
    let mut conn = state.pool.acquire().await?;
    let db = &mut state.store.on(&mut conn);
    let (account, balances, as_of) = accounts::read(db, &id, asked)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account {id}")))?;
    json(StatusCode::OK, &account.view(balances, as_of))
}

async fn find(conn: &mut PgConnection, id: &str) -> Result<Account> {
    accounts::find(conn, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account {id}")))
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAccountRequest {
    /// Applied only when newer than the stored version.
    #[validate(custom(function = "validate::non_negative"))]
    #[serde(deserialize_with = "validate::integer::required")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub version: i64,
    #[validate(custom(function = "validate::metadata"))]
    #[serde(deserialize_with = "validate::metadata_field::required")]
    #[schema(value_type = crate::ledger::views::Metadata)]
    pub metadata: Map<String, Value>,
}

#[utoipa::path(patch, path = "/v1/accounts/{id}", tag = "accounts", operation_id = "patch_account", params(("id" = String, Path)),
    request_body = PatchAccountRequest,
    responses((status = 200, description = "the account after the update, or unchanged when the version was not newer", body = AccountView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn patch(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    JsonBody(req): JsonBody<PatchAccountRequest>,
) -> Result<Response> {
    let mut conn = state.pool.acquire().await?;
    if !accounts::update_metadata(&mut conn, &id, req.version, &req.metadata).await? {
        return Err(ApiError::NotFound(format!("account {id}")));
    }
    current(&mut state.store.on(&mut conn), &id).await
}

async fn current(db: &mut Db<'_>, id: &str) -> Result<Response> {
    let (account, balances, _) = accounts::read(db, id, None)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account {id}")))?;
    json(StatusCode::OK, &account.view(balances, None))
}

async fn transition(state: AppState, id: String, action: Action) -> Result<Response> {
    let mut conn = state.pool.acquire().await?;
    match accounts::transition(&mut conn, &id, action).await? {
        Transition::Done => current(&mut state.store.on(&mut conn), &id).await,
        Transition::NotFound => Err(ApiError::NotFound(format!("account {id}"))),
        Transition::Invalid { current } => Err(ApiError::InvalidTransition {
            detail: format!(
                "cannot {} account {id}: it is {}",
                action.as_str(),
                current.as_str()
            ),
            current: current.as_str().to_owned(),
        }),
        Transition::NotEmpty { posted } => Err(ApiError::AccountNotEmpty(format!(
            "account {id} cannot close with a posted balance of {posted} minor units or open holds"
        ))),
    }
}

/// The body of freeze, unfreeze and close: nothing, or `{}`. Held to the rules of every other
/// body (JSON, no unknown field), so that a request meant for another endpoint is refused,
/// not silently applied as a bare transition.
#[derive(Debug, Default, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleRequest {}

#[utoipa::path(post, path = "/v1/accounts/{id}/freeze", tag = "accounts", operation_id = "freeze_account", params(("id" = String, Path)),
    request_body(content = Option<LifecycleRequest>, description = "optional: no body, or `{}`"),
    responses((status = 200, description = "frozen (or already frozen)", body = AccountView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the account is closed; balance_out_of_range: a balance of the account is outside ±(2^53 − 1)", body = Problem, content_type = "application/problem+json")))]
pub async fn freeze(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    OptionalJsonBody(LifecycleRequest {}): OptionalJsonBody<LifecycleRequest>,
) -> Result<Response> {
    transition(state, id, Action::Freeze).await
}

#[utoipa::path(post, path = "/v1/accounts/{id}/unfreeze", tag = "accounts", operation_id = "unfreeze_account", params(("id" = String, Path)),
    request_body(content = Option<LifecycleRequest>, description = "optional: no body, or `{}`"),
    responses((status = 200, description = "active (or already active)", body = AccountView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the account is closed; balance_out_of_range: a balance of the account is outside ±(2^53 − 1)", body = Problem, content_type = "application/problem+json")))]
pub async fn unfreeze(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    OptionalJsonBody(LifecycleRequest {}): OptionalJsonBody<LifecycleRequest>,
) -> Result<Response> {
    transition(state, id, Action::Unfreeze).await
}

#[utoipa::path(post, path = "/v1/accounts/{id}/close", tag = "accounts", operation_id = "close_account", params(("id" = String, Path)),
    request_body(content = Option<LifecycleRequest>, description = "optional: no body, or `{}`"),
    responses((status = 200, description = "closed (or already closed)", body = AccountView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "account_not_empty; balance_out_of_range: a balance of the account is outside ±(2^53 − 1)", body = Problem, content_type = "application/problem+json")))]
pub async fn close(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    OptionalJsonBody(LifecycleRequest {}): OptionalJsonBody<LifecycleRequest>,
) -> Result<Response> {
    transition(state, id, Action::Close).await
}

/// Page sizes of every list (`?limit=`), per the contract.
pub const DEFAULT_PAGE_SIZE: i64 = 50;
pub const MAX_PAGE_SIZE: i64 = 500;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged: opaque, tagged with
    /// its list; any other value (a made-up one, another list's) is 400 `cursor`.
    pub cursor: Option<String>,
}

impl PageQuery {
    pub fn limit(&self) -> Result<i64> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&limit) {
            return Err(ApiError::query(
                "/limit",
                "range",
                format!("must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        Ok(limit)
    }

    /// The position a cursor of `list` continues after (see [`next_cursor`]); anything else,
    /// a made-up number or another list's cursor, is 400 `cursor`.
    pub fn cursor(&self, list: &str) -> Result<Option<i64>> {
        self.decoded(|c| decode_cursor(list, c))
    }

    /// The key a cursor of a list ordered by a text key continues after (see
    /// [`next_key_cursor`]), when `is_key` accepts it; anything else is 400 `cursor`.
    pub fn key_cursor(&self, list: &str, is_key: fn(&str) -> bool) -> Result<Option<String>> {
        self.decoded(|c| decode_key_cursor(list, c).filter(|key| is_key(key)))
    }

    fn decoded<T>(&self, decode: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
        self.cursor
            .as_deref()
            .map(|c| {
                decode(c).ok_or_else(|| {
                    ApiError::query(
                        "/cursor",
                        "cursor",
                        "not a cursor this API returned for this list",
                    )
                })
            })
            .transpose()
    }
}

/// The cursor after row `position` of `list` (`transactions`, `entries/{account}`, ...):
/// base64url, unpadded, of `{position}:{list}`. Tagged, not signed: it only ever names a row
/// boundary of its own list, which paging would reach anyway, so there is nothing to protect
/// but the contract that a value the API did not issue (or issued for another list) is
/// refused. The tag and the canonical form (the value must encode back to itself: no leading
/// zeros, no sign, no padding) make a made-up number or a foreign cursor fail.
pub fn next_cursor(list: &str, position: i64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{position}:{list}"))
}

/// The cursor after the row whose key is `key` in a list ordered by a text key (`accounts`):
/// base64url, unpadded, of `{list}:{key}`, tagged and canonical as [`next_cursor`] is.
pub fn next_key_cursor(list: &str, key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{list}:{key}"))
}

fn decode_key_cursor(list: &str, cursor: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (tag, key) = text.split_once(':')?;
    (tag == list && !key.is_empty() && next_key_cursor(list, key) == cursor).then(|| key.to_owned())
}

fn decode_cursor(list: &str, cursor: &str) -> Option<i64> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (position, tag) = text.split_once(':')?;
    // Positions are row numbers, 1 and up.
    let position = position.parse::<i64>().ok().filter(|p| *p >= 1)?;
    (tag == list && next_cursor(list, position) == cursor).then_some(position)
}

#[utoipa::path(get, path = "/v1/accounts/{id}/entries", tag = "accounts", operation_id = "list_account_entries", params(("id" = String, Path), PageQuery),
    responses((status = 200, description = "newest first, each with its running balance (wallets)", body = Page<EntryView>),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn entries(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<PageQuery>,
) -> Result<Response> {
    let list = format!("entries/{id}");
    let (limit, cursor) = (query.limit()?, query.cursor(&list)?);
    let mut conn = state.pool.acquire().await?;
    let account = find(&mut conn, &id).await?;
    let (data, next) =
        transactions::entries(&mut conn, &account.id, account.currency(), cursor, limit).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|n| next_cursor(&list, n)),
        },
    )
}

#[utoipa::path(get, path = "/v1/accounts/{id}/holds", tag = "holds", operation_id = "list_account_holds", params(("id" = String, Path), PageQuery),
    responses((status = 200, description = "open holds, newest first, and the balances, read in one snapshot", body = HoldsPage),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "balance_out_of_range: a balance of the account is outside ±(2^53 − 1), left by rows from before that range was enforced", body = Problem, content_type = "application/problem+json")))]
pub async fn holds(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<PageQuery>,
) -> Result<Response> {
    let list = format!("holds/{id}");
    let (limit, cursor) = (query.limit()?, query.cursor(&list)?);
    let mut conn = state.pool.acquire().await?;
    let read = accounts::holds_page(&mut conn, &id, cursor, limit)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("account {id}")))?;
    let page = HoldsPage {
        balances: BalancesView::new(read.balances, read.account.currency()),
        data: read.holds,
        next_cursor: read.next.map(|n| next_cursor(&list, n)),
    };
    json(StatusCode::OK, &page)
}
