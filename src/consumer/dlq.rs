//! The operator's side of the dead-letter stream, shared by `wallet-ledger dlq` and the admin
//! API (`/v1/dead-letters`): list, replay, drop.
//!
//! A replay publishes the original fields again (a new stream id, the same event id) and
//! deletes the dead letter; a drop only deletes it. Either is one Lua script per call
//! ([`SETTLE`]), so Redis applies it whole: a replayed message is never lost nor published
//! twice, whoever settles it at the same time. The script also records what became of each
//! dead letter (its *fate*) in a marker key for [`SETTLED_MEMORY_SECS`], so that a second
//! replay (or drop) of the same dead letter is a no-op that says so, and a replay of a dropped
//! one (or the reverse) is told apart from a dead letter that never existed. Once the cause is
//! fixed (the wallet created, the payment arrived) a replayed message applies, and if it had
//! applied meanwhile it is a harmless duplicate.

use super::stream::{DEAD_LETTER_PREFIX, StreamSettings};
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use redis::streams::{StreamId, StreamRangeReply};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// How many dead letters one replay or drop step handles with `--all`.
const PAGE: usize = 500;

/// How long the fate of a settled dead letter is remembered (30 days): within it a repeated
/// replay or drop answers what happened; after it the dead letter is unknown (404).
pub const SETTLED_MEMORY_SECS: u64 = 30 * 24 * 3600;

/// What an operator does with a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Replay,
    Drop,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Replay => "replay",
            Action::Drop => "drop",
        }
    }
}

/// What became of a settled dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Published again to its stream under the new entry id `as_id`.
    Replayed {
        as_id: String,
    },
    Dropped,
}

impl Fate {
    pub fn action(&self) -> Action {
        match self {
            Fate::Replayed { .. } => Action::Replay,
            Fate::Dropped => Action::Drop,
        }
    }
}

/// One named dead letter after a settle call: settled by this call, or earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Now(Fate),
    Before(Fate),
}

impl Settled {
    pub fn is_now(&self) -> bool {
        matches!(self, Settled::Now(_))
    }
}

/// What an action on one dead letter comes to, from what the script found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This call did it.
    Done(Fate),
    /// The same action was done before: nothing was done again.
    AlreadyDone(Fate),
    /// The other action was done before (a replay of a dropped dead letter, a drop of a
    /// replayed one): nothing was done.
    Conflict(Fate),
}

