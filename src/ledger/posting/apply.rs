//! Apply: the decided rows written, each table in one statement (steps 5 and 6 of the order
//! of work in [`super`]).

use super::chain::NewEntry;
use super::render::Rendered;
use crate::db::Engine;
use crate::ledger::events::{self, EventType, NegativeBalance, TransactionEvent};
use crate::ledger::money::Amount;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// The outbox events of a batch's new rows, in its transaction: one per row, and one per
/// wallet the batch took from zero or more to below zero.
pub(super) async fn record_events(
    conn: &mut PgConnection,
    rows: &[&Rendered],
) -> Result<(), sqlx::Error> {
    let new_rows: Vec<TransactionEvent> = rows
        .iter()
        .filter_map(|r| {
            let event = EventType::of_new_transaction(r.status, r.reverses.is_some())?;
            Some(if r.creation_status == 201 {
                // The stored answer is the view already serialized.
                TransactionEvent::from_answer(
                    event,
                    r.item_id,
                    &r.body,
                    &r.view.currency,
                    &r.entries,
                )
            } else {
                TransactionEvent::new(event, &r.view, &r.entries)
            })
        })
        .collect();
    events::record_transactions(conn, &new_rows).await?;
    let crossings: Vec<NegativeBalance> = rows
        .iter()
        .flat_map(|r| events::negative_crossings(r.item_id, &r.view.currency, &r.entries))
        .collect();
    events::record_negative_balances(conn, &crossings).await
}

/// All rows in one statement, in id order (so two batches sharing ids wait on each other in
/// one order, never in a cycle). `false` when a concurrent request took one of the ids (the
/// insert waited for its commit and skipped the row): the caller rolls back and decides again.
pub(super) async fn insert_transactions(
    conn: &mut PgConnection,
    engine: Engine,
    rows: &[&Rendered],
) -> Result<bool, sqlx::Error> {
    if rows.is_empty() {
        return Ok(true);
    }
    if engine == Engine::Citus {
        return insert_transactions_citus(conn, rows).await;
    }
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
        .map(|r| r.refusal.as_ref().map(|x| x.code.as_str()))
        .collect();
    let refusal_details: Vec<Option<&str>> = rows
        .iter()
        .map(|r| r.refusal.as_ref().map(|x| x.detail.as_str()))
        .collect();
    let requests: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
    let creation_statuses: Vec<i16> = rows.iter().map(|r| r.creation_status).collect();
    let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    let created: Vec<DateTime<Utc>> = rows.iter().map(|r| r.view.created_at).collect();
    let posted: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.posted_at).collect();
    let expires: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.view.expires_at).collect();
    let reverses: Vec<Option<Uuid>> = rows.iter().map(|r| r.reverses).collect();
    let reversed: Vec<Option<i64>> = rows.iter().map(|r| r.reversed_amount).collect();
    let inserted = sqlx::query_scalar!(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids, external_ref,
                                     metadata, refusal_code, refusal_detail, creation_request,
                                     creation_status, creation_response, created_at, posted_at,
                                     updated_at, expires_at, reverses, reversed_amount)
           select id, kind, status, currency, legs::jsonb, string_to_array(account_ids, ','),
                  external_ref, metadata::jsonb, refusal_code, refusal_detail, request::jsonb,
                  creation_status, body,
                  created_at, posted_at, created_at, expires_at, reverses, reversed_amount
           from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                       $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                       $12::int2[], $13::text[], $14::timestamptz[], $15::timestamptz[],
                       $16::timestamptz[], $17::uuid[], $18::bigint[])
                as r(id, kind, status, currency, legs, account_ids, external_ref, metadata,
                     refusal_code, refusal_detail, request, creation_status, body, created_at,
                     posted_at, expires_at, reverses, reversed_amount)
           order by id
           on conflict (id) do nothing
           returning id"#,
        &ids,
        &kinds as &[&str],
        &statuses as &[&str],
        &currencies as &[&str],
        &legs,
        &account_ids,
        &external_refs as &[Option<&str>],
        &metadata,
        &refusal_codes as &[Option<&str>],
        &refusal_details as &[Option<&str>],
        &requests as &[&str],
        &creation_statuses,
        &bodies as &[&str],
        &created,
        &posted as &[Option<DateTime<Utc>>],
        &expires as &[Option<DateTime<Utc>>],
        &reverses as &[Option<Uuid>],
        &reversed as &[Option<i64>],
    )
    .fetch_all(conn)
    .await?;
    Ok(inserted.len() == rows.len())
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
                                         creation_request, creation_status, creation_response,
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
            r.refusal.as_ref().map(|x| x.code.as_str()),
            r.refusal.as_ref().map(|x| x.detail.as_str()),
            r.request.as_str(),
            r.creation_status,
            r.body.as_str(),
            r.view.created_at,
            r.view.posted_at,
            r.view.expires_at,
            r.reverses,
            r.reversed_amount,
        )
        .fetch_optional(&mut *conn)
        .await?;
        if inserted.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("a view always serializes")
}

/// Every entry of every posted row in one statement: the journal trigger checks them as a set.
pub(super) async fn insert_entries(
    conn: &mut PgConnection,
    engine: Engine,
    rows: &[&Rendered],
) -> Result<(), sqlx::Error> {
    let posted: Vec<(&Rendered, &NewEntry)> = rows
        .iter()
        .flat_map(|r| r.entries.iter().map(move |e| (*r, e)))
        .collect();
    insert_entry_rows(
        conn,
        engine,
        &posted
            .iter()
            .map(|(r, e)| {
                (
                    r.item_id,
                    r.view.currency.as_str(),
                    r.view.posted_at.unwrap_or(r.view.created_at),
                    *e,
                )
            })
            .collect::<Vec<_>>(),
    )
    .await
}

/// Inserts entries `(transaction, currency, ledger time, entry)` in one statement. On Citus
/// the rules that span shards are checked right after, before the caller's COMMIT
/// ([`super::cross_shard`]): every caller that writes entries goes through here.
pub(crate) async fn insert_entry_rows(
    conn: &mut PgConnection,
    engine: Engine,
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
    .execute(&mut *conn)
    .await?;
    if engine == Engine::Citus {
        let mut written = transactions;
        written.sort();
        written.dedup();
        let mut touched = accounts;
        touched.sort();
        touched.dedup();
        super::cross_shard::check(conn, &written, &touched).await?;
    }
    Ok(())
}
