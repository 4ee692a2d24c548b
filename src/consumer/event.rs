//! Decoding a stream entry (a flat map of string fields) into a payment event, per the
//! contract: `event_id` and `wallet` and `amount` required, everything else defaulted, unknown
//! fields ignored (so the seed article's producer, which also sends `n`, works unchanged).
//! Anything that does not decode is a `malformed_event` with the reason, never a panic.

use crate::ledger::ids::{AccountId, is_valid_provider};
use crate::ledger::money::{Amount, Currency};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A stream entry's fields, as bytes: a field that is not UTF-8 is malformed, not a crash.
pub type Fields = BTreeMap<String, Vec<u8>>;

pub const DEFAULT_PROVIDER: &str = "default";
/// The longest `external_ref` in characters, as the API and the transactions table allow.
const MAX_EXTERNAL_REF_LEN: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Authorized,
    Succeeded,
    Captured,
    Failed,
    Refunded,
}

impl EventType {
    pub const ALL: [EventType; 5] = [
        EventType::Authorized,
        EventType::Succeeded,
        EventType::Captured,
        EventType::Failed,
        EventType::Refunded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Authorized => "payment.authorized",
            EventType::Succeeded => "payment.succeeded",
            EventType::Captured => "payment.captured",
            EventType::Failed => "payment.failed",
            EventType::Refunded => "payment.refunded",
        }
    }

    fn parse(value: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == value)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentEvent {
    /// Made once by the producer; a resend carries the same one under a new stream id.
    pub event_id: Uuid,
    pub kind: EventType,
    /// The ledger transaction's primary key (default: the event id).
    pub payment_id: Uuid,
    pub wallet: AccountId,
    /// Positive minor units: the payment's amount, or the refunded part for a refund.
    pub amount: Amount,
    /// Default: the wallet's currency.
    pub currency: Option<Currency>,
    pub provider: String,
    pub external_ref: Option<String>,
    /// The reversal's primary key for `payment.refunded` (default: the event id).
    pub refund_id: Uuid,
    pub occurred_at: Option<DateTime<Utc>>,
}

/// Why an entry is not a payment event: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn malformed(field: &str, message: impl Into<String>) -> Malformed {
    Malformed {
        field: field.to_owned(),
        message: message.into(),
    }
}

pub fn decode(fields: &Fields) -> Result<PaymentEvent, Malformed> {
    let text = |name: &str| -> Result<Option<&str>, Malformed> {
        match fields.get(name) {
            None => Ok(None),
            Some(bytes) => std::str::from_utf8(bytes)
                .map(|s| Some(s.trim()))
                .map_err(|_| malformed(name, "is not UTF-8")),
        }
    };
    let required = |name: &str| -> Result<&str, Malformed> {
        text(name)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| malformed(name, "is required"))
    };
    let uuid = |name: &str, value: &str| -> Result<Uuid, Malformed> {
        Uuid::parse_str(value).map_err(|_| malformed(name, format!("{value:?} is not a UUID")))
    };

    let event_id = uuid("event_id", required("event_id")?)?;
    let kind = match text("type")? {
        None | Some("") => EventType::Succeeded,
        Some(t) => EventType::parse(t).ok_or_else(|| {
            let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            malformed("type", format!("{t:?} is not one of {}", known.join(", ")))
        })?,
    };
    let optional_uuid = |name: &str| -> Result<Uuid, Malformed> {
        match text(name)? {
            None | Some("") => Ok(event_id),
            Some(v) => uuid(name, v),
        }
    };
    let payment_id = optional_uuid("payment_id")?;
    let refund_id = optional_uuid("refund_id")?;
    let wallet_raw = required("wallet")?;
    let wallet = AccountId::parse(wallet_raw).ok_or_else(|| {
        malformed(
            "wallet",
            format!("{wallet_raw:?} must match [A-Za-z0-9][A-Za-z0-9._:@-]{{0,127}}"),
        )
    })?;
    let amount = parse_amount(required("amount")?)?;
    let currency = match text("currency")? {
        None | Some("") => None,
        Some(c) => Some(
            Currency::parse(c)
                .ok_or_else(|| malformed("currency", format!("{c:?} is not a known currency")))?,
        ),
    };
    let provider = match text("provider")? {
        None | Some("") => DEFAULT_PROVIDER.to_owned(),
        Some(p) if is_valid_provider(p) => p.to_owned(),
        Some(p) => {
            return Err(malformed(
                "provider",
                format!("{p:?} must be 1-64 of [A-Za-z0-9._@-], starting with a letter or digit"),
            ));
        }
    };
    let external_ref = match text("external_ref")? {
        None | Some("") => None,
        Some(r) if r.chars().any(char::is_control) => {
            return Err(malformed("external_ref", "contains control characters"));
        }
        Some(r) if r.chars().count() <= MAX_EXTERNAL_REF_LEN => Some(r.to_owned()),
        Some(_) => {
            return Err(malformed(
                "external_ref",
                format!("is longer than {MAX_EXTERNAL_REF_LEN} characters"),
            ));
        }
    };
    let occurred_at = match text("occurred_at")? {
        None | Some("") => None,
        Some(t) => Some(
            DateTime::parse_from_rfc3339(t)
                .map_err(|_| malformed("occurred_at", format!("{t:?} is not an RFC 3339 time")))?
                .with_timezone(&Utc),
        ),
    };
    Ok(PaymentEvent {
        event_id,
        kind,
        payment_id,
        wallet,
        amount,
        currency,
        provider,
        external_ref,
        refund_id,
        occurred_at,
    })
}

