//! Load: the locks a pass takes, in their fixed order (or, on Citus, a small group's accounts
//! at once, without waiting), and the state read after them, typed (steps 1 to 3 of the order
//! of work in [`super`]).

use super::chain::ChainHead;
use super::decide::LockedLedger;
use super::{LockWait, begin, is_lock_timeout};
use crate::db::StoreError;
use crate::ledger::Outcome;
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::bounds::SystemState;
use crate::ledger::effective::{self, EffectiveHistory};
use crate::ledger::ids::AccountId;
use crate::ledger::limits::{self, Activity};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::monitors;
use crate::ledger::sets;
use crate::ledger::sets::bookkeeping::RuledSet;
use crate::ledger::store::{Db, locks, reads};
use crate::ledger::transactions::{NewTransaction, WriteError};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The clearing accounts this pass decided as new and empty, locked now that they exist and
/// read again: still empty, unless a concurrent request created one first and wrote to it,
/// which the decisions did not see (the pass is then decided again, against it). Locking and
/// reading here is what a system account's bound needs from every writer (`bounds.rs`).
pub(super) async fn still_empty(
    db: &mut Db<'_>,
    created: &[(AccountId, Currency)],
    systems: SystemLocks,
) -> Result<bool, StoreError> {
    let mut ids: Vec<String> = created.iter().map(|(id, _)| id.to_string()).collect();
    ids.sort();
    locks::lock_accounts(db, &ids, systems).await?;
    let states = reads::system_states(db, &ids).await?;
    Ok(states.states.values().all(|s| *s == SystemState::default()))
}

/// A committed creation as its row stores it: never changes once committed.
#[derive(Debug, Clone)]
pub struct StoredCreation {
    pub request: Value,
    pub outcome: Outcome,
}

/// A locked account as decisions need it.
#[derive(Debug, Clone)]
pub(crate) struct LockedAccount {
    pub id: String,
    pub currency: String,
    pub kind: AccountType,
    pub status: AccountStatus,
    pub overdraft_limit: Amount,
    /// Whether it has velocity limits (`ledger::limits`), read only then.
    pub has_limits: bool,
    /// Whether it has balance monitors (`ledger::monitors`), read only then.
    pub has_monitors: bool,
    /// Whether it counts in an account set (`ledger::sets`): its entries and holds are then
    /// recorded for those sets too.
    pub in_sets: bool,
}

/// A wallet's running state while a batch is decided: where its chain continues and what
/// its open holds reserve.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WalletState {
    pub chain: ChainHead,
    pub pending_out: Amount,
    pub pending_in: Amount,
}

/// How system accounts are locked: shared, so that they never serialize writers, or
/// exclusively, by a writer that may take one near the edge of its range (see `bounds.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SystemLocks {
    Shared,
    Exclusive,
}

