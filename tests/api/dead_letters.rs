//! The admin API of the stream consumer: dead letters listed per partition with why, read,
//! replayed and dropped exactly once however often (and however concurrently) asked, through
//! the same settle script as `wallet-ledger dlq`; and the groups' lag and pending counts.

use super::common::{TestApp, assert_problem};
use super::stream_support::{
    GROUP, assert_exit_0, consume, dlq, forget, payment, redis_at, run_to_end, shared_redis_url,
    unique_stream, xadd,
};
use redis::AsyncCommands;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;
use wallet_ledger::consumer::partition::Partitions;
use wallet_ledger::consumer::stream::StreamSettings;
use wallet_ledger::http::streams::StreamsSettings;

const LIMIT: Duration = Duration::from_secs(120);

/// A TestApp whose admin endpoints read `base`'s `partitions` on the shared Redis.
async fn app_over(base: &str, partitions: u32) -> TestApp {
    let streams = StreamsSettings {
        redis_url: shared_redis_url(),
        base: StreamSettings {
            stream: base.to_owned(),
            group: GROUP.to_owned(),
        },
        partitions: Partitions::new(partitions).unwrap(),
    };
    TestApp::with_config(wallet_ledger::http::HttpSettings {
        streams,
        ..super::common::unlimited_settings()
    })
    .await
}

/// Every dead letter the list shows, page by page with `limit`.
async fn list_all(app: &TestApp, limit: usize) -> Vec<Value> {
    let mut letters = Vec::new();
    let mut path = format!("/v1/dead-letters?limit={limit}");
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page = r.body["data"].as_array().unwrap();
        assert!(page.len() <= limit, "{}", r.text);
        letters.extend(page.iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/dead-letters?limit={limit}&cursor={cursor}"),
            None => return letters,
        }
    }
}

fn path_of(letter: &Value) -> String {
    format!(
        "/v1/dead-letters/{}/{}",
        letter["partition"],
        letter["id"].as_str().unwrap()
    )
}

