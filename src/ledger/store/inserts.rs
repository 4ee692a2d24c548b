//! The write path's inserts whose statement differs by engine: one set-based statement on
//! PostgreSQL; on Citus one multi-row `insert ... values` that Citus routes row by row (or,
//! when the rows are many per shard, one call per shard: [`super::per_shard`]), and the
//! journal rules that span shards checked before COMMIT.

use super::{Db, outcome_column, response_column};
use crate::db::Engine;
use crate::ledger::money::Amount;
use crate::ledger::posting::cross_shard::{self, TransactionRow, WrittenEntry};
use crate::ledger::posting::{NewEntry, Rendered};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// All rows in one statement, in id order (so two batches sharing ids wait on each other in
/// one order, never in a cycle). `None` when a concurrent request took one of the ids (the
/// insert waited for its commit and skipped the row): the caller rolls back and decides again.
/// Otherwise, on Citus, the rows as the insert returned them, for the cross-shard check of
/// their entries ([`insert_entry_rows`]); on one PostgreSQL none (the journal trigger checks
/// each entry against its transaction).
pub(crate) async fn insert_transactions(
    db: &mut Db<'_>,
    rows: &[&Rendered],
) -> Result<Option<Vec<TransactionRow>>, sqlx::Error> {
    if rows.is_empty() {
        return Ok(Some(Vec::new()));
    }
    match db.engine() {
        Engine::Plain => Ok(insert_transactions_plain(db.conn(), rows)
            .await?
            .then(Vec::new)),
        Engine::Citus => insert_transactions_citus(db.conn(), rows).await,
    }
}

async fn insert_transactions_plain(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<bool, sqlx::Error> {
    let c = TransactionColumns::of(rows);
    let inserted = sqlx::query_scalar!(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids, external_ref,
                                     metadata, refusal_code, refusal_detail, creation_request,
                                     creation_outcome, creation_response, created_at, posted_at,
                                     updated_at, expires_at, reverses, reversed_amount, effective_at,
                                     counter_currency, exchange_rate)
           select id, kind, status, currency, legs::jsonb, string_to_array(account_ids, ','),
                  external_ref, metadata::jsonb, refusal_code, refusal_detail, request::jsonb,
                  creation_outcome, body,
                  created_at, posted_at, created_at, expires_at, reverses, reversed_amount,
                  effective_at, counter_currency, exchange_rate::numeric
           from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                       $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                       $12::text[], $13::text[], $14::timestamptz[], $15::timestamptz[],
                       $16::timestamptz[], $17::uuid[], $18::bigint[], $19::timestamptz[],
                       $20::text[], $21::text[])
                as r(id, kind, status, currency, legs, account_ids, external_ref, metadata,
                     refusal_code, refusal_detail, request, creation_outcome, body, created_at,
                     posted_at, expires_at, reverses, reversed_amount, effective_at,
                     counter_currency, exchange_rate)
           order by id
           on conflict (id) do nothing
           returning id"#,
        &c.ids,
        &c.kinds as &[&str],
        &c.statuses as &[&str],
        &c.currencies as &[&str],
        &c.legs,
        &c.account_ids,
        &c.external_refs as &[Option<&str>],
        &c.metadata,
        &c.refusal_codes as &[Option<&str>],
        &c.refusal_details as &[Option<&str>],
        &c.requests as &[&str],
        &c.creation_outcomes as &[&str],
        &c.bodies as &[Option<&str>],
        &c.created,
        &c.posted as &[Option<DateTime<Utc>>],
        &c.expires as &[Option<DateTime<Utc>>],
        &c.reverses as &[Option<Uuid>],
        &c.reversed as &[Option<i64>],
        &c.backdated as &[Option<DateTime<Utc>>],
        &c.counter_currencies as &[Option<&str>],
        &c.exchange_rates as &[Option<&str>],
    )
    .fetch_all(conn)
    .await?;
    Ok(inserted.len() == rows.len())
}

