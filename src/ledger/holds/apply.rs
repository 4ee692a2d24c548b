//! Apply: the writes of a decided void, capture or expiry, in the hold's transaction, and the
//! sweeper's claim of overdue holds.

use super::Action;
use super::decide::Capture;
use super::load::LoadedHold;
use crate::db::StoreError;
use crate::ledger::audit;
use crate::ledger::events::{self, EventType, TransactionEvent};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::posting::NewEntry;
use crate::ledger::sets::bookkeeping::{self, SetEntry};
use crate::ledger::store::{Db, inserts};
use crate::ledger::transactions::{self, TransactionStatus};
use crate::ledger::views::{LegView, TransactionView};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// Marks the hold voided, storing `request` and the answer (returned: the transaction's
/// view, serialized) so that a repeat replays it.
pub(super) async fn void(
    db: &mut Db<'_>,
    id: Uuid,
    currency: Currency,
    request: &Value,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let status = TransactionStatus::Voided;
    let view = resolved_view(db, id, status, None, None, currency).await?;
    let body = serde_json::to_string(&view).expect("a transaction view always serializes");
    sqlx::query!(
        r#"update transactions set status = 'voided', resolution_request = $2,
                          resolution_response = $3, updated_at = $4
                   where id = $1 and status = 'pending'"#,
        id,
        request,
        body,
        now
    )
    .execute(db.conn())
    .await?;
    Ok(body)
}

/// A capture's entries, decided against its locked wallets.
pub(super) struct Posting<'a> {
    pub capture: &'a Capture,
    pub entries: &'a [NewEntry],
    pub ledger_time: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// Marks the hold posted and writes its entries (and the negative-balance events they
/// cause); returns the answer, stored on the row as for a void.
pub(super) async fn capture(
    db: &mut Db<'_>,
    id: Uuid,
    hold: &LoadedHold,
    posting: Posting<'_>,
) -> Result<String, StoreError> {
    let (currency, captured) = (hold.currency, posting.capture.captured);
    let status = TransactionStatus::Posted;
    let posted_at = Some(posting.ledger_time);
    let mut view = resolved_view(db, id, status, posted_at, captured, currency).await?;
    // The entries are written below: the answer already shows what they post.
    view.authorized_amount = captured.map(|_| hold.held.minor_units());
    view.authorized_amount_decimal = view.authorized_amount.map(|a| currency.format(a));
    let per_leg = view.exchange.is_some();
    view.entries = posting
        .capture
        .legs
        .iter()
        .map(|l| {
            let leg_currency = l.currency.unwrap_or(currency);
            LegView::new(
                l.account.clone(),
                l.amount.minor_units(),
                leg_currency,
                per_leg,
            )
        })
        .collect();
    let body = serde_json::to_string(&view).expect("a transaction view always serializes");
    sqlx::query!(
        r#"update transactions set status = 'posted', posted_at = $2, captured_amount = $3,
                          resolution_request = $4, resolution_response = $5, updated_at = $6
                   where id = $1 and status = 'pending'"#,
        id,
        posting.ledger_time,
        captured.map(Amount::minor_units),
        posting.capture.request,
        body,
        posting.now
    )
    .execute(db.conn())
    .await?;
    let rows: Vec<(Uuid, &str, DateTime<Utc>, &NewEntry)> = (posting.entries.iter())
        .map(|e| (id, e.currency_or(currency.code()), posting.ledger_time, e))
        .collect();
    // The hold's transaction row was inserted before: the check reads it.
    inserts::insert_entry_rows(db, &rows, &[]).await?;
    let crossings = events::negative_crossings(id, currency.code(), posting.entries);
    events::record_negative_balances(db.conn(), &crossings).await?;
    Ok(body)
}

/// What every post and void ends with: whatever was not captured is released with the rest
/// of the hold, and the change is announced (outbox event) and audited.
pub(super) async fn release(
    conn: &mut PgConnection,
    id: Uuid,
    action: Action,
    answer: (&str, Currency),
    entries: &[NewEntry],
) -> Result<(), StoreError> {
    let (body, currency) = answer;
    sqlx::query!("delete from open_holds where transaction_id = $1", id)
        .execute(&mut *conn)
        .await?;
    let (event, audited) = match action {
        Action::Post => (EventType::TransactionPosted, "transaction.post"),
        Action::Void => (EventType::TransactionVoided, "transaction.void"),
    };
    let event = TransactionEvent::from_answer(event, id, body, currency.code(), entries);
    events::record_transactions(conn, &[event]).await?;
    audit::record(conn, audited, &[id.to_string()]).await?;
    Ok(())
}

/// The transaction as it will read once resolved.
async fn resolved_view(
    db: &mut Db<'_>,
    id: Uuid,
    status: TransactionStatus,
    posted_at: Option<DateTime<Utc>>,
    captured: Option<Amount>,
    currency: Currency,
) -> Result<TransactionView, StoreError> {
    let mut view = transactions::find(db, id)
        .await?
        .ok_or_else(|| StoreError::from(sqlx::Error::RowNotFound))?;
    view.status = status;
    view.posted_at = posted_at;
    // A capture counts from when it is written: holds are never backdated.
    view.effective_at = posted_at;
    view.captured_amount = captured.map(Amount::minor_units);
    view.captured_amount_decimal = captured.map(|c| currency.format_amount(c));
    Ok(view)
}

/// Marks one overdue hold expired and releases what it reserved. Both callers hold the hold's
/// row lock and have just read it pending and past its expiry (`hold_status_at` at
/// `clock_timestamp()`), and an expiry never un-passes, so the update needs no clock of its
/// own (Citus refuses a volatile function in an UPDATE of a distributed table).
pub(super) async fn expire(db: &mut Db<'_>, id: Uuid) -> Result<(), StoreError> {
    let expired = sqlx::query!(
        "update transactions set status = 'expired', updated_at = now()
         where id = $1 and status = 'pending'",
        id
    )
    .execute(db.conn())
    .await?
    .rows_affected();
    sqlx::query!("delete from open_holds where transaction_id = $1", id)
        .execute(db.conn())
        .await?;
    if expired == 1 {
        let event = [(id, EventType::TransactionExpired)];
        events::record_stored_transactions(db, &event).await?;
    }
    Ok(())
}

/// A capture of a hold on wallets in account sets: its entries recorded for those sets, and
/// the hold's copies gone from them (`ledger::sets`).
pub(super) async fn record_for_sets(
    conn: &mut PgConnection,
    id: Uuid,
    entries: &[NewEntry],
    in_sets: &[String],
    ledger_time: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let recorded: Vec<SetEntry> = entries
        .iter()
        .filter(|e| in_sets.contains(&e.account))
        .map(|e| SetEntry {
            transaction_id: id,
            account: &e.account,
            amount: e.amount.minor_units(),
            ledger_time,
            effective_at: e.effective_at,
        })
        .collect();
    bookkeeping::record_entries(&mut *conn, &recorded).await?;
    bookkeeping::release_hold(conn, id).await
}
