//! Identifiers: the caller's account ids, and the derivation of a transaction id from an
//! `Idempotency-Key` header.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// The longest account id: 128 characters.
pub const MAX_ACCOUNT_ID_LEN: usize = 128;

/// A caller-chosen account id matching `[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}`.
///
/// The id is the account's primary key, so creating an account twice with the same id is
/// answered by the database, not by a lookup before the insert.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AccountId(String);

impl AccountId {
    pub fn parse(id: &str) -> Option<AccountId> {
        let mut chars = id.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest_ok =
            chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '-'));
        (first_ok && rest_ok && id.len() <= MAX_ACCOUNT_ID_LEN).then(|| AccountId(id.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The system account that mirrors a provider's money in flight:
    /// `clearing:{provider}:{currency}`. `provider` has already been checked by
    /// [`is_valid_provider`], so the result is a valid id.
    pub fn clearing(provider: &str, currency: &str) -> AccountId {
        AccountId(format!("{CLEARING_PREFIX}{provider}:{currency}"))
    }

    /// The system account an exchange moves `currency` through: `fx:{currency}`.
    pub fn exchange(currency: &str) -> AccountId {
        AccountId(format!("{EXCHANGE_PREFIX}{currency}"))
    }

    /// Whether the id lies in a system namespace (`clearing:`, `fx:`), whose accounts the
    /// ledger creates itself (a provider's first payment creates its clearing account, the
    /// first exchange in a currency its exchange account).
    pub fn is_reserved(&self) -> bool {
        self.0.starts_with(CLEARING_PREFIX) || self.0.starts_with(EXCHANGE_PREFIX)
    }

    /// The currency code of a well-formed reserved id, `clearing:{provider}:{code}` with a
    /// valid provider or `fx:{code}`: the one account the ledger would create under this id
    /// holds it.
    pub fn reserved_currency(&self) -> Option<&str> {
        let code_ok = |code: &str| code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase());
        if let Some(code) = self.0.strip_prefix(EXCHANGE_PREFIX) {
            return code_ok(code).then_some(code);
        }
        let (provider, code) = self.0.strip_prefix(CLEARING_PREFIX)?.split_once(':')?;
        (is_valid_provider(provider) && code_ok(code)).then_some(code)
    }
}

/// The prefix of provider clearing accounts, a system namespace.
pub const CLEARING_PREFIX: &str = "clearing:";

/// The prefix of the exchange's accounts, one per currency, a system namespace.
pub const EXCHANGE_PREFIX: &str = "fx:";

impl TryFrom<String> for AccountId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        AccountId::parse(&value)
            .ok_or_else(|| "must match [A-Za-z0-9][A-Za-z0-9._:@-]{0,127}".to_owned())
    }
}

