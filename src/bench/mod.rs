//! `wallet-ledger bench [SCENARIO ...]`: runs the named scenarios (all by default) in a fixed
//! order, each on a freshly created database, each checking its own result so that a fast
//! wrong answer fails. One JSON line per scenario on stdout, appended to `--results` too;
//! progress on stderr. Exit 0 when every check passed, 1 when one failed (after running the
//! others), 2 on an error (with its reason on stderr).

mod api;
mod ceiling;
mod client;
mod consumer;
mod history;
mod report;
mod server;
mod sets;

use crate::db::DatabaseSettings;
use anyhow::{Context, anyhow, bail};
use report::Measurement;
use sqlx::{Connection, PgConnection, PgPool};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The benchmark's own database: dropped and recreated before every scenario, so its name
/// must say it is disposable (it must end in `BENCH_DATABASE_SUFFIX`).
pub const DEFAULT_BENCH_DATABASE_URL: &str =
    "postgres://postgres@127.0.0.1:5432/wallet_ledger_bench";
pub const BENCH_DATABASE_SUFFIX: &str = "_bench";
pub const DEFAULT_BENCH_RESULTS: &str = "bench-results.jsonl";
/// Concurrent HTTP connections of `api-transfers`, `api-hot` and `api-topups`.
pub const DEFAULT_BENCH_CONNECTIONS: u64 = 64;
pub const DEFAULT_BENCH_ACCOUNTS: u64 = 10_000;
/// Requests of `api-transfers`, `api-hot` and `api-topups`.
pub const DEFAULT_BENCH_REQUESTS: u64 = 50_000;
pub const DEFAULT_BENCH_BATCH_CONNECTIONS: u64 = 4;
/// `api-batch`: batches of `MAX_BATCH_ITEMS` items each.
pub const DEFAULT_BENCH_BATCHES: u64 = 200;
pub const DEFAULT_BENCH_REPLAY_CONNECTIONS: u64 = 16;
/// Replays at `--replay-connections`; the single-connection run sends a tenth of them.
pub const DEFAULT_BENCH_REPLAY_REQUESTS: u64 = 50_000;
pub const DEFAULT_BENCH_CONSUMER_PAYMENTS: u64 = 100_000;
/// Workers of the consumer child: two keep one batch in the database while the other reads and
/// acknowledges (measured in docs/performance.md).
pub const DEFAULT_BENCH_CONSUMER_WORKERS: u64 = 2;
/// Share of the consumer scenario's payments published twice (a producer's resend).
pub const BENCH_CONSUMER_RESEND_PERCENT: u8 = 10;
pub const DEFAULT_BENCH_RECONCILE_ROWS: u64 = 1_000_000;
pub const DEFAULT_BENCH_BALANCE_READ_MAX_ENTRIES: u64 = 1_000_000;
/// Sequential balance reads measured at each history size (after a warm-up).
pub const DEFAULT_BENCH_BALANCE_READS: u64 = 2_000;
/// The largest set of `set-read` (the other has `sets::SMALL_SET_MEMBERS`).
pub const DEFAULT_BENCH_SET_MEMBERS: u64 = 10_000;
pub const DEFAULT_BENCH_CEILING_TRANSFERS: u64 = 200_000;
pub const DEFAULT_BENCH_CEILING_WORKERS: u64 = 4;
/// `--quick` divides every size it does not override by this (connections stay as they are).
pub const BENCH_QUICK_DIVISOR: u64 = 20;
/// The rate limit the benchmark's server gets: high enough that the bench measures the ledger,
/// not the limiter (every line of a server scenario says so).
pub const BENCH_RATE_LIMIT: u32 = 10_000_000;

/// The benchmark's scenarios, in the order `bench` runs them (the ceiling first: it is every
/// other scenario's denominator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BenchScenario {
    /// Bare set-based inserts of the rows a transfer writes: the database's ceiling.
    Ceiling,
    /// Transfers between random distinct wallets.
    ApiTransfers,
    /// Transfers that all debit one wallet.
    ApiHot,
    /// Payments (top-ups) crediting random wallets from one clearing account.
    ApiTopups,
    /// One transfer replayed, at 1 connection (latency) and at `--replay-connections`.
    ApiReplay,
    /// `POST /v1/transactions/batch`, independent batches of 1,000 transfers.
    ApiBatch,
    /// Payment events on a stream applied by a `consume` child process.
    Consumer,
    /// Balance-read latency of one wallet at growing history sizes.
    BalanceRead,
    /// Balance-read latency of an account set of 10 members and of `--set-members`.
    SetRead,
    /// A `reconcile` child process on a large settlement file with known exceptions.
    Reconcile,
}

