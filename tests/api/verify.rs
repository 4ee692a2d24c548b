//! `wallet-ledger verify`: a clean ledger passes; a ledger corrupted on purpose (guards
//! disabled, rows edited by SQL) fails and names the account, entry or transaction.

use super::common::TestApp;
use chrono::TimeDelta;
use serde_json::json;
use tokio::process::Command;
use uuid::Uuid;
use wallet_ledger::ledger::checkpoints;
use wallet_ledger::reconcile::invariants::{self, Finding};

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");

/// A little of everything: payments, transfers, a captured and a voided hold, a reversal,
/// and a checkpoint of the clearing account.
async fn busy_ledger() -> TestApp {
    let app = TestApp::new().await;
    for w in ["w1", "w2", "w3"] {
        app.create_wallet(w).await;
    }
    let payment = app.fund("w1", 10_000).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.fund("w2", 500).await;
    app.transfer(Uuid::new_v4(), "w1", "w2", 1_000).await;
    app.transfer(Uuid::new_v4(), "w3", "w1", 1).await; // refused
    for (amount, action) in [(300, "post"), (200, "void")] {
        let id = Uuid::new_v4();
        app.post(
            "/v1/transfers",
            &json!({"id": id, "from": "w1", "to": "w3", "amount": amount, "status": "pending"}),
        )
        .await;
        app.post_empty(&format!("/v1/transactions/{id}/{action}"))
            .await;
    }
    app.post(
        &format!("/v1/transactions/{payment}/reverse"),
        &json!({"id": Uuid::new_v4(), "amount": 2_000}),
    )
    .await;
    checkpoints::advance(&mut crate::backend::db(
        &mut app.pool.acquire().await.unwrap(),
    ))
    .await
    .unwrap();
    app.fund("w3", 7).await; // an entry after the checkpoint
    app
}

async fn findings(app: &TestApp) -> Vec<Finding> {
    invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap()
}

async fn sql(app: &TestApp, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&app.pool)
        .await
        .unwrap();
}

async fn verify_binary(app: &TestApp, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["verify", "--database-url", &app.database_url])
        .args(extra)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test]
async fn a_clean_ledger_passes_every_check() {
    let app = busy_ledger().await;
    assert_eq!(findings(&app).await, []);
    let (code, out) = verify_binary(&app, &[]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("wallet_chain") && out.contains("the ledger is consistent"),
        "{out}"
    );
    let (code, out) = verify_binary(&app, &["--json"]).await;
    assert_eq!(code, Some(0));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["clean"], true);
    assert_eq!(
        report["checks"].as_array().unwrap().len(),
        invariants::Check::ALL.len()
    );
    app.finish().await;
}

#[tokio::test]
async fn an_entry_altered_behind_the_guards_is_named_by_account_and_entry() {
    let app = busy_ledger().await;
    let (entry, sequence): (i64, i64) = sqlx::query_as(
        "select id, sequence from entries where account_id = 'w2' order by sequence limit 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    sql(
        &app,
        &format!("update entries set amount = amount + 1 where id = {entry}"),
    )
    .await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;

    let found = findings(&app).await;
    let checks: Vec<&str> = found.iter().map(|f| f.check.as_str()).collect();
    assert!(
        checks.contains(&"unbalanced_transaction") && checks.contains(&"trial_balance"),
        "{found:?}"
    );
    let chain = found
        .iter()
        .find(|f| f.check.as_str() == "wallet_chain")
        .expect("the chain breaks");
    assert_eq!(
        (chain.account.as_deref(), chain.entry),
        (Some("w2"), Some(entry))
    );
    assert!(
        chain.detail.contains(&format!("sequence {sequence}")),
        "{}",
        chain.detail
    );

    let (code, out) = verify_binary(&app, &[]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(&format!("account w2, entry {entry}")), "{out}");
    assert!(
        out.contains("wallet_chain") && out.contains("FAILED"),
        "{out}"
    );
    app.finish().await;
}

