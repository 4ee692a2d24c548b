//! Partitioned streams end to end: the real `publish` spreads payments over 4 partition
//! streams by wallet, two `consume --partitions 4` processes share the partitions through the
//! group, and every wallet still gains exactly the sum of its distinct payments.

use super::common::TestApp;
use super::stream_support::{
    GROUP, assert_exit_0, bin, consume, dead_letters, describe, dlq, forget, payment, pending,
    publish, redis_at, run_to_end, shared_redis_url, text, unique_stream, xadd,
};
use redis::AsyncCommands;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;
use uuid::Uuid;
use wallet_ledger::consumer::partition::Partitions;

/// The longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(120);
const PAYMENTS: usize = 2_000;
const WALLETS: usize = 50;
const AMOUNT: i64 = 137;

/// The real `publish`: the test's payments over `wallets`, 10% of them sent twice.
fn publish_payments(stream: &str, wallets: &[String], extra: &[&str]) -> Command {
    let count = PAYMENTS.to_string();
    let amount = AMOUNT.to_string();
    let wallets = wallets.join(",");
    let flags = [
        "--count",
        &count,
        "--amount",
        &amount,
        "--resend-percent",
        "10",
        "--wallets",
        &wallets,
    ];
    publish(stream, &[&flags[..], extra].concat())
}

#[tokio::test]
async fn payments_spread_over_four_partitions_are_applied_exactly_once() {
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..WALLETS).map(|i| format!("pw{i:02}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
    }
    let base = unique_stream("partitions");
    let four = Partitions::new(4).unwrap();
    let streams = four.streams(&base);
    let mut redis = redis_at(&shared_redis_url()).await;

    let output = run_to_end(
        publish_payments(&base, &wallets, &["--partitions", "4"]),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "publish --partitions 4");
    let base_length: usize = redis.xlen(&base).await.unwrap();
    assert_eq!(base_length, 0, "nothing goes to the base stream itself");

    // What each partition received: every wallet in exactly its own partition.
    let mut payments: HashMap<String, (String, i64)> = HashMap::new();
    let mut partitions_of: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let mut messages = 0;
    for (p, stream) in streams.iter().enumerate() {
        let reply: redis::streams::StreamRangeReply = redis.xrange_all(stream).await.unwrap();
        assert!(!reply.ids.is_empty(), "partition {stream} received nothing");
        messages += reply.ids.len();
        for entry in reply.ids {
            let field = |name: &str| -> String { entry.get(name).expect(name) };
            let wallet = field("wallet");
            let amount: i64 = field("amount").parse().unwrap();
            assert_eq!(usize::from(four.of(&wallet)), p, "{wallet} in {stream}");
            partitions_of.entry(wallet.clone()).or_default().insert(p);
            payments.insert(field("event_id"), (wallet, amount));
        }
    }
    assert_eq!(payments.len(), PAYMENTS, "distinct payments");
    assert_eq!(messages, PAYMENTS + PAYMENTS / 10, "10% resent");
    assert_eq!(partitions_of.len(), WALLETS);
    for (wallet, parts) in &partitions_of {
        assert_eq!(parts.len(), 1, "{wallet}'s events went to {parts:?}");
    }

    // Two processes share the 4 partitions through the group, one of them with 2 workers.
    let extra = ["--drain", "--partitions", "4"];
    let c1 = run_to_end(consume(&app, &base, "c1", &extra), LIMIT);
    let c2 = run_to_end(
        consume(
            &app,
            &base,
            "c2",
            &[&extra[..], &["--workers", "2"]].concat(),
        ),
        LIMIT,
    );
    let (c1, c2) = tokio::join!(c1, c2);
    assert_exit_0(&c1, "consume c1 --partitions 4 --drain");
    assert_exit_0(&c2, "consume c2 --partitions 4 --workers 2 --drain");

    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for (wallet, amount) in payments.values() {
        *expected.entry(wallet.clone()).or_default() += amount;
    }
    let mut balances = BTreeMap::new();
    for w in &wallets {
        balances.insert(w.clone(), app.posted_balance(w).await);
    }
    assert_eq!(balances, expected);
    assert_eq!(
        expected.values().sum::<i64>(),
        PAYMENTS as i64 * AMOUNT,
        "every payment counted once"
    );
    for stream in &streams {
        assert_eq!(pending(&mut redis, stream).await, 0, "pending in {stream}");
        assert!(
            dead_letters(&mut redis, stream).await.is_empty(),
            "dead letters in {stream}"
        );
    }
    // Each worker of each process was a consumer of each partition's group.
    let consumers: Vec<redis::streams::StreamInfoConsumersReply> = {
        let mut all = Vec::new();
        for stream in &streams {
            all.push(redis.xinfo_consumers(stream, GROUP).await.unwrap());
        }
        all
    };
    for (p, reply) in consumers.iter().enumerate() {
        let names: BTreeSet<String> = reply.consumers.iter().map(|c| c.name.clone()).collect();
        let wanted: BTreeSet<String> = [
            format!("c1-p{p}"),
            format!("c2-0-p{p}"),
            format!("c2-1-p{p}"),
        ]
        .into();
        assert_eq!(names, wanted, "consumers of partition {p}");
    }

    for stream in &streams {
        forget(&mut redis, stream, GROUP).await;
    }
    app.finish().await;
}

