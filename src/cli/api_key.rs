//! `wallet-ledger api-key create | list | revoke`.

use super::shared::DatabaseArgs;
use crate::api_keys::{Scope, create, list, revoke};
use crate::ledger::audit;
use clap::builder::PossibleValue;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct ApiKeyArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(subcommand)]
    pub action: ApiKeyAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ApiKeyAction {
    /// Make a key; prints its token alone on stdout (only its SHA-256 is stored).
    #[command(after_help = "Example:\n  wallet-ledger api-key create --owner demo --scope admin")]
    Create {
        /// Whose key: `Idempotency-Key` ids are derived per owner, so they survive rotation.
        #[arg(long)]
        owner: String,
        #[arg(long, value_enum)]
        scope: Scope,
    },
    /// Print the keys (never their tokens), one JSON object a line.
    #[command(after_help = "Example:\n  wallet-ledger api-key list")]
    List,
    /// Revoke a key by id: it answers 401 from the next request on.
    #[command(
        after_help = "Example:\n  wallet-ledger api-key revoke 0190b6a2-7c1e-7d3f-9a4b-5c6d7e8f9a0b"
    )]
    Revoke { id: uuid::Uuid },
}

pub async fn run(args: ApiKeyArgs) -> anyhow::Result<ExitCode> {
    let pool = crate::db::connect_and_migrate(&args.database.settings()).await?;
    let mut conn = pool.acquire().await?;
    // What the operator does here is audited under their operating-system user.
    audit::scope(audit::operator(), async {
        match args.action {
            ApiKeyAction::Create { owner, scope } => {
                let (id, token) = create(&mut conn, &owner, scope).await?;
                tracing::info!(%id, %owner, scope = scope.as_str(), "API key created");
                println!("{token}");
            }
            ApiKeyAction::List => {
                for key in list(&mut conn).await? {
                    println!("{}", serde_json::to_string(&key)?);
                }
            }
            ApiKeyAction::Revoke { id } => {
                anyhow::ensure!(revoke(&mut conn, id).await?, "no API key {id}");
                tracing::info!(%id, "API key revoked");
            }
        }
        anyhow::Ok(())
    })
    .await?;
    drop(conn);
    pool.close().await;
    Ok(ExitCode::SUCCESS)
}

impl clap::ValueEnum for Scope {
    fn value_variants<'a>() -> &'a [Scope] {
        &[Scope::Read, Scope::Write, Scope::Admin]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Scope::Read => "GETs of accounts, balances, entries, holds and transactions",
            Scope::Write => "Money-moving POSTs (and everything `read` may do)",
            Scope::Admin => {
                "Accounts' lifecycle, webhooks, deliveries, reconciliations (and everything `write` may do)"
            }
        };
        Some(PossibleValue::new(self.as_str()).help(help))
    }
}
