//! A checkpoint as published (`GET /v1/checkpoints/{n}`), and the proof that a wallet's chain
//! head is sealed in one (`GET /v1/checkpoints/{n}/heads/{account}`), which
//! `wallet-ledger verify-proof` checks with no database: the head's leaf and its audit path
//! give the heads root, the fields the root, and the auditor's public key the signature.

use super::{Checkpoint, Head, Sealed, TransactionsSeal, keys, merkle};
use crate::hex::encode as hex;
use crate::ledger::posting::ChainHash;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A signed checkpoint: hashes in lowercase hex, the key and the signature in base64.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CheckpointView {
    pub n: i64,
    /// When it was sealed; its microseconds are part of what is hashed.
    pub sealed_at: DateTime<Utc>,
    /// The root of checkpoint n − 1; `null` for the first.
    pub previous_root: Option<String>,
    /// How many accounts' heads its tree holds (wallets', and from version 2 system
    /// accounts').
    pub head_count: i64,
    pub heads_root: String,
    /// How many transactions it seals; `null` in a version 1 checkpoint, which sealed none.
    #[serde(default)]
    pub transaction_count: Option<i64>,
    /// The Merkle root over them; `null` in a version 1 checkpoint.
    #[serde(default)]
    pub transactions_root: Option<String>,
    /// SHA-256 of the checkpoint's text (docs/verification.md), which the signature covers.
    pub root: String,
    /// The Ed25519 key that signed it (base64).
    pub public_key: String,
    /// Ed25519 over the root (base64).
    pub signature: String,
}

impl From<&Sealed> for CheckpointView {
    fn from(sealed: &Sealed) -> CheckpointView {
        let c = &sealed.checkpoint;
        CheckpointView {
            n: c.n,
            sealed_at: c.sealed_at,
            previous_root: c.previous_root.map(|r| hex(&r)),
            head_count: c.head_count,
            heads_root: hex(&c.heads_root),
            transaction_count: c.transactions.map(|t| t.count),
            transactions_root: c.transactions.map(|t| hex(&t.root)),
            root: hex(&sealed.root),
            public_key: keys::encode(&sealed.public_key),
            signature: keys::encode(&sealed.signature),
        }
    }
}

/// A wallet's chain head at a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeadView {
    pub account: String,
    /// Its last entry's sequence at the checkpoint.
    pub sequence: i64,
    /// That entry's link (`chain_hash`), lowercase hex.
    pub link: String,
}

/// That `head` is leaf `leaf_index` of `checkpoint`'s heads tree.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeadProof {
    pub checkpoint: CheckpointView,
    pub head: HeadView,
    /// The head's place among the checkpoint's heads, ordered by account id's bytes.
    pub leaf_index: u64,
    /// The RFC 6962 audit path from the head's leaf up to `heads_root`, lowercase hex.
    pub path: Vec<String>,
}

impl HeadProof {
    pub fn of(sealed: &Sealed, heads: &[Head], index: usize) -> HeadProof {
        let leaves: Vec<merkle::Hash> = heads.iter().map(Head::leaf).collect();
        let head = &heads[index];
        HeadProof {
            checkpoint: CheckpointView::from(sealed),
            head: HeadView {
                account: head.account.clone(),
                sequence: head.sequence,
                link: head.link.hex(),
            },
            leaf_index: index as u64,
            path: merkle::path(index, &leaves)
                .iter()
                .map(|h| hex(h))
                .collect(),
        }
    }

    /// Whether the proof holds under `trusted`, the key the auditor accepts: the reason when
    /// it does not.
    pub fn check(&self, trusted: &VerifyingKey) -> Result<(), String> {
        let c = &self.checkpoint;
        let head = Head {
            account: self.head.account.clone(),
            sequence: self.head.sequence,
            link: ChainHash(hash32(&self.head.link, "head.link")?),
        };
        let path = self
            .path
            .iter()
            .map(|h| hash32(h, "path"))
            .collect::<Result<Vec<_>, _>>()?;
        let size = u64::try_from(c.head_count).map_err(|_| "head_count is negative")?;
        let heads_root = merkle::root_from_path(head.leaf(), self.leaf_index, size, &path)
            .ok_or("the path does not fit a tree of head_count leaves")?;
        if hex(&heads_root) != c.heads_root {
            return Err("the head and its path do not lead to the checkpoint's heads_root".into());
        }
        c.holds(heads_root, None, trusted)
    }
}

