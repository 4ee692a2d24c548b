//! What a checkpoint seals besides the wallets' heads: every transaction of its window (the
//! entries written between the previous checkpoint's horizon and its own), as a Merkle tree
//! of one leaf per transaction, and the chains of system accounts, which the write path does
//! not keep (their writers never wait on each other) and the sealer extends over the window's
//! entries. Pure functions: the sealer, `verify` and `verify-proof` hash with the same ones.

use super::Head;
use super::merkle::{self, Hash};
use crate::hex::encode as hex;
use crate::ledger::posting::{ChainHash, EntryText};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// An entry as a checkpoint seals it: what it says, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEntry {
    pub id: i64,
    pub transaction: Uuid,
    pub account: String,
    pub currency: String,
    pub amount: i64,
    /// A wallet entry's place and balance after; none on a system account.
    pub sequence: Option<i64>,
    pub balance_after: Option<i64>,
    pub ledger_time: DateTime<Utc>,
    pub effective_at: Option<DateTime<Utc>>,
}

impl SealedEntry {
    fn text(&self) -> EntryText<'_> {
        EntryText {
            transaction: self.transaction,
            account: &self.account,
            currency: &self.currency,
            amount: self.amount,
            sequence: self.sequence,
            balance_after: self.balance_after,
            ledger_time: self.ledger_time,
            effective_at: self.effective_at,
        }
    }

    /// SHA-256 of the entry's text (the text a wallet entry's link is over).
    pub fn digest(&self) -> Hash {
        Sha256::digest(self.text().text().as_bytes()).into()
    }

    fn is_system(&self) -> bool {
        self.sequence.is_none()
    }
}

/// A transaction as a checkpoint seals it: its id, its metadata's digest
/// (`seals::metadata`), and its entries, by entry id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedTransaction {
    pub id: Uuid,
    pub metadata_digest: Hash,
    pub entries: Vec<SealedEntry>,
}

impl SealedTransaction {
    /// `SHA-256(0x00 ‖ text)` of the lines `wallet-ledger/transaction/v1`, the id, the
    /// metadata digest, the number of entries, and each entry's digest, by entry id (hashes
    /// in lowercase hex).
    pub fn leaf(&self) -> Hash {
        let mut lines = vec![
            "wallet-ledger/transaction/v1".to_owned(),
            self.id.to_string(),
            hex(&self.metadata_digest),
            self.entries.len().to_string(),
        ];
        lines.extend(self.entries.iter().map(|e| hex(&e.digest())));
        merkle::leaf_hash(lines.join("\n").as_bytes())
    }
}

/// The window's transactions in tree order (by id's bytes), each with its entries by id.
/// `None` names a transaction whose metadata digest is missing (no row for it).
pub fn in_tree_order(
    mut entries: Vec<SealedEntry>,
    metadata: &HashMap<Uuid, Hash>,
) -> Result<Vec<SealedTransaction>, Uuid> {
    entries.sort_by_key(|e| (e.transaction, e.id));
    let mut transactions: Vec<SealedTransaction> = Vec::new();
    for entry in entries {
        match transactions.last_mut() {
            Some(t) if t.id == entry.transaction => t.entries.push(entry),
            _ => {
                let id = entry.transaction;
                let metadata_digest = *metadata.get(&id).ok_or(id)?;
                transactions.push(SealedTransaction {
                    id,
                    metadata_digest,
                    entries: vec![entry],
                });
            }
        }
    }
    Ok(transactions)
}

/// The root over `transactions`, which must be in tree order.
pub fn transactions_root(transactions: &[SealedTransaction]) -> Hash {
    let leaves: Vec<Hash> = transactions.iter().map(SealedTransaction::leaf).collect();
    merkle::root(&leaves)
}

