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
pub const DEFAULT_POOL_PING_IDLE_MS: u64 = 1_000;
/// Longer than the acquire timeout, so a saturated pool answers 503 before the request times out.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 256 * 1024;
pub const DEFAULT_BATCH_BODY_LIMIT_BYTES: usize = 4 * 1024 * 1024;
/// Per API key: a sustained rate and the burst above it (a token bucket).
pub const DEFAULT_RATE_LIMIT_PER_SECOND: u32 = 500;
pub const DEFAULT_RATE_LIMIT_BURST: u32 = 1_000;
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 5_000;
/// A hold without `expires_at` expires after this long (7 days).
pub const DEFAULT_HOLD_EXPIRY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// A hold shorter than a second would expire before its batch or request commits.
pub const MIN_HOLD_EXPIRY_MS: u64 = 1_000;
/// 366 days: longer than any card network keeps an authorization.
pub const MAX_HOLD_EXPIRY_MS: u64 = 366 * 24 * 60 * 60 * 1000;
/// The longest of the consumer's timings (a day): far below what Redis and the clock
/// arithmetic take, and far above any sane setting.
pub const MAX_CONSUMER_DURATION_MS: u64 = 24 * 60 * 60 * 1000;
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
    /// Apply payment events from a Redis/Valkey stream, exactly once per payment.
    Consume(ConsumeArgs),
    /// Inspect, replay or drop the stream's dead letters (`<stream>.dlq`).
    Dlq(DlqArgs),
    /// Create, list or revoke API keys (`create` prints the token alone on stdout, once).
    ApiKey(ApiKeyArgs),
    /// Run the webhook dispatcher alone (several may run at once; `serve` runs one too).
    Outbox(OutboxArgs),
    /// List webhook deliveries or send one again.
    Deliveries(DeliveriesArgs),
    /// Delete delivered outbox events, old delivery attempts, old dead letters and leftover
    /// reconciliation staging older than the retention.
    Purge(PurgeArgs),
    /// Publish payment events to the stream, with a share of resends (tests, demos, benchmarks).
    Publish(PublishArgs),
    /// The seed article's lab, end to end: five payments, one resent, a consumer killed
    /// mid-batch, a second one taking over; exits 0 when the wallet gained exactly 250.00.
    Demo(DemoArgs),
    /// Run the benchmark scenarios: one JSON line each on stdout (and appended to
    /// `--results`); exit 0 when every scenario's own check passed, 1 when one failed, 2 on error.
    Bench(BenchArgs),
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseConfig {
    /// PostgreSQL URL (the subcommands that write create the database if missing and apply
    /// migrations, unless `--no-migrate`).
    #[arg(long = "database-url", env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL,
        global = true)]
    pub url: String,
    /// Most connections in the pool.
    #[arg(long, env = "DB_POOL_MAX_CONNECTIONS", default_value_t = DEFAULT_POOL_MAX_CONNECTIONS,
        value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub pool_max_connections: u32,
    /// How long a request waits for a free connection before answering 503.
    #[arg(long, env = "DB_POOL_ACQUIRE_TIMEOUT_MS", default_value_t = DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub pool_acquire_timeout_ms: u64,
    /// A pooled connection idle longer than this is pinged before use (a dead one is replaced
    /// unseen); one used more recently is handed out at once, saving a round trip per use.
    #[arg(long, env = "DB_POOL_PING_IDLE_MS", default_value_t = DEFAULT_POOL_PING_IDLE_MS,
        global = true)]
    pub pool_ping_idle_ms: u64,
    /// Neither create the database nor apply migrations; only check that the schema is
    /// current (for a role that may not create tables: migrations run as the owner).
    #[arg(long, env = "DB_NO_MIGRATE", global = true,
        value_parser = clap::builder::BoolishValueParser::new())]
    pub no_migrate: bool,
    /// The name this process's database sessions carry (`pg_stat_activity.application_name`),
    /// so an operator (or a test) can find them; default `wallet-ledger <subcommand>`.
    #[arg(long, env = "DB_APPLICATION_NAME", global = true)]
    pub application_name: Option<String>,
}

