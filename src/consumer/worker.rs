//! One consumer's loop, as steps: reclaim or read a batch, apply it in one database
//! transaction, then acknowledge (duplicates too) and dead-letter, after COMMIT.
//! [`Consumer::step`] does one batch and says what it did, so tests drive it step by step.

use super::apply::{self, ApplyError, ApplySettings, Message, Outcome, Reason};
use super::stream::{Backlog, DeadLetter, StreamClient};
use crate::broker::is_outage;
use crate::db::StoreError;
use crate::failpoint;
use crate::ledger::accounts;
use crate::ledger::audit::{self, Actor};
use crate::ledger::store::{self, Store};
use crate::telemetry::Readiness;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long an idle consumer's readiness check waits for the database.
const DATABASE_PING_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a batch past its deadline is waited for once its statement was cancelled.
const LATE_BATCH_GRACE: Duration = Duration::from_secs(5);
const LATE_BATCH_RECHECK: Duration = Duration::from_millis(100);

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
    /// The pool with its engine, detected when it opened: each batch picks its statements by it.
    store: Store,
    stream: StreamClient,
    settings: Settings,
    readiness: Readiness,
    /// Cancelled at shutdown: backoffs end early and a batch the database cannot take is
    /// left pending (see `apply_parts` and `settle`).
    shutdown: CancellationToken,
    reclaim_cursor: String,
    next_reclaim: Instant,
    next_stats: Instant,
    next_trim: Instant,
    backlogs: Backlogs,
}

impl Consumer {
    pub fn new(
        store: Store,
        stream: StreamClient,
        settings: Settings,
        readiness: Readiness,
        shutdown: CancellationToken,
    ) -> Consumer {
        let now = Instant::now();
        Consumer {
            store,
            stream,
            readiness,
            shutdown,
            reclaim_cursor: "0-0".to_owned(),
            next_reclaim: now,
            next_stats: now,
            next_trim: now + settings.trim_interval.unwrap_or_default(),
            settings,
            backlogs: Backlogs::default(),
        }
    }

    /// Shares the backlog gauges with the process's other consumers, so that with several
    /// partition streams they show the sum over all of them.
    pub fn with_backlogs(mut self, backlogs: Backlogs) -> Consumer {
        self.backlogs = backlogs;
        self
    }

    /// This consumer's name in the group.
    pub fn name(&self) -> &str {
        self.stream.consumer()
    }

