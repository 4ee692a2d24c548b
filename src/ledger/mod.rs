//! The ledger core: money, ids, journal rules and the SQL that writes and reads the ledger.
//! It knows nothing of HTTP, Redis or reports; every way in goes through these functions.

pub mod accounts;
pub mod audit;
pub mod bounds;
pub mod caller;
pub mod checkpoints;
pub mod compare;
pub mod events;
pub mod group_commit;
pub mod holds;
pub mod ids;
pub mod journal;
pub mod money;
pub mod posting;
pub mod replay_cache;
pub mod reversals;
pub mod store;
pub mod transactions;
pub mod views;

use chrono::{DateTime, Utc};
/// Most creates one batch write takes: `POST /v1/transactions/batch`, one consumer batch.
pub const MAX_BATCH_ITEMS: u64 = 1_000;
use serde_json::Value;

/// The answer to a naturally idempotent create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// First request with this id: 201 with `body`.
    New { body: String },
    /// First request with this id, refused for a business reason and stored: 422 with `body`.
    Refused { body: String },
    /// The id was seen before with the same request: the stored answer again.
    Replayed { status: u16, body: String },
    /// The id was seen before with a different request.
    Mismatch { differing_fields: Vec<String> },
}

impl Created {
    /// `creation_status` is what the first request was answered (201, or a stored 422): a
    /// replay of a 201 is a 200, a replay of a refusal is the same refusal.
    pub fn replay_or_mismatch(
        stored_request: &Value,
        request: &Value,
        creation_status: u16,
        body: String,
    ) -> Created {
        let differing_fields = compare::differing_fields(stored_request, request);
        if differing_fields.is_empty() {
            let status = if creation_status == 201 {
                200
            } else {
                creation_status
            };
            Created::Replayed { status, body }
        } else {
            Created::Mismatch { differing_fields }
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
