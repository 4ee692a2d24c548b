//! What only a cluster shows: where rows land, transfers and retries across workers, the
//! distribution by `migrate`, and the journal rules that no single shard can see.

use super::common::TestApp;
use axum::http::StatusCode;
use sqlx::Connection;
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::db::citus::{self, DISTRIBUTED, Distribution, SESSION_DEFAULTS};
use wallet_ledger::reconcile::invariants;

async fn shard_of(pool: &PgPool, account: &str) -> i64 {
    sqlx::query_scalar("select get_shard_id_for_distribution_column('accounts', $1::text)")
        .bind(account)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The first `count` ids named `{prefix}{i}` whose shard of `accounts` passes `wanted`.
async fn ids_on_shards(
    pool: &PgPool,
    prefix: &str,
    count: usize,
    wanted: impl Fn(i64) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for i in 0..10_000 {
        let id = format!("{prefix}{i}");
        if wanted(shard_of(pool, &id).await) {
            found.push(id);
            if found.len() == count {
                return found;
            }
        }
    }
    panic!("no {count} ids named {prefix}* on the shards wanted");
}

/// One unchained entry written by hand, in a statement of its own.
async fn insert_entry(
    app: &TestApp,
    transaction: Uuid,
    account: &str,
    currency: &str,
    amount: i64,
) -> Result<u64, sqlx::Error> {
    sql(
        app,
        &format!(
            "insert into entries (transaction_id, account_id, currency, amount, ledger_time)
             values ('{transaction}', '{account}', '{currency}', {amount}, now())"
        ),
    )
    .await
}

/// The port of the worker that holds the shard of `account`.
async fn worker_of(pool: &PgPool, account: &str) -> i32 {
    let shard = shard_of(pool, account).await;
    sqlx::query_scalar(
        "select n.nodeport from pg_dist_placement p join pg_dist_node n on n.groupid = p.groupid
         where p.shardid = $1",
    )
    .bind(shard)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// `per_worker` wallet ids named `{prefix}{i}` on each of the two workers (ids are hashed, so
/// the first few candidates find both), created; the first half on one worker.
async fn wallets_on_both_workers(app: &TestApp, prefix: &str, per_worker: usize) -> Vec<String> {
    let mut by_worker: std::collections::BTreeMap<i32, Vec<String>> = Default::default();
    for i in 0.. {
        let id = format!("{prefix}{i}");
        let list = by_worker
            .entry(worker_of(&app.pool, &id).await)
            .or_default();
        if list.len() < per_worker {
            list.push(id);
        }
        if by_worker.len() == 2 && by_worker.values().all(|l| l.len() == per_worker) {
            break;
        }
        assert!(
            i < 1_000,
            "no ids on two workers: is the cluster missing a worker?"
        );
    }
    let ids: Vec<String> = by_worker.into_values().flatten().collect();
    for id in &ids {
        app.create_wallet(id).await;
    }
    ids
}

async fn workers_with_entries_of(app: &TestApp, id: Uuid) -> BTreeSet<i32> {
    let accounts: Vec<String> =
        sqlx::query_scalar("select account_id from entries where transaction_id = $1")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let mut workers = BTreeSet::new();
    for a in accounts {
        workers.insert(worker_of(&app.pool, &a).await);
    }
    workers
}

#[tokio::test]
async fn migrate_distributes_the_ledger_and_a_second_migrate_changes_nothing() {
    let app = TestApp::new().await;
    let tables: Vec<(String, String, i32)> = sqlx::query_as(
        "select logicalrelid::regclass::text, column_to_column_name(logicalrelid, partkey),
                colocationid from pg_dist_partition order by 1",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut expected: Vec<(String, String)> = DISTRIBUTED
        .iter()
        .map(|(t, c)| (t.to_string(), c.to_string()))
        .collect();
    expected.sort();
    let found: Vec<(String, String)> = tables
        .iter()
        .map(|(t, c, _)| (t.clone(), c.clone()))
        .collect();
    assert_eq!(
        found, expected,
        "exactly the ledger's tables, by their natural keys"
    );
    let group = |name: &str| tables.iter().find(|t| t.0 == name).unwrap().2;
    for t in ["entries", "open_holds", "account_checkpoints"] {
        assert_eq!(group(t), group("accounts"), "{t} co-located with accounts");
    }
    assert_ne!(group("transactions"), group("accounts"));

    let shape = |pool: PgPool| async move {
        sqlx::query_scalar::<_, String>(
            "select string_agg(x, ';' order by x) from (
                 select conrelid::regclass || ' ' || pg_get_constraintdef(oid) as x from pg_constraint
                 where connamespace = 'public'::regnamespace
                 union all select logicalrelid::text || ' ' || colocationid from pg_dist_partition
                 union all select count(*)::text from pg_dist_shard) s",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let before = shape(app.pool.clone()).await;
    assert_eq!(
        citus::distribute(&app.pool).await.unwrap(),
        Distribution::AlreadyDone
    );
    super::backend::migrate(&app.pool).await;
    assert_eq!(
        shape(app.pool.clone()).await,
        before,
        "a second migrate is a no-op"
    );
    app.finish().await;
}

/// Every session of the pool `migrate` hands on (to `serve`, `consume`) starts with the
/// ledger's Citus settings, those it opened before setting them included: on a database
/// migrated for the first time, the pool is opened again after the settings.
#[tokio::test]
async fn a_migrated_databases_sessions_start_with_the_ledgers_citus_settings() {
    let name = format!("wl_test_defaults_{}", Uuid::new_v4().simple());
    let url = super::backend::create_database(&name).await;
    let settings = wallet_ledger::db::DatabaseSettings::with_url(url);
    let pool = wallet_ledger::db::connect_and_migrate(&settings)
        .await
        .unwrap();
    let open = pool.size() as usize;
    let mut sessions = Vec::new();
    // Every session the pool holds, and one more.
    for _ in 0..=open {
        sessions.push(pool.acquire().await.unwrap());
    }
    for session in &mut sessions {
        for (name, value) in SESSION_DEFAULTS {
            let set: String = sqlx::query_scalar("select current_setting($1)")
                .bind(name)
                .fetch_one(&mut **session)
                .await
                .unwrap();
            assert_eq!(set, value, "{name}");
        }
    }
    drop(sessions);
    pool.close().await;
    super::backend::drop_database(&name).await;
}

/// A transaction's `SET LOCAL lock_timeout` (group commit's bounded wait, the consumer's batch
/// limits) bounds a wait for a row on a worker, as on one PostgreSQL: with Citus's default
/// `citus.propagate_set_commands` the setting stayed on the coordinator, and a group waited
/// for a wallet held elsewhere until its holder let go.
#[tokio::test]
async fn a_lock_timeout_set_in_a_transaction_bounds_a_wait_for_a_row_on_a_worker() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "t", 1).await;
    let gate = super::common::Gate::shut(&app, &w[0]).await;
    // A session opened after `migrate`, as the service's are: the test pool may hold one
    // opened before it set the database's defaults.
    let mut session = sqlx::PgConnection::connect_with(&app.pool.connect_options())
        .await
        .unwrap();
    let mut tx = session.begin().await.unwrap();
    sqlx::query("set local lock_timeout = 300")
        .execute(&mut *tx)
        .await
        .unwrap();
    let wait = sqlx::query("select id from accounts where id = $1 for update")
        .bind(&w[0])
        .fetch_one(&mut *tx);
    let waited = tokio::time::timeout(std::time::Duration::from_secs(10), wait).await;
    let refused = waited
        .expect("waited for the holder past the lock timeout")
        .unwrap_err();
    let code = refused.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("55P03"));
    tx.rollback().await.unwrap();
    session.close().await.unwrap();
    gate.open().await;
    app.finish().await;
}

#[tokio::test]
async fn a_transfer_between_wallets_on_different_workers_posts() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "x", 1).await;
    let (a, b) = (&w[0], &w[1]);
    assert_ne!(worker_of(&app.pool, a).await, worker_of(&app.pool, b).await);
    app.fund(a, 1_000).await;
    let id = Uuid::new_v4();
    let r = app.transfer(id, a, b, 400).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        workers_with_entries_of(&app, id).await.len(),
        2,
        "entries on both workers"
    );
    assert_eq!(app.posted_balance(a).await, 600);
    assert_eq!(app.posted_balance(b).await, 400);
    // And back, so both chains continue across the two-phase commits.
    let r = app.transfer(Uuid::new_v4(), b, a, 150).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.posted_balance(a).await, 750);
    assert_eq!(app.posted_balance(b).await, 250);
    let findings = verify(&app).await;
    assert!(findings.is_empty(), "{findings:?}");
    app.finish().await;
}