impl BenchScenario {
    /// Every scenario, in the order `bench` runs them.
    pub const ALL: &[BenchScenario] = &[
        BenchScenario::Ceiling,
        BenchScenario::ApiTransfers,
        BenchScenario::ApiHot,
        BenchScenario::ApiTopups,
        BenchScenario::ApiReplay,
        BenchScenario::ApiBatch,
        BenchScenario::Consumer,
        BenchScenario::BalanceRead,
        BenchScenario::SetRead,
        BenchScenario::Reconcile,
    ];

    /// Its name on the command line and in the JSON lines.
    pub fn name(self) -> &'static str {
        match self {
            BenchScenario::Ceiling => "ceiling",
            BenchScenario::ApiTransfers => "api-transfers",
            BenchScenario::ApiHot => "api-hot",
            BenchScenario::ApiTopups => "api-topups",
            BenchScenario::ApiReplay => "api-replay",
            BenchScenario::ApiBatch => "api-batch",
            BenchScenario::Consumer => "consumer",
            BenchScenario::BalanceRead => "balance-read",
            BenchScenario::SetRead => "set-read",
            BenchScenario::Reconcile => "reconcile",
        }
    }
}

/// Where the two wallets of each `api-transfers` transfer sit on a Citus cluster: what decides
/// whether its commit stays on one worker or needs two-phase commit across two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransferPairs {
    /// Random distinct wallets, wherever they are (the only choice on plain PostgreSQL).
    #[default]
    Any,
    /// Both wallets on one shard.
    SameShard,
    /// Both wallets on one worker, on different shards.
    SameWorker,
    /// The wallets on two different workers.
    CrossWorker,
}

impl TransferPairs {
    pub const ALL: &[TransferPairs] = &[
        TransferPairs::Any,
        TransferPairs::SameShard,
        TransferPairs::SameWorker,
        TransferPairs::CrossWorker,
    ];

    /// Its name on the command line and in the JSON line.
    pub fn name(self) -> &'static str {
        match self {
            TransferPairs::Any => "any",
            TransferPairs::SameShard => "same-shard",
            TransferPairs::SameWorker => "same-worker",
            TransferPairs::CrossWorker => "cross-worker",
        }
    }
}

/// A run's inputs (the flags of `bench`); sizes left `None` take their default, shrunk by
/// `quick`.
#[derive(Debug, Clone)]
pub struct BenchSettings {
    pub scenarios: Vec<BenchScenario>,
    /// Dropped and recreated before each scenario; its name must end in `_bench`.
    pub bench_database_url: String,
    /// `host:port` of each Citus worker when the bench database's server is a coordinator.
    pub citus_workers: Vec<String>,
    pub redis: crate::broker::RedisSettings,
    /// Where each JSON line is appended too.
    pub results: PathBuf,
    /// The binary run as `serve`, `consume` and `reconcile` (default: this one).
    pub binary: Option<PathBuf>,
    /// Extra flags for the `serve` child.
    pub server_args: Vec<String>,
    /// Where the wallets of each api-transfers transfer sit (anything but `Any` needs Citus).
    pub transfer_pairs: TransferPairs,
    /// api-transfers and api-hot with every wallet in one account set (what sets cost writers).
    pub wallets_in_set: bool,
    pub quick: bool,
    /// Keep the logs and the database after a clean run too.
    pub keep: bool,
    pub connections: Option<u64>,
    pub accounts: Option<u64>,
    pub requests: Option<u64>,
    pub batch_connections: Option<u64>,
    pub batches: Option<u64>,
    pub replay_connections: Option<u64>,
    pub replay_requests: Option<u64>,
    pub consumer_payments: Option<u64>,
    pub consumer_batch_size: usize,
    pub consumer_workers: u64,
    pub consumer_partitions: crate::consumer::partition::Partitions,
    pub reconcile_rows: Option<u64>,
    pub balance_read_max_entries: Option<u64>,
    pub balance_reads: Option<u64>,
    pub set_members: Option<u64>,
    pub ceiling_transfers: Option<u64>,
    pub ceiling_workers: u64,
}

