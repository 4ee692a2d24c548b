//! The one write path that creates transactions: a single transfer, payment, multi-leg
//! transaction, hold or reversal, and a batch of up to a thousand of them, all go through
//! [`create_many`] (the API's single creates grouped by `group_commit` into [`create_group`]),
//! set-based, in one database transaction.
//!
//! Order of work (see `docs/architecture.md`):
//! 1. ids already stored are answered from their row (replay or mismatch); a batch whose ids
//!    are all stored is answered without taking a lock;
//! 2. the originals of reversals are locked (sorted), then every wallet of the batch
//!    `FOR UPDATE` in sorted id order and every system account `FOR SHARE` (which excludes a
//!    concurrent freeze or close but never another writer);
//! 3. each wallet's last entry and open holds are read in *new* statements, after the locks, so
//!    they include every commit that preceded the locks;
//! 4. each item is decided in order, in Rust, against running per-wallet state (so item 7 sees
//!    what item 3 did): post, hold, refuse, or reject as invalid; an id repeated inside the
//!    batch is bound to the first item that stores it (later ones replay or mismatch);
//!    atomic mode decides every item, then rolls everything back if any would not be created
//!    (and names the first such item in request order);
//! 5. all transaction rows go in with one `INSERT ... ON CONFLICT DO NOTHING RETURNING`: if a
//!    concurrent request took one of the ids, everything rolls back and step 1 runs again (the
//!    id is now stored, so it replays);
//! 6. missing clearing accounts, then all entries (one statement, checked by the journal
//!    trigger) and all open holds (one statement); COMMIT, once.

use super::accounts::{self, AccountStatus, AccountType};
use super::audit::{self, Actor};
use super::bounds::{self, SystemState};
use super::events::{self, EventType, NegativeBalance, TransactionEvent};
use super::holds;
use super::ids::AccountId;
use super::journal::Leg;
use super::money::{Amount, Currency, MAX_AMOUNT};
use super::transactions::{ItemError, NewTransaction, RefusalCode, Requested, WriteError};
use super::views::{LegView, RefusalView, TransactionView};
use super::{Created, now_micros};
use crate::db::StoreError;
use crate::problem::{FieldError, Problem};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// How often a batch is decided again after concurrent requests took some of its ids.
const MAX_ID_RACE_RETRIES: usize = 5;

/// The answer to one item: what its single call would have answered.
pub type ItemOutcome = Result<Created, ItemError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// All items or none: the first item that would not be created fails the batch.
    Atomic,
    /// Each item on its own, as its single call would be answered.
    Independent,
}

#[derive(Debug)]
pub enum BatchResult {
    Done(Vec<ItemOutcome>),
    /// Atomic mode: item `index` would not be created, so nothing was written.
    Failed {
        index: usize,
        outcome: ItemOutcome,
    },
}

/// Creates every item exactly once per id, in one database transaction.
pub async fn create_many(
    pool: &PgPool,
    items: &[NewTransaction],
    mode: Mode,
) -> Result<BatchResult, WriteError> {
    let mut conn = pool.acquire().await?;
    attempts(
        &mut conn,
        items,
        Authors::Current,
        mode,
        true,
        None,
        LockWait::Unbounded,
    )
    .await
}

/// The items of several callers in one database transaction (group commit, see
/// [`super::group_commit`]): each item is answered exactly as its single call would be, and
/// its audit row names its own caller (`actors[i]` made `items[i]`). Also returns the
/// committed creations it read back for replays (for [`super::replay_cache`]).
pub(crate) async fn create_group(
    pool: &PgPool,
    items: &[NewTransaction],
    actors: &[Option<Actor>],
    lock_wait: LockWait,
) -> Result<(Vec<ItemOutcome>, Vec<(Uuid, StoredCreation)>), WriteError> {
    let mut conn = pool.acquire().await?;
    let mut read_back = Vec::new();
    let result = attempts(
        &mut conn,
        items,
        Authors::Each(actors),
        Mode::Independent,
        true,
        Some(&mut read_back),
        lock_wait,
    )
    .await;
    if result.is_err() {
        // A failed attempt's ROLLBACK is only queued when its transaction is dropped; run it
        // now, so that its locks are gone before the caller looks at who holds what.
        let _ = sqlx::Connection::ping(&mut *conn).await;
    }
    match result? {
        BatchResult::Done(outcomes) => Ok((outcomes, read_back)),
        // Independent mode never fails a whole batch.
        BatchResult::Failed { .. } => Err(WriteError::Contention),
    }
}

/// Who each item's audit row names: the task's actor (one caller), or one per item.
#[derive(Debug, Clone, Copy)]
enum Authors<'a> {
    Current,
    Each(&'a [Option<Actor>]),
}

impl Authors<'_> {
    fn of(self, index: usize) -> Option<Actor> {
        match self {
            Authors::Current => audit::current(),
            Authors::Each(actors) => actors.get(index).cloned().flatten(),
        }
    }
}

/// [`create_many`] on a connection the caller holds. Inside the caller's open transaction
/// the work runs in a savepoint: it becomes durable with the caller's COMMIT, together with
/// whatever else that transaction does (the stream consumer applies a whole batch of events
/// this way, once).
pub async fn create_many_in(
    conn: &mut PgConnection,
    items: &[NewTransaction],
    mode: Mode,
) -> Result<BatchResult, WriteError> {
    attempts(
        conn,
        items,
        Authors::Current,
        mode,
        true,
        None,
        LockWait::Unbounded,
    )
    .await
}

/// Atomic mode without writing: the first item (in request order) that would not be
/// created, if any. Used to tell which of several bad items of a batch comes first.
pub async fn first_failure(
    pool: &PgPool,
    items: &[NewTransaction],
) -> Result<Option<(usize, ItemOutcome)>, WriteError> {
    let mut conn = pool.acquire().await?;
    match attempts(
        &mut conn,
        items,
        Authors::Current,
        Mode::Atomic,
        false,
        None,
        LockWait::Unbounded,
    )
    .await?
    {
        BatchResult::Failed { index, outcome } => Ok(Some((index, outcome))),
        BatchResult::Done(_) => Ok(None),
    }
}

