//! `/v1/transactions`, `/v1/transfers`, `/v1/payments`: three shapes of one write path
//! (`ledger::posting`); the hold transitions `/post` and `/void`; `/reverse`; and the reads.

use super::AppState;
use super::accounts::PageQuery;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, OptionalJsonBody, PathParam};
use super::problem::Problem;
use super::requests::{CreateTransactionRequest, PaymentRequest, TransferRequest};
use super::responses::{REPLAYED_HEADER, created, json, json_response};
use super::search::SearchQuery;
use super::validate;
use crate::ledger::caller;
use crate::ledger::holds::{self, Action, Resolution};
use crate::ledger::money::Amount;
use crate::ledger::reversals;
use crate::ledger::transactions::{self, TransactionFilter, TransactionStatus};
use crate::ledger::views::{Page, TransactionView};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;
use validator::Validate;

/// The tag of this file's `transactions` cursors: issued and checked with the same value.
const TRANSACTIONS_LIST: &str = "transactions";

#[utoipa::path(post, path = "/v1/transactions", tag = "transactions", operation_id = "create_transaction", request_body = CreateTransactionRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted, or a hold (`status: pending`)", body = TransactionView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, description = "malformed_json, id_required", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, unknown_account, or a stored refusal: insufficient_funds, account_frozen, account_closed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateTransactionRequest>,
) -> Result<Response> {
    let new = req.into_new(&key, state.config.create_policy())?;
    created(state.writer.create(new).await?)
}

#[utoipa::path(post, path = "/v1/transfers", tag = "transactions", operation_id = "create_transfer", request_body = TransferRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted, or a hold (`status: pending`)", body = TransactionView),
        (status = 200, description = "replay (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, unknown_account, or a stored refusal", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn transfer(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<TransferRequest>,
) -> Result<Response> {
    let new = req.into_new(&key, state.config.create_policy())?;
    created(state.writer.create(new).await?)
}

#[utoipa::path(post, path = "/v1/payments", tag = "transactions", operation_id = "create_payment", request_body = PaymentRequest,
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
    let new = req.into_new(&key, state.config.create_policy())?;
    created(state.writer.create(new).await?)
}

#[derive(Debug, Default, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostRequest {
    /// Two-leg holds: capture this much (at most what is held); the rest is released.
    /// Without it the whole hold is captured.
    #[validate(custom(function = "validate::positive_amount"))]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    #[schema(minimum = 1, maximum = 9007199254740991_i64, examples(1500))]
    pub amount: Option<i64>,
}

#[derive(Debug, Default, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VoidRequest {}

#[utoipa::path(post, path = "/v1/transactions/{id}/post", tag = "holds", operation_id = "capture_hold", params(("id" = Uuid, Path, example = "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f04")),
    request_body(content = Option<PostRequest>, description = "optional; `{}` or no body captures the whole hold"),
    responses(
        (status = 200, description = "captured; a repeat of the same request replays it (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: voided, expired, rejected, or never a hold", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "idempotency_mismatch (captured before with another amount), validation_failed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    OptionalJsonBody(req): OptionalJsonBody<PostRequest>,
) -> Result<Response> {
    // `positive_amount` validated the range.
    resolve(&state, &id, Action::Post, req.amount.and_then(Amount::new)).await
}

#[utoipa::path(post, path = "/v1/transactions/{id}/void", tag = "holds", operation_id = "void_hold", params(("id" = Uuid, Path, example = "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f0c")),
    request_body(content = Option<VoidRequest>, description = "optional; `{}` or no body"),
    responses(
        (status = 200, description = "released; a repeat replays it (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: posted, expired, rejected, or never a hold", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn void(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    OptionalJsonBody(_void): OptionalJsonBody<VoidRequest>,
) -> Result<Response> {
    resolve(&state, &id, Action::Void, None).await
}

async fn resolve(
    state: &AppState,
    id: &str,
    action: Action,
    amount: Option<Amount>,
) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {id}"));
    let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
    match holds::resolve(&state.store, uuid, action, amount).await? {
        Resolution::Done { body } => Ok(json_response(StatusCode::OK, body)),
        // The service's own retry after this request's COMMIT answer was lost found that
        // COMMIT's work: it is answered as done, not as a client's replay.
        Resolution::Replayed { body } if own_commit_found() => {
            Ok(json_response(StatusCode::OK, body))
        }
        Resolution::Replayed { body } => {
            let mut response = json_response(StatusCode::OK, body);
            response
                .headers_mut()
                .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
            Ok(response)
        }
        Resolution::Mismatch { differing_fields } => {
            Err(ApiError::IdempotencyMismatch(differing_fields))
        }
        Resolution::NotFound => Err(not_found()),
        Resolution::InvalidTransition { current } => Err(ApiError::InvalidTransition {
            detail: format!(
                "transaction {id} is {current}: only a pending hold can be posted or voided"
            ),
            current: current.as_str().to_owned(),
        }),
        Resolution::Invalid(errors) => Err(ApiError::Validation(errors)),
    }
}

/// Whether a COMMIT of the current request was sent and its answer lost.
fn own_commit_found() -> bool {
    caller::current().is_some_and(|c| c.state().commit_unknown)
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"amount": 500})))]
pub struct ReverseRequest {
    /// The reversal's own id (its idempotency key). Without it, an `Idempotency-Key`
    /// header derives one.
    pub id: Option<Uuid>,
    /// Two-leg originals: give back this much (in total, all reversals of one original never
    /// exceed it). Without it, the whole original is reversed.
    #[validate(custom(function = "validate::positive_amount"))]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    pub amount: Option<i64>,
    #[validate(custom(function = "validate::metadata"))]
    #[schema(value_type = Option<crate::ledger::views::Metadata>)]
    pub metadata: Option<Map<String, Value>>,
}