impl DatabaseConfig {
    pub fn with_url(url: impl Into<String>) -> DatabaseConfig {
        DatabaseConfig {
            url: url.into(),
            pool_max_connections: DEFAULT_POOL_MAX_CONNECTIONS,
            pool_acquire_timeout_ms: DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
            pool_ping_idle_ms: DEFAULT_POOL_PING_IDLE_MS,
            no_migrate: false,
            application_name: None,
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
    /// A request still running after this answers 503: its work is rolled back, or, when its
    /// group commit had already formed, committed (a retry with the same id replays it).
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
        value_parser = clap::value_parser!(u64).range(MIN_HOLD_EXPIRY_MS..=MAX_HOLD_EXPIRY_MS))]
    pub hold_expiry_ms: u64,
    #[command(flatten)]
    pub webhooks: WebhookPolicy,
    /// Requests per second each API key may make on average; more answer 429 `rate_limited`.
    #[arg(long, env = "RATE_LIMIT_PER_SECOND", default_value_t = DEFAULT_RATE_LIMIT_PER_SECOND,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_per_second: u32,
    /// Requests an API key may make at once above its average rate.
    #[arg(long, env = "RATE_LIMIT_BURST", default_value_t = DEFAULT_RATE_LIMIT_BURST,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_burst: u32,
    /// `GET /metrics` needs an admin key (by default it is open, like health and readiness).
    #[arg(long, env = "METRICS_REQUIRE_KEY", value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_require_key: bool,
    #[command(flatten)]
    pub group_commit: GroupCommitConfig,
    #[command(flatten)]
    pub transport: crate::http::transport::TransportConfig,
}

pub const DEFAULT_GROUP_COMMIT_MAX_ITEMS: usize = 500;
/// API keys looked up by one statement at most (`http::key_lookups`).
pub const KEY_LOOKUP_MAX_BATCH: usize = 256;
/// Key lookups running at once; each holds one pooled connection for one statement.
pub const KEY_LOOKUP_IN_FLIGHT: usize = 2;
/// How long the key lookups keep their connections after the last request: below the pool's
/// default ping-when-idle threshold, so a kept connection has been idle no longer than one the
/// pool would hand out unchecked.
pub const KEY_LOOKUP_KEEP_IDLE: std::time::Duration = std::time::Duration::from_millis(100);
const _: () = assert!(KEY_LOOKUP_KEEP_IDLE.as_millis() < DEFAULT_POOL_PING_IDLE_MS as u128);
pub const DEFAULT_GROUP_COMMIT_MAX_WAIT_US: u64 = 0;
/// Two groups at once: one writes while the next gathers and waits for the first's locks.
/// More only split the same load into smaller groups (more statements per transfer) and, on
/// a hot wallet, queue on its lock (docs/performance.md, third round).
pub const DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT: usize = 2;
pub const DEFAULT_REPLAY_CACHE_ENTRIES: usize = 4_096;
/// Far above a group's own lock waits behind the other group in flight (milliseconds, a
/// whole group's COMMIT), far below a request's timeout.
pub const DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS: u64 = 500;

/// Group commit of the API's single creates (`ledger::group_commit`): concurrent requests are
/// written in one database transaction.
#[derive(Debug, Clone, Copy, Args)]
pub struct GroupCommitConfig {
    /// Most creates written in one database transaction.
    #[arg(long = "group-commit-max-items", env = "GROUP_COMMIT_MAX_ITEMS",
        default_value_t = DEFAULT_GROUP_COMMIT_MAX_ITEMS, value_parser = positive_usize)]
    pub max_items: usize,
    /// How long a group waits for more creates after taking those already queued
    /// (microseconds; 0: only those queued while earlier groups commit).
    #[arg(long = "group-commit-max-wait-us", env = "GROUP_COMMIT_MAX_WAIT_US",
        default_value_t = DEFAULT_GROUP_COMMIT_MAX_WAIT_US)]
    pub max_wait_us: u64,
    /// Most groups being written at once (each holds one database connection).
    #[arg(long = "group-commit-max-in-flight", env = "GROUP_COMMIT_MAX_IN_FLIGHT",
        default_value_t = DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT, value_parser = positive_usize)]
    pub max_in_flight: usize,
    /// Most retried creations whose stored answer is kept in memory, to answer further
    /// retries without the database (0: off). Stored answers never change, so it is exact.
    #[arg(long = "replay-cache-entries", env = "REPLAY_CACHE_ENTRIES",
        default_value_t = DEFAULT_REPLAY_CACHE_ENTRIES)]
    pub replay_cache_entries: usize,
    /// How long a group waits for a row lock another transaction holds before the items
    /// touching that row are written apart and the rest of the group goes on.
    #[arg(long = "group-commit-lock-timeout-ms", env = "GROUP_COMMIT_LOCK_TIMEOUT_MS",
        default_value_t = DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub lock_timeout_ms: u64,
}

