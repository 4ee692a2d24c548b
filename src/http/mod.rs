//! The REST API: the router (`app`, which tests drive without a socket) and `serve`, which
//! serves it on a socket and closes its connections gracefully (`cli::serve` composes the
//! process around it).

pub mod accounts;
pub mod auth;
pub mod batch;
pub mod body;
pub mod checkpoints;
pub mod console;
pub mod consumer_state;
pub mod dead_letters;
pub mod error;
pub mod exchanges;
pub mod extract;
pub mod failover;
pub mod health;
pub mod key_lookups;
pub mod limits;
pub mod metadata_erasure;
pub mod metrics;
pub mod monitors;
pub mod openapi;
pub mod openapi_rules;
pub mod problem;
pub mod reconciliations;
pub mod requests;
pub mod responses;
pub mod search;
pub mod sets;
pub mod settings;
pub mod stats;
pub mod streams;
pub mod transaction_events;
pub mod transactions;
pub mod transport;
pub mod validate;
pub mod webhooks;

use crate::ledger::caller::{self, AtDeadline, Caller, Phase};
use crate::ledger::group_commit::GroupCommit;
use crate::ledger::store::Store;
use anyhow::Context;
use axum::Extension;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use error::ApiError;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

pub use settings::{HttpSettings, ServeSettings};

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub config: Arc<HttpSettings>,
    pub limiter: Arc<auth::RateLimiter>,
    /// Every single create goes through it (group commit).
    pub writer: GroupCommit,
    /// Every request's API key is read through it.
    pub keys: key_lookups::KeyLookups,
    /// The optional outbound events feed, as `/readyz` reports it.
    pub events_feed: crate::outbox::stream::FeedHealth,
    /// With several database hosts, which one is the primary (`/readyz`, and whether a
    /// request that lost its database may be tried again, see `failover.rs`).
    pub primary: Option<Arc<crate::db::primary::Primary>>,
    /// `pool` with its engine (plain PostgreSQL or a Citus coordinator), which the ledger's
    /// statements are picked by.
    pub store: Store,
}

impl AppState {
    pub fn new(store: Store, config: HttpSettings) -> AppState {
        let limiter = auth::RateLimiter::new(config.rate_limit_per_second, config.rate_limit_burst);
        let writer = GroupCommit::start(store.clone(), config.group_commit);
        let keys = key_lookups::KeyLookups::start(store.pool().clone());
        AppState {
            pool: store.pool().clone(),
            config: Arc::new(config),
            limiter: Arc::new(limiter),
            writer,
            keys,
            events_feed: Default::default(),
            primary: None,
            store,
        }
    }
}

const BATCH_ROUTE: &str = "/v1/transactions/batch";
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole API as a `Router`, with every layer: authentication (and the rate limit), body
/// limit, request timeout, request ids, tracing, metrics, and a panic guard that still answers
/// problem+json.
pub fn app(state: AppState) -> Router {
    let body = |limit_bytes| {
        Extension(body::BodyPolicy {
            limit_bytes,
            read_timeout: state.config.transport.body_read_timeout(),
        })
    };
    // The metrics recorder is process-wide; a failure to install it costs the metrics only.
    if let Err(e) = crate::telemetry::recorder() {
        tracing::warn!(error = %e, "metrics are off");
    }
    Router::new()
        .route("/v1/accounts", post(accounts::create).get(search::list_accounts))
        .route("/v1/accounts/{id}", get(accounts::get).patch(accounts::patch))
        .route("/v1/accounts/{id}/entries", get(accounts::entries))
        .route("/v1/accounts/{id}/freeze", post(accounts::freeze))
        .route("/v1/accounts/{id}/unfreeze", post(accounts::unfreeze))
        .route("/v1/accounts/{id}/close", post(accounts::close))
        .route("/v1/accounts/{id}/holds", get(accounts::holds))
        .route("/v1/accounts/{id}/limits", post(limits::create).get(limits::list))
        .route("/v1/accounts/{id}/limits/{limit_id}", delete(limits::delete))
        .route("/v1/accounts/{id}/monitors", post(monitors::create).get(monitors::list))
        .route(
            "/v1/accounts/{id}/monitors/{monitor_id}",
            get(monitors::get).delete(monitors::delete),
        )
        .route("/v1/account-sets", post(sets::create))
        .route("/v1/account-sets/{id}", get(sets::get))
        .route("/v1/account-sets/{id}/members", post(sets::add_member).get(sets::list_members))
        .route("/v1/account-sets/{id}/members/{member}", delete(sets::remove_member))
        .route(
            "/v1/account-sets/{id}/limits",
            post(limits::create_on_set).get(limits::list_on_set),
        )
        .route("/v1/account-sets/{id}/limits/{limit_id}", delete(limits::delete_on_set))
        .route(
            "/v1/account-sets/{id}/monitors",
            post(monitors::create_on_set).get(monitors::list_on_set),
        )
        .route(
            "/v1/account-sets/{id}/monitors/{monitor_id}",
            get(monitors::get_on_set).delete(monitors::delete_on_set),
        )
        .route("/v1/transactions", post(transactions::create).get(transactions::list))
        .route(
            BATCH_ROUTE,
            post(batch::batch).layer(body(state.config.batch_body_limit_bytes)),
        )
        .route("/v1/transactions/{id}", get(transactions::get))
        .route("/v1/transactions/{id}/post", post(transactions::post))
        .route("/v1/transactions/{id}/void", post(transactions::void))
        .route("/v1/transactions/{id}/reverse", post(transactions::reverse))
        .route("/v1/transactions/{id}/events", get(transaction_events::list))
        .route("/v1/transactions/{id}/proof", get(checkpoints::transaction))
        .route(
            "/v1/transactions/{id}/metadata-erasure",
            post(metadata_erasure::erase),
        )
        .route("/v1/transfers", post(transactions::transfer))
        .route("/v1/payments", post(transactions::payment))
        .route("/v1/exchanges", post(exchanges::exchange))
        .route("/v1/webhooks", post(webhooks::create).get(webhooks::list))
        .route("/v1/webhooks/{id}", get(webhooks::get).delete(webhooks::delete))
        .route("/v1/webhooks/{id}/rotate-secret", post(webhooks::rotate_secret))
        .route("/v1/deliveries", get(webhooks::list_deliveries))
        .route("/v1/deliveries/{id}", get(webhooks::get_delivery))
        .route("/v1/deliveries/{id}/redeliver", post(webhooks::redeliver))
        .route("/v1/checkpoints", get(checkpoints::list))
        .route("/v1/checkpoints/{n}", get(checkpoints::get))
        .route("/v1/checkpoints/{n}/heads/{account}", get(checkpoints::head))
        .route("/v1/reconciliations", get(reconciliations::list))
        .route("/v1/reconciliations/{id}", get(reconciliations::get))
        .route(
            "/v1/reconciliations/{id}/exceptions",
            get(reconciliations::exceptions),
        )
        .route("/console", get(console::index))
        .route("/console/app.js", get(console::script))
        .route("/console/app.css", get(console::style))
        .route("/v1/dead-letters", get(dead_letters::list))
        .route("/v1/dead-letters/{partition}/{id}", get(dead_letters::get))
        .route("/v1/dead-letters/{partition}/{id}/replay", post(dead_letters::replay))
        .route("/v1/dead-letters/{partition}/{id}/drop", post(dead_letters::drop))
        .route("/v1/consumer", get(consumer_state::get))
        .route("/v1/stats/volumes", get(stats::volumes))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/openapi.json", get(health::openapi))
        .route("/metrics", get(metrics::metrics))
        // Route layers see the matched route. Authentication runs before any extractor reads
        // the body (401 and 403 come before body errors); metrics wrap it, so refusals count.
        // Inside authentication: a request tried again after a failover is its handler only.
        .route_layer(middleware::from_fn_with_state(state.clone(), failover::retry_on_failover))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .route_layer(middleware::from_fn(metrics::track))
        .fallback(auth::not_found)
        .method_not_allowed_fallback(auth::method_not_allowed)
        // Bodies are read by `body::read` under these limits, not by axum's.
        .layer(body(state.config.body_limit_bytes))
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), request_timeout))
        .layer(CatchPanicLayer::custom(|_| ApiError::Internal(anyhow::anyhow!("handler panicked")).into_response()))
        // Failures are logged where they are understood (a 500 at error level by `ApiError`, a
        // 503 at warn, readiness on change only): the layer's own line for each is debug.
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }).on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG)))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        // Outside the layer above: an unusable caller id is dropped before it is kept.
        .layer(middleware::from_fn(auth::bound_request_id))
        // Tokens never reach a log line, whatever a layer above decides to print.
        .layer(SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION]))
        .with_state(state)
}

