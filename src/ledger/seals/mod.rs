//! Signed checkpoints of the journal (docs/verification.md, issue 40): `wallet-ledger seal`
//! commits checkpoint n, a Merkle root over every account's chain head (wallets' as the write
//! path keeps them, system accounts' as the sealer extends them), a Merkle root over the
//! transactions written since checkpoint n − 1, and checkpoint n − 1's root, signed with an
//! Ed25519 key. A chain's links can be recomputed by whoever rewrites the entries; a signed
//! head or leaf cannot, so a rewrite of anything sealed shows.
//!
//! What is hashed is written out once here ([`Head::leaf`], [`Checkpoint::text`]) and in
//! [`transactions`], and checked by `verify` (`reconcile::seals`) with the same functions.

pub mod keys;
pub mod merkle;
pub mod metadata;
pub mod proof;
mod store;
pub mod transaction_proof;
pub mod transactions;
pub mod window;

use crate::hex::encode as hex;
use crate::ledger::posting::ChainHash;
use crate::ledger::store::Db;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use merkle::Hash;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use transactions::SealedTransaction;

pub use store::{
    checkpoints, heads_at, one, page, sealed_heads_out_of_their_chain, split_system_heads,
    stored_heads,
};

/// The proof that `account`'s chain head is sealed in checkpoint `n`; `None` when there is no
/// such checkpoint or it holds no head of that wallet.
pub async fn head_proof(
    conn: &mut sqlx::PgConnection,
    n: i64,
    account: &str,
) -> Result<Option<proof::HeadProof>, sqlx::Error> {
    let Some(sealed) = one(&mut *conn, n).await? else {
        return Ok(None);
    };
    let heads = heads_at(conn, n).await?;
    let index = heads.iter().position(|h| h.account == account);
    Ok(index.map(|i| proof::HeadProof::of(&sealed, &heads, i)))
}

/// The proof that transaction `id` is sealed, with its entries and metadata as stored now;
/// `None` when no checkpoint sealed it (unknown, or written after the last checkpoint's
/// horizon, or with no entries: a refusal or a hold still pending).
pub async fn transaction_proof(
    conn: &mut sqlx::PgConnection,
    id: uuid::Uuid,
) -> Result<Option<transaction_proof::TransactionProof>, sqlx::Error> {
    let Some((n, index)) = window::place(&mut *conn, id).await? else {
        return Ok(None);
    };
    let (Some(sealed), Some((transaction, metadata))) = (
        one(&mut *conn, n).await?,
        window::transaction(&mut *conn, id).await?,
    ) else {
        return Ok(None);
    };
    let leaves: Vec<Hash> = window::leaves(conn, n)
        .await?
        .into_iter()
        .map(|(_, leaf)| leaf)
        .collect();
    let index = usize::try_from(index)
        .unwrap_or(usize::MAX)
        .min(leaves.len().saturating_sub(1));
    Ok(Some(transaction_proof::TransactionProof::of(
        &sealed,
        &leaves,
        index,
        &transaction,
        &metadata,
    )))
}

/// A wallet's chain head as a checkpoint seals it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub account: String,
    pub sequence: i64,
    pub link: ChainHash,
}

impl Head {
    /// The head's leaf: `SHA-256(0x00 ‖ text)` of the lines `wallet-ledger/head/v1`, the
    /// account, the sequence and the link in lowercase hex.
    pub fn leaf(&self) -> Hash {
        let text = format!(
            "wallet-ledger/head/v1\n{}\n{}\n{}",
            self.account,
            self.sequence,
            self.link.hex()
        );
        merkle::leaf_hash(text.as_bytes())
    }
}

/// The Merkle root over `heads`, which must be in tree order: by account id, byte by byte (as
/// the store reads them).
pub fn heads_root(heads: &[Head]) -> Hash {
    let leaves: Vec<Hash> = heads.iter().map(Head::leaf).collect();
    merkle::root(&leaves)
}

/// What a checkpoint commits to; its root is the SHA-256 of [`Checkpoint::text`], and the
/// signature is over the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub n: i64,
    pub sealed_at: DateTime<Utc>,
    pub previous_root: Option<Hash>,
    pub head_count: i64,
    pub heads_root: Hash,
    /// The transactions of its window; none in a version 1 checkpoint, sealed before
    /// checkpoints held transactions.
    pub transactions: Option<TransactionsSeal>,
}

/// The transactions a checkpoint seals: how many, and their Merkle root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionsSeal {
    pub count: i64,
    pub root: Hash,
}

