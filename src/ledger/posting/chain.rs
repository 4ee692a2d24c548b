//! A wallet's chain of entries: each entry takes the next sequence number, carries the balance
//! after it, and a ledger time that never decreases. Posting and a hold's capture both
//! continue chains through [`ChainHead::next`], so the rule is written once.

use crate::ledger::money::{Amount, Currency};
use chrono::{DateTime, Utc};

/// An entry ready to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewEntry {
    pub account: String,
    pub amount: Amount,
    pub sequence: Option<i64>,
    pub balance_after: Option<Amount>,
    /// A backdated transaction's date (`ledger::effective`); none otherwise.
    pub effective_at: Option<DateTime<Utc>>,
    /// An exchange's entry: its own currency. `None`: the transaction's one currency.
    pub currency: Option<Currency>,
}

impl NewEntry {
    /// The entry's currency code: its own, else `transaction`'s.
    pub fn currency_or<'a>(&self, transaction: &'a str) -> &'a str {
        match self.currency {
            Some(own) => own.code(),
            None => transaction,
        }
    }
}

impl NewEntry {
    /// An entry on a system account, which keeps no chain.
    pub fn unchained(account: String, amount: Amount) -> NewEntry {
        NewEntry {
            account,
            amount,
            sequence: None,
            balance_after: None,
            effective_at: None,
            currency: None,
        }
    }
}

/// Where a wallet's chain continues: its last entry's sequence, balance and ledger time
/// (zero, zero and none before its first entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChainHead {
    pub sequence: i64,
    pub balance: Amount,
    pub ledger_time: Option<DateTime<Utc>>,
}

impl ChainHead {
    /// The balance after `amount`; `None` when it would leave the safe range.
    pub fn balance_after(&self, amount: Amount) -> Option<Amount> {
        self.balance.checked_add(amount)
    }

    /// The entry that continues this chain, the head moved past it; `None`, the head
    /// unchanged, when the balance would leave the safe range. `ledger_time` is the
    /// transaction's, from [`ledger_time`] over every chain it continues.
    pub fn next(
        &mut self,
        account: String,
        amount: Amount,
        ledger_time: DateTime<Utc>,
    ) -> Option<NewEntry> {
        let balance = self.balance_after(amount)?;
        let sequence = self.sequence.checked_add(1)?;
        *self = ChainHead {
            sequence,
            balance,
            ledger_time: Some(ledger_time),
        };
        Some(NewEntry {
            account,
            amount,
            sequence: Some(sequence),
            balance_after: Some(balance),
            effective_at: None,
            currency: None,
        })
    }
}

/// The ledger time of a transaction that continues these chains: `now`, unless one of them
/// already has a later entry (another writer's clock ran ahead), so that ledger time never
/// decreases along a chain whatever the clocks say.
pub(crate) fn ledger_time<'a>(
    heads: impl IntoIterator<Item = &'a ChainHead>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    heads
        .into_iter()
        .filter_map(|h| h.ledger_time)
        .fold(now, DateTime::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::money::MAX_AMOUNT;
    use chrono::TimeDelta;

    fn amount(minor_units: i64) -> Amount {
        Amount::new(minor_units).unwrap()
    }

    #[test]
    fn next_takes_the_next_sequence_and_carries_the_balance() {
        let now = Utc::now();
        let mut head = ChainHead::default();
        let first = head.next("w".into(), amount(500), now).unwrap();
        let second = head.next("w".into(), amount(-200), now).unwrap();
        assert_eq!(
            (first.sequence, first.balance_after),
            (Some(1), Some(amount(500)))
        );
        assert_eq!(
            (second.sequence, second.balance_after),
            (Some(2), Some(amount(300)))
        );
        assert_eq!(head.ledger_time, Some(now));
    }

    #[test]
    fn a_balance_past_the_safe_range_is_no_entry_and_leaves_the_head() {
        let now = Utc::now();
        let mut head = ChainHead {
            sequence: 7,
            balance: amount(MAX_AMOUNT),
            ledger_time: None,
        };
        assert!(head.next("w".into(), amount(1), now).is_none());
        assert!(head.next("w".into(), amount(MAX_AMOUNT), now).is_none());
        assert_eq!(head.sequence, 7);
        assert_eq!(head.balance, amount(MAX_AMOUNT));
        assert_eq!(head.ledger_time, None);
    }

    #[test]
    fn ledger_time_never_goes_back_behind_a_chain() {
        let now = Utc::now();
        let ahead = ChainHead {
            ledger_time: Some(now + TimeDelta::seconds(5)),
            ..ChainHead::default()
        };
        let behind = ChainHead {
            ledger_time: Some(now - TimeDelta::seconds(5)),
            ..ChainHead::default()
        };
        assert_eq!(ledger_time([&behind], now), now);
        assert_eq!(
            ledger_time([&behind, &ahead], now),
            now + TimeDelta::seconds(5)
        );
        assert_eq!(ledger_time([], now), now);
    }
}
