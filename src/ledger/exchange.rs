//! Currency exchange: the terms of moving money from a wallet in one currency to a wallet in
//! another, decided from the request alone (pure, tested without a database).
//!
//! A rate is how many units of the counter currency one unit of the source currency buys, in
//! major units (`1.0842` USD per EUR), as a decimal string: never a float. The counter amount in
//! minor units is then `amount × rate × 10^(e_counter − e_source)`, which is rarely whole; a
//! caller that gives both the rate and the counter amount must give that product rounded either
//! way (anything within one minor unit of it), and a caller that gives only the rate gets it
//! rounded half up. A caller that gives only the counter amount gets the rate the two amounts
//! imply, to 18 significant digits. Integer arithmetic throughout: `u128` holds the largest
//! product (2^53 × 10^18 × 10^4 < 2^128).

use super::money::{Amount, Currency, MAX_AMOUNT};
use rust_decimal::Decimal;
use std::str::FromStr;

/// Most significant digits, and most decimal places, of a rate.
pub const RATE_DIGITS: u32 = 18;

/// Units of the counter currency per unit of the source currency: positive, at most
/// [`RATE_DIGITS`] significant digits and decimal places, without trailing zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(Decimal);

impl Rate {
    /// A decimal string (`"1.0842"`, `"150"`, `"0.0065"`): digits with at most one point, no
    /// sign, no exponent. `None` for anything else, zero, or too many digits.
    pub fn parse(text: &str) -> Option<Rate> {
        let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || !digits(fraction) {
            return None;
        }
        Rate::new(Decimal::from_str(text).ok()?)
    }

    fn new(value: Decimal) -> Option<Rate> {
        let value = value.normalize();
        let fits = value.is_sign_positive()
            && !value.is_zero()
            && value.scale() <= RATE_DIGITS
            && value.mantissa() < 10_i128.pow(RATE_DIGITS);
        fits.then_some(Rate(value))
    }

    /// The rate as stored and shown: plain decimal notation, no trailing zeros.
    pub fn as_text(&self) -> String {
        self.0.to_string()
    }

    /// `amount × rate` in counter minor units as the fraction `numerator / denominator`.
    fn counter_fraction(self, amount: Amount, source: Currency, counter: Currency) -> (u128, u128) {
        let mantissa = u128::try_from(self.0.mantissa()).expect("a rate is positive");
        let magnitude = u128::from(amount.minor_units().unsigned_abs());
        let up = counter.exponent().saturating_sub(source.exponent());
        let down = source.exponent().saturating_sub(counter.exponent());
        let numerator = magnitude * mantissa * 10_u128.pow(up);
        let denominator = 10_u128.pow(self.0.scale() + down);
        (numerator, denominator)
    }
}

/// The terms of one exchange, as stored with its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub counter_currency: Currency,
    pub rate: Rate,
    /// What the counter wallet is credited, in counter minor units.
    pub counter_amount: Amount,
}

/// Why the terms of an exchange do not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermsError {
    /// Both sides in one currency: a transfer, not an exchange.
    SameCurrency,
    /// Neither a rate nor a counter amount.
    NoTerms,
    /// The counter amount is not the amount at the rate, rounded either way; `lowest..=highest`
    /// would have been.
    RateMismatch { lowest: u128, highest: u128 },
    /// The amount at the rate is below one counter minor unit or beyond the safe range.
    CounterOutOfRange { exact_floor: u128 },
    /// The two amounts imply a rate beyond [`RATE_DIGITS`] places (a tiny counter amount for
    /// a huge one).
    RateOutOfRange,
}