/// The write path locks a group's accounts one statement per shard (store/shards.rs): a
/// transfer whose payee another session holds `FOR UPDATE`, on the other worker, waits for it
/// (Citus lists the wait in `citus_lock_waits`) and posts once it is let go. Were a shard's
/// statement to lock nothing, the transfer would post while the row was held.
#[tokio::test]
async fn a_transfer_waits_for_a_wallet_held_on_the_other_worker() {
    let app = Arc::new(TestApp::new().await);
    let w = wallets_on_both_workers(&app, "l", 1).await;
    let (a, b) = (w[0].clone(), w[1].clone());
    app.fund(&a, 1_000).await;
    let (holder, transfer) = transfer_behind_a_held_row(&app, &b, (&a, &b, 400)).await;
    assert!(!transfer.is_finished(), "posted while its payee was held");
    assert_eq!(app.posted_balance(&b).await, 0);
    holder.commit().await.unwrap();
    let r = transfer.await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.posted_balance(&b).await, 400);
    Arc::into_inner(app).unwrap().finish().await;
}

/// A transaction holding `held`'s row, and a transfer `(from, to, amount)` started through the
/// service, returned once the cluster sees the transfer waiting for a lock.
async fn transfer_behind_a_held_row(
    app: &Arc<TestApp>,
    held: &str,
    (from, to, amount): (&str, &str, i64),
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<super::common::TestResponse>,
) {
    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("select id from accounts where id = $1 for update")
        .bind(held)
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    let transfer = {
        let (app, from, to) = (app.clone(), from.to_owned(), to.to_owned());
        tokio::spawn(async move { app.transfer(Uuid::new_v4(), &from, &to, amount).await })
    };
    let pool = app.pool.clone();
    super::common::poll_until(
        std::time::Duration::from_secs(30),
        "the transfer waiting on the held row",
        || async {
            let waits: i64 = sqlx::query_scalar("select count(*) from citus_lock_waits")
                .fetch_one(&pool)
                .await
                .unwrap();
            (waits > 0).then_some(())
        },
    )
    .await;
    (holder, transfer)
}