/// Dead letters land in their partition's `.dlq`; `dlq --partitions 4` lists and replays them
/// all, and a single id is taken only with the partition's own stream.
#[tokio::test]
async fn dead_letters_of_every_partition_are_listed_and_replayed() {
    let app = TestApp::new().await;
    let base = unique_stream("partitions-dlq");
    let four = Partitions::new(4).unwrap();
    let mut redis = redis_at(&shared_redis_url()).await;
    // Wallets that do not exist yet, in partitions 0 and 3 (docs/consumer.md's table).
    let ghosts = ["w4", "alice"];
    for w in ghosts {
        let stream = four.stream_for(&base, w);
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), w, "100")).await;
    }
    let extra = ["--drain", "--partitions", "4", "--max-failures", "1"];
    let output = run_to_end(consume(&app, &base, "c1", &extra), LIMIT).await;
    assert_exit_0(&output, "consume --partitions 4 --drain");

    let output = run_to_end(dlq(&base, &["list", "--partitions", "4"]), LIMIT).await;
    assert_exit_0(&output, "dlq list --partitions 4");
    let lines: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let listed: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let field = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
            (
                field(&l["stream"]),
                field(&l["event"]["wallet"]),
                field(&l["reason"]),
            )
        })
        .collect();
    let p0 = four.stream(&base, 0);
    let p3 = four.stream(&base, 3);
    assert_eq!(
        listed,
        [
            (p0.clone(), "w4".to_owned(), "unknown_account".to_owned()),
            (p3.clone(), "alice".to_owned(), "unknown_account".to_owned()),
        ]
    );

    // An id alone is ambiguous across partitions: refused, nothing replayed.
    let id0 = lines[0]["id"].as_str().unwrap().to_owned();
    let output = run_to_end(dlq(&base, &["replay", &id0, "--partitions", "4"]), LIMIT).await;
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("per partition"),
        "{}",
        describe(&output)
    );
    assert_eq!(dead_letters(&mut redis, &p0).await.len(), 1);

    for w in ghosts {
        app.create_wallet(w).await;
    }
    let output = run_to_end(dlq(&p0, &["replay", &id0]), LIMIT).await;
    assert_exit_0(&output, "dlq --stream <partition 0> replay <id>");
    let output = run_to_end(dlq(&base, &["replay", "--all", "--partitions", "4"]), LIMIT).await;
    assert_exit_0(&output, "dlq replay --all --partitions 4");
    assert!(
        text(&output.stdout).contains("replayed 1 dead letters"),
        "{}",
        describe(&output)
    );

    let output = run_to_end(consume(&app, &base, "c1", &extra), LIMIT).await;
    assert_exit_0(&output, "consume --partitions 4 --drain, after the replay");
    for w in ghosts {
        assert_eq!(app.posted_balance(w).await, 100, "{w}");
    }
    for stream in four.streams(&base) {
        assert_eq!(pending(&mut redis, &stream).await, 0, "pending in {stream}");
        assert!(
            dead_letters(&mut redis, &stream).await.is_empty(),
            "{stream}"
        );
        forget(&mut redis, &stream, GROUP).await;
    }
    app.finish().await;
}

/// A partition count of 0 or above 1,024 is a bad flag, refused before anything runs.
#[tokio::test]
async fn partition_counts_outside_1_to_1024_are_refused() {
    let stream = unique_stream("partitions-refused");
    for bad in ["0", "1025"] {
        let commands: [(&str, Vec<&str>); 3] = [
            ("publish", vec!["publish", "--stream", &stream]),
            ("consume", vec!["consume", "--stream", &stream, "--drain"]),
            ("dlq list", vec!["dlq", "--stream", &stream, "list"]),
        ];
        for (what, args) in commands {
            let output = Command::new(bin())
                .args(&args)
                .args(["--redis-url", &shared_redis_url(), "--partitions", bad])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .output()
                .await
                .unwrap();
            assert_eq!(
                output.status.code(),
                Some(2),
                "{what} --partitions {bad}: {}",
                describe(&output)
            );
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains("--partitions") && stderr.contains("1..=1024"),
                "{what} --partitions {bad}: {stderr}"
            );
        }
    }
}
