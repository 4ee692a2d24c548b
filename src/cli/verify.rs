//! `wallet-ledger verify`: check the ledger's invariants.

use super::shared::{DatabaseArgs, RedisArgs, StreamArgs};
use crate::reconcile::invariants;
use crate::reconcile::verify::VerifySettings;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// How long past its expiry a hold may stay pending before it is a finding.
    #[arg(long, env = "HOLD_GRACE_MS", default_value_t = invariants::DEFAULT_HOLD_GRACE_MS)]
    pub hold_grace_ms: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where the consumer's dead letters are counted (`<stream>.dlq`).
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// Exit 0 when the invariants hold, 1 when they do not.
pub async fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let settings = VerifySettings {
        database: args.database.settings(),
        hold_grace_ms: args.hold_grace_ms,
        json: args.json,
        redis: args.redis.settings(),
        stream: args.stream.settings(),
    };
    let clean = crate::reconcile::verify::run(settings).await?;
    Ok(super::findings(clean))
}
