//! Security and operations: every `/v1` operation of the OpenAPI document needs an API key
//! whose scope covers it (401, then 403, then 429, all before anything about the body), the
//! request then runs as its key's actor (`Idempotency-Key` ids are derived per owner, every
//! write is audited in its own database transaction with the key, owner and request id), the
//! rate limit is per key, a saturated pool answers 503 promptly and recovers, the real binary's
//! JSON logs hold no token, secret or body, `/metrics` counts requests by route and status, and
//! `wallet-ledger api-key` creates, lists and revokes keys.

use super::common::{TestApp, TestResponse, assert_problem, poll_until};
use super::stream_support::{bin, eventually, free_port, serve};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use sqlx::postgres::PgPoolOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tower::ServiceExt;
use uuid::Uuid;
use wallet_ledger::api_keys;
use wallet_ledger::api_keys::Scope;
use wallet_ledger::http::AppState;
use wallet_ledger::http::HttpSettings;
use wallet_ledger::http::key_lookups::KEY_LOOKUP_KEEP_IDLE;
use wallet_ledger::http::key_lookups::{KeyLookups, LookupFailed};

// ---------------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------------

/// The paths that answer without a key (`/metrics` unless configured otherwise).
const OPEN_PATHS: [&str; 4] = ["/healthz", "/readyz", "/openapi.json", "/metrics"];

/// A request exactly as given: headers, and a JSON body (with its content type) when `body`
/// is some.
fn request(
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => builder.body(Body::empty()).unwrap(),
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A request made with `token` (and any other headers), sent as is.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> TestResponse {
    let auth = bearer(token);
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    app.send_as_is(request(method, path, &all, body)).await
}

/// A new key: its id and its token.
async fn key(app: &TestApp, owner: &str, scope: Scope) -> (Uuid, String) {
    let mut conn = app.pool.acquire().await.unwrap();
    api_keys::create(&mut conn, owner, scope).await.unwrap()
}

async fn revoke(app: &TestApp, id: Uuid) {
    let mut conn = app.pool.acquire().await.unwrap();
    assert!(api_keys::revoke(&mut conn, id).await.unwrap());
}

fn header<'a>(r: &'a TestResponse, name: &str) -> &'a str {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn retry_after(r: &TestResponse) -> u64 {
    header(r, "retry-after")
        .parse()
        .unwrap_or_else(|_| panic!("a Retry-After in whole seconds: {:?}", r.headers))
}

#[track_caller]
fn assert_unauthenticated(r: &TestResponse, context: &str) {
    assert_problem(r, 401, "unauthenticated", context);
    assert_eq!(header(r, "www-authenticate"), "Bearer", "{context}");
}

/// A digest of every row of every table (but the migrations'): equal digests, nothing written.
async fn footprint(app: &TestApp) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "select tablename::text from pg_tables where schemaname = 'public' and tablename not like '\\_sqlx%' order by 1",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let parts: Vec<String> = tables
        .iter()
        .map(|t| format!("'{t}:' || coalesce((select md5(string_agg(x::text, '|' order by x::text)) from {t} x), '-')"))
        .collect();
    let sql = format!("select concat_ws(' ', {})", parts.join(", "));
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// The documented operations: (method, path template), in the document's order.
fn documented_operations() -> Vec<(Method, String)> {
    let document: Value = serde_json::from_str(&wallet_ledger::http::openapi::document()).unwrap();
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            let method = match method.as_str() {
                "get" => Method::GET,
                "post" => Method::POST,
                "put" => Method::PUT,
                "patch" => Method::PATCH,
                "delete" => Method::DELETE,
                "head" => Method::HEAD,
                "options" => Method::OPTIONS,
                "trace" => Method::TRACE,
                _ => continue, // `parameters`, `summary`...
            };
            operations.push((method, path.clone()));
        }
    }
    assert!(
        operations.len() >= 25,
        "the walk found the document's operations: {operations:?}"
    );
    operations
}

/// The scope each operation needs, from the contract: GETs read; account creation and
/// lifecycle, webhooks, deliveries, reconciliations, dead letters, the consumer's state and
/// statistics admin; other POSTs write.
fn needed_scope(method: &Method, template: &str) -> Scope {
    let under = |area: &str| template == area || template.starts_with(&format!("{area}/"));
    let reading = *method == Method::GET;
    let admin = [
        "/v1/webhooks",
        "/v1/deliveries",
        "/v1/reconciliations",
        "/v1/dead-letters",
        "/v1/consumer",
        "/v1/stats",
    ];
    // A transaction's events carry their webhook deliveries: admin, like `/v1/deliveries`.
    let transaction_events =
        template.starts_with("/v1/transactions/") && template.ends_with("/events");
    // Erasing a transaction's metadata is an act on data, like an account's `PATCH`: admin.
    let erasure = template == "/v1/transactions/{id}/metadata-erasure";
    if admin.iter().any(|area| under(area)) || transaction_events || erasure {
        Scope::Admin
    } else if under("/v1/accounts") || under("/v1/account-sets") {
        if reading { Scope::Read } else { Scope::Admin }
    } else if reading {
        Scope::Read
    } else {
        Scope::Write
    }
}

/// Resources each operation of a walk acts on, made with the test's admin key.
struct Fixtures {
    wallet: String,
    other: String,
    /// A USD wallet, for exchanges from `wallet` (SAR).
    dollars: String,
    to_close: String,
    to_freeze: String,
    hold_to_post: Uuid,
    hold_to_void: Uuid,
    posted: Uuid,
    webhook: Uuid,
    webhook_to_delete: Uuid,
    delivery: Uuid,
}

