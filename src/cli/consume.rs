//! `wallet-ledger consume`: apply payment events from a Redis/Valkey stream.

use super::shared::{DatabaseArgs, HoldExpiryArgs, PartitionArgs, RedisArgs, StreamArgs};
use crate::consumer::apply::ApplySettings;
use crate::consumer::worker::Backlogs;
use crate::consumer::worker::Settings;
use crate::consumer::{self, ConsumeSettings, MAX_CONSUMER_BATCH_SIZE};
use crate::telemetry::Readiness;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
    #[command(flatten)]
    pub partitions: PartitionArgs,
    /// This consumer's name in the group (default: host name and process id).
    #[arg(long, env = "CONSUMER_NAME")]
    pub consumer: Option<String>,
    /// Events read and applied per database transaction.
    #[arg(long, env = "CONSUMER_BATCH_SIZE", default_value_t = consumer::DEFAULT_CONSUMER_BATCH_SIZE,
        value_parser = batch_size)]
    pub batch_size: usize,
    /// Workers in this process, each a consumer of the group (named `<consumer>-<n>` when
    /// more than one) applying its own batches: one reads and acknowledges while another's
    /// batch is in the database.
    #[arg(long, env = "CONSUMER_WORKERS", default_value_t = consumer::DEFAULT_CONSUMER_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_WORKERS))]
    pub workers: u64,
    /// How long one read waits for new events.
    #[arg(long, env = "CONSUMER_BLOCK_MS", default_value_t = consumer::DEFAULT_CONSUMER_BLOCK_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub block_ms: u64,
    /// Idle time after which another consumer's pending message is reclaimed (`XAUTOCLAIM`).
    #[arg(long, env = "CONSUMER_CLAIM_IDLE_MS", default_value_t = consumer::DEFAULT_CLAIM_IDLE_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub claim_idle_ms: u64,
    /// The longest one batch may take; checked at start to be below the claim idle time.
    #[arg(long, env = "CONSUMER_MAX_BATCH_MS", default_value_t = consumer::DEFAULT_MAX_BATCH_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub max_batch_ms: u64,
    /// Failures caused by a message itself before it is dead-lettered.
    #[arg(long, env = "CONSUMER_MAX_FAILURES", default_value_t = consumer::DEFAULT_MAX_FAILURES,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub max_failures: u32,
    /// First backoff while the database or broker is unreachable.
    #[arg(long, env = "CONSUMER_OUTAGE_BACKOFF_MS", default_value_t = consumer::DEFAULT_OUTAGE_BACKOFF_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub outage_backoff_ms: u64,
    /// Longest backoff while the database or broker is unreachable.
    #[arg(long, env = "CONSUMER_OUTAGE_BACKOFF_MAX_MS", default_value_t = consumer::DEFAULT_OUTAGE_BACKOFF_MAX_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub outage_backoff_max_ms: u64,
    /// How often lag and pending count are read for the metrics.
    #[arg(long, env = "CONSUMER_STATS_INTERVAL_MS", default_value_t = consumer::DEFAULT_STATS_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub stats_interval_ms: u64,
    /// How often the stream is trimmed below its oldest pending entry (0: never).
    #[arg(long, env = "CONSUMER_TRIM_INTERVAL_MS", default_value_t = consumer::DEFAULT_TRIM_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(0..=consumer::MAX_CONSUMER_DURATION_MS))]
    pub trim_interval_ms: u64,
    #[command(flatten)]
    pub hold_expiry: HoldExpiryArgs,
    /// Serve `/metrics` (Prometheus) and `/readyz` on this address.
    #[arg(long, env = "CONSUMER_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Exit 0 once nothing is new, nothing is pending in the group and nothing is reclaimable
    /// (tests, demos, catch-up jobs). Without it the consumer runs until SIGTERM/SIGINT.
    #[arg(long)]
    pub drain: bool,
    /// Print one line per event on stdout, as the seed article's lab does.
    #[arg(long)]
    pub print_events: bool,
}

