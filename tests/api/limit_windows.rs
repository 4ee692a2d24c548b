//! A velocity limit's window rolls: what a wallet moved before the window's start no longer
//! counts. The wallet's older entries are aged behind the service's back (their ledger times
//! moved into the past as a superuser, the immutability trigger off for the moment), so the
//! test does not wait an hour. Plain PostgreSQL only: the pure rule is tested in
//! `ledger::limits`, and the walk back along the chain is the same statement on Citus.

use super::common::{TestApp, assert_problem};
use axum::http::StatusCode;
use serde_json::json;
use uuid::Uuid;

async fn sql(app: &TestApp, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&app.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn debits_older_than_the_window_no_longer_count() {
    let app = TestApp::new().await;
    app.create_wallet("aged").await;
    app.create_wallet("payee").await;
    app.fund("aged", 1_000).await;
    let body =
        json!({"id": Uuid::new_v4(), "direction": "debit", "window_seconds": 3600, "amount": 300});
    let r = app.post("/v1/accounts/aged/limits", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    for _ in 0..3 {
        let r = app.transfer(Uuid::new_v4(), "aged", "payee", 100).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let full = app.transfer(Uuid::new_v4(), "aged", "payee", 1).await;
    assert_problem(&full, 422, "velocity_limit_exceeded", "300 of 300 used");

    // The funding and the first two debits happened two hours ago: one debit is in the window.
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    sql(
        &app,
        "update entries set ledger_time = ledger_time - interval '2 hours'
         where account_id = 'aged' and sequence <= 3",
    )
    .await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;
    let r = app.transfer(Uuid::new_v4(), "aged", "payee", 200).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let over = app.transfer(Uuid::new_v4(), "aged", "payee", 1).await;
    assert_problem(&over, 422, "velocity_limit_exceeded", "100 + 200 used");
    app.finish().await;
}
