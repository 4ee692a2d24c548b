//! The stream consumer end to end: the real binary against the real PostgreSQL and Redis, one
//! stream per test. Messages come twice (a producer's resend, a redelivery after a crash), a
//! consumer dies at each fail point, several consumers share a group, the broker restarts:
//! every wallet still gains exactly the sum of its distinct payments, nothing stays pending,
//! and only the messages that can never apply end up in `<stream>.dlq`.

use super::common::{TestApp, lock_waiters, poll, poll_until};
use super::stream_support::{
    GROUP, PrivateRedis, assert_exit_0, bin, consume, consumer_command_with, dead_letters,
    describe, dlq, event, eventually, forget, free_port, http_get, metric, payment, pending,
    redis_at, run_to_end, shared_redis_url, spawn, stop, stopped_total, text, unique_stream, xadd,
};
use axum::http::StatusCode;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;
use uuid::Uuid;
use wallet_ledger::consumer::producer::{Published, publish_payments};

const FAILPOINT: &str = "WALLET_LEDGER_FAILPOINT";
/// The longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(20);

async fn wallets(app: &TestApp, names: &[&str]) -> Vec<String> {
    for name in names {
        app.create_wallet(name).await;
    }
    names.iter().map(|n| n.to_string()).collect()
}

/// What each wallet should gain: the sum of its distinct payments.
fn totals(published: &[Published]) -> BTreeMap<String, i64> {
    let mut totals = BTreeMap::new();
    for p in published {
        *totals.entry(p.wallet.clone()).or_default() += p.amount;
    }
    totals
}

/// Every wallet of `wallets` at `expected` (0 when absent from it).
async fn assert_balances(app: &TestApp, wallets: &[String], expected: &BTreeMap<String, i64>) {
    let expected: BTreeMap<String, i64> = wallets
        .iter()
        .map(|w| (w.clone(), expected.get(w).copied().unwrap_or(0)))
        .collect();
    assert_eq!(app.posted_balances(wallets).await, expected);
}

fn stream_order(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').expect("a stream id");
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// The published messages in stream order: (stream id, event id, wallet, amount).
fn messages(published: &[Published]) -> Vec<(String, Uuid, String, i64)> {
    let mut all: Vec<_> = published
        .iter()
        .flat_map(|p| {
            p.stream_ids
                .iter()
                .map(|id| (id.clone(), p.event_id, p.wallet.clone(), p.amount))
        })
        .collect();
    all.sort_by_key(|m| stream_order(&m.0));
    all
}

/// What the first `n` messages are worth once each payment counts once.
fn totals_of_first(published: &[Published], n: usize) -> BTreeMap<String, i64> {
    let mut seen = HashSet::new();
    let mut totals = BTreeMap::new();
    for (_, event_id, wallet, amount) in messages(published).into_iter().take(n) {
        if seen.insert(event_id) {
            *totals.entry(wallet).or_default() += amount;
        }
    }
    totals
}

/// Pending entries of the group: (stream id, owner, idle ms).
async fn pending_entries(
    redis: &mut MultiplexedConnection,
    stream: &str,
) -> Vec<(String, String, usize)> {
    let reply: redis::streams::StreamPendingCountReply = redis
        .xpending_count(stream, GROUP, "-", "+", 1000)
        .await
        .unwrap();
    reply
        .ids
        .into_iter()
        .map(|p| (p.id, p.consumer, p.last_delivered_ms))
        .collect()
}

// 1. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn the_seed_articles_producer_format_is_consumed_unchanged() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let stream = unique_stream("seed");
    let mut redis = redis_at(&shared_redis_url()).await;
    // The article's producer: n, event_id, wallet, amount in minor units; payment 2 resent.
    let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    for i in [0, 1, 2, 3, 4, 1] {
        let fields = event(&[
            ("n", &(i + 1).to_string()),
            ("event_id", &ids[i].to_string()),
            ("wallet", "w1"),
            ("amount", "5000"),
        ]);
        xadd(&mut redis, &stream, &fields).await;
    }

    let output = run_to_end(consume(&app, &stream, "c1", &["--drain"]), LIMIT).await;
    assert_exit_0(&output, "consume --drain");
    assert_eq!(
        app.posted_balance("w1").await,
        25_000,
        "five payments of 50.00"
    );
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());

    // Each event became a posted payment under its event id, marked as coming from the stream.
    let r = app.get(&format!("/v1/transactions/{}", ids[1])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["kind"], "payment");
    assert_eq!(r.body["status"], "posted");
    assert_eq!(r.body["currency"], "SAR");
    assert_eq!(r.body["metadata"]["source"], "stream");
    assert_eq!(r.body["metadata"]["event_id"], ids[1].to_string());

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 2. -----------------------------------------------------------------------------------------