/// The read after the lock, on Citus: a writer holds the payer's row, reserves 700 of its
/// 1,000 and commits while a transfer of 400 waits for the row. The write path reads the
/// payer's reservations in a statement after the one that took the lock; a read in the
/// locking statement's own snapshot (taken before the wait) would miss the reservation and
/// post 400 of money held for someone else. No chain rule notices that, only the read's
/// timing does, so any change to how the locks and reads are sent per shard must keep this.
#[tokio::test]
async fn a_transfer_that_waited_for_its_payer_sees_what_the_holder_reserved() {
    let app = Arc::new(TestApp::new().await);
    let w = wallets_on_both_workers(&app, "r", 1).await;
    let (a, b) = (w[0].clone(), w[1].clone());
    app.fund(&a, 1_000).await;
    let (mut holder, transfer) = transfer_behind_a_held_row(&app, &a, (&a, &b, 400)).await;
    sqlx::query(
        "insert into open_holds (transaction_id, account_id, amount, expires_at)
         values ($1, $2, -700, now() + interval '1 hour')",
    )
    .bind(Uuid::new_v4())
    .bind(&a)
    .execute(&mut *holder)
    .await
    .unwrap();
    holder.commit().await.unwrap();
    let r = transfer.await.unwrap();
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert!(r.text.contains("insufficient_funds"), "{}", r.text);
    assert_eq!(app.posted_balance(&b).await, 0);
    sqlx::query("delete from open_holds where account_id = $1")
        .bind(&a)
        .execute(&app.pool)
        .await
        .unwrap();
    Arc::into_inner(app).unwrap().finish().await;
}

/// What a small group's locks taken at once run per shard (`accounts_locked_in_shard`): the
/// shard's accounts locked and, for a wallet, its head and reservations read after the lock,
/// answered once per shard (two wallets of one shard in one array, the shard's other row
/// null); and a row held elsewhere refused at once with lock_not_available, the answer that
/// sends the write path to its ordered locks instead of waiting out of order.
#[tokio::test]
async fn accounts_locked_at_once_are_read_after_their_lock_or_refused_at_once_when_busy() {
    let app = TestApp::new().await;
    let mut w = wallets_on_both_workers(&app, "n", 1).await;
    let shard = shard_of(&app.pool, &w[0]).await;
    let mate = ids_on_shards(&app.pool, "n-mate", 1, |s| s == shard)
        .await
        .remove(0);
    app.create_wallet(&mate).await;
    w.push(mate);
    app.fund(&w[0], 1_000).await;
    let r = app.transfer(Uuid::new_v4(), &w[0], &w[1], 250).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let mut holder = app.pool.begin().await.unwrap();
    let shards = locked_at_once(&mut holder, &w).await.unwrap();
    assert_eq!(
        shards.iter().filter(|s| s.is_none()).count(),
        1,
        "{shards:?}"
    );
    let mut heads: Vec<(String, i64, i64, i64)> = (shards.iter().flatten())
        .flat_map(|shard| shard.as_array().unwrap())
        .map(|l| {
            let field = |name: &str| l[name].as_i64().unwrap_or(0);
            let id = l["id"].as_str().unwrap().to_string();
            (
                id,
                field("head_sequence"),
                field("head_balance"),
                field("pending_out"),
            )
        })
        .collect();
    heads.sort();
    let mut expected = vec![
        (w[0].clone(), 2, 750, 0),
        (w[1].clone(), 1, 250, 0),
        (w[2].clone(), 0, 0, 0),
    ];
    expected.sort();
    assert_eq!(heads, expected);
    let mut other = app.pool.begin().await.unwrap();
    let started = std::time::Instant::now();
    let busy = locked_at_once(&mut other, &w[1..2]).await.unwrap_err();
    let code = busy.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("55P03"), "{busy}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "it waited"
    );
    other.rollback().await.unwrap();
    holder.rollback().await.unwrap();
    app.finish().await;
}

/// The statement `lock_accounts_at_once` sends: one answer per account row, an array from the
/// first row of each shard and null from the others.
async fn locked_at_once(
    conn: &mut sqlx::PgConnection,
    ids: &[String],
) -> Result<Vec<Option<serde_json::Value>>, sqlx::Error> {
    sqlx::query_scalar(
        "select accounts_locked_in_shard(a.id, $1, false, false, $2) from accounts a
         where a.id = any($1)",
    )
    .bind(ids)
    .bind(Uuid::new_v4())
    .fetch_all(conn)
    .await
}

