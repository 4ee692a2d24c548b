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
//! timed out) before its group formed is left out: it was answered 503, so it is not written.
//!
//! Retries: an id whose committed creation a group read back is kept in a [`ReplayCache`],
//! so the next retry of it is answered before it ever queues.
//!
//! Rows locked elsewhere: a group waits at most `--group-commit-lock-timeout-ms` for a row
//! lock. One held longer (an operator's `SELECT ... FOR UPDATE`, a long report, a consumer
//! batch) would otherwise hold the group, both slots, and every wallet's writes behind it.
//! On that timeout nothing of the group was written; the rows some transaction holds are
//! looked up without waiting, and those still held after one more lock timeout count as
//! held elsewhere (a row this writer's other group holds is free by then: that group commits
//! or gives up within its own timeout). The items touching them are written apart, each on
//! its own, on at most [`WRITERS_APART`] connections, once their rows are free; the rest of
//! the group is written again at once. For [`BLOCKED_FOR`] after, or until an item written
//! apart gets the lock, new items touching those rows skip the groups too.

use super::Created;
use super::audit::{self, Actor};
use super::posting::{self, LockWait};
use super::replay_cache::ReplayCache;
use super::transactions::{NewTransaction, WriteError};
use crate::db::{Engine, StoreError};
use sqlx::PgPool;
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
/// How long an item set apart waits for its rows at a time before it checks that its caller
/// still waits.
const WAIT_APART: Duration = Duration::from_secs(1);
/// Lock timeouts one group meets before its remaining items are all written apart.
const LOCK_ROUNDS: usize = 3;

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
    answer: oneshot::Sender<Result<Created, WriteError>>,
}

impl GroupCommit {
    /// Starts the gatherer on the current runtime; it stops when every clone is dropped. No
    /// shutdown token: the queue's end is its natural stop. A request still finishing while
    /// the server drains must be written, and once the last clone (the last `AppState`) is
    /// gone no request can come, so the gatherer ends after writing what it already holds.
    pub fn start(pool: PgPool, engine: Engine, config: GroupCommitSettings) -> GroupCommit {
        let capacity = config.max_items * config.max_in_flight * 2;
        let (jobs, queue) = mpsc::channel(capacity.max(1));
        let replays = Arc::new(ReplayCache::new(config.replay_cache_bytes));
        let locks = Arc::new(Locks::new(pool.clone(), engine, replays.clone(), &config));
        tokio::spawn(gather(pool, config, queue, replays.clone(), locks.clone()));
        GroupCommit {
            jobs,
            replays,
            locks,
        }
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
            answer,
        };
        if self.locks.is_blocked(&job.item) {
            self.locks.clone().write_apart(job);
        } else {
            self.jobs.send(job).await.map_err(|_| stopped())?;
        }
        answered.await.map_err(|_| stopped())?
    }
}

/// The gatherer is gone (the runtime is shutting down): nothing of the job was written.
fn stopped() -> WriteError {
    WriteError::Database(StoreError::Stopped)
}

async fn gather(
    pool: PgPool,
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
        let pool = pool.clone();
        let replays = replays.clone();
        let locks = locks.clone();
        tokio::spawn(async move {
            commit(&pool, group, &replays, &locks).await;
            drop(slot);
        });
    }
}

