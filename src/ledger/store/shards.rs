//! Which shard holds each row, on Citus: what lets the write path send one statement per shard
//! where it sent one per row.
//!
//! Citus runs `FOR UPDATE`, and pushes a lateral join down, only in a statement that reaches
//! one shard. A statement that names several rows of one shard (`id = any($1)`, every id
//! hashing to that shard) is such a statement, with its parameters bound at execution (Citus
//! prunes then). So the write path groups a pass's rows by shard and runs, per shard, the
//! statement one PostgreSQL runs for all of them: a group of 22 transfers between random
//! wallets locked 44 accounts with 44 statements and read them with 44 more; over 32 shards
//! that is about 24 of each.

use sqlx::PgConnection;
use uuid::Uuid;

/// The accounts `sorted_ids` split by the shard that holds each (and their rows of the
/// co-located `entries`, `open_holds` and `account_checkpoints`), shards in ascending shard
/// id, the ids of each in their given order. Every locker that locks through this takes its
/// rows in one global order (shard, then the caller's order within it), which is what keeps
/// them free of deadlocks. Computed on the node the connection is on, from Citus's metadata,
/// without reaching a worker. Not a checked query: the function exists only with Citus.
pub async fn accounts_by_shard(
    conn: &mut PgConnection,
    sorted_ids: &[String],
) -> Result<Vec<Vec<String>>, sqlx::Error> {
    by_shard(conn, "accounts", sorted_ids).await
}

/// The transactions `sorted_ids` split by the shard that holds each, as
/// [`accounts_by_shard`] splits accounts (`transactions` is distributed by id in a co-location
/// group of its own).
pub async fn transactions_by_shard(
    conn: &mut PgConnection,
    sorted_ids: &[Uuid],
) -> Result<Vec<Vec<Uuid>>, sqlx::Error> {
    by_shard(conn, "transactions", sorted_ids).await
}

/// `ids` (of the distributed table `table`) grouped by the shard that holds each.
async fn by_shard<T>(
    conn: &mut PgConnection,
    table: &'static str,
    ids: &[T],
) -> Result<Vec<Vec<T>>, sqlx::Error>
where
    T: Clone + Send + Sync,
    for<'q> &'q [T]: sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let shards = shards_of(conn, table, ids).await?;
    Ok(group(ids, &shards))
}

/// The shard of each of `ids` (rows of the distributed table `table`), in their order. The
/// array's type travels with the bound parameter, so one statement serves text and uuid ids;
/// not kept prepared, since a prepared statement keeps the type of its first call's array.
pub async fn shards_of<T>(
    conn: &mut PgConnection,
    table: &'static str,
    ids: &[T],
) -> Result<Vec<i64>, sqlx::Error>
where
    T: Send + Sync,
    for<'q> &'q [T]: sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar(
        "select get_shard_id_for_distribution_column($1::regclass, id)
         from unnest($2) with ordinality as i(id, n) order by n",
    )
    .bind(table)
    .bind(ids)
    .persistent(false)
    .fetch_all(conn)
    .await
}

/// The ids grouped by their shard (`shards[i]` holds `ids[i]`), groups in shard order, each
/// keeping the ids' order.
fn group<T: Clone>(ids: &[T], shards: &[i64]) -> Vec<Vec<T>> {
    let mut groups: std::collections::BTreeMap<i64, Vec<T>> = Default::default();
    for (id, shard) in ids.iter().zip(shards) {
        groups.entry(*shard).or_default().push(id.clone());
    }
    groups.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::group;

    #[test]
    fn groups_follow_the_shard_order_and_keep_the_ids_order_within() {
        let ids: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let grouped = group(&ids, &[7, 3, 7, 3, 5]);
        assert_eq!(grouped, vec![vec!["b", "d"], vec!["e"], vec!["a", "c"]]);
    }

    #[test]
    fn no_ids_no_groups() {
        assert!(group::<String>(&[], &[]).is_empty());
    }
}
