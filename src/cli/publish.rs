//! `wallet-ledger publish`: payment events to the stream, with a share of resends.

use super::shared::{PartitionArgs, RedisArgs};
use crate::consumer::producer::{self, PublishSettings};
use crate::consumer::stream;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub redis: RedisArgs,
    /// The stream to publish to.
    #[arg(long, env = "STREAM", default_value = stream::DEFAULT_STREAM)]
    pub stream: String,
    #[command(flatten)]
    pub partitions: PartitionArgs,
    /// Distinct payments to publish.
    #[arg(long, default_value_t = 100)]
    pub count: usize,
    /// Wallets credited, in turn (comma-separated account ids).
    #[arg(long, value_delimiter = ',', default_value = "w1", value_parser = wallet_id)]
    pub wallets: Vec<String>,
    /// Minor units per payment (1 to 2^53 − 1).
    #[arg(long, default_value_t = 5_000,
        value_parser = clap::value_parser!(i64).range(1..=crate::ledger::money::MAX_AMOUNT))]
    pub amount: i64,
    /// Percentage of payments sent a second time (a new stream id, the same event id).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub resend_percent: u8,
    /// Replicas that must confirm each chunk (Redis `WAIT`) before it counts as sent.
    #[arg(long, default_value_t = 0)]
    pub wait_replicas: u32,
    /// How long a chunk that failed or was not confirmed is sent again (same event ids).
    #[arg(long, default_value_t = 30_000)]
    pub retry_for_ms: u64,
}

pub async fn run(args: PublishArgs) -> anyhow::Result<ExitCode> {
    producer::run(PublishSettings {
        redis: args.redis.settings(),
        stream: args.stream,
        partitions: args.partitions.settings(),
        count: args.count,
        wallets: args.wallets,
        amount: args.amount,
        resend_percent: args.resend_percent,
        wait_replicas: args.wait_replicas,
        retry_for_ms: args.retry_for_ms,
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

fn wallet_id(value: &str) -> Result<String, String> {
    crate::ledger::ids::AccountId::parse(value)
        .map(|id| id.to_string())
        .ok_or_else(|| "must be an account id: [A-Za-z0-9][A-Za-z0-9._:@-]{0,127}".to_owned())
}
