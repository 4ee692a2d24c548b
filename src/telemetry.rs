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
use std::sync::atomic::{AtomicBool, Ordering};
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

/// `ready`, then (with a database) `synchronous_standby: true|false|unknown` on a line of its
/// own; or 503 with why.
async fn ready(State(probe): State<Probe>) -> (StatusCode, String) {
    if !probe.readiness.get() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: a dependency is unreachable\n".into(),
        );
    }
    let Some(database) = &probe.database else {
        return (StatusCode::OK, "ready\n".into());
    };
    let sync = match tokio::time::timeout(SYNC_STANDBY_TIMEOUT, database.sync_standby()).await {
        Ok(SyncStandby::Attached) => "true",
        Ok(SyncStandby::Absent) => "false",
        Ok(SyncStandby::Unknown) | Err(_) => "unknown",
    };
    (
        StatusCode::OK,
        format!("ready\nsynchronous_standby: {sync}\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::log_colour;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colour(true, None));
        assert!(log_colour(true, Some("".into())));
        assert!(!log_colour(true, Some("1".into())));
        assert!(!log_colour(false, None));
    }
}
