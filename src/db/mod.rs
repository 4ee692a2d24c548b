//! The database: create it if missing, open the pool, apply migrations, and say clearly what
//! is wrong when PostgreSQL cannot be reached.

use anyhow::{Context, anyhow};
use sqlx::Postgres;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

pub static MIGRATOR: Migrator = sqlx::migrate!();

pub mod citus;
mod error;
mod hosts;
pub mod primary;

pub use citus::Engine;

pub use error::{CorruptRow, StoreError, corrupt};

use primary::Primary;
use std::sync::Arc;

/// The pool, and where several hosts were named, which of them is the primary.
#[derive(Clone)]
pub struct Database {
    pub pool: PgPool,
    pub primary: Option<Arc<Primary>>,
    /// Plain PostgreSQL or a Citus coordinator, detected when the pool opened.
    pub engine: Engine,
}

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/wallet_ledger";
/// Enough connections for a 2-core PostgreSQL to stay busy, few enough not to thrash it.
pub const DEFAULT_POOL_MAX_CONNECTIONS: u32 = 16;
/// Generous on purpose: requests for one hot wallet queue on its row lock while holding a
/// connection, and the ones behind them must wait for a connection rather than fail.
pub const DEFAULT_POOL_ACQUIRE_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_POOL_PING_IDLE_MS: u64 = 1_000;
/// `work_mem` of the whole-ledger jobs' transactions (`reconcile`, `verify`): their sorts and
/// hashes of a million rows stay in memory instead of spilling to disk (PostgreSQL's default
/// is 4 MB, sized for many small queries at once).
pub const BATCH_JOB_WORK_MEM: &str = "256MB";

/// Where the database is and how the pool treats it; every command that uses it shares these.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    pub url: String,
    pub pool_max_connections: u32,
    pub pool_acquire_timeout_ms: u64,
    pub pool_ping_idle_ms: u64,
    /// Only check that the schema is current (migrations run as the owner).
    pub no_migrate: bool,
    /// `pg_stat_activity.application_name`; default `wallet-ledger <subcommand>`.
    pub application_name: Option<String>,
}

impl DatabaseSettings {
    pub fn with_url(url: impl Into<String>) -> DatabaseSettings {
        DatabaseSettings {
            url: url.into(),
            pool_max_connections: DEFAULT_POOL_MAX_CONNECTIONS,
            pool_acquire_timeout_ms: DEFAULT_POOL_ACQUIRE_TIMEOUT_MS,
            pool_ping_idle_ms: DEFAULT_POOL_PING_IDLE_MS,
            no_migrate: false,
            application_name: None,
        }
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.pool_acquire_timeout_ms)
    }
}

/// How long start-up waits for one of several hosts to take writes (a failover in progress).
const PRIMARY_PATIENCE: Duration = Duration::from_secs(30);

/// Creates the database if missing, applies pending migrations and returns the pool. With
/// `--no-migrate` (a role that may not create tables) it only checks that the schema is the
/// one this binary expects.
pub async fn connect_and_migrate(config: &DatabaseSettings) -> anyhow::Result<PgPool> {
    Ok(open(config, true).await?.pool)
}

/// Opens the pool on an existing database, without creating or migrating anything (for jobs
/// that only read, such as `verify`).
pub async fn connect(config: &DatabaseSettings) -> anyhow::Result<PgPool> {
    Ok(open(config, false).await?.pool)
}

