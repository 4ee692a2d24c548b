//! The checks of `verify` over the signed checkpoints of the journal (`ledger::seals`,
//! docs/verification.md):
//!
//! - `checkpoint_seal`: each checkpoint's stored heads hash to its `heads_root`, its text hashes
//!   to its `root`, it names the root before it, and its signature is its key's over its root
//!   (its stored transaction leaves to its `transactions_root`: `sealed_windows`, which reads
//!   them);
//! - `sealed_head`: the entry at each sealed wallet head's place still carries the sealed link,
//!   so a rewrite of any entry at or before a sealed head shows even when every link after it
//!   was recomputed; system accounts' heads are recomputed by `sealed_windows`, with
//!   `sealed_transaction`.
//!
//! Plain tables and one read of entries by (account, sequence): the same code on both engines.

use super::invariants::{Check, Finding, MAX_FINDINGS_PER_CHECK};
use crate::hex::encode as hex;
use crate::ledger::seals::{self, Sealed};
use sqlx::PgConnection;
use std::collections::BTreeMap;

pub async fn check(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let stored = seals::stored_heads(&mut *conn).await?;
    let checkpoints = seals::checkpoints(&mut *conn).await?;
    let mut findings = Vec::new();
    let mut previous: Option<Vec<u8>> = None;
    // Each checkpoint's heads: the rows stored up to it, rolled forward once; a BTreeMap of
    // account ids iterates in the tree's order (byte by byte).
    let mut heads_now: BTreeMap<&str, seals::Head> = BTreeMap::new();
    let mut rows = stored.iter().peekable();
    for sealed in &checkpoints {
        while let Some((_, head)) = rows.next_if(|(n, _)| *n <= sealed.checkpoint.n) {
            heads_now.insert(&head.account, head.clone());
        }
        let heads: Vec<seals::Head> = heads_now.values().cloned().collect();
        let problem = seal_problem(sealed, &heads, previous.as_deref());
        if let Some(detail) = problem {
            findings.push(finding(Check::CheckpointSeal, None, None, detail));
        }
        previous = Some(sealed.root.clone());
    }
    findings.truncate(MAX_FINDINGS_PER_CHECK as usize);
    let limit = MAX_FINDINGS_PER_CHECK as usize;
    let (system, wallets) = seals::split_system_heads(&mut *conn, stored).await?;
    let mut windows = super::sealed_windows::check(&mut *conn, &checkpoints, &system).await?;
    for unsealed in seals::sealed_heads_out_of_their_chain(conn, &wallets, limit).await? {
        let head = &unsealed.head;
        let detail = match unsealed.entry {
            None => format!(
                "checkpoint {} sealed sequence {}, which is gone",
                unsealed.checkpoint, head.sequence
            ),
            Some(_) => format!(
                "checkpoint {} sealed sequence {} with link {}, which is not the entry's now",
                unsealed.checkpoint,
                head.sequence,
                head.link.hex()
            ),
        };
        let entry = unsealed.entry.map(|(id, _)| id);
        let account = Some(head.account.clone());
        findings.push(finding(Check::SealedHead, account, entry, detail));
    }
    findings.append(&mut windows);
    Ok(findings)
}

pub(super) fn finding(
    check: Check,
    account: Option<String>,
    entry: Option<i64>,
    detail: String,
) -> Finding {
    Finding {
        check,
        account,
        entry,
        transaction: None,
        detail,
    }
}

/// What is wrong with a stored checkpoint, given the heads stored up to it and the root of the
/// one before it; `None` when it holds.
fn seal_problem(
    sealed: &Sealed,
    heads: &[seals::Head],
    previous_root: Option<&[u8]>,
) -> Option<String> {
    let c = &sealed.checkpoint;
    let n = c.n;
    if heads.len() as i64 != c.head_count || seals::heads_root(heads) != c.heads_root {
        return Some(format!(
            "checkpoint {n}: its {} stored heads do not hash to its heads_root {}",
            heads.len(),
            hex(&c.heads_root)
        ));
    }
    if c.previous_root.as_ref().map(|r| r.as_slice()) != previous_root {
        return Some(format!(
            "checkpoint {n}: it does not name the root of the checkpoint before it"
        ));
    }
    if c.root().as_slice() != sealed.root.as_slice() {
        return Some(format!(
            "checkpoint {n}: its fields do not hash to its root"
        ));
    }
    if !sealed.signature_holds() {
        return Some(format!(
            "checkpoint {n}: the signature is not its public key's over its root"
        ));
    }
    None
}
