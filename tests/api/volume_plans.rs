//! The dashboard's volumes at 1,000,000 entries: reading a day reads the rollup's minutes and
//! the live tail of `transactions` through its partial index, never `entries` and never the
//! whole of `transactions` (docs/performance.md has the figures).

use super::common::TestApp;
use sqlx::{Connection, PgConnection};
use std::time::Instant;
use wallet_ledger::stats;

/// Two entries each: 1,000,000 entries.
const TRANSACTIONS: i64 = 500_000;
/// Spread by ledger time over the last ten days, a minute at a time (about 35 a minute).
const MINUTES: i64 = 10 * 24 * 60;

/// What each of [`TABLES`] gave this session not yet flushed to the cumulative statistics:
/// (sequential scans, rows they read, rows fetched through indexes).
async fn counters(conn: &mut PgConnection) -> Vec<(i64, i64, i64)> {
    let mut all = Vec::new();
    for table in TABLES {
        all.push(
            sqlx::query_as(
                "select coalesce(seq_scan, 0), coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0)
                 from pg_stat_xact_user_tables where relname = $1",
            )
            .bind(table)
            .fetch_one(&mut *conn)
            .await
            .unwrap(),
        );
    }
    all
}

const TABLES: [&str; 3] = ["transactions", "entries", "volume_minutes"];

/// What `work` read of each of [`TABLES`], in order.
macro_rules! reads_of {
    ($conn:expr, $work:expr) => {{
        let before = counters($conn).await;
        let answer = $work.await;
        let after = counters($conn).await;
        let delta: Vec<(i64, i64, i64)> = before
            .iter()
            .zip(&after)
            .map(|(b, a)| (a.0 - b.0, a.1 - b.1, a.2 - b.2))
            .collect();
        (answer, delta)
    }};
}

/// 500,000 posted transfers between two system accounts (1% refused instead), with their
/// entries, written straight into the tables with the journal's triggers off (their rules are
/// not what is measured, and they would take minutes here).
async fn grow(conn: &mut PgConnection) {
    for statement in [
        "set session_replication_role = replica",
        "insert into accounts (id, currency, type, creation_request, creation_response, created_at, updated_at)
         values ('va', 'SAR', 'system', '{}', '{}', now(), now()), ('vb', 'SAR', 'system', '{}', '{}', now(), now())",
        "create temporary table grown as
         select gen_random_uuid() as id, i % 100 = 0 as refused,
                now() - make_interval(mins => (i % $MINUTES)::int) as t, 100 + i % 900 as amount
         from generate_series(1, $TRANSACTIONS) i",
        "insert into transactions (id, kind, status, currency, legs, account_ids, refusal_code,
                                   creation_request, creation_outcome, creation_response,
                                   created_at, posted_at, updated_at)
         select id, 'transfer', case when refused then 'rejected' else 'posted' end, 'SAR',
                jsonb_build_array(jsonb_build_object('account', 'va', 'amount', -amount),
                                  jsonb_build_object('account', 'vb', 'amount', amount)),
                '{va,vb}', case when refused then 'insufficient_funds' end, '{}',
                case when refused then 'refused' else 'created' end,
                case when refused then null else '{}' end, t, case when refused then null else t end, t
         from grown",
        "insert into entries (transaction_id, account_id, currency, amount, ledger_time)
         select id, a.account, 'SAR', a.sign * amount, t
         from grown, (values ('va', -1), ('vb', 1)) a(account, sign)",
        "set session_replication_role = origin",
        "analyze transactions",
        "analyze entries",
    ] {
        let sql = statement
            .replace("$MINUTES", &MINUTES.to_string())
            .replace("$TRANSACTIONS", &TRANSACTIONS.to_string());
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await.unwrap();
    }
    let entries: i64 = sqlx::query_scalar("select count(*) from entries")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(entries, 2 * TRANSACTIONS);
}

#[tokio::test]
async fn a_days_volumes_read_the_rollup_and_a_minute_of_transactions_among_1m_entries() {
    let app = TestApp::new().await;
    let mut conn = PgConnection::connect(&app.database_url).await.unwrap();
    grow(&mut conn).await;
    let day = stats::Window::Day;
    let in_a_day = TRANSACTIONS * 24 * 60 / MINUTES;

    // In one transaction, so that the statistics are not flushed between two readings (the
    // roll-forward's own transaction is a savepoint in it).
    let mut tx = conn.begin().await.unwrap();
    // The first read of a day rolls it up: one range read of a day's transactions.
    let started = Instant::now();
    let now = chrono::Utc::now();
    let (rolled, read) = reads_of!(&mut tx, stats::store::roll_forward(&mut tx, now));
    rolled.unwrap();
    let rolled_in = started.elapsed();
    let (seq_scans, _, rolled_from) = read[0];
    assert_eq!(
        seq_scans, 0,
        "the roll-forward reads a time range, not the table"
    );
    assert!(
        rolled_from <= in_a_day * 11 / 10,
        "{rolled_from} rows fetched for about {in_a_day} in a day"
    );
    assert_eq!(read[1], (0, 0, 0), "entries are never read");

    // Every later read: the day's rolled-up minutes, and the minute not final yet, live.
    let started = Instant::now();
    let (from, to) = stats::window_range(day, day.default_bucket(), chrono::Utc::now());
    let (minutes, read) = reads_of!(&mut tx, stats::store::minutes(&mut tx, from, to));
    let read_in = started.elapsed();
    let buckets = stats::into_buckets(&minutes.unwrap(), day.default_bucket());
    let ((seq_scans, scanned, fetched), rollup) = (read[0], read[2]);
    assert_eq!((seq_scans, scanned), (0, 0), "no scan of transactions");
    assert!(
        fetched <= 2 * TRANSACTIONS / MINUTES + 10,
        "{fetched} transactions fetched: only the live minute"
    );
    assert!(
        rollup.1 + rollup.2 <= 25 * 60,
        "{rollup:?}: a day's minutes (from a whole hour) at most"
    );
    assert_eq!(read[1], (0, 0, 0), "entries are never read");
    let posted: i64 = buckets.values().map(|t| t.posted_count).sum();
    let refused: i64 = buckets.values().map(|t| t.refused_count).sum();
    assert!(
        (24..=25).contains(&buckets.len()),
        "{} hour buckets",
        buckets.len()
    );
    assert!(
        posted + refused >= in_a_day * 9 / 10,
        "{posted} posted and {refused} refused in a day"
    );
    assert!(
        refused * 50 < posted && refused > 0,
        "1% refused: {refused} of {posted}"
    );
    tx.rollback().await.unwrap();
    println!(
        "volumes at {} entries: roll-forward of a day {rolled_in:?} ({rolled_from} transactions \
         fetched); a day's read {read_in:?} ({fetched} transactions fetched, {} rollup rows, \
         0 entries)",
        2 * TRANSACTIONS,
        rollup.1 + rollup.2
    );
    app.finish().await;
}
