//! The one write path that creates transactions: a single transfer, payment, multi-leg
//! transaction, hold or reversal, and a batch of up to a thousand of them, all go through
//! [`create_many`] (the API's single creates grouped by `group_commit` into [`create_group`]),
//! set-based, in one database transaction.
//!
//! Order of work (why each step is as it is: `docs/architecture.md`, "The write path"):
//! 1. ids already stored are answered from their row (replay or mismatch); a batch whose ids
//!    are all stored is answered without taking a lock. Group commit on Citus skips this read
//!    ([`Replays::FoundByInsert`]): step 5's insert finds a stored id, and the pass that
//!    follows reads first;
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
//!
//! Steps 1 to 3 are `load` (locks and the typed state read after them), step 4 is `decide`
//! (pure: no connection, so its rules are unit- and property-tested), then `render` (the row
//! and the answer) and `apply` (the inserts); `chain` continues a wallet's chain for both
//! posting and captures. This module holds the pass and the retries around them.

mod apply;
mod chain;
/// Public for tests/citus, which hands the check breaches that the write path never makes.
pub mod cross_shard;
mod decide;
mod load;
mod render;

pub use chain::ChainHash;
pub(crate) use chain::EntryText;
pub(crate) use chain::{ChainHead, NewEntry, Part, ledger_time};
pub(crate) use decide::balances;
pub use load::StoredCreation;
pub(crate) use load::{
    LockedAccount, RuledSets, SystemLocks, WalletState, in_sets, lock_ruled_sets, monitored,
    wait_for_rows,
};
pub(crate) use render::Rendered;

use super::audit::{self, Actor};
use super::caller::{self, Caller};
use super::holds;
use super::monitors;
use super::store::{Db, Store, inserts, reads};
use super::transactions::{ItemError, NewTransaction, WriteError};
use super::{Created, accounts, now_micros};
use crate::db::StoreError;
use chrono::{DateTime, Utc};
use decide::LockedLedger;
use sqlx::PgConnection;
use std::collections::HashMap;
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
    store: &Store,
    items: &[NewTransaction],
    mode: Mode,
) -> Result<BatchResult, WriteError> {
    let mut conn = store.pool().acquire().await?;
    create_many_in(&mut store.on(&mut conn), items, mode).await
}

