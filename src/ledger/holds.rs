//! Holds: money reserved by a pending transaction until it is captured (`post`), released
//! (`void`) or expires.
//!
//! Every transition is `UPDATE ... WHERE id = $1 AND status = 'pending'` under the transaction
//! row's lock, after checking `expires_at` against the clock at that moment (and, for a
//! capture, again once its wallets are locked), so a hold is captured or released exactly once
//! however many requests race for it, and never after it expired; a repeat of the same request replays the stored answer and any
//! other request meets the terminal status it left behind. What a hold reserves lives in
//! `open_holds` while it is pending and goes away in the same database transaction that ends it.

use super::accounts::AccountType;
use super::audit;
use super::events::{self, EventType, TransactionEvent};
use super::money::{Amount, Currency};
use super::posting::{self, NewEntry};
use super::store::{Db, Store, inserts, locks, reads};
use super::transactions::{StoredTransaction, TransactionStatus};
use super::views::{LegView, TransactionView};
use super::{compare, now_micros};
use crate::db::{Engine, StoreError};
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

/// A hold without `expires_at` expires after this long (7 days).
pub const DEFAULT_HOLD_EXPIRY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// A hold shorter than a second would expire before its batch or request commits.
pub const MIN_HOLD_EXPIRY_MS: u64 = 1_000;
/// 366 days: longer than any card network keeps an authorization.
pub const MAX_HOLD_EXPIRY_MS: u64 = 366 * 24 * 60 * 60 * 1000;
/// Most overdue holds one sweeper step expires (one short transaction each step).
pub const HOLD_SWEEP_BATCH: i64 = 1_000;

/// How long a hold lasts when its creator names no expiry, from milliseconds.
pub fn expiry_after_ms(ms: u64) -> chrono::TimeDelta {
    chrono::TimeDelta::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

pub fn default_expiry() -> chrono::TimeDelta {
    expiry_after_ms(DEFAULT_HOLD_EXPIRY_MS)
}

/// One leg of a pending hold, as `open_holds` keeps it.
#[derive(Debug, Clone)]
pub struct OpenHold {
    pub transaction_id: Uuid,
    pub account: String,
    /// Signed like an entry: negative reserves money going out of the account.
    pub amount: i64,
    pub expires_at: DateTime<Utc>,
}

pub async fn insert_open_holds(
    conn: &mut PgConnection,
    holds: &[&OpenHold],
) -> Result<(), sqlx::Error> {
    if holds.is_empty() {
        return Ok(());
    }
    let transactions: Vec<Uuid> = holds.iter().map(|h| h.transaction_id).collect();
    let accounts: Vec<&str> = holds.iter().map(|h| h.account.as_str()).collect();
    let amounts: Vec<i64> = holds.iter().map(|h| h.amount).collect();
    let expiries: Vec<DateTime<Utc>> = holds.iter().map(|h| h.expires_at).collect();
    sqlx::query!(
        r#"insert into open_holds (transaction_id, account_id, amount, expires_at)
           select * from unnest($1::uuid[], $2::text[], $3::bigint[], $4::timestamptz[])"#,
        &transactions,
        &accounts as &[&str],
        &amounts,
        &expiries,
    )
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    pub pending_out: i64,
    pub pending_in: i64,
}

/// What the open, unexpired holds of each account reserve (the `open_hold_totals` view, which
/// the write path's wallet states read too): a sum over open holds only, never over the
/// account's history.
pub async fn pending_totals(
    conn: &mut PgConnection,
    accounts: &[String],
) -> Result<HashMap<String, Pending>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select account_id as "account_id!", pending_out as "pending_out!",
                  pending_in as "pending_in!"
           from open_hold_totals where account_id = any($1)"#,
        accounts
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.account_id,
                Pending {
                    pending_out: r.pending_out,
                    pending_in: r.pending_in,
                },
            )
        })
        .collect())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Post,
    Void,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Post => "post",
            Action::Void => "void",
        }
    }

    fn target(self) -> TransactionStatus {
        match self {
            Action::Post => TransactionStatus::Posted,
            Action::Void => TransactionStatus::Voided,
        }
    }
}