/// [`connect_and_migrate`] (or, with `migrate` false, [`connect`]) keeping the primary's
/// tracker, for the processes that report it (`serve`, `consume`).
pub async fn open(config: &DatabaseSettings, migrate: bool) -> anyhow::Result<Database> {
    let shown = redact(&config.url);
    let hosts = hosts::parse(&config.url).map_err(|e| anyhow!("DATABASE_URL {shown}: {e}"))?;
    let (url, primary) = match hosts {
        hosts::Hosts::One(url) => (url, None),
        hosts::Hosts::Several(urls) => {
            let options: Vec<PgConnectOptions> = urls
                .iter()
                .map(|url| options_for(config, url))
                .collect::<anyhow::Result<_>>()?;
            tracing::info!(hosts = urls.len(), "looking for the PostgreSQL primary");
            let Some(primary) = Primary::find(options, PRIMARY_PATIENCE).await else {
                return Err(anyhow!(
                    "none of the hosts of {shown} takes writes (each is unreachable or a standby)"
                ));
            };
            tracing::info!(primary = %primary.describe(), "found the PostgreSQL primary");
            (urls[primary.index()].clone(), Some(primary))
        }
    };
    if migrate && !config.no_migrate {
        create_if_missing(&url, &shown).await?;
    }
    let mut pool = pool(config, &url, primary.clone()).await?;
    // Each step below reads or changes the database after the pool opened; a session that
    // ends under one (an operator, a failover, a restart) makes it run again, not the process
    // exit. Every step is safe to repeat: the detection only reads, each migration and the
    // distribution run in one transaction and skip what is done.
    let engine = again_if_interrupted("detecting the engine", is_transient_step_error, || {
        Engine::detect_on(&pool)
    })
    .await
    .with_context(|| format!("database {shown}"))?;
    if migrate && config.no_migrate {
        again_if_interrupted("checking the schema", is_transient_step_error, || {
            check_migrated(&pool, &shown)
        })
        .await?;
    } else if migrate {
        again_if_interrupted("applying migrations", is_transient_migration_error, || {
            MIGRATOR.run(&pool)
        })
        .await
        .with_context(|| format!("applying migrations to {shown}"))?;
        if engine == Engine::Citus {
            let done =
                again_if_interrupted("distributing the tables", is_transient_step_error, || {
                    citus::distribute(&pool)
                })
                .await
                .with_context(|| format!("database {shown}"))?;
            tracing::info!(?done, "Citus: the ledger's tables are distributed");
            again_if_interrupted(
                "setting the session defaults",
                is_transient_step_error,
                || citus::set_session_defaults(&pool),
            )
            .await
            .with_context(|| format!("database {shown}"))?;
            // The defaults apply to sessions opened from now on, and the pool's sessions so
            // far (the engine check, the migrations) started without them: one of those kept
            // for serving would, among others, not carry a lock timeout to the workers.
            pool.close().await;
            pool = self::pool(config, &url, primary.clone()).await?;
        }
    }
    if let Some(primary) = &primary {
        tokio::spawn(primary.clone().follow(pool.clone()));
    }
    Ok(Database {
        pool,
        primary,
        engine,
    })
}

/// How often a single-host process re-reads whether its primary has a synchronous standby.
const SYNC_STANDBY_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl Database {
    /// Whether the primary has a synchronous standby, as last seen (asked now with one host).
    pub async fn sync_standby(&self) -> primary::SyncStandby {
        match &self.primary {
            Some(primary) => primary.sync_standby(),
            None => match self.pool.acquire().await {
                Ok(mut conn) => primary::sync_standby(&mut conn)
                    .await
                    .unwrap_or(primary::SyncStandby::Unknown),
                Err(_) => primary::SyncStandby::Unknown,
            },
        }
    }

    /// Says in the log and in a metric whether the primary has a synchronous standby, now and
    /// whenever that changes (for the long-running processes). With several hosts the primary
    /// tracker re-reads it on every probe; with one, a task here does, every
    /// SYNC_STANDBY_EVERY, so that losing the standby later shows in the metric an alert
    /// watches. Like the tracker, it ends when the pool closes (see [`Primary::follow`]).
    pub async fn watch_sync_standby(&self) {
        let host = match &self.primary {
            Some(primary) => primary.describe(),
            None => "the database".to_owned(),
        };
        let mut last = self.sync_standby().await;
        primary::report_sync(last, &host);
        if self.primary.is_some() {
            return;
        }
        // One host: whether it answers is whether a primary is up (the tracker says it with
        // several).
        crate::metrics_catalog::primary_up(last != primary::SyncStandby::Unknown);
        let database = self.clone();
        tokio::spawn(async move {
            let closed = database.pool.close_event();
            tokio::pin!(closed);
            loop {
                tokio::select! {
                    () = &mut closed => return,
                    () = tokio::time::sleep(SYNC_STANDBY_EVERY) => {}
                }
                let now = database.sync_standby().await;
                crate::metrics_catalog::primary_up(now != primary::SyncStandby::Unknown);
                if now != last && now != primary::SyncStandby::Unknown {
                    primary::report_sync(now, &host);
                    last = now;
                }
            }
        });
    }
}

