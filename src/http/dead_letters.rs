//! `/v1/dead-letters`: the consumer's dead letters, per partition, and replaying or dropping
//! one, through the same `consumer::dlq` functions as `wallet-ledger dlq`. A dead letter is
//! named by its partition and its entry id in that partition's `<stream>.dlq` (entry ids are
//! unique only within one stream).

use super::AppState;
use super::accounts::{LifecycleRequest, PageQuery, next_key_cursor};
use super::error::{ApiError, Result};
use super::extract::{OptionalJsonBody, PathPair, QueryParams};
use super::problem::Problem;
use super::responses::json;
use super::streams::StreamsSettings;
use crate::consumer::apply::Reason;
use crate::consumer::dlq::{self, Action, Answer, Fate};
use crate::consumer::stream::StreamSettings;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

/// The tag of the dead-letter list's cursors: `{partition}/{entry id}` after this tag.
const DEAD_LETTERS_LIST: &str = "dead-letters";

/// One dead letter: why the consumer gave up on the event, and the event as it was sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetter {
    /// The partition (0 with one stream).
    #[schema(minimum = 0, maximum = 1023)]
    pub partition: u16,
    /// The partition's stream (`payments`, or `payments:{2}` with several).
    pub stream: String,
    /// The entry id in `<stream>.dlq`.
    #[schema(pattern = "^[0-9]+-[0-9]+$", example = "1796016587604-0")]
    pub id: String,
    /// Why it was dead-lettered; `null` for a reason this version does not know (`detail` says).
    pub reason: Option<Reason>,
    pub detail: Option<String>,
    /// For `idempotency_mismatch`: the event's fields that differ from the stored payment
    /// (`amount`, `wallet`); empty otherwise.
    pub differing_fields: Vec<String>,
    /// The event's entry id in the stream when it was dead-lettered.
    pub original_id: Option<String>,
    pub group: Option<String>,
    pub consumer: Option<String>,
    /// Failures the event itself caused before it was dead-lettered.
    pub failures: Option<u32>,
    pub dead_lettered_at: Option<DateTime<Utc>>,
    /// The event's fields as the producer sent them (bytes that are not UTF-8 as U+FFFD).
    pub event: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetterPage {
    pub data: Vec<DeadLetter>,
    pub next_cursor: Option<String>,
}

/// `GET /v1/dead-letters`: a page, oldest first within a partition, partitions in order.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterQuery {
    /// Only this partition's dead letters (0 to the partition count − 1).
    #[param(minimum = 0, maximum = 1023)]
    pub partition: Option<u16>,
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged.
    pub cursor: Option<String>,
}

/// The page of dead letters after `after` (partition, entry id): up to `limit + 1`, so that
/// the caller knows whether there is more.
async fn read_page(
    streams: &StreamsSettings,
    only: Option<u16>,
    after: Option<(u16, String)>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    let first = after.as_ref().map_or(only.unwrap_or(0), |(p, _)| *p);
    let last = only.unwrap_or(u16::MAX);
    streams
        .with_broker(async |conn| {
            let mut found = Vec::new();
            for (p, stream) in streams
                .from_partition(first)
                .take_while(|(p, _)| *p <= last)
            {
                let from = after
                    .as_ref()
                    .filter(|(at, _)| *at == p)
                    .map(|(_, id)| id.as_str());
                let wanted = limit + 1 - found.len();
                for entry in dlq::page(conn, &stream.dead_letters(), from, wanted).await? {
                    found.push(view(p, &stream, &entry));
                }
                if found.len() > limit {
                    break;
                }
            }
            Ok(found)
        })
        .await
}

#[utoipa::path(get, path = "/v1/dead-letters", tag = "consumer", operation_id = "list_dead_letters", params(DeadLetterQuery),
    responses((status = 200, description = "dead letters, partition by partition, oldest first", body = DeadLetterPage)))]
pub async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<DeadLetterQuery>,
) -> Result<Response> {
    let streams = &state.config.streams;
    let page = PageQuery {
        limit: query.limit,
        cursor: query.cursor,
    };
    let limit = page.limit()?;
    if let Some(p) = query.partition
        && streams.partition(p).is_none()
    {
        let most = streams.partitions.count() - 1;
        return Err(ApiError::query(
            "/partition",
            "range",
            format!("must be between 0 and {most}"),
        ));
    }
    let after = page
        .key_cursor(DEAD_LETTERS_LIST, |key| parse_position(key).is_some())?
        .and_then(|key| parse_position(&key));
    if let (Some(only), Some((p, _))) = (query.partition, &after)
        && only != *p
    {
        return Err(ApiError::query(
            "/cursor",
            "cursor",
            "not a cursor this API returned for this list",
        ));
    }
    let limit = usize::try_from(limit).expect("1 to 500");
    let mut data = read_page(streams, query.partition, after, limit).await?;
    let next_cursor = (data.len() > limit).then(|| {
        data.truncate(limit);
        let last = data.last().expect("a full page");
        next_key_cursor(
            DEAD_LETTERS_LIST,
            &format!("{}/{}", last.partition, last.id),
        )
    });
    json(StatusCode::OK, &DeadLetterPage { data, next_cursor })
}

