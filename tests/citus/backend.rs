//! Where this binary's databases live: one Citus cluster (scripts/citus.sh: a coordinator and
//! two workers on loopback ports) for the whole binary, brought up by the first test that
//! needs it and taken down when the process exits. Each test's database is created on all
//! three nodes with the extension, the workers are registered in it, and it is migrated by the
//! real `migrate` (`wallet_ledger::db::connect_and_migrate`, which distributes the tables), so
//! the tests of tests/api that this binary includes run unchanged against Citus.

use sqlx::postgres::PgPool;
use sqlx::{Connection, PgConnection};
use std::process::Command;
use tokio::sync::OnceCell;
use wallet_ledger::db::{DatabaseSettings, Engine};
use wallet_ledger::ledger::store::{Db, Store};

/// This binary's backend for the shared harness: the functions below.
pub struct Citus;

impl test_support::Backend for Citus {
    const ENGINE: Engine = ENGINE;

    async fn create_database(name: &str) -> String {
        create_database(name).await
    }

    async fn migrate(pool: &PgPool) {
        migrate(pool).await
    }

    async fn finished(pool: &PgPool) {
        finished(pool).await
    }

    async fn drop_database(name: &str) {
        drop_database(name).await
    }

    async fn test_databases() -> Vec<String> {
        test_databases().await
    }
}

pub const ENGINE: Engine = Engine::Citus;

/// `conn` as the service sees it on this engine (what its `Store` hands the statements).
pub fn db(conn: &mut PgConnection) -> Db<'_> {
    Db::new(conn, ENGINE)
}

/// `pool` as the service's store on this engine.
pub fn store(pool: &PgPool) -> Store {
    Store::new(pool.clone(), ENGINE)
}

/// Cases of the model test: each step costs several times a single node's round trips here
/// (a statement per locked account, two-phase commits), so fewer cases than tests/api runs
/// (256) keep the binary to a few minutes; `PROPTEST_CASES` runs more.
pub const MODEL_CASES: u32 = 32;

/// The cluster's folder: fixed, so that a run whose teardown never ran (a killed process)
/// is reused by the next `up`, and `down` of this folder touches nothing else. Two runs at
/// once (two checkouts) each need their own: `CITUS_TEST_DIR` names another.
fn citus_dir() -> String {
    std::env::var("CITUS_TEST_DIR").unwrap_or_else(|_| "/tmp/wallet-ledger-citus-tests".into())
}

pub struct Cluster {
    pub coordinator: u16,
    pub workers: [u16; 2],
}

static CLUSTER: OnceCell<Cluster> = OnceCell::const_new();

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> i32;
}

/// Runs when the test binary exits (after every test, passed or failed).
extern "C" fn take_down() {
    let _ = citus_sh("down");
}

fn citus_sh(subcommand: &str) -> std::process::Output {
    citus_sh_in(&citus_dir(), subcommand)
}

/// scripts/citus.sh `subcommand` on the cluster of folder `dir`.
fn citus_sh_in(dir: &str, subcommand: &str) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/citus.sh");
    Command::new("bash")
        .arg(script)
        .arg(subcommand)
        .env("CITUS_DIR", dir)
        .output()
        .unwrap_or_else(|e| panic!("running {script} {subcommand}: {e}"))
}

pub async fn cluster() -> &'static Cluster {
    CLUSTER
        .get_or_init(|| async {
            let up = tokio::task::spawn_blocking(|| citus_sh("up"))
                .await
                .unwrap();
            assert!(
                up.status.success(),
                "scripts/citus.sh up failed:\n{}",
                String::from_utf8_lossy(&up.stderr)
            );
            // SAFETY: registers a plain function with no captured state; it only runs a
            // child process.
            unsafe { atexit(take_down) };
            let dir = citus_dir();
            let ports = std::fs::read_to_string(format!("{dir}/ports")).unwrap();
            let port = |name: &str| -> u16 {
                ports
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}=")))
                    .unwrap_or_else(|| panic!("{name} missing in {dir}/ports"))
                    .parse()
                    .unwrap()
            };
            Cluster {
                coordinator: port("COORDINATOR_PORT"),
                workers: [port("WORKER1_PORT"), port("WORKER2_PORT")],
            }
        })
        .await
}

