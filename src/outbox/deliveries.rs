//! Deliveries: one per event and matching subscription, claimed by dispatchers with
//! `FOR UPDATE SKIP LOCKED` (so several dispatchers share the work and never take the same
//! delivery at once), sent, and recorded.
//!
//! Claiming increments `attempts` and pushes `next_attempt_at` past the send's timeout: the
//! claim is a lease. A dispatcher that dies between sending and recording leaves the delivery
//! due again once the lease runs out, and it is sent again with the same `webhook-id`, which
//! the receiver uses to recognise it. Recording is conditional on the claim's `attempts`, so a
//! dispatcher whose lease ran out cannot overwrite what a later attempt recorded.

use crate::db::StoreError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::HashMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// Turns up to `limit` events not yet fanned out into one delivery per active subscription
/// that wants their type and existed when they happened. Returns how many events it handled.
pub async fn fan_out(conn: &mut PgConnection, limit: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"with events as (
               select seq, id, type, created_at, xid from outbox_events
               where fanned_out_at is null
               order by seq limit $1
               for update skip locked),
           created as (
               insert into webhook_deliveries (id, event_id, subscription_id, next_attempt_at)
               select gen_random_uuid(), e.id, s.id, now()
               from events e
               join webhook_subscriptions s
                 on s.status = 'active'
                -- Commit order: the events whose transaction the subscription's creation did
                -- not see (migration 11). Older subscriptions compare times, as they did.
                and (case when s.created_snapshot is null then s.created_at <= e.created_at
                          else not pg_visible_in_snapshot(e.xid, s.created_snapshot) end)
                and (cardinality(s.event_types) = 0 or e.type = any(s.event_types))
               order by e.seq, s.id
               on conflict (event_id, subscription_id) do nothing
               returning 1),
           marked as (
               update outbox_events o set fanned_out_at = now()
               from events e where o.seq = e.seq
               returning 1)
           select count(*) as "events!" from marked"#,
        limit
    )
    .fetch_one(conn)
    .await
}

/// A delivery taken by this dispatcher, with what it needs to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    /// This claim's own id: its result is recorded only while no later claim took the delivery.
    pub claim_id: Uuid,
    pub subscription_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub event_created_at: DateTime<Utc>,
    pub data: Value,
    pub url: String,
    pub secrets: Vec<String>,
    /// This attempt's number since the delivery was (re)started.
    pub attempts: i32,
}

/// Claims up to `limit` due deliveries for `lease` (longer than a send can take).
/// Takes up to `limit` due deliveries of active subscriptions for `lease`, at most
/// `per_subscription` of any one subscription, and none of the subscriptions in `full` (those
/// this dispatcher already sends to at its limit). The caller sends them at once: nothing is
/// claimed to wait in memory, so a lease never runs out on a delivery not yet sent, and the
/// subscription's state is read right before its send.
pub async fn claim(
    conn: &mut PgConnection,
    limit: i64,
    per_subscription: i64,
    full: &[Uuid],
    lease: std::time::Duration,
) -> Result<Vec<Claimed>, sqlx::Error> {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    sqlx::query_as!(
        Claimed,
        r#"with candidates as (
               select d.id, d.subscription_id, d.next_attempt_at from webhook_deliveries d
               where d.status = 'pending' and d.next_attempt_at <= now()
                 and d.subscription_id <> all($4::uuid[])
                 and exists (select 1 from webhook_subscriptions s
                             where s.id = d.subscription_id and s.status = 'active')
               order by d.next_attempt_at limit $1::bigint * $3::bigint
               for update of d skip locked),
           due as (
               select id from (
                   select id, next_attempt_at,
                          row_number() over (partition by subscription_id
                                             order by next_attempt_at) as nth
                   from candidates) ranked
               where nth <= $3::bigint
               order by next_attempt_at limit $1)
           update webhook_deliveries d
              set attempts = d.attempts + 1, updated_at = now(), claim_id = gen_random_uuid(),
                  next_attempt_at = now() + make_interval(secs => $2::bigint / 1000.0)
           from due, outbox_events e, webhook_subscriptions s
           where d.id = due.id and e.id = d.event_id and s.id = d.subscription_id
             and s.status = 'active'
           returning d.id, d.claim_id as "claim_id!", d.subscription_id, d.event_id,
                     e.type as event_type,
                     e.created_at as event_created_at, e.data, s.url, s.secrets, d.attempts"#,
        limit,
        lease_ms,
        per_subscription,
        full
    )
    .fetch_all(conn)
    .await
}

