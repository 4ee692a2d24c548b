//! Decoding a stream entry (a flat map of string fields) into a payment event, per the
//! contract: `event_id` and `wallet` and `amount` required, everything else defaulted, unknown
//! fields ignored (so the seed article's producer, which also sends `n`, works unchanged).
//! Anything that does not decode is a `malformed_event` with the reason, never a panic.

use crate::ledger::ids::{AccountId, is_valid_provider};
use crate::ledger::money::{Amount, Currency};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A stream entry's fields exactly as the broker holds them: names and values are bytes, in
/// the producer's order, a repeated name kept. A dead letter carries them unchanged; a field
/// that is not UTF-8 is malformed, not a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields(Vec<(Vec<u8>, Vec<u8>)>);

impl Fields {
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Fields {
        Fields(pairs)
    }

    /// The value of the first field named `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(k, _)| k == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    pub fn pairs(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.0
    }
}

impl From<BTreeMap<String, Vec<u8>>> for Fields {
    fn from(map: BTreeMap<String, Vec<u8>>) -> Fields {
        Fields(map.into_iter().map(|(k, v)| (k.into_bytes(), v)).collect())
    }
}

/// The fields the contract names; each may appear once.
const KNOWN_FIELDS: [&str; 10] = [
    "event_id",
    "type",
    "payment_id",
    "wallet",
    "amount",
    "currency",
    "provider",
    "external_ref",
    "refund_id",
    "occurred_at",
];

/// The most characters of a producer's value that a reason quotes: a dead letter already
/// holds the whole value, so its reason (and the log line) need only enough to recognise it.
const MAX_QUOTED_CHARS: usize = 64;

/// `value` quoted for a reason or a log line: escaped (control and format characters as
/// `\u{..}`), and cut to [`MAX_QUOTED_CHARS`] with the full length said.
/// Bytes that are not UTF-8 are shown as `\xff`.
pub fn quoted(value: &[u8]) -> String {
    let mut out = String::from("\"");
    let cut = match std::str::from_utf8(value) {
        Ok(text) => {
            for c in text.chars().take(MAX_QUOTED_CHARS) {
                if is_format_char(c) {
                    out.extend(c.escape_unicode());
                } else {
                    out.extend(c.escape_debug());
                }
            }
            text.chars().nth(MAX_QUOTED_CHARS).is_some()
        }
        Err(_) => {
            let shown = &value[..value.len().min(MAX_QUOTED_CHARS)];
            out.push_str(&shown.escape_ascii().to_string());
            value.len() > MAX_QUOTED_CHARS
        }
    };
    out.push('"');
    if cut {
        out.push_str(&format!(" (cut: {} bytes in all)", value.len()));
    }
    out
}

/// Invisible characters that change how text is shown (bidirectional overrides, zero-width
/// joiners, soft hyphens, byte-order marks): a reference holding them can look like another.
pub fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

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
    check_names(fields)?;
    let event_id = parse_uuid("event_id", required(fields, "event_id")?)?;
    let kind = parse_kind(fields)?;
    // A payment's id defaults to its event's, a refund's too.
    let optional_uuid = |name: &str| -> Result<Uuid, Malformed> {
        match text(fields, name)? {
            None | Some("") => Ok(event_id),
            Some(v) => parse_uuid(name, v),
        }
    };
    let payment_id = optional_uuid("payment_id")?;
    let refund_id = optional_uuid("refund_id")?;
    let wallet = parse_wallet(required(fields, "wallet")?)?;
    let amount = parse_amount(required(fields, "amount")?)?;
    Ok(PaymentEvent {
        event_id,
        kind,
        payment_id,
        wallet,
        amount,
        currency: parse_currency(fields)?,
        provider: parse_provider(fields)?,
        external_ref: parse_external_ref(fields)?,
        refund_id,
        occurred_at: parse_occurred_at(fields)?,
    })
}

/// Every field name is UTF-8, and no known field comes twice (which one would count?).
fn check_names(fields: &Fields) -> Result<(), Malformed> {
    for (name, _) in fields.pairs() {
        if std::str::from_utf8(name).is_err() {
            return Err(malformed(
                "(field name)",
                format!("{} is not UTF-8", quoted(name)),
            ));
        }
    }
    for known in KNOWN_FIELDS {
        let times = fields
            .pairs()
            .iter()
            .filter(|(k, _)| k == known.as_bytes())
            .count();
        if times > 1 {
            return Err(malformed(known, format!("appears {times} times")));
        }
    }
    Ok(())
}