async fn create_if_missing(url: &str, shown: &str) -> anyhow::Result<()> {
    let exists = Postgres::database_exists(url)
        .await
        .map_err(|e| unreachable(shown, e))?;
    if !exists {
        Postgres::create_database(url)
            .await
            .with_context(|| format!("creating database {shown}"))?;
        tracing::info!(database = %shown, "created database");
    }
    Ok(())
}

/// Runs a start-up `step` until it succeeds, fails for good, or the database dropped its
/// session [`START_UP_ATTEMPTS`] times.
async fn again_if_interrupted<T, E, Step>(
    what: &str,
    transient: fn(&E) -> bool,
    mut step: impl FnMut() -> Step,
) -> Result<T, E>
where
    E: std::fmt::Display,
    Step: std::future::Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match step().await {
            Err(e) if attempt < START_UP_ATTEMPTS && transient(&e) => {
                tracing::warn!(error = %e, attempt, "{what} was interrupted; trying again");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            result => return result,
        }
    }
}

/// How often start-up tries a step when the database drops its session.
const START_UP_ATTEMPTS: u32 = 5;

/// A start-up step's error whose cause is a transient database error.
fn is_transient_step_error(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<sqlx::Error>()
            .is_some_and(error::is_transient)
    })
}

fn is_transient_migration_error(error: &sqlx::migrate::MigrateError) -> bool {
    match error {
        sqlx::migrate::MigrateError::Execute(e)
        | sqlx::migrate::MigrateError::ExecuteMigration(e, _) => error::is_transient(e),
        _ => false,
    }
}

/// One host's connect options, named as the process.
fn options_for(config: &DatabaseSettings, url: &str) -> anyhow::Result<PgConnectOptions> {
    let options = PgConnectOptions::from_str(url).map_err(|e| {
        anyhow!(
            "DATABASE_URL {} is not a PostgreSQL URL: {e}",
            redact(&config.url)
        )
    })?;
    // The flag wins, then an `application_name` in the URL, then the subcommand's name.
    Ok(
        match (&config.application_name, options.get_application_name()) {
            (Some(name), _) => options.application_name(name),
            (None, Some(_)) => options,
            (None, None) => options.application_name(&default_application_name()),
        },
    )
}

