//! Growing a running cluster: a worker added and the shards rebalanced onto it while
//! transfers run (docs/operations.md, "Growing a Citus cluster").
//!
//! Citus keeps its metadata per database, so this test's database starts on one worker of
//! the shared cluster (the other drained and removed from it before the load), and the load
//! runs while that worker is added back and `citus_rebalance_start` moves half the shards to
//! it. Every create is answered (201, a replay, or 503 while a shard it needs is being moved);
//! each is then retried under its id until it is answered for sure, and the ledger must hold
//! every one exactly once, with balances and `verify` as if nothing had moved.
//!
//! The moves block writes to a shard while it is copied (`block_writes`): the same run with
//! Citus's default (`auto`, logical replication, writes go on) passed too, but its 15 moves
//! took about 200 s on two cores, too long for every CI run (docs/operations.md).

use super::common::TestApp;
use axum::http::StatusCode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// Twice the shards, so that nearly every shard holds wallets and a rebalance must move some.
const WALLETS: usize = 64;
const FUNDING: i64 = 1_000_000;
const CLIENTS: usize = 8;

/// One create the load made: what it asked, and the first answer it got.
#[derive(Debug, Clone)]
struct Sent {
    id: Uuid,
    from: usize,
    to: usize,
    amount: i64,
    first: StatusCode,
}

#[tokio::test]
async fn a_worker_added_and_rebalanced_under_load_loses_and_doubles_nothing() {
    let app = Arc::new(TestApp::unlimited().await);
    let wallets: Vec<String> = (0..WALLETS).map(|i| format!("grow{i}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
        app.fund(w, FUNDING).await;
    }
    let added = super::backend::cluster().await.workers[1];
    placement_sql(
        &app,
        &format!(
            "select citus_drain_node('127.0.0.1', {added}, shard_transfer_mode => 'block_writes')"
        ),
    )
    .await;
    placement_sql(
        &app,
        &format!("select citus_remove_node('127.0.0.1', {added})"),
    )
    .await;
    assert_eq!(
        nodes_with_shards(&app).await,
        1,
        "the load starts on one worker"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| tokio::spawn(load(app.clone(), wallets.clone(), client, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    placement_sql(
        &app,
        &format!("select citus_add_node('127.0.0.1', {added})"),
    )
    .await;
    placement_sql(
        &app,
        "select citus_rebalance_start(rebalance_strategy => 'by_shard_count',
                                      shard_transfer_mode => 'block_writes')",
    )
    .await;
    placement_sql(&app, "select citus_rebalance_wait()").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut sent = Vec::new();
    for c in clients {
        sent.extend(c.await.unwrap());
    }
    assert_eq!(
        nodes_with_shards(&app).await,
        2,
        "the shards were spread over both workers"
    );
    let moved: i64 = sqlx::query_scalar(
        "select count(*) from unnest($1::text[]) a(id)
         join pg_dist_placement p on p.shardid = get_shard_id_for_distribution_column('accounts', a.id)
         join pg_dist_node n using (groupid) where n.nodeport = $2",
    )
    .bind(&wallets)
    .bind(i32::from(added))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        moved > 0,
        "wallets that took transfers were moved to the added worker"
    );

    let mut first: BTreeMap<u16, usize> = BTreeMap::new();
    for s in &sent {
        *first.entry(s.first.as_u16()).or_default() += 1;
        // An unanswered create may have committed or not: its retry says which, once.
        if s.first != StatusCode::CREATED {
            settle(&app, &wallets, s).await;
        }
    }
    eprintln!(
        "{} creates during the rebalance, first answers {first:?}",
        sent.len()
    );
    assert!(
        first.keys().all(|code| [200, 201, 503].contains(code)),
        "only created, replayed or unavailable: {first:?}"
    );
    assert!(
        first.get(&201).copied().unwrap_or(0) > 50,
        "the load ran: {first:?}"
    );
    let ids: Vec<Uuid> = sent.iter().map(|s| s.id).collect();
    let stored: i64 = sqlx::query_scalar("select count(*) from transactions where id = any($1)")
        .bind(&ids)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored as usize, ids.len(), "every create stored once");
    let balances = app.posted_balances(&wallets).await;
    assert_eq!(
        balances,
        expected_balances(&wallets, &sent),
        "balances as the creates say"
    );
    let findings = super::cluster::verify(&app).await;
    assert!(findings.is_empty(), "{findings:?}");
    Arc::into_inner(app).unwrap().finish().await;
}

/// One client: transfers between pseudo-random wallets until told to stop, every fifth one
/// sent twice (a retry must replay it, never make a second).
async fn load(
    app: Arc<TestApp>,
    wallets: Vec<String>,
    client: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    let mut n = client;
    while !stop.load(Ordering::Relaxed) {
        n += CLIENTS;
        let (from, to) = (n % WALLETS, (n * 7 + 3) % WALLETS);
        if from == to {
            continue;
        }
        let (id, amount) = (Uuid::new_v4(), 1 + (n % 97) as i64);
        let mut first = app
            .transfer(id, &wallets[from], &wallets[to], amount)
            .await
            .status;
        if n.is_multiple_of(5) {
            let again = app.transfer(id, &wallets[from], &wallets[to], amount).await;
            if first != StatusCode::CREATED {
                first = again.status;
            } else {
                assert!(
                    again.status == StatusCode::SERVICE_UNAVAILABLE || again.replayed(),
                    "a retry of a created transfer replays it: {} {}",
                    again.status,
                    again.text
                );
            }
        }
        sent.push(Sent {
            id,
            from,
            to,
            amount,
            first,
        });
    }
    sent
}

/// Retries `s` under its id until the answer is final: created now, or replayed.
async fn settle(app: &TestApp, wallets: &[String], s: &Sent) {
    for _ in 0..100 {
        let r = app
            .transfer(s.id, &wallets[s.from], &wallets[s.to], s.amount)
            .await;
        match r.status {
            StatusCode::CREATED => return,
            StatusCode::OK if r.replayed() => return,
            StatusCode::SERVICE_UNAVAILABLE => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("retry of {}: {other} {}", s.id, r.text),
        }
    }
    panic!("{} still unanswered after the rebalance", s.id);
}

fn expected_balances(wallets: &[String], sent: &[Sent]) -> BTreeMap<String, i64> {
    let mut balances: BTreeMap<String, i64> =
        wallets.iter().map(|w| (w.clone(), FUNDING)).collect();
    for s in sent {
        *balances.get_mut(&wallets[s.from]).unwrap() -= s.amount;
        *balances.get_mut(&wallets[s.to]).unwrap() += s.amount;
    }
    balances
}

/// A placement function of Citus on this test's database (its metadata is its own).
async fn placement_sql(app: &TestApp, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&app.pool)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// How many workers hold shards of `accounts`.
async fn nodes_with_shards(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "select count(distinct p.groupid) from pg_dist_placement p
         join pg_dist_shard s using (shardid) where s.logicalrelid = 'accounts'::regclass",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap()
}
