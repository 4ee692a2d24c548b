//! The rows of balance monitors (of a wallet or of an account set): added, listed, read and
//! deleted through the API, loaded by the write path under a monitored wallet's (or set's)
//! lock, and their firings recorded in the change's transaction. The statements are the same
//! on both engines: `account_monitors` and the set tables are tables of the coordinator on
//! Citus (like the outbox and `account_limits`).

use super::{Balances, Condition, Field, Firing, Monitor, Operator, SetWatch, Watch, Watches};
use crate::db::StoreError;
use crate::ledger::events::{self, EventType};
use crate::ledger::owner::{Owner, Rule};
use crate::ledger::sets::bookkeeping::RuledSet;
use crate::ledger::{Created, Outcome, audit, now_micros};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// Balances as monitors and their events show them: `available` spelled out, each amount with
/// its `_decimal` form, like every amount.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = MonitorBalances)]
pub struct BalancesView {
    pub posted: i64,
    pub posted_decimal: String,
    pub pending_in: i64,
    pub pending_in_decimal: String,
    pub pending_out: i64,
    pub pending_out_decimal: String,
    /// `posted − pending_out`.
    pub available: i64,
    pub available_decimal: String,
}

impl BalancesView {
    pub fn new(b: Balances, currency: &str) -> Self {
        let decimal = |v: i64| events::decimal(currency, v);
        BalancesView {
            posted: b.posted,
            posted_decimal: decimal(b.posted),
            pending_in: b.pending_in,
            pending_in_decimal: decimal(b.pending_in),
            pending_out: b.pending_out,
            pending_out_decimal: decimal(b.pending_out),
            available: b.available(),
            available_decimal: decimal(b.available()),
        }
    }
}

/// Whether a monitor's condition holds on its owner's balances now.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MonitorState {
    /// It does not hold: the next change that makes it true fires it.
    Armed,
    /// It holds: it fires again only after a change makes it false.
    Triggered,
}

/// A monitor's last firing.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LastFiring {
    pub triggered_at: DateTime<Utc>,
    /// The transaction whose posting, hold, capture or void crossed the condition.
    pub transaction_id: Uuid,
    pub balances_before: BalancesView,
    pub balances_after: BalancesView,
}

/// A monitor as the API shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct MonitorView {
    pub id: Uuid,
    /// The wallet it watches; `null` for a set's monitor.
    pub account_id: Option<String>,
    /// The account set it watches; `null` for a wallet's monitor.
    pub set_id: Option<String>,
    pub field: Field,
    pub operator: Operator,
    /// In minor units of the account's currency.
    pub value: i64,
    /// `value` in major units (`"50.00"`).
    pub value_decimal: String,
    /// `triggered` when the condition holds on the balances now, else `armed`; shown by
    /// `GET .../monitors/{monitor_id}` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MonitorState>,
    /// How many times it fired.
    pub trigger_count: i64,
    /// Its last firing, else `null`.
    pub last_triggered: Option<LastFiring>,
    pub created_at: DateTime<Utc>,
    /// When it was deleted (it no longer fires), else `null`.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// A monitor to add, checked by the API.
pub struct NewMonitor {
    pub id: Uuid,
    pub owner: Owner,
    pub condition: Condition,
    /// The request as understood, for idempotency.
    pub request: Value,
}

/// Why a monitor was not added.
#[derive(Debug)]
pub enum AddError {
    /// No such account, or no such set.
    UnknownOwner,
    /// The owner already has [`super::MAX_MONITORS_PER_ACCOUNT`].
    TooMany,
    Store(StoreError),
}

impl From<sqlx::Error> for AddError {
    fn from(e: sqlx::Error) -> Self {
        AddError::Store(e.into())
    }
}

struct MonitorRow {
    id: Uuid,
    account_id: Option<String>,
    set_id: Option<String>,
    currency: String,
    field: String,
    operator: String,
    value: i64,
    created_at: DateTime<Utc>,
    deleted_at: Option<DateTime<Utc>>,
    trigger_count: i64,
    last_triggered_at: Option<DateTime<Utc>>,
    last_transaction_id: Option<Uuid>,
    last_before: Option<Value>,
    last_after: Option<Value>,
}

impl MonitorRow {
    fn condition(&self) -> Result<Condition, StoreError> {
        let corrupt = |what: &str| crate::db::corrupt("account_monitors", self.id, what.to_owned());
        Ok(Condition {
            field: Field::parse(&self.field).ok_or_else(|| corrupt("unknown field"))?,
            operator: Operator::parse(&self.operator).ok_or_else(|| corrupt("unknown operator"))?,
            value: self.value,
        })
    }