impl From<AccountId> for String {
    fn from(id: AccountId) -> String {
        id.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider name usable inside a clearing account id: 1-64 of `[A-Za-z0-9._@-]`, starting
/// with a letter or digit (no `:`, so the clearing id splits back unambiguously).
pub fn is_valid_provider(provider: &str) -> bool {
    let mut chars = provider.chars();
    provider.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}

/// The fixed UUIDv5 namespace of ids derived from `Idempotency-Key` headers. Documented in
/// `docs/api.md`; changing it would change every derived id, so it never changes.
pub const IDEMPOTENCY_KEY_NAMESPACE: Uuid = uuid::uuid!("6f1d8a52-3c4e-4b7a-9e21-7d0c5b8e4a13");

/// The id of a request sent without a body `id`: UUIDv5 of `owner + "\n" + key`. Keyed by the
/// owner (not the API key) so that it survives key rotation, and by the client's key (never
/// by anything the server generates) so that every retry lands on the same primary key.
pub fn id_from_idempotency_key(owner: &str, key: &str) -> Uuid {
    Uuid::new_v5(
        &IDEMPOTENCY_KEY_NAMESPACE,
        format!("{owner}\n{key}").as_bytes(),
    )
}

/// [`parse_idempotency_key`]'s rule as a regular expression, for the OpenAPI document: a bare
/// key (not starting with a quote; HTTP trims spaces around a header value, so it neither
/// starts nor ends with one) or a quoted one whose escapes decode to 1-255 characters.
pub const IDEMPOTENCY_KEY_PATTERN: &str =
    r#"^(?:[!#-~](?:[ -~]{0,253}[!-~])?|"(?:[ !#-\[\]-~]|\\["\\]){1,255}")$"#;

/// Parses an `Idempotency-Key` header value: an RFC 8941 string (quoted, with `\"` and `\\`
/// escapes) or a bare token; 1-255 printable ASCII characters either way.
pub fn parse_idempotency_key(raw: &str) -> Option<String> {
    let key = match raw.strip_prefix('"') {
        Some(rest) => {
            let inner = rest.strip_suffix('"')?;
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e @ ('"' | '\\')) => out.push(e),
                        _ => return None,
                    },
                    '"' => return None,
                    c => out.push(c),
                }
            }
            out
        }
        None => raw.to_owned(),
    };
    let printable = key.chars().all(|c| (' '..='~').contains(&c));
    (printable && (1..=255).contains(&key.len())).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids() {
        assert!(AccountId::parse("w1").is_some());
        assert!(AccountId::parse("clearing:stripe:SAR").is_some());
        assert!(AccountId::parse("user@example.com").is_some());
        assert!(AccountId::parse(&"a".repeat(128)).is_some());
        assert!(AccountId::parse(&"a".repeat(129)).is_none());
        assert!(AccountId::parse("").is_none());
        assert!(AccountId::parse(".").is_none());
        assert!(AccountId::parse("-a").is_none());
        assert!(AccountId::parse("a b").is_none());
        assert!(AccountId::parse("a/b").is_none());
        assert!(AccountId::parse("é").is_none());
    }

    #[test]
    fn clearing_ids_are_reserved_and_name_their_currency() {
        let id = |s: &str| AccountId::parse(s).unwrap();
        assert!(id("clearing:stripe:SAR").is_reserved());
        assert_eq!(id("clearing:stripe:SAR").reserved_currency(), Some("SAR"));
        assert!(id("clearing:x").is_reserved());
        assert_eq!(id("clearing:x").reserved_currency(), None);
        assert_eq!(id("clearing:a:b:SAR").reserved_currency(), None);
        assert_eq!(id("clearing:stripe:sar").reserved_currency(), None);
        assert_eq!(id("clearing::SAR").reserved_currency(), None);
        assert!(!id("Clearing:stripe:SAR").is_reserved());
        assert!(!id("w1").is_reserved());
        assert!(id("fx:EUR").is_reserved());
        assert_eq!(id("fx:EUR").reserved_currency(), Some("EUR"));
        assert_eq!(id("fx:EURO").reserved_currency(), None);
        assert_eq!(id("fx:eur").reserved_currency(), None);
        assert!(!id("fxEUR").is_reserved());
    }

    #[test]
    fn idempotency_keys_quoted_or_bare() {
        assert_eq!(parse_idempotency_key("abc").as_deref(), Some("abc"));
        assert_eq!(parse_idempotency_key("\"abc\"").as_deref(), Some("abc"));
        assert_eq!(parse_idempotency_key(r#""a\"b""#).as_deref(), Some("a\"b"));
        assert_eq!(parse_idempotency_key("\"\""), None);
        assert_eq!(parse_idempotency_key(""), None);
        assert_eq!(parse_idempotency_key(&"k".repeat(256)), None);
        assert_eq!(parse_idempotency_key("tab\there"), None);
        assert_eq!(
            id_from_idempotency_key("default", "abc"),
            id_from_idempotency_key("default", "abc")
        );
        assert_ne!(
            id_from_idempotency_key("default", "abc"),
            id_from_idempotency_key("other", "abc")
        );
    }
}
