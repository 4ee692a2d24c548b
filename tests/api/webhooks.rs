//! The outbox and webhook subscriptions: every ledger change writes its event in the same
//! database transaction (a replay writes none, a rolled-back change leaves none), events carry
//! each wallet's entry sequence and running balance, subscriptions are created, read, listed,
//! deleted and rotated through `/v1/webhooks`, and fan-out turns each event into one delivery
//! per matching active subscription, visible through `/v1/deliveries`.

use super::common::{TestApp, TestResponse, assert_problem, poll_until};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use uuid::Uuid;
use wallet_ledger::http::HttpSettings;
use wallet_ledger::ledger::holds;
use wallet_ledger::outbox::deliveries;
use wallet_ledger::outbox::subscriptions::WebhookPolicy;

/// The contract's event types.
const EVENT_TYPES: [&str; 10] = [
    "transaction.posted",
    "transaction.rejected",
    "transaction.voided",
    "transaction.expired",
    "transaction.reversed",
    "hold.created",
    "account.frozen",
    "account.closed",
    "account.negative_balance",
    "balance.monitor_triggered",
];

/// The fixed namespace of event ids, written out here so that a change to it fails a test.
fn namespace() -> Uuid {
    Uuid::parse_str("3f0c2b7e-8d41-4a96-b5e3-1c7a9e2d6f48").unwrap()
}

/// UUIDv5 of the event type and the natural key of the change.
fn event_id(kind: &str, key: &str) -> Uuid {
    Uuid::new_v5(&namespace(), format!("{kind}\n{key}").as_bytes())
}

#[derive(Debug, Clone)]
struct Event {
    seq: i64,
    id: Uuid,
    kind: String,
    transaction_id: Option<Uuid>,
    account_id: Option<String>,
    data: Value,
}

/// Every outbox event, oldest first.
async fn events(app: &TestApp) -> Vec<Event> {
    type Row = (i64, Uuid, String, Option<Uuid>, Option<String>, Value);
    let rows: Vec<Row> = sqlx::query_as(
        "select seq, id, type, transaction_id, account_id, data from outbox_events order by seq",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(seq, id, kind, transaction_id, account_id, data)| Event {
            seq,
            id,
            kind,
            transaction_id,
            account_id,
            data,
        })
        .collect()
}

async fn event_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from outbox_events")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// The events about transaction `id`, oldest first.
async fn events_of(app: &TestApp, id: Uuid) -> Vec<Event> {
    events(app)
        .await
        .into_iter()
        .filter(|e| e.transaction_id == Some(id))
        .collect()
}

/// The one event of type `kind` about transaction `id` (and no other event of that type).
async fn the_event(app: &TestApp, kind: &str, id: Uuid) -> Event {
    let all = events(app).await;
    let found: Vec<&Event> = all
        .iter()
        .filter(|e| e.kind == kind && e.transaction_id == Some(id))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "exactly one {kind} event for {id}; all events: {all:#?}"
    );
    found[0].clone()
}

