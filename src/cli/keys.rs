//! `wallet-ledger keys generate`: a new checkpoint signing key.

use crate::ledger::seals::keys;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: KeysAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeysAction {
    /// Print a new Ed25519 key for signing checkpoints, as two shell-sourceable lines: the
    /// secret `CHECKPOINT_SIGNING_KEY` (for `seal` only) and the `CHECKPOINT_PUBLIC_KEY` that
    /// auditors keep.
    #[command(after_help = "Example:\n  wallet-ledger keys generate > checkpoint-key.env")]
    Generate,
}

pub fn run(args: KeysArgs) -> ExitCode {
    match args.action {
        KeysAction::Generate => {
            let key = keys::generate();
            println!("CHECKPOINT_SIGNING_KEY={}", keys::encode(key.as_bytes()));
            println!(
                "CHECKPOINT_PUBLIC_KEY={}",
                keys::encode(key.verifying_key().as_bytes())
            );
        }
    }
    ExitCode::SUCCESS
}
