//! `wallet-ledger reconcile`: compare the ledger with a provider's settlement file.

use super::shared::DatabaseArgs;
use crate::ledger::store::Store;
use crate::reconcile::invariants;
use crate::reconcile::report::Format;
use crate::reconcile::run::{self, ReconcileSettings};
use clap::Args;
use clap::builder::PossibleValue;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The provider whose clearing accounts (`clearing:{provider}:*`) are compared.
    #[arg(long)]
    pub provider: String,
    /// The provider's settlement file (CSV with a header row).
    #[arg(long)]
    pub settlement: std::path::PathBuf,
    /// Where report.html, report.json and exceptions.csv are written.
    #[arg(long, default_value = ".")]
    pub out: std::path::PathBuf,
    /// Which reports to write.
    #[arg(long, value_delimiter = ',', default_values = ["html", "json", "csv"])]
    pub format: Vec<Format>,
    /// Start of the settlement period (RFC 3339); default: the file's first settled_at.
    #[arg(long)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// End of the settlement period (RFC 3339); default: the file's last settled_at.
    #[arg(long)]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// Ledger payments younger than this at the period's end are not expected in the file yet.
    #[arg(long, default_value_t = 24)]
    pub settlement_lag_hours: u32,
    /// Ledger payments this much before the period may still settle in it.
    #[arg(long, default_value_t = 0)]
    pub date_tolerance_hours: u32,
    /// Amounts differing by at most this much (major units, e.g. 0.01) are equal.
    #[arg(long, default_value = "0")]
    pub amount_tolerance: rust_decimal::Decimal,
    /// Map a field to another header: `--column payment_id=PaymentID` (repeatable).
    #[arg(long = "column")]
    pub columns: Vec<String>,
    /// Compare and report, but store nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run again even if the same provider, file and options were reconciled before.
    #[arg(long)]
    pub force: bool,
    /// How long past its expiry a hold may stay pending before the invariant check flags it.
    #[arg(long, default_value_t = invariants::DEFAULT_HOLD_GRACE_MS)]
    pub hold_grace_ms: u64,
}

/// Exit 0 when clean, 1 on exceptions.
/// The file is checked and spooled before the database is reached; the pool closes before the
/// reports are written.
pub async fn run(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings();
    let prepared = run::prepare(&settings)?;
    let store = Store::of(&super::shared::connect(&settings.database).await?);
    let found = run::find_or_reconcile(&store, &settings, &prepared).await?;
    store.pool().close().await;
    drop(prepared);
    let (report, streamed_csv) = found;
    let clean = run::publish(&settings, &report, streamed_csv.as_deref())?;
    Ok(super::findings(clean))
}

impl ReconcileArgs {
    fn settings(self) -> ReconcileSettings {
        ReconcileSettings {
            database: self.database.settings(),
            provider: self.provider,
            settlement: self.settlement,
            out: self.out,
            format: self.format,
            from: self.from,
            to: self.to,
            settlement_lag_hours: self.settlement_lag_hours,
            date_tolerance_hours: self.date_tolerance_hours,
            amount_tolerance: self.amount_tolerance,
            columns: self.columns,
            dry_run: self.dry_run,
            force: self.force,
            hold_grace_ms: self.hold_grace_ms,
        }
    }
}

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Format] {
        Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Format::Html => PossibleValue::new("html").help("`report.html`, for people"),
            Format::Json => PossibleValue::new("json").help("`report.json`, for machines"),
            Format::Csv => PossibleValue::new("csv").help("`exceptions.csv`, for spreadsheets"),
        })
    }
}