/// `read_back`, when given, collects the committed creations read to answer replays (only
/// the group-commit writer wants them; elsewhere they are not copied).
async fn attempts(
    conn: &mut PgConnection,
    items: &[NewTransaction],
    authors: Authors<'_>,
    mode: Mode,
    commit: bool,
    mut read_back: Option<&mut Vec<(Uuid, StoredCreation)>>,
    lock_wait: LockWait,
) -> Result<BatchResult, WriteError> {
    // Shared locks on system accounts first; exclusive ones once a pass found that the batch
    // could take one near the edge of the range (see `bounds.rs`), for the passes that follow.
    let mut locking = Locking {
        exclusive_systems: false,
        wait: lock_wait,
    };
    for _ in 0..MAX_ID_RACE_RETRIES {
        let pass = attempt(
            conn,
            items,
            authors,
            mode,
            commit,
            locking,
            read_back.as_deref_mut(),
        );
        match pass.await {
            Ok(Pass::Done(result)) => return Ok(result),
            Ok(Pass::Again) => continue,
            Ok(Pass::Exclusive) => locking.exclusive_systems = true,
            // Rows are inserted in id order and locks taken in a fixed order, so a deadlock
            // should not happen; if PostgreSQL still picks this attempt as a victim, nothing of
            // it was written and deciding again is safe.
            Err(WriteError::Database(StoreError::Conflict(_))) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(WriteError::Contention)
}

/// How a pass takes its locks.
#[derive(Debug, Clone, Copy)]
struct Locking {
    /// System accounts exclusively too (a batch near the edge of their range).
    exclusive_systems: bool,
    wait: LockWait,
}

/// How long a write may wait for another transaction's row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    /// As long as it takes (the request's own timeout bounds the caller, not the write).
    Unbounded,
    /// At most this long, then the write fails with [`is_lock_timeout`] and nothing of it is
    /// written (group commit, so that one locked row does not hold a whole group).
    Bounded(std::time::Duration),
}

/// `lock_timeout` ran out (`lock_not_available`): the transaction was rolled back.
pub fn is_lock_timeout(error: &WriteError) -> bool {
    matches!(error, WriteError::Database(StoreError::LockTimeout(_)))
}

/// Opens the write's transaction; a bounded lock wait is set in the same round trip.
async fn begin(
    conn: &mut PgConnection,
    lock_wait: LockWait,
) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, sqlx::Error> {
    match lock_wait {
        LockWait::Unbounded => sqlx::Connection::begin(conn).await,
        LockWait::Bounded(wait) => {
            let millis = wait.as_millis().max(1);
            let statement = format!("begin; set local lock_timeout = {millis}");
            sqlx::Connection::begin_with(conn, sqlx::AssertSqlSafe(statement)).await
        }
    }
}

/// Whether an answer means "not created" for an atomic batch.
fn fails(outcome: &ItemOutcome) -> bool {
    match outcome {
        Ok(Created::New { .. }) => false,
        Ok(Created::Replayed { status, .. }) => *status >= 400,
        _ => true,
    }
}

fn finish(outcomes: Vec<ItemOutcome>, failure: Option<usize>) -> BatchResult {
    match failure {
        Some(index) => BatchResult::Failed {
            index,
            outcome: outcomes[index].clone(),
        },
        None => BatchResult::Done(outcomes),
    }
}

/// How a pass ended.
enum Pass {
    Done(BatchResult),
    /// A concurrent request took one of the ids, or created one of the batch's clearing
    /// accounts and wrote to it: nothing was written, decide again.
    Again,
    /// The batch could take a system account near the edge of the range: nothing was written,
    /// decide again with the system accounts locked exclusively.
    Exclusive,
}

/// One pass; with `commit` false nothing is written whatever the outcome.
async fn attempt(
    conn: &mut PgConnection,
    items: &[NewTransaction],
    authors: Authors<'_>,
    mode: Mode,
    commit: bool,
    locking: Locking,
    read_back: Option<&mut Vec<(Uuid, StoredCreation)>>,
) -> Result<Pass, WriteError> {
    let Locking {
        exclusive_systems,
        wait: lock_wait,
    } = locking;
    let ids: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    let stored = stored_creations(conn, &ids).await?;
    if let Some(read_back) = read_back {
        read_back.extend(stored.iter().map(|(id, s)| (*id, s.clone())));
    }
    let replay = |item: &NewTransaction, s: &StoredCreation| {
        Ok(Created::replay_or_mismatch(
            &s.request,
            &item.request,
            s.status,
            s.body.clone(),
        ))
    };
    let undecided: Vec<&NewTransaction> = items
        .iter()
        .filter(|i| !stored.contains_key(&i.id))
        .collect();
    if undecided.is_empty() {
        // Every id is stored: a retried batch, answered without taking a lock.
        let outcomes: Vec<ItemOutcome> = items.iter().map(|i| replay(i, &stored[&i.id])).collect();
        let failure = if mode == Mode::Atomic {
            outcomes.iter().position(fails)
        } else {
            None
        };
        return Ok(Pass::Done(finish(outcomes, failure)));
    }

    let mut tx = begin(&mut *conn, lock_wait).await?;
    let mut ledger = LockedLedger::lock(&mut tx, &undecided, exclusive_systems).await?;
    if ledger.needs_exclusive {
        tx.rollback().await?;
        return Ok(Pass::Exclusive);
    }
    let now = now_micros();
    let mut outcomes: Vec<ItemOutcome> = Vec::with_capacity(items.len());
    let mut rows: Vec<Rendered> = Vec::new();
    // The audit row of each stored row: its resource and who asked for it.
    let mut audited: Vec<(Option<Actor>, String)> = Vec::new();
    // Which item stores each id. An item that stores nothing (unknown account, invalid)
    // leaves its id free, so a later item with that id is decided afresh, as a later single
    // call would be.
    let mut stored_by: HashMap<Uuid, usize> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let outcome = if let Some(s) = stored.get(&item.id) {
            replay(item, s)
        } else if let Some(&first) = stored_by.get(&item.id) {
            same_id_as(&items[first], &outcomes[first], item)
        } else {
            ledger.decide(item, now).map(|decision| {
                let row = render(item, &decision, now);
                let outcome = row.outcome();
                stored_by.insert(item.id, index);
                audited.push((authors.of(index), item.id.to_string()));
                rows.push(row);
                outcome
            })
        };
        outcomes.push(outcome);
    }
    let failure = if mode == Mode::Atomic {
        outcomes.iter().position(fails)
    } else {
        None
    };
    if failure.is_some() || !commit {
        tx.rollback().await?;
        return Ok(Pass::Done(finish(outcomes, failure)));
    }
    let rows: Vec<&Rendered> = rows.iter().collect();
    if !insert_transactions(&mut tx, &rows).await? {
        tx.rollback().await?;
        return Ok(Pass::Again);
    }
    let created = ledger.clearing_accounts_to_create(&rows);
    for (clearing, currency) in &created {
        // The account is created by (and audited as) the first row that uses it.
        let creator = rows
            .iter()
            .position(|r| {
                (r.status == "posted" || r.status == "pending")
                    && r.account_ids.iter().any(|a| a == clearing.as_str())
            })
            .and_then(|i| audited[i].0.clone());
        let create = accounts::ensure_system_account(&mut tx, clearing, *currency);
        match creator {
            Some(actor) => audit::scope(actor, create).await?,
            None => create.await?,
        }
    }
    if !created.is_empty() && !still_empty(&mut tx, &created, exclusive_systems).await? {
        tx.rollback().await?;
        return Ok(Pass::Again);
    }
    insert_entries(&mut tx, &rows).await?;
    let open_holds: Vec<&holds::OpenHold> = rows.iter().flat_map(|r| r.holds.iter()).collect();
    holds::insert_open_holds(&mut tx, &open_holds).await?;
    record_events(&mut tx, &rows).await?;
    audit::record_each(&mut tx, "transaction.create", &audited).await?;
    tx.commit().await?;
    Ok(Pass::Done(finish(outcomes, None)))
}

