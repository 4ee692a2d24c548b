//! `wallet-ledger serve`: the REST API and its background workers.

use super::background;
use super::outbox::DispatcherArgs;
use super::shared::{
    DatabaseArgs, HoldExpiryArgs, PartitionArgs, StreamArgs, WebhookArgs, positive_usize,
};
use crate::http::transport::{self, TransportSettings};
use crate::http::{self, AppState, HttpSettings, ServeSettings, settings};
use crate::ledger::group_commit::{self, GroupCommitSettings};
use crate::ledger::replay_cache;
use crate::ledger::store::Store;
use crate::outbox::dispatcher::Dispatcher;
use crate::outbox::stream::FeedHealth;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    /// How often system-account balance checkpoints advance.
    #[arg(long, env = "CHECKPOINT_INTERVAL_MS", default_value_t = settings::DEFAULT_CHECKPOINT_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_interval_ms: u64,
    /// How often overdue holds are marked `expired`.
    #[arg(long, env = "HOLD_SWEEP_INTERVAL_MS", default_value_t = settings::DEFAULT_HOLD_SWEEP_INTERVAL_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub hold_sweep_interval_ms: u64,
    #[command(flatten)]
    pub outbox: DispatcherArgs,
    /// Do not run the webhook dispatcher inside `serve` (run `wallet-ledger outbox` instead).
    #[arg(long, env = "OUTBOX_DISABLED", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_outbox: bool,
    /// The consumer's stream and group, which `/v1/dead-letters` and `/v1/consumer` show (on
    /// the Redis of `--redis-url`).
    #[command(flatten)]
    pub stream: StreamArgs,
    #[command(flatten)]
    pub partitions: PartitionArgs,
}

/// Serves until SIGTERM/SIGINT, then drains in the order `crate::shutdown` describes.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let args = args.settings();
    let database = super::shared::connect(&args.database).await?;
    database.watch_sync_standby().await;
    let pool = database.pool.clone();
    let store = Store::of(&database);
    let listener = http::bind(args.http.listen_addr).await?;
    // The background workers stop on `shutdown`, and only once the HTTP server, which stops
    // on its child `accepting` (the signal), has closed its connections: a request finishing
    // during the drain still has them.
    let shutdown = CancellationToken::new();
    let accepting = shutdown.child_token();
    let (every, stop) = (args.checkpoint_interval, shutdown.clone());
    let checkpointer = tokio::spawn(background::checkpointer(store.clone(), every, stop));
    let (every, stop) = (args.hold_sweep_interval, shutdown.clone());
    let sweeper = tokio::spawn(background::hold_sweeper(store.clone(), every, stop));
    let mut events_feed = FeedHealth::default();
    let dispatcher = if let Some(settings) = args.outbox {
        let dispatcher = Dispatcher::new(pool.clone(), settings).await?;
        events_feed = dispatcher.feed_health();
        Some(tokio::spawn(dispatcher.run(shutdown.clone())))
    } else {
        None
    };
    crate::shutdown::cancel_on_signal(accepting.clone());
    tracing::info!(addr = %args.http.listen_addr, "serving");
    let state = AppState {
        events_feed,
        primary: database.primary.clone(),
        ..AppState::new(store, args.http)
    };
    http::serve(listener, state, accepting).await;
    shutdown.cancel();
    let _ = tokio::join!(checkpointer, sweeper);
    if let Some(dispatcher) = dispatcher {
        let _ = dispatcher.await;
    }
    pool.close().await;
    tracing::info!("stopped: requests finished or cut, pool closed");
    Ok(ExitCode::SUCCESS)
}

