//! Reversals: new transactions with opposite entries; the total reversed never exceeds the
//! original, whatever the concurrency.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_parallel_partial_reversals_of_ten_against_a_payment_of_100() {
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w").await;
    let payment = app.fund("w", 100).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (app, payment) = (app.clone(), payment.clone());
            tokio::spawn(async move {
                app.post(
                    &format!("/v1/transactions/{payment}/reverse"),
                    &json!({"id": Uuid::new_v4(), "amount": 10}),
                )
                .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let done: Vec<_> = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .collect();
    assert_eq!(done.len(), 10, "exactly ten of ten each fit in 100");
    assert!(
        done.iter()
            .all(|r| r.body["kind"] == "reversal" && r.body["reverses"] == json!(payment))
    );
    let refused = answers
        .iter()
        .filter(|r| r.code() == "reversal_exceeds_original")
        .count();
    assert_eq!(refused, 10);
    assert_eq!(app.posted_balance("w").await, 0);
    assert_eq!(app.posted_balance("clearing:test:SAR").await, 0);
    let reversed: i64 = sqlx::query_scalar(
        "select coalesce(sum(reversed_amount), 0)::bigint from transactions where reverses = $1::uuid and status = 'posted'",
    )
    .bind(&payment)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(reversed, 100);
    // The original's reversals, listed: the ten posted and the ten refused, nothing else.
    let listed = app
        .get(&format!("/v1/transactions?reverses={payment}&limit=50"))
        .await;
    let data = listed.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 20, "{}", listed.text);
    assert!(data.iter().all(|t| t["reverses"] == json!(payment)));
    let posted = data.iter().filter(|t| t["status"] == "posted").count();
    assert_eq!(posted, 10);
    let bad = app.get("/v1/transactions?reverses=not-an-id").await;
    assert_eq!(bad.body["errors"][0]["field"], "/reverses", "{}", bad.text);
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_reversal_is_idempotent_opposite_and_only_of_posted_money() {
    let app = TestApp::new().await;
    for w in ["a", "b", "c"] {
        app.create_wallet(w).await;
    }
    app.fund("a", 1_000).await;
    let original = Uuid::new_v4();
    let r = app
        .post("/v1/transactions", &json!({"id": original, "entries": [
            {"account": "a", "amount": -600}, {"account": "b", "amount": 400}, {"account": "c", "amount": 200}]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);

    let path = format!("/v1/transactions/{original}/reverse");
    let partial = app
        .post(&path, &json!({"id": Uuid::new_v4(), "amount": 100}))
        .await;
    assert_eq!(
        (partial.status, partial.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
        "partial needs two legs"
    );

    let id = Uuid::new_v4();
    let full = app
        .post(
            &path,
            &json!({"id": id, "metadata": {"reason": "duplicate order"}}),
        )
        .await;
    assert_eq!(full.status, StatusCode::CREATED, "{}", full.text);
    assert_eq!(
        full.body["entries"],
        json!([{"account": "a", "amount": 600, "amount_decimal": "6.00"},
               {"account": "b", "amount": -400, "amount_decimal": "-4.00"},
               {"account": "c", "amount": -200, "amount_decimal": "-2.00"}])
    );
    let again = app
        .post(
            &path,
            &json!({"id": id, "metadata": {"reason": "duplicate order"}}),
        )
        .await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &full.text)
    );
    let other = app.post(&path, &json!({"id": id})).await;
    assert_eq!(other.code(), "idempotency_mismatch");
    assert_eq!(
        (app.posted_balance("a").await, app.posted_balance("b").await),
        (1_000, 0)
    );

    // Everything is reversed already: one more is refused, and the refusal is stored.
    let more = Uuid::new_v4();
    let r = app.post(&path, &json!({"id": more})).await;
    assert_eq!(
        (r.status, r.code()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            "reversal_exceeds_original"
        )
    );
    assert_eq!(
        app.get(&format!("/v1/transactions/{more}")).await.body["status"],
        "rejected"
    );

    // Only posted money can be reversed.
    let held = Uuid::new_v4();
    app.post(
        "/v1/transfers",
        &json!({"id": held, "from": "a", "to": "b", "amount": 5, "status": "pending"}),
    )
    .await;
    let r = app
        .post(
            &format!("/v1/transactions/{held}/reverse"),
            &json!({"id": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["current_status"]),
        (StatusCode::CONFLICT, &json!("pending"))
    );
    let r = app
        .post(
            &format!("/v1/transactions/{}/reverse", Uuid::new_v4()),
            &json!({"id": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

#[tokio::test]
async fn a_refund_the_wallet_already_spent_is_refused_for_funds() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.create_wallet("shop2").await;
    let payment = app.fund("w", 100).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.transfer(Uuid::new_v4(), "w", "shop2", 80).await;
    let r = app
        .post(
            &format!("/v1/transactions/{payment}/reverse"),
            &json!({"id": Uuid::new_v4(), "amount": 50}),
        )
        .await;
    assert_eq!(r.code(), "insufficient_funds");
    let r = app
        .post(
            &format!("/v1/transactions/{payment}/reverse"),
            &json!({"id": Uuid::new_v4(), "amount": 20}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(app.posted_balance("w").await, 0);
    app.finish().await;
}