/// The clearing accounts this pass decided as new and empty, locked now that they exist and
/// read again: still empty, unless a concurrent request created one first and wrote to it,
/// which the decisions did not see (the pass is then decided again, against it). Locking and
/// reading here is what a system account's bound needs from every writer (`bounds.rs`).
async fn still_empty(
    conn: &mut PgConnection,
    created: &[(AccountId, Currency)],
    exclusive_systems: bool,
) -> Result<bool, StoreError> {
    let mut ids: Vec<String> = created.iter().map(|(id, _)| id.to_string()).collect();
    ids.sort();
    lock_accounts(conn, &ids, exclusive_systems).await?;
    let states = bounds::system_states(conn, &ids).await?;
    Ok(states.states.values().all(|s| *s == SystemState::default()))
}

/// The outbox events of a batch's new rows, in its transaction: one per row, and one per
/// wallet the batch took from zero or more to below zero.
async fn record_events(conn: &mut PgConnection, rows: &[&Rendered]) -> Result<(), sqlx::Error> {
    let new_rows: Vec<TransactionEvent> = rows
        .iter()
        .filter_map(|r| {
            let event = EventType::of_new_transaction(r.status, r.reverses.is_some())?;
            Some(if r.creation_status == 201 {
                // The stored answer is the view already serialized.
                TransactionEvent::from_answer(event, r.item_id, &r.body, &r.entries)
            } else {
                TransactionEvent::new(event, &r.view, &r.entries)
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

/// An item whose id an earlier item of the same batch stored: it is answered as a retry of
/// that item would be (a replay, or a mismatch).
fn same_id_as(
    first: &NewTransaction,
    first_outcome: &ItemOutcome,
    item: &NewTransaction,
) -> ItemOutcome {
    let (status, body) = match first_outcome {
        Ok(Created::New { body }) => (201, body.clone()),
        Ok(Created::Refused { body }) => (422, body.clone()),
        other => return other.clone(),
    };
    Ok(Created::replay_or_mismatch(
        &first.request,
        &item.request,
        status,
        body,
    ))
}

/// A committed creation as its row stores it: never changes once committed.
#[derive(Debug, Clone)]
pub struct StoredCreation {
    pub request: Value,
    pub status: u16,
    pub body: String,
}

async fn stored_creations(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    // One primary-key probe per id, as a lateral `limit 1`: that shape has no plan but a
    // probe per id (no hash join), and an index probe is the cheaper probe from a few rows on.
    // The plain `where id = any($1)` let a connection keep the generic plan it made while the
    // table was nearly empty, a sequential scan, until the next ANALYZE: in the bench that one
    // lookup grew to 43% of the database's statement time (docs/performance.md, fifth round).
    let rows = sqlx::query!(
        r#"select t.id as "id!", t.creation_request as "creation_request!",
                  t.creation_status as "creation_status!",
                  t.creation_response as "creation_response!"
           from unnest($1::uuid[]) as k(id)
           cross join lateral (
               select id, creation_request, creation_status, creation_response
               from transactions where id = k.id limit 1) t"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let stored = StoredCreation {
                request: r.creation_request,
                status: r.creation_status as u16,
                body: r.creation_response,
            };
            (r.id, stored)
        })
        .collect())
}

/// A locked account as decisions need it.
#[derive(Debug, Clone)]
pub(crate) struct LockedAccount {
    pub id: String,
    pub currency: String,
    pub kind: AccountType,
    pub status: AccountStatus,
    pub overdraft_limit: i64,
}

/// A locked account's row as stored.
struct LockedRow {
    id: String,
    currency: String,
    kind: String,
    status: String,
    overdraft_limit: i64,
}

impl TryFrom<LockedRow> for LockedAccount {
    type Error = StoreError;

    /// A type or status the code does not know is a corrupt row, never a guess.
    fn try_from(row: LockedRow) -> Result<LockedAccount, StoreError> {
        let kind = AccountType::parse(&row.kind).ok_or_else(|| {
            crate::db::corrupt("accounts", &row.id, format!("unknown type {:?}", row.kind))
        })?;
        let status = AccountStatus::parse(&row.status).ok_or_else(|| {
            crate::db::corrupt(
                "accounts",
                &row.id,
                format!("unknown status {:?}", row.status),
            )
        })?;
        Ok(LockedAccount {
            id: row.id,
            currency: row.currency,
            kind,
            status,
            overdraft_limit: row.overdraft_limit,
        })
    }
}

/// A wallet's running state while a batch is decided: where its chain continues and what
/// its open holds reserve.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WalletState {
    pub sequence: i64,
    pub balance: i64,
    pub pending_out: i64,
    pub pending_in: i64,
    pub ledger_time: Option<DateTime<Utc>>,
}

/// Locks the accounts of a set of transactions in one statement: wallets exclusively, in
/// sorted id order (each ORDER BY runs before its rows are locked one by one), then system
/// accounts shared so that they never serialize writers, or, with `exclusive_systems`, also
/// exclusively (a writer that may take one near the edge of the range, see `bounds.rs`). One
/// lock strength for all the system accounts of a statement keeps them in one sorted order.
pub(crate) async fn lock_accounts(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    exclusive_systems: bool,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    let locked = sqlx::query_as!(
        LockedRow,
        r#"with wallets as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'wallet' order by id for update),
           shared as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'system' and not $2 order by id for share),
           exclusive as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'system' and $2 order by id for update)
           select id as "id!", currency as "currency!", kind as "kind!", status as "status!",
                  overdraft_limit as "overdraft_limit!"
           from wallets
           union all
           select id, currency, kind, status, overdraft_limit from shared
           union all
           select id, currency, kind, status, overdraft_limit from exclusive"#,
        sorted_ids,
        exclusive_systems
    )
    .fetch_all(&mut *conn)
    .await?;
    locked
        .into_iter()
        .map(|row| LockedAccount::try_from(row).map(|a| (a.id.clone(), a)))
        .collect()
}

