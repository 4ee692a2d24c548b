//! Account sets: a named group of wallets and of other sets, whose balances are the sums of
//! the wallets that count in it (directly or through nested sets, each wallet once).
//!
//! How a set's balance stays cheap to read however many members it has (docs/performance.md,
//! "Account sets"): every entry of a wallet in a set also writes an insert-only movement row
//! per set it counts in, and a wallet joining or leaving writes its posted balance at that
//! moment, under its row lock. The posted balance is then the set's latest checkpoint plus the
//! movements since, like a system account's (`checkpoints.rs`); pending amounts are copies of
//! the members' open holds. Nothing is updated in place, so writers of different members never
//! wait for each other.
//!
//! This module holds the decisions, pure and tested without a database; `store` the
//! statements.

pub mod bookkeeping;
pub mod membership;
pub mod store;
#[cfg(test)]
mod tests;

use crate::ledger::bounds::BalanceOutOfRange;
use crate::ledger::money::Amount;
use crate::ledger::views::Balances;
use std::collections::BTreeSet;

/// A member of a set: a wallet, or another set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Member {
    Account(String),
    Set(String),
}

impl Member {
    /// The form a path names it by: `account:<id>` or `set:<id>`. Ids may hold `:` themselves;
    /// only the first one separates, and the prefix is one of two words.
    pub fn parse(reference: &str) -> Option<Member> {
        let (kind, id) = reference.split_once(':')?;
        if id.is_empty() {
            return None;
        }
        match kind {
            "account" => Some(Member::Account(id.to_owned())),
            "set" => Some(Member::Set(id.to_owned())),
            _ => None,
        }
    }

    pub fn reference(&self) -> String {
        match self {
            Member::Account(id) => format!("account:{id}"),
            Member::Set(id) => format!("set:{id}"),
        }
    }
}

/// A (wallet, set) pair: the wallet counts in the set.
pub type Counted = (String, String);

/// What a membership change does to the pairs of the wallets it touches.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClosureChange {
    /// Pairs that start counting: the wallet joins the set with its balances of now.
    pub joined: Vec<Counted>,
    /// Pairs that stop counting: the wallet leaves the set with its balances of now.
    pub left: Vec<Counted>,
}

impl ClosureChange {
    /// From the pairs stored before the change and the pairs the membership implies after it,
    /// both for the same wallets.
    pub fn between(before: &BTreeSet<Counted>, after: &BTreeSet<Counted>) -> ClosureChange {
        ClosureChange {
            joined: after.difference(before).cloned().collect(),
            left: before.difference(after).cloned().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.joined.is_empty() && self.left.is_empty()
    }

    /// The wallets whose sets change, sorted and once each (the order their rows are locked
    /// in).
    pub fn wallets(&self) -> Vec<String> {
        let wallets: BTreeSet<&String> = self
            .joined
            .iter()
            .chain(&self.left)
            .map(|(wallet, _)| wallet)
            .collect();
        wallets.into_iter().cloned().collect()
    }

    /// The sets whose wallets change, sorted and once each: locked after the wallets, as a
    /// posting locks the sets with rules, so that a set's limits and monitors see a join or a
    /// leave wholly before or wholly after a change of its wallets.
    pub fn sets(&self) -> Vec<String> {
        let sets: BTreeSet<&String> = (self.joined.iter().chain(&self.left))
            .map(|(_, set)| set)
            .collect();
        sets.into_iter().cloned().collect()
    }
}

/// Whether adding `child` under `parent` would make a set contain itself: `descendants` are
/// the sets under `child` (itself included).
pub fn makes_cycle(parent: &str, descendants: &BTreeSet<String>) -> bool {
    descendants.contains(parent)
}

/// A set's balances from its sums, each read saturated one past ±(2^53 − 1): a set whose
/// members together hold more than one balance may (its sum is not bounded by any single
/// write) reads as out of range rather than as a wrong number.
pub fn balances(
    set: &str,
    posted: i64,
    pending_in: i64,
    pending_out: i64,
) -> Result<Balances, BalanceOutOfRange> {
    let in_range = |v| Amount::new(v).ok_or_else(|| BalanceOutOfRange(set.to_owned()));
    let balances = Balances {
        posted: in_range(posted)?,
        pending_in: in_range(pending_in)?,
        pending_out: in_range(pending_out)?,
    };
    // `available` must be a balance too; `Balances::available` relies on it.
    in_range(posted - pending_out)?;
    Ok(balances)
}

/// What each set's stored totals must be: the sums over the wallets that count in it, from
/// `counted` (wallet, set) pairs and each wallet's `(posted, pending_in, pending_out)`. Summed
/// in i128, so no member's balance makes the sum wrap.
pub fn expected_totals(
    counted: &[Counted],
    wallets: &std::collections::HashMap<String, (i64, i64, i64)>,
) -> std::collections::BTreeMap<String, (i128, i128, i128)> {
    let mut totals = std::collections::BTreeMap::new();
    for (wallet, set) in counted {
        let (posted, pending_in, pending_out) = wallets.get(wallet).copied().unwrap_or_default();
        let total: &mut (i128, i128, i128) = totals.entry(set.clone()).or_default();
        total.0 += i128::from(posted);
        total.1 += i128::from(pending_in);
        total.2 += i128::from(pending_out);
    }
    totals
}