/// Where a delivery is: `pending` until it is sent, then `delivered`, or `dead` when its
/// retries are spent or the receiver refused it for good; `cancelled` with its subscription.
/// A redelivery makes any but a cancelled one `pending` again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Dead,
    Cancelled,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 4] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Dead,
        DeliveryStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Dead => "dead",
            DeliveryStatus::Cancelled => "cancelled",
        }
    }

    /// The stored `webhook_deliveries.status`, or a filter's; `None` for anything else.
    pub fn parse(text: &str) -> Option<DeliveryStatus> {
        DeliveryStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// 2xx.
    Delivered { status: u16 },
    /// Worth another try at `at` (5xx, 408, 429, a timeout, a refused connection).
    Retry {
        status: Option<u16>,
        error: String,
        at: DateTime<Utc>,
    },
    /// Final: a 4xx other than 408 and 429, a redirect, a URL no longer allowed, or the retry
    /// budget spent.
    Dead { status: Option<u16>, error: String },
}

/// Records an attempt and, if this claim is still the delivery's latest (its `claim_id`; the
/// attempt count repeats after a redelivery), its new state. Returns whether the state was
/// updated (false: a later claim owns the delivery now).
pub async fn record(
    conn: &mut PgConnection,
    claimed: &Claimed,
    started_at: DateTime<Utc>,
    duration_ms: i32,
    attempt: &Attempt,
) -> Result<bool, sqlx::Error> {
    let (status, state, error, next) = match attempt {
        Attempt::Delivered { status } => (Some(*status), DeliveryStatus::Delivered, None, None),
        Attempt::Retry { status, error, at } => (
            *status,
            DeliveryStatus::Pending,
            Some(error.as_str()),
            Some(*at),
        ),
        Attempt::Dead { status, error } => {
            (*status, DeliveryStatus::Dead, Some(error.as_str()), None)
        }
    };
    let status = status.map(i32::from);
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query!(
        "insert into delivery_attempts (delivery_id, started_at, duration_ms, status, error)
         values ($1, $2, $3, $4, $5)",
        claimed.id,
        started_at,
        duration_ms.max(0),
        status,
        error
    )
    .execute(&mut *tx)
    .await?;
    let updated = sqlx::query!(
        r#"update webhook_deliveries
              set status = $3, last_status = $4, last_error = $5, updated_at = now(),
                  next_attempt_at = coalesce($6, next_attempt_at),
                  delivered_at = case when $3 = 'delivered' then now() end
            where id = $1 and claim_id = $2 and status = 'pending'"#,
        claimed.id,
        claimed.claim_id,
        state.as_str(),
        status,
        error,
        next
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(updated == 1)
}

/// A delivery as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryView {
    pub id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub subscription_id: Uuid,
    pub url: String,
    /// `pending`, `delivered`, `dead` or `cancelled`.
    #[schema(value_type = String)]
    pub status: DeliveryStatus,
    /// Attempts since the delivery was (re)started.
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// One attempt as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AttemptView {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i32,
    pub status: Option<i32>,
    pub error: Option<String>,
}

/// A delivery with its attempts, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryDetail {
    #[serde(flatten)]
    pub delivery: DeliveryView,
    pub attempts_log: Vec<AttemptView>,
}

