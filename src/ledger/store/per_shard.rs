//! Citus: a statement's rows written one call per shard, when they are many per shard.
//!
//! A multi-row `insert ... values` is one statement for the service, but Citus takes each of
//! its rows apart on the coordinator and writes it out again as SQL text for its shard: with
//! a consumer batch's thousand payments that was the coordinator's largest cost, and the
//! coordinator is the node every write goes through. The functions of
//! migrations/citus/write_path.sql (`entries_written_in_shard`,
//! `transactions_written_in_shard`) take a shard's rows as arrays and are delegated whole to
//! its worker. Each call is a statement of its own, so they pay only when a shard gets many
//! rows ([`pays`]); a small group keeps the one multi-row insert (docs/performance.md, "Rows
//! written one call per shard").
//!
//! Calls go shard by shard in ascending shard id, rows in their given order within, so two
//! writers that share ids meet them in one global order.

use super::inserts::{EntryRow, TransactionColumns};
use crate::ledger::money::Amount;
use crate::ledger::posting::Rendered;
use crate::ledger::posting::cross_shard::{TransactionRow, WrittenEntry};
use sqlx::PgConnection;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Rows per shard (on average over the shards written) from which one call per shard costs
/// the cluster less than one multi-row insert. Measured by hand (2026-12-07, two workers, 8
/// shards, `pgbench`): a delegated call cost the coordinator about what 25 rows of a
/// multi-row insert cost it; 1,000 rows over the 8 shards cost it a third as much sent one
/// call per shard as in one multi-row insert, and 8 rows over 5 shards 1.6 to 1.9 times as
/// much.
pub(crate) const MIN_ROWS_PER_SHARD: usize = 32;

/// Whether `rows` over `shards` shards go one call per shard.
pub(crate) fn pays(rows: usize, shards: usize) -> bool {
    shards > 0 && rows >= MIN_ROWS_PER_SHARD * shards
}

/// The shard of each of `ids` (rows of `table`), when one call per shard [`pays`] for them;
/// `None` otherwise. Asked only from enough rows for two shards: rows of a group spread over
/// several shards, and below that the question alone (a statement) would cost what it
/// saves.
pub(crate) async fn shards_if_paying<T>(
    conn: &mut PgConnection,
    table: &'static str,
    ids: &[T],
) -> Result<Option<Vec<i64>>, sqlx::Error>
where
    T: Send + Sync,
    for<'q> &'q [T]: sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    if !pays(ids.len(), 2) {
        return Ok(None);
    }
    let shards = super::shards::shards_of(conn, table, ids).await?;
    let distinct = shards
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Ok(pays(ids.len(), distinct).then_some(shards))
}

/// The positions of `shards` (the shard of each row) grouped by shard, shards ascending,
/// positions in order within each.
fn positions_by_shard(shards: &[i64]) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (position, shard) in shards.iter().enumerate() {
        groups.entry(*shard).or_default().push(position);
    }
    groups.into_values().collect()
}

/// What Citus would evaluate on the coordinator for the rows of a multi-row insert, and a
/// shard has no default for: the coordinator's `xid` and `count` values of `sequence`, in
/// order.
async fn coordinator_values(
    conn: &mut PgConnection,
    sequence: &'static str,
    count: usize,
) -> Result<(String, Vec<i64>), sqlx::Error> {
    sqlx::query_as(
        "select pg_current_xact_id()::text,
                array(select nextval($1::regclass) from generate_series(1, $2))",
    )
    .bind(sequence)
    .bind(i64::try_from(count).expect("a statement's rows fit an i64"))
    .fetch_one(conn)
    .await
}

