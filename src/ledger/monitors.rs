//! Balance monitors: a condition on a wallet's (or an account set's) `posted`, `available` or
//! `pending_out` balance that fires once when a change makes it true, and re-arms when a later
//! change makes it false (docs/api.md, Balance monitors). This module is the rule, pure: what
//! a condition is, and which changes of a sequence of balance states cross it. The posting
//! transaction and a hold's capture or void load the monitors of their monitored wallets (and
//! of the monitored sets those wallets count in, locked after them) into [`Watches`], follow
//! the balances through every change they make, and write each [`Firing`] with the change.

use super::owner::Owner;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

pub mod store;

/// Most monitors one account may have: each is evaluated on every change of its balances.
pub const MAX_MONITORS_PER_ACCOUNT: i64 = 20;

/// Which balance a monitor watches.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[schema(as = MonitorField)]
pub enum Field {
    /// The sum of the wallet's entries.
    Posted,
    /// `posted` less what its holds reserve going out (`pending_out`).
    Available,
    /// What its open holds reserve going out.
    PendingOut,
}

impl Field {
    pub const ALL: [Field; 3] = [Field::Posted, Field::Available, Field::PendingOut];

    pub fn as_str(self) -> &'static str {
        match self {
            Field::Posted => "posted",
            Field::Available => "available",
            Field::PendingOut => "pending_out",
        }
    }

    pub fn parse(stored: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.as_str() == stored)
    }
}

/// How the balance compares with the monitor's value.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[schema(as = MonitorOperator)]
pub enum Operator {
    /// Below the value.
    Lt,
    /// At or below.
    Lte,
    /// Above.
    Gt,
    /// At or above.
    Gte,
}

impl Operator {
    pub const ALL: [Operator; 4] = [Operator::Lt, Operator::Lte, Operator::Gt, Operator::Gte];

    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
        }
    }

    pub fn parse(stored: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.as_str() == stored)
    }
}

/// A wallet's balances at one moment, in minor units. `available` is derived, so it can never
/// disagree with the two it comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Balances {
    pub posted: i64,
    pub pending_in: i64,
    pub pending_out: i64,
}

impl Balances {
    /// `posted − pending_out`: both are within ±(2^53 − 1), so this never overflows an i64.
    pub fn available(&self) -> i64 {
        self.posted - self.pending_out
    }

    /// These balances moved by one wallet's change from `before` to `after`: how a set's
    /// balances follow its wallets'. Saturating: a set's sum may pass any wallet's range.
    pub fn moved_by(&self, before: &Balances, after: &Balances) -> Balances {
        let moved = |total: i64, from: i64, to: i64| total.saturating_add(to - from);
        Balances {
            posted: moved(self.posted, before.posted, after.posted),
            pending_in: moved(self.pending_in, before.pending_in, after.pending_in),
            pending_out: moved(self.pending_out, before.pending_out, after.pending_out),
        }
    }

    pub fn get(&self, field: Field) -> i64 {
        match field {
            Field::Posted => self.posted,
            Field::Available => self.available(),
            Field::PendingOut => self.pending_out,
        }
    }
}

/// A monitor's condition: `field operator value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    pub field: Field,
    pub operator: Operator,
    pub value: i64,
}

impl Condition {
    /// Whether it holds on these balances.
    pub fn holds(&self, balances: &Balances) -> bool {
        let balance = balances.get(self.field);
        match self.operator {
            Operator::Lt => balance < self.value,
            Operator::Lte => balance <= self.value,
            Operator::Gt => balance > self.value,
            Operator::Gte => balance >= self.value,
        }
    }

    /// Whether a change from `before` to `after` fires it: false before, true after. A change
    /// that leaves it true fires nothing (it is triggered, not armed); one that makes it
    /// false re-arms it, so the next crossing fires again.
    pub fn crossed(&self, before: &Balances, after: &Balances) -> bool {
        !self.holds(before) && self.holds(after)
    }