/// 16 payments as 20 messages (4 resent), batches of 5; c1 dies at `site` in its second batch;
/// c2 waits out the claim idle time, takes the batch over and finishes.
async fn a_consumer_killed_at(site: &str) {
    let app = TestApp::new().await;
    let wallets = wallets(&app, &["w1", "w2"]).await;
    let stream = unique_stream("crash");
    let mut redis = redis_at(&shared_redis_url()).await;
    let published = publish_payments(&mut redis, &stream, 16, &wallets, 1_234, 25)
        .await
        .unwrap();
    let all = messages(&published);
    assert_eq!(all.len(), 20);

    let mut c1 = consume(&app, &stream, "c1", &["--drain", "--batch-size", "5"]);
    c1.env(FAILPOINT, format!("{site}@2"));
    let output = run_to_end(c1, LIMIT).await;
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGKILL),
        "c1 should die by SIGKILL at {site}: {}",
        describe(&output)
    );
    assert!(
        text(&output.stderr).contains(&format!("fail point {site} reached (hit 2)")),
        "{}",
        describe(&output)
    );
    // What c1 left: batch 1 done and acknowledged; batch 2 pending, and committed only when
    // c1 died after its COMMIT.
    let committed = if site == "consumer.after_commit" {
        10
    } else {
        5
    };
    assert_balances(&app, &wallets, &totals_of_first(&published, committed)).await;
    let left = pending_entries(&mut redis, &stream).await;
    let batch_2: Vec<String> = all[5..10].iter().map(|m| m.0.clone()).collect();
    assert_eq!(
        left.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
        batch_2
    );
    assert!(left.iter().all(|p| p.1 == "c1"));

    let c2 = consume(
        &app,
        &stream,
        "c2",
        &["--drain", "--batch-size", "5", "--print-events"],
    );
    let output = run_to_end(c2, LIMIT).await;
    assert_exit_0(&output, "c2");
    assert_balances(&app, &wallets, &totals(&published)).await;
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());

    // c2 took over exactly c1's batch: what c1 had committed meets itself as duplicates.
    let stdout = text(&output.stdout);
    let redelivered: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("(redelivered)"))
        .collect();
    assert_eq!(redelivered.len(), 5, "{stdout}");
    let batch_1: HashSet<Uuid> = all[..5].iter().map(|m| m.1).collect();
    let new_in_batch_2: HashSet<Uuid> = all[5..10]
        .iter()
        .map(|m| m.1)
        .filter(|id| !batch_1.contains(id))
        .collect();
    let expected_applied = if committed == 10 {
        0
    } else {
        new_in_batch_2.len()
    };
    let applied = redelivered
        .iter()
        .filter(|l| l.contains("-> applied"))
        .count();
    let duplicates = redelivered
        .iter()
        .filter(|l| l.contains("-> duplicate, skipped"))
        .count();
    assert_eq!(
        (applied, duplicates),
        (expected_applied, 5 - expected_applied),
        "{stdout}"
    );

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

#[tokio::test]
async fn a_consumer_killed_before_its_commit_loses_nothing() {
    a_consumer_killed_at("consumer.before_commit").await;
}

#[tokio::test]
async fn a_consumer_killed_after_its_commit_before_its_ack_counts_nothing_twice() {
    a_consumer_killed_at("consumer.after_commit").await;
}

#[tokio::test]
async fn a_consumer_killed_in_the_middle_of_a_batch_leaves_none_of_it() {
    a_consumer_killed_at("consumer.mid_batch").await;
}

// 3. -----------------------------------------------------------------------------------------