    fn view(&self) -> Result<MonitorView, StoreError> {
        let condition = self.condition()?;
        let corrupt = || crate::db::corrupt("account_monitors", self.id, "bad last firing");
        let last_triggered = match (
            self.last_triggered_at,
            self.last_transaction_id,
            &self.last_before,
            &self.last_after,
        ) {
            (Some(at), Some(tx), Some(before), Some(after)) => Some(LastFiring {
                triggered_at: at,
                transaction_id: tx,
                balances_before: serde_json::from_value(before.clone()).map_err(|_| corrupt())?,
                balances_after: serde_json::from_value(after.clone()).map_err(|_| corrupt())?,
            }),
            _ => None,
        };
        Ok(MonitorView {
            id: self.id,
            account_id: self.account_id.clone(),
            set_id: self.set_id.clone(),
            field: condition.field,
            operator: condition.operator,
            value: self.value,
            value_decimal: events::decimal(&self.currency, self.value),
            state: None,
            trigger_count: self.trigger_count,
            last_triggered,
            created_at: self.created_at,
            deleted_at: self.deleted_at,
        })
    }
}

/// Adds a monitor, once per id: the owner's row is locked (and marked monitored) first, so
/// the monitor is evaluated by every change that locks the wallet (or set) after this commits.
/// A retry with the same id and request replays the first answer.
pub async fn add(conn: &mut PgConnection, new: &NewMonitor) -> Result<Created, AddError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let currency = new
        .owner
        .mark(&mut tx, Rule::Monitors)
        .await?
        .ok_or(AddError::UnknownOwner)?;
    if let Some((request, outcome)) = stored_request(&mut tx, new.id).await? {
        tx.rollback().await?;
        return Ok(Created::replay_or_mismatch(&request, &new.request, outcome));
    }
    let active = sqlx::query_scalar!(
        r#"select count(*) as "n!" from account_monitors
           where (account_id = $1 or set_id = $2) and deleted_at is null"#,
        new.owner.account(),
        new.owner.set()
    )
    .fetch_one(&mut *tx)
    .await?;
    if active >= super::MAX_MONITORS_PER_ACCOUNT {
        return Err(AddError::TooMany);
    }
    let row = MonitorRow {
        id: new.id,
        account_id: new.owner.account().map(str::to_owned),
        set_id: new.owner.set().map(str::to_owned),
        currency,
        field: new.condition.field.as_str().to_owned(),
        operator: new.condition.operator.as_str().to_owned(),
        value: new.condition.value,
        created_at: now_micros(),
        deleted_at: None,
        trigger_count: 0,
        last_triggered_at: None,
        last_transaction_id: None,
        last_before: None,
        last_after: None,
    };
    let body = serde_json::to_string(&row.view().map_err(AddError::Store)?)
        .expect("a monitor view always serializes");
    sqlx::query!(
        r#"insert into account_monitors (id, account_id, set_id, currency, field, operator, value,
                                         creation_request, creation_response, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
        row.id,
        row.account_id,
        row.set_id,
        row.currency,
        row.field,
        row.operator,
        row.value,
        new.request,
        body,
        row.created_at
    )
    .execute(&mut *tx)
    .await?;
    audit::record(&mut tx, "account.monitor.create", &[new.id.to_string()]).await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    Ok(Created::First(Outcome::Created { body }))
}

/// The stored request and answer of a monitor id, if it is taken (by any account).
async fn stored_request(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<(Value, Outcome)>, sqlx::Error> {
    let row = sqlx::query!(
        "select creation_request, creation_response from account_monitors where id = $1",
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| {
        let body = r.creation_response;
        (r.creation_request, Outcome::Created { body })
    }))
}

/// An owner's monitors that fire (not deleted), oldest first; `None` for no such owner.
pub async fn list(
    conn: &mut PgConnection,
    owner: &Owner,
) -> Result<Option<Vec<MonitorView>>, StoreError> {
    if !owner.exists(&mut *conn).await? {
        return Ok(None);
    }
    let rows = sqlx::query_as!(
        MonitorRow,
        r#"select id, account_id, set_id, currency, field, operator, value, created_at,
                  deleted_at, trigger_count, last_triggered_at, last_transaction_id, last_before,
                  last_after
           from account_monitors where (account_id = $1 or set_id = $2) and deleted_at is null
           order by created_at, id"#,
        owner.account(),
        owner.set()
    )
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(MonitorRow::view)
        .collect::<Result<_, _>>()
        .map(Some)
}

