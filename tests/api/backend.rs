//! Where the tests' databases live: here, the plain PostgreSQL of `TEST_DATABASE_URL`, each
//! test's database migrated by the migrations as they are (tests/support's `Plain`). Another
//! test binary (tests/citus) runs some of these tests on another engine by giving its own
//! `backend` with the same items.

use sqlx::PgConnection;
use sqlx::postgres::PgPool;
use test_support::Backend as _;
use wallet_ledger::ledger::store::{Db, Store};

pub use test_support::Plain as Backend;

/// `conn` as the service sees it on this engine (what its `Store` hands the statements).
pub fn db(conn: &mut PgConnection) -> Db<'_> {
    Backend::db(conn)
}

/// `pool` as the service's store on this engine.
pub fn store(pool: &PgPool) -> Store {
    Backend::store(pool)
}

/// Cases of the model test (tests/api/model.rs) unless `PROPTEST_CASES` says otherwise.
pub const MODEL_CASES: u32 = 256;

/// Creates the database `name` and returns its URL.
pub async fn create_database(name: &str) -> String {
    Backend::create_database(name).await
}

pub async fn migrate(pool: &PgPool) {
    Backend::migrate(pool).await
}
