//! Decide: one item against the locked state and the items decided before it, in memory
//! (step 4 of the order of work in [`super`]). Nothing here reads or writes the database, so
//! every rule is tested without one.

use super::chain::{self, NewEntry};
use super::load::{LockedAccount, WalletState};
use super::render::Rendered;
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::bounds::{Breach, SystemState};
use crate::ledger::effective::{DateError, EffectiveHistory};
use crate::ledger::holds;
use crate::ledger::ids::AccountId;
use crate::ledger::journal::Leg;
use crate::ledger::limits::{Activity, Owner};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::monitors::{Balances, Firing, WalletChange, Watches};
use crate::ledger::transactions::{ItemError, NewTransaction, RefusalCode, Requested};
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The accounts and wallet states of a batch, locked, and the reversal totals of its originals.
pub(super) struct LockedLedger {
    pub(super) accounts: BTreeMap<String, LockedAccount>,
    /// System accounts created on first use (clearing, exchange) that do not exist yet:
    /// decided as the active system accounts they will be, created only if a posted or held
    /// item uses them.
    pub(super) virtual_accounts: BTreeMap<String, Currency>,
    pub(super) wallets: HashMap<String, WalletState>,
    /// The running state of each existing system account (virtual ones start at zero).
    pub(super) systems: HashMap<String, SystemState>,
    /// Whether the system accounts were locked shared although the batch could take one of them
    /// near the edge of the range: it must be decided again with them locked exclusively.
    pub(super) needs_exclusive: bool,
    pub(super) reversed: HashMap<Uuid, Amount>,
    /// For every wallet a backdated item debits: its entries effective since the earliest such
    /// date (`ledger::effective`), kept up to date as items post. Loaded for exactly the
    /// wallets [`Self::backdated_shortfall`] looks up.
    pub(super) histories: HashMap<String, EffectiveHistory>,
    /// For every wallet with velocity limits: the limits and what the wallet moved within
    /// them, kept up to date as items post or hold ([`Self::velocity_refusal`]).
    pub(super) activities: HashMap<String, Activity>,
    /// The same for every account set with velocity limits that a wallet of the pass counts
    /// in (locked after the wallets), kept up to date with the items' legs on its wallets.
    pub(super) set_activities: HashMap<String, Activity>,
    /// For each wallet of the pass, the limited sets it counts in (keys of `set_activities`).
    pub(super) limited_sets: HashMap<String, Vec<String>>,
    /// The monitors of the pass's monitored wallets and of the monitored sets they count in
    /// (locked after the wallets), evaluated on the balances before and after every item of
    /// the pass that changes them ([`Self::watch`]).
    pub(super) watches: Watches,
    /// The monitors the items decided so far fired, in order, written with them.
    pub(super) firings: Vec<Firing>,
}

impl LockedLedger {
    /// The range rule of `bounds.rs`, for an item about to be posted or held, on every account
    /// it touches: wallets against their locked state, system accounts against theirs.
    fn range_errors(&self, item: &NewTransaction) -> Option<FieldError> {
        let pending = matches!(item.status, Requested::Pending { .. });
        for leg in item.journal.legs() {
            let (posted, held) = split(pending, leg.amount);
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
            let (posted, held) = split(pending, leg.amount);
            let state = self.systems.entry(id.to_owned()).or_default();
            // Checked by `range_errors` just before.
            *state = state.after(posted, held).unwrap_or(*state);
        }
    }