/// Each system account's head after the window's `entries`: its head at the previous
/// checkpoint (`previous`, none before its first) followed by its entries of the window by id,
/// each link `SHA-256(previous link ‖ entry text)` and the sequence the count of its entries
/// sealed so far. Only the accounts the window moved, by account id.
pub fn system_heads<'a>(
    previous: &BTreeMap<String, Head>,
    entries: impl IntoIterator<Item = &'a SealedEntry>,
) -> Vec<Head> {
    let mut system: Vec<&SealedEntry> = entries.into_iter().filter(|e| e.is_system()).collect();
    system.sort_by(|a, b| (a.account.as_bytes(), a.id).cmp(&(b.account.as_bytes(), b.id)));
    let mut moved: Vec<Head> = Vec::new();
    for entry in system {
        if moved.last().is_none_or(|h| h.account != entry.account) {
            moved.push(previous.get(&entry.account).cloned().unwrap_or(Head {
                account: entry.account.clone(),
                sequence: 0,
                link: ChainHash::default(),
            }));
        }
        let head = moved.last_mut().expect("pushed above");
        head.sequence += 1;
        head.link = ChainHash::following(head.link, &entry.text());
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, transaction: u128, account: &str, amount: i64) -> SealedEntry {
        let wallet = account.starts_with('w');
        SealedEntry {
            id,
            transaction: Uuid::from_u128(transaction),
            account: account.into(),
            currency: "SAR".into(),
            amount,
            sequence: wallet.then_some(id),
            balance_after: wallet.then_some(amount),
            ledger_time: DateTime::from_timestamp_micros(1_765_000_000_000_000 + id).unwrap(),
            effective_at: None,
        }
    }

    #[test]
    fn transactions_group_their_entries_and_take_their_metadata() {
        let entries = vec![
            entry(3, 2, "w1", 5),
            entry(1, 1, "w1", 10),
            entry(4, 2, "clearing:x:SAR", -5),
            entry(2, 1, "clearing:x:SAR", -10),
        ];
        let metadata =
            HashMap::from([(Uuid::from_u128(1), [1; 32]), (Uuid::from_u128(2), [2; 32])]);
        let transactions = in_tree_order(entries.clone(), &metadata).unwrap();
        let ids: Vec<Vec<i64>> = transactions
            .iter()
            .map(|t| t.entries.iter().map(|e| e.id).collect())
            .collect();
        assert_eq!(ids, [[1, 2], [3, 4]]);
        assert_eq!(transactions[1].metadata_digest, [2; 32]);
        let without = HashMap::from([(Uuid::from_u128(1), [1; 32])]);
        assert_eq!(in_tree_order(entries, &without), Err(Uuid::from_u128(2)));
    }

    #[test]
    fn a_leaf_changes_with_any_entry_or_the_metadata() {
        let t = SealedTransaction {
            id: Uuid::from_u128(7),
            metadata_digest: [0; 32],
            entries: vec![entry(1, 7, "w1", 10), entry(2, 7, "s", -10)],
        };
        let leaf = t.leaf();
        let mut amount = t.clone();
        amount.entries[0].amount = 11;
        let mut metadata = t.clone();
        metadata.metadata_digest = [1; 32];
        let mut fewer = t.clone();
        fewer.entries.pop();
        for other in [amount, metadata, fewer] {
            assert_ne!(other.leaf(), leaf);
        }
    }

    #[test]
    fn system_heads_continue_from_the_last_seal_in_entry_order() {
        let window = [
            entry(5, 1, "s", -1),
            entry(2, 1, "s", -2),
            entry(3, 1, "w1", 3),
        ];
        let fresh = system_heads(&BTreeMap::new(), &window);
        assert_eq!(fresh.len(), 1, "wallets keep their own chains");
        let s = &fresh[0];
        assert_eq!((s.account.as_str(), s.sequence), ("s", 2));
        let first = ChainHash::following(ChainHash::default(), &window[1].text());
        assert_eq!(s.link, ChainHash::following(first, &window[0].text()));
        let previous = BTreeMap::from([("s".to_owned(), s.clone())]);
        let next = system_heads(&previous, &[entry(9, 2, "s", 4)]);
        assert_eq!(next[0].sequence, 3);
        assert_eq!(
            next[0].link,
            ChainHash::following(s.link, &entry(9, 2, "s", 4).text())
        );
    }
}
