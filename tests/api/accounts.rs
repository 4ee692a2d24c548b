//! Accounts: creation, reads, metadata versions, lifecycle transitions, entries.

use super::common::{TestApp, assert_problem};
use axum::http::StatusCode;
use serde_json::json;
use uuid::Uuid;

#[tokio::test]
async fn an_account_reads_back_with_zero_balances_and_decimal_siblings() {
    let app = TestApp::new().await;
    let created = app
        .post("/v1/accounts", &json!({"id": "user:42@shop", "currency": "JPY", "type": "wallet", "metadata": {"k": [1, 2]}}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let got = app.get("/v1/accounts/user:42@shop").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["type"], "wallet");
    assert_eq!(got.body["status"], "active");
    assert_eq!(got.body["metadata"], json!({"k": [1, 2]}));
    assert_eq!(
        got.body["balances"],
        json!({"posted": 0, "posted_decimal": "0", "pending_in": 0, "pending_in_decimal": "0",
               "pending_out": 0, "pending_out_decimal": "0", "available": 0, "available_decimal": "0"})
    );
    let missing = app.get("/v1/accounts/nobody").await;
    assert_eq!(
        (missing.status, missing.code()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    app.finish().await;
}

#[tokio::test]
async fn metadata_changes_only_with_a_newer_version() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let patch = |version: i64, tag: &str| json!({"version": version, "metadata": {"tag": tag}});
    let r = app
        .raw(
            axum::http::Method::PATCH,
            "/v1/accounts/w",
            &[("content-type", "application/json")],
            patch(2, "b").to_string(),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["version"], &r.body["metadata"]["tag"]),
        (StatusCode::OK, &json!(2), &json!("b"))
    );
    // An older or equal version is a no-op answering the current account (a late redelivery).
    for stale in [1, 2] {
        let r = app
            .raw(
                axum::http::Method::PATCH,
                "/v1/accounts/w",
                &[("content-type", "application/json")],
                patch(stale, "old").to_string(),
            )
            .await;
        assert_eq!(
            (r.status, &r.body["metadata"]["tag"]),
            (StatusCode::OK, &json!("b"))
        );
    }
    let r = app
        .raw(
            axum::http::Method::PATCH,
            "/v1/accounts/nope",
            &[("content-type", "application/json")],
            patch(3, "x").to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

#[tokio::test]
async fn lifecycle_transitions_are_conditional_and_repeatable() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.create_wallet("rich").await;
    app.fund("rich", 100).await;

    assert_eq!(
        app.post_empty("/v1/accounts/w/freeze").await.body["status"],
        "frozen"
    );
    assert_eq!(
        app.post_empty("/v1/accounts/w/freeze").await.status,
        StatusCode::OK,
        "a repeat is answered, not refused"
    );
    assert_eq!(
        app.post_empty("/v1/accounts/w/unfreeze").await.body["status"],
        "active"
    );
    assert_eq!(
        app.post_empty("/v1/accounts/w/unfreeze").await.status,
        StatusCode::OK
    );

    let r = app.post_empty("/v1/accounts/rich/close").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "account_not_empty")
    );
    assert_eq!(app.get("/v1/accounts/rich").await.body["status"], "active");

    assert_eq!(
        app.post_empty("/v1/accounts/w/close").await.body["status"],
        "closed"
    );
    assert_eq!(
        app.post_empty("/v1/accounts/w/close").await.status,
        StatusCode::OK
    );
    for action in ["freeze", "unfreeze"] {
        let r = app.post_empty(&format!("/v1/accounts/w/{action}")).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::CONFLICT, "invalid_transition")
        );
        assert_eq!(
            r.body["current_status"], "closed",
            "names the current status"
        );
    }
    assert_eq!(
        app.post_empty("/v1/accounts/ghost/freeze").await.status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}

