//! The checkpoint signing key: an Ed25519 key whose 32-byte secret seed travels as standard
//! base64 (`CHECKPOINT_SIGNING_KEY`, or a file holding it), and whose public half is what an
//! auditor keeps to check signatures (`wallet-ledger keys generate` prints both).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{SigningKey, VerifyingKey};

/// A new key from the operating system's random source.
pub fn generate() -> SigningKey {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).expect("the operating system's random source");
    SigningKey::from_bytes(&seed)
}

/// A signing key from the base64 of its 32-byte seed (surrounding whitespace ignored).
pub fn signing_key(text: &str) -> Result<SigningKey, String> {
    let seed = STANDARD
        .decode(text.trim())
        .map_err(|e| format!("the checkpoint signing key is not base64: {e}"))?;
    let seed = <[u8; 32]>::try_from(seed.as_slice()).map_err(|_| {
        format!(
            "the checkpoint signing key must be 32 bytes (an Ed25519 seed), not {}: \
             make one with `wallet-ledger keys generate`",
            seed.len()
        )
    })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// A public key from the base64 of its 32 bytes.
pub fn public_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| format!("the public key is not base64: {e}"))?;
    let bytes = <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("a public key is 32 bytes, not {}", bytes.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an Ed25519 public key: {e}"))
}

pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    STANDARD.decode(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_reads_back_and_bad_keys_are_named() {
        let key = generate();
        let again = signing_key(&format!("{}\n", encode(key.as_bytes()))).unwrap();
        assert_eq!(again.verifying_key(), key.verifying_key());
        let public = encode(key.verifying_key().as_bytes());
        assert_eq!(public_key(&public).unwrap(), key.verifying_key());
        assert!(
            signing_key("not base64!")
                .unwrap_err()
                .contains("not base64")
        );
        assert!(
            signing_key(&encode(&[1; 16]))
                .unwrap_err()
                .contains("32 bytes")
        );
        assert!(
            public_key(&encode(&[1; 31]))
                .unwrap_err()
                .contains("32 bytes")
        );
    }
}
