//! Load: the locks a pass takes, in their fixed order, and the state read after them, typed
//! (steps 1 to 3 of the order of work in [`super`]).

use super::chain::ChainHead;
use super::decide::LockedLedger;
use super::{LockWait, begin, is_lock_timeout};
use crate::db::{Engine, StoreError};
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::bounds::{self, SystemState};
use crate::ledger::ids::AccountId;
use crate::ledger::money::{Amount, Currency};
use crate::ledger::transactions::{NewTransaction, WriteError};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// The clearing accounts this pass decided as new and empty, locked now that they exist and
/// read again: still empty, unless a concurrent request created one first and wrote to it,
/// which the decisions did not see (the pass is then decided again, against it). Locking and
/// reading here is what a system account's bound needs from every writer (`bounds.rs`).
pub(super) async fn still_empty(
    conn: &mut PgConnection,
    engine: Engine,
    created: &[(AccountId, Currency)],
    systems: SystemLocks,
) -> Result<bool, StoreError> {
    let mut ids: Vec<String> = created.iter().map(|(id, _)| id.to_string()).collect();
    ids.sort();
    lock_accounts(conn, engine, &ids, systems).await?;
    let states = bounds::system_states(conn, engine, &ids).await?;
    Ok(states.states.values().all(|s| *s == SystemState::default()))
}

/// A committed creation as its row stores it: never changes once committed.
#[derive(Debug, Clone)]
pub struct StoredCreation {
    pub request: Value,
    pub status: u16,
    pub body: String,
}