/// One monitor of `owner` (deleted ones too), without its state; `None` if it has none with
/// this id.
pub async fn find(
    conn: &mut PgConnection,
    owner: &Owner,
    id: Uuid,
) -> Result<Option<(MonitorView, Condition)>, StoreError> {
    let row = sqlx::query_as!(
        MonitorRow,
        r#"select id, account_id, set_id, currency, field, operator, value, created_at,
                  deleted_at, trigger_count, last_triggered_at, last_transaction_id, last_before,
                  last_after
           from account_monitors where id = $1 and (account_id = $2 or set_id = $3)"#,
        id,
        owner.account(),
        owner.set()
    )
    .fetch_optional(conn)
    .await?;
    row.map(|r| Ok((r.view()?, r.condition()?))).transpose()
}

/// Deletes a monitor of `owner`: changes that lock the wallet (or set) after this commits no
/// longer evaluate it. A repeat answers the monitor as deleted the first time; `None` when the
/// owner has no monitor with this id.
pub async fn delete(
    conn: &mut PgConnection,
    owner: &Owner,
    id: Uuid,
) -> Result<Option<MonitorView>, StoreError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // The owner's row first, as every writer locks it: the flag and the monitors change
    // together for the changes that follow.
    owner.remark(&mut tx, Rule::Monitors).await?;
    let row = sqlx::query_as!(
        MonitorRow,
        r#"update account_monitors set deleted_at = coalesce(deleted_at, $4)
           where id = $1 and (account_id = $2 or set_id = $3)
           returning id, account_id, set_id, currency, field, operator, value, created_at,
                     deleted_at, trigger_count, last_triggered_at, last_transaction_id,
                     last_before, last_after"#,
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
    owner.remark(&mut tx, Rule::Monitors).await?;
    audit::record(&mut tx, "account.monitor.delete", &[id.to_string()]).await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    row.view().map(Some)
}

/// What a pass evaluates: the monitors of these wallets (those whose row says they have one),
/// and of the monitored sets among `ruled` with their balances now, all read under the locks
/// the caller took (the wallets', then the sets').
pub(crate) async fn watches(
    conn: &mut PgConnection,
    wallets: &[String],
    ruled: &[RuledSet],
) -> Result<Watches, StoreError> {
    let mut watches = Watches {
        wallets: watches_of(&mut *conn, wallets, false).await?,
        ..Watches::default()
    };
    let sets: std::collections::BTreeSet<&str> = ruled
        .iter()
        .filter(|r| r.has_monitors)
        .map(|r| r.set.as_str())
        .collect();
    if sets.is_empty() {
        return Ok(watches);
    }
    let sets: Vec<String> = sets.into_iter().map(str::to_owned).collect();
    for (set, watch) in watches_of(&mut *conn, &sets, true).await? {
        let (posted, pending_in, pending_out) =
            crate::ledger::sets::store::balances_now(&mut *conn, &set).await?;
        let balances = Balances {
            posted,
            pending_in,
            pending_out,
        };
        watches.sets.insert(set, SetWatch { watch, balances });
    }
    for r in ruled.iter().filter(|r| watches.sets.contains_key(&r.set)) {
        let of_wallet = watches.sets_of.entry(r.wallet.clone()).or_default();
        of_wallet.push(r.set.clone());
    }
    Ok(watches)
}

/// The monitors that fire of these wallets, or with `of_sets`, of these account sets.
async fn watches_of(
    conn: &mut PgConnection,
    owners: &[String],
    of_sets: bool,
) -> Result<HashMap<String, Watch>, StoreError> {
    if owners.is_empty() {
        return Ok(HashMap::new());
    }
    // Two statements, each with its own index.
    let rows = if of_sets {
        sqlx::query_as!(
            MonitorRow,
            r#"select id, account_id, set_id, currency, field, operator, value, created_at,
                      deleted_at, trigger_count, last_triggered_at, last_transaction_id,
                      last_before, last_after
               from account_monitors where set_id = any($1) and deleted_at is null
               order by created_at, id"#,
            owners
        )
        .fetch_all(conn)
        .await?
    } else {
        sqlx::query_as!(
            MonitorRow,
            r#"select id, account_id, set_id, currency, field, operator, value, created_at,
                      deleted_at, trigger_count, last_triggered_at, last_transaction_id,
                      last_before, last_after
               from account_monitors where account_id = any($1) and deleted_at is null
               order by created_at, id"#,
            owners
        )
        .fetch_all(conn)
        .await?
    };
    let mut watches: HashMap<String, Watch> = HashMap::new();
    for row in rows {
        let condition = row.condition()?;
        let owner = row
            .account_id
            .clone()
            .or(row.set_id.clone())
            .unwrap_or_default();
        let watch = watches.entry(owner).or_default();
        watch.currency = row.currency.clone();
        watch.monitors.push(Monitor {
            id: row.id,
            condition,
        });
    }
    Ok(watches)
}

