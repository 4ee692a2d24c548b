//! Taking checkpoints of system accounts (see `ledger::checkpoints` for what they are): one
//! statement on one PostgreSQL, and on Citus a form that learns the horizon first and waits out
//! transactions prepared on the workers.

use super::Db;
use crate::db::Engine;
use sqlx::PgConnection;

/// Takes a new checkpoint of every system account that has entries since its last one.
/// Returns how many checkpoints were written. Safe to run concurrently with writers and
/// with itself (a second run in the same snapshot horizon conflicts on the primary key and
/// writes nothing for that account).
///
/// One account never stops the others: the sums are numeric, and an account whose balance
/// would leave ±(2^53 − 1) (only possible for entries written before the write path bounded
/// system accounts) gets no checkpoint; it is logged and counted in
/// `wallet_ledger_checkpoint_failures_total`, and `verify` reports it (`balance_range`). Its
/// reads answer 409 `balance_out_of_range` until an operator corrects it.
///
/// Account sets' checkpoints are advanced in the same round (`sets::bookkeeping`).
pub async fn advance(db: &mut Db<'_>) -> Result<u64, sqlx::Error> {
    let systems = match db.engine() {
        Engine::Plain => advance_plain(db.conn()).await?,
        Engine::Citus => advance_citus(db.conn()).await?,
    };
    let sets = crate::ledger::sets::bookkeeping::advance_checkpoints(db.conn()).await?;
    Ok(systems + sets)
}

/// [`advance`] on one PostgreSQL: the horizon, the sums and the inserts in one statement.
async fn advance_plain(conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        r#"with due as (
               select a.id, s.horizon,
                      coalesce(cp.posted, 0) + sum(e.amount) as posted,
                      coalesce(cp.entry_count, 0) + count(*) as entry_count
               from accounts a
               cross join (select pg_snapshot_xmin(pg_current_snapshot()) as horizon) s
               left join lateral (
                   select posted, below_xid, entry_count from account_checkpoints c
                   where c.account_id = a.id order by below_xid desc limit 1) cp on true
               join entries e on e.account_id = a.id and e.sequence is null
                             and e.xid >= coalesce(cp.below_xid, '0'::xid8) and e.xid < s.horizon
               where a.type = 'system'
               group by a.id, s.horizon, cp.posted, cp.entry_count),
           written as (
               insert into account_checkpoints (account_id, below_xid, posted, entry_count)
               select id, horizon, posted::bigint, entry_count from due
               where posted between -9007199254740991 and 9007199254740991
               on conflict do nothing
               returning 1)
           select (select count(*) from written) as "written!",
                  array(select id from due
                        where posted not between -9007199254740991 and 9007199254740991
                        order by id) as "out_of_range!""#
    )
    .fetch_one(conn)
    .await?;
    report_out_of_range(&result.out_of_range);
    Ok(result.written as u64)
}

fn report_out_of_range(out_of_range: &[String]) {
    for account in out_of_range {
        tracing::error!(
            account = %account,
            "system account balance outside ±9007199254740991: no checkpoint; run `wallet-ledger verify`"
        );
    }
    if !out_of_range.is_empty() {
        metrics::counter!("wallet_ledger_checkpoint_failures_total")
            .increment(out_of_range.len() as u64);
    }
}

/// How long [`advance_citus`] waits for the workers' prepared transactions before it skips a
/// round (one stuck prepared transaction, say of a coordinator that died mid-commit, waits
/// for Citus's recovery; the next round tries again).
const PREPARED_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// [`advance`] on Citus, from the coordinator, which plans every write and so stamps every
/// entry with its own xid. Two differences. The horizon is taken first, and the sums wait
/// until every transaction that was prepared on a worker at that moment has finished: a
/// transaction that wrote on two workers commits with two-phase commit, the workers' COMMIT
/// PREPARED after the coordinator's own commit, so for a moment its xid is below the horizon
/// while its entries are not yet visible, and a checkpoint taken then would miss them for
/// good. And the latest checkpoint of each account is joined on the distribution column
/// (Citus refuses the lateral of one node).
async fn advance_citus(conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
    let Some(horizon) = citus_horizon(conn).await? else {
        return Ok(0);
    };
    let horizon = horizon.to_string();
    let result = sqlx::query!(
        r#"with due as materialized (
               select a.id, coalesce(cp.posted, 0) + sum(e.amount) as posted,
                      coalesce(cp.entry_count, 0) + count(*) as entry_count
               from accounts a
               left join (select distinct on (account_id) account_id, posted, below_xid,
                                 entry_count
                          from account_checkpoints order by account_id, below_xid desc) cp
                      on cp.account_id = a.id
               join entries e on e.account_id = a.id and e.sequence is null
                             and e.xid >= coalesce(cp.below_xid, '0'::xid8)
                             and e.xid < $1::text::xid8
               where a.type = 'system'
               group by a.id, cp.posted, cp.entry_count),
           written as (
               insert into account_checkpoints (account_id, below_xid, posted, entry_count)
               select id, $1::text::xid8, posted::bigint, entry_count from due
               where posted between -9007199254740991 and 9007199254740991
               on conflict do nothing
               returning 1)
           select (select count(*) from written) as "written!",
                  array(select id from due
                        where posted not between -9007199254740991 and 9007199254740991
                        order by id) as "out_of_range!""#,
        horizon
    )
    .fetch_one(conn)
    .await?;
    report_out_of_range(&result.out_of_range);
    Ok(result.written as u64)
}