/// `(account, sequence, balance_after)` of an event's `data.accounts`.
fn marks(event: &Event) -> Vec<(String, i64, i64)> {
    event.data["accounts"]
        .as_array()
        .unwrap_or_else(|| panic!("data.accounts is an array: {event:?}"))
        .iter()
        .map(|a| {
            (
                a["account"].as_str().unwrap().to_owned(),
                a["sequence"].as_i64().unwrap(),
                a["balance_after"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap_or_else(|| panic!("a time: {value}")))
        .unwrap()
        .with_timezone(&Utc)
}

/// Every wallet entry as `(account, sequence, balance_after)`, by account and sequence.
async fn wallet_entries(app: &TestApp) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        "select account_id, sequence, balance_after from entries
         where sequence is not null order by account_id, sequence",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

async fn create_wallet_with_overdraft(app: &TestApp, id: &str, overdraft_limit: i64) {
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": id, "currency": "SAR", "type": "wallet", "overdraft_limit": overdraft_limit}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

async fn transfer_ok(app: &TestApp, from: &str, to: &str, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let r = app.transfer(id, from, to, amount).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

async fn reverse_ok(app: &TestApp, original: Uuid, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let r = app
        .post(
            &format!("/v1/transactions/{original}/reverse"),
            &json!({"id": id, "amount": amount}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

async fn hold(app: &TestApp, from: &str, to: &str, amount: i64, expires_at: Option<&str>) -> Uuid {
    let id = Uuid::new_v4();
    let mut body = json!({"id": id, "from": from, "to": to, "amount": amount, "status": "pending"});
    if let Some(at) = expires_at {
        body["expires_at"] = json!(at);
    }
    let r = app.post("/v1/transfers", &body).await;
    assert_eq!(
        (r.status, &r.body["status"]),
        (StatusCode::CREATED, &json!("pending")),
        "{}",
        r.text
    );
    id
}

/// Waits (polling) until the hold reads as expired by the ledger's own rule
/// (`hold_status_at`) at the database clock a capture judges it by.
async fn wait_until_expired(app: &TestApp, id: Uuid) {
    poll_until(
        Duration::from_secs(10),
        format!("the expiry of hold {id}"),
        || async {
            let past: bool = sqlx::query_scalar(
                "select hold_status_at(status, expires_at, clock_timestamp()) = 'expired'
                 from transactions where id = $1",
            )
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
            past.then_some(())
        },
    )
    .await
}

async fn delete(app: &TestApp, path: &str) -> TestResponse {
    app.raw(Method::DELETE, path, &[], Body::empty()).await
}

fn field_codes(r: &TestResponse) -> Vec<(String, String)> {
    r.body["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| {
                    (
                        e["field"].as_str().unwrap_or("").to_owned(),
                        e["code"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts a 422 `validation_failed` naming `field` with `code`.
fn assert_invalid(r: &TestResponse, field: &str, code: &str, case: &str) {
    assert_eq!(
        r.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{case}: {}",
        r.text
    );
    assert_eq!(r.content_type(), "application/problem+json", "{case}");
    assert_eq!(r.code(), "validation_failed", "{case}: {}", r.text);
    assert!(
        field_codes(r).contains(&(field.to_owned(), code.to_owned())),
        "{case}: expected {field} {code} among {:?}",
        field_codes(r)
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Every event type is written by the change that causes it.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_payment_and_a_transfer_each_write_transaction_posted_with_sequences_and_balances() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    assert_eq!(event_count(&app).await, 0, "creating accounts is no event");

    let payment = app.fund("w1", 1_000).await;
    let payment_id: Uuid = payment.body["id"].as_str().unwrap().parse().unwrap();
    let e = the_event(&app, "transaction.posted", payment_id).await;
    assert_eq!(
        e.id,
        event_id("transaction.posted", &payment_id.to_string())
    );
    assert_eq!(e.account_id, None);
    let tx = &e.data["transaction"];
    assert_eq!(
        (&tx["id"], &tx["kind"], &tx["status"], &tx["currency"]),
        (
            &json!(payment_id),
            &json!("payment"),
            &json!("posted"),
            &json!("SAR")
        ),
        "{}",
        e.data
    );
    // The clearing account has no chain: only the wallet's entry is listed.
    assert_eq!(marks(&e), [("w1".to_owned(), 1, 1_000)], "{}", e.data);
    assert_eq!(tx["entries"].as_array().unwrap().len(), 2, "{}", e.data);

    let transfer = transfer_ok(&app, "w1", "w2", 300).await;
    let e = the_event(&app, "transaction.posted", transfer).await;
    let tx = &e.data["transaction"];
    assert_eq!(
        (&tx["kind"], &tx["status"]),
        (&json!("transfer"), &json!("posted"))
    );
    assert_eq!(
        marks(&e),
        [("w1".to_owned(), 2, 700), ("w2".to_owned(), 1, 300)],
        "{}",
        e.data
    );
    assert_eq!(
        tx["entries"],
        json!([
            {"account": "w1", "amount": -300, "amount_decimal": "-3.00"},
            {"account": "w2", "amount": 300, "amount_decimal": "3.00"}
        ])
    );
    assert_eq!(events(&app).await.len(), 2, "one event per change");
    app.finish().await;
}

#[tokio::test]
async fn an_insufficient_funds_refusal_writes_transaction_rejected() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 100).await;
    let id = Uuid::new_v4();
    let r = app.transfer(id, "w1", "w2", 500).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds")
    );
    let e = the_event(&app, "transaction.rejected", id).await;
    assert_eq!(e.id, event_id("transaction.rejected", &id.to_string()));
    let tx = &e.data["transaction"];
    assert_eq!(
        (&tx["status"], &tx["refusal"]["code"]),
        (&json!("rejected"), &json!("insufficient_funds")),
        "{}",
        e.data
    );
    assert_eq!(e.data["accounts"], json!([]), "a refusal moved nothing");
    assert_eq!(events_of(&app, id).await.len(), 1);
    app.finish().await;
}

#[tokio::test]
async fn a_hold_writes_hold_created_then_transaction_posted_on_capture_or_voided_on_release() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;

    // Created: hold.created, nothing posted yet.
    let captured = hold(&app, "w1", "w2", 400, None).await;
    let e = the_event(&app, "hold.created", captured).await;
    assert_eq!(e.id, event_id("hold.created", &captured.to_string()));
    assert_eq!(e.data["transaction"]["status"], "pending", "{}", e.data);
    assert_eq!(e.data["accounts"], json!([]), "a hold posts no entry");
    let shown = app.get(&format!("/v1/transactions/{captured}")).await;
    assert_eq!(
        time(&e.data["transaction"]["expires_at"]),
        time(&shown.body["expires_at"])
    );

    // Captured (partly): transaction.posted for the same transaction, with its entries.
    let r = app
        .post(
            &format!("/v1/transactions/{captured}/post"),
            &json!({"amount": 250}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let e = the_event(&app, "transaction.posted", captured).await;
    assert_eq!(e.id, event_id("transaction.posted", &captured.to_string()));
    let tx = &e.data["transaction"];
    assert_eq!(
        (&tx["status"], &tx["captured_amount"]),
        (&json!("posted"), &json!(250)),
        "{}",
        e.data
    );
    assert_eq!(
        marks(&e),
        [("w1".to_owned(), 2, 750), ("w2".to_owned(), 1, 250)],
        "{}",
        e.data
    );
    assert_eq!(
        events_of(&app, captured)
            .await
            .iter()
            .map(|e| e.kind.as_str())
            .collect::<Vec<_>>(),
        ["hold.created", "transaction.posted"]
    );

    // Released: transaction.voided.
    let released = hold(&app, "w1", "w2", 100, None).await;
    let r = app
        .post_empty(&format!("/v1/transactions/{released}/void"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let e = the_event(&app, "transaction.voided", released).await;
    assert_eq!(e.id, event_id("transaction.voided", &released.to_string()));
    assert_eq!(e.data["transaction"]["status"], "voided", "{}", e.data);
    assert_eq!(e.data["accounts"], json!([]));
    assert_eq!(
        events_of(&app, released)
            .await
            .iter()
            .map(|e| e.kind.as_str())
            .collect::<Vec<_>>(),
        ["hold.created", "transaction.voided"]
    );
    app.finish().await;
}

#[tokio::test]
async fn an_expired_hold_writes_transaction_expired_by_a_late_capture_or_the_sweeper() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;
    let soon = (Utc::now() + TimeDelta::milliseconds(300)).to_rfc3339();
    let late = hold(&app, "w1", "w2", 100, Some(&soon)).await;
    let swept = hold(&app, "w1", "w2", 200, Some(&soon)).await;
    wait_until_expired(&app, late).await;
    wait_until_expired(&app, swept).await;

    // A capture after the expiry is refused, and it records the expiry.
    let r = app
        .post(&format!("/v1/transactions/{late}/post"), &json!({}))
        .await;
    assert_eq!(
        (r.status, r.code(), &r.body["current_status"]),
        (
            StatusCode::CONFLICT,
            "invalid_transition",
            &json!("expired")
        ),
        "{}",
        r.text
    );
    let e = the_event(&app, "transaction.expired", late).await;
    assert_eq!(e.id, event_id("transaction.expired", &late.to_string()));
    assert_eq!(e.data["transaction"]["status"], "expired", "{}", e.data);
    assert_eq!(e.data["accounts"], json!([]));

    // The sweeper expires the other one (the first is already expired: 1, not 2).
    let mut conn = app.pool.acquire().await.unwrap();
    assert_eq!(
        holds::sweep(&mut crate::backend::db(&mut conn), 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        holds::sweep(&mut crate::backend::db(&mut conn), 100)
            .await
            .unwrap(),
        0
    );
    drop(conn);
    let e = the_event(&app, "transaction.expired", swept).await;
    assert_eq!(e.data["transaction"]["status"], "expired", "{}", e.data);

    // Later attempts on expired holds write nothing more.
    let before = event_count(&app).await;
    for id in [late, swept] {
        let r = app.post_empty(&format!("/v1/transactions/{id}/void")).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
        let r = app
            .post(&format!("/v1/transactions/{id}/post"), &json!({}))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    }
    assert_eq!(event_count(&app).await, before);
    for id in [late, swept] {
        assert_eq!(
            events_of(&app, id)
                .await
                .iter()
                .map(|e| e.kind.as_str())
                .collect::<Vec<_>>(),
            ["hold.created", "transaction.expired"]
        );
    }
    app.finish().await;
}

/// Asserts that the event's `data.transaction` is, byte for byte, what
/// `GET /v1/transactions/{id}` shows right after the change.
async fn assert_event_shows_the_transaction(app: &TestApp, kind: &str, id: Uuid) {
    let e = the_event(app, kind, id).await;
    let shown = app.get(&format!("/v1/transactions/{id}")).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text);
    assert_eq!(
        e.data["transaction"], shown.body,
        "the {kind} event of {id} shows the transaction as the API does"
    );
}

#[tokio::test]
async fn every_transaction_event_shows_the_transaction_as_the_api_does_at_that_moment() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let payment = app.fund("w1", 1_000).await;
    let payment: Uuid = payment.body["id"].as_str().unwrap().parse().unwrap();
    assert_event_shows_the_transaction(&app, "transaction.posted", payment).await;

    let transfer = transfer_ok(&app, "w1", "w2", 300).await;
    assert_event_shows_the_transaction(&app, "transaction.posted", transfer).await;

    let refused = Uuid::new_v4();
    let r = app.transfer(refused, "w2", "w1", 5_000).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_event_shows_the_transaction(&app, "transaction.rejected", refused).await;

    let reversal = reverse_ok(&app, transfer, 100).await;
    assert_event_shows_the_transaction(&app, "transaction.reversed", reversal).await;

    // A partial capture: the event shows the captured amount and its decimal form.
    let captured = hold(&app, "w1", "w2", 400, None).await;
    assert_event_shows_the_transaction(&app, "hold.created", captured).await;
    let r = app
        .post(
            &format!("/v1/transactions/{captured}/post"),
            &json!({"amount": 250}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_event_shows_the_transaction(&app, "transaction.posted", captured).await;

    let released = hold(&app, "w1", "w2", 100, None).await;
    let r = app
        .post_empty(&format!("/v1/transactions/{released}/void"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_event_shows_the_transaction(&app, "transaction.voided", released).await;

    let soon = (Utc::now() + TimeDelta::milliseconds(200)).to_rfc3339();
    let swept = hold(&app, "w1", "w2", 50, Some(&soon)).await;
    wait_until_expired(&app, swept).await;
    let mut conn = app.pool.acquire().await.unwrap();
    assert_eq!(
        holds::sweep(&mut crate::backend::db(&mut conn), 100)
            .await
            .unwrap(),
        1
    );
    drop(conn);
    assert_event_shows_the_transaction(&app, "transaction.expired", swept).await;
    app.finish().await;
}

#[tokio::test]
async fn a_reversal_writes_transaction_reversed_for_the_reversing_transaction() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;
    let original = transfer_ok(&app, "w1", "w2", 300).await;
    let reversal = reverse_ok(&app, original, 100).await;
    let e = the_event(&app, "transaction.reversed", reversal).await;
    assert_eq!(
        e.id,
        event_id("transaction.reversed", &reversal.to_string())
    );
    let tx = &e.data["transaction"];
    assert_eq!(
        (&tx["kind"], &tx["status"], &tx["reverses"]),
        (&json!("reversal"), &json!("posted"), &json!(original)),
        "{}",
        e.data
    );
    assert_eq!(
        marks(&e),
        [("w1".to_owned(), 3, 800), ("w2".to_owned(), 2, 200)],
        "{}",
        e.data
    );
    assert_eq!(
        events_of(&app, original).await.len(),
        1,
        "the original keeps its one transaction.posted"
    );
    assert!(
        events_of(&app, reversal)
            .await
            .iter()
            .all(|e| e.kind != "transaction.posted"),
        "a reversal is told as transaction.reversed, not as transaction.posted"
    );
    app.finish().await;
}

#[tokio::test]
async fn freezing_and_closing_write_account_events_once_per_change() {
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "w1", 1_250).await;
    app.create_wallet("w2").await;
    app.fund("w1", 500).await;
    let before = event_count(&app).await;

    let r = app.post_empty("/v1/accounts/w1/freeze").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let frozen: Vec<Event> = events(&app)
        .await
        .into_iter()
        .filter(|e| e.kind == "account.frozen")
        .collect();
    assert_eq!(frozen.len(), 1, "{frozen:#?}");
    let e = &frozen[0];
    assert_eq!(
        (e.account_id.as_deref(), e.transaction_id),
        (Some("w1"), None)
    );
    let account = &e.data["account"];
    assert_eq!(
        (&account["id"], &account["status"], &account["type"]),
        (&json!("w1"), &json!("frozen"), &json!("wallet")),
        "{}",
        e.data
    );
    assert_eq!(
        (
            &account["overdraft_limit"],
            &account["overdraft_limit_decimal"]
        ),
        (&json!(1_250), &json!("12.50")),
        "every amount in both forms: {}",
        e.data
    );
    // Keyed by the account and the moment of the change.
    let changed_at = time(&account["updated_at"]);
    assert_eq!(
        e.id,
        event_id(
            "account.frozen",
            &format!("w1\n{}", changed_at.timestamp_micros())
        )
    );

    // Freezing again changes nothing: no event. Unfreezing is no event of the contract.
    assert_eq!(
        app.post_empty("/v1/accounts/w1/freeze").await.status,
        StatusCode::OK
    );
    assert_eq!(event_count(&app).await, before + 1);
    assert_eq!(
        app.post_empty("/v1/accounts/w1/unfreeze").await.status,
        StatusCode::OK
    );
    assert_eq!(event_count(&app).await, before + 1);
    // A second freeze after an unfreeze is a second change: a second event, another id.
    assert_eq!(
        app.post_empty("/v1/accounts/w1/freeze").await.status,
        StatusCode::OK
    );
    let frozen: Vec<Event> = events(&app)
        .await
        .into_iter()
        .filter(|e| e.kind == "account.frozen")
        .collect();
    assert_eq!(frozen.len(), 2);
    assert_ne!(frozen[0].id, frozen[1].id);

    // A debit of a frozen wallet is refused and stored: transaction.rejected.
    let refused = Uuid::new_v4();
    let r = app.transfer(refused, "w1", "w2", 10).await;
    assert_eq!(r.code(), "account_frozen", "{}", r.text);
    let e = the_event(&app, "transaction.rejected", refused).await;
    assert_eq!(e.data["transaction"]["refusal"]["code"], "account_frozen");

    // Closing: refused while money is there (no event), done once when empty.
    let count = event_count(&app).await;
    let r = app.post_empty("/v1/accounts/w1/close").await;
    assert_problem(&r, 409, "account_not_empty", "closing a wallet with money");
    assert_eq!(
        event_count(&app).await,
        count,
        "a refused close is no event"
    );
    let r = app.post_empty("/v1/accounts/w2/close").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let closed: Vec<Event> = events(&app)
        .await
        .into_iter()
        .filter(|e| e.kind == "account.closed")
        .collect();
    assert_eq!(closed.len(), 1, "{closed:#?}");
    let e = &closed[0];
    assert_eq!(
        (e.account_id.as_deref(), e.transaction_id),
        (Some("w2"), None)
    );
    assert_eq!(e.data["account"]["status"], "closed", "{}", e.data);
    let changed_at = time(&e.data["account"]["updated_at"]);
    assert_eq!(
        e.id,
        event_id(
            "account.closed",
            &format!("w2\n{}", changed_at.timestamp_micros())
        )
    );
    assert_eq!(
        app.post_empty("/v1/accounts/w2/close").await.status,
        StatusCode::OK
    );
    assert_eq!(
        event_count(&app).await,
        count + 1,
        "closing a closed account again is no event"
    );
    app.finish().await;
}

#[tokio::test]
async fn only_the_crossing_below_zero_writes_account_negative_balance() {
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "od", 1_000).await;
    app.create_wallet("w2").await;
    app.fund("od", 100).await;
    let negative = |events: Vec<Event>| -> Vec<Event> {
        events
            .into_iter()
            .filter(|e| e.kind == "account.negative_balance")
            .collect()
    };

    // 100 → -200: the crossing.
    let first = transfer_ok(&app, "od", "w2", 300).await;
    let found = negative(events(&app).await);
    assert_eq!(found.len(), 1, "{found:#?}");
    let e = &found[0];
    assert_eq!(
        (e.account_id.as_deref(), e.transaction_id),
        (Some("od"), Some(first))
    );
    assert_eq!(
        (
            &e.data["account"]["id"],
            &e.data["account"]["currency"],
            &e.data["transaction_id"],
            &e.data["sequence"],
            &e.data["balance_after"],
            &e.data["balance_after_decimal"]
        ),
        (
            &json!("od"),
            &json!("SAR"),
            &json!(first),
            &json!(2),
            &json!(-200),
            &json!("-2.00")
        ),
        "{}",
        e.data
    );
    assert_eq!(e.id, event_id("account.negative_balance", "od\n2"));
    // The transfer itself is still told as transaction.posted, each wallet's balance after it
    // in both forms, like every amount.
    let posted = the_event(&app, "transaction.posted", first).await;
    assert_eq!(
        posted.data["accounts"],
        json!([
            {"account": "od", "sequence": 2, "balance_after": -200, "balance_after_decimal": "-2.00"},
            {"account": "w2", "sequence": 1, "balance_after": 300, "balance_after_decimal": "3.00"}
        ])
    );

    // -200 → -300: still below zero, no new crossing.
    transfer_ok(&app, "od", "w2", 100).await;
    assert_eq!(negative(events(&app).await).len(), 1);
    // Back to 200, then down to exactly 0: zero is not below zero.
    app.fund("od", 500).await;
    transfer_ok(&app, "od", "w2", 200).await;
    assert_eq!(app.posted_balance("od").await, 0);
    assert_eq!(negative(events(&app).await).len(), 1);
    // 0 → -50: a crossing again.
    let second = transfer_ok(&app, "od", "w2", 50).await;
    let found = negative(events(&app).await);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[1].transaction_id, Some(second));
    assert_eq!(found[1].data["balance_after"], -50);

    // A reversal that takes it below zero again crosses too (back to 30 first).
    app.fund("od", 80).await;
    let credit = transfer_ok(&app, "w2", "od", 40).await;
    assert_eq!(app.posted_balance("od").await, 70);
    transfer_ok(&app, "od", "w2", 60).await;
    let reversal = Uuid::new_v4();
    let r = app
        .post(
            &format!("/v1/transactions/{credit}/reverse"),
            &json!({"id": reversal}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.posted_balance("od").await, -30);
    let found = negative(events(&app).await);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(found[2].transaction_id, Some(reversal));

    // A wallet without an overdraft never gets there; w2 only received.
    assert!(found.iter().all(|e| e.account_id.as_deref() == Some("od")));
    app.finish().await;
}

#[tokio::test]
async fn a_captured_hold_that_takes_a_wallet_below_zero_writes_account_negative_balance() {
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "od", 1_000).await;
    app.create_wallet("w2").await;
    app.fund("od", 100).await;
    // The hold reserves 300 of 100 + 1,000 overdraft; its capture posts 100 → -200.
    let id = hold(&app, "od", "w2", 300, None).await;
    let r = app
        .post(&format!("/v1/transactions/{id}/post"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(app.posted_balance("od").await, -200);
    let e = the_event(&app, "transaction.posted", id).await;
    assert_eq!(marks(&e)[0], ("od".to_owned(), 2, -200));
    // A capture that takes the wallet below zero says so, like any posting.
    let crossings: Vec<Event> = events(&app)
        .await
        .into_iter()
        .filter(|e| e.kind == "account.negative_balance")
        .collect();
    assert_eq!(
        crossings.len(),
        1,
        "a capture that takes a wallet from >= 0 to < 0 must write account.negative_balance"
    );
    assert_eq!(crossings[0].transaction_id, Some(id));
    assert_eq!(crossings[0].data["sequence"], 2);
    assert_eq!(crossings[0].data["balance_after"], -200);
    app.finish().await;
}

#[tokio::test]
async fn a_batch_tells_every_crossing_below_zero_and_every_entry_once() {
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "od", 1_000).await;
    app.create_wallet("w2").await;
    app.fund("w2", 1_000).await;
    let item = |from: &str, to: &str, amount: i64| json!({"id": Uuid::new_v4(), "entries": [{"account": from, "amount": -amount}, {"account": to, "amount": amount}]});
    // od: 0 → -10 (crossing) → 5 → -5 (crossing) → -20 (no crossing).
    let items = vec![
        item("od", "w2", 10),
        item("w2", "od", 15),
        item("od", "w2", 10),
        item("od", "w2", 15),
    ];
    let r = app
        .post(
            "/v1/transactions/batch",
            &json!({"mode": "atomic", "items": items}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let ids: Vec<Uuid> = items
        .iter()
        .map(|i| i["id"].as_str().unwrap().parse().unwrap())
        .collect();
    let all = events(&app).await;
    let crossings: BTreeSet<(Uuid, i64, i64)> = all
        .iter()
        .filter(|e| e.kind == "account.negative_balance")
        .map(|e| {
            (
                e.transaction_id.unwrap(),
                e.data["sequence"].as_i64().unwrap(),
                e.data["balance_after"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        crossings,
        [(ids[0], 1, -10), (ids[2], 3, -5)].into_iter().collect()
    );
    for id in &ids {
        the_event(&app, "transaction.posted", *id).await;
    }
    // Every entry told once; per account the sequences are 1..n without gaps (a receiver
    // orders a batch's events by them).
    let mut told: Vec<(String, i64, i64)> = all
        .iter()
        .filter(|e| e.kind == "transaction.posted")
        .flat_map(marks)
        .collect();
    told.sort();
    assert_eq!(told, wallet_entries(&app).await);
    let od: Vec<i64> = told
        .iter()
        .filter(|(a, _, _)| a == "od")
        .map(|(_, s, _)| *s)
        .collect();
    assert_eq!(od, [1, 2, 3, 4]);
    app.finish().await;
}

#[tokio::test]
async fn events_carry_every_wallet_entry_once_and_sequences_increase_per_account() {
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "w1", 500).await;
    app.create_wallet("w2").await;
    app.create_wallet("w3").await;
    app.fund("w1", 1_000).await;
    transfer_ok(&app, "w1", "w2", 300).await;
    transfer_ok(&app, "w2", "w3", 100).await;
    let h = hold(&app, "w1", "w3", 200, None).await;
    transfer_ok(&app, "w3", "w1", 50).await;
    let r = app
        .post(&format!("/v1/transactions/{h}/post"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let original = transfer_ok(&app, "w1", "w2", 900).await; // w1 goes below zero
    let r = app
        .post(
            &format!("/v1/transactions/{original}/reverse"),
            &json!({"id": Uuid::new_v4(), "amount": 400}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.fund("w2", 75).await;
    let _refused = app.transfer(Uuid::new_v4(), "w3", "w2", 1_000_000).await;

    let all = events(&app).await;
    // Every wallet entry is told exactly once, with its sequence and running balance.
    let mut told: Vec<(String, i64, i64)> = all
        .iter()
        .filter(|e| e.kind.starts_with("transaction."))
        .flat_map(marks)
        .collect();
    told.sort();
    assert_eq!(told, wallet_entries(&app).await);
    // In event order, each account's sequences increase (these changes were one at a time).
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for e in &all {
        let mut seen: Vec<(String, i64)> = if e.kind.starts_with("transaction.") {
            marks(e).into_iter().map(|(a, s, _)| (a, s)).collect()
        } else if e.kind == "account.negative_balance" {
            // Told with the entry that crossed: the same sequence as its transaction's.
            continue;
        } else {
            Vec::new()
        };
        seen.sort();
        for (account, sequence) in seen {
            let previous = last.insert(account.clone(), sequence).unwrap_or(0);
            assert_eq!(
                sequence,
                previous + 1,
                "event {} ({}) for {account}: sequence {sequence} after {previous}",
                e.seq,
                e.kind
            );
        }
    }
    assert_eq!(last.len(), 3);
    // Every type written here is one of the contract's.
    assert!(all.iter().all(|e| EVENT_TYPES.contains(&e.kind.as_str())));
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Exactly one event per change.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_replayed_request_writes_no_second_event() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let payment = json!({"id": Uuid::new_v4(), "account": "w1", "amount": 1_000, "currency": "SAR", "provider": "test"});
    assert_eq!(
        app.post("/v1/payments", &payment).await.status,
        StatusCode::CREATED
    );
    let transfer = json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 100});
    assert_eq!(
        app.post("/v1/transfers", &transfer).await.status,
        StatusCode::CREATED
    );
    let refused = json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 100_000});
    assert_eq!(
        app.post("/v1/transfers", &refused).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let captured = hold(&app, "w1", "w2", 50, None).await;
    let capture_path = format!("/v1/transactions/{captured}/post");
    assert_eq!(
        app.post(&capture_path, &json!({})).await.status,
        StatusCode::OK
    );
    let released = hold(&app, "w1", "w2", 60, None).await;
    let void_path = format!("/v1/transactions/{released}/void");
    assert_eq!(app.post_empty(&void_path).await.status, StatusCode::OK);
    let reverse_path = format!(
        "/v1/transactions/{}/reverse",
        transfer["id"].as_str().unwrap()
    );
    let reverse = json!({"id": Uuid::new_v4()});
    assert_eq!(
        app.post(&reverse_path, &reverse).await.status,
        StatusCode::CREATED
    );
    let batch = json!({"mode": "independent", "items": [
        {"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": -5}, {"account": "w2", "amount": 5}]}
    ]});
    assert_eq!(
        app.post("/v1/transactions/batch", &batch).await.status,
        StatusCode::OK
    );
    let before = events(&app).await;
    assert_eq!(before.len(), 9, "{before:#?}");

    // Every one of them again, twice: replays, and not one more event.
    for _ in 0..2 {
        let r = app.post("/v1/payments", &payment).await;
        assert!(r.replayed(), "{}", r.text);
        let r = app.post("/v1/transfers", &transfer).await;
        assert!(r.replayed(), "{}", r.text);
        let r = app.post("/v1/transfers", &refused).await;
        assert!(
            r.replayed() && r.status == StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            r.text
        );
        let r = app.post(&capture_path, &json!({})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let r = app.post_empty(&void_path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let r = app.post(&reverse_path, &reverse).await;
        assert!(r.replayed(), "{}", r.text);
        let r = app.post("/v1/transactions/batch", &batch).await;
        assert_eq!(r.body["results"][0]["replayed"], true, "{}", r.text);
    }
    let after = events(&app).await;
    assert_eq!(
        after.iter().map(|e| e.id).collect::<Vec<_>>(),
        before.iter().map(|e| e.id).collect::<Vec<_>>()
    );
    app.finish().await;
}

#[tokio::test]
async fn the_same_id_twice_in_one_batch_writes_one_event() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;
    let id = Uuid::new_v4();
    let item = json!({"id": id, "entries": [{"account": "w1", "amount": -10}, {"account": "w2", "amount": 10}]});
    let r = app
        .post(
            "/v1/transactions/batch",
            &json!({"mode": "independent", "items": [item, item]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (
            &r.body["results"][0]["status"],
            &r.body["results"][1]["status"]
        ),
        (&json!(201), &json!(200)),
        "{}",
        r.text
    );
    assert_eq!(events_of(&app, id).await.len(), 1);
    app.finish().await;
}

#[tokio::test]
async fn event_ids_are_uuidv5_of_type_and_natural_key_and_unique() {
    assert_eq!(
        wallet_ledger::ledger::events::EVENT_NAMESPACE,
        namespace(),
        "the namespace of event ids never changes"
    );
    let app = TestApp::new().await;
    create_wallet_with_overdraft(&app, "w1", 100).await;
    app.create_wallet("w2").await;
    app.fund("w1", 100).await;
    transfer_ok(&app, "w1", "w2", 150).await; // crosses below zero
    let h = hold(&app, "w2", "w1", 10, None).await;
    app.post_empty(&format!("/v1/transactions/{h}/void")).await;
    app.transfer(Uuid::new_v4(), "w2", "w1", 1_000).await; // refused
    app.post_empty("/v1/accounts/w2/freeze").await;

    let all = events(&app).await;
    assert!(all.len() >= 7, "{all:#?}");
    for e in &all {
        let key = match e.kind.as_str() {
            "account.frozen" | "account.closed" => format!(
                "{}\n{}",
                e.account_id.as_deref().unwrap(),
                time(&e.data["account"]["updated_at"]).timestamp_micros()
            ),
            "account.negative_balance" => format!(
                "{}\n{}",
                e.account_id.as_deref().unwrap(),
                e.data["sequence"]
            ),
            _ => e.transaction_id.unwrap().to_string(),
        };
        assert_eq!(e.id, event_id(&e.kind, &key), "{e:?}");
        // The library's own derivation agrees.
        let kind = wallet_ledger::ledger::events::EventType::parse(&e.kind).unwrap();
        assert_eq!(e.id, wallet_ledger::ledger::events::event_id(kind, &key));
    }
    let distinct: BTreeSet<Uuid> = all.iter().map(|e| e.id).collect();
    assert_eq!(distinct.len(), all.len());
    let per_change: BTreeSet<(String, Option<Uuid>, Option<String>)> = all
        .iter()
        .filter(|e| e.kind.starts_with("transaction.") || e.kind == "hold.created")
        .map(|e| (e.kind.clone(), e.transaction_id, None))
        .collect();
    assert_eq!(
        per_change.len(),
        all.iter()
            .filter(|e| e.kind.starts_with("transaction.") || e.kind == "hold.created")
            .count(),
        "one event per transaction and type"
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 3. A rolled-back or refused change leaves no event.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_atomic_batch_whose_second_item_fails_writes_no_transaction_and_no_event() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;
    let ok = |amount: i64| json!({"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": -amount}, {"account": "w2", "amount": amount}]});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("insufficient funds", ok(5_000), "insufficient_funds"),
        (
            "unknown account",
            json!({"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": -1}, {"account": "nobody", "amount": 1}]}),
            "unknown_account",
        ),
        (
            "invalid item",
            json!({"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": 0}, {"account": "w2", "amount": 0}]}),
            "validation_failed",
        ),
        (
            "a hold expiring in the past",
            json!({"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": -1}, {"account": "w2", "amount": 1}], "status": "pending", "expires_at": "2020-01-01T00:00:00Z"}),
            "validation_failed",
        ),
    ];
    let counts = app.row_counts().await;
    let before = event_count(&app).await;
    for (case, bad, code) in cases {
        let first = ok(100);
        let r = app
            .post(
                "/v1/transactions/batch",
                &json!({"mode": "atomic", "items": [first, bad]}),
            )
            .await;
        assert_eq!(
            (
                r.status,
                r.code(),
                &r.body["index"],
                &r.body["problem"]["code"]
            ),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                "batch_failed",
                &json!(1),
                &json!(code)
            ),
            "{case}: {}",
            r.text
        );
        assert_eq!(app.row_counts().await, counts, "{case}: no row written");
        assert_eq!(
            event_count(&app).await,
            before,
            "{case}: a rolled-back batch leaves no event"
        );
        let id: Uuid = first["id"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            app.get(&format!("/v1/transactions/{id}")).await.status,
            StatusCode::NOT_FOUND,
            "{case}"
        );
    }
    // The same items as an independent batch: the good one and the refusal each get theirs.
    let good = ok(100);
    let refused = ok(5_000);
    let invalid = json!({"id": Uuid::new_v4(), "entries": [{"account": "w1", "amount": 0}, {"account": "w2", "amount": 0}]});
    let r = app
        .post(
            "/v1/transactions/batch",
            &json!({"mode": "independent", "items": [good, refused, invalid]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let kinds: Vec<(String, Uuid)> = events(&app)
        .await
        .into_iter()
        .skip(before as usize)
        .map(|e| (e.kind, e.transaction_id.unwrap()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let good_id: Uuid = good["id"].as_str().unwrap().parse().unwrap();
    let refused_id: Uuid = refused["id"].as_str().unwrap().parse().unwrap();
    let mut expected = vec![
        ("transaction.posted".to_owned(), good_id),
        ("transaction.rejected".to_owned(), refused_id),
    ];
    expected.sort();
    assert_eq!(kinds, expected);
    app.finish().await;
}

#[tokio::test]
async fn refused_or_invalid_requests_write_no_event() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.create_account("usd", "USD", "wallet").await;
    app.fund("w1", 1_000).await;
    let posted = transfer_ok(&app, "w1", "w2", 10).await;
    let pending = hold(&app, "w1", "w2", 10, None).await;
    let released = hold(&app, "w1", "w2", 10, None).await;
    assert_eq!(
        app.post_empty(&format!("/v1/transactions/{released}/void"))
            .await
            .status,
        StatusCode::OK
    );
    let before = event_count(&app).await;
    let counts = app.row_counts().await;

    let cases: Vec<(&str, TestResponse, StatusCode)> = vec![
        (
            "amount 0",
            app.post(
                "/v1/transfers",
                &json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 0}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "unknown account",
            app.transfer(Uuid::new_v4(), "w1", "nobody", 5).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "currency mismatch",
            app.transfer(Uuid::new_v4(), "w1", "usd", 5).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "unknown field",
            app.post(
                "/v1/transfers",
                &json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 5, "memo": "x"}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "a new hold expiring in the past",
            app.post(
                "/v1/transfers",
                &json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 5, "status": "pending", "expires_at": "2020-01-01T00:00:00Z"}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "reverse an unknown transaction",
            app.post(
                &format!("/v1/transactions/{}/reverse", Uuid::new_v4()),
                &json!({"id": Uuid::new_v4()}),
            )
            .await,
            StatusCode::NOT_FOUND,
        ),
        (
            "reverse a pending hold",
            app.post(
                &format!("/v1/transactions/{pending}/reverse"),
                &json!({"id": Uuid::new_v4()}),
            )
            .await,
            StatusCode::CONFLICT,
        ),
        (
            "reverse more than the original",
            app.post(
                &format!("/v1/transactions/{posted}/reverse"),
                &json!({"id": Uuid::new_v4(), "amount": 11}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "capture a voided hold",
            app.post(&format!("/v1/transactions/{released}/post"), &json!({}))
                .await,
            StatusCode::CONFLICT,
        ),
        (
            "capture more than held",
            app.post(
                &format!("/v1/transactions/{pending}/post"),
                &json!({"amount": 11}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "void a posted transaction",
            app.post_empty(&format!("/v1/transactions/{posted}/void"))
                .await,
            StatusCode::CONFLICT,
        ),
        (
            "freeze an unknown account",
            app.post_empty("/v1/accounts/nobody/freeze").await,
            StatusCode::NOT_FOUND,
        ),
        (
            "close an account that holds money",
            app.post_empty("/v1/accounts/w1/close").await,
            StatusCode::CONFLICT,
        ),
    ];
    for (case, r, status) in cases {
        assert_eq!(r.status, status, "{case}: {}", r.text);
        assert_eq!(
            event_count(&app).await,
            before,
            "{case}: a refused request writes no event"
        );
    }
    assert_eq!(app.row_counts().await, counts);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Webhook subscriptions.
// ---------------------------------------------------------------------------------------------

async fn create_webhook(app: &TestApp, body: Value) -> TestResponse {
    let r = app.post("/v1/webhooks", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r
}

async fn webhook_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from webhook_subscriptions")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// A valid caller-chosen secret: `whsec_` and `bytes` bytes in base64.
fn secret_of(bytes: usize) -> String {
    use base64::Engine;
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(vec![7u8; bytes])
    )
}

#[tokio::test]
async fn creating_a_webhook_is_naturally_idempotent() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "url": "https://hooks.example.com/in", "event_types": ["transaction.posted", "hold.created"]});
    let first = create_webhook(&app, body.clone()).await;
    assert_eq!(first.content_type(), "application/json");
    assert!(!first.replayed());
    let b = &first.body;
    assert_eq!(
        (
            &b["id"],
            &b["url"],
            &b["status"],
            &b["active_secrets"],
            &b["event_types"]
        ),
        (
            &json!(id),
            &json!("https://hooks.example.com/in"),
            &json!("active"),
            &json!(1),
            &json!(["transaction.posted", "hold.created"])
        ),
        "{}",
        first.text
    );
    let secret = b["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");

    // The same request again: 200, replayed, the same secret (the same bytes).
    let again = app.post("/v1/webhooks", &body).await;
    assert_eq!(
        (again.status, again.replayed()),
        (StatusCode::OK, true),
        "{}",
        again.text
    );
    assert_eq!(again.text, first.text);
    // The same types in another order, repeated: the same request.
    let reordered = json!({"id": id, "url": "https://hooks.example.com/in", "event_types": ["hold.created", "transaction.posted", "hold.created"]});
    let r = app.post("/v1/webhooks", &reordered).await;
    assert_eq!(
        (r.status, r.replayed(), &r.body["secret"]),
        (StatusCode::OK, true, &json!(secret)),
        "{}",
        r.text
    );

    // The same id with another URL: a mismatch naming the field; nothing changes.
    let other = json!({"id": id, "url": "https://other.example.com/in", "event_types": ["transaction.posted", "hold.created"]});
    let r = app.post("/v1/webhooks", &other).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch"),
        "{}",
        r.text
    );
    assert_eq!(r.content_type(), "application/problem+json");
    assert_eq!(r.body["differing_fields"], json!(["/url"]), "{}", r.text);
    // Other event types, or a secret where none was chosen: mismatches too.
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": id, "url": "https://hooks.example.com/in"}),
        )
        .await;
    assert_eq!(r.code(), "idempotency_mismatch", "{}", r.text);
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": id, "url": "https://hooks.example.com/in", "event_types": ["transaction.posted", "hold.created"], "secret": secret}),
        )
        .await;
    assert_eq!(r.code(), "idempotency_mismatch", "{}", r.text);
    assert!(
        field_codes(&r).is_empty()
            && r.body["differing_fields"]
                .as_array()
                .unwrap()
                .contains(&json!("/secret")),
        "{}",
        r.text
    );
    assert_eq!(webhook_count(&app).await, 1);
    let shown = app.get(&format!("/v1/webhooks/{id}")).await;
    assert_eq!(shown.body["url"], "https://hooks.example.com/in");
    app.finish().await;
}

#[tokio::test]
async fn the_idempotency_key_header_derives_the_webhook_id() {
    let app = TestApp::new().await;
    let body = json!({"url": "https://hooks.example.com/in"});
    let first = app.post_with_key("/v1/webhooks", "hook-1", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let expected = wallet_ledger::ledger::ids::id_from_idempotency_key("default", "hook-1");
    assert_eq!(first.body["id"], json!(expected));
    let again = app.post_with_key("/v1/webhooks", "hook-1", &body).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );
    let other_key = app.post_with_key("/v1/webhooks", "hook-2", &body).await;
    assert_eq!(other_key.status, StatusCode::CREATED, "{}", other_key.text);
    assert_ne!(other_key.body["id"], first.body["id"]);
    let mismatch = app
        .post_with_key(
            "/v1/webhooks",
            "hook-1",
            &json!({"url": "https://elsewhere.example.com/in"}),
        )
        .await;
    assert_eq!(mismatch.code(), "idempotency_mismatch", "{}", mismatch.text);
    // The body's id wins over the header.
    let id = Uuid::new_v4();
    let r = app
        .post_with_key(
            "/v1/webhooks",
            "hook-1",
            &json!({"id": id, "url": "https://hooks.example.com/in"}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["id"]),
        (StatusCode::CREATED, &json!(id)),
        "{}",
        r.text
    );
    // Neither: 400 id_required, nothing stored.
    let r = app.post("/v1/webhooks", &body).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "id_required"),
        "{}",
        r.text
    );
    assert_eq!(webhook_count(&app).await, 3);
    app.finish().await;
}

#[tokio::test]
async fn webhook_secrets_are_generated_or_checked() {
    let app = TestApp::new().await;
    // Generated: whsec_ and 32 random bytes, different every time.
    let a = create_webhook(
        &app,
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/"}),
    )
    .await;
    let b = create_webhook(
        &app,
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/"}),
    )
    .await;
    for r in [&a, &b] {
        let secret = r.body["secret"].as_str().unwrap();
        assert!(secret.starts_with("whsec_"), "{secret}");
        assert!(
            wallet_ledger::outbox::signing::secret_key(secret).is_ok(),
            "{secret}"
        );
    }
    assert_ne!(a.body["secret"], b.body["secret"]);

    // Chosen by the caller: shown as given.
    let chosen = secret_of(32);
    let r = create_webhook(
        &app,
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "secret": chosen}),
    )
    .await;
    assert_eq!(r.body["secret"], json!(chosen));
    for bytes in [24, 64] {
        create_webhook(
            &app,
            json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "secret": secret_of(bytes)}),
        )
        .await;
    }
    let count = webhook_count(&app).await;
    for (case, bad) in [
        (
            "no prefix",
            "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0".to_owned(),
        ),
        ("not base64", "whsec_!!!not-base64!!!".to_owned()),
        ("too short", secret_of(23)),
        ("too long", secret_of(65)),
        ("empty", String::new()),
        ("prefix only", "whsec_".to_owned()),
    ] {
        let r = app
            .post(
                "/v1/webhooks",
                &json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "secret": bad}),
            )
            .await;
        assert_invalid(&r, "/secret", "secret", case);
    }
    assert_eq!(webhook_count(&app).await, count, "nothing stored");
    app.finish().await;
}

#[tokio::test]
async fn webhook_urls_are_checked() {
    let app = TestApp::new().await;
    for (case, url, code) in [
        ("ftp scheme", "ftp://hooks.example.com/in", "url_scheme"),
        ("file scheme", "file:///etc/passwd", "url_scheme"),
        ("javascript", "javascript:alert(1)", "url_scheme"),
        (
            "user and password",
            "https://user:pw@hooks.example.com/in",
            "url_credentials",
        ),
        (
            "user only",
            "https://user@hooks.example.com/in",
            "url_credentials",
        ),
        ("not a URL", "not a url", "url"),
        ("relative", "/hooks/in", "url"),
        ("empty", "", "url"),
    ] {
        let r = app
            .post("/v1/webhooks", &json!({"id": Uuid::new_v4(), "url": url}))
            .await;
        assert_invalid(&r, "/url", code, case);
    }
    let too_long = format!("https://hooks.example.com/{}", "a".repeat(2_100));
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": Uuid::new_v4(), "url": too_long}),
        )
        .await;
    assert_invalid(&r, "/url", "length", "too long");
    // Without an allow-list any public host is accepted...
    for url in [
        "https://hooks.example.com/in",
        "http://93.184.216.34:8080/in",
        "https://[2606:4700::1111]/in",
    ] {
        create_webhook(&app, json!({"id": Uuid::new_v4(), "url": url})).await;
    }
    // ...and no address of this machine or its network: a subscription would make this
    // server send signed requests there (server-side request forgery).
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/in",
        "http://172.16.5.4/in",
        "http://192.168.1.1/in",
        "http://100.64.0.1/in",
        "http://127.0.0.1:9000/in",
        "http://2130706433/in",
        "http://localhost:5432/",
        "http://api.localhost/in",
        "http://[::1]/in",
        "http://0.0.0.0/in",
        "http://[::ffff:10.0.0.1]/in",
        "http://[fd00::1]/in",
        "http://[fe80::1]/in",
        "http://224.0.0.1/in",
    ] {
        let r = app
            .post("/v1/webhooks", &json!({"id": Uuid::new_v4(), "url": url}))
            .await;
        assert_invalid(&r, "/url", "url_not_public", url);
    }
    // Several problems at once are all named.
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": Uuid::new_v4(), "url": "ftp://x", "event_types": ["nope"], "secret": "bad"}),
        )
        .await;
    assert_invalid(&r, "/url", "url_scheme", "several");
    assert_invalid(&r, "/event_types/0", "event_type", "several");
    assert_invalid(&r, "/secret", "secret", "several");
    assert_eq!(webhook_count(&app).await, 3);
    app.finish().await;
}

#[tokio::test]
async fn the_operators_allow_list_refuses_every_other_host() {
    let app = TestApp::with_config(HttpSettings {
        webhooks: WebhookPolicy {
            allowed_hosts: vec!["127.0.0.1:9000".into(), "*.example.com".into()],
        },
        ..Default::default()
    })
    .await;
    for url in [
        "http://127.0.0.1:9000/in",
        "https://hooks.example.com/in",
        "https://a.b.example.com/in",
        "http://HOOKS.EXAMPLE.COM/in",
        // Another spelling of 127.0.0.1, normalized by the URL parser.
        "http://2130706433:9000/in",
    ] {
        create_webhook(&app, json!({"id": Uuid::new_v4(), "url": url})).await;
    }
    for url in [
        "http://127.0.0.1:9001/in",
        "http://127.0.0.1/in",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost/in",
        "http://localhost:9000/in",
        "https://example.com/in",
        "https://evilexample.com/in",
        "https://hooks.example.com.evil.net/in",
        "http://[::1]:9000/in",
        "http://2130706433:9001/in",
    ] {
        let r = app
            .post("/v1/webhooks", &json!({"id": Uuid::new_v4(), "url": url}))
            .await;
        assert_invalid(&r, "/url", "url_not_allowed", url);
    }
    assert_eq!(webhook_count(&app).await, 5);
    app.finish().await;
}

#[tokio::test]
async fn unknown_event_types_are_refused_and_an_empty_list_means_all() {
    let app = TestApp::new().await;
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "event_types": ["transaction.settled"]}),
        )
        .await;
    assert_invalid(&r, "/event_types/0", "event_type", "unknown type");
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "event_types": ["hold.created", "Transaction.Posted"]}),
        )
        .await;
    assert_invalid(&r, "/event_types/1", "event_type", "wrong case");
    assert_eq!(webhook_count(&app).await, 0);
    let all = create_webhook(
        &app,
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "event_types": []}),
    )
    .await;
    assert_eq!(all.body["event_types"], json!([]));
    let every = create_webhook(
        &app,
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/", "event_types": EVENT_TYPES}),
    )
    .await;
    assert_eq!(every.body["event_types"], json!(EVENT_TYPES));
    app.finish().await;
}

