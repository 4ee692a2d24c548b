//! `wallet-ledger purge`: delete what only existed to be sent or inspected, past retention.

use super::shared::{DatabaseArgs, RedisArgs, StreamArgs};
use crate::outbox::purge::{self, PurgeSettings};
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
    /// Keep everything younger than this many days (1 to 36,500: a century).
    #[arg(long, env = "RETENTION_DAYS", default_value_t = purge::DEFAULT_RETENTION_DAYS,
        value_parser = clap::value_parser!(u32).range(1..=purge::MAX_RETENTION_DAYS as i64))]
    pub retention_days: u32,
    /// How long the broker keeps messages (a purge must not forget what it may still deliver).
    #[arg(long, env = "BROKER_RETENTION_HOURS", default_value_t = 7 * 24)]
    pub broker_retention_hours: u32,
    /// How long producers keep retrying one event.
    #[arg(long, env = "PRODUCER_RETRY_WINDOW_HOURS", default_value_t = 24)]
    pub producer_retry_window_hours: u32,
    /// Count what would be deleted, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// When the dispatcher publishes to an events stream, events not yet published are kept.
    #[arg(long, env = "EVENTS_STREAM")]
    pub events_stream: Option<String>,
}

pub async fn run(args: PurgeArgs) -> anyhow::Result<ExitCode> {
    purge::run(PurgeSettings {
        database: args.database.settings(),
        redis: args.redis.settings(),
        stream: args.stream.settings(),
        retention_days: args.retention_days,
        broker_retention_hours: args.broker_retention_hours,
        producer_retry_window_hours: args.producer_retry_window_hours,
        dry_run: args.dry_run,
        events_stream: args.events_stream,
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}
