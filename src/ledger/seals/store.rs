//! The statements of sealing and of checking seals. Each has one form for both engines: the
//! checkpoint tables are plain tables (on Citus, the coordinator's), and the reads of entries
//! join them on the distribution column or by a list of accounts.

use super::proof::CheckpointView;
use super::{Checkpoint, Head, Sealed, TransactionsSeal};
use crate::ledger::events::{self, EventType};
use crate::ledger::posting::ChainHash;
use crate::ledger::store::Db;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::collections::HashMap;

type HeadRow = (String, i64, Vec<u8>);

fn head((account, sequence, link): HeadRow) -> Head {
    Head {
        account,
        sequence,
        link: ChainHash::stored(Some(link)),
    }
}

/// Heads in the order their tree takes them: by account id, byte by byte (the database's
/// collation may order text otherwise).
fn in_tree_order(rows: Vec<HeadRow>) -> Vec<Head> {
    let mut heads: Vec<Head> = rows.into_iter().map(head).collect();
    heads.sort_by(|a, b| a.account.as_bytes().cmp(b.account.as_bytes()));
    heads
}

/// Sealers take turns: the lock is held to COMMIT.
pub(super) async fn lock_sealing(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("select pg_advisory_xact_lock(hashtext('wallet-ledger seal'))")
        .execute(conn)
        .await
        .map(|_| ())
}

/// The database's clock, as stored (microseconds).
pub(super) async fn now_micros(conn: &mut PgConnection) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("select now()").fetch_one(conn).await
}

type CheckpointRow = (
    i64,
    DateTime<Utc>,
    Option<Vec<u8>>,
    i64,
    Vec<u8>,
    Option<i64>,
    Option<i64>,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<u8>,
    Vec<u8>,
);

const CHECKPOINT_COLUMNS: &str = "n, sealed_at, previous_root, head_count, heads_root, \
                                  (transactions_horizon::text)::bigint, transaction_count, \
                                  transactions_root, root, public_key, signature";

fn sealed(row: CheckpointRow) -> Sealed {
    let (n, sealed_at, previous_root, head_count, heads_root, horizon, transaction_count) =
        (row.0, row.1, row.2, row.3, row.4, row.5, row.6);
    let (transactions_root, root, public_key, signature) = (row.7, row.8, row.9, row.10);
    let hash = |b: Vec<u8>| <[u8; 32]>::try_from(b.as_slice()).unwrap_or_default();
    let transactions = transaction_count
        .zip(transactions_root)
        .map(|(count, root)| TransactionsSeal {
            count,
            root: hash(root),
        });
    Sealed {
        checkpoint: Checkpoint {
            n,
            sealed_at,
            previous_root: previous_root.map(hash),
            head_count,
            heads_root: hash(heads_root),
            transactions,
        },
        horizon,
        root,
        public_key,
        signature,
    }
}

/// The latest checkpoint, if any.
pub(super) async fn latest(conn: &mut PgConnection) -> Result<Option<Sealed>, sqlx::Error> {
    let row: Option<CheckpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {CHECKPOINT_COLUMNS} from journal_checkpoints order by n desc limit 1"
    )))
    .fetch_optional(conn)
    .await?;
    Ok(row.map(sealed))
}

/// Up to `limit` checkpoints below `before` (all when `None`), newest first.
pub async fn page(
    conn: &mut PgConnection,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Sealed>, sqlx::Error> {
    let rows: Vec<CheckpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {CHECKPOINT_COLUMNS} from journal_checkpoints
         where $1::bigint is null or n < $1 order by n desc limit $2"
    )))
    .bind(before)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(sealed).collect())
}

/// Checkpoint `n`, if it exists.
pub async fn one(conn: &mut PgConnection, n: i64) -> Result<Option<Sealed>, sqlx::Error> {
    let row: Option<CheckpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {CHECKPOINT_COLUMNS} from journal_checkpoints where n = $1"
    )))
    .bind(n)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(sealed))
}

/// Every checkpoint, oldest first.
pub async fn checkpoints(conn: &mut PgConnection) -> Result<Vec<Sealed>, sqlx::Error> {
    let rows: Vec<CheckpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {CHECKPOINT_COLUMNS} from journal_checkpoints order by n"
    )))
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(sealed).collect())
}

/// Every wallet's head as checkpoint `n` sealed it, in tree order.
pub async fn heads_at(conn: &mut PgConnection, n: i64) -> Result<Vec<Head>, sqlx::Error> {
    let rows: Vec<HeadRow> = sqlx::query_as(
        "select distinct on (account_id) account_id, sequence, link
         from journal_checkpoint_heads where checkpoint <= $1
         order by account_id, checkpoint desc",
    )
    .bind(n)
    .fetch_all(conn)
    .await?;
    Ok(in_tree_order(rows))
}

/// Every wallet's chain head now (its last entry, when linked), in tree order: one probe
/// of `(account_id, sequence)` per wallet. On Citus the lateral joins `entries` to `accounts`
/// on the distribution column, so each shard answers for its own wallets.
pub(super) async fn current_heads(db: &mut Db<'_>) -> Result<Vec<Head>, sqlx::Error> {
    let rows: Vec<HeadRow> = sqlx::query_as(
        "select a.id, h.sequence, h.chain_hash
         from accounts a
         join lateral (select e.sequence, e.chain_hash from entries e
                       where e.account_id = a.id and e.sequence is not null
                       order by e.sequence desc limit 1) h on true
         where a.type = 'wallet' and h.chain_hash is not null",
    )
    .fetch_all(db.conn())
    .await?;
    Ok(in_tree_order(rows))
}