#[tokio::test]
async fn reading_hides_the_secret_and_the_list_pages_newest_first() {
    let app = TestApp::new().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = Uuid::new_v4();
        create_webhook(
            &app,
            json!({"id": id, "url": format!("https://h{i}.example.com/in")}),
        )
        .await;
        ids.push(id);
    }
    let r = app.get(&format!("/v1/webhooks/{}", ids[0])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.body.get("secret").is_none(), "{}", r.text);
    assert!(!r.text.contains("whsec_"), "{}", r.text);
    assert_eq!(
        (&r.body["id"], &r.body["active_secrets"], &r.body["status"]),
        (&json!(ids[0]), &json!(1), &json!("active"))
    );

    let mut seen = Vec::new();
    let mut path = "/v1/webhooks?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert!(!r.text.contains("whsec_"), "a list shows no secret");
        let data = r.body["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(
            data.iter()
                .map(|w| w["id"].as_str().unwrap().parse::<Uuid>().unwrap()),
        );
        pages += 1;
        match r.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/webhooks?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let newest_first: Vec<Uuid> = ids.iter().rev().copied().collect();
    assert_eq!(seen, newest_first);
    let r = app.get("/v1/webhooks").await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 5);
    assert!(r.body["next_cursor"].is_null());
    app.finish().await;
}

