//! The proof that a transaction, its entries and its metadata's digest are sealed in a
//! checkpoint (`GET /v1/transactions/{id}/proof`), which `wallet-ledger verify-proof` checks
//! with no database: each entry's digest from its fields, the transaction's leaf from them and
//! the metadata digest, the audit path to `transactions_root`, the fields to the root, and the
//! auditor's public key the signature.

use super::merkle::{self, Hash};
use super::proof::{CheckpointView, hash32};
use super::transactions::{SealedEntry, SealedTransaction};
use super::window::StoredMetadata;
use super::{Sealed, metadata};
use crate::hex::encode as hex;
use crate::ledger::events::decimal;
use chrono::{DateTime, Utc};
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// One entry of the transaction as sealed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SealedEntryView {
    pub id: i64,
    pub account: String,
    pub currency: String,
    /// Minor units, signed: negative debits the account. What is hashed.
    pub amount: i64,
    /// The amount in the currency's units, for reading (not hashed).
    pub amount_decimal: String,
    /// A wallet entry's place in its chain and the balance after it; `null` on a system
    /// account.
    pub sequence: Option<i64>,
    pub balance_after: Option<i64>,
    pub balance_after_decimal: Option<String>,
    pub ledger_time: DateTime<Utc>,
    /// The backdated date, `null` when the entry is not backdated.
    pub effective_at: Option<DateTime<Utc>>,
    /// SHA-256 of the entry's text (docs/verification.md), lowercase hex.
    pub digest: String,
}

/// The transaction's metadata as sealed: its digest, and what it was taken from while the
/// metadata is not erased.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SealedMetadataView {
    /// SHA-256(salt ‖ text), lowercase hex: what the leaf holds.
    pub digest: String,
    /// The metadata exactly as hashed (PostgreSQL's rendering of the JSON); `null` once erased.
    pub text: Option<String>,
    /// Its 16 random bytes in hex; `null` once erased, or for a transaction written before
    /// salts existed.
    pub salt: Option<String>,
    /// The metadata was erased: the digest is the one kept from before.
    pub erased: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SealedTransactionView {
    pub id: Uuid,
    pub metadata: SealedMetadataView,
    /// Its entries, by id.
    pub entries: Vec<SealedEntryView>,
}

/// That `transaction` is leaf `leaf_index` of `checkpoint`'s transactions tree.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TransactionProof {
    pub checkpoint: CheckpointView,
    pub transaction: SealedTransactionView,
    /// Its place among the checkpoint's transactions, ordered by id's bytes.
    pub leaf_index: u64,
    /// The RFC 6962 audit path from its leaf up to `transactions_root`, lowercase hex.
    pub path: Vec<String>,
}

impl TransactionProof {
    /// The proof of `transaction` (as stored now), leaf `index` of `leaves`, in `sealed`.
    pub fn of(
        sealed: &Sealed,
        leaves: &[Hash],
        index: usize,
        transaction: &SealedTransaction,
        stored: &StoredMetadata,
    ) -> TransactionProof {
        let erased = stored.erased_digest.is_some();
        TransactionProof {
            checkpoint: CheckpointView::from(sealed),
            transaction: SealedTransactionView {
                id: transaction.id,
                metadata: SealedMetadataView {
                    digest: hex(&transaction.metadata_digest),
                    text: (!erased).then(|| stored.text.clone()),
                    salt: stored.salt.as_deref().filter(|_| !erased).map(hex),
                    erased,
                },
                entries: transaction.entries.iter().map(entry_view).collect(),
            },
            leaf_index: index as u64,
            path: merkle::path(index, leaves).iter().map(|h| hex(h)).collect(),
        }
    }

    /// Whether the proof holds under `trusted`, the key the auditor accepts: the reason when
    /// it does not.
    pub fn check(&self, trusted: &VerifyingKey) -> Result<(), String> {
        let c = &self.checkpoint;
        let transaction = self.sealed_transaction()?;
        let path = self
            .path
            .iter()
            .map(|h| hash32(h, "path"))
            .collect::<Result<Vec<_>, _>>()?;
        let count = c
            .transaction_count
            .ok_or("the checkpoint seals no transactions (version 1)")?;
        let size = u64::try_from(count).map_err(|_| "transaction_count is negative")?;
        let root = merkle::root_from_path(transaction.leaf(), self.leaf_index, size, &path)
            .ok_or("the path does not fit a tree of transaction_count leaves")?;
        if Some(hex(&root)) != c.transactions_root {
            return Err(
                "the transaction and its path do not lead to the checkpoint's transactions_root"
                    .into(),
            );
        }
        c.holds(hash32(&c.heads_root, "heads_root")?, Some(root), trusted)
    }