/// Which of these accounts and transactions another transaction holds locked right now,
/// in a mode that would make [`lock_accounts`] or [`lock_originals`] wait. Asked without
/// waiting (`skip locked`), in one autocommit statement each, so it takes no lock of its own.
pub(crate) async fn held_elsewhere(
    conn: &mut PgConnection,
    account_ids: &[String],
    transaction_ids: &[Uuid],
) -> Result<(Vec<String>, Vec<Uuid>), sqlx::Error> {
    let accounts = sqlx::query_scalar!(
        r#"with wallets as (
               select id from accounts
               where id = any($1) and type = 'wallet' for update skip locked),
           systems as (
               select id from accounts
               where id = any($1) and type = 'system' for share skip locked)
           select a.id from accounts a
           where a.id = any($1)
             and a.id not in (select id from wallets union all select id from systems)"#,
        account_ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let transactions = if transaction_ids.is_empty() {
        Vec::new()
    } else {
        sqlx::query_scalar!(
            r#"with free as (
                   select id from transactions where id = any($1) for update skip locked)
               select t.id from transactions t
               where t.id = any($1) and t.id not in (select id from free)"#,
            transaction_ids
        )
        .fetch_all(&mut *conn)
        .await?
    };
    Ok((accounts, transactions))
}

/// Waits until these rows are free (taking their locks as a write would, in the same order,
/// and letting them go at once), holding no other row meanwhile, for at most `wait`.
/// `Ok(false)` when the wait ran out.
pub(crate) async fn wait_for_rows(
    conn: &mut PgConnection,
    account_ids: &[String],
    transaction_ids: &[Uuid],
    wait: std::time::Duration,
) -> Result<bool, WriteError> {
    let mut accounts = account_ids.to_vec();
    accounts.sort();
    accounts.dedup();
    let mut transactions = transaction_ids.to_vec();
    transactions.sort();
    transactions.dedup();
    let mut tx = begin(conn, LockWait::Bounded(wait)).await?;
    let locked = async {
        if !transactions.is_empty() {
            lock_originals(&mut tx, &transactions).await?;
        }
        lock_accounts(&mut tx, &accounts, false).await
    };
    match locked.await.map_err(WriteError::from) {
        Ok(_) => {
            tx.rollback().await?;
            Ok(true)
        }
        Err(e) if is_lock_timeout(&e) => {
            tx.rollback().await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The last entry and the open-hold reservations of each wallet, read after its lock (in a
/// statement of their own: one that also took the lock would read from before it). The
/// reservations are the `open_hold_totals` view, as balance reads show them; `offset 0` keeps
/// the lateral a per-wallet probe of `open_holds_account` (pulled up into a plain join, the
/// view would be aggregated over every open hold).
pub(crate) async fn wallet_states(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    if wallets.is_empty() {
        return Ok(HashMap::new());
    }
    let states = sqlx::query!(
        r#"select w.id as "id!", h.sequence, h.balance_after, h.ledger_time as "ledger_time?",
                  coalesce(p.pending_out, 0) as "pending_out!",
                  coalesce(p.pending_in, 0) as "pending_in!"
           from unnest($1::text[]) as w(id)
           left join lateral (
               select sequence, balance_after, ledger_time from entries
               where account_id = w.id and sequence is not null
               order by sequence desc limit 1) h on true
           left join lateral (
               select pending_out, pending_in from open_hold_totals where account_id = w.id
               offset 0) p on true"#,
        wallets
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(states
        .into_iter()
        .map(|r| {
            let state = WalletState {
                sequence: r.sequence.unwrap_or(0),
                balance: r.balance_after.unwrap_or(0),
                pending_out: r.pending_out,
                pending_in: r.pending_in,
                ledger_time: r.ledger_time,
            };
            (r.id, state)
        })
        .collect())
}

/// The accounts and wallet states of a batch, locked, and the reversal totals of its originals.
struct LockedLedger {
    accounts: BTreeMap<String, LockedAccount>,
    /// Clearing accounts that do not exist yet: decided as the active system accounts they
    /// will be, created only if a posted or held item uses them.
    virtual_accounts: BTreeMap<String, Currency>,
    wallets: HashMap<String, WalletState>,
    /// The running state of each existing system account (virtual ones start at zero).
    systems: HashMap<String, SystemState>,
    /// Whether the system accounts were locked shared although the batch could take one of them
    /// near the edge of the range: it must be decided again with them locked exclusively.
    needs_exclusive: bool,
    reversed: HashMap<Uuid, i64>,
}

impl LockedLedger {
    async fn lock(
        conn: &mut PgConnection,
        items: &[&NewTransaction],
        exclusive_systems: bool,
    ) -> Result<LockedLedger, StoreError> {
        let mut originals: Vec<Uuid> = items
            .iter()
            .filter_map(|i| i.reversal.map(|r| r.original))
            .collect();
        originals.sort();
        originals.dedup();
        let reversed = if originals.is_empty() {
            HashMap::new()
        } else {
            lock_originals(conn, &originals).await?
        };

        let mut ids: Vec<String> = items
            .iter()
            .flat_map(|i| i.journal.legs().iter().map(|l| l.account.to_string()))
            .collect();
        ids.sort();
        ids.dedup();
        let mut accounts = lock_accounts(conn, &ids, exclusive_systems).await?;
        let mut virtual_accounts = BTreeMap::new();
        for (clearing, currency) in items.iter().filter_map(|i| i.clearing_account.as_ref()) {
            if !accounts.contains_key(clearing.as_str()) {
                virtual_accounts.insert(clearing.to_string(), *currency);
                accounts.insert(
                    clearing.to_string(),
                    LockedAccount {
                        id: clearing.to_string(),
                        currency: currency.code().to_owned(),
                        kind: AccountType::System,
                        status: AccountStatus::Active,
                        overdraft_limit: 0,
                    },
                );
            }
        }
        let wallet_ids: Vec<String> = accounts
            .values()
            .filter(|a| a.kind == AccountType::Wallet)
            .map(|a| a.id.clone())
            .collect();
        let wallets = wallet_states(conn, &wallet_ids).await?;
        let system_ids: Vec<String> = accounts
            .values()
            .filter(|a| a.kind == AccountType::System)
            .filter(|a| !virtual_accounts.contains_key(&a.id))
            .map(|a| a.id.clone())
            .collect();
        let systems = bounds::system_states(conn, &system_ids).await?;
        // Everything the batch could move on each system account, whatever it decides.
        let mut movement: HashMap<String, i64> = HashMap::new();
        for leg in items.iter().flat_map(|i| i.journal.legs()) {
            let id = leg.account.as_str();
            if accounts
                .get(id)
                .is_some_and(|a| a.kind == AccountType::System)
            {
                let moved = movement.entry(id.to_owned()).or_default();
                *moved = moved.saturating_add(leg.amount.minor_units().abs());
            }
        }
        let needs_exclusive = !exclusive_systems && !systems.fast(&movement);
        Ok(LockedLedger {
            accounts,
            virtual_accounts,
            wallets,
            systems: systems.states,
            needs_exclusive,
            reversed,
        })
    }

    /// The range rules that depend on the running state, for an item about to be posted or
    /// held: a posted wallet balance is checked where its entry is computed; here a wallet's
    /// pending totals and every bounded sum of a system account (see `bounds.rs`).
    fn range_errors(&self, item: &NewTransaction) -> Option<FieldError> {
        let pending = matches!(item.status, Requested::Pending { .. });
        let overflow = |leg: &Leg| {
            Some(FieldError::new(
                leg.amount_field.clone(),
                "balance_overflow",
                format!(
                    "the balances of {} would leave the range ±9007199254740991",
                    leg.account
                ),
            ))
        };
        for leg in item.journal.legs() {
            let amount = leg.amount.minor_units();
            let id = leg.account.as_str();
            if let Some(wallet) = self.wallets.get(id) {
                let total = if amount < 0 {
                    wallet.pending_out
                } else {
                    wallet.pending_in
                };
                if pending
                    && total
                        .checked_add(amount.abs())
                        .is_none_or(|t| t > MAX_AMOUNT)
                {
                    return overflow(leg);
                }
                continue;
            }
            let state = self.systems.get(id).copied().unwrap_or_default();
            let (posted, held) = if pending { (0, amount) } else { (amount, 0) };
            if state.after(posted, held).is_none() {
                return overflow(leg);
            }
        }
        None
    }

    /// Applies a posted or held item to the running state of its system accounts (wallets are
    /// updated where the decision is made).
    fn apply_to_systems(&mut self, item: &NewTransaction) {
        let pending = matches!(item.status, Requested::Pending { .. });
        for leg in item.journal.legs() {
            let id = leg.account.as_str();
            if self.wallets.contains_key(id) {
                continue;
            }
            let amount = leg.amount.minor_units();
            let (posted, held) = if pending { (0, amount) } else { (amount, 0) };
            let state = self.systems.entry(id.to_owned()).or_default();
            // Checked by `range_errors` just before.
            *state = state.after(posted, held).unwrap_or(*state);
        }
    }

    fn clearing_accounts_to_create(&self, rows: &[&Rendered]) -> Vec<(AccountId, Currency)> {
        let used: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.status == "posted" || r.status == "pending")
            .flat_map(|r| r.view.entries.iter().map(|l| l.account.as_str()))
            .collect();
        self.virtual_accounts
            .iter()
            .filter(|(id, _)| used.contains(id.as_str()))
            .filter_map(|(id, currency)| AccountId::parse(id).map(|a| (a, *currency)))
            .collect()
    }

    /// Decides one item against the state left by the items before it, and applies it.
    fn decide(&mut self, item: &NewTransaction, now: DateTime<Utc>) -> Result<Decision, ItemError> {
        let legs = item.journal.legs();
        let unknown: Vec<String> = legs
            .iter()
            .filter(|l| !self.accounts.contains_key(l.account.as_str()))
            .map(|l| l.account.to_string())
            .collect();
        if !unknown.is_empty() {
            return Err(ItemError::UnknownAccounts(unknown));
        }
        let account = |leg: &Leg| &self.accounts[leg.account.as_str()];
        let currency = check_shape(item, &account)?;
        if let Requested::Pending { expires_at } = item.status
            && expires_at <= now
        {
            let error = FieldError::new("/expires_at", "range", "must be in the future");
            return Err(ItemError::Invalid(vec![error]));
        }
        if item.status == Requested::Voided {
            // A record that nothing moved: no refusal applies, no balance changes.
            return Ok(Decision::Record { currency });
        }

        // Refusals, in a fixed order: closed (any leg), frozen (debits), the reversal's
        // remainder, funds.
        if let Some(leg) = legs
            .iter()
            .find(|l| account(l).status == AccountStatus::Closed)
        {
            // A provider's refund is money already paid out: a stored refusal would be a
            // record nobody reads. It is answered as not storable, so the caller (the stream
            // consumer) dead-letters it and an operator decides.
            if item.provider_initiated {
                return Err(ItemError::Invalid(vec![FieldError::new(
                    leg.account_field.clone(),
                    RefusalCode::AccountClosed.as_str(),
                    format!("account {} is closed", leg.account),
                )]));
            }
            return Ok(refuse(
                currency,
                RefusalCode::AccountClosed,
                format!("account {} is closed", leg.account),
            ));
        }
        if let Some(leg) = legs.iter().find(|l| {
            l.amount.is_negative()
                && account(l).status == AccountStatus::Frozen
                && !item.provider_initiated
        }) {
            return Ok(refuse(
                currency,
                RefusalCode::AccountFrozen,
                format!("account {} is frozen: it cannot be debited", leg.account),
            ));
        }
        if let Some(r) = item.reversal {
            let already = self.reversed.get(&r.original).copied().unwrap_or(0);
            if already + r.amount > r.original_amount {
                let detail = format!(
                    "{} of {} is already reversed; {} more would exceed the original",
                    currency.format(already),
                    currency.format(r.original_amount),
                    currency.format(r.amount)
                );
                return Ok(refuse(
                    currency,
                    RefusalCode::ReversalExceedsOriginal,
                    detail,
                ));
            }
        }

        let mut afters: Vec<Option<i64>> = Vec::with_capacity(legs.len());
        for leg in legs {
            let Some(state) = self.wallets.get(account(leg).id.as_str()) else {
                afters.push(None); // system account: no chain, no check, may go negative
                continue;
            };
            let after = Amount::new(state.balance).and_then(|b| b.checked_add(leg.amount));
            // Debits past the safe range are refused below as beyond any overdraft, except
            // a provider's refund, which no overdraft check stops.
            if after.is_none() && (!leg.amount.is_negative() || item.provider_initiated) {
                return Err(ItemError::Invalid(vec![FieldError::new(
                    leg.amount_field.clone(),
                    "balance_overflow",
                    format!(
                        "the balance of {} would exceed 9007199254740991",
                        leg.account
                    ),
                )]));
            }
            afters.push(after.map(Amount::minor_units));
        }
        if let Some(error) = self.range_errors(item) {
            return Err(ItemError::Invalid(vec![error]));
        }
        // Every debit, held or posted, must leave `available` (posted − pending_out) within
        // the overdraft limit; a debit past the safe range is past any limit.
        let checked_debits = legs
            .iter()
            .filter(|l| l.amount.is_negative() && !item.provider_initiated);
        for leg in checked_debits {
            let a = account(leg);
            let Some(state) = self.wallets.get(a.id.as_str()) else {
                continue;
            };
            let available = state.balance - state.pending_out;
            let covered = available
                .checked_add(leg.amount.minor_units())
                .is_some_and(|left| left >= -a.overdraft_limit);
            if !covered {
                let detail = format!(
                    "account {} has {} {currency} available (overdraft limit {}); the debit is {}",
                    a.id,
                    currency.format(available),
                    currency.format(a.overdraft_limit),
                    currency.format(-leg.amount.minor_units()),
                );
                return Ok(refuse(currency, RefusalCode::InsufficientFunds, detail));
            }
        }

        self.apply_to_systems(item);
        if let Requested::Pending { expires_at } = item.status {
            for leg in legs {
                if let Some(state) = self.wallets.get_mut(leg.account.as_str()) {
                    let amount = leg.amount.minor_units();
                    if amount < 0 {
                        state.pending_out -= amount;
                    } else {
                        state.pending_in += amount;
                    }
                }
            }
            let holds = legs
                .iter()
                .map(|l| holds::OpenHold {
                    transaction_id: item.id,
                    account: l.account.to_string(),
                    amount: l.amount.minor_units(),
                    expires_at,
                })
                .collect();
            return Ok(Decision::Hold {
                currency,
                holds,
                expires_at,
            });
        }

        // Ledger time never decreases along an account's chain, whatever the clocks say.
        let ledger_time = legs
            .iter()
            .filter_map(|l| {
                self.wallets
                    .get(l.account.as_str())
                    .and_then(|s| s.ledger_time)
            })
            .fold(now, DateTime::max);
        let mut entries = Vec::with_capacity(legs.len());
        for (leg, after) in legs.iter().zip(afters) {
            let sequence = self.wallets.get_mut(leg.account.as_str()).map(|state| {
                state.sequence += 1;
                state.balance = after.unwrap_or(state.balance);
                state.ledger_time = Some(ledger_time);
                state.sequence
            });
            entries.push(NewEntry {
                account: leg.account.to_string(),
                amount: leg.amount.minor_units(),
                sequence,
                balance_after: after,
            });
        }
        if let Some(r) = item.reversal {
            *self.reversed.entry(r.original).or_default() += r.amount;
        }
        Ok(Decision::Post {
            currency,
            entries,
            ledger_time,
        })
    }
}

/// Locks the originals of reversals (sorted) and sums what is already reversed of each,
/// from the reversal rows themselves.
async fn lock_originals(
    conn: &mut PgConnection,
    sorted: &[Uuid],
) -> Result<HashMap<Uuid, i64>, sqlx::Error> {
    sqlx::query!(
        "select id from transactions where id = any($1) order by id for update",
        sorted
    )
    .fetch_all(&mut *conn)
    .await?;
    let sums = sqlx::query!(
        r#"select reverses as "original!", coalesce(sum(reversed_amount), 0)::bigint as "reversed!"
           from transactions where reverses = any($1) and status = 'posted' group by reverses"#,
        sorted
    )
    .fetch_all(conn)
    .await?;
    Ok(sums.into_iter().map(|r| (r.original, r.reversed)).collect())
}

/// Request problems found once the accounts are known: one currency per transaction (the
/// one the caller named, else the first leg's account's), and wallets where a wallet is due.
fn check_shape<'a>(
    item: &NewTransaction,
    account: &impl Fn(&Leg) -> &'a LockedAccount,
) -> Result<Currency, ItemError> {
    let legs = item.journal.legs();
    let (code, field) = match &item.currency {
        Some((c, field)) => (c.code().to_owned(), field.clone()),
        None => (
            account(&legs[0]).currency.clone(),
            legs[0].account_field.clone(),
        ),
    };
    let mut errors = Vec::new();
    for leg in legs {
        let a = account(leg);
        if a.currency != code {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "currency_mismatch",
                format!(
                    "account {} holds {}, but this transaction is in {code} ({field})",
                    a.id, a.currency
                ),
            ));
        }
        if leg.must_be_wallet && a.kind != AccountType::Wallet {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "not_a_wallet",
                format!("account {} is not a wallet", a.id),
            ));
        }
    }
    if let Some((clearing, _)) = &item.clearing_account
        && let Some(leg) = legs.iter().find(|l| &l.account == clearing)
        && account(leg).kind != AccountType::System
    {
        errors.push(FieldError::new(
            "/provider",
            "not_a_system_account",
            format!("account {clearing} exists but is not a system account"),
        ));
    }
    let currency = Currency::parse(&code);
    if currency.is_none() {
        errors.push(FieldError::new(
            field,
            "unknown_currency",
            format!("unknown currency {code}"),
        ));
    }
    match currency {
        Some(c) if errors.is_empty() => Ok(c),
        _ => Err(ItemError::Invalid(errors)),
    }
}

