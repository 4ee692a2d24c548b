//! `wallet-ledger openapi`: print the OpenAPI document.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    print!("{}", crate::http::openapi::document());
    ExitCode::SUCCESS
}