struct Row {
    seq: i64,
    id: Uuid,
    event_id: Uuid,
    event_type: String,
    subscription_id: Uuid,
    url: String,
    status: String,
    attempts: i32,
    next_attempt_at: DateTime<Utc>,
    last_status: Option<i32>,
    last_error: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
}

impl Row {
    fn view(self) -> Result<DeliveryView, StoreError> {
        let status = DeliveryStatus::parse(&self.status).ok_or_else(|| {
            crate::db::corrupt(
                "webhook_deliveries",
                self.id,
                format!("status {:?}", self.status),
            )
        })?;
        Ok(DeliveryView {
            id: self.id,
            event_id: self.event_id,
            event_type: self.event_type,
            subscription_id: self.subscription_id,
            url: self.url,
            next_attempt_at: (status == DeliveryStatus::Pending).then_some(self.next_attempt_at),
            status,
            attempts: self.attempts,
            last_status: self.last_status,
            last_error: self.last_error,
            created_at: self.created_at,
            updated_at: self.updated_at,
            delivered_at: self.delivered_at,
        })
    }
}

/// Filters of a delivery list; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub status: Option<DeliveryStatus>,
    pub subscription: Option<Uuid>,
    pub event: Option<Uuid>,
    pub before_seq: Option<i64>,
    pub limit: i64,
}

/// Newest first.
pub async fn list(
    conn: &mut PgConnection,
    f: &Filter,
) -> Result<(Vec<DeliveryView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        Row,
        r#"select d.seq, d.id, d.event_id, e.type as event_type, d.subscription_id, s.url,
                  d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
                  d.created_at, d.updated_at, d.delivered_at
           from webhook_deliveries d
           join outbox_events e on e.id = d.event_id
           join webhook_subscriptions s on s.id = d.subscription_id
           where ($1::text is null or d.status = $1)
             and ($2::uuid is null or d.subscription_id = $2)
             and ($3::uuid is null or d.event_id = $3)
             and ($4::bigint is null or d.seq < $4)
           order by d.seq desc limit $5"#,
        f.status.map(DeliveryStatus::as_str),
        f.subscription,
        f.event,
        f.before_seq,
        f.limit + 1
    )
    .fetch_all(conn)
    .await?;
    let (views, next) = crate::ledger::transactions::paginate(rows, f.limit, |r| r.seq, Row::view);
    Ok((views.into_iter().collect::<Result<_, _>>()?, next))
}

/// The first `per_event` deliveries of each of `events` (oldest first), and how many each
/// event has in all: one statement over the deliveries' `(event_id, subscription_id)` index,
/// however many events are asked.
pub async fn of_events(
    conn: &mut PgConnection,
    events: &[Uuid],
    per_event: i64,
) -> Result<(HashMap<Uuid, Vec<DeliveryView>>, HashMap<Uuid, i64>), StoreError> {
    let rows = sqlx::query!(
        r#"select d.seq as "seq!", d.id as "id!", d.event_id as "event_id!",
                  d.event_type as "event_type!", d.subscription_id as "subscription_id!",
                  d.url as "url!", d.status as "status!", d.attempts as "attempts!",
                  d.next_attempt_at as "next_attempt_at!", d.last_status, d.last_error,
                  d.created_at as "created_at!", d.updated_at as "updated_at!", d.delivered_at,
                  d.total as "total!"
           from (select d.seq, d.id, d.event_id, e.type as event_type, d.subscription_id, s.url,
                        d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
                        d.created_at, d.updated_at, d.delivered_at,
                        row_number() over (partition by d.event_id order by d.seq) as nth,
                        count(*) over (partition by d.event_id) as total
                 from webhook_deliveries d
                 join outbox_events e on e.id = d.event_id
                 join webhook_subscriptions s on s.id = d.subscription_id
                 where d.event_id = any($1)) d
           where d.nth <= $2
           order by d.event_id, d.seq"#,
        events,
        per_event
    )
    .fetch_all(conn)
    .await?;
    let (mut listed, mut totals) = (HashMap::<Uuid, Vec<DeliveryView>>::new(), HashMap::new());
    for r in rows {
        totals.insert(r.event_id, r.total);
        let row = Row {
            seq: r.seq,
            id: r.id,
            event_id: r.event_id,
            event_type: r.event_type,
            subscription_id: r.subscription_id,
            url: r.url,
            status: r.status,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            last_status: r.last_status,
            last_error: r.last_error,
            created_at: r.created_at,
            updated_at: r.updated_at,
            delivered_at: r.delivered_at,
        };
        listed.entry(r.event_id).or_default().push(row.view()?);
    }
    Ok((listed, totals))
}

