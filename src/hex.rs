//! Lowercase hex, the one spelling of digests the service prints and stores as text (secret
//! digests, settlement file keys, chain links and checkpoint roots). Three functions do not
//! warrant a crate.

/// `bytes` as lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of an even number of hex digits (either case); `None` for anything else.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// 32 bytes from 64 hex digits (either case); `None` for anything else.
pub fn decode32(text: &str) -> Option<[u8; 32]> {
    decode(text)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_two_bytes_round_trip_and_other_text_is_refused() {
        let bytes: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(decode32(&encode(&bytes)), Some(bytes));
        assert_eq!(decode32(&encode(&bytes).to_uppercase()), Some(bytes));
        assert_eq!(decode32(&encode(&bytes[..31])), None);
        assert_eq!(decode32(&"zz".repeat(32)), None);
        assert_eq!(decode32(&"é".repeat(32)), None);
    }
}
