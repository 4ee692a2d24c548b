//! The console's files as `serve` sends them: open without a key, under a Content-Security-
//! Policy that allows no inline script or style, and written so that no value can become
//! markup (the browser test, scripts/console.sh, drives them in Chromium).

use super::common::TestApp;
use axum::body::Body;
use axum::http::{Method, StatusCode};

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/app.js");

#[tokio::test]
async fn the_console_is_served_without_a_key_under_a_strict_policy() {
    let app = TestApp::new().await;
    for (path, content_type) in [
        ("/console", "text/html; charset=utf-8"),
        ("/console/app.js", "text/javascript; charset=utf-8"),
        ("/console/app.css", "text/css; charset=utf-8"),
    ] {
        let request = axum::http::Request::builder().method(Method::GET).uri(path);
        let r = app.send_as_is(request.body(Body::empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert_eq!(r.headers["content-type"], content_type, "{path}");
        let policy = r.headers["content-security-policy"].to_str().unwrap();
        assert_eq!(
            policy,
            wallet_ledger::http::console::CONTENT_SECURITY_POLICY
        );
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        assert_eq!(r.headers["referrer-policy"], "no-referrer");
    }
    app.finish().await;
}

#[test]
fn the_page_has_no_inline_script_style_or_handler() {
    let lower = INDEX.to_ascii_lowercase();
    for (at, _) in lower.match_indices("<script") {
        let tag = &lower[at..at + lower[at..].find('>').unwrap()];
        assert!(tag.contains(" src="), "an inline script: {tag}");
    }
    assert!(!lower.contains("<style"), "an inline style sheet");
    assert!(!lower.contains(" style="), "a style attribute");
    let handler = inline_handler(&lower);
    assert!(handler.is_none(), "an inline handler: {handler:?}");
}

#[test]
fn the_script_never_turns_a_string_into_markup_or_code() {
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "setAttribute(\"on",
    ] {
        assert!(!SCRIPT.contains(sink), "app.js uses {sink}");
    }
    // Links are built by `h`, which keeps any href inside the console (`#/...`).
    assert!(SCRIPT.contains("function internal(href)"));
}

/// An ` on...=` attribute in the page, if any.
fn inline_handler(html: &str) -> Option<&str> {
    html.match_indices(" on")
        .map(|(at, _)| &html[at..])
        .find(|rest| {
            let name: String = rest[3..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase())
                .collect();
            !name.is_empty() && rest[3 + name.len()..].starts_with('=')
        })
}