/// A cursor's position: `{partition}/{entry id}`.
fn parse_position(key: &str) -> Option<(u16, String)> {
    let (partition, id) = key.split_once('/')?;
    let p = partition
        .parse::<u16>()
        .ok()
        .filter(|p| p.to_string() == partition)?;
    dlq::is_entry_id(id).then(|| (p, id.to_owned()))
}

/// The dead letter a path names, or 404: a partition past the count, or an id that is not a
/// complete entry id, names nothing.
fn locate(streams: &StreamsSettings, partition: &str, id: &str) -> Result<(u16, StreamSettings)> {
    let not_found = || ApiError::NotFound(format!("dead letter {partition}/{id}"));
    let p = partition.parse::<u16>().map_err(|_| not_found())?;
    let stream = streams
        .partition(p)
        .filter(|_| dlq::is_entry_id(id))
        .ok_or_else(not_found)?;
    Ok((p, stream))
}

#[utoipa::path(get, path = "/v1/dead-letters/{partition}/{id}", tag = "consumer", operation_id = "get_dead_letter",
    params(("partition" = u16, Path, minimum = 0, maximum = 1023, example = 0), ("id" = String, Path, pattern = "^[0-9]+-[0-9]+$", example = "1796016587604-0")),
    responses((status = 200, description = "the dead letter", body = DeadLetter),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(
    State(state): State<AppState>,
    PathPair(partition, id): PathPair,
) -> Result<Response> {
    let streams = &state.config.streams;
    let (p, stream) = locate(streams, &partition, &id)?;
    let entry = streams
        .with_broker(async |conn| Ok(dlq::one(conn, &stream.dead_letters(), &id).await?))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("dead letter {partition}/{id}")))?;
    json(StatusCode::OK, &view(p, &stream, &entry))
}

/// What a replay or a drop did.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettleOutcome {
    /// Published again to its stream now, and removed from the dead letters.
    Replayed,
    /// Replayed by an earlier request: nothing was done again.
    AlreadyReplayed,
    /// Removed for good now.
    Dropped,
    /// Dropped by an earlier request: nothing was done again.
    AlreadyDropped,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SettledDeadLetter {
    pub outcome: SettleOutcome,
    #[schema(minimum = 0, maximum = 1023)]
    pub partition: u16,
    pub stream: String,
    #[schema(pattern = "^[0-9]+-[0-9]+$")]
    pub id: String,
    /// For a replay: the entry id the event was published again under; `null` for a drop.
    pub replayed_as: Option<String>,
}

/// The answer to `action` on one dead letter: 200 whether this request did it or an earlier
/// one had (`outcome` says which), 409 when the other action had.
fn settled_answer(
    answer: Answer,
    p: u16,
    stream: &StreamSettings,
    id: String,
) -> Result<SettledDeadLetter> {
    let (outcome, fate) = match answer {
        Answer::Done(fate @ Fate::Replayed { .. }) => (SettleOutcome::Replayed, fate),
        Answer::Done(Fate::Dropped) => (SettleOutcome::Dropped, Fate::Dropped),
        Answer::AlreadyDone(fate @ Fate::Replayed { .. }) => (SettleOutcome::AlreadyReplayed, fate),
        Answer::AlreadyDone(Fate::Dropped) => (SettleOutcome::AlreadyDropped, Fate::Dropped),
        Answer::Conflict(fate) => {
            let current = match fate {
                Fate::Replayed { .. } => "replayed",
                Fate::Dropped => "dropped",
            };
            return Err(ApiError::InvalidTransition {
                detail: format!("dead letter {p}/{id} was {current} already; nothing was done"),
                current: current.to_owned(),
            });
        }
    };
    let replayed_as = match fate {
        Fate::Replayed { as_id } => Some(as_id),
        Fate::Dropped => None,
    };
    Ok(SettledDeadLetter {
        outcome,
        partition: p,
        stream: stream.stream.clone(),
        id,
        replayed_as,
    })
}

async fn settle(
    state: AppState,
    partition: String,
    id: String,
    action: Action,
) -> Result<Response> {
    let streams = &state.config.streams;
    let (p, stream) = locate(streams, &partition, &id)?;
    let ids = [id.clone()];
    let settled = streams
        .with_broker(async |conn| Ok(dlq::settle(conn, &stream, action, &ids).await?))
        .await?;
    let one = settled
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no reply for {id}")))?;
    json(
        StatusCode::OK,
        &settled_answer(dlq::answer(action, one), p, &stream, id)?,
    )
}

