//! A transaction's outbox events with their webhook deliveries, as the API and the console show
//! them (`GET /v1/transactions/{id}/events`): what the ledger told of the transaction, whether
//! the dispatcher has handled each event, and where each delivery stands.
//!
//! Read through `outbox_events_by_transaction` and `webhook_deliveries`' unique
//! `(event_id, subscription_id)` index, never by scanning the outbox. On Citus the outbox,
//! its deliveries and the subscriptions are plain tables on the coordinator and `transactions`
//! is distributed by id, so every statement here reads one side only and is the same on both
//! engines: no pair of statements in `ledger::store` is needed.

use super::deliveries::DeliveryView;
use crate::db::StoreError;
use crate::ledger::events::EventType;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

/// The most deliveries one event lists (the first made); `deliveries_total` counts them all and
/// `GET /v1/deliveries?event_id=` pages through the rest. An event has one delivery per
/// subscription that wanted it, so a page of events stays bounded however many there are.
pub const DELIVERIES_PER_EVENT: i64 = 20;

/// One outbox event of a transaction, with its deliveries.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TransactionEventView {
    pub id: Uuid,
    #[serde(rename = "type")]
    #[schema(value_type = EventTypeName)]
    pub event_type: String,
    /// The wallet an `account.negative_balance` or `balance.monitor_triggered` event is about;
    /// null for the others, and for a monitor of an account set (its event's data names the set).
    pub account_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When the dispatcher turned the event into its deliveries; null until then.
    pub fanned_out_at: Option<DateTime<Utc>>,
    /// When the event went onto the outbound stream; null until then, and always without one.
    pub streamed_at: Option<DateTime<Utc>>,
    /// How many deliveries the event has; `deliveries` lists the first 20 of them.
    pub deliveries_total: i64,
    /// Oldest first.
    pub deliveries: Vec<DeliveryView>,
}

/// The schema of an event's type: the types the ledger writes (`ledger::events::EventType`),
/// listed, so that a generated client gets an enumeration.
pub struct EventTypeName;

impl utoipa::PartialSchema for EventTypeName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(EventType::ALL.map(EventType::as_str)))
            .description(Some("An outbox event's type (docs/outbox.md)."))
            .build()
            .into()
    }
}

impl ToSchema for EventTypeName {}

/// Whether a transaction of this id exists, in any status (a refusal included).
pub async fn transaction_exists(conn: &mut PgConnection, id: Uuid) -> Result<bool, StoreError> {
    let found = sqlx::query_scalar!(r#"select 1 as "one!" from transactions where id = $1"#, id)
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}

struct EventRow {
    seq: i64,
    id: Uuid,
    event_type: String,
    account_id: Option<String>,
    created_at: DateTime<Utc>,
    fanned_out_at: Option<DateTime<Utc>>,
    streamed_at: Option<DateTime<Utc>>,
}

/// The events of `transaction`, oldest first, after the event `after_seq` (a cursor), with their
/// deliveries; and the position of the last one when there are more.
pub async fn of_transaction(
    conn: &mut PgConnection,
    transaction: Uuid,
    after_seq: Option<i64>,
    limit: i64,
) -> Result<(Vec<TransactionEventView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        EventRow,
        r#"select seq, id, type as event_type, account_id, created_at, fanned_out_at, streamed_at
           from outbox_events
           where transaction_id = $1 and ($2::bigint is null or seq > $2)
           order by seq limit $3"#,
        transaction,
        after_seq,
        limit + 1
    )
    .fetch_all(&mut *conn)
    .await?;
    let (events, next) = crate::ledger::transactions::paginate(rows, limit, |r| r.seq, |r| r);
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let (mut deliveries, totals) =
        super::deliveries::of_events(conn, &ids, DELIVERIES_PER_EVENT).await?;
    let views = events
        .into_iter()
        .map(|e| TransactionEventView {
            deliveries_total: totals.get(&e.id).copied().unwrap_or(0),
            deliveries: deliveries.remove(&e.id).unwrap_or_default(),
            id: e.id,
            event_type: e.event_type,
            account_id: e.account_id,
            created_at: e.created_at,
            fanned_out_at: e.fanned_out_at,
            streamed_at: e.streamed_at,
        })
        .collect();
    Ok((views, next))
}