fn refuse(currency: Currency, code: RefusalCode, detail: String) -> Decision {
    Decision::Refuse {
        currency,
        code,
        detail,
    }
}

/// An entry ready to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewEntry {
    pub account: String,
    pub amount: i64,
    pub sequence: Option<i64>,
    pub balance_after: Option<i64>,
}

#[derive(Debug)]
enum Decision {
    Post {
        currency: Currency,
        entries: Vec<NewEntry>,
        ledger_time: DateTime<Utc>,
    },
    Hold {
        currency: Currency,
        holds: Vec<holds::OpenHold>,
        expires_at: DateTime<Utc>,
    },
    Refuse {
        currency: Currency,
        code: RefusalCode,
        detail: String,
    },
    /// Stored as `voided`: see [`Requested::Voided`].
    Record { currency: Currency },
}

/// A decided item, rendered: its row, entries and holds, and the exact answer it gets.
#[derive(Debug, Clone)]
struct Rendered {
    item_id: Uuid,
    kind: &'static str,
    status: &'static str,
    view: TransactionView,
    account_ids: Vec<String>,
    /// The canonical request as JSON text: what the insert sends (a tree would be copied).
    request: String,
    refusal: Option<RefusalView>,
    creation_status: i16,
    body: String,
    reverses: Option<Uuid>,
    reversed_amount: Option<i64>,
    entries: Vec<NewEntry>,
    holds: Vec<holds::OpenHold>,
}

