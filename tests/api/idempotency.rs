//! Every row of the contract's idempotency table, against the real database.

use super::common::{TestApp, TestResponse};
use axum::http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::ledger::ids::id_from_idempotency_key;

async fn transactions_with(app: &TestApp, id: Uuid) -> i64 {
    sqlx::query_scalar("select count(*) from transactions where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn first_request_is_201_and_the_same_request_later_replays_the_same_body() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 10_000).await;

    let id = Uuid::new_v4();
    let first = app.transfer(id, "w1", "w6", 2_500).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert!(!first.replayed());
    assert_eq!(first.body["status"], "posted");
    assert_eq!(first.body["entries"][0]["amount_decimal"], "-25.00");

    for _ in 0..3 {
        let again = app.transfer(id, "w1", "w6", 2_500).await;
        assert_eq!(again.status, StatusCode::OK);
        assert!(again.replayed(), "replays carry Idempotent-Replayed: true");
        assert_eq!(
            again.text, first.text,
            "the creation response, byte for byte"
        );
    }
    assert_eq!(app.posted_balance("w1").await, 7_500, "applied once");
    assert_eq!(app.posted_balance("w6").await, 2_500);
    assert_eq!(app.entries_of(id).await, 2);

    // The same holds for multi-leg transactions and payments.
    app.create_wallet("w3").await;
    let body = json!({"id": Uuid::new_v4(), "entries": [
        {"account": "w1", "amount": -300}, {"account": "w6", "amount": 100}, {"account": "w3", "amount": 200}]});
    let first = app.post("/v1/transactions", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let again = app.post("/v1/transactions", &body).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );

    let payment = json!({"id": Uuid::new_v4(), "account": "w3", "amount": 999, "currency": "SAR", "provider": "acme"});
    let first = app.post("/v1/payments", &payment).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let again = app.post("/v1/payments", &payment).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );
    assert_eq!(app.posted_balance("w3").await, 1_199);
    assert_eq!(app.posted_balance("clearing:acme:SAR").await, -999);
    app.finish().await;
}

#[tokio::test]
async fn same_id_with_a_different_payload_is_a_mismatch_naming_each_field() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.create_wallet("w3").await;
    app.fund("w1", 10_000).await;
    let id = Uuid::new_v4();
    assert_eq!(
        app.transfer(id, "w1", "w6", 100).await.status,
        StatusCode::CREATED
    );
    let before = app.row_counts().await;

    let r = app.transfer(id, "w1", "w6", 101).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch")
    );
    assert_eq!(r.body["differing_fields"], json!(["/amount"]));
    assert!(r.content_type().starts_with("application/problem+json"));

    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": id, "from": "w1", "to": "w3", "amount": 100, "metadata": {"note": "x"}}),
        )
        .await;
    assert_eq!(r.code(), "idempotency_mismatch");
    assert_eq!(r.body["differing_fields"], json!(["/metadata/note", "/to"]));

    // The same id on another endpoint is another request.
    let r = app
        .post("/v1/transactions", &json!({"id": id, "entries": [{"account": "w1", "amount": -100}, {"account": "w6", "amount": 100}]}))
        .await;
    assert_eq!(r.code(), "idempotency_mismatch");
    assert!(
        r.body["differing_fields"]
            .as_array()
            .unwrap()
            .contains(&json!("/kind"))
    );

    assert_eq!(app.row_counts().await, before, "a mismatch writes nothing");
    assert_eq!(app.posted_balance("w6").await, 100);
    app.finish().await;
}

