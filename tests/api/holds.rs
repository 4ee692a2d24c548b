//! Holds: reserve, capture (fully or partly), release, expire; every race decided once.

use super::common::{TestApp, TestResponse, poll_until};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;
use wallet_ledger::ledger::holds;

async fn hold(app: &TestApp, from: &str, to: &str, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": id, "from": from, "to": to, "amount": amount, "status": "pending"}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body["status"]),
        (StatusCode::CREATED, &json!("pending")),
        "{}",
        r.text
    );
    id
}

async fn post_hold(app: &TestApp, id: Uuid, body: Value) -> TestResponse {
    app.post(&format!("/v1/transactions/{id}/post"), &body)
        .await
}

async fn void_hold(app: &TestApp, id: Uuid) -> TestResponse {
    app.post_empty(&format!("/v1/transactions/{id}/void")).await
}

/// Moves a hold's expiry into the past, as time passing would (no sleeping in tests).
async fn let_expire(app: &TestApp, id: Uuid) {
    for table in ["transactions", "open_holds"] {
        let column = if table == "transactions" {
            "id"
        } else {
            "transaction_id"
        };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "update {table} set expires_at = now() - interval '1 second' where {column} = $1"
        )))
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_hold_reserves_funds_and_a_capture_posts_them_once() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;

    let id = hold(&app, "w1", "w6", 600).await;
    let b = app.balances("w1").await;
    assert_eq!((b.posted, b.pending_out, b.available), (1_000, 600, 400));
    assert_eq!(app.balances("w6").await.pending_in, 600);
    let listed = app.get("/v1/accounts/w1/holds").await;
    assert_eq!(listed.body["data"][0]["id"], id.to_string());
    assert_eq!(listed.body["balances"]["available"], 400);

    // Holds and transfers together never overdraw: 400 is left, 401 is not.
    let over = app.transfer(Uuid::new_v4(), "w1", "w6", 401).await;
    assert_eq!(over.code(), "insufficient_funds");
    let second_hold = app
        .post("/v1/transfers", &json!({"id": Uuid::new_v4(), "from": "w1", "to": "w6", "amount": 401, "status": "pending"}))
        .await;
    assert_eq!(
        second_hold.code(),
        "insufficient_funds",
        "a hold checks available too"
    );
    assert_eq!(
        app.transfer(Uuid::new_v4(), "w1", "w6", 400).await.status,
        StatusCode::CREATED
    );

    let captured = post_hold(&app, id, json!({})).await;
    assert_eq!(
        (captured.status, &captured.body["status"]),
        (StatusCode::OK, &json!("posted")),
        "{}",
        captured.text
    );
    assert!(!captured.replayed());
    assert_eq!(app.entries_of(id).await, 2);
    let b = app.balances("w1").await;
    assert_eq!((b.posted, b.pending_out, b.available), (0, 0, 0));
    assert_eq!(app.posted_balance("w6").await, 1_000);
    assert!(
        app.get("/v1/accounts/w1/holds").await.body["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The same capture again replays; another amount is a mismatch; void is too late.
    let again = post_hold(&app, id, json!({"amount": 600})).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &captured.text)
    );
    let other = post_hold(&app, id, json!({"amount": 500})).await;
    assert_eq!(
        (other.status, other.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch")
    );
    assert_eq!(other.body["differing_fields"], json!(["/amount"]));
    let late = void_hold(&app, id).await;
    assert_eq!(
        (late.status, late.code(), &late.body["current_status"]),
        (StatusCode::CONFLICT, "invalid_transition", &json!("posted"))
    );
    assert_eq!(app.entries_of(id).await, 2, "still captured once");
    app.finish().await;
}

