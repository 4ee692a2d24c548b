//! Group commit: single creates that arrive concurrently are written together, in one
//! database transaction and one COMMIT, by the same set-based write path as a batch
//! ([`posting::create_group`]), and each caller still gets exactly the answer its single call
//! would have got (created, refused, replayed, mismatch, unknown account, invalid).
//!
//! Why: a durable COMMIT costs an fsync (milliseconds here), and a wallet's row lock is held
//! through it. One transaction per request caps a hot wallet near a few hundred writes a
//! second; one transaction per *group* pays the fsync and takes each lock once for all of them.
//!
//! How: callers queue a job on a bounded channel (full = the caller waits: backpressure). A
//! gatherer takes a job, then everything already queued, then waits at most `max_wait` for
//! more, up to `max_items`; it hands the group to a commit task and gathers the next one while
//! at most `max_in_flight` groups are being written. Under load the queue fills while the
//! groups in flight commit, so groups grow with the load; a lone request waits at most
//! `max_wait`.
//!
//! Isolation: an item's own problem is its own answer (the write path decides items one by
//! one). If the database rejects a whole group for a reason that is not the database's health
//! (a bug, a constraint no decision foresaw), the group is written again one item at a time,
//! so one bad request never fails its neighbours. A caller that stopped waiting (its request
//! timed out, answered 503) is never written: it is left out of the group it would join, and
//! a group whose COMMIT finds one of its callers gone (`ledger::caller`: the claim before
//! COMMIT and the deadline are one atomic step) rolls back and is written again without it.
//!
//! Retries: an id whose committed creation a group read back is kept in a [`ReplayCache`],
//! so the next retry of it is answered before it ever queues.
//!
//! Rows locked elsewhere: a group waits at most `--group-commit-lock-timeout-ms` for a row
//! lock. One held longer (an operator's `SELECT ... FOR UPDATE`, a long report, a consumer
//! batch) would otherwise hold the group, both slots, and every wallet's writes behind it.
//! On that timeout nothing of the group was written; the rows some transaction holds right
//! now are looked up without waiting, the items touching them are written apart, and the
//! rest of the group is written again at once. Those rows are *suspected* for twice the lock
//! timeout: new items touching them, and queued ones when their group forms, go apart too
//! rather than cost another group a lock timeout (a mere neighbour, whose row was only busy,
//! is written apart at once, its rows free). An item written apart waits for its locked rows
//! holding no other; a row still locked after one more lock timeout counts as held elsewhere
//! (a row this writer's other group holds is free by then) and keeps new items out of the
//! groups for [`BLOCKED_FOR`], or until an item written apart gets it. Items waiting on a
//! held row take turns, [`WRITERS_APART`] at a time, apart from those whose rows are only
//! busy, so an unrelated transfer never queues behind them: its latency does not grow with
//! the number of creates waiting on a locked wallet.

use super::Created;
use super::audit::{self, Actor};
use super::caller::{self, Caller};
use super::posting::{self, LockWait};
use super::replay_cache::ReplayCache;
use super::store::{self, Store};
use super::transactions::{NewTransaction, WriteError};
use crate::db::StoreError;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

pub const DEFAULT_GROUP_COMMIT_MAX_ITEMS: usize = 500;
pub const DEFAULT_GROUP_COMMIT_MAX_WAIT_US: u64 = 0;
/// Two groups at once: one writes while the next gathers and waits for the first's locks.
/// More only split the same load into smaller groups (more statements per transfer) and, on
/// a hot wallet, queue on its lock (docs/performance.md, third round).
pub const DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT: usize = 2;
/// Far above a group's own lock waits behind the other group in flight (milliseconds, a
/// whole group's COMMIT), far below a request's timeout.
pub const DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS: u64 = 500;

/// How concurrent single creates are gathered into groups.
#[derive(Debug, Clone, Copy)]
pub struct GroupCommitSettings {
    /// Most creates written in one database transaction.
    pub max_items: usize,
    /// How long a group waits for more creates after taking those already queued.
    pub max_wait_us: u64,
    /// Most groups being written at once (each holds one database connection).
    pub max_in_flight: usize,
    /// Most bytes of retried creations' stored answers kept in memory (0: off).
    pub replay_cache_bytes: u64,
    /// How long a group waits for a row lock held elsewhere before writing those items apart.
    pub lock_timeout_ms: u64,
}