#[tokio::test]
async fn dead_letters_are_listed_per_partition_and_replayed_or_dropped_once() {
    let base = unique_stream("api-dlq");
    let app = app_over(&base, 4).await;
    let four = Partitions::new(4).unwrap();
    let mut redis = redis_at(&shared_redis_url()).await;
    app.create_wallet("w1").await;
    // Partitions (docs/consumer.md's table): w4 → 0, w1 → 2, alice → 3. w4 and alice do not
    // exist yet; w1's payment is resent with another amount.
    let resent = Uuid::new_v4();
    for (wallet, amount, id) in [
        ("w4", "100", Uuid::new_v4()),
        ("w1", "100", resent),
        ("w1", "250", resent),
        ("alice", "300", Uuid::new_v4()),
    ] {
        xadd(
            &mut redis,
            &four.stream_for(&base, wallet),
            &payment(id, wallet, amount),
        )
        .await;
    }
    let extra = ["--drain", "--partitions", "4", "--max-failures", "1"];
    assert_exit_0(
        &run_to_end(consume(&app, &base, "c1", &extra), LIMIT).await,
        "consume",
    );

    // Partition by partition, a page of one at a time, with why and the event as sent.
    let letters = list_all(&app, 1).await;
    let seen: Vec<(u64, &str, &str, Vec<Value>)> = letters
        .iter()
        .map(|l| {
            let differing = l["differing_fields"].as_array().unwrap().clone();
            (
                l["partition"].as_u64().unwrap(),
                l["event"]["wallet"].as_str().unwrap(),
                l["reason"].as_str().unwrap(),
                differing,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (0, "w4", "unknown_account", vec![]),
            (2, "w1", "idempotency_mismatch", vec![json!("amount")]),
            (3, "alice", "unknown_account", vec![]),
        ]
    );
    let (w4, mismatch, alice) = (&letters[0], &letters[1], &letters[2]);
    assert_eq!(w4["stream"], four.stream(&base, 0));
    assert_eq!(
        (
            w4["group"].as_str(),
            w4["consumer"].as_str(),
            w4["failures"].as_u64()
        ),
        (Some(GROUP), Some("c1-p0"), Some(1))
    );
    assert!(
        w4["dead_lettered_at"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z')),
        "{w4}"
    );
    assert_eq!(mismatch["event"]["amount"], "250");
    assert!(mismatch["event"].get("dlq_reason").is_none(), "{mismatch}");
    let only3 = app.get("/v1/dead-letters?partition=3").await;
    assert_eq!(
        only3.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        only3.text
    );
    assert_eq!(only3.body["data"][0]["id"], alice["id"]);
    let one = app.get(&path_of(w4)).await;
    assert_eq!((one.status.as_u16(), &one.body), (200, w4));

    // The backlog: everything read and acknowledged, the dead letters counted per partition.
    let state = app.get("/v1/consumer").await;
    assert_eq!(state.status, 200, "{}", state.text);
    let counts: Vec<u64> = state.body["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["dead_letters"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 0, 1, 1], "{}", state.text);
    let group = &state.body["partitions"][2]["groups"][0];
    assert_eq!(
        (
            group["name"].as_str(),
            group["pending"].as_u64(),
            group["lag"].as_u64()
        ),
        (Some(GROUP), Some(0), Some(0)),
        "{}",
        state.text
    );

    // The wallet arrives; replaying w4's dead letter twice publishes it once.
    app.create_wallet("w4").await;
    app.create_wallet("alice").await;
    let first = app
        .post(&format!("{}/replay", path_of(w4)), &json!({}))
        .await;
    assert_eq!(
        (first.status.as_u16(), first.body["outcome"].as_str()),
        (200, Some("replayed")),
        "{}",
        first.text
    );
    let again = app
        .post(&format!("{}/replay", path_of(w4)), &json!({}))
        .await;
    assert_eq!(
        (again.status.as_u16(), again.body["outcome"].as_str()),
        (200, Some("already_replayed")),
        "{}",
        again.text
    );
    assert_eq!(again.body["replayed_as"], first.body["replayed_as"]);
    let drop_replayed = app.post(&format!("{}/drop", path_of(w4)), &json!({})).await;
    assert_problem(
        &drop_replayed,
        409,
        "invalid_transition",
        "a drop after a replay",
    );
    assert_eq!(drop_replayed.body["current_status"], "replayed");
    assert_eq!(
        app.get(&path_of(w4)).await.status,
        404,
        "replayed dead letters leave the list"
    );
    let lagging = app.get("/v1/consumer").await;
    assert_eq!(
        lagging.body["partitions"][0]["groups"][0]["lag"], 1,
        "{}",
        lagging.text
    );

    // Dropping the mismatch twice, then replaying it: dropped, already dropped, 409.
    let dropped = app
        .post(&format!("{}/drop", path_of(mismatch)), &json!({}))
        .await;
    assert_eq!(dropped.body["outcome"], "dropped", "{}", dropped.text);
    assert_eq!(dropped.body["replayed_as"], Value::Null);
    let again = app
        .post(&format!("{}/drop", path_of(mismatch)), &json!({}))
        .await;
    assert_eq!(again.body["outcome"], "already_dropped", "{}", again.text);
    let replay_dropped = app
        .post(&format!("{}/replay", path_of(mismatch)), &json!({}))
        .await;
    assert_problem(
        &replay_dropped,
        409,
        "invalid_transition",
        "a replay after a drop",
    );

    // The CLI settles through the same script: the API then sees alice's as already replayed.
    let cli = run_to_end(dlq(&base, &["replay", "--all", "--partitions", "4"]), LIMIT).await;
    assert_exit_0(&cli, "dlq replay --all --partitions 4");
    let after_cli = app
        .post(&format!("{}/replay", path_of(alice)), &json!({}))
        .await;
    assert_eq!(
        after_cli.body["outcome"], "already_replayed",
        "{}",
        after_cli.text
    );
    assert!(list_all(&app, 50).await.is_empty());

    assert_exit_0(
        &run_to_end(consume(&app, &base, "c1", &extra), LIMIT).await,
        "consume again",
    );
    assert_eq!(
        app.posted_balance("w4").await,
        100,
        "replayed once, applied once"
    );
    assert_eq!(app.posted_balance("alice").await, 300);
    assert_eq!(
        app.posted_balance("w1").await,
        100,
        "the mismatch was dropped"
    );
    forget_all(&mut redis, &base, &four, &letters).await;
    app.finish().await;
}

#[tokio::test]
async fn concurrent_replays_of_one_dead_letter_publish_it_once() {
    let stream = unique_stream("api-dlq-race");
    let app = app_over(&stream, 1).await;
    let mut redis = redis_at(&shared_redis_url()).await;
    xadd(
        &mut redis,
        &stream,
        &payment(Uuid::new_v4(), "nobody", "100"),
    )
    .await;
    assert_exit_0(
        &run_to_end(
            consume(&app, &stream, "c1", &["--drain", "--max-failures", "1"]),
            LIMIT,
        )
        .await,
        "consume",
    );
    let letters = list_all(&app, 50).await;
    assert_eq!(letters.len(), 1);
    let path = format!("{}/replay", path_of(&letters[0]));
    let length_before: usize = redis.xlen(&stream).await.unwrap();
    let empty = json!({});
    let answers = futures_util::future::join_all((0..8).map(|_| app.post(&path, &empty))).await;
    let mut outcomes: Vec<&str> = answers
        .iter()
        .map(|r| r.body["outcome"].as_str().unwrap_or(&r.text))
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [vec!["already_replayed"; 7], vec!["replayed"]].concat()
    );
    let length_after: usize = redis.xlen(&stream).await.unwrap();
    assert_eq!(length_after, length_before + 1, "one publication");
    forget_all(&mut redis, &stream, &Partitions::ONE, &letters).await;
    app.finish().await;
}

#[tokio::test]
async fn bad_dead_letter_requests_answer_problems_not_errors() {
    let stream = unique_stream("api-dlq-bad");
    let app = app_over(&stream, 2).await;
    for path in [
        "/v1/dead-letters?partition=2",
        "/v1/dead-letters?partition=-1",
        "/v1/dead-letters?limit=0",
        "/v1/dead-letters?cursor=5",
        "/v1/dead-letters?stream=x",
    ] {
        let r = app.get(path).await;
        assert_problem(&r, 400, "invalid_query", path);
    }
    // A cursor of partition 1 does not page partition 0.
    let foreign = wallet_ledger::http::accounts::next_key_cursor("dead-letters", "1/5-0");
    let r = app
        .get(&format!("/v1/dead-letters?partition=0&cursor={foreign}"))
        .await;
    assert_problem(&r, 400, "invalid_query", "a cursor of another partition");
    for path in [
        "/v1/dead-letters/2/1-0",
        "/v1/dead-letters/x/1-0",
        "/v1/dead-letters/0/1",
        "/v1/dead-letters/0/1-0",
    ] {
        assert_problem(&app.get(path).await, 404, "not_found", path);
        let replay = app.post(&format!("{path}/replay"), &json!({})).await;
        assert_problem(&replay, 404, "not_found", path);
    }
    let r = app
        .post("/v1/dead-letters/0/1-0/drop", &json!({"force": true}))
        .await;
    assert_problem(&r, 422, "validation_failed", "an unknown body field");

    // A dead letter of an entry deleted while pending holds no event: it can only be dropped.
    let mut redis = redis_at(&shared_redis_url()).await;
    let partition = Partitions::new(2).unwrap().stream(&stream, 1);
    let id: String = redis
        .xadd(
            format!("{partition}.dlq"),
            "*",
            &[("dlq_reason", "malformed_event")],
        )
        .await
        .unwrap();
    let path = format!("/v1/dead-letters/1/{id}");
    let r = app.post(&format!("{path}/replay"), &json!({})).await;
    assert_problem(&r, 409, "invalid_transition", "a replay of nothing");
    assert_eq!(r.body["current_status"], "empty");
    assert_eq!(app.get(&path).await.status, 200, "still there");
    let r = app.post(&format!("{path}/drop"), &json!({})).await;
    assert_eq!(r.body["outcome"], "dropped", "{}", r.text);
    let letter = json!({"stream": partition, "id": id});
    forget_all(&mut redis, &stream, &Partitions::new(2).unwrap(), &[letter]).await;
    app.finish().await;
}

/// The test's keys: the streams, their dead letters and failure counts, and the markers of
/// the dead letters it settled.
async fn forget_all(
    redis: &mut redis::aio::MultiplexedConnection,
    base: &str,
    partitions: &Partitions,
    letters: &[Value],
) {
    for stream in partitions.streams(base) {
        forget(redis, &stream, GROUP).await;
    }
    for letter in letters {
        let marker = format!(
            "{}.dlq.settled.{}",
            letter["stream"].as_str().unwrap(),
            letter["id"].as_str().unwrap()
        );
        let _: () = redis.del(marker).await.unwrap();
    }
}