/// The columns of [`insert_transactions_plain`], one array per column (the rows travel as
/// arrays, unnested in SQL).
pub(crate) struct TransactionColumns<'a> {
    pub(crate) ids: Vec<Uuid>,
    pub(crate) kinds: Vec<&'a str>,
    pub(crate) statuses: Vec<&'a str>,
    pub(crate) currencies: Vec<&'a str>,
    pub(crate) legs: Vec<String>,
    pub(crate) account_ids: Vec<String>,
    pub(crate) external_refs: Vec<Option<&'a str>>,
    pub(crate) metadata: Vec<String>,
    pub(crate) refusal_codes: Vec<Option<&'a str>>,
    pub(crate) refusal_details: Vec<Option<&'a str>>,
    pub(crate) requests: Vec<&'a str>,
    pub(crate) creation_outcomes: Vec<&'static str>,
    pub(crate) bodies: Vec<Option<&'a str>>,
    pub(crate) created: Vec<DateTime<Utc>>,
    pub(crate) posted: Vec<Option<DateTime<Utc>>>,
    pub(crate) expires: Vec<Option<DateTime<Utc>>>,
    pub(crate) reverses: Vec<Option<Uuid>>,
    pub(crate) reversed: Vec<Option<i64>>,
    pub(crate) backdated: Vec<Option<DateTime<Utc>>>,
    pub(crate) counter_currencies: Vec<Option<&'a str>>,
    pub(crate) exchange_rates: Vec<Option<&'a str>>,
}

impl<'a> TransactionColumns<'a> {
    pub(crate) fn of(rows: &[&'a Rendered]) -> TransactionColumns<'a> {
        let ids: Vec<Uuid> = rows.iter().map(|r| r.item_id).collect();
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        let statuses: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
        let currencies: Vec<&str> = rows.iter().map(|r| r.view.currency.as_str()).collect();
        // The JSON columns travel as text and are cast in SQL: serializing once is cheaper than
        // building a tree per row only for the driver to serialize it.
        let legs: Vec<String> = rows.iter().map(|r| json_text(&r.view.entries)).collect();
        // Account ids cannot contain a comma, so each row's list travels as one joined string.
        let account_ids: Vec<String> = rows.iter().map(|r| r.account_ids.join(",")).collect();
        let external_refs: Vec<Option<&str>> = rows
            .iter()
            .map(|r| r.view.external_ref.as_deref())
            .collect();
        let metadata: Vec<String> = rows.iter().map(|r| json_text(&r.view.metadata)).collect();
        let refusal_codes: Vec<Option<&str>> = rows
            .iter()
            .map(|r| r.refusal().map(|x| x.code.as_str()))
            .collect();
        let refusal_details: Vec<Option<&str>> = rows
            .iter()
            .map(|r| r.refusal().map(|x| x.detail.as_str()))
            .collect();
        let requests: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
        let creation_outcomes: Vec<&str> =
            rows.iter().map(|r| outcome_column(&r.outcome)).collect();
        let bodies: Vec<Option<&str>> = rows.iter().map(|r| response_column(&r.outcome)).collect();
        let created: Vec<DateTime<Utc>> = rows.iter().map(|r| r.view.created_at).collect();
        let posted: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.posted_at).collect();
        let expires: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.expires_at).collect();
        let reverses: Vec<Option<Uuid>> = rows.iter().map(|r| r.reverses).collect();
        let reversed: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.reversed_amount.map(Amount::minor_units))
            .collect();
        let backdated: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.backdated_to).collect();
        let exchanges = rows.iter().map(|r| r.view.exchange.as_ref());
        let counter_currencies = exchanges
            .clone()
            .map(|x| x.map(|x| x.counter_currency.as_str()))
            .collect();
        let exchange_rates = exchanges.map(|x| x.map(|x| x.rate.as_str())).collect();
        TransactionColumns {
            ids,
            kinds,
            statuses,
            currencies,
            legs,
            account_ids,
            external_refs,
            metadata,
            refusal_codes,
            refusal_details,
            requests,
            creation_outcomes,
            bodies,
            created,
            posted,
            expires,
            reverses,
            reversed,
            backdated,
            counter_currencies,
            exchange_rates,
        }
    }
}