pub async fn find(conn: &mut PgConnection, id: Uuid) -> Result<Option<DeliveryDetail>, StoreError> {
    let Some(row) = sqlx::query_as!(
        Row,
        r#"select d.seq, d.id, d.event_id, e.type as event_type, d.subscription_id, s.url,
                  d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
                  d.created_at, d.updated_at, d.delivered_at
           from webhook_deliveries d
           join outbox_events e on e.id = d.event_id
           join webhook_subscriptions s on s.id = d.subscription_id
           where d.id = $1"#,
        id
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let attempts_log = sqlx::query_as!(
        AttemptView,
        "select started_at, duration_ms, status, error from delivery_attempts
         where delivery_id = $1 order by id",
        id
    )
    .fetch_all(conn)
    .await?;
    Ok(Some(DeliveryDetail {
        delivery: row.view()?,
        attempts_log,
    }))
}

/// How a redelivery request was answered.
#[derive(Debug)]
pub enum Redelivery {
    /// Due now, with a fresh retry budget.
    Scheduled(Box<DeliveryDetail>),
    NotFound,
    /// Its subscription was deleted (or it was cancelled with it): nowhere to send it.
    Cancelled,
}

/// Makes a delivery due now with a fresh retry budget, whatever its state (a delivered one is
/// sent again with the same `webhook-id`: the receiver recognises it).
pub async fn redeliver(conn: &mut PgConnection, id: Uuid) -> Result<Redelivery, StoreError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let status = sqlx::query_scalar!(
        r#"update webhook_deliveries
              set status = 'pending', attempts = 0, next_attempt_at = now(), delivered_at = null,
                  updated_at = now()
            where id = $1 and status <> 'cancelled'
              and exists (select 1 from webhook_subscriptions s
                          where s.id = subscription_id and s.status = 'active')
            returning status"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    if status.is_some() {
        crate::ledger::audit::record(&mut tx, "delivery.redeliver", &[id.to_string()]).await?;
    }
    crate::ledger::caller::commit_in_request(tx).await?;
    if status.is_none() {
        return Ok(match find(conn, id).await? {
            None => Redelivery::NotFound,
            Some(_) => Redelivery::Cancelled,
        });
    }
    Ok(match find(conn, id).await? {
        Some(detail) => Redelivery::Scheduled(Box::new(detail)),
        None => Redelivery::NotFound,
    })
}

/// Counts for `verify` and the metrics: deliveries that will not be retried on their own, and
/// the backlog still to send.
pub async fn counts(conn: &mut PgConnection) -> Result<(i64, i64), sqlx::Error> {
    let row = sqlx::query!(
        r#"select count(*) filter (where status = 'dead') as "dead!",
                  count(*) filter (where status = 'pending') as "pending!"
           from webhook_deliveries"#
    )
    .fetch_one(conn)
    .await?;
    Ok((row.dead, row.pending))
}

/// Dead deliveries whose webhook still exists (the others have nowhere to go), oldest first.
pub async fn redeliverable_dead(conn: &mut PgConnection) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "select d.id from webhook_deliveries d
                     join webhook_subscriptions s on s.id = d.subscription_id and s.status = 'active'
                     where d.status = 'dead' order by d.seq"
    )
    .fetch_all(conn)
    .await
}