/// The terms of exchanging `amount` of `source` into `counter`, from the rate, the counter
/// amount, or both (which must agree).
pub fn terms(
    amount: Amount,
    source: Currency,
    counter: Currency,
    rate: Option<Rate>,
    counter_amount: Option<Amount>,
) -> Result<Exchange, TermsError> {
    if source == counter {
        return Err(TermsError::SameCurrency);
    }
    let (rate, counter_amount) = match (rate, counter_amount) {
        (None, None) => return Err(TermsError::NoTerms),
        (Some(rate), given) => (rate, at_rate(amount, source, counter, rate, given)?),
        (None, Some(given)) => (implied_rate(amount, source, given, counter)?, given),
    };
    Ok(Exchange {
        counter_currency: counter,
        rate,
        counter_amount,
    })
}

/// The counter amount at `rate`: `given` when it is the exact product rounded either way,
/// else the product rounded half up.
fn at_rate(
    amount: Amount,
    source: Currency,
    counter: Currency,
    rate: Rate,
    given: Option<Amount>,
) -> Result<Amount, TermsError> {
    let (numerator, denominator) = rate.counter_fraction(amount, source, counter);
    let floor = numerator / denominator;
    let ceiling = floor + u128::from(numerator % denominator != 0);
    if let Some(given) = given {
        let units = u128::try_from(given.minor_units()).unwrap_or(0);
        return if (floor..=ceiling).contains(&units) && units > 0 {
            Ok(given)
        } else {
            Err(TermsError::RateMismatch {
                lowest: floor.max(1),
                highest: ceiling.max(1),
            })
        };
    }
    let rounded = (numerator + denominator / 2) / denominator;
    i64::try_from(rounded)
        .ok()
        .filter(|units| (1..=MAX_AMOUNT).contains(units))
        .and_then(Amount::new)
        .ok_or(TermsError::CounterOutOfRange { exact_floor: floor })
}

