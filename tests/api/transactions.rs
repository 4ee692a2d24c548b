//! Transactions: multi-leg posting, reads, filters and pagination.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::json;
use uuid::Uuid;

#[tokio::test]
async fn a_multi_leg_transaction_posts_every_leg_atomically() {
    let app = TestApp::new().await;
    for w in ["buyer", "payee"] {
        app.create_wallet(w).await;
    }
    app.create_account("fees", "SAR", "system").await;
    app.fund("buyer", 10_000).await;
    let id = Uuid::new_v4();
    let r = app
        .post(
            "/v1/transactions",
            &json!({"id": id, "external_ref": "order-9", "metadata": {"order": 9}, "entries": [
                {"account": "buyer", "amount": -5_000},
                {"account": "payee", "amount": 4_850},
                {"account": "fees", "amount": 150}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["kind"], "transaction");
    assert_eq!(r.body["currency"], "SAR");
    assert_eq!(r.body["posted_at"], r.body["created_at"]);
    assert_eq!(
        (
            app.posted_balance("buyer").await,
            app.posted_balance("payee").await
        ),
        (5_000, 4_850)
    );
    assert_eq!(app.posted_balance("fees").await, 150);

    let got = app.get(&format!("/v1/transactions/{id}")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["entries"], r.body["entries"]);
    assert_eq!(got.body["external_ref"], "order-9");

    // One leg refused refuses them all: nothing moves.
    let r = app
        .post(
            "/v1/transactions",
            &json!({"id": Uuid::new_v4(), "entries": [
                {"account": "buyer", "amount": -5_001}, {"account": "payee", "amount": 5_001}]}),
        )
        .await;
    assert_eq!(r.code(), "insufficient_funds");
    assert_eq!(app.posted_balance("payee").await, 4_850);
    app.finish().await;
}

#[tokio::test]
async fn transactions_filter_by_account_status_and_external_ref_with_cursors() {
    let app = TestApp::new().await;
    for w in ["a", "b", "c"] {
        app.create_wallet(w).await;
    }
    app.fund("a", 1_000).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let id = Uuid::new_v4();
        assert_eq!(
            app.transfer(id, "a", "b", 100).await.status,
            StatusCode::CREATED
        );
        ids.push(id);
    }
    let refused = Uuid::new_v4();
    assert_eq!(
        app.transfer(refused, "c", "b", 1).await.code(),
        "insufficient_funds"
    );
    app.post(
        "/v1/payments",
        &json!({"id": Uuid::new_v4(), "account": "c", "amount": 5, "currency": "SAR",
        "provider": "test", "external_ref": "psp-123"}),
    )
    .await;

    // Newest first, two by two.
    let mut seen = Vec::new();
    let mut path = "/v1/transactions?account=a&status=posted&limit=2".to_owned();
    loop {
        let page = app.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        seen.extend(
            page.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => {
                path = format!("/v1/transactions?account=a&status=posted&limit=2&cursor={c}")
            }
            None => break,
        }
    }
    let mut expected: Vec<String> = ids.iter().rev().map(Uuid::to_string).collect();
    expected.push(seen.last().unwrap().clone()); // the funding payment came first
    assert_eq!(seen, expected);

    let rejected = app.get("/v1/transactions?status=rejected").await;
    assert_eq!(rejected.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(rejected.body["data"][0]["id"], refused.to_string());
    let by_ref = app.get("/v1/transactions?external_ref=psp-123").await;
    assert_eq!(by_ref.body["data"][0]["kind"], "payment");
    assert_eq!(by_ref.body["data"].as_array().unwrap().len(), 1);
    let all = app.get("/v1/transactions").await;
    assert_eq!(all.body["data"].as_array().unwrap().len(), 8);
    app.finish().await;
}

#[tokio::test]
async fn a_database_outage_answers_503_with_retry_after_and_says_nothing_of_internals() {
    // A pool whose server never answers: every request fails to get a connection.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(300))
        .connect_lazy("postgres://postgres@127.0.0.1:1/nowhere")
        .unwrap();
    let state = wallet_ledger::http::AppState::new(
        wallet_ledger::ledger::store::Store::new(pool, wallet_ledger::db::Engine::Plain),
        wallet_ledger::http::HttpSettings::default(),
    );
    let router = wallet_ledger::http::app(state);
    let transfer = json!({"id": Uuid::new_v4(), "from": "a", "to": "b", "amount": 1}).to_string();
    for (method, path, body) in [
        ("POST", "/v1/transfers", transfer.as_str()),
        ("GET", "/v1/accounts/a", ""),
        ("GET", "/readyz", ""),
    ] {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            // Checking the key needs the database too: it answers 503 like the rest.
            .header("authorization", "Bearer wl_any")
            .body(axum::body::Body::from(body.to_owned()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(router.clone(), request)
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}"
        );
        assert_eq!(response.headers()["retry-after"], "1");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let bytes = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["code"], "unavailable");
        let text = body.to_string();
        assert!(
            !text.contains("127.0.0.1") && !text.contains("pool"),
            "opaque: {text}"
        );
    }
}

#[tokio::test]
async fn a_clearing_account_is_created_by_the_first_posted_payment_only() {
    let app = TestApp::new().await;
    app.create_wallet("wl").await;
    app.create_wallet("gone").await;
    app.post_empty("/v1/accounts/gone/close").await;
    let payment = |wallet: &str, provider: &str| json!({"id": Uuid::new_v4(), "account": wallet, "amount": 100, "currency": "SAR", "provider": provider});
    let before = app.row_counts().await;
    let refused = app.post("/v1/payments", &payment("gone", "psp1")).await;
    assert_eq!(refused.code(), "account_closed");
    let after = app.row_counts().await;
    assert_eq!(
        (after.0, after.1, after.2),
        (before.0, before.1 + 1, before.2),
        "a refusal writes only its refusal record"
    );
    assert_eq!(
        app.get("/v1/accounts/clearing:psp1:SAR").await.status,
        StatusCode::NOT_FOUND
    );

    assert_eq!(
        app.post("/v1/payments", &payment("wl", "psp1"))
            .await
            .status,
        StatusCode::CREATED
    );
    let clearing = app.get("/v1/accounts/clearing:psp1:SAR").await;
    assert_eq!(
        (&clearing.body["type"], &clearing.body["balances"]["posted"]),
        (&json!("system"), &json!(-100))
    );

    // A clearing account id cannot be created as a wallet (`reserved_id`), and one left by
    // rows from before that rule is never debited as a clearing account.
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "clearing:psp2:SAR", "currency": "SAR", "type": "wallet"}),
        )
        .await;
    assert_eq!(r.body["errors"][0]["code"], "reserved_id", "{}", r.text);
    sqlx::query(
        "insert into accounts (id, currency, type, creation_request, creation_response,
                               created_at, updated_at)
         values ('clearing:psp2:SAR', 'SAR', 'wallet', '{}', '{}', now(), now())",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let r = app.post("/v1/payments", &payment("wl", "psp2")).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed")
    );
    assert_eq!(r.body["errors"][0]["code"], "not_a_system_account");
    app.finish().await;
}
