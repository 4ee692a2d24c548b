//! Where a test binary's databases live. Each binary names its backend once; [`TestApp`]
//! creates, migrates, checks and drops every test's database through it, so the same test
//! modules run on one PostgreSQL (tests/api, [`Plain`]) and on a Citus cluster (tests/citus).
//!
//! [`TestApp`]: crate::common::TestApp

use sqlx::postgres::PgPool;
use sqlx::{Connection, PgConnection};
use std::future::Future;
use wallet_ledger::db::Engine;
use wallet_ledger::ledger::store::{Db, Store};

pub trait Backend: Send + Sync + 'static {
    /// The engine the service's store is given for this backend's databases.
    const ENGINE: Engine;

    /// Creates the database `name` and returns its URL.
    fn create_database(name: &str) -> impl Future<Output = String> + Send;

    /// Migrates a fresh database as `wallet-ledger migrate` would.
    fn migrate(pool: &PgPool) -> impl Future<Output = ()> + Send;

    /// What the backend checks of a test's database once the test is done
    /// (`TestApp::finish`).
    fn finished(pool: &PgPool) -> impl Future<Output = ()> + Send;

    fn drop_database(name: &str) -> impl Future<Output = ()> + Send;

    /// The test databases on the backend's server, whoever made them.
    fn test_databases() -> impl Future<Output = Vec<String>> + Send;

    /// `pool` as the service's store on this engine.
    fn store(pool: &PgPool) -> Store {
        Store::new(pool.clone(), Self::ENGINE)
    }

    /// `conn` as the service sees it on this engine (what its `Store` hands the statements).
    fn db(conn: &mut PgConnection) -> Db<'_> {
        Db::new(conn, Self::ENGINE)
    }
}

/// The plain PostgreSQL of `TEST_DATABASE_URL`, each test's database migrated by the
/// migrations as they are.
pub struct Plain;

impl Backend for Plain {
    const ENGINE: Engine = Engine::Plain;

    async fn create_database(name: &str) -> String {
        let mut admin = PgConnection::connect(&crate::common::server_url())
            .await
            .expect("test PostgreSQL reachable");
        sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
            .execute(&mut admin)
            .await
            .unwrap();
        url_for(name)
    }

    async fn migrate(pool: &PgPool) {
        wallet_ledger::db::MIGRATOR.run(pool).await.unwrap();
    }

    /// Nothing on one node.
    async fn finished(_pool: &PgPool) {}

    async fn drop_database(name: &str) {
        let Ok(mut admin) = PgConnection::connect(&crate::common::server_url()).await else {
            return;
        };
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "drop database if exists {name} with (force)"
        )))
        .execute(&mut admin)
        .await;
    }

    async fn test_databases() -> Vec<String> {
        let Ok(mut admin) = PgConnection::connect(&crate::common::server_url()).await else {
            return Vec::new();
        };
        sqlx::query_scalar("select datname from pg_database where datname like 'wl\\_test\\_%'")
            .fetch_all(&mut admin)
            .await
            .unwrap_or_default()
    }
}

fn url_for(database: &str) -> String {
    let mut url =
        url::Url::parse(&crate::common::server_url()).expect("TEST_DATABASE_URL is a URL");
    url.set_path(database);
    url.to_string()
}
