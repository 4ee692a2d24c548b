//! Keeping system-account balances within ±(2^53 − 1) without serializing their writers.
//!
//! A wallet is locked `FOR UPDATE`, so the write path sees its exact balance. A system account
//! is locked `FOR SHARE` (see `posting.rs`): concurrent writers never wait for each other, and
//! none of them sees what the others have not committed yet. A check against the balance one
//! writer sees is therefore not enough on its own: two writers that each see room for M could
//! both commit. The rule used here makes it enough:
//!
//! * At most `W` transactions are open at once in the cluster, `W = max_connections +
//!   max_prepared_transactions` (PostgreSQL refuses a connection beyond that).
//! * A writer is *fast* when, for every system account it touches, everything it could move
//!   there (the sum of `|amount|` of the batch's legs on it) is at most `F = M / (2W)`, and the
//!   bounded quantities below, as it reads them after taking its `FOR SHARE` lock, are all within
//!   ±M/2. A fast writer keeps its shared lock.
//! * Any other writer retries *exclusive*: it locks the batch's system accounts `FOR UPDATE`,
//!   which waits until every writer holding them shared has committed or rolled back, and
//!   blocks new ones, then reads the exact balances and decides against them.
//!
//! Why that is correct: take any moment t at which a bounded quantity q is above M/2 (the
//! argument below is symmetric), and the last moment t0 < t at which it was not. A fast writer
//! that committed in (t0, t] read q ≤ M/2 after taking its lock, so it read it at or before t0
//! and was open at t0: there are at most W of them, each moved q by at most F, so fast writers
//! add at most W·F = M/2 above q(t0) ≤ M/2. An exclusive writer decided exactly, with no other
//! writer of the account open (fast writers take their lock before they read, so one that
//! commits after an exclusive writer also read after it, and saw q > M/2: it was not fast).
//! So q stays ≤ M. The cost: one statement per batch that touches system accounts (the sums
//! below), and a refusal or a retry only for amounts no real payment reaches; an attacker who
//! posts such amounts serializes only writers of the accounts he posts to, while he does.
//!
//! What is bounded, per system account (`held_in` and `held_out` are its open holds' credits
//! and debits, expired or not, until the transaction that ends the hold deletes them):
//! `posted + held_in ≤ M`, `posted − held_out ≥ −M`, `held_in ≤ M`, `held_out ≤ M`. Counting a
//! hold as if it were posted means a capture, which moves money from held to posted and can
//! only shrink these sums, never needs a check of its own (captures are not admitted here).
//! It follows that `posted`, `pending_in`, `pending_out` and `available` are all within ±M.
//!
//! Wallets are bounded by the same rule ([`SystemState::breach`]), with their open, unexpired
//! holds as `held_*` and no fast path: a wallet is locked `FOR UPDATE`, so its writer decides
//! against its exact state. Only the lower bound is left to the funds check for a debit that
//! has one (every overdraft limit is within M, so `insufficient_funds` refuses it first).
//!
//! The schema holds what one row can: every entry amount, `balance_after` and checkpoint is
//! within ±M. `available` and the hold totals are sums over an account's open holds, stored
//! nowhere; a trigger summing them on every hold and entry insert would take the account's
//! lock twice over and serialize the system accounts' writers, which this module exists to
//! avoid. `verify` (`balance_range`) is their independent check.

use super::money::{Amount, MAX_AMOUNT};
use crate::db::StoreError;
use std::collections::HashMap;

/// One past the range: what a saturated sum reads as when the true value is outside ±M.
pub(crate) const SATURATED: i64 = MAX_AMOUNT + 1;

/// A system account's balances as the write path bounds them (saturated at ±(M + 1)). The
/// fields stay private: a saturated figure is not an [`Amount`], and only this module does
/// arithmetic on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SystemState {
    posted: i64,
    held_in: i64,
    held_out: i64,
}

/// Which bound a posting or a hold would break (see [`SystemState::breach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Breach {
    /// The money held in (`pending_in`) would pass M.
    HeldIn,
    /// The money held out (`pending_out`) would pass M.
    HeldOut,
    /// `posted + pending_in` would pass M: a capture of the holds in could not be posted.
    Above,
    /// `posted − pending_out` (`available`) would pass −M.
    Below,
}