impl Default for GroupCommitSettings {
    fn default() -> GroupCommitSettings {
        GroupCommitSettings {
            max_items: DEFAULT_GROUP_COMMIT_MAX_ITEMS,
            max_wait_us: DEFAULT_GROUP_COMMIT_MAX_WAIT_US,
            max_in_flight: DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT,
            replay_cache_bytes: super::replay_cache::DEFAULT_REPLAY_CACHE_BYTES,
            lock_timeout_ms: DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS,
        }
    }
}

/// Connections that items set apart (their rows locked elsewhere) may wait on at once.
pub const WRITERS_APART: usize = 2;
/// How long rows found locked elsewhere keep new items out of the groups.
pub const BLOCKED_FOR: Duration = Duration::from_secs(5);
/// Lock timeouts one group meets before its remaining items are all written apart.
const LOCK_ROUNDS: usize = 3;
/// The longest an item set apart waits for its rows at a time (see [`longer_wait`]), and so
/// the longest its write may keep its other rows locked while it waits for a busy one.
const LONGEST_WAIT_APART: Duration = Duration::from_secs(4);

/// The wait an item set apart takes after its last one ran out: twice as long, at most
/// [`LONGEST_WAIT_APART`]. A row lock is granted in the order it was asked for, so a wait
/// that starts again with the same length at the back of a queue longer than that (a hot
/// wallet whose captures and batches wait for its row as long as it takes) never reaches
/// the front: the create was answered 503 at its deadline although the row changed hands
/// many times a second. A doubled wait reaches the front of any queue that moves.
fn longer_wait(wait: Duration) -> Duration {
    wait.saturating_mul(2).min(LONGEST_WAIT_APART)
}

/// The writer behind every single create of the API. Cloning shares it.
#[derive(Clone)]
pub struct GroupCommit {
    jobs: mpsc::Sender<Job>,
    replays: Arc<ReplayCache>,
    locks: Arc<Locks>,
}

struct Job {
    item: NewTransaction,
    actor: Option<Actor>,
    /// The request's deadline state: the job is committed only while it still waits.
    caller: Option<Caller>,
    answer: oneshot::Sender<Result<Created, WriteError>>,
}

impl Job {
    /// Whether the caller still waits: a caller answered 503 is never written.
    fn waited_for(&self) -> bool {
        !self.answer.is_closed() && !self.caller.as_ref().is_some_and(Caller::is_abandoned)
    }

    fn callers(&self) -> &[Caller] {
        self.caller.as_slice()
    }
}

fn callers_of(group: &[Job]) -> Vec<Caller> {
    group.iter().filter_map(|j| j.caller.clone()).collect()
}

impl GroupCommit {
    /// Starts the gatherer on the current runtime; it stops when every clone is dropped. No
    /// shutdown token: the queue's end is its natural stop. A request still finishing while
    /// the server drains must be written, and once the last clone (the last `AppState`) is
    /// gone no request can come, so the gatherer ends after writing what it already holds.
    pub fn start(store: Store, config: GroupCommitSettings) -> GroupCommit {
        let capacity = config.max_items * config.max_in_flight * 2;
        let (jobs, queue) = mpsc::channel(capacity.max(1));
        let replays = Arc::new(ReplayCache::new(config.replay_cache_bytes));
        let locks = Arc::new(Locks::new(store.clone(), replays.clone(), &config));
        tokio::spawn(gather(store, config, queue, replays.clone(), locks.clone()));
        GroupCommit {
            jobs,
            replays,
            locks,
        }
    }

    /// How many creates wait in the queue for the gatherer (not yet taken into a group). It
    /// is what the queue's bounded channel reports, so it costs nothing to keep.
    pub fn queued(&self) -> usize {
        self.jobs.max_capacity() - self.jobs.capacity()
    }