/// Runs until SIGTERM/SIGINT (finishing and acknowledging the batch in hand) or, with
/// `--drain`, until the group has nothing left; drains in the order `crate::shutdown` describes.
pub async fn run(args: ConsumeArgs) -> anyhow::Result<ExitCode> {
    args.check().map_err(anyhow::Error::msg)?;
    let args = args.settings();
    consumer::refuse_unslotted(&args)?;
    let database = super::shared::connect(&args.database).await?;
    database.watch_sync_standby().await;
    let mut streams = consumer::connect_streams(&args).await?;
    let backlogs = Backlogs::default();
    consumer::first_readings(&mut streams, &backlogs).await;
    // The signal stops the workers (`stopping`); `/metrics` and `/readyz` stop on its parent,
    // once the workers are done and the pool is closed, so probes are answered to the end.
    let shutdown = CancellationToken::new();
    let stopping = shutdown.child_token();
    let readiness = Readiness::new(true);
    if let Some(addr) = args.metrics_addr {
        let probed = Some(database.clone());
        crate::telemetry::serve(addr, readiness.clone(), probed, shutdown.clone()).await?;
    }
    crate::shutdown::cancel_on_signal(stopping.clone());
    tracing::info!(consumer = %args.name, workers = args.workers, partitions = args.partitions.count(), stream = %args.stream.stream, group = %args.stream.group, batch_size = args.worker.batch_size, "consuming");
    let workers =
        consumer::spawn_workers(&database, streams, &args, &backlogs, &readiness, &stopping);
    let ended = workers.join().await?;
    if ended.refused > 0 && !args.drain {
        // Every worker left stopped for good: stay up, not ready, so that probes and the
        // metric say so, until the operator's SIGTERM.
        stopping.cancelled().await;
    }
    database.pool.close().await;
    shutdown.cancel();
    ended.report(&args.name)?;
    Ok(ExitCode::SUCCESS)
}

impl ConsumeArgs {
    fn consumer_name(&self) -> String {
        self.consumer.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "wallet-ledger".to_owned());
            format!("{host}-{}", std::process::id())
        })
    }

    /// The checks clap cannot make alone.
    fn check(&self) -> Result<(), String> {
        if self.claim_idle_ms <= self.max_batch_ms {
            return Err(format!(
                "--claim-idle-ms ({}) must exceed --max-batch-ms ({}): a batch still being \
                 applied would be reclaimed by another consumer",
                self.claim_idle_ms, self.max_batch_ms
            ));
        }
        if self.outage_backoff_max_ms < self.outage_backoff_ms {
            return Err("--outage-backoff-max-ms must be at least --outage-backoff-ms".to_owned());
        }
        Ok(())
    }

    fn settings(self) -> ConsumeSettings {
        let worker = Settings {
            batch_size: self.batch_size,
            block: Duration::from_millis(self.block_ms),
            claim_idle: Duration::from_millis(self.claim_idle_ms),
            max_batch: Duration::from_millis(self.max_batch_ms),
            max_failures: self.max_failures,
            outage_backoff: Duration::from_millis(self.outage_backoff_ms),
            outage_backoff_max: Duration::from_millis(self.outage_backoff_max_ms),
            stats_interval: Duration::from_millis(self.stats_interval_ms),
            trim_interval: (self.trim_interval_ms > 0)
                .then(|| Duration::from_millis(self.trim_interval_ms)),
            apply: ApplySettings {
                hold_expiry: self.hold_expiry.expiry(),
                statement_timeout: Some(Duration::from_millis(self.max_batch_ms)),
            },
            print_events: self.print_events,
        };
        ConsumeSettings {
            name: self.consumer_name(),
            database: self.database.settings(),
            redis: self.redis.settings(),
            stream: self.stream.settings(),
            partitions: self.partitions.settings(),
            workers: self.workers,
            worker,
            metrics_addr: self.metrics_addr,
            drain: self.drain,
        }
    }
}

pub fn batch_size(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_CONSUMER_BATCH_SIZE).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_CONSUMER_BATCH_SIZE}"
        )),
    }
}
