//! Liveness, readiness and the OpenAPI document.

use super::AppState;
use super::error::Result;
use super::responses::json;
use crate::outbox::stream::Feed;
use crate::problem::Problem;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

/// How long readiness waits for the database before saying no.
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
    responses((status = 200, description = "the database answers; `database.synchronous_standby` says whether its commits wait for a synchronous standby (`database.primary`, with several hosts, names the one written to); `events_stream` (`up` or `down`, with `--events-stream`) says whether the optional outbound feed publishes, and never makes the API unready", body = Readiness),
        (status = 503, description = "it does not", body = Problem, content_type = "application/problem+json")))]
pub async fn readyz(State(state): State<AppState>) -> Result<Response> {
    // The ping also asks whether commits wait for a synchronous standby.
    let ping = async {
        let mut conn = state.pool.acquire().await?;
        crate::db::primary::sync_standby(&mut conn).await
    };
    match tokio::time::timeout(READINESS_TIMEOUT, ping).await {
        Ok(Ok(sync)) => {
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
        Ok(Err(e)) => Ok(not_ready(&e.to_string())),
        Err(_) => Ok(not_ready("database did not answer in time")),
    }
}

/// 503 `unavailable`, logged when readiness is lost (not on every probe of an outage).
fn not_ready(why: &str) -> Response {
    READYZ_LOG.record(false, why);
    super::error::not_ready(why)
}

static READYZ_LOG: crate::telemetry::ProbeLog = crate::telemetry::ProbeLog::new();

#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "this document")))]
pub async fn openapi() -> Response {
    super::responses::json_response(StatusCode::OK, super::openapi::document())
}
