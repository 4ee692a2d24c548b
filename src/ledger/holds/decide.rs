//! Decide: what a post or void does to a loaded hold, and the entries a capture posts, in
//! memory. Nothing here reads or writes the database, so every rule is tested without one.

use super::Action;
use super::load::{HeldLeg, LoadedHold, LockedWallets};
use crate::ledger::compare;
use crate::ledger::money::{Amount, Currency};
use crate::ledger::monitors::{Balances, Firing, WalletChange, Watches};
use crate::ledger::posting::{NewEntry, Part, WalletState, balances, ledger_time};
use crate::ledger::transactions::TransactionStatus;
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

/// What a post or void of a hold comes to.
#[derive(Debug, PartialEq)]
pub(crate) enum Decision {
    /// The same request ended the hold before: its stored answer.
    Replay {
        body: String,
    },
    /// The same action ended the hold before, asked for differently.
    Mismatch {
        differing_fields: Vec<String>,
    },
    /// The hold is in a status this action cannot leave (or was never a hold).
    InvalidTransition {
        current: TransactionStatus,
    },
    /// Pending but past its expiry: it is expired now, by the sweeper's rule, and the answer
    /// is that it is expired.
    Expire,
    Invalid(FieldError),
    /// Release the hold; `request` is stored so that a repeat replays the answer.
    Void {
        request: Value,
    },
    Capture(Capture),
}

/// A capture as decided before its wallets are locked.
#[derive(Debug, PartialEq)]
pub(crate) struct Capture {
    pub request: Value,
    /// What a two-leg hold's capture records (also when whole); a multi-leg hold is captured
    /// whole and records none.
    pub captured: Option<Amount>,
    /// The hold's legs, each scaled to the captured amount with its own sign.
    pub legs: Vec<HeldLeg>,
}

/// The post or void `action` (capturing `amount`, if given) of `hold`.
pub(crate) fn decide(hold: &LoadedHold, action: Action, amount: Option<Amount>) -> Decision {
    let request = request(hold, action, amount);
    match hold.status {
        TransactionStatus::Pending if hold.past_expiry => Decision::Expire,
        TransactionStatus::Pending => match action {
            Action::Void => Decision::Void { request },
            Action::Post => capture(hold, amount, request),
        },
        TransactionStatus::Posted
        | TransactionStatus::Voided
        | TransactionStatus::Rejected
        | TransactionStatus::Expired => ended(hold, action, &request),
    }
}

/// The request as stored and compared on a repeat. A two-leg hold's capture defaults to the
/// whole amount, so `{}` and `{"amount": held}` are the same request; a multi-leg hold is
/// captured whole.
fn request(hold: &LoadedHold, action: Action, amount: Option<Amount>) -> Value {
    match action {
        Action::Post => {
            let whole = (hold.legs.len() == 2).then_some(hold.held);
            json!({"action": action.as_str(), "amount": amount.or(whole)})
        }
        Action::Void => json!({"action": action.as_str()}),
    }
}

fn capture(hold: &LoadedHold, amount: Option<Amount>, request: Value) -> Decision {
    let two_leg = hold.legs.len() == 2;
    let captured = match amount {
        // A whole two-leg capture records its amount too, so `{}` and `{"amount": held}`
        // store the same answer.
        None => two_leg.then_some(hold.held),
        Some(_) if !two_leg => {
            let message =
                "a partial capture applies to two-leg holds; omit amount to capture in full";
            let error = FieldError::new("/amount", "not_applicable", message);
            return Decision::Invalid(error);
        }
        Some(a) if a > hold.held => {
            let message = format!(
                "exceeds the held {}",
                hold.currency.format_amount(hold.held)
            );
            return Decision::Invalid(FieldError::new("/amount", "range", message));
        }
        Some(a) => Some(a),
    };
    let legs = hold
        .legs
        .iter()
        .map(|l| HeldLeg {
            account: l.account.clone(),
            amount: captured.map_or(l.amount, |c| signed_like(c, l.amount)),
            currency: l.currency,
        })
        .collect();
    Decision::Capture(Capture {
        request,
        captured,
        legs,
    })
}

/// `amount` with the sign of `leg`: a two-leg hold debits one account what it credits the
/// other, so a partial capture keeps each leg's direction.
fn signed_like(amount: Amount, leg: Amount) -> Amount {
    match leg.minor_units().signum() {
        -1 => amount.negate(),
        0 => Amount::ZERO,
        _ => amount,
    }
}

