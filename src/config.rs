//! Typed settings: command-line flags with environment fallbacks. Every limit, interval and
//! size is named once here, with its default, so tests can shrink them instead of sleeping.

use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::time::Duration;

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/wallet_ledger";
pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:8080";
/// Enough connections for a 2-core PostgreSQL to stay busy, few enough not to thrash it.
pub const DEFAULT_POOL_MAX_CONNECTIONS: u32 = 16;
/// Generous on purpose: requests for one hot wallet queue on its row lock while holding a
/// connection, and the ones behind them must wait for a connection rather than fail.
pub const DEFAULT_POOL_ACQUIRE_TIMEOUT_MS: u64 = 10_000;
/// Longer than the acquire timeout, so a saturated pool answers 503 before the request times out.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 256 * 1024;
pub const DEFAULT_BATCH_BODY_LIMIT_BYTES: usize = 4 * 1024 * 1024;
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 5_000;
/// A hold without `expires_at` expires after this long (7 days).
pub const DEFAULT_HOLD_EXPIRY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
pub const DEFAULT_HOLD_SWEEP_INTERVAL_MS: u64 = 1_000;
/// Most overdue holds one sweeper step expires (one short transaction each step).
pub const HOLD_SWEEP_BATCH: i64 = 1_000;
/// Most items in `POST /v1/transactions/batch`.
pub const MAX_BATCH_ITEMS: u64 = 1_000;
/// Most legs one transaction may have.
pub const MAX_LEGS: usize = 100;
/// Page sizes of every list (`?limit=`), per the contract.
pub const DEFAULT_PAGE_SIZE: i64 = 50;
pub const MAX_PAGE_SIZE: i64 = 500;
/// `Retry-After` seconds of a 503.
pub const RETRY_AFTER_SECONDS: u64 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "wallet-ledger",
    version,
    about = "A double-entry wallet ledger built on natural idempotency"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the REST API and its background workers.
    Serve(ServeArgs),
    /// Create the database if missing and apply migrations, then exit.
    Migrate(MigrateArgs),
    /// Compare the ledger with a provider's settlement file and check the ledger's invariants;
    /// exit 0 when clean, 1 on exceptions, 2 on error.
    Reconcile(ReconcileArgs),
    /// Check the ledger's invariants; exit 0 when they hold, 1 when they do not, 2 on error.
    Verify(VerifyArgs),
    /// Print the OpenAPI document (the committed `openapi/openapi.json` is this output).
    Openapi,
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseConfig {
    /// PostgreSQL URL (`serve` and `migrate` create the database if missing).
    #[arg(long = "database-url", env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub url: String,
    /// Most connections in the pool.
    #[arg(long, env = "DB_POOL_MAX_CONNECTIONS", default_value_t = DEFAULT_POOL_MAX_CONNECTIONS,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub pool_max_connections: u32,
    /// How long a request waits for a free connection before answering 503.
    #[arg(long, env = "DB_POOL_ACQUIRE_TIMEOUT_MS", default_value_t = DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub pool_acquire_timeout_ms: u64,
}

impl DatabaseConfig {
    pub fn with_url(url: impl Into<String>) -> DatabaseConfig {
        DatabaseConfig {
            url: url.into(),
            pool_max_connections: DEFAULT_POOL_MAX_CONNECTIONS,
            pool_acquire_timeout_ms: DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
        }
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.pool_acquire_timeout_ms)
    }
}

#[derive(Debug, Clone, Args)]
pub struct HttpConfig {
    /// Address the API listens on.
    #[arg(long, env = "LISTEN_ADDR", default_value = DEFAULT_LISTEN_ADDR)]
    pub listen_addr: SocketAddr,
    /// A request still running after this answers 503 (its transaction is rolled back).
    #[arg(long, env = "REQUEST_TIMEOUT_MS", default_value_t = DEFAULT_REQUEST_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// Largest request body; larger ones answer 413.
    #[arg(long, env = "BODY_LIMIT_BYTES", default_value_t = DEFAULT_BODY_LIMIT_BYTES,
        value_parser = positive_usize)]
    pub body_limit_bytes: usize,
    /// Largest body of `POST /v1/transactions/batch`.
    #[arg(long, env = "BATCH_BODY_LIMIT_BYTES", default_value_t = DEFAULT_BATCH_BODY_LIMIT_BYTES,
        value_parser = positive_usize)]
    pub batch_body_limit_bytes: usize,
    /// How long a hold created without `expires_at` lasts.
    #[arg(long, env = "HOLD_EXPIRY_MS", default_value_t = DEFAULT_HOLD_EXPIRY_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub hold_expiry_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            listen_addr: DEFAULT_LISTEN_ADDR
                .parse()
                .expect("the default address parses"),
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            body_limit_bytes: DEFAULT_BODY_LIMIT_BYTES,
            batch_body_limit_bytes: DEFAULT_BATCH_BODY_LIMIT_BYTES,
            hold_expiry_ms: DEFAULT_HOLD_EXPIRY_MS,
        }
    }
}

impl HttpConfig {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn hold_expiry(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::milliseconds(i64::try_from(self.hold_expiry_ms).unwrap_or(i64::MAX))
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub http: HttpConfig,
    /// How often system-account balance checkpoints advance.
    #[arg(long, env = "CHECKPOINT_INTERVAL_MS", default_value_t = DEFAULT_CHECKPOINT_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_interval_ms: u64,
    /// How often overdue holds are marked `expired`.
    #[arg(long, env = "HOLD_SWEEP_INTERVAL_MS", default_value_t = DEFAULT_HOLD_SWEEP_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub hold_sweep_interval_ms: u64,
}

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
}

/// Limits of zero would stop the service from doing anything; refuse them at start.
fn positive_usize(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number above 0".to_owned()),
    }
}

/// A hold still pending this long after its expiry means the sweeper is not running.
pub const DEFAULT_HOLD_GRACE_MS: u64 = 60_000;

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    /// How long past its expiry a hold may stay pending before it is a finding.
    #[arg(long, env = "HOLD_GRACE_MS", default_value_t = DEFAULT_HOLD_GRACE_MS)]
    pub hold_grace_ms: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl VerifyArgs {
    pub fn hold_grace(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::milliseconds(
            i64::try_from(self.hold_grace_ms).unwrap_or(i64::MAX / 1_000),
        )
    }
}

/// Matches listed in a reconciliation report (every match is counted).
pub const MAX_LISTED_MATCHES: usize = 10_000;

#[derive(Debug, Clone, Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
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
    pub format: Vec<crate::reconcile::report::Format>,
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
    #[arg(long, default_value_t = DEFAULT_HOLD_GRACE_MS)]
    pub hold_grace_ms: u64,
}
