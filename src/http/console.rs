//! `/console`: the operator console, three static files embedded in the binary at build time
//! (`console/`), served with a Content-Security-Policy that allows no inline script or style
//! and no other origin. The page talks to the public REST API with the operator's API key,
//! which it keeps in the browser's session storage: this module serves files and knows no key,
//! so the console can do nothing the key's scope does not allow (docs/architecture.md,
//! "The console").

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What a console response may load: scripts, styles and API calls from this origin only;
/// images from this origin or `data:` (none today); no frames, plugins, forms posted elsewhere
/// or `<base>`. No `'unsafe-inline'`: an injected `<script>` or `onerror=` does not run.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/app.js");
const STYLE: &str = include_str!("../../console/app.css");

/// `GET /console`: the page.
pub async fn index() -> Response {
    asset(INDEX, "text/html; charset=utf-8")
}

/// `GET /console/app.js`.
pub async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// `GET /console/app.css`.
pub async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    let fixed = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        // A new build serves new files: never an old script with a new page.
        (header::CACHE_CONTROL, "no-cache"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
