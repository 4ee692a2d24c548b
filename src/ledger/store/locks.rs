//! Row locks whose statement differs by engine: Citus takes a multi-row `FOR UPDATE` only
//! when every row is on one shard, so there the rows are locked shard by shard (accounts: one
//! statement per shard) or row by row (transactions), in one global order, and then read
//! without a lock clause; a small posting's accounts are first tried on every shard at once,
//! without waiting ([`lock_accounts_at_once`]).

use super::Db;
use crate::db::{Engine, StoreError};
use crate::ledger::accounts::{AccountStatus, AccountType};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::posting::{LockedAccount, SystemLocks, WalletState};
use crate::ledger::transactions::{Kind, TransactionStatus};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// A payment's row as the consumer reads it under its lock, decoded: status is the effective
/// one (a pending hold past its expiry reads `expired`).
pub struct LockedTransaction {
    pub id: Uuid,
    pub kind: Kind,
    pub status: TransactionStatus,
    pub currency: Currency,
    pub legs: Value,
    pub captured_amount: Option<i64>,
    pub from_hold: bool,
}

/// [`LockedTransaction`] as the SQL reads it, before its kind, status and currency are decoded.
struct LockedPayment {
    id: Uuid,
    kind: String,
    status: String,
    currency: String,
    legs: Value,
    captured_amount: Option<i64>,
    from_hold: bool,
}

impl TryFrom<LockedPayment> for LockedTransaction {
    type Error = StoreError;

    /// A kind, status or currency the code does not know is a corrupt row, never "no payment
    /// yet" (that would make the event create it again under the same id).
    fn try_from(row: LockedPayment) -> Result<LockedTransaction, StoreError> {
        let corrupt = |what: String| crate::db::corrupt("transactions", row.id, what);
        Ok(LockedTransaction {
            kind: Kind::parse(&row.kind)
                .ok_or_else(|| corrupt(format!("unknown kind {:?}", row.kind)))?,
            status: TransactionStatus::parse(&row.status)
                .ok_or_else(|| corrupt(format!("unknown status {:?}", row.status)))?,
            currency: Currency::parse(&row.currency)
                .ok_or_else(|| corrupt(format!("unknown currency {:?}", row.currency)))?,
            id: row.id,
            legs: row.legs,
            captured_amount: row.captured_amount,
            from_hold: row.from_hold,
        })
    }
}

/// Locks the transaction rows `sorted_ids` (sorted: every locker takes them in one order) `FOR
/// UPDATE` and reads them; ids not stored are absent from the answer.
pub async fn payments(
    db: &mut Db<'_>,
    sorted_ids: &[Uuid],
) -> Result<Vec<LockedTransaction>, StoreError> {
    let rows = match db.engine() {
        Engine::Plain => locked_payments(db.conn(), sorted_ids).await?,
        // Citus locks only in a statement that reaches one shard: the same statement per
        // shard, shards ascending (one global order, as for accounts).
        Engine::Citus => {
            let mut rows = Vec::with_capacity(sorted_ids.len());
            for shard in super::shards::transactions_by_shard(db.conn(), sorted_ids).await? {
                rows.append(&mut locked_payments(db.conn(), &shard).await?);
            }
            rows
        }
    };
    rows.into_iter().map(LockedTransaction::try_from).collect()
}

/// Locks the transaction rows `sorted_ids` and reads them, in one statement.
async fn locked_payments(
    conn: &mut PgConnection,
    sorted_ids: &[Uuid],
) -> Result<Vec<LockedPayment>, sqlx::Error> {
    sqlx::query_as!(
        LockedPayment,
        r#"select id, kind,
                  hold_status_at(status, expires_at, clock_timestamp()) as "status!",
                  currency, legs, captured_amount, expires_at is not null as "from_hold!"
           from transactions where id = any($1) order by id for update"#,
        sorted_ids
    )
    .fetch_all(conn)
    .await
}

/// Locks the accounts of a set of transactions in one statement: wallets exclusively, in
/// sorted id order (each ORDER BY runs before its rows are locked one by one), then system
/// accounts shared so that they never serialize writers, or, with [`SystemLocks::Exclusive`],
/// also exclusively (a writer that may take one near the edge of the range, see `bounds.rs`). One
/// lock strength for all the system accounts of a statement keeps them in one sorted order.
pub(crate) async fn lock_accounts(
    db: &mut Db<'_>,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    match db.engine() {
        Engine::Plain => lock_accounts_plain(db.conn(), sorted_ids, systems).await,
        Engine::Citus => lock_accounts_citus(db.conn(), sorted_ids, systems).await,
    }
}