    /// Creates one transaction exactly once per id, together with whatever else is being
    /// created at the same moment; answered as a batch of one (`posting::create_many`) would be.
    pub async fn create(&self, item: NewTransaction) -> Result<Created, WriteError> {
        if let Some(replayed) = self.replays.answer(item.id, &item.request) {
            metrics::counter!("wallet_ledger_replay_cache_hits_total").increment(1);
            return Ok(replayed);
        }
        let (answer, answered) = oneshot::channel();
        let job = Job {
            item,
            actor: audit::current(),
            caller: caller::current(),
            answer,
        };
        if self.locks.keeps_out(&job.item) {
            self.locks.clone().write_apart(job);
        } else {
            self.jobs.send(job).await.map_err(|_| stopped())?;
        }
        answered
            .await
            .map_err(|_| stopped())?
            .map(caller::recognise)
    }
}

/// The gatherer is gone (the runtime is shutting down): nothing of the job was written.
fn stopped() -> WriteError {
    WriteError::Database(StoreError::Stopped)
}

async fn gather(
    store: Store,
    config: GroupCommitSettings,
    mut queue: mpsc::Receiver<Job>,
    replays: Arc<ReplayCache>,
    locks: Arc<Locks>,
) {
    let in_flight = Arc::new(Semaphore::new(config.max_in_flight));
    let max_wait = Duration::from_micros(config.max_wait_us);
    loop {
        // Wait for a free slot first: while every slot commits, jobs pile up in the queue and
        // the next group takes them all.
        let Ok(slot) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = queue.recv().await else {
            return;
        };
        let mut group = vec![first];
        let deadline = Instant::now() + max_wait;
        while group.len() < config.max_items {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                // Past the deadline (always, with no wait configured), stop at once: a timer
                // armed for "now" still fires only at the timer's next millisecond tick, which
                // would add up to 1 ms to every lone request.
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() >= deadline => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, queue.recv()).await {
                        Ok(Some(job)) => group.push(job),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
        let store = store.clone();
        let replays = replays.clone();
        let locks = locks.clone();
        tokio::spawn(async move {
            commit(&store, group, &replays, &locks).await;
            drop(slot);
        });
    }
}

/// Writes one group, setting apart the items whose rows are locked elsewhere, and answers
/// each of its callers.
async fn commit(store: &Store, group: Vec<Job>, replays: &ReplayCache, locks: &Arc<Locks>) {
    let mut group: Vec<Job> = group.into_iter().filter(Job::waited_for).collect();
    for _ in 0..LOCK_ROUNDS {
        // Rows found held (or suspected) since these jobs queued: theirs go apart.
        group = locks.set_apart(group, |job| locks.keeps_out(&job.item));
        if group.is_empty() {
            return;
        }
        metrics::histogram!("wallet_ledger_group_commit_size").record(group.len() as f64);
        let (items, actors): (Vec<NewTransaction>, Vec<Option<Actor>>) = group
            .iter()
            .map(|j| (j.item.clone(), j.actor.clone()))
            .unzip();
        let callers = callers_of(&group);
        let result = posting::create_group(
            store,
            &items,
            &actors,
            &callers,
            LockWait::Bounded(locks.lock_timeout),
        )
        .await;
        match result {
            // A caller gave up before the COMMIT: nothing was written; the rest go again.
            Err(WriteError::CallerGone) => group.retain(Job::waited_for),
            Err(e) if posting::is_lock_timeout(&e) => {
                metrics::counter!("wallet_ledger_group_commit_lock_timeouts_total").increment(1);
                // Some row locked now held this group past its lock timeout: the items that
                // touch one wait apart (and tell held rows from busy ones there), the rest is
                // written again at once, not after another wait.
                let keys: HashSet<LockKey> = items.iter().flat_map(lock_keys).collect();
                let locked = locks.locked_now(&keys).await;
                locks.suspect(&locked);
                group = locks.set_apart(group, |job| touches(job, &locked));
            }
            result => return answer(store, group, result, replays).await,
        }
    }
    // Still waiting with no row found held: what holds the group is not a row lock this can
    // see (an id another transaction is inserting, say). Each item waits on its own.
    for job in group {
        locks.clone().write_apart(job);
    }
}

type GroupResult = Result<
    (
        Vec<posting::ItemOutcome>,
        Vec<(Uuid, posting::StoredCreation)>,
    ),
    WriteError,
>;

async fn answer(store: &Store, group: Vec<Job>, result: GroupResult, replays: &ReplayCache) {
    match result {
        Ok((outcomes, read_back)) => {
            replays.remember(read_back);
            for (job, outcome) in group.into_iter().zip(outcomes) {
                let _ = job.answer.send(outcome.map_err(WriteError::Item));
            }
        }
        Err(e) if group.len() == 1 => {
            if let Some(job) = group.into_iter().next() {
                let _ = job.answer.send(Err(e));
            }
        }
        Err(e) if !e.is_transient() => {
            tracing::warn!(error = %e, size = group.len(), "group rejected; writing its items one by one");
            for job in group {
                let one = std::slice::from_ref(&job.item);
                let actor = std::slice::from_ref(&job.actor);
                let wait = LockWait::Unbounded;
                let answer = posting::create_group(store, one, actor, job.callers(), wait)
                    .await
                    .and_then(|(mut outcomes, _)| outcomes.pop().ok_or(WriteError::Contention))
                    .and_then(|outcome| outcome.map_err(WriteError::Item));
                let _ = job.answer.send(answer);
            }
        }
        // The database failed, not the group: every caller gets the same answer (503).
        Err(e) => {
            for job in group {
                let _ = job.answer.send(Err(e.clone()));
            }
        }
    }
}

/// A row a create locks: each account of its legs, and the transaction it reverses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum LockKey {
    Account(String),
    Transaction(Uuid),
}

