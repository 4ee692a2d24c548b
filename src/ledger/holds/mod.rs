//! Holds: money reserved by a pending transaction until it is captured (`post`), released
//! (`void`) or expires.
//!
//! Every transition is `UPDATE ... WHERE id = $1 AND status = 'pending'` under the transaction
//! row's lock, after checking `expires_at` against the clock at that moment (and, for a
//! capture, again once its wallets are locked), so a hold is captured or released exactly once
//! however many requests race for it, and never after it expired; a repeat of the same request
//! replays the stored answer and any other request meets the terminal status it left behind.
//! What a hold reserves lives in `open_holds` while it is pending and goes away in the same
//! database transaction that ends it.
//!
//! A post or void runs like a posting (`posting/`): `load.rs` locks the hold's row (and, for a
//! capture, its wallets) and decodes it, `decide.rs` says in memory what the action comes to
//! (tested without a database, `decide/tests.rs`), and `apply.rs` writes it.

mod apply;
mod decide;
mod load;

use super::events::{self, EventType};
use super::money::Amount;
use super::monitors;
use super::now_micros;
use super::sets::bookkeeping;
use super::store::{Db, Store, locks};
use super::transactions::{StoredTransaction, TransactionStatus};
use super::views::TransactionView;
use crate::db::StoreError;
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use decide::{Capture, Decision, Entries};
use load::LoadedHold;
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
    pub amount: Amount,
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
    let amounts: Vec<i64> = holds.iter().map(|h| h.amount.minor_units()).collect();
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

/// Captures (`Post`, fully or, on a two-leg hold, partially) or releases (`Void`) a hold, in
/// a database transaction of its own.
pub async fn resolve(
    store: &Store,
    id: Uuid,
    action: Action,
    amount: Option<Amount>,
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

/// [`resolve`] inside the caller's open transaction, which must commit whatever the answer:
/// the hold is loaded under its lock, the action decided in memory, and the decision applied.
pub async fn resolve_on(
    db: &mut Db<'_>,
    id: Uuid,
    action: Action,
    amount: Option<Amount>,
) -> Result<Resolution, StoreError> {
    let Some(hold) = load::lock_hold(db.conn(), id).await? else {
        return Ok(Resolution::NotFound);
    };
    let now = now_micros();
    match decide::decide(&hold, action, amount) {
        Decision::Replay { body } => Ok(Resolution::Replayed { body }),
        Decision::Mismatch { differing_fields } => Ok(Resolution::Mismatch { differing_fields }),
        Decision::InvalidTransition { current } => Ok(Resolution::InvalidTransition { current }),
        Decision::Invalid(error) => Ok(Resolution::Invalid(vec![error])),
        Decision::Expire => expire(db, id).await,
        Decision::Void { request } => {
            let (watched, mut watches, in_sets) = load::lock_for_void(db, &hold.legs).await?;
            let body = apply::void(db, id, hold.currency, &request, now).await?;
            apply::release(db.conn(), id, action, (&body, hold.currency), &[]).await?;
            if !in_sets.is_empty() {
                bookkeeping::release_hold(db.conn(), id).await?;
            }
            let changes: Vec<_> = watched
                .into_iter()
                .map(|(wallet, before)| {
                    let after = decide::released(before, &hold.legs, &wallet);
                    monitors::WalletChange {
                        wallet,
                        before,
                        after,
                    }
                })
                .collect();
            let firings = watches.change(id, &changes);
            monitors::store::record_firings(db.conn(), &firings, now).await?;
            Ok(Resolution::Done { body })
        }
        Decision::Capture(capture) => capture_hold(db, id, &hold, &capture, now).await,
    }
}

/// A pending hold found past its expiry is expired now, by the same rule the sweeper applies,
/// and the action meets that status.
async fn expire(db: &mut Db<'_>, id: Uuid) -> Result<Resolution, StoreError> {
    apply::expire(db, id).await?;
    Ok(Resolution::InvalidTransition {
        current: TransactionStatus::Expired,
    })
}

/// A decided capture: its wallets locked, its entries decided against them, then written.
async fn capture_hold(
    db: &mut Db<'_>,
    id: Uuid,
    hold: &LoadedHold,
    capture: &Capture,
    now: DateTime<Utc>,
) -> Result<Resolution, StoreError> {
    let (locked, mut watches, in_sets) = load::lock_wallets(db, id, &capture.legs).await?;
    let before = match &locked {
        load::LockedWallets::Ready(states) if !watches.is_empty() => states.clone(),
        _ => HashMap::new(),
    };
    let terms = decide::HoldTerms {
        id,
        currency: hold.currency,
    };
    let (entries, ledger_time) = match decide::entries(locked, terms, &capture.legs, now) {
        Entries::Ready {
            entries,
            ledger_time,
        } => (entries, ledger_time),
        Entries::Expired => return expire(db, id).await,
        Entries::Invalid(error) => return Ok(Resolution::Invalid(vec![error])),
    };
    let posting = apply::Posting {
        capture,
        entries: &entries,
        ledger_time,
        now,
    };
    let body = apply::capture(db, id, hold, posting).await?;
    let answer = (body.as_str(), hold.currency);
    apply::release(db.conn(), id, Action::Post, answer, &entries).await?;
    if !in_sets.is_empty() {
        apply::record_for_sets(db.conn(), id, &entries, &in_sets, ledger_time).await?;
    }
    let firings = decide::capture_firings(id, &hold.legs, &before, &entries, &mut watches);
    monitors::store::record_firings(db.conn(), &firings, ledger_time).await?;
    Ok(Resolution::Done { body })
}

/// The sweeper's step: marks up to `limit` overdue holds `expired` and releases them. Rows
/// being posted or voided right now are skipped (their own request decides). Returns how
/// many holds expired.
pub async fn sweep(db: &mut Db<'_>, limit: i64) -> Result<i64, StoreError> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let mut in_tx = Db::new(&mut tx, engine);
    let expired = locks::claim_overdue_holds(&mut in_tx, limit).await?;
    let events: Vec<(Uuid, EventType)> = expired
        .iter()
        .map(|id| (*id, EventType::TransactionExpired))
        .collect();
    events::record_stored_transactions(&mut in_tx, &events).await?;
    tx.commit().await?;
    Ok(expired.len() as i64)
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
                  t.metadata, t.refusal_code, t.refusal_detail, t.created_at, t.posted_at, t.effective_at,
                  t.expires_at, t.reverses, t.captured_amount,
                  null::jsonb as posted_entries, t.counter_currency,
                  t.exchange_rate::text as exchange_rate, t.metadata_erased_at
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
