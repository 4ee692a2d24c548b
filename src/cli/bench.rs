//! `wallet-ledger bench`: the benchmark scenarios.
//!
//! A subcommand of the one binary rather than a second one: `wallet-ledger bench` is how the
//! project measures, and the scenarios run this same binary as their `serve`, `consume` and
//! `reconcile` children, so one build is always measured against itself.

use super::consume::batch_size;
use super::shared::RedisArgs;
use crate::bench::{self, BenchScenario, BenchSettings, TransferPairs};
use crate::consumer;
use clap::Args;
use clap::builder::PossibleValue;
use std::process::ExitCode;

/// Sizes are optional so that `--quick` can shrink the ones not given; each says its default.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Scenarios to run (default: all), always in the order listed here.
    #[arg(value_enum)]
    pub scenarios: Vec<BenchScenario>,
    /// The benchmark's PostgreSQL database, dropped and recreated before each scenario; its
    /// name must end in `_bench`.
    #[arg(long, env = "BENCH_DATABASE_URL", default_value = bench::DEFAULT_BENCH_DATABASE_URL, hide_env_values = true)]
    pub bench_database_url: String,
    /// With a Citus coordinator as the bench database's server: its workers (`host:port`,
    /// comma-separated). The bench database is then created on every node with the citus
    /// extension and the workers registered, so that `migrate` distributes it.
    #[arg(long, value_delimiter = ',')]
    pub citus_workers: Vec<String>,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// Where each JSON line is appended too.
    #[arg(long, default_value = bench::DEFAULT_BENCH_RESULTS)]
    pub results: std::path::PathBuf,
    /// The wallet-ledger binary run as `serve`, `consume` and `reconcile` (default: this one).
    #[arg(long)]
    pub binary: Option<std::path::PathBuf>,
    /// An extra flag for the `serve` child, e.g. `--server-arg=--pool-max-connections=32`
    /// (repeatable).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Where the two wallets of each api-transfers transfer sit on a Citus cluster (read from
    /// the coordinator once the wallets exist); anything but `any` needs --citus-workers.
    #[arg(long, value_enum, default_value = "any")]
    pub transfer_pairs: TransferPairs,
    /// Put every wallet of api-transfers and api-hot in one account set before the transfers
    /// (through the API), to measure what sets cost writers; the check adds the set's total.
    #[arg(long)]
    pub wallets_in_set: bool,
    /// Shrink every size not given explicitly about 20 times (tests, CI smoke runs).
    #[arg(long)]
    pub quick: bool,
    /// Keep the logs and the database after a clean run too (to profile what it left, e.g.
    /// rerun `reconcile` against the same ledger).
    #[arg(long)]
    pub keep: bool,
    /// HTTP connections of api-transfers, api-hot and api-topups [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub connections: Option<u64>,
    /// Wallets of the API and consumer scenarios [default: 10000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    pub accounts: Option<u64>,
    /// Requests of api-transfers, api-hot and api-topups [default: 50000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// HTTP connections of api-batch [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_connections: Option<u64>,
    /// 1,000-item batches of api-batch [default: 200].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batches: Option<u64>,
    /// HTTP connections of the second api-replay run [default: 16].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub replay_connections: Option<u64>,
    /// Replays at --replay-connections; the single-connection run sends a tenth [default: 50000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..))]
    pub replay_requests: Option<u64>,
    /// Distinct payments published for the consumer scenario, 10% of them twice [default: 100000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub consumer_payments: Option<u64>,
    /// The consumer child's --batch-size.
    #[arg(long, default_value_t = consumer::MAX_CONSUMER_BATCH_SIZE, value_parser = batch_size)]
    pub consumer_batch_size: usize,
    /// The consumer child's --workers.
    #[arg(long, default_value_t = bench::DEFAULT_BENCH_CONSUMER_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..=consumer::MAX_CONSUMER_WORKERS))]
    pub consumer_workers: u64,
    /// Partition streams the consumer and reconcile scenarios publish over and consume (the
    /// child's --partitions); on a Redis Cluster (`redis+cluster://`) at least 2.
    #[arg(long, default_value_t = consumer::partition::DEFAULT_PARTITIONS,
        value_parser = clap::value_parser!(u16).range(1..=i64::from(consumer::partition::MAX_PARTITIONS)))]
    pub consumer_partitions: u16,
    /// Rows of the reconcile scenario's settlement file (at least 30: the deliberate
    /// exceptions) [default: 1000000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(30..))]
    pub reconcile_rows: Option<u64>,
    /// The largest history of the balance-read scenario, built up from 1,000 through 100,000
    /// and 1,000,000 entries [default: 1000000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub balance_read_max_entries: Option<u64>,
    /// Sequential balance reads measured at each history size of balance-read, and at each set
    /// size of set-read [default: 2000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub balance_reads: Option<u64>,
    /// Members of set-read's largest set, measured beside a set of 10 [default: 10000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub set_members: Option<u64>,
    /// Transfers inserted by the ceiling scenario [default: 200000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ceiling_transfers: Option<u64>,
    /// Concurrent database connections of the ceiling scenario.
    #[arg(long, default_value_t = bench::DEFAULT_BENCH_CEILING_WORKERS,
        value_parser = clap::value_parser!(u64).range(1..))]
    pub ceiling_workers: u64,
}