#[tokio::test]
async fn deleting_a_webhook_is_idempotent_and_unknown_ids_are_404() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    create_webhook(&app, json!({"id": id, "url": "https://a.example.com/"})).await;
    let path = format!("/v1/webhooks/{id}");
    let r = delete(&app, &path).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (&r.body["id"], &r.body["status"]),
        (&json!(id), &json!("deleted"))
    );
    assert!(r.body.get("secret").is_none());
    let again = delete(&app, &path).await;
    assert_eq!(
        (again.status, &again.body["status"]),
        (StatusCode::OK, &json!("deleted")),
        "{}",
        again.text
    );
    assert_eq!(app.get(&path).await.body["status"], "deleted");
    let unknown = delete(&app, &format!("/v1/webhooks/{}", Uuid::new_v4())).await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    assert_eq!(unknown.content_type(), "application/problem+json");
    let unknown = app.get(&format!("/v1/webhooks/{}", Uuid::new_v4())).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    // Deleted, it is still listed (with its status).
    let list = app.get("/v1/webhooks").await;
    assert_eq!(list.body["data"][0]["status"], "deleted");
    app.finish().await;
}

#[tokio::test]
async fn rotating_the_secret_signs_with_two_and_drops_the_oldest() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    let created = create_webhook(&app, json!({"id": id, "url": "https://a.example.com/"})).await;
    let original = created.body["secret"].as_str().unwrap().to_owned();
    let path = format!("/v1/webhooks/{id}/rotate-secret");
    let stored = |app: &TestApp| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Vec<String>>(
                "select secrets from webhook_subscriptions where id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };

    // No body, an Idempotency-Key: a generated secret, shown once; both sign until the next
    // rotation.
    let keyed = |key: &'static str| {
        let (app, path) = (&app, path.clone());
        async move {
            app.raw(
                Method::POST,
                &path,
                &[("idempotency-key", key)],
                Body::empty(),
            )
            .await
        }
    };
    let first = keyed("rotation-1").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let second_secret = first.body["secret"].as_str().unwrap().to_owned();
    assert!(second_secret.starts_with("whsec_"));
    assert_ne!(second_secret, original);
    assert_eq!(first.body["active_secrets"], 2);
    assert_eq!(
        stored(&app).await,
        [second_secret.clone(), original.clone()]
    );
    let shown = app.get(&format!("/v1/webhooks/{id}")).await;
    assert_eq!(shown.body["active_secrets"], 2);
    assert!(shown.body.get("secret").is_none());
    // The same key again (the answer was lost): the same secret, the pair unchanged, so the
    // receivers' current secret is not dropped by a retry.
    for _ in 0..2 {
        let retry = keyed("rotation-1").await;
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
        assert_eq!(retry.body["secret"], json!(second_secret));
        assert_eq!(
            stored(&app).await,
            [second_secret.clone(), original.clone()]
        );
    }
    // Neither a secret nor a key: refused, since a retry could not be told from a new rotation.
    let r = app.post_empty(&path).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "id_required"),
        "{}",
        r.text
    );
    assert_eq!(
        stored(&app).await,
        [second_secret.clone(), original.clone()]
    );

    // A chosen secret: the oldest goes, two remain.
    let chosen = secret_of(40);
    let second = app.post(&path, &json!({"secret": chosen})).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(
        (&second.body["secret"], &second.body["active_secrets"]),
        (&json!(chosen), &json!(2))
    );
    assert_eq!(stored(&app).await, [chosen.clone(), second_secret]);

    // A bad chosen secret: 422, nothing changes.
    let r = app.post(&path, &json!({"secret": "whsec_short"})).await;
    assert_invalid(&r, "/secret", "secret", "bad rotation secret");
    assert_eq!(stored(&app).await[0], chosen);

    // Unknown or deleted webhook: 404.
    let r = app
        .raw(
            Method::POST,
            &format!("/v1/webhooks/{}/rotate-secret", Uuid::new_v4()),
            &[("idempotency-key", "rotation-2")],
            Body::empty(),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found"));
    assert_eq!(
        delete(&app, &format!("/v1/webhooks/{id}")).await.status,
        StatusCode::OK
    );
    let r = keyed("rotation-3").await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "not_found"),
        "{}",
        r.text
    );
    assert_eq!(
        stored(&app).await,
        Vec::<String>::new(),
        "nothing rotated once deleted, and its secrets are gone"
    );
    app.finish().await;
}