/// A retry is answered from its stored row whatever the ledger holds now: after its wallet was
/// drained (deciding it afresh would refuse it), and with a changed body that names an account
/// that does not exist (deciding it afresh would store nothing). On Citus group commit decides
/// a group without reading its ids first and leaves a stored id to the insert
/// (`reads::replays_of_a_group`), so both answers come from the pass that reads them. Each id
/// is retried once, so that the replay cache (filled by a replay) holds neither.
#[tokio::test]
async fn a_retry_is_answered_from_its_row_whatever_the_ledger_holds_now() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 200).await;
    let (drained, renamed) = (Uuid::new_v4(), Uuid::new_v4());
    let first = app.transfer(drained, "w1", "w6", 100).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let other = app.transfer(renamed, "w1", "w6", 100).await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
    let before = app.row_counts().await;

    let again = app.transfer(drained, "w1", "w6", 100).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );
    let unknown = app.transfer(renamed, "w1", "nowhere", 100).await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch"),
        "{}",
        unknown.text
    );
    assert_eq!(unknown.body["differing_fields"], json!(["/to"]));
    assert_eq!(app.row_counts().await, before, "retries write nothing");
    assert_eq!(app.posted_balance("w6").await, 200);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_identical_concurrent_requests_make_one_transaction() {
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 10_000).await;
    let id = Uuid::new_v4();

    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.transfer(id, "w1", "w6", 700).await })
        })
        .collect();
    let mut responses: Vec<TestResponse> = Vec::new();
    for task in tasks {
        responses.push(task.await.unwrap());
    }
    let created: Vec<_> = responses
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    let replays: Vec<_> = responses
        .iter()
        .filter(|r| r.status == StatusCode::OK && r.replayed())
        .collect();
    assert_eq!(created.len(), 1, "exactly one 201");
    assert_eq!(replays.len(), 49, "49 replays, no 409 and no error");
    assert!(
        replays.iter().all(|r| r.text == created[0].text),
        "every replay is the creation response"
    );
    assert_eq!(transactions_with(&app, id).await, 1);
    assert_eq!(app.entries_of(id).await, 2);
    assert_eq!(app.posted_balance("w1").await, 9_300);
    assert_eq!(app.posted_balance("w6").await, 700);
    Arc::try_unwrap(app)
        .ok()
        .expect("all tasks finished")
        .finish()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_transfers_out_of_a_wallet_that_affords_ten() {
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;

    let ids: Vec<Uuid> = (0..50).map(|_| Uuid::new_v4()).collect();
    let tasks: Vec<_> = ids
        .iter()
        .map(|&id| {
            let app = app.clone();
            tokio::spawn(async move { (id, app.transfer(id, "w1", "w6", 100).await) })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let posted = results
        .iter()
        .filter(|(_, r)| r.status == StatusCode::CREATED)
        .count();
    let refused: Vec<_> = results
        .iter()
        .filter(|(_, r)| r.code() == "insufficient_funds")
        .collect();
    assert_eq!(posted, 10, "exactly the ten the wallet can afford");
    assert_eq!(refused.len(), 40);
    assert!(
        refused
            .iter()
            .all(|(_, r)| r.status == StatusCode::UNPROCESSABLE_ENTITY && !r.replayed())
    );

    // Every refusal is stored: a retry gets the same refusal, replayed, never a late success.
    for (id, first) in &refused {
        let again = app.transfer(*id, "w1", "w6", 100).await;
        assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(again.replayed());
        assert_eq!(again.text, first.text);
        let stored = app.get(&format!("/v1/transactions/{id}")).await;
        assert_eq!(stored.body["status"], "rejected");
        assert_eq!(stored.body["refusal"]["code"], "insufficient_funds");
    }
    assert_eq!(app.posted_balance("w1").await, 0);
    assert_eq!(app.posted_balance("w6").await, 1_000);
    let lowest: i64 =
        sqlx::query_scalar("select min(balance_after) from entries where account_id = 'w1'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(
        lowest >= 0,
        "the running balance never went below zero (lowest {lowest})"
    );
    Arc::try_unwrap(app)
        .ok()
        .expect("all tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_refusal_is_replayed_even_after_the_money_arrives() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let id = Uuid::new_v4();
    let first = app.transfer(id, "w1", "w6", 500).await;
    assert_eq!(
        (first.status, first.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds")
    );
    assert_eq!(first.body["instance"], format!("/v1/transactions/{id}"));

    app.fund("w1", 10_000).await;
    let retry = app.transfer(id, "w1", "w6", 500).await;
    assert_eq!(
        (retry.status, retry.code(), retry.replayed()),
        (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds", true)
    );
    assert_eq!(retry.text, first.text);
    assert_eq!(app.posted_balance("w6").await, 0, "never a late success");
    assert_eq!(app.entries_of(id).await, 0, "a refusal writes no entry");

    let fresh = app.transfer(Uuid::new_v4(), "w1", "w6", 500).await;
    assert_eq!(
        fresh.status,
        StatusCode::CREATED,
        "a new attempt needs a new id"
    );
    app.finish().await;
}

#[tokio::test]
async fn frozen_and_closed_accounts_refuse_and_the_refusal_is_stored() {
    let app = TestApp::new().await;
    for w in ["w1", "w6", "w3"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 10_000).await;

    // A frozen account refuses debits (and takes credits: money can still arrive).
    let frozen = app.post("/v1/accounts/w1/freeze", &json!({})).await;
    assert_eq!(
        (frozen.status, &frozen.body["status"]),
        (StatusCode::OK, &json!("frozen"))
    );
    let id = Uuid::new_v4();
    let r = app.transfer(id, "w1", "w6", 100).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "account_frozen")
    );
    assert_eq!(app.fund("w1", 1).await.status, StatusCode::CREATED);
    assert_eq!(
        app.post("/v1/accounts/w1/unfreeze", &json!({})).await.body["status"],
        "active"
    );
    let retry = app.transfer(id, "w1", "w6", 100).await;
    assert_eq!(
        (retry.code(), retry.replayed()),
        ("account_frozen", true),
        "still the stored refusal"
    );
    assert_eq!(
        app.get(&format!("/v1/transactions/{id}")).await.body["status"],
        "rejected"
    );

    let closed = app.post("/v1/accounts/w3/close", &json!({})).await;
    assert_eq!(
        (closed.status, &closed.body["status"]),
        (StatusCode::OK, &json!("closed"))
    );
    let id = Uuid::new_v4();
    let r = app.transfer(id, "w1", "w3", 100).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "account_closed")
    );
    let retry = app.transfer(id, "w1", "w3", 100).await;
    assert_eq!(
        (retry.code(), retry.replayed(), &retry.text),
        ("account_closed", true, &r.text)
    );
    assert_eq!(app.posted_balance("w1").await, 10_001);
    app.finish().await;
}

#[tokio::test]
async fn an_unknown_account_stores_nothing_and_the_same_id_works_once_it_exists() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.fund("w1", 1_000).await;
    let before = app.row_counts().await;
    let id = Uuid::new_v4();
    let r = app.transfer(id, "w1", "later", 100).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_account")
    );
    assert!(r.body["detail"].as_str().unwrap().contains("later"));
    assert_eq!(app.row_counts().await, before, "nothing stored");
    assert_eq!(
        app.get(&format!("/v1/transactions/{id}")).await.status,
        StatusCode::NOT_FOUND
    );

    // A payment to an unknown wallet does not even create the clearing account.
    let p = app
        .post("/v1/payments", &json!({"id": Uuid::new_v4(), "account": "later", "amount": 5, "currency": "SAR", "provider": "newpsp"}))
        .await;
    assert_eq!(p.code(), "unknown_account");
    assert_eq!(
        app.get("/v1/accounts/clearing:newpsp:SAR").await.status,
        StatusCode::NOT_FOUND
    );

    app.create_wallet("later").await;
    let r = app.transfer(id, "w1", "later", 100).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.posted_balance("later").await, 100);
    app.finish().await;
}