/// The end of a sealed checkpoint's transaction window (`ledger::seals`): an xid below which
/// every transaction of this database has finished, so its entries are visible to the
/// caller's next statement. `None` on Citus when a transaction prepared on a worker before it
/// is still prepared after [`PREPARED_PATIENCE`].
pub async fn horizon(db: &mut Db<'_>) -> Result<Option<i64>, sqlx::Error> {
    let horizon = database_horizon(db.conn()).await?;
    match db.engine() {
        Engine::Plain => Ok(Some(horizon)),
        Engine::Citus => Ok(workers_caught_up(db.conn()).await?.then_some(horizon)),
    }
}

/// The oldest transaction still running in this database (or prepared in it), else the next
/// xid: the snapshot's running xids that belong to this database's sessions and prepared
/// transactions, not the whole server's. A writing transaction of another database on the
/// same server cannot write this ledger's entries, so it does not hold the window back. One
/// that finishes between the snapshot and the activity read is already visible to the next
/// statement; one that starts after has an xid above the snapshot's `xmax`. xids are
/// compared on their 32 bits: within one snapshot they are unambiguous.
///
/// Only for a caller that reads the window in a later statement, with a snapshot of its own:
/// [`advance_plain`] takes its horizon and its sums in one statement, whose snapshot would not
/// see a transaction that finished between it and the activity read, so it keeps the
/// server-wide `pg_snapshot_xmin`.
async fn database_horizon(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "select coalesce(
             (select min(x::text::bigint) from pg_snapshot_xip(s.snap) x
              where x::text::bigint % 4294967296 in (
                  select backend_xid::text::bigint from pg_stat_activity
                  where datname = current_database() and backend_xid is not null
                  union all
                  select transaction::text::bigint from pg_prepared_xacts
                  where database = current_database())),
             pg_snapshot_xmax(s.snap)::text::bigint)
         from (select pg_current_snapshot() as snap) s",
    )
    .fetch_one(conn)
    .await
}

/// The coordinator's horizon for system accounts' checkpoints, once every transaction
/// prepared on a worker when it was taken has finished (see [`advance_citus`]); `None` when
/// one is still prepared after [`PREPARED_PATIENCE`].
async fn citus_horizon(conn: &mut PgConnection) -> Result<Option<i64>, sqlx::Error> {
    let horizon: i64 =
        sqlx::query_scalar("select (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint")
            .fetch_one(&mut *conn)
            .await?;
    Ok(workers_caught_up(conn).await?.then_some(horizon))
}

/// Waits until every transaction prepared on a worker now has finished (Citus commits them
/// after the coordinator's own commit); false when one is still prepared after
/// [`PREPARED_PATIENCE`].
async fn workers_caught_up(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let prepared = prepared_on_workers(conn).await?;
    let deadline = tokio::time::Instant::now() + PREPARED_PATIENCE;
    while !prepared.is_empty() {
        let now = prepared_on_workers(conn).await?;
        if prepared.is_disjoint(&now) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                prepared = ?prepared.intersection(&now).collect::<Vec<_>>(),
                "transactions prepared on Citus workers before the horizon are still prepared: no checkpoint this round"
            );
            return Ok(false);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(true)
}

/// The global ids of the transactions prepared on the workers, in this database (any, not
/// only Citus's own: waiting for one more is harmless).
async fn prepared_on_workers(
    conn: &mut PgConnection,
) -> Result<std::collections::HashSet<String>, sqlx::Error> {
    let results: Vec<(bool, String)> = sqlx::query_as(
        "select success, result from run_command_on_workers(
             $$select coalesce(string_agg(gid, ','), '') from pg_prepared_xacts
               where database = current_database()$$)",
    )
    .fetch_all(conn)
    .await?;
    let mut gids = std::collections::HashSet::new();
    for (success, result) in results {
        if !success {
            return Err(sqlx::Error::Protocol(format!(
                "could not list the prepared transactions of a worker: {result}"
            )));
        }
        gids.extend(
            result
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_owned),
        );
    }
    Ok(gids)
}
