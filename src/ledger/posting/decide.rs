//! Decide: one item against the locked state and the items decided before it, in memory
//! (step 4 of the order of work in [`super`]). Nothing here reads or writes the database, so
//! every rule is tested without one.

use super::chain::{self, NewEntry};
use super::load::{LockedAccount, WalletState};
use super::render::Rendered;
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::bounds::{Breach, SystemState};
use crate::ledger::holds;
use crate::ledger::ids::AccountId;
use crate::ledger::journal::Leg;
use crate::ledger::money::Currency;
use crate::ledger::transactions::{ItemError, NewTransaction, RefusalCode, Requested};
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The accounts and wallet states of a batch, locked, and the reversal totals of its originals.
pub(super) struct LockedLedger {
    pub(super) accounts: BTreeMap<String, LockedAccount>,
    /// Clearing accounts that do not exist yet: decided as the active system accounts they
    /// will be, created only if a posted or held item uses them.
    pub(super) virtual_accounts: BTreeMap<String, Currency>,
    pub(super) wallets: HashMap<String, WalletState>,
    /// The running state of each existing system account (virtual ones start at zero).
    pub(super) systems: HashMap<String, SystemState>,
    /// Whether the system accounts were locked shared although the batch could take one of them
    /// near the edge of the range: it must be decided again with them locked exclusively.
    pub(super) needs_exclusive: bool,
    pub(super) reversed: HashMap<Uuid, i64>,
}

impl LockedLedger {
    /// The range rule of `bounds.rs`, for an item about to be posted or held, on every account
    /// it touches: wallets against their locked state, system accounts against theirs.
    fn range_errors(&self, item: &NewTransaction) -> Option<FieldError> {
        let pending = matches!(item.status, Requested::Pending { .. });
        for leg in item.journal.legs() {
            let amount = leg.amount.minor_units();
            let (posted, held) = if pending { (0, amount) } else { (amount, 0) };
            let id = leg.account.as_str();
            let breach = match self.wallets.get(id) {
                Some(wallet) => wallet_breach(wallet, posted, held, leg, item),
                None => {
                    let state = self.systems.get(id).copied().unwrap_or_default();
                    state.breach(posted, held)
                }
            };
            if breach.is_some() {
                return Some(FieldError::new(
                    leg.amount_field.clone(),
                    "balance_overflow",
                    format!(
                        "the balances of {} would leave the range ±9007199254740991",
                        leg.account
                    ),
                ));
            }
        }
        None
    }

    /// Applies a posted or held item to the running state of its system accounts (wallets are
    /// updated where the decision is made).
    fn apply_to_systems(&mut self, item: &NewTransaction) {
        let pending = matches!(item.status, Requested::Pending { .. });
        for leg in item.journal.legs() {
            let id = leg.account.as_str();
            if self.wallets.contains_key(id) {
                continue;
            }
            let amount = leg.amount.minor_units();
            let (posted, held) = if pending { (0, amount) } else { (amount, 0) };
            let state = self.systems.entry(id.to_owned()).or_default();
            // Checked by `range_errors` just before.
            *state = state.after(posted, held).unwrap_or(*state);
        }
    }

