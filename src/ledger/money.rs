//! Money: integer minor units behind newtypes, ISO 4217 currencies and their exponents.
//!
//! No floating point ever touches an amount. Every amount the ledger accepts or returns fits in
//! `[-MAX_AMOUNT, MAX_AMOUNT]`, the range a JavaScript client reads exactly (2^53 − 1), and all
//! arithmetic is checked against that range rather than against `i64`.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest magnitude of any amount or balance: 2^53 − 1.
pub const MAX_AMOUNT: i64 = (1 << 53) - 1;

/// A signed number of minor units (halalas, cents) within `±MAX_AMOUNT`.
/// Positive credits an account, negative debits it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(try_from = "i64", into = "i64")]
pub struct Amount(i64);

impl Amount {
    pub const ZERO: Amount = Amount(0);

    pub fn new(minor_units: i64) -> Option<Amount> {
        (-MAX_AMOUNT..=MAX_AMOUNT)
            .contains(&minor_units)
            .then_some(Amount(minor_units))
    }

    pub fn minor_units(self) -> i64 {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// `None` when the result leaves the safe range: a balance that a client could not read
    /// exactly is refused rather than stored.
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).and_then(Amount::new)
    }

    pub fn checked_sub(self, other: Amount) -> Option<Amount> {
        self.0.checked_sub(other.0).and_then(Amount::new)
    }

    pub fn negate(self) -> Amount {
        // The range is symmetric, so negation cannot leave it.
        Amount(-self.0)
    }

    /// The magnitude; in range, since the range is symmetric.
    pub fn abs(self) -> Amount {
        Amount(self.0.abs())
    }

    /// `self + other`, clamped to the range: for bounds that only ask "is it at most X",
    /// with X within the range.
    pub fn saturating_add(self, other: Amount) -> Amount {
        // Both within ±M, so the i64 sum cannot overflow.
        Amount(self.0 + other.0).clamp(Amount(-MAX_AMOUNT), Amount(MAX_AMOUNT))
    }

    /// An amount or balance read from the database: out of range is a value the schema's
    /// checks should have refused, reported as undecodable rather than carried on.
    pub fn stored(minor_units: i64) -> Result<Amount, sqlx::Error> {
        Amount::try_from(minor_units).map_err(|e| sqlx::Error::Decode(e.into()))
    }
}

impl TryFrom<i64> for Amount {
    type Error = String;
    fn try_from(value: i64) -> Result<Self, Self::Error> {
        Amount::new(value).ok_or_else(|| format!("must be within ±{MAX_AMOUNT}"))
    }
}

impl From<Amount> for i64 {
    fn from(amount: Amount) -> i64 {
        amount.0
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An ISO 4217 currency the ledger knows the exponent of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency {
    code: &'static str,
    exponent: u32,
}

impl Currency {
    pub fn parse(code: &str) -> Option<Currency> {
        CURRENCIES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|&(code, exponent)| Currency { code, exponent })
    }

    /// Every code the ledger knows, in the table's order.
    pub fn codes() -> impl Iterator<Item = &'static str> {
        CURRENCIES.iter().map(|(code, _)| *code)
    }

    pub fn code(self) -> &'static str {
        self.code
    }

    /// How many digits follow the decimal point: 2 for SAR and USD, 0 for JPY, 3 for KWD.
    pub fn exponent(self) -> u32 {
        self.exponent
    }

    /// `5000` SAR → `"50.00"`; exact, through `rust_decimal`, never through a float.
    pub fn format(self, amount: i64) -> String {
        Decimal::new(amount, self.exponent).to_string()
    }

    /// [`Currency::format`] of an [`Amount`].
    pub fn format_amount(self, amount: Amount) -> String {
        self.format(amount.minor_units())
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code)
    }
}

