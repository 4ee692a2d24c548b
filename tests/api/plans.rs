//! Query plans that must not depend on when a connection first ran them.
//!
//! A connection keeps a prepared statement's generic plan until the table is analyzed again.
//! A lookup whose plan was made while `transactions` was nearly empty must still probe the
//! primary key once the table holds thousands of rows: a sequential scan there costs every
//! single create (and every read by id) a walk over the whole ledger.

use super::common::TestApp;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;
use wallet_ledger::ledger::ids::AccountId;
use wallet_ledger::ledger::journal::{Journal, Leg};
use wallet_ledger::ledger::money::Amount;
use wallet_ledger::ledger::posting::{self, Mode};
use wallet_ledger::ledger::store::Db;
use wallet_ledger::ledger::transactions::{self, Kind, NewTransaction, Requested};

/// More than the five custom plans after which PostgreSQL may settle on a generic plan.
const RUNS_WHILE_EMPTY: usize = 8;
/// Ids per lookup, as in a group of concurrent creates: on an empty table their custom plans
/// are sequential scans too, so the generic one wins and stays.
const IDS_PER_LOOKUP: usize = 20;
const ROWS_AFTER: i64 = 5_000;

/// A transfer between two accounts that do not exist: deciding it reads the stored creations
/// of its id and stops there (`unknown_account`), writing nothing.
fn transfer_between_unknown_accounts() -> NewTransaction {
    let leg = |account: &str, amount: i64| Leg {
        account: AccountId::parse(account).unwrap(),
        amount: Amount::new(amount).unwrap(),
        account_field: "/entries/0/account".into(),
        amount_field: "/entries/0/amount".into(),
        must_be_wallet: false,
        currency: None,
    };
    NewTransaction {
        id: Uuid::new_v4(),
        kind: Kind::Transfer,
        status: Requested::Posted,
        journal: Journal::new(vec![leg("nobody-a", -100), leg("nobody-b", 100)]).unwrap(),
        currency: None,
        external_ref: None,
        metadata: Default::default(),
        request: json!({"plan": "test"}),
        created_on_use: Vec::new(),
        exchange: None,
        reversal: None,
        effective_at: None,
        provider_initiated: false,
    }
}

/// Fills `transactions` with valid rows written directly (no entries, which a transfer-less
/// read never needs): enough pages that a sequential scan is the wrong plan by far.
async fn grow_the_ledger(conn: &mut PgConnection) {
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids,
                                   creation_request, creation_outcome, creation_response,
                                   created_at, posted_at, updated_at)
         select gen_random_uuid(), 'transfer', 'posted', 'SAR', '[]', '{}', '{}', 'created', '{}',
                now(), now(), now()
         from generate_series(1, $1)",
    )
    .bind(ROWS_AFTER)
    .execute(conn)
    .await
    .unwrap();
}

/// The plan this connection would use now for its prepared statement whose text contains
/// every one of `markers`, run with as many ids as before.
async fn current_plan(conn: &mut PgConnection, markers: &[&str]) -> Value {
    let statements: Vec<(String, String)> =
        sqlx::query_as("select name, statement from pg_prepared_statements")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    let matching: Vec<&String> = statements
        .iter()
        .filter(|(_, text)| markers.iter().all(|m| text.contains(m)))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "one prepared statement with {markers:?}: {statements:#?}"
    );
    let ids: Vec<String> = (0..IDS_PER_LOOKUP)
        .map(|_| Uuid::new_v4().to_string())
        .collect();
    let explain = format!(
        "explain (format json) execute {}('{{{}}}')",
        matching[0],
        ids.join(",")
    );
    let (plan,): (Value,) = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    plan
}

/// Every relation the plan reads with a sequential scan.
fn sequential_scans(plan: &Value, out: &mut Vec<String>) {
    match plan {
        Value::Object(node) => {
            if node.get("Node Type") == Some(&json!("Seq Scan")) {
                out.push(node["Relation Name"].as_str().unwrap_or("?").to_string());
            }
            node.values().for_each(|v| sequential_scans(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| sequential_scans(v, out)),
        _ => {}
    }
}

fn scanned(plan: &Value) -> Vec<String> {
    let mut out = Vec::new();
    sequential_scans(plan, &mut out);
    out
}

async fn one_connection(app: &TestApp) -> PgConnection {
    let mut conn = PgConnection::connect(&app.database_url).await.unwrap();
    // No ANALYZE may refresh the plans mid-test: that is exactly what production cannot count on.
    sqlx::query("alter table transactions set (autovacuum_enabled = false)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

#[tokio::test]
async fn the_stored_creation_lookup_probes_the_key_after_the_ledger_grew_under_a_cached_plan() {
    let app = TestApp::new().await;
    let mut conn = one_connection(&app).await;
    for _ in 0..RUNS_WHILE_EMPTY {
        let items: Vec<NewTransaction> = (0..IDS_PER_LOOKUP)
            .map(|_| transfer_between_unknown_accounts())
            .collect();
        posting::create_many_in(
            &mut crate::backend::db(&mut conn),
            &items,
            Mode::Independent,
        )
        .await
        .unwrap();
    }
    grow_the_ledger(&mut conn).await;

    let plan = current_plan(&mut conn, &["creation_response", "from transactions"]).await;
    assert_eq!(scanned(&plan), Vec::<String>::new(), "{plan:#}");
    conn.close().await.unwrap();
    app.finish().await;
}

#[tokio::test]
async fn reading_transactions_by_id_probes_the_key_after_the_ledger_grew_under_a_cached_plan() {
    let app = TestApp::new().await;
    let mut conn = one_connection(&app).await;
    for _ in 0..RUNS_WHILE_EMPTY {
        let ids: Vec<Uuid> = (0..IDS_PER_LOOKUP).map(|_| Uuid::new_v4()).collect();
        transactions::find_many(
            &mut Db::new(&mut conn, wallet_ledger::db::Engine::Plain),
            &ids,
        )
        .await
        .unwrap();
    }
    grow_the_ledger(&mut conn).await;

    let plan = current_plan(&mut conn, &["captured_amount", "from transactions"]).await;
    assert_eq!(scanned(&plan), Vec::<String>::new(), "{plan:#}");
    conn.close().await.unwrap();
    app.finish().await;
}