    pub(super) fn system_accounts_to_create(
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
    /// Refusals come in a fixed order: closed (any leg), frozen (debits), the reversal's
    /// remainder, funds; the range is checked before funds, as a request error.
    pub(super) fn decide(
        &mut self,
        item: &NewTransaction,
        now: DateTime<Utc>,
    ) -> Result<Decision, ItemError> {
        let currency = self.check_request(item, now)?;
        if item.status == Requested::Voided {
            // A record that nothing moved: no refusal applies, no balance changes.
            return Ok(Decision::Record { currency });
        }
        if let Some(refusal) = self.status_refusal(item, currency)? {
            return Ok(refusal);
        }
        if let Some(refusal) = self.reversal_refusal(item, currency) {
            return Ok(refusal);
        }
        if let Some(error) = self.range_errors(item) {
            return Err(ItemError::Invalid(vec![error]));
        }
        if let Some(refusal) = self.funds_refusal(item, currency) {
            return Ok(refusal);
        }
        if let Some(refusal) = self.velocity_refusal(item, currency, now) {
            return Ok(refusal);
        }
        self.apply_to_systems(item);
        self.record_activity(item, now);
        let before = self.watched_balances(item);
        let decision = match item.status {
            Requested::Pending { expires_at } => Ok(self.hold(item, currency, expires_at)),
            Requested::Posted | Requested::Voided => self.post(item, currency, now),
        };
        if decision.is_ok() {
            self.watch(item.id, before);
        }
        decision
    }

    /// The balances of the item's watched wallets (monitored, or in a monitored set) before it
    /// is applied, each wallet once.
    fn watched_balances(&self, item: &NewTransaction) -> Vec<(String, Balances)> {
        if self.watches.is_empty() {
            return Vec::new();
        }
        let mut watched: Vec<(String, Balances)> = Vec::new();
        for id in item.journal.legs().iter().map(|l| l.account.as_str()) {
            let seen = watched.iter().any(|(w, _)| w == id);
            if let (false, true, Some(state)) =
                (seen, self.watches.watches(id), self.wallets.get(id))
            {
                watched.push((id.to_owned(), balances(state)));
            }
        }
        watched
    }

    /// The monitors that the item just applied fired, on each watched wallet's balances and on
    /// each monitored set's before and after it: so that of many items crossing a threshold in
    /// one pass (or in parallel passes, which the wallet's and the set's locks serialize)
    /// exactly the one that crossed it fires.
    fn watch(&mut self, transaction_id: Uuid, before: Vec<(String, Balances)>) {
        let changes: Vec<WalletChange> = before
            .into_iter()
            .filter_map(|(wallet, before)| {
                let after = balances(self.wallets.get(&wallet)?);
                Some(WalletChange {
                    wallet,
                    before,
                    after,
                })
            })
            .collect();
        let fired = self.watches.change(transaction_id, &changes);
        self.firings.extend(fired);
    }

    /// Request problems, which store nothing: unknown accounts, the shape
    /// ([`check_shape`]), a hold that expires before it is made.
    fn check_request(
        &self,
        item: &NewTransaction,
        now: DateTime<Utc>,
    ) -> Result<Currency, ItemError> {
        let unknown: Vec<String> = item
            .journal
            .legs()
            .iter()
            .filter(|l| !self.accounts.contains_key(l.account.as_str()))
            .map(|l| l.account.to_string())
            .collect();
        if !unknown.is_empty() {
            return Err(ItemError::UnknownAccounts(unknown));
        }
        let currency = check_shape(item, &|leg: &Leg| self.account(leg))?;
        if let Requested::Pending { expires_at } = item.status
            && expires_at <= now
        {
            let error = FieldError::new("/expires_at", "range", "must be in the future");
            return Err(ItemError::Invalid(vec![error]));
        }
        if let Some(date) = item.effective_at
            && let Err(e) = date.check(now)
        {
            let message = match e {
                DateError::InFuture => "must not be in the future".to_owned(),
                DateError::BeyondHorizon => format!(
                    "must not be before {}, the backdating horizon",
                    date.not_before
                        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                ),
            };
            let error = FieldError::new("/effective_at", "range", message);
            return Err(ItemError::Invalid(vec![error]));
        }
        Ok(currency)
    }

    /// The locked account of a leg; every leg's account is known once `check_request` passed.
    fn account(&self, leg: &Leg) -> &LockedAccount {
        &self.accounts[leg.account.as_str()]
    }

    /// A closed account on any leg, or a frozen one on a debit (a provider's refund is not
    /// stopped by a freeze).
    fn status_refusal(
        &self,
        item: &NewTransaction,
        currency: Currency,
    ) -> Result<Option<Decision>, ItemError> {
        let legs = item.journal.legs();
        if let Some(leg) = legs
            .iter()
            .find(|l| self.account(l).status == AccountStatus::Closed)
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
            return Ok(Some(refuse(
                currency,
                RefusalCode::AccountClosed,
                format!("account {} is closed", leg.account),
            )));
        }
        let frozen_debit = legs.iter().find(|l| {
            l.amount.is_negative()
                && self.account(l).status == AccountStatus::Frozen
                && !item.provider_initiated
        });
        Ok(frozen_debit.map(|leg| {
            refuse(
                currency,
                RefusalCode::AccountFrozen,
                format!("account {} is frozen: it cannot be debited", leg.account),
            )
        }))
    }

