//! `/v1/transactions`, `/v1/transfers`, `/v1/payments`: three shapes of one write path
//! (`ledger::transactions::create`), and the reads of transactions.

use super::AppState;
use super::accounts::PageQuery;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, PathParam, QueryParams};
use super::responses::{created, json};
use super::validate;
use crate::ledger::ids::AccountId;
use crate::ledger::journal::{Journal, Leg};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::transactions::{self, Kind, NewTransaction, TransactionFilter};
use crate::ledger::views::{Page, TransactionView};
use crate::problem::Problem;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;
use validator::Validate;

/// `posted` (default). `pending` (a hold) arrives with holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequestedStatus {
    #[default]
    Posted,
    Pending,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryRequest {
    #[validate(custom(function = "validate::account_id"))]
    pub account: String,
    /// Signed minor units: positive credits the account, negative debits it.
    #[validate(custom(function = "validate::signed_amount"))]
    pub amount: i64,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTransactionRequest {
    /// The idempotency key. Without it, an `Idempotency-Key` header derives one.
    pub id: Option<Uuid>,
    /// Two or more legs on distinct accounts of one currency, summing to zero.
    #[validate(nested)]
    pub entries: Vec<EntryRequest>,
    pub status: Option<RequestedStatus>,
    pub expires_at: Option<DateTime<Utc>>,
    #[validate(custom(function = "validate::external_ref"))]
    pub external_ref: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferRequest {
    pub id: Option<Uuid>,
    #[validate(custom(function = "validate::account_id"))]
    pub from: String,
    #[validate(custom(function = "validate::account_id"))]
    pub to: String,
    /// Positive minor units moved from `from` to `to`.
    #[validate(custom(function = "validate::positive_amount"))]
    pub amount: i64,
    pub status: Option<RequestedStatus>,
    pub expires_at: Option<DateTime<Utc>>,
    #[validate(custom(function = "validate::external_ref"))]
    pub external_ref: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentRequest {
    pub id: Option<Uuid>,
    /// The wallet credited.
    #[validate(custom(function = "validate::account_id"))]
    pub account: String,
    /// Positive minor units.
    #[validate(custom(function = "validate::positive_amount"))]
    pub amount: i64,
    /// Must be the wallet's currency.
    #[validate(custom(function = "validate::currency"))]
    pub currency: String,
    /// The payment provider; its clearing account `clearing:{provider}:{currency}` is debited.
    #[validate(custom(function = "validate::provider"))]
    pub provider: String,
    /// The provider's reference of the payment.
    #[validate(custom(function = "validate::external_ref"))]
    pub external_ref: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
}

fn account(id: &str, field: &str) -> Result<AccountId> {
    AccountId::parse(id)
        .ok_or_else(|| ApiError::validation(field, "account_id", "invalid account id"))
}

fn amount(value: i64, field: &str) -> Result<Amount> {
    Amount::new(value).ok_or_else(|| ApiError::validation(field, "range", "out of range"))
}

/// Holds arrive with the next issue; until then a pending request is refused up front rather
/// than silently posted, and `expires_at`, which only a hold has, is refused with it.
fn require_posted(
    status: Option<RequestedStatus>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<RequestedStatus> {
    if status == Some(RequestedStatus::Pending) {
        return Err(ApiError::validation(
            "/status",
            "unsupported",
            "holds (status pending) are not supported yet",
        ));
    }
    if expires_at.is_some() {
        return Err(ApiError::validation(
            "/expires_at",
            "not_applicable",
            "expires_at applies to holds only",
        ));
    }
    Ok(RequestedStatus::Posted)
}

fn journal(legs: Vec<Leg>) -> Result<Journal> {
    Journal::new(legs).map_err(ApiError::Validation)
}

#[utoipa::path(post, path = "/v1/transactions", tag = "transactions", request_body = CreateTransactionRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted", body = TransactionView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, description = "malformed_json, id_required", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, unknown_account, or a stored refusal: insufficient_funds, account_frozen, account_closed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateTransactionRequest>,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let status = require_posted(req.status, req.expires_at)?;
    let legs = req
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            Ok(Leg {
                account: account(&e.account, &format!("/entries/{i}/account"))?,
                amount: amount(e.amount, &format!("/entries/{i}/amount"))?,
                account_field: format!("/entries/{i}/account"),
                amount_field: format!("/entries/{i}/amount"),
                must_be_wallet: false,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = req.metadata.unwrap_or_default();
    let request = json!({
        "kind": Kind::Transaction.as_str(),
        "entries": req.entries.iter().map(|e| json!({"account": e.account, "amount": e.amount})).collect::<Vec<_>>(),
        "status": status,
        "expires_at": req.expires_at,
        "external_ref": req.external_ref,
        "metadata": metadata,
    });
    let new = NewTransaction {
        id,
        kind: Kind::Transaction,
        journal: journal(legs)?,
        currency: None,
        external_ref: req.external_ref,
        metadata,
        request,
        clearing_account: None,
    };
    created(transactions::create(&state.pool, &new).await?)
}

#[utoipa::path(post, path = "/v1/transfers", tag = "transactions", request_body = TransferRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted", body = TransactionView),
        (status = 200, description = "replay (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, unknown_account, or a stored refusal", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn transfer(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<TransferRequest>,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let status = require_posted(req.status, req.expires_at)?;
    if req.from == req.to {
        return Err(ApiError::validation(
            "/to",
            "same_account",
            "from and to must be different accounts",
        ));
    }
    let moved = amount(req.amount, "/amount")?;
    let legs = vec![
        Leg {
            account: account(&req.from, "/from")?,
            amount: moved.negate(),
            account_field: "/from".into(),
            amount_field: "/amount".into(),
            must_be_wallet: false,
        },
        Leg {
            account: account(&req.to, "/to")?,
            amount: moved,
            account_field: "/to".into(),
            amount_field: "/amount".into(),
            must_be_wallet: false,
        },
    ];
    let metadata = req.metadata.unwrap_or_default();
    let request = json!({
        "kind": Kind::Transfer.as_str(),
        "from": req.from,
        "to": req.to,
        "amount": req.amount,
        "status": status,
        "expires_at": req.expires_at,
        "external_ref": req.external_ref,
        "metadata": metadata,
    });
    let new = NewTransaction {
        id,
        kind: Kind::Transfer,
        journal: journal(legs)?,
        currency: None,
        external_ref: req.external_ref,
        metadata,
        request,
        clearing_account: None,
    };
    created(transactions::create(&state.pool, &new).await?)
}

#[utoipa::path(post, path = "/v1/payments", tag = "transactions", request_body = PaymentRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted: the wallet credited, the provider's clearing account debited", body = TransactionView),
        (status = 200, description = "replay (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, unknown_account, or a stored refusal", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn payment(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<PaymentRequest>,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let currency = Currency::parse(&req.currency)
        .ok_or_else(|| ApiError::validation("/currency", "currency", "unknown currency"))?;
    let credited = amount(req.amount, "/amount")?;
    let clearing = AccountId::clearing(&req.provider, currency.code());
    let wallet = account(&req.account, "/account")?;
    if wallet == clearing {
        return Err(ApiError::validation(
            "/account",
            "same_account",
            "a payment cannot credit its own clearing account",
        ));
    }
    let legs = vec![
        Leg {
            account: wallet,
            amount: credited,
            account_field: "/account".into(),
            amount_field: "/amount".into(),
            must_be_wallet: true,
        },
        Leg {
            account: clearing.clone(),
            amount: credited.negate(),
            account_field: "/provider".into(),
            amount_field: "/amount".into(),
            must_be_wallet: false,
        },
    ];
    let metadata = req.metadata.unwrap_or_default();
    let request = json!({
        "kind": Kind::Payment.as_str(),
        "account": req.account,
        "amount": req.amount,
        "currency": req.currency,
        "provider": req.provider,
        "external_ref": req.external_ref,
        "metadata": metadata,
    });
    let new = NewTransaction {
        id,
        kind: Kind::Payment,
        journal: journal(legs)?,
        currency: Some((currency, "/currency".into())),
        external_ref: req.external_ref,
        metadata,
        request,
        clearing_account: Some((clearing, currency)),
    };
    created(transactions::create(&state.pool, &new).await?)
}

#[utoipa::path(get, path = "/v1/transactions/{id}", tag = "transactions", params(("id" = Uuid, Path)),
    responses((status = 200, description = "the transaction in any status, `rejected` included", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(State(state): State<AppState>, PathParam(id): PathParam) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let view = transactions::find(&mut conn, uuid)
        .await?
        .ok_or_else(not_found)?;
    json(StatusCode::OK, &view)
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StatusFilter {
    Pending,
    Posted,
    Rejected,
    Voided,
    Expired,
}

impl StatusFilter {
    fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Pending => "pending",
            StatusFilter::Posted => "posted",
            StatusFilter::Rejected => "rejected",
            StatusFilter::Voided => "voided",
            StatusFilter::Expired => "expired",
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct TransactionQuery {
    /// Only transactions with a leg on this account.
    pub account: Option<String>,
    pub status: Option<StatusFilter>,
    pub external_ref: Option<String>,
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/transactions", tag = "transactions", params(TransactionQuery),
    responses((status = 200, description = "newest first", body = Page<TransactionView>),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn list(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<TransactionQuery>,
) -> Result<Response> {
    let page = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    };
    let filter = TransactionFilter {
        account: q.account,
        status: q.status.map(|s| s.as_str().to_owned()),
        external_ref: q.external_ref,
        before_seq: page.cursor()?,
        limit: page.limit()?,
    };
    let mut conn = state.pool.acquire().await?;
    let (data, next) = transactions::list(&mut conn, &filter).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|n| n.to_string()),
        },
    )
}