fn lock_keys(item: &NewTransaction) -> Vec<LockKey> {
    let accounts = item
        .journal
        .legs()
        .iter()
        .map(|l| LockKey::Account(l.account.to_string()));
    let original = item.reversal.map(|r| LockKey::Transaction(r.original));
    accounts.chain(original).collect()
}

/// The rows of `keys` that `registry` names, found within `window` before `now`; older
/// entries are dropped.
fn named_rows(
    registry: &mut HashMap<LockKey, Instant>,
    keys: &HashSet<LockKey>,
    now: Instant,
    window: Duration,
) -> HashSet<LockKey> {
    if registry.is_empty() {
        return HashSet::new();
    }
    registry.retain(|_, since| now.duration_since(*since) < window);
    keys.iter()
        .filter(|k| registry.contains_key(*k))
        .cloned()
        .collect()
}

fn touches(job: &Job, rows: &HashSet<LockKey>) -> bool {
    lock_keys(&job.item).iter().any(|k| rows.contains(k))
}

fn split(keys: &HashSet<LockKey>) -> (Vec<String>, Vec<Uuid>) {
    let mut accounts = Vec::new();
    let mut transactions = Vec::new();
    for key in keys {
        match key {
            LockKey::Account(id) => accounts.push(id.clone()),
            LockKey::Transaction(id) => transactions.push(*id),
        }
    }
    (accounts, transactions)
}

/// What the writer knows of rows locked elsewhere, and the writers that wait for them.
struct Locks {
    store: Store,
    replays: Arc<ReplayCache>,
    /// Rows found held elsewhere, and when.
    blocked: Mutex<HashMap<LockKey, Instant>>,
    /// Rows found locked when a group met its lock timeout, and when: held elsewhere or only
    /// busy, told apart by the items set apart within twice the lock timeout.
    suspected: Mutex<HashMap<LockKey, Instant>>,
    writers_apart: Arc<Semaphore>,
    /// How long a group waits for a row lock, and an item set apart first waits for a locked
    /// row before it counts as held elsewhere. Each wait apart after one that ran out is
    /// longer ([`longer_wait`]).
    lock_timeout: Duration,
    /// Items set apart that wait for a held row, each on a connection of its own.
    waiters_apart: Arc<Semaphore>,
}

impl Locks {
    fn new(store: Store, replays: Arc<ReplayCache>, config: &GroupCommitSettings) -> Locks {
        Locks {
            store,
            replays,
            blocked: Mutex::new(HashMap::new()),
            suspected: Mutex::new(HashMap::new()),
            writers_apart: Arc::new(Semaphore::new(WRITERS_APART)),
            lock_timeout: Duration::from_millis(config.lock_timeout_ms),
            waiters_apart: Arc::new(Semaphore::new(WRITERS_APART)),
        }
    }