/// The sizes a run uses: the flags, or their defaults (shrunk by `--quick`).
#[derive(Debug, Clone)]
pub struct Sizes {
    pub connections: u64,
    pub accounts: u64,
    pub requests: u64,
    pub batch_connections: u64,
    pub batches: u64,
    pub replay_connections: u64,
    pub replay_requests: u64,
    pub consumer_payments: u64,
    pub consumer_batch_size: usize,
    pub consumer_workers: u64,
    pub consumer_partitions: crate::consumer::partition::Partitions,
    pub reconcile_rows: u64,
    pub balance_read_max_entries: u64,
    pub balance_reads: u64,
    pub set_members: u64,
    pub ceiling_transfers: u64,
    pub ceiling_workers: u64,
}

impl Sizes {
    fn from_args(args: &BenchSettings) -> Sizes {
        // A size given on the command line wins; `--quick` shrinks only the defaults, and
        // never below what a scenario needs to mean something.
        let size = |given: Option<u64>, default: u64, floor: u64| {
            given.unwrap_or(if args.quick {
                (default / BENCH_QUICK_DIVISOR).max(floor)
            } else {
                default
            })
        };
        Sizes {
            connections: args.connections.unwrap_or(DEFAULT_BENCH_CONNECTIONS),
            accounts: size(args.accounts, DEFAULT_BENCH_ACCOUNTS, 2),
            requests: size(args.requests, DEFAULT_BENCH_REQUESTS, 1),
            batch_connections: args
                .batch_connections
                .unwrap_or(DEFAULT_BENCH_BATCH_CONNECTIONS),
            batches: size(args.batches, DEFAULT_BENCH_BATCHES, 1),
            replay_connections: args
                .replay_connections
                .unwrap_or(DEFAULT_BENCH_REPLAY_CONNECTIONS),
            replay_requests: size(args.replay_requests, DEFAULT_BENCH_REPLAY_REQUESTS, 10),
            consumer_payments: size(args.consumer_payments, DEFAULT_BENCH_CONSUMER_PAYMENTS, 1),
            consumer_batch_size: args.consumer_batch_size,
            consumer_workers: args.consumer_workers,
            consumer_partitions: args.consumer_partitions,
            reconcile_rows: size(args.reconcile_rows, DEFAULT_BENCH_RECONCILE_ROWS, 30),
            balance_read_max_entries: size(
                args.balance_read_max_entries,
                DEFAULT_BENCH_BALANCE_READ_MAX_ENTRIES,
                1,
            ),
            balance_reads: size(args.balance_reads, DEFAULT_BENCH_BALANCE_READS, 1),
            set_members: size(args.set_members, DEFAULT_BENCH_SET_MEMBERS, 1),
            ceiling_transfers: size(args.ceiling_transfers, DEFAULT_BENCH_CEILING_TRANSFERS, 1),
            ceiling_workers: args.ceiling_workers,
        }
    }
}

/// One run's settings and where it keeps its files.
pub struct Bench {
    pub sizes: Sizes,
    pub database_url: String,
    database_name: String,
    /// The same server's `postgres` database, from which the bench database is dropped and
    /// created.
    admin_url: String,
    /// The `postgres` database of each Citus worker (empty on a plain server).
    worker_admin_urls: Vec<String>,
    pub redis_url: String,
    pub binary: PathBuf,
    pub server_args: Vec<String>,
    pub transfer_pairs: TransferPairs,
    pub wallets_in_set: bool,
    /// This run's logs and files (settlement files, reports).
    pub dir: PathBuf,
    /// Every stream this run created, deleted again if a signal interrupts it.
    streams: std::sync::Mutex<Vec<String>>,
}

/// The database's name from its URL; refused unless it ends in `_bench` (the bench drops it)
/// and is a plain identifier (it is spliced into `drop database`).
fn bench_database(url: &str) -> anyhow::Result<(String, String)> {
    let shown = crate::db::redact(url);
    let mut parsed = url::Url::parse(url)
        .map_err(|e| anyhow!("--bench-database-url {shown} is not a URL: {e}"))?;
    let name = parsed.path().trim_start_matches('/').to_owned();
    if !name.ends_with(BENCH_DATABASE_SUFFIX) {
        bail!(
            "--bench-database-url {shown} names the database {name:?}, which does not end in \
             {BENCH_DATABASE_SUFFIX:?}: the bench drops and recreates its database before every \
             scenario, so it refuses any database not named as disposable"
        );
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("--bench-database-url {shown}: the database name must be letters, digits and _");
    }
    parsed.set_path("/postgres");
    Ok((name, parsed.to_string()))
}

