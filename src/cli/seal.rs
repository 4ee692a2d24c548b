//! `wallet-ledger seal`: commits the next signed checkpoint of the journal (docs/verification.md).

use super::shared::DatabaseArgs;
use crate::ledger::seals::{self, Sealing, keys};
use crate::ledger::store::Store;
use anyhow::Context;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct SealArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The Ed25519 signing key, base64 (`wallet-ledger keys generate`).
    #[arg(
        long,
        env = "CHECKPOINT_SIGNING_KEY",
        hide_env_values = true,
        conflicts_with = "signing_key_file",
        required_unless_present = "signing_key_file"
    )]
    pub signing_key: Option<String>,
    /// A file holding the signing key (base64), instead of `--signing-key`.
    #[arg(long, env = "CHECKPOINT_SIGNING_KEY_FILE", hide_env_values = true)]
    pub signing_key_file: Option<std::path::PathBuf>,
    /// Seal again every this many milliseconds, until stopped; once when absent.
    #[arg(long, env = "CHECKPOINT_SEAL_EVERY_MS")]
    pub every_ms: Option<u64>,
}

pub async fn run(args: SealArgs) -> anyhow::Result<ExitCode> {
    let text = match (&args.signing_key, &args.signing_key_file) {
        (Some(key), _) => key.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the signing key from {}", path.display()))?,
        (None, None) => unreachable!("clap requires one of them"),
    };
    let key = keys::signing_key(&text).map_err(anyhow::Error::msg)?;
    let database = crate::db::open(&args.database.settings(), true).await?;
    let store = Store::of(&database);
    loop {
        let mut conn = database.pool.acquire().await?;
        match seals::seal(&mut store.on(&mut conn), &key).await? {
            Sealing::Sealed {
                n,
                changed,
                heads,
                transactions,
            } => {
                tracing::info!(n, changed, heads, transactions, "checkpoint sealed");
                println!(
                    "{}",
                    serde_json::json!({"checkpoint": n, "heads": heads, "changed": changed,
                                       "transactions": transactions})
                );
            }
            Sealing::Unchanged => {
                tracing::info!("no chain moved and no transaction since the last checkpoint")
            }
            Sealing::Postponed => tracing::warn!(
                "a transaction prepared on a Citus worker is still prepared: no checkpoint this time"
            ),
        }
        drop(conn);
        let Some(every) = args.every_ms else {
            break;
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(every)) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    database.pool.close().await;
    Ok(ExitCode::SUCCESS)
}