/// [`insert_transactions`] on Citus: one call per shard when that pays
/// ([`super::per_shard`]), else [`insert_transactions_values`]. Rows in id order either way.
async fn insert_transactions_citus(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<Option<Vec<TransactionRow>>, sqlx::Error> {
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|r| r.item_id);
    let ids: Vec<Uuid> = sorted.iter().map(|r| r.item_id).collect();
    let inserted =
        match super::per_shard::shards_if_paying(&mut *conn, "transactions", &ids).await? {
            Some(shards) => super::per_shard::insert_transactions(conn, &sorted, &shards).await?,
            None => insert_transactions_values(conn, &sorted).await?,
        };
    Ok((inserted.len() == rows.len()).then_some(inserted))
}

/// Transactions on Citus as one multi-row `insert ... values` (in statements of at most
/// [`ROWS_PER_STATEMENT`] rows): the rows inserted. Citus routes each row to its shard by
/// the bound id and sends each shard its rows as one statement; the one-statement
/// `insert ... select from unnest ... on conflict` of one PostgreSQL is not pushed down and
/// goes through intermediate results on every shard it reaches, the costliest single
/// statement of a group (docs/performance.md, "Where a transfer's time goes on Citus").
/// Shards on different workers are written in parallel, so two groups that share ids on two
/// workers can wait on each other: Citus's deadlock detection cancels one (40P01), which the
/// write path decides again, as after any deadlock.
async fn insert_transactions_values(
    conn: &mut PgConnection,
    sorted: &[&Rendered],
) -> Result<Vec<TransactionRow>, sqlx::Error> {
    let mut inserted = Vec::with_capacity(sorted.len());
    for chunk in sorted.chunks(ROWS_PER_STATEMENT) {
        let mut insert = sqlx::QueryBuilder::new(
            "insert into transactions (id, kind, status, currency, legs, account_ids,
                                       external_ref, metadata, refusal_code, refusal_detail,
                                       creation_request, creation_outcome, creation_response,
                                       created_at, posted_at, updated_at, expires_at, reverses,
                                       reversed_amount, effective_at, counter_currency,
                                       exchange_rate) ",
        );
        insert.push_values(chunk, |mut row, r| {
            row.push_bind(r.item_id)
                .push_bind(r.kind.as_str())
                .push_bind(r.status.as_str())
                .push_bind(r.view.currency.as_str())
                .push_bind(json_text(&r.view.entries))
                .push_unseparated("::text::jsonb")
                .push_bind(r.account_ids.clone())
                .push_bind(r.view.external_ref.as_deref())
                .push_bind(json_text(&r.view.metadata))
                .push_unseparated("::text::jsonb")
                .push_bind(r.refusal().map(|x| x.code.as_str()))
                .push_bind(r.refusal().map(|x| x.detail.as_str()))
                .push_bind(r.request.as_str())
                .push_unseparated("::text::jsonb")
                .push_bind(outcome_column(&r.outcome))
                .push_bind(response_column(&r.outcome))
                .push_bind(r.view.created_at)
                .push_bind(r.view.posted_at)
                .push_bind(r.view.created_at)
                .push_bind(r.view.expires_at)
                .push_bind(r.reverses)
                .push_bind(r.reversed_amount.map(Amount::minor_units))
                .push_bind(r.backdated_to)
                .push_bind(
                    r.view
                        .exchange
                        .as_ref()
                        .map(|x| x.counter_currency.as_str()),
                )
                .push_bind(r.view.exchange.as_ref().map(|x| x.rate.as_str()))
                .push_unseparated("::numeric");
        });
        insert
            .push(" on conflict (id) do nothing returning id, currency, counter_currency, status");
        // Not kept prepared: the text changes with the row count, and each would evict another.
        inserted.extend(
            insert
                .build_query_as::<TransactionRow>()
                .persistent(false)
                .fetch_all(&mut *conn)
                .await?,
        );
    }
    Ok(inserted)
}

/// An entry row to insert: its transaction, currency, ledger time and the entry.
pub(crate) type EntryRow<'a> = (Uuid, &'a str, DateTime<Utc>, &'a NewEntry);

