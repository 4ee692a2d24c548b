//! Liveness, readiness and the OpenAPI document.

use super::AppState;
use super::error::Result;
use super::problem::Problem;
use super::responses::json;
use crate::db::primary::{self, SyncStandby};
use crate::outbox::stream::Feed;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

/// How long readiness waits for a commit before saying no.
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);

/// The body of `/healthz`.
#[derive(Serialize, ToSchema)]
pub struct Health {
    status: Alive,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Alive {
    Ok,
}

/// The body of `/readyz` when ready.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    status: Ready,
    database: DatabaseReadiness,
    /// With `--events-stream`: whether the optional outbound feed publishes (never makes the
    /// API unready).
    #[serde(skip_serializing_if = "Option::is_none")]
    events_stream: Option<FeedState>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Ready {
    Ready,
}

#[derive(Serialize, ToSchema)]
pub struct DatabaseReadiness {
    /// Whether commits wait for a synchronous standby; `null` when it could not be told.
    synchronous_standby: Option<bool>,
    /// With several hosts: the one written to (`host:port`).
    #[serde(skip_serializing_if = "Option::is_none")]
    primary: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum FeedState {
    Up,
    Down,
}

#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "the process is alive", body = Health)))]
pub async fn healthz() -> Result<Response> {
    json(StatusCode::OK, &Health { status: Alive::Ok })
}

#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "a write commits (a transaction that takes a transaction id, no row written, within 2 s); `database.synchronous_standby` says whether its commits wait for a synchronous standby (`database.primary`, with several hosts, names the one written to); `events_stream` (`up` or `down`, with `--events-stream`) says whether the optional outbound feed publishes, and never makes the API unready", body = Readiness),
        (status = 503, description = "no commit within 2 s (no primary, a frozen one, a promoted standby whose commits still wait for a synchronous standby)", body = Problem, content_type = "application/problem+json")))]
pub async fn readyz(State(state): State<AppState>) -> Result<Response> {
    match commit_probe(&state.pool).await {
        Ok(sync) => {
            let database = DatabaseReadiness {
                synchronous_standby: sync.as_json().as_bool(),
                primary: state.primary.as_ref().map(|p| p.describe()),
            };
            let events_stream = match state.events_feed.get() {
                Feed::Off => None,
                Feed::Up => Some(FeedState::Up),
                Feed::Down => Some(FeedState::Down),
            };
            let body = Readiness {
                status: Ready::Ready,
                database,
                events_stream,
            };
            READYZ_LOG.record(true, "");
            json(StatusCode::OK, &body)
        }
        Err(why) => Ok(not_ready(&why)),
    }
}

/// Ready means a write can commit now, not merely that the database answers: a promoted
/// standby answers reads while its commits still wait for a synchronous standby that is gone
/// (until the monitor relaxes it), and a frozen primary answers nothing. So the probe commits
/// a transaction that takes a transaction id (a commit record, which waits for the
/// synchronous standby like every write; no row is written) within READINESS_TIMEOUT, and
/// asks on the way whether commits wait for a synchronous standby. A probe that times out
/// drops its connection rather than hand a session stuck in COMMIT back to the pool.
async fn commit_probe(pool: &sqlx::PgPool) -> std::result::Result<SyncStandby, String> {
    let deadline = tokio::time::Instant::now() + READINESS_TIMEOUT;
    let acquired = tokio::time::timeout_at(deadline, pool.acquire()).await;
    let mut conn = match acquired {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("no database connection in time".into()),
    };
    match tokio::time::timeout_at(deadline, primary::commits(&mut conn)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => {
            drop(conn.detach());
            Err("a commit did not complete in time".into())
        }
    }
}

/// 503 `unavailable`, logged when readiness is lost (not on every probe of an outage).
fn not_ready(why: &str) -> Response {
    READYZ_LOG.record(false, why);
    super::error::not_ready(why)
}

static READYZ_LOG: crate::telemetry::ProbeLog = crate::telemetry::ProbeLog::new();

#[utoipa::path(get, path = "/openapi.json", tag = "operations", operation_id = "get_openapi", responses((status = 200, description = "this document")))]
pub async fn openapi() -> Response {
    super::responses::json_response(StatusCode::OK, super::openapi::document())
}
