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
use super::load::Load;
use axum::http::StatusCode;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_worker_added_and_rebalanced_under_load_loses_and_doubles_nothing() {
    let app = Arc::new(TestApp::unlimited().await);
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

    let load = Load::start(app.clone(), "grow").await;
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
    .bind(&load.wallets)
    .bind(i32::from(added))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        moved > 0,
        "wallets that took transfers were moved to the added worker"
    );
    let first = load
        .stop_and_check(&[StatusCode::SERVICE_UNAVAILABLE])
        .await;
    eprintln!("creates during the rebalance, by first answer: {first:?}");
    Arc::into_inner(app).unwrap().finish().await;
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
