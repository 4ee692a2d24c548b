//! Where the tests' databases live: here, the plain PostgreSQL of `TEST_DATABASE_URL`, each
//! test's database migrated by the migrations as they are. `common.rs` creates, migrates and
//! drops through this module, so another test binary (tests/citus) runs the same tests on
//! another engine by giving its own.

use sqlx::postgres::PgPool;
use sqlx::{Connection, PgConnection};
use wallet_ledger::db::Engine;
use wallet_ledger::ledger::store::{Db, Store};

pub const ENGINE: Engine = Engine::Plain;

/// `conn` as the service sees it on this engine (what its `Store` hands the statements).
pub fn db(conn: &mut PgConnection) -> Db<'_> {
    Db::new(conn, ENGINE)
}

/// `pool` as the service's store on this engine.
pub fn store(pool: &PgPool) -> Store {
    Store::new(pool.clone(), ENGINE)
}

/// Cases of the model test (tests/api/model.rs) unless `PROPTEST_CASES` says otherwise.
pub const MODEL_CASES: u32 = 256;

/// Creates the database `name` and returns its URL.
pub async fn create_database(name: &str) -> String {
    let mut admin = PgConnection::connect(&super::common::server_url())
        .await
        .expect("test PostgreSQL reachable");
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    url_for(name)
}

pub async fn migrate(pool: &PgPool) {
    wallet_ledger::db::MIGRATOR.run(pool).await.unwrap();
}

/// What this backend checks of a test's database once the test is done (`TestApp::finish`):
/// nothing on one node.
pub async fn finished(_pool: &PgPool) {}

pub async fn drop_database(name: &str) {
    let Ok(mut admin) = PgConnection::connect(&super::common::server_url()).await else {
        return;
    };
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {name} with (force)"
    )))
    .execute(&mut admin)
    .await;
}

/// The test databases on the server, whoever made them.
pub async fn test_databases() -> Vec<String> {
    let Ok(mut admin) = PgConnection::connect(&super::common::server_url()).await else {
        return Vec::new();
    };
    sqlx::query_scalar("select datname from pg_database where datname like 'wl\\_test\\_%'")
        .fetch_all(&mut admin)
        .await
        .unwrap_or_default()
}

fn url_for(database: &str) -> String {
    let mut url =
        url::Url::parse(&super::common::server_url()).expect("TEST_DATABASE_URL is a URL");
    url.set_path(database);
    url.to_string()
}