/// `accounts_locked_in_shard` plans its statements once per worker session (a generic plan):
/// one made while the shard was nearly empty must still find rows by index once the shard
/// holds thousands, before any `ANALYZE` (the trap of docs/performance.md, "A sequential
/// scan in the first statement of every group": a sequential scan costed for a few rows,
/// kept for the session).
#[tokio::test]
async fn the_lock_functions_plans_made_on_an_empty_shard_stay_on_its_indexes() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "p", 1).await;
    let cluster = super::backend::cluster().await;
    let port = worker_of(&app.pool, &w[0]).await as u16;
    let mut worker = sqlx::PgConnection::connect(&cluster.url(port, &app.database))
        .await
        .unwrap();
    let lock_and_read = format!(
        "select accounts_locked_in_shard('{0}', array['{0}'], false, true, gen_random_uuid())",
        w[0]
    );
    for _ in 0..8 {
        sql_on(&mut worker, &lock_and_read).await;
    }
    sql(
        &app,
        "insert into accounts
             (id, currency, type, creation_request, creation_response, created_at, updated_at)
         select 'p-grown-' || g, 'SAR', 'wallet', '{}', '', now(), now()
         from generate_series(1, 20000) g",
    )
    .await
    .unwrap();
    sql_on(&mut worker, &lock_and_read).await;
    let prepared: Vec<String> = sqlx::query_scalar(
        "select name from pg_prepared_statements where name like 'wallet_ledger_%' order by name",
    )
    .fetch_all(&mut worker)
    .await
    .unwrap();
    assert_eq!(prepared.len(), 2, "{prepared:?}");
    sql_on(&mut worker, "set plan_cache_mode = force_generic_plan").await;
    for name in prepared {
        let arguments = if name.starts_with("wallet_ledger_locks_") {
            format!("array['{}'], false", w[0])
        } else {
            format!("array['{}']", w[0])
        };
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "explain execute {name}({arguments})"
        )))
        .fetch_all(&mut worker)
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{name}:\n{plan}");
    }
    app.finish().await;
}

/// Runs `statement` on a connection of the test's own (a worker's), asserting it succeeds.
async fn sql_on(conn: &mut sqlx::PgConnection, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

#[tokio::test]
async fn a_retry_that_names_a_wallet_on_the_other_worker_is_a_mismatch() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "m", 2).await;
    // w[0], w[1] on one worker; w[2], w[3] on the other.
    app.fund(&w[0], 1_000).await;
    app.fund(&w[2], 1_000).await;
    let id = Uuid::new_v4();
    assert_eq!(
        app.transfer(id, &w[0], &w[1], 100).await.status,
        StatusCode::CREATED
    );
    let before = app.row_counts().await;
    for (from, to) in [(&w[2], &w[3]), (&w[2], &w[1]), (&w[0], &w[3])] {
        let retry = app.transfer(id, from, to, 100).await;
        assert_eq!(
            (retry.status, retry.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_mismatch"),
            "{from} -> {to}: {}",
            retry.text
        );
    }
    assert_eq!(app.row_counts().await, before, "a mismatch writes nothing");
    assert_eq!(app.posted_balance(&w[2]).await, 1_000);
    assert_eq!(app.posted_balance(&w[3]).await, 0);
    app.finish().await;
}

#[tokio::test]
async fn fifty_identical_transfers_across_workers_make_one() {
    let app = Arc::new(TestApp::new().await);
    let w = wallets_on_both_workers(&app, "i", 1).await;
    app.fund(&w[0], 10_000).await;
    let id = Uuid::new_v4();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (app, from, to) = (app.clone(), w[0].clone(), w[1].clone());
            tokio::spawn(async move { app.transfer(id, &from, &to, 700).await })
        })
        .collect();
    let (mut created, mut bodies) = (0, BTreeSet::new());
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => assert!(r.replayed(), "{}", r.text),
            _ => panic!("unexpected answer {}: {}", r.status, r.text),
        }
        bodies.insert(r.text);
    }
    assert_eq!(created, 1, "exactly one 201, the rest replays");
    assert_eq!(bodies.len(), 1, "every answer is the one stored");
    assert_eq!(app.entries_of(id).await, 2);
    assert_eq!(app.posted_balance(&w[0]).await, 9_300);
    assert_eq!(app.posted_balance(&w[1]).await, 700);
    Arc::into_inner(app).unwrap().finish().await;
}

#[tokio::test]
async fn fifty_parallel_debits_across_workers_of_a_wallet_that_affords_ten() {
    let app = Arc::new(TestApp::new().await);
    let w = wallets_on_both_workers(&app, "d", 3).await;
    let payer = w[0].clone();
    app.fund(&payer, 1_000).await;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            let (from, to) = (payer.clone(), w[1 + i % 5].clone());
            tokio::spawn(async move { app.transfer(Uuid::new_v4(), &from, &to, 100).await })
        })
        .collect();
    let (mut created, mut refused) = (0, 0);
    for t in tasks {
        let r = t.await.unwrap();
        match (r.status, r.code()) {
            (StatusCode::CREATED, _) => created += 1,
            (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds") => refused += 1,
            _ => panic!("unexpected answer {}: {}", r.status, r.text),
        }
    }
    assert_eq!((created, refused), (10, 40));
    assert_eq!(app.posted_balance(&payer).await, 0);
    let mut received = 0;
    for r in &w[1..] {
        received += app.posted_balance(r).await;
    }
    assert_eq!(received, 1_000);
    let findings = verify(&app).await;
    assert!(findings.is_empty(), "{findings:?}");
    Arc::into_inner(app).unwrap().finish().await;
}

