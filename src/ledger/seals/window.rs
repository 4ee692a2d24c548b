//! The statements of a checkpoint's transaction window: the entries written between two
//! horizons, the transactions' metadata digests, the leaves a checkpoint stored, and what a
//! transaction's proof reads. One form for both engines: the reads of `entries` and
//! `transactions` are plain filters (on Citus, fanned out to every shard), the leaves a plain
//! table (on Citus, the coordinator's).
//!
//! The window is by the entries' `xid`, the same order system accounts' balance checkpoints
//! use (`ledger::store::checkpoints`): every transaction below a horizon has finished, so no
//! entry can later appear in a window already sealed, and each transaction's entries share
//! one xid (they arrive in one statement), so it falls in exactly one window.

use super::merkle::Hash;
use super::metadata;
use super::transactions::{SealedEntry, SealedTransaction, in_tree_order};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

type EntryRow = (
    i64,
    Uuid,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

const ENTRY_COLUMNS: &str = "id, transaction_id, account_id, currency, amount, sequence, \
                             balance_after, ledger_time, effective_at";

fn sealed_entry(row: EntryRow) -> SealedEntry {
    let (id, transaction, account, currency, amount, sequence, balance_after, ledger_time, at) =
        row;
    SealedEntry {
        id,
        transaction,
        account,
        currency,
        amount,
        sequence,
        balance_after,
        ledger_time,
        effective_at: at,
    }
}

/// Every entry whose xid is in `[from, below)`. The xid is compared as a number, the
/// expression the `entries_xid_window` index is on.
pub async fn entries(
    conn: &mut PgConnection,
    from: i64,
    below: i64,
) -> Result<Vec<SealedEntry>, sqlx::Error> {
    let rows: Vec<EntryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {ENTRY_COLUMNS} from entries
         where (xid::text)::bigint >= $1 and (xid::text)::bigint < $2"
    )))
    .bind(from)
    .bind(below)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(sealed_entry).collect())
}

/// The metadata digest a seal takes of each of `ids` (`seals::metadata::sealed_digest`).
pub async fn metadata_digests(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Hash>, sqlx::Error> {
    Ok(metadata_rows(conn, ids)
        .await?
        .into_iter()
        .map(|m| (m.id, m.digest()))
        .collect())
}

/// A transaction's metadata as stored, with what its seal's digest is taken from.
#[derive(Debug, Clone)]
pub struct StoredMetadata {
    pub id: Uuid,
    pub salt: Option<Vec<u8>>,
    /// `metadata::text`, PostgreSQL's one rendering of the `jsonb`.
    pub text: String,
    pub erased_digest: Option<Vec<u8>>,
}

impl StoredMetadata {
    pub fn digest(&self) -> Hash {
        metadata::sealed_digest(
            self.salt.as_deref(),
            &self.text,
            self.erased_digest.as_deref(),
        )
    }
}

type MetadataRow = (Uuid, Option<Vec<u8>>, String, Option<Vec<u8>>);

async fn metadata_rows(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<StoredMetadata>, sqlx::Error> {
    let rows: Vec<MetadataRow> = sqlx::query_as(
        "select id, metadata_salt, metadata::text, metadata_erased_digest
         from transactions where id = any($1)",
    )
    .bind(ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, salt, text, erased_digest)| StoredMetadata {
            id,
            salt,
            text,
            erased_digest,
        })
        .collect())
}

/// The transactions of the window `[from, below)` in tree order, each with its entries. An
/// entry whose transaction has no row is a broken journal: an error naming it.
pub async fn transactions(
    conn: &mut PgConnection,
    from: i64,
    below: i64,
) -> Result<Vec<SealedTransaction>, sqlx::Error> {
    let entries = entries(&mut *conn, from, below).await?;
    let mut ids: Vec<Uuid> = entries.iter().map(|e| e.transaction).collect();
    ids.sort_unstable();
    ids.dedup();
    let digests = metadata_digests(conn, &ids).await?;
    in_tree_order(entries, &digests).map_err(|id| {
        sqlx::Error::Protocol(format!("entries of transaction {id}, which has no row"))
    })
}

/// The leaves checkpoint `n` stored, by leaf index, each with its transaction's id.
pub async fn leaves(conn: &mut PgConnection, n: i64) -> Result<Vec<(Uuid, Hash)>, sqlx::Error> {
    let rows: Vec<(Uuid, Vec<u8>)> = sqlx::query_as(
        "select transaction_id, leaf from journal_checkpoint_transactions
         where checkpoint = $1 order by leaf_index",
    )
    .bind(n)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, leaf)| (id, <Hash>::try_from(leaf.as_slice()).unwrap_or_default()))
        .collect())
}

/// Checkpoint `n`'s leaves, in the caller's transaction.
pub async fn insert_leaves(
    conn: &mut PgConnection,
    n: i64,
    transactions: &[SealedTransaction],
) -> Result<(), sqlx::Error> {
    let indexes: Vec<i64> = (0..transactions.len() as i64).collect();
    let ids: Vec<Uuid> = transactions.iter().map(|t| t.id).collect();
    let leaves: Vec<Vec<u8>> = transactions.iter().map(|t| t.leaf().to_vec()).collect();
    sqlx::query(
        "insert into journal_checkpoint_transactions (checkpoint, leaf_index, transaction_id, leaf)
         select $1, i, t, l from unnest($2::bigint[], $3::uuid[], $4::bytea[]) u(i, t, l)",
    )
    .bind(n)
    .bind(&indexes)
    .bind(&ids)
    .bind(&leaves)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Where transaction `id` is sealed: its checkpoint and leaf index.
pub async fn place(conn: &mut PgConnection, id: Uuid) -> Result<Option<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "select checkpoint, leaf_index from journal_checkpoint_transactions
         where transaction_id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Transaction `id` as it is stored now, as a seal hashes it, with its metadata.
pub async fn transaction(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<(SealedTransaction, StoredMetadata)>, sqlx::Error> {
    let rows: Vec<EntryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {ENTRY_COLUMNS} from entries where transaction_id = $1 order by id"
    )))
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let Some(metadata) = metadata_rows(conn, &[id]).await?.pop() else {
        return Ok(None);
    };
    let sealed = SealedTransaction {
        id,
        metadata_digest: metadata.digest(),
        entries: rows.into_iter().map(sealed_entry).collect(),
    };
    Ok(Some((sealed, metadata)))
}
