//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed by the base64 part of a `whsec_` secret.
//! During a rotation a delivery carries one signature per active secret, space-separated, so a
//! receiver that knows either secret accepts it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const SECRET_PREFIX: &str = "whsec_";
/// Bytes of a generated secret: 256 bits.
const SECRET_BYTES: usize = 32;
/// The shortest key accepted from a caller (the convention allows 24 to 64 bytes).
const MIN_SECRET_BYTES: usize = 24;
const MAX_SECRET_BYTES: usize = 64;

/// A fresh secret, `whsec_` and 32 random bytes in base64.
pub fn generate_secret() -> String {
    let mut key = [0u8; SECRET_BYTES];
    getrandom::fill(&mut key).expect("the operating system's random source is available");
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The key bytes of a secret, or why it is not one.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret
        .strip_prefix(SECRET_PREFIX)
        .ok_or_else(|| format!("must start with {SECRET_PREFIX}"))?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| format!("must be {SECRET_PREFIX} followed by base64"))?;
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) {
        return Err(format!(
            "its key must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
        ));
    }
    Ok(key)
}

/// The `webhook-signature` header value for `body`, signed with every secret.
pub fn signature_header(secrets: &[String], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|s| secret_key(s).ok())
        .map(|key| format!("v1,{}", sign(&key, id, timestamp, body)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn the_specifications_example_signs_alike() {
        let secret = vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()];
        let header = signature_header(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn generated_secrets_are_valid_and_distinct() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        assert_eq!(secret_key(&a).unwrap().len(), 32);
        assert!(secret_key("whsec_short").is_err());
        assert!(secret_key("nope").is_err());
    }

    #[test]
    fn a_rotation_signs_with_both_secrets() {
        let secrets = vec![generate_secret(), generate_secret()];
        let header = signature_header(&secrets, "id", 1, b"{}");
        assert_eq!(header.split(' ').count(), 2);
        assert!(header.split(' ').all(|s| s.starts_with("v1,")));
    }
}
