//! What `serve` and the router take: plain settings, built by `cli::serve` from its flags and
//! by tests from `Default`.

use crate::db::DatabaseSettings;
use crate::http::transport::TransportSettings;
use crate::ledger::group_commit::GroupCommitSettings;
use crate::outbox::subscriptions::WebhookPolicy;
use std::net::SocketAddr;
use std::time::Duration;

pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:8080";
/// Longer than the acquire timeout, so a saturated pool answers 503 before the request times out.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 256 * 1024;
pub const DEFAULT_BATCH_BODY_LIMIT_BYTES: usize = 4 * 1024 * 1024;
/// Per API key: a sustained rate and the burst above it (a token bucket).
pub const DEFAULT_RATE_LIMIT_PER_SECOND: u32 = 500;
pub const DEFAULT_RATE_LIMIT_BURST: u32 = 1_000;
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 5_000;
pub const DEFAULT_HOLD_SWEEP_INTERVAL_MS: u64 = 1_000;

/// The router's settings (`AppState::config`).
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub listen_addr: SocketAddr,
    pub request_timeout_ms: u64,
    pub body_limit_bytes: usize,
    pub batch_body_limit_bytes: usize,
    /// How long a hold created without `expires_at` lasts.
    pub hold_expiry: chrono::TimeDelta,
    /// How far back a posted transaction may be dated (`effective_at`).
    pub effective_horizon: chrono::TimeDelta,
    pub webhooks: WebhookPolicy,
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// `GET /metrics` needs an admin key.
    pub metrics_require_key: bool,
    pub group_commit: GroupCommitSettings,
    pub transport: TransportSettings,
    /// The consumer's streams, for the admin endpoints of dead letters and backlog.
    pub streams: super::streams::StreamsSettings,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            listen_addr: DEFAULT_LISTEN_ADDR
                .parse()
                .expect("the default address parses"),
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            body_limit_bytes: DEFAULT_BODY_LIMIT_BYTES,
            batch_body_limit_bytes: DEFAULT_BATCH_BODY_LIMIT_BYTES,
            hold_expiry: crate::ledger::holds::default_expiry(),
            effective_horizon: crate::ledger::effective::DEFAULT_HORIZON,
            webhooks: WebhookPolicy::default(),
            rate_limit_per_second: DEFAULT_RATE_LIMIT_PER_SECOND,
            rate_limit_burst: DEFAULT_RATE_LIMIT_BURST,
            metrics_require_key: false,
            group_commit: GroupCommitSettings::default(),
            transport: TransportSettings::default(),
            streams: Default::default(),
        }
    }
}

impl HttpSettings {
    /// What a create may ask for: a hold's default expiry, how far back it may be dated.
    pub fn create_policy(&self) -> super::requests::CreatePolicy {
        super::requests::CreatePolicy {
            hold_expiry: self.hold_expiry,
            effective_horizon: self.effective_horizon,
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}

/// Everything `serve` runs: the API and its background workers.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub database: DatabaseSettings,
    pub http: HttpSettings,
    /// How often system-account balance checkpoints advance.
    pub checkpoint_interval: Duration,
    /// How often overdue holds are marked `expired`.
    pub hold_sweep_interval: Duration,
    /// The webhook dispatcher run inside `serve`; `None` when it runs apart.
    pub outbox: Option<crate::outbox::dispatcher::Settings>,
}