pub(crate) async fn verify(app: &TestApp) -> Vec<invariants::Finding> {
    let mut conn = app.pool.acquire().await.unwrap();
    invariants::check(
        &mut crate::backend::db(&mut conn),
        invariants::hold_grace(60_000),
    )
    .await
    .unwrap()
}

/// One statement as a sqlx query, run on the coordinator.
async fn sql(app: &TestApp, statement: &str) -> Result<u64, sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&app.pool)
        .await
        .map(|r| r.rows_affected())
}

#[tokio::test]
async fn the_per_shard_trigger_still_refuses_a_broken_chain_a_misfit_and_a_split() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "c", 1).await;
    app.fund(&w[0], 500).await;
    let t = Uuid::new_v4();
    // Sequence 1 again on a wallet whose chain is at 1.
    let broken = sql(
        &app,
        &format!(
            "insert into entries (transaction_id, account_id, currency, amount, sequence, balance_after, ledger_time)
             values ('{t}', '{}', 'SAR', 5, 3, 505, now())",
            w[0]
        ),
    )
    .await
    .unwrap_err();
    assert!(
        broken.to_string().contains("broken wallet chain"),
        "{broken}"
    );
    // An unchained entry on a wallet does not fit its account.
    let misfit = insert_entry(&app, t, &w[1], "SAR", 5).await.unwrap_err();
    assert!(misfit.to_string().contains("does not fit"), "{misfit}");
    // One entry more of a transaction that has an entry on this shard, in a statement of its
    // own: a system account on the shard of the wallet that the transfer debited.
    let transfer = Uuid::new_v4();
    assert_eq!(
        app.transfer(transfer, &w[0], &w[1], 10).await.status,
        StatusCode::CREATED
    );
    let shard = shard_of(&app.pool, &w[0]).await;
    let beside = ids_on_shards(&app.pool, "sys-c-", 1, |s| s == shard)
        .await
        .remove(0);
    app.create_account(&beside, "SAR", "system").await;
    let split = insert_entry(&app, transfer, &beside, "SAR", 5)
        .await
        .unwrap_err();
    assert!(
        split.to_string().contains("written in one statement"),
        "{split}"
    );
    // Entries stay immutable on the workers.
    let update = sql(&app, "update entries set amount = amount + 1")
        .await
        .unwrap_err();
    assert!(update.to_string().contains("immutable"), "{update}");
    app.finish().await;
}

/// Entries inserted by hand that each shard accepts but that break a rule across shards:
/// `verify` names each.
#[tokio::test]
async fn verify_finds_entries_that_break_the_rules_across_shards() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "v", 1).await;
    app.fund(&w[0], 1_000).await;
    let posted = Uuid::new_v4();
    assert_eq!(
        app.transfer(posted, &w[0], &w[1], 100).await.status,
        StatusCode::CREATED
    );
    // System accounts on shards that hold none of the wallets' entries, so that each shard's
    // trigger sees nothing wrong with the entries written below.
    let taken = [
        shard_of(&app.pool, &w[0]).await,
        shard_of(&app.pool, &w[1]).await,
    ];
    let free = ids_on_shards(&app.pool, "sys-", 4, |s| !taken.contains(&s)).await;
    let (sys_a, sys_b, sys_usd, sys_usd2) = (&free[0], &free[1], &free[2], &free[3]);
    app.create_account(sys_a, "SAR", "system").await;
    app.create_account(sys_b, "SAR", "system").await;
    app.create_account(sys_usd, "USD", "system").await;
    app.create_account(sys_usd2, "USD", "system").await;
    assert!(verify(&app).await.is_empty());

    // 1. One more entry of a posted transaction, on a shard that had none of it: unbalanced,
    //    and written by another database transaction.
    insert_entry(&app, posted, sys_a, "SAR", 7).await.unwrap();
    // 2. A balanced pair for a transaction that does not exist.
    let ghost = Uuid::new_v4();
    sql(
        &app,
        &format!(
            "insert into entries (transaction_id, account_id, currency, amount, ledger_time)
             values ('{ghost}', '{sys_a}', 'SAR', 3, now()), ('{ghost}', '{sys_b}', 'SAR', -3, now())"
        ),
    )
    .await
    .unwrap();
    // 3. A balanced pair in another currency than its transaction's.
    let other = Uuid::new_v4();
    assert_eq!(
        app.transfer(other, &w[0], &w[1], 50).await.status,
        StatusCode::CREATED
    );
    sql(
        &app,
        &format!(
            "insert into entries (transaction_id, account_id, currency, amount, ledger_time)
             values ('{other}', '{sys_usd}', 'USD', 4, now()), ('{other}', '{sys_usd2}', 'USD', -4, now())"
        ),
    )
    .await
    .unwrap();

    let findings = verify(&app).await;
    let about = |t: Uuid| -> BTreeSet<String> {
        findings
            .iter()
            .filter(|f| f.transaction == Some(t))
            .map(|f| f.check.as_str().to_owned())
            .collect()
    };
    assert!(
        about(posted).contains("unbalanced_transaction"),
        "{findings:#?}"
    );
    assert!(
        about(posted).contains("posting_mismatch"),
        "split: {findings:#?}"
    );
    assert!(
        about(ghost).contains("entry_mismatch"),
        "orphan: {findings:#?}"
    );
    assert!(
        about(other).contains("entry_mismatch"),
        "currency: {findings:#?}"
    );
    app.finish().await;
}

