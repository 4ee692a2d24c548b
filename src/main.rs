//! The `wallet-ledger` binary: parse the command line, set up logging, run one subcommand.
//! Exit codes: 0 success, 1 findings (see `cli`), 2 error (with a one-paragraph reason, never a
//! stack trace).

use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let command = wallet_ledger::cli::parse();
    wallet_ledger::install_crypto_provider();
    init_logging();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(wallet_ledger::cli::run(command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", wallet_ledger::error_reason(&e));
            ExitCode::from(2)
        }
    }
}

/// `RUST_LOG` filters (default `info`); `LOG_FORMAT=json` switches to one JSON object a line.
/// Colours only on a terminal, and never with `NO_COLOR` set (no-color.org): a file or a log
/// collector would keep the escape codes as text.
fn init_logging() {
    use std::io::IsTerminal;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let colour = wallet_ledger::telemetry::log_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR"),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    if std::env::var("LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.init();
    }
}
