//! The broker side of the consumer: one Redis/Valkey stream read by a consumer group.
//!
//! Every write that settles messages (acknowledgements, dead letters, failure counts) goes in
//! one `MULTI ... EXEC`, so a dead letter is never written without its acknowledgement nor
//! acknowledged without being written.

use super::apply::{Message, Reason};
use super::event::Fields;
use crate::config::{REDIS_RESPONSE_MARGIN_MS, StreamConfig};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{
    StreamAutoClaimOptions, StreamAutoClaimReply, StreamId, StreamInfoGroupsReply,
    StreamReadOptions, StreamReadReply,
};
use redis::{AsyncCommands, RedisResult, Value};
use std::time::Duration;

/// A connection for the command-line tools, with an error that names the (password-free) URL.
pub async fn connect_redis(url: &str) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let connected = async {
        redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await
    };
    connected
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to Redis at {}: {e}", crate::db::redact(url)))
}

/// Fields a dead letter adds to the original ones; a replay strips them again.
pub const DEAD_LETTER_PREFIX: &str = "dlq_";

/// A message to dead-letter, with why.
#[derive(Debug, Clone)]
pub struct DeadLetter<'a> {
    pub message: &'a Message,
    pub reason: Reason,
    pub detail: &'a str,
    pub differing_fields: &'a [String],
    pub failures: u32,
}

/// The group's backlog, for metrics and for draining.
#[derive(Debug, Clone, Copy, Default)]
pub struct Backlog {
    /// Delivered to some consumer and not acknowledged.
    pub pending: u64,
    /// Not yet delivered to the group (`None` when Redis cannot tell after a trim).
    pub lag: Option<u64>,
}

#[derive(Clone)]
pub struct StreamClient {
    conn: ConnectionManager,
    config: StreamConfig,
    consumer: String,
}

impl StreamClient {
    /// Connects with a response timeout that outlasts a blocking read of `block`.
    pub async fn connect(
        url: &str,
        config: StreamConfig,
        consumer: String,
        block: Duration,
    ) -> RedisResult<StreamClient> {
        let client = redis::Client::open(url)?;
        let manager = ConnectionManagerConfig::new().set_response_timeout(Some(
            block + Duration::from_millis(REDIS_RESPONSE_MARGIN_MS),
        ));
        let conn = ConnectionManager::new_with_config(client, manager).await?;
        Ok(StreamClient {
            conn,
            config,
            consumer,
        })
    }

    pub fn stream(&self) -> &str {
        &self.config.stream
    }

    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Creates the group at the start of the stream (and the stream) if missing.
    pub async fn ensure_group(&mut self) -> RedisResult<()> {
        let created: RedisResult<()> = self
            .conn
            .xgroup_create_mkstream(&self.config.stream, &self.config.group, "0")
            .await;
        match created {
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            other => other,
        }
    }

    /// Takes over up to `count` messages pending longer than `min_idle` with any consumer
    /// (a dead one, or this one after a retryable failure), scanning from `cursor`. Returns
    /// the cursor to continue from (`0-0` once the scan wrapped).
    pub async fn reclaim(
        &mut self,
        min_idle: Duration,
        cursor: &str,
        count: usize,
    ) -> RedisResult<(String, Vec<Message>)> {
        let reply: StreamAutoClaimReply = self
            .conn
            .xautoclaim_options(
                &self.config.stream,
                &self.config.group,
                &self.consumer,
                min_idle.as_millis() as u64,
                cursor,
                StreamAutoClaimOptions::default().count(count),
            )
            .await?;
        if !reply.deleted_ids.is_empty() {
            tracing::warn!(ids = ?reply.deleted_ids, "pending messages were deleted from the stream before anyone acknowledged them");
        }
        let messages = reply
            .claimed
            .into_iter()
            .map(|m| message(m, true))
            .collect();
        Ok((reply.next_stream_id, messages))
    }

