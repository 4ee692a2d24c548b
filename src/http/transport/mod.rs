//! The sockets under the router: accepting within a cap, HTTP/1.1 and HTTP/2 (cleartext) with
//! bounded heads, idle connections closed, and a shutdown that ends by a deadline whatever
//! clients do.
//!
//! Why not `axum::serve`: it installs no timer (a client sending half a request line holds a
//! connection, and the shutdown, forever), has no connection cap, and answers `EMFILE` by
//! retrying once a second while every new client, health checks included, times out.
//!
//! Limits, and who enforces them:
//! - request heads: `--max-header-bytes` (431) and `--header-read-timeout-ms` (cut), here;
//! - idle keep-alive connections: `--idle-timeout-ms`, here;
//! - bodies: `--body-limit-bytes` (413, from the declared length before reading) and
//!   `--body-read-timeout-ms` (408), in the router (`http::body`);
//! - handlers: `--request-timeout-ms` (503), in the router;
//! - connections: `--max-connections`; above it [`OVERFLOW_CONNECTIONS`] more are accepted to
//!   answer health checks and refuse the rest with 503, and beyond those new connections wait
//!   in the kernel's backlog.

mod io;
mod service;
pub mod watchdog;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use service::{Admission, ConnectionService};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use watchdog::{Activity, Timers, Verdict};

pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Above the idle timeout of the usual load balancers (60 s), so that the balancer, not the
/// service, closes a resting connection: a request it sends as the service closes would fail.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 75_000;
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;
/// Longer than the request timeout, so in-flight requests finish or time out first.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 35_000;
pub const DEFAULT_MAX_HEADER_BYTES: usize = 16 * 1024;
pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Connections accepted above the cap, to answer health checks and refuse the rest.
pub const OVERFLOW_CONNECTIONS: usize = 64;
/// File descriptors kept for everything that is not a client connection (database pool,
/// Redis, webhook deliveries, logs).
const RESERVED_FILES: u64 = 256;
/// HTTP/2 streams a client may reset before the server accepts them (the rapid-reset flood,
/// CVE-2023-44487); more end the connection with `ENHANCE_YOUR_CALM`.
const HTTP2_MAX_PENDING_RESETS: usize = 20;
/// Streams the server may reset for a client's protocol errors before it ends the connection.
const HTTP2_MAX_LOCAL_RESETS: usize = 256;
const HTTP2_KEEP_ALIVE: Duration = Duration::from_secs(20);

/// The transport's limits (flags of `serve`), small in tests.
#[derive(Debug, Clone)]
pub struct TransportSettings {
    /// Time a client has to send a request's head; a slower one is disconnected.
    pub header_read_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout_ms: u64,
    /// Time a client has to send a request's whole body once the handler reads it (408).
    pub body_read_timeout_ms: u64,
    /// Most client connections served at once; above it health checks are still answered.
    pub max_connections: usize,
    /// After SIGTERM, how long connections have to finish before the rest are cut.
    pub shutdown_timeout_ms: u64,
    /// Largest request head (431 above it).
    pub max_header_bytes: usize,
    /// Most requests one HTTP/2 connection may have open at once.
    pub http2_max_concurrent_streams: u32,
}

impl Default for TransportSettings {
    fn default() -> TransportSettings {
        TransportSettings {
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            body_read_timeout_ms: DEFAULT_BODY_READ_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            http2_max_concurrent_streams: DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
        }
    }
}

impl TransportSettings {
    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }

    fn timers(&self) -> Timers {
        let header_read = Duration::from_millis(self.header_read_timeout_ms);
        Timers {
            header_read,
            idle: Duration::from_millis(self.idle_timeout_ms),
            closing_grace: header_read,
        }
    }

    fn builder(&self) -> Builder<TokioExecutor> {
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            // hyper's own head timeout would also close connections resting between
            // requests; the watchdog times heads instead.
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            // A head must fit the read buffer (else 431), and the buffer is all a trickled
            // head can make a connection hold (hyper's default is about 400 KB).
            .max_buf_size(self.max_header_bytes)
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.http2_max_concurrent_streams)
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX))
            .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_RESETS)
            .max_local_error_reset_streams(HTTP2_MAX_LOCAL_RESETS)
            .keep_alive_interval(HTTP2_KEEP_ALIVE)
            .keep_alive_timeout(HTTP2_KEEP_ALIVE);
        builder
    }
}