    /// A reversal that, with those of its original already posted or decided, would give back
    /// more than the original.
    fn reversal_refusal(&self, item: &NewTransaction, currency: Currency) -> Option<Decision> {
        let r = item.reversal?;
        let already = self.reversed.get(&r.original).copied().unwrap_or_default();
        // Past the range is past any original, which is within it.
        let exceeds = already
            .checked_add(r.amount)
            .is_none_or(|total| total > r.original_amount);
        exceeds.then(|| {
            let detail = format!(
                "{} of {} is already reversed; {} more would exceed the original",
                currency.format_amount(already),
                currency.format_amount(r.original_amount),
                currency.format_amount(r.amount)
            );
            refuse(currency, RefusalCode::ReversalExceedsOriginal, detail)
        })
    }

    /// Every debit, held or posted, must leave `available` (posted − pending_out) within
    /// the overdraft limit; a debit past the safe range is past any limit.
    fn funds_refusal(&self, item: &NewTransaction, currency: Currency) -> Option<Decision> {
        let checked_debits = item
            .journal
            .legs()
            .iter()
            .filter(|l| l.amount.is_negative() && !item.provider_initiated);
        for leg in checked_debits {
            let a = self.account(leg);
            let Some(state) = self.wallets.get(a.id.as_str()) else {
                continue;
            };
            let available = state
                .chain
                .balance
                .checked_sub(state.pending_out)
                .expect("bounds.rs keeps a wallet's available within the range");
            let covered = available
                .checked_add(leg.amount)
                .is_some_and(|left| left >= a.overdraft_limit.negate());
            if !covered {
                let detail = format!(
                    "account {} has {} {currency} available (overdraft limit {}); the debit is {}",
                    a.id,
                    currency.format_amount(available),
                    currency.format_amount(a.overdraft_limit),
                    currency.format_amount(leg.amount.negate()),
                );
                return Some(refuse(currency, RefusalCode::InsufficientFunds, detail));
            }
            if let Some(detail) = self.backdated_shortfall(item, leg, state, a, currency) {
                return Some(refuse(currency, RefusalCode::InsufficientFunds, detail));
            }
        }
        None
    }

    /// A leg past one of its wallet's velocity limits. A provider's refund, money already
    /// paid out, is recorded whatever the limits (as it is whatever the funds).
    fn velocity_refusal(
        &self,
        item: &NewTransaction,
        currency: Currency,
        now: DateTime<Utc>,
    ) -> Option<Decision> {
        if item.provider_initiated {
            return None;
        }
        item.journal.legs().iter().find_map(|leg| {
            let account = leg.account.as_str();
            let own = (self.activities.get(account))
                .and_then(|a| a.refusal(leg.amount, now))
                .map(|exceeded| (Owner::Account(account.to_owned()), exceeded));
            let exceeded = own.or_else(|| {
                self.sets_of(account).find_map(|set| {
                    let exceeded = self.set_activities.get(set)?.refusal(leg.amount, now)?;
                    Some((Owner::Set(set.to_owned()), exceeded))
                })
            });
            let (owner, exceeded) = exceeded?;
            let detail = exceeded.detail(&owner.label(), currency);
            Some(refuse(currency, RefusalCode::VelocityLimitExceeded, detail))
        })
    }