/// Inserts entries, those of one transaction always in one statement (the journal trigger
/// checks them as a set; on Citus, in one statement per shard, as the shard's trigger checks
/// them). On Citus the rules that span shards are checked right after,
/// before the caller's COMMIT ([`cross_shard`]): every caller that writes entries goes
/// through here. `inserted`: the transaction rows this database transaction inserted, as
/// [`insert_transactions`] returned them (the check reads only the others).
pub(crate) async fn insert_entry_rows(
    db: &mut Db<'_>,
    entries: &[EntryRow<'_>],
    inserted: &[TransactionRow],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    match db.engine() {
        Engine::Plain => insert_entries_plain(db.conn(), entries).await,
        Engine::Citus => {
            let written = insert_entries_citus(db.conn(), entries).await?;
            let mut transactions: Vec<Uuid> = entries.iter().map(|e| e.0).collect();
            transactions.sort();
            transactions.dedup();
            let mut touched: Vec<&str> = entries.iter().map(|e| e.3.account.as_str()).collect();
            touched.sort();
            touched.dedup();
            cross_shard::check(db.conn(), &transactions, &touched, inserted, &written).await
        }
    }
}

/// All entries in one statement, in their given order.
async fn insert_entries_plain(
    conn: &mut PgConnection,
    entries: &[EntryRow<'_>],
) -> Result<(), sqlx::Error> {
    let transactions: Vec<Uuid> = entries.iter().map(|e| e.0).collect();
    let currencies: Vec<&str> = entries.iter().map(|e| e.1).collect();
    let times: Vec<DateTime<Utc>> = entries.iter().map(|e| e.2).collect();
    let accounts: Vec<&str> = entries.iter().map(|e| e.3.account.as_str()).collect();
    let amounts: Vec<i64> = entries.iter().map(|e| e.3.amount.minor_units()).collect();
    let sequences: Vec<Option<i64>> = entries.iter().map(|e| e.3.sequence).collect();
    let balances: Vec<Option<i64>> = entries
        .iter()
        .map(|e| e.3.balance_after.map(Amount::minor_units))
        .collect();
    let backdated: Vec<Option<DateTime<Utc>>> = entries.iter().map(|e| e.3.effective_at).collect();
    let hashes: Vec<Option<&[u8]>> = entries.iter().map(|e| stored_hash(e.3)).collect();
    sqlx::query!(
        r#"insert into entries (transaction_id, account_id, currency, amount, sequence,
                                balance_after, ledger_time, effective_at, chain_hash)
           select transaction_id, account, currency, amount, sequence, balance_after, ledger_time,
                  effective_at, chain_hash
           from unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                       $6::bigint[], $7::timestamptz[], $8::timestamptz[], $9::bytea[])
                with ordinality as e(transaction_id, account, currency, amount, sequence,
                                     balance_after, ledger_time, effective_at, chain_hash, n)
           order by n"#,
        &transactions,
        &accounts as &[&str],
        &currencies as &[&str],
        &amounts,
        &sequences as &[Option<i64>],
        &balances as &[Option<i64>],
        &times,
        &backdated as &[Option<DateTime<Utc>>],
        &hashes as &[Option<&[u8]>],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A wallet entry's link as the column stores it.
pub(super) fn stored_hash(entry: &NewEntry) -> Option<&[u8]> {
    entry.hash.as_ref().map(|h| h.0.as_slice())
}

/// Columns bound per entry by [`insert_entries_values`].
const ENTRY_COLUMNS: usize = 9;

/// [`insert_entry_rows`] on Citus: one call per shard when that pays
/// ([`super::per_shard`]), else [`insert_entries_values`] in statements of whole transactions.
async fn insert_entries_citus(
    conn: &mut PgConnection,
    entries: &[EntryRow<'_>],
) -> Result<Vec<WrittenEntry>, sqlx::Error> {
    let accounts: Vec<&str> = entries.iter().map(|e| e.3.account.as_str()).collect();
    if let Some(shards) =
        super::per_shard::shards_if_paying(&mut *conn, "entries", &accounts).await?
    {
        return super::per_shard::insert_entries(conn, entries, &shards).await;
    }
    let mut written = Vec::with_capacity(entries.len());
    for chunk in whole_transactions(entries, MAX_PARAMETERS / ENTRY_COLUMNS, |e| e.0) {
        written.extend(insert_entries_values(&mut *conn, chunk).await?);
    }
    Ok(written)
}

/// Entries on Citus as one multi-row `insert ... values`. Citus routes each row
/// by its bound account and sends each shard its rows as one statement (so a transaction's
/// entries on one shard still arrive together, as the shard's trigger requires); the
/// `insert ... select from unnest` of one PostgreSQL goes through intermediate results on
/// every shard instead (docs/performance.md, "Where a transfer's time goes on Citus").
/// Returns the rows as stored, for the cross-shard check.
async fn insert_entries_values(
    conn: &mut PgConnection,
    entries: &[EntryRow<'_>],
) -> Result<Vec<WrittenEntry>, sqlx::Error> {
    let mut insert = sqlx::QueryBuilder::new(
        "insert into entries (transaction_id, account_id, currency, amount, sequence,
                              balance_after, ledger_time, effective_at, chain_hash) ",
    );
    insert.push_values(entries, |mut row, (transaction, currency, time, entry)| {
        row.push_bind(*transaction)
            .push_bind(entry.account.as_str())
            .push_bind(*currency)
            .push_bind(entry.amount.minor_units())
            .push_bind(entry.sequence)
            .push_bind(entry.balance_after.map(Amount::minor_units))
            .push_bind(*time)
            .push_bind(entry.effective_at)
            .push_bind(stored_hash(entry));
    });
    insert.push(" returning transaction_id, currency, amount");
    // Not kept prepared: the text changes with the row count, and each would evict another.
    insert
        .build_query_as::<WrittenEntry>()
        .persistent(false)
        .fetch_all(conn)
        .await
}

/// Most parameters one statement binds (PostgreSQL's protocol allows 65,535).
const MAX_PARAMETERS: usize = 60_000;

/// Rows per statement of [`insert_transactions_citus`].
const ROWS_PER_STATEMENT: usize = MAX_PARAMETERS / 22;

/// `rows` cut into runs of at most `max_rows` (more only when one transaction alone has
/// more), never between two consecutive rows of one transaction (`transaction_of`).
fn whole_transactions<T>(
    rows: &[T],
    max_rows: usize,
    transaction_of: impl Fn(&T) -> Uuid,
) -> Vec<&[T]> {
    let mut runs = Vec::new();
    let (mut start, mut end) = (0, 0);
    while end < rows.len() {
        let mut next = end + 1;
        while next < rows.len() && transaction_of(&rows[next]) == transaction_of(&rows[end]) {
            next += 1;
        }
        if next - start > max_rows && end > start {
            runs.push(&rows[start..end]);
            start = end;
        }
        end = next;
    }
    if start < rows.len() {
        runs.push(&rows[start..]);
    }
    runs
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a view always serializes")
}

#[cfg(test)]
mod tests {
    use super::whole_transactions;
    use uuid::Uuid;

    fn ids(rows: &[(Uuid, u8)]) -> Vec<Vec<u8>> {
        whole_transactions(rows, 4, |r| r.0)
            .iter()
            .map(|run| run.iter().map(|r| r.1).collect())
            .collect()
    }

    #[test]
    fn runs_end_only_between_transactions() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let rows = [(a, 1), (a, 2), (b, 3), (b, 4), (b, 5), (c, 6), (c, 7)];
        assert_eq!(ids(&rows), vec![vec![1, 2], vec![3, 4, 5], vec![6, 7]]);
    }

    #[test]
    fn a_transaction_larger_than_a_run_stays_whole() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let rows = [(a, 1), (b, 2), (b, 3), (b, 4), (b, 5), (b, 6), (a, 7)];
        assert_eq!(ids(&rows), vec![vec![1], vec![2, 3, 4, 5, 6], vec![7]]);
    }

    #[test]
    fn few_rows_one_run_no_rows_none() {
        let a = Uuid::from_u128(1);
        assert_eq!(ids(&[(a, 1), (a, 2)]), vec![vec![1, 2]]);
        assert!(ids(&[]).is_empty());
    }
}
