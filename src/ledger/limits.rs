//! Velocity limits: at most an amount (or a count of movements) through a wallet per rolling
//! window, checked by the posting transaction under the wallet's lock (docs/api.md, Velocity
//! limits). This module is the rule, pure: what a limit is, what counts against it, and
//! whether one more movement fits. `posting` loads a limited wallet's recent activity after
//! its lock and asks [`Activity::refusal`] for each leg it decides.

use super::money::{Amount, Currency};
use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

pub mod store;

/// The shortest and the longest window a limit may have, in seconds (1 minute, 31 days).
pub const MIN_WINDOW_SECONDS: i32 = 60;
pub const MAX_WINDOW_SECONDS: i32 = 31 * 24 * 60 * 60;
/// Most limits one account may have: each is checked on every movement through it.
pub const MAX_LIMITS_PER_ACCOUNT: i64 = 20;

pub use super::owner::Owner;

/// Which movements a limit counts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Money leaving the wallet (its negative legs).
    Debit,
    /// Money arriving.
    Credit,
    /// Both, gross: a debit of 5 and a credit of 5 use 10.
    Both,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Debit => "debit",
            Direction::Credit => "credit",
            Direction::Both => "both",
        }
    }

    pub fn parse(stored: &str) -> Option<Direction> {
        [Direction::Debit, Direction::Credit, Direction::Both]
            .into_iter()
            .find(|d| d.as_str() == stored)
    }

    /// Whether a leg of this signed amount counts.
    fn counts(self, amount: Amount) -> bool {
        match self {
            Direction::Debit => amount.is_negative(),
            Direction::Credit => !amount.is_negative(),
            Direction::Both => true,
        }
    }
}

/// What a limit bounds: the sum of the amounts moved, or how many movements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Amount(Amount),
    Count(i64),
}

/// One limit of one wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VelocityLimit {
    pub id: Uuid,
    pub direction: Direction,
    pub bound: Bound,
    pub window_seconds: i32,
}

impl VelocityLimit {
    fn window(&self) -> TimeDelta {
        TimeDelta::seconds(i64::from(self.window_seconds))
    }
}

/// What a wallet moved recently, as the posting transaction sees it under the wallet's lock:
/// its posted legs since the start of its longest window, and its open holds. A hold counts
/// from the moment it is placed until it is captured (then its entry counts), voided or
/// expires: the money it reserves is on its way out, so a limit cannot be dodged by holding
/// first and capturing later.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// In id order ([`Activity::new`] sorts them), the order they are checked in.
    limits: Vec<VelocityLimit>,
    /// Posted legs `(ledger time, signed amount)`, in any order.
    pub posted: Vec<(DateTime<Utc>, Amount)>,
    /// Signed amounts of the wallet's open holds.
    pub held: Vec<Amount>,
}

/// A movement a limit does not let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub limit: VelocityLimit,
    /// What the window still allows: an amount, or a count.
    pub remaining: i64,
}

impl Activity {
    /// The limits (sorted here, once, not per leg checked) with what the wallet moved.
    pub fn new(
        mut limits: Vec<VelocityLimit>,
        posted: Vec<(DateTime<Utc>, Amount)>,
        held: Vec<Amount>,
    ) -> Activity {
        limits.sort_by_key(|l| l.id);
        Activity {
            limits,
            posted,
            held,
        }
    }

    /// The longest window of the limits: how far back posted legs are read.
    pub fn longest_window(limits: &[VelocityLimit]) -> Option<TimeDelta> {
        limits.iter().map(VelocityLimit::window).max()
    }

    /// The first limit (in id order) that one more leg of `amount` at `now` would exceed.
    pub fn refusal(&self, amount: Amount, now: DateTime<Utc>) -> Option<Exceeded> {
        self.limits
            .iter()
            .filter(|l| l.direction.counts(amount))
            .find_map(|limit| self.exceeded(limit, amount, now))
    }

    fn exceeded(
        &self,
        limit: &VelocityLimit,
        amount: Amount,
        now: DateTime<Utc>,
    ) -> Option<Exceeded> {
        let since = now - limit.window();
        let counted = self
            .posted
            .iter()
            .filter(|(at, _)| *at > since)
            .map(|(_, a)| *a)
            .chain(self.held.iter().copied())
            .filter(|a| limit.direction.counts(*a));
        let (used, maximum, this) = match limit.bound {
            // i128: a sum of many amounts of up to 2^53 cannot overflow it.
            Bound::Amount(max) => (
                counted
                    .map(|a| i128::from(a.abs().minor_units()))
                    .sum::<i128>(),
                i128::from(max.minor_units()),
                i128::from(amount.abs().minor_units()),
            ),
            Bound::Count(max) => (counted.count() as i128, i128::from(max), 1),
        };
        (used + this > maximum).then(|| Exceeded {
            limit: limit.clone(),
            remaining: (maximum - used).clamp(0, i128::from(i64::MAX)) as i64,
        })
    }

    /// A leg posted at `at`: it counts from now on.
    pub fn record_posted(&mut self, at: DateTime<Utc>, amount: Amount) {
        self.posted.push((at, amount));
    }

    /// A hold placed: it counts while open.
    pub fn record_held(&mut self, amount: Amount) {
        self.held.push(amount);
    }
}

impl Exceeded {
    /// The refusal's detail: which limit (of `owner`, [`Owner::label`]), what it allows, what
    /// is left.
    pub fn detail(&self, owner: &str, currency: Currency) -> String {
        let l = &self.limit;
        let (allowed, left) = match l.bound {
            Bound::Amount(max) => (
                format!("{} {currency}", currency.format_amount(max)),
                format!("{} {currency}", currency.format(self.remaining)),
            ),
            Bound::Count(max) => (
                format!("{max} movements"),
                format!("{} movements", self.remaining),
            ),
        };
        format!(
            "velocity limit {} of {owner}: at most {allowed} ({}) per {} s; {left} left in the window",
            l.id,
            l.direction.as_str(),
            l.window_seconds
        )
    }
}

#[cfg(test)]
mod tests;
