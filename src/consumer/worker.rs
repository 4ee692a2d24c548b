//! One consumer's loop, as steps: reclaim or read a batch, apply it in one database
//! transaction, then acknowledge (duplicates too) and dead-letter, after COMMIT.
//! [`Consumer::step`] does one batch and says what it did, so tests drive it step by step.

use super::apply::{self, ApplyError, ApplySettings, Message, Outcome, Reason};
use super::stream::{Backlog, DeadLetter, StreamClient};
use crate::failpoint;
use crate::ledger::accounts;
use crate::ledger::audit::{self, Actor};
use crate::telemetry::Readiness;
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long an idle consumer's readiness check waits for the database.
const DATABASE_PING_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Settings {
    pub batch_size: usize,
    pub block: Duration,
    pub claim_idle: Duration,
    pub max_batch: Duration,
    pub max_failures: u32,
    pub outage_backoff: Duration,
    pub outage_backoff_max: Duration,
    pub stats_interval: Duration,
    /// `None`: never trim.
    pub trim_interval: Option<Duration>,
    pub apply: ApplySettings,
    pub print_events: bool,
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepReport {
    pub read: usize,
    pub reclaimed: usize,
    pub applied: usize,
    pub duplicates: usize,
    pub retried: usize,
    pub dead_lettered: usize,
    /// Shutdown came while the database was unreachable: the batch was left pending, to be
    /// reclaimed by another consumer (or this one after a restart).
    pub abandoned: bool,
}

impl StepReport {
    pub fn idle(&self) -> bool {
        self.read == 0
    }

    /// Adds what `other` applied, found duplicate and dead-lettered (a run's totals).
    pub fn add_totals(&mut self, other: &StepReport) {
        self.applied += other.applied;
        self.duplicates += other.duplicates;
        self.dead_lettered += other.dead_lettered;
    }
}

pub struct Consumer {
    pool: PgPool,
    stream: StreamClient,
    settings: Settings,
    readiness: Readiness,
    shutdown: Arc<AtomicBool>,
    reclaim_cursor: String,
    next_reclaim: Instant,
    next_stats: Instant,
    next_trim: Instant,
}

impl Consumer {
    pub fn new(
        pool: PgPool,
        stream: StreamClient,
        settings: Settings,
        readiness: Readiness,
        shutdown: Arc<AtomicBool>,
    ) -> Consumer {
        let now = Instant::now();
        Consumer {
            pool,
            stream,
            readiness,
            shutdown,
            reclaim_cursor: "0-0".to_owned(),
            next_reclaim: now,
            next_stats: now,
            next_trim: now + settings.trim_interval.unwrap_or_default(),
            settings,
        }
    }

    fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// One batch: reclaimed messages first (when a scan is due), else new ones.
    pub async fn step(&mut self) -> redis::RedisResult<StepReport> {
        let mut report = StepReport::default();
        let messages = match self.next_batch().await {
            Ok(messages) => messages,
            // The broker came back without the stream or the group (a restart without
            // persistence, a failover to a lagging replica, a deleted key): create them again
            // and read from the start. Payments are idempotent, so re-reading is safe.
            Err(e) if e.code() == Some("NOGROUP") => {
                tracing::warn!(error = %e, "the consumer group is gone; creating it again");
                self.stream.ensure_group().await?;
                self.reclaim_cursor = "0-0".to_owned();
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        report.read = messages.len();
        report.reclaimed = messages.iter().filter(|m| m.redelivered).count();
        if !messages.is_empty() {
            self.handle(&messages, &mut report).await?;
        }
        self.housekeeping(report.idle()).await;
        Ok(report)
    }

    async fn next_batch(&mut self) -> redis::RedisResult<Vec<Message>> {
        if Instant::now() >= self.next_reclaim {
            let (cursor, claimed) = self
                .stream
                .reclaim(
                    self.settings.claim_idle,
                    &self.reclaim_cursor,
                    self.settings.batch_size,
                )
                .await?;
            // A full scan done: the next one is due when anything pending now could be idle.
            if cursor == "0-0" {
                self.next_reclaim = Instant::now() + self.settings.claim_idle / 2;
            }
            self.reclaim_cursor = cursor;
            if !claimed.is_empty() {
                return Ok(claimed);
            }
        }
        let block = self.settings.block.min(
            self.next_reclaim
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        );
        self.stream.read_new(self.settings.batch_size, block).await
    }

    async fn handle(
        &mut self,
        messages: &[Message],
        report: &mut StepReport,
    ) -> redis::RedisResult<()> {
        let started = Instant::now();
        let Some(outcomes) = self.apply_until_done(messages).await else {
            report.abandoned = true;
            return Ok(());
        };
        metrics::histogram!("wallet_ledger_consumer_batch_size").record(messages.len() as f64);
        metrics::histogram!("wallet_ledger_consumer_batch_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        // Failures the messages caused are counted first, so that a message whose budget is
        // now spent is settled (and printed) as the dead letter it becomes.
        let mut settled: Vec<(Outcome, u32)> = Vec::with_capacity(outcomes.len());
        for (message, outcome) in messages.iter().zip(outcomes) {
            let Outcome::Retry { reason, detail } = outcome else {
                settled.push((outcome, 1));
                continue;
            };
            let failures = self.stream.record_failure(&message.id).await?;
            if failures >= self.settings.max_failures {
                let dead = Outcome::DeadLetter {
                    reason,
                    detail,
                    differing_fields: Vec::new(),
                };
                settled.push((dead, failures));
            } else {
                tracing::info!(id = %message.id, reason = reason.as_str(), %detail, failures, "left pending for a retry");
                settled.push((Outcome::Retry { reason, detail }, failures));
            }
        }
        if self.settings.print_events {
            let outcomes: Vec<Outcome> = settled.iter().map(|(o, _)| o.clone()).collect();
            self.print(messages, &outcomes).await;
        }
        failpoint::hit(failpoint::CONSUMER_AFTER_COMMIT);

        let mut acked: Vec<&str> = Vec::new();
        let mut dead: Vec<DeadLetter<'_>> = Vec::new();
        for (message, (outcome, failures)) in messages.iter().zip(&settled) {
            match outcome {
                Outcome::Applied(_) => {
                    report.applied += 1;
                    acked.push(&message.id);
                }
                Outcome::Duplicate => {
                    report.duplicates += 1;
                    acked.push(&message.id);
                }
                Outcome::DeadLetter {
                    reason,
                    detail,
                    differing_fields,
                } => dead.push(DeadLetter {
                    message,
                    reason: *reason,
                    detail,
                    differing_fields,
                    failures: *failures,
                }),
                Outcome::Retry { .. } => report.retried += 1,
            }
        }
        report.dead_lettered = dead.len();
        for letter in &dead {
            tracing::warn!(id = %letter.message.id, reason = letter.reason.as_str(), detail = letter.detail, "dead-lettered");
            metrics::counter!("wallet_ledger_consumer_dead_letters_total", "reason" => letter.reason.as_str()).increment(1);
        }
        self.settle(&acked, &dead).await?;
        count("applied", report.applied);
        count("duplicate", report.duplicates);
        count("retried", report.retried);
        count("dead_lettered", report.dead_lettered);
        metrics::gauge!("wallet_ledger_consumer_last_batch_timestamp_seconds").set(unix_now());
        Ok(())
    }

    /// Applies the batch, retrying while the database is unreachable (the messages are not
    /// charged for it, and nothing more is read meanwhile). `None` if shutdown came first.
    async fn apply_until_done(&mut self, messages: &[Message]) -> Option<Vec<Outcome>> {
        let mut backoff = self.settings.outage_backoff;
        loop {
            // The consumer writes as itself: its batches are audited under its name.
            let actor = Actor {
                key_id: None,
                owner: format!("consumer:{}", self.stream.consumer()),
                request_id: None,
            };
            let apply = apply::apply_batch(&self.pool, messages, self.settings.apply);
            let attempt =
                tokio::time::timeout(self.settings.max_batch, audit::scope(actor, apply)).await;
            let error = match attempt {
                Ok(Ok(outcomes)) => {
                    self.readiness.set(true);
                    metrics::gauge!("wallet_ledger_consumer_database_up").set(1.0);
                    return Some(outcomes);
                }
                Ok(Err(e)) if !is_transient(&e) => {
                    // Something in the batch itself makes the database refuse it: apply the
                    // messages one by one so that one bad message cannot hold up the others.
                    tracing::warn!(error = %e, "the batch was refused; applying its messages one by one");
                    return self.apply_one_by_one(messages).await;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("the batch took longer than {:?}", self.settings.max_batch),
            };
            self.readiness.set(false);
            metrics::gauge!("wallet_ledger_consumer_database_up").set(0.0);
            tracing::warn!(error, retry_in = ?backoff, "cannot apply the batch; the database seems unreachable");
            if !self.pause(backoff).await {
                return None;
            }
            backoff = (backoff * 2).min(self.settings.outage_backoff_max);
        }
    }

    async fn apply_one_by_one(&mut self, messages: &[Message]) -> Option<Vec<Outcome>> {
        let mut outcomes = Vec::with_capacity(messages.len());
        for message in messages {
            let one = std::slice::from_ref(message);
            let mut backoff = self.settings.outage_backoff;
            let outcome = loop {
                match apply::apply_batch(&self.pool, one, self.settings.apply).await {
                    Ok(mut o) => break o.remove(0),
                    Err(e) if !is_transient(&e) => {
                        break Outcome::Retry {
                            reason: Reason::MalformedEvent,
                            detail: format!("the ledger refused it: {e}"),
                        };
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot apply a message; the database seems unreachable");
                        if !self.pause(backoff).await {
                            return None;
                        }
                        backoff = (backoff * 2).min(self.settings.outage_backoff_max);
                    }
                }
            };
            outcomes.push(outcome);
        }
        Some(outcomes)
    }

    /// Sleeps `backoff` unless shutdown was asked for; `false` if it was.
    async fn pause(&self, backoff: Duration) -> bool {
        let until = Instant::now() + backoff;
        while Instant::now() < until {
            if self.stopping() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50).min(backoff)).await;
        }
        !self.stopping()
    }

    /// Acknowledges after COMMIT. While the broker is unreachable this retries (the database
    /// work is done and durable); if shutdown comes first the messages are redelivered later
    /// and meet their own committed effects as duplicates.
    async fn settle(&mut self, acked: &[&str], dead: &[DeadLetter<'_>]) -> redis::RedisResult<()> {
        let mut backoff = self.settings.outage_backoff;
        loop {
            match self.stream.settle(acked, dead).await {
                Ok(()) => {
                    self.readiness.set(true);
                    return Ok(());
                }
                Err(e) if self.stopping() => return Err(e),
                Err(e) => {
                    self.readiness.set(false);
                    tracing::warn!(error = %e, retry_in = ?backoff, "cannot acknowledge; will retry");
                    self.pause(backoff).await;
                    backoff = (backoff * 2).min(self.settings.outage_backoff_max);
                }
            }
        }
    }

    async fn housekeeping(&mut self, idle: bool) {
        let now = Instant::now();
        if idle || now >= self.next_stats {
            self.next_stats = now + self.settings.stats_interval;
            // The backlog read doubles as the broker's health check.
            let broker_up = match self.stream.backlog().await {
                Ok(backlog) => {
                    record_backlog(backlog);
                    true
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the group's backlog");
                    false
                }
            };
            if idle {
                // Nothing to apply says nothing about the database: ask it, so that /readyz
                // fails during an outage even when the stream is quiet. Ready means both
                // dependencies answer.
                let ping = tokio::time::timeout(
                    DATABASE_PING_TIMEOUT,
                    sqlx::query("select 1").execute(&self.pool),
                );
                let database_up = matches!(ping.await, Ok(Ok(_)));
                self.readiness.set(database_up && broker_up);
                let gauge = if database_up { 1.0 } else { 0.0 };
                metrics::gauge!("wallet_ledger_consumer_database_up").set(gauge);
            } else if !broker_up {
                self.readiness.set(false);
            }
        }
        if let Some(every) = self.settings.trim_interval
            && now >= self.next_trim
        {
            self.next_trim = now + every;
            match self.stream.trim().await {
                Ok(Some(min_id)) => {
                    tracing::debug!(%min_id, "stream trimmed below the oldest entry still needed")
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot trim the stream"),
            }
        }
    }

    /// Whether the group has nothing left: nothing pending with any consumer.
    pub async fn drained(&mut self) -> redis::RedisResult<bool> {
        let backlog = self.stream.backlog().await?;
        Ok(backlog.pending == 0 && backlog.lag.unwrap_or(0) == 0)
    }

    /// One line per message, as the seed article's lab prints them.
    async fn print(&self, messages: &[Message], outcomes: &[Outcome]) {
        let mut balances: HashMap<String, String> = HashMap::new();
        if let Ok(mut conn) = self.pool.acquire().await {
            for message in messages {
                let Some(wallet) = message.fields.get("wallet") else {
                    continue;
                };
                let wallet = String::from_utf8_lossy(wallet).into_owned();
                if let Ok(Some(account)) = accounts::find(&mut conn, &wallet).await
                    && let Ok(balance) = accounts::wallet_posted_balance(&mut conn, &wallet).await
                {
                    balances.insert(wallet, account.currency().format(balance));
                }
            }
        }
        for (message, outcome) in messages.iter().zip(outcomes) {
            let field = |name: &str| {
                message
                    .fields
                    .get(name)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            };
            let label = match (field("n"), field("event_id")) {
                (Some(n), _) => n,
                (None, Some(id)) => id.chars().take(8).collect(),
                (None, None) => "?".to_owned(),
            };
            let balance = field("wallet")
                .and_then(|w| balances.get(&w))
                .map(|b| format!(", balance {b}"))
                .unwrap_or_default();
            let result = match outcome {
                Outcome::Applied(effect) => format!("applied ({effect}){balance}"),
                Outcome::Duplicate => "duplicate, skipped".to_owned(),
                Outcome::Retry { reason, detail } => {
                    format!("left pending to retry ({}: {detail})", reason.as_str())
                }
                Outcome::DeadLetter { reason, detail, .. } => {
                    format!("dead-lettered ({}: {detail})", reason.as_str())
                }
            };
            let kind = if message.redelivered {
                "redelivered"
            } else {
                "new"
            };
            println!(
                "  {}: {}  event {label} ({kind}) -> {result}",
                self.stream.consumer(),
                message.id
            );
        }
    }
}

fn count(outcome: &'static str, n: usize) {
    if n > 0 {
        metrics::counter!("wallet_ledger_consumer_events_total", "outcome" => outcome)
            .increment(n as u64);
    }
}

fn record_backlog(backlog: Backlog) {
    metrics::gauge!("wallet_ledger_consumer_pending").set(backlog.pending as f64);
    if let Some(lag) = backlog.lag {
        metrics::gauge!("wallet_ledger_consumer_lag").set(lag as f64);
    }
}

/// Whole seconds since the epoch (a `u32` lasts until 2106), for the heartbeat gauge (a time, not money; the metrics
/// API converts it to a Prometheus sample, which is a float by definition).
fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// Errors that say nothing about the batch: the database is away, overloaded, restarting, or
/// picked this transaction as a deadlock victim. The same batch is applied again.
pub fn is_transient(error: &ApplyError) -> bool {
    let ApplyError::Database(e) = error else {
        return true;
    };
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection, 53: resources, 57: operator intervention (shutdown),
            // 58: system, 40001/40P01: serialization failure, deadlock.
            ["08", "53", "57", "58"]
                .iter()
                .any(|class| code.starts_with(class))
                || code == "40001"
                || code == "40P01"
        }),
        _ => false,
    }
}