    /// Up to `count` messages never delivered to the group, waiting up to `block` for them.
    pub async fn read_new(&mut self, count: usize, block: Duration) -> RedisResult<Vec<Message>> {
        let options = StreamReadOptions::default()
            .group(&self.config.group, &self.consumer)
            .count(count)
            .block(block.as_millis() as usize);
        let reply: Option<StreamReadReply> = self
            .conn
            .xread_options(&[&self.config.stream], &[">"], &options)
            .await?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(|m| message(m, false))
            .collect())
    }

    /// Acknowledges `acked` and moves `dead` to the dead-letter stream (acknowledged too), in
    /// one transaction; their failure counts go with them.
    pub async fn settle(&mut self, acked: &[&str], dead: &[DeadLetter<'_>]) -> RedisResult<()> {
        if acked.is_empty() && dead.is_empty() {
            return Ok(());
        }
        let dead_letters = self.config.dead_letters();
        let failures = self.config.failures();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for letter in dead {
            let fields = dead_letter_fields(letter, &self.config.group, &self.consumer);
            pipe.xadd(&dead_letters, "*", &fields).ignore();
        }
        let ids: Vec<&str> = acked
            .iter()
            .copied()
            .chain(dead.iter().map(|d| d.message.id.as_str()))
            .collect();
        pipe.xack(&self.config.stream, &self.config.group, &ids)
            .ignore();
        pipe.hdel(&failures, &ids).ignore();
        pipe.query_async::<()>(&mut self.conn).await
    }

    /// Counts one more failure caused by the message itself; returns the count.
    pub async fn record_failure(&mut self, id: &str) -> RedisResult<u32> {
        self.conn.hincr(self.config.failures(), id, 1).await
    }

    pub async fn backlog(&mut self) -> RedisResult<Backlog> {
        let groups: StreamInfoGroupsReply = self.conn.xinfo_groups(&self.config.stream).await?;
        Ok(groups
            .groups
            .into_iter()
            .find(|g| g.name == self.config.group)
            .map(|g| Backlog {
                pending: g.pending as u64,
                lag: g.lag.map(|l| l as u64),
            })
            .unwrap_or_default())
    }

    /// Trims the stream below the oldest entry that any group still needs: its oldest pending
    /// entry, or (with nothing pending) the last one it was delivered. Never past an
    /// unacknowledged payment, never past what a group has not read.
    pub async fn trim(&mut self) -> RedisResult<Option<String>> {
        let groups: StreamInfoGroupsReply = self.conn.xinfo_groups(&self.config.stream).await?;
        let mut floor: Option<(u64, u64)> = None;
        for group in groups.groups {
            let needed = if group.pending > 0 {
                let summary: redis::streams::StreamPendingReply =
                    self.conn.xpending(&self.config.stream, &group.name).await?;
                match summary {
                    redis::streams::StreamPendingReply::Data(d) => parse_id(&d.start_id),
                    _ => parse_id(&group.last_delivered_id),
                }
            } else {
                parse_id(&group.last_delivered_id)
            };
            let Some(needed) = needed else {
                return Ok(None);
            };
            floor = Some(floor.map_or(needed, |f| f.min(needed)));
        }
        let Some((ms, seq)) = floor.filter(|f| *f > (0, 0)) else {
            return Ok(None);
        };
        let min_id = format!("{ms}-{seq}");
        let _: u64 = redis::cmd("XTRIM")
            .arg(&self.config.stream)
            .arg("MINID")
            .arg(&min_id)
            .query_async(&mut self.conn)
            .await?;
        Ok(Some(min_id))
    }
}

fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

fn message(entry: StreamId, redelivered: bool) -> Message {
    let fields: Fields = entry
        .map
        .into_iter()
        .map(|(k, v)| {
            let bytes = match v {
                Value::BulkString(b) => b,
                Value::SimpleString(s) => s.into_bytes(),
                Value::Int(i) => i.to_string().into_bytes(),
                other => format!("{other:?}").into_bytes(),
            };
            (k, bytes)
        })
        .collect();
    Message {
        id: entry.id,
        fields,
        redelivered,
    }
}

/// The original fields, untouched, then the dead letter's own (`dlq_*`).
fn dead_letter_fields(
    letter: &DeadLetter<'_>,
    group: &str,
    consumer: &str,
) -> Vec<(String, Vec<u8>)> {
    let mut fields: Vec<(String, Vec<u8>)> = letter
        .message
        .fields
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut add = |name: &str, value: String| {
        fields.push((format!("{DEAD_LETTER_PREFIX}{name}"), value.into_bytes()));
    };
    add("reason", letter.reason.as_str().to_owned());
    add("detail", letter.detail.to_owned());
    add("differing_fields", letter.differing_fields.join(","));
    add("original_id", letter.message.id.clone());
    add("group", group.to_owned());
    add("consumer", consumer.to_owned());
    add("failures", letter.failures.to_string());
    add("at", chrono::Utc::now().to_rfc3339());
    fields
}
