//! The command line: one file per subcommand, holding its flags (`Args`) and its `run`, which
//! turns the flags into the library's settings and calls it. The only place clap lives; flag
//! groups several commands share are in `shared`.
//!
//! Exit codes: 0 success, 1 findings (`verify`, `reconcile`, `demo`, `bench`), 2 error (in
//! `main`).

pub mod api_key;
pub mod bench;
pub mod consume;
pub mod deliveries;
pub mod demo;
pub mod dlq;
pub mod migrate;
pub mod openapi;
pub mod outbox;
pub mod publish;
pub mod purge;
pub mod reconcile;
pub mod serve;
pub mod shared;
pub mod verify;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "wallet-ledger",
    version,
    about = "A double-entry wallet ledger built on natural idempotency"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the REST API and its background workers.
    Serve(serve::ServeArgs),
    /// Create the database if missing and apply migrations, then exit.
    Migrate(migrate::MigrateArgs),
    /// Compare the ledger with a provider's settlement file and check the ledger's invariants;
    /// exit 0 when clean, 1 on exceptions, 2 on error.
    Reconcile(reconcile::ReconcileArgs),
    /// Check the ledger's invariants; exit 0 when they hold, 1 when they do not, 2 on error.
    Verify(verify::VerifyArgs),
    /// Print the OpenAPI document (the committed `openapi/openapi.json` is this output).
    Openapi,
    /// Apply payment events from a Redis/Valkey stream, exactly once per payment.
    Consume(consume::ConsumeArgs),
    /// Inspect, replay or drop the stream's dead letters (`<stream>.dlq`).
    Dlq(dlq::DlqArgs),
    /// Create, list or revoke API keys (`create` prints the token alone on stdout, once).
    ApiKey(api_key::ApiKeyArgs),
    /// Run the webhook dispatcher alone (several may run at once; `serve` runs one too).
    Outbox(outbox::OutboxArgs),
    /// List webhook deliveries or send one again.
    Deliveries(deliveries::DeliveriesArgs),
    /// Delete delivered outbox events, old delivery attempts, old dead letters and leftover
    /// reconciliation staging older than the retention.
    Purge(purge::PurgeArgs),
    /// Publish payment events to the stream, with a share of resends (tests, demos, benchmarks).
    Publish(publish::PublishArgs),
    /// The seed article's lab, end to end: five payments, one resent, a consumer killed
    /// mid-batch, a second one taking over; exits 0 when the wallet gained exactly 250.00.
    Demo(demo::DemoArgs),
    /// Run the benchmark scenarios: one JSON line each on stdout (and appended to
    /// `--results`); exit 0 when every scenario's own check passed, 1 when one failed, 2 on error.
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
