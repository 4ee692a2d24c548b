//! The committed OpenAPI document is the one the code generates, and the server serves it.

use super::common::TestApp;
use axum::http::StatusCode;

#[test]
fn committed_openapi_matches_the_code() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
            .unwrap();
    let generated = wallet_ledger::http::openapi::document();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: regenerate it with `cargo run -- openapi > openapi/openapi.json`"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/v1/accounts",
        "/v1/accounts/{id}",
        "/v1/accounts/{id}/entries",
        "/v1/transactions",
        "/v1/transactions/{id}",
        "/v1/transfers",
        "/v1/payments",
        "/healthz",
        "/readyz",
        "/openapi.json",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
}

#[tokio::test]
async fn the_server_serves_its_document() {
    let app = TestApp::new().await;
    let r = app.get("/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, wallet_ledger::http::openapi::document());
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(app.get("/readyz").await.body["status"], "ready");
    app.finish().await;
}
