//! Flag groups several commands share, each defined once, and the library settings they make.

use crate::broker::{self, RedisSettings};
use crate::consumer::partition::{self, Partitions};
use crate::consumer::stream::{self, StreamSettings};
use crate::db::{self, DatabaseSettings};
use crate::ledger::holds;
use crate::outbox::subscriptions::WebhookPolicy;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL (the subcommands that write create the database if missing and apply
    /// migrations, unless `--no-migrate`).
    #[arg(long = "database-url", env = "DATABASE_URL", default_value = db::DEFAULT_DATABASE_URL,
        global = true, hide_env_values = true)]
    pub url: String,
    /// Most connections in the pool.
    #[arg(long, env = "DB_POOL_MAX_CONNECTIONS", default_value_t = db::DEFAULT_POOL_MAX_CONNECTIONS,
        value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub pool_max_connections: u32,
    /// How long a request waits for a free connection before answering 503.
    #[arg(long, env = "DB_POOL_ACQUIRE_TIMEOUT_MS", default_value_t = db::DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub pool_acquire_timeout_ms: u64,
    /// A pooled connection idle longer than this is pinged before use (a dead one is replaced
    /// unseen); one used more recently is handed out at once, saving a round trip per use.
    #[arg(long, env = "DB_POOL_PING_IDLE_MS", default_value_t = db::DEFAULT_POOL_PING_IDLE_MS,
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

impl DatabaseArgs {
    pub fn settings(self) -> DatabaseSettings {
        DatabaseSettings {
            url: self.url,
            pool_max_connections: self.pool_max_connections,
            pool_acquire_timeout_ms: self.pool_acquire_timeout_ms,
            pool_ping_idle_ms: self.pool_ping_idle_ms,
            no_migrate: self.no_migrate,
            application_name: self.application_name,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct RedisArgs {
    /// Redis or Valkey URL; `redis+sentinel://h1:p1,h2:p2/<master name>` finds the master
    /// through Sentinels and follows it when it moves; `redis+cluster://h1:p1,h2:p2,...` is a
    /// Redis Cluster (streams need `--partitions` of 2 or more there).
    #[arg(id = "redis_url", long = "redis-url", value_name = "URL", env = "REDIS_URL", default_value = broker::DEFAULT_REDIS_URL,
        global = true, hide_env_values = true)]
    pub url: String,
}

impl RedisArgs {
    pub fn settings(self) -> RedisSettings {
        RedisSettings { url: self.url }
    }
}

#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    /// The stream of payment events; dead letters go to `<stream>.dlq`.
    #[arg(long, env = "STREAM", default_value = stream::DEFAULT_STREAM, global = true)]
    pub stream: String,
    /// The consumer group.
    #[arg(long, env = "CONSUMER_GROUP", default_value = stream::DEFAULT_GROUP, global = true)]
    pub group: String,
}

impl StreamArgs {
    pub fn settings(self) -> StreamSettings {
        StreamSettings {
            stream: self.stream,
            group: self.group,
        }
    }
}

/// How many partition streams the payment events are spread over, by wallet
/// (docs/consumer.md, "Partitioned streams").
#[derive(Debug, Clone, Args)]
pub struct PartitionArgs {
    /// Partition streams of `--stream`, chosen by wallet: partition `p` is `<stream>:{p}`;
    /// 1 is `<stream>` itself (1 to 1024).
    #[arg(long, env = "STREAM_PARTITIONS", default_value_t = partition::DEFAULT_PARTITIONS,
        value_parser = clap::value_parser!(u16).range(1..=i64::from(partition::MAX_PARTITIONS)),
        global = true)]
    pub partitions: u16,
}

impl PartitionArgs {
    pub fn settings(&self) -> Partitions {
        Partitions::new(u32::from(self.partitions)).expect("clap checked the range")
    }
}

/// The one flag for how long a hold lasts when its creator names no expiry: `serve` uses it
/// for API holds without `expires_at`, `consume` for holds made by `payment.authorized`.
#[derive(Debug, Clone, Args)]
pub struct HoldExpiryArgs {
    /// How long a hold lasts when its creator names no expiry (an API hold without
    /// `expires_at`, a hold made by `payment.authorized`).
    #[arg(long, env = "HOLD_EXPIRY_MS", default_value_t = holds::DEFAULT_HOLD_EXPIRY_MS,
        value_parser = clap::value_parser!(u64).range(holds::MIN_HOLD_EXPIRY_MS..=holds::MAX_HOLD_EXPIRY_MS))]
    pub hold_expiry_ms: u64,
}

impl HoldExpiryArgs {
    pub fn expiry(&self) -> chrono::TimeDelta {
        holds::expiry_after_ms(self.hold_expiry_ms)
    }
}

/// Which hosts webhook URLs may name (`WEBHOOK_ALLOWED_HOSTS`): checked when a subscription is
/// created and again before every send.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
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

impl WebhookArgs {
    pub fn settings(self) -> WebhookPolicy {
        WebhookPolicy {
            allowed_hosts: self.allowed_hosts,
        }
    }
}

/// Limits of zero would stop the service from doing anything; refuse them at start.
pub fn positive_usize(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number above 0".to_owned()),
    }
}

/// Where each process connects: creates the database if missing and applies pending migrations
/// (with `--no-migrate`, only checks the schema), the one place a command's store is built.
pub async fn connect(database: &crate::db::DatabaseSettings) -> anyhow::Result<db::Database> {
    db::open(database, true).await
}