/// How a post or void was answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// It happened now: 200 with the transaction.
    Done {
        body: String,
    },
    /// The same request happened before: its stored answer, replayed.
    Replayed {
        body: String,
    },
    /// The same action happened before with another amount.
    Mismatch {
        differing_fields: Vec<String>,
    },
    NotFound,
    /// The transaction is in a status this action cannot leave (or was never a hold).
    InvalidTransition {
        current: TransactionStatus,
    },
    Invalid(Vec<FieldError>),
}

struct HoldRow {
    status: String,
    expired: bool,
    currency: String,
    legs: Value,
    resolution_request: Option<Value>,
    resolution_response: Option<String>,
}

/// Captures (`Post`, fully or, on a two-leg hold, partially) or releases (`Void`) a hold, in
/// a database transaction of its own.
pub async fn resolve(
    store: &Store,
    id: Uuid,
    action: Action,
    amount: Option<i64>,
) -> Result<Resolution, StoreError> {
    let mut conn = store.pool().acquire().await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let resolution = resolve_on(&mut store.on(&mut tx), id, action, amount).await?;
    // Every answer commits: what `resolve_on` wrote (a capture, a release, an expiry) is the
    // answer, and the answers that wrote nothing leave nothing to commit but the row lock.
    // Through the request's gate (`ledger::caller`): its deadline waits for this COMMIT's
    // answer, and a lost answer is reported as an unknown outcome, not as "not done".
    super::caller::commit_in_request(tx).await?;
    Ok(resolution)
}

