//! The write path of money: one function, [`create`], used by transfers, payments and multi-leg
//! transactions alike, and the reads of transactions and entries.
//!
//! Order of work inside one database transaction (see `docs/architecture.md`):
//! 1. a replay is answered from the stored row before any lock is taken;
//! 2. wallets are locked `FOR UPDATE` in sorted id order; system accounts `FOR SHARE`, which
//!    excludes a concurrent freeze or close but never another writer;
//! 3. each wallet's last entry (sequence, running balance) is read in a *new* statement, after
//!    the lock, so it includes every commit that preceded the lock;
//! 4. the decision (post or refuse) is pure Rust over those rows;
//! 5. the transaction row is inserted `ON CONFLICT DO NOTHING`: if a concurrent request with
//!    the same id won, it waited for that commit and now answers a replay;
//! 6. the entries go in with one statement, which the journal trigger checks (a payment's
//!    clearing account is created just before, by its first posted payment); COMMIT.

use super::accounts::{self, AccountType};
use super::ids::AccountId;
use super::journal::Journal;
use super::money::{Amount, Currency};
use super::views::{EntryView, LegView, RefusalView, TransactionView};
use super::{Created, now_micros};
use crate::problem::{FieldError, Problem};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{PgConnection, PgPool};
use std::collections::HashMap;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Transaction,
    Transfer,
    Payment,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Transaction => "transaction",
            Kind::Transfer => "transfer",
            Kind::Payment => "payment",
        }
    }
}

/// A validated request to move money. `request` is its canonical form (defaults applied, no
/// id), compared field by field when the id comes again.
#[derive(Debug, Clone)]
pub struct NewTransaction {
    pub id: Uuid,
    pub kind: Kind,
    pub journal: Journal,
    /// The currency the caller named (payments); every account must hold it.
    pub currency: Option<(Currency, String)>,
    pub external_ref: Option<String>,
    pub metadata: Map<String, Value>,
    pub request: Value,
    /// Payments: the provider's clearing account, created on first use.
    pub clearing_account: Option<(AccountId, Currency)>,
}

/// Why a create could not even be decided: nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("unknown accounts: {0:?}")]
    UnknownAccounts(Vec<String>),
    #[error("invalid request")]
    Invalid(Vec<FieldError>),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A locked account as the decision needs it.
#[derive(Debug)]
struct LockedAccount {
    id: String,
    currency: String,
    kind: String,
    status: String,
    overdraft_limit: i64,
}

/// The last entry of a wallet: where its chain continues.
#[derive(Debug, Clone, Copy, Default)]
struct ChainHead {
    sequence: i64,
    balance: i64,
    ledger_time: Option<DateTime<Utc>>,
}

/// An entry ready to insert.
#[derive(Debug)]
struct NewEntry {
    account: String,
    amount: i64,
    sequence: Option<i64>,
    balance_after: Option<i64>,
}

#[derive(Debug)]
enum Decision {
    Post {
        currency: Currency,
        entries: Vec<NewEntry>,
        ledger_time: DateTime<Utc>,
    },
    Refuse {
        currency: Currency,
        code: &'static str,
        detail: String,
    },
}

