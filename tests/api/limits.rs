//! Velocity limits: added once per id, listed and deleted through the API; held exactly by the
//! posting transaction under the wallet's lock (50 parallel debits against room for 10: 10
//! pass), refused `velocity_limit_exceeded` as a stored refusal, holds counted as placed and
//! given back by a void. Wallets `vel-a` and `vel-b` sit on different Citus workers.

use super::common::{TestApp, assert_problem};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::http::settings::HttpSettings;
use wallet_ledger::ledger::group_commit::GroupCommitSettings;

/// `vel-a` funded with `balance`, and `vel-b`, its payee.
async fn two_wallets(app: &TestApp, balance: i64) {
    app.create_wallet("vel-a").await;
    app.create_wallet("vel-b").await;
    app.fund("vel-a", balance).await;
}

async fn add_limit(app: &TestApp, account: &str, body: Value) -> super::common::TestResponse {
    app.post(&format!("/v1/accounts/{account}/limits"), &body)
        .await
}

async fn delete(app: &TestApp, path: &str) -> super::common::TestResponse {
    app.raw(Method::DELETE, path, &[], Body::empty()).await
}

#[tokio::test]
async fn a_limit_is_added_once_listed_and_deleted() {
    let app = TestApp::new().await;
    two_wallets(&app, 100).await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "direction": "debit", "window_seconds": 3600, "amount": 500});
    let r = add_limit(&app, "vel-a", body.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        (&r.body["account_id"], &r.body["amount"], &r.body["count"]),
        (&json!("vel-a"), &json!(500), &Value::Null)
    );
    let again = add_limit(&app, "vel-a", body.clone()).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    assert_eq!(again.body, r.body);
    let other = json!({"id": id, "direction": "debit", "window_seconds": 3600, "amount": 501});
    let r2 = add_limit(&app, "vel-a", other).await;
    assert_problem(&r2, 422, "idempotency_mismatch", "another amount");
    assert_eq!(r2.body["differing_fields"], json!(["/amount"]));
    let elsewhere = add_limit(&app, "vel-b", body).await;
    assert_problem(&elsewhere, 422, "idempotency_mismatch", "another account");

    let list = app.get("/v1/accounts/vel-a/limits").await;
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        list.text
    );
    let path = format!("/v1/accounts/vel-a/limits/{id}");
    let deleted = delete(&app, &path).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert!(deleted.body["deleted_at"].is_string());
    let repeat = delete(&app, &path).await;
    assert_eq!(
        (repeat.status, &repeat.body),
        (StatusCode::OK, &deleted.body)
    );
    let list = app.get("/v1/accounts/vel-a/limits").await;
    assert_eq!(list.body["data"], json!([]));
    let wrong_account = delete(&app, &format!("/v1/accounts/vel-b/limits/{id}")).await;
    assert_problem(&wrong_account, 404, "not_found", "another account's limit");
    app.finish().await;
}