#[tokio::test]
async fn gaps_checkpoints_holds_postings_and_reversals_are_each_found() {
    let app = busy_ledger().await;
    // A gap in w3's chain: its last entry's sequence pushed forward.
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    sql(&app, "update entries set sequence = sequence + 5 where id = (select max(id) from entries where account_id = 'w3')").await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;
    // A checkpoint that does not match its entries.
    sql(
        &app,
        "insert into account_checkpoints (account_id, below_xid, posted, entry_count)
               values ('clearing:test:SAR', '1'::xid8, 42, 1)",
    )
    .await;
    // A hold long overdue, and a reservation left behind by a posted transaction.
    let hold = Uuid::new_v4();
    app.post(
        "/v1/transfers",
        &json!({"id": hold, "from": "w1", "to": "w2", "amount": 1, "status": "pending"}),
    )
    .await;
    sql(
        &app,
        &format!(
            "update transactions set expires_at = now() - interval '1 day' where id = '{hold}'"
        ),
    )
    .await;
    let posted: Uuid = sqlx::query_scalar(
        "select id from transactions where status = 'posted' and kind = 'transfer' limit 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sql(
        &app,
        &format!("insert into open_holds values ('{posted}', 'w1', -5, now() + interval '1 day')"),
    )
    .await;
    // A reversal that claims more than its original moved.
    sql(
        &app,
        "alter table transactions disable trigger transactions_resolution_immutable",
    )
    .await;
    sql(
        &app,
        "update transactions set reversed_amount = 20000 where kind = 'reversal'",
    )
    .await;
    sql(
        &app,
        "alter table transactions enable trigger transactions_resolution_immutable",
    )
    .await;

    let found = findings(&app).await;
    let about = |check: &str| {
        found
            .iter()
            .filter(|f| f.check.as_str() == check)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        about("wallet_chain")
            .iter()
            .any(|f| f.account.as_deref() == Some("w3") && f.detail.contains("gap")),
        "{found:?}"
    );
    assert_eq!(
        about("checkpoint_mismatch")[0].account.as_deref(),
        Some("clearing:test:SAR")
    );
    assert_eq!(about("overdue_hold")[0].transaction, Some(hold));
    assert_eq!(about("stale_open_hold")[0].transaction, Some(posted));
    assert_eq!(about("over_reversed").len(), 1);
    assert!(
        about("unbalanced_transaction").is_empty(),
        "amounts were not touched"
    );
    let (code, _) = verify_binary(&app, &["--hold-grace-ms", "1000"]).await;
    assert_eq!(code, Some(1));
    // A grace longer than any time the ledger can hold turns the overdue check off (it used
    // to fail the whole run: "timestamp out of range").
    let (code, out) =
        verify_binary(&app, &["--hold-grace-ms", "18446744073709551615", "--json"]).await;
    assert_eq!(code, Some(1), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let overdue = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "overdue_hold")
        .unwrap();
    assert_eq!(overdue["findings"], serde_json::json!([]), "{out}");
    app.finish().await;
}

