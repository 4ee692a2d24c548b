//! The workers' operational endpoints: `/metrics` (Prometheus text) and `/readyz`, on an
//! address of their own so an orchestrator can scrape and probe a process that has no API.

use crate::db::Database;
use crate::db::primary::SyncStandby;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use tokio_util::sync::CancellationToken;

/// How long `/readyz` waits to learn whether the primary has a synchronous standby.
const SYNC_STANDBY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Latency buckets (seconds) of every `*_seconds` histogram: 1 ms to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Buckets of batch sizes: 1 to the largest batch. (Bucket bounds are `f64` because the
/// Prometheus exporter's API takes them so; they are counts, never money.)
const SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// Whether the process can do its work now (for `/readyz`): a worker clears it while the
/// database or the broker is unreachable and sets it again once they answer.
#[derive(Clone, Default)]
pub struct Readiness {
    ready: Arc<AtomicBool>,
    /// Set once something stopped for good (a consumer worker the broker refused): ready
    /// never again, whatever the dependencies answer, until the process is restarted.
    broken: Arc<AtomicBool>,
}

impl Readiness {
    pub fn new(ready: bool) -> Readiness {
        Readiness {
            ready: Arc::new(AtomicBool::new(ready)),
            broken: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn set(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Not ready from now on.
    pub fn break_for_good(&self) {
        self.broken.store(true, Ordering::Relaxed);
    }

    pub fn get(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && !self.broken.load(Ordering::Relaxed)
    }
}

/// How a readiness probe's answer compares with the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeChange {
    /// The first probe, ready: nothing to say.
    FirstReady,
    Unchanged,
    BecameReady,
    BecameUnready,
}

/// The answer of the last readiness probe, so that an outage is logged once when it starts
/// and once when it ends, not on every probe (an orchestrator probes every few seconds).
#[derive(Debug, Default)]
pub struct ProbeLog(AtomicU8);

const PROBE_NONE: u8 = 0;
const PROBE_READY: u8 = 1;
const PROBE_UNREADY: u8 = 2;

impl ProbeLog {
    pub const fn new() -> ProbeLog {
        ProbeLog(AtomicU8::new(PROBE_NONE))
    }

    /// Records a probe's answer and logs it if it changed (at debug level otherwise).
    pub fn record(&self, ready: bool, why: &str) {
        let now = if ready { PROBE_READY } else { PROBE_UNREADY };
        match probe_change(self.0.swap(now, Ordering::Relaxed), ready) {
            ProbeChange::BecameUnready => tracing::warn!(reason = why, "not ready"),
            ProbeChange::BecameReady => tracing::info!("ready again"),
            ProbeChange::FirstReady | ProbeChange::Unchanged => {
                tracing::debug!(ready, reason = why, "readiness probe")
            }
        }
    }
}

/// The decision alone: the previous answer (`PROBE_*`) and this one.
pub fn probe_change(before: u8, ready: bool) -> ProbeChange {
    match (before, ready) {
        (PROBE_NONE, true) => ProbeChange::FirstReady,
        (PROBE_READY, true) | (PROBE_UNREADY, false) => ProbeChange::Unchanged,
        (_, true) => ProbeChange::BecameReady,
        (_, false) => ProbeChange::BecameUnready,
    }
}

/// Whether the log is coloured: only on a terminal, and not when `NO_COLOR` is set to anything
/// but the empty string (no-color.org).
pub fn log_colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The process-wide Prometheus recorder, installed on first use (the API, the consumer and
/// tests in one process share it).
pub fn recorder() -> anyhow::Result<PrometheusHandle> {
    static RECORDER: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Suffix("_size".into()), SIZE_BUCKETS)
                })
                .map_err(|e| e.to_string())?;
            let handle = builder.install_recorder().map_err(|e| e.to_string())?;
            crate::metrics_catalog::describe();
            Ok(handle)
        })
        .clone()
        .map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))
}

/// The metrics as Prometheus text, after the histograms' upkeep.
pub fn render(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    handle.render()
}

#[derive(Clone)]
struct Probe {
    metrics: PrometheusHandle,
    readiness: Readiness,
    /// The database the process writes to: `/readyz` says whether its primary has a
    /// synchronous standby.
    database: Option<Database>,
}

/// Serves `/metrics` and `/readyz` on `addr` in the background until `shutdown` is cancelled
/// (then it stops accepting and finishes the requests in hand); returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    readiness: Readiness,
    database: Option<Database>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let metrics = recorder()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/readyz", get(ready))
        .with_state(Probe {
            metrics,
            readiness,
            database,
        });
    tokio::spawn(async move {
        let serving = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(e) = serving.await {
            tracing::error!(error = %e, "the metrics endpoint stopped");
        }
    });
    tracing::info!(%bound, "serving /metrics and /readyz");
    Ok(bound)
}

async fn scrape(State(probe): State<Probe>) -> ([(&'static str, &'static str); 1], String) {
    (
        [("content-type", "text/plain; version=0.0.4")],
        render(&probe.metrics),
    )
}

/// The consumer's readiness, in the API's shapes: `{"status":"ready","database":
/// {"synchronous_standby":true|false|null}}`, or 503 `application/problem+json` with code
/// `unavailable` saying why.
async fn ready(State(probe): State<Probe>) -> axum::response::Response {
    static LOG: ProbeLog = ProbeLog::new();
    if !probe.readiness.get() {
        let why = "a dependency is unreachable";
        LOG.record(false, why);
        return crate::http::error::not_ready(why);
    }
    LOG.record(true, "");
    let mut body = serde_json::json!({"status": "ready"});
    if let Some(database) = &probe.database {
        let sync = tokio::time::timeout(SYNC_STANDBY_TIMEOUT, database.sync_standby())
            .await
            .unwrap_or(SyncStandby::Unknown);
        body["database"] = serde_json::json!({"synchronous_standby": sync.as_json()});
    }
    crate::http::responses::json_response(StatusCode::OK, body.to_string())
}

#[cfg(test)]
mod tests {
    use super::log_colour;

    #[test]
    fn an_outage_is_logged_when_it_starts_and_ends_not_on_every_probe() {
        use super::{PROBE_NONE, PROBE_READY, PROBE_UNREADY, ProbeChange, probe_change};
        assert_eq!(probe_change(PROBE_NONE, true), ProbeChange::FirstReady);
        assert_eq!(probe_change(PROBE_NONE, false), ProbeChange::BecameUnready);
        assert_eq!(probe_change(PROBE_READY, false), ProbeChange::BecameUnready);
        assert_eq!(probe_change(PROBE_UNREADY, false), ProbeChange::Unchanged);
        assert_eq!(probe_change(PROBE_UNREADY, true), ProbeChange::BecameReady);
        assert_eq!(probe_change(PROBE_READY, true), ProbeChange::Unchanged);
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colour(true, None));
        assert!(log_colour(true, Some("".into())));
        assert!(!log_colour(true, Some("1".into())));
        assert!(!log_colour(false, None));
    }
}