impl SystemState {
    /// The state of an account whose balances are known exactly (a wallet, locked).
    pub fn new(posted: Amount, held_in: Amount, held_out: Amount) -> SystemState {
        SystemState {
            posted: posted.minor_units(),
            held_in: held_in.minor_units(),
            held_out: held_out.minor_units(),
        }
    }

    /// A state as `store::reads::system_states` reads it, each figure saturated at ±(M + 1) by
    /// its SQL.
    pub(crate) fn saturated(posted: i64, held_in: i64, held_out: i64) -> SystemState {
        let state = SystemState {
            posted,
            held_in,
            held_out,
        };
        debug_assert!(state.is_saturated(), "the read saturates: {state:?}");
        state
    }

    /// Every figure within ±(M + 1): what the arithmetic below relies on not to overflow.
    fn is_saturated(self) -> bool {
        [self.posted, self.held_in, self.held_out]
            .iter()
            .all(|v| (-SATURATED..=SATURATED).contains(v))
    }

    /// Whether the state stays within the range after posting `posted` and holding `held`
    /// (signed like entries). Saturated inputs and the deltas are each within ±(M + 1), so
    /// the arithmetic cannot overflow an i64.
    pub fn after(self, posted: Amount, held: Amount) -> Option<SystemState> {
        self.breach(posted, held)
            .is_none()
            .then(|| self.moved(posted, held))
    }

    /// The first bound that posting `posted` and holding `held` would break, if any. The same
    /// rule bounds wallets (their `held_*` being their open, unexpired holds): with it, all
    /// four figures a balance shows stay within ±M (`posted` lies between `available` and
    /// `posted + pending_in`), and a capture, which only moves money from held to posted,
    /// never needs a range check of its own.
    pub fn breach(self, posted: Amount, held: Amount) -> Option<Breach> {
        let next = self.moved(posted, held);
        if next.held_in > MAX_AMOUNT {
            Some(Breach::HeldIn)
        } else if next.held_out > MAX_AMOUNT {
            Some(Breach::HeldOut)
        } else if next.posted + next.held_in > MAX_AMOUNT {
            Some(Breach::Above)
        } else if next.posted - next.held_out < -MAX_AMOUNT {
            Some(Breach::Below)
        } else {
            None
        }
    }

    /// The state after the move, unsaturated: each figure within ±(2M + 1), far inside i64,
    /// so that every sum and difference of two of them in `breach` is too.
    fn moved(self, posted: Amount, held: Amount) -> SystemState {
        assert!(
            self.is_saturated(),
            "only saturated states are moved: {self:?}"
        );
        let (posted, held) = (posted.minor_units(), held.minor_units());
        SystemState {
            posted: self.posted + posted,
            held_in: self.held_in + held.max(0),
            held_out: self.held_out + (-held).max(0),
        }
    }

    /// Whether every bounded quantity is within ±M/2: the room a fast writer relies on.
    fn far_from_bounds(self) -> bool {
        let half = MAX_AMOUNT / 2;
        (self.posted + self.held_in).abs() <= half
            && (self.posted - self.held_out).abs() <= half
            && self.held_in <= half
            && self.held_out <= half
    }
}

/// The system accounts' states, read in a statement of its own after their locks, and `W`.
pub(crate) struct SystemStates {
    pub states: HashMap<String, SystemState>,
    /// `W`: a count of sessions, not money.
    pub(crate) writers: i64,
}

impl SystemStates {
    pub fn empty() -> SystemStates {
        SystemStates {
            states: HashMap::new(),
            writers: 1,
        }
    }

    /// Whether a writer that may move up to `movement[account]` on each account can keep its
    /// shared locks (see the module comment). Accounts without a state (not created yet) start
    /// at zero.
    /// A movement saturated at M is still compared rightly: the cap is below M.
    pub fn fast(&self, movement: &HashMap<String, Amount>) -> bool {
        let cap = MAX_AMOUNT / (2 * self.writers.max(1));
        movement.iter().all(|(account, &moved)| {
            moved.minor_units() <= cap
                && self
                    .states
                    .get(account)
                    .is_none_or(|state| state.far_from_bounds())
        })
    }
}

