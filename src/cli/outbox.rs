//! `wallet-ledger outbox`: the webhook dispatcher alone; its flags are `serve`'s too.

use super::shared::{DatabaseArgs, RedisArgs, WebhookArgs};
use crate::outbox::dispatcher::{self, Settings};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const DEFAULT_OUTBOX_INTERVAL_MS: u64 = 500;
/// Events fanned out and deliveries sent per dispatcher step.
pub const DEFAULT_OUTBOX_BATCH: i64 = 100;
pub const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
/// Attempts before a delivery is `dead`: with the default backoff, about a day of retries.
pub const DEFAULT_WEBHOOK_MAX_ATTEMPTS: i32 = 15;
pub const DEFAULT_WEBHOOK_BACKOFF_MS: u64 = 1_000;
pub const DEFAULT_WEBHOOK_BACKOFF_MAX_MS: u64 = 3_600_000;
pub const DEFAULT_WEBHOOK_CONCURRENCY: u64 = 16;
pub const DEFAULT_WEBHOOK_SUBSCRIPTION_CONCURRENCY: u64 = 4;

#[derive(Debug, Clone, Args)]
pub struct DispatcherArgs {
    /// How often the dispatcher looks for events and due deliveries when it found none.
    #[arg(long, env = "OUTBOX_INTERVAL_MS", default_value_t = DEFAULT_OUTBOX_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub outbox_interval_ms: u64,
    /// Events fanned out per round, and the most deliveries claimed at once.
    #[arg(long, env = "OUTBOX_BATCH", default_value_t = DEFAULT_OUTBOX_BATCH,
        value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub outbox_batch: i64,
    /// How long one webhook request may take.
    #[arg(long, env = "WEBHOOK_TIMEOUT_MS", default_value_t = DEFAULT_WEBHOOK_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_timeout_ms: u64,
    /// Attempts before a delivery is `dead`.
    #[arg(long, env = "WEBHOOK_MAX_ATTEMPTS", default_value_t = DEFAULT_WEBHOOK_MAX_ATTEMPTS,
        value_parser = clap::value_parser!(i32).range(1..))]
    pub webhook_max_attempts: i32,
    /// Delay before the second attempt; it doubles each time, with jitter.
    #[arg(long, env = "WEBHOOK_BACKOFF_MS", default_value_t = DEFAULT_WEBHOOK_BACKOFF_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_backoff_ms: u64,
    /// The longest delay between attempts.
    #[arg(long, env = "WEBHOOK_BACKOFF_MAX_MS", default_value_t = DEFAULT_WEBHOOK_BACKOFF_MAX_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_backoff_max_ms: u64,
    /// Requests sent at once by one dispatcher (a receiver is not flooded by a backlog).
    #[arg(long, env = "WEBHOOK_CONCURRENCY", default_value_t = DEFAULT_WEBHOOK_CONCURRENCY,
        value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub webhook_concurrency: u64,
    /// Requests one dispatcher sends at once to one subscription: a slow or hanging receiver
    /// holds at most this many of the dispatcher's requests, never the others'.
    #[arg(long, env = "WEBHOOK_SUBSCRIPTION_CONCURRENCY",
        default_value_t = DEFAULT_WEBHOOK_SUBSCRIPTION_CONCURRENCY,
        value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub webhook_subscription_concurrency: u64,
    /// Also publish every event to this Redis/Valkey stream (for example `ledger.events`),
    /// with the event id as its key; off when unset.
    #[arg(long, env = "EVENTS_STREAM")]
    pub events_stream: Option<String>,
    #[command(flatten)]
    pub redis: RedisArgs,
}

impl DispatcherArgs {
    /// The dispatcher's settings, sending only where `webhooks` allows.
    pub fn settings(self, webhooks: &WebhookArgs) -> Settings {
        Settings {
            interval: Duration::from_millis(self.outbox_interval_ms),
            batch: self.outbox_batch,
            timeout: Duration::from_millis(self.webhook_timeout_ms),
            max_attempts: self.webhook_max_attempts,
            backoff: Duration::from_millis(self.webhook_backoff_ms),
            backoff_max: Duration::from_millis(self.webhook_backoff_max_ms),
            policy: webhooks.clone().settings().url_policy(),
            concurrency: usize::try_from(self.webhook_concurrency).unwrap_or(usize::MAX),
            per_subscription: usize::try_from(self.webhook_subscription_concurrency)
                .unwrap_or(usize::MAX),
            events_stream: self.events_stream.map(|s| (self.redis.url, s)),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OutboxArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub outbox: DispatcherArgs,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
}

/// The dispatcher alone, until SIGTERM/SIGINT (`crate::shutdown`): the signal stops it, and the
/// pool closes once its sends in flight are recorded.
pub async fn run(args: OutboxArgs) -> anyhow::Result<ExitCode> {
    let settings = args.outbox.settings(&args.webhooks);
    let pool = super::shared::connect(&args.database.settings())
        .await?
        .pool;
    let dispatcher = dispatcher::Dispatcher::new(pool.clone(), settings).await?;
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(dispatcher.run(shutdown.clone()));
    tracing::info!("outbox dispatcher running");
    crate::shutdown::cancel_on_signal(shutdown);
    let _ = worker.await;
    pool.close().await;
    tracing::info!("outbox dispatcher stopped");
    Ok(ExitCode::SUCCESS)
}