/// Writes one group, setting apart the items whose rows are locked elsewhere, and answers
/// each of its callers.
async fn commit(pool: &PgPool, group: Vec<Job>, replays: &ReplayCache, locks: &Arc<Locks>) {
    let mut group: Vec<Job> = group
        .into_iter()
        .filter(|j| !j.answer.is_closed())
        .collect();
    for _ in 0..LOCK_ROUNDS {
        if group.is_empty() {
            return;
        }
        metrics::histogram!("wallet_ledger_group_commit_size").record(group.len() as f64);
        let (items, actors): (Vec<NewTransaction>, Vec<Option<Actor>>) = group
            .iter()
            .map(|j| (j.item.clone(), j.actor.clone()))
            .unzip();
        let result =
            posting::create_group(pool, locks.engine, &items, &actors, locks.group_wait).await;
        match result {
            Err(e) if posting::is_lock_timeout(&e) => {
                metrics::counter!("wallet_ledger_group_commit_lock_timeouts_total").increment(1);
                let keys: HashSet<LockKey> = items.iter().flat_map(lock_keys).collect();
                let held = locks.held_elsewhere(&keys).await;
                let (apart, rest): (Vec<Job>, Vec<Job>) = group
                    .into_iter()
                    .partition(|j| lock_keys(&j.item).iter().any(|k| held.contains(k)));
                for job in apart {
                    locks.clone().write_apart(job);
                }
                group = rest;
            }
            result => return answer(pool, locks.engine, group, result, replays).await,
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

async fn answer(
    pool: &PgPool,
    engine: Engine,
    group: Vec<Job>,
    result: GroupResult,
    replays: &ReplayCache,
) {
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
                let answer = posting::create_group(pool, engine, one, actor, LockWait::Unbounded)
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
    pool: PgPool,
    engine: Engine,
    replays: Arc<ReplayCache>,
    group_wait: LockWait,
    /// Rows found held elsewhere, and when.
    blocked: Mutex<HashMap<LockKey, Instant>>,
    writers_apart: Arc<Semaphore>,
}

impl Locks {
    fn new(
        pool: PgPool,
        engine: Engine,
        replays: Arc<ReplayCache>,
        config: &GroupCommitSettings,
    ) -> Locks {
        Locks {
            pool,
            engine,
            replays,
            group_wait: LockWait::Bounded(Duration::from_millis(config.lock_timeout_ms)),
            blocked: Mutex::new(HashMap::new()),
            writers_apart: Arc::new(Semaphore::new(WRITERS_APART)),
        }
    }

    fn is_blocked(&self, item: &NewTransaction) -> bool {
        let mut blocked = lock(&self.blocked);
        if blocked.is_empty() {
            return false;
        }
        let now = Instant::now();
        blocked.retain(|_, since| now.duration_since(*since) < BLOCKED_FOR);
        lock_keys(item).iter().any(|k| blocked.contains_key(k))
    }

    /// Of `keys`, those some transaction holds locked and still holds after the group lock
    /// timeout. That wait tells the rows held elsewhere from those this writer's other group
    /// holds (or some other process's writer): such a group commits, or gives up on its own
    /// lock timeout, within that time. A failed lookup names none (the group is then simply
    /// written again).
    async fn held_elsewhere(&self, keys: &HashSet<LockKey>) -> HashSet<LockKey> {
        let (accounts, transactions) = split(keys);
        let found = async {
            let mut conn = self.pool.acquire().await?;
            posting::held_elsewhere(&mut conn, self.engine, &accounts, &transactions).await
        };
        let (accounts, transactions) = match found.await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "could not look up which rows are locked");
                return HashSet::new();
            }
        };
        let candidates = accounts
            .into_iter()
            .map(LockKey::Account)
            .chain(transactions.into_iter().map(LockKey::Transaction));
        let LockWait::Bounded(patience) = self.group_wait else {
            return HashSet::new();
        };
        let still_held = candidates.map(|key| async move {
            let row = HashSet::from([key.clone()]);
            (!self.wait_for(&row, patience).await).then_some(key)
        });
        let held: HashSet<LockKey> = futures_util::future::join_all(still_held)
            .await
            .into_iter()
            .flatten()
            .collect();
        if !held.is_empty() {
            tracing::info!(rows = ?held, "rows locked elsewhere: their writes wait apart");
            let now = Instant::now();
            let mut blocked = lock(&self.blocked);
            for key in &held {
                blocked.insert(key.clone(), now);
            }
        }
        held
    }

    /// Writes one job on its own, on one of the connections kept for that, once the rows
    /// it needs are free. It waits for those rows holding no other (a write that waited
    /// holding the rest of its rows would hold up every writer of those), then writes with
    /// the group's bounded wait, and starts over if a row was taken again meanwhile. It
    /// stops trying when its caller has given up (answered 503: nothing of it written).
    fn write_apart(self: Arc<Self>, job: Job) {
        metrics::counter!("wallet_ledger_group_commit_set_apart_total").increment(1);
        tokio::spawn(async move {
            let keys: HashSet<LockKey> = lock_keys(&job.item).into_iter().collect();
            let one = std::slice::from_ref(&job.item);
            let actor = std::slice::from_ref(&job.actor);
            loop {
                let Ok(_writer) = self.writers_apart.acquire().await else {
                    return;
                };
                if job.answer.is_closed() {
                    return;
                }
                let held = self.held_elsewhere(&keys).await;
                if !held.is_empty() && !self.wait_for(&held, WAIT_APART).await {
                    continue;
                }
                let written =
                    posting::create_group(&self.pool, self.engine, one, actor, self.group_wait)
                        .await;
                let answer = match written {
                    Err(e) if posting::is_lock_timeout(&e) => continue,
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

    /// Waits at most `wait` until `rows` are free; `false` if they are not.
    async fn wait_for(&self, rows: &HashSet<LockKey>, wait: Duration) -> bool {
        let (accounts, transactions) = split(rows);
        let waited = async {
            let mut conn = self.pool.acquire().await?;
            posting::wait_for_rows(&mut conn, self.engine, &accounts, &transactions, wait).await
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