/// Exit 0 when every scenario's own check passed, 1 when one failed.
pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    bench::run(BenchSettings {
        scenarios: args.scenarios,
        bench_database_url: args.bench_database_url,
        citus_workers: args.citus_workers,
        redis: args.redis.settings(),
        results: args.results,
        binary: args.binary,
        server_args: args.server_args,
        transfer_pairs: args.transfer_pairs,
        wallets_in_set: args.wallets_in_set,
        quick: args.quick,
        keep: args.keep,
        connections: args.connections,
        accounts: args.accounts,
        requests: args.requests,
        batch_connections: args.batch_connections,
        batches: args.batches,
        replay_connections: args.replay_connections,
        replay_requests: args.replay_requests,
        consumer_payments: args.consumer_payments,
        consumer_batch_size: args.consumer_batch_size,
        consumer_workers: args.consumer_workers,
        consumer_partitions: consumer::partition::Partitions::new(u32::from(
            args.consumer_partitions,
        ))
        .expect("clap checked the range"),
        reconcile_rows: args.reconcile_rows,
        balance_read_max_entries: args.balance_read_max_entries,
        balance_reads: args.balance_reads,
        set_members: args.set_members,
        ceiling_transfers: args.ceiling_transfers,
        ceiling_workers: args.ceiling_workers,
    })
    .await
}

impl clap::ValueEnum for BenchScenario {
    fn value_variants<'a>() -> &'a [BenchScenario] {
        BenchScenario::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            BenchScenario::Ceiling => {
                "Bare set-based inserts of the rows a transfer writes: the database's ceiling"
            }
            BenchScenario::ApiTransfers => "Transfers between random distinct wallets",
            BenchScenario::ApiHot => "Transfers that all debit one wallet",
            BenchScenario::ApiTopups => {
                "Payments (top-ups) crediting random wallets from one clearing account"
            }
            BenchScenario::ApiReplay => {
                "One transfer replayed, at 1 connection (latency) and at `--replay-connections`"
            }
            BenchScenario::ApiBatch => {
                "`POST /v1/transactions/batch`, independent batches of 1,000 transfers"
            }
            BenchScenario::Consumer => {
                "Payment events on a stream applied by a `consume` child process"
            }
            BenchScenario::BalanceRead => {
                "Balance-read latency of one wallet at growing history sizes"
            }
            BenchScenario::SetRead => {
                "Balance-read latency of an account set of 10 members and of `--set-members`"
            }
            BenchScenario::Reconcile => {
                "A `reconcile` child process on a large settlement file with known exceptions"
            }
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl clap::ValueEnum for TransferPairs {
    fn value_variants<'a>() -> &'a [TransferPairs] {
        TransferPairs::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            TransferPairs::Any => "Random distinct wallets, wherever they sit",
            TransferPairs::SameShard => "Both wallets on one shard",
            TransferPairs::SameWorker => "Both wallets on one worker, on different shards",
            TransferPairs::CrossWorker => "The two wallets on two different workers",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}
