//! The write path's inserts whose statement differs by engine: one set-based statement on
//! PostgreSQL; on Citus one routed statement per row, and the journal rules that span shards
//! checked before COMMIT.

use super::{Db, outcome_column, response_column};
use crate::db::Engine;
use crate::ledger::money::Amount;
use crate::ledger::posting::cross_shard;
use crate::ledger::posting::{NewEntry, Rendered};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// All rows in one statement, in id order (so two batches sharing ids wait on each other in
/// one order, never in a cycle). `false` when a concurrent request took one of the ids (the
/// insert waited for its commit and skipped the row): the caller rolls back and decides again.
pub(crate) async fn insert_transactions(
    db: &mut Db<'_>,
    rows: &[&Rendered],
) -> Result<bool, sqlx::Error> {
    if rows.is_empty() {
        return Ok(true);
    }
    match db.engine() {
        Engine::Plain => insert_transactions_plain(db.conn(), rows).await,
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
                                     updated_at, expires_at, reverses, reversed_amount)
           select id, kind, status, currency, legs::jsonb, string_to_array(account_ids, ','),
                  external_ref, metadata::jsonb, refusal_code, refusal_detail, request::jsonb,
                  creation_outcome, body,
                  created_at, posted_at, created_at, expires_at, reverses, reversed_amount
           from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                       $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                       $12::text[], $13::text[], $14::timestamptz[], $15::timestamptz[],
                       $16::timestamptz[], $17::uuid[], $18::bigint[])
                as r(id, kind, status, currency, legs, account_ids, external_ref, metadata,
                     refusal_code, refusal_detail, request, creation_outcome, body, created_at,
                     posted_at, expires_at, reverses, reversed_amount)
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
    )
    .fetch_all(conn)
    .await?;
    Ok(inserted.len() == rows.len())
}

/// The columns of [`insert_transactions_plain`], one array per column (the rows travel as
/// arrays, unnested in SQL).
struct TransactionColumns<'a> {
    ids: Vec<Uuid>,
    kinds: Vec<&'a str>,
    statuses: Vec<&'a str>,
    currencies: Vec<&'a str>,
    legs: Vec<String>,
    account_ids: Vec<String>,
    external_refs: Vec<Option<&'a str>>,
    metadata: Vec<String>,
    refusal_codes: Vec<Option<&'a str>>,
    refusal_details: Vec<Option<&'a str>>,
    requests: Vec<&'a str>,
    creation_outcomes: Vec<&'static str>,
    bodies: Vec<Option<&'a str>>,
    created: Vec<DateTime<Utc>>,
    posted: Vec<Option<DateTime<Utc>>>,
    expires: Vec<Option<DateTime<Utc>>>,
    reverses: Vec<Option<Uuid>>,
    reversed: Vec<Option<i64>>,
}

impl<'a> TransactionColumns<'a> {
    fn of(rows: &[&'a Rendered]) -> TransactionColumns<'a> {
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
        }
    }
}

/// [`insert_transactions`] on Citus: one `insert ... values` per row, in id order. Citus routes
/// each to its shard; the one-statement `insert ... select from unnest ... on conflict` is not
/// pushed down and goes through intermediate results on every shard it reaches, the costliest
/// single statement of a group (docs/performance.md, "Where a transfer's time goes on Citus").
async fn insert_transactions_citus(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<bool, sqlx::Error> {
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|r| r.item_id);
    for r in sorted {
        let inserted = sqlx::query_scalar!(
            r#"insert into transactions (id, kind, status, currency, legs, account_ids,
                                         external_ref, metadata, refusal_code, refusal_detail,
                                         creation_request, creation_outcome, creation_response,
                                         created_at, posted_at, updated_at, expires_at, reverses,
                                         reversed_amount)
               values ($1, $2, $3, $4, $5::text::jsonb, string_to_array($6, ','), $7,
                       $8::text::jsonb, $9, $10, $11::text::jsonb, $12, $13, $14, $15, $14, $16,
                       $17, $18)
               on conflict (id) do nothing
               returning id"#,
            r.item_id,
            r.kind.as_str(),
            r.status.as_str(),
            r.view.currency.as_str(),
            json_text(&r.view.entries),
            r.account_ids.join(","),
            r.view.external_ref.as_deref(),
            json_text(&r.view.metadata),
            r.refusal().map(|x| x.code.as_str()),
            r.refusal().map(|x| x.detail.as_str()),
            r.request.as_str(),
            outcome_column(&r.outcome),
            response_column(&r.outcome),
            r.view.created_at,
            r.view.posted_at,
            r.view.expires_at,
            r.reverses,
            r.reversed_amount.map(Amount::minor_units),
        )
        .fetch_optional(&mut *conn)
        .await?;
        if inserted.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Inserts entries `(transaction, currency, ledger time, entry)` in one statement. On Citus
/// the rules that span shards are checked right after, before the caller's COMMIT
/// ([`cross_shard`]): every caller that writes entries goes through here.
pub(crate) async fn insert_entry_rows(
    db: &mut Db<'_>,
    entries: &[(Uuid, &str, DateTime<Utc>, &NewEntry)],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
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
    sqlx::query!(
        r#"insert into entries (transaction_id, account_id, currency, amount, sequence,
                                balance_after, ledger_time)
           select transaction_id, account, currency, amount, sequence, balance_after, ledger_time
           from unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                       $6::bigint[], $7::timestamptz[])
                with ordinality as e(transaction_id, account, currency, amount, sequence,
                                     balance_after, ledger_time, n)
           order by n"#,
        &transactions,
        &accounts as &[&str],
        &currencies as &[&str],
        &amounts,
        &sequences as &[Option<i64>],
        &balances as &[Option<i64>],
        &times,
    )
    .execute(db.conn())
    .await?;
    if db.engine() == Engine::Citus {
        let mut written = transactions;
        written.sort();
        written.dedup();
        let mut touched = accounts;
        touched.sort();
        touched.dedup();
        cross_shard::check(db.conn(), &written, &touched).await?;
    }
    Ok(())
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a view always serializes")
}