/// A field's value as text. Values are taken exactly as sent: `" 5"` is not a number, `"w1 "`
/// not a wallet.
fn text<'f>(fields: &'f Fields, name: &str) -> Result<Option<&'f str>, Malformed> {
    match fields.get(name) {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| malformed(name, format!("{} is not UTF-8", quoted(bytes)))),
    }
}

fn required<'f>(fields: &'f Fields, name: &str) -> Result<&'f str, Malformed> {
    text(fields, name)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| malformed(name, "is required"))
}

fn parse_uuid(name: &str, value: &str) -> Result<Uuid, Malformed> {
    Uuid::parse_str(value)
        .map_err(|_| malformed(name, format!("{} is not a UUID", quoted(value.as_bytes()))))
}

/// `type`, a succeeded payment when absent.
fn parse_kind(fields: &Fields) -> Result<EventType, Malformed> {
    match text(fields, "type")? {
        None | Some("") => Ok(EventType::Succeeded),
        Some(t) => EventType::parse(t).ok_or_else(|| {
            let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            malformed(
                "type",
                format!(
                    "{} is not one of {}",
                    quoted(t.as_bytes()),
                    known.join(", ")
                ),
            )
        }),
    }
}

fn parse_wallet(raw: &str) -> Result<AccountId, Malformed> {
    AccountId::parse(raw).ok_or_else(|| {
        malformed(
            "wallet",
            format!(
                "{} must match [A-Za-z0-9][A-Za-z0-9._:@-]{{0,127}}",
                quoted(raw.as_bytes())
            ),
        )
    })
}

fn parse_currency(fields: &Fields) -> Result<Option<Currency>, Malformed> {
    match text(fields, "currency")? {
        None | Some("") => Ok(None),
        Some(c) => Currency::parse(c).map(Some).ok_or_else(|| {
            malformed(
                "currency",
                format!("{} is not a known currency", quoted(c.as_bytes())),
            )
        }),
    }
}

fn parse_provider(fields: &Fields) -> Result<String, Malformed> {
    match text(fields, "provider")? {
        None | Some("") => Ok(DEFAULT_PROVIDER.to_owned()),
        Some(p) if is_valid_provider(p) => Ok(p.to_owned()),
        Some(p) => Err(malformed(
            "provider",
            format!(
                "{} must be 1-64 of [A-Za-z0-9._@-], starting with a letter or digit",
                quoted(p.as_bytes())
            ),
        )),
    }
}

fn parse_external_ref(fields: &Fields) -> Result<Option<String>, Malformed> {
    match text(fields, "external_ref")? {
        None | Some("") => Ok(None),
        Some(r) if r.chars().any(|c| c.is_control() || is_format_char(c)) => Err(malformed(
            "external_ref",
            "contains control or invisible formatting characters",
        )),
        Some(r) if r.chars().count() <= MAX_EXTERNAL_REF_LEN => Ok(Some(r.to_owned())),
        Some(_) => Err(malformed(
            "external_ref",
            format!("is longer than {MAX_EXTERNAL_REF_LEN} characters"),
        )),
    }
}

fn parse_occurred_at(fields: &Fields) -> Result<Option<DateTime<Utc>>, Malformed> {
    let Some(t) = text(fields, "occurred_at")?.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let time = DateTime::parse_from_rfc3339(t).map_err(|_| {
        malformed(
            "occurred_at",
            format!("{} is not an RFC 3339 time", quoted(t.as_bytes())),
        )
    })?;
    Ok(Some(time.with_timezone(&Utc)))
}

