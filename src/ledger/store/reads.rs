//! Reads inside a write's transaction that answer its questions (which currency a wallet has,
//! how much of a payment is refunded): the same statement on both engines, kept here so that
//! the ledger's tables are read from `ledger/` only.

use super::{CREATED, Db, REFUSED};
use crate::db::Engine;
use crate::db::StoreError;
use crate::ledger::bounds::{SATURATED, SystemState, SystemStates};
use crate::ledger::money::Amount;
use crate::ledger::posting::{ChainHash, ChainHead, Replays, StoredCreation, WalletState};
use crate::ledger::transactions::{
    RefusalCode, StoredTransaction, TransactionFilter, TransactionStatus, page,
};
use crate::ledger::views::TransactionView;
use crate::ledger::{Outcome, Refusal};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

/// The currency code of each of `ids` that is stored, by id.
pub async fn account_currencies(
    db: &mut Db<'_>,
    ids: &[String],
) -> Result<Vec<(String, String)>, sqlx::Error> {
    let rows = sqlx::query!("select id, currency from accounts where id = any($1)", ids)
        .fetch_all(db.conn())
        .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.currency)).collect())
}

/// What a refund `refund_id` of `payment_id` meets: whether that id is stored already, and
/// the sum of the payment's posted reversals.
pub struct RefundProgress {
    pub stored: bool,
    pub refunded: Amount,
}

pub async fn refund_progress(
    db: &mut Db<'_>,
    payment_id: Uuid,
    refund_id: Uuid,
) -> Result<RefundProgress, sqlx::Error> {
    let seen = sqlx::query!(
        r#"select exists(select 1 from transactions where id = $2) as "stored!",
                          coalesce((select sum(reversed_amount) from transactions
                                    where reverses = $1 and status = 'posted'), 0)::bigint
                              as "refunded!""#,
        payment_id,
        refund_id
    )
    .fetch_one(db.conn())
    .await?;
    Ok(RefundProgress {
        stored: seen.stored,
        // Posted reversals never give back more than their payment, which is in range.
        refunded: Amount::stored(seen.refunded)?,
    })
}

/// Those of `transaction_ids` that left an entry with a negative balance after it.
pub async fn overdrawing(
    db: &mut Db<'_>,
    transaction_ids: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "select distinct transaction_id from entries where transaction_id = any($1) and balance_after < 0",
        transaction_ids
    )
    .fetch_all(db.conn())
    .await
}

/// The last entry and the open-hold reservations of each wallet, read after its lock (in a
/// statement of their own: one that also took the lock would read from before it). The
/// reservations are the `open_hold_totals` view, as balance reads show them; `offset 0` keeps
/// the lateral a per-wallet probe of `open_holds_account` (pulled up into a plain join, the
/// view would be aggregated over every open hold).
pub(crate) async fn wallet_states(
    db: &mut Db<'_>,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    if wallets.is_empty() {
        return Ok(HashMap::new());
    }
    match db.engine() {
        Engine::Plain => wallet_states_plain(db.conn(), wallets).await,
        Engine::Citus => wallet_states_citus(db.conn(), wallets).await,
    }
}

async fn wallet_states_plain(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    let states = sqlx::query!(
        r#"select w.id as "id!", h.sequence, h.balance_after, h.ledger_time as "ledger_time?",
                  h.chain_hash, coalesce(p.pending_out, 0) as "pending_out!",
                  coalesce(p.pending_in, 0) as "pending_in!"
           from unnest($1::text[]) as w(id)
           left join lateral (
               select sequence, balance_after, ledger_time, chain_hash from entries
               where account_id = w.id and sequence is not null
               order by sequence desc limit 1) h on true
           left join lateral (
               select pending_out, pending_in from open_hold_totals where account_id = w.id
               offset 0) p on true"#,
        wallets
    )
    .fetch_all(&mut *conn)
    .await?;
    states
        .into_iter()
        .map(|r| {
            let head = (r.sequence, r.balance_after, r.ledger_time, r.chain_hash);
            Ok((r.id, wallet_state(head, r.pending_out, r.pending_in)?))
        })
        .collect()
}

/// A wallet's stored head: `(sequence, balance_after, ledger_time, chain_hash)` of its last
/// entry, all `None` before its first.
pub(super) type StoredHead = (
    Option<i64>,
    Option<i64>,
    Option<DateTime<Utc>>,
    Option<Vec<u8>>,
);