/// [`resolve`] inside the caller's open transaction, which must commit whatever the answer.
pub async fn resolve_on(
    db: &mut Db<'_>,
    id: Uuid,
    action: Action,
    amount: Option<i64>,
) -> Result<Resolution, StoreError> {
    let (engine, tx) = (db.engine(), db.conn());
    // The row lock serializes every post, void and expiry of this hold.
    let Some(hold) = sqlx::query_as!(
        HoldRow,
        r#"select status, hold_status_at(status, expires_at, clock_timestamp()) = 'expired' as "expired!", currency, legs,
                  resolution_request, resolution_response
           from transactions where id = $1 for update"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(Resolution::NotFound);
    };
    let status = TransactionStatus::parse(&hold.status).ok_or_else(|| {
        let what = format!("unknown status {:?}", hold.status);
        crate::db::corrupt("transactions", id, what)
    })?;
    let legs: Vec<LegView> = serde_json::from_value(hold.legs.clone()).unwrap_or_default();
    let held = super::transactions::credited_total(&legs).minor_units();
    // A two-leg hold's capture defaults to the whole amount, so `{}` and `{"amount": held}`
    // are the same request; a multi-leg hold is captured whole.
    let request = match action {
        Action::Post => {
            json!({"action": action.as_str(), "amount": amount.or((legs.len() == 2).then_some(held))})
        }
        Action::Void => json!({"action": action.as_str()}),
    };

    match status {
        TransactionStatus::Pending if !hold.expired => {}
        TransactionStatus::Pending => {
            // Past its expiry: expire it now, by the same rule the sweeper applies.
            expire(tx, engine, id).await?;
            return Ok(Resolution::InvalidTransition {
                current: TransactionStatus::Expired,
            });
        }
        TransactionStatus::Posted
        | TransactionStatus::Voided
        | TransactionStatus::Rejected
        | TransactionStatus::Expired => {
            return Ok(stored_resolution(hold, status, action, &request));
        }
    }

    let Some(currency) = Currency::parse(&hold.currency) else {
        return Err(crate::db::corrupt(
            "transactions",
            id,
            format!("unknown currency {:?}", hold.currency),
        ));
    };
    let captured = match (action, amount) {
        (Action::Void, _) => None,
        // A whole two-leg capture records its amount too, so `{}` and `{"amount": held}`
        // store the same answer.
        (Action::Post, None) => (legs.len() == 2).then_some(held),
        (Action::Post, Some(_)) if legs.len() != 2 => {
            let message =
                "a partial capture applies to two-leg holds; omit amount to capture in full";
            return Ok(Resolution::Invalid(vec![FieldError::new(
                "/amount",
                "not_applicable",
                message,
            )]));
        }
        (Action::Post, Some(a)) if a > held => {
            let message = format!("exceeds the held {}", currency.format(held));
            return Ok(Resolution::Invalid(vec![FieldError::new(
                "/amount", "range", message,
            )]));
        }
        (Action::Post, Some(a)) => Some(a),
    };
    let now = now_micros();
    // The answer (the transaction's view, serialized) and the entries the change wrote.
    let (body, entries) = match action {
        Action::Void => {
            let view = resolved_view(
                tx,
                engine,
                id,
                TransactionStatus::Voided,
                None,
                None,
                currency,
            )
            .await?;
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
            .execute(&mut *tx)
            .await?;
            (body, Vec::new())
        }
        Action::Post => {
            let capture: Vec<LegView> = legs
                .iter()
                .map(|l| {
                    let amount = captured.map_or(l.amount, |c| c * l.amount.signum());
                    LegView {
                        account: l.account.clone(),
                        amount,
                        amount_decimal: currency.format(amount),
                    }
                })
                .collect();
            let (entries, ledger_time) =
                match capture_entries(tx, engine, id, &capture, now).await? {
                    Capture::Ready(entries, ledger_time) => (entries, ledger_time),
                    Capture::Expired => {
                        expire(tx, engine, id).await?;
                        return Ok(Resolution::InvalidTransition {
                            current: TransactionStatus::Expired,
                        });
                    }
                    Capture::Overflow => {
                        let message = "capturing would take a balance past 9007199254740991";
                        return Ok(Resolution::Invalid(vec![FieldError::new(
                            "/amount",
                            "balance_overflow",
                            message,
                        )]));
                    }
                };
            let mut view = resolved_view(
                tx,
                engine,
                id,
                TransactionStatus::Posted,
                Some(ledger_time),
                captured,
                currency,
            )
            .await?;
            // The entries are written below: the answer already shows what they post.
            view.authorized_amount =
                captured.map(|_| super::transactions::credited_total(&legs).minor_units());
            view.authorized_amount_decimal = view.authorized_amount.map(|a| currency.format(a));
            view.entries = capture.clone();
            let body = serde_json::to_string(&view).expect("a transaction view always serializes");
            sqlx::query!(
                r#"update transactions set status = 'posted', posted_at = $2, captured_amount = $3,
                          resolution_request = $4, resolution_response = $5, updated_at = $6
                   where id = $1 and status = 'pending'"#,
                id,
                ledger_time,
                captured,
                request,
                body,
                now
            )
            .execute(&mut *tx)
            .await?;
            let rows: Vec<(Uuid, &str, DateTime<Utc>, &NewEntry)> = entries
                .iter()
                .map(|e| (id, currency.code(), ledger_time, e))
                .collect();
            inserts::insert_entry_rows(&mut Db::new(tx, engine), &rows).await?;
            let crossings = events::negative_crossings(id, currency.code(), &entries);
            events::record_negative_balances(tx, &crossings).await?;
            (body, entries)
        }
    };
    // Whatever was not captured is released with the rest of the hold.
    sqlx::query!("delete from open_holds where transaction_id = $1", id)
        .execute(&mut *tx)
        .await?;
    let event = match action {
        Action::Post => EventType::TransactionPosted,
        Action::Void => EventType::TransactionVoided,
    };
    let event = TransactionEvent::from_answer(event, id, &body, currency.code(), &entries);
    events::record_transactions(tx, &[event]).await?;
    let action = match action {
        Action::Post => "transaction.post",
        Action::Void => "transaction.void",
    };
    audit::record(tx, action, &[id.to_string()]).await?;
    Ok(Resolution::Done { body })
}

