//! The command line: one file per subcommand, holding its flags (`Args`) and its `run`, which
//! turns the flags into the library's settings and calls it. The only place clap lives; flag
//! groups several commands share are in `shared`.
//!
//! Exit codes: 0 success, 1 findings (`verify`, `reconcile`, `demo`, `bench`), 2 error (in
//! `main`).

pub mod api_key;
pub mod background;
pub mod bench;
pub mod consume;
pub mod deliveries;
pub mod demo;
pub mod dlq;
pub mod keys;
pub mod migrate;
pub mod openapi;
pub mod outbox;
pub mod publish;
pub mod purge;
pub mod reconcile;
pub mod seal;
pub mod serve;
pub mod shared;
pub mod verify;
pub mod verify_proof;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "wallet-ledger",
    version,
    about = "A double-entry wallet ledger built on natural idempotency",
    // One layout for every subcommand (clap otherwise picks it per subcommand, by how long
    // its flags' help is): the flag on its line, its help below. Propagated to subcommands.
    next_line_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the REST API and its background workers.
    #[command(
        after_help = "Example:\n  wallet-ledger serve --listen-addr 0.0.0.0:8080 --database-url postgres://postgres@127.0.0.1:5432/wallet_ledger"
    )]
    Serve(serve::ServeArgs),
    /// Create the database if missing and apply migrations, then exit.
    #[command(
        after_help = "Example:\n  wallet-ledger migrate --database-url postgres://postgres@127.0.0.1:5432/wallet_ledger"
    )]
    Migrate(migrate::MigrateArgs),
    /// Compare the ledger with a provider's settlement file and check the ledger's invariants;
    /// exit 0 when clean, 1 on exceptions, 2 on error.
    #[command(
        after_help = "Example:\n  wallet-ledger reconcile --provider acme --settlement settlement.csv --out reports --from 2026-11-30T00:00:00Z --to 2026-12-01T00:00:00Z"
    )]
    Reconcile(reconcile::ReconcileArgs),
    /// Check the ledger's invariants; exit 0 when they hold, 1 when they do not, 2 on error.
    #[command(after_help = "Example:\n  wallet-ledger verify --hold-grace-ms 60000")]
    Verify(verify::VerifyArgs),
    /// Print the OpenAPI document (the committed `openapi/openapi.json` is this output).
    #[command(after_help = "Example:\n  wallet-ledger openapi > openapi/openapi.json")]
    Openapi,
    /// Apply payment events from a Redis/Valkey stream, exactly once per payment.
    #[command(
        after_help = "Example:\n  wallet-ledger consume --redis-url redis://127.0.0.1:6379 --metrics-addr 127.0.0.1:9100"
    )]
    Consume(consume::ConsumeArgs),
    /// Inspect, replay or drop the stream's dead letters (`<stream>.dlq`).
    #[command(after_help = "Example:\n  wallet-ledger dlq list --count 10")]
    Dlq(dlq::DlqArgs),
    /// Create, list or revoke API keys (`create` prints the token alone on stdout, once).
    #[command(after_help = "Example:\n  wallet-ledger api-key create --owner demo --scope admin")]
    ApiKey(api_key::ApiKeyArgs),
    /// Run the webhook dispatcher alone (several may run at once; `serve` runs one too).
    #[command(
        after_help = "Example:\n  wallet-ledger outbox --database-url postgres://postgres@127.0.0.1:5432/wallet_ledger"
    )]
    Outbox(outbox::OutboxArgs),
    /// List webhook deliveries or send one again.
    #[command(after_help = "Example:\n  wallet-ledger deliveries list --status dead")]
    Deliveries(deliveries::DeliveriesArgs),
    /// Delete delivered outbox events, old delivery attempts, old dead letters and leftover
    /// reconciliation staging older than the retention.
    #[command(after_help = "Example:\n  wallet-ledger purge --retention-days 30")]
    Purge(purge::PurgeArgs),
    /// Publish payment events to the stream, with a share of resends (tests, demos, benchmarks).
    #[command(after_help = "Example:\n  wallet-ledger publish --count 100 --resend-percent 10")]
    Publish(publish::PublishArgs),
    /// The seed article's lab, end to end: five payments, one resent, a consumer killed
    /// mid-batch, a second one taking over; exits 0 when the wallet gained exactly 250.00.
    #[command(after_help = "Example:\n  wallet-ledger demo")]
    Demo(demo::DemoArgs),
    /// Commit the next signed checkpoint of the journal (every wallet's chain head), once or
    /// every `--every-ms`.
    #[command(after_help = "Example:\n  wallet-ledger seal --signing-key-file checkpoint.key")]
    Seal(seal::SealArgs),
    /// Check a proof that a wallet's chain head is sealed in a checkpoint, offline: exit 0 when
    /// it holds, 1 when it does not, 2 on error.
    #[command(
        after_help = "Example:\n  wallet-ledger verify-proof proof.json --public-key \"$CHECKPOINT_PUBLIC_KEY\""
    )]
    VerifyProof(verify_proof::VerifyProofArgs),
    /// Make a checkpoint signing key.
    #[command(after_help = "Example:\n  wallet-ledger keys generate")]
    Keys(keys::KeysArgs),
    /// Run the benchmark scenarios: one JSON line each on stdout (and appended to
    /// `--results`); exit 0 when every scenario's own check passed, 1 when one failed, 2 on error.
    #[command(after_help = "Example:\n  wallet-ledger bench --quick api-transfers")]
    Bench(bench::BenchArgs),
}