impl Rendered {
    fn outcome(&self) -> Created {
        if self.creation_status == 201 {
            Created::New {
                body: self.body.clone(),
            }
        } else {
            Created::Refused {
                body: self.body.clone(),
            }
        }
    }
}

fn render(item: &NewTransaction, decision: &Decision, now: DateTime<Utc>) -> Rendered {
    let (status, currency, posted_at, expires_at, refusal) = match decision {
        Decision::Post {
            currency,
            ledger_time,
            ..
        } => ("posted", *currency, Some(*ledger_time), None, None),
        Decision::Hold {
            currency,
            expires_at,
            ..
        } => ("pending", *currency, None, Some(*expires_at), None),
        Decision::Refuse {
            currency,
            code,
            detail,
        } => (
            "rejected",
            *currency,
            None,
            None,
            Some((
                *code,
                RefusalView {
                    code: code.as_str().to_owned(),
                    detail: detail.clone(),
                },
            )),
        ),
        Decision::Record { currency } => ("voided", *currency, None, None, None),
    };
    let view = TransactionView {
        id: item.id,
        kind: item.kind.as_str().to_owned(),
        status: status.to_owned(),
        currency: currency.code().to_owned(),
        entries: item
            .journal
            .legs()
            .iter()
            .map(|l| LegView {
                account: l.account.to_string(),
                amount: l.amount.minor_units(),
                amount_decimal: currency.format(l.amount.minor_units()),
            })
            .collect(),
        external_ref: item.external_ref.clone(),
        metadata: item.metadata.clone(),
        refusal: refusal.as_ref().map(|(_, view)| view.clone()),
        created_at: now,
        posted_at,
        expires_at,
        reverses: item.reversal.map(|r| r.original),
        captured_amount: None,
        captured_amount_decimal: None,
        authorized_amount: None,
        authorized_amount_decimal: None,
    };
    let (creation_status, body) = match &refusal {
        None => (
            201,
            serde_json::to_string(&view).expect("a transaction view always serializes"),
        ),
        Some((code, view)) => (422, refusal_body(item.id, *code, &view.detail)),
    };
    let (entries, holds) = match decision {
        Decision::Post { entries, .. } => (entries.clone(), Vec::new()),
        Decision::Hold { holds, .. } => (Vec::new(), holds.clone()),
        Decision::Refuse { .. } | Decision::Record { .. } => (Vec::new(), Vec::new()),
    };
    Rendered {
        item_id: item.id,
        kind: item.kind.as_str(),
        status,
        view,
        account_ids: item.journal.sorted_accounts(),
        request: item.request.to_string(),
        refusal: refusal.map(|(_, view)| view),
        creation_status,
        body,
        reverses: item.reversal.map(|r| r.original),
        reversed_amount: item.reversal.map(|r| r.amount),
        entries,
        holds,
    }
}