impl Default for GroupCommitConfig {
    fn default() -> GroupCommitConfig {
        GroupCommitConfig {
            max_items: DEFAULT_GROUP_COMMIT_MAX_ITEMS,
            max_wait_us: DEFAULT_GROUP_COMMIT_MAX_WAIT_US,
            max_in_flight: DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT,
            replay_cache_entries: DEFAULT_REPLAY_CACHE_ENTRIES,
            lock_timeout_ms: DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS,
        }
    }
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
            webhooks: WebhookPolicy::default(),
            rate_limit_per_second: DEFAULT_RATE_LIMIT_PER_SECOND,
            rate_limit_burst: DEFAULT_RATE_LIMIT_BURST,
            metrics_require_key: false,
            group_commit: GroupCommitConfig::default(),
            transport: Default::default(),
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
    #[command(flatten)]
    pub outbox: OutboxConfig,
    /// Do not run the webhook dispatcher inside `serve` (run `wallet-ledger outbox` instead).
    #[arg(long, env = "OUTBOX_DISABLED", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_outbox: bool,
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
    /// Where the consumer's dead letters are counted (`<stream>.dlq`).
    #[command(flatten)]
    pub redis: RedisConfig,
    #[command(flatten)]
    pub stream: StreamConfig,
}

impl VerifyArgs {
    pub fn hold_grace(&self) -> chrono::TimeDelta {
        hold_grace(self.hold_grace_ms)
    }
}

/// `--hold-grace-ms` as a duration; one longer than a `TimeDelta` holds (about 292 million
/// years) is taken as the longest, which no hold can be overdue by.
pub fn hold_grace(ms: u64) -> chrono::TimeDelta {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::TimeDelta::try_milliseconds)
        .unwrap_or(chrono::TimeDelta::MAX)
}

/// Matches listed in a reconciliation report (every match is counted).
pub const MAX_LISTED_MATCHES: usize = 10_000;

/// Exceptions of each code kept in a reconciliation run and its HTML and JSON reports (every
/// exception is counted, and exceptions.csv of a fresh run lists them all).
pub const MAX_LISTED_EXCEPTIONS_PER_CODE: usize = 1_000;

/// Payouts listed in a reconciliation report, the disagreeing ones first (every payout is
/// counted).
pub const MAX_LISTED_PAYOUTS: i64 = 10_000;
/// `work_mem` of the whole-ledger jobs' transactions (`reconcile`, `verify`): their sorts and
/// hashes of a million rows stay in memory instead of spilling to disk (PostgreSQL's default
/// is 4 MB, sized for many small queries at once).
pub const BATCH_JOB_WORK_MEM: &str = "256MB";

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

pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_STREAM: &str = "payments";
pub const DEFAULT_GROUP: &str = "wallet-ledger";
/// Events applied per database transaction.
pub const DEFAULT_CONSUMER_BATCH_SIZE: usize = 100;
/// Batches one `consume` process applies at once, each by a worker of its own in the group.
pub const DEFAULT_CONSUMER_WORKERS: u64 = 1;
pub const MAX_CONSUMER_WORKERS: u64 = 16;
/// Most events one batch may hold: the write path's batch limit.
pub const MAX_CONSUMER_BATCH_SIZE: usize = MAX_BATCH_ITEMS as usize;
/// How long one `XREADGROUP` waits for new events; also the longest a shutdown waits for it.
pub const DEFAULT_CONSUMER_BLOCK_MS: u64 = 2_000;
/// A message pending this long with a consumer is presumed abandoned and reclaimed.
pub const DEFAULT_CLAIM_IDLE_MS: u64 = 30_000;
/// The longest one batch may take to apply; must stay below the claim idle time, or a live
/// consumer's batch would be reclaimed (harmlessly, but wastefully) while it still works.
pub const DEFAULT_MAX_BATCH_MS: u64 = 10_000;
/// Failures caused by a message itself (unknown wallet, refund before its payment) before it
/// is dead-lettered. Its retries are spaced by the claim idle time.
pub const DEFAULT_MAX_FAILURES: u32 = 5;
/// Backoff while the database or the broker is unreachable: doubles from the first to the max.
pub const DEFAULT_OUTAGE_BACKOFF_MS: u64 = 100;
pub const DEFAULT_OUTAGE_BACKOFF_MAX_MS: u64 = 5_000;
/// How often the group's lag and pending count are read (metrics) and the stream trimmed.
pub const DEFAULT_STATS_INTERVAL_MS: u64 = 1_000;
pub const DEFAULT_TRIM_INTERVAL_MS: u64 = 60_000;
/// How long a Redis command may take beyond its own blocking time.
pub const REDIS_RESPONSE_MARGIN_MS: u64 = 5_000;

#[derive(Debug, Clone, Args)]
pub struct RedisConfig {
    /// Redis or Valkey URL; `redis+sentinel://h1:p1,h2:p2/<master name>` finds the master
    /// through Sentinels and follows it when it moves.
    #[arg(id = "redis_url", long = "redis-url", env = "REDIS_URL", default_value = DEFAULT_REDIS_URL,
        global = true)]
    pub url: String,
}