/// Integer minor units, 1 to 2^53 − 1, digits only: `50.00` or `5e3` is malformed, never
/// rounded or guessed at.
fn parse_amount(value: &str) -> Result<Amount, Malformed> {
    let out_of_range = || {
        malformed(
            "amount",
            format!(
                "{} must be whole minor units from 1 to 9007199254740991",
                quoted(value.as_bytes())
            ),
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
        Fields::new(
            pairs
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect(),
        )
    }

    fn with(mut fields: Fields, name: &[u8], value: &[u8]) -> Fields {
        fields.0.push((name.to_vec(), value.to_vec()));
        fields
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
    fn every_bad_required_field_is_named() {
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
        ];
        for (pairs, field) in cases {
            let error = decode(&fields(pairs)).unwrap_err();
            assert_eq!(error.field, *field, "{pairs:?}");
        }
        let not_utf8 = with(
            fields(&[("event_id", ID), ("amount", "1")]),
            b"wallet",
            &[0xff],
        );
        assert_eq!(decode(&not_utf8).unwrap_err().field, "wallet");
    }

    #[test]
    fn every_bad_amount_is_named() {
        for amount in ["50.00", "0", "-5", "9007199254740992"] {
            let pairs = [("event_id", ID), ("wallet", "w1"), ("amount", amount)];
            let error = decode(&fields(&pairs)).unwrap_err();
            assert_eq!(error.field, "amount", "{pairs:?}");
        }
    }

    #[test]
    fn every_bad_optional_field_is_named() {
        let cases = [
            ("type", "payment.lost"),
            ("currency", "XXX"),
            ("provider", "a:b"),
            ("payment_id", "p1"),
            ("refund_id", "r1"),
            ("occurred_at", "yesterday"),
        ];
        for (field, value) in cases {
            let pairs = [
                ("event_id", ID),
                ("wallet", "w1"),
                ("amount", "1"),
                (field, value),
            ];
            let error = decode(&fields(&pairs)).unwrap_err();
            assert_eq!(error.field, field, "{pairs:?}");
        }
    }

    #[test]
    fn a_field_name_that_is_not_utf8_is_malformed_and_quoted_escaped() {
        let valid = fields(&[("event_id", ID), ("wallet", "w1"), ("amount", "1000")]);
        let error = decode(&with(valid, b"\xff", b"x")).unwrap_err();
        assert_eq!(error.field, "(field name)");
        assert!(error.message.contains("\\xff"), "{}", error.message);
    }

    #[test]
    fn a_contract_field_given_twice_is_malformed_whatever_its_values() {
        let twice = with(
            fields(&[("event_id", ID), ("wallet", "w1"), ("amount", "1000")]),
            b"amount",
            b"1000",
        );
        let error = decode(&twice).unwrap_err();
        assert_eq!(
            (error.field.as_str(), error.message.as_str()),
            ("amount", "appears 2 times")
        );
        // An unknown field may repeat: it is ignored, and kept in a dead letter.
        let unknown = with(
            with(
                fields(&[("event_id", ID), ("wallet", "w1"), ("amount", "1")]),
                b"n",
                b"1",
            ),
            b"n",
            b"2",
        );
        assert!(decode(&unknown).is_ok());
    }

    #[test]
    fn values_are_taken_exactly_as_sent() {
        for amount in [" 5", "5 ", "+5", "٥", "5\n"] {
            let error = decode(&fields(&[
                ("event_id", ID),
                ("wallet", "w1"),
                ("amount", amount),
            ]))
            .unwrap_err();
            assert_eq!(error.field, "amount", "{amount:?}");
        }
        let error = decode(&fields(&[
            ("event_id", ID),
            ("wallet", "w1 "),
            ("amount", "5"),
        ]))
        .unwrap_err();
        assert_eq!(error.field, "wallet");
    }

    #[test]
    fn references_with_invisible_formatting_characters_are_malformed() {
        for reference in [
            "pay\u{202E}321",
            "pay\u{200B}1",
            "\u{FEFF}pay",
            "pay\u{2066}1",
        ] {
            let error = decode(&fields(&[
                ("event_id", ID),
                ("wallet", "w1"),
                ("amount", "5"),
                ("external_ref", reference),
            ]))
            .unwrap_err();
            assert_eq!(error.field, "external_ref", "{reference:?}");
        }
    }

    #[test]
    fn a_huge_bad_value_is_quoted_cut_and_escaped() {
        let huge = format!("\u{1b}[2J{}", "9".repeat(1_000_000));
        let error = decode(&fields(&[
            ("event_id", ID),
            ("wallet", "w1"),
            ("amount", &huge),
        ]))
        .unwrap_err();
        assert!(error.message.len() < 300, "{} bytes", error.message.len());
        assert!(error.message.contains("\\u{1b}[2J"), "{}", error.message);
        assert!(!error.message.contains('\u{1b}'));
        assert!(
            error.message.contains("1000004 bytes in all"),
            "{}",
            error.message
        );
    }
}
