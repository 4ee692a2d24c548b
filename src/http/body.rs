//! Reading request bodies within a size and a time: the one place every extractor reads one.
//!
//! The size is checked against the declared `Content-Length` before a byte is read, so an
//! oversized request is refused at once (and, with `Expect: 100-continue`, is never told to
//! send its body: hyper sends `100 Continue` only when the body is first read).

use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::Request;
use axum::http::header;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::time::Duration;

/// The body limits of a route, set by a layer (`axum::Extension`): the router's default, and
/// the batch route's own, which overrides it.
#[derive(Debug, Clone, Copy)]
pub struct BodyPolicy {
    pub limit_bytes: usize,
    pub read_timeout: Duration,
}

impl Default for BodyPolicy {
    fn default() -> BodyPolicy {
        BodyPolicy {
            limit_bytes: super::settings::DEFAULT_BODY_LIMIT_BYTES,
            read_timeout: Duration::from_millis(
                crate::http::transport::DEFAULT_BODY_READ_TIMEOUT_MS,
            ),
        }
    }
}

/// The whole body: 413 when it is (or says it will be) larger than the route's limit, 408
/// when it does not arrive in time, 400 when the client breaks it off.
pub async fn read(request: Request) -> Result<Bytes, ApiError> {
    let policy = request
        .extensions()
        .get::<BodyPolicy>()
        .copied()
        .unwrap_or_default();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > policy.limit_bytes as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    let body = Limited::new(request.into_body(), policy.limit_bytes);
    match tokio::time::timeout(policy.read_timeout, body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::PayloadTooLarge)
        }
        Ok(Err(e)) => Err(ApiError::MalformedJson(format!(
            "the request body could not be read: {e}"
        ))),
        Err(_) => Err(ApiError::BodyTimeout),
    }
}
