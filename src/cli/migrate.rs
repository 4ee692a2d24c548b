//! `wallet-ledger migrate`: create the database if missing and apply migrations.

use super::shared::DatabaseArgs;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
}

pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    crate::db::connect_and_migrate(&args.database.settings())
        .await?
        .close()
        .await;
    tracing::info!("migrations applied");
    Ok(ExitCode::SUCCESS)
}
