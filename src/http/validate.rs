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

/// The message prefix of a metadata integer beyond 64 bits: the extractor files it as the field
/// error `number_range` at `/metadata` (see `extract::data_error`).
pub const NUMBER_RANGE: &str = "metadata integer outside the 64-bit range";

/// `metadata` as the request types deserialize it: held to the rules of the rest of the body.
/// A repeated key, at any depth, is `duplicate_field` (serde_json's map would keep the last
/// one silently), and an integer outside the 64-bit range is refused (`number_range`) rather
/// than rounded to a float: storing it exactly would take serde_json's `arbitrary_precision`,
/// a crate-wide feature that changes every number the service parses, for metadata that no
/// rule of the ledger reads. Refused, the caller can send such a value as a string.
pub mod metadata_field {
    use serde::Deserialize;
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::value::RawValue;
    use serde_json::{Map, Number, Value};
    use std::fmt;

    /// For `Option<Map<..>>` fields (`null` is the field left out).
    pub fn optional<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Map<String, Value>>, D::Error> {
        let Some(raw) = Option::<Box<RawValue>>::deserialize(d)? else {
            return Ok(None);
        };
        parse::<D::Error>(raw.get()).map(Some)
    }

    pub fn required<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        parse::<D::Error>(raw.get())
    }

    fn parse<E: de::Error>(text: &str) -> Result<Map<String, Value>, E> {
        if let Some(literal) = wide_integer(text) {
            return Err(E::custom(format!(
                "{} (−9223372036854775808 to 18446744073709551615): {literal}; send it as a string",
                super::NUMBER_RANGE
            )));
        }
        let mut de = serde_json::Deserializer::from_str(text);
        match (Strict {
            path: String::new(),
        })
        .deserialize(&mut de)
        {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(E::invalid_type(
                de::Unexpected::Other("not an object"),
                &"an object",
            )),
            Err(e) => Err(E::custom(
                e.to_string()
                    .split(" at line ")
                    .next()
                    .unwrap_or("")
                    .to_owned(),
            )),
        }
    }

    /// The first integer literal (no fraction, no exponent) outside both i64 and u64, outside
    /// strings; `text` is valid JSON (it came out of the parser as one value).
    fn wide_integer(text: &str) -> Option<&str> {
        let bytes = text.as_bytes();
        let (mut i, mut in_string) = (0, false);
        while i < bytes.len() {
            let b = bytes[i];
            if in_string {
                match b {
                    b'\\' => i += 1,
                    b'"' => in_string = false,
                    _ => {}
                }
                i += 1;
                continue;
            }
            if b == b'"' {
                in_string = true;
                i += 1;
                continue;
            }
            if b == b'-' || b.is_ascii_digit() {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let literal = &text[start..i];
                let integer = !literal.contains(['.', 'e', 'E']);
                if integer && literal.parse::<i64>().is_err() && literal.parse::<u64>().is_err() {
                    return Some(literal);
                }
                continue;
            }
            i += 1;
        }
        None
    }

    /// A JSON value whose objects refuse a repeated key; `path` is where it sits below
    /// `/metadata`, for the error's pointer.
    struct Strict {
        path: String,
    }

    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Strict {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            Number::from_f64(v)
                .map(Value::Number)
                .ok_or_else(|| E::custom("a number out of range"))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element_seed(Strict {
                path: format!("{}/{}", self.path, items.len()),
            })? {
                items.push(item);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = format!("{}/{}", self.path, crate::problem::pointer_token(&key));
                if out.contains_key(&key) {
                    // serde's own wording, which the extractor files as `duplicate_field`
                    // at the pointer inside the backticks.
                    let field = path.trim_start_matches('/');
                    return Err(de::Error::custom(format!("duplicate field `{field}`")));
                }
                let value = map.next_value_seed(Strict { path })?;
                out.insert(key, value);
            }
            Ok(Value::Object(out))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn integers_beyond_64_bits_are_found_outside_strings_only() {
            assert_eq!(
                wide_integer(r#"{"a":-9223372036854775809}"#),
                Some("-9223372036854775809")
            );
            assert_eq!(
                wide_integer(r#"{"a":18446744073709551616}"#),
                Some("18446744073709551616")
            );
            assert_eq!(
                wide_integer(r#"{"a":18446744073709551615,"b":-9223372036854775808}"#),
                None
            );
            assert_eq!(
                wide_integer(r#"{"a":"99999999999999999999","b\"9":1e400}"#),
                None
            );
            assert_eq!(wide_integer(r#"{"a":[1.5,2e30,-0]}"#), None);
        }

        #[test]
        fn a_repeated_key_is_refused_at_any_depth() {
            let err = parse::<serde_json::Error>(r#"{"m":{"a":1,"a":2}}"#).unwrap_err();
            assert!(
                err.to_string().starts_with("duplicate field `m/a`"),
                "{err}"
            );
            assert!(parse::<serde_json::Error>(r#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#).is_ok());
        }
    }
}

/// Integer fields (`amount`, `overdraft_limit`, `version`): `-0` is a valid JSON integer, but
/// serde_json reads it as the float −0.0 and an `i64` field then answered "floating point".
/// It is taken as 0 here (and then refused or accepted as 0 is: `range` for an amount);
/// every other float stays a type error.
pub mod integer {
    use serde::Deserializer;
    use serde::de::{self, Visitor};
    use std::fmt;

    pub fn required<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(Integer)
    }

    /// For `Option<i64>` fields (`null` is the field left out).
    pub fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        d.deserialize_option(OptionalInteger)
    }

    struct Integer;

    impl Visitor<'_> for Integer {
        type Value = i64;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("i64")
        }
        fn visit_i64<E>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            // serde_json reads `-0` as −0.0 (`0` is a u64); a positive 0.0 was written with a
            // fraction, so it stays a type error like every other float.
            if v == 0.0 && v.is_sign_negative() {
                Ok(0)
            } else {
                Err(E::invalid_type(de::Unexpected::Float(v), &self))
            }
        }
    }

    struct OptionalInteger;

    impl<'de> Visitor<'de> for OptionalInteger {
        type Value = Option<i64>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("i64 or null")
        }
        fn visit_none<E>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
            d.deserialize_any(Integer).map(Some)
        }
    }
}

/// Timestamps in request bodies (`expires_at`): RFC 3339 as the contract says, which chrono's
/// own deserializer stretches. It took `+10000-01-01T00:00:00Z` (and echoed it in a form that
/// is not RFC 3339) and the leap second `...T00:00:60Z` (which PostgreSQL and most clients
/// cannot hold). Here the year has four digits and the seconds run 00-59.
pub mod timestamp {
    use chrono::{DateTime, Datelike, Timelike, Utc};
    use serde::{Deserialize, Deserializer, de};

    pub const MESSAGE: &str = "must be an RFC 3339 timestamp with an offset, a four-digit year and seconds 00-59, e.g. 2026-12-01T10:00:00Z";

    pub fn parse(text: &str) -> Option<DateTime<Utc>> {
        let parsed = DateTime::parse_from_rfc3339(text).ok()?;
        // A leap second is kept by chrono as a nanosecond count past one second.
        let four_digit_year = text.as_bytes().get(4) == Some(&b'-');
        let utc = parsed.to_utc();
        // The offset must not carry the instant out of four digits either (it is echoed in UTC).
        (four_digit_year && parsed.nanosecond() < 1_000_000_000 && (0..=9999).contains(&utc.year()))
            .then_some(utc)
    }

    /// For `Option<DateTime<Utc>>` fields (`null` is the field left out).
    pub fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        parse(&text)
            .map(Some)
            .ok_or_else(|| de::Error::custom(MESSAGE))
    }
}