/// Records firings in the change's transaction, in the order they happened: one
/// `balance.monitor_triggered` event each (id: UUIDv5 of the type, the monitor and the
/// transaction), and each monitor's count and last firing.
pub(crate) async fn record_firings(
    conn: &mut PgConnection,
    firings: &[Firing],
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    if firings.is_empty() {
        return Ok(());
    }
    let event = EventType::BalanceMonitorTriggered;
    let ids: Vec<Uuid> = firings
        .iter()
        .map(|f| events::event_id(event, &format!("{}\n{}", f.monitor, f.transaction_id)))
        .collect();
    let transactions: Vec<Uuid> = firings.iter().map(|f| f.transaction_id).collect();
    let accounts: Vec<Option<&str>> = firings.iter().map(|f| f.owner.account()).collect();
    let data: Vec<Value> = firings.iter().map(|f| event_data(f, at)).collect();
    sqlx::query!(
        r#"insert into outbox_events (id, type, transaction_id, account_id, data)
           select id, $1, transaction_id, account_id, data
           from unnest($2::uuid[], $3::uuid[], $4::text[], $5::jsonb[]) with ordinality
                as f(id, transaction_id, account_id, data, n)
           order by n
           on conflict (id) do nothing"#,
        event.as_str(),
        &ids,
        &transactions,
        &accounts as &[Option<&str>],
        &data,
    )
    .execute(&mut *conn)
    .await?;
    // Per monitor: how many times it fired and its last firing (the last in order).
    let mut last: BTreeMap<Uuid, (i64, &Firing)> = BTreeMap::new();
    for f in firings {
        let entry = last.entry(f.monitor).or_insert((0, f));
        *entry = (entry.0 + 1, f);
    }
    let monitors: Vec<Uuid> = last.keys().copied().collect();
    let counts: Vec<i64> = last.values().map(|(n, _)| *n).collect();
    let txs: Vec<Uuid> = last.values().map(|(_, f)| f.transaction_id).collect();
    let befores: Vec<Value> = last
        .values()
        .map(|(_, f)| json!(BalancesView::new(f.before, &f.currency)))
        .collect();
    let afters: Vec<Value> = last
        .values()
        .map(|(_, f)| json!(BalancesView::new(f.after, &f.currency)))
        .collect();
    sqlx::query!(
        r#"update account_monitors m
           set trigger_count = m.trigger_count + u.n, last_triggered_at = $2,
               last_transaction_id = u.transaction_id, last_before = u.before,
               last_after = u.after
           from unnest($1::uuid[], $3::bigint[], $4::uuid[], $5::jsonb[], $6::jsonb[])
                as u(id, n, transaction_id, before, after)
           where m.id = u.id"#,
        &monitors,
        at,
        &counts,
        &txs,
        &befores,
        &afters,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The event's `data`: the monitor, its wallet (`account`) or its set (`account_set`), the
/// other one null, the transaction that crossed, and the balances before and after it.
fn event_data(f: &Firing, at: DateTime<Utc>) -> Value {
    let decimal = |v: i64| events::decimal(&f.currency, v);
    let named = |id: Option<&str>| id.map(|id| json!({"id": id, "currency": f.currency}));
    json!({
        "monitor": {"id": f.monitor, "field": f.condition.field,
                    "operator": f.condition.operator, "value": f.condition.value,
                    "value_decimal": decimal(f.condition.value)},
        "account": named(f.owner.account()),
        "account_set": named(f.owner.set()),
        "transaction_id": f.transaction_id,
        "balances_before": BalancesView::new(f.before, &f.currency),
        "balances_after": BalancesView::new(f.after, &f.currency),
        "triggered_at": at,
    })
}