/// A wallet's state from its stored head and its holds' totals.
pub(super) fn wallet_state(
    (sequence, balance_after, ledger_time, chain_hash): StoredHead,
    pending_out: i64,
    pending_in: i64,
) -> Result<WalletState, sqlx::Error> {
    Ok(WalletState {
        chain: ChainHead {
            sequence: sequence.unwrap_or(0),
            balance: Amount::stored(balance_after.unwrap_or(0))?,
            ledger_time,
            hash: ChainHash::stored(chain_hash),
        },
        pending_out: Amount::stored(pending_out)?,
        pending_in: Amount::stored(pending_in)?,
    })
}

/// [`wallet_states`] on Citus, which pushes a lateral join down only when every table in it is
/// pruned to one shard: one statement per shard (`shards::accounts_by_shard`), each naming its
/// wallets in every table (accounts, entries and open_holds are co-located) so that it runs
/// on that shard alone. The laterals over `unnest` of one node are not pushed down at all.
async fn wallet_states_citus(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<HashMap<String, WalletState>, sqlx::Error> {
    let mut states = HashMap::with_capacity(wallets.len());
    for shard in super::shards::accounts_by_shard(&mut *conn, wallets).await? {
        let rows = sqlx::query!(
            r#"select w.id, h.sequence as "sequence?", h.balance_after as "balance_after?",
                      h.ledger_time as "ledger_time?", h.chain_hash as "chain_hash?",
                      coalesce(p.pending_out, 0) as "pending_out!",
                      coalesce(p.pending_in, 0) as "pending_in!"
               from accounts w
               left join lateral (
                   select sequence, balance_after, ledger_time, chain_hash from entries
                   where account_id = w.id and account_id = any($1) and sequence is not null
                   order by sequence desc limit 1) h on true
               left join lateral (
                   select pending_out, pending_in from open_hold_totals
                   where account_id = w.id and account_id = any($1)
                   offset 0) p on true
               where w.id = any($1)"#,
            &shard
        )
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            let head = (r.sequence, r.balance_after, r.ledger_time, r.chain_hash);
            states.insert(r.id, wallet_state(head, r.pending_out, r.pending_in)?);
        }
    }
    Ok(states)
}

/// Whether group commit reads a group's stored creations before deciding it. On one
/// PostgreSQL the read is one index probe per id, and a retried id it finds spares the group a
/// second pass. On Citus it is a statement over every shard of the group's ids, planned on the
/// coordinator, for ids that are almost always new (a retry the process has answered before is
/// answered from the replay cache without joining a group): the insert finds a stored id
/// instead, and only a group with one pays for a second pass (docs/scaling.md, "Two reads a
/// group no longer sends").
pub(crate) fn replays_of_a_group(engine: Engine) -> Replays {
    match engine {
        Engine::Plain => Replays::ReadFirst,
        Engine::Citus => Replays::FoundByInsert,
    }
}

/// The committed creations of `ids` that are stored, by id.
pub(crate) async fn stored_creations(
    db: &mut Db<'_>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    match db.engine() {
        Engine::Plain => stored_creations_plain(db.conn(), ids).await,
        Engine::Citus => stored_creations_citus(db.conn(), ids).await,
    }
}