/// `url` (a server's `postgres` database) with the host and port of `node` (`host:port`).
fn on_node(url: &str, node: &str) -> anyhow::Result<String> {
    let (host, port) = node
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| anyhow!("--citus-workers {node:?} is not host:port"))?;
    let mut parsed = url::Url::parse(url)?;
    parsed
        .set_host(Some(host))
        .map_err(|e| anyhow!("--citus-workers {node:?}: {e}"))?;
    let _ = parsed.set_port(Some(port));
    Ok(parsed.to_string())
}

/// Runs one statement on the server or database of `url`.
async fn run_on(url: &str, statement: String) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(url)
        .await
        .with_context(|| format!("connecting to {}", crate::db::redact(url)))?;
    sqlx::query(sqlx::AssertSqlSafe(statement))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

fn with_database(url: &str, database: &str) -> anyhow::Result<String> {
    let mut parsed = url::Url::parse(url)?;
    parsed.set_path(&format!("/{database}"));
    Ok(parsed.to_string())
}

impl Bench {
    /// Drops the bench database (on every node of a Citus cluster).
    async fn drop_everywhere(&self) -> anyhow::Result<()> {
        for admin in std::iter::once(&self.admin_url).chain(&self.worker_admin_urls) {
            let drop = format!(
                "drop database if exists \"{}\" with (force)",
                self.database_name
            );
            run_on(admin, drop).await?;
        }
        Ok(())
    }

    /// On a Citus coordinator: the bench database on every node, with the extension, and the
    /// workers registered in it (what scripts/citus.sh does for `wallet_ledger`).
    async fn create_on_citus(&self) -> anyhow::Result<()> {
        let name = &self.database_name;
        let mut nodes = vec![self.admin_url.clone()];
        nodes.extend(self.worker_admin_urls.iter().cloned());
        for admin in &nodes {
            run_on(admin, format!("create database \"{name}\"")).await?;
            run_on(
                &with_database(admin, name)?,
                "create extension citus".into(),
            )
            .await?;
        }
        let coordinator = url::Url::parse(&self.admin_url)?;
        let database = with_database(&self.admin_url, name)?;
        run_on(
            &database,
            format!(
                "select citus_set_coordinator_host('{}', {})",
                coordinator.host_str().unwrap_or("127.0.0.1"),
                coordinator.port().unwrap_or(5432)
            ),
        )
        .await?;
        for worker in &self.worker_admin_urls {
            let worker = url::Url::parse(worker)?;
            run_on(
                &database,
                format!(
                    "select citus_add_node('{}', {})",
                    worker.host_str().unwrap_or("127.0.0.1"),
                    worker.port().unwrap_or(5432)
                ),
            )
            .await?;
        }
        Ok(())
    }

    /// Drops the bench database, creates it and applies the migrations (the crate's own; on
    /// a Citus coordinator, `migrate`'s distribution too).
    pub async fn fresh_database(&self) -> anyhow::Result<PgPool> {
        self.drop_everywhere().await?;
        if !self.worker_admin_urls.is_empty() {
            self.create_on_citus().await?;
        }
        let mut config = DatabaseSettings::with_url(&self.database_url);
        config.pool_max_connections = 16;
        config.application_name = Some("wallet-ledger bench".to_owned());
        crate::db::connect_and_migrate(&config).await
    }

    pub fn remember_stream(&self, stream: &str) {
        if let Ok(mut streams) = self.streams.lock() {
            streams.push(stream.to_owned());
        }
    }

    /// After an interruption: the scenario's own clean-up did not run.
    async fn delete_streams(&self) {
        let streams = self.streams.lock().map(|s| s.clone()).unwrap_or_default();
        if streams.is_empty() {
            return;
        }
        if let Ok(mut redis) = crate::broker::connect(&self.redis_url).await {
            for stream in streams {
                consumer::delete_stream(&mut redis, &stream, self.sizes.consumer_partitions).await;
            }
        }
    }

    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// An admin key for the bench, then `serve` on the bench database.
    pub async fn serve(
        &self,
        pool: &PgPool,
        label: &str,
    ) -> anyhow::Result<(server::Server, client::Api)> {
        self.serve_with(pool, label, &[]).await
    }

