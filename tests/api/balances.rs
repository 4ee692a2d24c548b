//! Balances are derived from immutable entries, and reading one does not scan history.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::json;
use sqlx::Connection;
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::ledger::{accounts, checkpoints};

/// Writes `n` payments of 1 minor unit into wallet `w` from system account `clearing:bulk:SAR`
/// with plain SQL (100,000 API calls would take minutes), in one statement per table so the
/// journal trigger checks every entry as the API's own inserts are checked; the wallet's links
/// are chained by a recursive query, as the write path would chain them.
async fn bulk_payments(app: &TestApp, n: i64) {
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, creation_request,
                                   creation_outcome, creation_response, created_at, posted_at, updated_at)
         select md5('bulk' || i)::uuid, 'payment', 'posted', 'SAR', '[]', array['clearing:bulk:SAR', 'w'],
                '{}', 'created', '{}', now(), now(), now()
         from generate_series(1, $1) i",
    )
    .bind(n)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "with recursive chain (i, link) as (
             select 1::bigint, entry_chain_hash(null, md5('bulk1')::uuid, 'w', 'SAR', 1, 1, 1, now(), null)
             union all
             select i + 1, entry_chain_hash(link, md5('bulk' || (i + 1))::uuid, 'w', 'SAR', 1,
                                            i + 1, i + 1, now(), null)
             from chain where i < $1)
         insert into entries (transaction_id, account_id, currency, amount, sequence, balance_after,
                              ledger_time, chain_hash)
         select md5('bulk' || i)::uuid, 'w', 'SAR', 1, i, i, now(), link from chain
         union all
         select md5('bulk' || i)::uuid, 'clearing:bulk:SAR', 'SAR', -1, null, null, now(), null
         from generate_series(1, $1) i",
    )
    .bind(n)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("analyze entries")
        .execute(&app.pool)
        .await
        .unwrap();
}

/// Advances checkpoints until one of `account` covers `entries` entries. The horizon is
/// cluster-wide: any older transaction still running anywhere on the server (another test's
/// bulk insert) holds checkpoints back, never makes them wrong; so wait, up to a minute.
async fn checkpoint_covering(app: &TestApp, account: &str, entries: i64) {
    let what = format!("a checkpoint of {account} covering its {entries} entries");
    super::common::poll_until(std::time::Duration::from_secs(60), what, || async {
        checkpoints::advance(&mut crate::backend::db(
            &mut app.pool.acquire().await.unwrap(),
        ))
        .await
        .unwrap();
        let covered: i64 = sqlx::query_scalar(
            "select coalesce(max(entry_count), 0) from account_checkpoints where account_id = $1",
        )
        .bind(account)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        (covered == entries).then_some(())
    })
    .await
}