/// The subcommand and its flags from the process's arguments; on a usage error (or `--help`)
/// clap prints and exits.
pub fn parse() -> Command {
    Cli::parse().command
}

/// Runs one subcommand.
pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    // The long-running processes export metrics: the recorder first, so that nothing recorded
    // while starting (the synchronous standby gauge) is lost.
    use crate::metrics_catalog::{Role, start};
    match &command {
        Command::Serve(_) => start(&[Role::Api, Role::Dispatcher]),
        Command::Consume(_) => start(&[Role::Consumer]),
        Command::Outbox(_) => start(&[Role::Dispatcher]),
        _ => {}
    }
    match command {
        Command::Serve(args) => serve::run(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Reconcile(args) => reconcile::run(args).await,
        Command::Verify(args) => verify::run(args).await,
        Command::Openapi => Ok(openapi::run()),
        Command::Consume(args) => consume::run(args).await,
        Command::Dlq(args) => dlq::run(args).await,
        Command::ApiKey(args) => api_key::run(args).await,
        Command::Outbox(args) => outbox::run(args).await,
        Command::Deliveries(args) => deliveries::run(args).await,
        Command::Purge(args) => purge::run(args).await,
        Command::Publish(args) => publish::run(args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Seal(args) => seal::run(args).await,
        Command::Keys(args) => Ok(keys::run(args)),
        Command::VerifyProof(args) => verify_proof::run(args),
    }
}

/// A job's exit code: 0 when it found nothing, 1 when it did.
fn findings(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// Every subcommand's `--help` has one layout (help below its flag), ends with an example
    /// that parses, and writes placeholders alike (`<URL>`, `<COUNT>`: upper case).
    #[test]
    fn every_subcommand_has_one_layout_a_working_example_and_upper_case_placeholders() {
        use clap::{CommandFactory, Parser};
        fn walk(command: &clap::Command, path: &str, problems: &mut Vec<String>) {
            for arg in command.get_arguments() {
                for name in arg.get_value_names().unwrap_or_default() {
                    if name.as_str() != name.as_str().to_uppercase() {
                        problems.push(format!("{path}: placeholder <{name}>"));
                    }
                }
            }
            for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
                let sub_path = format!("{path} {}", sub.get_name());
                let example = sub
                    .get_after_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                let lines: Vec<&str> = example
                    .lines()
                    .filter_map(|l| l.trim().strip_prefix("wallet-ledger "))
                    .collect();
                if !example.starts_with("Example:") || lines.is_empty() {
                    problems.push(format!("{sub_path}: no example"));
                }
                for line in lines {
                    // A shell redirection ends the arguments.
                    let args = line.split_whitespace().take_while(|a| *a != ">");
                    let argv = std::iter::once("wallet-ledger").chain(args);
                    if let Err(e) = super::Cli::try_parse_from(argv) {
                        problems.push(format!("{sub_path}: example `{line}`: {e}"));
                    } else if !format!("wallet-ledger {line}").starts_with(&sub_path) {
                        problems.push(format!("{sub_path}: example of another command: {line}"));
                    }
                }
                let help = sub.clone().render_help().to_string();
                let crowded = help.lines().filter(|l| l.starts_with("  -")).find(|l| {
                    // A flag line holds the flag and its placeholder only: help goes below.
                    l.trim().contains("  ")
                });
                if let Some(line) = crowded {
                    problems.push(format!("{sub_path}: help on the flag's line: {line}"));
                }
                walk(sub, &sub_path, problems);
            }
        }
        let mut problems = Vec::new();
        let mut cli = super::Cli::command();
        cli.build();
        walk(&cli, "wallet-ledger", &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// A flag read from an environment variable that can hold a credential (a URL with a
    /// password, a key, a secret) never shows that variable's value in `--help`.
    #[test]
    fn secret_bearing_environment_values_are_hidden_from_help() {
        use clap::CommandFactory;
        fn walk(command: &clap::Command, exposed: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let Some(env) = arg.get_env().map(|e| e.to_string_lossy().into_owned()) else {
                    continue;
                };
                // A switch (`METRICS_REQUIRE_KEY`) holds no credential whatever its name.
                let secret = arg.get_action().takes_values()
                    && ["URL", "KEY", "SECRET", "TOKEN", "PASSWORD"]
                        .iter()
                        .any(|word| env.contains(word));
                if secret && !arg.is_hide_env_values_set() {
                    exposed.push(format!("{} {env}", command.get_name()));
                }
            }
            command.get_subcommands().for_each(|sub| walk(sub, exposed));
        }
        let mut exposed = Vec::new();
        walk(&super::Cli::command(), &mut exposed);
        assert!(exposed.is_empty(), "shown in --help: {exposed:?}");
    }
}