#[derive(Debug, Clone, Args)]
pub struct StreamConfig {
    /// The stream of payment events; dead letters go to `<stream>.dlq`.
    #[arg(long, env = "STREAM", default_value = DEFAULT_STREAM, global = true)]
    pub stream: String,
    /// The consumer group.
    #[arg(long, env = "CONSUMER_GROUP", default_value = DEFAULT_GROUP, global = true)]
    pub group: String,
}

impl StreamConfig {
    pub fn dead_letters(&self) -> String {
        format!("{}.dlq", self.stream)
    }

    /// Per group: how often each pending message failed by its own fault.
    pub fn failures(&self) -> String {
        format!("{}.failures.{}", self.stream, self.group)
    }
}

#[derive(Debug, Clone, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub redis: RedisConfig,
    #[command(flatten)]
    pub stream: StreamConfig,
    /// This consumer's name in the group (default: host name and process id).
    #[arg(long, env = "CONSUMER_NAME")]
    pub consumer: Option<String>,
    /// Events read and applied per database transaction.
    #[arg(long, env = "CONSUMER_BATCH_SIZE", default_value_t = DEFAULT_CONSUMER_BATCH_SIZE,
        value_parser = batch_size)]
    pub batch_size: usize,
    /// Workers in this process, each a consumer of the group (named `<consumer>-<n>` when
    /// more than one) applying its own batches: one reads and acknowledges while another's
    /// batch is in the database.
    #[arg(long, env = "CONSUMER_WORKERS", default_value_t = DEFAULT_CONSUMER_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_WORKERS))]
    pub workers: u64,
    /// How long one read waits for new events.
    #[arg(long, env = "CONSUMER_BLOCK_MS", default_value_t = DEFAULT_CONSUMER_BLOCK_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub block_ms: u64,
    /// Idle time after which another consumer's pending message is reclaimed (`XAUTOCLAIM`).
    #[arg(long, env = "CONSUMER_CLAIM_IDLE_MS", default_value_t = DEFAULT_CLAIM_IDLE_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub claim_idle_ms: u64,
    /// The longest one batch may take; checked at start to be below the claim idle time.
    #[arg(long, env = "CONSUMER_MAX_BATCH_MS", default_value_t = DEFAULT_MAX_BATCH_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub max_batch_ms: u64,
    /// Failures caused by a message itself before it is dead-lettered.
    #[arg(long, env = "CONSUMER_MAX_FAILURES", default_value_t = DEFAULT_MAX_FAILURES,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub max_failures: u32,
    /// First backoff while the database or broker is unreachable.
    #[arg(long, env = "CONSUMER_OUTAGE_BACKOFF_MS", default_value_t = DEFAULT_OUTAGE_BACKOFF_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub outage_backoff_ms: u64,
    /// Longest backoff while the database or broker is unreachable.
    #[arg(long, env = "CONSUMER_OUTAGE_BACKOFF_MAX_MS", default_value_t = DEFAULT_OUTAGE_BACKOFF_MAX_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub outage_backoff_max_ms: u64,
    /// How often lag and pending count are read for the metrics.
    #[arg(long, env = "CONSUMER_STATS_INTERVAL_MS", default_value_t = DEFAULT_STATS_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_DURATION_MS))]
    pub stats_interval_ms: u64,
    /// How often the stream is trimmed below its oldest pending entry (0: never).
    #[arg(long, env = "CONSUMER_TRIM_INTERVAL_MS", default_value_t = DEFAULT_TRIM_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(0..=MAX_CONSUMER_DURATION_MS))]
    pub trim_interval_ms: u64,
    /// How long a hold made by `payment.authorized` lasts.
    #[arg(long, env = "HOLD_EXPIRY_MS", default_value_t = DEFAULT_HOLD_EXPIRY_MS,
        value_parser = clap::value_parser!(u64).range(MIN_HOLD_EXPIRY_MS..=MAX_HOLD_EXPIRY_MS))]
    pub hold_expiry_ms: u64,
    /// Serve `/metrics` (Prometheus) and `/readyz` on this address.
    #[arg(long, env = "CONSUMER_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Exit 0 once nothing is new, nothing is pending in the group and nothing is reclaimable
    /// (tests, demos, catch-up jobs). Without it the consumer runs until SIGTERM/SIGINT.
    #[arg(long)]
    pub drain: bool,
    /// Print one line per event on stdout, as the seed article's lab does.
    #[arg(long)]
    pub print_events: bool,
}