#[tokio::test]
async fn bad_limits_are_refused_and_write_nothing() {
    let app = TestApp::new().await;
    two_wallets(&app, 100).await;
    let cases = [
        (
            json!({"direction": "debit", "window_seconds": 60}),
            "/amount",
            "required",
        ),
        (
            json!({"direction": "debit", "window_seconds": 60, "amount": 1, "count": 1}),
            "/amount",
            "required",
        ),
        (
            json!({"direction": "debit", "window_seconds": 59, "count": 1}),
            "/window_seconds",
            "range",
        ),
        (
            json!({"direction": "debit", "window_seconds": 2_678_401, "count": 1}),
            "/window_seconds",
            "range",
        ),
        (
            json!({"direction": "debit", "window_seconds": 60, "amount": 0}),
            "/amount",
            "range",
        ),
        (
            json!({"direction": "debit", "window_seconds": 60, "count": -1}),
            "/count",
            "range",
        ),
        (
            json!({"direction": "out", "window_seconds": 60, "count": 1}),
            "/direction",
            "invalid_type",
        ),
        (
            json!({"direction": "debit", "window_seconds": 60, "count": 1, "per": "day"}),
            "/per",
            "unknown_field",
        ),
    ];
    for (mut body, field, code) in cases {
        body["id"] = json!(Uuid::new_v4());
        let r = add_limit(&app, "vel-a", body.clone()).await;
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
    let body =
        json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 60, "count": 1});
    let r = add_limit(&app, "nobody", body).await;
    assert_problem(&r, 404, "not_found", "an unknown account");
    for i in 0..20 {
        let body = json!({"id": Uuid::new_v4(), "direction": "credit", "window_seconds": 60 + i, "count": 5});
        assert_eq!(
            add_limit(&app, "vel-a", body).await.status,
            StatusCode::CREATED
        );
    }
    let body =
        json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 60, "count": 1});
    assert_problem(
        &add_limit(&app, "vel-a", body).await,
        409,
        "too_many_limits",
        "a 21st",
    );
    let list = app.get("/v1/accounts/vel-a/limits").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 20);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_debits_against_room_for_ten_let_exactly_ten_through() {
    let app = Arc::new(TestApp::new().await);
    two_wallets(&app, 10_000).await;
    let body =
        json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 3600, "count": 10});
    assert_eq!(
        add_limit(&app, "vel-a", body).await.status,
        StatusCode::CREATED
    );
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let id = Uuid::new_v4();
                let r = app.transfer(id, "vel-a", "vel-b", 7).await;
                (id, r.status, r.body)
            })
        })
        .collect();
    let mut refused = Vec::new();
    let mut created = 0;
    for task in tasks {
        let (id, status, body) = task.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            _ => {
                assert_eq!(body["code"], "velocity_limit_exceeded", "{body}");
                refused.push(id);
            }
        }
    }
    assert_eq!((created, refused.len()), (10, 40));
    assert_eq!(app.posted_balance("vel-b").await, 70);
    // A refusal is stored under its id: a retry gets it again, even after the limit is gone.
    let list = app.get("/v1/accounts/vel-a/limits").await;
    let limit = list.body["data"][0]["id"].as_str().unwrap().to_owned();
    delete(&app, &format!("/v1/accounts/vel-a/limits/{limit}")).await;
    let retry = app.transfer(refused[0], "vel-a", "vel-b", 7).await;
    assert!(retry.replayed(), "{}", retry.text);
    assert_problem(&retry, 422, "velocity_limit_exceeded", "a retry");
    assert!(
        retry.body["detail"].as_str().unwrap().contains(&limit),
        "{}",
        retry.text
    );
    let stored = app.get(&format!("/v1/transactions/{}", refused[0])).await;
    assert_eq!(stored.body["status"], "rejected");
    // The limit deleted, the wallet moves freely again.
    let after = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 7).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.text);
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_hold_uses_room_as_placed_and_a_void_gives_it_back() {
    let app = TestApp::new().await;
    two_wallets(&app, 10_000).await;
    let body = json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 86_400, "amount": 100});
    assert_eq!(
        add_limit(&app, "vel-a", body).await.status,
        StatusCode::CREATED
    );
    let hold = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": hold, "from": "vel-a", "to": "vel-b", "amount": 80, "status": "pending", "expires_at": expires}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let over = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 21).await;
    assert_problem(&over, 422, "velocity_limit_exceeded", "80 held + 21");
    assert!(
        over.body["detail"]
            .as_str()
            .unwrap()
            .contains("0.20 SAR left"),
        "{}",
        over.text
    );
    let void = app
        .post_empty(&format!("/v1/transactions/{hold}/void"))
        .await;
    assert_eq!(void.status, StatusCode::OK, "{}", void.text);
    let fits = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 100).await;
    assert_eq!(fits.status, StatusCode::CREATED, "{}", fits.text);
    // Credits do not use a debit limit; a wallet without limits is not held to another's.
    app.fund("vel-a", 500).await;
    let free = app.transfer(Uuid::new_v4(), "vel-b", "vel-a", 50).await;
    assert_eq!(free.status, StatusCode::CREATED, "{}", free.text);
    let over = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 1).await;
    assert_problem(&over, 422, "velocity_limit_exceeded", "100 posted + 1");
    app.finish().await;
}

#[tokio::test]
async fn a_credit_limit_caps_what_a_wallet_receives() {
    let app = TestApp::new().await;
    two_wallets(&app, 1_000).await;
    let body =
        json!({"id": Uuid::new_v4(), "direction": "credit", "window_seconds": 600, "amount": 300});
    assert_eq!(
        add_limit(&app, "vel-b", body).await.status,
        StatusCode::CREATED
    );
    let first = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 300).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let second = app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 1).await;
    assert_problem(&second, 422, "velocity_limit_exceeded", "a 301st unit");
    assert_eq!(app.posted_balance("vel-a").await, 700);
    app.finish().await;
}

