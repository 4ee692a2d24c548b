//! `wallet-ledger demo`: the seed article's lab, end to end.

use super::shared::{DatabaseArgs, RedisArgs};
use crate::consumer::demo::{self, DemoCrash, DemoSettings};
use clap::Args;
use clap::builder::PossibleValue;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// The demo's own stream, recreated empty at the start.
    #[arg(long, default_value = "demo.payments")]
    pub stream: String,
    /// The wallet credited (created in SAR if missing).
    #[arg(long, default_value = "w1")]
    pub wallet: String,
    /// Where consumer c1 dies while it handles payment 3.
    #[arg(long, value_enum, default_value_t = DemoCrash::AfterCommit)]
    pub crash: DemoCrash,
    /// Idle time after which c2 reclaims what c1 left pending.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(2..))]
    pub claim_idle_ms: u64,
}

/// Exit 0 when the wallet gained exactly what the article says, 1 when not.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let settings = DemoSettings {
        database: args.database.settings(),
        redis: args.redis.settings(),
        stream: args.stream,
        wallet: args.wallet,
        crash: args.crash,
        claim_idle_ms: args.claim_idle_ms,
    };
    let wallet = demo::check(&settings)?;
    let pool = super::shared::connect(&settings.database).await?.pool;
    let expected = demo::run(&pool, &settings, &wallet).await?;
    Ok(super::findings(expected))
}

impl clap::ValueEnum for DemoCrash {
    fn value_variants<'a>() -> &'a [DemoCrash] {
        &[DemoCrash::AfterCommit, DemoCrash::BeforeCommit]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            DemoCrash::AfterCommit => PossibleValue::new("after-commit")
                .help("c1 dies after its COMMIT and before its XACK (the article's crash)"),
            DemoCrash::BeforeCommit => {
                PossibleValue::new("before-commit").help("c1 dies before its COMMIT")
            }
        })
    }
}