impl ServeArgs {
    fn settings(self) -> ServeSettings {
        let streams = http::streams::StreamsSettings {
            redis_url: self.outbox.redis.url.clone(),
            base: self.stream.settings(),
            partitions: self.partitions.settings(),
        };
        let outbox = (!self.no_outbox).then(|| self.outbox.settings(&self.http.webhooks));
        ServeSettings {
            database: self.database.settings(),
            http: HttpSettings {
                streams,
                ..self.http.settings()
            },
            checkpoint_interval: Duration::from_millis(self.checkpoint_interval_ms),
            hold_sweep_interval: Duration::from_millis(self.hold_sweep_interval_ms),
            outbox,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Address the API listens on.
    #[arg(long, env = "LISTEN_ADDR", default_value = settings::DEFAULT_LISTEN_ADDR)]
    pub listen_addr: SocketAddr,
    /// A request still running after this answers 503: its work is rolled back, or, when its
    /// group commit had already formed, committed (a retry with the same id replays it).
    #[arg(long, env = "REQUEST_TIMEOUT_MS", default_value_t = settings::DEFAULT_REQUEST_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// Largest request body; larger ones answer 413.
    #[arg(long, env = "BODY_LIMIT_BYTES", default_value_t = settings::DEFAULT_BODY_LIMIT_BYTES,
        value_parser = positive_usize)]
    pub body_limit_bytes: usize,
    /// Largest body of `POST /v1/transactions/batch`.
    #[arg(long, env = "BATCH_BODY_LIMIT_BYTES", default_value_t = settings::DEFAULT_BATCH_BODY_LIMIT_BYTES,
        value_parser = positive_usize)]
    pub batch_body_limit_bytes: usize,
    #[command(flatten)]
    pub hold_expiry: HoldExpiryArgs,
    /// How many days back a posted transaction may be dated (`effective_at`); an older date
    /// answers 422 `range`.
    #[arg(long, env = "EFFECTIVE_HORIZON_DAYS", default_value_t = 31,
        value_parser = clap::value_parser!(u16).range(1..=3660))]
    pub effective_horizon_days: u16,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    /// Requests per second each API key may make on average; more answer 429 `rate_limited`.
    #[arg(long, env = "RATE_LIMIT_PER_SECOND", default_value_t = settings::DEFAULT_RATE_LIMIT_PER_SECOND,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_per_second: u32,
    /// Requests an API key may make at once above its average rate.
    #[arg(long, env = "RATE_LIMIT_BURST", default_value_t = settings::DEFAULT_RATE_LIMIT_BURST,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_burst: u32,
    /// `GET /metrics` needs an admin key (by default it is open, like health and readiness).
    #[arg(long, env = "METRICS_REQUIRE_KEY", value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_require_key: bool,
    #[command(flatten)]
    pub group_commit: GroupCommitArgs,
    #[command(flatten)]
    pub transport: TransportArgs,
}

impl HttpArgs {
    fn settings(self) -> HttpSettings {
        HttpSettings {
            listen_addr: self.listen_addr,
            request_timeout_ms: self.request_timeout_ms,
            body_limit_bytes: self.body_limit_bytes,
            batch_body_limit_bytes: self.batch_body_limit_bytes,
            hold_expiry: self.hold_expiry.expiry(),
            effective_horizon: chrono::TimeDelta::days(i64::from(self.effective_horizon_days)),
            webhooks: self.webhooks.settings(),
            rate_limit_per_second: self.rate_limit_per_second,
            rate_limit_burst: self.rate_limit_burst,
            metrics_require_key: self.metrics_require_key,
            group_commit: self.group_commit.settings(),
            transport: self.transport.settings(),
            // Set by `ServeArgs::settings`: the Redis URL is among the dispatcher's flags.
            streams: Default::default(),
        }
    }
}