#[tokio::test]
async fn an_idempotency_key_header_derives_the_id() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 10_000).await;
    let body = json!({"from": "w1", "to": "w6", "amount": 100});

    let first = app.post_with_key("/v1/transfers", "order-42", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let expected = id_from_idempotency_key("default", "order-42");
    assert_eq!(
        first.body["id"],
        expected.to_string(),
        "UUIDv5 of the namespace and \"default\\norder-42\""
    );
    assert_eq!(expected.get_version_num(), 5);

    // Quoted (RFC 8941 string) or bare: the same key, the same id, a replay.
    let quoted = app
        .post_with_key("/v1/transfers", "\"order-42\"", &body)
        .await;
    assert_eq!(
        (quoted.status, quoted.replayed(), &quoted.text),
        (StatusCode::OK, true, &first.text)
    );

    // With both, the body id wins.
    let own = Uuid::new_v4();
    let both = app
        .post_with_key(
            "/v1/transfers",
            "order-42",
            &json!({"id": own, "from": "w1", "to": "w6", "amount": 100}),
        )
        .await;
    assert_eq!(
        (both.status, &both.body["id"]),
        (StatusCode::CREATED, &json!(own))
    );

    // Without either: 400 id_required, nothing written.
    let before = app.row_counts().await;
    let none = app.post("/v1/transfers", &body).await;
    assert_eq!(
        (none.status, none.code()),
        (StatusCode::BAD_REQUEST, "id_required")
    );
    assert_eq!(app.row_counts().await, before);
    assert_eq!(app.posted_balance("w6").await, 200);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn accounts_are_naturally_idempotent() {
    let app = Arc::new(TestApp::new().await);
    let body = json!({"id": "acct-2", "currency": "KWD", "type": "wallet", "overdraft_limit": 5, "metadata": {"tier": "gold"}});
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (app, body) = (app.clone(), body.clone());
            tokio::spawn(async move { app.post("/v1/accounts", &body).await })
        })
        .collect();
    let mut responses = Vec::new();
    for t in tasks {
        responses.push(t.await.unwrap());
    }
    let first = responses
        .iter()
        .find(|r| r.status == StatusCode::CREATED)
        .expect("one 201");
    assert_eq!(
        responses
            .iter()
            .filter(|r| r.status == StatusCode::CREATED)
            .count(),
        1
    );
    let replays = responses
        .iter()
        .filter(|r| r.status == StatusCode::OK && r.replayed() && r.text == first.text);
    assert_eq!(
        replays.count(),
        9,
        "the other nine replay the creation response"
    );
    assert_eq!(first.body["overdraft_limit_decimal"], "0.005");

    let other = app
        .post(
            "/v1/accounts",
            &json!({"id": "acct-2", "currency": "SAR", "type": "wallet"}),
        )
        .await;
    assert_eq!(other.code(), "idempotency_mismatch");
    assert_eq!(
        other.body["differing_fields"],
        json!(["/currency", "/metadata/tier", "/overdraft_limit"])
    );

    // An Idempotency-Key derives the account id too.
    let keyed = app
        .post_with_key(
            "/v1/accounts",
            "signup-7",
            &json!({"currency": "SAR", "type": "wallet"}),
        )
        .await;
    assert_eq!(keyed.status, StatusCode::CREATED);
    assert_eq!(
        keyed.body["id"],
        id_from_idempotency_key("default", "signup-7").to_string()
    );
    Arc::try_unwrap(app)
        .ok()
        .expect("all tasks finished")
        .finish()
        .await;
}

