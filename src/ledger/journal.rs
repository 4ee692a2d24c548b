//! A journal entry that cannot be built unbalanced.
//!
//! Every way into the ledger (API, stream, batch) builds a [`Journal`] before any SQL runs; the
//! database checks the same rule again over what was actually inserted (the
//! `entries_journal_rules` trigger), so a bug on either side cannot post money out of nowhere.

use super::ids::AccountId;
use super::money::{Amount, Currency};
use crate::problem::FieldError;

/// Most legs one transaction may have.
pub const MAX_LEGS: usize = 100;

/// One leg as the caller asked for it, with where its fields came from in the request so that
/// an error can point at them (`/entries/1/account`, `/from`, `/amount`).
#[derive(Debug, Clone)]
pub struct Leg {
    pub account: AccountId,
    pub amount: Amount,
    pub account_field: String,
    pub amount_field: String,
    /// Payments credit a wallet, never a system account.
    pub must_be_wallet: bool,
    /// The currency this leg must be in: `None` for the transaction's one currency; an
    /// exchange names each leg's, since its legs are in two.
    pub currency: Option<Currency>,
}

/// Two or more legs on distinct accounts, none zero, summing to zero, whose credits total at
/// most `MAX_AMOUNT`. Fields are private: the only way to get one is [`Journal::new`].
#[derive(Debug, Clone)]
pub struct Journal {
    legs: Vec<Leg>,
}

impl Journal {
    pub fn new(legs: Vec<Leg>) -> Result<Journal, Vec<FieldError>> {
        let mut errors = Vec::new();
        if legs.len() < 2 || legs.len() > MAX_LEGS {
            errors.push(FieldError::new(
                "/entries",
                "length",
                format!("a transaction has 2 to {MAX_LEGS} entries"),
            ));
        }
        for (i, leg) in legs.iter().enumerate() {
            if leg.amount.is_zero() {
                errors.push(FieldError::new(
                    leg.amount_field.clone(),
                    "range",
                    "must not be zero",
                ));
            }
            if legs[..i]
                .iter()
                .any(|earlier| earlier.account == leg.account)
            {
                errors.push(FieldError::new(
                    leg.account_field.clone(),
                    "duplicate_account",
                    format!("account {} appears more than once", leg.account),
                ));
            }
        }
        // Sum credits and debits apart, each checked against the safe range: a transaction
        // moving more than 2^53 − 1 in total is refused even if it would net to zero.
        let mut credits = Amount::ZERO;
        let mut debits = Amount::ZERO;
        for leg in &legs {
            let side = if leg.amount.is_negative() {
                &mut debits
            } else {
                &mut credits
            };
            match side.checked_add(leg.amount) {
                Some(sum) => *side = sum,
                None => {
                    errors.push(FieldError::new(
                        "/entries",
                        "overflow",
                        "the entries' total exceeds 9007199254740991 minor units",
                    ));
                    return Err(errors);
                }
            }
        }
        if credits.checked_add(debits) != Some(Amount::ZERO) {
            errors.push(FieldError::new(
                "/entries",
                "unbalanced",
                format!("entries must sum to zero; credits {credits}, debits {debits}"),
            ));
        }
        if errors.is_empty() {
            Ok(Journal { legs })
        } else {
            Err(errors)
        }
    }

    pub fn legs(&self) -> &[Leg] {
        &self.legs
    }

    /// The accounts in sorted order: the order locks are taken in, so two transactions over
    /// the same accounts can never wait on each other in a cycle.
    pub fn sorted_accounts(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.legs.iter().map(|l| l.account.to_string()).collect();
        ids.sort();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::money::MAX_AMOUNT;

    fn leg(account: &str, amount: i64) -> Leg {
        Leg {
            account: AccountId::parse(account).unwrap(),
            amount: Amount::new(amount).unwrap(),
            account_field: "/entries/0/account".into(),
            amount_field: "/entries/0/amount".into(),
            must_be_wallet: false,
            currency: None,
        }
    }

    #[test]
    fn balanced_legs_make_a_journal() {
        let j = Journal::new(vec![leg("b", -5), leg("a", 3), leg("c", 2)]).unwrap();
        assert_eq!(j.sorted_accounts(), ["a", "b", "c"]);
    }

    #[test]
    fn unbalanced_zero_duplicate_and_overflow_are_refused() {
        assert!(Journal::new(vec![leg("a", -5), leg("b", 4)]).is_err());
        assert!(Journal::new(vec![leg("a", 0), leg("b", 0)]).is_err());
        assert!(Journal::new(vec![leg("a", -5), leg("a", 5)]).is_err());
        assert!(Journal::new(vec![leg("a", 5)]).is_err());
        let big = Journal::new(vec![
            leg("a", MAX_AMOUNT),
            leg("b", MAX_AMOUNT),
            leg("c", -1),
        ]);
        assert_eq!(big.unwrap_err()[0].code, "overflow");
    }
}
