//! `wallet-ledger verify-proof proof.json --public-key K`: checks a proof offline, with no
//! database (docs/verification.md).

use crate::ledger::seals::keys;
use crate::ledger::seals::proof::HeadProof;
use anyhow::Context;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct VerifyProofArgs {
    /// The proof, as `GET /v1/checkpoints/{n}/heads/{account}` answered it (`-` for stdin).
    pub proof: std::path::PathBuf,
    /// The checkpoint signer's public key the auditor trusts (base64, as `keys generate`
    /// printed it).
    #[arg(long, env = "CHECKPOINT_PUBLIC_KEY", hide_env_values = true)]
    pub public_key: String,
}

/// Exit 0 when the proof holds, 1 when it does not; 2 (an error) when it cannot be read.
pub fn run(args: VerifyProofArgs) -> anyhow::Result<ExitCode> {
    let trusted = keys::public_key(&args.public_key).map_err(anyhow::Error::msg)?;
    let text = if args.proof.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the proof from stdin")?
    } else {
        std::fs::read_to_string(&args.proof)
            .with_context(|| format!("reading {}", args.proof.display()))?
    };
    let proof: HeadProof = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a head proof", args.proof.display()))?;
    match proof.check(&trusted) {
        Ok(()) => {
            println!(
                "proof holds: {} was at sequence {} (link {}) in checkpoint {} (root {})",
                proof.head.account,
                proof.head.sequence,
                proof.head.link,
                proof.checkpoint.n,
                proof.checkpoint.root
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(reason) => {
            println!("proof refused: {reason}");
            Ok(ExitCode::from(1))
        }
    }
}