/// The write path's check of the rules that span shards (ledger/posting/cross_shard.rs), run
/// in the database transaction that wrote entries each shard's trigger accepts: each breach is
/// refused with the trigger's SQLSTATE and message and aborts that transaction, and entries
/// that break nothing pass. The write path itself never writes a breach, so the entries are
/// written here by hand, as in the `verify` test above, and the check is called as
/// `insert_entry_rows` calls it for a hold's capture (no transaction row inserted with the
/// entries, so every transaction is read).
#[tokio::test]
async fn the_cross_shard_check_refuses_each_breach_in_the_transaction_that_wrote_it() {
    use wallet_ledger::ledger::posting::cross_shard;
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "k", 1).await;
    app.fund(&w[0], 1_000).await;
    let posted = Uuid::new_v4();
    assert_eq!(
        app.transfer(posted, &w[0], &w[1], 100).await.status,
        StatusCode::CREATED
    );
    let other = Uuid::new_v4();
    assert_eq!(
        app.transfer(other, &w[0], &w[1], 50).await.status,
        StatusCode::CREATED
    );
    // System accounts on shards that hold none of the wallets' entries, so that no shard's
    // trigger sees anything wrong with the entries written below.
    let taken = [
        shard_of(&app.pool, &w[0]).await,
        shard_of(&app.pool, &w[1]).await,
    ];
    let free = ids_on_shards(&app.pool, "sys-", 4, |s| !taken.contains(&s)).await;
    let (a, b, usd, usd2) = (&free[0], &free[1], &free[2], &free[3]);
    app.create_account(a, "SAR", "system").await;
    app.create_account(b, "SAR", "system").await;
    app.create_account(usd, "USD", "system").await;
    app.create_account(usd2, "USD", "system").await;
    let ghost = Uuid::new_v4();
    let row = |t: Uuid, account: &str, currency: &str, amount: i64| {
        format!("('{t}', '{account}', '{currency}', {amount}, now())")
    };
    // (what, the entries written in one statement, the transaction and accounts the check
    // is given, the refusal expected or None)
    type Case<'a> = (&'a str, Vec<String>, Uuid, Vec<&'a str>, Option<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "a balanced pair that fits its posted transaction",
            vec![row(posted, a, "SAR", 5), row(posted, b, "SAR", -5)],
            posted,
            vec![a, b],
            None,
        ),
        (
            "one entry more of a posted transaction",
            vec![row(posted, a, "SAR", 7)],
            posted,
            vec![a],
            Some("unbalanced transaction: entries must sum to zero per currency"),
        ),
        (
            "a balanced pair added to a transaction written before",
            vec![row(posted, a, "SAR", 5), row(posted, b, "SAR", -5)],
            posted,
            vec![&w[0], &w[1], a, b],
            Some("entries of a transaction must all be written in one statement"),
        ),
        (
            "a balanced pair of a transaction that does not exist",
            vec![row(ghost, a, "SAR", 3), row(ghost, b, "SAR", -3)],
            ghost,
            vec![a, b],
            Some("entry does not fit its account or transaction"),
        ),
        (
            "a balanced pair in another currency than its transaction's",
            vec![row(other, usd, "USD", 4), row(other, usd2, "USD", -4)],
            other,
            vec![usd, usd2],
            Some("entry does not fit its account or transaction"),
        ),
    ];
    for (what, rows, transaction, accounts, refusal) in cases {
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "insert into entries (transaction_id, account_id, currency, amount, ledger_time)
             values {}",
            rows.join(", ")
        )))
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("{what}: each shard accepts the entries: {e}"));
        let checked = cross_shard::check(&mut tx, &[transaction], &accounts, &[], &[]).await;
        match refusal {
            None => assert!(checked.is_ok(), "{what}: {checked:?}"),
            Some(refusal) => {
                let e = checked.expect_err(what);
                let db = e
                    .as_database_error()
                    .unwrap_or_else(|| panic!("{what}: {e}"));
                assert_eq!(db.code().as_deref(), Some("23514"), "{what}: {e}");
                assert!(db.message().contains(refusal), "{what}: {e}");
                let after = sqlx::query("select 1").execute(&mut *tx).await.unwrap_err();
                assert_eq!(
                    after.as_database_error().and_then(|d| d.code()).as_deref(),
                    Some("25P02"),
                    "{what}: the transaction is aborted: {after}"
                );
            }
        }
        tx.rollback().await.unwrap();
    }
    assert!(
        verify(&app).await.is_empty(),
        "every case rolled back: the ledger is as the service wrote it"
    );
    app.finish().await;
}

