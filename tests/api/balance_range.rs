//! Every balance stays within ±(2^53 − 1), system accounts included (issue 18, item 1):
//! postings, atomic batches and holds that would take a system account past it are refused
//! `balance_overflow`, also when they race; an account taken out of range by rows written
//! before the rule is read as 409 `balance_out_of_range` (never a 500), the checkpoint worker
//! skips it and checkpoints the others, and `verify` reports it.

use super::common::{TestApp, assert_problem};
use axum::http::StatusCode;
use chrono::TimeDelta;
use serde_json::{Value, json};
use uuid::Uuid;
use wallet_ledger::ledger::checkpoints;
use wallet_ledger::reconcile::invariants;

const M: i64 = 9_007_199_254_740_991;

fn legs(from: &str, to: &str, amount: i64) -> Value {
    json!({"id": Uuid::new_v4(), "entries": [
        {"account": from, "amount": -amount},
        {"account": to, "amount": amount},
    ]})
}

async fn systems(app: &TestApp, ids: &[&str]) {
    for id in ids {
        app.create_account(id, "SAR", "system").await;
    }
}

/// The field error codes of a 422 `validation_failed`.
fn field_codes(r: &super::common::TestResponse) -> Vec<String> {
    r.body["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| e["code"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_system_account_posting_past_the_range_is_refused() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB"]).await;
    let r = app.post("/v1/transactions", &legs("sysA", "sysB", M)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.post("/v1/transactions", &legs("sysA", "sysB", M)).await;
    assert_problem(&r, 422, "validation_failed", "a second M into sysB");
    assert_eq!(field_codes(&r), ["balance_overflow"], "{}", r.text);
    // One minor unit is also too much, either way round.
    let r = app.post("/v1/transactions", &legs("sysA", "sysB", 1)).await;
    assert_eq!(field_codes(&r), ["balance_overflow"], "{}", r.text);
    // Money back toward zero is fine.
    let r = app.post("/v1/transactions", &legs("sysB", "sysA", 5)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.posted_balance("sysB").await, M - 5);
    assert_eq!(app.posted_balance("sysA").await, -M + 5);
    app.finish().await;
}

#[tokio::test]
async fn an_atomic_batch_past_the_range_writes_nothing() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB", "sysE"]).await;
    // Two atomic batches as in the issue: one of 1,000 items of M, one of 30.
    for count in [1_000, 30] {
        let items: Vec<Value> = (0..count).map(|_| legs("sysA", "sysB", M)).collect();
        let r = app
            .post(
                "/v1/transactions/batch",
                &json!({"mode": "atomic", "items": items}),
            )
            .await;
        assert_problem(&r, 422, "batch_failed", "a batch of M items");
        assert_eq!(r.body["index"], json!(1), "{}", r.text);
        assert_eq!(
            r.body["problem"]["errors"][0]["code"], "balance_overflow",
            "{}",
            r.text
        );
    }
    assert_eq!(app.posted_balance("sysB").await, 0, "nothing was written");
    // An independent batch creates the first item and refuses the rest.
    let items: Vec<Value> = (0..5).map(|_| legs("sysE", "sysB", M)).collect();
    let r = app
        .post(
            "/v1/transactions/batch",
            &json!({"mode": "independent", "items": items}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let statuses: Vec<i64> = r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 422, 422, 422, 422], "{}", r.text);
    assert_eq!(app.posted_balance("sysB").await, M);
    app.finish().await;
}

#[tokio::test]
async fn holds_count_against_a_system_accounts_range() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB"]).await;
    let hold = |amount: i64| {
        json!({"id": Uuid::new_v4(), "status": "pending", "entries": [
            {"account": "sysA", "amount": -amount},
            {"account": "sysB", "amount": amount},
        ]})
    };
    let r = app.post("/v1/transactions", &hold(M)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let held = r.body["id"].as_str().unwrap().to_owned();
    let r = app.post("/v1/transactions", &hold(1)).await;
    assert_eq!(
        field_codes(&r),
        ["balance_overflow"],
        "a second hold: {}",
        r.text
    );
    // A posting into the held room is refused too: the capture is not checked again.
    let r = app.post("/v1/transactions", &legs("sysA", "sysB", 1)).await;
    assert_eq!(field_codes(&r), ["balance_overflow"], "posting: {}", r.text);
    let r = app
        .post(&format!("/v1/transactions/{held}/post"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "capture: {}", r.text);
    assert_eq!(app.posted_balance("sysB").await, M);
    let r = app.get("/v1/accounts/sysB/holds").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.finish().await;
}

#[tokio::test]
async fn racing_postings_never_take_a_system_account_past_the_range() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB"]).await;
    let third = M / 3;
    let requests = (0..10).map(|_| {
        let body = legs("sysA", "sysB", third);
        let app = &app;
        async move { app.post("/v1/transactions", &body).await }
    });
    let answers = futures_util::future::join_all(requests).await;
    let created = answers
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    for r in answers.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_problem(r, 422, "validation_failed", "a fourth third");
        assert_eq!(field_codes(r), ["balance_overflow"], "{}", r.text);
    }
    assert_eq!(created, 3, "three thirds of M fit, a fourth does not");
    assert_eq!(app.posted_balance("sysB").await, 3 * third);
    app.finish().await;
}

