//! A transaction's events (`GET /v1/transactions/{id}/events`) stay index reads among 100,000
//! outbox events and as many deliveries: the read fetches the transaction's own rows, never
//! scans either table, on every call (its statements are prepared, so the generic plan that
//! PostgreSQL may settle on after five calls is measured too).

use super::common::TestApp;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;
use wallet_ledger::outbox::events;

/// Two events per transaction (a hold and its capture), one delivery each.
const TRANSACTIONS: i64 = 50_000;
/// More than the five custom plans after which PostgreSQL may settle on a generic plan.
const CALLS: usize = 8;
const TABLES: [&str; 2] = ["outbox_events", "webhook_deliveries"];

/// Per table of [`TABLES`]: sequential scans, rows they read, rows fetched through indexes, by
/// this session's current transaction so far.
async fn reads(conn: &mut PgConnection) -> Vec<(i64, i64, i64)> {
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

/// The outbox of 50,000 transactions written straight into the tables (what is measured is the
/// read, not the write path), with one subscription and a delivery per event; returns one of
/// the transactions.
async fn grow(conn: &mut PgConnection) -> Uuid {
    for statement in [
        "insert into webhook_subscriptions (id, url, event_types, secrets, creation_request,
                                            creation_response, created_at, updated_at)
         values ('00000000-0000-4000-8000-000000000001', 'https://hooks.example.com/in', '{}',
                 '{whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}', '{}', '{}', now(), now())",
        "insert into outbox_events (id, type, transaction_id, data, fanned_out_at)
         select gen_random_uuid(), kind, t.id, '{}', now()
         from (select gen_random_uuid() as id from generate_series(1, $TRANSACTIONS)) t,
              unnest(array['hold.created', 'transaction.posted']) kind",
        "insert into webhook_deliveries (id, event_id, subscription_id, next_attempt_at)
         select gen_random_uuid(), id, '00000000-0000-4000-8000-000000000001', now()
         from outbox_events",
        "analyze outbox_events",
        "analyze webhook_deliveries",
    ] {
        let sql = statement.replace("$TRANSACTIONS", &TRANSACTIONS.to_string());
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    sqlx::query_scalar("select transaction_id from outbox_events order by seq offset $1 limit 1")
        .bind(TRANSACTIONS)
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_transactions_events_read_its_own_rows_among_100k() {
    let app = TestApp::new().await;
    let mut conn = PgConnection::connect(&app.database_url).await.unwrap();
    let transaction = grow(&mut conn).await;

    // In one transaction, so that the statistics are not flushed between two readings.
    let mut tx = conn.begin().await.unwrap();
    for call in 1..=CALLS {
        let before = reads(&mut tx).await;
        let (page, next) = events::of_transaction(&mut tx, transaction, None, 50)
            .await
            .unwrap();
        let after = reads(&mut tx).await;
        assert_eq!(page.len(), 2, "call {call}: the hold and its capture");
        assert!(next.is_none());
        assert!(page.iter().all(|e| e.deliveries_total == 1));
        for (table, (b, a)) in TABLES.iter().zip(before.iter().zip(&after)) {
            let (scans, scanned, fetched) = (a.0 - b.0, a.1 - b.1, a.2 - b.2);
            assert_eq!((scans, scanned), (0, 0), "call {call}: no scan of {table}");
            // The two events (listed, then joined to their deliveries) and their deliveries,
            // and the planner's own probes of the indexes when it plans anew: 4 to 8 measured.
            assert!(
                fetched <= 10,
                "call {call}: {fetched} rows of {table} fetched"
            );
        }
    }
    tx.rollback().await.unwrap();
    app.finish().await;
}