#[utoipa::path(post, path = "/v1/dead-letters/{partition}/{id}/replay", tag = "consumer", operation_id = "replay_dead_letter",
    params(("partition" = u16, Path, minimum = 0, maximum = 1023, example = 0), ("id" = String, Path, pattern = "^[0-9]+-[0-9]+$", example = "1796016587604-1")),
    request_body(content = Option<LifecycleRequest>, description = "optional: no body, or `{}`"),
    responses((status = 200, description = "`replayed` now, or `already_replayed` by an earlier request (nothing done again)", body = SettledDeadLetter),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the dead letter was dropped (`current_status: dropped`)", body = Problem, content_type = "application/problem+json")))]
pub async fn replay(
    State(state): State<AppState>,
    PathPair(partition, id): PathPair,
    OptionalJsonBody(LifecycleRequest {}): OptionalJsonBody<LifecycleRequest>,
) -> Result<Response> {
    settle(state, partition, id, Action::Replay).await
}

#[utoipa::path(post, path = "/v1/dead-letters/{partition}/{id}/drop", tag = "consumer", operation_id = "drop_dead_letter",
    params(("partition" = u16, Path, minimum = 0, maximum = 1023, example = 0), ("id" = String, Path, pattern = "^[0-9]+-[0-9]+$", example = "1796016587604-2")),
    request_body(content = Option<LifecycleRequest>, description = "optional: no body, or `{}`"),
    responses((status = 200, description = "`dropped` now, or `already_dropped` by an earlier request", body = SettledDeadLetter),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the dead letter was replayed (`current_status: replayed`)", body = Problem, content_type = "application/problem+json")))]
pub async fn drop(
    State(state): State<AppState>,
    PathPair(partition, id): PathPair,
    OptionalJsonBody(LifecycleRequest {}): OptionalJsonBody<LifecycleRequest>,
) -> Result<Response> {
    settle(state, partition, id, Action::Drop).await
}

/// A dead-letter entry as the API shows it: the `dlq_*` fields apart, the event's as sent.
fn view(partition: u16, stream: &StreamSettings, entry: &redis::streams::StreamId) -> DeadLetter {
    let (mut own, event) = dlq::split_fields(entry);
    let mut take = |field: &str| own.remove(field);
    DeadLetter {
        partition,
        stream: stream.stream.clone(),
        id: entry.id.clone(),
        reason: take("reason").as_deref().and_then(Reason::parse),
        detail: take("detail"),
        differing_fields: take("differing_fields")
            .map(|d| {
                d.split(',')
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        original_id: take("original_id"),
        group: take("group"),
        consumer: take("consumer"),
        failures: take("failures").and_then(|f| f.parse().ok()),
        dead_lettered_at: take("at")
            .and_then(|at| DateTime::parse_from_rfc3339(&at).ok())
            .map(|at| at.with_timezone(&Utc)),
        event,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_serialize_as_the_names_dead_letters_carry() {
        for reason in Reason::ALL {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(Reason::parse("gremlins"), None);
    }

    #[test]
    fn cursor_positions_are_canonical() {
        assert_eq!(parse_position("2/17-0"), Some((2, "17-0".to_owned())));
        for bad in [
            "02/17-0",
            "2/17",
            "/17-0",
            "2",
            "x/17-0",
            "70000/1-0",
            "2/17-0/3",
        ] {
            assert_eq!(parse_position(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_repeated_action_answers_200_and_the_other_one_409() {
        let stream = StreamSettings::default();
        let replayed = Fate::Replayed {
            as_id: "9-0".into(),
        };
        let ok = |answer| settled_answer(answer, 0, &stream, "1-0".into()).unwrap();
        let first = ok(Answer::Done(replayed.clone()));
        assert!(matches!(first.outcome, SettleOutcome::Replayed));
        assert_eq!(first.replayed_as.as_deref(), Some("9-0"));
        let again = ok(Answer::AlreadyDone(replayed.clone()));
        assert!(matches!(again.outcome, SettleOutcome::AlreadyReplayed));
        assert_eq!(again.replayed_as.as_deref(), Some("9-0"));
        let dropped = ok(Answer::AlreadyDone(Fate::Dropped));
        assert!(matches!(dropped.outcome, SettleOutcome::AlreadyDropped));
        assert_eq!(dropped.replayed_as, None);
        let conflict = settled_answer(Answer::Conflict(replayed), 0, &stream, "1-0".into());
        assert!(
            matches!(conflict, Err(ApiError::InvalidTransition { ref current, .. }) if current == "replayed")
        );
    }
}