/// The stored row of a subscription as the database holds it, secrets and stored answer.
async fn subscription_row(app: &TestApp, id: Uuid) -> (Vec<String>, String, String, String) {
    sqlx::query_as(
        "select secrets, creation_request::text, creation_response, updated_at::text
         from webhook_subscriptions where id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_deleted_webhooks_secret_cannot_be_recovered_by_replaying_its_creation() {
    let app = TestApp::new().await;
    let chosen = secret_of(40);
    for body in [
        json!({"id": Uuid::new_v4(), "url": "https://a.example.com/"}),
        json!({"id": Uuid::new_v4(), "url": "https://b.example.com/", "secret": chosen}),
    ] {
        let id: Uuid = serde_json::from_value(body["id"].clone()).unwrap();
        let created = create_webhook(&app, body.clone()).await;
        let secret = created.body["secret"].as_str().unwrap().to_owned();
        // Before the delete, the replay answers the secret it made (it still signs).
        let replay = app.post("/v1/webhooks", &body).await;
        assert_eq!(replay.body["secret"], json!(secret), "{}", replay.text);
        assert_eq!(
            delete(&app, &format!("/v1/webhooks/{id}")).await.status,
            StatusCode::OK
        );

        let replay = app.post("/v1/webhooks", &body).await;
        assert_eq!(replay.status, StatusCode::OK, "{}", replay.text);
        assert!(replay.replayed());
        assert_eq!(replay.body["secret"], Value::Null, "{}", replay.text);
        assert!(!replay.text.contains(&secret), "{}", replay.text);
        let (secrets, request, response, _) = subscription_row(&app, id).await;
        assert!(secrets.is_empty(), "{secrets:?}");
        for stored in [request, response] {
            assert!(
                !stored.contains(&secret),
                "the row still holds the secret: {stored}"
            );
        }
    }
    app.finish().await;
}

#[tokio::test]
async fn a_creation_replay_shows_no_secret_that_was_rotated_away() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "url": "https://a.example.com/"});
    let original = create_webhook(&app, body.clone()).await.body["secret"].clone();
    let path = format!("/v1/webhooks/{id}/rotate-secret");
    for secret in [secret_of(40), secret_of(41)] {
        let r = app.post(&path, &json!({"secret": secret})).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let replay = app.post("/v1/webhooks", &body).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.text);
    assert_eq!(replay.body["secret"], Value::Null, "{}", replay.text);
    assert!(!replay.text.contains(original.as_str().unwrap()));
    app.finish().await;
}

