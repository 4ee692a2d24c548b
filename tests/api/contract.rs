//! Places where the service did not do what docs/api.md says (issue 18, section 3): each test
//! holds the service to the contract as now written.

use super::common::{TestApp, TestResponse, assert_problem};
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode};
use serde_json::json;
use uuid::Uuid;

/// A 422 `validation_failed` whose one field error is `code` at `field`.
#[track_caller]
fn assert_field(r: &TestResponse, field: &str, code: &str, context: &str) {
    assert_problem(r, 422, "validation_failed", context);
    assert_first_error(r, field, code, context);
}

/// A 400 `invalid_query` whose one field error is `code` at the parameter `field`.
#[track_caller]
fn assert_query_field(r: &TestResponse, field: &str, code: &str, context: &str) {
    assert_problem(r, 400, "invalid_query", context);
    assert_first_error(r, field, code, context);
}

#[track_caller]
fn assert_first_error(r: &TestResponse, field: &str, code: &str, context: &str) {
    assert_eq!(
        (
            r.body["errors"][0]["field"].as_str(),
            r.body["errors"][0]["code"].as_str()
        ),
        (Some(field), Some(code)),
        "{context}: {}",
        r.text
    );
}

#[tokio::test]
async fn made_up_cursors_are_refused_on_every_list() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let run = Uuid::new_v4();
    let lists = [
        "/v1/transactions".to_owned(),
        "/v1/accounts/w1/entries".to_owned(),
        "/v1/accounts/w1/holds".to_owned(),
        "/v1/webhooks".to_owned(),
        "/v1/deliveries".to_owned(),
        "/v1/reconciliations".to_owned(),
        format!("/v1/reconciliations/{run}/exceptions"),
    ];
    for list in &lists {
        for cursor in [
            "5",
            "-1",
            "007",
            "9223372036854775807",
            "0",
            "NTp0cmFuc2FjdGlvbnM=",
        ] {
            let r = app.get(&format!("{list}?cursor={cursor}")).await;
            assert_query_field(&r, "/cursor", "cursor", &format!("{list}?cursor={cursor}"));
        }
    }
    app.finish().await;
}