/// The problem body of a stored refusal; a retry gets these exact bytes again.
pub fn refusal_body(id: Uuid, code: RefusalCode, detail: &str) -> String {
    let mut problem = Problem::new(422, code.as_str(), code.title(), detail);
    problem.instance = Some(format!("/v1/transactions/{id}"));
    serde_json::to_string(&problem).expect("a problem always serializes")
}

/// All rows in one statement, in id order (so two batches sharing ids wait on each other in
/// one order, never in a cycle). `false` when a concurrent request took one of the ids (the
/// insert waited for its commit and skipped the row): the caller rolls back and decides again.
async fn insert_transactions(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<bool, sqlx::Error> {
    if rows.is_empty() {
        return Ok(true);
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.item_id).collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r.kind).collect();
    let statuses: Vec<&str> = rows.iter().map(|r| r.status).collect();
    let currencies: Vec<&str> = rows.iter().map(|r| r.view.currency.as_str()).collect();
    // The JSON columns travel as text and are cast in SQL: serializing once is cheaper than
    // building a tree per row only for the driver to serialize it.
    let legs: Vec<String> = rows.iter().map(|r| json_text(&r.view.entries)).collect();
    // Account ids cannot contain a comma, so each row's list travels as one joined string.
    let account_ids: Vec<String> = rows.iter().map(|r| r.account_ids.join(",")).collect();
    let external_refs: Vec<Option<&str>> = rows
        .iter()
        .map(|r| r.view.external_ref.as_deref())
        .collect();
    let metadata: Vec<String> = rows.iter().map(|r| json_text(&r.view.metadata)).collect();
    let refusal_codes: Vec<Option<&str>> = rows
        .iter()
        .map(|r| r.refusal.as_ref().map(|x| x.code.as_str()))
        .collect();
    let refusal_details: Vec<Option<&str>> = rows
        .iter()
        .map(|r| r.refusal.as_ref().map(|x| x.detail.as_str()))
        .collect();
    let requests: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
    let creation_statuses: Vec<i16> = rows.iter().map(|r| r.creation_status).collect();
    let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    let created: Vec<DateTime<Utc>> = rows.iter().map(|r| r.view.created_at).collect();
    let posted: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.posted_at).collect();
    let expires: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.expires_at).collect();
    let reverses: Vec<Option<Uuid>> = rows.iter().map(|r| r.reverses).collect();
    let reversed: Vec<Option<i64>> = rows.iter().map(|r| r.reversed_amount).collect();
    let inserted = sqlx::query_scalar!(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids, external_ref,
                                     metadata, refusal_code, refusal_detail, creation_request,
                                     creation_status, creation_response, created_at, posted_at,
                                     updated_at, expires_at, reverses, reversed_amount)
           select id, kind, status, currency, legs::jsonb, string_to_array(account_ids, ','),
                  external_ref, metadata::jsonb, refusal_code, refusal_detail, request::jsonb,
                  creation_status, body,
                  created_at, posted_at, created_at, expires_at, reverses, reversed_amount
           from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                       $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                       $12::int2[], $13::text[], $14::timestamptz[], $15::timestamptz[],
                       $16::timestamptz[], $17::uuid[], $18::bigint[])
                as r(id, kind, status, currency, legs, account_ids, external_ref, metadata,
                     refusal_code, refusal_detail, request, creation_status, body, created_at,
                     posted_at, expires_at, reverses, reversed_amount)
           order by id
           on conflict (id) do nothing
           returning id"#,
        &ids,
        &kinds as &[&str],
        &statuses as &[&str],
        &currencies as &[&str],
        &legs,
        &account_ids,
        &external_refs as &[Option<&str>],
        &metadata,
        &refusal_codes as &[Option<&str>],
        &refusal_details as &[Option<&str>],
        &requests as &[&str],
        &creation_statuses,
        &bodies as &[&str],
        &created,
        &posted as &[Option<DateTime<Utc>>],
        &expires as &[Option<DateTime<Utc>>],
        &reverses as &[Option<Uuid>],
        &reversed as &[Option<i64>],
    )
    .fetch_all(conn)
    .await?;
    Ok(inserted.len() == rows.len())
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a view always serializes")
}