/// Rows as a writer from before the rule could leave them: `count` balanced transactions of M
/// from `from` to `to`, and the same number of open holds.
async fn legacy_rows(app: &TestApp, from: &str, to: &str, count: i64, holds: bool) {
    let status = if holds { "pending" } else { "posted" };
    sqlx::query(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids,
                                     creation_request, creation_outcome, creation_response,
                                     created_at, posted_at, updated_at, expires_at)
           select gen_random_uuid(), 'transaction', $4, 'SAR', '[]', array[$1, $2], '{}', 'created',
                  '{}', now(), case when $4 = 'posted' then now() end, now(),
                  case when $4 = 'pending' then now() + interval '1 day' end
           from generate_series(1, $3)"#,
    )
    .bind(from)
    .bind(to)
    .bind(count)
    .bind(status)
    .execute(&app.pool)
    .await
    .unwrap();
    let (target, select) = if holds {
        (
            "open_holds (transaction_id, account_id, amount, expires_at)",
            "t.id, a.id, a.amount, t.expires_at",
        )
    } else {
        (
            "entries (transaction_id, account_id, currency, amount, ledger_time)",
            "t.id, a.id, 'SAR', a.amount, now()",
        )
    };
    let statement = format!(
        "insert into {target}
         select {select}
         from transactions t
         cross join (values ($1, -{M}::bigint), ($2, {M}::bigint)) as a(id, amount)
         where t.account_ids = array[$1, $2] and t.status = $3"
    );
    sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(from)
        .bind(to)
        .bind(status)
        .execute(&app.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_account_out_of_range_from_before_the_rule_is_answered_and_skipped() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB", "sysC", "sysD", "ok1", "ok2"]).await;
    // Past 64 bits: 1,030 postings of M into sysB, and 1,030 holds of M into sysD.
    legacy_rows(&app, "sysA", "sysB", 1_030, false).await;
    legacy_rows(&app, "sysC", "sysD", 1_030, true).await;
    let r = app.post("/v1/transactions", &legs("ok1", "ok2", 7)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);

    for path in [
        "/v1/accounts/sysB",
        "/v1/accounts/sysA",
        "/v1/accounts/sysB?as_of=2999-01-01T00:00:00Z",
        "/v1/accounts/sysD",
        "/v1/accounts/sysD/holds",
    ] {
        let r = app.get(path).await;
        assert_problem(&r, 409, "balance_out_of_range", path);
    }
    for action in ["freeze", "close"] {
        let r = app.post_empty(&format!("/v1/accounts/sysB/{action}")).await;
        assert_problem(&r, 409, "balance_out_of_range", action);
    }
    // Postings that keep it out of range are refused; the others go on.
    let r = app.post("/v1/transactions", &legs("ok1", "sysB", 1)).await;
    assert_eq!(field_codes(&r), ["balance_overflow"], "{}", r.text);
    let r = app.post("/v1/transactions", &legs("ok1", "ok2", 1)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);

    // The checkpoint worker skips the accounts out of range and checkpoints the others. (The
    // horizon is cluster-wide: another test's open transaction can hold it back a moment.)
    let checkpointed = || async {
        sqlx::query_scalar::<_, Vec<String>>(
            "select coalesce(array_agg(distinct account_id order by account_id), '{}') from account_checkpoints",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap()
    };
    super::common::poll_until(
        std::time::Duration::from_secs(10),
        "two checkpoints",
        || async {
            checkpoints::advance(&mut crate::backend::db(
                &mut app.pool.acquire().await.unwrap(),
            ))
            .await
            .expect("one account out of range does not fail the others");
            (checkpointed().await.len() == 2).then_some(())
        },
    )
    .await;
    assert_eq!(
        checkpointed().await,
        ["ok1", "ok2"],
        "only the accounts in range"
    );
    assert_eq!(app.posted_balance("ok2").await, 8);

    let findings = invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap();
    let out: Vec<&str> = findings
        .iter()
        .filter(|f| f.check.as_str() == "balance_range")
        .filter_map(|f| f.account.as_deref())
        .collect();
    assert_eq!(out, ["sysA", "sysB", "sysC", "sysD"], "{findings:?}");
    app.finish().await;
}

#[tokio::test]
async fn payments_cannot_take_a_clearing_account_past_the_range() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let pay = |wallet: &str| json!({"id": Uuid::new_v4(), "account": wallet, "amount": M, "currency": "SAR", "provider": "p1"});
    // The first payment creates the clearing account and takes it to −M.
    let r = app.post("/v1/payments", &pay("w1")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.post("/v1/payments", &pay("w6")).await;
    assert_eq!(field_codes(&r), ["balance_overflow"], "{}", r.text);
    assert_eq!(app.posted_balance("clearing:p1:SAR").await, -M);
    assert_eq!(app.posted_balance("w6").await, 0);
    app.finish().await;
}

/// `verify` checks all four figures a balance shows (issue 34, item 3): an account whose
/// `posted` and hold totals are each inside the range but whose `available` is not (a hold
/// written behind the write path's back) is a `balance_range` finding.
#[tokio::test]
async fn verify_reports_an_available_balance_out_of_range() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysB"]).await;
    let r = app
        .post("/v1/transactions", &legs("sysA", "sysB", M - 5))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // A debit hold of 10 on sysA, as only a writer outside the API could leave it.
    let hold = Uuid::new_v4();
    sqlx::query(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids,
                                     creation_request, creation_outcome, creation_response,
                                     created_at, updated_at, expires_at)
           values ($1, 'transaction', 'pending', 'SAR', '[]', array['sysA', 'sysB'], '{}', 'created',
                   '{}', now(), now(), now() + interval '1 day')"#,
    )
    .bind(hold)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into open_holds (transaction_id, account_id, amount, expires_at)
         select $1, a, v, now() + interval '1 day' from (values ('sysA', -10), ('sysB', 10)) x(a, v)",
    )
    .bind(hold)
    .execute(&app.pool)
    .await
    .unwrap();
    let findings = invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap();
    let out: Vec<(&str, &str)> = findings
        .iter()
        .filter(|f| f.check.as_str() == "balance_range")
        .map(|f| (f.account.as_deref().unwrap_or(""), f.detail.as_str()))
        .collect();
    let detail = format!(
        "posted {}, pending_in 0, pending_out 10, available {}: outside ±{M}",
        -(M - 5),
        -(M + 5)
    );
    assert_eq!(out, [("sysA", detail.as_str())], "{findings:?}");
    app.finish().await;
}

