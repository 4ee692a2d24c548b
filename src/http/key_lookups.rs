//! API-key lookups shared by concurrent requests: one statement answers every request that
//! arrived while the previous lookup ran, instead of one statement per request.
//!
//! Why: a key is read from the database on every request, so that a revoked key is refused
//! from the very next request (no cache, no notification window). Under load that lookup was
//! the most frequent statement of all, more than the writes themselves: a round trip and a
//! statement's fixed cost in PostgreSQL per request.
//!
//! Still fresh: a request's key is checked by a statement that starts after the request
//! arrived (a job joins a lookup only while it is being gathered, never one already sent), so
//! a revocation committed before the request arrived is seen exactly as before.
//!
//! How: as `group_commit`, a gatherer takes the first job, then whatever is already queued (at
//! most `KEY_LOOKUP_MAX_BATCH`), and runs the lookup while at most `KEY_LOOKUP_IN_FLIGHT` run
//! at once. A lone request never waits for company.
//!
//! Connections: a lookup keeps its pooled connection for the next one instead of returning
//! it, while requests keep coming. sqlx pings every connection it gets back (a round trip and
//! a statement in PostgreSQL), which made the ping as frequent as the lookups themselves. The
//! kept connections go back to the pool once no request has come for `KEY_LOOKUP_KEEP_IDLE`,
//! shorter than the pool's default ping-when-idle threshold; a kept connection that failed is
//! dropped, not kept.

use crate::api_keys::{self, Principal};
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// API keys looked up by one statement at most.
pub const KEY_LOOKUP_MAX_BATCH: usize = 256;
/// Key lookups running at once; each holds one pooled connection for one statement.
pub const KEY_LOOKUP_IN_FLIGHT: usize = 2;
/// How long the key lookups keep their connections after the last request: below the pool's
/// default ping-when-idle threshold, so a kept connection has been idle no longer than one the
/// pool would hand out unchecked.
pub const KEY_LOOKUP_KEEP_IDLE: std::time::Duration = std::time::Duration::from_millis(100);
const _: () =
    assert!(KEY_LOOKUP_KEEP_IDLE.as_millis() < crate::db::DEFAULT_POOL_PING_IDLE_MS as u128);

/// Why a lookup gave no answer; the same for every request that shared it.
#[derive(Debug, Clone)]
pub enum LookupFailed {
    /// The database cannot be reached or the pool is exhausted (503).
    Unavailable(String),
    /// Anything else (500).
    Failed(String),
}

type Answer = Result<Option<Principal>, LookupFailed>;

struct Job {
    token_sha256: Vec<u8>,
    answer: oneshot::Sender<Answer>,
}

/// The lookups of one server. Cloning shares it.
#[derive(Clone)]
pub struct KeyLookups {
    jobs: mpsc::Sender<Job>,
}

impl KeyLookups {
    /// Starts the gatherer on the current runtime; it stops when every clone is dropped. No
    /// shutdown token, for the group-commit writer's reason: a request authenticated during
    /// the drain needs it, and no request can come once the last clone is gone.
    pub fn start(pool: PgPool) -> KeyLookups {
        let (jobs, queue) = mpsc::channel(KEY_LOOKUP_MAX_BATCH * KEY_LOOKUP_IN_FLIGHT * 2);
        tokio::spawn(gather(pool, queue));
        KeyLookups { jobs }
    }

    /// The key `token` belongs to, if it exists and is not revoked, read after this call began.
    pub async fn principal(&self, token: &str) -> Answer {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            token_sha256: api_keys::hash(token),
            answer,
        };
        let stopped = || LookupFailed::Unavailable("the server is shutting down".into());
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// The connections kept between lookups (at most one per lookup in flight).
#[derive(Default)]
struct Kept(Mutex<Vec<PoolConnection<Postgres>>>);

impl Kept {
    fn take(&self) -> Option<PoolConnection<Postgres>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn keep(&self, conn: PoolConnection<Postgres>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
    }

    /// Returns every kept connection to the pool.
    fn release(&self) {
        drop(std::mem::take(
            &mut *self.0.lock().unwrap_or_else(|e| e.into_inner()),
        ));
    }
}

async fn gather(pool: PgPool, mut queue: mpsc::Receiver<Job>) {
    let slots = Arc::new(Semaphore::new(KEY_LOOKUP_IN_FLIGHT));
    let kept = Arc::new(Kept::default());
    loop {
        let first = match tokio::time::timeout(KEY_LOOKUP_KEEP_IDLE, queue.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_quiet) => {
                // Quiet: the kept connections go back to the pool. A lookup still running
                // keeps its connection when it ends, so the timer goes on until none runs
                // (checked before releasing: no lookup starts but from this loop).
                let running = slots.available_permits() < KEY_LOOKUP_IN_FLIGHT;
                kept.release();
                if running {
                    continue;
                }
                match queue.recv().await {
                    Some(job) => job,
                    None => return,
                }
            }
        };
        // Wait for a free slot before gathering, so that what queues meanwhile joins this one.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut jobs = vec![first];
        while jobs.len() < KEY_LOOKUP_MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        let kept = kept.clone();
        tokio::spawn(async move {
            answer(&pool, &kept, jobs).await;
            drop(slot);
        });
    }
}

async fn answer(pool: &PgPool, kept: &Kept, jobs: Vec<Job>) {
    metrics::histogram!("wallet_ledger_key_lookup_size").record(jobs.len() as f64);
    let mut hashes: Vec<Vec<u8>> = jobs.iter().map(|j| j.token_sha256.clone()).collect();
    hashes.sort();
    hashes.dedup();
    let conn = match kept.take() {
        Some(conn) => Ok(conn),
        None => pool.acquire().await,
    };
    let found = match conn {
        Ok(mut conn) => {
            let found = api_keys::authenticate_many(&mut conn, &hashes).await;
            if found.is_ok() {
                kept.keep(conn);
            }
            found
        }
        Err(e) => Err(e),
    };
    match found {
        Ok(found) => {
            let found: HashMap<Vec<u8>, Principal> = found.into_iter().collect();
            for job in jobs {
                // A caller that stopped waiting is simply not answered.
                let _ = job.answer.send(Ok(found.get(&job.token_sha256).cloned()));
            }
        }
        Err(e) => {
            let e = crate::db::StoreError::from(e);
            let failed = if e.is_transient() {
                LookupFailed::Unavailable(e.to_string())
            } else {
                LookupFailed::Failed(e.to_string())
            };
            for job in jobs {
                let _ = job.answer.send(Err(failed.clone()));
            }
        }
    }
}
