//! The optional outbound stream: every event also goes to a Redis/Valkey stream (for example
//! `ledger.events`) for internal consumers, keyed by the event id like the webhooks. Events are
//! claimed with `FOR UPDATE SKIP LOCKED`, published, then marked in the same transaction; a
//! crash between the two publishes them again with the same `event_id`.

use crate::broker::Connection;
use serde_json::Value;
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// About how many entries the outbound events stream keeps (`XADD MAXLEN ~`).
pub const EVENTS_STREAM_MAX_LEN: usize = 1_000_000;
use uuid::Uuid;

/// How long one attempt to reach the stream's Redis may take: the feed is optional, so a
/// broker that hangs must not hold up the dispatcher's webhooks.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the outbound feed is configured and publishing, shared with `/readyz`.
#[derive(Debug, Clone, Default)]
pub struct FeedHealth(Arc<AtomicU8>);

/// What `/readyz` says of the feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// No `--events-stream`.
    Off,
    Up,
    /// Configured, but its Redis does not answer (or refused the last publish): events wait
    /// in the outbox and go out, in order, once it answers.
    Down,
}

impl FeedHealth {
    pub fn get(&self) -> Feed {
        match self.0.load(Ordering::Relaxed) {
            1 => Feed::Up,
            2 => Feed::Down,
            _ => Feed::Off,
        }
    }

    fn set(&self, feed: Feed) {
        let value = match feed {
            Feed::Off => 0,
            Feed::Up => 1,
            Feed::Down => 2,
        };
        self.0.store(value, Ordering::Relaxed);
        metrics::gauge!("wallet_ledger_events_stream_up").set(if feed == Feed::Up {
            1.0
        } else {
            0.0
        });
    }
}

/// The feed's publisher. It connects when first needed and again after any failure (a Redis
/// restart breaks the connection for good), so neither a Redis down at start nor one that
/// restarts stops the API or the webhooks; the events wait in the outbox meanwhile.
pub struct EventStream {
    url: String,
    conn: Option<Connection>,
    name: String,
    health: FeedHealth,
}

impl EventStream {
    pub fn new(url: &str, name: &str) -> EventStream {
        let health = FeedHealth::default();
        health.set(Feed::Down);
        EventStream {
            url: url.to_owned(),
            conn: None,
            name: name.to_owned(),
            health,
        }
    }

    pub fn health(&self) -> FeedHealth {
        self.health.clone()
    }

    async fn connection(&mut self) -> Option<&mut Connection> {
        if self.conn.is_none() {
            let connect = crate::broker::connect(&self.url);
            match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
                Ok(Ok(conn)) => self.conn = Some(conn),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the events stream's Redis is unreachable; events wait in the outbox")
                }
                Err(_) => tracing::warn!(
                    "the events stream's Redis did not answer in time; events wait in the outbox"
                ),
            }
        }
        if self.conn.is_none() {
            self.health.set(Feed::Down);
        }
        self.conn.as_mut()
    }

    /// Publishes up to `limit` events not yet on the stream; returns how many.
    pub async fn publish_pending(
        &mut self,
        pool: &PgPool,
        limit: i64,
    ) -> Result<usize, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let events = sqlx::query!(
            r#"select seq, id, type as event_type, created_at, data from outbox_events
               where streamed_at is null order by seq limit $1 for update skip locked"#,
            limit
        )
        .fetch_all(&mut *tx)
        .await?;
        if events.is_empty() {
            // Nothing to publish says nothing of Redis; connecting says whether it answers.
            if self.connection().await.is_some() && self.health.get() == Feed::Down {
                self.health.set(Feed::Up);
            }
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for e in &events {
            let fields: [(&str, String); 4] = [
                ("event_id", e.id.to_string()),
                ("type", e.event_type.clone()),
                // RFC 3339 in UTC with `Z`, exactly as the webhook bodies show it.
                (
                    "timestamp",
                    e.created_at
                        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                ),
                ("data", Value::to_string(&e.data)),
            ];
            // Trimmed as it grows (approximately, which is cheap): the outbox rows are the
            // record, the stream only a feed for consumers that keep up.
            let cap = redis::streams::StreamMaxlen::Approx(EVENTS_STREAM_MAX_LEN);
            pipe.xadd_maxlen(&self.name, cap, "*", &fields).ignore();
        }
        let Some(conn) = self.connection().await else {
            return Ok(0);
        };
        if let Err(e) = pipe.query_async::<()>(conn).await {
            tracing::warn!(error = %e, "cannot publish to the events stream; will reconnect and retry");
            // A broken connection never mends itself: the next round connects again.
            self.conn = None;
            self.health.set(Feed::Down);
            return Ok(0);
        }
        self.health.set(Feed::Up);
        let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
        sqlx::query!(
            "update outbox_events set streamed_at = now() where id = any($1)",
            &ids
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(events.len())
    }
}