    pub(super) fn clearing_accounts_to_create(
        &self,
        rows: &[&Rendered],
    ) -> Vec<(AccountId, Currency)> {
        let used: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.moves_money())
            .flat_map(|r| r.view.entries.iter().map(|l| l.account.as_str()))
            .collect();
        self.virtual_accounts
            .iter()
            .filter(|(id, _)| used.contains(id.as_str()))
            .filter_map(|(id, currency)| AccountId::parse(id).map(|a| (a, *currency)))
            .collect()
    }

    /// Decides one item against the state left by the items before it, and applies it.
    pub(super) fn decide(
        &mut self,
        item: &NewTransaction,
        now: DateTime<Utc>,
    ) -> Result<Decision, ItemError> {
        let legs = item.journal.legs();
        let unknown: Vec<String> = legs
            .iter()
            .filter(|l| !self.accounts.contains_key(l.account.as_str()))
            .map(|l| l.account.to_string())
            .collect();
        if !unknown.is_empty() {
            return Err(ItemError::UnknownAccounts(unknown));
        }
        let account = |leg: &Leg| &self.accounts[leg.account.as_str()];
        let currency = check_shape(item, &account)?;
        if let Requested::Pending { expires_at } = item.status
            && expires_at <= now
        {
            let error = FieldError::new("/expires_at", "range", "must be in the future");
            return Err(ItemError::Invalid(vec![error]));
        }
        if item.status == Requested::Voided {
            // A record that nothing moved: no refusal applies, no balance changes.
            return Ok(Decision::Record { currency });
        }

        // Refusals, in a fixed order: closed (any leg), frozen (debits), the reversal's
        // remainder, funds.
        if let Some(leg) = legs
            .iter()
            .find(|l| account(l).status == AccountStatus::Closed)
        {
            // A provider's refund is money already paid out: a stored refusal would be a
            // record nobody reads. It is answered as not storable, so the caller (the stream
            // consumer) dead-letters it and an operator decides.
            if item.provider_initiated {
                return Err(ItemError::Invalid(vec![FieldError::new(
                    leg.account_field.clone(),
                    RefusalCode::AccountClosed.as_str(),
                    format!("account {} is closed", leg.account),
                )]));
            }
            return Ok(refuse(
                currency,
                RefusalCode::AccountClosed,
                format!("account {} is closed", leg.account),
            ));
        }
        if let Some(leg) = legs.iter().find(|l| {
            l.amount.is_negative()
                && account(l).status == AccountStatus::Frozen
                && !item.provider_initiated
        }) {
            return Ok(refuse(
                currency,
                RefusalCode::AccountFrozen,
                format!("account {} is frozen: it cannot be debited", leg.account),
            ));
        }
        if let Some(r) = item.reversal {
            let already = self.reversed.get(&r.original).copied().unwrap_or(0);
            if already + r.amount > r.original_amount {
                let detail = format!(
                    "{} of {} is already reversed; {} more would exceed the original",
                    currency.format(already),
                    currency.format(r.original_amount),
                    currency.format(r.amount)
                );
                return Ok(refuse(
                    currency,
                    RefusalCode::ReversalExceedsOriginal,
                    detail,
                ));
            }
        }

        if let Some(error) = self.range_errors(item) {
            return Err(ItemError::Invalid(vec![error]));
        }
        // Every debit, held or posted, must leave `available` (posted − pending_out) within
        // the overdraft limit; a debit past the safe range is past any limit.
        let checked_debits = legs
            .iter()
            .filter(|l| l.amount.is_negative() && !item.provider_initiated);
        for leg in checked_debits {
            let a = account(leg);
            let Some(state) = self.wallets.get(a.id.as_str()) else {
                continue;
            };
            let available = state.chain.balance - state.pending_out;
            let covered = available
                .checked_add(leg.amount.minor_units())
                .is_some_and(|left| left >= -a.overdraft_limit);
            if !covered {
                let detail = format!(
                    "account {} has {} {currency} available (overdraft limit {}); the debit is {}",
                    a.id,
                    currency.format(available),
                    currency.format(a.overdraft_limit),
                    currency.format(-leg.amount.minor_units()),
                );
                return Ok(refuse(currency, RefusalCode::InsufficientFunds, detail));
            }
        }

        self.apply_to_systems(item);
        if let Requested::Pending { expires_at } = item.status {
            for leg in legs {
                if let Some(state) = self.wallets.get_mut(leg.account.as_str()) {
                    let amount = leg.amount.minor_units();
                    if amount < 0 {
                        state.pending_out -= amount;
                    } else {
                        state.pending_in += amount;
                    }
                }
            }
            let holds = legs
                .iter()
                .map(|l| holds::OpenHold {
                    transaction_id: item.id,
                    account: l.account.to_string(),
                    amount: l.amount.minor_units(),
                    expires_at,
                })
                .collect();
            return Ok(Decision::Hold {
                currency,
                holds,
                expires_at,
            });
        }

        let heads = legs
            .iter()
            .filter_map(|l| self.wallets.get(l.account.as_str()));
        let ledger_time = chain::ledger_time(heads.map(|s| &s.chain), now);
        let mut entries = Vec::with_capacity(legs.len());
        for leg in legs {
            let (account, amount) = (leg.account.to_string(), leg.amount.minor_units());
            let entry = match self.wallets.get_mut(leg.account.as_str()) {
                None => NewEntry::unchained(account, amount),
                Some(state) => state
                    .chain
                    .next(account, amount, ledger_time)
                    .ok_or_else(|| {
                        // Not reached: every balance after was checked above (a debit past the
                        // range is beyond any overdraft), and a journal's accounts are distinct.
                        let detail =
                            format!("the balance of {} would leave the range", leg.account);
                        let error =
                            FieldError::new(leg.amount_field.clone(), "balance_overflow", detail);
                        ItemError::Invalid(vec![error])
                    })?,
            };
            entries.push(entry);
        }
        if let Some(r) = item.reversal {
            *self.reversed.entry(r.original).or_default() += r.amount;
        }
        Ok(Decision::Post {
            currency,
            entries,
            ledger_time,
        })
    }
}

