//! `wallet-ledger dlq list | replay | drop`: the operator's side of the dead-letter stream.
//!
//! A replay publishes the original fields again (a new stream id, the same event id) and
//! deletes the dead letter in the same `MULTI`, so a replayed message is never lost nor left
//! twice; once the cause is fixed (the wallet created, the payment arrived) it applies, and if
//! it had applied meanwhile it is a harmless duplicate.

use super::stream::{DEAD_LETTER_PREFIX, StreamSettings};
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use redis::streams::{StreamId, StreamRangeReply};
use serde_json::{Map, Value, json};

/// How many dead letters one replay or drop step handles with `--all`.
const PAGE: usize = 500;

/// Publishes the chosen dead letters (`all`, or `ids`) to the stream again (same event id)
/// and removes them; returns how many.
pub async fn replay(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &StreamSettings,
    ids: Vec<String>,
    all: bool,
) -> anyhow::Result<usize> {
    let dead_letters = stream.dead_letters();
    for_each(conn, &dead_letters, distinct(ids), all, |pipe, entry| {
        pipe.xadd(&stream.stream, "*", &original_fields(entry));
    })
    .await
}

/// Deletes the chosen dead letters for good; returns how many.
pub async fn drop(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &StreamSettings,
    ids: Vec<String>,
    all: bool,
) -> anyhow::Result<usize> {
    for_each(conn, &stream.dead_letters(), distinct(ids), all, |_, _| {}).await
}

pub async fn list(
    conn: &mut (impl ConnectionLike + Send + Sync),
    dead_letters: &str,
    count: usize,
) -> redis::RedisResult<Vec<StreamId>> {
    let reply: StreamRangeReply = conn.xrange_count(dead_letters, "-", "+", count).await?;
    Ok(reply.ids)
}

/// The ids in the order given, each once: naming one twice must not replay it twice.
fn distinct(ids: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    ids.into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Runs `step` (writes whose every reply is checked) for each chosen dead letter, then
/// deletes it, a page at a time. A dead letter is deleted only after its replay was written:
/// inside one `MULTI` a failing `XADD` would not stop the `XDEL` after it. A crash between the
/// two leaves the dead letter to be replayed again, which is harmless (the same event id).
async fn for_each(
    conn: &mut (impl ConnectionLike + Send + Sync),
    dead_letters: &str,
    ids: Vec<String>,
    all: bool,
    step: impl Fn(&mut redis::Pipeline, &StreamId),
) -> anyhow::Result<usize> {
    if ids.is_empty() && !all {
        anyhow::bail!("name the dead letters (ids from `dlq list`) or pass --all");
    }
    // With --all, only what is there now: a replayed message dead-lettered again meanwhile
    // waits for the next run instead of looping here.
    let last: StreamRangeReply = conn.xrevrange_count(dead_letters, "+", "-", 1).await?;
    let end = match last.ids.first() {
        Some(entry) => entry.id.clone(),
        None if all => return Ok(0),
        None => "+".to_owned(),
    };
    let mut start = "-".to_owned();
    let mut done = 0;
    loop {
        let entries: Vec<StreamId> = if all {
            let page: StreamRangeReply =
                conn.xrange_count(dead_letters, &start, &end, PAGE).await?;
            page.ids
        } else {
            let mut found = Vec::new();
            for id in &ids {
                let reply: StreamRangeReply = conn.xrange(dead_letters, id, id).await?;
                if reply.ids.is_empty() {
                    anyhow::bail!("no dead letter {id} in {dead_letters}");
                }
                found.extend(reply.ids);
            }
            found
        };
        if entries.is_empty() {
            return Ok(done);
        }
        let mut pipe = redis::pipe();
        for entry in &entries {
            step(&mut pipe, entry);
        }
        if pipe.cmd_iter().next().is_some() {
            // An error reply to any command fails the whole call, before anything is deleted.
            let _: Vec<redis::Value> = pipe.query_async(conn).await?;
        }
        let entry_ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let _: usize = conn.xdel(dead_letters, &entry_ids).await?;
        done += entries.len();
        if let Some(last) = entries.last() {
            start = format!("({}", last.id);
        }
        if !all {
            return Ok(done);
        }
    }
}

fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn bytes(value: &redis::Value) -> Vec<u8> {
    match value {
        redis::Value::BulkString(b) => b.clone(),
        other => text(other).into_bytes(),
    }
}

/// The fields the producer sent, without the dead letter's own.
pub fn original_fields(entry: &StreamId) -> Vec<(String, Vec<u8>)> {
    let mut fields: Vec<(String, Vec<u8>)> = entry
        .map
        .iter()
        .filter(|(k, _)| !k.starts_with(DEAD_LETTER_PREFIX))
        .map(|(k, v)| (k.clone(), bytes(v)))
        .collect();
    fields.sort();
    fields
}

/// One JSON line: the dead letter's id, why, and the original event.
pub fn describe(entry: &StreamId) -> Value {
    let mut event = Map::new();
    let mut letter = Map::new();
    for (key, value) in &entry.map {
        match key.strip_prefix(DEAD_LETTER_PREFIX) {
            Some(own) => letter.insert(own.to_owned(), json!(text(value))),
            None => event.insert(key.clone(), json!(text(value))),
        };
    }
    letter.insert("id".into(), json!(entry.id));
    letter.insert("event".into(), Value::Object(event));
    Value::Object(letter)
}