#[tokio::test]
async fn entries_list_newest_first_with_running_balances_and_cursors() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.create_wallet("x").await;
    for amount in [100, 200, 300] {
        app.fund("w", amount).await;
    }
    app.transfer(Uuid::new_v4(), "w", "x", 50).await;

    let page1 = app.get("/v1/accounts/w/entries?limit=3").await;
    assert_eq!(page1.status, StatusCode::OK, "{}", page1.text);
    let data = page1.body["data"].as_array().unwrap();
    let running: Vec<i64> = data
        .iter()
        .map(|e| e["balance_after"].as_i64().unwrap())
        .collect();
    let sequences: Vec<i64> = data
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    assert_eq!(running, [550, 600, 300]);
    assert_eq!(sequences, [4, 3, 2]);
    assert_eq!(data[0]["amount_decimal"], "-0.50");
    let cursor = page1.body["next_cursor"]
        .as_str()
        .expect("more entries follow");

    let page2 = app
        .get(&format!("/v1/accounts/w/entries?limit=3&cursor={cursor}"))
        .await;
    let data = page2.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["balance_after"], 100);
    assert!(page2.body["next_cursor"].is_null());

    // System accounts have entries but no chain.
    let clearing = app.get("/v1/accounts/clearing:test:SAR/entries").await;
    assert_eq!(clearing.body["data"].as_array().unwrap().len(), 3);
    assert!(clearing.body["data"][0]["sequence"].is_null());
    assert_eq!(
        app.get("/v1/accounts/nobody/entries").await.status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}

#[tokio::test]
async fn metadata_holding_the_largest_floats_reads_back_unchanged() {
    let app = TestApp::new().await;
    let body = r#"{"id": "floaty", "currency": "SAR", "type": "wallet",
                   "metadata": {"max": 1.7976931348623157e308, "min": -1.7976931348623157e308,
                                "tiny": 1.7976931348623157e-308}}"#;
    let created = app
        .raw(
            axum::http::Method::POST,
            "/v1/accounts",
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    // PostgreSQL gives such numbers back with hundreds of digits: they must parse exactly.
    let read = app.get("/v1/accounts/floaty").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.body["metadata"]["max"].as_f64(), Some(f64::MAX));
    assert_eq!(read.body["metadata"]["min"].as_f64(), Some(f64::MIN));
    assert_eq!(
        read.body["metadata"]["tiny"].as_f64(),
        Some(1.797_693_134_862_315_7e-308)
    );
    app.finish().await;
}

/// Ids in the system namespace `clearing:` belong to the ledger (issue 34, item 5): only the
/// provider clearing account itself (a system account in the currency its id ends with) may be
/// created there; anything else is 422 `reserved_id`, never a 500 when payments through that
/// provider race the create.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ids_in_the_clearing_namespace_are_reserved_for_clearing_accounts() {
    let app = std::sync::Arc::new(TestApp::new().await);
    let refused = [
        json!({"id": "clearing:p1:SAR", "currency": "SAR", "type": "wallet"}),
        json!({"id": "clearing:p1:SAR", "currency": "USD", "type": "system"}),
        json!({"id": "clearing:p1", "currency": "SAR", "type": "system"}),
    ];
    for body in &refused {
        let r = app.post("/v1/accounts", body).await;
        assert_problem(&r, 422, "validation_failed", &body.to_string());
        assert_eq!(r.body["errors"][0]["field"], "/id", "{}", r.text);
        assert_eq!(r.body["errors"][0]["code"], "reserved_id", "{}", r.text);
    }
    // The clearing account itself may be created ahead of its first payment.
    app.create_account("clearing:p1:SAR", "SAR", "system").await;
    app.create_wallet("w").await;
    // Payments through new providers race wallet creates of their clearing ids: no 5xx.
    for round in 0..20 {
        let provider = format!("race{round}");
        let pay = {
            let app = app.clone();
            let body = json!({"id": Uuid::new_v4(), "account": "w", "amount": 1, "currency": "SAR", "provider": provider});
            tokio::spawn(async move { app.post("/v1/payments", &body).await })
        };
        let create = {
            let app = app.clone();
            let body = json!({"id": format!("clearing:{provider}:SAR"), "currency": "SAR", "type": "wallet"});
            tokio::spawn(async move { app.post("/v1/accounts", &body).await })
        };
        let (pay, create) = (pay.await.unwrap(), create.await.unwrap());
        assert_eq!(pay.status, StatusCode::CREATED, "{}", pay.text);
        assert_eq!(
            create.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            create.text
        );
    }
    assert_eq!(app.posted_balance("w").await, 20);
    std::sync::Arc::into_inner(app).unwrap().finish().await;
}