/// The items of several callers in one database transaction (group commit, see
/// [`super::group_commit`]): each item is answered exactly as its single call would be, and
/// its audit row names its own caller (`actors[i]` made `items[i]`). Also returns the
/// committed creations it read back for replays (for [`super::replay_cache`]).
pub(crate) async fn create_group(
    store: &Store,
    items: &[NewTransaction],
    actors: &[Option<Actor>],
    callers: &[Caller],
    lock_wait: LockWait,
) -> Result<(Vec<ItemOutcome>, Vec<(Uuid, StoredCreation)>), WriteError> {
    let mut conn = store.pool().acquire().await?;
    let mut read_back = Vec::new();
    let result = attempts(
        &mut store.on(&mut conn),
        items,
        Authors::Each(actors),
        Batch {
            mode: Mode::Independent,
            write: Write::Commit(Callers::Each(callers)),
        },
        Some(&mut read_back),
        Locking::new(lock_wait),
        reads::replays_of_a_group(store.engine()),
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
    db: &mut Db<'_>,
    items: &[NewTransaction],
    mode: Mode,
) -> Result<BatchResult, WriteError> {
    attempts(
        db,
        items,
        Authors::Current,
        Batch {
            mode,
            write: Write::Commit(Callers::Current),
        },
        None,
        Locking::new(LockWait::Unbounded),
        Replays::ReadFirst,
    )
    .await
}

/// Atomic mode without writing: the first item (in request order) that would not be
/// created, if any. Used to tell which of several bad items of a batch comes first.
pub async fn first_failure(
    store: &Store,
    items: &[NewTransaction],
) -> Result<Option<(usize, ItemOutcome)>, WriteError> {
    let mut conn = store.pool().acquire().await?;
    match attempts(
        &mut store.on(&mut conn),
        items,
        Authors::Current,
        Batch {
            mode: Mode::Atomic,
            write: Write::DryRun,
        },
        None,
        Locking::new(LockWait::Unbounded),
        Replays::ReadFirst,
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
    db: &mut Db<'_>,
    items: &[NewTransaction],
    authors: Authors<'_>,
    batch: Batch<'_>,
    mut read_back: Option<&mut Vec<(Uuid, StoredCreation)>>,
    mut locking: Locking,
    mut replays: Replays,
) -> Result<BatchResult, WriteError> {
    for _ in 0..MAX_ID_RACE_RETRIES {
        let pass = attempt(
            db,
            items,
            authors,
            batch,
            locking,
            replays,
            read_back.as_deref_mut(),
        );
        match pass.await {
            Ok(Pass::Done(result)) => return Ok(result),
            // A stored id (another writer's, or one the pass did not read): read first now.
            Ok(Pass::Again) => replays = Replays::ReadFirst,
            Ok(Pass::Exclusive) => locking.systems = SystemLocks::Exclusive,
            // Rows are inserted in id order and locks taken in a fixed order, so a deadlock
            // should not happen; if PostgreSQL still picks this attempt as a victim, nothing of
            // it was written and deciding again is safe.
            Err(WriteError::Database(StoreError::Conflict(_))) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(WriteError::Contention)
}

/// What a batch asks for: how its items are answered, and whether the pass writes them.
#[derive(Debug, Clone, Copy)]
struct Batch<'a> {
    mode: Mode,
    write: Write<'a>,
}

/// Whether a pass writes what it decided, or only answers (the first failure of a batch).
#[derive(Debug, Clone, Copy)]
enum Write<'a> {
    /// Commits only while these callers still wait (see [`caller::commit`]).
    Commit(Callers<'a>),
    DryRun,
}

/// Whose answer a pass's COMMIT decides: the current request's (a batch), or each grouped
/// caller's (group commit).
#[derive(Debug, Clone, Copy)]
enum Callers<'a> {
    Current,
    Each(&'a [Caller]),
}

impl Callers<'_> {
    fn to_vec(self) -> Vec<Caller> {
        match self {
            Callers::Current => caller::current().into_iter().collect(),
            Callers::Each(callers) => callers.to_vec(),
        }
    }
}

/// How a pass takes its locks: how strongly on system accounts, and how long it waits.
#[derive(Debug, Clone, Copy)]
struct Locking {
    systems: SystemLocks,
    wait: LockWait,
}

impl Locking {
    /// Shared locks on system accounts first; exclusive ones once a pass found that the batch
    /// could take one near the edge of the range (see `bounds.rs`), for the passes that follow.
    fn new(wait: LockWait) -> Locking {
        Locking {
            systems: SystemLocks::Shared,
            wait,
        }
    }
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

/// Whether an answer means "not created" for an atomic batch: a refusal (first or
/// replayed), a mismatch, an item error.
fn fails(outcome: &ItemOutcome) -> bool {
    !outcome.as_ref().is_ok_and(Created::is_created)
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

/// Whether a pass reads the stored creations of its ids before it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replays {
    /// Read first: a retried id is answered from its row, without taking a lock.
    ReadFirst,
    /// Decide without reading, for ids expected to be new: a stored id makes the insert skip
    /// its row ([`inserts::insert_transactions`]), and the batch is decided again, reading
    /// first. So only answers that the pass stores are given without the read: a pass that
    /// would answer an item without storing it (an unknown account or an invalid item, which
    /// store nothing; an atomic batch's failure; a dry run) reads first too.
    FoundByInsert,
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

/// One pass; with [`Write::DryRun`] nothing is written whatever the outcome.
async fn attempt(
    db: &mut Db<'_>,
    items: &[NewTransaction],
    authors: Authors<'_>,
    Batch { mode, write }: Batch<'_>,
    locking: Locking,
    replays: Replays,
    read_back: Option<&mut Vec<(Uuid, StoredCreation)>>,
) -> Result<Pass, WriteError> {
    let Locking {
        systems,
        wait: lock_wait,
    } = locking;
    let stored = match replays {
        Replays::ReadFirst => {
            let ids: Vec<Uuid> = items.iter().map(|i| i.id).collect();
            reads::stored_creations(db, &ids).await?
        }
        Replays::FoundByInsert => HashMap::new(),
    };
    if let Some(read_back) = read_back {
        read_back.extend(stored.iter().map(|(id, s)| (*id, s.clone())));
    }
    let undecided: Vec<&NewTransaction> = items
        .iter()
        .filter(|i| !stored.contains_key(&i.id))
        .collect();
    if undecided.is_empty() {
        // Every id is stored: a retried batch, answered without taking a lock.
        let outcomes: Vec<ItemOutcome> = items.iter().map(|i| replay(i, &stored[&i.id])).collect();
        let failure = failing_item(mode, &outcomes);
        return Ok(Pass::Done(finish(outcomes, failure)));
    }

    // The transaction's own handle for the statements that differ by engine.
    let engine = db.engine();
    let mut tx = begin(db.conn(), lock_wait).await?;
    let accounts = load::account_ids(&undecided);
    let mut at_once = None;
    if LockedLedger::tries_at_once(engine, &accounts, systems) {
        let mut first = Db::new(&mut tx, engine);
        at_once = LockedLedger::lock_at_once(&mut first, &undecided, &accounts, systems).await?;
        if at_once.is_none() {
            // A row was busy: lock again in a new transaction, in order, waiting.
            tx.rollback().await?;
            tx = begin(db.conn(), lock_wait).await?;
        }
    }
    let mut ledger = match at_once {
        Some(ledger) => ledger,
        None => {
            let mut db = Db::new(&mut tx, engine);
            LockedLedger::lock(&mut db, &undecided, &accounts, systems).await?
        }
    };
    if ledger.needs_exclusive {
        tx.rollback().await?;
        return Ok(Pass::Exclusive);
    }
    let decided = decide_all(&mut ledger, items, &stored, authors, now_micros());
    let failure = failing_item(mode, &decided.outcomes);
    if replays == Replays::FoundByInsert && !stores_every_answer(&decided.outcomes, failure, write)
    {
        tx.rollback().await?;
        return Ok(Pass::Again);
    }
    let callers = match write {
        Write::Commit(callers) if failure.is_none() => callers,
        _ => {
            tx.rollback().await?;
            return Ok(Pass::Done(finish(decided.outcomes, failure)));
        }
    };
    if !write_decided(&mut Db::new(&mut tx, engine), systems, &ledger, &decided).await? {
        tx.rollback().await?;
        return Ok(Pass::Again);
    }
    match caller::commit(tx, &callers.to_vec()).await? {
        caller::Gate::Committed => Ok(Pass::Done(finish(decided.outcomes, None))),
        caller::Gate::Abandoned => Err(WriteError::CallerGone),
    }
}

/// Whether the pass will store a row behind every answer it gives: only then can it answer
/// without having read its ids' stored creations ([`Replays::FoundByInsert`]).
fn stores_every_answer(outcomes: &[ItemOutcome], failure: Option<usize>, write: Write<'_>) -> bool {
    failure.is_none() && matches!(write, Write::Commit(_)) && outcomes.iter().all(Result::is_ok)
}

/// The answer to an item whose id is stored: a replay, or a mismatch.
fn replay(item: &NewTransaction, stored: &StoredCreation) -> ItemOutcome {
    Ok(Created::replay_or_mismatch(
        &stored.request,
        &item.request,
        stored.outcome.clone(),
    ))
}

/// The item that fails an atomic batch, if any; a batch of independent items never fails.
fn failing_item(mode: Mode, outcomes: &[ItemOutcome]) -> Option<usize> {
    if mode == Mode::Atomic {
        outcomes.iter().position(fails)
    } else {
        None
    }
}

/// What a pass decided: an answer per item, the rows to store, and the audit row of each.
struct Decided {
    outcomes: Vec<ItemOutcome>,
    rows: Vec<Rendered>,
    /// The audit row of each stored row: its resource and who asked for it.
    audited: Vec<(Option<Actor>, String)>,
}

/// Decides every item in order against the locked ledger (in memory, nothing written).
fn decide_all(
    ledger: &mut LockedLedger,
    items: &[NewTransaction],
    stored: &HashMap<Uuid, StoredCreation>,
    authors: Authors<'_>,
    now: DateTime<Utc>,
) -> Decided {
    let mut decided = Decided {
        outcomes: Vec::with_capacity(items.len()),
        rows: Vec::new(),
        audited: Vec::new(),
    };
    // Which item stores each id. An item that stores nothing (unknown account, invalid)
    // leaves its id free, so a later item with that id is decided afresh, as a later single
    // call would be.
    let mut stored_by: HashMap<Uuid, usize> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let outcome = if let Some(s) = stored.get(&item.id) {
            replay(item, s)
        } else if let Some(&first) = stored_by.get(&item.id) {
            same_id_as(&items[first], &decided.outcomes[first], item)
        } else {
            ledger.decide(item, now).map(|decision| {
                let row = render::render(item, &decision, now);
                let outcome = Created::First(row.outcome.clone());
                stored_by.insert(item.id, index);
                decided
                    .audited
                    .push((authors.of(index), item.id.to_string()));
                decided.rows.push(row);
                outcome
            })
        };
        decided.outcomes.push(outcome);
    }
    decided
}

/// Writes what was decided, every row of a kind in one statement. `false` when a concurrent
/// request took one of the ids, or created one of the clearing accounts and wrote to it: the
/// caller rolls back and decides again.
async fn write_decided(
    db: &mut Db<'_>,
    systems: SystemLocks,
    ledger: &LockedLedger,
    decided: &Decided,
) -> Result<bool, WriteError> {
    let rows: Vec<&Rendered> = decided.rows.iter().collect();
    let Some(inserted) = inserts::insert_transactions(db, &rows).await? else {
        return Ok(false);
    };
    let created = ledger.system_accounts_to_create(&rows);
    for (clearing, currency) in &created {
        // The account is created by (and audited as) the first row that uses it.
        let creator = rows
            .iter()
            .position(|r| r.moves_money() && r.account_ids.iter().any(|a| a == clearing.as_str()))
            .and_then(|i| decided.audited[i].0.clone());
        let create = accounts::ensure_system_account(db.conn(), clearing, *currency);
        match creator {
            Some(actor) => audit::scope(actor, create).await?,
            None => create.await?,
        }
    }
    if !created.is_empty() && !load::still_empty(db, &created, systems).await? {
        return Ok(false);
    }
    apply::insert_entries(db, &rows, &inserted).await?;
    let open_holds: Vec<&holds::OpenHold> = rows.iter().flat_map(|r| r.holds.iter()).collect();
    holds::insert_open_holds(db.conn(), &open_holds).await?;
    apply::record_for_sets(db.conn(), &ledger.accounts, &rows).await?;
    apply::record_events(db.conn(), &rows).await?;
    let now = decided
        .rows
        .first()
        .map_or_else(now_micros, |r| r.view.created_at);
    monitors::store::record_firings(db.conn(), &ledger.firings, now).await?;
    audit::record_each(db.conn(), "transaction.create", &decided.audited).await?;
    Ok(true)
}

/// An item whose id an earlier item of the same batch stored: it is answered as a retry of
/// that item would be (a replay, or a mismatch).
fn same_id_as(
    first: &NewTransaction,
    first_outcome: &ItemOutcome,
    item: &NewTransaction,
) -> ItemOutcome {
    match first_outcome {
        Ok(Created::First(outcome)) => Ok(Created::replay_or_mismatch(
            &first.request,
            &item.request,
            outcome.clone(),
        )),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Callers, ItemOutcome, Write, stores_every_answer};
    use crate::ledger::transactions::ItemError;
    use crate::ledger::{Created, Outcome};

    fn created() -> ItemOutcome {
        Ok(Created::First(Outcome::Created { body: "{}".into() }))
    }

    #[test]
    fn a_pass_that_did_not_read_answers_only_what_it_stores() {
        let commit = Write::Commit(Callers::Current);
        assert!(stores_every_answer(&[created(), created()], None, commit));
        let unknown = Err(ItemError::UnknownAccounts(vec!["nowhere".into()]));
        assert!(!stores_every_answer(&[created(), unknown], None, commit));
        assert!(!stores_every_answer(&[created()], Some(0), commit));
        assert!(!stores_every_answer(&[created()], None, Write::DryRun));
    }
}