async fn stored_creations_plain(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    // One primary-key probe per id, as a lateral `limit 1`: that shape has no plan but a
    // probe per id (no hash join), and an index probe is the cheaper probe from a few rows on.
    // The plain `where id = any($1)` let a connection keep the generic plan it made while the
    // table was nearly empty, a sequential scan, until the next ANALYZE: in the bench that one
    // lookup grew to 43% of the database's statement time (docs/performance.md, fifth round).
    let rows = sqlx::query_as!(
        CreationRow,
        r#"select t.id as "id!", t.creation_request as "creation_request!",
                  t.creation_outcome as "creation_outcome!", t.creation_response,
                  t.refusal_code, t.refusal_detail
           from unnest($1::uuid[]) as k(id)
           cross join lateral (
               select id, creation_request, creation_outcome, creation_response, refusal_code,
                      refusal_detail
               from transactions where id = k.id limit 1) t"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(CreationRow::stored).collect()
}

/// [`stored_creations`] on Citus, which refuses the lateral `limit 1` over `unnest` (cannot
/// push it down): `id = any($1)` on the distribution column reaches only the shards of these
/// ids, and each shard probes its primary key.
async fn stored_creations_citus(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, StoredCreation>, sqlx::Error> {
    let rows = sqlx::query_as!(
        CreationRow,
        r#"select id, creation_request, creation_outcome, creation_response, refusal_code,
                  refusal_detail
           from transactions where id = any($1)"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(CreationRow::stored).collect()
}

/// A stored creation's row, as both forms of [`stored_creations`] read it.
struct CreationRow {
    id: Uuid,
    creation_request: Value,
    creation_outcome: String,
    creation_response: Option<String>,
    refusal_code: Option<String>,
    refusal_detail: Option<String>,
}

impl CreationRow {
    /// The row decoded: a creation's body, or a refusal's code and detail (and the answer a
    /// refusal stored before the outcome migration kept). Anything else the schema's checks
    /// should have refused: reported as undecodable rather than answered.
    fn stored(self) -> Result<(Uuid, StoredCreation), sqlx::Error> {
        let corrupt = |what: String| {
            let what = format!("transaction {}: {what}", self.id);
            sqlx::Error::Decode(what.into())
        };
        let outcome = match (self.creation_outcome.as_str(), self.creation_response) {
            (CREATED, Some(body)) => Outcome::Created { body },
            (REFUSED, recorded_answer) => {
                let code = self.refusal_code.as_deref().and_then(RefusalCode::parse);
                Outcome::Refused(Refusal {
                    transaction: self.id,
                    code: code
                        .ok_or_else(|| corrupt(format!("refusal code {:?}", self.refusal_code)))?,
                    detail: self.refusal_detail.unwrap_or_default(),
                    recorded_answer,
                })
            }
            (other, _) => return Err(corrupt(format!("creation outcome {other:?}"))),
        };
        let stored = StoredCreation {
            request: self.creation_request,
            outcome,
        };
        Ok((self.id, stored))
    }
}

/// Reads the states of `accounts` (system accounts, locked by the caller), each from its latest
/// checkpoint, the entries since and all its open holds, saturated at ±(M + 1) so that an
/// account taken out of range before the bound existed reads as out of range instead of failing.
pub(crate) async fn system_states(
    db: &mut Db<'_>,
    accounts: &[String],
) -> Result<SystemStates, sqlx::Error> {
    if accounts.is_empty() {
        return Ok(SystemStates::empty());
    }
    match db.engine() {
        Engine::Plain => system_states_plain(db.conn(), accounts).await,
        Engine::Citus => system_states_citus(db.conn(), accounts).await,
    }
}

async fn system_states_plain(
    conn: &mut PgConnection,
    accounts: &[String],
) -> Result<SystemStates, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select s.id as "id!",
                  least(greatest(coalesce(cp.posted, 0) + coalesce(e.total, 0), $2::bigint), $3::bigint)::bigint
                      as "posted!",
                  least(coalesce(h.held_in, 0), $3::bigint)::bigint as "held_in!",
                  least(coalesce(h.held_out, 0), $3::bigint)::bigint as "held_out!",
                  (current_setting('max_connections')::bigint
                   + current_setting('max_prepared_transactions')::bigint) as "writers!"
           from unnest($1::text[]) as s(id)
           left join lateral (
               select posted, below_xid from account_checkpoints
               where account_id = s.id order by below_xid desc limit 1) cp on true
           left join lateral (
               select sum(amount) as total from entries
               where account_id = s.id and sequence is null
                 and xid >= coalesce(cp.below_xid, '0'::xid8)) e on true
           left join lateral (
               select sum(amount) filter (where amount > 0) as held_in,
                      sum(-amount) filter (where amount < 0) as held_out
               from open_holds where account_id = s.id) h on true"#,
        accounts,
        -SATURATED,
        SATURATED,
    )
    .fetch_all(conn)
    .await?;
    let writers = rows.first().map_or(1, |r| r.writers);
    let states = rows
        .into_iter()
        .map(|r| {
            let state = SystemState::saturated(r.posted, r.held_in, r.held_out);
            (r.id, state)
        })
        .collect();
    Ok(SystemStates { states, writers })
}

/// [`system_states`] on Citus: one statement per shard, as [`wallet_states_citus`] explains.
/// `writers` is read on the node the connection is on.
async fn system_states_citus(
    conn: &mut PgConnection,
    accounts: &[String],
) -> Result<SystemStates, sqlx::Error> {
    let writers = sqlx::query_scalar!(
        r#"select (current_setting('max_connections')::bigint
                   + current_setting('max_prepared_transactions')::bigint) as "writers!""#
    )
    .fetch_one(&mut *conn)
    .await?;
    let mut states = HashMap::with_capacity(accounts.len());
    for shard in super::shards::accounts_by_shard(&mut *conn, accounts).await? {
        let rows = sqlx::query!(
            r#"select s.id,
                      least(greatest(coalesce(cp.posted, 0) + coalesce(e.total, 0), $2::bigint), $3::bigint)::bigint
                          as "posted!",
                      least(coalesce(h.held_in, 0), $3::bigint)::bigint as "held_in!",
                      least(coalesce(h.held_out, 0), $3::bigint)::bigint as "held_out!"
               from accounts s
               left join lateral (
                   select posted, below_xid from account_checkpoints
                   where account_id = s.id and account_id = any($1)
                   order by below_xid desc limit 1) cp on true
               left join lateral (
                   select sum(amount) as total from entries
                   where account_id = s.id and account_id = any($1) and sequence is null
                     and xid >= coalesce(cp.below_xid, '0'::xid8)) e on true
               left join lateral (
                   select sum(amount) filter (where amount > 0) as held_in,
                          sum(-amount) filter (where amount < 0) as held_out
                   from open_holds where account_id = s.id and account_id = any($1)) h on true
               where s.id = any($1)"#,
            &shard,
            -SATURATED,
            SATURATED,
        )
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            let state = SystemState::saturated(r.posted, r.held_in, r.held_out);
            states.insert(r.id, state);
        }
    }
    Ok(SystemStates { states, writers })
}

