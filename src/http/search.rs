//! Searching: the `metadata[...]` filters of the list endpoints, and `GET /v1/accounts`.

use super::AppState;
use super::accounts::{PageQuery, next_key_cursor};
use super::error::{ApiError, Result};
use super::extract::parse_query;
use super::problem::Problem;
use super::responses::json;
use crate::ledger::account_search::{self, AccountFilter};
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::ids::AccountId;
use crate::ledger::money::Currency;
use crate::ledger::search::{self, FilterError, MAX_METADATA_FILTERS, MetadataMatch};
use crate::ledger::views::{AccountView, Page};
use crate::problem::FieldError;
use axum::extract::{FromRequestParts, State};
use axum::http::{StatusCode, request::Parts};
use axum::response::Response;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::IntoParams;

/// Query parameters `T` of a list, plus its `metadata[key]=value` filters as one path
/// predicate (`None` without any). Every other parameter is held to `T`'s rules (unknown ones
/// are 400 `invalid_query`, `unknown_field`), so a misspelt filter is refused, never ignored.
pub struct SearchQuery<T> {
    pub params: T,
    pub metadata: Option<String>,
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for SearchQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let (rest, filters, mut errors) =
            split_metadata_filters(parts.uri.query().unwrap_or_default());
        match parse_query::<T>(&rest) {
            Ok(params) if errors.is_empty() => Ok(SearchQuery {
                params,
                metadata: search::metadata_predicate(&filters),
            }),
            Ok(_) => Err(ApiError::InvalidQuery(sorted(errors))),
            Err(ApiError::InvalidQuery(more)) => {
                errors.extend(more);
                Err(ApiError::InvalidQuery(sorted(errors)))
            }
            Err(other) => Err(other),
        }
    }
}

fn sorted(mut errors: Vec<FieldError>) -> Vec<FieldError> {
    errors.sort_by(|a, b| a.field.cmp(&b.field));
    errors
}

/// The query string without its `metadata[...]` parameters, those parameters as filters, and
/// what is wrong with them.
fn split_metadata_filters(query: &str) -> (String, Vec<MetadataMatch>, Vec<FieldError>) {
    let mut rest = form_urlencoded::Serializer::new(String::new());
    let (mut filters, mut errors) = (Vec::new(), Vec::new());
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match MetadataMatch::parse(&name, &value) {
            None => {
                rest.append_pair(&name, &value);
            }
            // U+0000 cannot reach PostgreSQL, in a path literal no more than in a row.
            Some(_) if name.contains('\0') || value.contains('\0') => errors.push(FieldError::new(
                pointer(&name),
                "invalid_character",
                "must not contain the character U+0000",
            )),
            Some(Ok(filter)) => filters.push(filter),
            Some(Err(e)) => errors.push(filter_error(&name, e)),
        }
    }
    if filters.len() > MAX_METADATA_FILTERS {
        errors.push(FieldError::new(
            "/metadata",
            "filter_limit",
            format!("at most {MAX_METADATA_FILTERS} metadata filters"),
        ));
    }
    (rest.finish(), filters, errors)
}

/// The field error of a refused `metadata[...]` parameter, at the parameter's name as a JSON
/// pointer (`metadata[/a/b]` is the field `/metadata[~1a~1b]`).
fn filter_error(name: &str, error: FilterError) -> FieldError {
    let field = pointer(name);
    match error {
        FilterError::Malformed(message) => FieldError::new(field, "metadata_filter", message),
        FilterError::TooLong => FieldError::new(
            field,
            "filter_limit",
            format!(
                "a metadata filter's name and value are at most {} characters, its path at most {} keys",
                search::MAX_FILTER_CHARS,
                search::MAX_PATH_KEYS
            ),
        ),
    }
}

fn pointer(name: &str) -> String {
    format!("/{}", crate::problem::pointer_token(name))
}

/// `type` of `GET /v1/accounts`.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountTypeFilter {
    Wallet,
    System,
}

/// `status` of `GET /v1/accounts`.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatusFilter {
    Active,
    Frozen,
    Closed,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AccountListQuery {
    #[serde(rename = "type")]
    #[param(rename = "type", inline)]
    pub kind: Option<AccountTypeFilter>,
    /// ISO 4217 code.
    #[param(value_type = Option<crate::ledger::views::CurrencyCode>)]
    pub currency: Option<String>,
    #[param(inline)]
    pub status: Option<AccountStatusFilter>,
    /// Accounts whose id starts with this (bytewise, case-sensitive): the start of an account
    /// id (`search::id_prefix_range`).
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub id_prefix: Option<String>,
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged; any other value is
    /// 422 `cursor`.
    pub cursor: Option<String>,
}

/// The list's tag in its cursors.
const ACCOUNTS_LIST: &str = "accounts";

#[utoipa::path(get, path = "/v1/accounts", tag = "accounts", operation_id = "list_accounts",
    params(AccountListQuery, ("metadata" = Option<std::collections::HashMap<String, serde_json::Value>>, Query, style = DeepObject, explode,
        description = "`metadata[key]=value` (a top-level key) or `metadata[/a/b]=value` (a JSON pointer to a nested key): the value there is the string `value`, or the number or boolean `value` spells. Repeatable (all must hold), at most 10.")),
    responses((status = 200, description = "in bytewise id order, each with its balances now", body = Page<AccountView>),
        (status = 409, description = "balance_out_of_range: a listed account's balance is outside ±(2^53 − 1)", body = Problem, content_type = "application/problem+json")))]
pub async fn list_accounts(
    State(state): State<AppState>,
    query: SearchQuery<AccountListQuery>,
) -> Result<Response> {
    let filter = account_filter(query)?;
    let mut conn = state.pool.acquire().await?;
    let page = account_search::list(&mut conn, &filter).await?;
    let data = page
        .accounts
        .into_iter()
        .map(|(account, balances)| account.view(balances, None))
        .collect();
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: page.next.map(|id| next_key_cursor(ACCOUNTS_LIST, &id)),
        },
    )
}

fn account_filter(query: SearchQuery<AccountListQuery>) -> Result<AccountFilter> {
    let q = query.params;
    let currency = q
        .currency
        .map(|c| {
            Currency::parse(&c)
                .ok_or_else(|| ApiError::query("/currency", "currency", "unknown currency"))
        })
        .transpose()?;
    let id_range = q
        .id_prefix
        .map(|p| {
            search::id_prefix_range(&p).ok_or_else(|| {
                ApiError::query(
                    "/id_prefix",
                    "account_id",
                    "not the start of an account id: [A-Za-z0-9][A-Za-z0-9._:@-]*, at most 128",
                )
            })
        })
        .transpose()?;
    let page = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    };
    Ok(AccountFilter {
        kind: q.kind.map(|k| match k {
            AccountTypeFilter::Wallet => AccountType::Wallet,
            AccountTypeFilter::System => AccountType::System,
        }),
        currency,
        status: q.status.map(|s| match s {
            AccountStatusFilter::Active => AccountStatus::Active,
            AccountStatusFilter::Frozen => AccountStatus::Frozen,
            AccountStatusFilter::Closed => AccountStatus::Closed,
        }),
        metadata: query.metadata,
        id_range,
        after_id: page.key_cursor(ACCOUNTS_LIST, |id| AccountId::parse(id).is_some())?,
        limit: page.limit()?,
    })
}