pub(super) async fn stored_creations(
    conn: &mut PgConnection,
    engine: Engine,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    if engine == Engine::Citus {
        return stored_creations_citus(conn, ids).await;
    }
    // One primary-key probe per id, as a lateral `limit 1`: that shape has no plan but a
    // probe per id (no hash join), and an index probe is the cheaper probe from a few rows on.
    // The plain `where id = any($1)` let a connection keep the generic plan it made while the
    // table was nearly empty, a sequential scan, until the next ANALYZE: in the bench that one
    // lookup grew to 43% of the database's statement time (docs/performance.md, fifth round).
    let rows = sqlx::query_as!(
        CreationRow,
        r#"select t.id as "id!", t.creation_request as "creation_request!",
                  t.creation_status as "creation_status!",
                  t.creation_response as "creation_response!"
           from unnest($1::uuid[]) as k(id)
           cross join lateral (
               select id, creation_request, creation_status, creation_response
               from transactions where id = k.id limit 1) t"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(CreationRow::stored).collect())
}

/// [`stored_creations`] on Citus, which refuses the lateral `limit 1` over `unnest` (cannot
/// push it down): `id = any($1)` on the distribution column reaches only the shards of these
/// ids, and each shard probes its primary key.
async fn stored_creations_citus(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    let rows = sqlx::query_as!(
        CreationRow,
        r#"select id, creation_request, creation_status, creation_response
           from transactions where id = any($1)"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(CreationRow::stored).collect())
}

/// A stored creation's row, as both forms of [`stored_creations`] read it.
struct CreationRow {
    id: Uuid,
    creation_request: Value,
    creation_status: i16,
    creation_response: String,
}

impl CreationRow {
    fn stored(self) -> (Uuid, StoredCreation) {
        let stored = StoredCreation {
            request: self.creation_request,
            status: self.creation_status as u16,
            body: self.creation_response,
        };
        (self.id, stored)
    }
}

/// A locked account as decisions need it.
#[derive(Debug, Clone)]
pub(crate) struct LockedAccount {
    pub id: String,
    pub currency: String,
    pub kind: AccountType,
    pub status: AccountStatus,
    pub overdraft_limit: Amount,
}

/// A locked account's row as stored.
struct LockedRow {
    id: String,
    currency: String,
    kind: String,
    status: String,
    overdraft_limit: i64,
}

impl TryFrom<LockedRow> for LockedAccount {
    type Error = StoreError;

    /// A type or status the code does not know is a corrupt row, never a guess.
    fn try_from(row: LockedRow) -> Result<LockedAccount, StoreError> {
        let kind = AccountType::parse(&row.kind).ok_or_else(|| {
            crate::db::corrupt("accounts", &row.id, format!("unknown type {:?}", row.kind))
        })?;
        let status = AccountStatus::parse(&row.status).ok_or_else(|| {
            crate::db::corrupt(
                "accounts",
                &row.id,
                format!("unknown status {:?}", row.status),
            )
        })?;
        let overdraft_limit = Amount::new(row.overdraft_limit).ok_or_else(|| {
            let what = format!("overdraft limit {} out of range", row.overdraft_limit);
            crate::db::corrupt("accounts", &row.id, what)
        })?;
        Ok(LockedAccount {
            id: row.id,
            currency: row.currency,
            kind,
            status,
            overdraft_limit,
        })
    }
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

/// Locks the accounts of a set of transactions in one statement: wallets exclusively, in
/// sorted id order (each ORDER BY runs before its rows are locked one by one), then system
/// accounts shared so that they never serialize writers, or, with [`SystemLocks::Exclusive`],
/// also exclusively (a writer that may take one near the edge of the range, see `bounds.rs`). One
/// lock strength for all the system accounts of a statement keeps them in one sorted order.
pub(crate) async fn lock_accounts(
    conn: &mut PgConnection,
    engine: Engine,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    if engine == Engine::Citus {
        return lock_accounts_citus(conn, sorted_ids, systems).await;
    }
    let locked = sqlx::query_as!(
        LockedRow,
        r#"with wallets as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'wallet' order by id for update),
           shared as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'system' and not $2 order by id for share),
           exclusive as (
               select id, currency, type as kind, status, overdraft_limit from accounts
               where id = any($1) and type = 'system' and $2 order by id for update)
           select id as "id!", currency as "currency!", kind as "kind!", status as "status!",
                  overdraft_limit as "overdraft_limit!"
           from wallets
           union all
           select id, currency, kind, status, overdraft_limit from shared
           union all
           select id, currency, kind, status, overdraft_limit from exclusive"#,
        sorted_ids,
        systems == SystemLocks::Exclusive
    )
    .fetch_all(&mut *conn)
    .await?;
    locked
        .into_iter()
        .map(|row| LockedAccount::try_from(row).map(|a| (a.id.clone(), a)))
        .collect()
}

/// [`lock_accounts`] on Citus, which runs `FOR UPDATE`/`FOR SHARE` only in a statement that
/// reaches one shard: one statement per account, in the same order (wallets sorted, then
/// system accounts sorted). Which is which is read first without a lock: an account's type
/// never changes (`accounts_creation_immutable`).
async fn lock_accounts_citus(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    let mut locked = BTreeMap::new();
    if sorted_ids.is_empty() {
        return Ok(locked);
    }
    let kinds = sqlx::query!(
        r#"select id, type = 'wallet' as "wallet!" from accounts where id = any($1)"#,
        sorted_ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let wallet_of: HashMap<String, bool> = kinds.into_iter().map(|r| (r.id, r.wallet)).collect();
    let mut order: Vec<(&String, bool)> = sorted_ids
        .iter()
        .filter_map(|id| wallet_of.get(id).map(|&wallet| (id, wallet)))
        .collect();
    // Wallets first (false sorts before true), each group in id order.
    order.sort_by_key(|(id, wallet)| (!*wallet, (*id).clone()));
    for (id, wallet) in order {
        let exclusive = wallet || systems == SystemLocks::Exclusive;
        let row = if exclusive {
            sqlx::query_as!(
                LockedRow,
                r#"select id, currency, type as kind, status, overdraft_limit from accounts
                   where id = $1 for update"#,
                id
            )
            .fetch_one(&mut *conn)
            .await?
        } else {
            sqlx::query_as!(
                LockedRow,
                r#"select id, currency, type as kind, status, overdraft_limit from accounts
                   where id = $1 for share"#,
                id
            )
            .fetch_one(&mut *conn)
            .await?
        };
        let account = LockedAccount::try_from(row)?;
        locked.insert(account.id.clone(), account);
    }
    Ok(locked)
}

/// Which of these accounts and transactions another transaction holds locked right now,
/// in a mode that would make [`lock_accounts`] or [`lock_originals`] wait. Asked without
/// waiting (`skip locked`), in one autocommit statement each, so it takes no lock of its own.
pub(crate) async fn held_elsewhere(
    conn: &mut PgConnection,
    engine: Engine,
    account_ids: &[String],
    transaction_ids: &[Uuid],
) -> Result<(Vec<String>, Vec<Uuid>), sqlx::Error> {
    if engine == Engine::Citus {
        return held_elsewhere_citus(conn, account_ids, transaction_ids).await;
    }
    let accounts = sqlx::query_scalar!(
        r#"with wallets as (
               select id from accounts
               where id = any($1) and type = 'wallet' for update skip locked),
           systems as (
               select id from accounts
               where id = any($1) and type = 'system' for share skip locked)
           select a.id from accounts a
           where a.id = any($1)
             and a.id not in (select id from wallets union all select id from systems)"#,
        account_ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let transactions = if transaction_ids.is_empty() {
        Vec::new()
    } else {
        sqlx::query_scalar!(
            r#"with free as (
                   select id from transactions where id = any($1) for update skip locked)
               select t.id from transactions t
               where t.id = any($1) and t.id not in (select id from free)"#,
            transaction_ids
        )
        .fetch_all(&mut *conn)
        .await?
    };
    Ok((accounts, transactions))
}

/// [`held_elsewhere`] on Citus: `skip locked` runs only on one shard, so one autocommit
/// statement per row (this is the slow path of a group that met a lock timeout).
async fn held_elsewhere_citus(
    conn: &mut PgConnection,
    account_ids: &[String],
    transaction_ids: &[Uuid],
) -> Result<(Vec<String>, Vec<Uuid>), sqlx::Error> {
    let mut accounts = Vec::new();
    for id in account_ids {
        let free = sqlx::query_scalar!(
            r#"select type = 'wallet' as "wallet!" from accounts where id = $1 for share skip locked"#,
            id
        )
        .fetch_optional(&mut *conn)
        .await?;
        let held = match free {
            // Free for a shared lock: held only if a wallet's exclusive lock is not.
            Some(true) => sqlx::query_scalar!(
                "select id from accounts where id = $1 for update skip locked",
                id
            )
            .fetch_optional(&mut *conn)
            .await?
            .is_none(),
            Some(false) => false,
            // Locked (or missing: then nothing holds it).
            None => sqlx::query_scalar!(r#"select 1 as "one!" from accounts where id = $1"#, id)
                .fetch_optional(&mut *conn)
                .await?
                .is_some(),
        };
        if held {
            accounts.push(id.clone());
        }
    }
    let mut transactions = Vec::new();
    for id in transaction_ids {
        let free = sqlx::query_scalar!(
            "select id from transactions where id = $1 for update skip locked",
            id
        )
        .fetch_optional(&mut *conn)
        .await?;
        if free.is_none()
            && sqlx::query_scalar!(r#"select 1 as "one!" from transactions where id = $1"#, id)
                .fetch_optional(&mut *conn)
                .await?
                .is_some()
        {
            transactions.push(*id);
        }
    }
    Ok((accounts, transactions))
}

/// Waits until these rows are free (taking their locks as a write would, in the same order,
/// and letting them go at once), holding no other row meanwhile, for at most `wait`.
/// `Ok(false)` when the wait ran out.
pub(crate) async fn wait_for_rows(
    conn: &mut PgConnection,
    engine: Engine,
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
    let mut tx = begin(conn, LockWait::Bounded(wait)).await?;
    let locked = async {
        if !transactions.is_empty() {
            lock_originals(&mut tx, engine, &transactions).await?;
        }
        lock_accounts(&mut tx, engine, &accounts, SystemLocks::Shared).await
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

/// The last entry and the open-hold reservations of each wallet, read after its lock (in a
/// statement of their own: one that also took the lock would read from before it). The
/// reservations are the `open_hold_totals` view, as balance reads show them; `offset 0` keeps
/// the lateral a per-wallet probe of `open_holds_account` (pulled up into a plain join, the
/// view would be aggregated over every open hold).
pub(crate) async fn wallet_states(
    conn: &mut PgConnection,
    engine: Engine,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    if wallets.is_empty() {
        return Ok(HashMap::new());
    }
    if engine == Engine::Citus {
        return wallet_states_citus(conn, wallets).await;
    }
    let states = sqlx::query!(
        r#"select w.id as "id!", h.sequence, h.balance_after, h.ledger_time as "ledger_time?",
                  coalesce(p.pending_out, 0) as "pending_out!",
                  coalesce(p.pending_in, 0) as "pending_in!"
           from unnest($1::text[]) as w(id)
           left join lateral (
               select sequence, balance_after, ledger_time from entries
               where account_id = w.id and sequence is not null
               order by sequence desc limit 1) h on true
           left join lateral (
               select pending_out, pending_in from open_hold_totals where account_id = w.id
               offset 0) p on true"#,
        wallets
    )
    .fetch_all(&mut *conn)
    .await?;
    states
        .into_iter()
        .map(|r| {
            let state = WalletState {
                chain: ChainHead {
                    sequence: r.sequence.unwrap_or(0),
                    balance: Amount::stored(r.balance_after.unwrap_or(0))?,
                    ledger_time: r.ledger_time,
                },
                pending_out: Amount::stored(r.pending_out)?,
                pending_in: Amount::stored(r.pending_in)?,
            };
            Ok((r.id, state))
        })
        .collect()
}

/// [`wallet_states`] on Citus, which cannot push down the laterals over `unnest`: one
/// statement per wallet, each naming the wallet in every table so that it runs on the wallet's
/// shard alone (accounts, entries and open_holds are co-located).
async fn wallet_states_citus(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    let mut states = HashMap::with_capacity(wallets.len());
    for wallet in wallets {
        let r = sqlx::query!(
            r#"select h.sequence as "sequence?", h.balance_after as "balance_after?",
                      h.ledger_time as "ledger_time?",
                      coalesce(p.pending_out, 0) as "pending_out!",
                      coalesce(p.pending_in, 0) as "pending_in!"
               from accounts w
               left join lateral (
                   select sequence, balance_after, ledger_time from entries
                   where account_id = $1 and sequence is not null
                   order by sequence desc limit 1) h on true
               left join lateral (
                   select pending_out, pending_in from open_hold_totals where account_id = $1
                   offset 0) p on true
               where w.id = $1"#,
            wallet
        )
        .fetch_one(&mut *conn)
        .await?;
        let state = WalletState {
            chain: ChainHead {
                sequence: r.sequence.unwrap_or(0),
                balance: Amount::stored(r.balance_after.unwrap_or(0))?,
                ledger_time: r.ledger_time,
            },
            pending_out: Amount::stored(r.pending_out)?,
            pending_in: Amount::stored(r.pending_in)?,
        };
        states.insert(wallet.clone(), state);
    }
    Ok(states)
}

impl LockedLedger {
    pub(super) async fn lock(
        conn: &mut PgConnection,
        engine: Engine,
        items: &[&NewTransaction],
        locks: SystemLocks,
    ) -> Result<LockedLedger, StoreError> {
        let mut originals: Vec<Uuid> = items
            .iter()
            .filter_map(|i| i.reversal.map(|r| r.original))
            .collect();
        originals.sort();
        originals.dedup();
        let reversed = if originals.is_empty() {
            HashMap::new()
        } else {
            lock_originals(conn, engine, &originals).await?
        };

        let mut ids: Vec<String> = items
            .iter()
            .flat_map(|i| i.journal.legs().iter().map(|l| l.account.to_string()))
            .collect();
        ids.sort();
        ids.dedup();
        let mut accounts = lock_accounts(conn, engine, &ids, locks).await?;
        let mut virtual_accounts = BTreeMap::new();
        for (clearing, currency) in items.iter().filter_map(|i| i.clearing_account.as_ref()) {
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
                    },
                );
            }
        }
        let wallet_ids: Vec<String> = accounts
            .values()
            .filter(|a| a.kind == AccountType::Wallet)
            .map(|a| a.id.clone())
            .collect();
        let wallets = wallet_states(conn, engine, &wallet_ids).await?;
        let system_ids: Vec<String> = accounts
            .values()
            .filter(|a| a.kind == AccountType::System)
            .filter(|a| !virtual_accounts.contains_key(&a.id))
            .map(|a| a.id.clone())
            .collect();
        let systems = bounds::system_states(conn, engine, &system_ids).await?;
        // Everything the batch could move on each system account, whatever it decides.
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
        let needs_exclusive = locks == SystemLocks::Shared && !systems.fast(&movement);
        Ok(LockedLedger {
            accounts,
            virtual_accounts,
            wallets,
            systems: systems.states,
            needs_exclusive,
            reversed,
        })
    }
}

/// from the reversal rows themselves.
async fn lock_originals(
    conn: &mut PgConnection,
    engine: Engine,
    sorted: &[Uuid],
) -> Result<HashMap<Uuid, Amount>, sqlx::Error> {
    match engine {
        Engine::Plain => {
            sqlx::query!(
                "select id from transactions where id = any($1) order by id for update",
                sorted
            )
            .fetch_all(&mut *conn)
            .await?;
        }
        // Citus locks only in a statement that reaches one shard: one per original, sorted.
        Engine::Citus => {
            for id in sorted {
                sqlx::query!("select id from transactions where id = $1 for update", id)
                    .fetch_optional(&mut *conn)
                    .await?;
            }
        }
    }
    let sums = sqlx::query!(
        r#"select reverses as "original!", coalesce(sum(reversed_amount), 0)::bigint as "reversed!"
           from transactions where reverses = any($1) and status = 'posted' group by reverses"#,
        sorted
    )
    .fetch_all(conn)
    .await?;
    sums.into_iter()
        .map(|r| Ok((r.original, Amount::stored(r.reversed)?)))
        .collect()
}
