//! The rows of velocity limits (of a wallet or of an account set), and the recent activity of
//! a limited wallet or set read under its lock. The statements are the same on both engines:
//! `account_limits` and the set tables are tables of the coordinator on Citus (like the
//! outbox), and a wallet's entries and holds are read with its id, so Citus routes them to its
//! one shard.

use super::{Activity, Bound, Direction, Owner, VelocityLimit};
use crate::db::StoreError;
use crate::ledger::money::{Amount, Currency};
use crate::ledger::owner::Rule;
use crate::ledger::posting::ChainHead;
use crate::ledger::{Created, Outcome, audit, now_micros};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

/// A limit as the API shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LimitView {
    pub id: Uuid,
    /// The wallet it holds; `null` for a set's limit.
    pub account_id: Option<String>,
    /// The account set it holds; `null` for a wallet's limit.
    pub set_id: Option<String>,
    pub direction: Direction,
    /// The most the window lets through, in minor units of the account's currency (an amount
    /// limit), else `null`.
    pub amount: Option<i64>,
    /// `amount` in major units (`"5000.00"`), else `null`.
    pub amount_decimal: Option<String>,
    /// The most movements the window lets through (a count limit), else `null`.
    pub count: Option<i64>,
    /// The rolling window, 60 to 2,678,400 seconds (1 minute to 31 days).
    pub window_seconds: i32,
    pub created_at: DateTime<Utc>,
    /// When it was deleted (it no longer counts), else `null`.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// A limit to add, checked by the API.
pub struct NewLimit {
    pub id: Uuid,
    pub owner: Owner,
    pub limit: VelocityLimit,
    /// The request as the caller sent it, for idempotency.
    pub request: Value,
}

/// Why a limit was not added.
#[derive(Debug)]
pub enum AddError {
    /// No such account, or no such set.
    UnknownOwner,
    /// The account already has [`super::MAX_LIMITS_PER_ACCOUNT`].
    TooMany,
    Store(StoreError),
}

impl From<sqlx::Error> for AddError {
    fn from(e: sqlx::Error) -> Self {
        AddError::Store(e.into())
    }
}

struct LimitRow {
    id: Uuid,
    account_id: Option<String>,
    set_id: Option<String>,
    currency: String,
    direction: String,
    measure: String,
    maximum: i64,
    window_seconds: i32,
    created_at: DateTime<Utc>,
    deleted_at: Option<DateTime<Utc>>,
}

impl LimitRow {
    fn limit(&self) -> Result<VelocityLimit, StoreError> {
        let corrupt = |what: &str| crate::db::corrupt("account_limits", self.id, what.to_owned());
        let bound = match (self.measure.as_str(), Amount::new(self.maximum)) {
            ("amount", Some(max)) => Bound::Amount(max),
            ("count", _) => Bound::Count(self.maximum),
            _ => return Err(corrupt("unknown measure or maximum out of range")),
        };
        Ok(VelocityLimit {
            id: self.id,
            direction: Direction::parse(&self.direction)
                .ok_or_else(|| corrupt("unknown direction"))?,
            bound,
            window_seconds: self.window_seconds,
        })
    }

    fn view(&self) -> Result<LimitView, StoreError> {
        let limit = self.limit()?;
        let (amount, count) = match limit.bound {
            Bound::Amount(a) => (Some(a.minor_units()), None),
            Bound::Count(c) => (None, Some(c)),
        };
        let decimal = |a: i64| Currency::parse(&self.currency).map(|c| c.format(a));
        Ok(LimitView {
            id: self.id,
            account_id: self.account_id.clone(),
            set_id: self.set_id.clone(),
            direction: limit.direction,
            amount_decimal: amount.and_then(decimal),
            amount,
            count,
            window_seconds: self.window_seconds,
            created_at: self.created_at,
            deleted_at: self.deleted_at,
        })
    }
}

fn measure_and_maximum(bound: Bound) -> (&'static str, i64) {
    match bound {
        Bound::Amount(a) => ("amount", a.minor_units()),
        Bound::Count(c) => ("count", c),
    }
}