/// Creates the transaction exactly once per id; see the module docs for the steps.
pub async fn create(pool: &PgPool, new: &NewTransaction) -> Result<Created, WriteError> {
    let mut conn = pool.acquire().await?;
    if let Some(replay) = replay(&mut conn, new).await? {
        return Ok(replay);
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let mut locked = lock_accounts(&mut tx, &new.journal.sorted_accounts()).await?;
    let create_clearing = missing_clearing_account(new, &mut locked)?;
    let unknown: Vec<String> = new
        .journal
        .legs()
        .iter()
        .filter(|leg| !locked.contains_key(leg.account.as_str()))
        .map(|leg| leg.account.to_string())
        .collect();
    if !unknown.is_empty() {
        return Err(WriteError::UnknownAccounts(unknown));
    }
    let wallets: Vec<String> = locked
        .values()
        .filter(|a| a.kind == "wallet")
        .map(|a| a.id.clone())
        .collect();
    let heads = chain_heads(&mut tx, &wallets).await?;
    let created_at = now_micros();
    let decision = decide(new, &locked, &heads, created_at).map_err(WriteError::Invalid)?;

    let (status, refusal, currency, posted_at) = match &decision {
        Decision::Post {
            currency,
            ledger_time,
            ..
        } => ("posted", None, *currency, Some(*ledger_time)),
        Decision::Refuse {
            currency,
            code,
            detail,
        } => (
            "rejected",
            Some(RefusalView {
                code: (*code).to_owned(),
                detail: detail.clone(),
            }),
            *currency,
            None,
        ),
    };
    let view = TransactionView {
        id: new.id,
        kind: new.kind.as_str().to_owned(),
        status: status.to_owned(),
        currency: currency.code().to_owned(),
        entries: new
            .journal
            .legs()
            .iter()
            .map(|leg| LegView {
                account: leg.account.to_string(),
                amount: leg.amount.minor_units(),
                amount_decimal: currency.format(leg.amount.minor_units()),
            })
            .collect(),
        external_ref: new.external_ref.clone(),
        metadata: new.metadata.clone(),
        refusal: refusal.clone(),
        created_at,
        posted_at,
    };
    let (creation_status, body) = match &refusal {
        None => (
            201,
            serde_json::to_string(&view).expect("a transaction view always serializes"),
        ),
        Some(r) => (422, refusal_body(new.id, &r.code, &r.detail)),
    };
    let row = TransactionRow {
        id: new.id,
        kind: new.kind.as_str(),
        status,
        currency: currency.code(),
        legs: serde_json::to_value(&view.entries).expect("legs always serialize"),
        account_ids: new.journal.sorted_accounts(),
        external_ref: new.external_ref.as_deref(),
        metadata: Value::Object(new.metadata.clone()),
        refusal: refusal.as_ref(),
        request: &new.request,
        creation_status,
        body: &body,
        created_at,
        posted_at,
    };
    if !insert_transaction(&mut tx, &row).await? {
        // A concurrent request with this id committed first (the insert waited for it).
        tx.rollback().await?;
        return Ok(replay(&mut conn, new)
            .await?
            .ok_or(sqlx::Error::RowNotFound)?);
    }
    if let Decision::Post {
        currency,
        entries,
        ledger_time,
    } = &decision
    {
        if let Some((clearing, currency)) = &create_clearing {
            accounts::ensure_system_account(&mut tx, clearing, *currency).await?;
        }
        insert_entries(&mut tx, new.id, *currency, *ledger_time, entries).await?;
    }
    tx.commit().await?;
    Ok(if creation_status == 201 {
        Created::New { body }
    } else {
        Created::Refused { body }
    })
}

/// A provider's clearing account comes into being with its first *posted* payment. Until then
/// the decision treats it as the active system account it will be (so a refused payment
/// writes nothing but its refusal); returns it when it must be created. An existing account
/// of that id must be a system account in the payment's currency.
fn missing_clearing_account(
    new: &NewTransaction,
    locked: &mut HashMap<String, LockedAccount>,
) -> Result<Option<(AccountId, Currency)>, WriteError> {
    let Some((clearing, currency)) = &new.clearing_account else {
        return Ok(None);
    };
    match locked.get(clearing.as_str()) {
        Some(existing) if existing.kind != AccountType::System.as_str() => {
            Err(WriteError::Invalid(vec![FieldError::new(
                "/provider",
                "not_a_system_account",
                format!("account {clearing} exists but is not a system account"),
            )]))
        }
        Some(_) => Ok(None),
        None => {
            let virtual_account = LockedAccount {
                id: clearing.to_string(),
                currency: currency.code().to_owned(),
                kind: AccountType::System.as_str().to_owned(),
                status: "active".to_owned(),
                overdraft_limit: 0,
            };
            locked.insert(clearing.to_string(), virtual_account);
            Ok(Some((clearing.clone(), *currency)))
        }
    }
}

/// The stored answer for `new.id`, if the id was seen before.
async fn replay(
    conn: &mut PgConnection,
    new: &NewTransaction,
) -> Result<Option<Created>, sqlx::Error> {
    let stored = sqlx::query!(
        "select creation_request, creation_status, creation_response from transactions where id = $1",
        new.id
    )
    .fetch_optional(conn)
    .await?;
    Ok(stored.map(|s| {
        Created::replay_or_mismatch(
            &s.creation_request,
            &new.request,
            s.creation_status as u16,
            s.creation_response,
        )
    }))
}

/// The problem body of a stored refusal; a retry gets these exact bytes again.
pub fn refusal_body(id: Uuid, code: &str, detail: &str) -> String {
    let title = match code {
        "insufficient_funds" => "Insufficient funds",
        "account_frozen" => "Account frozen",
        _ => "Account closed",
    };
    let mut problem = Problem::new(422, code, title, detail);
    problem.instance = Some(format!("/v1/transactions/{id}"));
    serde_json::to_string(&problem).expect("a problem always serializes")
}

/// Locks the accounts of a transaction: wallets exclusively, in sorted id order (the ORDER BY
/// runs before the lock is taken row by row), system accounts shared so that they never
/// serialize writers.
async fn lock_accounts(
    conn: &mut PgConnection,
    sorted_ids: &[String],
) -> Result<HashMap<String, LockedAccount>, sqlx::Error> {
    let wallets = sqlx::query_as!(
        LockedAccount,
        r#"select id, currency, type as kind, status, overdraft_limit from accounts
           where id = any($1) and type = 'wallet' order by id for update"#,
        sorted_ids
    )
    .fetch_all(&mut *conn)
    .await?;
    let systems = sqlx::query_as!(
        LockedAccount,
        r#"select id, currency, type as kind, status, overdraft_limit from accounts
           where id = any($1) and type = 'system' order by id for share"#,
        sorted_ids
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(wallets
        .into_iter()
        .chain(systems)
        .map(|a| (a.id.clone(), a))
        .collect())
}

/// The last entry of each wallet (one backward index step per wallet).
async fn chain_heads(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<HashMap<String, ChainHead>, sqlx::Error> {
    if wallets.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query!(
        r#"select w.id as "id!", h.sequence, h.balance_after, h.ledger_time
           from unnest($1::text[]) as w(id)
           left join lateral (
               select sequence, balance_after, ledger_time from entries
               where account_id = w.id and sequence is not null
               order by sequence desc limit 1) h on true"#,
        wallets
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let head = ChainHead {
                sequence: r.sequence.unwrap_or(0),
                balance: r.balance_after.unwrap_or(0),
                ledger_time: r.ledger_time,
            };
            (r.id, head)
        })
        .collect())
}

/// Post or refuse, from the locked rows alone. Errors are request problems (currency, type,
/// a balance that would leave the safe range) for which nothing is stored.
fn decide(
    new: &NewTransaction,
    locked: &HashMap<String, LockedAccount>,
    heads: &HashMap<String, ChainHead>,
    now: DateTime<Utc>,
) -> Result<Decision, Vec<FieldError>> {
    let legs = new.journal.legs();
    let account = |leg: &super::journal::Leg| &locked[leg.account.as_str()];
    let mut errors = Vec::new();

    // One currency per transaction: the one the caller named, else the first leg's account's.
    let (currency_code, currency_field) = match &new.currency {
        Some((c, field)) => (c.code().to_owned(), field.clone()),
        None => (
            account(&legs[0]).currency.clone(),
            legs[0].account_field.clone(),
        ),
    };
    for leg in legs {
        let a = account(leg);
        if a.currency != currency_code {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "currency_mismatch",
                format!("account {} holds {}, but this transaction is in {currency_code} ({currency_field})", a.id, a.currency),
            ));
        }
        if leg.must_be_wallet && a.kind != AccountType::Wallet.as_str() {
            errors.push(FieldError::new(
                leg.account_field.clone(),
                "not_a_wallet",
                format!("account {} is not a wallet", a.id),
            ));
        }
    }
    let Some(currency) = Currency::parse(&currency_code) else {
        errors.push(FieldError::new(
            currency_field,
            "unknown_currency",
            format!("unknown currency {currency_code}"),
        ));
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }

    // Refusals, in a fixed order so a retry after a change of state still replays the same
    // stored answer: closed, then frozen, then funds.
    for status in ["closed", "frozen"] {
        if let Some(leg) = legs.iter().find(|leg| account(leg).status == status) {
            return Ok(Decision::Refuse {
                currency,
                code: if status == "closed" {
                    "account_closed"
                } else {
                    "account_frozen"
                },
                detail: format!("account {} is {status}", leg.account),
            });
        }
    }

    // Each wallet leg's balance after it; `None` when it would leave the safe range.
    let afters: Vec<Option<Amount>> = legs
        .iter()
        .map(|leg| {
            let head = heads.get(account(leg).id.as_str())?;
            // The schema keeps every running balance in range, so `before` always parses.
            Amount::new(head.balance).and_then(|before| before.checked_add(leg.amount))
        })
        .collect();
    // A credit past the range is a request no ledger could apply: invalid, nothing stored.
    for (leg, after) in legs.iter().zip(&afters) {
        let is_wallet = heads.contains_key(account(leg).id.as_str());
        if is_wallet && after.is_none() && !leg.amount.is_negative() {
            errors.push(FieldError::new(
                leg.amount_field.clone(),
                "balance_overflow",
                format!(
                    "the balance of {} would exceed 9007199254740991",
                    leg.account
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // A debit must stay within the overdraft limit (a debit past the range is past any limit).
    // Holds (issue #3) will subtract pending_out here; available = posted for now.
    for (leg, after) in legs.iter().zip(&afters) {
        let a = account(leg);
        let Some(head) = heads.get(a.id.as_str()) else {
            continue;
        };
        let covered = after.is_some_and(|after| after.minor_units() >= -a.overdraft_limit);
        if leg.amount.is_negative() && !covered {
            return Ok(Decision::Refuse {
                currency,
                code: "insufficient_funds",
                detail: format!(
                    "account {} has {} {currency} available (overdraft limit {}); the debit is {}",
                    a.id,
                    currency.format(head.balance),
                    currency.format(a.overdraft_limit),
                    currency.format(-leg.amount.minor_units()),
                ),
            });
        }
    }

    let mut ledger_time = now;
    let entries = legs
        .iter()
        .zip(afters)
        .map(|(leg, after)| {
            let head = heads.get(account(leg).id.as_str());
            // Ledger time never decreases along an account's chain, whatever the clocks say.
            if let Some(t) = head.and_then(|h| h.ledger_time) {
                ledger_time = ledger_time.max(t);
            }
            // System accounts have no chain and no balance check: they may go negative.
            NewEntry {
                account: leg.account.to_string(),
                amount: leg.amount.minor_units(),
                sequence: head.map(|h| h.sequence + 1),
                balance_after: after.map(Amount::minor_units),
            }
        })
        .collect();
    Ok(Decision::Post {
        currency,
        entries,
        ledger_time,
    })
}

struct TransactionRow<'a> {
    id: Uuid,
    kind: &'a str,
    status: &'a str,
    currency: &'a str,
    legs: Value,
    account_ids: Vec<String>,
    external_ref: Option<&'a str>,
    metadata: Value,
    refusal: Option<&'a RefusalView>,
    request: &'a Value,
    creation_status: i16,
    body: &'a str,
    created_at: DateTime<Utc>,
    posted_at: Option<DateTime<Utc>>,
}

/// `false` when the id already exists: the database decided this request is a duplicate.
async fn insert_transaction(
    conn: &mut PgConnection,
    row: &TransactionRow<'_>,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query!(
        r#"insert into transactions (id, kind, status, currency, legs, account_ids, external_ref,
                                     metadata, refusal_code, refusal_detail, creation_request,
                                     creation_status, creation_response, created_at, posted_at,
                                     updated_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $14)
           on conflict (id) do nothing"#,
        row.id,
        row.kind,
        row.status,
        row.currency,
        row.legs,
        &row.account_ids,
        row.external_ref,
        row.metadata,
        row.refusal.map(|r| r.code.as_str()),
        row.refusal.map(|r| r.detail.as_str()),
        row.request,
        row.creation_status,
        row.body,
        row.created_at,
        row.posted_at,
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// All entries of one transaction in one statement: the journal trigger checks them as a set.
async fn insert_entries(
    conn: &mut PgConnection,
    transaction: Uuid,
    currency: Currency,
    ledger_time: DateTime<Utc>,
    entries: &[NewEntry],
) -> Result<(), sqlx::Error> {
    let accounts: Vec<&str> = entries.iter().map(|e| e.account.as_str()).collect();
    let amounts: Vec<i64> = entries.iter().map(|e| e.amount).collect();
    let sequences: Vec<Option<i64>> = entries.iter().map(|e| e.sequence).collect();
    let balances: Vec<Option<i64>> = entries.iter().map(|e| e.balance_after).collect();
    sqlx::query!(
        r#"insert into entries (transaction_id, account_id, currency, amount, sequence,
                                balance_after, ledger_time)
           select $1, account, $2, amount, sequence, balance_after, $3
           from unnest($4::text[], $5::bigint[], $6::bigint[], $7::bigint[])
                as e(account, amount, sequence, balance_after)"#,
        transaction,
        currency.code(),
        ledger_time,
        &accounts as &[&str],
        &amounts,
        &sequences as &[Option<i64>],
        &balances as &[Option<i64>],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A stored transaction as the API shows it.
struct StoredTransaction {
    id: Uuid,
    seq: i64,
    kind: String,
    status: String,
    currency: String,
    legs: Value,
    external_ref: Option<String>,
    metadata: Value,
    refusal_code: Option<String>,
    refusal_detail: Option<String>,
    created_at: DateTime<Utc>,
    posted_at: Option<DateTime<Utc>>,
}

impl StoredTransaction {
    fn view(self) -> TransactionView {
        TransactionView {
            id: self.id,
            kind: self.kind,
            status: self.status,
            currency: self.currency,
            entries: serde_json::from_value(self.legs).unwrap_or_default(),
            external_ref: self.external_ref,
            metadata: match self.metadata {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            refusal: self.refusal_code.map(|code| RefusalView {
                code,
                detail: self.refusal_detail.unwrap_or_default(),
            }),
            created_at: self.created_at,
            posted_at: self.posted_at,
        }
    }
}

pub async fn find(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<TransactionView>, sqlx::Error> {
    let row = sqlx::query_as!(
        StoredTransaction,
        r#"select id, seq, kind, status, currency, legs, external_ref, metadata, refusal_code,
                  refusal_detail, created_at, posted_at
           from transactions where id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(StoredTransaction::view))
}

/// Filters of `GET /v1/transactions`; `before_seq` is the decoded cursor.
#[derive(Debug, Default)]
pub struct TransactionFilter {
    pub account: Option<String>,
    pub status: Option<String>,
    pub external_ref: Option<String>,
    pub before_seq: Option<i64>,
    pub limit: i64,
}

/// Newest first. Returns the page and the cursor of the next one.
pub async fn list(
    conn: &mut PgConnection,
    f: &TransactionFilter,
) -> Result<(Vec<TransactionView>, Option<i64>), sqlx::Error> {
    let rows = sqlx::query_as!(
        StoredTransaction,
        r#"select id, seq, kind, status, currency, legs, external_ref, metadata, refusal_code,
                  refusal_detail, created_at, posted_at
           from transactions
           where ($1::text is null or account_ids @> array[$1::text])
             and ($2::text is null or status = $2)
             and ($3::text is null or external_ref = $3)
             and ($4::bigint is null or seq < $4)
           order by seq desc
           limit $5"#,
        f.account,
        f.status,
        f.external_ref,
        f.before_seq,
        f.limit + 1,
    )
    .fetch_all(conn)
    .await?;
    Ok(paginate(rows, f.limit, |r| r.seq, StoredTransaction::view))
}

/// Keeps `limit` rows and, when one more came back, the cursor that continues after them.
fn paginate<R, V>(
    mut rows: Vec<R>,
    limit: i64,
    key: impl Fn(&R) -> i64,
    view: impl Fn(R) -> V,
) -> (Vec<V>, Option<i64>) {
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next = if more { rows.last().map(&key) } else { None };
    (rows.into_iter().map(view).collect(), next)
}

/// The entries of an account, newest first (entry ids grow along a wallet's sequence, since
/// they are drawn while the wallet is locked).
pub async fn entries(
    conn: &mut PgConnection,
    account: &str,
    currency: Currency,
    before_id: Option<i64>,
    limit: i64,
) -> Result<(Vec<EntryView>, Option<i64>), sqlx::Error> {
    let rows = sqlx::query!(
        r#"select id, transaction_id, account_id, currency, amount, sequence, balance_after, ledger_time
           from entries
           where account_id = $1 and ($2::bigint is null or id < $2)
           order by id desc limit $3"#,
        account,
        before_id,
        limit + 1
    )
    .fetch_all(conn)
    .await?;
    Ok(paginate(
        rows,
        limit,
        |r| r.id,
        |r| EntryView {
            id: r.id,
            transaction_id: r.transaction_id,
            account: r.account_id,
            currency: r.currency,
            amount: r.amount,
            amount_decimal: currency.format(r.amount),
            sequence: r.sequence,
            balance_after: r.balance_after,
            balance_after_decimal: r.balance_after.map(|b| currency.format(b)),
            ledger_time: r.ledger_time,
        },
    ))
}