/// The latest instant up to which the ledger's history can no longer change: no transaction
/// that commits after this call has a ledger time at or before it.
///
/// Why: a writer takes its ledger time inside its database transaction, after its first row
/// lock (which gives it a transaction id), and commits some time later, so an entry can become
/// visible after a read of an instant later than its ledger time. Every writer that is still
/// open now has a transaction id and started at its `xact_start` or later, and every later one
/// takes its ledger time after this statement: so the horizon is the earliest start among open
/// writers, or now. Read before the snapshot that answers, so that a writer open at the
/// snapshot either counted here or started after it. It assumes the service's clock does not
/// run behind the database's (the ledger time is the service's clock). On Citus the writers'
/// ids live on the workers, so every open transaction of the database counts (a longer, still
/// safe, wait).
pub async fn final_horizon(db: &mut Db<'_>) -> Result<DateTime<Utc>, sqlx::Error> {
    let every_transaction = match db.engine() {
        Engine::Plain => false,
        Engine::Citus => true,
    };
    sqlx::query_scalar!(
        r#"select least(now(), min(xact_start)) as "horizon!" from pg_stat_activity
           where datname = current_database() and pid <> pg_backend_pid()
             and xact_start is not null and (backend_xid is not null or $1)"#,
        every_transaction
    )
    .fetch_one(db.conn())
    .await
}

/// The stored transactions of `ids` (`transactions::find_many`), in no particular order; missing ids are left out and a
/// repeated id comes back once per mention. One primary-key probe per id (a lateral
/// `limit 1`, as `posting::stored_creations` explains): a plain `id = any($1)` could keep a
/// sequential-scan plan made while the table was small.
pub(crate) async fn transactions(
    db: &mut Db<'_>,
    ids: &[Uuid],
) -> Result<Vec<TransactionView>, StoreError> {
    match db.engine() {
        Engine::Plain => find_many_plain(db.conn(), ids).await,
        Engine::Citus => find_many_citus(db.conn(), ids).await,
    }
}

async fn find_many_plain(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<TransactionView>, StoreError> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"select t.id as "id!", t.seq as "seq!", t.kind as "kind!",
                  hold_status_at(t.status, t.expires_at, now()) as "status!",
                  t.currency as "currency!", t.legs as "legs!", t.external_ref,
                  t.metadata as "metadata!", t.refusal_code, t.refusal_detail,
                  t.created_at as "created_at!", t.posted_at, t.effective_at, t.expires_at, t.reverses,
                  t.captured_amount, t.counter_currency, t.exchange_rate::text as exchange_rate,
                  t.metadata_erased_at,
                  (select jsonb_agg(jsonb_build_object('account', e.account_id, 'amount', e.amount,
                                                      'currency', e.currency)
                                    order by e.id)
                   from entries e where e.transaction_id = t.id) as posted_entries
           from unnest($1::uuid[]) as k(id)
           cross join lateral (select * from transactions where id = k.id limit 1) t"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(StoredTransaction::view).collect()
}