#[tokio::test]
async fn a_retried_rotation_writes_nothing_and_says_it_is_a_replay() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    create_webhook(&app, json!({"id": id, "url": "https://a.example.com/"})).await;
    let path = format!("/v1/webhooks/{id}/rotate-secret");
    let first = app.post_with_key(&path, "rotate-once", &json!({})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert!(!first.replayed());
    let after_first = subscription_row(&app, id).await;
    let audits = |app: &TestApp| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from audit_log where action = 'webhook.rotate_secret'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let audited = audits(&app).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let retry = app.post_with_key(&path, "rotate-once", &json!({})).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
    assert!(
        retry.replayed(),
        "no Idempotent-Replayed on a retried rotation"
    );
    assert_eq!(
        retry.body, first.body,
        "the same answer, updated_at included"
    );
    assert_eq!(
        subscription_row(&app, id).await,
        after_first,
        "a replay writes nothing"
    );
    assert_eq!(audits(&app).await, audited);
    // The caller's own secret again is a retry too.
    let chosen = secret_of(40);
    let own = app.post(&path, &json!({"secret": chosen})).await;
    assert!(!own.replayed(), "{}", own.text);
    let row = subscription_row(&app, id).await;
    let again = app.post(&path, &json!({"secret": chosen})).await;
    assert_eq!(
        (again.status, again.replayed()),
        (StatusCode::OK, true),
        "{}",
        again.text
    );
    assert_eq!(subscription_row(&app, id).await, row);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Fan-out and deliveries.
// ---------------------------------------------------------------------------------------------

async fn fan_out(app: &TestApp) -> i64 {
    let mut conn = app.pool.acquire().await.unwrap();
    deliveries::fan_out(&mut conn, 100).await.unwrap()
}

/// `(event_id, subscription_id, status)` of every delivery.
async fn delivery_rows(app: &TestApp) -> BTreeSet<(Uuid, Uuid, String)> {
    let rows: Vec<(Uuid, Uuid, String)> =
        sqlx::query_as("select event_id, subscription_id, status from webhook_deliveries")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    rows.into_iter().collect()
}

async fn webhook(app: &TestApp, event_types: Value) -> Uuid {
    let id = Uuid::new_v4();
    create_webhook(
        app,
        json!({"id": id, "url": "https://hooks.example.com/in", "event_types": event_types}),
    )
    .await;
    id
}

/// Every page of `/v1/deliveries` with `query`, following the cursors.
async fn all_deliveries(app: &TestApp, query: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = format!("/v1/deliveries?limit={limit}&{query}");
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        let data = r.body["data"].as_array().unwrap();
        assert!(data.len() <= limit);
        out.extend(data.iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/deliveries?limit={limit}&cursor={cursor}&{query}"),
            None => return out,
        }
    }
}

#[tokio::test]
async fn fan_out_makes_one_delivery_per_event_and_matching_active_subscription() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    // An event from before every subscription: nobody gets it.
    app.fund("w1", 1_000).await;
    let early = events(&app).await[0].id;

    let all = webhook(&app, json!([])).await;
    let posted_only = webhook(&app, json!(["transaction.posted"])).await;
    let frozen_only = webhook(&app, json!(["account.frozen"])).await;
    let deleted = webhook(&app, json!([])).await;
    assert_eq!(
        delete(&app, &format!("/v1/webhooks/{deleted}"))
            .await
            .status,
        StatusCode::OK
    );

    let transfer = transfer_ok(&app, "w1", "w2", 100).await;
    let h = hold(&app, "w1", "w2", 50, None).await;
    assert_eq!(
        app.post_empty("/v1/accounts/w2/freeze").await.status,
        StatusCode::OK
    );
    let evs = events(&app).await;
    assert_eq!(evs.len(), 4);
    let posted_event = the_event(&app, "transaction.posted", transfer).await.id;
    let hold_event = the_event(&app, "hold.created", h).await.id;
    let frozen_event = evs.iter().find(|e| e.kind == "account.frozen").unwrap().id;

    assert_eq!(fan_out(&app).await, 4, "every event is handled once");
    let pending = |e: Uuid, s: Uuid| (e, s, "pending".to_owned());
    let expected: BTreeSet<(Uuid, Uuid, String)> = [
        pending(posted_event, all),
        pending(hold_event, all),
        pending(frozen_event, all),
        pending(posted_event, posted_only),
        pending(frozen_event, frozen_only),
    ]
    .into_iter()
    .collect();
    assert_eq!(delivery_rows(&app).await, expected);
    assert!(
        !delivery_rows(&app)
            .await
            .iter()
            .any(|(e, _, _)| *e == early),
        "an event from before a subscription is not sent to it"
    );
    let unmarked: i64 =
        sqlx::query_scalar("select count(*) from outbox_events where fanned_out_at is null")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(unmarked, 0);

    // Fanning out again does nothing; the next event goes to the subscriptions of its time.
    assert_eq!(fan_out(&app).await, 0);
    assert_eq!(delivery_rows(&app).await.len(), 5);
    let late = webhook(&app, json!(["transaction.posted"])).await;
    let next = transfer_ok(&app, "w1", "w2", 1).await;
    let next_event = the_event(&app, "transaction.posted", next).await.id;
    assert_eq!(fan_out(&app).await, 1);
    let got: BTreeSet<Uuid> = delivery_rows(&app)
        .await
        .into_iter()
        .filter(|(e, _, _)| *e == next_event)
        .map(|(_, s, _)| s)
        .collect();
    assert_eq!(got, [all, posted_only, late].into_iter().collect());
    assert!(
        !delivery_rows(&app)
            .await
            .iter()
            .any(|(e, s, _)| *s == late && *e != next_event),
        "a subscription created after an event does not get it"
    );
    app.finish().await;
}

