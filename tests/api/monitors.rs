//! Balance monitors: added once per id, listed, read with their state and deleted through the
//! API; evaluated by the posting transaction (and a hold's capture or void) under the wallet's
//! lock, so 50 parallel debits crossing a threshold fire it exactly once, naming the crossing
//! transaction, with the balances its entry's running balance shows. Wallets `mon-a` and
//! `mon-b` sit on different Citus workers.

use super::common::{TestApp, assert_problem};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

const TRIGGERED: &str = "balance.monitor_triggered";

/// `mon-a` funded with `balance`, and `mon-b`, its payee.
async fn two_wallets(app: &TestApp, balance: i64) {
    app.create_wallet("mon-a").await;
    app.create_wallet("mon-b").await;
    app.fund("mon-a", balance).await;
}

async fn add_monitor(app: &TestApp, account: &str, body: Value) -> super::common::TestResponse {
    app.post(&format!("/v1/accounts/{account}/monitors"), &body)
        .await
}

/// A monitor of `mon-a`'s `field` below `value`, added; its id.
async fn below(app: &TestApp, field: &str, value: i64) -> Uuid {
    let id = Uuid::new_v4();
    let body = json!({"id": id, "field": field, "operator": "lt", "value": value});
    let r = add_monitor(app, "mon-a", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

/// Balances as an event or a monitor shows them, without their `_decimal` forms.
fn plain(balances: &Value) -> Value {
    let keep = ["posted", "pending_in", "pending_out", "available"];
    keep.iter()
        .map(|k| (k.to_string(), balances[k].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

async fn delete(app: &TestApp, path: &str) -> super::common::TestResponse {
    app.raw(Method::DELETE, path, &[], Body::empty()).await
}

/// The `balance.monitor_triggered` events, oldest first: (transaction id, data).
async fn firings(app: &TestApp) -> Vec<(Uuid, Value)> {
    sqlx::query_as("select transaction_id, data from outbox_events where type = $1 order by seq")
        .bind(TRIGGERED)
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

async fn monitor_rows(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from account_monitors")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_monitor_is_added_once_listed_read_and_deleted() {
    let app = TestApp::new().await;
    two_wallets(&app, 100).await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "field": "available", "operator": "lte", "value": 5000});
    let r = add_monitor(&app, "mon-a", body.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        (&r.body["account_id"], &r.body["field"], &r.body["operator"]),
        (&json!("mon-a"), &json!("available"), &json!("lte"))
    );
    assert_eq!(
        (
            &r.body["value"],
            &r.body["value_decimal"],
            &r.body["trigger_count"]
        ),
        (&json!(5000), &json!("50.00"), &json!(0))
    );
    let again = add_monitor(&app, "mon-a", body.clone()).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    assert_eq!(again.body, r.body);
    let other = json!({"id": id, "field": "available", "operator": "lte", "value": 5001});
    let r2 = add_monitor(&app, "mon-a", other).await;
    assert_problem(&r2, 422, "idempotency_mismatch", "another value");
    assert_eq!(r2.body["differing_fields"], json!(["/value"]));
    let elsewhere = add_monitor(&app, "mon-b", body).await;
    assert_problem(&elsewhere, 422, "idempotency_mismatch", "another account");

    let list = app.get("/v1/accounts/mon-a/monitors").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    // 100 available is at or below 5000: the condition holds now.
    let path = format!("/v1/accounts/mon-a/monitors/{id}");
    let one = app.get(&path).await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    assert_eq!(
        (&one.body["state"], &one.body["last_triggered"]),
        (&json!("triggered"), &Value::Null)
    );
    let deleted = delete(&app, &path).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert!(deleted.body["deleted_at"].is_string());
    let repeat = delete(&app, &path).await;
    assert_eq!(
        (repeat.status, &repeat.body),
        (StatusCode::OK, &deleted.body)
    );
    let list = app.get("/v1/accounts/mon-a/monitors").await;
    assert_eq!(list.body["data"], json!([]));
    let wrong_account = delete(&app, &format!("/v1/accounts/mon-b/monitors/{id}")).await;
    assert_problem(
        &wrong_account,
        404,
        "not_found",
        "another account's monitor",
    );
    let unknown = app
        .get(&format!("/v1/accounts/mon-a/monitors/{}", Uuid::new_v4()))
        .await;
    assert_problem(&unknown, 404, "not_found", "an unknown monitor");
    // Deleted, it fires no more.
    app.transfer(Uuid::new_v4(), "mon-a", "mon-b", 100).await;
    assert!(firings(&app).await.is_empty());
    app.finish().await;
}

#[tokio::test]
async fn bad_monitors_are_refused_and_write_nothing() {
    let app = TestApp::new().await;
    two_wallets(&app, 100).await;
    let cases = [
        (
            json!({"field": "balance", "operator": "lt", "value": 1}),
            "/field",
            "invalid_type",
        ),
        (
            json!({"field": "posted", "operator": "<", "value": 1}),
            "/operator",
            "invalid_type",
        ),
        (
            json!({"field": "posted", "operator": "lt", "value": 9_007_199_254_740_992_i64}),
            "/value",
            "range",
        ),
        (
            json!({"field": "posted", "operator": "lt", "value": -9_007_199_254_740_992_i64}),
            "/value",
            "range",
        ),
        (
            json!({"field": "posted", "operator": "lt", "value": 1, "every": "day"}),
            "/every",
            "unknown_field",
        ),
    ];
    for (mut body, field, code) in cases {
        body["id"] = json!(Uuid::new_v4());
        let r = add_monitor(&app, "mon-a", body.clone()).await;
        assert_problem(&r, 422, "validation_failed", &body.to_string());
        let errors = r.body["errors"].as_array().unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e["field"] == field && e["code"] == code),
            "{body}: {}",
            r.text
        );
    }
    assert_eq!(monitor_rows(&app).await, 0);
    let flagged: bool = sqlx::query_scalar("select has_monitors from accounts where id = 'mon-a'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(!flagged, "a refused monitor marks nothing");
    let body = json!({"id": Uuid::new_v4(), "field": "posted", "operator": "lt", "value": 1});
    let r = add_monitor(&app, "nobody", body).await;
    assert_problem(&r, 404, "not_found", "an unknown account");
    let r = app.get("/v1/accounts/nobody/monitors").await;
    assert_problem(&r, 404, "not_found", "an unknown account's list");
    assert_eq!(monitor_rows(&app).await, 0);
    // Nothing was added, so a transfer fires nothing (and spreads the test over both workers).
    let r = app.transfer(Uuid::new_v4(), "mon-a", "mon-b", 10).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert!(firings(&app).await.is_empty());
    app.finish().await;
}

/// The balance after `transaction` of `account`, from its entry's running balance.
async fn balance_after(app: &TestApp, transaction: Uuid, account: &str) -> (i64, i64) {
    sqlx::query_as(
        "select balance_after, amount from entries where transaction_id = $1 and account_id = $2",
    )
    .bind(transaction)
    .bind(account)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_debits_crossing_a_threshold_fire_it_once() {
    let app = Arc::new(TestApp::new().await);
    two_wallets(&app, 10_000).await;
    // 50 debits of 7 take 10,000 to 9,650: one of them takes posted below 9,800.
    let monitor = below(&app, "posted", 9_800).await;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let r = app.transfer(Uuid::new_v4(), "mon-a", "mon-b", 7).await;
                assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    let (transaction, data) = &fired[0];
    assert_eq!(data["monitor"]["id"], json!(monitor));
    assert_eq!(data["transaction_id"], json!(transaction));
    assert_eq!(data["account"]["id"], "mon-a");
    let (after, amount) = balance_after(&app, *transaction, "mon-a").await;
    assert_eq!(data["balances_after"]["posted"], json!(after));
    assert_eq!(data["balances_before"]["posted"], json!(after - amount));
    assert!(after < 9_800 && after - amount >= 9_800, "{data}");
    assert_eq!(data["balances_after"]["available"], json!(after));
    let one = app
        .get(&format!("/v1/accounts/mon-a/monitors/{monitor}"))
        .await;
    assert_eq!(
        (&one.body["state"], &one.body["trigger_count"]),
        (&json!("triggered"), &json!(1))
    );
    assert_eq!(
        one.body["last_triggered"]["transaction_id"],
        json!(transaction)
    );
    assert_eq!(
        one.body["last_triggered"]["balances_after"],
        data["balances_after"]
    );

    // Re-armed by a credit back above the line (no event), then fired again.
    let back = app.transfer(Uuid::new_v4(), "mon-b", "mon-a", 300).await;
    assert_eq!(back.status, StatusCode::CREATED, "{}", back.text);
    assert_eq!(firings(&app).await.len(), 1);
    let armed = app
        .get(&format!("/v1/accounts/mon-a/monitors/{monitor}"))
        .await;
    assert_eq!(armed.body["state"], "armed");
    let again = Uuid::new_v4();
    app.transfer(again, "mon-a", "mon-b", 200).await;
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 2, "{fired:#?}");
    assert_eq!(fired[1].0, again);
    let one = app
        .get(&format!("/v1/accounts/mon-a/monitors/{monitor}"))
        .await;
    assert_eq!(
        (
            &one.body["trigger_count"],
            &one.body["last_triggered"]["transaction_id"]
        ),
        (&json!(2), &json!(again))
    );
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_hold_crossing_available_fires_and_its_void_rearms() {
    let app = TestApp::new().await;
    two_wallets(&app, 1_000).await;
    let monitor = below(&app, "available", 500).await;
    let hold = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": hold, "from": "mon-a", "to": "mon-b", "amount": 600, "status": "pending", "expires_at": expires}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    assert_eq!(fired[0].0, hold);
    let data = &fired[0].1;
    assert_eq!(
        plain(&data["balances_before"]),
        json!({"posted": 1000, "pending_in": 0, "pending_out": 0, "available": 1000})
    );
    assert_eq!(
        plain(&data["balances_after"]),
        json!({"posted": 1000, "pending_in": 0, "pending_out": 600, "available": 400})
    );
    assert_eq!(data["balances_after"]["available_decimal"], "4.00");
    let path = format!("/v1/accounts/mon-a/monitors/{monitor}");
    assert_eq!(app.get(&path).await.body["state"], "triggered");
    let void = app
        .post_empty(&format!("/v1/transactions/{hold}/void"))
        .await;
    assert_eq!(void.status, StatusCode::OK, "{}", void.text);
    assert_eq!(
        firings(&app).await.len(),
        1,
        "a void that re-arms fires nothing"
    );
    assert_eq!(app.get(&path).await.body["state"], "armed");

    // A second hold fires again; its capture keeps it triggered (available stays 400).
    let second = Uuid::new_v4();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": second, "from": "mon-a", "to": "mon-b", "amount": 600, "status": "pending", "expires_at": expires}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let capture = app
        .post(
            &format!("/v1/transactions/{second}/post"),
            &json!({"amount": 100}),
        )
        .await;
    assert_eq!(capture.status, StatusCode::OK, "{}", capture.text);
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 2, "{fired:#?}");
    assert_eq!(fired[1].0, second);
    // The partial capture released the rest: available 900 re-armed it.
    assert_eq!(app.get(&path).await.body["state"], "armed");
    app.finish().await;
}

#[tokio::test]
async fn a_capture_crossing_posted_fires_with_its_entry() {
    let app = TestApp::new().await;
    two_wallets(&app, 1_000).await;
    let monitor = below(&app, "posted", 500).await;
    let hold = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    app.post(
        "/v1/transfers",
        &json!({"id": hold, "from": "mon-a", "to": "mon-b", "amount": 600, "status": "pending", "expires_at": expires}),
    )
    .await;
    assert!(
        firings(&app).await.is_empty(),
        "a hold leaves posted as it is"
    );
    let capture = app
        .post_empty(&format!("/v1/transactions/{hold}/post"))
        .await;
    assert_eq!(capture.status, StatusCode::OK, "{}", capture.text);
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    let (transaction, data) = &fired[0];
    assert_eq!(
        (*transaction, &data["monitor"]["id"]),
        (hold, &json!(monitor))
    );
    assert_eq!(
        plain(&data["balances_before"]),
        json!({"posted": 1000, "pending_in": 0, "pending_out": 600, "available": 400})
    );
    assert_eq!(
        plain(&data["balances_after"]),
        json!({"posted": 400, "pending_in": 0, "pending_out": 0, "available": 400})
    );
    app.finish().await;
}
