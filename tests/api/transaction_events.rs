//! `GET /v1/transactions/{id}/events`: a transaction's outbox events, oldest first, each with
//! its webhook deliveries as `/v1/deliveries` lists them; paged per transaction; 404 for a
//! transaction that does not exist; admin only, like the deliveries. Runs on Citus too
//! (tests/citus), where the outbox is a plain table on the coordinator.

use super::common::{TestApp, TestResponse, api_key, assert_problem};
use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;
use wallet_ledger::api_keys::Scope;
use wallet_ledger::outbox::deliveries;

/// The event id the ledger derives (docs/outbox.md): UUIDv5 of the type and the change's key.
fn event_id(kind: &str, transaction: Uuid) -> Uuid {
    let namespace = Uuid::parse_str("3f0c2b7e-8d41-4a96-b5e3-1c7a9e2d6f48").unwrap();
    Uuid::new_v5(&namespace, format!("{kind}\n{transaction}").as_bytes())
}

async fn subscribe(app: &TestApp, event_types: Option<&[&str]>) -> Uuid {
    let id = Uuid::new_v4();
    let mut body = json!({"id": id, "url": format!("https://hooks.example.com/{id}")});
    if let Some(types) = event_types {
        body["event_types"] = json!(types);
    }
    let r = app.post("/v1/webhooks", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

async fn fan_out(app: &TestApp) {
    let mut conn = app.pool.acquire().await.unwrap();
    deliveries::fan_out(&mut conn, 1_000).await.unwrap();
}

/// The events page of `transaction` at `query`, asserted 200.
async fn events(app: &TestApp, transaction: Uuid, query: &str) -> Value {
    let r = app
        .get(&format!("/v1/transactions/{transaction}/events{query}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body
}

fn types(page: &Value) -> Vec<&str> {
    let data = page["data"].as_array().unwrap();
    data.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// A hold captured: two events, each fanned out to the subscriptions that want it, listed with
/// the deliveries exactly as `/v1/deliveries?event_id=` shows them; nothing of other
/// transactions; a dead delivery's error and attempts as recorded.
#[tokio::test]
async fn a_transactions_events_carry_their_deliveries_oldest_first() {
    let app = TestApp::new().await;
    let every = subscribe(&app, None).await;
    let posted_only = subscribe(&app, Some(&["transaction.posted"])).await;
    app.create_wallet("te-a").await;
    app.create_wallet("te-c").await;
    app.fund("te-a", 10_000).await;
    let hold = Uuid::new_v4();
    let body =
        json!({"id": hold, "from": "te-a", "to": "te-c", "amount": 700, "status": "pending"});
    assert_eq!(app.post("/v1/transfers", &body).await.status, 201);

    // Written with the hold, not yet handled by a dispatcher.
    let page = events(&app, hold, "").await;
    assert_eq!(types(&page), ["hold.created"], "{page}");
    let created = &page["data"][0];
    assert_eq!(created["id"], json!(event_id("hold.created", hold)));
    assert_eq!(created["fanned_out_at"], Value::Null);
    assert_eq!(created["streamed_at"], Value::Null);
    assert_eq!(created["account_id"], Value::Null);
    assert_eq!(
        (&created["deliveries_total"], &created["deliveries"]),
        (&json!(0), &json!([]))
    );

    let r = app
        .post(&format!("/v1/transactions/{hold}/post"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    fan_out(&app).await;
    let posted = event_id("transaction.posted", hold);
    sqlx::query(
        "update webhook_deliveries set status = 'dead', attempts = 15, last_status = 500,
                last_error = 'HTTP 500 from the receiver'
         where event_id = $1 and subscription_id = $2",
    )
    .bind(posted)
    .bind(every)
    .execute(&app.pool)
    .await
    .unwrap();

    let page = events(&app, hold, "").await;
    assert_eq!(types(&page), ["hold.created", "transaction.posted"]);
    assert_eq!(page["next_cursor"], Value::Null);
    for (event, subscriptions) in page["data"]
        .as_array()
        .unwrap()
        .iter()
        .zip([vec![every], vec![every, posted_only]])
    {
        assert!(event["fanned_out_at"].is_string(), "{event}");
        let listed = app
            .get(&format!(
                "/v1/deliveries?event_id={}",
                event["id"].as_str().unwrap()
            ))
            .await;
        let mut expected = listed.body["data"].as_array().unwrap().clone();
        expected.reverse(); // that list is newest first, the event's oldest first
        assert_eq!(event["deliveries"], json!(expected), "{event}");
        assert_eq!(event["deliveries_total"], json!(subscriptions.len()));
        let mut to: Vec<Uuid> = expected
            .iter()
            .map(|d| d["subscription_id"].as_str().unwrap().parse().unwrap())
            .collect();
        to.sort();
        let mut subscriptions = subscriptions.clone();
        subscriptions.sort();
        assert_eq!(to, subscriptions, "{event}");
    }
    let dead = page["data"][1]["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["subscription_id"] == json!(every))
        .unwrap();
    assert_eq!(
        (
            &dead["status"],
            &dead["attempts"],
            &dead["last_error"],
            &dead["next_attempt_at"]
        ),
        (
            &json!("dead"),
            &json!(15),
            &json!("HTTP 500 from the receiver"),
            &Value::Null
        )
    );
    assert_eq!(
        dead["url"],
        json!(format!("https://hooks.example.com/{every}"))
    );
    app.finish().await;
}

/// A refusal is a transaction too: its `transaction.rejected` event is listed. An overdraft
/// adds the wallet's `account.negative_balance`, which names the wallet.
#[tokio::test]
async fn refusals_and_negative_balances_are_listed_with_their_transaction() {
    let app = TestApp::new().await;
    app.create_wallet("te-poor").await;
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "te-overdraft", "currency": "SAR", "type": "wallet", "overdraft_limit": 1000}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let refused = Uuid::new_v4();
    let r = app.transfer(refused, "te-poor", "te-overdraft", 500).await;
    assert_problem(
        &r,
        422,
        "insufficient_funds",
        "a transfer from an empty wallet",
    );
    let page = events(&app, refused, "").await;
    assert_eq!(types(&page), ["transaction.rejected"]);
    assert_eq!(
        page["data"][0]["id"],
        json!(event_id("transaction.rejected", refused))
    );

    let overdraft = Uuid::new_v4();
    let r = app
        .transfer(overdraft, "te-overdraft", "te-poor", 300)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let page = events(&app, overdraft, "").await;
    let mut listed = types(&page);
    listed.sort();
    assert_eq!(listed, ["account.negative_balance", "transaction.posted"]);
    let crossing = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "account.negative_balance")
        .unwrap();
    assert_eq!(crossing["account_id"], json!("te-overdraft"));
    app.finish().await;
}

/// Paged with `limit` and `cursor` like every list; a cursor is one transaction's, and an
/// event lists its first 20 deliveries with the count of all of them.
#[tokio::test]
async fn events_page_by_cursor_and_an_event_lists_at_most_20_deliveries() {
    let app = TestApp::new().await;
    for _ in 0..21 {
        subscribe(&app, None).await;
    }
    app.create_wallet("te-b").await;
    app.create_wallet("te-d").await;
    app.fund("te-b", 10_000).await;
    let hold = Uuid::new_v4();
    let body =
        json!({"id": hold, "from": "te-b", "to": "te-d", "amount": 100, "status": "pending"});
    assert_eq!(app.post("/v1/transfers", &body).await.status, 201);
    let r = app
        .post_empty(&format!("/v1/transactions/{hold}/void"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    fan_out(&app).await;

    let first = events(&app, hold, "?limit=1").await;
    assert_eq!(types(&first), ["hold.created"]);
    let created = &first["data"][0];
    assert_eq!(created["deliveries_total"], json!(21));
    assert_eq!(created["deliveries"].as_array().unwrap().len(), 20);
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let second = events(&app, hold, &format!("?limit=1&cursor={cursor}")).await;
    assert_eq!(types(&second), ["transaction.voided"]);
    assert_eq!(second["next_cursor"], Value::Null);

    // Another transaction's cursor, or a made-up one, names no position in this list: refused
    // as `/v1/deliveries` refuses a cursor that is not its own.
    let other = Uuid::new_v4();
    assert_eq!(app.transfer(other, "te-b", "te-d", 1).await.status, 201);
    let refused = app.get("/v1/deliveries?cursor=5").await;
    for query in [format!("?cursor={cursor}"), "?cursor=5".to_owned()] {
        let path = format!("/v1/transactions/{other}/events{query}");
        let r = app.get(&path).await;
        assert_problem(&r, refused.status.as_u16(), refused.code(), &path);
        assert_eq!(r.body["errors"][0]["code"], json!("cursor"), "{path}");
    }
    app.finish().await;
}

/// 404 problem+json for an id that names no transaction (a malformed one included); bad paging
/// is refused first, as the deliveries list refuses it; a read key is refused like there.
#[tokio::test]
async fn unknown_transactions_bad_paging_and_read_keys_are_refused() {
    let app = TestApp::new().await;
    for id in [Uuid::new_v4().to_string(), "not-a-uuid".to_owned()] {
        let path = format!("/v1/transactions/{id}/events");
        assert_problem(&app.get(&path).await, 404, "not_found", &path);
    }
    // Bad paging answers what the deliveries list answers for the same query (a 4xx problem
    // with a stable code), before the unknown id is looked up.
    for query in ["limit=0", "limit=501", "limit=x", "page=2", "cursor=5"] {
        let path = format!("/v1/transactions/{}/events?{query}", Uuid::new_v4());
        let r = app.get(&path).await;
        let deliveries = app.get(&format!("/v1/deliveries?{query}")).await;
        assert!(
            r.status.is_client_error() && r.status != 404,
            "{path}: {}",
            r.text
        );
        assert_problem(&r, deliveries.status.as_u16(), deliveries.code(), &path);
        let field_and_code = |r: &TestResponse| {
            let errors = r.body["errors"].as_array().cloned().unwrap_or_default();
            let pairs = errors
                .iter()
                .map(|e| (e["field"].clone(), e["code"].clone()));
            pairs.collect::<Vec<_>>()
        };
        assert_eq!(field_and_code(&r), field_and_code(&deliveries), "{path}");
    }
    let read = api_key(&app.pool, "te-reader", Scope::Read).await;
    let bearer = format!("Bearer {read}");
    let path = format!("/v1/transactions/{}/events", Uuid::new_v4());
    let r = app
        .raw(
            axum::http::Method::GET,
            &path,
            &[("authorization", &bearer)],
            axum::body::Body::empty(),
        )
        .await;
    assert_problem(&r, 403, "insufficient_scope", "a read key");
    app.finish().await;
}