/// What the shutdown did, for its log line.
#[derive(Debug, Clone, Copy)]
pub struct Stopped {
    pub open_at_signal: usize,
    pub cut_at_deadline: usize,
}

/// Serves `router` until `shutdown` is cancelled, then stops accepting, lets connections
/// finish their requests, and cuts what is still open after `--shutdown-timeout-ms`.
///
/// The connections' own stages come after the accept loop's, each a token of its own:
/// `closing` (finish the request in hand, then close) once the loop has stopped and counted
/// what is open, and `cut`, its parent, at the deadline.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &TransportSettings,
    shutdown: CancellationToken,
) -> Stopped {
    let max_connections = fit_file_limit(config.max_connections);
    let builder = Arc::new(config.builder());
    let timers = config.timers();
    let served = Arc::new(Semaphore::new(max_connections));
    let overflow = Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS));
    let cut = CancellationToken::new();
    let closing = cut.child_token();
    let mut accept_errors = AcceptErrors::default();
    let busiest = Arc::new(AtomicUsize::new(0));
    tokio::spawn(return_memory_after_bursts(
        served.clone(),
        max_connections,
        busiest.clone(),
        shutdown.clone(),
    ));
    loop {
        let (admission, permit) = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            admitted = admit(&served, &overflow) => admitted,
        };
        let stream = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_errors.wait_after(e).await;
                    continue;
                }
            },
        };
        busiest.fetch_max(
            max_connections - served.available_permits(),
            Ordering::Relaxed,
        );
        let connection = Connection {
            builder: builder.clone(),
            router: router.clone(),
            admission,
            timers,
            closing: closing.clone(),
            cut: cut.clone(),
        };
        tokio::spawn(connection.run(stream, permit));
    }
    drop(listener);
    let open = |s: &Semaphore, max: usize| max - s.available_permits();
    let open_at_signal = open(&served, max_connections) + open(&overflow, OVERFLOW_CONNECTIONS);
    closing.cancel();
    let all_closed = async {
        let _ = served.acquire_many(max_connections as u32).await;
        let _ = overflow.acquire_many(OVERFLOW_CONNECTIONS as u32).await;
    };
    let deadline = Duration::from_millis(config.shutdown_timeout_ms);
    let cut_at_deadline = match tokio::time::timeout(deadline, all_closed).await {
        Ok(()) => 0,
        Err(_) => {
            let still_open = open(&served, max_connections) + open(&overflow, OVERFLOW_CONNECTIONS);
            cut.cancel();
            still_open
        }
    };
    Stopped {
        open_at_signal,
        cut_at_deadline,
    }
}

/// A slot for the next connection: within the cap if one is free, else an overflow one,
/// else the first of either to free up.
async fn admit(
    served: &Arc<Semaphore>,
    overflow: &Arc<Semaphore>,
) -> (Admission, OwnedSemaphorePermit) {
    if let Ok(permit) = served.clone().try_acquire_owned() {
        return (Admission::Served, permit);
    }
    if let Ok(permit) = overflow.clone().try_acquire_owned() {
        return (Admission::Overflow, permit);
    }
    // Neither semaphore is ever closed.
    tokio::select! {
        Ok(permit) = served.clone().acquire_owned() => (Admission::Served, permit),
        Ok(permit) = overflow.clone().acquire_owned() => (Admission::Overflow, permit),
    }
}

struct Connection {
    builder: Arc<Builder<TokioExecutor>>,
    router: Router,
    admission: Admission,
    timers: Timers,
    /// Cancelled once the server stops accepting: finish the request in hand, then close.
    closing: CancellationToken,
    /// Cancelled at the shutdown deadline: close now.
    cut: CancellationToken,
}