/// The `ledger.checkpoint` event of `sealed`, in the caller's transaction (id: UUIDv5 of the
/// type and the checkpoint's number); its data is the checkpoint as the API shows it.
pub(super) async fn publish(conn: &mut PgConnection, sealed: &Sealed) -> Result<(), sqlx::Error> {
    let event = EventType::LedgerCheckpoint;
    let data = serde_json::to_value(CheckpointView::from(sealed))
        .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query("insert into outbox_events (id, type, data) values ($1, $2, $3)")
        .bind(events::event_id(event, &sealed.checkpoint.n.to_string()))
        .bind(event.as_str())
        .bind(data)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Checkpoint `sealed` and the heads it seals anew, in the caller's transaction.
pub(super) async fn insert(
    conn: &mut PgConnection,
    sealed: &Sealed,
    changed: &[&Head],
) -> Result<(), sqlx::Error> {
    let c = &sealed.checkpoint;
    sqlx::query(
        "insert into journal_checkpoints (n, sealed_at, previous_root, head_count, heads_root,
                                          root, public_key, signature, transactions_horizon,
                                          transaction_count, transactions_root)
         values ($1, $2, $3, $4, $5, $6, $7, $8, ($9::bigint)::text::xid8, $10, $11)",
    )
    .bind(c.n)
    .bind(c.sealed_at)
    .bind(c.previous_root.map(|r| r.to_vec()))
    .bind(c.head_count)
    .bind(c.heads_root.to_vec())
    .bind(&sealed.root)
    .bind(&sealed.public_key)
    .bind(&sealed.signature)
    .bind(sealed.horizon)
    .bind(c.transactions.map(|t| t.count))
    .bind(c.transactions.map(|t| t.root.to_vec()))
    .execute(&mut *conn)
    .await?;
    let accounts: Vec<&str> = changed.iter().map(|h| h.account.as_str()).collect();
    let sequences: Vec<i64> = changed.iter().map(|h| h.sequence).collect();
    let links: Vec<Vec<u8>> = changed.iter().map(|h| h.link.0.to_vec()).collect();
    sqlx::query(
        "insert into journal_checkpoint_heads (checkpoint, account_id, sequence, link)
         select $1, a, s, l from unnest($2::text[], $3::bigint[], $4::bytea[]) u(a, s, l)",
    )
    .bind(c.n)
    .bind(&accounts)
    .bind(&sequences)
    .bind(&links)
    .execute(conn)
    .await?;
    Ok(())
}

/// A sealed head whose entry is gone or carries another link now.
#[derive(Debug, Clone)]
pub struct Unsealed {
    pub checkpoint: i64,
    pub head: Head,
    /// The entry now at the head's place, if any.
    pub entry: Option<(i64, ChainHash)>,
}

/// Those of the `stored` heads whose entry (same wallet, same sequence) is missing or has
/// another link, at most `limit`, in their order.
pub async fn sealed_heads_out_of_their_chain(
    conn: &mut PgConnection,
    stored: &[(i64, Head)],
    limit: usize,
) -> Result<Vec<Unsealed>, sqlx::Error> {
    let accounts: Vec<&str> = stored.iter().map(|(_, h)| h.account.as_str()).collect();
    let sequences: Vec<i64> = stored.iter().map(|(_, h)| h.sequence).collect();
    let entries: Vec<(String, i64, i64, Option<Vec<u8>>)> = sqlx::query_as(
        "select e.account_id, e.sequence, e.id, e.chain_hash
         from entries e join unnest($1::text[], $2::bigint[]) u(a, s)
              on e.account_id = u.a and e.sequence = u.s",
    )
    .bind(&accounts)
    .bind(&sequences)
    .fetch_all(&mut *conn)
    .await?;
    let now: HashMap<(String, i64), (i64, ChainHash)> = entries
        .into_iter()
        .map(|(a, s, id, link)| ((a, s), (id, ChainHash::stored(link))))
        .collect();
    Ok(stored
        .iter()
        .filter_map(|(checkpoint, head)| {
            let entry = now.get(&(head.account.clone(), head.sequence)).copied();
            (entry.map(|e| e.1) != Some(head.link)).then(|| Unsealed {
                checkpoint: *checkpoint,
                head: head.clone(),
                entry,
            })
        })
        .take(limit)
        .collect())
}

/// Every stored head row, each with the checkpoint that stored it, by checkpoint.
pub async fn stored_heads(conn: &mut PgConnection) -> Result<Vec<(i64, Head)>, sqlx::Error> {
    let rows: Vec<(i64, String, i64, Vec<u8>)> = sqlx::query_as(
        "select checkpoint, account_id, sequence, link from journal_checkpoint_heads
         order by checkpoint, account_id",
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(n, account, sequence, link)| (n, head((account, sequence, link))))
        .collect())
}

/// `stored` heads split into system accounts' (whose chains only the sealer keeps) and the
/// rest (wallets'), each in its order.
pub async fn split_system_heads(
    conn: &mut PgConnection,
    stored: Vec<(i64, Head)>,
) -> Result<(Vec<(i64, Head)>, Vec<(i64, Head)>), sqlx::Error> {
    let mut accounts: Vec<&str> = stored.iter().map(|(_, h)| h.account.as_str()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let system: std::collections::HashSet<String> =
        sqlx::query_scalar("select id from accounts where type = 'system' and id = any($1)")
            .bind(&accounts)
            .fetch_all(conn)
            .await?
            .into_iter()
            .collect();
    Ok(stored
        .into_iter()
        .partition(|(_, h)| system.contains(&h.account)))
}