#[utoipa::path(post, path = "/v1/transactions/{id}/reverse", tag = "transactions", operation_id = "reverse_transaction", params(("id" = Uuid, Path, example = "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f01"),
        ("Idempotency-Key" = Option<String>, Header, description = "derives the reversal's id when the body has none")),
    request_body = ReverseRequest,
    responses(
        (status = 201, description = "the reversing transaction (`kind: reversal`, `reverses`: the original)", body = TransactionView),
        (status = 200, description = "replay (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the original is not posted", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed, idempotency_mismatch, or a stored refusal: reversal_exceeds_original, insufficient_funds, account_frozen, account_closed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn reverse(
    State(state): State<AppState>,
    PathParam(original): PathParam,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<ReverseRequest>,
) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {original}"));
    let original_id = Uuid::parse_str(&original).map_err(|_| not_found())?;
    let id = key.resolve(req.id)?;
    let metadata = req.metadata.unwrap_or_default();
    let plan = {
        let mut conn = state.pool.acquire().await?;
        // `positive_amount` validated the range.
        let amount = req.amount.and_then(Amount::new);
        reversals::plan(&mut conn, original_id, id, amount, metadata).await?
    };
    match plan {
        reversals::Plan::Ready(new) => created(state.writer.create(*new).await?),
        reversals::Plan::NotFound => Err(not_found()),
        reversals::Plan::InvalidTransition { current } => Err(ApiError::InvalidTransition {
            detail: format!(
                "transaction {original} is {current}: only a posted transaction can be reversed"
            ),
            current: current.as_str().to_owned(),
        }),
        reversals::Plan::Invalid(errors) => Err(ApiError::Validation(errors)),
    }
}

#[utoipa::path(get, path = "/v1/transactions/{id}", tag = "transactions", operation_id = "get_transaction", params(("id" = Uuid, Path, example = "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f01")),
    responses((status = 200, description = "the transaction in any status, `rejected` included", body = TransactionView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(State(state): State<AppState>, PathParam(id): PathParam) -> Result<Response> {
    let not_found = || ApiError::NotFound(format!("transaction {id}"));
    let uuid = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let mut conn = state.pool.acquire().await?;
    let view = transactions::find(&mut state.store.on(&mut conn), uuid)
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
    fn status(self) -> TransactionStatus {
        match self {
            StatusFilter::Pending => TransactionStatus::Pending,
            StatusFilter::Posted => TransactionStatus::Posted,
            StatusFilter::Rejected => TransactionStatus::Rejected,
            StatusFilter::Voided => TransactionStatus::Voided,
            StatusFilter::Expired => TransactionStatus::Expired,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TransactionQuery {
    /// Only transactions with a leg on this account.
    pub account: Option<String>,
    pub status: Option<StatusFilter>,
    pub external_ref: Option<String>,
    /// Only the reversals of this transaction.
    pub reverses: Option<Uuid>,
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged: opaque, tagged with
    /// its list; any other value (a made-up one, another list's) is 400 `cursor`.
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/transactions", tag = "transactions", operation_id = "list_transactions",
    params(TransactionQuery, ("metadata" = Option<std::collections::HashMap<String, serde_json::Value>>, Query, style = DeepObject, explode,
        description = "`metadata[key]=value` (a top-level key) or `metadata[/a/b]=value` (a JSON pointer to a nested key): the value there is the string `value`, or the number or boolean `value` spells. Repeatable (all must hold), at most 10.")),
    responses((status = 200, description = "newest first", body = Page<TransactionView>)))]
pub async fn list(
    State(state): State<AppState>,
    query: SearchQuery<TransactionQuery>,
) -> Result<Response> {
    let q = query.params;
    let page = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    };
    let filter = TransactionFilter {
        account: q.account,
        status: q.status.map(StatusFilter::status),
        external_ref: q.external_ref,
        reverses: q.reverses,
        metadata: query.metadata,
        before_seq: page.cursor(TRANSACTIONS_LIST)?,
        limit: page.limit()?,
    };
    let mut conn = state.pool.acquire().await?;
    let (data, next) = transactions::list(&mut state.store.on(&mut conn), &filter).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|n| super::accounts::next_cursor(TRANSACTIONS_LIST, n)),
        },
    )
}