/// The answer to a post or void of a hold that is no longer pending: the stored answer when
/// the same action ended it (replayed, or a mismatch), else the status it is in.
fn stored_resolution(
    hold: HoldRow,
    status: TransactionStatus,
    action: Action,
    request: &Value,
) -> Resolution {
    match (hold.resolution_request, hold.resolution_response) {
        (Some(stored), Some(body)) if status == action.target() => {
            let differing_fields = compare::differing_fields(&stored, request);
            if differing_fields.is_empty() {
                Resolution::Replayed { body }
            } else {
                Resolution::Mismatch { differing_fields }
            }
        }
        _ => Resolution::InvalidTransition { current: status },
    }
}

enum Capture {
    Ready(Vec<NewEntry>, DateTime<Utc>),
    /// The hold expired before its wallets could be locked.
    Expired,
    Overflow,
}

/// Entries of a capture: the wallets are locked (sorted) and their chains continued. Funds
/// are not checked again: the hold reserved them. Expiry is checked again once the wallets
/// are locked, with the clock at that moment: a writer that already treated the hold as
/// expired (and spent what it reserved) held these locks first, so the capture must see the
/// expiry too.
async fn capture_entries(
    conn: &mut PgConnection,
    engine: Engine,
    id: Uuid,
    legs: &[LegView],
    now: DateTime<Utc>,
) -> Result<Capture, StoreError> {
    let mut ids: Vec<String> = legs.iter().map(|l| l.account.clone()).collect();
    ids.sort();
    let shared = posting::SystemLocks::Shared;
    let locked = locks::lock_accounts(&mut Db::new(conn, engine), &ids, shared).await?;
    let expired = sqlx::query_scalar!(
        r#"select hold_status_at(status, expires_at, clock_timestamp()) = 'expired' as "expired!" from transactions where id = $1"#,
        id
    )
    .fetch_one(&mut *conn)
    .await?;
    if expired {
        return Ok(Capture::Expired);
    }
    let wallets: Vec<String> = locked
        .values()
        .filter(|a| a.kind == AccountType::Wallet)
        .map(|a| a.id.clone())
        .collect();
    let mut states = reads::wallet_states(&mut Db::new(conn, engine), &wallets).await?;
    let ledger_time = posting::ledger_time(states.values().map(|s| &s.chain), now);
    let mut entries = Vec::with_capacity(legs.len());
    for leg in legs {
        let Some(amount) = Amount::new(leg.amount) else {
            return Ok(Capture::Overflow);
        };
        let account = leg.account.clone();
        let entry = match states.get_mut(&leg.account) {
            None => NewEntry::unchained(account, amount),
            Some(s) => match s.chain.next(account, amount, ledger_time) {
                Some(entry) => entry,
                None => return Ok(Capture::Overflow),
            },
        };
        entries.push(entry);
    }
    Ok(Capture::Ready(entries, ledger_time))
}

/// The transaction as it will read once resolved.
async fn resolved_view(
    conn: &mut PgConnection,
    engine: Engine,
    id: Uuid,
    status: TransactionStatus,
    posted_at: Option<DateTime<Utc>>,
    captured: Option<i64>,
    currency: Currency,
) -> Result<TransactionView, StoreError> {
    let mut view = super::transactions::find(&mut Db::new(conn, engine), id)
        .await?
        .ok_or_else(|| StoreError::from(sqlx::Error::RowNotFound))?;
    view.status = status.as_str().to_owned();
    view.posted_at = posted_at;
    view.captured_amount = captured;
    view.captured_amount_decimal = captured.map(|c| currency.format(c));
    Ok(view)
}

