//! Field rules shared by request types, as `validator` custom functions. The rules themselves
//! live in the domain newtypes (`AccountId`, `Currency`, ...); these only adapt them.

use crate::ledger::ids::{AccountId, is_valid_provider};
use crate::ledger::money::{Currency, MAX_AMOUNT};
use validator::ValidationError;

fn error(code: &'static str, message: &'static str) -> ValidationError {
    ValidationError::new(code).with_message(message.into())
}

pub fn account_id(id: &str) -> Result<(), ValidationError> {
    AccountId::parse(id).map(|_| ()).ok_or_else(|| {
        error(
            "account_id",
            "must match [A-Za-z0-9][A-Za-z0-9._:@-]{0,127}",
        )
    })
}

pub fn currency(code: &str) -> Result<(), ValidationError> {
    Currency::parse(code)
        .map(|_| ())
        .ok_or_else(|| error("currency", "must be an ISO 4217 currency code, e.g. SAR"))
}

pub fn provider(name: &str) -> Result<(), ValidationError> {
    is_valid_provider(name).then_some(()).ok_or_else(|| {
        error(
            "provider",
            "must be 1-64 of [A-Za-z0-9._@-], starting with a letter or digit",
        )
    })
}

/// A leg's amount: non-zero, within ±(2^53 − 1).
pub fn signed_amount(amount: i64) -> Result<(), ValidationError> {
    if amount == 0 {
        return Err(error("range", "must not be zero"));
    }
    if !(-MAX_AMOUNT..=MAX_AMOUNT).contains(&amount) {
        return Err(error(
            "range",
            "must be within ±9007199254740991 minor units",
        ));
    }
    Ok(())
}

/// A positive amount of minor units, at most 2^53 − 1.
pub fn positive_amount(amount: i64) -> Result<(), ValidationError> {
    if !(1..=MAX_AMOUNT).contains(&amount) {
        return Err(error(
            "range",
            "must be between 1 and 9007199254740991 minor units",
        ));
    }
    Ok(())
}

/// Overdraft limits and versions: 0 to 2^53 − 1.
pub fn non_negative(value: i64) -> Result<(), ValidationError> {
    if !(0..=MAX_AMOUNT).contains(&value) {
        return Err(error("range", "must be between 0 and 9007199254740991"));
    }
    Ok(())
}

pub fn external_ref(value: &str) -> Result<(), ValidationError> {
    if value.is_empty() || value.chars().count() > 255 || value.chars().any(char::is_control) {
        return Err(error(
            "external_ref",
            "must be 1-255 characters without control characters",
        ));
    }
    Ok(())
}

/// PostgreSQL's `jsonb` cannot hold the character U+0000, which JSON allows: refused here, in
/// any key or string of the metadata, rather than failing at the database.
pub fn metadata(value: &serde_json::Map<String, serde_json::Value>) -> Result<(), ValidationError> {
    fn clean(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(s) => !s.contains('\0'),
            serde_json::Value::Array(items) => items.iter().all(clean),
            serde_json::Value::Object(map) => {
                map.iter().all(|(k, v)| !k.contains('\0') && clean(v))
            }
            _ => true,
        }
    }
    if value.iter().all(|(k, v)| !k.contains('\0') && clean(v)) {
        Ok(())
    } else {
        Err(error(
            "invalid_character",
            "must not contain the character U+0000",
        ))
    }
}