/// Rows of `entries` that this session's current transaction has read so far, by any path.
async fn entry_rows_read(conn: &mut sqlx::PgConnection) -> (i64, i64, i64) {
    sqlx::query_as(
        "select coalesce(seq_scan, 0), coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0)
         from pg_stat_xact_user_tables where relname = 'entries'",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn reading_a_balance_touches_a_handful_of_rows_among_100k_entries() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.create_account("clearing:bulk:SAR", "SAR", "system")
        .await;
    bulk_payments(&app, 100_000).await;
    checkpoint_covering(&app, "clearing:bulk:SAR", 100_000).await;
    // Writes after the checkpoint are part of the balance too.
    app.create_wallet("w6").await;
    app.post("/v1/payments", &json!({"id": Uuid::new_v4(), "account": "w6", "amount": 7, "currency": "SAR", "provider": "bulk"}))
        .await;

    let mut conn = app.pool.acquire().await.unwrap();
    for (id, expected) in [("w", 100_000), ("clearing:bulk:SAR", -100_007)] {
        let account = accounts::find(&mut conn, id).await.unwrap().unwrap();
        let mut tx = conn.begin().await.unwrap();
        let before = entry_rows_read(&mut tx).await;
        let balances = accounts::balances(&mut tx, &account).await.unwrap();
        let after = entry_rows_read(&mut tx).await;
        tx.rollback().await.unwrap();
        assert_eq!(balances.posted.minor_units(), expected, "{id}");
        let (seq_scans, seq_rows, index_rows) =
            (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        assert_eq!(
            (seq_scans, seq_rows),
            (0, 0),
            "{id}: no sequential scan of entries"
        );
        assert!(
            index_rows <= 5,
            "{id}: read {index_rows} entries to derive a balance over 100,000"
        );
    }

    // The plan of the wallet read, for the record: a backward index scan stopped after one row.
    let plan: Vec<String> = sqlx::query_scalar(
        "explain (analyze, costs off, timing off, summary off)
         select balance_after from entries where account_id = 'w' and sequence is not null
         order by sequence desc limit 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("Index Scan Backward") && plan.contains("rows=1 loops=1"),
        "{plan}"
    );
    drop(conn);

    // The API reads the same numbers.
    assert_eq!(app.posted_balance("w").await, 100_000);
    let r = app.get("/v1/accounts/clearing:bulk:SAR").await;
    assert_eq!(r.body["balances"]["posted_decimal"], "-1000.07");
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn system_account_checkpoints_lose_and_double_nothing_under_concurrent_writes() {
    let app = Arc::new(TestApp::new().await);
    for i in 0..8 {
        app.create_wallet(&format!("w{i}")).await;
    }
    // Payments from 8 writers into one clearing account while checkpoints advance.
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    app.fund(&format!("w{i}"), 3).await;
                }
            })
        })
        .collect();
    let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let checkpointer = {
        let (app, writing) = (app.clone(), writing.clone());
        tokio::spawn(async move {
            let mut written = 0;
            while writing.load(std::sync::atomic::Ordering::Relaxed) {
                written += checkpoints::advance(&mut crate::backend::db(
                    &mut app.pool.acquire().await.unwrap(),
                ))
                .await
                .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            written
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    // Checkpoints may be held back while writers run (see checkpoint_covering): count them,
    // but do not require one.
    let during = checkpointer.await.unwrap();
    eprintln!("{during} checkpoints taken while writers ran");
    // Once every writer has finished, a checkpoint covers all their entries as soon as no older
    // transaction anywhere on the cluster is still running (up to a minute under CI load).
    checkpoint_covering(&app, "clearing:test:SAR", 200).await;

    let summed: i64 = sqlx::query_scalar(
        "select sum(amount)::bigint from entries where account_id = 'clearing:test:SAR'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(summed, -600);
    assert_eq!(
        app.posted_balance("clearing:test:SAR").await,
        -600,
        "checkpoint + tail = every entry, once"
    );
    let (posted, count): (i64, i64) = sqlx::query_as(
        "select posted, entry_count from account_checkpoints where account_id = 'clearing:test:SAR'
         order by below_xid desc limit 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        (posted, count),
        (-600, 200),
        "the latest checkpoint covers all 200 entries"
    );
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn overdraft_limit_lets_a_wallet_go_that_far_below_zero_and_no_further() {
    let app = TestApp::new().await;
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "od", "currency": "SAR", "type": "wallet", "overdraft_limit": 500}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    app.create_wallet("w2").await;
    assert_eq!(
        app.transfer(Uuid::new_v4(), "od", "w2", 400).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        app.transfer(Uuid::new_v4(), "od", "w2", 100).await.status,
        StatusCode::CREATED
    );
    let r = app.transfer(Uuid::new_v4(), "od", "w2", 1).await;
    assert_eq!(r.code(), "insufficient_funds");
    let account = app.get("/v1/accounts/od").await;
    assert_eq!(account.body["balances"]["posted"], -500);
    assert_eq!(account.body["balances"]["available_decimal"], "-5.00");
    // A plain wallet cannot go below zero at all; system accounts may.
    assert_eq!(
        app.transfer(Uuid::new_v4(), "w2", "od", 501).await.code(),
        "insufficient_funds"
    );
    assert_eq!(app.posted_balance("w2").await, 500);
    app.finish().await;
}

#[tokio::test]
async fn balance_as_of_a_past_moment_is_the_last_entry_at_or_before_it() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.fund("w", 100).await;
    let after_first = app.get("/v1/accounts/w/entries").await.body["data"][0]["ledger_time"]
        .as_str()
        .unwrap()
        .to_owned();
    app.fund("w", 50).await;

    let written = chrono::Utc::now();
    let at = |t: &str| format!("/v1/accounts/w?as_of={}", t.replace('+', "%2B"));
    let first: chrono::DateTime<chrono::Utc> = after_first.parse().unwrap();
    let r = app.get_final(&at(&after_first), first).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["balances"]["posted"], 100);
    assert_eq!(r.body["as_of"], after_first);
    assert_eq!(
        app.get(&at("2000-01-01T00:00:00Z")).await.body["balances"]["posted"],
        0
    );
    let later = app.get_final(&at("2999-01-01T00:00:00Z"), written).await;
    assert_eq!(later.body["balances"]["posted"], 150);
    assert_eq!(
        later.body["balances"]["posted"],
        app.posted_balance("w").await
    );
    let bad = app.get("/v1/accounts/w?as_of=yesterday").await;
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::BAD_REQUEST, "invalid_query")
    );
    app.finish().await;
}
