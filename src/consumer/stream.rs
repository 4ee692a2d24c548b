//! The broker side of the consumer: one Redis/Valkey stream read by a consumer group.
//!
//! Every write that settles messages (acknowledgements, dead letters, failure counts) goes in
//! one Lua script that checks the keys' types first and acknowledges only after every dead
//! letter was written: inside `MULTI`, a failing `XADD` would not stop the `XACK` after it, so
//! a message could be acknowledged without its dead letter.
//!
//! Entries are read as bytes (field names too), never converted by the client library: a field
//! that is not UTF-8 becomes a `malformed_event` of its own, not an error of the whole read.

use super::apply::{Message, Reason};
use super::event::Fields;
use crate::broker::MasterConnection;
use redis::streams::StreamInfoGroupsReply;
use redis::{AsyncCommands, RedisResult, Value};
use std::sync::LazyLock;
use std::time::Duration;

pub const DEFAULT_STREAM: &str = "payments";
pub const DEFAULT_GROUP: &str = "wallet-ledger";
/// How long a Redis command may take beyond its own blocking time.
pub const REDIS_RESPONSE_MARGIN_MS: u64 = 5_000;

/// Which stream and consumer group; dead letters and failure counts live in keys named after
/// them.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    pub stream: String,
    pub group: String,
}

impl Default for StreamSettings {
    fn default() -> StreamSettings {
        StreamSettings {
            stream: DEFAULT_STREAM.to_owned(),
            group: DEFAULT_GROUP.to_owned(),
        }
    }
}

impl StreamSettings {
    pub fn dead_letters(&self) -> String {
        format!("{}.dlq", self.stream)
    }

    /// Per group: how often each pending message failed by its own fault.
    pub fn failures(&self) -> String {
        format!("{}.failures.{}", self.stream, self.group)
    }

    /// On a Redis Cluster, whether the keys one settle script writes (the stream, its failure
    /// counts and its dead letters) share a slot, as every script's keys must there; which
    /// keys do not, when they do not (the caller says the way out its flags offer). Checked
    /// before a consumer starts, so that no worker reads a message it could never settle.
    pub fn fits_one_slot(&self) -> Result<(), String> {
        let keys = [self.stream.clone(), self.failures(), self.dead_letters()];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        if crate::broker::same_slot(&keys) {
            return Ok(());
        }
        Err(format!(
            "on a Redis Cluster a stream's keys must share a slot, and {} do not",
            keys.join(", ")
        ))
    }
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
    conn: MasterConnection,
    config: StreamSettings,
    consumer: String,
}

impl StreamClient {
    /// Connects with a response timeout that outlasts a blocking read of `block`.
    pub async fn connect(
        url: &str,
        config: StreamSettings,
        consumer: String,
        block: Duration,
    ) -> RedisResult<StreamClient> {
        let response_timeout = block + Duration::from_millis(REDIS_RESPONSE_MARGIN_MS);
        let conn = MasterConnection::connect(url, response_timeout).await?;
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
        let reply: Value = redis::cmd("XAUTOCLAIM")
            .arg(&self.config.stream)
            .arg(&self.config.group)
            .arg(&self.consumer)
            .arg(min_idle_ms(min_idle))
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn)
            .await?;
        let mut parts = items(reply).into_iter();
        let next = parts
            .next()
            .and_then(text)
            .unwrap_or_else(|| "0-0".to_owned());
        let messages = parts
            .next()
            .map(|entries| entries_of(entries, true))
            .unwrap_or_default();
        let deleted: Vec<String> = parts
            .next()
            .map(|ids| items(ids).into_iter().filter_map(text).collect())
            .unwrap_or_default();
        if !deleted.is_empty() {
            tracing::warn!(ids = ?deleted, "pending messages were deleted from the stream before anyone acknowledged them");
        }
        Ok((next, messages))
    }

    /// Up to `count` messages never delivered to the group, waiting up to `block` for them.
    pub async fn read_new(&mut self, count: usize, block: Duration) -> RedisResult<Vec<Message>> {
        let reply: Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.config.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(u64::try_from(block.as_millis()).unwrap_or(u64::MAX))
            .arg("STREAMS")
            .arg(&self.config.stream)
            .arg(">")
            .query_async(&mut self.conn)
            .await?;
        // [[stream, [entry, ...]]] (RESP2) or {stream: [entry, ...]} (RESP3); nil when none came.
        let streams = match reply {
            Value::Map(pairs) => pairs.into_iter().map(|(_, v)| v).collect(),
            other => items(other)
                .into_iter()
                .filter_map(|s| items(s).into_iter().nth(1))
                .collect::<Vec<_>>(),
        };
        Ok(streams
            .into_iter()
            .flat_map(|entries| entries_of(entries, false))
            .collect())
    }

    /// Resets the idle time of those of `ids` this consumer still holds, so that no other
    /// consumer reclaims a batch this one is still retrying; returns the ids it still holds
    /// (one taken over meanwhile is that consumer's now).
    pub async fn keep_claimed(&mut self, ids: &[&str]) -> RedisResult<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        KEEP_CLAIMED
            .key(&self.config.stream)
            .arg(&self.config.group)
            .arg(&self.consumer)
            .arg(ids)
            .invoke_async(&mut self.conn)
            .await
    }

    /// Acknowledges `acked` and moves `dead` to the dead-letter stream (acknowledged too);
    /// their failure counts go with them. One script does it all, so Redis applies it whole
    /// or not at all: a dead letter is never acknowledged unwritten, and never written twice.
    /// A crash before the script leaves everything pending (redelivered, dead-lettered
    /// again once); a message another consumer reclaimed and settled first is no longer
    /// pending, and its dead letter is not written again.
    pub async fn settle(&mut self, acked: &[&str], dead: &[DeadLetter<'_>]) -> RedisResult<()> {
        if acked.is_empty() && dead.is_empty() {
            return Ok(());
        }
        let mut settle = SETTLE.prepare_invoke();
        settle
            .key(&self.config.stream)
            .key(self.config.failures())
            .key(self.config.dead_letters())
            .arg(&self.config.group)
            .arg(acked.len())
            .arg(acked);
        for letter in dead {
            let fields = dead_letter_fields(letter, &self.config.group, &self.consumer);
            settle.arg(&letter.message.id).arg(fields.len()).arg(fields);
        }
        settle.invoke_async::<()>(&mut self.conn).await
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

/// The elements of an array reply (nothing for nil or a scalar).
fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) | Value::Set(items) => items,
        _ => Vec::new(),
    }
}

fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::VerbatimString { text, .. } => Some(text.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

fn text(value: Value) -> Option<String> {
    bytes(value).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Stream entries `[[id, [name, value, ...]], ...]` as messages, bytes untouched. An entry
/// deleted while pending comes back with nil fields: it has nothing to apply and decodes as
/// malformed (its dead letter names the id).
fn entries_of(entries: Value, redelivered: bool) -> Vec<Message> {
    items(entries)
        .into_iter()
        .filter_map(|entry| {
            let mut parts = items(entry).into_iter();
            let id = parts.next().and_then(text)?;
            let mut flat = match parts.next() {
                Some(Value::Map(pairs)) => pairs
                    .into_iter()
                    .flat_map(|(k, v)| [k, v])
                    .collect::<Vec<_>>(),
                Some(other) => items(other),
                None => Vec::new(),
            }
            .into_iter();
            let mut pairs = Vec::new();
            while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
                pairs.push((
                    bytes(name).unwrap_or_default(),
                    bytes(value).unwrap_or_default(),
                ));
            }
            Some(Message {
                id,
                fields: Fields::new(pairs),
                redelivered,
            })
        })
        .collect()
}

/// `XAUTOCLAIM`'s min-idle-time, which Redis takes as a signed 64-bit count of milliseconds
/// (the flag's range keeps it far below that).
fn min_idle_ms(min_idle: Duration) -> i64 {
    i64::try_from(min_idle.as_millis()).unwrap_or(i64::MAX)
}

/// KEYS: stream, failure counts, dead letters. ARGV: group; the number of ids to
/// acknowledge, then those ids; then each dead letter as its message id, its number of
/// fields, and its fields as name, value pairs. The types are checked before anything is
/// written, so a key an operator overwrote fails the call whole (and stops the worker)
/// instead of settling half of it. A dead letter is written only while its message is still
/// pending in the group: the consumer that settles it first writes it, once. (XPENDING on a
/// stream or group that is gone, after a broker restart that kept nothing, counts as not
/// pending: the message is gone with it.)
static SETTLE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r#"
local function expect(key, wanted)
  local found = redis.call('TYPE', key)['ok']
  if found ~= wanted and found ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. wanted)
  end
end
local bad = expect(KEYS[1], 'stream') or expect(KEYS[2], 'hash') or expect(KEYS[3], 'stream')
if bad then return bad end
local group = ARGV[1]
local acked = tonumber(ARGV[2])
local ids = {}
for i = 3, 2 + acked do ids[#ids + 1] = ARGV[i] end
local i = 3 + acked
while i <= #ARGV do
  local id, fields = ARGV[i], tonumber(ARGV[i + 1])
  local pending = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
  if type(pending) == 'table' and pending['err'] == nil and #pending > 0 then
    redis.call('XADD', KEYS[3], '*', unpack(ARGV, i + 2, i + 1 + 2 * fields))
  end
  ids[#ids + 1] = id
  i = i + 2 + 2 * fields
end
if #ids > 0 then
  redis.call('XACK', KEYS[1], group, unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
end
return redis.status_reply('OK')
"#,
    )
});

/// KEYS: stream. ARGV: group, consumer, ids. Claims again (resetting the idle time) each id
/// still pending with this consumer; returns those ids.
static KEEP_CLAIMED: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r#"
local held = {}
for i = 3, #ARGV do
  local entry = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)[1]
  if entry and entry[2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    held[#held + 1] = ARGV[i]
  end
end
return held
"#,
    )
});

/// The original fields, untouched, then the dead letter's own (`dlq_*`).
fn dead_letter_fields(
    letter: &DeadLetter<'_>,
    group: &str,
    consumer: &str,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = letter.message.fields.pairs().to_vec();
    let mut add = |name: &str, value: String| {
        fields.push((
            format!("{DEAD_LETTER_PREFIX}{name}").into_bytes(),
            value.into_bytes(),
        ));
    };
    add("reason", letter.reason.as_str().to_owned());
    add("detail", letter.detail.to_owned());
    add("differing_fields", letter.differing_fields.join(","));
    add("original_id", letter.message.id.clone());
    add("group", group.to_owned());
    add("consumer", consumer.to_owned());
    add("failures", letter.failures.to_string());
    add(
        "at",
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    fields
}