/// `n` consumer processes of one group at once, each with `workers` workers, over 2,000
/// payments (200 of them resent).
async fn consumers_sharing_a_group(n: usize, workers: usize) {
    let app = TestApp::new().await;
    let wallets = wallets(&app, &["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"]).await;
    let stream = unique_stream("group");
    let mut redis = redis_at(&shared_redis_url()).await;
    let published = publish_payments(&mut redis, &stream, 2_000, &wallets, 100, 10)
        .await
        .unwrap();
    let resent = published.iter().filter(|p| p.stream_ids.len() == 2).count();
    assert_eq!(resent, 200);

    let handles: Vec<_> = (0..n)
        .map(|k| {
            // A claim idle time far beyond any batch: no redelivery, so the totals are exact.
            let mut command = consume(
                &app,
                &stream,
                &format!("c{k}"),
                &[
                    "--drain",
                    "--batch-size",
                    "50",
                    "--claim-idle-ms",
                    "30000",
                    "--max-batch-ms",
                    "15000",
                    "--workers",
                    &workers.to_string(),
                ],
            );
            command.env("RUST_LOG", "info,sqlx=warn");
            tokio::spawn(run_to_end(command, LIMIT))
        })
        .collect();
    let (mut applied, mut duplicates, mut dead) = (0, 0, 0);
    for handle in handles {
        let output = handle.await.unwrap();
        assert_exit_0(&output, "a consumer of the group");
        let stderr = text(&output.stderr);
        applied += stopped_total(&stderr, "applied");
        duplicates += stopped_total(&stderr, "duplicates");
        dead += stopped_total(&stderr, "dead_lettered");
    }
    assert_eq!(
        (applied, duplicates, dead),
        (2_000, 200, 0),
        "every payment applied once"
    );
    assert_balances(&app, &wallets, &totals(&published)).await;
    assert_eq!(totals(&published)["w0"], 250 * 100);
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    // Every worker read from the group under a name of its own.
    let mut expected: Vec<String> = (0..n)
        .flat_map(|k| {
            (0..workers).map(move |w| match workers {
                1 => format!("c{k}"),
                _ => format!("c{k}-{w}"),
            })
        })
        .collect();
    expected.sort();
    let mut names = group_consumers(&mut redis, &stream).await;
    names.sort();
    assert_eq!(names, expected);

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

/// The names of the consumers the group knows.
async fn group_consumers(redis: &mut MultiplexedConnection, stream: &str) -> Vec<String> {
    let infos: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(stream)
        .arg(GROUP)
        .query_async(redis)
        .await
        .unwrap();
    infos
        .into_iter()
        .map(|info| match info.get("name") {
            Some(redis::Value::BulkString(name)) => String::from_utf8_lossy(name).into_owned(),
            other => panic!("a consumer without a name: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn two_consumers_in_one_group_apply_every_payment_once() {
    consumers_sharing_a_group(2, 1).await;
}

#[tokio::test]
async fn three_consumers_in_one_group_apply_every_payment_once() {
    consumers_sharing_a_group(3, 1).await;
}

#[tokio::test]
async fn one_consumer_with_three_workers_applies_every_payment_once() {
    consumers_sharing_a_group(1, 3).await;
}

// 4. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn messages_that_can_never_apply_are_dead_lettered_and_the_rest_of_their_batch_applies() {
    let app = TestApp::new().await;
    wallets(&app, &["w1", "w2"]).await;
    let stream = unique_stream("dlq");
    let mut redis = redis_at(&shared_redis_url()).await;
    let (a, m, x, c, y, y_failed, d) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let (z, e, f) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    // Three batches of four, each with good messages around the bad ones.
    let batch = [
        payment(a, "w1", "1000"),
        event(&[
            ("n", "2"),
            ("event_id", &m.to_string()),
            ("wallet", "w1"),
            ("amount", "50.00"),
        ]),
        payment(x, "w1", "2000"),
        payment(c, "w2", "300"),
        // The resend of x with another amount.
        payment(x, "w1", "2500"),
        event(&[
            ("type", "payment.succeeded"),
            ("event_id", &y.to_string()),
            ("wallet", "w2"),
            ("amount", "400"),
        ]),
        // y failed after it succeeded.
        event(&[
            ("type", "payment.failed"),
            ("event_id", &y_failed.to_string()),
            ("payment_id", &y.to_string()),
            ("wallet", "w2"),
            ("amount", "400"),
        ]),
        payment(d, "w1", "50"),
        // z and its resend to another wallet, in one batch.
        payment(z, "w2", "10"),
        payment(e, "w2", "20"),
        payment(z, "w1", "10"),
        payment(f, "w1", "40"),
    ];
    let mut ids = Vec::new();
    for fields in &batch {
        ids.push(xadd(&mut redis, &stream, fields).await);
    }

    let output = run_to_end(
        consume(&app, &stream, "c1", &["--drain", "--batch-size", "4"]),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "consume --drain");
    assert_eq!(app.posted_balance("w1").await, 1000 + 2000 + 50 + 40);
    assert_eq!(app.posted_balance("w2").await, 300 + 400 + 10 + 20);
    assert_eq!(
        pending(&mut redis, &stream).await,
        0,
        "dead letters are acknowledged"
    );
    let x_stored = app.get(&format!("/v1/transactions/{x}")).await;
    assert_eq!(
        x_stored.body["entries"][0]["amount"]
            .as_i64()
            .unwrap()
            .abs(),
        2000
    );
    let y_stored = app.get(&format!("/v1/transactions/{y}")).await;
    assert_eq!(
        y_stored.body["status"], "posted",
        "a late failure changes nothing"
    );

    let letters = dead_letters(&mut redis, &stream).await;
    assert_eq!(letters.len(), 4, "{letters:#?}");
    let expected = [
        (1, "malformed_event", ""),
        (4, "idempotency_mismatch", "amount"),
        (6, "conflicting_state", ""),
        (10, "idempotency_mismatch", "wallet"),
    ];
    for (letter, (index, reason, differing)) in letters.iter().zip(expected) {
        // The original fields, untouched.
        for (name, value) in &batch[index] {
            assert_eq!(letter.get(name), Some(value), "{name} of {letter:#?}");
        }
        assert_eq!(letter["dlq_reason"], reason, "{letter:#?}");
        assert_eq!(letter["dlq_differing_fields"], differing, "{letter:#?}");
        assert_eq!(letter["dlq_original_id"], ids[index]);
        assert_eq!(letter["dlq_consumer"], "c1");
        assert_eq!(letter["dlq_group"], GROUP);
        assert_eq!(letter["dlq_failures"], "1");
        assert!(!letter["dlq_detail"].is_empty(), "{letter:#?}");
    }
    assert!(
        letters[0]["dlq_detail"].contains("amount"),
        "{:?}",
        letters[0]
    );
    assert!(
        letters[1]["dlq_detail"].contains("20.00") && letters[1]["dlq_detail"].contains("25.00"),
        "both amounts named: {:?}",
        letters[1]["dlq_detail"]
    );

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 5. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn an_unknown_wallet_is_retried_then_dead_lettered_and_the_dlq_tools_replay_and_drop() {
    let app = TestApp::new().await;
    let stream = unique_stream("retry");
    let mut redis = redis_at(&shared_redis_url()).await;
    let (e1, e2) = (Uuid::new_v4(), Uuid::new_v4());
    let first = xadd(&mut redis, &stream, &payment(e1, "late", "5000")).await;
    let second = xadd(&mut redis, &stream, &payment(e2, "late", "700")).await;
    let budget = [
        "--drain",
        "--max-failures",
        "3",
        "--claim-idle-ms",
        "300",
        "--max-batch-ms",
        "200",
    ];

    // The wallet does not exist yet: three tries, spaced by the claim idle time, then the DLQ.
    let started = Instant::now();
    let output = run_to_end(consume(&app, &stream, "c1", &budget), LIMIT).await;
    let took = started.elapsed();
    assert_exit_0(&output, "consume --drain");
    assert!(
        took >= Duration::from_millis(600),
        "two retries after 300 ms each, took {took:?}"
    );
    let letters = dead_letters(&mut redis, &stream).await;
    assert_eq!(letters.len(), 2, "{letters:#?}");
    for (letter, original) in letters.iter().zip([&first, &second]) {
        assert_eq!(letter["dlq_reason"], "unknown_account", "{letter:#?}");
        assert_eq!(letter["dlq_failures"], "3", "{letter:#?}");
        assert_eq!(&letter["dlq_original_id"], original);
        assert!(letter["dlq_detail"].contains("late"), "{letter:#?}");
    }
    assert_eq!(pending(&mut redis, &stream).await, 0);
    let failures: usize = redis
        .hlen(format!("{stream}.failures.{GROUP}"))
        .await
        .unwrap();
    assert_eq!(failures, 0, "a dead letter's failure count goes with it");

    // `dlq list`: one JSON line each, with the dead letter's id, why, and the event.
    let output = run_to_end(dlq(&stream, &["list"]), LIMIT).await;
    assert_exit_0(&output, "dlq list");
    let listed: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    assert_eq!(listed.len(), 2, "{listed:#?}");
    for (entry, event_id) in listed.iter().zip([e1, e2]) {
        assert!(
            entry["id"].as_str().is_some_and(|id| id.contains('-')),
            "{entry}"
        );
        assert_eq!(entry["reason"], "unknown_account");
        assert_eq!(entry["failures"], "3");
        assert_eq!(entry["event"]["event_id"], event_id.to_string());
        assert_eq!(entry["event"]["wallet"], "late");
        assert!(entry["event"].get("dlq_reason").is_none(), "{entry}");
    }

    // The wallet arrives; the producer resends e2 meanwhile, and it applies.
    app.create_wallet("late").await;
    xadd(&mut redis, &stream, &payment(e2, "late", "700")).await;
    let output = run_to_end(consume(&app, &stream, "c1", &budget), LIMIT).await;
    assert_exit_0(&output, "consume --drain");
    assert_eq!(app.posted_balance("late").await, 700);

    // Replaying both: e1 applies now, e2 (applied meanwhile) is a harmless duplicate.
    let output = run_to_end(dlq(&stream, &["replay", "--all"]), LIMIT).await;
    assert_exit_0(&output, "dlq replay --all");
    assert!(
        text(&output.stdout).contains("replayed 2 dead letters"),
        "{}",
        describe(&output)
    );
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    let mut print = budget.to_vec();
    print.push("--print-events");
    let output = run_to_end(consume(&app, &stream, "c1", &print), LIMIT).await;
    assert_exit_0(&output, "consume --drain");
    let stdout = text(&output.stdout);
    assert_eq!(stdout.matches("-> applied").count(), 1, "{stdout}");
    assert_eq!(
        stdout.matches("-> duplicate, skipped").count(),
        1,
        "{stdout}"
    );
    assert_eq!(app.posted_balance("late").await, 5_700);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    assert_eq!(pending(&mut redis, &stream).await, 0);

    // `dlq drop <id>` removes that one dead letter and no other.
    xadd(
        &mut redis,
        &stream,
        &payment(Uuid::new_v4(), "late", "50.00"),
    )
    .await;
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "late", "abc")).await;
    let output = run_to_end(consume(&app, &stream, "c1", &budget), LIMIT).await;
    assert_exit_0(&output, "consume --drain");
    let output = run_to_end(dlq(&stream, &["list"]), LIMIT).await;
    let listed: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 2, "{listed:#?}");
    assert!(listed.iter().all(|l| l["reason"] == "malformed_event"));
    let (dropped, kept) = (
        listed[0]["id"].as_str().unwrap(),
        listed[1]["id"].as_str().unwrap(),
    );
    let output = run_to_end(dlq(&stream, &["drop", dropped]), LIMIT).await;
    assert_exit_0(&output, "dlq drop");
    assert!(
        text(&output.stdout).contains("dropped 1 dead letters"),
        "{}",
        describe(&output)
    );
    let output = run_to_end(dlq(&stream, &["list"]), LIMIT).await;
    let left: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], kept);
    assert_eq!(app.posted_balance("late").await, 5_700);

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