/// Adds a limit, once per id: the owner's row is locked (and marked limited) first, so the
/// limit applies to every posting that locks the wallet (or set) after this commits, and to
/// none that decided before. A retry with the same id and request replays the first answer.
pub async fn add(conn: &mut PgConnection, new: &NewLimit) -> Result<Created, AddError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let currency = new
        .owner
        .mark(&mut tx, Rule::Limits)
        .await?
        .ok_or(AddError::UnknownOwner)?;
    if let Some(stored) = stored_request(&mut tx, new.id).await? {
        tx.rollback().await?;
        return Ok(Created::replay_or_mismatch(
            &stored.0,
            &new.request,
            stored.1,
        ));
    }
    let active = sqlx::query_scalar!(
        r#"select count(*) as "n!" from account_limits
           where (account_id = $1 or set_id = $2) and deleted_at is null"#,
        new.owner.account(),
        new.owner.set()
    )
    .fetch_one(&mut *tx)
    .await?;
    if active >= super::MAX_LIMITS_PER_ACCOUNT {
        return Err(AddError::TooMany);
    }
    let (measure, maximum) = measure_and_maximum(new.limit.bound);
    let row = LimitRow {
        id: new.id,
        account_id: new.owner.account().map(str::to_owned),
        set_id: new.owner.set().map(str::to_owned),
        currency,
        direction: new.limit.direction.as_str().to_owned(),
        measure: measure.to_owned(),
        maximum,
        window_seconds: new.limit.window_seconds,
        created_at: now_micros(),
        deleted_at: None,
    };
    let body = serde_json::to_string(&row.view().map_err(AddError::Store)?)
        .expect("a limit view always serializes");
    sqlx::query!(
        r#"insert into account_limits (id, account_id, set_id, currency, direction, measure,
                                       maximum, window_seconds, creation_request,
                                       creation_response, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"#,
        row.id,
        row.account_id,
        row.set_id,
        row.currency,
        row.direction,
        row.measure,
        row.maximum,
        row.window_seconds,
        new.request,
        body,
        row.created_at
    )
    .execute(&mut *tx)
    .await?;
    audit::record(&mut tx, "account.limit.create", &[new.id.to_string()]).await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    Ok(Created::First(Outcome::Created { body }))
}

/// The stored request and answer of a limit id, if it is taken (by any account).
async fn stored_request(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<(Value, Outcome)>, sqlx::Error> {
    let row = sqlx::query!(
        "select creation_request, creation_response from account_limits where id = $1",
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| {
        (
            r.creation_request,
            Outcome::Created {
                body: r.creation_response,
            },
        )
    }))
}

/// An owner's limits that count (not deleted), oldest first; `None` for no such owner.
pub async fn list(
    conn: &mut PgConnection,
    owner: &Owner,
) -> Result<Option<Vec<LimitView>>, StoreError> {
    if !owner.exists(&mut *conn).await? {
        return Ok(None);
    }
    let rows = sqlx::query_as!(
        LimitRow,
        r#"select id, account_id, set_id, currency, direction, measure, maximum, window_seconds,
                  created_at, deleted_at
           from account_limits where (account_id = $1 or set_id = $2) and deleted_at is null
           order by created_at, id"#,
        owner.account(),
        owner.set()
    )
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(LimitRow::view)
        .collect::<Result<_, _>>()
        .map(Some)
}

/// Deletes a limit of `owner`: it no longer counts for postings that lock the wallet (or set)
/// after this commits. A repeat answers the limit as deleted the first time; `None` when the
/// owner has no limit with this id.
pub async fn delete(
    conn: &mut PgConnection,
    owner: &Owner,
    id: Uuid,
) -> Result<Option<LimitView>, StoreError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // The owner's row first, as every writer locks it: the flag and the limits change
    // together for the postings that follow.
    owner.remark(&mut tx, Rule::Limits).await?;
    let row = sqlx::query_as!(
        LimitRow,
        r#"update account_limits set deleted_at = coalesce(deleted_at, $4)
           where id = $1 and (account_id = $2 or set_id = $3)
           returning id, account_id, set_id, currency, direction, measure, maximum,
                     window_seconds, created_at, deleted_at"#,
        id,
        owner.account(),
        owner.set(),
        now_micros()
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    owner.remark(&mut tx, Rule::Limits).await?;
    audit::record(&mut tx, "account.limit.delete", &[id.to_string()]).await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    row.view().map(Some)
}