/// A request still running after the configured time answers 503 (`unavailable`: nothing of
/// it was or will be written), unless a COMMIT of it is in flight: then its own answer is
/// awaited (see `ledger::caller`). A request whose COMMIT answer was lost answers 503
/// `outcome_unknown` rather than claim that nothing was written.
async fn request_timeout(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let label = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let caller = Caller::new(label);
    let run = caller::scope(caller.clone(), next.run(req));
    let mut run = std::pin::pin!(run);
    let response = match tokio::time::timeout(state.config.request_timeout(), &mut run).await {
        Ok(response) => response,
        Err(_) => past_deadline(&caller, run).await,
    };
    let lost_commit = caller.state().commit_unknown && caller.state().phase != Phase::Written;
    if lost_commit && response.status() == StatusCode::SERVICE_UNAVAILABLE {
        return ApiError::OutcomeUnknown.into_response();
    }
    response
}

/// How long a request past its deadline waits for a COMMIT already sent. A COMMIT answers in
/// milliseconds; one still unanswered after this went to a database that stopped answering,
/// and its outcome is unknown.
const COMMIT_GRACE: Duration = Duration::from_secs(5);

/// The deadline passed: 503 unless a COMMIT is in flight, whose answer is then awaited (the
/// COMMIT may also fail, and the caller be given up afterwards).
async fn past_deadline<F: Future<Output = Response>>(
    caller: &Caller,
    mut run: std::pin::Pin<&mut F>,
) -> Response {
    let grace = tokio::time::sleep(COMMIT_GRACE);
    let mut grace = std::pin::pin!(grace);
    loop {
        let mut changes = caller.watch();
        match caller.expire() {
            AtDeadline::NotWritten => {
                return ApiError::Unavailable("request timed out".into()).into_response();
            }
            AtDeadline::Unknown => return ApiError::OutcomeUnknown.into_response(),
            AtDeadline::AwaitAnswer => tokio::select! {
                response = &mut run => return response,
                _ = changes.changed() => {}
                () = &mut grace => return ApiError::OutcomeUnknown.into_response(),
            },
        }
    }
}

/// Serves `state`'s API on `listener` until `accepting` is cancelled, then lets the
/// connections finish or cuts them (`transport::serve`); logs `connections closed`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    accepting: CancellationToken,
) {
    let transport = state.config.transport.clone();
    let stopped = transport::serve(listener, app(state), &transport, accepting).await;
    tracing::info!(
        open_at_signal = stopped.open_at_signal,
        cut_at_deadline = stopped.cut_at_deadline,
        "connections closed"
    );
}

/// The API's listening socket.
pub async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}