/// The rate `counter_amount` of `counter` for `amount` of `source` implies, to
/// [`RATE_DIGITS`] significant digits and places; refused when so few digits no longer give
/// the counter amount back (rounded either way), so a stored rate always agrees with its amounts.
fn implied_rate(
    amount: Amount,
    source: Currency,
    counter_amount: Amount,
    counter: Currency,
) -> Result<Rate, TermsError> {
    let major = |minor: Amount, c: Currency| Decimal::new(minor.minor_units(), c.exponent());
    let rate = major(counter_amount, counter)
        .checked_div(major(amount, source))
        .and_then(|r| r.round_sf(RATE_DIGITS))
        .and_then(|r| r.round_dp(RATE_DIGITS).round_sf(RATE_DIGITS))
        .and_then(Rate::new)
        .ok_or(TermsError::RateOutOfRange)?;
    match at_rate(amount, source, counter, rate, Some(counter_amount)) {
        Ok(_) => Ok(rate),
        Err(_) => Err(TermsError::RateOutOfRange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(code: &str) -> Currency {
        Currency::parse(code).unwrap()
    }

    fn a(units: i64) -> Amount {
        Amount::new(units).unwrap()
    }

    fn rate(text: &str) -> Rate {
        Rate::parse(text).unwrap()
    }

    #[test]
    fn rates_are_plain_positive_decimals_of_bounded_precision() {
        assert_eq!(rate("1.0842").as_text(), "1.0842");
        assert_eq!(rate("1.50").as_text(), "1.5");
        assert_eq!(rate("150").as_text(), "150");
        assert_eq!(
            rate("0.000000000000000001").as_text(),
            "0.000000000000000001"
        );
        for bad in [
            "",
            "0",
            "0.0",
            "-1",
            "+1",
            "1e3",
            "1.",
            ".5",
            " 1",
            "1,5",
            "NaN",
            "1.2.3",
            "0.0000000000000000001",
            "1234567890123456789",
        ] {
            assert_eq!(Rate::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_rate_alone_gives_the_product_rounded_half_up() {
        let eur_usd = terms(a(10_000), c("EUR"), c("USD"), Some(rate("1.0842")), None).unwrap();
        assert_eq!(eur_usd.counter_amount, a(10_842));
        // 1 EUR cent at 1.085 is 1.085 cents: rounded to 1; at 1.5, 1.5 rounds up to 2.
        let one_cent = |r| terms(a(1), c("EUR"), c("USD"), Some(rate(r)), None).unwrap();
        assert_eq!(one_cent("1.085").counter_amount, a(1));
        assert_eq!(one_cent("1.5").counter_amount, a(2));
        // Exponents differ: 100.00 USD at 150.123 JPY is 15,012 yen (15,012.3 rounded).
        let usd_jpy = terms(a(10_000), c("USD"), c("JPY"), Some(rate("150.123")), None).unwrap();
        assert_eq!(usd_jpy.counter_amount, a(15_012));
        // 1,000 yen at 0.3221 KWD per 100 yen (0.003221 per yen) is 3.221 KWD = 3221 fils.
        let jpy_kwd = terms(a(1_000), c("JPY"), c("KWD"), Some(rate("0.003221")), None).unwrap();
        assert_eq!(jpy_kwd.counter_amount, a(3_221));
    }

    #[test]
    fn a_given_counter_amount_must_be_the_product_rounded_either_way() {
        let with = |counter| {
            terms(
                a(1),
                c("EUR"),
                c("USD"),
                Some(rate("1.085")),
                Some(a(counter)),
            )
        };
        assert!(with(1).is_ok());
        assert!(with(2).is_ok());
        let mismatch = TermsError::RateMismatch {
            lowest: 1,
            highest: 2,
        };
        assert_eq!(with(3), Err(mismatch));
        // An exact product leaves no room either way.
        let exact = |counter| {
            terms(
                a(10_000),
                c("EUR"),
                c("USD"),
                Some(rate("1.0842")),
                Some(a(counter)),
            )
        };
        assert!(exact(10_842).is_ok());
        assert!(matches!(
            exact(10_843),
            Err(TermsError::RateMismatch { .. })
        ));
        assert!(matches!(
            exact(10_841),
            Err(TermsError::RateMismatch { .. })
        ));
    }

    #[test]
    fn the_counter_amount_alone_implies_the_rate() {
        let t = terms(a(10_000), c("EUR"), c("USD"), None, Some(a(10_842))).unwrap();
        assert_eq!(t.rate.as_text(), "1.0842");
        let t = terms(a(3), c("USD"), c("JPY"), None, Some(a(5))).unwrap();
        // 5 yen for 0.03 USD: 166.666… yen per dollar, to 18 significant digits.
        assert_eq!(t.rate.as_text(), "166.666666666666667");
        // The implied rate gives the counter amount back, rounded either way.
        let again = terms(a(3), c("USD"), c("JPY"), Some(t.rate), Some(a(5)));
        assert_eq!(again, Ok(t));
    }

    #[test]
    fn out_of_range_and_degenerate_terms_are_named() {
        let (eur, usd) = (c("EUR"), c("USD"));
        assert_eq!(
            terms(a(5), eur, eur, Some(rate("1")), None),
            Err(TermsError::SameCurrency)
        );
        assert_eq!(terms(a(5), eur, usd, None, None), Err(TermsError::NoTerms));
        let tiny = terms(a(1), eur, usd, Some(rate("0.001")), None);
        assert_eq!(tiny, Err(TermsError::CounterOutOfRange { exact_floor: 0 }));
        let huge = terms(a(MAX_AMOUNT), eur, usd, Some(rate("2")), None);
        assert!(matches!(huge, Err(TermsError::CounterOutOfRange { .. })));
        let largest = terms(
            a(MAX_AMOUNT),
            c("JPY"),
            c("CLF"),
            Some(rate("999999999999999999")),
            None,
        );
        assert!(matches!(largest, Err(TermsError::CounterOutOfRange { .. })));
        // 1.2345 CLF for 9,007,199,254,740,991 yen is 1.37e-16 CLF per yen: 18 places keep
        // three digits of it, which give 1.2340 CLF back, not 1.2345.
        let too_fine = terms(a(MAX_AMOUNT), c("JPY"), c("CLF"), None, Some(a(12_345)));
        assert_eq!(too_fine, Err(TermsError::RateOutOfRange));
    }
}