    /// The limited account sets `account` counts in.
    fn sets_of(&self, account: &str) -> impl Iterator<Item = &str> {
        (self.limited_sets.get(account).into_iter().flatten()).map(String::as_str)
    }

    /// What a posted or held item moves through limited wallets, for the items after it. A
    /// posting's legs count at its ledger time, which is `now` or a little later (`chain`):
    /// counting them at `now` keeps them in every window they are in.
    fn record_activity(&mut self, item: &NewTransaction, now: DateTime<Utc>) {
        let held = matches!(item.status, Requested::Pending { .. });
        let record = |activity: &mut Activity, amount: Amount| {
            if held {
                activity.record_held(amount);
            } else {
                activity.record_posted(now, amount);
            }
        };
        for leg in item.journal.legs() {
            let account = leg.account.as_str();
            if let Some(activity) = self.activities.get_mut(account) {
                record(activity, leg.amount);
            }
            for set in self.limited_sets.get(account).into_iter().flatten() {
                if let Some(activity) = self.set_activities.get_mut(set) {
                    record(activity, leg.amount);
                }
            }
        }
    }

    /// A backdated debit must also leave `available` within the overdraft limit at every
    /// effective moment from its date to now (`ledger::effective`): the lowest posted balance
    /// by effective time since then, less what the wallet's holds reserve now.
    fn backdated_shortfall(
        &self,
        item: &NewTransaction,
        leg: &Leg,
        state: &WalletState,
        account: &LockedAccount,
        currency: Currency,
    ) -> Option<String> {
        let date = item.effective_at?;
        let history = self.histories.get(account.id.as_str())?;
        let lowest = history.lowest_from(state.chain.balance.minor_units(), date.at);
        let available_then = lowest - i128::from(state.pending_out.minor_units());
        let after = available_then + i128::from(leg.amount.minor_units());
        if after >= -i128::from(account.overdraft_limit.minor_units()) {
            return None;
        }
        let shown = |v: i128| {
            Amount::new(v.clamp(-(1 << 53) + 1, (1 << 53) - 1) as i64)
                .map_or_else(|| v.to_string(), |a| currency.format_amount(a))
        };
        Some(format!(
            "account {} had as little as {} {currency} available at a moment since {} (overdraft limit {}); the debit dated then is {}",
            account.id,
            shown(available_then),
            date.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            currency.format_amount(account.overdraft_limit),
            currency.format_amount(leg.amount.negate()),
        ))
    }

    /// A hold: its wallets' reservations grow, and one open hold per leg is written.
    fn hold(
        &mut self,
        item: &NewTransaction,
        currency: Currency,
        expires_at: DateTime<Utc>,
    ) -> Decision {
        let legs = item.journal.legs();
        for leg in legs {
            if let Some(state) = self.wallets.get_mut(leg.account.as_str()) {
                // `range_errors` refused any hold taking these past the range.
                let (total, amount) = if leg.amount.is_negative() {
                    (&mut state.pending_out, leg.amount.negate())
                } else {
                    (&mut state.pending_in, leg.amount)
                };
                *total = total
                    .checked_add(amount)
                    .expect("range_errors bounds the holds of a wallet");
            }
        }
        let holds = legs
            .iter()
            .map(|l| holds::OpenHold {
                transaction_id: item.id,
                account: l.account.to_string(),
                amount: l.amount,
                expires_at,
            })
            .collect();
        Decision::Hold {
            currency,
            holds,
            expires_at,
        }
    }

