//! `GET /v1/consumer`: the stream consumer's backlog as the broker holds it, per partition and
//! consumer group: what `XINFO GROUPS` and `XPENDING` say, with each stream's length and its
//! dead letters' count (`consumer::inspect`).

use super::AppState;
use super::error::Result;
use super::responses::json;
use crate::consumer::inspect::{self, GroupState, StreamState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct ConsumerState {
    /// The base stream `serve` was given (`--stream`).
    pub stream: String,
    /// The group the consumers use (`--group`); `groups` lists every group of each stream.
    pub group: String,
    pub partitions: Vec<PartitionState>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PartitionState {
    #[schema(minimum = 0, maximum = 1023)]
    pub partition: u16,
    pub stream: String,
    /// Entries in the stream (0 when it does not exist yet).
    pub length: u64,
    /// Entries in `<stream>.dlq`.
    pub dead_letters: u64,
    pub groups: Vec<GroupState>,
}

#[utoipa::path(get, path = "/v1/consumer", tag = "consumer", operation_id = "get_consumer_state",
    responses((status = 200, description = "every partition's length, dead letters and consumer groups' lag and pending counts", body = ConsumerState)))]
pub async fn get(State(state): State<AppState>) -> Result<Response> {
    let streams = &state.config.streams;
    let partitions = streams
        .with_broker(async |conn| {
            let mut partitions = Vec::new();
            for (p, stream) in streams.from_partition(0) {
                let read = inspect::stream_state(conn, &stream).await?;
                partitions.push(partition_state(p, stream.stream, read));
            }
            Ok(partitions)
        })
        .await?;
    json(
        StatusCode::OK,
        &ConsumerState {
            stream: streams.base.stream.clone(),
            group: streams.base.group.clone(),
            partitions,
        },
    )
}

fn partition_state(partition: u16, stream: String, read: StreamState) -> PartitionState {
    PartitionState {
        partition,
        stream,
        length: read.length,
        dead_letters: read.dead_letters,
        groups: read.groups,
    }
}