impl Connection {
    /// Serves one connection until it ends, its watchdog cuts it, or the shutdown deadline
    /// does. The permit is its place under the cap, released when it ends.
    async fn run(self, stream: TcpStream, _permit: OwnedSemaphorePermit) {
        let _ = stream.set_nodelay(true);
        let activity = Activity::new(Instant::now());
        let io = TokioIo::new(io::TrackedStream::new(stream, activity.clone()));
        let service = ConnectionService {
            router: self.router.clone(),
            activity: activity.clone(),
            admission: self.admission,
        };
        let conn = self.builder.serve_connection(io, service);
        tokio::pin!(conn);
        let timers = match self.admission {
            Admission::Served => self.timers,
            // Overflow connections serve one request, then close.
            Admission::Overflow => Timers {
                idle: Duration::ZERO,
                ..self.timers
            },
        };
        // Busy connections have no deadline of their own; they are looked at this often, so
        // that one that went idle meanwhile is timed from when it did.
        let recheck = timers
            .header_read
            .min(timers.idle)
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut stopping = self.closing.is_cancelled();
        if stopping {
            conn.as_mut().graceful_shutdown();
        }
        loop {
            let now = Instant::now();
            let wake = match watchdog::verdict(&activity.state(), now, &timers) {
                Verdict::Wait(Some(at)) => at.min(now + recheck),
                Verdict::Wait(None) => now + recheck,
                Verdict::CloseIdle => {
                    activity.closing(now);
                    conn.as_mut().graceful_shutdown();
                    continue;
                }
                Verdict::Cut(reason) => {
                    metrics::counter!("wallet_ledger_http_connections_cut_total", "reason" => reason.label())
                        .increment(1);
                    tracing::debug!(reason = reason.label(), "connection cut");
                    return;
                }
            };
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = tokio::time::sleep_until(wake) => {}
                () = self.closing.cancelled(), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = self.cut.cancelled() => return,
            }
        }
    }
}

/// Connections that must have closed since the busiest moment before memory is handed back.
const TRIM_AFTER_CLOSED: usize = 1_000;

/// Hands memory back to the system after a burst of connections has closed. Their buffers
/// are freed, but glibc's allocator keeps freed pages for reuse: without this, 5,000
/// connections that came and went left the process 55 MiB larger for good. Stops when the
/// server stops accepting.
async fn return_memory_after_bursts(
    served: Arc<Semaphore>,
    max_connections: usize,
    busiest: Arc<AtomicUsize>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let open = max_connections - served.available_permits();
        if busiest.load(Ordering::Relaxed).saturating_sub(open) >= TRIM_AFTER_CLOSED {
            trim_heap();
            busiest.store(open, Ordering::Relaxed);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// `accept` failing for want of file descriptors or memory is the process's state, not the
/// client's: wait a little (the connections that end free some) and log it at most once a
/// second. Other failures belong to one connection and are skipped.
#[derive(Default)]
struct AcceptErrors {
    last_logged: Option<Instant>,
}

impl AcceptErrors {
    async fn wait_after(&mut self, error: std::io::Error) {
        let exhausted = matches!(
            error.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
        );
        if !exhausted {
            tracing::debug!(%error, "accept failed for one connection");
            return;
        }
        metrics::counter!("wallet_ledger_http_accept_errors_total").increment(1);
        let now = Instant::now();
        if self
            .last_logged
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(%error, "cannot accept connections: lower --max-connections or raise the file limit");
            self.last_logged = Some(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Raises the soft file limit as far as needed (and the hard limit allows), and lowers the
/// connection cap to what the limit can hold, saying so.
fn fit_file_limit(max_connections: usize) -> usize {
    let wanted = (max_connections + OVERFLOW_CONNECTIONS) as u64 + RESERVED_FILES;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return max_connections;
    }
    if limit.rlim_cur < wanted {
        let raised = libc::rlimit {
            rlim_cur: wanted.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = raised.rlim_cur;
        }
    }
    let fits = limit
        .rlim_cur
        .saturating_sub(RESERVED_FILES + OVERFLOW_CONNECTIONS as u64)
        .max(1) as usize;
    if fits < max_connections {
        tracing::warn!(
            max_connections,
            file_limit = limit.rlim_cur,
            serving = fits,
            "the file limit holds fewer connections than --max-connections"
        );
        return fits;
    }
    max_connections
}
