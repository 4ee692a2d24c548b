//! The ledger core: money, ids, journal rules and the SQL that writes and reads the ledger.
//! It knows nothing of HTTP, Redis or reports; every way in goes through these functions.

pub mod account_search;
pub mod accounts;
pub mod audit;
pub mod bounds;
pub mod caller;
pub mod checkpoints;
pub mod compare;
pub mod effective;
pub mod erasure;
pub mod events;
pub mod exchange;
pub mod group_commit;
pub mod holds;
pub mod ids;
pub mod journal;
pub mod limits;
pub mod money;
pub mod monitors;
pub mod owner;
pub mod posting;
pub mod replay_cache;
pub mod reversals;
pub mod seals;
pub mod search;
pub mod sets;
pub mod store;
pub mod transactions;
pub mod views;

use chrono::{DateTime, Utc};
use serde_json::Value;
use transactions::RefusalCode;
use uuid::Uuid;

/// Most creates one batch write takes: `POST /v1/transactions/batch`, one consumer batch.
pub const MAX_BATCH_ITEMS: u64 = 1_000;

/// What a create decided, as its row keeps it: the ledger's own terms, not an HTTP answer
/// (`http::responses` renders 201/200 for a creation and a 422 problem for a refusal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The resource was created; `body` is its view, serialized once, and every replay
    /// answers these bytes.
    Created { body: String },
    /// A business refusal, stored under the id: every retry gets the same refusal.
    Refused(Refusal),
}

/// A transaction refused for a business reason, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub transaction: Uuid,
    pub code: RefusalCode,
    pub detail: String,
    /// The answer's exact bytes, kept by refusals stored before the outcome was (migration
    /// 20261205140000): a replay sends them as they are. `None` for every later refusal,
    /// whose answer is rendered from the code and the detail.
    pub recorded_answer: Option<String>,
}

/// The answer to a naturally idempotent create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// First request with this id: what it decided, now stored.
    First(Outcome),
    /// The id was seen before with the same request: the stored outcome again.
    Replayed(Outcome),
    /// The id was seen before with a different request.
    Mismatch { differing_fields: Vec<String> },
}

impl Created {
    /// A request whose id is stored with `stored` (the first request's outcome): the same
    /// request replays it, a different one is a mismatch.
    pub fn replay_or_mismatch(stored_request: &Value, request: &Value, stored: Outcome) -> Created {
        let differing_fields = compare::differing_fields(stored_request, request);
        if differing_fields.is_empty() {
            Created::Replayed(stored)
        } else {
            Created::Mismatch { differing_fields }
        }
    }

    /// Whether the id holds a created resource after this answer (a refusal or a mismatch
    /// created nothing): what an atomic batch asks of each item.
    pub fn is_created(&self) -> bool {
        match self {
            Created::First(outcome) | Created::Replayed(outcome) => {
                matches!(outcome, Outcome::Created { .. })
            }
            Created::Mismatch { .. } => false,
        }
    }
}

/// Opens a read-only transaction that sees one snapshot for all its statements.
///
/// Why a REPEATABLE READ transaction rather than one statement per answer: the reads that make
/// up an answer (an account row, its posted balance from the chain head or from a checkpoint
/// plus the entries since, its open-hold totals, a page of its holds) are separate statements
/// that Citus routes to the account's shard as they are; folding them into one statement would
/// need one SQL text per account kind and per engine. A read-only REPEATABLE READ transaction
/// takes no lock and can never fail with a serialization error (it writes nothing), and
/// `now()` in it is its start, so "unexpired" means the same instant in every statement. Its
/// cost is the BEGIN and COMMIT round trips.
pub async fn begin_snapshot(
    conn: &mut sqlx::PgConnection,
) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, sqlx::Error> {
    let mut tx = sqlx::Connection::begin(conn).await?;
    sqlx::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// Now, truncated to PostgreSQL's microsecond precision, so that a time rendered into a
/// stored response equals the time stored in its row.
pub fn now_micros() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}