/// The migration that stores a creation's outcome instead of its HTTP status.
const OUTCOME_MIGRATION: i64 = 20261205140000;

/// A database migrated to just before [`OUTCOME_MIGRATION`], as a service of that time left
/// it; `upgrade` runs the rest (the real `migrate` of the backend).
async fn database_before_the_outcome_migration(name: &str) -> sqlx::PgPool {
    let url = crate::backend::create_database(name).await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect(&url)
        .await
        .unwrap();
    wallet_ledger::db::MIGRATOR
        .run_to(OUTCOME_MIGRATION - 1, &pool)
        .await
        .unwrap();
    pool
}

/// The canonical request `POST /v1/transactions` stores for `body`.
fn canonical_request(body: &serde_json::Value) -> serde_json::Value {
    use wallet_ledger::http::extract::{DEFAULT_OWNER, IdempotencyKey, parse_valid};
    use wallet_ledger::http::requests::CreateTransactionRequest;
    let key = IdempotencyKey {
        key: None,
        owner: DEFAULT_OWNER.to_owned(),
    };
    parse_valid::<CreateTransactionRequest>(body.to_string().as_bytes())
        .unwrap()
        .into_new(
            &key,
            wallet_ledger::http::settings::HttpSettings::default().create_policy(),
        )
        .unwrap()
        .request
}

/// A transaction row as the code before [`OUTCOME_MIGRATION`] wrote it: `creation_status`
/// 201 or 422 and the answer's exact bytes in `creation_response`.
async fn insert_as_before(
    pool: &sqlx::PgPool,
    id: Uuid,
    body: &serde_json::Value,
    refusal: Option<(&str, &str)>,
    answer: &str,
) {
    let (status, creation_status) = match refusal {
        Some(_) => ("rejected", 422_i16),
        None => ("posted", 201),
    };
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, refusal_code,
                                   refusal_detail, creation_request, creation_status,
                                   creation_response, created_at, posted_at, updated_at)
         values ($1, 'transaction', $2, 'SAR', $3, array['w1', 'w6'], $4, $5, $6, $7, $8, now(),
                 case when $2 = 'posted' then now() end, now())",
    )
    .bind(id)
    .bind(status)
    .bind(&body["entries"])
    .bind(refusal.map(|(code, _)| code))
    .bind(refusal.map(|(_, detail)| detail))
    .bind(canonical_request(body))
    .bind(creation_status)
    .bind(answer)
    .execute(pool)
    .await
    .unwrap();
}

