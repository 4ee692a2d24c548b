//! A wallet's chain of entries: each entry takes the next sequence number, carries the balance
//! after it, a ledger time that never decreases, and a hash over its content and its
//! predecessor's hash ([`ChainHash`]). Posting and a hold's capture both continue chains
//! through [`ChainHead::next`], so the rule is written once.

use crate::ledger::money::{Amount, Currency};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

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
    /// A wallet entry's link in its chain; none on a system account.
    pub hash: Option<ChainHash>,
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
            hash: None,
        }
    }
}

/// The SHA-256 link of a wallet entry: over its predecessor's link (32 zero bytes before the
/// first entry, or after an entry written before links existed) and the entry's own content,
/// in the text [`ChainHash::of`] spells out. The entries trigger recomputes it with
/// `entry_chain_hash` (migrations/20261210010000_entry_chain_hashes.sql) and refuses an entry
/// whose link differs, and `verify` recomputes every chain: an entry changed, removed or moved
/// after it was written breaks its own link or its successor's (docs/verification.md).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ChainHash(pub [u8; 32]);

/// What an entry's link covers besides its predecessor's: everything the entry says, its
/// transaction's part and its place in the chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link<'a> {
    pub part: Part<'a>,
    pub sequence: i64,
    pub balance_after: Amount,
}

impl ChainHash {
    /// Which construction a link follows; a new one would get a new tag.
    const TAG: &'static str = "wallet-ledger/entry/v1";

    /// SHA-256 of the predecessor's 32 bytes followed by the entry's [`EntryText`].
    pub(crate) fn of(previous: ChainHash, link: &Link<'_>) -> ChainHash {
        let part = &link.part;
        let text = EntryText {
            transaction: part.transaction,
            account: part.account,
            currency: part.currency.code(),
            amount: part.amount.minor_units(),
            sequence: Some(link.sequence),
            balance_after: Some(link.balance_after.minor_units()),
            ledger_time: part.ledger_time,
            effective_at: part.effective_at,
        };
        ChainHash::following(previous, &text)
    }

    /// SHA-256 of `previous`'s 32 bytes followed by `entry`'s text: a wallet's next link, and a
    /// system account's when a checkpoint seals its entries (`ledger::seals`).
    pub(crate) fn following(previous: ChainHash, entry: &EntryText<'_>) -> ChainHash {
        let mut hasher = Sha256::new();
        hasher.update(previous.0);
        hasher.update(entry.text().as_bytes());
        ChainHash(hasher.finalize().into())
    }

    /// As stored: a wallet's last entry's `chain_hash`, none before its first entry (or
    /// before links existed). Another length than 32 is refused by the schema.
    pub(crate) fn stored(bytes: Option<Vec<u8>>) -> ChainHash {
        bytes
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .map_or_else(ChainHash::default, ChainHash)
    }

    pub fn hex(&self) -> String {
        crate::hex::encode(&self.0)
    }
}

impl std::fmt::Debug for ChainHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChainHash({})", self.hex())
    }
}

/// An entry's content as the journal hashes it, wallet or system: a wallet entry's link is
/// over it ([`ChainHash::of`]), and a checkpoint seals every entry by it (`ledger::seals`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryText<'a> {
    pub transaction: Uuid,
    pub account: &'a str,
    pub currency: &'a str,
    pub amount: i64,
    /// A wallet entry's place and balance; none on a system account.
    pub sequence: Option<i64>,
    pub balance_after: Option<i64>,
    pub ledger_time: DateTime<Utc>,
    pub effective_at: Option<DateTime<Utc>>,
}

impl EntryText<'_> {
    /// The UTF-8 lines, joined by a line feed: the tag, the transaction id (lowercase,
    /// hyphenated), the account, the currency, the amount, the sequence and the balance after
    /// (decimal minor units; `-` on a system account), the ledger time and the effective date
    /// (microseconds since 1970-01-01 UTC, as stored; `-` for none). Times are cut to the
    /// microsecond, as PostgreSQL stores them.
    pub fn text(&self) -> String {
        let micros = |t: DateTime<Utc>| t.timestamp_micros().to_string();
        let or_dash = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        [
            ChainHash::TAG.to_owned(),
            self.transaction.to_string(),
            self.account.to_owned(),
            self.currency.to_owned(),
            self.amount.to_string(),
            or_dash(self.sequence),
            or_dash(self.balance_after),
            micros(self.ledger_time),
            self.effective_at.map_or_else(|| "-".to_owned(), micros),
        ]
        .join("\n")
    }
}