/// An operator types the flags after the action, as `wallet-ledger dlq replay --all --stream S`.
#[tokio::test]
async fn the_dlq_tools_take_their_flags_after_the_action_too() {
    let stream = unique_stream("dlqflags");
    let mut redis = redis_at(&shared_redis_url()).await;
    let letter = event(&[
        ("event_id", &Uuid::new_v4().to_string()),
        ("wallet", "w1"),
        ("amount", "1"),
        ("dlq_reason", "unknown_account"),
    ]);
    xadd(&mut redis, &format!("{stream}.dlq"), &letter).await;

    let mut command = Command::new(bin());
    command
        .args(["dlq", "replay", "--all", "--stream", &stream])
        .args(["--redis-url", &shared_redis_url()])
        .stdin(Stdio::null());
    let output = run_to_end(command, LIMIT).await;
    let left = dead_letters(&mut redis, &stream).await;
    forget(&mut redis, &stream, GROUP).await;
    // The connection flags are accepted after the action as well as before it.
    assert_exit_0(&output, "dlq replay --all --stream S --redis-url URL");
    assert!(text(&output.stdout).contains("replayed 1 dead letters"));
    assert!(left.is_empty());
}

/// With `--print-events`, the line of the attempt that spends a message's retry budget says
/// what became of it.
#[tokio::test]
async fn the_printed_line_of_a_message_whose_retry_budget_is_spent_says_dead_lettered() {
    let app = TestApp::new().await;
    let stream = unique_stream("budgetprint");
    let mut redis = redis_at(&shared_redis_url()).await;
    xadd(
        &mut redis,
        &stream,
        &payment(Uuid::new_v4(), "nowhere", "100"),
    )
    .await;
    let output = run_to_end(
        consume(
            &app,
            &stream,
            "c1",
            &["--drain", "--print-events", "--max-failures", "1"],
        ),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "consume --drain");
    let letters = dead_letters(&mut redis, &stream).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0]["dlq_reason"], "unknown_account");
    assert_eq!(letters[0]["dlq_failures"], "1");
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
    let stdout = text(&output.stdout);
    // The last attempt's line says what became of the message: dead-lettered, not retried.
    assert!(
        stdout.contains("-> dead-lettered (unknown_account"),
        "{stdout}"
    );
    assert!(!stdout.contains("left pending to retry"), "{stdout}");
}