impl Cluster {
    /// Without TLS: `create extension citus` turns on ssl with a self-signed X.509 v1
    /// certificate, which rustls (sqlx's TLS) refuses, and `sslmode=prefer` would try it.
    pub fn url(&self, port: u16, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/{database}?sslmode=disable")
    }

    fn nodes(&self) -> [u16; 3] {
        [self.coordinator, self.workers[0], self.workers[1]]
    }
}

async fn run(url: &str, statement: &str) {
    let mut conn = PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{statement} on {url}: {e}"));
}

/// Creates `name` on every node with the extension, and registers the workers in it.
pub async fn create_database(name: &str) -> String {
    let cluster = cluster().await;
    // One at a time: citus_add_node of parallel tests at once met "failure on connection
    // marked as essential" (each opens connections to every worker while registering).
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    for port in cluster.nodes() {
        run(
            &cluster.url(port, "postgres"),
            &format!("create database {name}"),
        )
        .await;
        run(&cluster.url(port, name), "create extension citus").await;
    }
    let coordinator = cluster.url(cluster.coordinator, name);
    run(
        &coordinator,
        &format!(
            "select citus_set_coordinator_host('127.0.0.1', {})",
            cluster.coordinator
        ),
    )
    .await;
    for worker in cluster.workers {
        add_node(&coordinator, worker).await;
    }
    coordinator
}

/// Registers `worker` in the coordinator's database, again when Citus could not connect to a
/// worker while registering it ("failure on connection marked as essential": seen once in a
/// CI run of the whole binary on a loaded machine, the tests' databases serialized already).
/// `citus_add_node` of a node already registered answers its id, so a retry is safe.
async fn add_node(coordinator: &str, worker: u16) {
    let statement = format!("select citus_add_node('127.0.0.1', {worker})");
    for attempt in 1.. {
        let mut conn = PgConnection::connect(coordinator)
            .await
            .unwrap_or_else(|e| panic!("connecting to {coordinator}: {e}"));
        match sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&mut conn)
            .await
        {
            Ok(_) => return,
            Err(e) if attempt < 5 && e.to_string().contains("marked as essential") => {
                eprintln!("{statement} on {coordinator}, attempt {attempt}: {e}; again");
                tokio::time::sleep(std::time::Duration::from_millis(500 * attempt)).await;
            }
            Err(e) => panic!("{statement} on {coordinator}: {e}"),
        }
    }
}

/// The real `migrate`: the numbered migrations, then the distribution.
pub async fn migrate(pool: &PgPool) {
    let options = pool.connect_options();
    let url = cluster()
        .await
        .url(options.get_port(), options.get_database().unwrap());
    wallet_ledger::db::connect_and_migrate(&DatabaseSettings::with_url(url))
        .await
        .unwrap()
        .close()
        .await;
}