/// Where a wallet's chain continues: its last entry's sequence, balance, ledger time and link
/// (zero, zero, none and zero bytes before its first entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChainHead {
    pub sequence: i64,
    pub balance: Amount,
    pub ledger_time: Option<DateTime<Utc>>,
    pub hash: ChainHash,
}

impl ChainHead {
    /// The balance after `amount`; `None` when it would leave the safe range.
    pub fn balance_after(&self, amount: Amount) -> Option<Amount> {
        self.balance.checked_add(amount)
    }

    /// The entry of `part` that continues this chain, the head moved past it; `None`, the head
    /// unchanged, when the balance would leave the safe range. `part.ledger_time` is the
    /// transaction's, from [`ledger_time`] over every chain it continues.
    pub fn next(&mut self, part: Part<'_>) -> Option<NewEntry> {
        let balance = self.balance_after(part.amount)?;
        let sequence = self.sequence.checked_add(1)?;
        let link = Link {
            part,
            sequence,
            balance_after: balance,
        };
        let hash = ChainHash::of(self.hash, &link);
        *self = ChainHead {
            sequence,
            balance,
            ledger_time: Some(part.ledger_time),
            hash,
        };
        Some(NewEntry {
            account: part.account.to_owned(),
            amount: part.amount,
            sequence: Some(sequence),
            balance_after: Some(balance),
            effective_at: part.effective_at,
            currency: Some(part.currency),
            hash: Some(hash),
        })
    }
}

/// A transaction's part on one wallet, before the chain places it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part<'a> {
    pub transaction: Uuid,
    pub account: &'a str,
    pub currency: Currency,
    pub amount: Amount,
    pub ledger_time: DateTime<Utc>,
    pub effective_at: Option<DateTime<Utc>>,
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

    fn part(minor_units: i64, ledger_time: DateTime<Utc>) -> Part<'static> {
        Part {
            transaction: Uuid::nil(),
            account: "w",
            currency: Currency::parse("SAR").unwrap(),
            amount: amount(minor_units),
            ledger_time,
            effective_at: None,
        }
    }

    #[test]
    fn next_takes_the_next_sequence_and_carries_the_balance() {
        let now = Utc::now();
        let mut head = ChainHead::default();
        let first = head.next(part(500, now)).unwrap();
        let second = head.next(part(-200, now)).unwrap();
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
            ..ChainHead::default()
        };
        assert!(head.next(part(1, now)).is_none());
        assert!(head.next(part(MAX_AMOUNT, now)).is_none());
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

    /// The same values through `entry_chain_hash` in PostgreSQL (the migration's function)
    /// gave these links: the write path and the schema hash alike, the effective date and a
    /// time's microseconds included, and a link depends on its predecessor's.
    #[test]
    fn links_are_the_schemas_and_chain_on() {
        let at = DateTime::parse_from_rfc3339("2026-12-06T12:00:00.123456789Z")
            .unwrap()
            .to_utc();
        let mut head = ChainHead::default();
        let first = head.next(part(500, at)).unwrap();
        let backdated = Part {
            effective_at: Some(
                DateTime::parse_from_rfc3339("2026-11-30T00:00:00Z")
                    .unwrap()
                    .to_utc(),
            ),
            ..part(-200, at)
        };
        let second = head.next(backdated).unwrap();
        assert_eq!(
            first.hash.unwrap().hex(),
            "4da8175418a80bfb8274c05aa6e207e9715cda6ee49b7f288465f234a3348efa"
        );
        assert_eq!(
            second.hash.unwrap().hex(),
            "9ce452a9c48f90cf2185b9e36ec35cfa6411956a7dcb55c92a49102275f1b8ac"
        );
        assert_eq!(head.hash, second.hash.unwrap());
        let mut other = ChainHead::default();
        other.next(part(501, at)).unwrap();
        assert_ne!(other.next(part(-200, at)).unwrap().hash, second.hash);
    }
}