#[tokio::test]
async fn a_partial_capture_posts_part_and_releases_the_rest() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let id = hold(&app, "w1", "w6", 600).await;

    let over = post_hold(&app, id, json!({"amount": 601})).await;
    assert_eq!(
        (over.status, over.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed")
    );
    let r = post_hold(&app, id, json!({"amount": 250})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (
            &r.body["captured_amount"],
            &r.body["captured_amount_decimal"]
        ),
        (&json!(250), &json!("2.50"))
    );
    let b = app.balances("w1").await;
    assert_eq!((b.posted, b.pending_out, b.available), (750, 0, 750));
    assert_eq!(app.posted_balance("w6").await, 250);

    // A multi-leg hold is captured whole.
    app.create_wallet("w3").await;
    let multi = Uuid::new_v4();
    let r = app
        .post("/v1/transactions", &json!({"id": multi, "status": "pending", "entries": [
            {"account": "w1", "amount": -300}, {"account": "w6", "amount": 100}, {"account": "w3", "amount": 200}]}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let partial = post_hold(&app, multi, json!({"amount": 100})).await;
    assert_eq!(partial.code(), "validation_failed");
    assert_eq!(
        post_hold(&app, multi, json!({})).await.status,
        StatusCode::OK
    );
    assert_eq!(
        (
            app.posted_balance("w1").await,
            app.posted_balance("w3").await
        ),
        (450, 200)
    );
    app.finish().await;
}

#[tokio::test]
async fn void_releases_and_nothing_leaves_a_terminal_state() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let id = hold(&app, "w1", "w6", 600).await;

    let voided = void_hold(&app, id).await;
    assert_eq!(
        (voided.status, &voided.body["status"]),
        (StatusCode::OK, &json!("voided"))
    );
    assert_eq!(app.balances("w1").await.available, 1_000);
    let again = void_hold(&app, id).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &voided.text)
    );
    let post = post_hold(&app, id, json!({})).await;
    assert_eq!(
        (post.status, &post.body["current_status"]),
        (StatusCode::CONFLICT, &json!("voided"))
    );
    assert_eq!(app.entries_of(id).await, 0);

    // A transaction that was never a hold, a refused one, an unknown one.
    let plain = Uuid::new_v4();
    app.transfer(plain, "w1", "w6", 1).await;
    let r = post_hold(&app, plain, json!({})).await;
    assert_eq!(
        (r.status, &r.body["current_status"]),
        (StatusCode::CONFLICT, &json!("posted"))
    );
    assert_eq!(void_hold(&app, plain).await.status, StatusCode::CONFLICT);
    let refused = Uuid::new_v4();
    app.transfer(refused, "w6", "w1", 1_000_000).await;
    assert_eq!(
        void_hold(&app, refused).await.body["current_status"],
        "rejected"
    );
    assert_eq!(
        void_hold(&app, Uuid::new_v4()).await.status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}

#[tokio::test]
async fn a_capture_after_expiry_is_refused_even_before_the_sweeper_runs() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let id = hold(&app, "w1", "w6", 600).await;
    let_expire(&app, id).await;

    // Already released for every reader, and shown as expired.
    assert_eq!(app.balances("w1").await.available, 1_000);
    assert_eq!(
        app.get(&format!("/v1/transactions/{id}")).await.body["status"],
        "expired"
    );
    let r = post_hold(&app, id, json!({})).await;
    assert_eq!(
        (r.status, r.code(), &r.body["current_status"]),
        (
            StatusCode::CONFLICT,
            "invalid_transition",
            &json!("expired")
        )
    );
    assert_eq!(void_hold(&app, id).await.body["current_status"], "expired");
    assert_eq!(app.entries_of(id).await, 0);
    let status: String = sqlx::query_scalar("select status from transactions where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(status, "expired", "the refused capture recorded the expiry");
    app.finish().await;
}