/// A balance outside ±(2^53 − 1), written before the range was enforced for system accounts:
/// a read answers 409 `balance_out_of_range` instead of a wrong number or a 500.
#[derive(Debug, thiserror::Error)]
#[error("a balance of account {0} is outside ±9007199254740991")]
pub struct BalanceOutOfRange(pub String);

/// Why a balance could not be read: the store failed, or the balance is out of range.
#[derive(Debug, thiserror::Error)]
pub enum BalanceError {
    #[error(transparent)]
    OutOfRange(#[from] BalanceOutOfRange),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for BalanceError {
    fn from(error: sqlx::Error) -> BalanceError {
        BalanceError::Store(error.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(minor_units: i64) -> Amount {
        Amount::new(minor_units).unwrap()
    }

    #[test]
    fn holds_count_against_the_range_as_if_posted() {
        let s = SystemState {
            posted: MAX_AMOUNT - 10,
            ..SystemState::default()
        };
        assert!(s.after(a(10), a(0)).is_some());
        assert!(s.after(a(11), a(0)).is_none());
        assert!(s.after(a(0), a(11)).is_none());
        // A debit hold leaves room for credits, not for debits past −M.
        let low = SystemState {
            posted: -MAX_AMOUNT + 5,
            ..SystemState::default()
        };
        assert!(low.after(a(0), a(-5)).is_some());
        assert!(low.after(a(0), a(-6)).is_none());
        assert!(low.after(a(MAX_AMOUNT), a(0)).is_some());
    }

    #[test]
    fn each_bound_is_named_and_checked_after_the_move() {
        let s = SystemState {
            posted: MAX_AMOUNT - 10,
            held_in: 5,
            held_out: 0,
        };
        // Room for 5 more in, held or posted, since the held 5 will be posted on capture.
        assert_eq!(s.breach(a(5), a(0)), None);
        assert_eq!(s.breach(a(0), a(5)), None);
        assert_eq!(s.breach(a(6), a(0)), Some(Breach::Above));
        assert_eq!(s.breach(a(0), a(6)), Some(Breach::Above));
        // Out is bounded by available, not by posted: a refund past −M with money held out.
        let low = SystemState {
            posted: -MAX_AMOUNT + 10,
            held_in: 0,
            held_out: 4,
        };
        assert_eq!(low.breach(a(-6), a(0)), None);
        assert_eq!(low.breach(a(-7), a(0)), Some(Breach::Below));
        assert_eq!(low.breach(a(0), a(-7)), Some(Breach::Below));
        let full = SystemState {
            posted: MAX_AMOUNT,
            held_in: 0,
            held_out: MAX_AMOUNT,
        };
        assert_eq!(full.breach(a(0), a(-1)), Some(Breach::HeldOut));
        let full_in = SystemState {
            posted: -MAX_AMOUNT,
            held_in: MAX_AMOUNT,
            held_out: 0,
        };
        assert_eq!(full_in.breach(a(0), a(1)), Some(Breach::HeldIn));
    }

    #[test]
    fn saturated_reads_admit_nothing_that_keeps_them_out_of_range() {
        let s = SystemState {
            posted: SATURATED,
            ..SystemState::default()
        };
        assert!(s.after(a(1), a(0)).is_none());
        assert!(s.after(a(-MAX_AMOUNT), a(0)).is_some());
    }

    #[test]
    fn fast_needs_room_and_a_small_movement() {
        let mut states = SystemStates {
            states: HashMap::new(),
            writers: 100,
        };
        let cap = MAX_AMOUNT / 200;
        assert!(states.fast(&HashMap::from([("a".to_owned(), a(cap))])));
        assert!(!states.fast(&HashMap::from([("a".to_owned(), a(cap + 1))])));
        states.states.insert(
            "a".to_owned(),
            SystemState {
                posted: MAX_AMOUNT / 2 + 1,
                ..SystemState::default()
            },
        );
        assert!(!states.fast(&HashMap::from([("a".to_owned(), a(1))])));
    }
}