impl CheckpointView {
    /// Whether this checkpoint, with the roots a proof recomputed (`heads_root`, and
    /// `transactions_root` when the proof is of a transaction), hashes to its root and is
    /// signed by `trusted`: the reason when not.
    pub fn holds(
        &self,
        heads_root: merkle::Hash,
        transactions_root: Option<merkle::Hash>,
        trusted: &VerifyingKey,
    ) -> Result<(), String> {
        let transactions = match (self.transaction_count, &self.transactions_root) {
            (Some(count), Some(root)) => Some(TransactionsSeal {
                count,
                root: transactions_root.unwrap_or(hash32(root, "transactions_root")?),
            }),
            (None, None) if transactions_root.is_none() => None,
            _ => return Err("transaction_count and transactions_root go together".into()),
        };
        let checkpoint = Checkpoint {
            n: self.n,
            sealed_at: self.sealed_at,
            previous_root: self
                .previous_root
                .as_deref()
                .map(|r| hash32(r, "previous_root"))
                .transpose()?,
            head_count: self.head_count,
            heads_root,
            transactions,
        };
        let root = checkpoint.root();
        if hex(&root) != self.root {
            return Err("the checkpoint's fields do not hash to its root".into());
        }
        if keys::public_key(&self.public_key).ok() != Some(*trusted) {
            return Err("the checkpoint was signed by another key than the one given".into());
        }
        let signature = keys::decode(&self.signature)
            .ok()
            .and_then(|s| Signature::from_slice(&s).ok())
            .ok_or("the signature is not 64 bytes of base64")?;
        trusted
            .verify(&root, &signature)
            .map_err(|_| "the signature is not the key's over the root".to_owned())
    }
}

/// 32 bytes from hex, or which field was not.
pub(super) fn hash32(text: &str, field: &str) -> Result<[u8; 32], String> {
    crate::hex::decode32(text).ok_or_else(|| format!("{field} is not 32 bytes of hex"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Signer;

    fn heads(n: usize) -> Vec<Head> {
        (0..n)
            .map(|i| Head {
                account: format!("w{i:02}"),
                sequence: i as i64 + 1,
                link: ChainHash([i as u8; 32]),
            })
            .collect()
    }

    fn sealed(heads: &[Head], key: &ed25519_dalek::SigningKey) -> Sealed {
        let checkpoint = Checkpoint {
            n: 4,
            sealed_at: DateTime::from_timestamp_micros(1_765_000_000_123_456).unwrap(),
            previous_root: Some([9; 32]),
            head_count: heads.len() as i64,
            heads_root: super::super::heads_root(heads),
            transactions: Some(TransactionsSeal {
                count: 3,
                root: [5; 32],
            }),
        };
        let root = checkpoint.root();
        Sealed {
            checkpoint,
            horizon: Some(900),
            root: root.to_vec(),
            public_key: key.verifying_key().to_bytes().to_vec(),
            signature: key.sign(&root).to_bytes().to_vec(),
        }
    }

    #[test]
    fn a_proof_holds_through_json_and_fails_when_anything_in_it_changes() {
        let key = keys::generate();
        let heads = heads(5);
        let sealed = sealed(&heads, &key);
        let trusted = key.verifying_key();
        for index in 0..heads.len() {
            let proof = HeadProof::of(&sealed, &heads, index);
            let json = serde_json::to_string(&proof).unwrap();
            let read: HeadProof = serde_json::from_str(&json).unwrap();
            assert_eq!(read.check(&trusted), Ok(()), "{json}");
        }
        let proof = HeadProof::of(&sealed, &heads, 2);
        let mut tampered = Vec::new();
        let mut p = proof.clone();
        p.head.sequence += 1;
        tampered.push(("head", p));
        let mut p = proof.clone();
        p.head.link = hex(&[7; 32]);
        tampered.push(("link", p));
        let mut p = proof.clone();
        p.path[0] = hex(&[0; 32]);
        tampered.push(("path", p));
        let mut p = proof.clone();
        p.checkpoint.sealed_at += chrono::TimeDelta::microseconds(1);
        tampered.push(("time", p));
        let mut p = proof.clone();
        p.leaf_index = 3;
        tampered.push(("index", p));
        for (what, p) in tampered {
            assert!(p.check(&trusted).is_err(), "{what}");
        }
        let other = keys::generate();
        assert_eq!(
            proof.check(&other.verifying_key()),
            Err("the checkpoint was signed by another key than the one given".into())
        );
        let mut resigned = proof.clone();
        resigned.checkpoint.signature = keys::encode(&other.sign(&[0; 32]).to_bytes());
        assert_eq!(
            resigned.check(&trusted),
            Err("the signature is not the key's over the root".into())
        );
    }
}