/// `team`, a set of `vel-a` and `vel-b` (on different Citus workers), both funded, and
/// `mon-a` outside it.
async fn limited_team(app: &TestApp, limit: Value) {
    two_wallets(app, 10_000).await;
    app.fund("vel-b", 10_000).await;
    app.create_wallet("mon-a").await;
    let r = app
        .post(
            "/v1/account-sets",
            &json!({"id": "team", "currency": "SAR"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    for wallet in ["vel-a", "vel-b"] {
        let body = json!({"type": "account", "id": wallet});
        let r = app.post("/v1/account-sets/team/members", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let r = app.post("/v1/account-sets/team/limits", &limit).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        (&r.body["set_id"], &r.body["account_id"]),
        (&json!("team"), &Value::Null)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_debits_from_a_sets_wallets_let_exactly_ten_through() {
    // One create per database transaction, eight at once: the debits of vel-a and of vel-b
    // race in transactions of their own, which only the set's lock keeps in line.
    let config = HttpSettings {
        group_commit: GroupCommitSettings {
            max_items: 1,
            max_in_flight: 8,
            ..GroupCommitSettings::default()
        },
        ..HttpSettings::default()
    };
    let app = Arc::new(TestApp::with_config(config).await);
    let limit =
        json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 3600, "count": 10});
    limited_team(&app, limit).await;
    // Eight more wallets in the set, so that up to eight debits race at once.
    let mut wallets = vec!["vel-a".to_owned(), "vel-b".to_owned()];
    for i in 2..10 {
        let wallet = format!("team-{i}");
        app.create_wallet(&wallet).await;
        app.fund(&wallet, 1_000).await;
        let body = json!({"type": "account", "id": wallet});
        app.post("/v1/account-sets/team/members", &body).await;
        wallets.push(wallet);
    }
    // Each pays a payee of its own: a shared payee's lock would line the debits up anyway.
    for i in 0..wallets.len() {
        app.create_wallet(&format!("payee-{i}")).await;
    }
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            let from = wallets[i % wallets.len()].clone();
            let to = format!("payee-{}", i % wallets.len());
            tokio::spawn(async move { app.transfer(Uuid::new_v4(), &from, &to, 7).await })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        let r = task.await.unwrap();
        match r.status {
            StatusCode::CREATED => created += 1,
            _ => {
                assert_problem(&r, 422, "velocity_limit_exceeded", "past the set's limit");
                let detail = r.body["detail"].as_str().unwrap();
                assert!(detail.contains("of account set team"), "{detail}");
            }
        }
    }
    assert_eq!(created, 10);
    let payees: Vec<String> = (0..wallets.len()).map(|i| format!("payee-{i}")).collect();
    let paid: i64 = app.posted_balances(&payees).await.values().sum();
    assert_eq!(paid, 70);
    // Money moving into the set is not a debit of it; a wallet outside it is not held to it.
    app.fund("mon-a", 5).await;
    let inward = app.transfer(Uuid::new_v4(), "mon-a", "vel-a", 5).await;
    assert_eq!(inward.status, StatusCode::CREATED, "{}", inward.text);
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_sets_limit_counts_its_wallets_holds_until_a_void_gives_the_room_back() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    let limit = json!({"id": id, "direction": "debit", "window_seconds": 86_400, "amount": 100});
    limited_team(&app, limit.clone()).await;
    let again = app.post("/v1/account-sets/team/limits", &limit).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    let elsewhere = add_limit(&app, "vel-a", limit).await;
    assert_problem(
        &elsewhere,
        422,
        "idempotency_mismatch",
        "a wallet, not the set",
    );
    let hold = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": hold, "from": "vel-a", "to": "mon-a", "amount": 60, "status": "pending", "expires_at": expires}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // vel-b is held to what vel-a's hold used of the set's room.
    let over = app.transfer(Uuid::new_v4(), "vel-b", "mon-a", 41).await;
    assert_problem(&over, 422, "velocity_limit_exceeded", "60 held + 41");
    assert!(
        over.body["detail"]
            .as_str()
            .unwrap()
            .contains("0.40 SAR left"),
        "{}",
        over.text
    );
    let void = app
        .post_empty(&format!("/v1/transactions/{hold}/void"))
        .await;
    assert_eq!(void.status, StatusCode::OK, "{}", void.text);
    let fits = app.transfer(Uuid::new_v4(), "vel-b", "mon-a", 100).await;
    assert_eq!(fits.status, StatusCode::CREATED, "{}", fits.text);
    let list = app.get("/v1/account-sets/team/limits").await;
    assert_eq!(list.body["data"][0]["id"], json!(id), "{}", list.text);
    let path = format!("/v1/account-sets/team/limits/{id}");
    let deleted = delete(&app, &path).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    let free = app.transfer(Uuid::new_v4(), "vel-a", "mon-a", 500).await;
    assert_eq!(free.status, StatusCode::CREATED, "{}", free.text);
    let unknown = app
        .post(
            "/v1/account-sets/nobody/limits",
            &json!({"direction": "debit", "window_seconds": 60, "count": 1, "id": Uuid::new_v4()}),
        )
        .await;
    assert_problem(&unknown, 404, "not_found", "an unknown set");
    assert_problem(
        &app.get("/v1/account-sets/nobody/limits").await,
        404,
        "not_found",
        "the limits of an unknown set",
    );
    app.finish().await;
}