#[tokio::test]
async fn deleting_a_webhook_cancels_its_pending_deliveries() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let doomed = webhook(&app, json!([])).await;
    let kept = webhook(&app, json!([])).await;
    app.fund("w1", 100).await;
    transfer_ok(&app, "w1", "w2", 10).await;
    assert_eq!(fan_out(&app).await, 2);
    assert_eq!(delivery_rows(&app).await.len(), 4);

    assert_eq!(
        delete(&app, &format!("/v1/webhooks/{doomed}")).await.status,
        StatusCode::OK
    );
    let cancelled = all_deliveries(&app, &format!("webhook_id={doomed}"), 50).await;
    assert_eq!(cancelled.len(), 2);
    for d in &cancelled {
        assert_eq!(d["status"], "cancelled", "{d}");
        assert!(d["next_attempt_at"].is_null(), "{d}");
        assert!(d["last_error"].is_string(), "{d}");
    }
    let pending = all_deliveries(&app, &format!("webhook_id={kept}"), 50).await;
    assert!(pending.iter().all(|d| d["status"] == "pending"));
    assert!(pending.iter().all(|d| d["next_attempt_at"].is_string()));

    // A cancelled delivery cannot be sent again: there is nowhere to send it.
    let id = cancelled[0]["id"].as_str().unwrap();
    let r = app
        .post_empty(&format!("/v1/deliveries/{id}/redeliver"))
        .await;
    assert_eq!(
        (r.status, r.code(), &r.body["current_status"]),
        (
            StatusCode::CONFLICT,
            "invalid_transition",
            &json!("cancelled")
        ),
        "{}",
        r.text
    );
    assert_eq!(
        app.get(&format!("/v1/deliveries/{id}")).await.body["status"],
        "cancelled"
    );
    // New events after the delete go only to the remaining subscription.
    transfer_ok(&app, "w1", "w2", 10).await;
    assert_eq!(fan_out(&app).await, 1);
    assert_eq!(
        all_deliveries(&app, &format!("webhook_id={doomed}"), 50)
            .await
            .len(),
        2
    );
    assert_eq!(
        all_deliveries(&app, &format!("webhook_id={kept}"), 50)
            .await
            .len(),
        3
    );
    app.finish().await;
}

#[tokio::test]
async fn deliveries_are_listed_newest_first_filtered_and_paged() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let a = webhook(&app, json!([])).await;
    let b = webhook(&app, json!(["transaction.posted"])).await;
    app.fund("w1", 1_000).await;
    let mut transfers = Vec::new();
    for _ in 0..3 {
        transfers.push(transfer_ok(&app, "w1", "w2", 10).await);
    }
    hold(&app, "w1", "w2", 10, None).await;
    assert_eq!(fan_out(&app).await, 5);
    // a: 5 events; b: the 4 transaction.posted.
    let seqs: Vec<(i64, Uuid)> =
        sqlx::query_as("select seq, id from webhook_deliveries order by seq desc")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(seqs.len(), 9);

    let everything = all_deliveries(&app, "", 2).await;
    let listed: Vec<Uuid> = everything
        .iter()
        .map(|d| d["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        listed,
        seqs.iter().map(|(_, id)| *id).collect::<Vec<_>>(),
        "newest first, each once across pages"
    );
    let d = &everything[0];
    for field in [
        "id",
        "event_id",
        "event_type",
        "subscription_id",
        "url",
        "status",
        "attempts",
        "created_at",
    ] {
        assert!(!d[field].is_null(), "{field} in {d}");
    }
    assert_eq!(d["attempts"], 0);

    assert_eq!(
        all_deliveries(&app, &format!("webhook_id={a}"), 50)
            .await
            .len(),
        5
    );
    let of_b = all_deliveries(&app, &format!("webhook_id={b}"), 3).await;
    assert_eq!(of_b.len(), 4);
    assert!(
        of_b.iter()
            .all(|d| d["event_type"] == "transaction.posted" && d["subscription_id"] == json!(b))
    );
    let event = the_event(&app, "transaction.posted", transfers[1]).await.id;
    let of_event = all_deliveries(&app, &format!("event_id={event}"), 50).await;
    let subscribers: BTreeSet<String> = of_event
        .iter()
        .map(|d| d["subscription_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        subscribers,
        [a.to_string(), b.to_string()].into_iter().collect()
    );
    assert_eq!(
        all_deliveries(&app, &format!("event_id={event}&webhook_id={b}"), 50)
            .await
            .len(),
        1
    );
    assert_eq!(all_deliveries(&app, "status=pending", 4).await.len(), 9);
    for status in ["delivered", "dead", "cancelled"] {
        assert!(
            all_deliveries(&app, &format!("status={status}"), 50)
                .await
                .is_empty()
        );
    }
    assert!(
        all_deliveries(&app, &format!("event_id={}", Uuid::new_v4()), 50)
            .await
            .is_empty()
    );
    app.finish().await;
}

#[tokio::test]
async fn a_delivery_shows_its_attempts_and_can_be_redelivered() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let hook = webhook(&app, json!([])).await;
    app.fund("w1", 100).await;
    assert_eq!(fan_out(&app).await, 1);
    let listed = all_deliveries(&app, "", 50).await;
    assert_eq!(listed.len(), 1);
    let id: Uuid = listed[0]["id"].as_str().unwrap().parse().unwrap();
    let path = format!("/v1/deliveries/{id}");
    let r = app.get(&path).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (
            &r.body["status"],
            &r.body["attempts"],
            &r.body["attempts_log"],
            &r.body["subscription_id"],
            &r.body["event_type"]
        ),
        (
            &json!("pending"),
            &json!(0),
            &json!([]),
            &json!(hook),
            &json!("transaction.posted")
        ),
        "{}",
        r.text
    );

    // One failed attempt, recorded the way the dispatcher does.
    let mut conn = app.pool.acquire().await.unwrap();
    let claimed = deliveries::claim(&mut conn, 10, 10, &[], Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let started = Utc::now();
    let recorded = deliveries::record(
        &mut conn,
        &claimed[0],
        started,
        12,
        &deliveries::Attempt::Retry {
            status: Some(503),
            error: "HTTP 503".into(),
            at: Utc::now() + TimeDelta::seconds(60),
        },
    )
    .await
    .unwrap();
    assert!(recorded);
    drop(conn);
    let r = app.get(&path).await;
    assert_eq!(
        (
            &r.body["status"],
            &r.body["attempts"],
            &r.body["last_status"]
        ),
        (&json!("pending"), &json!(1), &json!(503)),
        "{}",
        r.text
    );
    let log = r.body["attempts_log"].as_array().unwrap();
    assert_eq!(log.len(), 1, "{}", r.text);
    assert_eq!(
        (&log[0]["status"], &log[0]["duration_ms"], &log[0]["error"]),
        (&json!(503), &json!(12), &json!("HTTP 503"))
    );
    assert!(time(&log[0]["started_at"]) <= Utc::now());

    // Redeliver: due now with a fresh budget; the log stays.
    let r = app.post_empty(&format!("{path}/redeliver")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (&r.body["status"], &r.body["attempts"]),
        (&json!("pending"), &json!(0))
    );
    assert!(time(&r.body["next_attempt_at"]) <= Utc::now());
    assert_eq!(r.body["attempts_log"].as_array().unwrap().len(), 1);
    let r = app
        .post_empty(&format!("/v1/deliveries/{}/redeliver", Uuid::new_v4()))
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found"));
    let r = app.get(&format!("/v1/deliveries/{}", Uuid::new_v4())).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

#[tokio::test]
async fn a_finished_delivery_of_a_deleted_webhook_cannot_be_redelivered() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let hook = webhook(&app, json!([])).await;
    app.fund("w1", 100).await;
    app.fund("w1", 100).await;
    assert_eq!(fan_out(&app).await, 2);
    // One delivery ends dead (the receiver answered 410), the other delivered.
    let mut conn = app.pool.acquire().await.unwrap();
    let claimed = deliveries::claim(&mut conn, 10, 10, &[], Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let dead = deliveries::Attempt::Dead {
        status: Some(410),
        error: "the receiver answered 410 Gone".into(),
    };
    let delivered = deliveries::Attempt::Delivered { status: 200 };
    assert!(
        deliveries::record(&mut conn, &claimed[0], Utc::now(), 5, &dead)
            .await
            .unwrap()
    );
    assert!(
        deliveries::record(&mut conn, &claimed[1], Utc::now(), 5, &delivered)
            .await
            .unwrap()
    );
    drop(conn);
    assert_eq!(
        delete(&app, &format!("/v1/webhooks/{hook}")).await.status,
        StatusCode::OK
    );
    // A delivery of a deleted webhook, whatever its state, is never made pending again nor
    // handed to a dispatcher: there is nowhere to send it.
    let answers: Vec<(StatusCode, String, String)> = {
        let mut out = Vec::new();
        for d in &claimed {
            let r = app
                .post_empty(&format!("/v1/deliveries/{}/redeliver", d.id))
                .await;
            out.push((r.status, r.code().to_owned(), r.text.clone()));
        }
        out
    };
    let mut conn = app.pool.acquire().await.unwrap();
    let sent_again: Vec<String> =
        deliveries::claim(&mut conn, 10, 10, &[], Duration::from_secs(30))
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.url)
            .collect();
    for (status, code, text) in &answers {
        assert_eq!(
            (*status, code.as_str()),
            (StatusCode::CONFLICT, "invalid_transition"),
            "redelivering a delivery of a deleted webhook: {text}"
        );
    }
    assert!(
        sent_again.is_empty(),
        "nothing is sent to a deleted webhook, yet these were claimed: {sent_again:?}"
    );
    drop(conn);
    app.finish().await;
}

