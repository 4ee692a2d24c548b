//! A transaction's metadata as the checkpoints seal it: not the metadata itself, which may hold
//! personal data, but a salted digest of it. Erasing the metadata (crypto-shredding) replaces
//! it and destroys its salt, and keeps the digest (`metadata_erased_digest`), so every seal
//! over the transaction still checks while the kept digest, without its salt, cannot be
//! matched against guesses of what was erased (docs/verification.md).

use super::merkle::Hash;
use sha2::{Digest, Sha256};

/// `SHA-256(salt ‖ text)`: `text` is the metadata as PostgreSQL prints a `jsonb`
/// (`metadata::text`, which orders keys and spaces them one way), `salt` its 16 random bytes
/// (none for transactions written before salts existed).
pub fn digest(salt: Option<&[u8]>, text: &str) -> Hash {
    Sha256::new()
        .chain_update(salt.unwrap_or_default())
        .chain_update(text.as_bytes())
        .finalize()
        .into()
}

/// The digest a seal takes of a transaction's metadata as stored: the kept digest once the
/// metadata was erased, else the digest of the metadata and its salt.
pub fn sealed_digest(salt: Option<&[u8]>, text: &str, erased: Option<&[u8]>) -> Hash {
    match erased.and_then(|kept| <Hash>::try_from(kept).ok()) {
        Some(kept) => kept,
        None => digest(salt, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_salt_comes_first_and_an_erasure_keeps_the_digest() {
        let salt = [7u8; 16];
        let text = r#"{"customer": "Noura"}"#;
        let mut joined = salt.to_vec();
        joined.extend_from_slice(text.as_bytes());
        let expected: Hash = Sha256::digest(&joined).into();
        assert_eq!(digest(Some(&salt), text), expected);
        assert_ne!(digest(None, text), expected, "unsalted is another digest");
        assert_eq!(sealed_digest(Some(&salt), text, None), expected);
        assert_eq!(
            sealed_digest(None, "{}", Some(&expected)),
            expected,
            "erased: the kept digest, whatever the metadata now says"
        );
    }
}