    /// The changes of a sequence of balance states that fire it: `i` for the change from
    /// `states[i]` to `states[i + 1]`.
    pub fn crossings(&self, states: &[Balances]) -> Vec<usize> {
        states
            .windows(2)
            .enumerate()
            .filter(|(_, w)| self.crossed(&w[0], &w[1]))
            .map(|(i, _)| i)
            .collect()
    }
}

/// A monitor as the write path evaluates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitor {
    pub id: Uuid,
    pub condition: Condition,
}

/// One monitor fired by one change: written as a `balance.monitor_triggered` event and as the
/// monitor's last firing, in the change's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    pub monitor: Uuid,
    pub condition: Condition,
    /// The wallet or the account set whose balances crossed.
    pub owner: Owner,
    pub currency: String,
    pub transaction_id: Uuid,
    pub before: Balances,
    pub after: Balances,
}

/// A monitored wallet's (or set's) monitors, evaluated on each change of its balances in one
/// pass.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    pub currency: String,
    pub monitors: Vec<Monitor>,
}

impl Watch {
    /// The firings of one change of `owner`'s balances by `transaction_id`.
    pub fn change(
        &self,
        owner: &Owner,
        transaction_id: Uuid,
        before: Balances,
        after: Balances,
    ) -> Vec<Firing> {
        self.monitors
            .iter()
            .filter(|m| m.condition.crossed(&before, &after))
            .map(|m| Firing {
                monitor: m.id,
                condition: m.condition,
                owner: owner.clone(),
                currency: self.currency.clone(),
                transaction_id,
                before,
                after,
            })
            .collect()
    }
}

/// A monitored set's monitors and its balances as the pass has left them so far: read under
/// the set's lock, then moved by every change of its wallets the pass makes.
#[derive(Debug, Clone, Default)]
pub struct SetWatch {
    pub watch: Watch,
    pub balances: Balances,
}

/// One wallet's balances before and after one transaction's change of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletChange {
    pub wallet: String,
    pub before: Balances,
    pub after: Balances,
}

/// Everything a pass (a posting's, a capture's, a void's) evaluates: the monitors of its
/// monitored wallets, and those of the monitored sets its wallets count in.
#[derive(Debug, Clone, Default)]
pub struct Watches {
    pub wallets: HashMap<String, Watch>,
    pub sets: BTreeMap<String, SetWatch>,
    /// For each wallet of the pass that counts in a monitored set: those sets (keys of `sets`).
    pub sets_of: HashMap<String, Vec<String>>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.wallets.is_empty() && self.sets.is_empty()
    }

    /// Whether a change of this wallet's balances is evaluated: it has monitors, or counts in
    /// a set that has.
    pub fn watches(&self, wallet: &str) -> bool {
        self.wallets.contains_key(wallet) || self.sets_of.contains_key(wallet)
    }

    /// The firings of one transaction's changes, one per wallet it changed: each wallet's
    /// monitors on its own balances before and after; then each set's monitors on the set's
    /// balances before and after all of its wallets' changes (one transaction is one change of
    /// the set, however many of its wallets it moves), which the set keeps for the next.
    pub fn change(&mut self, transaction_id: Uuid, changes: &[WalletChange]) -> Vec<Firing> {
        let mut firings = Vec::new();
        let mut moved: BTreeMap<&str, Balances> = BTreeMap::new();
        for c in changes {
            if let Some(watch) = self.wallets.get(&c.wallet) {
                let owner = Owner::Account(c.wallet.clone());
                firings.extend(watch.change(&owner, transaction_id, c.before, c.after));
            }
            for set in self.sets_of.get(&c.wallet).into_iter().flatten() {
                let Some(watched) = self.sets.get(set) else {
                    continue;
                };
                let total = moved.entry(set).or_insert(watched.balances);
                *total = total.moved_by(&c.before, &c.after);
            }
        }
        for (set, after) in moved {
            let Some(watched) = self.sets.get_mut(set) else {
                continue; // not reached: `moved` holds only keys of `sets`
            };
            let owner = Owner::Set(set.to_owned());
            let before = watched.balances;
            firings.extend(watched.watch.change(&owner, transaction_id, before, after));
            watched.balances = after;
        }
        firings
    }
}

#[cfg(test)]
mod tests;