impl ConsumeArgs {
    pub fn consumer_name(&self) -> String {
        self.consumer.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "wallet-ledger".to_owned());
            format!("{host}-{}", std::process::id())
        })
    }

    pub fn hold_expiry(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::milliseconds(i64::try_from(self.hold_expiry_ms).unwrap_or(i64::MAX))
    }

    /// The checks clap cannot make alone.
    pub fn check(&self) -> Result<(), String> {
        if self.claim_idle_ms <= self.max_batch_ms {
            return Err(format!(
                "--claim-idle-ms ({}) must exceed --max-batch-ms ({}): a batch still being \
                 applied would be reclaimed by another consumer",
                self.claim_idle_ms, self.max_batch_ms
            ));
        }
        if self.outage_backoff_max_ms < self.outage_backoff_ms {
            return Err("--outage-backoff-max-ms must be at least --outage-backoff-ms".to_owned());
        }
        Ok(())
    }
}

/// A complete stream entry id, `<milliseconds>-<sequence>`: Redis reads `1796156703304` alone
/// as a range covering every entry of that millisecond, which would act on more than was named.
fn stream_entry_id(value: &str) -> Result<String, String> {
    let complete = value.split_once('-').is_some_and(|(ms, seq)| {
        [ms, seq].iter().all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && part.parse::<u64>().is_ok()
        })
    });
    if complete {
        Ok(value.to_owned())
    } else {
        Err(
            "must be a complete entry id such as 1796016587604-0 (as `dlq list` prints it)"
                .to_owned(),
        )
    }
}

fn wallet_id(value: &str) -> Result<String, String> {
    crate::ledger::ids::AccountId::parse(value)
        .map(|id| id.to_string())
        .ok_or_else(|| "must be an account id: [A-Za-z0-9][A-Za-z0-9._:@-]{0,127}".to_owned())
}

fn batch_size(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_CONSUMER_BATCH_SIZE).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_CONSUMER_BATCH_SIZE}"
        )),
    }
}

