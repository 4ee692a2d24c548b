//! The optional outbound stream: every event also goes to a Redis/Valkey stream (for example
//! `ledger.events`) for internal consumers, keyed by the event id like the webhooks. Events are
//! claimed with `FOR UPDATE SKIP LOCKED`, published, then marked in the same transaction; a
//! crash between the two publishes them again with the same `event_id`.

use crate::config::EVENTS_STREAM_MAX_LEN;
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

pub struct EventStream {
    conn: MultiplexedConnection,
    name: String,
}

impl EventStream {
    pub async fn connect(url: &str, name: &str) -> anyhow::Result<EventStream> {
        let conn = crate::consumer::stream::connect_redis(url).await?;
        Ok(EventStream {
            conn,
            name: name.to_owned(),
        })
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
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for e in &events {
            let fields: [(&str, String); 4] = [
                ("event_id", e.id.to_string()),
                ("type", e.event_type.clone()),
                ("timestamp", e.created_at.to_rfc3339()),
                ("data", Value::to_string(&e.data)),
            ];
            // Trimmed as it grows (approximately, which is cheap): the outbox rows are the
            // record, the stream only a feed for consumers that keep up.
            let cap = redis::streams::StreamMaxlen::Approx(EVENTS_STREAM_MAX_LEN);
            pipe.xadd_maxlen(&self.name, cap, "*", &fields).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut self.conn).await {
            tracing::warn!(error = %e, "cannot publish to the events stream; will retry");
            return Ok(0);
        }
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