    fn stopping(&self) -> bool {
        self.shutdown.is_cancelled()
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
        let Some((messages, outcomes)) = self.apply_until_done(messages).await? else {
            report.abandoned = true;
            return Ok(());
        };
        let messages = &messages[..];
        metrics::histogram!("wallet_ledger_consumer_batch_size").record(messages.len() as f64);
        metrics::histogram!("wallet_ledger_consumer_batch_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        let settled = self.charge_failures(messages, outcomes).await?;
        if self.settings.print_events {
            let outcomes: Vec<Outcome> = settled.iter().map(|(o, _)| o.clone()).collect();
            self.print(messages, &outcomes).await;
        }
        failpoint::hit(failpoint::CONSUMER_AFTER_COMMIT);

        let (acked, dead) = sort_settled(messages, &settled, report);
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

    /// Counts the failures the messages caused, each with its count of failures so far. They
    /// are counted before anything is settled, so that a message whose budget is now spent is
    /// settled (and printed) as the dead letter it becomes.
    async fn charge_failures(
        &mut self,
        messages: &[Message],
        outcomes: Vec<Outcome>,
    ) -> redis::RedisResult<Vec<(Outcome, u32)>> {
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
        Ok(settled)
    }

    /// Applies the batch in stream order and says what became of each message it still
    /// holds; `None` if shutdown came first. While the database is unreachable it retries
    /// (the messages are not charged, nothing more is read); a part that takes longer than
    /// `--max-batch-ms` or waits on a lock is split (by wallet, then in halves), and one the
    /// database refuses is applied message by message, so one slow or bad message cannot hold
    /// up the rest. A message another consumer took over meanwhile (this one stalled past the
    /// claim idle time) is left to its new holder.
    async fn apply_until_done(
        &mut self,
        messages: &[Message],
    ) -> redis::RedisResult<Option<(Vec<Message>, Vec<Outcome>)>> {
        // While the batch is in hand (attempts, pings, backoffs), its messages are claimed
        // again every third of the claim idle time, so none is ever idle long enough for
        // another consumer to reclaim it, however long one attempt takes.
        let heartbeat = self.heartbeat(messages);
        let applied = self.apply_parts(messages).await;
        heartbeat.abort();
        applied
    }

    /// Claims `messages` again periodically (only those still pending with this consumer)
    /// until aborted.
    fn heartbeat(&self, messages: &[Message]) -> tokio::task::JoinHandle<()> {
        let mut stream = self.stream.clone();
        let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
        let every = (self.settings.claim_idle / 3).max(Duration::from_millis(1));
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                ticks.tick().await;
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                if let Err(e) = stream.keep_claimed(&ids).await {
                    tracing::debug!(error = %e, "cannot claim the batch in hand again");
                }
            }
        })
    }

    async fn apply_parts(
        &mut self,
        messages: &[Message],
    ) -> redis::RedisResult<Option<(Vec<Message>, Vec<Outcome>)>> {
        let mut parts: VecDeque<Vec<Message>> = VecDeque::from([messages.to_vec()]);
        let mut done: Vec<(Message, Outcome)> = Vec::with_capacity(messages.len());
        let mut backoff = self.settings.outage_backoff;
        let mut retrying = false;
        while let Some(part) = parts.pop_front() {
            let part = if retrying {
                let mut rest: Vec<Vec<Message>> = vec![part];
                rest.extend(parts.drain(..));
                let held = self.keep_claimed(rest).await?;
                parts.extend(held);
                let Some(part) = parts.pop_front() else { break };
                part
            } else {
                part
            };
            let (failure, error) = match self.apply_part(&part).await {
                Some(Ok(outcomes)) => {
                    self.readiness.set(true);
                    metrics::gauge!("wallet_ledger_consumer_database_up").set(1.0);
                    done.extend(part.into_iter().zip(outcomes));
                    backoff = self.settings.outage_backoff;
                    continue;
                }
                Some(Err(e)) => (classify(&e), e.to_string()),
                None => (
                    Failure::Outage,
                    format!("no answer within {:?}", self.settings.max_batch),
                ),
            };
            retrying = true;
            let pause = match self.after_failure(part, failure, error, backoff) {
                AfterFailure::Split(split) => {
                    for part in split.into_iter().rev() {
                        parts.push_front(part);
                    }
                    continue;
                }
                AfterFailure::Settled(settled) => {
                    done.extend(settled);
                    continue;
                }
                AfterFailure::Again(part, Failure::Outage) => {
                    parts.push_front(part);
                    let pause = backoff;
                    backoff = (backoff * 2).min(self.settings.outage_backoff_max);
                    pause
                }
                AfterFailure::Again(part, _) => {
                    parts.push_front(part);
                    self.settings.outage_backoff
                }
            };
            if !self.pause(pause).await {
                return Ok(None);
            }
        }
        Ok(Some(done.into_iter().unzip()))
    }

    /// One attempt at a part, audited under the consumer's name, within `--max-batch-ms`;
    /// `None` when it ran out of time while the database did not answer (an outage).
    async fn apply_part(
        &self,
        part: &[Message],
    ) -> Option<Result<Vec<Outcome>, apply::ApplyError>> {
        // The consumer writes as itself: its batches are audited under its name.
        let actor = Actor {
            key_id: None,
            owner: format!("consumer:{}", self.stream.consumer()),
            request_id: None,
        };
        let session = apply::BatchSession::default();
        let apply = apply::apply_batch_in(&self.store, part, self.settings.apply, &session);
        let apply = audit::scope(actor, apply);
        tokio::pin!(apply);
        match tokio::time::timeout(self.settings.max_batch, &mut apply).await {
            Ok(result) => Some(result),
            // Too slow only counts against the batch while the database answers: a
            // connection that hangs during an outage is the outage.
            Err(_) if !self.database_answers().await => None,
            Err(_) => match self.end_late(&session, apply).await {
                Some(result) => Some(result),
                None => Some(Err(apply::ApplyError::Abandoned)),
            },
        }
    }

    /// What becomes of a part whose attempt failed: split, settled, or tried again (an
    /// outage after `backoff`).
    fn after_failure(
        &self,
        part: Vec<Message>,
        failure: Failure,
        error: String,
        backoff: Duration,
    ) -> AfterFailure {
        match failure {
            // A lock someone else holds, or a batch too slow: each wallet's events apart
            // first, so that one wallet cannot hold up the others.
            Failure::Locked | Failure::TooSlow if spans_wallets(&part) => {
                metrics::counter!("wallet_ledger_consumer_batch_splits_total").increment(1);
                tracing::warn!(
                    events = part.len(),
                    "a wallet of the batch is locked or slow; applying each wallet's events apart"
                );
                AfterFailure::Split(by_wallet(part))
            }
            Failure::Locked => {
                // Nobody's fault: left pending, uncharged, retried once reclaimed.
                tracing::warn!(events = part.len(), %error, "the wallet is locked by another session; leaving its events pending");
                let detail = format!("its wallet is locked by another session ({error})");
                AfterFailure::settle(part, || Outcome::Wait {
                    detail: detail.clone(),
                })
            }
            Failure::TooSlow if part.len() > 1 => {
                metrics::counter!("wallet_ledger_consumer_batch_splits_total").increment(1);
                tracing::warn!(events = part.len(), limit = ?self.settings.max_batch, "the batch took too long; applying it in two halves");
                let (first, second) = part.split_at(part.len() / 2);
                AfterFailure::Split(vec![first.to_vec(), second.to_vec()])
            }
            Failure::TooSlow => {
                let detail = format!(
                    "applying it alone took longer than --max-batch-ms ({} ms)",
                    self.settings.max_batch.as_millis()
                );
                AfterFailure::settle(part, || timed_out(&detail))
            }
            Failure::Refused | Failure::Corrupt if part.len() > 1 => {
                // Something in the batch itself makes the database refuse it.
                tracing::warn!(%error, "the batch was refused; applying its messages one by one");
                AfterFailure::Split(part.into_iter().map(|m| vec![m]).collect())
            }
            Failure::Refused => {
                let detail = format!("the ledger refused it: {error}");
                AfterFailure::settle(part, || Outcome::Retry {
                    reason: Reason::MalformedEvent,
                    detail: detail.clone(),
                })
            }
            Failure::Corrupt => {
                metrics::counter!("wallet_ledger_consumer_corrupt_rows_total").increment(1);
                tracing::error!(%error, "a stored row is corrupt; dead-lettering the event that reads it");
                AfterFailure::settle(part, || Outcome::dead(Reason::CorruptRow, error.clone()))
            }
            Failure::Busy => {
                tracing::info!(%error, "the batch met a concurrent writer; applying it again");
                AfterFailure::Again(part, failure)
            }
            Failure::Outage => {
                self.readiness.set(false);
                metrics::gauge!("wallet_ledger_consumer_database_up").set(0.0);
                tracing::warn!(%error, retry_in = ?backoff, "cannot apply the batch; the database seems unreachable");
                AfterFailure::Again(part, failure)
            }
        }
    }

    /// Claims `parts` again (see [`StreamClient::keep_claimed`]) and keeps only the messages
    /// this consumer still holds. While the broker is unreachable nobody can reclaim them
    /// either, so they are kept as they are.
    async fn keep_claimed(
        &mut self,
        parts: Vec<Vec<Message>>,
    ) -> redis::RedisResult<Vec<Vec<Message>>> {
        let ids: Vec<&str> = parts.iter().flatten().map(|m| m.id.as_str()).collect();
        let held: HashSet<String> = match self.stream.keep_claimed(&ids).await {
            Ok(held) => held.into_iter().collect(),
            Err(e) if is_outage(&e) => {
                tracing::warn!(error = %e, "cannot claim the batch again; the broker seems unreachable");
                return Ok(parts);
            }
            Err(e) => return Err(e),
        };
        let lost = ids.len() - held.len();
        if lost > 0 {
            tracing::warn!(
                lost,
                "messages of this batch were taken over by another consumer; leaving them to it"
            );
        }
        Ok(parts
            .into_iter()
            .map(|part| {
                part.into_iter()
                    .filter(|m| held.contains(&m.id))
                    .collect::<Vec<_>>()
            })
            .filter(|part| !part.is_empty())
            .collect())
    }

    /// A batch past its deadline while the database answers: its statement is cancelled and
    /// the batch is waited for, a bounded while, to end by itself, so that its transaction is
    /// rolled back (or committed) before another attempt meets its locks. `None` if it is
    /// still running at the end: it is then dropped, and rolls back when its statement ends.
    async fn end_late<F: std::future::Future>(
        &self,
        session: &apply::BatchSession,
        mut batch: std::pin::Pin<&mut F>,
    ) -> Option<F::Output> {
        let until = Instant::now() + LATE_BATCH_GRACE;
        loop {
            // A cancel that lands between two statements cancels nothing: sent again until
            // the batch ends.
            if let Some(pid) = session.pid()
                && let Err(e) = store::sessions::cancel(self.store.pool(), pid).await
            {
                tracing::warn!(error = %e, "could not cancel a batch past its deadline");
            }
            match tokio::time::timeout(LATE_BATCH_RECHECK, batch.as_mut()).await {
                Ok(output) => return Some(output),
                Err(_) if Instant::now() >= until => return None,
                Err(_) => {}
            }
        }
    }

    /// Whether the database answers a trivial statement promptly.
    async fn database_answers(&self) -> bool {
        let ping = sqlx::query("select 1").execute(self.store.pool());
        matches!(
            tokio::time::timeout(DATABASE_PING_TIMEOUT, ping).await,
            Ok(Ok(_))
        )
    }

    /// Sleeps `backoff` unless shutdown was asked for; `false` if it was.
    async fn pause(&self, backoff: Duration) -> bool {
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            () = tokio::time::sleep(backoff) => !self.stopping(),
        }
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
                Err(e) if self.stopping() || !is_outage(&e) => return Err(e),
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
                    self.backlogs.record(self.stream.stream(), backlog);
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
                let database_up = self.database_answers().await;
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
        if let Ok(mut conn) = self.store.pool().acquire().await {
            for message in messages {
                let Some(wallet) = message
                    .fields
                    .get("wallet")
                    .and_then(|w| std::str::from_utf8(w).ok())
                else {
                    continue;
                };
                let wallet = wallet.to_owned();
                if let Ok(Some(account)) = accounts::find(&mut conn, &wallet).await
                    && let Ok(balance) = accounts::wallet_posted_balance(&mut conn, &wallet).await
                {
                    balances.insert(wallet, account.currency().format(balance));
                }
            }
        }
        for (message, outcome) in messages.iter().zip(outcomes) {
            // What a producer wrote is printed escaped and bounded: a value holding a newline
            // or a terminal escape must not forge a line or clear the screen.
            let field =
                |name: &str, most: usize| message.fields.get(name).map(|v| printable(v, most));
            let label = match (field("n", 32), field("event_id", 8)) {
                (Some(n), _) => n,
                (None, Some(id)) => id,
                (None, None) => "?".to_owned(),
            };
            let balance = message
                .fields
                .get("wallet")
                .and_then(|w| std::str::from_utf8(w).ok())
                .and_then(|w| balances.get(w))
                .map(|b| format!(", balance {b}"))
                .unwrap_or_default();
            let result = match outcome {
                Outcome::Applied(effect) => format!("applied ({effect}){balance}"),
                Outcome::Duplicate => "duplicate, skipped".to_owned(),
                Outcome::Retry { reason, detail } => format!(
                    "left pending to retry ({}: {})",
                    reason.as_str(),
                    printable(detail.as_bytes(), 200)
                ),
                Outcome::Wait { detail } => {
                    format!("left pending ({})", printable(detail.as_bytes(), 200))
                }
                Outcome::DeadLetter { reason, detail, .. } => format!(
                    "dead-lettered ({}: {})",
                    reason.as_str(),
                    printable(detail.as_bytes(), 200)
                ),
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

/// At most `most` characters of `value`, with control and invisible formatting characters
/// escaped (`\n`, `\u{1b}`, `\u{202e}`), so one printed event stays one line of plain text.
fn printable(value: &[u8], most: usize) -> String {
    let text = String::from_utf8_lossy(value);
    let mut out = String::new();
    for c in text.chars().take(most) {
        if c.is_control() || super::event::is_format_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    if text.chars().nth(most).is_some() {
        out.push('…');
    }
    out
}

fn count(outcome: &'static str, n: usize) {
    if n > 0 {
        metrics::counter!("wallet_ledger_consumer_events_total", "outcome" => outcome)
            .increment(n as u64);
    }
}

/// The last backlog read of each stream a process consumes (one per partition), for the
/// pending and lag gauges, which show their sums.
#[derive(Debug, Clone, Default)]
pub struct Backlogs(Arc<Mutex<BTreeMap<String, Backlog>>>);

impl Backlogs {
    pub(crate) fn record(&self, stream: &str, backlog: Backlog) {
        let (pending, lag) = {
            let mut all = self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            all.insert(stream.to_owned(), backlog);
            let pending: u64 = all.values().map(|b| b.pending).sum();
            // Unknown for one partition (after a trim Redis cannot tell) is unknown in sum.
            let lag: Option<u64> = all.values().map(|b| b.lag).sum();
            (pending, lag)
        };
        metrics::gauge!("wallet_ledger_consumer_pending").set(pending as f64);
        if let Some(lag) = lag {
            metrics::gauge!("wallet_ledger_consumer_lag").set(lag as f64);
        }
    }
}

/// Whole seconds since the epoch (a `u32` lasts until 2106), for the heartbeat gauge (a time, not money; the metrics
/// API converts it to a Prometheus sample, which is a float by definition).
pub(crate) fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// The messages to acknowledge and those to dead-letter, each counted in `report`; the
/// others stay pending.
fn sort_settled<'m>(
    messages: &'m [Message],
    settled: &'m [(Outcome, u32)],
    report: &mut StepReport,
) -> (Vec<&'m str>, Vec<DeadLetter<'m>>) {
    let mut acked: Vec<&str> = Vec::new();
    let mut dead: Vec<DeadLetter<'_>> = Vec::new();
    for (message, (outcome, failures)) in messages.iter().zip(settled) {
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
            Outcome::Retry { .. } | Outcome::Wait { .. } => report.retried += 1,
        }
    }
    report.dead_lettered = dead.len();
    (acked, dead)
}

/// What [`Consumer::after_failure`] makes of a failed part.
enum AfterFailure {
    /// Apply these parts next, in this order.
    Split(Vec<Vec<Message>>),
    /// Every message of the part has its outcome.
    Settled(Vec<(Message, Outcome)>),
    /// Apply the part again after a pause (`Busy`: a fixed one; `Outage`: a growing backoff).
    Again(Vec<Message>, Failure),
}

impl AfterFailure {
    fn settle(part: Vec<Message>, outcome: impl Fn() -> Outcome) -> AfterFailure {
        AfterFailure::Settled(part.into_iter().map(|m| (m, outcome())).collect())
    }
}

/// What a failed attempt at a batch says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The database is away, overloaded or restarting: the same batch again after a backoff,
    /// with `/readyz` failing meanwhile.
    Outage,
    /// A deadlock or serialization victim, or ids taken concurrently: the same batch again
    /// now; nothing is wrong with anything.
    Busy,
    /// It took longer than allowed (the caller's deadline, or `statement_timeout`): split it.
    TooSlow,
    /// It waited longer than `lock_timeout` for a row another session holds.
    Locked,
    /// The database refused something in the batch itself: find which message.
    Refused,
    /// A stored row the batch read is corrupt: find which message reads it and dead-letter
    /// it; retrying would read the same row forever.
    Corrupt,
}

