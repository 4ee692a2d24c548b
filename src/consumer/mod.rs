//! The stream consumer of payment events: exactly-once effect on an at-least-once stream.
//!
//! Messages come twice when a consumer dies before its XACK, and when a producer resends after
//! a timeout (a new stream id, the same event id). Neither needs a dedup mark: the payment id
//! is the transaction's primary key, a whole batch commits in one database transaction, and
//! the acknowledgement comes after COMMIT, so a crash at any instruction leaves either nothing
//! or everything of a batch, and a redelivery finds what it already did.
//!
//! - `event`: decoding a stream entry into a payment event;
//! - `apply`: one batch, one database transaction, through the ledger's own write path;
//! - `stream`: reading, reclaiming, acknowledging and dead-lettering on Redis/Valkey;
//! - `partition`: which of N partition streams a wallet's events go to;
//! - `worker`: the loop, as steps; `dlq`, `producer`, `demo`: the tools around it;
//! - `inspect`: a stream's length, dead letters and groups' backlog, for the admin API.

pub mod apply;
pub mod demo;
pub mod dlq;
pub mod event;
pub mod inspect;
pub mod partition;
pub mod producer;
pub mod stream;
pub mod worker;

use crate::ledger::store::Store;
use crate::telemetry::Readiness;
use anyhow::Context;
use std::time::Duration;
use stream::StreamClient;
use tokio_util::sync::CancellationToken;
use worker::{Consumer, Settings};

/// Events applied per database transaction.
pub const DEFAULT_CONSUMER_BATCH_SIZE: usize = 100;
/// Batches one `consume` process applies at once, each by a worker of its own in the group.
pub const DEFAULT_CONSUMER_WORKERS: u64 = 1;
pub const MAX_CONSUMER_WORKERS: u64 = 16;
/// Most events one batch may hold: the write path's batch limit.
pub const MAX_CONSUMER_BATCH_SIZE: usize = crate::ledger::MAX_BATCH_ITEMS as usize;
/// How long one `XREADGROUP` waits for new events; also the longest a shutdown waits for it.
pub const DEFAULT_CONSUMER_BLOCK_MS: u64 = 2_000;
/// A message pending this long with a consumer is presumed abandoned and reclaimed.
pub const DEFAULT_CLAIM_IDLE_MS: u64 = 30_000;
/// The longest one batch may take to apply; must stay below the claim idle time, or a live
/// consumer's batch would be reclaimed (harmlessly, but wastefully) while it still works.
pub const DEFAULT_MAX_BATCH_MS: u64 = 10_000;
/// Failures caused by a message itself (unknown wallet, refund before its payment) before it
/// is dead-lettered. Its retries are spaced by the claim idle time.
pub const DEFAULT_MAX_FAILURES: u32 = 5;
/// Backoff while the database or the broker is unreachable: doubles from the first to the max.
pub const DEFAULT_OUTAGE_BACKOFF_MS: u64 = 100;
pub const DEFAULT_OUTAGE_BACKOFF_MAX_MS: u64 = 5_000;
/// How often the group's lag and pending count are read (metrics) and the stream trimmed.
pub const DEFAULT_STATS_INTERVAL_MS: u64 = 1_000;
pub const DEFAULT_TRIM_INTERVAL_MS: u64 = 60_000;
/// The longest of the consumer's timings (a day): far below what Redis and the clock
/// arithmetic take, and far above any sane setting.
pub const MAX_CONSUMER_DURATION_MS: u64 = 24 * 60 * 60 * 1000;

/// One `consume` process: where it reads and writes, and its workers' settings.
#[derive(Debug, Clone)]
pub struct ConsumeSettings {
    pub database: crate::db::DatabaseSettings,
    pub redis: crate::broker::RedisSettings,
    /// The base stream and the group; with several partitions, the group on each of them.
    pub stream: stream::StreamSettings,
    /// The partition streams of `stream.stream`, each read by all `workers` of this process.
    pub partitions: partition::Partitions,
    /// This consumer's name in the group (its workers' names derive from it).
    pub name: String,
    /// Workers in this process, each a consumer of the group applying its own batches.
    pub workers: u64,
    pub worker: Settings,
    /// Serve `/metrics` and `/readyz` here.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Stop once the group has nothing left, instead of at SIGTERM/SIGINT.
    pub drain: bool,
}