/// Active ISO 4217 codes and their minor-unit exponents (funds and metals, which have no
/// minor unit, are left out on purpose: a wallet cannot hold them).
#[rustfmt::skip]
const CURRENCIES: &[(&str, u32)] = &[
    ("AED", 2), ("AFN", 2), ("ALL", 2), ("AMD", 2), ("ANG", 2), ("AOA", 2), ("ARS", 2),
    ("AUD", 2), ("AWG", 2), ("AZN", 2), ("BAM", 2), ("BBD", 2), ("BDT", 2), ("BGN", 2),
    ("BHD", 3), ("BIF", 0), ("BMD", 2), ("BND", 2), ("BOB", 2), ("BRL", 2), ("BSD", 2),
    ("BTN", 2), ("BWP", 2), ("BYN", 2), ("BZD", 2), ("CAD", 2), ("CDF", 2), ("CHF", 2),
    ("CLF", 4), ("CLP", 0), ("CNY", 2), ("COP", 2), ("CRC", 2), ("CUP", 2), ("CVE", 2),
    ("CZK", 2), ("DJF", 0), ("DKK", 2), ("DOP", 2), ("DZD", 2), ("EGP", 2), ("ERN", 2),
    ("ETB", 2), ("EUR", 2), ("FJD", 2), ("FKP", 2), ("GBP", 2), ("GEL", 2), ("GHS", 2),
    ("GIP", 2), ("GMD", 2), ("GNF", 0), ("GTQ", 2), ("GYD", 2), ("HKD", 2), ("HNL", 2),
    ("HTG", 2), ("HUF", 2), ("IDR", 2), ("ILS", 2), ("INR", 2), ("IQD", 3), ("IRR", 2),
    ("ISK", 0), ("JMD", 2), ("JOD", 3), ("JPY", 0), ("KES", 2), ("KGS", 2), ("KHR", 2),
    ("KMF", 0), ("KPW", 2), ("KRW", 0), ("KWD", 3), ("KYD", 2), ("KZT", 2), ("LAK", 2),
    ("LBP", 2), ("LKR", 2), ("LRD", 2), ("LSL", 2), ("LYD", 3), ("MAD", 2), ("MDL", 2),
    ("MGA", 2), ("MKD", 2), ("MMK", 2), ("MNT", 2), ("MOP", 2), ("MRU", 2), ("MUR", 2),
    ("MVR", 2), ("MWK", 2), ("MXN", 2), ("MYR", 2), ("MZN", 2), ("NAD", 2), ("NGN", 2),
    ("NIO", 2), ("NOK", 2), ("NPR", 2), ("NZD", 2), ("OMR", 3), ("PAB", 2), ("PEN", 2),
    ("PGK", 2), ("PHP", 2), ("PKR", 2), ("PLN", 2), ("PYG", 0), ("QAR", 2), ("RON", 2),
    ("RSD", 2), ("RUB", 2), ("RWF", 0), ("SAR", 2), ("SBD", 2), ("SCR", 2), ("SDG", 2),
    ("SEK", 2), ("SGD", 2), ("SHP", 2), ("SLE", 2), ("SOS", 2), ("SRD", 2), ("SSP", 2),
    ("STN", 2), ("SVC", 2), ("SYP", 2), ("SZL", 2), ("THB", 2), ("TJS", 2), ("TMT", 2),
    ("TND", 3), ("TOP", 2), ("TRY", 2), ("TTD", 2), ("TWD", 2), ("TZS", 2), ("UAH", 2),
    ("UGX", 0), ("USD", 2), ("UYI", 0), ("UYU", 2), ("UYW", 4), ("UZS", 2), ("VES", 2),
    ("VND", 0), ("VUV", 0), ("WST", 2), ("XAF", 0), ("XCD", 2), ("XCG", 2), ("XOF", 0),
    ("XPF", 0), ("YER", 2), ("ZAR", 2), ("ZMW", 2), ("ZWG", 2),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_stay_in_the_javascript_safe_range() {
        assert!(Amount::new(MAX_AMOUNT).is_some());
        assert!(Amount::new(MAX_AMOUNT + 1).is_none());
        assert!(Amount::new(-MAX_AMOUNT - 1).is_none());
        let max = Amount::new(MAX_AMOUNT).unwrap();
        assert_eq!(max.checked_add(Amount::new(1).unwrap()), None);
        assert_eq!(max.negate().checked_sub(Amount::new(1).unwrap()), None);
    }

    #[test]
    fn saturating_and_stored_amounts_stay_in_range() {
        let max = Amount::new(MAX_AMOUNT).unwrap();
        assert_eq!(max.saturating_add(max), max);
        assert_eq!(max.negate().saturating_add(max.negate()), max.negate());
        assert_eq!(max.negate().abs(), max);
        assert!(Amount::stored(MAX_AMOUNT).is_ok());
        assert!(Amount::stored(MAX_AMOUNT + 1).is_err());
    }

    #[test]
    fn formats_with_the_currency_exponent() {
        assert_eq!(Currency::parse("SAR").unwrap().format(5000), "50.00");
        assert_eq!(Currency::parse("SAR").unwrap().format(-5), "-0.05");
        assert_eq!(Currency::parse("JPY").unwrap().format(500), "500");
        assert_eq!(Currency::parse("KWD").unwrap().format(1), "0.001");
        assert!(Currency::parse("XXX").is_none());
        assert!(Currency::parse("sar").is_none());
    }

    #[test]
    fn currency_table_has_no_duplicates() {
        let mut codes: Vec<_> = CURRENCIES.iter().map(|(c, _)| *c).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), CURRENCIES.len());
    }
}