/// The bound a wallet leg would break ([`SystemState::breach`] on the wallet's locked state),
/// except `available` below −M on a debit the funds check covers: every overdraft limit is
/// within M, so that debit is refused `insufficient_funds`, as the docs say. A provider's
/// refund has no funds check, so the range alone stops it.
fn wallet_breach(
    wallet: &WalletState,
    posted: i64,
    held: i64,
    leg: &Leg,
    item: &NewTransaction,
) -> Option<Breach> {
    let state = SystemState {
        posted: wallet.chain.balance,
        held_in: wallet.pending_in,
        held_out: wallet.pending_out,
    };
    let funds_checked = leg.amount.is_negative() && !item.provider_initiated;
    state
        .breach(posted, held)
        .filter(|b| !(funds_checked && *b == Breach::Below))
}

/// Request problems found once the accounts are known: one currency per transaction (the
/// one the caller named, else the first leg's account's), and wallets where a wallet is due.
fn check_shape<'a>(
    item: &NewTransaction,
    account: &impl Fn(&Leg) -> &'a LockedAccount,
) -> Result<Currency, ItemError> {
    let legs = item.journal.legs();
    let (code, field) = match &item.currency {
        Some((c, field)) => (c.code().to_owned(), field.clone()),
        None => (
            account(&legs[0]).currency.clone(),
            legs[0].account_field.clone(),
        ),
    };
    let mut errors = Vec::new();
    for leg in legs {
        let a = account(leg);
        if a.currency != code {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "currency_mismatch",
                format!(
                    "account {} holds {}, but this transaction is in {code} ({field})",
                    a.id, a.currency
                ),
            ));
        }
        if leg.must_be_wallet && a.kind != AccountType::Wallet {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "not_a_wallet",
                format!("account {} is not a wallet", a.id),
            ));
        }
    }
    if let Some((clearing, _)) = &item.clearing_account
        && let Some(leg) = legs.iter().find(|l| &l.account == clearing)
        && account(leg).kind != AccountType::System
    {
        errors.push(FieldError::new(
            "/provider",
            "not_a_system_account",
            format!("account {clearing} exists but is not a system account"),
        ));
    }
    let currency = Currency::parse(&code);
    if currency.is_none() {
        errors.push(FieldError::new(
            field,
            "unknown_currency",
            format!("unknown currency {code}"),
        ));
    }
    match currency {
        Some(c) if errors.is_empty() => Ok(c),
        _ => Err(ItemError::Invalid(errors)),
    }
}

fn refuse(currency: Currency, code: RefusalCode, detail: String) -> Decision {
    Decision::Refuse {
        currency,
        code,
        detail,
    }
}

#[derive(Debug)]
pub(super) enum Decision {
    Post {
        currency: Currency,
        entries: Vec<NewEntry>,
        ledger_time: DateTime<Utc>,
    },
    Hold {
        currency: Currency,
        holds: Vec<holds::OpenHold>,
        expires_at: DateTime<Utc>,
    },
    Refuse {
        currency: Currency,
        code: RefusalCode,
        detail: String,
    },
    /// Stored as `voided`: see [`Requested::Voided`].
    Record { currency: Currency },
}

#[cfg(test)]
mod tests;