    /// Whether a new item stays out of the groups: it touches a row known held elsewhere,
    /// or one that just held a group past its lock timeout and is not yet told apart from a
    /// busy one. A suspect costs an item that is merely a neighbour one lookup (written
    /// apart at once, its rows free); keeping it in the groups could cost them a lock timeout.
    fn keeps_out(&self, item: &NewTransaction) -> bool {
        let keys: HashSet<LockKey> = lock_keys(item).into_iter().collect();
        if !self.blocked_rows(&keys).is_empty() {
            return true;
        }
        let mut suspected = lock(&self.suspected);
        !named_rows(&mut suspected, &keys, Instant::now(), self.lock_timeout * 2).is_empty()
    }

    fn suspect(&self, rows: &HashSet<LockKey>) {
        let now = Instant::now();
        let mut suspected = lock(&self.suspected);
        for key in rows {
            suspected.insert(key.clone(), now);
        }
    }

    /// Of `keys`, the rows known held elsewhere (found so within [`BLOCKED_FOR`]).
    fn blocked_rows(&self, keys: &HashSet<LockKey>) -> HashSet<LockKey> {
        named_rows(&mut lock(&self.blocked), keys, Instant::now(), BLOCKED_FOR)
    }

    /// Sends the jobs of `group` that `apart` picks to be written apart; returns the rest.
    fn set_apart(self: &Arc<Self>, group: Vec<Job>, apart: impl Fn(&Job) -> bool) -> Vec<Job> {
        let (apart, rest): (Vec<Job>, Vec<Job>) = group.into_iter().partition(|j| apart(j));
        for job in apart {
            self.clone().write_apart(job);
        }
        rest
    }

    /// Keeps new items touching `rows` out of the groups (see [`BLOCKED_FOR`]).
    fn block(&self, rows: &HashSet<LockKey>) {
        if rows.is_empty() {
            return;
        }
        tracing::info!(rows = ?rows, "rows locked elsewhere: their writes wait apart");
        let now = Instant::now();
        let mut blocked = lock(&self.blocked);
        for key in rows {
            blocked.insert(key.clone(), now);
        }
    }