impl Failure {
    /// Whether the batch is tried again as it is (after a pause, or split), rather than traced
    /// to the message it fails on.
    fn is_transient(self) -> bool {
        !matches!(self, Failure::Refused | Failure::Corrupt)
    }
}

/// What the consumer does about a failed batch, from [`StoreError`]'s kind: a transient
/// failure (an outage, a conflict, a lock, a timeout) is retried in some form, a permanent one
/// (a refusal, a corrupt row) is traced to its message and dead-lettered, never retried as is.
/// Nothing of the batch was written whichever it is (the transaction rolled back).
pub fn classify(error: &ApplyError) -> Failure {
    let e = match error {
        ApplyError::Contention => return Failure::Busy,
        ApplyError::Abandoned => return Failure::TooSlow,
        ApplyError::Database(e) => e,
    };
    let failure = match e {
        StoreError::Unavailable(_) | StoreError::Stopped => Failure::Outage,
        StoreError::Conflict(_) => Failure::Busy,
        StoreError::LockTimeout(_) => Failure::Locked,
        StoreError::TimedOut(_) => Failure::TooSlow,
        StoreError::Corrupt(_) | StoreError::Undecodable(_) => Failure::Corrupt,
        StoreError::Refused(_) => Failure::Refused,
    };
    debug_assert_eq!(failure.is_transient(), e.is_transient());
    failure
}