impl Checkpoint {
    /// The lines `wallet-ledger/checkpoint/v2`, n, the sealing time (microseconds since 1970
    /// UTC), the previous root (hex, `-` for the first), the number of heads and their root,
    /// the number of transactions and their root. A version 1 checkpoint's text has the v1 tag
    /// and stops after the heads root.
    pub fn text(&self) -> String {
        let v1 = format!(
            "{}\n{}\n{}\n{}\n{}",
            self.n,
            self.sealed_at.timestamp_micros(),
            self.previous_root
                .map_or_else(|| "-".to_owned(), |r| hex(&r)),
            self.head_count,
            hex(&self.heads_root)
        );
        match &self.transactions {
            None => format!("wallet-ledger/checkpoint/v1\n{v1}"),
            Some(t) => format!(
                "wallet-ledger/checkpoint/v2\n{v1}\n{}\n{}",
                t.count,
                hex(&t.root)
            ),
        }
    }

    pub fn root(&self) -> Hash {
        Sha256::digest(self.text().as_bytes()).into()
    }
}

/// A checkpoint as stored: what it commits to, its root, and who signed it.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub checkpoint: Checkpoint,
    /// The end of its transaction window (an xid: every transaction below it had finished);
    /// stored beside the checkpoint, not signed. None in a version 1 checkpoint.
    pub horizon: Option<i64>,
    pub root: Vec<u8>,
    pub public_key: Vec<u8>,
    pub signature: Vec<u8>,
}

impl Sealed {
    /// Whether the signature is a valid Ed25519 signature of the stored root by the stored
    /// public key.
    pub fn signature_holds(&self) -> bool {
        let (Ok(key), Ok(signature)) = (
            <[u8; 32]>::try_from(self.public_key.as_slice()),
            Signature::from_slice(&self.signature),
        ) else {
            return false;
        };
        VerifyingKey::from_bytes(&key).is_ok_and(|key| key.verify(&self.root, &signature).is_ok())
    }
}

/// What [`seal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sealing {
    /// Checkpoint `n` committed, sealing `changed` heads the previous one had not, and
    /// `transactions` transactions.
    Sealed {
        n: i64,
        changed: usize,
        heads: usize,
        transactions: usize,
    },
    /// No chain moved and no transaction was written since the last checkpoint.
    Unchanged,
    /// On Citus, a transaction prepared on a worker before the horizon is still prepared
    /// (Citus's recovery finishes it): no checkpoint this time.
    Postponed,
}

/// Commits the next checkpoint, signed with `key`: every account's chain head as of now and
/// the transactions whose entries were written since the last checkpoint's horizon, unless
/// there is nothing new. One sealer at a time (a transaction-scoped advisory lock): a second
/// waits and then finds nothing new, or seals what moved meanwhile.
pub async fn seal(db: &mut Db<'_>, key: &SigningKey) -> Result<Sealing, sqlx::Error> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let mut db = Db::new(&mut tx, engine);
    store::lock_sealing(db.conn()).await?;
    let Some(horizon) = crate::ledger::store::checkpoints::horizon(&mut db).await? else {
        return Ok(Sealing::Postponed);
    };
    let previous = store::latest(db.conn()).await?;
    let sealed = match &previous {
        Some(p) => heads_at(db.conn(), p.checkpoint.n).await?,
        None => Vec::new(),
    };
    let from = previous.as_ref().and_then(|p| p.horizon).unwrap_or(0);
    let horizon = horizon.max(from);
    let transactions = window::transactions(db.conn(), from, horizon).await?;
    let wallets = store::current_heads(&mut db).await?;
    let heads = all_heads(&sealed, wallets, &transactions);
    if previous.is_some() && heads == sealed && transactions.is_empty() {
        return Ok(Sealing::Unchanged);
    }
    let checkpoint = Checkpoint {
        n: previous.as_ref().map_or(1, |p| p.checkpoint.n + 1),
        sealed_at: store::now_micros(db.conn()).await?,
        previous_root: previous
            .as_ref()
            .and_then(|p| <Hash>::try_from(p.root.as_slice()).ok()),
        head_count: heads.len() as i64,
        heads_root: heads_root(&heads),
        transactions: Some(TransactionsSeal {
            count: transactions.len() as i64,
            root: transactions::transactions_root(&transactions),
        }),
    };
    let stored = signed(checkpoint, horizon, key);
    let changed = changed_heads(&sealed, &heads);
    store::insert(db.conn(), &stored, &changed).await?;
    window::insert_leaves(db.conn(), stored.checkpoint.n, &transactions).await?;
    store::publish(db.conn(), &stored).await?;
    tx.commit().await?;
    Ok(Sealing::Sealed {
        n: stored.checkpoint.n,
        changed: changed.len(),
        heads: heads.len(),
        transactions: transactions.len(),
    })
}

