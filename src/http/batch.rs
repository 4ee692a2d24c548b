//! `POST /v1/transactions/batch`: up to `MAX_BATCH_ITEMS` creates in one database commit.
//! `atomic`: all or nothing (`batch_failed` names the first item that would not be created).
//! `independent`: every item answered exactly as its single `POST /v1/transactions` would be.

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{DEFAULT_OWNER, IdempotencyKey, JsonBody, parse_valid};
use super::problem::Problem;
use super::requests::CreateTransactionRequest;
use super::responses::{json, status_and_body};
use crate::ledger::posting::{self, BatchResult, ItemOutcome, Mode};
use crate::ledger::transactions::NewTransaction;
use crate::ledger::{Created, MAX_BATCH_ITEMS};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use validator::Validate;

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BatchMode {
    Atomic,
    Independent,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"mode": "atomic", "items": [{"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f0b", "entries": [{"account": "alice", "amount": -100}, {"account": "bob", "amount": 100}]}]})))]
pub struct BatchRequest {
    pub mode: BatchMode,
    /// 1 to 1,000 bodies of `POST /v1/transactions`, each with its own `id`.
    #[validate(length(min = 1, max = MAX_BATCH_ITEMS, message = "a batch has 1 to 1000 items"))]
    #[schema(value_type = Vec<CreateTransactionRequest>, min_items = 1, max_items = 1000)]
    pub items: Vec<Box<RawValue>>,
}

/// What one item's single call would have answered.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemResult {
    pub status: u16,
    /// `true` when the answer is a stored one replayed (`Idempotent-Replayed` of a single call).
    pub replayed: bool,
    /// The single call's body as it was stored, byte for byte (not parsed again): the
    /// transaction for a 2xx, the problem for a 4xx.
    #[schema(schema_with = item_body)]
    pub body: Box<RawValue>,
}

/// `TransactionView` or `Problem`, as the item's `status` says.
fn item_body() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::{OneOfBuilder, Ref};
    OneOfBuilder::new()
        .item(Ref::from_schema_name("TransactionView"))
        .item(Ref::from_schema_name("Problem"))
        .into()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResponse {
    pub results: Vec<ItemResult>,
}

#[utoipa::path(post, path = "/v1/transactions/batch", tag = "transactions", operation_id = "create_batch", request_body = BatchRequest,
    responses(
        (status = 200, description = "every item's answer, in request order; a retried batch replays", body = BatchResponse),
        (status = 422, description = "validation_failed (the batch itself), batch_failed (atomic: `index` and `problem` of the first failing item; nothing was stored)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn batch(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<BatchRequest>,
) -> Result<Response> {
    let mode = match req.mode {
        BatchMode::Atomic => Mode::Atomic,
        BatchMode::Independent => Mode::Independent,
    };
    // Items are parsed one by one, so that in independent mode a bad item answers like its
    // single call (400/422) and the others still go through.
    // Batch items carry their own ids: no header derives one for them.
    let no_key = IdempotencyKey {
        key: None,
        owner: DEFAULT_OWNER.to_owned(),
    };
    let parsed: Vec<Result<NewTransaction>> = req
        .items
        .into_iter()
        .map(|item| {
            parse_valid::<CreateTransactionRequest>(item.get().as_bytes())?
                .into_new(&no_key, state.config.create_policy())
        })
        .collect();
    if mode == Mode::Atomic
        && let Some(bad) = parsed.iter().position(|p| p.is_err())
    {
        // The first failing item in request order may come before the first unparsable one.
        let before: Vec<NewTransaction> = parsed[..bad]
            .iter()
            .filter_map(|p| p.as_ref().ok().cloned())
            .collect();
        if let Some((index, outcome)) = posting::first_failure(&state.store, &before).await? {
            let (_, _, problem) = item_answer(outcome);
            return Err(ApiError::BatchFailed {
                index,
                problem: tree(&problem),
            });
        }
        let problem = parsed[bad]
            .as_ref()
            .err()
            .map(|e| problem_value(e.problem()))
            .unwrap_or(Value::Null);
        return Err(ApiError::BatchFailed {
            index: bad,
            problem,
        });
    }
    // The valid items move to the write path (a 1,000-item batch is megabytes of requests:
    // not copied); each invalid one keeps its problem, in its place.
    let mut valid: Vec<NewTransaction> = Vec::with_capacity(parsed.len());
    let problems: Vec<Option<Problem>> = parsed
        .into_iter()
        .map(|p| match p {
            Ok(new) => {
                valid.push(new);
                None
            }
            Err(e) => Some(e.problem()),
        })
        .collect();
    let outcomes = match posting::create_many(&state.store, &valid, mode).await? {
        BatchResult::Done(outcomes) => outcomes,
        BatchResult::Failed { index, outcome } => {
            let (_, _, body) = item_answer(outcome);
            return Err(ApiError::BatchFailed {
                index,
                problem: tree(&body),
            });
        }
    };
    // One outcome per valid item, in order; invalid items answer their own problem.
    let mut outcomes = outcomes.into_iter();
    let mut results = Vec::with_capacity(problems.len());
    for problem in problems {
        let (status, replayed, body) = match problem {
            None => {
                let outcome = outcomes
                    .next()
                    .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("batch outcome missing")))?;
                item_answer(outcome)
            }
            Some(problem) => (problem.status, false, problem_raw(&problem)),
        };
        results.push(ItemResult {
            status,
            replayed,
            body,
        });
    }
    json(StatusCode::OK, &BatchResponse { results })
}

fn problem_value(problem: Problem) -> Value {
    serde_json::to_value(problem).unwrap_or(Value::Null)
}

/// The failing item's answer as a tree, nested in the atomic batch's own problem.
fn tree(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

fn problem_raw(problem: &Problem) -> Box<RawValue> {
    serde_json::value::to_raw_value(problem).unwrap_or_else(|_| null())
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// An item's status, whether it is a replay, and its body, as its single call would answer.
fn item_answer(outcome: ItemOutcome) -> (u16, bool, Box<RawValue>) {
    // A stored body is the JSON its single call answered: it is passed on as it is, checked
    // but not parsed into a tree and rendered again.
    let raw = |body: String| RawValue::from_string(body).unwrap_or_else(|_| null());
    match outcome {
        Ok(Created::First(outcome)) => {
            let (status, body) = status_and_body(outcome, StatusCode::CREATED);
            (status.as_u16(), false, raw(body))
        }
        Ok(Created::Replayed(outcome)) => {
            let (status, body) = status_and_body(outcome, StatusCode::OK);
            (status.as_u16(), true, raw(body))
        }
        Ok(Created::Mismatch { differing_fields }) => {
            let problem = ApiError::IdempotencyMismatch(differing_fields).problem();
            (problem.status, false, problem_raw(&problem))
        }
        Err(e) => {
            let problem = ApiError::from(e).problem();
            (problem.status, false, problem_raw(&problem))
        }
    }
}