/// `entries` (of accounts on the shards `shards`, one per entry) written one call per shard.
/// Their ids are taken in the entries' order, as a multi-row insert takes them.
pub(crate) async fn insert_entries(
    conn: &mut PgConnection,
    entries: &[EntryRow<'_>],
    shards: &[i64],
) -> Result<Vec<WrittenEntry>, sqlx::Error> {
    let (xid, ids) = coordinator_values(&mut *conn, "entries_id_seq", entries.len()).await?;
    for positions in positions_by_shard(shards) {
        let rows: Vec<(i64, &EntryRow)> =
            positions.iter().map(|&i| (ids[i], &entries[i])).collect();
        let written = entries_call(&mut *conn, &xid, &rows).await?;
        if usize::try_from(written).ok() != Some(rows.len()) {
            return Err(sqlx::Error::Protocol(format!(
                "entries_written_in_shard wrote {written} rows of {}",
                rows.len()
            )));
        }
    }
    let written = entries.iter().map(|(transaction, currency, _, entry)| {
        WrittenEntry::new(*transaction, currency, entry.amount.minor_units())
    });
    Ok(written.collect())
}

/// One shard's call of `entries_written_in_shard`: the number of rows it wrote.
async fn entries_call(
    conn: &mut PgConnection,
    xid: &str,
    rows: &[(i64, &EntryRow<'_>)],
) -> Result<i32, sqlx::Error> {
    fn entry<'r>(row: &(i64, &EntryRow<'r>)) -> &'r crate::ledger::posting::NewEntry {
        row.1.3
    }
    let accounts: Vec<&str> = rows.iter().map(|r| entry(r).account.as_str()).collect();
    sqlx::query_scalar(
        "select entries_written_in_shard($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(accounts[0])
    .bind(xid)
    .bind(rows.iter().map(|r| r.0).collect::<Vec<i64>>())
    .bind(rows.iter().map(|r| r.1.0).collect::<Vec<Uuid>>())
    .bind(&accounts)
    .bind(rows.iter().map(|r| r.1.1).collect::<Vec<&str>>())
    .bind(
        rows.iter()
            .map(|r| entry(r).amount.minor_units())
            .collect::<Vec<i64>>(),
    )
    .bind(rows.iter().map(|r| entry(r).sequence).collect::<Vec<_>>())
    .bind(
        rows.iter()
            .map(|r| entry(r).balance_after.map(Amount::minor_units))
            .collect::<Vec<_>>(),
    )
    .bind(rows.iter().map(|r| r.1.2).collect::<Vec<_>>())
    .bind(
        rows.iter()
            .map(|r| entry(r).effective_at)
            .collect::<Vec<_>>(),
    )
    .bind(
        rows.iter()
            .map(|r| super::inserts::stored_hash(entry(r)))
            .collect::<Vec<_>>(),
    )
    .fetch_one(conn)
    .await
}

/// `sorted` (transactions in id order, on the shards `shards`, one per row) written one call
/// per shard with `on conflict (id) do nothing`; the rows inserted, as the multi-row insert
/// returns them. Their `seq` values are taken in id order, as the multi-row insert takes
/// them.
pub(crate) async fn insert_transactions(
    conn: &mut PgConnection,
    sorted: &[&Rendered],
    shards: &[i64],
) -> Result<Vec<TransactionRow>, sqlx::Error> {
    let (_, seqs) = coordinator_values(&mut *conn, "transactions_seq_seq", sorted.len()).await?;
    let mut inserted = Vec::with_capacity(sorted.len());
    for positions in positions_by_shard(shards) {
        let rows: Vec<&Rendered> = positions.iter().map(|&i| sorted[i]).collect();
        let seqs: Vec<i64> = positions.iter().map(|&i| seqs[i]).collect();
        let answer = transactions_call(&mut *conn, &seqs, &rows).await?;
        let rows: Vec<TransactionRow> =
            serde_json::from_value(answer).map_err(|e| sqlx::Error::Decode(e.into()))?;
        inserted.extend(rows);
    }
    Ok(inserted)
}

/// One shard's call of `transactions_written_in_shard`: the rows it inserted, as JSON.
async fn transactions_call(
    conn: &mut PgConnection,
    seqs: &[i64],
    rows: &[&Rendered],
) -> Result<serde_json::Value, sqlx::Error> {
    let c = TransactionColumns::of(rows);
    sqlx::query_scalar(
        "select transactions_written_in_shard($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
                                              $12, $13, $14, $15, $16, $17, $18, $19, $20,
                                              $21, $22, $23)",
    )
    .bind(c.ids[0])
    .bind(seqs)
    .bind(&c.ids)
    .bind(&c.kinds)
    .bind(&c.statuses)
    .bind(&c.currencies)
    .bind(&c.legs)
    .bind(&c.account_ids)
    .bind(&c.external_refs)
    .bind(&c.metadata)
    .bind(&c.refusal_codes)
    .bind(&c.refusal_details)
    .bind(&c.requests)
    .bind(&c.creation_outcomes)
    .bind(&c.bodies)
    .bind(&c.created)
    .bind(&c.posted)
    .bind(&c.expires)
    .bind(&c.reverses)
    .bind(&c.reversed)
    .bind(&c.backdated)
    .bind(&c.counter_currencies)
    .bind(&c.exchange_rates)
    .fetch_one(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::{MIN_ROWS_PER_SHARD, pays, positions_by_shard};

    #[test]
    fn one_call_per_shard_pays_from_enough_rows_per_shard() {
        assert!(!pays(MIN_ROWS_PER_SHARD - 1, 1));
        assert!(pays(MIN_ROWS_PER_SHARD, 1));
        assert!(!pays(MIN_ROWS_PER_SHARD * 8 - 1, 8));
        assert!(pays(1_000, 8));
        assert!(
            !pays(40, 5),
            "an API group of 20 transfers over five shards"
        );
        assert!(!pays(0, 0));
    }

    #[test]
    fn positions_group_by_shard_ascending_keeping_their_order() {
        let grouped = positions_by_shard(&[7, 3, 7, 3, 5]);
        assert_eq!(grouped, vec![vec![1, 3], vec![4], vec![0, 2]]);
        assert!(positions_by_shard(&[]).is_empty());
    }
}
