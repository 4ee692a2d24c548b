//! Effective dates: when a transaction counts for the business, beside its ledger time (when
//! the ledger wrote it). A posted transaction may be backdated within a horizon; its entries
//! then count from that date on in balances read by effective time.
//!
//! The rule a backdated debit keeps: at every effective moment from its date to now, the
//! wallet's available balance (posted by effective time, less what its open holds reserve
//! now) stays within its overdraft limit. A debit dated now is the ordinary funds check; one
//! dated in the past also must not overdraw any moment after its date, which entries posted
//! since may have brought close to the limit. The balance at an effective moment `t` is the
//! posted balance now less every entry effective after `t`, so only the entries effective
//! after the debit's date are read ([`history_since`]), under the wallet's lock.

use super::money::Amount;
use chrono::{DateTime, TimeDelta, Utc};
use sqlx::PgConnection;

/// How far back a transaction may be dated, unless configured otherwise.
pub const DEFAULT_HORIZON: TimeDelta = TimeDelta::days(31);

/// A create's requested effective date, with the earliest one the service allowed when the
/// request came in (`effective_at` − horizon is checked by the ledger after the stored id, so
/// that a retry past the horizon still replays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveDate {
    pub at: DateTime<Utc>,
    pub not_before: DateTime<Utc>,
}

/// Why an effective date cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateError {
    InFuture,
    BeyondHorizon,
}

impl EffectiveDate {
    /// The date's own rule: not after `now`, not before the horizon.
    pub fn check(&self, now: DateTime<Utc>) -> Result<(), DateError> {
        if self.at > now {
            Err(DateError::InFuture)
        } else if self.at < self.not_before {
            Err(DateError::BeyondHorizon)
        } else {
            Ok(())
        }
    }

    /// What the rows store: the date when it is earlier than the ledger time, else nothing
    /// (the transaction counts from its ledger time, as an undated one does).
    pub fn backdates(&self, ledger_time: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self.at < ledger_time).then_some(self.at)
    }
}

/// A wallet's entries effective after `since`, as (effective time, amount), in no order: what
/// its balance by effective time at any moment from `since` on is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EffectiveHistory {
    pub since: DateTime<Utc>,
    pub moves: Vec<(DateTime<Utc>, i64)>,
}

impl EffectiveHistory {
    /// Adds an entry decided in this pass.
    pub fn record(&mut self, at: DateTime<Utc>, amount: Amount) {
        if at > self.since {
            self.moves.push((at, amount.minor_units()));
        }
    }

    /// The lowest posted balance by effective time at any moment from `from` to now, for a
    /// wallet whose posted balance now is `posted_now` (`from` is not before `since`).
    pub fn lowest_from(&self, posted_now: i64, from: DateTime<Utc>) -> i128 {
        let mut after: Vec<(DateTime<Utc>, i64)> = self
            .moves
            .iter()
            .copied()
            .filter(|(at, _)| *at > from)
            .collect();
        after.sort_by_key(|(at, _)| *at);
        let later: i128 = after.iter().map(|(_, a)| i128::from(*a)).sum();
        // At `from`: everything effective after it is not counted yet.
        let mut balance = i128::from(posted_now) - later;
        let mut lowest = balance;
        // Moves at one moment count together: the balance at that moment has them all.
        for moment in after.chunk_by(|x, y| x.0 == y.0) {
            balance += moment.iter().map(|(_, a)| i128::from(*a)).sum::<i128>();
            lowest = lowest.min(balance);
        }
        lowest
    }
}

/// The wallet's entries effective after `since`: every one of them was written after `since`
/// too (an effective date is never later than its ledger time), so they are the tail of its
/// chain after the last entry written at or before `since`, read backwards on the chain's
/// index from the newest; none is older than the backdating horizon.
pub(crate) async fn history_since(
    conn: &mut PgConnection,
    wallet: &str,
    since: DateTime<Utc>,
) -> Result<EffectiveHistory, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select coalesce(effective_at, ledger_time) as "at!", amount
           from entries
           where account_id = $1
             and sequence > coalesce((select sequence from entries
                                      where account_id = $1 and sequence is not null
                                        and ledger_time <= $2
                                      order by sequence desc limit 1), 0)"#,
        wallet,
        since
    )
    .fetch_all(conn)
    .await?;
    let mut history = EffectiveHistory {
        since,
        moves: Vec::with_capacity(rows.len()),
    };
    history.moves.extend(
        rows.into_iter()
            .map(|r| (r.at, r.amount))
            .filter(|(at, _)| *at > since),
    );
    Ok(history)
}

/// How much an account's posted balance at `at` by effective time differs from its balance at
/// `at` by ledger time: its backdated entries written after `at` but effective by then count,
/// those effective after `at` but written by then do not. Reads only backdated entries (a
/// partial index), so an account never backdated costs one empty probe.
pub(crate) async fn backdating_at(
    conn: &mut PgConnection,
    account: &str,
    at: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select (coalesce(sum(amount) filter (where effective_at <= $2), 0)
                   - coalesce(sum(amount) filter (where ledger_time <= $2), 0))::bigint as "delta!"
           from entries where account_id = $1 and effective_at is not null"#,
        account,
        at
    )
    .fetch_one(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::minutes(minutes)
    }

    fn history(moves: &[(i64, i64)]) -> EffectiveHistory {
        EffectiveHistory {
            since: t(0),
            moves: moves.iter().map(|&(m, a)| (t(m), a)).collect(),
        }
    }

    #[test]
    fn the_lowest_balance_walks_the_moves_in_effective_order() {
        // Now 100: +50 at 10, −120 at 20, +70 at 30 → at 5: 100; at 10: 150; 20: 30; 30: 100.
        let h = history(&[(30, 70), (10, 50), (20, -120)]);
        assert_eq!(h.lowest_from(100, t(5)), 30);
        assert_eq!(h.lowest_from(100, t(25)), 30);
        assert_eq!(h.lowest_from(100, t(30)), 100);
        // Before every move: the balance then was 100 − 50 + 120 − 70 = 100, later lows count.
        assert_eq!(h.lowest_from(100, t(0)), 30);
    }

    #[test]
    fn moves_at_the_same_moment_count_together() {
        let h = history(&[(10, -80), (10, 80)]);
        assert_eq!(h.lowest_from(0, t(5)), 0);
    }

    #[test]
    fn moves_recorded_in_the_pass_count_and_those_before_since_do_not() {
        let mut h = history(&[]);
        h.record(t(20), Amount::new(-40).unwrap());
        h.record(t(-5), Amount::new(1_000).unwrap());
        assert_eq!(h.moves, vec![(t(20), -40)]);
        assert_eq!(h.lowest_from(60, t(10)), 60);
    }

    #[test]
    fn a_date_is_not_in_the_future_nor_beyond_the_horizon() {
        let date = |at| EffectiveDate {
            at,
            not_before: t(-60),
        };
        assert_eq!(date(t(-60)).check(t(0)), Ok(()));
        assert_eq!(date(t(0)).check(t(0)), Ok(()));
        assert_eq!(date(t(1)).check(t(0)), Err(DateError::InFuture));
        assert_eq!(date(t(-61)).check(t(0)), Err(DateError::BeyondHorizon));
        assert_eq!(date(t(-5)).backdates(t(0)), Some(t(-5)));
        assert_eq!(date(t(0)).backdates(t(0)), None);
    }
}
