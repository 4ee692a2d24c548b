//! Signed checkpoints of the journal (docs/verification.md, issue 40): `wallet-ledger seal`
//! commits checkpoint n, a Merkle root over every wallet's chain head and checkpoint n − 1's
//! root, signed with an Ed25519 key. A chain's links can be recomputed by whoever rewrites the
//! entries; a signed head cannot, so a rewrite of any entry at or before a sealed head shows.
//!
//! What is hashed is written out once here ([`Head::leaf`], [`Checkpoint::text`]) and checked
//! by `verify` (`reconcile::seals`) with the same functions.

pub mod keys;
pub mod merkle;
pub mod metadata;
pub mod proof;
mod store;

use crate::hex::encode as hex;
use crate::ledger::posting::ChainHash;
use crate::ledger::store::Db;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use merkle::Hash;
use sha2::{Digest, Sha256};

pub use store::{checkpoints, heads_at, one, page, sealed_heads_out_of_their_chain, stored_heads};

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
}

impl Checkpoint {
    /// The lines `wallet-ledger/checkpoint/v1`, n, the sealing time (microseconds since 1970
    /// UTC), the previous root (hex, `-` for the first), the number of heads and their root.
    pub fn text(&self) -> String {
        format!(
            "wallet-ledger/checkpoint/v1\n{}\n{}\n{}\n{}\n{}",
            self.n,
            self.sealed_at.timestamp_micros(),
            self.previous_root
                .map_or_else(|| "-".to_owned(), |r| hex(&r)),
            self.head_count,
            hex(&self.heads_root)
        )
    }

    pub fn root(&self) -> Hash {
        Sha256::digest(self.text().as_bytes()).into()
    }
}

/// A checkpoint as stored: what it commits to, its root, and who signed it.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub checkpoint: Checkpoint,
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
    /// Checkpoint `n` committed, sealing `changed` heads the previous one had not.
    Sealed {
        n: i64,
        changed: usize,
        heads: usize,
    },
    /// No chain moved since the last checkpoint: nothing to seal.
    Unchanged,
}

/// Commits the next checkpoint over every wallet's chain head as of now, signed with `key`,
/// unless no head moved since the last one. One sealer at a time (a transaction-scoped
/// advisory lock): a second waits and then finds nothing new, or seals what moved meanwhile.
pub async fn seal(db: &mut Db<'_>, key: &SigningKey) -> Result<Sealing, sqlx::Error> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let mut db = Db::new(&mut tx, engine);
    store::lock_sealing(db.conn()).await?;
    let previous = store::latest(db.conn()).await?;
    let sealed = match &previous {
        Some(p) => heads_at(db.conn(), p.checkpoint.n).await?,
        None => Vec::new(),
    };
    let heads = store::current_heads(&mut db).await?;
    if previous.is_some() && heads == sealed {
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
    };
    let root = checkpoint.root();
    let signature = key.sign(&root);
    let changed = changed_heads(&sealed, &heads);
    let stored = Sealed {
        checkpoint,
        root: root.to_vec(),
        public_key: key.verifying_key().to_bytes().to_vec(),
        signature: signature.to_bytes().to_vec(),
    };
    store::insert(db.conn(), &stored, &changed).await?;
    store::publish(db.conn(), &stored).await?;
    tx.commit().await?;
    Ok(Sealing::Sealed {
        n: stored.checkpoint.n,
        changed: changed.len(),
        heads: heads.len(),
    })
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
        };
        let root = checkpoint.root();
        let sealed = Sealed {
            checkpoint: checkpoint.clone(),
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
        };
        assert_eq!(
            checkpoint.text(),
            "wallet-ledger/checkpoint/v1\n1\n1765000000123456\n-\n0\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