/// The limits that count of these wallets (those whose row says they have one), or with
/// `of_sets`, of these account sets.
pub(crate) async fn limits_of(
    conn: &mut PgConnection,
    owners: &[String],
    of_sets: bool,
) -> Result<HashMap<String, Vec<VelocityLimit>>, StoreError> {
    // Two statements, each with its own index (a wallet's limits are read on every pass of a
    // limited wallet).
    let rows = if of_sets {
        sqlx::query_as!(
            LimitRow,
            r#"select id, account_id, set_id, currency, direction, measure, maximum,
                      window_seconds, created_at, deleted_at
               from account_limits where set_id = any($1) and deleted_at is null"#,
            owners
        )
        .fetch_all(conn)
        .await?
    } else {
        sqlx::query_as!(
            LimitRow,
            r#"select id, account_id, set_id, currency, direction, measure, maximum,
                      window_seconds, created_at, deleted_at
               from account_limits where account_id = any($1) and deleted_at is null"#,
            owners
        )
        .fetch_all(conn)
        .await?
    };
    let mut limits: HashMap<String, Vec<VelocityLimit>> = HashMap::new();
    for row in rows {
        let limit = row.limit()?;
        let owner = row.account_id.or(row.set_id).unwrap_or_default();
        limits.entry(owner).or_default().push(limit);
    }
    Ok(limits)
}

/// A limited set's activity under its lock: its wallets' entries since `now` less its longest
/// window (its movements of kind `entry`, by ledger time) and the copies of their open holds.
pub(crate) async fn set_activity(
    conn: &mut PgConnection,
    set: &str,
    limits: Vec<VelocityLimit>,
    now: DateTime<Utc>,
) -> Result<Activity, StoreError> {
    let Some(window) = Activity::longest_window(&limits) else {
        return Ok(Activity::default());
    };
    let posted = sqlx::query!(
        "select ledger_time, amount from account_set_movements
         where set_id = $1 and kind = 'entry' and ledger_time > $2",
        set,
        now - window
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| Ok((r.ledger_time, Amount::stored(r.amount)?)))
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let held = sqlx::query_scalar!(
        "select amount from account_set_open_holds where set_id = $1 and expires_at > now()",
        set
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(Amount::stored)
    .collect::<Result<Vec<_>, _>>()?;
    Ok(Activity::new(limits, posted, held))
}

/// A limited wallet's activity under its lock: its posted legs since `now` less its longest
/// window, walked back along its chain from `head` (one index probe per leg in the window,
/// whatever the wallet's history), and its open holds.
pub(crate) async fn activity(
    conn: &mut PgConnection,
    wallet: &str,
    head: &ChainHead,
    limits: Vec<VelocityLimit>,
    now: DateTime<Utc>,
) -> Result<Activity, StoreError> {
    let Some(window) = Activity::longest_window(&limits) else {
        return Ok(Activity::default());
    };
    let since = now - window;
    let posted = match head.ledger_time {
        Some(last) if last > since => sqlx::query!(
            r#"with recursive back as (
                   select sequence, amount, ledger_time from entries
                   where account_id = $1 and sequence = $2
                   union all
                   select e.sequence, e.amount, e.ledger_time
                   from back b join entries e on e.account_id = $1 and e.sequence = b.sequence - 1
                   where b.ledger_time > $3)
               select ledger_time as "ledger_time!", amount as "amount!" from back
               where ledger_time > $3"#,
            wallet,
            head.sequence,
            since
        )
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|r| Ok((r.ledger_time, Amount::stored(r.amount)?)))
        .collect::<Result<Vec<_>, sqlx::Error>>()?,
        _ => Vec::new(),
    };
    let held = sqlx::query_scalar!(
        "select amount from open_holds where account_id = $1 and expires_at > now()",
        wallet
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(Amount::stored)
    .collect::<Result<Vec<_>, _>>()?;
    Ok(Activity::new(limits, posted, held))
}