fn spans_wallets(part: &[Message]) -> bool {
    part.iter()
        .any(|m| apply::wallet_of(m) != apply::wallet_of(&part[0]))
}

/// The messages grouped by wallet, each group in stream order, groups in order of first
/// appearance.
fn by_wallet(part: Vec<Message>) -> Vec<Vec<Message>> {
    let mut groups: Vec<Vec<Message>> = Vec::new();
    for message in part {
        match groups
            .iter_mut()
            .find(|g| apply::wallet_of(&g[0]) == apply::wallet_of(&message))
        {
            Some(group) => group.push(message),
            None => groups.push(vec![message]),
        }
    }
    groups
}

fn timed_out(detail: &str) -> Outcome {
    Outcome::Retry {
        reason: Reason::TimedOut,
        detail: detail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_row_is_permanent_and_a_broken_connection_an_outage() {
        let corrupt = crate::db::corrupt("transactions", "t1", "its leg 1 is malformed");
        assert_eq!(classify(&ApplyError::Database(corrupt)), Failure::Corrupt);
        let undecodable = sqlx::Error::ColumnDecode {
            index: "status".into(),
            source: "not a status".into(),
        };
        assert_eq!(classify(&undecodable.into()), Failure::Corrupt);
        let protocol = sqlx::Error::Protocol("connected to a standby, not the primary".into());
        assert_eq!(classify(&protocol.into()), Failure::Outage);
        assert_eq!(classify(&sqlx::Error::PoolTimedOut.into()), Failure::Outage);
        let stopped = ApplyError::Database(crate::db::StoreError::Stopped);
        assert_eq!(classify(&stopped), Failure::Outage);
    }
}