    /// `serve` with flags of the scenario's own after `--server-arg`'s.
    pub async fn serve_with(
        &self,
        pool: &PgPool,
        label: &str,
        extra: &[String],
    ) -> anyhow::Result<(server::Server, client::Api)> {
        let (_, token) = crate::api_keys::create(
            &mut *pool.acquire().await?,
            "bench",
            crate::api_keys::Scope::Admin,
        )
        .await?;
        let args: Vec<String> = self.server_args.iter().chain(extra).cloned().collect();
        let server = server::start_server(
            &self.binary,
            &self.database_url,
            &args,
            self.log(&format!("serve-{label}")),
        )
        .await?;
        let api = client::Api::new(server.base_url.clone(), &token);
        Ok((server, api))
    }

    /// What every line of a server scenario says about the server it ran against.
    pub fn server_params(&self, m: &mut Measurement) {
        m.params
            .insert("rate_limit_per_second", BENCH_RATE_LIMIT.into());
        m.params.insert("rate_limit_burst", BENCH_RATE_LIMIT.into());
        m.params
            .insert("server_args", self.server_args.clone().into());
    }

    async fn run_scenario(&self, scenario: BenchScenario) -> anyhow::Result<Vec<Measurement>> {
        let pool = self.fresh_database().await?;
        let measured = match scenario {
            BenchScenario::Ceiling => vec![ceiling::run(self, &pool).await?],
            BenchScenario::ApiTransfers => {
                vec![api::transfers(self, &pool, api::Shape::Spread).await?]
            }
            BenchScenario::ApiHot => vec![api::transfers(self, &pool, api::Shape::Hot).await?],
            BenchScenario::ApiTopups => vec![api::topups(self, &pool).await?],
            BenchScenario::ApiReplay => api::replay(self, &pool).await?,
            BenchScenario::ApiBatch => vec![api::batch(self, &pool).await?],
            BenchScenario::Consumer => vec![consumer::run(self, &pool).await?],
            BenchScenario::BalanceRead => vec![history::balance_read(self, &pool).await?],
            BenchScenario::SetRead => vec![sets::set_read(self, &pool).await?],
            BenchScenario::Reconcile => vec![history::reconcile(self, &pool).await?],
        };
        pool.close().await;
        Ok(measured)
    }
}

/// `git rev-parse --short HEAD` in the working directory, if there is a repository.
fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

/// The newest passed ceiling in the results file, for runs that do not measure it again.
fn earlier_ceiling(results: &std::path::Path) -> Option<f64> {
    let text = std::fs::read_to_string(results).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["scenario"] == "ceiling" && v["check"] == "passed")
        .filter_map(|v| v["per_second"].as_f64())
        .next_back()
}