/// A transaction still prepared on a worker when the checkpoint job takes its horizon may
/// have committed on the coordinator already, its entries not yet visible: the job waits for
/// it, and skips the round while it stays prepared. Here the stuck one is made by hand.
#[tokio::test]
async fn checkpoints_wait_out_transactions_prepared_on_a_worker() {
    use sqlx::Connection;
    use wallet_ledger::ledger::checkpoints;
    let app = TestApp::new().await;
    app.create_wallet("cp1").await;
    app.fund("cp1", 500).await;
    let cluster = super::backend::cluster().await;
    let mut worker = sqlx::PgConnection::connect(&cluster.url(cluster.workers[0], &app.database))
        .await
        .unwrap();
    sqlx::raw_sql(
        "create table wl_test_prepared (x int);
         begin; insert into wl_test_prepared values (1); prepare transaction 'wl-test-stuck';",
    )
    .execute(&mut worker)
    .await
    .unwrap();
    let mut conn = app.pool.acquire().await.unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        checkpoints::advance(&mut crate::backend::db(&mut conn))
            .await
            .unwrap(),
        0,
        "no checkpoint while a transaction older than the horizon may be prepared"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "it waited first"
    );
    sqlx::query("commit prepared 'wl-test-stuck'")
        .execute(&mut worker)
        .await
        .unwrap();
    // Another test's transaction on the shared cluster can hold the horizon (cluster-wide
    // xids) behind the funding for a while: ask until the round takes the clearing account.
    drop(conn);
    let pool = &app.pool;
    let checkpointed = super::common::poll(std::time::Duration::from_secs(60), || async move {
        let mut conn = pool.acquire().await.unwrap();
        let n = checkpoints::advance(&mut crate::backend::db(&mut conn))
            .await
            .unwrap();
        (n > 0).then_some(n)
    })
    .await;
    assert_eq!(
        checkpointed,
        Some(1),
        "the clearing account, once nothing stays prepared"
    );
    assert_eq!(app.posted_balance("clearing:test:SAR").await, -500);
    assert!(verify(&app).await.is_empty());
    app.finish().await;
}

/// `per_worker` fresh transaction ids whose rows sit on each of the two workers.
async fn transaction_ids_on_both_workers(pool: &PgPool, per_worker: usize) -> Vec<Uuid> {
    let mut by_worker: std::collections::BTreeMap<i32, Vec<Uuid>> = Default::default();
    while by_worker.len() < 2 || by_worker.values().any(|ids| ids.len() < per_worker) {
        let id = Uuid::new_v4();
        let worker: i32 = sqlx::query_scalar(
            "select n.nodeport from pg_dist_placement p join pg_dist_node n using (groupid)
             where p.shardid = get_shard_id_for_distribution_column('transactions', $1::uuid)",
        )
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
        let ids = by_worker.entry(worker).or_default();
        if ids.len() < per_worker {
            ids.push(id);
        }
    }
    by_worker.into_values().flatten().collect()
}

/// A batch's transaction rows go in one multi-row insert, whose shards on different workers
/// Citus writes in parallel (store/inserts.rs): two batches sharing ids on both workers can
/// each take one and wait for the other's, a deadlock across workers that Citus's detection
/// breaks by cancelling one, which the write path decides again. Twenty identical batches at
/// once: every transaction stored once, and every answer its stored one.
#[tokio::test]
async fn identical_batches_whose_ids_span_both_workers_make_each_once() {
    let app = Arc::new(TestApp::unlimited().await);
    let w = wallets_on_both_workers(&app, "s", 1).await;
    app.fund(&w[0], 100_000).await;
    let ids = transaction_ids_on_both_workers(&app.pool, 4).await;
    let items: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "entries": [
                {"account": &w[0], "amount": -10},
                {"account": &w[1], "amount": 10},
            ]})
        })
        .collect();
    let body = serde_json::json!({"mode": "independent", "items": items});
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (app, body) = (app.clone(), body.clone());
            tokio::spawn(async move { app.post("/v1/transactions/batch", &body).await })
        })
        .collect();
    let mut created = vec![0; ids.len()];
    let mut answers: Vec<BTreeSet<String>> = vec![BTreeSet::new(); ids.len()];
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        for (i, result) in r.body["results"].as_array().unwrap().iter().enumerate() {
            match result["status"].as_u64() {
                Some(201) => created[i] += 1,
                Some(200) => assert_eq!(result["replayed"], true, "item {i}: {result}"),
                _ => panic!("item {i}: {result}"),
            }
            answers[i].insert(result["body"].to_string());
        }
    }
    assert_eq!(
        created,
        vec![1; ids.len()],
        "each item created by one batch"
    );
    assert!(
        answers.iter().all(|a| a.len() == 1),
        "every answer is the stored one: {answers:?}"
    );
    for id in &ids {
        assert_eq!(app.entries_of(*id).await, 2);
    }
    assert_eq!(app.posted_balance(&w[1]).await, 10 * ids.len() as i64);
    let findings = verify(&app).await;
    assert!(findings.is_empty(), "{findings:?}");
    Arc::into_inner(app).unwrap().finish().await;
}

