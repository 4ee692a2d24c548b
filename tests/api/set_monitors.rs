//! Balance monitors on account sets: the same API as a wallet's, evaluated on the set's
//! balances (the sums over its wallets) by every posting, hold, capture and void of a wallet
//! counted in it, under the set's lock taken after the wallets'. 50 parallel debits from ten
//! of its wallets, each in a database transaction of its own, cross its line exactly once,
//! and the event's balances are the wallets' running balances summed at the crossing entry.

use super::common::{TestApp, assert_problem};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::http::settings::HttpSettings;
use wallet_ledger::ledger::group_commit::GroupCommitSettings;

const TRIGGERED: &str = "balance.monitor_triggered";

/// The set `watched` holding `wallets`, each created and funded with `each`.
async fn watched_set(app: &TestApp, wallets: &[String], each: i64) {
    let r = app
        .post(
            "/v1/account-sets",
            &json!({"id": "watched", "currency": "SAR"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    for wallet in wallets {
        app.create_wallet(wallet).await;
        app.fund(wallet, each).await;
        let body = json!({"type": "account", "id": wallet});
        let r = app.post("/v1/account-sets/watched/members", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
}

/// A monitor of the set's `field` below `value`, added; its id.
async fn below(app: &TestApp, field: &str, value: i64) -> Uuid {
    let id = Uuid::new_v4();
    let body = json!({"id": id, "field": field, "operator": "lt", "value": value});
    let r = app.post("/v1/account-sets/watched/monitors", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

/// The `balance.monitor_triggered` events, oldest first: (transaction id, account_id column,
/// data).
async fn firings(app: &TestApp) -> Vec<(Uuid, Option<String>, Value)> {
    sqlx::query_as(
        "select transaction_id, account_id, data from outbox_events where type = $1 order by seq",
    )
    .bind(TRIGGERED)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Balances as an event shows them, without their `_decimal` forms.
fn plain(balances: &Value) -> Value {
    let keep = ["posted", "pending_in", "pending_out", "available"];
    keep.iter()
        .map(|k| (k.to_string(), balances[k].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Two wallets that sit on different Citus workers (tests/citus checks the spread).
fn pair() -> Vec<String> {
    vec!["mon-a".to_owned(), "mon-b".to_owned()]
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

async fn hold(app: &TestApp, from: &str, to: &str, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let body = json!({"id": id, "from": from, "to": to, "amount": amount,
                      "status": "pending", "expires_at": expires});
    let r = app.post("/v1/transfers", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

#[tokio::test]
async fn a_sets_monitor_is_added_once_read_deleted_and_bad_ones_write_nothing() {
    let app = TestApp::new().await;
    let wallets = pair();
    watched_set(&app, &wallets, 500).await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "field": "posted", "operator": "lte", "value": 900});
    let r = app.post("/v1/account-sets/watched/monitors", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        (
            &r.body["set_id"],
            &r.body["account_id"],
            &r.body["value_decimal"]
        ),
        (&json!("watched"), &Value::Null, &json!("9.00"))
    );
    let again = app.post("/v1/account-sets/watched/monitors", &body).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    let on_wallet = app.post("/v1/accounts/mon-a/monitors", &body).await;
    assert_problem(
        &on_wallet,
        422,
        "idempotency_mismatch",
        "a wallet, not the set",
    );
    let path = format!("/v1/account-sets/watched/monitors/{id}");
    let one = app.get(&path).await;
    assert_eq!(
        (one.status, &one.body["state"]),
        (StatusCode::OK, &json!("armed"))
    );
    let list = app.get("/v1/account-sets/watched/monitors").await;
    assert_eq!(list.body["data"][0]["id"], json!(id), "{}", list.text);
    // A wallet's path does not reach a set's monitor.
    let elsewhere = app.get(&format!("/v1/accounts/mon-a/monitors/{id}")).await;
    assert_eq!(elsewhere.status, StatusCode::NOT_FOUND);

    let rows = || async {
        let n: i64 = sqlx::query_scalar("select count(*) from account_monitors")
            .fetch_one(&app.pool)
            .await
            .unwrap();
        n
    };
    let before = rows().await;
    let unknown = json!({"id": Uuid::new_v4(), "field": "posted", "operator": "lt", "value": 1});
    let r = app.post("/v1/account-sets/nobody/monitors", &unknown).await;
    assert_problem(&r, 404, "not_found", "an unknown set");
    let bad = json!({"id": Uuid::new_v4(), "field": "pending_in", "operator": "lt", "value": 1});
    let r = app.post("/v1/account-sets/watched/monitors", &bad).await;
    assert_problem(
        &r,
        422,
        "validation_failed",
        "a field monitors do not watch",
    );
    let r = app.get("/v1/account-sets/nobody/monitors").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(rows().await, before);

    let deleted = app.raw(Method::DELETE, &path, &[], Body::empty()).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert!(deleted.body["deleted_at"].is_string(), "{}", deleted.text);
    let flag: bool =
        sqlx::query_scalar("select has_monitors from account_sets where id = 'watched'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(
        !flag,
        "a set without monitors is not locked by its wallets' changes"
    );
    let out = app.transfer(Uuid::new_v4(), "mon-a", "mon-b", 1).await;
    assert_eq!(out.status, StatusCode::CREATED, "{}", out.text);
    app.finish().await;
}

/// Each wallet's running balance at `crossing`'s entry, summed: every entry of the set's
/// wallets up to it (entries are numbered as they are written, and the set's lock writes its
/// wallets' changes one at a time), the last of each wallet.
async fn summed_at(app: &TestApp, wallets: &[String], crossing: Uuid) -> i64 {
    let rows: Vec<(String, i64, Option<Uuid>, i64)> = sqlx::query_as(
        "select account_id, id, transaction_id, balance_after from entries
         where account_id = any($1)",
    )
    .bind(wallets)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let at = (rows.iter())
        .find(|r| r.2 == Some(crossing))
        .map(|r| r.1)
        .expect("the crossing transaction has an entry on the set's wallets");
    let mut last: HashMap<&str, (i64, i64)> = HashMap::new();
    for (account, id, _, balance) in rows.iter().filter(|r| r.1 <= at) {
        let seen = last.entry(account).or_insert((*id, *balance));
        if *id >= seen.0 {
            *seen = (*id, *balance);
        }
    }
    last.values().map(|(_, balance)| balance).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_debits_from_a_sets_wallets_cross_its_line_once() {
    // One create per database transaction, eight at once, each wallet paying a payee of its
    // own: only the set's lock keeps the debits of its ten wallets in line.
    let config = HttpSettings {
        group_commit: GroupCommitSettings {
            max_items: 1,
            max_in_flight: 8,
            ..GroupCommitSettings::default()
        },
        ..HttpSettings::default()
    };
    let app = Arc::new(TestApp::with_config(config).await);
    let wallets = names("smon", 10);
    let payees = names("spayee", 10);
    watched_set(&app, &wallets, 1_000).await;
    for payee in &payees {
        app.create_wallet(payee).await;
    }
    // 50 debits of 7 take the set from 10,000 to 9,650: one of them takes it below 9,800.
    let monitor = below(&app, "posted", 9_800).await;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            let (from, to) = (wallets[i % 10].clone(), payees[i % 10].clone());
            tokio::spawn(async move { app.transfer(Uuid::new_v4(), &from, &to, 7).await })
        })
        .collect();
    for task in tasks {
        let r = task.await.unwrap();
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    let (crossing, account_column, data) = &fired[0];
    assert_eq!(data["monitor"]["id"], json!(monitor));
    assert_eq!(data["transaction_id"], json!(crossing));
    assert_eq!(
        (&data["account_set"]["id"], &data["account"], account_column),
        (&json!("watched"), &Value::Null, &None)
    );
    let after = summed_at(&app, &wallets, *crossing).await;
    assert_eq!(data["balances_after"]["posted"], json!(after), "{data}");
    assert_eq!(
        data["balances_before"]["posted"],
        json!(after + 7),
        "{data}"
    );
    assert!((9_793..9_800).contains(&after), "{data}");
    let one = app
        .get(&format!("/v1/account-sets/watched/monitors/{monitor}"))
        .await;
    assert_eq!(
        (&one.body["state"], &one.body["trigger_count"]),
        (&json!("triggered"), &json!(1))
    );
    assert_eq!(
        one.body["last_triggered"]["transaction_id"],
        json!(crossing)
    );
    let set = app.get("/v1/account-sets/watched").await;
    assert_eq!(set.body["balances"]["posted"], json!(9_650), "{}", set.text);
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_sets_monitors_follow_holds_captures_and_voids_of_its_wallets() {
    let app = TestApp::new().await;
    let wallets = pair();
    watched_set(&app, &wallets, 500).await;
    app.create_wallet("outside").await;
    let available = below(&app, "available", 600).await;
    let posted = below(&app, "posted", 900).await;
    // Money moving between the set's wallets leaves its balances as they are.
    let inside = app.transfer(Uuid::new_v4(), "mon-a", "mon-b", 300).await;
    assert_eq!(inside.status, StatusCode::CREATED, "{}", inside.text);
    let first = hold(&app, "mon-b", "outside", 450).await;
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    assert_eq!(
        (fired[0].0, &fired[0].2["monitor"]["id"]),
        (first, &json!(available))
    );
    assert_eq!(
        plain(&fired[0].2["balances_after"]),
        json!({"posted": 1000, "pending_in": 0, "pending_out": 450, "available": 550})
    );
    let path = format!("/v1/account-sets/watched/monitors/{available}");
    assert_eq!(app.get(&path).await.body["state"], "triggered");
    let void = app
        .post_empty(&format!("/v1/transactions/{first}/void"))
        .await;
    assert_eq!(void.status, StatusCode::OK, "{}", void.text);
    assert_eq!(
        firings(&app).await.len(),
        1,
        "a void that re-arms fires nothing"
    );
    assert_eq!(app.get(&path).await.body["state"], "armed");

    // A hold leaves posted as it is; its capture takes it across.
    let second = hold(&app, "mon-a", "outside", 150).await;
    assert_eq!(
        firings(&app).await.len(),
        1,
        "available 850 stays above its line"
    );
    let capture = app
        .post_empty(&format!("/v1/transactions/{second}/post"))
        .await;
    assert_eq!(capture.status, StatusCode::OK, "{}", capture.text);
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 2, "{fired:#?}");
    assert_eq!(
        (fired[1].0, &fired[1].2["monitor"]["id"]),
        (second, &json!(posted))
    );
    assert_eq!(
        (
            plain(&fired[1].2["balances_before"]),
            plain(&fired[1].2["balances_after"])
        ),
        (
            json!({"posted": 1000, "pending_in": 0, "pending_out": 150, "available": 850}),
            json!({"posted": 850, "pending_in": 0, "pending_out": 0, "available": 850})
        )
    );
    // The next debit takes available across again; posted stays below its line, silent.
    let third = Uuid::new_v4();
    app.transfer(third, "mon-b", "outside", 300).await;
    let fired = firings(&app).await;
    assert_eq!(fired.len(), 3, "{fired:#?}");
    assert_eq!(
        (fired[2].0, &fired[2].2["monitor"]["id"]),
        (third, &json!(available))
    );
    assert_eq!(fired[2].2["balances_after"]["posted"], json!(550));
    app.finish().await;
}
