//! Liveness, readiness and the OpenAPI document.

use super::AppState;
use super::error::Result;
use super::responses::json;
use crate::outbox::stream::Feed;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;
use std::time::Duration;

/// How long readiness waits for the database before saying no.
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);

#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "the process is alive")))]
pub async fn healthz() -> Result<Response> {
    json(StatusCode::OK, &json!({"status": "ok"}))
}

#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "the database answers; `database.synchronous_standby` says whether its commits wait for a synchronous standby (`database.primary`, with several hosts, names the one written to); `events_stream` (`up` or `down`, with `--events-stream`) says whether the optional outbound feed publishes, and never makes the API unready"), (status = 503, description = "it does not")))]
pub async fn readyz(State(state): State<AppState>) -> Result<Response> {
    // The ping also asks whether commits wait for a synchronous standby.
    let ping = async {
        let mut conn = state.pool.acquire().await?;
        crate::db::primary::sync_standby(&mut conn).await
    };
    match tokio::time::timeout(READINESS_TIMEOUT, ping).await {
        Ok(Ok(sync)) => {
            let mut database = json!({"synchronous_standby": sync.as_json()});
            if let Some(primary) = &state.primary {
                database["primary"] = json!(primary.describe());
            }
            let mut body = json!({"status": "ready", "database": database});
            match state.events_feed.get() {
                Feed::Off => {}
                Feed::Up => body["events_stream"] = json!("up"),
                Feed::Down => body["events_stream"] = json!("down"),
            }
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