/// The gauges' values before the workers' first readings, so that the first scrape shows
/// every gauge an alert watches: the database answered just now, no batch yet, and each
/// partition's backlog (left to the workers if the broker does not answer now).
pub async fn first_readings(streams: &mut [(StreamClient, bool)], backlogs: &worker::Backlogs) {
    crate::metrics_catalog::consumer_started(f64::from(worker::unix_now()));
    for (stream, trims) in streams.iter_mut() {
        if !*trims {
            continue; // one reading per partition: its first worker's
        }
        if let Ok(backlog) = stream.backlog().await {
            backlogs.record(stream.stream(), backlog);
        }
    }
}

/// On a Redis Cluster, refuses a stream whose keys would span slots: no worker may read what it
/// could never settle. Checked before anything connects.
pub fn refuse_unslotted(args: &ConsumeSettings) -> anyhow::Result<()> {
    if !crate::broker::is_cluster(&args.redis.url) {
        return Ok(());
    }
    for stream_key in args.partitions.streams(&args.stream.stream) {
        let partition = stream::StreamSettings {
            stream: stream_key,
            group: args.stream.group.clone(),
        };
        partition.fits_one_slot().map_err(|e| {
            anyhow::anyhow!(
                "{e}: use --partitions N (2 or more: partition p is `<stream>:{{p}}`, a \
                 hash tag), or give the stream a hash tag of its own (--stream '{{{}}}')",
                args.stream.stream
            )
        })?;
    }
    Ok(())
}

/// One broker connection per worker and partition, its group created, each paired with
/// whether it trims its partition (one worker of each does).
///
/// Each worker is a consumer of the group in its own right: its own connection to the broker
/// and its own pending list, so a crash of the process leaves each worker's batch to be
/// reclaimed like any consumer's. With several partitions every worker runs on each of them (a
/// loop per worker and partition), each loop touching only its partition's keys (one cluster
/// slot). The groups exist before `/readyz` says ready.
pub async fn connect_streams(args: &ConsumeSettings) -> anyhow::Result<Vec<(StreamClient, bool)>> {
    let mut streams = Vec::new();
    let partitions = args.partitions.streams(&args.stream.stream);
    for (p, stream_key) in partitions.into_iter().enumerate() {
        let partition = stream::StreamSettings {
            stream: stream_key,
            group: args.stream.group.clone(),
        };
        for n in 0..args.workers {
            let mut worker_name = if args.workers == 1 {
                args.name.clone()
            } else {
                format!("{}-{n}", args.name)
            };
            if args.partitions.count() > 1 {
                worker_name = format!("{worker_name}-p{p}");
            }
            let block = args.worker.block;
            let stream = connect_stream(&args.redis.url, &partition, worker_name, block).await?;
            streams.push((stream, n == 0));
        }
    }
    Ok(streams)
}

/// The workers, one per stream connection, spawned: each stops at `stopping` (or, with
/// `--drain`, once the group has nothing left).
pub fn spawn_workers(
    database: &crate::db::Database,
    streams: Vec<(StreamClient, bool)>,
    args: &ConsumeSettings,
    backlogs: &worker::Backlogs,
    readiness: &Readiness,
    stopping: &CancellationToken,
) -> Workers {
    let settings = &args.worker;
    let mut workers = tokio::task::JoinSet::new();
    for (stream, trims) in streams {
        let mut worker_settings = settings.clone();
        if !trims {
            worker_settings.trim_interval = None;
        }
        let consumer = Consumer::new(
            Store::of(database),
            stream,
            worker_settings,
            readiness.clone(),
            stopping.clone(),
        )
        .with_backlogs(backlogs.clone());
        workers.spawn(work(
            consumer,
            settings.outage_backoff,
            settings.outage_backoff_max,
            args.drain,
            readiness.clone(),
            stopping.clone(),
        ));
    }
    let loops = workers.len();
    Workers { workers, loops }
}