/// Integer minor units, 1 to 2^53 − 1, digits only: `50.00` or `5e3` is malformed, never
/// rounded or guessed at.
fn parse_amount(value: &str) -> Result<Amount, Malformed> {
    let out_of_range = || {
        malformed(
            "amount",
            format!("{value:?} must be whole minor units from 1 to 9007199254740991"),
        )
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range());
    }
    value
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .and_then(Amount::new)
        .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    const ID: &str = "0b3f5c1e-9a47-4c1d-8f52-6a0e3d2b7c91";

    #[test]
    fn the_seed_articles_producer_format_decodes_with_defaults() {
        let event = decode(&fields(&[
            ("n", "2"),
            ("event_id", ID),
            ("wallet", "w1"),
            ("amount", "5000"),
        ]))
        .unwrap();
        assert_eq!(event.kind, EventType::Succeeded);
        assert_eq!(event.payment_id.to_string(), ID);
        assert_eq!(event.refund_id.to_string(), ID);
        assert_eq!(event.amount.minor_units(), 5000);
        assert_eq!(event.provider, "default");
        assert_eq!(event.currency, None);
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("wallet", "w1"), ("amount", "1")], "event_id"),
            (
                &[("event_id", "x"), ("wallet", "w1"), ("amount", "1")],
                "event_id",
            ),
            (&[("event_id", ID), ("amount", "1")], "wallet"),
            (
                &[("event_id", ID), ("wallet", "w 1"), ("amount", "1")],
                "wallet",
            ),
            (&[("event_id", ID), ("wallet", "w1")], "amount"),
            (
                &[("event_id", ID), ("wallet", "w1"), ("amount", "50.00")],
                "amount",
            ),
            (
                &[("event_id", ID), ("wallet", "w1"), ("amount", "0")],
                "amount",
            ),
            (
                &[("event_id", ID), ("wallet", "w1"), ("amount", "-5")],
                "amount",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "9007199254740992"),
                ],
                "amount",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("type", "payment.lost"),
                ],
                "type",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("currency", "XXX"),
                ],
                "currency",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("provider", "a:b"),
                ],
                "provider",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("payment_id", "p1"),
                ],
                "payment_id",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("refund_id", "r1"),
                ],
                "refund_id",
            ),
            (
                &[
                    ("event_id", ID),
                    ("wallet", "w1"),
                    ("amount", "1"),
                    ("occurred_at", "yesterday"),
                ],
                "occurred_at",
            ),
        ];
        for (pairs, field) in cases {
            let error = decode(&fields(pairs)).unwrap_err();
            assert_eq!(error.field, *field, "{pairs:?}");
        }
        let mut not_utf8 = fields(&[("event_id", ID), ("amount", "1")]);
        not_utf8.insert("wallet".into(), vec![0xff, 0xfe]);
        assert_eq!(decode(&not_utf8).unwrap_err().field, "wallet");
    }
}
