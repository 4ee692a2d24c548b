//! `wallet-ledger verify-proof proof.json --public-key K`: checks a proof offline, with no
//! database (docs/verification.md).

use crate::ledger::seals::keys;
use crate::ledger::seals::proof::HeadProof;
use crate::ledger::seals::transaction_proof::TransactionProof;
use anyhow::Context;
use clap::Args;
use ed25519_dalek::VerifyingKey;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct VerifyProofArgs {
    /// The proof, as `GET /v1/checkpoints/{n}/heads/{account}` or `GET
    /// /v1/transactions/{id}/proof` answered it (`-` for stdin).
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
    let proof = Proof::read(&text).with_context(|| {
        format!(
            "{} is not a head or transaction proof",
            args.proof.display()
        )
    })?;
    match proof.check(&trusted) {
        Ok(holds) => {
            println!("proof holds: {holds}");
            Ok(ExitCode::SUCCESS)
        }
        Err(reason) => {
            println!("proof refused: {reason}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The two proofs the API answers, told apart by what they prove.
enum Proof {
    Head(HeadProof),
    Transaction(TransactionProof),
}

impl Proof {
    fn read(text: &str) -> serde_json::Result<Proof> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        if value.get("transaction").is_some() {
            serde_json::from_value(value).map(Proof::Transaction)
        } else {
            serde_json::from_value(value).map(Proof::Head)
        }
    }

    /// What holds, in a line; or why not.
    fn check(&self, trusted: &VerifyingKey) -> Result<String, String> {
        match self {
            Proof::Head(p) => p.check(trusted).map(|()| {
                format!(
                    "{} was at sequence {} (link {}) in checkpoint {} (root {})",
                    p.head.account, p.head.sequence, p.head.link, p.checkpoint.n, p.checkpoint.root
                )
            }),
            Proof::Transaction(p) => p.check(trusted).map(|()| {
                format!(
                    "transaction {} with {} entries is sealed in checkpoint {} (root {})",
                    p.transaction.id,
                    p.transaction.entries.len(),
                    p.checkpoint.n,
                    p.checkpoint.root
                )
            }),
        }
    }
}