#[tokio::test]
async fn a_cursor_is_refused_on_another_list() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    for _ in 0..3 {
        app.fund("w1", 10).await;
        app.fund("w2", 10).await;
    }
    let next = |r: &TestResponse| r.body["next_cursor"].as_str().unwrap().to_owned();
    let entries = next(&app.get("/v1/accounts/w1/entries?limit=1").await);
    let transactions = next(&app.get("/v1/transactions?limit=1").await);
    for (path, cursor) in [
        ("/v1/transactions", &entries),
        ("/v1/accounts/w1/entries", &transactions),
        ("/v1/accounts/w2/entries", &entries),
        ("/v1/accounts/w1/holds", &entries),
        ("/v1/webhooks", &transactions),
    ] {
        let r = app.get(&format!("{path}?cursor={cursor}")).await;
        assert_query_field(&r, "/cursor", "cursor", path);
    }
    // Each on its own list pages on.
    let r = app
        .get(&format!("/v1/accounts/w1/entries?limit=1&cursor={entries}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1);
    let r = app
        .get(&format!("/v1/transactions?limit=1&cursor={transactions}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.finish().await;
}

/// A POST of `body` as JSON text, exactly as written (repeated keys, `-0`, wide numbers).
async fn post_text(app: &TestApp, path: &str, body: &str) -> TestResponse {
    app.raw(
        Method::POST,
        path,
        &[("content-type", "application/json")],
        body.to_owned(),
    )
    .await
}

#[tokio::test]
async fn a_repeated_key_inside_metadata_is_duplicate_field() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let transfer = format!(
        r#"{{"id":"{}","from":"w1","to":"w2","amount":1,"metadata":{{"a":1,"a":1}}}}"#,
        Uuid::new_v4()
    );
    let account = r#"{"id":"w3","currency":"SAR","type":"wallet","metadata":"#;
    for (method, path, body, field) in [
        (
            Method::POST,
            "/v1/accounts",
            format!(r#"{account}{{"a":1,"a":2}}}}"#),
            "/metadata/a",
        ),
        (
            Method::POST,
            "/v1/accounts",
            format!(r#"{account}{{"m":{{"x":[{{"b":1,"b":1}}]}}}}}}"#),
            "/metadata/m/x/0/b",
        ),
        (
            Method::PATCH,
            "/v1/accounts/w1",
            r#"{"version":1,"metadata":{"a":1,"a":2}}"#.to_owned(),
            "/metadata/a",
        ),
        (Method::POST, "/v1/transfers", transfer, "/metadata/a"),
    ] {
        let r = app
            .raw(
                method,
                path,
                &[("content-type", "application/json")],
                body.clone(),
            )
            .await;
        assert_field(&r, field, "duplicate_field", &body);
    }
    // The same key in two different objects is fine.
    let body = format!(r#"{account}{{"a":{{"a":1}},"b":{{"a":2}}}}}}"#);
    let r = post_text(&app, "/v1/accounts", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.finish().await;
}

#[tokio::test]
async fn metadata_integers_beyond_64_bits_are_refused_not_rounded() {
    let app = TestApp::new().await;
    for wide in [
        "-9223372036854775809",
        "18446744073709551616",
        "123456789012345678901234567890",
    ] {
        let body =
            format!(r#"{{"id":"w1","currency":"SAR","type":"wallet","metadata":{{"n":{wide}}}}}"#);
        let r = post_text(&app, "/v1/accounts", &body).await;
        assert_field(&r, "/metadata", "number_range", wide);
    }
    // Both 64-bit ends are stored exactly.
    let body = r#"{"id":"w1","currency":"SAR","type":"wallet","metadata":{"lo":-9223372036854775808,"hi":18446744073709551615,"s":"-9223372036854775809"}}"#;
    let r = post_text(&app, "/v1/accounts", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.get("/v1/accounts/w1").await;
    assert!(
        r.text.contains(r#""lo":-9223372036854775808"#),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(r#""hi":18446744073709551615"#),
        "{}",
        r.text
    );
    app.finish().await;
}

#[tokio::test]
async fn minus_zero_is_the_integer_zero() {
    let app = TestApp::new().await;
    let r = post_text(
        &app,
        "/v1/accounts",
        r#"{"id":"w1","currency":"SAR","type":"wallet","overdraft_limit":-0}"#,
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "overdraft_limit -0: {}",
        r.text
    );
    assert_eq!(r.body["overdraft_limit"], json!(0), "{}", r.text);
    app.create_wallet("w2").await;
    let r = app
        .raw(
            Method::PATCH,
            "/v1/accounts/w1",
            &[("content-type", "application/json")],
            r#"{"version":-0,"metadata":{}}"#.to_owned(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "version -0: {}", r.text);
    let id = Uuid::new_v4();
    let r = post_text(
        &app,
        "/v1/transfers",
        &format!(r#"{{"id":"{id}","from":"w1","to":"w2","amount":-0}}"#),
    )
    .await;
    // Zero is no amount: the range rule answers, not a float type error.
    assert_field(&r, "/amount", "range", "amount -0");
    let r = post_text(
        &app,
        "/v1/transactions",
        &format!(r#"{{"id":"{id}","entries":[{{"account":"w1","amount":-0}},{{"account":"w2","amount":0}}]}}"#),
    )
    .await;
    assert_problem(&r, 422, "validation_failed", "legs of -0");
    assert!(!r.text.contains("floating point"), "{}", r.text);
    // A real float is still a type error.
    let r = post_text(
        &app,
        "/v1/transfers",
        &format!(r#"{{"id":"{id}","from":"w1","to":"w2","amount":1.5}}"#),
    )
    .await;
    assert_field(&r, "/amount", "invalid_type", "amount 1.5");
    let r = post_text(
        &app,
        "/v1/accounts",
        r#"{"id":"w3","currency":"SAR","type":"wallet","overdraft_limit":0.0}"#,
    )
    .await;
    assert_field(
        &r,
        "/overdraft_limit",
        "invalid_type",
        "overdraft_limit 0.0",
    );
    app.finish().await;
}

/// Sends a request with a raw `x-request-id` (any bytes) and returns the echoed id and the
/// request id the audit log stored for the write.
async fn request_id_round_trip(
    app: &TestApp,
    id: &[u8],
    account: &str,
) -> (String, Option<String>) {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri("/v1/accounts")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"id": account, "currency": "SAR", "type": "wallet"}).to_string(),
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("x-request-id", HeaderValue::from_bytes(id).unwrap());
    let r = app.send(request).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let echoed = r.headers["x-request-id"].to_str().unwrap().to_owned();
    let stored: Option<String> = sqlx::query_scalar(
        "select request_id from audit_log where action = 'account.create' and resource = $1",
    )
    .bind(account)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    (echoed, stored)
}

#[tokio::test]
async fn the_request_id_is_bounded_and_audited_as_echoed() {
    let app = TestApp::new().await;
    let (echoed, stored) = request_id_round_trip(&app, b"trace-42", "w1").await;
    assert_eq!(
        (echoed.as_str(), stored.as_deref()),
        ("trace-42", Some("trace-42"))
    );
    let long = "x".repeat(60_000);
    let bad: [&[u8]; 4] = ["caf\u{e9}".as_bytes(), long.as_bytes(), b"with space", b""];
    for (n, id) in bad.iter().enumerate() {
        let (echoed, stored) = request_id_round_trip(&app, id, &format!("w{}", n + 2)).await;
        assert!(
            Uuid::parse_str(&echoed).is_ok(),
            "replaced by a generated id: {echoed}"
        );
        assert_eq!(
            stored.as_deref(),
            Some(echoed.as_str()),
            "the audit row has what was echoed"
        );
    }
    let max = "y".repeat(200);
    let (echoed, stored) = request_id_round_trip(&app, max.as_bytes(), "w9").await;
    assert_eq!(
        (echoed.as_str(), stored.as_deref()),
        (max.as_str(), Some(max.as_str()))
    );
    app.finish().await;
}

#[tokio::test]
async fn freeze_unfreeze_and_close_refuse_a_body_they_do_not_take() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    for action in ["freeze", "unfreeze", "close"] {
        let path = format!("/v1/accounts/w1/{action}");
        let r = post_text(&app, &path, r#"{"x":1}"#).await;
        assert_field(&r, "/x", "unknown_field", &path);
        let r = post_text(&app, &path, "not json").await;
        assert_problem(&r, 400, "malformed_json", &path);
        let r = post_text(&app, &path, "null").await;
        assert_problem(&r, 422, "validation_failed", &path);
        let r = app
            .raw(
                Method::POST,
                &path,
                &[("content-type", "text/plain")],
                "freeze".to_owned(),
            )
            .await;
        assert_problem(&r, 415, "unsupported_media_type", &path);
    }
    // No body, or `{}`, as before.
    let r = app.post_empty("/v1/accounts/w1/freeze").await;
    assert_eq!(r.body["status"], "frozen", "{}", r.text);
    let r = app.post("/v1/accounts/w1/unfreeze", &json!({})).await;
    assert_eq!(r.body["status"], "active", "{}", r.text);
    let r = app.post("/v1/accounts/w1/close", &json!({})).await;
    assert_eq!(r.body["status"], "closed", "{}", r.text);
    app.finish().await;
}

#[tokio::test]
async fn expires_at_is_rfc_3339_with_four_digit_years_and_no_leap_second() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 100).await;
    let hold = |expires_at: &str| json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 1, "status": "pending", "expires_at": expires_at});
    for bad in [
        "2999-12-31T23:59:60Z",
        "+10000-01-01T00:00:00Z",
        "9999-12-31T23:59:59-01:00",
        "2999-01-01T00:00:00",
    ] {
        let r = app.post("/v1/transfers", &hold(bad)).await;
        assert_field(&r, "/expires_at", "invalid_type", bad);
    }
    let r = app
        .post("/v1/transfers", &hold("9999-12-31T23:59:59+01:00"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["expires_at"], "9999-12-31T22:59:59Z", "{}", r.text);
    let r = app.get("/v1/accounts/w1?as_of=2026-12-01T00:00:60Z").await;
    assert_query_field(&r, "/as_of", "invalid_type", "as_of leap second");
    app.finish().await;
}