/// The running workers of a `consume` process.
pub struct Workers {
    workers: tokio::task::JoinSet<(worker::StepReport, WorkerEnd)>,
    loops: usize,
}

/// What the workers did, once all have ended.
pub struct WorkersEnded {
    pub totals: worker::StepReport,
    /// Workers the broker refused: stopped for good.
    pub refused: usize,
    /// Workers there were.
    pub loops: usize,
}

impl Workers {
    /// Waits for every worker to end and adds up what they did.
    pub async fn join(mut self) -> anyhow::Result<WorkersEnded> {
        let mut ended = WorkersEnded {
            totals: worker::StepReport::default(),
            refused: 0,
            loops: self.loops,
        };
        while let Some(done) = self.workers.join_next().await {
            let (report, end) = done.context("a consumer worker panicked")?;
            ended.totals.add_totals(&report);
            if end == WorkerEnd::Refused {
                ended.refused += 1;
            }
        }
        Ok(ended)
    }
}

impl WorkersEnded {
    /// Logs `consumer stopped` with the totals; an error if the broker refused a worker.
    pub fn report(&self, consumer: &str) -> anyhow::Result<()> {
        let (totals, stopped) = (&self.totals, self.refused);
        tracing::info!(
            consumer = %consumer,
            applied = totals.applied,
            duplicates = totals.duplicates,
            dead_lettered = totals.dead_lettered,
            stopped_workers = stopped,
            "consumer stopped"
        );
        if stopped > 0 {
            anyhow::bail!(
                "{stopped} of {} workers stopped because the broker refused a command (see the log above)",
                self.loops
            );
        }
        Ok(())
    }
}

/// Why a worker's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkerEnd {
    /// Shutdown, or drained.
    Finished,
    /// The broker refused a command in a way no retry mends (a key of the wrong type, a
    /// missing permission): the worker stopped with nothing acknowledged that it had not
    /// settled.
    Refused,
}

async fn connect_stream(
    url: &str,
    stream_settings: &stream::StreamSettings,
    name: String,
    block: Duration,
) -> anyhow::Result<StreamClient> {
    let mut stream = StreamClient::connect(url, stream_settings.clone(), name, block)
        .await
        .with_context(|| format!("cannot connect to Redis at {}", crate::broker::redact(url)))?;
    stream.ensure_group().await.with_context(|| {
        format!(
            "cannot create consumer group {} on stream {}",
            stream_settings.group, stream_settings.stream
        )
    })?;
    Ok(stream)
}

/// One worker's loop, until shutdown or (with `drain`) until the group has nothing left;
/// returns what it did. Shutdown is looked at between steps, never inside one: the batch in
/// hand is finished and acknowledged, and a read is never dropped half-way (what the broker
/// handed out would sit pending until reclaimed).
async fn work(
    mut consumer: Consumer,
    outage_backoff: Duration,
    outage_backoff_max: Duration,
    drain: bool,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> (worker::StepReport, WorkerEnd) {
    let mut backoff = outage_backoff;
    let mut totals = worker::StepReport::default();
    while !shutdown.is_cancelled() {
        match consumer.step().await {
            Ok(report) => {
                backoff = outage_backoff;
                totals.add_totals(&report);
                if drain && report.idle() && consumer.drained().await.unwrap_or(false) {
                    tracing::info!("nothing left in the group; draining done");
                    break;
                }
            }
            // Outages are retried; any other error is the broker refusing what was asked (a
            // key of the wrong type, a missing permission), which no retry mends.
            Err(e) if crate::broker::is_outage(&e) => {
                readiness.set(false);
                tracing::warn!(error = %e, retry_in = ?backoff, "the broker is unreachable");
                // Nothing is in hand while the broker is away, so the signal may cut the wait.
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(outage_backoff_max);
            }
            Err(e) => {
                readiness.break_for_good();
                metrics::counter!("wallet_ledger_consumer_workers_stopped_total").increment(1);
                tracing::error!(error = %e, consumer = consumer.name(), "the broker refused a command; this worker stops (its unsettled messages stay pending for another consumer)");
                return (totals, WorkerEnd::Refused);
            }
        }
    }
    (totals, WorkerEnd::Finished)
}
