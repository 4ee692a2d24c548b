//! Apply: the decided rows written, each table in one statement (steps 5 and 6 of the order
//! of work in [`super`]).

use super::chain::NewEntry;
use super::cross_shard::TransactionRow;
use super::load::LockedAccount;
use super::render::Rendered;
use crate::ledger::Outcome;
use crate::ledger::events::{self, EventType, NegativeBalance, TransactionEvent};
use crate::ledger::sets::bookkeeping::{self, SetEntry, SetHold};
use crate::ledger::store::{Db, inserts};
use sqlx::PgConnection;
use std::collections::BTreeMap;

/// The outbox events of a batch's new rows, in its transaction: one per row, and one per
/// wallet the batch took from zero or more to below zero.
pub(super) async fn record_events(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<(), sqlx::Error> {
    let new_rows: Vec<TransactionEvent> = rows
        .iter()
        .filter_map(|r| {
            let event = EventType::of_new_transaction(r.status, r.reverses.is_some())?;
            Some(match &r.outcome {
                // The stored answer is the view already serialized.
                Outcome::Created { body } => TransactionEvent::from_answer(
                    event,
                    r.item_id,
                    body,
                    &r.view.currency,
                    &r.entries,
                ),
                Outcome::Refused(_) => TransactionEvent::new(event, &r.view, &r.entries),
            })
        })
        .collect();
    events::record_transactions(conn, &new_rows).await?;
    let crossings: Vec<NegativeBalance> = rows
        .iter()
        .flat_map(|r| events::negative_crossings(r.item_id, &r.view.currency, &r.entries))
        .collect();
    events::record_negative_balances(conn, &crossings).await
}

/// Every entry of every posted row in one statement: the journal trigger checks them as a set.
/// `inserted`: the rows' transactions as their insert returned them (see
/// [`inserts::insert_entry_rows`]).
pub(super) async fn insert_entries(
    db: &mut Db<'_>,
    rows: &[&Rendered],
    inserted: &[TransactionRow],
) -> Result<(), sqlx::Error> {
    let posted: Vec<(&Rendered, &NewEntry)> = rows
        .iter()
        .flat_map(|r| r.entries.iter().map(move |e| (*r, e)))
        .collect();
    inserts::insert_entry_rows(
        db,
        &posted
            .iter()
            .map(|(r, e)| {
                (
                    r.item_id,
                    e.currency_or(&r.view.currency),
                    r.view.posted_at.unwrap_or(r.view.created_at),
                    *e,
                )
            })
            .collect::<Vec<_>>(),
        inserted,
    )
    .await
}

/// The entries and new holds of wallets that count in account sets, recorded for those sets
/// (`ledger::sets`): no statement at all when no locked wallet is in a set.
pub(super) async fn record_for_sets(
    conn: &mut PgConnection,
    accounts: &BTreeMap<String, LockedAccount>,
    rows: &[&Rendered],
) -> Result<(), sqlx::Error> {
    let in_sets = |account: &str| accounts.get(account).is_some_and(|a| a.in_sets);
    let entries: Vec<SetEntry> = rows
        .iter()
        .flat_map(|r| {
            let ledger_time = r.view.posted_at.unwrap_or(r.view.created_at);
            r.entries
                .iter()
                .filter(|e| in_sets(&e.account))
                .map(move |e| SetEntry {
                    transaction_id: r.item_id,
                    account: &e.account,
                    amount: e.amount.minor_units(),
                    ledger_time,
                    effective_at: e.effective_at,
                })
        })
        .collect();
    bookkeeping::record_entries(&mut *conn, &entries).await?;
    let holds: Vec<SetHold> = rows
        .iter()
        .flat_map(|r| r.holds.iter())
        .filter(|h| in_sets(&h.account))
        .map(|h| SetHold {
            transaction_id: h.transaction_id,
            account: &h.account,
            amount: h.amount.minor_units(),
            expires_at: h.expires_at,
        })
        .collect();
    bookkeeping::copy_holds(conn, &holds).await
}