/// The answer to `action` on a dead letter the script `settled`.
pub fn answer(action: Action, settled: Settled) -> Answer {
    match settled {
        Settled::Now(fate) => Answer::Done(fate),
        Settled::Before(fate) if fate.action() == action => Answer::AlreadyDone(fate),
        Settled::Before(fate) => Answer::Conflict(fate),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DlqError {
    /// Named dead letters that are neither in the dead-letter stream nor remembered as
    /// settled; nothing was done to any of the named ones.
    #[error("no dead letter {} in {dead_letters}", ids.join(", "))]
    Missing {
        dead_letters: String,
        ids: Vec<String>,
    },
    /// Named dead letters that hold no event fields to publish again (the entry was deleted
    /// from the stream while pending): they can only be dropped. Nothing was done.
    #[error("dead letter {} in {dead_letters} holds no event to replay: drop it", ids.join(", "))]
    NothingToReplay {
        dead_letters: String,
        ids: Vec<String>,
    },
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply from the settle script: {0:?}")]
    Reply(String),
}

/// The marker key remembering the fate of dead letter `id` of `stream`: named after the
/// stream, so on a Redis Cluster it shares the partition's hash tag (and slot) with it.
fn marker(stream: &StreamSettings, id: &str) -> String {
    format!("{}.settled.{id}", stream.dead_letters())
}

/// Replays or drops the dead letters `ids` of `stream` (each once, however often named), in
/// one script: if any is unknown ([`DlqError::Missing`]), or for a replay holds nothing to
/// publish ([`DlqError::NothingToReplay`]), nothing is done; otherwise each one is settled now
/// or was settled before, in the order named.
pub async fn settle(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &StreamSettings,
    action: Action,
    ids: &[String],
) -> Result<Vec<Settled>, DlqError> {
    let ids = distinct(ids);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut call = SETTLE.prepare_invoke();
    call.key(&stream.stream).key(stream.dead_letters());
    for id in &ids {
        call.key(marker(stream, id));
    }
    call.arg(action.as_str())
        .arg(DEAD_LETTER_PREFIX)
        .arg(SETTLED_MEMORY_SECS)
        .arg(&ids);
    let replies: Vec<String> = call.invoke_async(conn).await?;
    let refused = |prefix: &str| -> Vec<String> {
        replies
            .iter()
            .filter_map(|r| r.strip_prefix(prefix).map(str::to_owned))
            .collect()
    };
    let (missing, empty) = (refused("missing:"), refused("empty:"));
    if !missing.is_empty() {
        return Err(DlqError::Missing {
            dead_letters: stream.dead_letters(),
            ids: missing,
        });
    }
    if !empty.is_empty() {
        return Err(DlqError::NothingToReplay {
            dead_letters: stream.dead_letters(),
            ids: empty,
        });
    }
    replies
        .iter()
        .map(|r| parse_settled(r).ok_or_else(|| DlqError::Reply(r.clone())))
        .collect()
}

/// One reply of [`SETTLE`]: `now:` or `before:`, then `dropped` or `replayed:<new id>`.
fn parse_settled(reply: &str) -> Option<Settled> {
    let (when, fate) = reply.split_once(':')?;
    let fate = match fate.split_once(':') {
        None if fate == "dropped" => Fate::Dropped,
        Some(("replayed", as_id)) if !as_id.is_empty() => Fate::Replayed {
            as_id: as_id.to_owned(),
        },
        _ => return None,
    };
    match when {
        "now" => Some(Settled::Now(fate)),
        "before" => Some(Settled::Before(fate)),
        _ => None,
    }
}

/// Settles the chosen dead letters of `stream`: `ids`, or with `all` every one there when the
/// call starts (a replayed message dead-lettered again meanwhile waits for the next run
/// instead of looping here), a page at a time.
pub async fn settle_chosen(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &StreamSettings,
    action: Action,
    ids: &[String],
    all: bool,
) -> Result<Vec<Settled>, DlqError> {
    if !all {
        return settle(conn, stream, action, ids).await;
    }
    let dead_letters = stream.dead_letters();
    let last: StreamRangeReply = conn.xrevrange_count(&dead_letters, "+", "-", 1).await?;
    let Some(end) = last.ids.first().map(|e| e.id.clone()) else {
        return Ok(Vec::new());
    };
    let mut start = "-".to_owned();
    let mut settled = Vec::new();
    loop {
        let page: StreamRangeReply = conn.xrange_count(&dead_letters, &start, &end, PAGE).await?;
        let Some(last) = page.ids.last() else {
            return Ok(settled);
        };
        let ids: Vec<String> = page.ids.iter().map(|e| e.id.clone()).collect();
        match settle(conn, stream, action, &ids).await {
            Ok(done) => {
                settled.extend(done);
                start = format!("({}", last.id);
            }
            // Deleted by hand between the read and the script: read the page again.
            Err(DlqError::Missing { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Up to `count` dead letters of `dead_letters`, oldest first, after the entry `after` (from
/// the start when `None`).
pub async fn page(
    conn: &mut (impl ConnectionLike + Send + Sync),
    dead_letters: &str,
    after: Option<&str>,
    count: usize,
) -> redis::RedisResult<Vec<StreamId>> {
    let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
    let reply: StreamRangeReply = conn.xrange_count(dead_letters, start, "+", count).await?;
    Ok(reply.ids)
}

/// The dead letter `id` of `dead_letters`, if it is there.
pub async fn one(
    conn: &mut (impl ConnectionLike + Send + Sync),
    dead_letters: &str,
    id: &str,
) -> redis::RedisResult<Option<StreamId>> {
    let reply: StreamRangeReply = conn.xrange(dead_letters, id, id).await?;
    Ok(reply.ids.into_iter().next())
}

/// Whether `value` is a complete stream entry id, `<milliseconds>-<sequence>`: Redis reads
/// `1796156703304` alone as a range covering every entry of that millisecond, which would act
/// on more than was named.
pub fn is_entry_id(value: &str) -> bool {
    value.split_once('-').is_some_and(|(ms, seq)| {
        [ms, seq].iter().all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && part.parse::<u64>().is_ok()
        })
    })
}

/// The ids in the order given, each once: naming one twice must not replay it twice.
fn distinct(ids: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().filter(|id| seen.insert(*id)).cloned().collect()
}

/// KEYS: the stream, its dead letters, then one marker per id. ARGV: the action (`replay` or
/// `drop`), the dead-letter field prefix, the markers' lifetime in seconds, then the ids.
/// Checks every id first (in the dead letters, or remembered by its marker): one unknown id, or
/// for a replay one whose dead letter holds no event fields (its entry was deleted from the
/// stream while pending), and nothing is done. Then each id not settled before is replayed (its fields without the
/// dead letter's own, in their order) or dropped, deleted, and its fate recorded, in that
/// order: a failing `XADD` stops the script before the dead letter is deleted.
static SETTLE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r#"
local action, prefix, ttl = ARGV[1], ARGV[2], ARGV[3]
local n = #ARGV - 3
local function original(id)
  local all = redis.call('XRANGE', KEYS[2], id, id)[1][2]
  local fields = {}
  for j = 1, #all, 2 do
    if string.sub(all[j], 1, #prefix) ~= prefix then
      fields[#fields + 1] = all[j]
      fields[#fields + 1] = all[j + 1]
    end
  end
  return fields
end
local refused = {}
for i = 1, n do
  local id = ARGV[3 + i]
  if redis.call('EXISTS', KEYS[2 + i]) == 0 then
    if #redis.call('XRANGE', KEYS[2], id, id) == 0 then
      refused[#refused + 1] = 'missing:' .. id
    elseif action == 'replay' and #original(id) == 0 then
      refused[#refused + 1] = 'empty:' .. id
    end
  end
end
if #refused > 0 then return refused end
local replies = {}
for i = 1, n do
  local id, marker = ARGV[3 + i], KEYS[2 + i]
  local fate = redis.call('GET', marker)
  if fate then
    replies[i] = 'before:' .. fate
  else
    fate = 'dropped'
    if action == 'replay' then
      fate = 'replayed:' .. redis.call('XADD', KEYS[1], '*', unpack(original(id)))
    end
    redis.call('XDEL', KEYS[2], id)
    redis.call('SET', marker, fate, 'EX', ttl)
    replies[i] = 'now:' .. fate
  end
end
return replies
"#,
    )
});

pub fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// A dead letter's fields apart: its own (`dlq_*`, the prefix dropped: why, when, by whom)
/// and the event's, as the producer sent them.
pub fn split_fields(entry: &StreamId) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let (mut own, mut event) = (BTreeMap::new(), BTreeMap::new());
    for (key, value) in &entry.map {
        match key.strip_prefix(DEAD_LETTER_PREFIX) {
            Some(field) => own.insert(field.to_owned(), text(value)),
            None => event.insert(key.clone(), text(value)),
        };
    }
    (own, event)
}

/// One JSON line: the dead letter's id, why, and the original event.
pub fn describe(entry: &StreamId) -> Value {
    let (own, event) = split_fields(entry);
    let mut letter: Map<String, Value> = own.into_iter().map(|(k, v)| (k, json!(v))).collect();
    letter.insert("id".into(), json!(entry.id));
    letter.insert("event".into(), json!(event));
    Value::Object(letter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(id: &str) -> Fate {
        Fate::Replayed {
            as_id: id.to_owned(),
        }
    }

    #[test]
    fn script_replies_parse_into_fates() {
        assert_eq!(
            parse_settled("now:replayed:17-3"),
            Some(Settled::Now(replayed("17-3")))
        );
        assert_eq!(
            parse_settled("before:dropped"),
            Some(Settled::Before(Fate::Dropped))
        );
        for bad in ["now", "now:", "later:dropped", "now:replayed:", "now:kept"] {
            assert_eq!(parse_settled(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_second_action_is_a_no_op_that_says_what_happened_first() {
        let now = Settled::Now(replayed("1-0"));
        assert_eq!(answer(Action::Replay, now), Answer::Done(replayed("1-0")));
        let before = Settled::Before(replayed("1-0"));
        assert_eq!(
            answer(Action::Replay, before.clone()),
            Answer::AlreadyDone(replayed("1-0"))
        );
        assert_eq!(
            answer(Action::Drop, before),
            Answer::Conflict(replayed("1-0"))
        );
        let dropped = Settled::Before(Fate::Dropped);
        assert_eq!(
            answer(Action::Drop, dropped.clone()),
            Answer::AlreadyDone(Fate::Dropped)
        );
        assert_eq!(
            answer(Action::Replay, dropped),
            Answer::Conflict(Fate::Dropped)
        );
    }

    #[test]
    fn only_complete_entry_ids_are_ids() {
        for good in ["1796016587604-0", "0-1"] {
            assert!(is_entry_id(good), "{good}");
        }
        for bad in [
            "1796016587604",
            "-",
            "+",
            "0-",
            "-1",
            "1-x",
            "1-2-3",
            "99999999999999999999-0",
        ] {
            assert!(!is_entry_id(bad), "{bad}");
        }
    }

    #[test]
    fn an_id_named_twice_counts_once() {
        let ids = ["2-0", "1-0", "2-0"].map(str::to_owned);
        assert_eq!(distinct(&ids), ["2-0", "1-0"]);
    }
}
