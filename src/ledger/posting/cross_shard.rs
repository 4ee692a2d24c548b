//! The journal rules that span shards, on Citus: checked by the write path after it inserted
//! entries, in the same transaction, before COMMIT.
//!
//! On one PostgreSQL the entries trigger checks every rule. On Citus it runs on each shard of
//! `entries` and sees only that shard (a wallet's chain, an entry against its co-located
//! account; see migrations/citus/distribute.sql). A transaction's entries are spread over
//! the shards of its accounts and its row lives on the shard of its id, so three rules are
//! checked here, by one query on the coordinator, which sees this transaction's own writes:
//! the entries of each transaction sum to zero per currency; all of them were written by
//! this database transaction (the write path writes a transaction's entries in one
//! statement); each fits its transaction (exists, posted, same currency). A breach rolls the
//! transaction back with the trigger's own error (SQLSTATE 23514 and message), so callers
//! see what they see on one node. `verify` checks the same rules over the whole journal.

use sqlx::PgConnection;
use uuid::Uuid;

/// Refuses the current transaction's entries of `transactions` when they break a rule
/// that spans shards. Entries' `xid` is the coordinator's (its default is evaluated where the
/// statement is planned), so "written by this transaction" compares it with the
/// coordinator's `pg_current_xact_id()`, evaluated in the outer query, which runs there.
///
/// The entries are read on the accounts just written (`accounts`), which Citus prunes to
/// their shards: read by `transaction_id` alone, the query reached all 32 shards of every
/// group. The write path writes a transaction's entries only there (a new transaction row,
/// or a pending hold's capture); entries of the same transaction elsewhere could only come
/// from SQL written by hand on the cluster, which `verify` reports.
pub async fn check(
    conn: &mut PgConnection,
    transactions: &[Uuid],
    accounts: &[&str],
) -> Result<(), sqlx::Error> {
    let broken = sqlx::query!(
        r#"with e as materialized (
               select transaction_id, currency, sum(amount) as total,
                      min(xid) as first_xid, max(xid) as last_xid
               from entries where account_id = any($2) and transaction_id = any($1)
               group by transaction_id, currency),
           t as materialized (
               select id, currency, status from transactions where id = any($1))
           select exists (select 1 from e where total <> 0) as "unbalanced!",
                  exists (select 1 from e where first_xid <> pg_current_xact_id()
                                             or last_xid <> pg_current_xact_id()) as "earlier!",
                  exists (select 1 from e left join t on t.id = e.transaction_id
                          where t.id is null or t.currency <> e.currency
                             or t.status <> 'posted') as "misfit!""#,
        transactions,
        accounts as &[&str]
    )
    .fetch_one(&mut *conn)
    .await?;
    let refusal = if broken.unbalanced {
        "unbalanced transaction: entries must sum to zero per currency"
    } else if broken.earlier {
        "entries of a transaction must all be written in one statement"
    } else if broken.misfit {
        "entry does not fit its account or transaction (currency, status, wallet chain)"
    } else {
        return Ok(());
    };
    // Raised by the database, so that the error is the trigger's own: a check_violation
    // that aborts the transaction, mapped by the callers exactly as on one node.
    sqlx::query("select wallet_ledger_refuse($1)")
        .bind(refusal)
        .execute(&mut *conn)
        .await?;
    unreachable_refusal(refusal)
}

fn unreachable_refusal(refusal: &str) -> Result<(), sqlx::Error> {
    Err(sqlx::Error::Protocol(format!(
        "wallet_ledger_refuse did not raise: {refusal}"
    )))
}