async fn pool(
    config: &DatabaseSettings,
    url: &str,
    primary: Option<Arc<Primary>>,
) -> anyhow::Result<PgPool> {
    let options = options_for(config, url)?;
    // sqlx pings every idle connection before handing it out by default: one extra round trip
    // per use, which under load doubled the database's work for a one-statement request. Only
    // a connection idle for a while can have died unnoticed (a restart, a failover, a proxy's
    // idle cut), so only such a one is pinged; sqlx still pings each on release.
    let ping_idle = Duration::from_millis(config.pool_ping_idle_ms);
    let before_primary = primary.clone();
    let mut pool = PgPoolOptions::new()
        .max_connections(config.pool_max_connections)
        .acquire_timeout(config.acquire_timeout())
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let primary = before_primary.clone();
            Box::pin(async move {
                // Made before the primary moved: its node may have been demoted since.
                if primary.is_some_and(|p| p.predates_switch(meta.age)) {
                    return Ok(false);
                }
                if meta.idle_for >= ping_idle {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        // A connection's buffers grow to the largest message it sent or read (a 1,000-item
        // batch's parameters are megabytes) and sqlx never shrinks them by itself: across a
        // pool that kept tens of MiB resident after the batches were done. Shrinking on
        // release is free for a connection whose buffers never grew.
        .after_release(|conn, _meta| {
            Box::pin(async move {
                sqlx::Connection::shrink_buffers(conn);
                Ok(true)
            })
        });
    if let Some(primary) = primary {
        // With several hosts, a connection that reached a standby or a read-only node (the
        // primary moved and its successor is not known or not writable yet) is refused; the
        // pool tries again, with the new primary's address once it is found.
        pool = pool.after_connect(move |conn, _meta| {
            let primary = primary.clone();
            Box::pin(async move {
                if !primary::takes_writes(conn).await? {
                    primary.suspect();
                    return Err(sqlx::Error::Protocol(
                        "connected to a standby or a read-only node, not the primary".into(),
                    ));
                }
                Ok(())
            })
        });
    }
    pool.connect_with(options)
        .await
        .map_err(|e| unreachable(&redact(&config.url), e))
}

/// Refuses to start on a schema older (or newer) than this binary's migrations.
async fn check_migrated(pool: &PgPool, shown: &str) -> anyhow::Result<()> {
    let expected = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    // No table yet is "none"; any other error is the error (a dropped session is retried).
    let applied: Option<i64> =
        match sqlx::query_scalar("select max(version) from _sqlx_migrations where success")
            .fetch_one(pool)
            .await
        {
            Ok(version) => version,
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => None,
            Err(e) => return Err(e).context("reading the schema's migration version"),
        };
    match applied {
        Some(v) if v == expected => Ok(()),
        found => Err(anyhow!(
            "the database {shown} is at migration {}, this binary needs {expected}: run `wallet-ledger migrate` as the schema's owner first (--no-migrate is set)",
            found.map_or("none".to_owned(), |v| v.to_string())
        )),
    }
}

/// `wallet-ledger <subcommand>`, from the command line this process was started with.
fn default_application_name() -> String {
    match std::env::args().nth(1) {
        Some(subcommand) if !subcommand.starts_with('-') => format!("wallet-ledger {subcommand}"),
        _ => "wallet-ledger".to_owned(),
    }
}

/// Why a first connection failed, as an operator fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnectFailure {
    /// Nothing answered at the address (refused, timed out, unknown host).
    NoServer,
    /// The server answered but has no such database.
    NoDatabase,
    /// The server refused the user or its password.
    LoginRefused,
    /// Anything else the server said.
    Refused,
}

impl ConnectFailure {
    /// From the SQLSTATE of the server's answer, if it answered.
    fn classify(sqlstate: Option<&str>) -> ConnectFailure {
        match sqlstate {
            None => ConnectFailure::NoServer,
            Some("3D000") => ConnectFailure::NoDatabase,
            Some("28P01" | "28000") => ConnectFailure::LoginRefused,
            Some(_) => ConnectFailure::Refused,
        }
    }
}

/// A first connection's failure as one clear paragraph: where, what, and the fix; the
/// server's own message without its source location (`at line 948` of PostgreSQL's C code).
fn unreachable(shown: &str, error: sqlx::Error) -> anyhow::Error {
    let (sqlstate, said) = match &error {
        sqlx::Error::Database(e) => (e.code().map(|c| c.into_owned()), e.message().to_owned()),
        other => (None, other.to_string()),
    };
    let parsed = url::Url::parse(shown).ok();
    let at = parsed.as_ref().map_or_else(
        || shown.to_owned(),
        |u| {
            format!(
                "{}:{}",
                u.host_str().unwrap_or("localhost"),
                u.port().unwrap_or(5432)
            )
        },
    );
    let name = parsed
        .as_ref()
        .map_or("", |u| u.path().trim_start_matches('/'));
    let user = parsed.as_ref().map_or("", |u| u.username());
    match ConnectFailure::classify(sqlstate.as_deref()) {
        ConnectFailure::NoServer => anyhow!(
            "cannot reach PostgreSQL at {shown}: {said}\n\
             Nothing answers at {at}: start PostgreSQL there (`bash scripts/services.sh` starts \
             the local one), or set DATABASE_URL to a server you have."
        ),
        ConnectFailure::NoDatabase => anyhow!(
            "PostgreSQL at {at} has no database \"{name}\" ({shown}).\n\
             `wallet-ledger migrate` creates it and its tables, or set DATABASE_URL to the \
             database the service uses."
        ),
        ConnectFailure::LoginRefused => anyhow!(
            "PostgreSQL at {at} refused the login of \"{user}\" ({shown}): {said}.\n\
             Check the user and password in DATABASE_URL."
        ),
        // Also a server still starting (57P03): callers that wait for one match this prefix.
        ConnectFailure::Refused => anyhow!("cannot reach PostgreSQL at {shown}: {said}"),
    }
}

/// The URL without its password, for logs and error messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// Settings for the current transaction of a job that reads the whole ledger in a few large
/// statements: more `work_mem` (see [`BATCH_JOB_WORK_MEM`]) and no JIT, whose
/// compilation cost nearly a second per statement here and gained nothing back.
pub async fn tune_for_batch_job(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    // `set_config(..., true)` is `SET LOCAL` with the value as a parameter.
    sqlx::query("select set_config('work_mem', $1, true), set_config('jit', 'off', true)")
        .bind(BATCH_JOB_WORK_MEM)
        .execute(conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_error_is_transient_when_a_transient_database_error_caused_it() {
        let dropped = || sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into());
        assert!(is_transient_step_error(&anyhow::Error::from(dropped())));
        let with_context: anyhow::Result<()> =
            Err(dropped()).context("reading the database's extensions");
        assert!(is_transient_step_error(
            &with_context.context("database x").unwrap_err()
        ));
        let refused = sqlx::Error::Protocol("x".into());
        assert!(is_transient_step_error(&anyhow::Error::from(refused)));
        assert!(!is_transient_step_error(&anyhow!(
            "this database has the citus extension but is not a Citus coordinator"
        )));
        let undecodable = sqlx::Error::Decode("not a bool".into());
        assert!(!is_transient_step_error(&anyhow::Error::from(undecodable)));
    }

    #[tokio::test]
    async fn a_start_up_step_runs_again_while_interrupted_and_stops_at_a_lasting_error() {
        let transient = |e: &&str| e.starts_with("dropped");
        let mut calls = 0;
        let done = again_if_interrupted("a step", transient, || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { Err("dropped") } else { Ok(n) } }
        })
        .await;
        assert_eq!(done, Ok(3));

        let mut calls = 0;
        let lasting = again_if_interrupted("a step", transient, || {
            calls += 1;
            async { Err::<(), _>("refused") }
        })
        .await;
        assert_eq!((lasting, calls), (Err("refused"), 1));

        let mut calls = 0;
        let given_up = again_if_interrupted("a step", transient, || {
            calls += 1;
            async { Err::<(), _>("dropped again") }
        })
        .await;
        assert_eq!((given_up, calls), (Err("dropped again"), START_UP_ATTEMPTS));
    }
}

#[cfg(test)]
mod connect_failure_tests {
    use super::ConnectFailure;

    #[test]
    fn a_failure_is_told_by_the_servers_sqlstate() {
        assert_eq!(ConnectFailure::classify(None), ConnectFailure::NoServer);
        assert_eq!(
            ConnectFailure::classify(Some("3D000")),
            ConnectFailure::NoDatabase
        );
        assert_eq!(
            ConnectFailure::classify(Some("28P01")),
            ConnectFailure::LoginRefused
        );
        assert_eq!(
            ConnectFailure::classify(Some("53300")),
            ConnectFailure::Refused
        );
    }
}