async fn lock_accounts_plain(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    let locked = sqlx::query_as!(
        LockedRow,
        r#"with wallets as (
               select id, currency, type as kind, status, overdraft_limit, has_limits, has_monitors,
                      in_sets from accounts
               where id = any($1) and type = 'wallet' order by id for update),
           shared as (
               select id, currency, type as kind, status, overdraft_limit, has_limits, has_monitors,
                      in_sets from accounts
               where id = any($1) and type = 'system' and not $2 order by id for share),
           exclusive as (
               select id, currency, type as kind, status, overdraft_limit, has_limits, has_monitors,
                      in_sets from accounts
               where id = any($1) and type = 'system' and $2 order by id for update)
           select id as "id!", currency as "currency!", kind as "kind!", status as "status!",
                  overdraft_limit as "overdraft_limit!", has_limits as "has_limits!",
                  has_monitors as "has_monitors!", in_sets as "in_sets!"
           from wallets
           union all
           select id, currency, kind, status, overdraft_limit, has_limits, has_monitors, in_sets
           from shared
           union all
           select id, currency, kind, status, overdraft_limit, has_limits, has_monitors, in_sets
           from exclusive"#,
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
/// reaches one shard: one PostgreSQL's statement once per shard, shards in ascending order
/// (`shards::accounts_by_shard`). Every locker therefore takes its rows in one global order,
/// by shard and then, within a shard, as on one node (wallets sorted, then system accounts
/// sorted).
async fn lock_accounts_citus(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<BTreeMap<String, LockedAccount>, StoreError> {
    let mut locked = BTreeMap::new();
    for shard in super::shards::accounts_by_shard(&mut *conn, sorted_ids).await? {
        locked.append(&mut lock_accounts_plain(&mut *conn, &shard, systems).await?);
    }
    Ok(locked)
}

/// Accounts locked and their wallets' states read: what a pass's load starts from.
pub(crate) type LockedAndRead = (
    BTreeMap<String, LockedAccount>,
    HashMap<String, WalletState>,
);

/// The accounts `sorted_ids` locked in the global order, waiting for each (as
/// [`lock_accounts`] locks them), and their wallets' states read after the locks. One
/// PostgreSQL: the lock statement and [`super::reads::wallet_states`]. Citus: one statement per
/// shard, shards ascending, that locks the shard's accounts and reads them
/// (`accounts_locked_in_shard`, migrations/citus/write_path.sql), where locking and reading
/// took two.
pub(crate) async fn lock_and_read_accounts(
    db: &mut Db<'_>,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<LockedAndRead, StoreError> {
    match db.engine() {
        Engine::Plain => {
            let accounts = lock_accounts_plain(db.conn(), sorted_ids, systems).await?;
            let wallet_ids: Vec<String> = (accounts.values())
                .filter(|a| a.kind == AccountType::Wallet)
                .map(|a| a.id.clone())
                .collect();
            let wallets = super::reads::wallet_states(db, &wallet_ids).await?;
            Ok((accounts, wallets))
        }
        Engine::Citus => lock_and_read_accounts_citus(db.conn(), sorted_ids, systems).await,
    }
}

async fn lock_and_read_accounts_citus(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<LockedAndRead, StoreError> {
    let (mut accounts, mut states) = (BTreeMap::new(), HashMap::new());
    for shard in super::shards::accounts_by_shard(&mut *conn, sorted_ids).await? {
        let (mut shard_accounts, shard_states) =
            locked_in_shards(&mut *conn, &shard, systems, Waiting::InOrder).await?;
        accounts.append(&mut shard_accounts);
        states.extend(shard_states);
    }
    Ok((accounts, states))
}

/// A small group's accounts locked on Citus (as [`lock_accounts`] locks them) and their
/// wallets' states read after the locks, in one statement that reaches every shard of the
/// accounts at once, in parallel, taking each lock without waiting: the shards are then locked
/// in no global order, which cannot deadlock only because nothing waits. `Ok(None)` when a
/// row is held elsewhere: the statement failed with lock_not_available, the transaction is
/// aborted, and the caller rolls back and locks in the global order instead
/// ([`lock_and_read_accounts`]). A group of random wallets spans most shards, so this is one
/// statement where the ordered path sends one per shard (docs/scaling.md, "Locks taken at
/// once").
pub(crate) async fn lock_accounts_at_once(
    db: &mut Db<'_>,
    sorted_ids: &[String],
    systems: SystemLocks,
) -> Result<Option<LockedAndRead>, StoreError> {
    match locked_in_shards(db.conn(), sorted_ids, systems, Waiting::NoWait).await {
        Ok(locked) => Ok(Some(locked)),
        // lock_not_available: with NOWAIT, a row held elsewhere (db::error classifies it).
        Err(StoreError::LockTimeout(_)) => Ok(None),
        Err(other) => Err(other),
    }
}

/// Whether `accounts_locked_in_shard` waits for a row another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// Waits: only for one shard at a time, shards in the global order.
    InOrder,
    /// Fails at once with lock_not_available: for every shard at once.
    NoWait,
}

/// `accounts_locked_in_shard` over the shards of `sorted_ids`: one statement, which reaches
/// one shard or several.
async fn locked_in_shards(
    conn: &mut PgConnection,
    sorted_ids: &[String],
    systems: SystemLocks,
    waiting: Waiting,
) -> Result<LockedAndRead, StoreError> {
    // One array per shard, from the shard's first row; its other rows answer null.
    let shards: Vec<Option<Value>> = sqlx::query_scalar(
        "select accounts_locked_in_shard(a.id, $1, $2, $3, $4) from accounts a
         where a.id = any($1)",
    )
    .bind(sorted_ids)
    .bind(systems == SystemLocks::Exclusive)
    .bind(waiting == Waiting::InOrder)
    .bind(Uuid::new_v4())
    .fetch_all(conn)
    .await?;
    let (mut accounts, mut states) = (BTreeMap::new(), HashMap::new());
    let rows = (shards.into_iter().flatten())
        .map(shard_rows)
        .collect::<Result<Vec<_>, _>>()?;
    for row in rows.into_iter().flatten() {
        let locked = LockedWalletRow::from_json(row)?;
        let state = locked.wallet_state()?;
        let account = LockedAccount::try_from(locked.account)?;
        if let Some(state) = state {
            states.insert(account.id.clone(), state);
        }
        accounts.insert(account.id.clone(), account);
    }
    Ok((accounts, states))
}

/// A shard's answer to [`locked_in_shards`]: an array of its locked accounts.
fn shard_rows(shard: Value) -> Result<Vec<Value>, StoreError> {
    match shard {
        Value::Array(rows) => Ok(rows),
        other => Err(crate::db::corrupt(
            "accounts",
            "accounts_locked_in_shard",
            format!("not an array: {other}"),
        )),
    }
}

/// An account of [`locked_in_shards`]: the locked account, and for a wallet its state.
struct LockedWalletRow {
    account: LockedRow,
    head: super::reads::StoredHead,
    /// `None` for a system account, which has no wallet state.
    pending: Option<(i64, i64)>,
}

/// An account of [`locked_in_shards`] as `accounts_locked_in_shard` answers it: the account's
/// columns, and for a wallet its state's (`bytea` as PostgreSQL writes it in JSON: `\x` and
/// hex).
#[derive(serde::Deserialize)]
struct LockedNow {
    #[serde(flatten)]
    account: LockedRow,
    head_sequence: Option<i64>,
    head_balance: Option<i64>,
    head_ledger_time: Option<chrono::DateTime<chrono::Utc>>,
    head_chain_hash: Option<String>,
    pending_out: Option<i64>,
    pending_in: Option<i64>,
}

impl LockedWalletRow {
    /// A row the function wrote in another shape is a corrupt answer, never a guess.
    fn from_json(row: Value) -> Result<LockedWalletRow, StoreError> {
        let bad = |what: String| crate::db::corrupt("accounts", "accounts_locked_in_shard", what);
        let now: LockedNow = serde_json::from_value(row).map_err(|e| bad(e.to_string()))?;
        let hash = match now.head_chain_hash {
            None => None,
            Some(text) => Some(
                (text.strip_prefix("\\x"))
                    .and_then(crate::hex::decode)
                    .ok_or_else(|| bad(format!("chain hash {text:?}")))?,
            ),
        };
        Ok(LockedWalletRow {
            account: now.account,
            head: (
                now.head_sequence,
                now.head_balance,
                now.head_ledger_time,
                hash,
            ),
            pending: now.pending_out.zip(now.pending_in),
        })
    }

    fn wallet_state(&self) -> Result<Option<WalletState>, sqlx::Error> {
        self.pending
            .map(|(out, into)| super::reads::wallet_state(self.head.clone(), out, into))
            .transpose()
    }
}

/// A locked account's row as stored.
#[derive(serde::Deserialize)]
struct LockedRow {
    id: String,
    currency: String,
    kind: String,
    status: String,
    overdraft_limit: i64,
    has_limits: bool,
    has_monitors: bool,
    in_sets: bool,
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
            has_limits: row.has_limits,
            has_monitors: row.has_monitors,
            in_sets: row.in_sets,
        })
    }
}

