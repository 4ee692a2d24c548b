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

use super::Created;
use super::audit::{self, Actor};
use super::posting;
use super::replay_cache::ReplayCache;
use super::transactions::{NewTransaction, WriteError};
use crate::config::GroupCommitConfig;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

/// The writer behind every single create of the API. Cloning shares it.
#[derive(Clone)]
pub struct GroupCommit {
    jobs: mpsc::Sender<Job>,
    replays: Arc<ReplayCache>,
}

struct Job {
    item: NewTransaction,
    actor: Option<Actor>,
    answer: oneshot::Sender<Result<Created, WriteError>>,
}

impl GroupCommit {
    /// Starts the gatherer on the current runtime; it stops when every clone is dropped.
    pub fn start(pool: PgPool, config: GroupCommitConfig) -> GroupCommit {
        let capacity = config.max_items * config.max_in_flight * 2;
        let (jobs, queue) = mpsc::channel(capacity.max(1));
        let replays = Arc::new(ReplayCache::new(config.replay_cache_entries));
        tokio::spawn(gather(pool, config, queue, replays.clone()));
        GroupCommit { jobs, replays }
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
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// The gatherer is gone (the runtime is shutting down): nothing of the job was written.
fn stopped() -> WriteError {
    WriteError::Database(sqlx::Error::PoolClosed)
}

async fn gather(
    pool: PgPool,
    config: GroupCommitConfig,
    mut queue: mpsc::Receiver<Job>,
    replays: Arc<ReplayCache>,
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
        tokio::spawn(async move {
            commit(&pool, group, &replays).await;
            drop(slot);
        });
    }
}

/// Writes one group and answers each of its callers.
async fn commit(pool: &PgPool, group: Vec<Job>, replays: &ReplayCache) {
    let group: Vec<Job> = group
        .into_iter()
        .filter(|j| !j.answer.is_closed())
        .collect();
    if group.is_empty() {
        return;
    }
    metrics::histogram!("wallet_ledger_group_commit_size").record(group.len() as f64);
    let (items, actors): (Vec<NewTransaction>, Vec<Option<Actor>>) = group
        .iter()
        .map(|j| (j.item.clone(), j.actor.clone()))
        .unzip();
    match posting::create_group(pool, &items, &actors).await {
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
        Err(e) if !is_unavailable(&e) => {
            tracing::warn!(error = %e, size = group.len(), "group rejected; writing its items one by one");
            for job in group {
                let one = std::slice::from_ref(&job.item);
                let actor = std::slice::from_ref(&job.actor);
                let answer = posting::create_group(pool, one, actor)
                    .await
                    .and_then(|(mut outcomes, _)| outcomes.pop().ok_or(WriteError::Contention))
                    .and_then(|outcome| outcome.map_err(WriteError::Item));
                let _ = job.answer.send(answer);
            }
        }
        Err(e) => {
            for job in group {
                let _ = job.answer.send(Err(copy_of(&e)));
            }
        }
    }
}

/// The database (not the group) failed: every item gets the same answer, 503.
fn is_unavailable(error: &WriteError) -> bool {
    match error {
        WriteError::Contention => true,
        WriteError::Item(_) => false,
        WriteError::Database(e) => crate::db::is_unavailable(e),
    }
}

/// The same unavailability for each caller of a group (`sqlx::Error` is not `Clone`); it
/// answers 503 as the original would.
fn copy_of(error: &WriteError) -> WriteError {
    match error {
        WriteError::Item(item) => WriteError::Item(item.clone()),
        WriteError::Contention => WriteError::Contention,
        WriteError::Database(sqlx::Error::PoolTimedOut) => {
            WriteError::Database(sqlx::Error::PoolTimedOut)
        }
        WriteError::Database(e) => {
            WriteError::Database(sqlx::Error::Io(std::io::Error::other(e.to_string())))
        }
    }
}