#[derive(Debug, Clone, Args)]
pub struct DlqArgs {
    #[command(flatten)]
    pub redis: RedisConfig,
    #[command(flatten)]
    pub stream: StreamConfig,
    #[command(subcommand)]
    pub action: DlqAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum DlqAction {
    /// Print the dead letters, oldest first, one JSON object a line.
    List {
        /// Most dead letters printed.
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Publish dead letters to the stream again (same event id, so they stay idempotent)
    /// and remove them from the dead-letter stream, atomically.
    Replay {
        /// Dead-letter entry ids, exact and complete (`1796016587604-0`, as `dlq list` shows
        /// them); a repeated id counts once.
        #[arg(value_parser = stream_entry_id)]
        ids: Vec<String>,
        /// Every dead letter.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
    /// Delete dead letters for good.
    Drop {
        /// Dead-letter entry ids, exact and complete; a repeated id counts once.
        #[arg(value_parser = stream_entry_id)]
        ids: Vec<String>,
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub redis: RedisConfig,
    /// The stream to publish to.
    #[arg(long, env = "STREAM", default_value = DEFAULT_STREAM)]
    pub stream: String,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoCrash {
    /// c1 dies after its COMMIT and before its XACK (the article's crash).
    AfterCommit,
    /// c1 dies before its COMMIT.
    BeforeCommit,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub redis: RedisConfig,
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}

/// Which hosts webhook URLs may name (`WEBHOOK_ALLOWED_HOSTS`): checked when a subscription is
/// created and again before every send.
#[derive(Debug, Clone, Default, Args)]
pub struct WebhookPolicy {
    /// Comma-separated hosts (`hooks.example.com`), host:port pairs (`127.0.0.1:9000`) or
    /// suffixes (`*.example.com`); empty allows any host. A webhook makes this server send
    /// requests, so production should name its receivers.
    #[arg(
        long = "webhook-allowed-hosts",
        env = "WEBHOOK_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
}

impl WebhookPolicy {
    pub fn url_policy(&self) -> crate::outbox::subscriptions::UrlPolicy {
        crate::outbox::subscriptions::UrlPolicy {
            allowed_hosts: self
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
        }
    }
}

pub const DEFAULT_OUTBOX_INTERVAL_MS: u64 = 500;
/// Events fanned out and deliveries sent per dispatcher step.
pub const DEFAULT_OUTBOX_BATCH: i64 = 100;
pub const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
/// Attempts before a delivery is `dead`: with the default backoff, about a day of retries.
pub const DEFAULT_WEBHOOK_MAX_ATTEMPTS: i32 = 15;
pub const DEFAULT_WEBHOOK_BACKOFF_MS: u64 = 1_000;
pub const DEFAULT_WEBHOOK_BACKOFF_MAX_MS: u64 = 3_600_000;
pub const DEFAULT_WEBHOOK_CONCURRENCY: u64 = 16;
pub const DEFAULT_WEBHOOK_SUBSCRIPTION_CONCURRENCY: u64 = 4;
/// About how many entries the outbound events stream keeps (`XADD MAXLEN ~`).
pub const EVENTS_STREAM_MAX_LEN: usize = 1_000_000;

#[derive(Debug, Clone, Args)]
pub struct OutboxConfig {
    /// How often the dispatcher looks for events and due deliveries when it found none.
    #[arg(long, env = "OUTBOX_INTERVAL_MS", default_value_t = DEFAULT_OUTBOX_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub outbox_interval_ms: u64,
    /// Events fanned out per round, and the most deliveries claimed at once.
    #[arg(long, env = "OUTBOX_BATCH", default_value_t = DEFAULT_OUTBOX_BATCH,
        value_parser = clap::value_parser!(i64).range(1..=1000))]
    pub outbox_batch: i64,
    /// How long one webhook request may take.
    #[arg(long, env = "WEBHOOK_TIMEOUT_MS", default_value_t = DEFAULT_WEBHOOK_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_timeout_ms: u64,
    /// Attempts before a delivery is `dead`.
    #[arg(long, env = "WEBHOOK_MAX_ATTEMPTS", default_value_t = DEFAULT_WEBHOOK_MAX_ATTEMPTS,
        value_parser = clap::value_parser!(i32).range(1..))]
    pub webhook_max_attempts: i32,
    /// Delay before the second attempt; it doubles each time, with jitter.
    #[arg(long, env = "WEBHOOK_BACKOFF_MS", default_value_t = DEFAULT_WEBHOOK_BACKOFF_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_backoff_ms: u64,
    /// The longest delay between attempts.
    #[arg(long, env = "WEBHOOK_BACKOFF_MAX_MS", default_value_t = DEFAULT_WEBHOOK_BACKOFF_MAX_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub webhook_backoff_max_ms: u64,
    /// Requests sent at once by one dispatcher (a receiver is not flooded by a backlog).
    #[arg(long, env = "WEBHOOK_CONCURRENCY", default_value_t = DEFAULT_WEBHOOK_CONCURRENCY,
        value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub webhook_concurrency: u64,
    /// Requests one dispatcher sends at once to one subscription: a slow or hanging receiver
    /// holds at most this many of the dispatcher's requests, never the others'.
    #[arg(long, env = "WEBHOOK_SUBSCRIPTION_CONCURRENCY",
        default_value_t = DEFAULT_WEBHOOK_SUBSCRIPTION_CONCURRENCY,
        value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub webhook_subscription_concurrency: u64,
    /// Also publish every event to this Redis/Valkey stream (for example `ledger.events`),
    /// with the event id as its key; off when unset.
    #[arg(long, env = "EVENTS_STREAM")]
    pub events_stream: Option<String>,
    #[command(flatten)]
    pub redis: RedisConfig,
}

impl Default for OutboxConfig {
    fn default() -> OutboxConfig {
        OutboxConfig {
            outbox_interval_ms: DEFAULT_OUTBOX_INTERVAL_MS,
            outbox_batch: DEFAULT_OUTBOX_BATCH,
            webhook_timeout_ms: DEFAULT_WEBHOOK_TIMEOUT_MS,
            webhook_max_attempts: DEFAULT_WEBHOOK_MAX_ATTEMPTS,
            webhook_backoff_ms: DEFAULT_WEBHOOK_BACKOFF_MS,
            webhook_backoff_max_ms: DEFAULT_WEBHOOK_BACKOFF_MAX_MS,
            webhook_concurrency: DEFAULT_WEBHOOK_CONCURRENCY,
            webhook_subscription_concurrency: DEFAULT_WEBHOOK_SUBSCRIPTION_CONCURRENCY,
            events_stream: None,
            redis: RedisConfig {
                url: DEFAULT_REDIS_URL.to_owned(),
            },
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OutboxArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub outbox: OutboxConfig,
    #[command(flatten)]
    pub webhooks: WebhookPolicy,
}

#[derive(Debug, Clone, Args)]
pub struct DeliveriesArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(subcommand)]
    pub action: DeliveriesAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum DeliveriesAction {
    /// Print deliveries, newest first, one JSON object a line.
    List {
        /// Only `pending`, `delivered`, `dead` or `cancelled` ones.
        #[arg(long, value_parser = ["pending", "delivered", "dead", "cancelled"])]
        status: Option<String>,
        #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
        limit: i64,
    },
    /// Make deliveries due now with a fresh retry budget (same webhook-id).
    Redeliver {
        ids: Vec<uuid::Uuid>,
        /// Every dead delivery.
        #[arg(long, conflicts_with = "ids")]
        all_dead: bool,
    },
}

/// The shortest retention `purge` accepts beyond the broker's and producers' windows.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// The longest retention `purge` takes: a century, far inside what timestamps hold.
pub const MAX_RETENTION_DAYS: u32 = 36_500;

#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub redis: RedisConfig,
    #[command(flatten)]
    pub stream: StreamConfig,
    /// Keep everything younger than this many days (1 to 36,500: a century).
    #[arg(long, env = "RETENTION_DAYS", default_value_t = DEFAULT_RETENTION_DAYS,
        value_parser = clap::value_parser!(u32).range(1..=MAX_RETENTION_DAYS as i64))]
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