fn signed(checkpoint: Checkpoint, horizon: i64, key: &SigningKey) -> Sealed {
    let root = checkpoint.root();
    Sealed {
        checkpoint,
        horizon: Some(horizon),
        root: root.to_vec(),
        public_key: key.verifying_key().to_bytes().to_vec(),
        signature: key.sign(&root).to_bytes().to_vec(),
    }
}

/// Every account's head at the new checkpoint, in tree order: the heads sealed before, the
/// wallets' heads now, and the system accounts' extended over the window's entries.
fn all_heads(sealed: &[Head], wallets: Vec<Head>, window: &[SealedTransaction]) -> Vec<Head> {
    let mut heads: BTreeMap<String, Head> = sealed
        .iter()
        .map(|h| (h.account.clone(), h.clone()))
        .collect();
    let entries = window.iter().flat_map(|t| &t.entries);
    for head in transactions::system_heads(&heads, entries) {
        heads.insert(head.account.clone(), head);
    }
    for head in wallets {
        heads.insert(head.account.clone(), head);
    }
    heads.into_values().collect()
}

/// The heads of `now` that `before` (both sorted by account) does not hold as they are.
fn changed_heads<'a>(before: &[Head], now: &'a [Head]) -> Vec<&'a Head> {
    let before: std::collections::HashMap<&str, &Head> =
        before.iter().map(|h| (h.account.as_str(), h)).collect();
    now.iter()
        .filter(|h| before.get(h.account.as_str()) != Some(h))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(account: &str, sequence: i64, byte: u8) -> Head {
        Head {
            account: account.into(),
            sequence,
            link: ChainHash([byte; 32]),
        }
    }

    #[test]
    fn only_new_and_moved_heads_are_stored_again() {
        let before = [head("a", 3, 1), head("b", 1, 2)];
        let now = [head("a", 3, 1), head("b", 2, 3), head("c", 1, 4)];
        let changed: Vec<&str> = changed_heads(&before, &now)
            .iter()
            .map(|h| h.account.as_str())
            .collect();
        assert_eq!(changed, ["b", "c"]);
    }

    #[test]
    fn a_signature_holds_for_its_root_and_key_only() {
        let key = keys::generate();
        let checkpoint = Checkpoint {
            n: 2,
            sealed_at: Utc::now(),
            previous_root: Some([7; 32]),
            head_count: 2,
            heads_root: heads_root(&[head("a", 1, 1), head("b", 1, 2)]),
            transactions: None,
        };
        let root = checkpoint.root();
        let sealed = Sealed {
            checkpoint: checkpoint.clone(),
            horizon: None,
            root: root.to_vec(),
            public_key: key.verifying_key().to_bytes().to_vec(),
            signature: key.sign(&root).to_bytes().to_vec(),
        };
        assert!(sealed.signature_holds());
        let other = Checkpoint {
            head_count: 3,
            ..checkpoint
        };
        let forged = Sealed {
            root: other.root().to_vec(),
            ..sealed.clone()
        };
        assert!(!forged.signature_holds(), "a root the key did not sign");
        let resigned = Sealed {
            public_key: keys::generate().verifying_key().to_bytes().to_vec(),
            ..sealed
        };
        assert!(!resigned.signature_holds(), "another key");
    }

    #[test]
    fn the_checkpoint_text_names_every_field() {
        let checkpoint = Checkpoint {
            n: 1,
            sealed_at: DateTime::from_timestamp_micros(1_765_000_000_123_456).unwrap(),
            previous_root: None,
            head_count: 0,
            heads_root: merkle::root(&[]),
            transactions: None,
        };
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(
            checkpoint.text(),
            format!("wallet-ledger/checkpoint/v1\n1\n1765000000123456\n-\n0\n{empty}")
        );
        let v2 = Checkpoint {
            transactions: Some(TransactionsSeal {
                count: 0,
                root: merkle::root(&[]),
            }),
            ..checkpoint
        };
        assert_eq!(
            v2.text(),
            format!("wallet-ledger/checkpoint/v2\n1\n1765000000123456\n-\n0\n{empty}\n0\n{empty}")
        );
    }
}