// 6. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn a_batch_left_by_a_dead_consumer_is_reclaimed_only_after_the_claim_idle_time() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let stream = unique_stream("reclaim");
    let mut redis = redis_at(&shared_redis_url()).await;
    for _ in 0..5 {
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w1", "5000")).await;
    }

    let mut c1 = consume(&app, &stream, "c1", &["--drain"]);
    c1.env(FAILPOINT, "consumer.after_commit@1");
    let output = run_to_end(c1, LIMIT).await;
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGKILL),
        "{}",
        describe(&output)
    );
    assert_eq!(
        app.posted_balance("w1").await,
        25_000,
        "c1 committed before it died"
    );
    assert_eq!(pending(&mut redis, &stream).await, 5);

    // c2 starts at once; c1's batch must stay c1's until it has been idle for 2 s.
    let c2 = consume(
        &app,
        &stream,
        "c2",
        &[
            "--drain",
            "--print-events",
            "--claim-idle-ms",
            "2000",
            "--max-batch-ms",
            "800",
        ],
    );
    let c2 = tokio::spawn(run_to_end(c2, LIMIT));
    let mut longest_idle_with_c1 = 0;
    while !c2.is_finished() {
        for (_, owner, idle) in pending_entries(&mut redis, &stream).await {
            if owner == "c1" {
                longest_idle_with_c1 = longest_idle_with_c1.max(idle);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let output = c2.await.unwrap();
    assert_exit_0(&output, "c2");
    assert!(
        longest_idle_with_c1 >= 1_500,
        "c2 took the batch after only {longest_idle_with_c1} ms of idleness"
    );
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout
            .matches("(redelivered) -> duplicate, skipped")
            .count(),
        5,
        "{stdout}"
    );
    assert_eq!(app.posted_balance("w1").await, 25_000);
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 7. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn sigterm_stops_a_consumer_cleanly_with_its_batch_in_hand_acknowledged() {
    let app = TestApp::new().await;
    let wallets = wallets(&app, &["w1", "w2", "w3"]).await;
    let stream = unique_stream("sigterm");
    let mut redis = redis_at(&shared_redis_url()).await;
    let published = publish_payments(&mut redis, &stream, 300, &wallets, 100, 10)
        .await
        .unwrap();

    let mut command = consume(&app, &stream, "c1", &["--batch-size", "10"]);
    command.env("RUST_LOG", "info,sqlx=warn");
    let c1 = spawn(command);
    let started = eventually(LIMIT, || async { app.posted_balance("w1").await > 0 }).await;
    assert!(started, "the consumer applied nothing");
    let (output, took) = stop(c1, Duration::from_secs(5)).await;
    assert_exit_0(&output, "consume after SIGTERM");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        text(&output.stderr).contains("consumer stopped"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        pending(&mut redis, &stream).await,
        0,
        "the batch in hand was finished and acknowledged"
    );

    // Whatever it had not read yet, another consumer finishes: still exact.
    let output = run_to_end(consume(&app, &stream, "c2", &["--drain"]), LIMIT).await;
    assert_exit_0(&output, "c2");
    assert_balances(&app, &wallets, &totals(&published)).await;
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 8. -----------------------------------------------------------------------------------------

#[tokio::test]
async fn the_metrics_endpoint_counts_what_the_consumer_did() {
    let app = TestApp::new().await;
    let wallets = wallets(&app, &["w1"]).await;
    let stream = unique_stream("metrics");
    let mut redis = redis_at(&shared_redis_url()).await;
    let addr = format!("127.0.0.1:{}", free_port());
    let c1 = spawn(consume(&app, &stream, "c1", &["--metrics-addr", &addr]));
    let ready = eventually(LIMIT, || async {
        http_get(&addr, "/readyz")
            .await
            .is_some_and(|(s, _)| s == 200)
    })
    .await;
    assert!(ready, "/readyz never answered 200");

    // 20 payments as 25 messages, and one poison.
    let published = publish_payments(&mut redis, &stream, 20, &wallets, 100, 25)
        .await
        .unwrap();
    let resent = published.iter().filter(|p| p.stream_ids.len() == 2).count();
    assert_eq!(resent, 5);
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w1", "50.00")).await;

    let series = [
        (
            r#"wallet_ledger_consumer_events_total{outcome="applied"}"#,
            20.0,
        ),
        (
            r#"wallet_ledger_consumer_events_total{outcome="duplicate"}"#,
            5.0,
        ),
        (
            r#"wallet_ledger_consumer_events_total{outcome="dead_lettered"}"#,
            1.0,
        ),
        (
            r#"wallet_ledger_consumer_dead_letters_total{reason="malformed_event"}"#,
            1.0,
        ),
    ];
    // The counters exist from the start (at 0): wait for their final values.
    let scraped = poll(LIMIT, || async {
        let Some((200, scraped)) = http_get(&addr, "/metrics").await else {
            return None;
        };
        let counted = series
            .iter()
            .all(|(name, expected)| metric(&scraped, name) == Some(*expected));
        counted.then_some(scraped)
    })
    .await;
    let scraped = match scraped {
        Some(scraped) => scraped,
        None => {
            let last = http_get(&addr, "/metrics").await;
            panic!("the counters never all appeared:\n{last:?}")
        }
    };
    assert_eq!(app.posted_balance("w1").await, 2_000);
    assert_eq!(pending(&mut redis, &stream).await, 0);
    // Exact, not at least: each message counted once.
    for (name, expected) in series {
        assert_eq!(
            metric(&scraped, name),
            Some(expected),
            "{name} in:\n{scraped}"
        );
    }
    let last_batch = metric(
        &scraped,
        "wallet_ledger_consumer_last_batch_timestamp_seconds",
    )
    .unwrap_or_else(|| panic!("no last batch timestamp in:\n{scraped}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - 60.0..=now + 1.0).contains(&last_batch),
        "{last_batch} vs now {now}"
    );
    assert_eq!(http_get(&addr, "/readyz").await.map(|(s, _)| s), Some(200));

    let (output, _) = stop(c1, Duration::from_secs(5)).await;
    assert_exit_0(&output, "consume after SIGTERM");
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 9. -----------------------------------------------------------------------------------------

/// A consumer group of the test's own, which only moves when the test moves it.
const HOLDER: &str = "trim-holder";

#[tokio::test]
async fn the_stream_is_trimmed_but_never_past_an_unacknowledged_payment() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let stream = unique_stream("trim");
    let mut redis = redis_at(&shared_redis_url()).await;
    for _ in 0..10 {
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w1", "100")).await;
    }
    // A second group that has read nothing holds every trim back until the test moves it:
    // then a trim has something to remove, so the test sees it happen (XLEN falls) instead of
    // hoping one ran in some window.
    let _: () = redis.xgroup_create(&stream, HOLDER, "0").await.unwrap();
    // c1 dies after committing its second batch: entries 6-10 stay pending with it.
    let mut c1 = consume(&app, &stream, "c1", &["--drain", "--batch-size", "5"]);
    c1.env(FAILPOINT, "consumer.after_commit@2");
    let output = run_to_end(c1, LIMIT).await;
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGKILL),
        "{}",
        describe(&output)
    );
    let stuck: Vec<String> = pending_entries(&mut redis, &stream)
        .await
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(stuck.len(), 5);

    // c2 trims every 100 ms but does not reclaim (a long claim idle time).
    let c2 = spawn(consume(
        &app,
        &stream,
        "c2",
        &["--trim-interval-ms", "100", "--claim-idle-ms", "60000"],
    ));
    for _ in 0..10 {
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w1", "100")).await;
    }
    poll_until(LIMIT, "c2 applying the 10 new payments", || async {
        (app.posted_balance("w1").await == 2_000).then_some(())
    })
    .await;
    let length: usize = redis.xlen(&stream).await.unwrap();
    assert_eq!(length, 20, "the holding group kept every entry");
    // The holder reads everything: now only the stuck entries bound the trim. Once a trim
    // has run (XLEN falls), the stream has lost what was acknowledged before the stuck
    // entries and kept them and everything after.
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg(&stream)
        .arg(HOLDER)
        .arg("$")
        .query_async(&mut redis)
        .await
        .unwrap();
    let length = poll_until(LIMIT, "a trim after the holder moved", || async {
        let mut conn = redis_at(&shared_redis_url()).await;
        let length: usize = conn.xlen(&stream).await.unwrap();
        (length < 20).then_some(length)
    })
    .await;
    assert_eq!(
        length, 15,
        "expected the 5 stuck entries and the 10 after them"
    );
    for id in &stuck {
        let found: redis::streams::StreamRangeReply = redis.xrange(&stream, id, id).await.unwrap();
        assert_eq!(found.ids.len(), 1, "pending entry {id} was trimmed");
    }
    let (output, _) = stop(c2, Duration::from_secs(5)).await;
    assert_exit_0(&output, "c2");

    // c3 reclaims the stuck entries (duplicates), and once all is acknowledged the stream
    // shrinks to its last entry.
    let c3 = spawn(consume(&app, &stream, "c3", &["--trim-interval-ms", "100"]));
    let shrunk = eventually(LIMIT, || async {
        let mut conn = redis_at(&shared_redis_url()).await;
        let length: usize = conn.xlen(&stream).await.unwrap();
        length <= 1 && pending(&mut conn, &stream).await == 0
    })
    .await;
    let length: usize = redis.xlen(&stream).await.unwrap();
    assert!(shrunk, "XLEN {length} after everything was acknowledged");
    let (output, _) = stop(c3, Duration::from_secs(5)).await;
    assert_exit_0(&output, "c3");
    assert_eq!(app.posted_balance("w1").await, 2_000);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());

    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 10. ----------------------------------------------------------------------------------------

#[tokio::test]
async fn a_broker_restart_mid_run_loses_and_doubles_nothing() {
    let app = TestApp::new().await;
    let wallets = wallets(&app, &["w1", "w2", "w3"]).await;
    let mut broker = PrivateRedis::start().await;
    let url = broker.url();
    let stream = unique_stream("restart");
    let mut redis = redis_at(&url).await;
    let mut published = publish_payments(&mut redis, &stream, 600, &wallets, 100, 10)
        .await
        .unwrap();

    let addr = format!("127.0.0.1:{}", free_port());
    let c1 = spawn(consumer_command_with(
        &app.database_url,
        &url,
        &stream,
        "c1",
        &["--batch-size", "10", "--metrics-addr", &addr],
    ));
    let started = eventually(LIMIT, || async { app.posted_balance("w1").await > 0 }).await;
    assert!(started, "the consumer applied nothing");
    broker.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker.restart().await;

    let mut redis = redis_at(&url).await;
    published.extend(
        publish_payments(&mut redis, &stream, 100, &wallets, 100, 10)
            .await
            .unwrap(),
    );
    let expected = totals(&published);
    let caught_up = eventually(LIMIT, || async {
        app.posted_balances(&wallets).await == expected
            && pending(&mut redis_at(&url).await, &stream).await == 0
    })
    .await;
    if !caught_up {
        let (output, _) = stop(c1, Duration::from_secs(5)).await;
        panic!(
            "balances {:?}, expected {expected:?}; {}",
            app.posted_balances(&wallets).await,
            describe(&output)
        );
    }

    // A second outage while the consumer waits for news: /readyz says so, then recovers.
    let status = || async { http_get(&addr, "/readyz").await.map(|(s, _)| s) };
    assert_eq!(status().await, Some(200));
    broker.kill();
    let unready = eventually(Duration::from_secs(5), || async {
        status().await == Some(503)
    })
    .await;
    broker.restart().await;
    let ready_again = eventually(Duration::from_secs(10), || async {
        status().await == Some(200)
    })
    .await;
    let mut redis = redis_at(&url).await;
    published.extend(
        publish_payments(&mut redis, &stream, 30, &wallets, 100, 10)
            .await
            .unwrap(),
    );
    let expected = totals(&published);
    let caught_up = eventually(LIMIT, || async {
        app.posted_balances(&wallets).await == expected
            && pending(&mut redis_at(&url).await, &stream).await == 0
    })
    .await;
    let (output, _) = stop(c1, Duration::from_secs(5)).await;
    assert!(
        unready,
        "/readyz stayed 200 while the broker was down; {}",
        describe(&output)
    );
    assert!(
        ready_again,
        "/readyz did not recover; {}",
        describe(&output)
    );
    assert!(
        caught_up,
        "balances {:?}, expected {expected:?}; {}",
        app.posted_balances(&wallets).await,
        describe(&output)
    );
    assert_exit_0(&output, "consume after SIGTERM");
    assert_balances(&app, &wallets, &expected).await;
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    drop(broker);
    app.finish().await;
}

/// The broker goes away between a batch's COMMIT and its XACK: the consumer keeps the work
/// (it is durable), says it is not ready, and acknowledges once the broker is back.
#[tokio::test]
async fn a_broker_outage_between_commit_and_ack_is_waited_out_and_reported_by_readyz() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let mut broker = PrivateRedis::start().await;
    let url = broker.url();
    let stream = unique_stream("ackoutage");
    let addr = format!("127.0.0.1:{}", free_port());
    let c1 = spawn(consumer_command_with(
        &app.database_url,
        &url,
        &stream,
        "c1",
        &[
            "--metrics-addr",
            &addr,
            "--claim-idle-ms",
            "10000",
            "--max-batch-ms",
            "8000",
        ],
    ));
    let status = || async { http_get(&addr, "/readyz").await.map(|(s, _)| s) };
    assert!(eventually(LIMIT, || async { status().await == Some(200) }).await);

    // Hold the wallet's row so that the consumer's batch waits inside its transaction.
    let mut blocker = app.pool.begin().await.unwrap();
    sqlx::query("select id from accounts where id = 'w1' for update")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let mut redis = redis_at(&url).await;
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w1", "5000")).await;
    let waiting = eventually(LIMIT, || async { lock_waiters(&app).await > 0 }).await;
    assert!(waiting, "the consumer never waited on the wallet's lock");

    // The broker dies; then the batch commits and its acknowledgement cannot be sent.
    broker.kill();
    blocker.rollback().await.unwrap();
    let committed = eventually(LIMIT, || async { app.posted_balance("w1").await == 5_000 }).await;
    assert!(committed, "the batch never committed");
    let unready = eventually(Duration::from_secs(5), || async {
        status().await == Some(503)
    })
    .await;

    broker.restart().await;
    let mut redis = redis_at(&url).await;
    let acknowledged = eventually(LIMIT, || async {
        pending(&mut redis_at(&url).await, &stream).await == 0
    })
    .await;
    let ready_again = eventually(Duration::from_secs(10), || async {
        status().await == Some(200)
    })
    .await;
    let (output, _) = stop(c1, Duration::from_secs(5)).await;
    assert!(
        acknowledged,
        "the batch was never acknowledged; {}",
        describe(&output)
    );
    assert!(
        ready_again,
        "/readyz did not recover; {}",
        describe(&output)
    );
    assert_exit_0(&output, "consume after SIGTERM");
    assert_eq!(app.posted_balance("w1").await, 5_000);
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    // While the acknowledgement cannot reach the broker, /readyz says so.
    assert!(
        unready,
        "/readyz stayed 200 while the acknowledgement could not reach the broker; {}",
        describe(&output)
    );
    drop(broker);
    app.finish().await;
}

// 11. ----------------------------------------------------------------------------------------

async fn the_demo(crash: Option<&str>) {
    let app = TestApp::new().await;
    let stream = unique_stream("demo");
    let mut command = Command::new(bin());
    command
        .args(["demo", "--database-url", &app.database_url])
        .args(["--redis-url", &shared_redis_url(), "--stream", &stream])
        .args(["--claim-idle-ms", "300"])
        .env("RUST_LOG", "warn")
        .env_remove(FAILPOINT)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(crash) = crash {
        command.args(["--crash", crash]);
    }
    let output = run_to_end(command, LIMIT).await;
    assert_exit_0(&output, "demo");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("expected 250.00"), "{stdout}");
    assert!(
        stdout.contains("unacknowledged messages: 0   dead letters: 0"),
        "{stdout}"
    );
    assert!(stdout.contains("c1: killed by SIGKILL"), "{stdout}");
    assert_eq!(app.posted_balance("w1").await, 25_000);

    let mut redis = redis_at(&shared_redis_url()).await;
    forget(&mut redis, &stream, "wallet-ledger-demo").await;
    app.finish().await;
}