/// Every entry of every posted row in one statement: the journal trigger checks them as a set.
async fn insert_entries(conn: &mut PgConnection, rows: &[&Rendered]) -> Result<(), sqlx::Error> {
    let posted: Vec<(&Rendered, &NewEntry)> = rows
        .iter()
        .flat_map(|r| r.entries.iter().map(move |e| (*r, e)))
        .collect();
    insert_entry_rows(
        conn,
        &posted
            .iter()
            .map(|(r, e)| {
                (
                    r.item_id,
                    r.view.currency.as_str(),
                    r.view.posted_at.unwrap_or(r.view.created_at),
                    *e,
                )
            })
            .collect::<Vec<_>>(),
    )
    .await
}

/// Inserts entries `(transaction, currency, ledger time, entry)` in one statement.
pub(crate) async fn insert_entry_rows(
    conn: &mut PgConnection,
    entries: &[(Uuid, &str, DateTime<Utc>, &NewEntry)],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let transactions: Vec<Uuid> = entries.iter().map(|e| e.0).collect();
    let currencies: Vec<&str> = entries.iter().map(|e| e.1).collect();
    let times: Vec<DateTime<Utc>> = entries.iter().map(|e| e.2).collect();
    let accounts: Vec<&str> = entries.iter().map(|e| e.3.account.as_str()).collect();
    let amounts: Vec<i64> = entries.iter().map(|e| e.3.amount).collect();
    let sequences: Vec<Option<i64>> = entries.iter().map(|e| e.3.sequence).collect();
    let balances: Vec<Option<i64>> = entries.iter().map(|e| e.3.balance_after).collect();
    sqlx::query!(
        r#"insert into entries (transaction_id, account_id, currency, amount, sequence,
                                balance_after, ledger_time)
           select transaction_id, account, currency, amount, sequence, balance_after, ledger_time
           from unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                       $6::bigint[], $7::timestamptz[])
                with ordinality as e(transaction_id, account, currency, amount, sequence,
                                     balance_after, ledger_time, n)
           order by n"#,
        &transactions,
        &accounts as &[&str],
        &currencies as &[&str],
        &amounts,
        &sequences as &[Option<i64>],
        &balances as &[Option<i64>],
        &times,
    )
    .execute(conn)
    .await?;
    Ok(())
}
