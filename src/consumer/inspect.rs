//! What the broker says of one stream of payment events: its length, its dead letters, and
//! each consumer group's backlog (`XINFO GROUPS`, and `XPENDING`'s summary for the groups with
//! pending messages). Read-only; the admin API shows it (`GET /v1/consumer`).

use super::stream::StreamSettings;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use redis::streams::{StreamInfoGroupsReply, StreamPendingReply};

/// One stream and its dead letters as the broker holds them now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// Entries in the stream (0 when it does not exist yet).
    pub length: u64,
    /// Entries in `<stream>.dlq`.
    pub dead_letters: u64,
    /// Every consumer group of the stream, by name.
    pub groups: Vec<GroupState>,
}

/// One consumer group's backlog (shown as is by `GET /v1/consumer`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct GroupState {
    pub name: String,
    /// Consumers the group knows (those that stopped too, until removed).
    pub consumers: u64,
    /// Delivered to a consumer and not acknowledged yet.
    pub pending: u64,
    /// Not delivered to the group yet; `null` when Redis cannot tell (after a trim or a
    /// deletion past the group's position).
    pub lag: Option<u64>,
    pub last_delivered_id: String,
    /// The oldest pending entry's id (`null` with nothing pending): how far behind the
    /// slowest message is.
    pub oldest_pending_id: Option<String>,
    /// Pending messages of each consumer that holds any, by name.
    pub pending_by_consumer: Vec<ConsumerPending>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, utoipa::ToSchema)]
pub struct ConsumerPending {
    pub consumer: String,
    pub pending: u64,
}

/// Reads the state of `stream` (a partition's stream) and its dead letters.
pub async fn stream_state(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &StreamSettings,
) -> redis::RedisResult<StreamState> {
    let (kind, length, dead_letters): (String, u64, u64) = redis::pipe()
        .cmd("TYPE")
        .arg(&stream.stream)
        .xlen(&stream.stream)
        .xlen(stream.dead_letters())
        .query_async(conn)
        .await?;
    // `XINFO GROUPS` of a key that is not there is an error, not an empty list.
    let groups = if kind == "stream" {
        let reply: StreamInfoGroupsReply = conn.xinfo_groups(&stream.stream).await?;
        let mut groups = Vec::with_capacity(reply.groups.len());
        for group in reply.groups {
            groups.push(group_state(conn, &stream.stream, group).await?);
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        groups
    } else {
        Vec::new()
    };
    Ok(StreamState {
        length,
        dead_letters,
        groups,
    })
}

async fn group_state(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &str,
    group: redis::streams::StreamInfoGroup,
) -> redis::RedisResult<GroupState> {
    let mut state = GroupState {
        consumers: group.consumers as u64,
        pending: group.pending as u64,
        lag: group.lag.map(|l| l as u64),
        last_delivered_id: group.last_delivered_id,
        oldest_pending_id: None,
        pending_by_consumer: Vec::new(),
        name: group.name,
    };
    if state.pending > 0 {
        let summary: StreamPendingReply = conn.xpending(stream, &state.name).await?;
        if let StreamPendingReply::Data(data) = summary {
            state.oldest_pending_id = Some(data.start_id);
            state.pending_by_consumer = data
                .consumers
                .into_iter()
                .map(|c| ConsumerPending {
                    consumer: c.name,
                    pending: c.pending as u64,
                })
                .collect();
            state.pending_by_consumer.sort();
        }
    }
    Ok(state)
}
