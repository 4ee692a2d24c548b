//! What the write path writes for wallets that count in sets, in the posting's own transaction
//! and under the wallet's lock (its row says `in_sets`; a wallet in no set writes none of
//! this), and the periodic checkpoint that keeps a set's balance read short.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// An entry of a wallet in a set, as its sets record it.
pub struct SetEntry<'a> {
    pub transaction_id: Uuid,
    pub account: &'a str,
    pub amount: i64,
    pub ledger_time: DateTime<Utc>,
    pub effective_at: Option<DateTime<Utc>>,
}

/// One movement per entry and per set its wallet counts in, in one statement. The sets are
/// read here, after the wallets' locks: a membership change waits for those locks, so the sets
/// read are the ones the wallet is in when the entry commits.
pub async fn record_entries(
    conn: &mut PgConnection,
    entries: &[SetEntry<'_>],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let transactions: Vec<Uuid> = entries.iter().map(|e| e.transaction_id).collect();
    let accounts: Vec<&str> = entries.iter().map(|e| e.account).collect();
    let amounts: Vec<i64> = entries.iter().map(|e| e.amount).collect();
    let times: Vec<DateTime<Utc>> = entries.iter().map(|e| e.ledger_time).collect();
    let effective: Vec<Option<DateTime<Utc>>> = entries.iter().map(|e| e.effective_at).collect();
    sqlx::query!(
        r#"insert into account_set_movements (set_id, account_id, kind, transaction_id, amount,
                                              ledger_time, effective_at)
           select c.set_id, e.account_id, 'entry', e.transaction_id, e.amount, e.ledger_time,
                  e.effective_at
           from unnest($1::uuid[], $2::text[], $3::bigint[], $4::timestamptz[],
                       $5::timestamptz[]) as e(transaction_id, account_id, amount, ledger_time,
                                               effective_at)
           join account_set_closure c on c.account_id = e.account_id"#,
        &transactions,
        &accounts as &[&str],
        &amounts,
        &times,
        &effective as &[Option<DateTime<Utc>>],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A new open hold of a wallet in a set.
pub struct SetHold<'a> {
    pub transaction_id: Uuid,
    pub account: &'a str,
    pub amount: i64,
    pub expires_at: DateTime<Utc>,
}

/// Copies new open holds to every set their wallet counts in.
pub async fn copy_holds(conn: &mut PgConnection, holds: &[SetHold<'_>]) -> Result<(), sqlx::Error> {
    if holds.is_empty() {
        return Ok(());
    }
    let transactions: Vec<Uuid> = holds.iter().map(|h| h.transaction_id).collect();
    let accounts: Vec<&str> = holds.iter().map(|h| h.account).collect();
    let amounts: Vec<i64> = holds.iter().map(|h| h.amount).collect();
    let expiries: Vec<DateTime<Utc>> = holds.iter().map(|h| h.expires_at).collect();
    sqlx::query!(
        r#"insert into account_set_open_holds (set_id, transaction_id, account_id, amount,
                                               expires_at)
           select c.set_id, h.transaction_id, h.account_id, h.amount, h.expires_at
           from unnest($1::uuid[], $2::text[], $3::bigint[], $4::timestamptz[])
                as h(transaction_id, account_id, amount, expires_at)
           join account_set_closure c on c.account_id = h.account_id"#,
        &transactions,
        &accounts as &[&str],
        &amounts,
        &expiries,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A captured or voided hold stops counting in every set.
pub async fn release_hold(
    conn: &mut PgConnection,
    transaction_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "delete from account_set_open_holds where transaction_id = $1",
        transaction_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes a new checkpoint of every set that has movements since its last one, the way system
/// accounts' are taken (`ledger::checkpoints`): it sums exactly the movements of transactions
/// that had finished when its snapshot was taken (xid below the snapshot's xmin), so none can
/// later commit beneath it. The same statement on both engines: the set tables are the
/// coordinator's, stamped with its xids, and committed by its own commit. Then deletes the
/// copies of holds that have expired (they no longer count). Returns the checkpoints written.
pub async fn advance_checkpoints(conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
    let written = sqlx::query_scalar!(
        r#"with due as (
               select m.set_id, s.horizon,
                      coalesce(cp.posted, 0) + sum(m.amount) as posted,
                      coalesce(cp.movement_count, 0) + count(*) as movement_count
               from account_sets a
               cross join (select pg_snapshot_xmin(pg_current_snapshot()) as horizon) s
               left join lateral (
                   select posted, below_xid, movement_count from account_set_checkpoints c
                   where c.set_id = a.id order by below_xid desc limit 1) cp on true
               join account_set_movements m
                    on m.set_id = a.id and m.xid >= coalesce(cp.below_xid, '0'::xid8)
                   and m.xid < s.horizon
               group by m.set_id, s.horizon, cp.posted, cp.movement_count),
           written as (
               insert into account_set_checkpoints (set_id, below_xid, posted, movement_count)
               select set_id, horizon, posted, movement_count from due
               on conflict do nothing
               returning 1)
           select count(*) as "written!" from written"#
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!("delete from account_set_open_holds where expires_at <= now()")
        .execute(conn)
        .await?;
    Ok(written as u64)
}

/// A set with rules (velocity limits, balance monitors) that a wallet counts in.
#[derive(Debug, Clone)]
pub struct RuledSet {
    pub wallet: String,
    pub set: String,
    pub has_limits: bool,
    pub has_monitors: bool,
}

/// The sets with rules that `wallets` count in, one row per (wallet, set) pair (read under the
/// wallets' locks, like every read of their sets).
pub async fn ruled_sets_of(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<Vec<RuledSet>, sqlx::Error> {
    sqlx::query_as!(
        RuledSet,
        "select c.account_id as wallet, c.set_id as set, s.has_limits, s.has_monitors
         from account_set_closure c
         join account_sets s on s.id = c.set_id
         where c.account_id = any($1) and (s.has_limits or s.has_monitors)",
        wallets
    )
    .fetch_all(conn)
    .await
}

/// Locks these sets' rows, `sorted`: what serializes the changes of a ruled set's wallets
/// (each checks the set's limits and monitors against what the others committed), a change
/// of its rules, and a change of its members.
pub async fn lock_sets(conn: &mut PgConnection, sorted: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "select id from account_sets where id = any($1) order by id for update",
        sorted
    )
    .fetch_all(conn)
    .await?;
    Ok(())
}