#[tokio::test]
async fn an_entry_relabelled_or_moved_behind_the_guards_is_an_entry_mismatch() {
    let app = busy_ledger().await;
    app.create_wallet("w9").await;
    let (relabelled, moved, moved_tx): (i64, i64, Uuid) = sqlx::query_as(
        "select (select id from entries where account_id = 'w1' order by id limit 1),
                e.id, e.transaction_id
         from entries e where e.account_id = 'w2' order by e.id desc limit 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    sql(
        &app,
        &format!("update entries set currency = 'USD' where id = {relabelled}"),
    )
    .await;
    sql(
        &app,
        &format!("update entries set account_id = 'w9' where id = {moved}"),
    )
    .await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;

    let found = findings(&app).await;
    let mismatches: Vec<&Finding> = found
        .iter()
        .filter(|f| f.check.as_str() == "entry_mismatch")
        .collect();
    let relabel = mismatches
        .iter()
        .find(|f| f.entry == Some(relabelled))
        .unwrap_or_else(|| panic!("the relabelled entry: {found:?}"));
    assert_eq!(
        relabel.detail,
        "entry in USD on an account in SAR for a transaction in SAR"
    );
    let moved_to: Vec<&str> = mismatches
        .iter()
        .filter(|f| f.transaction == Some(moved_tx) && f.entry.is_none())
        .map(|f| f.account.as_deref().unwrap())
        .collect();
    assert_eq!(moved_to, ["w2", "w9"], "{found:?}");
    let (code, out) = verify_binary(&app, &[]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("entry_mismatch") && out.contains("FAILED"),
        "{out}"
    );
    app.finish().await;
}

#[tokio::test]
async fn an_entry_redated_behind_the_guards_is_an_entry_mismatch() {
    let app = busy_ledger().await;
    let dated = (chrono::Utc::now() - chrono::TimeDelta::days(2)).to_rfc3339();
    let r = app
        .post(
            "/v1/payments",
            &json!({"id": Uuid::new_v4(), "account": "w1", "amount": 5, "currency": "SAR",
                    "provider": "test", "effective_at": dated}),
        )
        .await;
    assert_eq!(r.status, axum::http::StatusCode::CREATED, "{}", r.text);
    assert!(
        findings(&app).await.is_empty(),
        "a backdated payment is consistent"
    );
    let (redated, undated): (i64, i64) = sqlx::query_as(
        "select (select id from entries where effective_at is not null order by id limit 1),
                (select id from entries where effective_at is null order by id limit 1)",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    let earlier = format!(
        "update entries set effective_at = effective_at - interval '1 day' where id = {redated}"
    );
    sql(&app, &earlier).await;
    let backdated = format!(
        "update entries set effective_at = ledger_time - interval '1 hour' where id = {undated}"
    );
    sql(&app, &backdated).await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;

    let found = findings(&app).await;
    let named: Vec<Option<i64>> = found
        .iter()
        .filter(|f| f.check.as_str() == "entry_mismatch")
        .map(|f| f.entry)
        .collect();
    assert_eq!(
        named,
        [Some(redated.min(undated)), Some(redated.max(undated))],
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .all(|f| f.check.as_str() != "entry_mismatch"
                || f.detail.starts_with("entry effective at")),
        "{found:?}"
    );
    app.finish().await;
}

#[tokio::test]
async fn verify_against_an_unreachable_database_exits_2() {
    let out = Command::new(BIN)
        .args([
            "verify",
            "--database-url",
            "postgres://postgres@127.0.0.1:1/nowhere",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach PostgreSQL"));
}

#[tokio::test]
async fn dead_letters_and_dead_deliveries_are_counted_without_failing_the_books() {
    let app = busy_ledger().await;
    // Two dead letters on a stream of this test's own.
    let stream = super::stream_support::unique_stream("verify");
    let mut redis =
        super::stream_support::redis_at(&super::stream_support::shared_redis_url()).await;
    for n in 0..2 {
        let fields = [
            ("event_id", "x"),
            ("dlq_reason", "malformed_event"),
            ("n", if n == 0 { "1" } else { "2" }),
        ];
        let _: String =
            redis::AsyncCommands::xadd(&mut redis, format!("{stream}.dlq"), "*", &fields)
                .await
                .unwrap();
    }
    // One dead delivery: a subscription, its delivery of the first event, given up on.
    sql(
        &app,
        "insert into webhook_subscriptions (id, url, event_types, secrets, creation_request,
                                            creation_response, created_at, updated_at)
         values ('00000000-0000-4000-8000-000000000001', 'http://127.0.0.1:9/x', '{}',
                 array['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], '{}', '{}', now(), now())",
    )
    .await;
    sql(
        &app,
        "insert into webhook_deliveries (id, event_id, subscription_id, status, attempts,
                                         next_attempt_at, last_error)
         select gen_random_uuid(), id, '00000000-0000-4000-8000-000000000001', 'dead', 15, now(),
                'the receiver could not be reached'
         from outbox_events order by seq limit 1",
    )
    .await;

    let (code, out) = verify_binary(&app, &["--json", "--stream", &stream]).await;
    assert_eq!(code, Some(0), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["clean"], true);
    assert_eq!(report["failures"]["dead_letters"], 2, "{report}");
    assert_eq!(
        report["failures"]["dead_letters_stream"],
        format!("{stream}.dlq")
    );
    assert_eq!(report["failures"]["dead_deliveries"], 1);

    // The text report says so too; an unreachable broker is reported, not fatal.
    let (code, out) = verify_binary(&app, &["--stream", &stream]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("dead letters             2 in"), "{out}");
    assert!(
        out.contains("dead deliveries          1 (0 pending)"),
        "{out}"
    );
    let port = super::stream_support::free_port();
    let (code, out) =
        verify_binary(&app, &["--redis-url", &format!("redis://127.0.0.1:{port}")]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("unknown (Redis unreachable)"), "{out}");
    let _: () = redis::AsyncCommands::del(&mut redis, format!("{stream}.dlq"))
        .await
        .unwrap();
    app.finish().await;
}

#[tokio::test]
async fn a_reader_that_goes_away_does_not_make_verify_panic() {
    let app = busy_ledger().await;
    let mut child = Command::new(BIN)
        .args(["verify", "--database-url", &app.database_url])
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -0`: the reading end is closed before verify prints anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    app.finish().await;
}

#[tokio::test]
async fn an_exchange_relabelled_or_over_reversed_behind_the_guards_is_found() {
    let app = TestApp::new().await;
    app.create_account("e1", "EUR", "wallet").await;
    app.create_account("y1", "JPY", "wallet").await;
    let pay = json!({"id": Uuid::new_v4(), "account": "e1", "amount": 50_000, "currency": "EUR", "provider": "test"});
    assert_eq!(app.post("/v1/payments", &pay).await.status, 201);
    // 100.00 EUR for 16,124 yen: what a check summing both currencies would call 26,124.
    let exchange = Uuid::new_v4();
    let body = json!({"id": exchange, "from": "e1", "to": "y1", "amount": 10_000,
                      "currency": "EUR", "counter_currency": "JPY", "rate": "161.237"});
    assert_eq!(app.post("/v1/exchanges", &body).await.status, 201);
    let reversal = json!({"id": Uuid::new_v4()});
    let r = app
        .post(&format!("/v1/transactions/{exchange}/reverse"), &reversal)
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(findings(&app).await, []);

    // The reversal claims 150.00 EUR back: more than the 100.00 EUR the exchange moved.
    sql(
        &app,
        "alter table transactions disable trigger transactions_resolution_immutable",
    )
    .await;
    sql(
        &app,
        "update transactions set reversed_amount = 15000 where kind = 'reversal'",
    )
    .await;
    sql(
        &app,
        "alter table transactions enable trigger transactions_resolution_immutable",
    )
    .await;
    // The exchange's yen entry on fx:JPY relabelled as euros.
    let (entry,): (i64,) = sqlx::query_as(
        "select id from entries where transaction_id = $1 and account_id = 'fx:JPY'",
    )
    .bind(exchange)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sql(
        &app,
        "alter table entries disable trigger entries_immutable",
    )
    .await;
    sql(
        &app,
        &format!("update entries set currency = 'EUR' where id = {entry}"),
    )
    .await;
    sql(&app, "alter table entries enable trigger entries_immutable").await;

    let found = findings(&app).await;
    let about = |check: &str| {
        found
            .iter()
            .filter(|f| f.check.as_str() == check)
            .collect::<Vec<_>>()
    };
    let over = about("over_reversed");
    assert_eq!(over.len(), 1, "{found:?}");
    assert_eq!(over[0].transaction, Some(exchange));
    let mislabelled = about("entry_mismatch");
    assert_eq!(mislabelled.len(), 1, "{found:?}");
    assert_eq!(mislabelled[0].entry, Some(entry));
    assert!(
        mislabelled[0]
            .detail
            .contains("for a transaction in EUR and JPY"),
        "{found:?}"
    );
    assert_eq!(
        about("unbalanced_transaction")[0].transaction,
        Some(exchange)
    );
    app.finish().await;
}