/// Which of these accounts and transactions another transaction holds locked right now,
/// in a mode that would make [`lock_accounts`] or [`lock_originals`] wait. Asked without
/// waiting (`skip locked`), in one autocommit statement each, so it takes no lock of its own.
pub(crate) async fn held_elsewhere(
    db: &mut Db<'_>,
    account_ids: &[String],
    transaction_ids: &[Uuid],
) -> Result<(Vec<String>, Vec<Uuid>), sqlx::Error> {
    match db.engine() {
        Engine::Plain => held_elsewhere_plain(db.conn(), account_ids, transaction_ids).await,
        Engine::Citus => held_elsewhere_citus(db.conn(), account_ids, transaction_ids).await,
    }
}

async fn held_elsewhere_plain(
    conn: &mut PgConnection,
    account_ids: &[String],
    transaction_ids: &[Uuid],
) -> Result<(Vec<String>, Vec<Uuid>), sqlx::Error> {
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

/// Locks the originals of reversals (`sorted`) `FOR UPDATE` and reads how much of each its
/// posted reversals already took, summed after the lock from the reversal rows themselves.
pub(crate) async fn lock_originals(
    db: &mut Db<'_>,
    sorted: &[Uuid],
) -> Result<HashMap<Uuid, Amount>, sqlx::Error> {
    match db.engine() {
        Engine::Plain => {
            sqlx::query!(
                "select id from transactions where id = any($1) order by id for update",
                sorted
            )
            .fetch_all(db.conn())
            .await?;
        }
        // Citus locks only in a statement that reaches one shard: the same statement per
        // shard, shards ascending.
        Engine::Citus => {
            for shard in super::shards::transactions_by_shard(db.conn(), sorted).await? {
                sqlx::query!(
                    "select id from transactions where id = any($1) order by id for update",
                    &shard
                )
                .fetch_all(db.conn())
                .await?;
            }
        }
    }
    let sums = sqlx::query!(
        r#"select reverses as "original!", coalesce(sum(reversed_amount), 0)::bigint as "reversed!"
           from transactions where reverses = any($1) and status = 'posted' group by reverses"#,
        sorted
    )
    .fetch_all(db.conn())
    .await?;
    sums.into_iter()
        .map(|r| Ok((r.original, Amount::stored(r.reversed)?)))
        .collect()
}

/// Claims up to `limit` overdue holds for the sweeper (`holds::sweep`): marks them `expired`
/// and deletes their `open_holds` rows, in one statement; rows being posted or voided right
/// now are skipped (their own request decides). The predicate `status = 'pending' and
/// expires_at <= now()` is `hold_status_at(status, expires_at, now()) = 'expired'` written so
/// that the index on pending holds' expiry (`transactions_pending_expiry`) serves it.
pub(crate) async fn claim_overdue_holds(
    db: &mut Db<'_>,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    match db.engine() {
        Engine::Plain => claim_overdue_plain(db.conn(), limit).await,
        Engine::Citus => claim_overdue_citus(db.conn(), limit).await,
    }
}