/// [`transactions`] on Citus, which pushes neither the lateral over `unnest` nor the entries
/// subquery correlated with transactions (another distribution): the rows by `id = any($1)`
/// (only the shards of these ids) and the entries by transaction id, each a result on the
/// coordinator, joined there.
async fn find_many_citus(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<TransactionView>, StoreError> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"with t as materialized (select * from transactions where id = any($1)),
           e as materialized (
               select transaction_id,
                      jsonb_agg(jsonb_build_object('account', account_id, 'amount', amount,
                                         'currency', currency)
                                order by id) as posted_entries
               from entries where transaction_id = any($1) group by transaction_id)
           select t.id as "id!", t.seq as "seq!", t.kind as "kind!",
                  hold_status_at(t.status, t.expires_at, now()) as "status!",
                  t.currency as "currency!", t.legs as "legs!", t.external_ref,
                  t.metadata as "metadata!", t.refusal_code, t.refusal_detail,
                  t.created_at as "created_at!", t.posted_at, t.effective_at, t.expires_at, t.reverses,
                  t.captured_amount, e.posted_entries as "posted_entries?",
                  t.counter_currency, t.exchange_rate::text as exchange_rate, t.metadata_erased_at
           from unnest($1::uuid[]) as k(id)
           join t on t.id = k.id
           left join e on e.transaction_id = t.id"#,
        ids
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(StoredTransaction::view).collect()
}

/// A page of `GET /v1/transactions` (`transactions::list`), newest first, and the cursor of the
/// next one.
pub(crate) async fn transaction_page(
    db: &mut Db<'_>,
    f: &TransactionFilter,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    match db.engine() {
        Engine::Plain => list_plain(db.conn(), f).await,
        Engine::Citus => list_citus(db.conn(), f).await,
    }
}

/// Neither form is kept prepared: each call is planned with its own filters, since a generic
/// plan, made without knowing which are set, could not use the `account_ids` or `metadata`
/// index.
async fn list_plain(
    conn: &mut PgConnection,
    f: &TransactionFilter,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"select id, seq, kind,
                  hold_status_at(status, expires_at, now()) as "status!",
                  currency, legs, external_ref, metadata, refusal_code, refusal_detail,
                  created_at, posted_at, effective_at, expires_at, reverses, captured_amount,
                  counter_currency, exchange_rate::text as exchange_rate, metadata_erased_at,
                  (select jsonb_agg(jsonb_build_object('account', e.account_id, 'amount', e.amount,
                                                      'currency', e.currency)
                                    order by e.id)
                   from entries e where e.transaction_id = transactions.id) as posted_entries
           from transactions
           where ($1::text is null or account_ids @> array[$1::text])
             and ($2::text is null
                  or hold_status_at(status, expires_at, now()) = $2)
             and ($3::text is null or external_ref = $3)
             and ($4::bigint is null or seq < $4)
             and ($6::text is null or (metadata <> '{}' and metadata @@ $6::text::jsonpath))
             and ($7::uuid is null or reverses = $7)
           order by seq desc
           limit $5"#,
        f.account,
        f.status.map(TransactionStatus::as_str),
        f.external_ref,
        f.before_seq,
        f.limit + 1,
        f.metadata,
        f.reverses,
    )
    .persistent(false)
    .fetch_all(conn)
    .await?;
    page(rows, f.limit)
}

/// [`transaction_page`] on Citus: the page first (each shard's newest, merged on the coordinator), then
/// the entries of its transactions (the correlated subquery of one node is refused across
/// distributions).
async fn list_citus(
    conn: &mut PgConnection,
    f: &TransactionFilter,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"with page as materialized (
               select * from transactions
               where ($1::text is null or account_ids @> array[$1::text])
                 and ($2::text is null
                      or hold_status_at(status, expires_at, now()) = $2)
                 and ($3::text is null or external_ref = $3)
                 and ($4::bigint is null or seq < $4)
                 and ($6::text is null or (metadata <> '{}' and metadata @@ $6::text::jsonpath))
                 and ($7::uuid is null or reverses = $7)
               order by seq desc
               limit $5),
           e as materialized (
               select transaction_id,
                      jsonb_agg(jsonb_build_object('account', account_id, 'amount', amount,
                                         'currency', currency)
                                order by id) as posted_entries
               from entries where transaction_id in (select id from page)
               group by transaction_id)
           select p.id as "id!", p.seq as "seq!", p.kind as "kind!",
                  hold_status_at(p.status, p.expires_at, now()) as "status!",
                  p.currency as "currency!", p.legs as "legs!", p.external_ref,
                  p.metadata as "metadata!", p.refusal_code, p.refusal_detail,
                  p.created_at as "created_at!", p.posted_at, p.effective_at, p.expires_at, p.reverses,
                  p.captured_amount, e.posted_entries as "posted_entries?",
                  p.counter_currency, p.exchange_rate::text as exchange_rate, p.metadata_erased_at
           from page p left join e on e.transaction_id = p.id
           order by p.seq desc"#,
        f.account,
        f.status.map(TransactionStatus::as_str),
        f.external_ref,
        f.before_seq,
        f.limit + 1,
        f.metadata,
        f.reverses,
    )
    .persistent(false)
    .fetch_all(conn)
    .await?;
    page(rows, f.limit)
}