async fn fixtures(app: &TestApp, tag: &str) -> Fixtures {
    let webhook = Uuid::new_v4();
    let webhook_to_delete = Uuid::new_v4();
    for id in [webhook, webhook_to_delete] {
        let r = app
            .post(
                "/v1/webhooks",
                &json!({"id": id, "url": "https://hooks.example.com/in"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let f = Fixtures {
        wallet: format!("{tag}-wallet"),
        other: format!("{tag}-other"),
        dollars: format!("{tag}-dollars"),
        to_close: format!("{tag}-to-close"),
        to_freeze: format!("{tag}-to-freeze"),
        hold_to_post: Uuid::new_v4(),
        hold_to_void: Uuid::new_v4(),
        posted: Uuid::new_v4(),
        webhook,
        webhook_to_delete,
        delivery: Uuid::nil(),
    };
    for wallet in [&f.wallet, &f.other, &f.to_close, &f.to_freeze] {
        app.create_wallet(wallet).await;
    }
    app.create_account(&f.dollars, "USD", "wallet").await;
    app.fund(&f.wallet, 100_000).await;
    let r = app.transfer(f.posted, &f.wallet, &f.other, 1_000).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    for hold in [f.hold_to_post, f.hold_to_void] {
        let body = json!({"id": hold, "from": f.wallet, "to": f.other, "amount": 500, "status": "pending"});
        let r = app.post("/v1/transfers", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let mut conn = app.pool.acquire().await.unwrap();
    wallet_ledger::outbox::deliveries::fan_out(&mut conn, 1_000)
        .await
        .unwrap();
    let delivery: Uuid = sqlx::query_scalar(
        "select id from webhook_deliveries where subscription_id = $1 order by seq limit 1",
    )
    .bind(webhook)
    .fetch_one(&mut *conn)
    .await
    .expect("the fixtures' events fanned out to the webhook");
    Fixtures { delivery, ..f }
}

/// A plausible request for a documented operation: its concrete path, its body, and what a
/// key whose scope covers it is answered.
fn plausible(method: &Method, template: &str, f: &Fixtures) -> (String, Option<Value>, u16) {
    let entries = json!([{"account": f.wallet, "amount": -1}, {"account": f.other, "amount": 1}]);
    let (path, body, status) = match (method.as_str(), template) {
        ("POST", "/v1/accounts") => (
            template.to_owned(),
            Some(
                json!({"id": format!("new-{}", Uuid::new_v4().simple()), "currency": "SAR", "type": "wallet"}),
            ),
            201,
        ),
        ("GET", "/v1/accounts/{id}") => (format!("/v1/accounts/{}", f.wallet), None, 200),
        ("PATCH", "/v1/accounts/{id}") => (
            format!("/v1/accounts/{}", f.wallet),
            Some(json!({"version": 1, "metadata": {"tier": "gold"}})),
            200,
        ),
        ("POST", "/v1/accounts/{id}/close") => {
            (format!("/v1/accounts/{}/close", f.to_close), None, 200)
        }
        ("GET", "/v1/accounts/{id}/entries") => {
            (format!("/v1/accounts/{}/entries", f.wallet), None, 200)
        }
        ("POST", "/v1/accounts/{id}/freeze") => {
            (format!("/v1/accounts/{}/freeze", f.to_freeze), None, 200)
        }
        ("GET", "/v1/accounts/{id}/holds") => {
            (format!("/v1/accounts/{}/holds", f.wallet), None, 200)
        }
        ("POST", "/v1/accounts/{id}/unfreeze") => {
            (format!("/v1/accounts/{}/unfreeze", f.to_freeze), None, 200)
        }
        ("GET", "/v1/deliveries") => (template.to_owned(), None, 200),
        ("GET", "/v1/deliveries/{id}") => (format!("/v1/deliveries/{}", f.delivery), None, 200),
        ("POST", "/v1/deliveries/{id}/redeliver") => (
            format!("/v1/deliveries/{}/redeliver", f.delivery),
            None,
            200,
        ),
        ("POST", "/v1/payments") => (
            template.to_owned(),
            Some(
                json!({"id": Uuid::new_v4(), "account": f.wallet, "amount": 1, "currency": "SAR", "provider": "test"}),
            ),
            201,
        ),
        ("GET", "/v1/checkpoints") => (template.to_owned(), None, 200),
        ("GET", "/v1/checkpoints/{n}") => ("/v1/checkpoints/999".to_owned(), None, 404),
        ("GET", "/v1/checkpoints/{n}/heads/{account}") => {
            (format!("/v1/checkpoints/1/heads/{}", f.wallet), None, 404)
        }
        ("GET", "/v1/reconciliations") => (template.to_owned(), None, 200),
        ("GET", "/v1/reconciliations/{id}") => {
            (format!("/v1/reconciliations/{}", Uuid::new_v4()), None, 404)
        }
        ("GET", "/v1/reconciliations/{id}/exceptions") => (
            format!("/v1/reconciliations/{}/exceptions", Uuid::new_v4()),
            None,
            404,
        ),
        ("GET", "/v1/accounts") => (format!("/v1/accounts?id_prefix={}", f.wallet), None, 200),
        // The walk reads the consumer's streams; it names dead letters no stream holds.
        ("GET", "/v1/dead-letters" | "/v1/consumer") => (template.to_owned(), None, 200),
        ("GET", "/v1/accounts/{id}/limits") => {
            (format!("/v1/accounts/{}/limits", f.wallet), None, 200)
        }
        // A credit limit no request of the walk comes near.
        ("POST", "/v1/accounts/{id}/limits") => (
            format!("/v1/accounts/{}/limits", f.wallet),
            Some(
                json!({"id": Uuid::new_v4(), "direction": "credit", "window_seconds": 3600, "count": 1_000_000}),
            ),
            201,
        ),
        ("DELETE", "/v1/accounts/{id}/limits/{limit_id}") => (
            format!("/v1/accounts/{}/limits/{}", f.wallet, Uuid::nil()),
            None,
            404,
        ),
        ("GET", "/v1/accounts/{id}/monitors") => {
            (format!("/v1/accounts/{}/monitors", f.wallet), None, 200)
        }
        // A monitor no request of the walk comes near.
        ("POST", "/v1/accounts/{id}/monitors") => (
            format!("/v1/accounts/{}/monitors", f.wallet),
            Some(
                json!({"id": Uuid::new_v4(), "field": "posted", "operator": "gt", "value": 9_000_000_000_000_000_i64}),
            ),
            201,
        ),
        ("GET" | "DELETE", "/v1/accounts/{id}/monitors/{monitor_id}") => (
            format!("/v1/accounts/{}/monitors/{}", f.wallet, Uuid::nil()),
            None,
            404,
        ),
        ("POST", "/v1/account-sets") => (
            template.to_owned(),
            Some(json!({"id": Uuid::new_v4(), "currency": "SAR"})),
            201,
        ),
        ("GET", "/v1/account-sets/{id}/limits") => {
            ("/v1/account-sets/no-set/limits".into(), None, 404)
        }
        ("POST", "/v1/account-sets/{id}/limits") => (
            "/v1/account-sets/no-set/limits".into(),
            Some(
                json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 60, "count": 1}),
            ),
            404,
        ),
        ("DELETE", "/v1/account-sets/{id}/limits/{limit_id}") => (
            format!("/v1/account-sets/no-set/limits/{}", Uuid::nil()),
            None,
            404,
        ),
        ("GET", "/v1/account-sets/{id}/monitors") => {
            ("/v1/account-sets/no-set/monitors".into(), None, 404)
        }
        ("POST", "/v1/account-sets/{id}/monitors") => (
            "/v1/account-sets/no-set/monitors".into(),
            Some(json!({"id": Uuid::new_v4(), "field": "posted", "operator": "lt", "value": 0})),
            404,
        ),
        ("GET" | "DELETE", "/v1/account-sets/{id}/monitors/{monitor_id}") => (
            format!("/v1/account-sets/no-set/monitors/{}", Uuid::nil()),
            None,
            404,
        ),
        ("GET", "/v1/account-sets/{id}") => ("/v1/account-sets/no-set".into(), None, 404),
        ("GET", "/v1/account-sets/{id}/members") => {
            ("/v1/account-sets/no-set/members".into(), None, 404)
        }
        ("POST", "/v1/account-sets/{id}/members") => (
            "/v1/account-sets/no-set/members".into(),
            Some(json!({"type": "account", "id": f.wallet})),
            404,
        ),
        ("DELETE", "/v1/account-sets/{id}/members/{member}") => (
            format!("/v1/account-sets/no-set/members/account:{}", f.wallet),
            None,
            404,
        ),
        ("GET", "/v1/stats/volumes") => ("/v1/stats/volumes?window=day".into(), None, 200),
        ("GET", "/v1/dead-letters/{partition}/{id}") => {
            ("/v1/dead-letters/0/1-1".into(), None, 404)
        }
        ("POST", "/v1/dead-letters/{partition}/{id}/replay") => {
            ("/v1/dead-letters/0/1-1/replay".into(), None, 404)
        }
        ("POST", "/v1/dead-letters/{partition}/{id}/drop") => {
            ("/v1/dead-letters/0/1-1/drop".into(), None, 404)
        }
        ("GET", "/v1/transactions") => {
            (format!("/v1/transactions?account={}", f.wallet), None, 200)
        }
        ("POST", "/v1/transactions") => (
            template.to_owned(),
            Some(json!({"id": Uuid::new_v4(), "entries": entries})),
            201,
        ),
        ("POST", "/v1/transactions/batch") => (
            template.to_owned(),
            Some(json!({"mode": "atomic", "items": [{"id": Uuid::new_v4(), "entries": entries}]})),
            200,
        ),
        ("GET", "/v1/transactions/{id}") => (format!("/v1/transactions/{}", f.posted), None, 200),
        ("GET", "/v1/transactions/{id}/events") => {
            (format!("/v1/transactions/{}/events", f.posted), None, 200)
        }
        // No checkpoint was sealed: the proof is a 404 for whoever may read it.
        ("GET", "/v1/transactions/{id}/proof") => {
            (format!("/v1/transactions/{}/proof", f.posted), None, 404)
        }
        ("POST", "/v1/transactions/{id}/post") => (
            format!("/v1/transactions/{}/post", f.hold_to_post),
            Some(json!({"amount": 200})),
            200,
        ),
        // A repeat answers 200 too (already erased).
        ("POST", "/v1/transactions/{id}/metadata-erasure") => (
            format!("/v1/transactions/{}/metadata-erasure", f.posted),
            Some(json!({"reason": "the walk erases it"})),
            200,
        ),
        ("POST", "/v1/transactions/{id}/reverse") => (
            format!("/v1/transactions/{}/reverse", f.posted),
            Some(json!({"id": Uuid::new_v4(), "amount": 10})),
            201,
        ),
        ("POST", "/v1/transactions/{id}/void") => (
            format!("/v1/transactions/{}/void", f.hold_to_void),
            None,
            200,
        ),
        ("POST", "/v1/exchanges") => (
            template.to_owned(),
            Some(
                json!({"id": Uuid::new_v4(), "from": f.wallet, "to": f.dollars, "amount": 100,
                        "currency": "SAR", "counter_currency": "USD", "rate": "0.2666"}),
            ),
            201,
        ),
        ("POST", "/v1/transfers") => (
            template.to_owned(),
            Some(json!({"id": Uuid::new_v4(), "from": f.wallet, "to": f.other, "amount": 1})),
            201,
        ),
        ("GET", "/v1/webhooks") => (template.to_owned(), None, 200),
        ("POST", "/v1/webhooks") => (
            template.to_owned(),
            Some(json!({"url": "https://hooks.example.com/other", "id": Uuid::new_v4()})),
            201,
        ),
        ("GET", "/v1/webhooks/{id}") => (format!("/v1/webhooks/{}", f.webhook), None, 200),
        ("DELETE", "/v1/webhooks/{id}") => {
            (format!("/v1/webhooks/{}", f.webhook_to_delete), None, 200)
        }
        ("POST", "/v1/webhooks/{id}/rotate-secret") => (
            format!("/v1/webhooks/{}/rotate-secret", f.webhook),
            Some(json!({"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})),
            200,
        ),
        ("GET", "/healthz" | "/readyz" | "/openapi.json" | "/metrics") => {
            (template.to_owned(), None, 200)
        }
        _ => panic!("the walk has no plausible request for {method} {template}: add one"),
    };
    assert!(
        !path.contains('{'),
        "every path parameter is substituted: {path}"
    );
    (path, body, status)
}

// ---------------------------------------------------------------------------------------------
// 1. Every operation needs a key, of its scope.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn no_documented_operation_answers_without_a_valid_key() {
    let app = TestApp::new().await;
    let f = fixtures(&app, "anon").await;
    let operations = documented_operations();

    // The open paths are exactly the documented paths outside /v1, and they answer.
    let outside: BTreeSet<&str> = operations
        .iter()
        .map(|(_, p)| p.as_str())
        .filter(|p| !p.starts_with("/v1/"))
        .collect();
    assert_eq!(outside, OPEN_PATHS.into_iter().collect::<BTreeSet<_>>());
    for path in OPEN_PATHS {
        let r = app.send_as_is(request(Method::GET, path, &[], None)).await;
        assert_eq!(r.status, StatusCode::OK, "{path} is open: {}", r.text);
    }

    // A key that worked, then revoked: the next request is refused.
    let (revoked_id, revoked) = key(&app, "default", Scope::Admin).await;
    let r = call(&app, Method::GET, "/v1/transactions", &revoked, &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    revoke(&app, revoked_id).await;

    let unknown = format!("wl_{}", "A".repeat(43));
    let credentials: Vec<(&str, Option<String>)> = vec![
        ("no Authorization", None),
        ("an empty header", Some(String::new())),
        ("Bearer without a token", Some("Bearer".into())),
        ("Bearer and blanks", Some("Bearer   ".into())),
        ("another scheme", Some("Basic dXNlcjpwYXNzd29yZA==".into())),
        (
            "the admin token under another scheme",
            Some(format!("Token {}", app.token)),
        ),
        ("the admin token without a scheme", Some(app.token.clone())),
        (
            "the admin token with a suffix",
            Some(format!("Bearer {}x", app.token)),
        ),
        (
            "a prefix of the admin token",
            Some(format!("Bearer {}", &app.token[..20])),
        ),
        ("an unknown token", Some(bearer(&unknown))),
        ("a revoked key", Some(bearer(&revoked))),
    ];

    let before = footprint(&app).await;
    let mut walked = 0;
    for (method, template) in &operations {
        if OPEN_PATHS.contains(&template.as_str()) {
            continue;
        }
        let (path, body, _) = plausible(method, template, &f);
        for (what, credential) in &credentials {
            let headers: Vec<(&str, &str)> = credential
                .as_deref()
                .map(|c| vec![("authorization", c)])
                .unwrap_or_default();
            let r = app
                .send_as_is(request(method.clone(), &path, &headers, body.as_ref()))
                .await;
            assert_unauthenticated(&r, &format!("{method} {path} with {what}"));
            walked += 1;
        }
    }
    assert!(walked > 200, "{walked}");

    // Paths outside the document under /v1 are refused the same way, not answered 404.
    for (method, path) in [
        (Method::GET, "/v1"),
        (Method::GET, "/v1/"),
        (Method::GET, "/v1/nothing-here"),
        (Method::POST, "/v1/accounts/x/delete"),
        (Method::DELETE, "/v1/accounts/x"),
        (Method::PUT, "/v1/transfers"),
        (Method::HEAD, "/v1/transactions"),
        (Method::GET, "/v1/api-keys"),
    ] {
        let r = app
            .send_as_is(request(method.clone(), path, &[], None))
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}: {}",
            r.text
        );
        assert_eq!(header(&r, "www-authenticate"), "Bearer", "{method} {path}");
    }
    assert_eq!(
        footprint(&app).await,
        before,
        "no refused request wrote anything"
    );
    // The scheme is case-insensitive (RFC 9110), the token is not.
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} {}", app.token);
        let r = app
            .send_as_is(request(
                Method::GET,
                "/v1/transactions",
                &[("authorization", &auth)],
                None,
            ))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{scheme}: {}", r.text);
    }
    let auth = format!("Bearer {}", app.token.to_uppercase());
    let r = app
        .send_as_is(request(
            Method::GET,
            "/v1/transactions",
            &[("authorization", &auth)],
            None,
        ))
        .await;
    assert_unauthenticated(&r, "the token in upper case");
    app.finish().await;
}

#[tokio::test]
async fn each_operation_answers_a_key_whose_scope_covers_it_and_403_to_the_others() {
    let app = TestApp::new().await;
    let operations = documented_operations();
    for scope in [Scope::Read, Scope::Write, Scope::Admin] {
        let f = fixtures(&app, scope.as_str()).await;
        let (_, token) = key(&app, &format!("walker-{}", scope.as_str()), scope).await;
        for (method, template) in &operations {
            if OPEN_PATHS.contains(&template.as_str()) {
                continue;
            }
            let (path, body, expected) = plausible(method, template, &f);
            let context = format!("{} key: {method} {path}", scope.as_str());
            let needed = needed_scope(method, template);
            if scope < needed {
                let before = footprint(&app).await;
                let r = call(&app, method.clone(), &path, &token, &[], body.as_ref()).await;
                assert_problem(&r, 403, "insufficient_scope", &context);
                assert!(
                    r.body["detail"]
                        .as_str()
                        .unwrap_or("")
                        .contains(needed.as_str()),
                    "{context}: the detail names the scope needed: {}",
                    r.text
                );
                assert_eq!(footprint(&app).await, before, "{context} wrote nothing");
            } else {
                let r = call(&app, method.clone(), &path, &token, &[], body.as_ref()).await;
                assert_eq!(r.status.as_u16(), expected, "{context}: {}", r.text);
            }
        }
    }
    // The scope of the money-moving and admin operations, spelled out.
    assert_eq!(needed_scope(&Method::POST, "/v1/transfers"), Scope::Write);
    assert_eq!(needed_scope(&Method::POST, "/v1/accounts"), Scope::Admin);
    assert_eq!(needed_scope(&Method::GET, "/v1/webhooks"), Scope::Admin);
    assert_eq!(
        needed_scope(&Method::GET, "/v1/reconciliations"),
        Scope::Admin
    );
    assert_eq!(needed_scope(&Method::GET, "/v1/dead-letters"), Scope::Admin);
    assert_eq!(
        needed_scope(&Method::GET, "/v1/transactions/{id}/events"),
        Scope::Admin
    );
    assert_eq!(needed_scope(&Method::GET, "/v1/consumer"), Scope::Admin);
    assert_eq!(
        needed_scope(&Method::GET, "/v1/stats/volumes"),
        Scope::Admin
    );
    app.finish().await;
}

#[tokio::test]
async fn other_spellings_of_an_admin_path_do_not_reach_it_with_a_read_key() {
    let app = TestApp::new().await;
    let (_, read) = key(&app, "reader", Scope::Read).await;
    let webhook = Uuid::new_v4();
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": webhook, "url": "https://hooks.example.com/in"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.create_wallet("spell-a").await;
    app.create_wallet("spell-b").await;
    app.fund("spell-a", 100).await;
    let posted = Uuid::new_v4();
    assert_eq!(
        app.transfer(posted, "spell-a", "spell-b", 1).await.status,
        201
    );
    let mut conn = app.pool.acquire().await.unwrap();
    wallet_ledger::outbox::deliveries::fan_out(&mut conn, 1_000)
        .await
        .unwrap();
    drop(conn);
    let admin = app.get(&format!("/v1/transactions/{posted}/events")).await;
    assert!(admin.text.contains("hooks.example.com"), "{}", admin.text);
    for path in [
        "/v1/webhooks".to_owned(),
        "/v1/webhooks/".to_owned(),
        "/v1//webhooks".to_owned(),
        "/v1/%77ebhooks".to_owned(),
        "/v1/webhooks%2F".to_owned(),
        format!("/v1/webhooks/{webhook}"),
        format!("/v1/webhooks/{webhook}/"),
        format!("/v1/%77ebhooks/{webhook}"),
        "/v1/./webhooks".to_owned(),
        "/v1/accounts/../webhooks".to_owned(),
        "/V1/webhooks".to_owned(),
        // A transaction's events list the webhook's deliveries.
        format!("/v1/transactions/{posted}/events"),
        format!("/v1/transactions/{posted}/events/"),
        format!("/v1/transactions/{posted}/%65vents"),
        format!("/v1/transactions/{posted}//events"),
        format!("/v1/transactions/{posted}/./events"),
        format!("/v1/transactions/{posted}/events/../events"),
        format!("/v1/transactions/{posted}/EVENTS"),
    ] {
        let r = call(&app, Method::GET, &path, &read, &[], None).await;
        assert!(
            matches!(r.status.as_u16(), 403 | 404),
            "GET {path} with a read key: {} {}",
            r.status,
            r.text
        );
        assert!(
            !r.text.contains(&webhook.to_string()) || r.status == 404,
            "{path}: {}",
            r.text
        );
        assert!(!r.text.contains("hooks.example.com"), "{path}: {}", r.text);
    }
    app.finish().await;
}

/// Two `Authorization` or two `Idempotency-Key` headers: which one counts would be a guess, so
/// the request is refused (400 `duplicate_header`) and nothing is written.
#[tokio::test]
async fn a_header_that_carries_meaning_sent_twice_is_refused() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let (_, write) = key(&app, "twice", Scope::Write).await;
    let (_, other) = key(&app, "other", Scope::Write).await;
    let body = json!({"account": "w1", "amount": 100, "currency": "SAR", "provider": "test"});
    let before = app.row_counts().await;
    let cases: [(&str, Vec<(&str, String)>); 2] = [
        (
            "Authorization",
            vec![
                ("authorization", bearer(&write)),
                ("authorization", bearer(&other)),
                ("idempotency-key", "k-1".into()),
            ],
        ),
        (
            "Idempotency-Key",
            vec![
                ("authorization", bearer(&write)),
                ("idempotency-key", "k-2".into()),
                ("idempotency-key", "k-3".into()),
            ],
        ),
    ];
    for (header, headers) in &cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = app
            .send_as_is(request(Method::POST, "/v1/payments", &headers, Some(&body)))
            .await;
        assert_problem(&r, 400, "duplicate_header", header);
        assert!(r.text.contains(header), "{}", r.text);
    }
    assert_eq!(app.row_counts().await, before, "nothing was written");
    app.finish().await;
}

/// Any token is a valid request method, and any path can be asked for: neither may become a
/// label value, or unauthenticated clients grow `/metrics` and the server's memory without
/// bound (16,000 random methods grew it from 68 KB to 65 MB).
#[tokio::test]
async fn metric_labels_come_from_a_closed_set_whatever_the_method_and_path() {
    let app = TestApp::new().await;
    let mut sent = Vec::new();
    for i in 0..300 {
        let method = format!("X{}{i}", Uuid::new_v4().simple());
        let path = format!("/v1/{}/{i}", Uuid::new_v4().simple());
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let r = app.send_as_is(request(m, &path, &[], None)).await;
        // Without a key, an unknown path under /v1 tells nothing of what exists.
        assert_problem(&r, 401, "unauthenticated", &format!("{method} {path}"));
        let r = app.send_as_is(request(Method::GET, &path, &[], None)).await;
        assert_problem(&r, 401, "unauthenticated", &format!("GET {path}"));
        sent.push((method, path));
    }
    let after = app.get("/metrics").await.text;
    for (method, path) in &sent {
        assert!(
            !after.contains(method.as_str()),
            "the method {method} became a label"
        );
        assert!(
            !after.contains(path.as_str()),
            "the path {path} became a label"
        );
    }
    assert!(
        after.contains(r#"method="other""#),
        "unknown methods count as other"
    );
    // Whatever every test of this process sent, the method label takes at most ten values.
    let methods: std::collections::BTreeSet<&str> = after
        .lines()
        .filter(|l| l.starts_with("wallet_ledger_http_requests_total{"))
        .filter_map(|l| l.split("method=\"").nth(1)?.split('"').next())
        .collect();
    assert!(methods.len() <= 10, "{methods:?}");
    app.finish().await;
}

#[tokio::test]
async fn metrics_can_require_an_admin_key() {
    let app = TestApp::with_config(HttpSettings {
        metrics_require_key: true,
        ..HttpSettings::default()
    })
    .await;
    let r = app
        .send_as_is(request(Method::GET, "/metrics", &[], None))
        .await;
    assert_unauthenticated(&r, "metrics without a key");
    for scope in [Scope::Read, Scope::Write] {
        let (_, token) = key(&app, "scraper", scope).await;
        let r = call(&app, Method::GET, "/metrics", &token, &[], None).await;
        assert_problem(&r, 403, "insufficient_scope", scope.as_str());
    }
    let r = app.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.contains("wallet_ledger_db_pool_max_connections"),
        "{}",
        r.text
    );
    // Health, readiness and the document stay open.
    for path in ["/healthz", "/readyz", "/openapi.json"] {
        let r = app.send_as_is(request(Method::GET, path, &[], None)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 2. The order of the checks: 401, 403, then the body.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn authentication_and_scope_are_checked_before_the_body() {
    let app = TestApp::new().await;
    let (_, read) = key(&app, "o", Scope::Read).await;
    let (_, write) = key(&app, "o", Scope::Write).await;
    let unknown = format!("wl_{}", "B".repeat(43));
    let malformed = b"{oops: 1,}".to_vec();
    let send = |path: &str, token: Option<&str>, content_type: &str, body: Vec<u8>| {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("content-type", content_type);
        if let Some(token) = token {
            builder = builder.header("authorization", bearer(token));
        }
        app.send_as_is(builder.body(Body::from(body)).unwrap())
    };
    let before = footprint(&app).await;

    let r = send("/v1/transfers", None, "application/json", malformed.clone()).await;
    assert_unauthenticated(&r, "no key, malformed body");
    let r = send(
        "/v1/transfers",
        Some(&unknown),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_unauthenticated(&r, "unknown key, malformed body");
    let r = send(
        "/v1/transfers",
        Some(&read),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_problem(&r, 403, "insufficient_scope", "read key, malformed body");
    let r = send(
        "/v1/transfers",
        Some(&write),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_problem(&r, 400, "malformed_json", "write key, malformed body");
    let r = send(
        "/v1/transfers",
        Some(&app.token),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_problem(&r, 400, "malformed_json", "admin key, malformed body");

    // Account creation is admin's: the write key is refused before its body is looked at.
    let r = send(
        "/v1/accounts",
        Some(&write),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_problem(
        &r,
        403,
        "insufficient_scope",
        "write key, malformed account",
    );
    let r = send(
        "/v1/accounts",
        Some(&app.token),
        "application/json",
        malformed.clone(),
    )
    .await;
    assert_problem(&r, 400, "malformed_json", "admin key, malformed account");

    // Neither the content type nor the size is looked at before the key and its scope.
    let r = send("/v1/transfers", None, "text/plain", b"hello".to_vec()).await;
    assert_unauthenticated(&r, "no key, text body");
    let r = send(
        "/v1/transfers",
        Some(&read),
        "text/plain",
        b"hello".to_vec(),
    )
    .await;
    assert_problem(&r, 403, "insufficient_scope", "read key, text body");
    let huge = vec![b' '; 300 * 1024];
    let r = send("/v1/transfers", None, "application/json", huge.clone()).await;
    assert_unauthenticated(&r, "no key, body over the limit");
    let r = send(
        "/v1/transfers",
        Some(&read),
        "application/json",
        huge.clone(),
    )
    .await;
    assert_problem(
        &r,
        403,
        "insufficient_scope",
        "read key, body over the limit",
    );
    let r = send("/v1/transfers", Some(&write), "application/json", huge).await;
    assert_problem(
        &r,
        413,
        "payload_too_large",
        "write key, body over the limit",
    );
    // A body without an id: the key's scope first, then `id_required`.
    let r = send(
        "/v1/transfers",
        Some(&read),
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    assert_problem(&r, 403, "insufficient_scope", "read key, no id");
    assert_eq!(footprint(&app).await, before);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Idempotency-Key ids are scoped by owner.
// ---------------------------------------------------------------------------------------------

/// UUIDv5 of `owner + "\n" + key` in the documented namespace, written out here so that a
/// change to the derivation fails a test.
fn derived_id(owner: &str, key: &str) -> Uuid {
    let namespace = Uuid::parse_str("6f1d8a52-3c4e-4b7a-9e21-7d0c5b8e4a13").unwrap();
    Uuid::new_v5(&namespace, format!("{owner}\n{key}").as_bytes())
}

#[tokio::test]
async fn idempotency_key_ids_are_scoped_by_the_keys_owner() {
    let app = TestApp::new().await;
    assert_eq!(
        wallet_ledger::ledger::ids::IDEMPOTENCY_KEY_NAMESPACE,
        Uuid::parse_str("6f1d8a52-3c4e-4b7a-9e21-7d0c5b8e4a13").unwrap()
    );
    app.create_wallet("w1").await;
    let (alice_old_id, alice_old) = key(&app, "alice", Scope::Write).await;
    let (_, alice_new) = key(&app, "alice", Scope::Admin).await;
    let (_, bob) = key(&app, "bob", Scope::Write).await;
    let body = json!({"account": "w1", "amount": 700, "currency": "SAR", "provider": "test"});
    let pay = |token: &str| {
        let token = token.to_owned();
        let body = body.clone();
        let app = &app;
        async move {
            call(
                app,
                Method::POST,
                "/v1/payments",
                &token,
                &[("idempotency-key", "order-42")],
                Some(&body),
            )
            .await
        }
    };

    let first = pay(&alice_old).await;
    assert_eq!(
        (first.status, first.replayed()),
        (StatusCode::CREATED, false),
        "{}",
        first.text
    );
    assert_eq!(
        first.body["id"],
        json!(derived_id("alice", "order-42")),
        "{}",
        first.text
    );

    // Another owner, the same header: another transaction, with its own id.
    let other = pay(&bob).await;
    assert_eq!(
        (other.status, other.replayed()),
        (StatusCode::CREATED, false),
        "{}",
        other.text
    );
    assert_eq!(
        other.body["id"],
        json!(derived_id("bob", "order-42")),
        "{}",
        other.text
    );
    assert_ne!(first.body["id"], other.body["id"]);

    // The same owner after a rotation (the old key revoked): the replay of the first.
    revoke(&app, alice_old_id).await;
    let again = pay(&alice_new).await;
    assert_eq!(
        (again.status, again.replayed()),
        (StatusCode::OK, true),
        "{}",
        again.text
    );
    assert_eq!(again.body, first.body);
    let r = pay(&alice_old).await;
    assert_unauthenticated(&r, "the rotated-out key");

    // The harness's key belongs to `default`: a third id.
    let third = app.post_with_key("/v1/payments", "order-42", &body).await;
    assert_eq!(third.status, StatusCode::CREATED, "{}", third.text);
    assert_eq!(third.body["id"], json!(derived_id("default", "order-42")));

    assert_eq!(app.posted_balance("w1").await, 3 * 700);
    for owner in ["alice", "bob", "default"] {
        let r = app
            .get(&format!(
                "/v1/transactions/{}",
                derived_id(owner, "order-42")
            ))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{owner}: {}", r.text);
    }

    // Accounts created without an id: the derived UUID is per owner too.
    let (_, carol) = key(&app, "carol", Scope::Admin).await;
    let account = json!({"currency": "SAR", "type": "wallet"});
    let mut ids = Vec::new();
    for token in [&carol, &app.token] {
        let r = call(
            &app,
            Method::POST,
            "/v1/accounts",
            token,
            &[("idempotency-key", "acct-1")],
            Some(&account),
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        ids.push(r.body["id"].clone());
    }
    assert_eq!(
        ids,
        vec![
            json!(derived_id("carol", "acct-1").to_string()),
            json!(derived_id("default", "acct-1").to_string())
        ]
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Audit.
// ---------------------------------------------------------------------------------------------

type AuditRow = (Option<Uuid>, String, Option<String>, String, String);

async fn audit_rows(app: &TestApp) -> Vec<AuditRow> {
    sqlx::query_as("select key_id, owner, request_id, action, resource from audit_log order by seq")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_write_is_audited_with_its_key_owner_request_id_action_and_resource() {
    let app = TestApp::new().await;
    let (ops_id, ops) = key(&app, "ops", Scope::Admin).await;
    let (_, reader) = key(&app, "ops", Scope::Read).await;
    let act = |method: Method, path: &str, request_id: &str, body: Option<Value>| {
        let (path, request_id, ops) = (path.to_owned(), request_id.to_owned(), ops.clone());
        let app = &app;
        async move {
            call(
                app,
                method,
                &path,
                &ops,
                &[("x-request-id", &request_id)],
                body.as_ref(),
            )
            .await
        }
    };
    let payment = Uuid::new_v4();
    let transfer = Uuid::new_v4();
    let hold = Uuid::new_v4();
    let webhook = Uuid::new_v4();
    let writes: Vec<(Method, String, &str, Option<Value>, u16)> = vec![
        (
            Method::POST,
            "/v1/accounts".into(),
            "req-acct-1",
            Some(json!({"id": "aud-w1", "currency": "SAR", "type": "wallet"})),
            201,
        ),
        (
            Method::POST,
            "/v1/accounts".into(),
            "req-acct-2",
            Some(json!({"id": "aud-w2", "currency": "SAR", "type": "wallet"})),
            201,
        ),
        (
            Method::POST,
            "/v1/payments".into(),
            "req-pay",
            Some(
                json!({"id": payment, "account": "aud-w1", "amount": 1_000, "currency": "SAR", "provider": "test"}),
            ),
            201,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            "req-transfer",
            Some(json!({"id": transfer, "from": "aud-w1", "to": "aud-w2", "amount": 100})),
            201,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            "req-hold",
            Some(
                json!({"id": hold, "from": "aud-w1", "to": "aud-w2", "amount": 50, "status": "pending"}),
            ),
            201,
        ),
        (
            Method::POST,
            format!("/v1/transactions/{hold}/post"),
            "req-capture",
            Some(json!({"amount": 30})),
            200,
        ),
        (
            Method::POST,
            "/v1/accounts/aud-w2/freeze".into(),
            "req-freeze",
            None,
            200,
        ),
        (
            Method::POST,
            "/v1/webhooks".into(),
            "req-webhook",
            Some(json!({"id": webhook, "url": "https://hooks.example.com/in"})),
            201,
        ),
    ];
    for (method, path, request_id, body, status) in &writes {
        let r = act(method.clone(), path, request_id, body.clone()).await;
        assert_eq!(r.status.as_u16(), *status, "{method} {path}: {}", r.text);
        assert_eq!(
            header(&r, "x-request-id"),
            *request_id,
            "the request id is echoed"
        );
    }
    let row = |request_id: &str, action: &str, resource: &str| -> AuditRow {
        (
            Some(ops_id),
            "ops".into(),
            Some(request_id.into()),
            action.into(),
            resource.into(),
        )
    };
    let mut expected = vec![
        row("req-acct-1", "account.create", "aud-w1"),
        row("req-acct-2", "account.create", "aud-w2"),
        // The payment's first use of the provider creates its clearing account: two resources.
        row("req-pay", "account.create", "clearing:test:SAR"),
        row("req-pay", "transaction.create", &payment.to_string()),
        row("req-transfer", "transaction.create", &transfer.to_string()),
        row("req-hold", "transaction.create", &hold.to_string()),
        row("req-capture", "transaction.post", &hold.to_string()),
        row("req-freeze", "account.freeze", "aud-w2"),
        row("req-webhook", "webhook.create", &webhook.to_string()),
    ];
    assert_eq!(audit_rows(&app).await, expected);

    // Without an x-request-id the generated one (echoed in the response) is recorded.
    let r = call(
        &app,
        Method::PATCH,
        "/v1/accounts/aud-w1",
        &ops,
        &[],
        Some(&json!({"version": 1, "metadata": {"k": "v"}})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let generated = header(&r, "x-request-id").to_owned();
    assert!(
        Uuid::parse_str(&generated).is_ok(),
        "a generated request id: {generated:?}"
    );
    expected.push(row(&generated, "account.update", "aud-w1"));
    assert_eq!(audit_rows(&app).await, expected);

    // Replays write no audit row.
    for (method, path, request_id, body, _) in &writes {
        let r = act(
            method.clone(),
            path,
            &format!("{request_id}-again"),
            body.clone(),
        )
        .await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "replay of {method} {path}: {}",
            r.text
        );
    }
    let r = call(
        &app,
        Method::PATCH,
        "/v1/accounts/aud-w1",
        &ops,
        &[],
        Some(&json!({"version": 1, "metadata": {"k": "v"}})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        audit_rows(&app).await,
        expected,
        "a replay writes no audit row"
    );

    // Refused requests write none: validation, syntax, unknown accounts, scope.
    let refusals: Vec<(Method, String, Option<Value>, u16)> = vec![
        (
            Method::POST,
            "/v1/payments".into(),
            Some(
                json!({"id": Uuid::new_v4(), "account": "aud-w1", "amount": -5, "currency": "SAR", "provider": "test"}),
            ),
            422,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            Some(json!({"id": Uuid::new_v4(), "from": "aud-w1", "to": "aud-w1", "amount": 1})),
            422,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            Some(json!({"id": Uuid::new_v4(), "from": "aud-w1", "to": "nobody", "amount": 1})),
            422,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            Some(json!({"from": "aud-w1", "to": "aud-w2", "amount": 1})),
            400,
        ),
        (
            Method::POST,
            "/v1/accounts".into(),
            Some(json!({"id": "aud-w3", "currency": "XXX", "type": "wallet"})),
            422,
        ),
        (
            Method::POST,
            "/v1/webhooks".into(),
            Some(json!({"id": Uuid::new_v4(), "url": "ftp://hooks.example.com/in"})),
            422,
        ),
        (
            Method::POST,
            format!("/v1/transactions/{hold}/post"),
            Some(json!({"amount": 40})),
            422,
        ),
        (
            Method::POST,
            format!("/v1/transactions/{transfer}/void"),
            None,
            409,
        ),
        (Method::POST, "/v1/accounts/nobody/freeze".into(), None, 404),
    ];
    for (method, path, body, status) in &refusals {
        let r = act(method.clone(), path, "req-refused", body.clone()).await;
        assert_eq!(r.status.as_u16(), *status, "{method} {path}: {}", r.text);
    }
    let r = call(
        &app,
        Method::POST,
        "/v1/transfers",
        &reader,
        &[],
        Some(&json!({"id": Uuid::new_v4(), "from": "aud-w1", "to": "aud-w2", "amount": 1})),
    )
    .await;
    assert_problem(&r, 403, "insufficient_scope", "a read key's transfer");
    assert_eq!(
        audit_rows(&app).await,
        expected,
        "a refused request writes no audit row"
    );

    // Every other write of the API, one audit row per resource written.
    let hold2 = Uuid::new_v4();
    let reversal = Uuid::new_v4();
    let (b1, b2) = (Uuid::new_v4(), Uuid::new_v4());
    let item = |id: Uuid| json!({"id": id, "entries": [{"account": "aud-w1", "amount": -1}, {"account": "aud-w2", "amount": 1}]});
    let more: Vec<(Method, String, &str, Option<Value>, u16)> = vec![
        (
            Method::POST,
            "/v1/accounts/aud-w2/unfreeze".into(),
            "req-unfreeze",
            None,
            200,
        ),
        (
            Method::POST,
            "/v1/accounts".into(),
            "req-acct-3",
            Some(json!({"id": "aud-w3", "currency": "SAR", "type": "wallet"})),
            201,
        ),
        (
            Method::POST,
            "/v1/accounts/aud-w3/close".into(),
            "req-close",
            None,
            200,
        ),
        (
            Method::POST,
            "/v1/transfers".into(),
            "req-hold-2",
            Some(
                json!({"id": hold2, "from": "aud-w1", "to": "aud-w2", "amount": 20, "status": "pending"}),
            ),
            201,
        ),
        (
            Method::POST,
            format!("/v1/transactions/{hold2}/void"),
            "req-void",
            None,
            200,
        ),
        (
            Method::POST,
            format!("/v1/transactions/{transfer}/reverse"),
            "req-reverse",
            Some(json!({"id": reversal, "amount": 10})),
            201,
        ),
        (
            Method::POST,
            "/v1/transactions/batch".into(),
            "req-batch",
            Some(json!({"mode": "atomic", "items": [item(b1), item(b2)]})),
            200,
        ),
        (
            Method::POST,
            format!("/v1/webhooks/{webhook}/rotate-secret"),
            "req-rotate",
            Some(json!({"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})),
            200,
        ),
    ];
    for (method, path, request_id, body, status) in &more {
        let r = act(method.clone(), path, request_id, body.clone()).await;
        assert_eq!(r.status.as_u16(), *status, "{method} {path}: {}", r.text);
    }
    let mut conn = app.pool.acquire().await.unwrap();
    wallet_ledger::outbox::deliveries::fan_out(&mut conn, 1_000)
        .await
        .unwrap();
    let delivery: Uuid = sqlx::query_scalar(
        "select id from webhook_deliveries where subscription_id = $1 order by seq limit 1",
    )
    .bind(webhook)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    drop(conn);
    let r = act(
        Method::POST,
        &format!("/v1/deliveries/{delivery}/redeliver"),
        "req-redeliver",
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = act(
        Method::DELETE,
        &format!("/v1/webhooks/{webhook}"),
        "req-delete",
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    expected.extend([
        row("req-unfreeze", "account.unfreeze", "aud-w2"),
        row("req-acct-3", "account.create", "aud-w3"),
        row("req-close", "account.close", "aud-w3"),
        row("req-hold-2", "transaction.create", &hold2.to_string()),
        row("req-void", "transaction.void", &hold2.to_string()),
        row("req-reverse", "transaction.create", &reversal.to_string()),
        row("req-batch", "transaction.create", &b1.to_string()),
        row("req-batch", "transaction.create", &b2.to_string()),
        row("req-rotate", "webhook.rotate_secret", &webhook.to_string()),
        row("req-redeliver", "delivery.redeliver", &delivery.to_string()),
        row("req-delete", "webhook.delete", &webhook.to_string()),
    ]);
    assert_eq!(audit_rows(&app).await, expected);

    // The audit row is part of the write's own transaction: when it cannot be written, the
    // write does not happen either.
    sqlx::raw_sql(
        r#"create function refuse_audit() returns trigger language plpgsql as $$
           begin
             if new.resource like 'doomed%' or new.resource = '00000000-0000-0000-0000-00000000d00d' then
               raise exception 'audit refused';
             end if;
             return new;
           end $$;
           create trigger refuse_audit before insert on audit_log
             for each row execute function refuse_audit();"#,
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let doomed = Uuid::parse_str("00000000-0000-0000-0000-00000000d00d").unwrap();
    let before = app.row_counts().await;
    let r = act(Method::POST, "/v1/payments", "req-doomed", Some(json!({"id": doomed, "account": "aud-w1", "amount": 5, "currency": "SAR", "provider": "test"}))).await;
    // The refusal is the database's, not the request's: an opaque 500, not a 503 to retry.
    assert_problem(&r, 500, "internal", "a payment whose audit row is refused");
    let r = act(
        Method::POST,
        "/v1/accounts",
        "req-doomed-acct",
        Some(json!({"id": "doomed-acct", "currency": "SAR", "type": "wallet"})),
    )
    .await;
    assert_problem(&r, 500, "internal", "an account whose audit row is refused");
    assert_eq!(
        app.row_counts().await,
        before,
        "nothing was written without its audit row"
    );
    assert_eq!(
        app.get(&format!("/v1/transactions/{doomed}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/v1/accounts/doomed-acct").await.status,
        StatusCode::NOT_FOUND
    );
    let events: i64 = sqlx::query_scalar(
        "select count(*) from outbox_events where transaction_id = $1 or account_id = 'doomed-acct'",
    )
    .bind(doomed)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(events, 0, "nor its outbox event");
    assert_eq!(audit_rows(&app).await, expected);
    app.finish().await;
}

/// Concurrent requests share key lookups (one statement for many): each still gets its own
/// key's answer, and a revocation is seen by every lookup that starts after it.
#[tokio::test]
async fn concurrent_requests_sharing_a_key_lookup_each_get_their_own_keys_answer() {
    let app = TestApp::new().await;
    let (reader_id, reader) = key(&app, "reader", Scope::Read).await;
    let (_, writer) = key(&app, "writer", Scope::Write).await;
    let (revoked_id, revoked) = key(&app, "gone", Scope::Admin).await;
    revoke(&app, revoked_id).await;
    let unknown = format!("wl_{}", "B".repeat(43));
    // The lookups get a pool of one connection, which the test holds at first: the 200
    // requests below queue while at most two lookups wait for it, so the others are answered
    // together, by shared statements, whatever the timing.
    let one = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(app.pool.connect_options().as_ref().clone())
        .await
        .unwrap();
    let held = one.acquire().await.unwrap();
    let lookups = KeyLookups::start(one.clone());

    let tokens = [&reader, &writer, &revoked, &unknown];
    let mut asked = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (lookups, token) = (lookups.clone(), tokens[i % 4].clone());
        asked.spawn(async move { (i, lookups.principal(&token).await) });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        asked.try_join_next().is_none(),
        "no request is answered without a lookup in the database"
    );
    drop(held);
    while let Some(done) = asked.join_next().await {
        let (i, answer) = done.unwrap();
        let found = answer.expect("the lookup ran").map(|p| (p.owner, p.scope));
        let expected = match i % 4 {
            0 => Some(("reader".to_owned(), Scope::Read)),
            1 => Some(("writer".to_owned(), Scope::Write)),
            _ => None,
        };
        assert_eq!(found, expected, "lookup {i}");
    }

    // Revoked now: every lookup from here on refuses it, shared or not.
    revoke(&app, reader_id).await;
    let mut asked = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let (lookups, reader, writer) = (lookups.clone(), reader.clone(), writer.clone());
        asked.spawn(async move {
            (
                lookups.principal(&reader).await,
                lookups.principal(&writer).await,
            )
        });
    }
    while let Some(done) = asked.join_next().await {
        let (reader_answer, writer_answer) = done.unwrap();
        assert_eq!(reader_answer.expect("the lookup ran"), None);
        assert_eq!(
            writer_answer.expect("the lookup ran").map(|p| p.scope),
            Some(Scope::Write)
        );
    }
    one.close().await;
    app.finish().await;
}

/// The lookups keep their connection between lookups while requests come (no release, so no
/// ping per request) and return it to the pool once quiet; a kept connection that broke is
/// dropped after one failed lookup, and the next lookup gets a new one.
#[tokio::test]
async fn key_lookups_keep_their_connection_while_busy_and_give_it_back_when_quiet() {
    let app = TestApp::new().await;
    let (_, reader) = key(&app, "reader", Scope::Read).await;
    let name = format!("kept-lookups-{}", Uuid::new_v4().simple());
    let one = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(
            app.pool
                .connect_options()
                .as_ref()
                .clone()
                .application_name(&name),
        )
        .await
        .unwrap();
    let lookups = KeyLookups::start(one.clone());
    let owner = |answer: Result<Option<api_keys::Principal>, LookupFailed>| {
        answer.map(|p| p.map(|p| p.owner))
    };
    assert_eq!(
        owner(lookups.principal(&reader).await).unwrap().as_deref(),
        Some("reader")
    );
    assert!(
        one.try_acquire().is_none(),
        "the lookups keep the pool's one connection"
    );

    // The kept connection dies (a restart, a failover): one lookup fails, the next one works.
    let killed: i64 = sqlx::query_scalar(
        "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity
                               where application_name = $1) k",
    )
    .bind(&name)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(killed, 1);
    assert!(
        matches!(
            lookups.principal(&reader).await,
            Err(LookupFailed::Unavailable(_))
        ),
        "the lookup on the dead connection is unavailable"
    );
    assert_eq!(
        owner(lookups.principal(&reader).await).unwrap().as_deref(),
        Some("reader")
    );

    // Quiet: the connection goes back to the pool.
    poll_until(
        KEY_LOOKUP_KEEP_IDLE * 3 + Duration::from_secs(5),
        "the kept connection returned to the pool once quiet",
        || async { one.try_acquire().map(drop) },
    )
    .await;
    one.close().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Rate limit.
// ---------------------------------------------------------------------------------------------

async fn get(app: &TestApp, token: &str) -> TestResponse {
    call(app, Method::GET, "/v1/transactions", token, &[], None).await
}

#[tokio::test]
async fn each_key_has_its_own_rate_and_is_told_when_to_come_back() {
    let app = TestApp::with_config(HttpSettings {
        rate_limit_per_second: 5,
        rate_limit_burst: 5,
        ..Default::default()
    })
    .await;
    let (_, a) = key(&app, "rl-a", Scope::Read).await;
    let (_, b) = key(&app, "rl-b", Scope::Read).await;

    let started = Instant::now();
    let mut passed = 0usize;
    let limited = loop {
        let r = get(&app, &a).await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            break r;
        }
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        passed += 1;
        assert!(passed < 50, "no 429 after {passed} requests");
    };
    let elapsed = started.elapsed();
    assert_problem(&limited, 429, "rate_limited", "over the rate");
    let wait = retry_after(&limited);
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    // The burst, and no more than what the rate refilled meanwhile.
    let refilled = (elapsed.as_secs_f64() * 5.0).floor() as usize;
    assert!(
        (5..=5 + refilled).contains(&passed),
        "{passed} passed in {elapsed:?}"
    );
    if elapsed < Duration::from_millis(190) {
        assert_eq!(passed, 5, "the 6th quick request is limited");
    }

    // Another key is not affected.
    for i in 0..5 {
        let r = get(&app, &b).await;
        assert_eq!(r.status, StatusCode::OK, "key b, request {i}: {}", r.text);
    }
    // 401 and 403 come before 429: an unknown key is never told to slow down, and a limited
    // key is still told that it lacks the scope.
    let unknown = format!("wl_{}", "C".repeat(43));
    for _ in 0..10 {
        let r = get(&app, &unknown).await;
        assert_unauthenticated(&r, "unknown key");
    }
    let r = call(
        &app,
        Method::POST,
        "/v1/transfers",
        &a,
        &[],
        Some(&json!({"id": Uuid::new_v4(), "from": "x", "to": "y", "amount": 1})),
    )
    .await;
    assert_problem(&r, 403, "insufficient_scope", "a limited read key's POST");

    // After the time it was told, the key works again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let r = get(&app, &a).await;
    assert_eq!(r.status, StatusCode::OK, "after Retry-After: {}", r.text);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Saturated pool.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_saturated_pool_answers_503_promptly_and_recovers_without_a_restart() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(300))
        .connect(&app.database_url)
        .await
        .unwrap();
    let router = wallet_ledger::http::app(AppState::new(
        wallet_ledger::ledger::store::Store::new(pool.clone(), wallet_ledger::db::Engine::Plain),
        HttpSettings::default(),
    ));
    let auth = bearer(&app.token);
    let send = |method: Method, path: &str, body: Option<&Value>| {
        let req = request(method, path, &[("authorization", &auth)], body);
        let router = router.clone();
        async move {
            let started = Instant::now();
            let r = TestResponse::read(router.oneshot(req).await.unwrap()).await;
            (r, started.elapsed())
        }
    };
    let (r, _) = send(Method::GET, "/v1/accounts/w1", None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // The only connection is taken (and kept idle).
    let held = pool.acquire().await.unwrap();
    let payment = Uuid::new_v4();
    let pay = json!({"id": payment, "account": "w1", "amount": 100, "currency": "SAR", "provider": "test"});
    for (method, path, body) in [
        (Method::GET, "/v1/accounts/w1", None),
        (Method::POST, "/v1/payments", Some(&pay)),
        (Method::GET, "/readyz", None),
    ] {
        let (r, took) = send(method.clone(), path, body).await;
        assert_problem(
            &r,
            503,
            "unavailable",
            &format!("{method} {path} on a saturated pool"),
        );
        assert!(retry_after(&r) >= 1);
        assert!(
            took < Duration::from_secs(5),
            "{method} {path} answered in {took:?}"
        );
        assert!(
            !r.text.contains("pool") && !r.text.contains("timed out"),
            "no internals: {}",
            r.text
        );
    }
    let (r, _) = send(Method::GET, "/healthz", None).await;
    assert_eq!(r.status, StatusCode::OK, "liveness needs no connection");
    drop(held);

    // Released: the same router serves again, and the payment refused meanwhile was not made.
    let (r, _) = send(Method::GET, &format!("/v1/transactions/{payment}"), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let (r, _) = send(Method::POST, "/v1/payments", Some(&pay)).await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "the retry with the same id: {}",
        r.text
    );

    // The connection busy in a long transaction: the same.
    let busy = {
        let pool = pool.clone();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            started_tx.send(()).unwrap();
            sqlx::query("select pg_sleep(2)")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
        });
        started_rx.await.unwrap();
        task
    };
    let (r, took) = send(Method::GET, "/v1/accounts/w1", None).await;
    assert_problem(&r, 503, "unavailable", "a connection busy in pg_sleep");
    assert!(took < Duration::from_millis(1_800), "{took:?}");
    busy.await.unwrap();
    let (r, _) = send(Method::GET, "/v1/accounts/w1", None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["balances"]["posted"], json!(100));
    pool.close().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// A small HTTP/1.1 client, for the real binary.
// ---------------------------------------------------------------------------------------------

struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

async fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the server accepts connections");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("the server answered in time")
        .unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body);
    }
    RawResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size_line = String::from_utf8_lossy(&data[..eol]).into_owned();
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 || data.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[(eol + 4 + size).min(data.len())..];
    }
    out
}

/// `wallet-ledger api-key ...` against `database_url`, to its end.
async fn api_key_cli(database_url: &str, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(bin());
    command
        .arg("api-key")
        .args(args)
        .args(["--database-url", database_url])
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the CLI finished in time")
        .unwrap()
}

/// Keys made and revoked from the command line are audited, as the operator who ran it.
#[tokio::test]
async fn api_keys_made_and_revoked_from_the_cli_are_audited_under_the_os_user() {
    let app = TestApp::new().await;
    let mut command = Command::new(bin());
    command
        .args(["api-key", "create", "--owner", "ops", "--scope", "read"])
        .args(["--database-url", &app.database_url])
        .env("USER", "alice-ops")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null());
    let out = command.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: Uuid = sqlx::query_scalar("select id from api_keys where owner = 'ops'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let out = api_key_cli(&app.database_url, &["revoke", &id.to_string()]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(String, String)> =
        sqlx::query_as("select action, owner from audit_log where resource = $1 order by seq")
            .bind(id.to_string())
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        rows[0],
        ("api_key.create".to_owned(), "cli:alice-ops".to_owned())
    );
    assert_eq!(rows[1].0, "api_key.revoke");
    assert!(rows[1].1.starts_with("cli:"), "{rows:?}");
    app.finish().await;
}

/// A token made by `wallet-ledger api-key create`, checking that stdout is that token alone.
async fn cli_token(database_url: &str, owner: &str, scope: &str) -> String {
    let out = api_key_cli(
        database_url,
        &["create", "--owner", owner, "--scope", scope],
    )
    .await;
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = stdout
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("one line: {stdout:?}"));
    assert!(
        !token.contains(['\n', ' ']),
        "stdout is the token line alone: {stdout:?}"
    );
    assert!(token.starts_with("wl_") && token.len() == 46, "{token:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains(token),
        "the token is shown on stdout only"
    );
    token.to_owned()
}

/// Found while checking that the logs hold no body: a NUL character in `metadata` (valid JSON,
/// `"\u0000"`) passes validation and is refused by PostgreSQL's jsonb, answering 500.
#[tokio::test]
async fn a_nul_character_in_metadata_is_a_validation_error_not_a_500() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let before = app.row_counts().await;
    let bodies = [
        (
            "/v1/payments",
            json!({"id": Uuid::new_v4(), "account": "w1", "amount": 5, "currency": "SAR", "provider": "test", "metadata": {"memo": "a\u{0}b"}}),
        ),
        (
            "/v1/accounts",
            json!({"id": "w2", "currency": "SAR", "type": "wallet", "metadata": {"memo": "a\u{0}b"}}),
        ),
    ];
    let mut answers = Vec::new();
    for (path, body) in &bodies {
        let r = app.post(path, body).await;
        answers.push(format!("{path}: {} {}", r.status, r.code()));
    }
    assert_eq!(app.row_counts().await, before);
    // "\u0000" is valid JSON that PostgreSQL's jsonb cannot store: refused as invalid input,
    // never a 500.
    assert_eq!(
        answers,
        vec![
            "/v1/payments: 422 Unprocessable Entity validation_failed".to_owned(),
            "/v1/accounts: 422 Unprocessable Entity validation_failed".to_owned()
        ]
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Logs of the real binary.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_binarys_json_logs_hold_no_token_secret_or_body_and_carry_the_request_id() {
    let app = TestApp::new().await;
    let token = cli_token(&app.database_url, "t", "admin").await;
    // The webhook below points at a port nobody listens on, as an in-house receiver would
    // be configured: listed, since loopback is refused by default.
    let dead_port = free_port();
    let allowed = format!("127.0.0.1:{dead_port}");
    let server = serve(
        &app.database_url,
        &[("LOG_FORMAT", "json"), ("RUST_LOG", "debug,sqlx=debug")],
        &[
            "--outbox-interval-ms",
            "100",
            "--webhook-allowed-hosts",
            &allowed,
        ],
    )
    .await;
    let addr = server.addr.clone();
    let auth = bearer(&token);
    let request_id = format!("req-log-{}", Uuid::new_v4().simple());
    let secret = {
        use base64::Engine;
        format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([0x5au8; 32])
        )
    };
    let account_note = format!("note-{}", Uuid::new_v4().simple());
    let payment_memo = format!("memo-{}", Uuid::new_v4().simple());
    let h = |extra: &[(&'static str, String)]| -> Vec<(String, String)> {
        let mut all = vec![
            ("authorization".to_owned(), auth.clone()),
            ("x-request-id".to_owned(), request_id.clone()),
        ];
        all.extend(extra.iter().map(|(n, v)| (n.to_string(), v.clone())));
        all
    };
    let send =
        |method: &'static str, path: String, headers: Vec<(String, String)>, body: String| {
            let addr = addr.clone();
            async move {
                let headers: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                http(&addr, method, &path, &headers, &body).await
            }
        };

    let r = send("POST", "/v1/accounts".into(), h(&[]), json!({"id": "log-w1", "currency": "SAR", "type": "wallet", "metadata": {"note": account_note}}).to_string()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.header("x-request-id"),
        Some(request_id.as_str()),
        "the request id is echoed"
    );
    let r = send(
        "POST",
        "/v1/webhooks".into(),
        h(&[]),
        json!({"url": format!("http://127.0.0.1:{dead_port}/hook"), "secret": secret}).to_string(),
    )
    .await;
    assert_eq!(r.status, 400, "no id and no Idempotency-Key: {}", r.body);
    let r = send(
        "POST",
        "/v1/webhooks".into(),
        h(&[("idempotency-key", "hook-1".into())]),
        json!({"url": format!("http://127.0.0.1:{dead_port}/hook"), "secret": secret}).to_string(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let body = json!({"id": Uuid::new_v4(), "account": "log-w1", "amount": 2_500, "currency": "SAR", "provider": "test", "metadata": {"memo": payment_memo}}).to_string();
    let r = send("POST", "/v1/payments".into(), h(&[]), body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let keyed = json!({"account": "log-w1", "amount": 10, "currency": "SAR", "provider": "test", "metadata": {"memo": payment_memo}}).to_string();
    let r = send(
        "POST",
        "/v1/payments".into(),
        h(&[("idempotency-key", "log-order-1".into())]),
        keyed.clone(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["id"], json!(derived_id("t", "log-order-1")));
    let r = send(
        "POST",
        "/v1/payments".into(),
        h(&[("idempotency-key", "log-order-1".into())]),
        keyed,
    )
    .await;
    assert_eq!(
        (r.status, r.header("idempotent-replayed")),
        (200, Some("true")),
        "{}",
        r.body
    );
    let r = send("GET", "/v1/accounts/log-w1".into(), h(&[]), String::new()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["balances"]["posted"], json!(2_510));
    assert_eq!(r.header("x-request-id"), Some(request_id.as_str()));
    let fake = format!("wl_{}", "D".repeat(43));
    let r = send(
        "GET",
        "/v1/accounts/log-w1".into(),
        vec![("authorization".into(), bearer(&fake))],
        String::new(),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    // Malformed JSON that echoes a secret-looking value: the 400 is not logged with its body.
    let r = send(
        "POST",
        "/v1/payments".into(),
        h(&[]),
        format!("{{\"metadata\": {{\"memo\": \"{payment_memo}-broken\"}}, "),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // A body the database refuses (a NUL in metadata): whatever the answer, the database's
    // error, logged, must not carry the body's text.
    let nul = json!({"id": Uuid::new_v4(), "account": "log-w1", "amount": 1, "currency": "SAR", "provider": "test", "metadata": {"memo": format!("{payment_memo}-nul\u{0}")}});
    let r = send("POST", "/v1/payments".into(), h(&[]), nul.to_string()).await;
    assert!(!r.body.contains(&payment_memo), "{}", r.body);

    // Let the dispatcher sign and try the deliveries (the receiver is down).
    let tried = eventually(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>("select count(*) from delivery_attempts")
            .fetch_one(&app.pool)
            .await
            .unwrap()
            > 0
    })
    .await;
    assert!(tried, "the dispatcher tried a delivery");

    let (status, log) = server.stop().await;
    assert!(
        status.success(),
        "a graceful stop exits 0: {status:?}\n{log}"
    );
    let secret_bytes = secret.trim_start_matches("whsec_");
    for (what, needle) in [
        ("the token", token.as_str()),
        ("the token's random part", token.trim_start_matches("wl_")),
        ("the unknown token", fake.as_str()),
        ("the webhook secret", secret.as_str()),
        ("the webhook secret's bytes", secret_bytes),
        ("the account's metadata", account_note.as_str()),
        ("the payment's metadata", payment_memo.as_str()),
    ] {
        assert!(!log.contains(needle), "the log holds {what}");
    }
    let mut lines = 0;
    let mut messages = Vec::new();
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if let Some(message) = parsed["fields"]["message"].as_str() {
            messages.push(message.to_owned());
        }
        lines += 1;
    }
    assert!(lines > 10, "a debug log has lines: {lines}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("stopped") && m.contains("pool closed")),
        "the log says it stopped gracefully: {messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("SIGTERM")),
        "{messages:?}"
    );
    assert!(log.contains(&request_id), "the request id is in the log");
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Metrics.
// ---------------------------------------------------------------------------------------------

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut end = after.len();
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(name.trim_start_matches(',').trim().to_owned(), value);
        rest = &after[(end + 1).min(after.len())..];
    }
    labels
}

/// Every sample of `name` in a Prometheus text: its labels and its value.
fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = if let Some(rest) = rest.strip_prefix('{') {
                let end = rest.rfind('}')?;
                (parse_labels(&rest[..end]), &rest[end + 1..])
            } else if rest.starts_with(' ') {
                (BTreeMap::new(), rest)
            } else {
                return None;
            };
            Some((labels, value.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples of `name` that have all of `labels`.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text, name)
        .into_iter()
        .filter(|(have, _)| {
            labels
                .iter()
                .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, value)| value)
        .sum()
}

const REQUESTS: &str = "wallet_ledger_http_requests_total";

/// The known set of requests: 3 account reads, 2 transfers, 1 unauthenticated transfer, 1
/// transfer by a read key. `send(method, path, token, body)`.
fn known_set() -> Vec<(
    &'static str,
    (&'static str, &'static str, &'static str),
    f64,
)> {
    vec![
        ("3 account reads", ("GET", "/v1/accounts/{id}", "200"), 3.0),
        ("2 transfers", ("POST", "/v1/transfers", "201"), 2.0),
        (
            "1 unauthenticated transfer",
            ("POST", "/v1/transfers", "401"),
            1.0,
        ),
        (
            "1 transfer by a read key",
            ("POST", "/v1/transfers", "403"),
            1.0,
        ),
    ]
}

#[tokio::test]
async fn metrics_count_requests_by_route_and_status_and_show_latency_and_the_pool() {
    let app = TestApp::new().await;
    app.create_wallet("m1").await;
    app.create_wallet("m2").await;
    app.fund("m1", 1_000).await;
    let (_, read) = key(&app, "m", Scope::Read).await;
    let scrape = || async {
        let r = app
            .send_as_is(request(Method::GET, "/metrics", &[], None))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert!(
            r.content_type().starts_with("text/plain"),
            "{}",
            r.content_type()
        );
        r.text
    };
    let before = scrape().await;
    for _ in 0..3 {
        assert_eq!(app.get("/v1/accounts/m1").await.status, StatusCode::OK);
    }
    for _ in 0..2 {
        assert_eq!(
            app.transfer(Uuid::new_v4(), "m1", "m2", 1).await.status,
            StatusCode::CREATED
        );
    }
    let transfer = json!({"id": Uuid::new_v4(), "from": "m1", "to": "m2", "amount": 1});
    let r = app
        .send_as_is(request(Method::POST, "/v1/transfers", &[], Some(&transfer)))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = call(
        &app,
        Method::POST,
        "/v1/transfers",
        &read,
        &[],
        Some(&transfer),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let after = scrape().await;

    // Other tests of this process share the recorder: their requests can only add.
    let mut short = Vec::new();
    for (what, (method, route, status), n) in known_set() {
        let labels = [("method", method), ("route", route), ("status", status)];
        let delta = metric(&after, REQUESTS, &labels) - metric(&before, REQUESTS, &labels);
        if delta < n {
            short.push(format!("{what}: {method} {route} {status} rose by {delta}"));
        }
    }
    assert!(
        after.contains("wallet_ledger_http_request_duration_seconds_bucket{"),
        "a latency histogram"
    );
    assert!(
        metric(
            &after,
            "wallet_ledger_http_request_duration_seconds_count",
            &[("method", "POST"), ("route", "/v1/transfers")]
        ) >= 2.0
    );
    assert!(
        !samples(&after, "wallet_ledger_db_pool_connections").is_empty(),
        "pool gauges"
    );
    assert!(metric(&after, "wallet_ledger_db_pool_max_connections", &[]) >= 1.0);
    assert!(
        !samples(&after, "wallet_ledger_outbox_pending_deliveries").is_empty(),
        "outbox gauges"
    );
    assert!(
        !samples(&after, "wallet_ledger_outbox_dead_deliveries").is_empty(),
        "outbox gauges"
    );
    // Routes are patterns, never raw paths with ids.
    assert!(!after.contains("/v1/accounts/m1"), "a raw path as a label");
    // Refusals by authentication, scope or rate are counted like any answer.
    assert!(short.is_empty(), "requests not counted: {short:?}");
    app.finish().await;
}

#[tokio::test]
async fn a_served_process_counts_exactly_the_requests_it_answered() {
    let app = TestApp::new().await;
    app.create_wallet("m1").await;
    app.create_wallet("m2").await;
    app.fund("m1", 1_000).await;
    let (_, read) = key(&app, "m", Scope::Read).await;
    let (_, limited) = key(&app, "m-limited", Scope::Read).await;
    let server = serve(
        &app.database_url,
        &[],
        &[
            "--no-outbox",
            "--rate-limit-per-second",
            "1",
            "--rate-limit-burst",
            "10",
        ],
    )
    .await;
    let addr = server.addr.clone();
    let scrape = || {
        let addr = addr.clone();
        async move {
            let r = http(&addr, "GET", "/metrics", &[], "").await;
            assert_eq!(r.status, 200, "{}", r.body);
            r.body
        }
    };
    let admin = bearer(&app.token);
    let read = bearer(&read);
    let before = scrape().await;
    for _ in 0..3 {
        let r = http(
            &addr,
            "GET",
            "/v1/accounts/m1",
            &[("authorization", &admin)],
            "",
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let transfer =
        || json!({"id": Uuid::new_v4(), "from": "m1", "to": "m2", "amount": 1}).to_string();
    for _ in 0..2 {
        let r = http(
            &addr,
            "POST",
            "/v1/transfers",
            &[("authorization", &admin)],
            &transfer(),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = http(&addr, "POST", "/v1/transfers", &[], &transfer()).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let r = http(
        &addr,
        "POST",
        "/v1/transfers",
        &[("authorization", &read)],
        &transfer(),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // A path no route matches, with a valid key: 404.
    let r = http(
        &addr,
        "GET",
        "/v1/nothing-here",
        &[("authorization", &admin)],
        "",
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    // Another key reads transactions until it is limited.
    let limited = bearer(&limited);
    let mut passed = 0.0;
    loop {
        let r = http(
            &addr,
            "GET",
            "/v1/transactions",
            &[("authorization", &limited)],
            "",
        )
        .await;
        if r.status == 429 {
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        passed += 1.0;
        assert!(passed < 60.0, "never limited");
    }
    let after = scrape().await;
    let (status, log) = server.stop().await;
    assert!(status.success(), "{log}");

    let mut wrong = Vec::new();
    for (what, (method, route, status), n) in known_set() {
        let labels = [("method", method), ("route", route), ("status", status)];
        let delta = metric(&after, REQUESTS, &labels) - metric(&before, REQUESTS, &labels);
        if delta != n {
            wrong.push(format!(
                "{what}: {method} {route} {status} rose by {delta}, not {n}"
            ));
        }
    }
    let labels = [
        ("method", "GET"),
        ("route", "/v1/transactions"),
        ("status", "200"),
    ];
    let delta = metric(&after, REQUESTS, &labels) - metric(&before, REQUESTS, &labels);
    if delta != passed {
        wrong.push(format!(
            "GET /v1/transactions 200 rose by {delta}, not {passed}"
        ));
    }
    // Whatever route label a refusal or an unmatched path gets, it is counted once, by its
    // status.
    for (status, n) in [("401", 1.0), ("403", 1.0), ("404", 1.0), ("429", 1.0)] {
        let delta = metric(&after, REQUESTS, &[("status", status)])
            - metric(&before, REQUESTS, &[("status", status)]);
        if delta != n {
            wrong.push(format!(
                "all routes, status {status}: rose by {delta}, not {n}"
            ));
        }
    }
    // Every answer is counted: refusals (401/403/429) under their route, a path no route
    // matches under "unmatched".
    assert!(wrong.is_empty(), "{wrong:#?}\n{after}");
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 9. `wallet-ledger api-key list | revoke`.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn api_key_list_shows_no_token_and_revoke_takes_effect_at_once() {
    let app = TestApp::new().await;
    let url = app.database_url.clone();
    let reader = cli_token(&url, "cli-a", "read").await;
    let writer = cli_token(&url, "cli-b", "write").await;
    // Only the token's SHA-256 is stored.
    for token in [&reader, &writer, &app.token] {
        let (hashed, plain): (i64, i64) = sqlx::query_as(
            "select count(*) filter (where token_sha256 = sha256(convert_to($1, 'UTF8'))),
                    count(*) filter (where k::text like '%' || $1 || '%')
             from api_keys k",
        )
        .bind(token)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        assert_eq!((hashed, plain), (1, 0));
    }
    let r = call(&app, Method::GET, "/v1/transactions", &reader, &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    let list = |url: String| async move {
        let out = api_key_cli(&url, &["list"]).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = list(url.clone()).await;
    for token in [&reader, &writer, &app.token] {
        assert!(!listed.contains(token.as_str()), "list shows a token");
        assert!(
            !listed.contains(token.trim_start_matches("wl_")),
            "list shows a token"
        );
    }
    let keys: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(keys.len(), 3, "{listed}");
    for k in &keys {
        let fields: BTreeSet<&str> = k.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            BTreeSet::from(["id", "owner", "scope", "created_at", "revoked_at"]),
            "{k}"
        );
        assert_eq!(k["revoked_at"], Value::Null);
    }
    let owners: BTreeSet<(String, String)> = keys
        .iter()
        .map(|k| {
            (
                k["owner"].as_str().unwrap().to_owned(),
                k["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        BTreeSet::from([
            ("cli-a".to_owned(), "read".to_owned()),
            ("cli-b".to_owned(), "write".to_owned()),
            ("default".to_owned(), "admin".to_owned())
        ])
    );
    let reader_id = keys
        .iter()
        .find(|k| k["owner"] == "cli-a")
        .and_then(|k| k["id"].as_str())
        .unwrap()
        .to_owned();

    let out = api_key_cli(&url, &["revoke", &reader_id]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = call(&app, Method::GET, "/v1/transactions", &reader, &[], None).await;
    assert_unauthenticated(&r, "a revoked key");
    let r = call(
        &app,
        Method::POST,
        "/v1/transfers",
        &writer,
        &[],
        Some(&json!({"id": Uuid::new_v4(), "from": "x", "to": "y", "amount": 1})),
    )
    .await;
    assert_eq!(
        r.status.as_u16(),
        422,
        "another key still works: {}",
        r.text
    );

    let listed = list(url.clone()).await;
    let revoked: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|k| !k["revoked_at"].is_null())
        .collect();
    assert_eq!(revoked.len(), 1, "{listed}");
    assert_eq!(revoked[0]["id"], json!(reader_id));

    // A repeat is a no-op; an unknown id and a bad owner are errors, with nothing on stdout.
    let out = api_key_cli(&url, &["revoke", &reader_id]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = api_key_cli(&url, &["revoke", &Uuid::new_v4().to_string()]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [
        &["create", "--owner", "bad owner", "--scope", "read"][..],
        &["create", "--owner", "ok", "--scope", "root"][..],
    ] {
        let out = api_key_cli(&url, args).await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(list(url).await.lines().count(), 3);
    app.finish().await;
}