    /// A posting: each wallet's chain continues, at one ledger time for the whole
    /// transaction; a reversal adds to what its original has given back.
    fn post(
        &mut self,
        item: &NewTransaction,
        currency: Currency,
        now: DateTime<Utc>,
    ) -> Result<Decision, ItemError> {
        let legs = item.journal.legs();
        let heads = legs
            .iter()
            .filter_map(|l| self.wallets.get(l.account.as_str()));
        let ledger_time = chain::ledger_time(heads.map(|s| &s.chain), now);
        let effective_at = item.effective_at.and_then(|d| d.backdates(ledger_time));
        let mut entries = Vec::with_capacity(legs.len());
        for leg in legs {
            let (account, amount) = (leg.account.as_str(), leg.amount);
            let entry = match self.wallets.get_mut(account) {
                None => NewEntry {
                    effective_at,
                    currency: leg.currency,
                    ..NewEntry::unchained(account.to_owned(), amount)
                },
                Some(state) => {
                    let part = chain::Part {
                        transaction: item.id,
                        account,
                        currency: leg.currency.unwrap_or(currency),
                        amount,
                        ledger_time,
                        effective_at,
                    };
                    state.chain.next(part).ok_or_else(|| {
                        // Not reached: every balance after was checked above (a debit past the
                        // range is beyond any overdraft), and a journal's accounts are distinct.
                        let detail =
                            format!("the balance of {} would leave the range", leg.account);
                        let error =
                            FieldError::new(leg.amount_field.clone(), "balance_overflow", detail);
                        ItemError::Invalid(vec![error])
                    })?
                }
            };
            entries.push(entry);
        }
        if let Some(r) = item.reversal {
            let total = self.reversed.entry(r.original).or_default();
            *total = total
                .checked_add(r.amount)
                .expect("reversal_refusal checked it against the original");
        }
        for leg in legs {
            if let Some(history) = self.histories.get_mut(leg.account.as_str()) {
                history.record(effective_at.unwrap_or(ledger_time), leg.amount);
            }
        }
        Ok(Decision::Post {
            currency,
            entries,
            ledger_time,
            effective_at,
        })
    }
}

/// The bound a wallet leg would break ([`SystemState::breach`] on the wallet's locked state),
/// except `available` below −M on a debit the funds check covers: every overdraft limit is
/// within M, so that debit is refused `insufficient_funds`, as the docs say. A provider's
/// refund has no funds check, so the range alone stops it.
fn wallet_breach(
    wallet: &WalletState,
    posted: Amount,
    held: Amount,
    leg: &Leg,
    item: &NewTransaction,
) -> Option<Breach> {
    let state = SystemState::new(wallet.chain.balance, wallet.pending_in, wallet.pending_out);
    let funds_checked = leg.amount.is_negative() && !item.provider_initiated;
    state
        .breach(posted, held)
        .filter(|b| !(funds_checked && *b == Breach::Below))
}

/// Request problems found once the accounts are known: each leg's account in the leg's
/// currency (the transaction's, which is the one the caller named, else the first leg's
/// account's; an exchange names each leg's), and wallets where a wallet is due.
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
        let (due, whose) = match leg.currency {
            Some(c) => (c.code(), "this leg"),
            None => (code.as_str(), "this transaction"),
        };
        if a.currency != due {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "currency_mismatch",
                format!(
                    "account {} holds {}, but {whose} is in {due} ({field})",
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
        let created_on_use = item.created_on_use.iter().any(|(id, _)| *id == leg.account);
        if created_on_use && a.kind != AccountType::System {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "not_a_system_account",
                format!("account {} exists but is not a system account", a.id),
            ));
        }
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

/// A wallet's running state as a monitor sees it.
pub(crate) fn balances(state: &WalletState) -> Balances {
    Balances {
        posted: state.chain.balance.minor_units(),
        pending_in: state.pending_in.minor_units(),
        pending_out: state.pending_out.minor_units(),
    }
}

/// A leg's amount as (posted, held): held when the item is a hold, posted otherwise.
fn split(pending: bool, amount: Amount) -> (Amount, Amount) {
    if pending {
        (Amount::ZERO, amount)
    } else {
        (amount, Amount::ZERO)
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
        /// A backdated transaction's effective date (earlier than `ledger_time`).
        effective_at: Option<DateTime<Utc>>,
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