async fn claim_overdue_plain(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with due as (
               select id from transactions
               where status = 'pending' and expires_at <= now()
               order by expires_at limit $1
               for update skip locked),
           expired as (
               update transactions t set status = 'expired', updated_at = now()
               from due where t.id = due.id
               returning t.id),
           released as (
               delete from open_holds where transaction_id in (select id from expired)
               returning 1)
           select id as "id!" from expired"#,
        limit
    )
    .fetch_all(conn)
    .await
}

/// [`claim_overdue_holds`] on Citus, where `skip locked` runs only on one shard: the candidates are
/// read without a lock, and the update keeps its condition (pending and due), so a hold that a
/// post or void resolved meanwhile (they lock its row) is left as they left it.
async fn claim_overdue_citus(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with due as materialized (
               select id from transactions
               where status = 'pending' and expires_at <= now()
               order by expires_at limit $1),
           expired as (
               update transactions t set status = 'expired', updated_at = now()
               where t.id in (select id from due)
                 and t.status = 'pending' and t.expires_at <= now()
               returning t.id),
           released as (
               delete from open_holds where transaction_id in (select id from expired)
               returning 1)
           select id as "id!" from expired"#,
        limit
    )
    .fetch_all(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::{LockedWalletRow, shard_rows};
    use crate::ledger::accounts::AccountType;
    use crate::ledger::posting::LockedAccount;
    use serde_json::json;

    fn wallet_json(hash: serde_json::Value) -> serde_json::Value {
        json!({"id": "alice", "currency": "USD", "kind": "wallet", "status": "active",
               "overdraft_limit": 500, "has_limits": false, "has_monitors": true,
               "in_sets": false, "head_sequence": 7, "head_balance": 1200,
               "head_ledger_time": "2026-12-07T03:42:34.869711+00:00",
               "head_chain_hash": hash, "pending_out": 300, "pending_in": 0})
    }

    #[test]
    fn a_wallet_locked_at_once_reads_as_postgresql_wrote_it() {
        let hash = format!("\\x{}", "ab".repeat(32));
        let row = LockedWalletRow::from_json(wallet_json(json!(hash))).unwrap();
        let state = row.wallet_state().unwrap().expect("a wallet has a state");
        assert_eq!(state.chain.sequence, 7);
        assert_eq!(state.chain.balance.minor_units(), 1200);
        assert_eq!(state.chain.hash.hex(), "ab".repeat(32));
        assert_eq!(
            state.chain.ledger_time.unwrap().to_rfc3339(),
            "2026-12-07T03:42:34.869711+00:00"
        );
        assert_eq!(state.pending_out.minor_units(), 300);
        let account = LockedAccount::try_from(row.account).unwrap();
        assert_eq!(
            (account.kind, account.overdraft_limit.minor_units()),
            (AccountType::Wallet, 500)
        );
        assert!(account.has_monitors);
    }

    #[test]
    fn a_system_account_locked_at_once_has_no_wallet_state() {
        let row = LockedWalletRow::from_json(json!({
            "id": "clearing:USD", "currency": "USD", "kind": "system", "status": "active",
            "overdraft_limit": 0, "has_limits": false, "has_monitors": false, "in_sets": false}))
        .unwrap();
        assert!(row.wallet_state().unwrap().is_none());
    }

    #[test]
    fn a_wallet_before_its_first_entry_starts_its_chain() {
        let mut json = wallet_json(serde_json::Value::Null);
        for field in ["head_sequence", "head_balance", "head_ledger_time"] {
            json[field] = serde_json::Value::Null;
        }
        let state = LockedWalletRow::from_json(json)
            .unwrap()
            .wallet_state()
            .unwrap()
            .unwrap();
        assert_eq!(
            (state.chain.sequence, state.chain.balance.minor_units()),
            (0, 0)
        );
        assert!(state.chain.ledger_time.is_none());
    }

    #[test]
    fn an_answer_in_another_shape_is_a_corrupt_row() {
        assert!(LockedWalletRow::from_json(wallet_json(json!("ab"))).is_err());
        assert!(LockedWalletRow::from_json(json!({"id": "alice"})).is_err());
    }

    #[test]
    fn a_shard_answers_an_array_of_its_accounts_or_a_corrupt_row() {
        let rows = shard_rows(json!([wallet_json(serde_json::Value::Null)])).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(shard_rows(json!([])).unwrap().is_empty());
        assert!(shard_rows(wallet_json(serde_json::Value::Null)).is_err());
    }
}