/// Marks one overdue hold expired and releases what it reserved. Both callers hold the hold's
/// row lock and have just read it pending and past its expiry (`hold_status_at` at
/// `clock_timestamp()`), and an expiry never un-passes, so the update needs no clock of its
/// own (Citus refuses a volatile function in an UPDATE of a distributed table).
async fn expire(conn: &mut PgConnection, engine: Engine, id: Uuid) -> Result<(), StoreError> {
    let expired = sqlx::query!(
        "update transactions set status = 'expired', updated_at = now()
         where id = $1 and status = 'pending'",
        id
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    sqlx::query!("delete from open_holds where transaction_id = $1", id)
        .execute(&mut *conn)
        .await?;
    if expired == 1 {
        let event = [(id, EventType::TransactionExpired)];
        events::record_stored_transactions(&mut Db::new(conn, engine), &event).await?;
    }
    Ok(())
}

/// The sweeper's step: marks up to `limit` overdue holds `expired` and releases them. Rows
/// being posted or voided right now are skipped (their own request decides). Returns how
/// many holds expired.
pub async fn sweep(db: &mut Db<'_>, limit: i64) -> Result<i64, StoreError> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let expired = match engine {
        Engine::Plain => sweep_claim(&mut tx, limit).await?,
        Engine::Citus => sweep_claim_citus(&mut tx, limit).await?,
    };
    let events: Vec<(Uuid, EventType)> = expired
        .iter()
        .map(|id| (*id, EventType::TransactionExpired))
        .collect();
    events::record_stored_transactions(&mut Db::new(&mut tx, engine), &events).await?;
    tx.commit().await?;
    Ok(expired.len() as i64)
}

async fn sweep_claim(conn: &mut PgConnection, limit: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with due as (
               select id from transactions
               where status = 'pending' and expires_at <= now()
               order by expires_at limit $1
               for update skip locked),
           expired as (
               update transactions t set status = 'expired', updated_at = now()
               from due where t.id = due.id
               returning t.id),
           released as (
               delete from open_holds where transaction_id in (select id from expired)
               returning 1)
           select id as "id!" from expired"#,
        limit
    )
    .fetch_all(conn)
    .await
}

/// [`sweep_claim`] on Citus, where `skip locked` runs only on one shard: the candidates are
/// read without a lock, and the update keeps its condition (pending and due), so a hold that a
/// post or void resolved meanwhile (they lock its row) is left as they left it.
async fn sweep_claim_citus(conn: &mut PgConnection, limit: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with due as materialized (
               select id from transactions
               where status = 'pending' and expires_at <= now()
               order by expires_at limit $1),
           expired as (
               update transactions t set status = 'expired', updated_at = now()
               where t.id in (select id from due)
                 and t.status = 'pending' and t.expires_at <= now()
               returning t.id),
           released as (
               delete from open_holds where transaction_id in (select id from expired)
               returning 1)
           select id as "id!" from expired"#,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The open, unexpired holds of an account, newest first. Call it inside the same
/// repeatable-read transaction as the balances so both describe one moment. The holds are a
/// subquery rather than a join: open_holds (by account) and transactions (by id) are not
/// co-located on Citus, which plans the subquery on the account's shard first; one node
/// plans both forms alike (a semi-join on the primary key).
pub async fn list_open(
    conn: &mut PgConnection,
    account: &str,
    before_seq: Option<i64>,
    limit: i64,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"select t.id, t.seq, t.kind, t.status as "status!", t.currency, t.legs, t.external_ref,
                  t.metadata, t.refusal_code, t.refusal_detail, t.created_at, t.posted_at,
                  t.expires_at, t.reverses, t.captured_amount,
                  null::jsonb as posted_entries
           from transactions t
           where t.id in (select transaction_id from open_holds
                          where account_id = $1 and expires_at > now())
             and t.status = 'pending' and ($2::bigint is null or t.seq < $2)
           order by t.seq desc
           limit $3"#,
        account,
        before_seq,
        limit + 1
    )
    .fetch_all(conn)
    .await?;
    let (views, next) =
        super::transactions::paginate(rows, limit, |r| r.seq, StoredTransaction::view);
    Ok((views.into_iter().collect::<Result<_, _>>()?, next))
}
