//! `wallet-ledger deliveries list | redeliver`.

use super::shared::DatabaseArgs;
use crate::http::accounts::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::ledger::audit;
use crate::outbox::deliveries::{self, DeliveryStatus, Filter, Redelivery};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct DeliveriesArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(subcommand)]
    pub action: DeliveriesAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum DeliveriesAction {
    /// Print deliveries, newest first, one JSON object a line.
    #[command(after_help = "Example:\n  wallet-ledger deliveries list --status dead --limit 20")]
    List {
        /// Only `pending`, `delivered`, `dead` or `cancelled` ones.
        #[arg(long, value_parser = delivery_status())]
        status: Option<DeliveryStatus>,
        #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
        limit: i64,
    },
    /// Make deliveries due now with a fresh retry budget (same webhook-id).
    #[command(after_help = "Example:\n  wallet-ledger deliveries redeliver --all-dead")]
    Redeliver {
        ids: Vec<uuid::Uuid>,
        /// Every dead delivery.
        #[arg(long, conflicts_with = "ids")]
        all_dead: bool,
    },
}

/// The statuses `--status` takes, spelled as the API spells them.
fn delivery_status() -> impl TypedValueParser<Value = DeliveryStatus> {
    PossibleValuesParser::new(DeliveryStatus::ALL.map(DeliveryStatus::as_str))
        .map(|s| DeliveryStatus::parse(&s).expect("one of the possible values"))
}

pub async fn run(args: DeliveriesArgs) -> anyhow::Result<ExitCode> {
    let pool = crate::db::connect(&args.database.settings()).await?;
    let mut conn = pool.acquire().await?;
    match args.action {
        DeliveriesAction::List { status, limit } => {
            let filter = Filter {
                status,
                limit: limit.clamp(1, MAX_PAGE_SIZE),
                ..Filter::default()
            };
            for delivery in deliveries::list(&mut conn, &filter).await?.0 {
                println!("{}", serde_json::to_string(&delivery)?);
            }
        }
        DeliveriesAction::Redeliver { ids, all_dead } => {
            let ids = if all_dead {
                deliveries::redeliverable_dead(&mut conn).await?
            } else {
                ids
            };
            anyhow::ensure!(
                !ids.is_empty() || all_dead,
                "name the deliveries to send again, or pass --all-dead"
            );
            for id in &ids {
                // Audited under the operator's operating-system user, like the API's own.
                let redelivery =
                    audit::scope(audit::operator(), deliveries::redeliver(&mut conn, *id));
                match redelivery.await? {
                    Redelivery::Scheduled(_) => println!("{id}: due now"),
                    Redelivery::NotFound => anyhow::bail!("no delivery {id}"),
                    Redelivery::Cancelled => {
                        anyhow::bail!("delivery {id} was cancelled: its webhook is deleted")
                    }
                }
            }
            println!("{} deliveries scheduled", ids.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
