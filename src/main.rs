//! The `wallet-ledger` binary: parse the command line, set up logging, run one subcommand.
//! Exit codes: 0 success, 1 findings (`verify`, `reconcile`), 2 error (with a one-paragraph reason, never a
//! stack trace).

use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;
use wallet_ledger::config::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    wallet_ledger::install_crypto_provider();
    init_logging();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", wallet_ledger::error_reason(&e));
            ExitCode::from(2)
        }
    }
}

/// Jobs exit 0 when clean and 1 when they found something; an error is 2 (in `main`).
async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => wallet_ledger::http::serve(args).await?,
        Command::Migrate(args) => {
            wallet_ledger::db::connect_and_migrate(&args.database)
                .await?
                .close()
                .await;
            tracing::info!("migrations applied");
        }
        Command::Reconcile(args) => {
            let clean = wallet_ledger::reconcile::run::run(args).await?;
            return Ok(if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Command::Verify(args) => {
            let clean = wallet_ledger::reconcile::verify::run(args).await?;
            return Ok(if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Command::Openapi => print!("{}", wallet_ledger::http::openapi::document()),
        Command::Consume(args) => wallet_ledger::consumer::run(args).await?,
        Command::ApiKey(args) => wallet_ledger::api_keys::run(args).await?,
        Command::Outbox(args) => wallet_ledger::outbox::dispatcher::run_standalone(args).await?,
        Command::Deliveries(args) => wallet_ledger::outbox::deliveries::run_cli(args).await?,
        Command::Purge(args) => wallet_ledger::outbox::purge::run(args).await?,
        Command::Dlq(args) => wallet_ledger::consumer::dlq::run(args).await?,
        Command::Publish(args) => wallet_ledger::consumer::producer::run(args).await?,
        Command::Bench(args) => return wallet_ledger::bench::run(args).await,
        Command::Demo(args) => {
            let expected = wallet_ledger::consumer::demo::run(args).await?;
            return Ok(if expected {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `RUST_LOG` filters (default `info`); `LOG_FORMAT=json` switches to one JSON object a line.
fn init_logging() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.init();
    }
}