/// `count` fresh transaction ids, half on each of two shards of `transactions`.
async fn transaction_ids_on_two_shards(pool: &PgPool, count: usize) -> Vec<Uuid> {
    let (ids, shards): (Vec<Uuid>, Vec<i64>) = sqlx::query_as::<_, (Uuid, i64)>(
        "select id, get_shard_id_for_distribution_column('transactions', id)
         from (select gen_random_uuid() as id from generate_series(1, 20000)) candidates",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .unzip();
    let mut two = BTreeSet::new();
    for shard in &shards {
        if two.len() < 2 {
            two.insert(*shard);
        }
    }
    let mut picked: std::collections::BTreeMap<i64, Vec<Uuid>> = Default::default();
    for (id, shard) in ids.into_iter().zip(shards) {
        let on_shard = picked.entry(shard).or_default();
        if two.contains(&shard) && on_shard.len() < count / 2 {
            on_shard.push(id);
        }
    }
    let picked: Vec<Uuid> = picked.into_values().flatten().collect();
    assert_eq!(picked.len(), count, "{count} ids on two shards");
    picked
}

/// A batch whose rows are many per shard (64 transfers between two wallets on the two
/// workers, their ids on two shards) is written one call per shard (store/per_shard.rs): the
/// same answers, balances, entries and `verify` as the multi-row insert gives, and the same
/// batch again replays every item.
#[tokio::test]
async fn a_batch_of_many_rows_per_shard_is_written_one_call_per_shard() {
    let app = TestApp::unlimited().await;
    let w = wallets_on_both_workers(&app, "ps", 1).await;
    app.fund(&w[0], 100_000).await;
    let ids = transaction_ids_on_two_shards(&app.pool, 64).await;
    let items: Vec<serde_json::Value> = (ids.iter().enumerate())
        .map(|(i, id)| {
            serde_json::json!({"id": id, "metadata": {"n": i}, "entries": [
                {"account": &w[0], "amount": -10},
                {"account": &w[1], "amount": 10},
            ]})
        })
        .collect();
    let body = serde_json::json!({"mode": "independent", "items": items});
    for (round, status, replayed) in [(1, 201, false), (2, 200, true)] {
        let r = app.post("/v1/transactions/batch", &body).await;
        assert_eq!(r.status, StatusCode::OK, "round {round}: {}", r.text);
        for (i, result) in r.body["results"].as_array().unwrap().iter().enumerate() {
            assert_eq!(
                result["status"], status,
                "round {round}, item {i}: {result}"
            );
            assert_eq!(result["replayed"].as_bool().unwrap_or(false), replayed);
            assert_eq!(
                result["body"]["metadata"]["n"], i,
                "round {round}: {result}"
            );
        }
    }
    for id in &ids {
        assert_eq!(app.entries_of(*id).await, 2);
    }
    assert_eq!(app.posted_balance(&w[0]).await, 100_000 - 640);
    assert_eq!(app.posted_balance(&w[1]).await, 640);
    let findings = verify(&app).await;
    assert!(findings.is_empty(), "{findings:?}");
    app.finish().await;
}

/// `entries_written_in_shard` writes only rows of its shard, and only where the shard is placed:
/// handed a row of a wallet on the other worker beside one of its own, the worker refuses the
/// call; run on a node that holds no placement of the shard (here the coordinator, where a
/// volatile argument keeps Citus from delegating the call), it is refused as a conflict, as a
/// call that arrives after a shard move is. Neither writes a row.
#[tokio::test]
async fn a_call_per_shard_writes_only_its_shard_where_it_is_placed() {
    let app = TestApp::new().await;
    let w = wallets_on_both_workers(&app, "x", 1).await;
    let call = |xid: &str, accounts: &[&String]| {
        let n = accounts.len();
        let list = |v: &str| vec![v; n].join(", ");
        format!(
            "select entries_written_in_shard('{first}', {xid}, array[{ids}]::bigint[],
                 array[{tx}]::uuid[], array[{accounts}], array[{cur}], array[{amounts}]::bigint[],
                 array[{null}]::bigint[], array[{null}]::bigint[], array[{now}]::timestamptz[],
                 array[{null}]::timestamptz[], array[{null}]::bytea[])",
            first = accounts[0],
            ids = (1..=n)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            tx = list("'00000000-0000-0000-0000-000000000001'"),
            accounts = accounts
                .iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(", "),
            cur = list("'SAR'"),
            amounts = list("5"),
            null = list("null"),
            now = list("'2026-01-01T00:00:00Z'"),
        )
    };
    let refusal = |statement: String| {
        let pool = app.pool.clone();
        async move {
            let error = sqlx::query_scalar::<_, i32>(sqlx::AssertSqlSafe(statement))
                .fetch_one(&pool)
                .await
                .unwrap_err();
            let e = error.as_database_error().expect("a database error");
            (
                e.code().unwrap_or_default().into_owned(),
                e.message().to_owned(),
            )
        }
    };
    let (_, mixed) = refusal(call("'1'", &[&w[0], &w[1]])).await;
    assert!(mixed.contains("belong to another shard"), "{mixed}");
    let (code, elsewhere) = refusal(call("(random() + 1)::int::text", &[&w[0]])).await;
    assert_eq!(code, "40001", "{elsewhere}");
    assert!(
        elsewhere.contains("no longer placed on this node"),
        "{elsewhere}"
    );
    let written: i64 =
        sqlx::query_scalar("select count(*) from entries where account_id = any($1)")
            .bind(&w)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(written, 0);
    app.finish().await;
}
