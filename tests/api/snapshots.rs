//! Every answer that shows several balances shows one state the ledger was in (issue 34, item
//! 1): under concurrent hold captures, no read may pair the posted balance from before a
//! capture with the open-hold totals from after it.
//!
//! The model: the payer `w` only ever loses `available` (each hold reserves, each capture moves
//! the reserved amount from `pending_out` to `posted`), and the payee `p` only ever gains
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
            {"account": "w", "amount": -amount}, {"account": "p", "amount": amount}]});
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
        let p = app.get(&format!("/v1/accounts/p{path}")).await;
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
    let app = Arc::new(TestApp::new().await);
    app.create_wallet("w").await;
    app.create_wallet("p").await;
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
    assert_eq!(app.posted_balance("p").await, moved);
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