/// The answer to a post or void of a hold that is no longer pending: the stored answer when
/// the same action ended it (replayed, or a mismatch), else the status it is in.
fn ended(hold: &LoadedHold, action: Action, request: &Value) -> Decision {
    match &hold.resolution {
        Some(stored) if hold.status == action.target() => {
            let differing_fields = compare::differing_fields(&stored.request, request);
            if differing_fields.is_empty() {
                let body = stored.body.clone();
                Decision::Replay { body }
            } else {
                Decision::Mismatch { differing_fields }
            }
        }
        _ => Decision::InvalidTransition {
            current: hold.status,
        },
    }
}

/// The entries a capture posts, once its wallets are locked.
#[derive(Debug)]
pub(crate) enum Entries {
    /// Each wallet's chain continued at `ledger_time`; system accounts are not chained.
    Ready {
        entries: Vec<NewEntry>,
        ledger_time: DateTime<Utc>,
    },
    /// The hold expired before its wallets could be locked.
    Expired,
    /// A balance would leave the safe range.
    Invalid(FieldError),
}

/// The capture's entries against its locked wallets, at `now` or later (ledger time never
/// decreases along a chain). Funds are not checked: the hold reserved them.
pub(crate) fn entries(
    locked: LockedWallets,
    hold: HoldTerms,
    legs: &[HeldLeg],
    now: DateTime<Utc>,
) -> Entries {
    let LockedWallets::Ready(mut states) = locked else {
        return Entries::Expired;
    };
    let ledger_time = ledger_time(states.values().map(|s| &s.chain), now);
    let mut entries = Vec::with_capacity(legs.len());
    for leg in legs {
        let entry = match states.get_mut(&leg.account) {
            None => NewEntry {
                currency: leg.currency,
                ..NewEntry::unchained(leg.account.clone(), leg.amount)
            },
            Some(s) => {
                let part = Part {
                    transaction: hold.id,
                    account: &leg.account,
                    currency: leg.currency.unwrap_or(hold.currency),
                    amount: leg.amount,
                    ledger_time,
                    effective_at: None,
                };
                match s.chain.next(part) {
                    Some(entry) => entry,
                    None => {
                        let message = "capturing would take a balance past 9007199254740991";
                        let error = FieldError::new("/amount", "balance_overflow", message);
                        return Entries::Invalid(error);
                    }
                }
            }
        };
        entries.push(entry);
    }
    Entries::Ready {
        entries,
        ledger_time,
    }
}

/// Whose entries a capture writes: the hold's transaction, in its currency.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HoldTerms {
    pub id: Uuid,
    pub currency: Currency,
}

/// A wallet's balances once this hold is released: what its legs on the wallet reserved (going
/// out or coming in) no longer counts. A capture releases the whole hold, whatever it
/// captures, and posts the captured legs on top.
pub(crate) fn released(before: Balances, legs: &[HeldLeg], account: &str) -> Balances {
    legs.iter()
        .filter(|l| l.account == account)
        .fold(before, |b, l| {
            let amount = l.amount.minor_units();
            if amount < 0 {
                Balances {
                    pending_out: b.pending_out + amount,
                    ..b
                }
            } else {
                Balances {
                    pending_in: b.pending_in - amount,
                    ..b
                }
            }
        })
}

/// The firings of a capture: each watched wallet's balances before it (`states`, as locked)
/// and after it (the hold released, the captured entries posted), evaluated on the wallets'
/// monitors and on their monitored sets'.
pub(crate) fn capture_firings(
    transaction_id: uuid::Uuid,
    hold_legs: &[HeldLeg],
    before: &std::collections::HashMap<String, WalletState>,
    entries: &[NewEntry],
    watches: &mut Watches,
) -> Vec<Firing> {
    let mut wallets: Vec<&String> = before.keys().filter(|id| watches.watches(id)).collect();
    wallets.sort();
    let changes: Vec<WalletChange> = wallets
        .into_iter()
        .map(|id| {
            let before = balances(&before[id]);
            let mut after = released(before, hold_legs, id);
            // The wallet's last captured entry carries its balance after the capture.
            let mut posted =
                (entries.iter().filter(|e| e.account == *id)).filter_map(|e| e.balance_after);
            if let Some(posted) = posted.next_back() {
                after.posted = posted.minor_units();
            }
            WalletChange {
                wallet: id.clone(),
                before,
                after,
            }
        })
        .collect();
    watches.change(transaction_id, &changes)
}

#[cfg(test)]
mod tests;
