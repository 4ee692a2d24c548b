//! Which engine the pool talks to, and, on a Citus coordinator, the distribution of the ledger's
//! tables (`migrations/citus/distribute.sql`), applied by `migrate` after the numbered
//! migrations.
//!
//! The engine is detected once, when the pool opens, and the write path reads it
//! ([`Engine::Citus`] picks the statements Citus accepts and adds the cross-shard journal
//! check before COMMIT; see docs/scaling.md, "The service on Citus").

use anyhow::{Context, anyhow};
use sqlx::{PgConnection, PgPool};

/// The PostgreSQL the service writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// One PostgreSQL: every table local, every journal rule in the entries trigger.
    Plain,
    /// A Citus coordinator: the ledger's tables distributed (or to be distributed by
    /// `migrate`); locking statements name one shard each.
    Citus,
}

/// The distribution, run in one transaction while `entries` is not distributed yet.
const DISTRIBUTE: &str = include_str!("../../migrations/citus/distribute.sql");

/// The journal trigger's function on Citus, which reads its own shard: replaced by every
/// `migrate`, before the distribution when there is one, so that a journal rule added by a
/// numbered migration reaches the shards too.
const JOURNAL: &str = include_str!("../../migrations/citus/journal.sql");

/// Functions the write path calls on the workers (a shard's accounts locked and read),
/// replaced by every `migrate` beside [`JOURNAL`].
const WRITE_PATH: &str = include_str!("../../migrations/citus/write_path.sql");

/// The tables distributed by [`DISTRIBUTE`], each with its distribution column.
pub const DISTRIBUTED: [(&str, &str); 5] = [
    ("accounts", "id"),
    ("entries", "account_id"),
    ("open_holds", "account_id"),
    ("account_checkpoints", "account_id"),
    ("transactions", "id"),
];

impl Engine {
    /// Citus when the database has the `citus` extension. Only the coordinator plans writes
    /// (entries' `xid` default is evaluated on the node that plans the statement), so a
    /// worker or a Citus node outside a cluster is refused with what to do instead.
    pub async fn detect(conn: &mut PgConnection) -> anyhow::Result<Engine> {
        let citus: bool = sqlx::query_scalar(
            "select exists (select 1 from pg_extension where extname = 'citus')",
        )
        .fetch_one(&mut *conn)
        .await
        .context("reading the database's extensions")?;
        if !citus {
            return Ok(Engine::Plain);
        }
        let coordinator: bool = sqlx::query_scalar("select citus_is_coordinator()")
            .fetch_one(&mut *conn)
            .await
            .context("asking Citus whether this node is the coordinator")?;
        if !coordinator {
            return Err(anyhow!(
                "this database has the citus extension but is not a Citus coordinator: \
                 point DATABASE_URL at the coordinator (every write must be planned there), \
                 or, for a coordinator without workers yet, run \
                 `select citus_set_coordinator_host(...)` and `citus_add_node(...)` first"
            ));
        }
        Ok(Engine::Citus)
    }

    pub async fn detect_on(pool: &PgPool) -> anyhow::Result<Engine> {
        let mut conn = pool.acquire().await?;
        Engine::detect(&mut conn).await
    }
}

/// How many of the ledger's tables Citus already distributes.
async fn distributed_count(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    let names: Vec<&str> = DISTRIBUTED.iter().map(|(t, _)| *t).collect();
    sqlx::query_scalar(
        "select count(*) from pg_dist_partition
         where logicalrelid in (select c.oid from pg_class c
                                join pg_namespace n on n.oid = c.relnamespace
                                where n.nspname = 'public' and c.relname = any($1))",
    )
    .bind(&names)
    .fetch_one(conn)
    .await
}

/// Distributes the ledger's tables unless done: a second `migrate` only replaces the journal
/// trigger's function ([`JOURNAL`]) and the write path's functions ([`WRITE_PATH`]) again.
/// The check and the work run in one transaction under the migrator's advisory lock key, so
/// two `migrate`s at once distribute once, and a failure leaves the plain tables as they were.
pub async fn distribute(pool: &PgPool) -> anyhow::Result<Distribution> {
    let mut tx = pool.begin().await?;
    // The same lock sqlx's migrator takes (any key would do; this one says why it is held).
    sqlx::query("select pg_advisory_xact_lock(hashtext('wallet-ledger citus distribute'))")
        .execute(&mut *tx)
        .await?;
    let count = distributed_count(&mut tx).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(JOURNAL))
        .execute(&mut *tx)
        .await
        .context("the journal trigger on Citus (migrations/citus/journal.sql)")?;
    let distribution = match count {
        0 => Distribution::Done,
        n if n == DISTRIBUTED.len() as i64 => Distribution::AlreadyDone,
        n => {
            return Err(anyhow!(
                "{n} of the {} ledger tables are distributed by Citus, not all or none: \
                 this database was changed by hand; compare it with migrations/citus/distribute.sql",
                DISTRIBUTED.len()
            ));
        }
    };
    if distribution == Distribution::Done {
        sqlx::raw_sql(sqlx::AssertSqlSafe(DISTRIBUTE))
            .execute(&mut *tx)
            .await
            .context("distributing the tables (migrations/citus/distribute.sql)")?;
    }
    // After the distribution: some of its functions are distributed with the tables.
    sqlx::raw_sql(sqlx::AssertSqlSafe(WRITE_PATH))
        .execute(&mut *tx)
        .await
        .context("the write path's functions on Citus (migrations/citus/write_path.sql)")?;
    tx.commit().await?;
    Ok(distribution)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Done,
    AlreadyDone,
}

/// The coordinator settings every session of the ledger's database starts with, set by each
/// `migrate` (`alter database ... set`, so an operator can still override them per role or
/// session).
/// - A ledger transaction is a handful of one-shard statements: opening a second connection
///   to a worker for parallelism costs more (a backend, TLS, Citus's caches) than it saves,
///   and a backend that drops its connections after each transaction opens them again for
///   the next. With Citus's defaults (16 connections per worker per statement, 1 kept)
///   `api-transfers` cost about one and a half times the database CPU per transfer
///   (docs/performance.md, "Citus settings"): one connection per worker per statement, up to
///   8 kept.
/// - A row is locked on the worker that holds it, so a transaction's `SET LOCAL lock_timeout`
///   (group commit's bounded wait, the consumer's batch limits) must reach the workers too:
///   with Citus's default (`none`) a group waited for a row held elsewhere until its holder
///   let go, where one PostgreSQL gives up after `--group-commit-lock-timeout-ms`
///   (tests/citus/cluster.rs, "a lock timeout set in a transaction bounds a wait").
pub const SESSION_DEFAULTS: [(&str, &str); 3] = [
    ("citus.max_adaptive_executor_pool_size", "1"),
    ("citus.max_cached_conns_per_worker", "8"),
    ("citus.propagate_set_commands", "local"),
];

/// Sets [`SESSION_DEFAULTS`] on the current database (idempotent); sessions opened from now
/// on start with them.
pub async fn set_session_defaults(pool: &PgPool) -> anyhow::Result<()> {
    for (name, value) in SESSION_DEFAULTS {
        // PostgreSQL quotes the database's name (`%I`) and the value (`%L`).
        let statement: String =
            sqlx::query_scalar("select format('alter database %I set %s = %L', current_database(), $1::text, $2::text)")
                .bind(name)
                .bind(value)
                .fetch_one(pool)
                .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(pool)
            .await
            .with_context(|| format!("setting {name} = {value} for the database"))?;
    }
    Ok(())
}
