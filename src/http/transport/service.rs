//! The router as hyper's service, counting each connection's requests for its watchdog, and
//! answering the connections above the cap.

use super::watchdog::Activity;
use crate::http::error::ApiError;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use tokio::time::Instant;
use tower::ServiceExt;

/// Which connections a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Within `--max-connections`.
    Served,
    /// One of the few accepted above the cap: health checks are answered (so an orchestrator
    /// does not restart a busy server), everything else is 503, and the connection closes.
    Overflow,
}

/// Paths answered on an overflow connection.
const HEALTH_PATHS: [&str; 2] = ["/healthz", "/readyz"];

#[derive(Clone)]
pub struct ConnectionService {
    pub router: Router,
    pub activity: Activity,
    pub admission: Admission,
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::start(self.activity.clone());
        let router = self.router.clone();
        let admission = self.admission;
        Box::pin(async move {
            let refused =
                admission == Admission::Overflow && !HEALTH_PATHS.contains(&request.uri().path());
            let mut response = if refused {
                metrics::counter!("wallet_ledger_http_overflow_refusals_total").increment(1);
                ApiError::Unavailable("too many open connections".into()).into_response()
            } else {
                match router.oneshot(request.map(Body::new)).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            };
            if admission == Admission::Overflow && !in_flight.activity.state().http2 {
                // HTTP/2 has no such header; its connection closes when idle (the watchdog
                // gives overflow connections no idle time).
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            drop(in_flight);
            Ok(response)
        })
    }
}

/// A request being handled; its end (answered, or dropped with its stream) idles the
/// connection again.
struct InFlight {
    activity: Activity,
}

impl InFlight {
    fn start(activity: Activity) -> InFlight {
        activity.request_started();
        InFlight { activity }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.activity.request_ended(Instant::now());
    }
}