/// A wallet's open holds count against its range as if posted (issue 34, item 6), as a system
/// account's do: a credit hold, or a posted credit, is admitted only while `posted +
/// pending_in` stays within 2^53 − 1, so that every hold admitted can be captured.
#[tokio::test]
async fn every_credit_hold_admitted_on_a_wallet_near_the_range_can_be_captured() {
    let app = TestApp::new().await;
    systems(&app, &["sysA", "sysH"]).await;
    app.create_wallet("rich").await;
    let r = app
        .post("/v1/transactions", &legs("sysA", "rich", M - 5))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let credit_hold = |amount: i64| {
        json!({"id": Uuid::new_v4(), "status": "pending", "entries": [
            {"account": "sysH", "amount": -amount}, {"account": "rich", "amount": amount}]})
    };
    // Past the range on its own: refused.
    let r = app.post("/v1/transactions", &credit_hold(6)).await;
    assert_eq!(field_codes(&r), ["balance_overflow"], "{}", r.text);
    // 3 fits; a second 3 would fit posted alone but not with the first held in.
    let first = app.post("/v1/transactions", &credit_hold(3)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let mut admitted = vec![first.body["id"].as_str().unwrap().to_owned()];
    let second = app.post("/v1/transactions", &credit_hold(3)).await;
    if second.status == StatusCode::CREATED {
        admitted.push(second.body["id"].as_str().unwrap().to_owned());
    }
    let posted = app.post("/v1/transactions", &legs("sysH", "rich", 3)).await;
    for id in &admitted {
        let r = app
            .post(&format!("/v1/transactions/{id}/post"), &json!({}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "capture of {id}: {}", r.text);
    }
    assert_eq!(
        admitted.len(),
        1,
        "the second hold is refused: {}",
        second.text
    );
    assert_eq!(
        field_codes(&second),
        ["balance_overflow"],
        "{}",
        second.text
    );
    assert_eq!(
        field_codes(&posted),
        ["balance_overflow"],
        "{}",
        posted.text
    );
    // The room left after the capture is 2, for holds and postings alike.
    let r = app.post("/v1/transactions", &credit_hold(2)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.get("/v1/accounts/rich").await;
    assert_eq!(r.body["balances"]["posted"], json!(M - 2), "{}", r.text);
    assert_eq!(r.body["balances"]["pending_in"], json!(2), "{}", r.text);
    app.finish().await;
}
