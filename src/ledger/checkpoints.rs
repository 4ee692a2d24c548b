//! Balances of system accounts without a per-entry chain.
//!
//! A provider clearing account takes one entry per top-up; chaining those entries would make
//! every payment wait for the previous one's commit. Instead its entries carry no sequence and
//! its balance is `checkpoint.posted + sum(entries with xid >= checkpoint.below_xid)`. A
//! checkpoint sums exactly the entries of transactions that had *finished* when it was taken
//! (xid below its snapshot's xmin), so no entry can later commit beneath it, none is counted
//! twice, and reading the balance touches only the entries since the latest checkpoint.
//! `serve` advances checkpoints on an interval (`--checkpoint-interval-ms`).

use sqlx::PgConnection;

/// Taking checkpoints: one statement on one PostgreSQL, another on Citus, side by side in the
/// store.
pub use super::store::checkpoints::advance;

/// Saturated one past ±(2^53 − 1): a balance taken out of range before the bound held reads
/// as out of range (the caller refuses it), not as `bigint out of range`.
pub async fn system_posted_balance(
    conn: &mut PgConnection,
    account: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with cp as (
               select posted, below_xid from account_checkpoints
               where account_id = $1 order by below_xid desc limit 1)
           select least(greatest(
                      coalesce((select posted from cp), 0)
                      + coalesce((select sum(amount) from entries
                                  where account_id = $1 and sequence is null
                                    and xid >= coalesce((select below_xid from cp), '0'::xid8)), 0),
                      -9007199254740992), 9007199254740992)::bigint as "posted!""#,
        account
    )
    .fetch_one(conn)
    .await
}