    /// The transaction as the leaf hashes it, once each entry's and the metadata's digest is
    /// checked against the fields they are given with.
    fn sealed_transaction(&self) -> Result<SealedTransaction, String> {
        let t = &self.transaction;
        let entries = t
            .entries
            .iter()
            .map(|e| sealed_entry(t.id, e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SealedTransaction {
            id: t.id,
            metadata_digest: metadata_digest(&t.metadata)?,
            entries,
        })
    }
}

fn entry_view(e: &SealedEntry) -> SealedEntryView {
    SealedEntryView {
        id: e.id,
        account: e.account.clone(),
        currency: e.currency.clone(),
        amount: e.amount,
        amount_decimal: decimal(&e.currency, e.amount),
        sequence: e.sequence,
        balance_after: e.balance_after,
        balance_after_decimal: e.balance_after.map(|b| decimal(&e.currency, b)),
        ledger_time: e.ledger_time,
        effective_at: e.effective_at,
        digest: hex(&e.digest()),
    }
}

fn sealed_entry(transaction: Uuid, e: &SealedEntryView) -> Result<SealedEntry, String> {
    let entry = SealedEntry {
        id: e.id,
        transaction,
        account: e.account.clone(),
        currency: e.currency.clone(),
        amount: e.amount,
        sequence: e.sequence,
        balance_after: e.balance_after,
        ledger_time: e.ledger_time,
        effective_at: e.effective_at,
    };
    if hex(&entry.digest()) != e.digest {
        return Err(format!("entry {}'s fields do not hash to its digest", e.id));
    }
    Ok(entry)
}

/// The metadata digest: recomputed from the text and salt while they are given, else (erased)
/// the one kept.
fn metadata_digest(m: &SealedMetadataView) -> Result<Hash, String> {
    let digest = hash32(&m.digest, "metadata.digest")?;
    if m.erased {
        return Ok(digest);
    }
    let text = m.text.as_deref().ok_or("metadata.text is missing")?;
    let salt = match m.salt.as_deref() {
        Some(s) => Some(
            crate::hex::decode(s)
                .filter(|b| b.len() == 16)
                .ok_or("metadata.salt is not 16 bytes of hex")?,
        ),
        None => None,
    };
    if metadata::digest(salt.as_deref(), text) != digest {
        return Err("the metadata and its salt do not hash to its digest".into());
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::super::{Checkpoint, TransactionsSeal, keys, merkle};
    use super::*;
    use ed25519_dalek::Signer;

    fn transaction(i: u128) -> (SealedTransaction, StoredMetadata) {
        let id = Uuid::from_u128(i);
        let stored = StoredMetadata {
            id,
            salt: Some(vec![i as u8; 16]),
            text: format!(r#"{{"order": {i}}}"#),
            erased_digest: None,
        };
        let entry = |n: i64, account: &str, amount: i64| SealedEntry {
            id: i as i64 * 10 + n,
            transaction: id,
            account: account.into(),
            currency: "SAR".into(),
            amount,
            sequence: None,
            balance_after: None,
            ledger_time: DateTime::from_timestamp_micros(1_765_000_000_000_001).unwrap(),
            effective_at: None,
        };
        let sealed = SealedTransaction {
            id,
            metadata_digest: stored.digest(),
            entries: vec![entry(1, "a", -5), entry(2, "b", 5)],
        };
        (sealed, stored)
    }

    fn sealed(leaves: &[Hash], key: &ed25519_dalek::SigningKey) -> Sealed {
        let checkpoint = Checkpoint {
            n: 3,
            sealed_at: DateTime::from_timestamp_micros(1_765_000_000_123_456).unwrap(),
            previous_root: Some([9; 32]),
            head_count: 0,
            heads_root: merkle::root(&[]),
            transactions: Some(TransactionsSeal {
                count: leaves.len() as i64,
                root: merkle::root(leaves),
            }),
        };
        let root = checkpoint.root();
        Sealed {
            checkpoint,
            horizon: Some(1),
            root: root.to_vec(),
            public_key: key.verifying_key().to_bytes().to_vec(),
            signature: key.sign(&root).to_bytes().to_vec(),
        }
    }

    #[test]
    fn a_proof_holds_through_json_erased_or_not_and_fails_when_it_is_bent() {
        let key = keys::generate();
        let trusted = key.verifying_key();
        let mut all: Vec<_> = (1..=5).map(transaction).collect();
        // Erased after sealing: the kept digest is the one sealed.
        let (_, erased) = &mut all[3];
        erased.erased_digest = Some(erased.digest().to_vec());
        erased.text = "{}".into();
        erased.salt = None;
        let leaves: Vec<Hash> = all.iter().map(|(t, _)| t.leaf()).collect();
        let sealed = sealed(&leaves, &key);
        for (index, (t, m)) in all.iter().enumerate() {
            let proof = TransactionProof::of(&sealed, &leaves, index, t, m);
            let json = serde_json::to_string(&proof).unwrap();
            let read: TransactionProof = serde_json::from_str(&json).unwrap();
            assert_eq!(read.check(&trusted), Ok(()), "{json}");
            assert_eq!(read.transaction.metadata.erased, index == 3);
            assert_eq!(read.transaction.metadata.text.is_none(), index == 3);
        }
        let (t, m) = &all[1];
        let proof = TransactionProof::of(&sealed, &leaves, 1, t, m);
        let mut amount = proof.clone();
        amount.transaction.entries[0].amount = -6;
        let mut text = proof.clone();
        text.transaction.metadata.text = Some(r#"{"order": 3}"#.into());
        let mut salt = proof.clone();
        salt.transaction.metadata.salt = Some("ab".into());
        let mut claimed_erased = proof.clone();
        claimed_erased.transaction.metadata.erased = true;
        claimed_erased.transaction.metadata.digest = hex(&[1; 32]);
        let mut index = proof.clone();
        index.leaf_index = 2;
        for (what, bent) in [
            ("amount", amount),
            ("text", text),
            ("salt", salt),
            ("erased", claimed_erased),
            ("index", index),
        ] {
            assert!(bent.check(&trusted).is_err(), "{what}");
        }
        let other = keys::generate().verifying_key();
        assert!(proof.check(&other).is_err(), "another key");
    }
}
