//! Flags on account rows that the statement locking a wallet reads with it, so that a wallet
//! without the feature costs the write path nothing more (`in_sets`: it counts in an account
//! set). Each is set and cleared by a writer that holds the rows' locks.

use super::Db;
use crate::db::Engine;
use sqlx::PgConnection;

/// Sets `accounts.in_sets` of `wallets` (locked by the caller) to `value`.
pub async fn in_sets(db: &mut Db<'_>, wallets: &[String], value: bool) -> Result<(), sqlx::Error> {
    if wallets.is_empty() {
        return Ok(());
    }
    match db.engine() {
        Engine::Plain => mark_in_sets(db.conn(), wallets, value).await,
        // One statement per shard: the wallets' rows were locked shard by shard on the same
        // connections, and a statement over several shards would want connections of its own.
        Engine::Citus => {
            for shard in super::shards::accounts_by_shard(db.conn(), wallets).await? {
                mark_in_sets(db.conn(), &shard, value).await?;
            }
            Ok(())
        }
    }
}

async fn mark_in_sets(
    conn: &mut PgConnection,
    wallets: &[String],
    value: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update accounts set in_sets = $2 where id = any($1) and in_sets <> $2",
        wallets,
        value
    )
    .execute(conn)
    .await?;
    Ok(())
}
