//! Searches stay index reads at 100,000 rows: a metadata filter, an id prefix or a page of
//! accounts reads a handful of rows, never the table, on every call (the statements are
//! planned per call, so no generic plan made without the filters' values can settle in).

use super::common::TestApp;
use sqlx::{Connection, PgConnection};
use wallet_ledger::ledger::account_search::{self, AccountFilter};
use wallet_ledger::ledger::search::{MetadataMatch, id_prefix_range, metadata_predicate};
use wallet_ledger::ledger::transactions::{self, TransactionFilter};

const ROWS: i64 = 100_000;
/// More than the five custom plans after which PostgreSQL may settle on a generic plan.
const CALLS: usize = 8;

/// Sequential scans, rows they read, and rows fetched through indexes (bitmap scans included)
/// of `table` by this session's current transaction so far.
async fn rows_read(conn: &mut PgConnection, table: &str) -> (i64, i64, i64) {
    sqlx::query_as(
        "select coalesce(seq_scan, 0), coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0)
         from pg_stat_xact_user_tables where relname = $1",
    )
    .bind(table)
    .fetch_one(conn)
    .await
    .unwrap()
}

/// Runs `read` `CALLS` times in one transaction and returns what the last call read of `table`
/// (sequential scans, rows scanned, rows fetched by index) and how many rows it answered.
macro_rules! last_call_reads {
    ($conn:expr, $table:expr, |$c:ident| $call:expr) => {{
        let mut tx = $conn.begin().await.unwrap();
        let mut last = ((0, 0, 0), 0);
        for _ in 0..CALLS {
            let before = rows_read(&mut tx, $table).await;
            let answered = {
                let $c: &mut PgConnection = &mut tx;
                $call.await
            };
            let after = rows_read(&mut tx, $table).await;
            let delta = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
            last = (delta, answered);
        }
        tx.rollback().await.unwrap();
        last
    }};
}

fn metadata(filters: &[(&str, &str)]) -> Option<String> {
    let parsed: Vec<MetadataMatch> = filters
        .iter()
        .map(|(name, value)| MetadataMatch::parse(name, value).unwrap().unwrap())
        .collect();
    metadata_predicate(&parsed)
}

async fn accounts_matching(conn: &mut PgConnection, filter: &AccountFilter) -> usize {
    account_search::matching(conn, filter).await.unwrap().len()
}

async fn transactions_listed(conn: &mut PgConnection, filter: &TransactionFilter) -> usize {
    let mut db = crate::backend::db(conn);
    transactions::list(&mut db, filter).await.unwrap().0.len()
}

#[tokio::test]
async fn account_searches_read_a_handful_of_rows_among_100k() {
    let app = TestApp::new().await;
    let mut conn = PgConnection::connect(&app.database_url).await.unwrap();
    sqlx::query(
        "insert into accounts (id, currency, type, metadata, creation_request, creation_response,
                               created_at, updated_at)
         select 'bulk-' || i, 'SAR', 'wallet',
                jsonb_build_object('customer', 'c' || i, 'order', jsonb_build_object('id', i)),
                '{}', '{}', now(), now()
         from generate_series(1, $1) i",
    )
    .bind(ROWS)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("analyze accounts")
        .execute(&mut conn)
        .await
        .unwrap();

    let cases = [
        (
            "a top-level key",
            AccountFilter {
                metadata: metadata(&[("metadata[customer]", "c77777")]),
                limit: 50,
                ..Default::default()
            },
            1,
            5,
        ),
        (
            "a nested number",
            AccountFilter {
                metadata: metadata(&[("metadata[/order/id]", "4242")]),
                limit: 50,
                ..Default::default()
            },
            1,
            5,
        ),
        (
            "an id prefix",
            AccountFilter {
                id_range: id_prefix_range("bulk-4242"),
                limit: 50,
                ..Default::default()
            },
            11,
            12,
        ),
        (
            "a first page",
            AccountFilter {
                limit: 50,
                ..Default::default()
            },
            51,
            51,
        ),
        (
            "a later page",
            AccountFilter {
                after_id: Some("bulk-5".into()),
                limit: 50,
                ..Default::default()
            },
            51,
            51,
        ),
    ];
    for (what, filter, rows, at_most) in cases {
        let ((seq_scans, seq_rows, index_rows), answered) =
            last_call_reads!(conn, "accounts", |c| accounts_matching(c, &filter));
        assert_eq!(answered, rows, "{what}");
        assert_eq!(
            (seq_scans, seq_rows),
            (0, 0),
            "{what}: no sequential scan of accounts"
        );
        assert!(
            index_rows <= at_most,
            "{what}: fetched {index_rows} accounts to answer {rows}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn a_transaction_metadata_search_reads_a_handful_of_rows_among_100k() {
    let app = TestApp::new().await;
    let mut conn = PgConnection::connect(&app.database_url).await.unwrap();
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, metadata,
                                   creation_request, creation_outcome, creation_response,
                                   created_at, posted_at, updated_at)
         select gen_random_uuid(), 'transfer', 'posted', 'SAR', '[]', '{}',
                case when i % 2 = 0 then '{}'::jsonb
                     else jsonb_build_object('order', jsonb_build_object('id', i)) end,
                '{}', 'created', '{}', now(), now(), now()
         from generate_series(1, $1) i",
    )
    .bind(ROWS)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("analyze transactions")
        .execute(&mut conn)
        .await
        .unwrap();

    let filter = TransactionFilter {
        metadata: metadata(&[("metadata[/order/id]", "4243")]),
        limit: 50,
        ..Default::default()
    };
    let ((seq_scans, seq_rows, index_rows), answered) =
        last_call_reads!(conn, "transactions", |c| transactions_listed(c, &filter));
    assert_eq!(answered, 1);
    assert_eq!(
        (seq_scans, seq_rows),
        (0, 0),
        "no sequential scan of transactions"
    );
    assert!(
        index_rows <= 5,
        "fetched {index_rows} transactions to answer one"
    );
    app.finish().await;
}