/// Refusals stored before the outcome migration (`creation_status` 422 and their answer's
/// bytes) replay those exact bytes after it, through a single call and a batch; a creation
/// stored then replays 200; a refusal stored after it keeps no answer and replays the same
/// bytes as its first answer.
#[tokio::test]
async fn refusals_stored_before_the_outcome_migration_replay_byte_for_byte() {
    let database = format!("wl_test_{}_outcome_migration", std::process::id());
    let pool = database_before_the_outcome_migration(&database).await;
    let legs = json!([{"account": "w1", "amount": -500}, {"account": "w6", "amount": 500}]);
    let (funds, frozen, created) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let request = |id: Uuid| json!({"id": id, "entries": legs});
    // The answers as the code of that time rendered them, byte for byte.
    let funds_answer = format!(
        r#"{{"type":"/problems/insufficient_funds","title":"Insufficient funds","status":422,"detail":"w1 has 0 available, 500 needed","code":"insufficient_funds","instance":"/v1/transactions/{funds}"}}"#
    );
    let frozen_answer = format!(
        r#"{{"type":"/problems/account_frozen","title":"Account frozen","status":422,"detail":"account w1 is frozen","code":"account_frozen","instance":"/v1/transactions/{frozen}"}}"#
    );
    let created_answer = format!(r#"{{"id":"{created}","status":"posted","note":"as stored"}}"#);
    let refused = [
        (
            funds,
            ("insufficient_funds", "w1 has 0 available, 500 needed"),
            &funds_answer,
        ),
        (
            frozen,
            ("account_frozen", "account w1 is frozen"),
            &frozen_answer,
        ),
    ];
    for (id, refusal, answer) in &refused {
        insert_as_before(&pool, *id, &request(*id), Some(*refusal), answer).await;
    }
    insert_as_before(&pool, created, &request(created), None, &created_answer).await;

    crate::backend::migrate(&pool).await;
    let settings = wallet_ledger::http::HttpSettings::default();
    let app = TestApp::adopt(pool, database, String::new(), settings).await;
    let outcomes: Vec<(String, Option<String>)> = sqlx::query_as(
        "select creation_outcome, creation_response from transactions
         where id = any($1) order by array_position($1, id)",
    )
    .bind([funds, frozen, created])
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        outcomes,
        [
            ("refused".to_owned(), Some(funds_answer.clone())),
            ("refused".to_owned(), Some(frozen_answer.clone())),
            ("created".to_owned(), Some(created_answer.clone())),
        ],
        "the migration says what each stored, and keeps every answer"
    );

    for (id, _, answer) in &refused {
        let again = app.post("/v1/transactions", &request(*id)).await;
        assert_eq!(
            (again.status, again.replayed(), again.content_type()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                true,
                "application/problem+json"
            )
        );
        assert_eq!(&again.text, *answer, "the stored refusal, byte for byte");
    }
    let again = app.post("/v1/transactions", &request(created)).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    assert_eq!(again.text, created_answer);

    // A batch retrying them answers each item with the same bytes.
    let items: Vec<serde_json::Value> = [funds, frozen, created].map(request).to_vec();
    let batch = app
        .post(
            "/v1/transactions/batch",
            &json!({"mode": "independent", "items": items}),
        )
        .await;
    assert_eq!(batch.status, StatusCode::OK, "{}", batch.text);
    let results = &batch.body["results"];
    for (i, (status, answer)) in [
        (422, &funds_answer),
        (422, &frozen_answer),
        (200, &created_answer),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            (&results[i]["status"], &results[i]["replayed"]),
            (&json!(status), &json!(true))
        );
        // The items' bodies are passed on as stored, not parsed and rendered again.
        let raw = format!(r#""body":{answer}}}"#);
        assert!(batch.text.contains(&raw), "item {i}: {}", batch.text);
    }

    // A refusal stored now keeps its code and detail, and no answer: its replay is rendered
    // from them, the same bytes as its first answer.
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let id = Uuid::new_v4();
    let first = app.post("/v1/transactions", &request(id)).await;
    assert_eq!(first.code(), "insufficient_funds", "{}", first.text);
    let stored: (String, Option<String>) = sqlx::query_as(
        "select creation_outcome, creation_response from transactions where id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(stored, ("refused".to_owned(), None));
    let again = app.post("/v1/transactions", &request(id)).await;
    assert_eq!(
        (again.status, again.replayed()),
        (StatusCode::UNPROCESSABLE_ENTITY, true)
    );
    assert_eq!(again.text, first.text);
    app.finish().await;
}
