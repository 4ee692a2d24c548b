//! Every answer that shows several balances shows one state the ledger was in (issue 34, item
//! 1): under concurrent hold captures, no read may pair the posted balance from before a
//! capture with the open-hold totals from after it.
//!
//! The model: the payer `w` only ever loses `available` (each hold reserves, each capture moves
//! the reserved amount from `pending_out` to `posted`), and the payee `payee` only ever gains
//! `posted + pending_in`. So within one reader, reading one snapshot after another, `available`
//! of `w` never rises and `posted + pending_in` of `p` never falls; a read mixing two
//! snapshots breaks one of them by the captured amount.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use uuid::Uuid;

const LOOPS: usize = 16;
const CYCLES: usize = 25;
const READERS: usize = 3;

/// Holds `amount` from `w` to `p` and captures it, `CYCLES` times.
async fn capture_loop(app: Arc<TestApp>, amount: i64) {
    for _ in 0..CYCLES {
        let hold = json!({"id": Uuid::new_v4(), "status": "pending", "entries": [
            {"account": "w", "amount": -amount}, {"account": "payee", "amount": amount}]});
        let r = app.post("/v1/transactions", &hold).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        let r = app
            .post(&format!("/v1/transactions/{id}/post"), &json!({}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
}

/// One balance figure out of an account answer (or a holds page).
fn figure(body: &Value, name: &str) -> i64 {
    body["balances"][name].as_i64().unwrap()
}

/// What `path` answers must respect the model; returns how many reads broke it.
async fn reader(app: Arc<TestApp>, running: Arc<AtomicBool>, path: &str) -> (usize, usize) {
    let (mut reads, mut broken) = (0, 0);
    let (mut w_available, mut p_incoming) = (i64::MAX, i64::MIN);
    while running.load(Ordering::Relaxed) {
        let w = app.get(&format!("/v1/accounts/w{path}")).await;
        let p = app.get(&format!("/v1/accounts/payee{path}")).await;
        assert_eq!(w.status, StatusCode::OK, "{}", w.text);
        assert_eq!(p.status, StatusCode::OK, "{}", p.text);
        let available = figure(&w.body, "available");
        assert_eq!(
            available,
            figure(&w.body, "posted") - figure(&w.body, "pending_out")
        );
        let incoming = figure(&p.body, "posted") + figure(&p.body, "pending_in");
        if available > w_available || incoming < p_incoming {
            eprintln!(
                "mixed snapshot: w available {w_available} -> {available}, p posted + pending_in {p_incoming} -> {incoming}"
            );
            broken += 1;
        }
        (w_available, p_incoming) = (available, incoming);
        reads += 1;
    }
    (reads, broken)
}

async fn no_read_mixes_snapshots(path: &'static str) {
    let app = Arc::new(TestApp::unlimited().await);
    app.create_wallet("w").await;
    app.create_wallet("payee").await;
    app.fund("w", 1_000_000_000).await;
    let running = Arc::new(AtomicBool::new(true));
    let readers: Vec<_> = (0..READERS)
        .map(|_| tokio::spawn(reader(app.clone(), running.clone(), path)))
        .collect();
    let loops: Vec<_> = (0..LOOPS)
        .map(|i| tokio::spawn(capture_loop(app.clone(), 1 + i as i64)))
        .collect();
    for l in loops {
        l.await.unwrap();
    }
    running.store(false, Ordering::Relaxed);
    let (mut reads, mut broken) = (0, 0);
    for r in readers {
        let (n, b) = r.await.unwrap();
        (reads, broken) = (reads + n, broken + b);
    }
    eprintln!("{reads} reads of {path:?}, {broken} mixed");
    assert!(reads > 0);
    assert_eq!(broken, 0, "{broken} of {reads} reads mixed two snapshots");
    let moved: i64 = (1..=LOOPS as i64).sum::<i64>() * CYCLES as i64;
    assert_eq!(app.posted_balance("payee").await, moved);
    Arc::into_inner(app).unwrap().finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_account_read_is_one_snapshot_under_concurrent_captures() {
    no_read_mixes_snapshots("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holds_page_is_one_snapshot_under_concurrent_captures() {
    no_read_mixes_snapshots("/holds").await;
}

/// An `as_of` answer is final (issue 34, item 4): a writer takes its ledger time before it
/// commits, so a slow one commits entries with a ledger time before an instant already read.
/// The answer describes the instant it echoes as `as_of`, and reading that instant again after
/// the slow writer committed gives the same balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_as_of_answer_does_not_change_when_a_slow_writer_commits() {
    let app = Arc::new(TestApp::unlimited().await);
    app.create_wallet("w").await;
    app.fund("w", 100).await;
    // The slow writer: with `entries` locked by another session, a payment takes its ledger
    // time, then waits to insert its entries.
    let mut blocker = app.pool.begin().await.unwrap();
    sqlx::query("lock table entries in share mode")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let writer = {
        let app = app.clone();
        tokio::spawn(async move { app.fund("w", 7).await })
    };
    super::common::wait_for_lock_waiters(&app, 1).await;
    let t = chrono::Utc::now();
    let at = |t: &str| format!("/v1/accounts/w?as_of={}", t.replace('+', "%2B"));
    let first = app.get(&at(&t.to_rfc3339())).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let described: chrono::DateTime<chrono::Utc> =
        first.body["as_of"].as_str().unwrap().parse().unwrap();
    assert!(described <= t, "{}", first.text);

    blocker.commit().await.unwrap();
    writer.await.unwrap();
    let ledger_time = app.get("/v1/accounts/w/entries").await.body["data"][0]["ledger_time"]
        .as_str()
        .unwrap()
        .parse::<chrono::DateTime<chrono::Utc>>()
        .unwrap();
    assert!(
        ledger_time <= t,
        "the slow writer's ledger time is before t"
    );
    let again = app.get(&at(first.body["as_of"].as_str().unwrap())).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["as_of"], first.body["as_of"]);
    assert_eq!(
        again.body["balances"], first.body["balances"],
        "the answer for {described} changed after the slow writer committed"
    );
    // Once nothing is in flight, an instant just past is final at once.
    let now = app.get(&at(&t.to_rfc3339())).await;
    assert_eq!(
        now.body["as_of"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        t
    );
    assert_eq!(now.body["balances"]["posted"], 107, "{}", now.text);
    Arc::into_inner(app).unwrap().finish().await;
}