/// Waits until these rows are free (taking their locks as a write would, in the same order,
/// and letting them go at once), holding no other row meanwhile, for at most `wait`.
/// `Ok(false)` when the wait ran out.
pub(crate) async fn wait_for_rows(
    db: &mut Db<'_>,
    account_ids: &[String],
    transaction_ids: &[Uuid],
    wait: std::time::Duration,
) -> Result<bool, WriteError> {
    let mut accounts = account_ids.to_vec();
    accounts.sort();
    accounts.dedup();
    let mut transactions = transaction_ids.to_vec();
    transactions.sort();
    transactions.dedup();
    let engine = db.engine();
    let mut tx = begin(db.conn(), LockWait::Bounded(wait)).await?;
    let locked = async {
        let mut db = Db::new(&mut tx, engine);
        if !transactions.is_empty() {
            locks::lock_originals(&mut db, &transactions).await?;
        }
        locks::lock_accounts(&mut db, &accounts, SystemLocks::Shared).await
    };
    match locked.await.map_err(WriteError::from) {
        Ok(_) => {
            tx.rollback().await?;
            Ok(true)
        }
        Err(e) if is_lock_timeout(&e) => {
            tx.rollback().await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The most accounts a pass locks at once on Citus. At once saves the statements of the
/// ordered path (one per shard touched) but pays them too when a row is busy, which a large
/// group meets more often; a group of API creates names a few dozen accounts, a consumer
/// batch hundreds. The first build, which called a function per account, applied a consumer
/// batch taken at once at half the messages per second; large groups were not measured again
/// with the per-shard function (docs/scaling.md, "Locks taken at once").
pub(super) const AT_ONCE_MAX_ACCOUNTS: usize = 64;

impl LockedLedger {
    /// The pass's rows locked in the global order, waiting for each, and read; `ids` are the
    /// items' accounts ([`account_ids`]).
    pub(super) async fn lock(
        db: &mut Db<'_>,
        items: &[&NewTransaction],
        ids: &[String],
        locks: SystemLocks,
    ) -> Result<LockedLedger, StoreError> {
        let reversed = lock_originals_of(db, items).await?;
        let locked = locks::lock_and_read_accounts(db, ids, locks).await?;
        LockedLedger::read(db, items, locks, reversed, locked).await
    }

    /// On Citus, the pass's accounts locked at once, without waiting
    /// (`locks::lock_accounts_at_once`), and read. `Ok(None)` when a row was busy: the
    /// transaction is aborted, and the caller rolls back and takes [`LockedLedger::lock`].
    pub(super) async fn lock_at_once(
        db: &mut Db<'_>,
        items: &[&NewTransaction],
        ids: &[String],
        locks: SystemLocks,
    ) -> Result<Option<LockedLedger>, StoreError> {
        let reversed = lock_originals_of(db, items).await?;
        let Some(locked) = locks::lock_accounts_at_once(db, ids, locks).await? else {
            return Ok(None);
        };
        Ok(Some(
            LockedLedger::read(db, items, locks, reversed, locked).await?,
        ))
    }

    /// Whether a pass on `engine` tries [`LockedLedger::lock_at_once`] first: on Citus, whose
    /// ordered locks and reads are a statement per shard, for a group of at most
    /// [`AT_ONCE_MAX_ACCOUNTS`] accounts whose system accounts are shared (a pass that takes
    /// them exclusively is rare, and waits in order).
    pub(super) fn tries_at_once(
        engine: crate::db::Engine,
        ids: &[String],
        locks: SystemLocks,
    ) -> bool {
        engine == crate::db::Engine::Citus
            && locks == SystemLocks::Shared
            && ids.len() <= AT_ONCE_MAX_ACCOUNTS
    }

    /// The rest of a pass's state, read under the locks taken.
    async fn read(
        db: &mut Db<'_>,
        items: &[&NewTransaction],
        locks: SystemLocks,
        reversed: HashMap<Uuid, Amount>,
        (mut accounts, wallets): locks::LockedAndRead,
    ) -> Result<LockedLedger, StoreError> {
        let mut virtual_accounts = BTreeMap::new();
        for (clearing, currency) in items.iter().flat_map(|i| i.created_on_use.iter()) {
            if !accounts.contains_key(clearing.as_str()) {
                virtual_accounts.insert(clearing.to_string(), *currency);
                accounts.insert(
                    clearing.to_string(),
                    LockedAccount {
                        id: clearing.to_string(),
                        currency: currency.code().to_owned(),
                        kind: AccountType::System,
                        status: AccountStatus::Active,
                        overdraft_limit: Amount::ZERO,
                        has_limits: false,
                        has_monitors: false,
                        in_sets: false,
                    },
                );
            }
        }
        let wallet_ids: Vec<String> = wallets.keys().cloned().collect();
        let activities = limited_activities(db, &accounts, &wallets).await?;
        let ruled = lock_ruled_sets(db, &in_sets(&accounts), RuledSets::All).await?;
        let (set_activities, limited_sets) = set_limits(db, &ruled).await?;
        let watches = monitors::store::watches(db.conn(), &monitored(&accounts), &ruled).await?;
        let system_ids: Vec<String> = accounts
            .values()
            .filter(|a| a.kind == AccountType::System)
            .filter(|a| !virtual_accounts.contains_key(&a.id))
            .map(|a| a.id.clone())
            .collect();
        let systems = reads::system_states(db, &system_ids).await?;
        let histories = effective_histories(db, items, &wallet_ids).await?;
        let movement = system_movement(items, &accounts);
        let needs_exclusive = locks == SystemLocks::Shared && !systems.fast(&movement);
        Ok(LockedLedger {
            accounts,
            virtual_accounts,
            wallets,
            systems: systems.states,
            needs_exclusive,
            reversed,
            histories,
            activities,
            set_activities,
            limited_sets,
            watches,
            firings: Vec::new(),
        })
    }
}

/// The originals of the pass's reversals, locked in order (before any account) and read.
async fn lock_originals_of(
    db: &mut Db<'_>,
    items: &[&NewTransaction],
) -> Result<HashMap<Uuid, Amount>, StoreError> {
    let mut originals: Vec<Uuid> = items
        .iter()
        .filter_map(|i| i.reversal.map(|r| r.original))
        .collect();
    originals.sort();
    originals.dedup();
    if originals.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(locks::lock_originals(db, &originals).await?)
}

/// Every account the pass's legs name, sorted, once each: what the locks take.
pub(super) fn account_ids(items: &[&NewTransaction]) -> Vec<String> {
    let mut ids: Vec<String> = items
        .iter()
        .flat_map(|i| i.journal.legs().iter().map(|l| l.account.to_string()))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The wallets among `accounts` whose row says they have balance monitors: an empty list (and
/// no read at all) when none has.
pub(crate) fn monitored(accounts: &BTreeMap<String, LockedAccount>) -> Vec<String> {
    accounts
        .values()
        .filter(|a| a.has_monitors && a.kind == AccountType::Wallet)
        .map(|a| a.id.clone())
        .collect()
}

/// The recent activity of each wallet of the pass that has velocity limits, read under its
/// lock; nothing at all is read when none has (the lock statement said so).
async fn limited_activities(
    db: &mut Db<'_>,
    accounts: &BTreeMap<String, LockedAccount>,
    wallets: &HashMap<String, WalletState>,
) -> Result<HashMap<String, Activity>, StoreError> {
    let limited: Vec<String> = accounts
        .values()
        .filter(|a| a.has_limits && a.kind == AccountType::Wallet)
        .map(|a| a.id.clone())
        .collect();
    if limited.is_empty() {
        return Ok(HashMap::new());
    }
    let now = Utc::now();
    let mut limits = limits::store::limits_of(db.conn(), &limited, false).await?;
    let mut activities = HashMap::with_capacity(limits.len());
    for wallet in limited {
        let (Some(of_wallet), Some(state)) = (limits.remove(&wallet), wallets.get(&wallet)) else {
            continue;
        };
        let activity =
            limits::store::activity(db.conn(), &wallet, &state.chain, of_wallet, now).await?;
        activities.insert(wallet, activity);
    }
    Ok(activities)
}

/// The wallets among `accounts` that count in account sets (their row says so).
pub(crate) fn in_sets(accounts: &BTreeMap<String, LockedAccount>) -> Vec<String> {
    accounts
        .values()
        .filter(|a| a.in_sets && a.kind == AccountType::Wallet)
        .map(|a| a.id.clone())
        .collect()
}

/// Which ruled sets a pass locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuledSets {
    /// Sets with limits or monitors: a posting checks the first and evaluates the second.
    All,
    /// Sets with monitors: a capture or a void changes balances but checks no limit (a hold
    /// counted against the limits when it was placed).
    Monitored,
}

/// The account sets with rules that `in_sets` (wallets of the pass, locked) count in, locked
/// after the wallets, sorted: every locker takes them in one order, and each checks a set's
/// rules against what the others committed. Nothing is read when no wallet is in a set, and no
/// set is locked when none of theirs has rules. Returns the (wallet, set) pairs.
pub(crate) async fn lock_ruled_sets(
    db: &mut Db<'_>,
    in_sets: &[String],
    which: RuledSets,
) -> Result<Vec<RuledSet>, StoreError> {
    if in_sets.is_empty() {
        return Ok(Vec::new());
    }
    let mut ruled = sets::bookkeeping::ruled_sets_of(db.conn(), in_sets).await?;
    if which == RuledSets::Monitored {
        ruled.retain(|r| r.has_monitors);
    }
    if ruled.is_empty() {
        return Ok(ruled);
    }
    let sorted: Vec<String> = (ruled.iter().map(|r| r.set.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    sets::bookkeeping::lock_sets(db.conn(), &sorted).await?;
    Ok(ruled)
}

/// The limits and recent activity of the sets with limits among `ruled` (locked), and for each
/// wallet of the pass, its limited sets.
async fn set_limits(
    db: &mut Db<'_>,
    ruled: &[RuledSet],
) -> Result<(HashMap<String, Activity>, HashMap<String, Vec<String>>), StoreError> {
    let limited: Vec<String> = (ruled.iter().filter(|r| r.has_limits))
        .map(|r| r.set.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if limited.is_empty() {
        return Ok(Default::default());
    }
    let now = Utc::now();
    let mut limits = limits::store::limits_of(db.conn(), &limited, true).await?;
    let mut activities = HashMap::with_capacity(limited.len());
    for set in limited {
        if let Some(of_set) = limits.remove(&set) {
            let activity = limits::store::set_activity(db.conn(), &set, of_set, now).await?;
            activities.insert(set, activity);
        }
    }
    let mut sets_of: HashMap<String, Vec<String>> = HashMap::new();
    for r in ruled.iter().filter(|r| activities.contains_key(&r.set)) {
        sets_of
            .entry(r.wallet.clone())
            .or_default()
            .push(r.set.clone());
    }
    Ok((activities, sets_of))
}

/// For each wallet a backdated item of this pass debits, its entries effective since the
/// earliest such date, read under the wallet's lock taken above (`ledger::effective`). Only
/// those wallets: the other requests grouped into the same pass read nothing more.
async fn effective_histories(
    db: &mut Db<'_>,
    items: &[&NewTransaction],
    wallets: &[String],
) -> Result<HashMap<String, EffectiveHistory>, StoreError> {
    let mut since: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for (item, date) in items.iter().filter_map(|i| Some((i, i.effective_at?))) {
        // A date before its horizon is refused anyway, and must not make this pass read a
        // whole chain under its lock.
        if date.at < date.not_before {
            continue;
        }
        let debited = item
            .journal
            .legs()
            .iter()
            .filter(|l| l.amount.is_negative());
        for leg in debited.filter(|l| wallets.iter().any(|w| w == l.account.as_str())) {
            let earliest = since.entry(leg.account.as_str()).or_insert(date.at);
            *earliest = (*earliest).min(date.at);
        }
    }
    let mut histories = HashMap::with_capacity(since.len());
    for (wallet, since) in since {
        let history = effective::history_since(db.conn(), wallet, since).await?;
        histories.insert(wallet.to_owned(), history);
    }
    Ok(histories)
}

/// Everything the batch could move on each system account, whatever it decides.
fn system_movement(
    items: &[&NewTransaction],
    accounts: &BTreeMap<String, LockedAccount>,
) -> HashMap<String, Amount> {
    let mut movement: HashMap<String, Amount> = HashMap::new();
    for leg in items.iter().flat_map(|i| i.journal.legs()) {
        let id = leg.account.as_str();
        if accounts
            .get(id)
            .is_some_and(|a| a.kind == AccountType::System)
        {
            let moved = movement.entry(id.to_owned()).or_default();
            *moved = moved.saturating_add(leg.amount.abs());
        }
    }
    movement
}
