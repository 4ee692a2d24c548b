//! An existing cluster upgraded: a database Citus distributed before this release's numbered
//! migrations takes them with `migrate`, on distributed tables, where Citus refuses some
//! statements it takes on the plain tables of a fresh database (an `ALTER TABLE` of several
//! subcommands with a constraint, a stable function of the columns in an `UPDATE`). Then the
//! service works on it: a payment and a transfer written before are sealed with the later
//! ones, their proofs hold, an erasure passes the schema's rule, and `verify` is clean.

use super::backend;
use super::common::TestApp;
use super::seals::{findings, generated_key, seal_all, verify_proof};
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use std::borrow::Cow;
use wallet_ledger::db::{MIGRATOR, citus};

/// The first migration of this release: the ones before it are applied, then the tables
/// distributed, then the rest, as on a cluster running the release before.
const FIRST_OF_THE_RELEASE: i64 = 20261211010000;

#[tokio::test]
async fn a_database_distributed_before_this_releases_migrations_takes_them() {
    let name = format!("wl_test_upgrade_{}", uuid::Uuid::new_v4().simple());
    let url = backend::create_database(&name).await;
    let pool = PgPool::connect(&url).await.unwrap();
    let before = Migrator {
        migrations: Cow::Owned(
            MIGRATOR
                .iter()
                .filter(|m| m.version < FIRST_OF_THE_RELEASE)
                .cloned()
                .collect(),
        ),
        ..Migrator::DEFAULT
    };
    before.run(&pool).await.unwrap();
    citus::distribute(&pool).await.unwrap();
    let distributed: i64 = sqlx::query_scalar(
        "select count(*) from pg_dist_partition where logicalrelid = 'transactions'::regclass",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        distributed, 1,
        "distributed before the release's migrations"
    );
    pool.close().await;
    backend::migrate(&PgPool::connect(&url).await.unwrap()).await;
    let versions: Vec<i64> =
        sqlx::query_scalar("select version from _sqlx_migrations where success order by version")
            .fetch_all(&PgPool::connect(&url).await.unwrap())
            .await
            .unwrap();
    let wanted: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    assert_eq!(versions, wanted);

    // The service on the upgraded database: postings, a seal and a proof, an erasure that the
    // shards' rule lets through, and nothing for `verify` to find.
    let app = TestApp::attach(&url).await;
    for wallet in ["sw-a", "sw-c"] {
        app.create_wallet(wallet).await;
        app.fund(wallet, 500).await;
    }
    let id = uuid::Uuid::new_v4();
    let r = app
        .post(
            "/v1/transfers",
            &serde_json::json!({"id": id, "from": "sw-a", "to": "sw-c", "amount": 70,
                                "metadata": {"customer": "Noura"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (key, public) = generated_key().await;
    seal_all(&app, &key).await;
    let proof = app.get(&format!("/v1/transactions/{id}/proof")).await;
    assert_eq!(proof.status, 200, "{}", proof.text);
    assert_eq!(verify_proof(&proof.body, &public).await.0, Some(0));
    let erased = app
        .post(
            &format!("/v1/transactions/{id}/metadata-erasure"),
            &serde_json::json!({"reason": "asked"}),
        )
        .await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    assert_eq!(findings(&app).await, []);
    app.finish().await;
    backend::drop_database(&name).await;
}
