//! What version 2 checkpoints seal beyond wallets' heads, recomputed window by window from the
//! entries as they are now (`ledger::seals::window`):
//!
//! - `checkpoint_seal`, its transaction part: the leaves a checkpoint stored hash to its
//!   `transactions_root`;
//! - `sealed_transaction`: each transaction of a checkpoint's window still hashes to the leaf
//!   the checkpoint stored, every stored leaf still has its transaction in the window, and the
//!   window holds no transaction the checkpoint did not seal;
//! - `sealed_head`, for system accounts: their chains, which only the sealer keeps, extended
//!   over each window's entries, give the heads the checkpoint stored.
//!
//! One read of each window's entries and of its stored leaves; the same code on both engines.

use super::invariants::{Check, Finding};
use super::seals::finding;
use crate::hex::encode as hex;
use crate::ledger::seals::merkle::{self, Hash};
use crate::ledger::seals::transactions::{SealedTransaction, system_heads};
use crate::ledger::seals::{Head, Sealed, window};
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The findings over every version 2 checkpoint of `checkpoints` (oldest first);
/// `stored_system` holds the stored heads of system accounts, each with its checkpoint.
pub async fn check(
    conn: &mut PgConnection,
    checkpoints: &[Sealed],
    stored_system: &[(i64, Head)],
) -> Result<Vec<Finding>, sqlx::Error> {
    let mut stored: HashMap<(i64, String), &Head> = stored_system
        .iter()
        .map(|(n, h)| ((*n, h.account.clone()), h))
        .collect();
    let mut findings = Vec::new();
    let mut heads: BTreeMap<String, Head> = BTreeMap::new();
    let mut from = 0;
    for sealed in checkpoints {
        let (n, Some(horizon)) = (sealed.checkpoint.n, sealed.horizon) else {
            continue;
        };
        let transactions = window::transactions(&mut *conn, from, horizon).await?;
        let leaves = window::leaves(&mut *conn, n).await?;
        findings.extend(leaves_root_finding(sealed, &leaves));
        findings.extend(transaction_findings(n, &transactions, &leaves));
        let entries = transactions.iter().flat_map(|t| &t.entries);
        for head in system_heads(&heads, entries) {
            let sealed_head = stored.remove(&(n, head.account.clone()));
            if sealed_head != Some(&head) {
                findings.push(system_head_finding(n, &head, sealed_head));
            }
            // The next window continues from what was sealed, so that a rewrite is named in
            // the window that holds it and not again in every later one.
            let next = sealed_head.cloned().unwrap_or(head);
            heads.insert(next.account.clone(), next);
        }
        from = horizon;
    }
    let mut unexplained: Vec<_> = stored.into_iter().collect();
    unexplained.sort_by(|a, b| a.0.cmp(&b.0));
    for ((n, account), head) in unexplained {
        let detail = format!(
            "checkpoint {n} sealed {} entries with link {}, but its window has none of them now",
            head.sequence,
            head.link.hex()
        );
        findings.push(finding(Check::SealedHead, Some(account), None, detail));
    }
    Ok(findings)
}

/// A `checkpoint_seal` finding when the leaves `sealed` stored do not hash to its
/// `transactions_root`.
fn leaves_root_finding(sealed: &Sealed, leaves: &[(Uuid, Hash)]) -> Option<Finding> {
    let t = sealed.checkpoint.transactions?;
    let hashes: Vec<Hash> = leaves.iter().map(|(_, leaf)| *leaf).collect();
    (hashes.len() as i64 != t.count || merkle::root(&hashes) != t.root).then(|| {
        let detail = format!(
            "checkpoint {}: its {} stored transaction leaves do not hash to its transactions_root {}",
            sealed.checkpoint.n,
            hashes.len(),
            hex(&t.root)
        );
        finding(Check::CheckpointSeal, None, None, detail)
    })
}

/// How checkpoint `n`'s window, as recomputed, differs from the leaves it stored: a
/// transaction that hashes otherwise, one sealed that is gone from the window, and one in the
/// window that was not sealed.
pub fn transaction_findings(
    n: i64,
    window: &[SealedTransaction],
    stored: &[(Uuid, Hash)],
) -> Vec<Finding> {
    let now: HashMap<Uuid, Hash> = window.iter().map(|t| (t.id, t.leaf())).collect();
    let sealed: HashMap<Uuid, Hash> = stored.iter().copied().collect();
    let mut findings = Vec::new();
    for (id, leaf) in stored {
        let detail = match now.get(id) {
            Some(now) if now == leaf => continue,
            Some(_) => format!(
                "checkpoint {n} sealed leaf {}; its entries or metadata hash otherwise now",
                hex(leaf)
            ),
            None => format!("checkpoint {n} sealed it; its entries are gone from the window"),
        };
        findings.push(transaction_finding(*id, detail));
    }
    for t in window.iter().filter(|t| !sealed.contains_key(&t.id)) {
        let detail = format!("its entries are in checkpoint {n}'s window, which did not seal it");
        findings.push(transaction_finding(t.id, detail));
    }
    findings
}

fn transaction_finding(id: Uuid, detail: String) -> Finding {
    Finding {
        transaction: Some(id),
        ..finding(Check::SealedTransaction, None, None, detail)
    }
}

fn system_head_finding(n: i64, now: &Head, sealed: Option<&Head>) -> Finding {
    let detail = match sealed {
        Some(s) => format!(
            "checkpoint {n} sealed {} entries with link {}; they chain to {} entries with link {} now",
            s.sequence,
            s.link.hex(),
            now.sequence,
            now.link.hex()
        ),
        None => format!(
            "checkpoint {n}'s window has {} of its entries now, which it did not seal",
            now.sequence
        ),
    };
    finding(Check::SealedHead, Some(now.account.clone()), None, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transaction(id: u128, digest: u8) -> SealedTransaction {
        SealedTransaction {
            id: Uuid::from_u128(id),
            metadata_digest: [digest; 32],
            entries: Vec::new(),
        }
    }

    #[test]
    fn a_changed_a_gone_and_an_unsealed_transaction_are_each_named() {
        let sealed = [transaction(1, 0), transaction(2, 0), transaction(3, 0)];
        let stored: Vec<(Uuid, Hash)> = sealed.iter().map(|t| (t.id, t.leaf())).collect();
        assert!(transaction_findings(4, &sealed, &stored).is_empty());
        let now = [transaction(1, 0), transaction(2, 9), transaction(5, 0)];
        let findings = transaction_findings(4, &now, &stored);
        let named: Vec<(u128, &str)> = findings
            .iter()
            .map(|f| {
                let kind = f.detail.split(';').next_back().unwrap_or_default();
                (f.transaction.unwrap().as_u128(), kind.trim())
            })
            .collect();
        assert_eq!(
            named,
            [
                (2, "its entries or metadata hash otherwise now"),
                (3, "its entries are gone from the window"),
                (
                    5,
                    "its entries are in checkpoint 4's window, which did not seal it"
                ),
            ]
        );
    }
}