#[tokio::test]
async fn a_retried_rotation_keeps_the_previous_secret() {
    let app = TestApp::new().await;
    let id = Uuid::new_v4();
    let created = create_webhook(&app, json!({"id": id, "url": "https://a.example.com/"})).await;
    let original = created.body["secret"].as_str().unwrap().to_owned();
    let path = format!("/v1/webhooks/{id}/rotate-secret");
    let chosen = secret_of(32);
    let first = app.post(&path, &json!({"secret": chosen})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    // The caller did not see the answer and sends the same request again.
    let retry = app.post(&path, &json!({"secret": chosen})).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
    let secrets: Vec<String> =
        sqlx::query_scalar("select secrets from webhook_subscriptions where id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    // A retried rotation (the same secret again, after a lost answer) changes nothing.
    assert_eq!(
        secrets,
        [chosen.clone(), original],
        "a retried rotation must keep the previous secret"
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Bad input on the new endpoints.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn bad_input_on_webhook_and_delivery_endpoints_is_refused_and_writes_nothing() {
    let app = TestApp::new().await;
    let hook = Uuid::new_v4();
    create_webhook(&app, json!({"id": hook, "url": "https://a.example.com/"})).await;
    let rotate = format!("/v1/webhooks/{hook}/rotate-secret");
    let json_type = ("content-type", "application/json");
    // (case, method, path, headers, body, status, code, field)
    type Case<'a> = (
        &'a str,
        Method,
        String,
        Vec<(&'a str, &'a str)>,
        String,
        u16,
        &'a str,
        Option<&'a str>,
    );
    let id = Uuid::new_v4();
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            r#"{"url": "#.into(),
            400,
            "malformed_json",
            None,
        ),
        (
            "trailing garbage",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            format!(r#"{{"id": "{id}", "url": "https://a.example.com/"}} x"#),
            400,
            "malformed_json",
            None,
        ),
        (
            "empty body",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            String::new(),
            400,
            "malformed_json",
            None,
        ),
        (
            "unknown field",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            json!({"id": id, "url": "https://a.example.com/", "events": []}).to_string(),
            422,
            "validation_failed",
            Some("/events"),
        ),
        (
            "missing url",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            json!({"id": id}).to_string(),
            422,
            "validation_failed",
            Some("/url"),
        ),
        (
            "url as a number",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            json!({"id": id, "url": 5}).to_string(),
            422,
            "validation_failed",
            Some("/url"),
        ),
        (
            "event_types as a string",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            json!({"id": id, "url": "https://a.example.com/", "event_types": "transaction.posted"})
                .to_string(),
            422,
            "validation_failed",
            Some("/event_types"),
        ),
        (
            "id not a UUID",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            json!({"id": "hook-1", "url": "https://a.example.com/"}).to_string(),
            422,
            "validation_failed",
            Some("/id"),
        ),
        (
            "a JSON array",
            Method::POST,
            "/v1/webhooks".into(),
            vec![json_type],
            "[]".into(),
            422,
            "validation_failed",
            None,
        ),
        (
            "text/plain",
            Method::POST,
            "/v1/webhooks".into(),
            vec![("content-type", "text/plain")],
            json!({"id": id, "url": "https://a.example.com/"}).to_string(),
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "no content type",
            Method::POST,
            "/v1/webhooks".into(),
            vec![],
            json!({"id": id, "url": "https://a.example.com/"}).to_string(),
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "rotate: malformed JSON",
            Method::POST,
            rotate.clone(),
            vec![json_type],
            "{".into(),
            400,
            "malformed_json",
            None,
        ),
        (
            "rotate: unknown field",
            Method::POST,
            rotate.clone(),
            vec![json_type],
            json!({"key": "x"}).to_string(),
            422,
            "validation_failed",
            Some("/key"),
        ),
        (
            "rotate: text/plain",
            Method::POST,
            rotate.clone(),
            vec![("content-type", "text/plain")],
            json!({}).to_string(),
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "rotate: a body without content type",
            Method::POST,
            rotate.clone(),
            vec![],
            json!({}).to_string(),
            415,
            "unsupported_media_type",
            None,
        ),
        (
            "GET a webhook by a non-UUID id",
            Method::GET,
            "/v1/webhooks/not-a-uuid".into(),
            vec![],
            String::new(),
            404,
            "not_found",
            None,
        ),
        (
            "DELETE a webhook by a non-UUID id",
            Method::DELETE,
            "/v1/webhooks/not-a-uuid".into(),
            vec![],
            String::new(),
            404,
            "not_found",
            None,
        ),
        (
            "rotate a non-UUID id",
            Method::POST,
            "/v1/webhooks/not-a-uuid/rotate-secret".into(),
            vec![],
            String::new(),
            404,
            "not_found",
            None,
        ),
        (
            "GET a delivery by a non-UUID id",
            Method::GET,
            "/v1/deliveries/not-a-uuid".into(),
            vec![],
            String::new(),
            404,
            "not_found",
            None,
        ),
        (
            "redeliver a non-UUID id",
            Method::POST,
            "/v1/deliveries/not-a-uuid/redeliver".into(),
            vec![],
            String::new(),
            404,
            "not_found",
            None,
        ),
        (
            "status=bogus",
            Method::GET,
            "/v1/deliveries?status=bogus".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/status"),
        ),
        (
            "limit=0",
            Method::GET,
            "/v1/deliveries?limit=0".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/limit"),
        ),
        (
            "limit=501",
            Method::GET,
            "/v1/deliveries?limit=501".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/limit"),
        ),
        (
            "limit=abc",
            Method::GET,
            "/v1/deliveries?limit=abc".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/limit"),
        ),
        (
            "webhook_id not a UUID",
            Method::GET,
            "/v1/deliveries?webhook_id=nope".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/webhook_id"),
        ),
        (
            "event_id not a UUID",
            Method::GET,
            "/v1/deliveries?event_id=nope".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/event_id"),
        ),
        (
            "cursor not ours",
            Method::GET,
            "/v1/deliveries?cursor=abc".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/cursor"),
        ),
        (
            "unknown query parameter",
            Method::GET,
            "/v1/deliveries?state=pending".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            None,
        ),
        (
            "webhooks limit=0",
            Method::GET,
            "/v1/webhooks?limit=0".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/limit"),
        ),
        (
            "webhooks cursor not ours",
            Method::GET,
            "/v1/webhooks?cursor=x".into(),
            vec![],
            String::new(),
            400,
            "invalid_query",
            Some("/cursor"),
        ),
        (
            "PUT a webhook",
            Method::PUT,
            format!("/v1/webhooks/{hook}"),
            vec![json_type],
            "{}".into(),
            405,
            "method_not_allowed",
            None,
        ),
    ];
    let secrets_before: Vec<String> =
        sqlx::query_scalar("select secrets from webhook_subscriptions where id = $1")
            .bind(hook)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    for (case, method, path, headers, body, status, code, field) in cases {
        let r = app.raw(method, &path, &headers, body).await;
        assert_eq!(r.status.as_u16(), status, "{case}: {}", r.text);
        assert_eq!(
            r.content_type(),
            "application/problem+json",
            "{case}: {}",
            r.text
        );
        assert_eq!(r.code(), code, "{case}: {}", r.text);
        assert_eq!(r.body["status"], json!(status), "{case}: {}", r.text);
        if let Some(field) = field {
            assert!(
                field_codes(&r).iter().any(|(f, _)| f == field),
                "{case}: expected {field} among {:?}",
                field_codes(&r)
            );
        }
    }
    assert_eq!(webhook_count(&app).await, 1, "nothing created");
    let secrets_after: Vec<String> =
        sqlx::query_scalar("select secrets from webhook_subscriptions where id = $1")
            .bind(hook)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(secrets_after, secrets_before, "nothing rotated");
    assert_eq!(
        app.get(&format!("/v1/webhooks/{hook}")).await.body["status"],
        "active"
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Read in the code, confirmed by these tests, and fixed.
// ---------------------------------------------------------------------------------------------

/// Two dispatchers and a redelivery between their claims: both claims have attempt number 1
/// (a redelivery starts the count again), so a guard on the attempt number let the first
/// claim's late result overwrite the second's. Each claim's own id decides now.
#[tokio::test]
async fn a_late_result_of_a_claim_taken_over_by_a_redelivery_changes_nothing() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    webhook(&app, json!([])).await;
    app.fund("w1", 100).await;
    assert_eq!(fan_out(&app).await, 1);
    let mut conn = app.pool.acquire().await.unwrap();
    let lease = Duration::from_secs(30);
    let first = deliveries::claim(&mut conn, 10, 10, &[], lease)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    // An operator redelivers while the first dispatcher's request is still out.
    let r = app
        .post_empty(&format!("/v1/deliveries/{}/redeliver", first[0].id))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let second = deliveries::claim(&mut conn, 10, 10, &[], lease)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!((first[0].attempts, second[0].attempts), (1, 1));
    // The first claim's answer comes while the second is still out: recorded as an attempt,
    // but it no longer decides the delivery's state...
    let failed = deliveries::Attempt::Dead {
        status: Some(400),
        error: "the receiver answered 400 Bad Request (final)".into(),
    };
    assert!(
        !deliveries::record(&mut conn, &first[0], Utc::now(), 5, &failed)
            .await
            .unwrap()
    );
    // ...the second, the latest claim, does.
    let delivered = deliveries::Attempt::Delivered { status: 200 };
    assert!(
        deliveries::record(&mut conn, &second[0], Utc::now(), 5, &delivered)
            .await
            .unwrap()
    );
    let r = app.get(&format!("/v1/deliveries/{}", first[0].id)).await;
    assert_eq!(r.body["status"], "delivered", "{}", r.text);
    drop(conn);
    app.finish().await;
}

/// A write transaction that began before a subscription was created and committed after it:
/// its event committed while the subscription existed, so the subscription gets it. (The event's
/// `created_at` is its transaction's start, earlier than the subscription's: comparing times
/// skipped it.)
#[tokio::test]
async fn an_event_committed_after_a_subscription_was_created_reaches_it() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 1_000).await;
    assert_eq!(
        fan_out(&app).await,
        1,
        "the funding event, before any subscription"
    );
    // A long write transaction: begun, its transfer written, not committed.
    let mut long = app.pool.begin().await.unwrap();
    sqlx::query("select now()")
        .execute(&mut *long)
        .await
        .unwrap();
    let request: wallet_ledger::http::requests::TransferRequest = serde_json::from_value(
        json!({"id": Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 100}),
    )
    .unwrap();
    let key = wallet_ledger::http::extract::IdempotencyKey {
        key: None,
        owner: "default".into(),
    };
    let transfer = request
        .into_new(
            &key,
            wallet_ledger::http::settings::HttpSettings::default().create_policy(),
        )
        .unwrap();
    let written = wallet_ledger::ledger::posting::create_many_in(
        &mut crate::backend::db(&mut long),
        &[transfer],
        wallet_ledger::ledger::posting::Mode::Atomic,
    )
    .await
    .unwrap();
    assert!(matches!(
        written,
        wallet_ledger::ledger::posting::BatchResult::Done(_)
    ));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let hook = webhook(&app, json!([])).await;
    long.commit().await.unwrap();
    // Made after the subscription: delivered to it too.
    app.fund("w2", 5).await;
    fan_out(&app).await;
    let rows = delivery_rows(&app).await;
    let to_hook = rows.iter().filter(|(_, s, _)| *s == hook).count();
    assert_eq!(
        to_hook, 2,
        "the long transaction's event and the later one: {rows:?}"
    );
    app.finish().await;
}

/// A body of 20,000 bad event types answers a bounded 422: the first 100 errors and the count.
#[tokio::test]
async fn twenty_thousand_bad_event_types_answer_a_bounded_422() {
    let app = TestApp::new().await;
    let bad: Vec<String> = (0..20_000).map(|i| format!("nope.{i}")).collect();
    let r = app
        .post(
            "/v1/webhooks",
            &json!({"id": Uuid::new_v4(), "url": "https://hooks.example.com/in", "event_types": bad}),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed")
    );
    assert_eq!(r.body["errors"].as_array().unwrap().len(), 100);
    assert_eq!(
        r.body["detail"],
        "20000 fields are invalid; the first 100 are listed"
    );
    assert!(r.text.len() < 20_000, "{} bytes", r.text.len());
    app.finish().await;
}