#[tokio::test]
async fn the_sweeper_expires_overdue_holds_and_releases_them() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let overdue = hold(&app, "w1", "w6", 300).await;
    let current = hold(&app, "w1", "w6", 200).await;
    let_expire(&app, overdue).await;

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
        0,
        "nothing twice"
    );
    drop(conn);
    let rows: Vec<(String, i64)> = sqlx::query_as(
        // A join with counts rather than a correlated subquery: tests/citus runs this too,
        // and Citus correlates only tables distributed alike.
        "select t.status, coalesce(h.n, 0)
         from transactions t
         left join (select transaction_id, count(*) as n from open_holds
                    where transaction_id = any($1) group by transaction_id) h
           on h.transaction_id = t.id
         where t.id = any($1) order by t.status",
    )
    .bind(vec![overdue, current])
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows, [("expired".to_owned(), 0), ("pending".to_owned(), 2)]);
    let b = app.balances("w1").await;
    assert_eq!((b.pending_out, b.available), (200, 800));
    assert_eq!(
        app.get("/v1/transactions?status=expired").await.body["data"][0]["id"],
        overdue.to_string()
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn post_and_void_sent_together_one_wins_the_other_gets_409() {
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 100_000).await;
    for _ in 0..10 {
        let id = hold(&app, "w1", "w6", 100).await;
        let (a, b) = (app.clone(), app.clone());
        let (posted, voided) = tokio::join!(
            tokio::spawn(async move { post_hold(&a, id, json!({})).await }),
            tokio::spawn(async move { void_hold(&b, id).await })
        );
        let (posted, voided) = (posted.unwrap(), voided.unwrap());
        let statuses = [posted.status, voided.status];
        assert!(
            statuses.contains(&StatusCode::OK) && statuses.contains(&StatusCode::CONFLICT),
            "{statuses:?}"
        );
        let winner = if posted.status == StatusCode::OK {
            "posted"
        } else {
            "voided"
        };
        let loser = if posted.status == StatusCode::OK {
            &voided
        } else {
            &posted
        };
        assert_eq!(loser.body["current_status"], winner);
        assert_eq!(
            app.entries_of(id).await,
            if winner == "posted" { 2 } else { 0 }
        );
    }
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_parallel_posts_of_one_hold_capture_once_and_all_answer_200() {
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let id = hold(&app, "w1", "w6", 700).await;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { post_hold(&app, id, json!({"amount": 700})).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert!(
        answers.iter().all(|r| r.status == StatusCode::OK),
        "all 200"
    );
    assert_eq!(
        answers.iter().filter(|r| !r.replayed()).count(),
        1,
        "one capture, 19 replays"
    );
    assert!(answers.iter().all(|r| r.text == answers[0].text));
    assert_eq!(app.entries_of(id).await, 2);
    assert_eq!(
        (
            app.posted_balance("w1").await,
            app.posted_balance("w6").await
        ),
        (300, 700)
    );
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn a_retried_hold_with_the_default_expiry_replays() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let body =
        json!({"id": Uuid::new_v4(), "from": "w1", "to": "w6", "amount": 5, "status": "pending"});
    let first = app.post("/v1/transfers", &body).await;
    let again = app.post("/v1/transfers", &body).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );
    assert_eq!(app.balances("w1").await.pending_out, 5, "reserved once");
    app.finish().await;
}

#[tokio::test]
async fn a_hold_retried_after_its_own_expiry_still_replays() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 1_000).await;
    let soon = (chrono::Utc::now() + chrono::TimeDelta::milliseconds(300)).to_rfc3339();
    let body = json!({"id": Uuid::new_v4(), "from": "w1", "to": "w6", "amount": 5, "status": "pending", "expires_at": soon});
    let first = app.post("/v1/transfers", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    // Real time passes (no `let_expire`): the retry must meet a hold expired by the clock.
    let id = &body["id"];
    poll_until(
        Duration::from_secs(10),
        "the hold reading expired",
        || async {
            let r = app
                .get(&format!("/v1/transactions/{}", id.as_str().unwrap()))
                .await;
            (r.body["status"] == "expired").then_some(())
        },
    )
    .await;
    let again = app.post("/v1/transfers", &body).await;
    assert_eq!(
        (again.status, again.replayed(), &again.text),
        (StatusCode::OK, true, &first.text)
    );
    // A new hold with a past expiry is refused, and nothing is stored.
    let past = json!({"id": Uuid::new_v4(), "from": "w1", "to": "w6", "amount": 5, "status": "pending", "expires_at": soon});
    let r = app.post("/v1/transfers", &past).await;
    assert_eq!(
        (r.status, &r.body["errors"][0]["field"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("/expires_at"))
    );
    app.finish().await;
}

/// The one definition of a status as read (`hold_status_at`, migrations/…_effective_status.sql)
/// at the expiry boundary: a pending hold is expired from its `expires_at` on, exactly as the
/// write path refuses a new hold whose expiry is not in the future (`expires_at <= now`).
#[tokio::test]
async fn a_hold_reads_expired_from_its_expiry_instant_on() {
    let app = TestApp::new().await;
    let status_at = |status: &'static str, offset_micros: i64| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "select hold_status_at($1, timestamptz '2026-12-05 12:00:00+00',
                        timestamptz '2026-12-05 12:00:00+00' + $2 * interval '1 microsecond')",
            )
            .bind(status)
            .bind(offset_micros)
            .fetch_one(&pool)
            .await
            .expect("hold_status_at answers")
        }
    };
    assert_eq!(
        status_at("pending", -1).await,
        "pending",
        "1 µs before the expiry"
    );
    assert_eq!(
        status_at("pending", 0).await,
        "expired",
        "at the expiry instant"
    );
    assert_eq!(
        status_at("pending", 1).await,
        "expired",
        "1 µs after the expiry"
    );
    for settled in ["posted", "voided", "rejected", "expired"] {
        assert_eq!(
            status_at(settled, 1).await,
            settled,
            "a settled status stays"
        );
    }
    app.finish().await;
}