/// Group commit of the API's single creates (`ledger::group_commit`): concurrent requests are
/// written in one database transaction.
#[derive(Debug, Clone, Copy, Args)]
pub struct GroupCommitArgs {
    /// Most creates written in one database transaction.
    #[arg(long = "group-commit-max-items", env = "GROUP_COMMIT_MAX_ITEMS",
        default_value_t = group_commit::DEFAULT_GROUP_COMMIT_MAX_ITEMS, value_parser = positive_usize)]
    pub max_items: usize,
    /// How long a group waits for more creates after taking those already queued
    /// (microseconds; 0: only those queued while earlier groups commit).
    #[arg(long = "group-commit-max-wait-us", env = "GROUP_COMMIT_MAX_WAIT_US",
        default_value_t = group_commit::DEFAULT_GROUP_COMMIT_MAX_WAIT_US)]
    pub max_wait_us: u64,
    /// Most groups being written at once (each holds one database connection).
    #[arg(long = "group-commit-max-in-flight", env = "GROUP_COMMIT_MAX_IN_FLIGHT",
        default_value_t = group_commit::DEFAULT_GROUP_COMMIT_MAX_IN_FLIGHT, value_parser = positive_usize)]
    pub max_in_flight: usize,
    /// Most bytes of retried creations' stored answers kept in memory, to answer further
    /// retries without the database (0: off). Stored answers never change, so it is exact.
    #[arg(long = "replay-cache-bytes", env = "REPLAY_CACHE_BYTES",
        default_value_t = replay_cache::DEFAULT_REPLAY_CACHE_BYTES)]
    pub replay_cache_bytes: u64,
    /// How long a group waits for a row lock another transaction holds before the items
    /// touching that row are written apart and the rest of the group goes on.
    #[arg(long = "group-commit-lock-timeout-ms", env = "GROUP_COMMIT_LOCK_TIMEOUT_MS",
        default_value_t = group_commit::DEFAULT_GROUP_COMMIT_LOCK_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub lock_timeout_ms: u64,
}

impl GroupCommitArgs {
    fn settings(self) -> GroupCommitSettings {
        GroupCommitSettings {
            max_items: self.max_items,
            max_wait_us: self.max_wait_us,
            max_in_flight: self.max_in_flight,
            replay_cache_bytes: self.replay_cache_bytes,
            lock_timeout_ms: self.lock_timeout_ms,
        }
    }
}

/// The transport's limits.
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// Time a client has to send a request's head, from the connection's opening or the
    /// first byte of its next request; a slower one is disconnected.
    #[arg(long, env = "HEADER_READ_TIMEOUT_MS", default_value_t = transport::DEFAULT_HEADER_READ_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    #[arg(long, env = "IDLE_TIMEOUT_MS", default_value_t = transport::DEFAULT_IDLE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: u64,
    /// Time a client has to send a request's whole body once the handler reads it; a slower
    /// one is answered 408 `body_timeout`.
    #[arg(long, env = "BODY_READ_TIMEOUT_MS", default_value_t = transport::DEFAULT_BODY_READ_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub body_read_timeout_ms: u64,
    /// Most client connections served at once (and at most what the process's file limit
    /// allows). Above it, health checks are still answered and other requests get 503.
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = transport::DEFAULT_MAX_CONNECTIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_connections: usize,
    /// After SIGTERM, how long connections have to finish their requests before the rest
    /// are cut and the process exits.
    #[arg(long, env = "SHUTDOWN_TIMEOUT_MS", default_value_t = transport::DEFAULT_SHUTDOWN_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub shutdown_timeout_ms: u64,
    /// Largest request head (request line and headers; HTTP/2: the decoded header list);
    /// larger is 431.
    #[arg(long, env = "MAX_HEADER_BYTES", default_value_t = transport::DEFAULT_MAX_HEADER_BYTES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(8 * 1024..=1024 * 1024))]
    pub max_header_bytes: usize,
    /// Most requests one HTTP/2 connection may have open at once.
    #[arg(long, env = "HTTP2_MAX_CONCURRENT_STREAMS",
        default_value_t = transport::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
        value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub http2_max_concurrent_streams: u32,
}

impl TransportArgs {
    fn settings(self) -> TransportSettings {
        TransportSettings {
            header_read_timeout_ms: self.header_read_timeout_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            body_read_timeout_ms: self.body_read_timeout_ms,
            max_connections: self.max_connections,
            shutdown_timeout_ms: self.shutdown_timeout_ms,
            max_header_bytes: self.max_header_bytes,
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
        }
    }
}