impl PurgeArgs {
    /// The oldest time kept: now less the retention.
    pub fn cutoff(&self) -> Result<chrono::DateTime<chrono::Utc>, String> {
        chrono::Utc::now()
            .checked_sub_signed(chrono::TimeDelta::days(i64::from(self.retention_days)))
            .ok_or_else(|| {
                format!(
                    "--retention-days {} reaches before year 1",
                    self.retention_days
                )
            })
    }

    /// Refuses a retention shorter than the broker's retention plus the producers' retry
    /// window: an event could still arrive again after its traces were purged.
    pub fn check(&self) -> Result<(), String> {
        let needed =
            u64::from(self.broker_retention_hours) + u64::from(self.producer_retry_window_hours);
        let retention = u64::from(self.retention_days) * 24;
        if retention < needed {
            return Err(format!(
                "--retention-days {} ({retention} h) is shorter than the broker's retention plus the producers' retry window ({needed} h)",
                self.retention_days
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Scope {
    /// GETs of accounts, balances, entries, holds and transactions.
    Read,
    /// Money-moving POSTs (and everything `read` may do).
    Write,
    /// Accounts' lifecycle, webhooks, deliveries, reconciliations (and everything `write` may do).
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(value: &str) -> Option<Scope> {
        [Scope::Read, Scope::Write, Scope::Admin]
            .into_iter()
            .find(|s| s.as_str() == value)
    }
}

#[derive(Debug, Clone, Args)]
pub struct ApiKeyArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(subcommand)]
    pub action: ApiKeyAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ApiKeyAction {
    /// Make a key; prints its token alone on stdout (only its SHA-256 is stored).
    Create {
        /// Whose key: `Idempotency-Key` ids are derived per owner, so they survive rotation.
        #[arg(long)]
        owner: String,
        #[arg(long, value_enum)]
        scope: Scope,
    },
    /// Print the keys (never their tokens), one JSON object a line.
    List,
    /// Revoke a key by id: it answers 401 from the next request on.
    Revoke { id: uuid::Uuid },
}

/// The benchmark's own database: dropped and recreated before every scenario, so its name
/// must say it is disposable (it must end in `BENCH_DATABASE_SUFFIX`).
pub const DEFAULT_BENCH_DATABASE_URL: &str =
    "postgres://postgres@127.0.0.1:5432/wallet_ledger_bench";
pub const BENCH_DATABASE_SUFFIX: &str = "_bench";
pub const DEFAULT_BENCH_RESULTS: &str = "bench-results.jsonl";
/// Concurrent HTTP connections of `api-transfers`, `api-hot` and `api-topups`.
pub const DEFAULT_BENCH_CONNECTIONS: u64 = 64;
pub const DEFAULT_BENCH_ACCOUNTS: u64 = 10_000;
/// Requests of `api-transfers`, `api-hot` and `api-topups`.
pub const DEFAULT_BENCH_REQUESTS: u64 = 50_000;
pub const DEFAULT_BENCH_BATCH_CONNECTIONS: u64 = 4;
/// `api-batch`: batches of `MAX_BATCH_ITEMS` items each.
pub const DEFAULT_BENCH_BATCHES: u64 = 200;
pub const DEFAULT_BENCH_REPLAY_CONNECTIONS: u64 = 16;
/// Replays at `--replay-connections`; the single-connection run sends a tenth of them.
pub const DEFAULT_BENCH_REPLAY_REQUESTS: u64 = 50_000;
pub const DEFAULT_BENCH_CONSUMER_PAYMENTS: u64 = 100_000;
/// Workers of the consumer child: two keep one batch in the database while the other reads and
/// acknowledges (measured in docs/performance.md).
pub const DEFAULT_BENCH_CONSUMER_WORKERS: u64 = 2;
/// Share of the consumer scenario's payments published twice (a producer's resend).
pub const BENCH_CONSUMER_RESEND_PERCENT: u8 = 10;
pub const DEFAULT_BENCH_RECONCILE_ROWS: u64 = 1_000_000;
pub const DEFAULT_BENCH_BALANCE_READ_MAX_ENTRIES: u64 = 1_000_000;
/// Sequential balance reads measured at each history size (after a warm-up).
pub const DEFAULT_BENCH_BALANCE_READS: u64 = 2_000;
pub const DEFAULT_BENCH_CEILING_TRANSFERS: u64 = 200_000;
pub const DEFAULT_BENCH_CEILING_WORKERS: u64 = 4;
/// `--quick` divides every size it does not override by this (connections stay as they are).
pub const BENCH_QUICK_DIVISOR: u64 = 20;
/// The rate limit the benchmark's server gets: high enough that the bench measures the ledger,
/// not the limiter (every line of a server scenario says so).
pub const BENCH_RATE_LIMIT: u32 = 10_000_000;

/// The benchmark's scenarios, in the order `bench` runs them (the ceiling first: it is every
/// other scenario's denominator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum BenchScenario {
    /// Bare set-based inserts of the rows a transfer writes: the database's ceiling.
    Ceiling,
    /// Transfers between random distinct wallets.
    ApiTransfers,
    /// Transfers that all debit one wallet.
    ApiHot,
    /// Payments (top-ups) crediting random wallets from one clearing account.
    ApiTopups,
    /// One transfer replayed, at 1 connection (latency) and at `--replay-connections`.
    ApiReplay,
    /// `POST /v1/transactions/batch`, independent batches of 1,000 transfers.
    ApiBatch,
    /// Payment events on a stream applied by a `consume` child process.
    Consumer,
    /// Balance-read latency of one wallet at growing history sizes.
    BalanceRead,
    /// A `reconcile` child process on a large settlement file with known exceptions.
    Reconcile,
}

/// Sizes are optional so that `--quick` can shrink the ones not given; each says its default.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Scenarios to run (default: all), always in the order listed here.
    #[arg(value_enum)]
    pub scenarios: Vec<BenchScenario>,
    /// The benchmark's PostgreSQL database, dropped and recreated before each scenario; its
    /// name must end in `_bench`.
    #[arg(long, env = "BENCH_DATABASE_URL", default_value = DEFAULT_BENCH_DATABASE_URL)]
    pub bench_database_url: String,
    #[command(flatten)]
    pub redis: RedisConfig,
    /// Where each JSON line is appended too.
    #[arg(long, default_value = DEFAULT_BENCH_RESULTS)]
    pub results: std::path::PathBuf,
    /// The wallet-ledger binary run as `serve`, `consume` and `reconcile` (default: this one).
    #[arg(long)]
    pub binary: Option<std::path::PathBuf>,
    /// An extra flag for the `serve` child, e.g. `--server-arg=--pool-max-connections=32`
    /// (repeatable).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Shrink every size not given explicitly about 20 times (tests, CI smoke runs).
    #[arg(long)]
    pub quick: bool,
    /// Keep the logs and the database after a clean run too (to profile what it left, e.g.
    /// rerun `reconcile` against the same ledger).
    #[arg(long)]
    pub keep: bool,
    /// HTTP connections of api-transfers, api-hot and api-topups [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub connections: Option<u64>,
    /// Wallets of the API and consumer scenarios [default: 10000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    pub accounts: Option<u64>,
    /// Requests of api-transfers, api-hot and api-topups [default: 50000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// HTTP connections of api-batch [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_connections: Option<u64>,
    /// 1,000-item batches of api-batch [default: 200].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batches: Option<u64>,
    /// HTTP connections of the second api-replay run [default: 16].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub replay_connections: Option<u64>,
    /// Replays at --replay-connections; the single-connection run sends a tenth [default: 50000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..))]
    pub replay_requests: Option<u64>,
    /// Distinct payments published for the consumer scenario, 10% of them twice [default: 100000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub consumer_payments: Option<u64>,
    /// The consumer child's --batch-size.
    #[arg(long, default_value_t = MAX_CONSUMER_BATCH_SIZE, value_parser = batch_size)]
    pub consumer_batch_size: usize,
    /// The consumer child's --workers.
    #[arg(long, default_value_t = DEFAULT_BENCH_CONSUMER_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..=MAX_CONSUMER_WORKERS))]
    pub consumer_workers: u64,
    /// Rows of the reconcile scenario's settlement file (at least 30: the deliberate
    /// exceptions) [default: 1000000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(30..))]
    pub reconcile_rows: Option<u64>,
    /// The largest history of the balance-read scenario, built up from 1,000 through 100,000
    /// and 1,000,000 entries [default: 1000000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub balance_read_max_entries: Option<u64>,
    /// Sequential balance reads measured at each history size [default: 2000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub balance_reads: Option<u64>,
    /// Transfers inserted by the ceiling scenario [default: 200000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ceiling_transfers: Option<u64>,
    /// Concurrent database connections of the ceiling scenario.
    #[arg(long, default_value_t = DEFAULT_BENCH_CEILING_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub ceiling_workers: u64,
}