#[tokio::test]
async fn the_demo_ends_at_250_with_c1_killed_after_its_commit() {
    the_demo(None).await;
}

#[tokio::test]
async fn the_demo_ends_at_250_with_c1_killed_before_its_commit() {
    the_demo(Some("before-commit")).await;
}

// 12. ----------------------------------------------------------------------------------------

#[tokio::test]
async fn a_claim_idle_time_not_above_the_batch_time_is_refused_at_start() {
    // Nothing listens on port 1: the check comes before any connection.
    let mut command = Command::new(bin());
    command
        .args([
            "consume",
            "--database-url",
            "postgres://postgres@127.0.0.1:1/unused",
        ])
        .args(["--redis-url", "redis://127.0.0.1:1"])
        .args(["--claim-idle-ms", "100", "--max-batch-ms", "200"])
        .env("RUST_LOG", "warn")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null());
    let output = run_to_end(command, LIMIT).await;
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--claim-idle-ms") && stderr.contains("--max-batch-ms"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

/// Two consumers hold the same poison message (the second reclaimed it from the first, which
/// was only slow) and both dead-letter it: the dead-letter stream gets it once, and the
/// message is settled. Settling is one script, so whichever runs second finds it settled.
#[tokio::test]
async fn a_message_two_consumers_dead_letter_is_dead_lettered_once() {
    use wallet_ledger::consumer::apply::Reason;
    use wallet_ledger::consumer::stream::StreamSettings;
    use wallet_ledger::consumer::stream::{DeadLetter, StreamClient};
    let stream = unique_stream("dead-lettered-once");
    let config = StreamSettings {
        stream: stream.clone(),
        group: GROUP.to_owned(),
    };
    let url = shared_redis_url();
    let client = |name: &str| {
        StreamClient::connect(
            &url,
            config.clone(),
            name.to_owned(),
            Duration::from_millis(100),
        )
    };
    let mut slow = client("slow").await.unwrap();
    let mut reclaimer = client("reclaimer").await.unwrap();
    slow.ensure_group().await.unwrap();
    let mut redis = redis_at(&shared_redis_url()).await;
    xadd(
        &mut redis,
        &stream,
        &[("event_id".into(), "not-a-uuid".into())],
    )
    .await;
    let held = slow.read_new(10, Duration::from_millis(100)).await.unwrap();
    assert_eq!(held.len(), 1);
    let (_, reclaimed) = reclaimer.reclaim(Duration::ZERO, "0-0", 10).await.unwrap();
    assert_eq!(reclaimed.len(), 1, "the reclaimer took the message over");
    for (client, message) in [(&mut reclaimer, &reclaimed[0]), (&mut slow, &held[0])] {
        let letter = DeadLetter {
            message,
            reason: Reason::MalformedEvent,
            detail: "event_id is not a UUID",
            differing_fields: &[],
            failures: 0,
        };
        client.settle(&[], &[letter]).await.unwrap();
    }
    let letters = dead_letters(&mut redis, &stream).await;
    assert_eq!(
        letters.len(),
        1,
        "one dead letter for one message: {letters:?}"
    );
    assert_eq!(
        pending(&mut redis, &stream).await,
        0,
        "the message is settled"
    );
    let _: () = redis
        .del(&[stream.clone(), format!("{stream}.dlq")])
        .await
        .unwrap();
}