    /// Of `keys`, those some transaction holds locked right now, without waiting. A failed
    /// lookup names none (the group is then simply written again).
    async fn locked_now(&self, keys: &HashSet<LockKey>) -> HashSet<LockKey> {
        let (accounts, transactions) = split(keys);
        let found = async {
            let mut conn = self.store.pool().acquire().await?;
            let db = &mut self.store.on(&mut conn);
            store::locks::held_elsewhere(db, &accounts, &transactions).await
        };
        match found.await {
            Ok((accounts, transactions)) => accounts
                .into_iter()
                .map(LockKey::Account)
                .chain(transactions.into_iter().map(LockKey::Transaction))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "could not look up which rows are locked");
                HashSet::new()
            }
        }
    }

    /// Writes one job on its own, on one of the connections kept for that, once the rows
    /// it needs are free. It waits for those rows holding no other (a write that waited
    /// holding the rest of its rows would hold up every writer of those), then writes with
    /// a bounded wait, and starts over if a row was taken again meanwhile. Each wait that
    /// runs out makes the next one longer ([`longer_wait`]), so that it gets through a queue
    /// of writers of a busy row. It stops trying when its caller has given up (answered
    /// 503), and its COMMIT happens only while the caller still waits (`ledger::caller`):
    /// nothing of it is written after a 503.
    fn write_apart(self: Arc<Self>, job: Job) {
        metrics::counter!("wallet_ledger_group_commit_set_apart_total").increment(1);
        tokio::spawn(async move {
            let keys: HashSet<LockKey> = lock_keys(&job.item).into_iter().collect();
            let one = std::slice::from_ref(&job.item);
            let actor = std::slice::from_ref(&job.actor);
            let mut wait = self.lock_timeout;
            loop {
                if !job.waited_for() {
                    return;
                }
                // Waiting for a held row and writing take separate permits: items waiting on
                // a row held for minutes never keep an item whose rows are free from writing.
                // Rows known held elsewhere are waited for by a few items at a time; a row
                // only seen locked (perhaps by a busy neighbour, for a moment) is waited for
                // at once, so that such an item never queues behind a held row's waiters.
                let known = self.blocked_rows(&keys);
                let locked = if known.is_empty() {
                    self.locked_now(&keys).await
                } else {
                    known
                };
                if !locked.is_empty() {
                    let _waiter = if self.blocked_rows(&locked).is_empty() {
                        None
                    } else {
                        match self.waiters_apart.acquire().await {
                            Ok(permit) => Some(permit),
                            Err(_) => return,
                        }
                    };
                    // A row still locked after a wait at least as long as a group's lock
                    // timeout is held elsewhere (no group of a writer holds one that long):
                    // new items touching it stay out of the groups until an item written
                    // apart gets it.
                    let held = self.still_held(locked, wait).await;
                    if !held.is_empty() {
                        self.block(&held);
                        wait = longer_wait(wait);
                        continue;
                    }
                }
                let Ok(_writer) = self.writers_apart.acquire().await else {
                    return;
                };
                let (store, callers) = (&self.store, job.callers());
                let written =
                    posting::create_group(store, one, actor, callers, LockWait::Bounded(wait))
                        .await;
                let answer = match written {
                    Err(e) if posting::is_lock_timeout(&e) => {
                        wait = longer_wait(wait);
                        continue;
                    }
                    // Answered 503 at its deadline: nothing written, nobody to answer.
                    Err(WriteError::CallerGone) => return,
                    Ok((mut outcomes, read_back)) => {
                        self.replays.remember(read_back);
                        let mut blocked = lock(&self.blocked);
                        for key in &keys {
                            blocked.remove(key);
                        }
                        outcomes.pop().ok_or(WriteError::Contention)
                    }
                    Err(e) => Err(e),
                };
                let _ = job
                    .answer
                    .send(answer.and_then(|o| o.map_err(WriteError::Item)));
                return;
            }
        });
    }

    /// Of `rows`, those still locked after `wait`, each waited for on its own (a row that
    /// only a busy neighbour locked for a moment is not counted).
    async fn still_held(&self, rows: HashSet<LockKey>, wait: Duration) -> HashSet<LockKey> {
        let waits = rows.into_iter().map(|key| async move {
            let row = HashSet::from([key.clone()]);
            (!self.wait_for(&row, wait).await).then_some(key)
        });
        futures_util::future::join_all(waits)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Waits at most `wait` until `rows` are free; `false` if they are not.
    async fn wait_for(&self, rows: &HashSet<LockKey>, wait: Duration) -> bool {
        let (accounts, transactions) = split(rows);
        let waited = async {
            let mut conn = self.store.pool().acquire().await?;
            let db = &mut self.store.on(&mut conn);
            posting::wait_for_rows(db, &accounts, &transactions, wait).await
        };
        match waited.await {
            Ok(free) => free,
            Err(e) => {
                tracing::warn!(error = %e, "could not wait for locked rows");
                tokio::time::sleep(wait).await;
                false
            }
        }
    }
}

/// The maps hold plain data, valid after any panic of a holder.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(id: &str) -> LockKey {
        LockKey::Account(id.to_owned())
    }

    #[test]
    fn a_row_is_kept_out_of_the_groups_only_within_its_window() {
        let start = Instant::now();
        let window = Duration::from_millis(600);
        let mut registry = HashMap::from([
            (account("locked"), start),
            (account("old"), start - Duration::from_secs(1)),
        ]);
        let keys = HashSet::from([account("locked"), account("old"), account("sink")]);
        let named = named_rows(&mut registry, &keys, start, window);
        assert_eq!(named, HashSet::from([account("locked")]));
        assert!(
            !registry.contains_key(&account("old")),
            "expired entries go"
        );
        let later = start + window;
        assert!(named_rows(&mut registry, &keys, later, window).is_empty());
        assert!(registry.is_empty());
    }

    #[test]
    fn a_wait_apart_doubles_up_to_its_longest() {
        let mut wait = Duration::from_millis(500);
        let mut waits = Vec::new();
        for _ in 0..5 {
            wait = longer_wait(wait);
            waits.push(wait.as_millis());
        }
        assert_eq!(waits, [1_000, 2_000, 4_000, 4_000, 4_000]);
        assert_eq!(longer_wait(Duration::MAX), LONGEST_WAIT_APART);
    }

    #[test]
    fn an_unrelated_item_is_never_named() {
        let now = Instant::now();
        let mut registry = HashMap::from([(account("locked"), now)]);
        let keys = HashSet::from([account("a"), account("b")]);
        assert!(named_rows(&mut registry, &keys, now, BLOCKED_FOR).is_empty());
        assert_eq!(registry.len(), 1, "others' entries stay");
    }
}