pub async fn run(args: BenchSettings) -> anyhow::Result<ExitCode> {
    let (database_name, admin_url) = bench_database(&args.bench_database_url)?;
    let mut scenarios = args.scenarios.clone();
    if scenarios.is_empty() {
        scenarios = BenchScenario::ALL.to_vec();
    }
    scenarios.sort();
    scenarios.dedup();
    if args.transfer_pairs != TransferPairs::Any && args.citus_workers.is_empty() {
        bail!(
            "--transfer-pairs {} places transfers by their wallets' Citus shards and workers: \
             it needs a Citus coordinator as the bench database's server and its \
             --citus-workers (on plain PostgreSQL only `any` means something)",
            args.transfer_pairs.name()
        );
    }
    let binary = match &args.binary {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("finding this binary (pass --binary)")?,
    };
    anyhow::ensure!(
        binary.exists(),
        "--binary {} does not exist",
        binary.display()
    );
    // Fail early and clearly when a service is missing, before any scenario starts.
    PgConnection::connect(&admin_url)
        .await
        .map_err(|e| {
            anyhow!(
                "cannot reach PostgreSQL at {}: {e}. Is it running? `bash scripts/services.sh` \
                 starts the local one (or set BENCH_DATABASE_URL).",
                crate::db::redact(&admin_url)
            )
        })?
        .close()
        .await?;
    if scenarios
        .iter()
        .any(|s| matches!(s, BenchScenario::Consumer | BenchScenario::Reconcile))
    {
        let mut redis = crate::broker::connect(&args.redis.url).await?;
        // The consumer's settle script writes three keys of a stream, which on a cluster must
        // share a slot: the partition streams' hash tags do that, the one bench stream not.
        if redis.is_cluster() && args.consumer_partitions.count() < 2 {
            bail!(
                "the consumer and reconcile scenarios on a Redis Cluster need \
                 --consumer-partitions N (2 or more), so that each stream's keys share a slot"
            );
        }
        // On a cluster PING goes to every master: each must answer.
        redis::cmd("PING")
            .query_async::<String>(&mut redis)
            .await
            .with_context(|| {
                format!(
                    "Redis at {} does not answer PING",
                    crate::broker::redact(&args.redis.url)
                )
            })?;
    }
    let dir = std::env::temp_dir().join(format!(
        "wallet-ledger-bench-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bench = Bench {
        sizes: Sizes::from_args(&args),
        database_url: args.bench_database_url.clone(),
        database_name,
        worker_admin_urls: args
            .citus_workers
            .iter()
            .map(|worker| on_node(&admin_url, worker))
            .collect::<anyhow::Result<_>>()?,
        admin_url,
        redis_url: args.redis.url.clone(),
        binary,
        server_args: args.server_args.clone(),
        transfer_pairs: args.transfer_pairs,
        wallets_in_set: args.wallets_in_set,
        dir,
        streams: Default::default(),
    };
    tracing::info!(dir = %bench.dir.display(), sizes = ?bench.sizes, "bench: starting");

    let keep = args.keep;
    let git = git_commit();
    let mut ceiling = earlier_ceiling(&args.results);
    let mut failed = false;
    let mut errored = false;
    // A signal drops the scenario running (its children die with their handles); one that
    // comes between two scenarios stops the next before it starts.
    let interrupted = tokio_util::sync::CancellationToken::new();
    crate::shutdown::cancel_on_signal(interrupted.clone());
    for scenario in scenarios {
        let name = scenario.name().to_owned();
        tracing::info!("bench: {name}");
        let outcome = tokio::select! {
            biased;
            () = interrupted.cancelled() => {
                bench.delete_streams().await;
                eprintln!(
                    "error: bench interrupted by a signal during {name}; logs and the database \
                     are kept ({})",
                    bench.dir.display()
                );
                return Ok(ExitCode::from(2));
            }
            outcome = bench.run_scenario(scenario) => outcome,
        };
        let measured = match outcome {
            Ok(measured) => measured,
            Err(e) => {
                eprintln!(
                    "error: bench {name}: {e:#} (logs in {})",
                    bench.dir.display()
                );
                errored = true;
                continue;
            }
        };
        for m in measured {
            let passed = m.check.passed();
            if scenario == BenchScenario::Ceiling && passed {
                ceiling = Some(m.per_second());
            }
            let line = serde_json::to_string(&m.into_line(git.clone(), ceiling))?;
            println!("{line}");
            std::io::stdout().flush()?;
            append(&args.results, &line)?;
            if !passed {
                failed = true;
                eprintln!(
                    "bench {name}: check failed (logs in {})",
                    bench.dir.display()
                );
            }
        }
    }

    if failed || errored || keep {
        eprintln!(
            "bench: kept the logs in {} and the database {}",
            bench.dir.display(),
            crate::db::redact(&bench.database_url)
        );
    } else {
        let _ = std::fs::remove_dir_all(&bench.dir);
        drop_database(&bench).await?;
    }
    Ok(if errored {
        ExitCode::from(2)
    } else if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Appends one line to the results file (created if missing).
fn append(path: &std::path::Path, line: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening the results file {}", path.display()))?;
    writeln!(file, "{line}")?;
    Ok(())
}

/// A clean run leaves no database behind (the large ones take gigabytes).
async fn drop_database(bench: &Bench) -> anyhow::Result<()> {
    bench.drop_everywhere().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_databases_named_as_disposable_are_accepted() {
        let (name, admin) =
            bench_database("postgres://postgres@127.0.0.1:5432/wallet_ledger_bench").unwrap();
        assert_eq!(name, "wallet_ledger_bench");
        assert_eq!(admin, "postgres://postgres@127.0.0.1:5432/postgres");
        assert!(bench_database("postgres://postgres@127.0.0.1:5432/wallet_ledger").is_err());
        assert!(bench_database("postgres://127.0.0.1/x\"y_bench").is_err());
    }
}
