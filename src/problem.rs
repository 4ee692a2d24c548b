//! One invalid field of a request, as the ledger's rules and the API's validation name it.
//!
//! It lives outside `http/` because the ledger finds some of them itself (a currency that no
//! account has, an amount out of range once the accounts are known) and hands them back as
//! data; `http::problem` renders them into the `errors` of a problem body.

use serde::Serialize;
use utoipa::ToSchema;

/// One invalid field of a request: `field` is a JSON pointer into the request body
/// (`/entries/1/amount`) or into its query parameters (`/limit`), or the name of a header
/// (`Idempotency-Key`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    pub field: String,
    /// Stable, documented in docs/api.md: `required`, `unknown_field`, `duplicate_field`,
    /// `invalid_type`, `range`, `invalid_character` (U+0000 in metadata or a query parameter),
    /// `number_range` (a metadata integer beyond 64 bits), `cursor` (not a cursor of this
    /// list), `balance_overflow`, and the other field rules.
    pub code: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, code: &str, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// `key` as one reference token of a JSON Pointer (RFC 6901): `~` becomes `~0` and `/` becomes
/// `~1`, so `/a~1b` names the key `a/b`. Every pointer the API reports or compares is built
/// from these.
pub fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod pointer_tests {
    #[test]
    fn tilde_and_slash_are_escaped_in_that_order() {
        assert_eq!(super::pointer_token("a/b~c"), "a~1b~0c");
        assert_eq!(super::pointer_token("~1"), "~01");
        assert_eq!(super::pointer_token("plain"), "plain");
    }
}