/// The spread, checked of every test that finishes: a reused test of tests/api names fixed
/// account ids, and ids are hashed to shards, so all of a test's accounts could sit on one
/// worker and its races would never cross workers. So when a test's database holds two or
/// more wallets, they must sit on both workers, and likewise the accounts that hold entries
/// (a wallet and the clearing account of its payments, say): a test where either set is on one
/// worker fails here, naming each account's worker, and its ids are to be changed.
pub async fn finished(pool: &PgPool) {
    let wallets: Vec<String> =
        sqlx::query_scalar("select id from accounts where type = 'wallet' order by id")
            .fetch_all(pool)
            .await
            .unwrap();
    let posted: Vec<String> =
        sqlx::query_scalar("select distinct account_id from entries order by account_id")
            .fetch_all(pool)
            .await
            .unwrap();
    for (what, accounts) in [("wallets", wallets), ("accounts with entries", posted)] {
        if accounts.len() < 2 {
            continue;
        }
        let placed: Vec<(String, i32)> = sqlx::query_as(
            "select a.id, n.nodeport
             from unnest($1::text[]) a(id)
             join pg_dist_placement p
               on p.shardid = get_shard_id_for_distribution_column('accounts', a.id)
             join pg_dist_node n on n.groupid = p.groupid
             order by a.id",
        )
        .bind(&accounts)
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(placed.len(), accounts.len(), "one placement per account");
        let workers: std::collections::BTreeSet<i32> = placed.iter().map(|p| p.1).collect();
        assert_eq!(
            workers.len(),
            2,
            "the test's {what} all sit on one worker, so nothing it does crosses workers: \
             change its ids so that they spread (account, worker port): {placed:?}"
        );
    }
}

pub async fn drop_database(name: &str) {
    let cluster = cluster().await;
    for port in cluster.nodes() {
        if let Ok(mut admin) = PgConnection::connect(&cluster.url(port, "postgres")).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "drop database if exists {name} with (force)"
            )))
            .execute(&mut admin)
            .await;
        }
    }
}

pub async fn test_databases() -> Vec<String> {
    let cluster = cluster().await;
    let Ok(mut admin) = PgConnection::connect(&cluster.url(cluster.coordinator, "postgres")).await
    else {
        return Vec::new();
    };
    sqlx::query_scalar("select datname from pg_database where datname like 'wl\\_test\\_%'")
        .fetch_all(&mut admin)
        .await
        .unwrap_or_default()
}

/// A cluster of one test's own (scripts/citus.sh in a folder of its own beside the shared
/// one's), for a test that kills or restarts a node, which would break the other tests on the
/// shared cluster. `up` gives its coordinator's `wallet_ledger` database with the workers
/// registered, not yet migrated; dropping it takes the cluster down.
pub struct PrivateCluster {
    dir: String,
    pub url: String,
}

impl PrivateCluster {
    pub async fn up(name: &str) -> PrivateCluster {
        let dir = format!("{}-{name}", citus_dir());
        let out = Self::citus_sh(&dir, "up").await;
        assert!(
            out.status.success(),
            "scripts/citus.sh up in {dir} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let url = stdout
            .lines()
            .find_map(|l| l.strip_prefix("DATABASE_URL="))
            .unwrap_or_else(|| panic!("no DATABASE_URL line from citus.sh up: {stdout}"))
            .to_owned();
        PrivateCluster { dir, url }
    }

    /// The postmaster's pid of `node` (`coordinator`, `worker1`, ...).
    pub fn postmaster(&self, node: &str) -> u32 {
        let pid = std::fs::read_to_string(format!("{}/{node}/postmaster.pid", self.dir)).unwrap();
        pid.lines().next().unwrap().trim().parse().unwrap()
    }

    /// Starts again whatever node of the cluster is stopped.
    pub async fn restart_stopped(&self) {
        let out = Self::citus_sh(&self.dir, "up").await;
        assert!(
            out.status.success(),
            "scripts/citus.sh up (again) failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every node's port, the coordinator's first.
    pub fn node_ports(&self) -> Vec<u16> {
        let ports = std::fs::read_to_string(format!("{}/ports", self.dir)).unwrap();
        ports
            .lines()
            .filter(|l| l.contains("_PORT="))
            .map(|l| l.split('=').nth(1).unwrap().parse().unwrap())
            .collect()
    }

    async fn citus_sh(dir: &str, subcommand: &'static str) -> std::process::Output {
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || citus_sh_in(&dir, subcommand))
            .await
            .unwrap()
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = citus_sh_in(&self.dir, "down");
    }
}
