//! Liveness, readiness and the OpenAPI document.

use super::AppState;
use super::error::{ApiError, Result};
use super::responses::json;
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
    responses((status = 200, description = "the database answers"), (status = 503, description = "it does not")))]
pub async fn readyz(State(state): State<AppState>) -> Result<Response> {
    let ping = sqlx::query_scalar!(r#"select 1 as "one!""#).fetch_one(&state.pool);
    match tokio::time::timeout(READINESS_TIMEOUT, ping).await {
        Ok(Ok(_)) => json(StatusCode::OK, &json!({"status": "ready"})),
        Ok(Err(e)) => Err(ApiError::Unavailable(format!("readiness: {e}"))),
        Err(_) => Err(ApiError::Unavailable(
            "readiness: database did not answer in time".into(),
        )),
    }
}

#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "this document")))]
pub async fn openapi() -> Response {
    super::responses::json_response(StatusCode::OK, super::openapi::document())
}
