//! Issue 21, the streams half: payment events on a real Redis Cluster (three masters, three
//! replicas, `scripts/redis-cluster.sh`), spread over partition streams by wallet. Two `consume`
//! processes share the partitions; dead letters stay in their partition; `publish`'s `WAIT`
//! counts the replicas of the master that took its entries; and while events flow, masters
//! and consumers are SIGKILLed: nothing is applied twice and every event whose `XADD` a
//! replica confirmed is applied.

use crate::cluster_topology::{RedisCluster, masters_of};
use crate::common::{TestApp, poll, poll_until};
use crate::stream_support::{
    GROUP, assert_exit_0, bin, consumer_command, dead_letters, describe, payment, pending,
    run_to_end, spawn, stop, stopped_total, text, unique_stream, xadd,
};
use crate::topology::one_at_a_time;
use redis::AsyncCommands;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::process::Command;
use uuid::Uuid;
use wallet_ledger::consumer::partition::Partitions;
use wallet_ledger::consumer::producer::{Confirmation, publish_confirmed};

const PARTITIONS: u32 = 8;
/// The longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(180);

fn eight() -> Partitions {
    Partitions::new(PARTITIONS).unwrap()
}

/// A tool of the real binary against the cluster.
fn tool(cluster: &RedisCluster, args: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args(args)
        .args(["--redis-url", &cluster.url])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// `consume --partitions 8` on the cluster, for `app`'s database.
fn consume(
    app: &TestApp,
    cluster: &RedisCluster,
    base: &str,
    name: &str,
    extra: &[&str],
) -> Command {
    let partitions = PARTITIONS.to_string();
    let mut command = consumer_command(
        &app.database_url,
        &cluster.url,
        base,
        name,
        &[&["--partitions", partitions.as_str()], extra].concat(),
    );
    command.env("RUST_LOG", "info,sqlx=warn");
    command
}

/// The ids of the payments in the ledger, each with how many transactions carry it (the id is
/// the primary key, so more than one is impossible; the count says so anyway).
async fn applied_payments(app: &TestApp) -> BTreeMap<Uuid, i64> {
    let rows: Vec<(Uuid, i64)> =
        sqlx::query_as("select id, count(*) from transactions where kind = 'payment' group by id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    rows.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_eight_partitions_on_a_cluster_and_apply_each_payment_once() {
    let _turn = one_at_a_time().await;
    let cluster = RedisCluster::up().await;
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..40).map(|i| format!("rc{i:02}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
    }
    let base = unique_stream("cluster");
    let streams = eight().streams(&base);
    // The partitions really are spread: more than one master holds some.
    let masters = masters_of(&cluster, &streams).await;
    assert!(masters.len() > 1, "8 partitions on one master: {masters:?}");

    let output = run_to_end(
        tool(
            &cluster,
            &[
                "publish",
                "--stream",
                &base,
                "--partitions",
                "8",
                "--count",
                "2000",
                "--amount",
                "137",
                "--resend-percent",
                "10",
                "--wait-replicas",
                "1",
                "--wallets",
                &wallets.join(","),
            ],
        ),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "publish --partitions 8 --wait-replicas 1");
    let mut redis = wallet_ledger::broker::connect(&cluster.url).await.unwrap();
    assert!(redis.is_cluster());
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut event_ids = HashSet::new();
    for (p, stream) in streams.iter().enumerate() {
        let reply: redis::streams::StreamRangeReply = redis.xrange_all(stream).await.unwrap();
        for entry in reply.ids {
            let wallet: String = entry.get("wallet").unwrap();
            assert_eq!(usize::from(eight().of(&wallet)), p, "{wallet} in {stream}");
            let id: String = entry.get("event_id").unwrap();
            if event_ids.insert(id) {
                *expected.entry(wallet).or_default() += 137;
            }
        }
    }
    assert_eq!(event_ids.len(), 2000, "every payment on its partition");

    let extra = ["--drain"];
    let c1 = run_to_end(consume(&app, &cluster, &base, "c1", &extra), LIMIT);
    let c2 = run_to_end(
        consume(
            &app,
            &cluster,
            &base,
            "c2",
            &[&extra[..], &["--workers", "2"]].concat(),
        ),
        LIMIT,
    );
    let (c1, c2) = tokio::join!(c1, c2);
    assert_exit_0(&c1, "consume c1 --partitions 8 --drain");
    assert_exit_0(&c2, "consume c2 --partitions 8 --workers 2 --drain");
    let by_c1 = stopped_total(&text(&c1.stderr), "applied");
    let by_c2 = stopped_total(&text(&c2.stderr), "applied");
    let applied = by_c1 + by_c2;

    assert_eq!(app.posted_balances(&wallets).await, expected);
    let in_ledger = applied_payments(&app).await;
    assert_eq!(in_ledger.len(), 2000, "each payment in the ledger");
    assert!(in_ledger.values().all(|&n| n == 1));
    assert_eq!(
        applied, 2000,
        "each payment applied once, by one of the two"
    );
    assert!(
        by_c1 > 0 && by_c2 > 0,
        "both shared the work: {by_c1} and {by_c2}"
    );
    for stream in &streams {
        assert_eq!(pending(&mut redis, stream).await, 0, "pending in {stream}");
        assert!(
            dead_letters(&mut redis, stream).await.is_empty(),
            "{stream}"
        );
        // Only the two processes' workers read it (one that found its partition drained by
        // the others may never have read it).
        let consumers: redis::streams::StreamInfoConsumersReply =
            redis.xinfo_consumers(stream, GROUP).await.unwrap();
        let p = stream.rsplit_once(':').unwrap().1.trim_matches(['{', '}']);
        let ours: BTreeSet<String> = [
            format!("c1-p{p}"),
            format!("c2-0-p{p}"),
            format!("c2-1-p{p}"),
        ]
        .into();
        assert!(!consumers.consumers.is_empty(), "nobody read {stream}");
        for c in &consumers.consumers {
            assert!(ours.contains(&c.name), "{} read {stream}", c.name);
        }
    }
    crate::report(&format!(
        "redis cluster: 2000 payments (2200 messages) over 8 partitions on {} masters, applied \
         once each by 2 processes ({by_c1} and {by_c2})",
        masters.len()
    ));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_stay_in_their_partition_on_a_cluster_and_a_bare_stream_is_refused() {
    let _turn = one_at_a_time().await;
    let cluster = RedisCluster::up().await;
    let app = TestApp::new().await;
    let base = unique_stream("cluster-dlq");
    let mut redis = wallet_ledger::broker::connect(&cluster.url).await.unwrap();
    // Wallets that do not exist yet, in two partitions of their own.
    let ghosts = ["ghost-a", "ghost-b", "ghost-c", "ghost-d"];
    let mut in_partition: BTreeMap<String, String> = BTreeMap::new();
    for w in ghosts {
        let stream = eight().stream_for(&base, w);
        if in_partition.values().any(|s| *s == stream) {
            continue;
        }
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), w, "100")).await;
        in_partition.insert(w.to_owned(), stream);
    }
    assert!(in_partition.len() >= 2, "{in_partition:?}");

    // One stream without a hash tag: its keys hash to three slots; the settle script could
    // never run there, so the consumer refuses before it reads anything.
    let bare = consumer_command(&app.database_url, &cluster.url, &base, "c0", &["--drain"]);
    let output = run_to_end(bare, LIMIT).await;
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("must share a slot"),
        "{}",
        describe(&output)
    );

    let extra = ["--drain", "--max-failures", "1"];
    let output = run_to_end(consume(&app, &cluster, &base, "c1", &extra), LIMIT).await;
    assert_exit_0(&output, "consume --partitions 8 --drain");
    for (wallet, stream) in &in_partition {
        let letters = dead_letters(&mut redis, stream).await;
        assert_eq!(letters.len(), 1, "{stream}");
        assert_eq!(letters[0]["wallet"], *wallet);
        assert_eq!(letters[0]["dlq_reason"], "unknown_account");
    }

    let output = run_to_end(
        tool(
            &cluster,
            &["dlq", "--stream", &base, "--partitions", "8", "list"],
        ),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "dlq list --partitions 8");
    let listed: BTreeSet<(String, String)> = text(&output.stdout)
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                line["event"]["wallet"].as_str().unwrap().to_owned(),
                line["stream"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(listed, in_partition.clone().into_iter().collect());

    for wallet in in_partition.keys() {
        app.create_wallet(wallet).await;
    }
    let output = run_to_end(
        tool(
            &cluster,
            &[
                "dlq",
                "--stream",
                &base,
                "--partitions",
                "8",
                "replay",
                "--all",
            ],
        ),
        LIMIT,
    )
    .await;
    assert_exit_0(&output, "dlq replay --all --partitions 8");
    let output = run_to_end(consume(&app, &cluster, &base, "c1", &extra), LIMIT).await;
    assert_exit_0(&output, "consume after the replay");
    for (wallet, stream) in &in_partition {
        assert_eq!(app.posted_balance(wallet).await, 100, "{wallet}");
        assert!(
            dead_letters(&mut redis, stream).await.is_empty(),
            "{stream}"
        );
        assert_eq!(pending(&mut redis, stream).await, 0, "{stream}");
    }
    app.finish().await;
}

/// `WAIT` names no key: sent alone, the cluster client would ask every master and report the
/// fewest replicas. In `publish`'s pipeline it must go to the master that took the XADDs. With
/// one master's replica killed, a stream on another master is confirmed and a stream on that
/// master is not: WAIT counted the replicas of the stream's own master each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_counts_the_replicas_of_the_master_that_took_the_entries() {
    let _turn = one_at_a_time().await;
    let cluster = RedisCluster::up().await;
    let base = unique_stream("cluster-wait");
    let streams = eight().streams(&base);
    let masters = masters_of(&cluster, &streams).await;
    assert!(masters.len() > 1, "8 partitions on one master: {masters:?}");
    let mut by_master = masters.iter();
    let (&lonely, lonely_streams) = by_master.next().unwrap();
    let (_, other_streams) = by_master.next().unwrap();
    let replica = cluster.replica_of(lonely).await;
    cluster.kill(replica);
    let what = format!("{lonely} no longer seeing its replica");
    poll_until(Duration::from_secs(10), what, || async {
        (cluster.connected_replicas(lonely).await == Some(0)).then_some(())
    })
    .await;
    let once = Confirmation {
        replicas: 1,
        retry_for: Duration::ZERO,
    };
    let messages = vec![payment(Uuid::new_v4(), "w1", "100")];
    let confirmed = publish_confirmed(&cluster.url, &other_streams[0], &messages, once).await;
    assert!(
        confirmed.is_ok(),
        "{} is on a master with its replica: {confirmed:?}",
        other_streams[0]
    );
    let refused = publish_confirmed(&cluster.url, &lonely_streams[0], &messages, once).await;
    let error = format!("{:#}", refused.expect_err("its master has no replica now"));
    assert!(error.contains("0 of 1 replicas confirmed"), "{error}");
    cluster.heal().await;
    let confirmed = publish_confirmed(&cluster.url, &lonely_streams[0], &messages, once).await;
    assert!(confirmed.is_ok(), "its replica is back: {confirmed:?}");
}

/// Payments in groups of this many (spread over the partitions), a pause apart.
const GROUP_OF: usize = 24;
const PAUSE: Duration = Duration::from_millis(30);
const AMOUNT: i64 = 100;
/// Masters killed, one after another, each with a consumer.
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_masters_and_consumers_while_events_flow_loses_and_doubles_nothing() {
    let _turn = one_at_a_time().await;
    let cluster = RedisCluster::up().await;
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..32).map(|i| format!("chaos{i:02}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
    }
    let base = unique_stream("cluster-chaos");
    let streams = eight().streams(&base);

    let mut next_name = 0;
    let mut start_consumer = || {
        next_name += 1;
        spawn(consume(
            &app,
            &cluster,
            &base,
            &format!("k{next_name}"),
            &["--batch-size", "50"],
        ))
    };
    let mut consumers = vec![start_consumer(), start_consumer()];

    let stop_producing = Arc::new(AtomicBool::new(false));
    let producer = crate::Producer {
        url: cluster.url.clone(),
        base: base.clone(),
        partitions: eight(),
        wallets: wallets.clone(),
        group_of: GROUP_OF,
        pause: PAUSE,
        amount: AMOUNT,
    };
    let producer = tokio::spawn(producer.run(stop_producing.clone()));
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let mut failovers = Vec::new();
    for round in 0..ROUNDS {
        // The master of some partition, a different partition each round.
        let stream = &streams[(round * 3) % streams.len()];
        let old = cluster.master_of(stream).await.expect("served");
        cluster.kill(old);
        let killed_at = Instant::now();
        // A consumer dies with it, mid-batch or not; a new one takes its place.
        let victim = consumers.remove(round % consumers.len());
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(victim.id().expect("running") as i32, libc::SIGKILL) };
        let _ = victim.wait_with_output().await;
        let new = cluster.wait_new_master(stream, old).await;
        failovers.push((old, new, killed_at.elapsed()));
        // Its successor starts on the cluster as it is now; the other consumer rode the
        // failover out.
        consumers.push(start_consumer());
        // The old master back as a replica, so that WAIT 1 confirms its slots again.
        cluster.heal().await;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_producing.store(true, Ordering::Relaxed);
    let payments = tokio::time::timeout(LIMIT, producer)
        .await
        .expect("the producer finished")
        .expect("the producer ran");

    let expected = crate::expected_balances(&payments, AMOUNT);
    let actual = crate::settled_balances(&expected, || app.posted_balances(&wallets)).await;
    let left_pending = || async {
        let mut redis = wallet_ledger::broker::connect(&cluster.url).await.unwrap();
        let mut left = 0;
        for stream in &streams {
            left += pending(&mut redis, stream).await;
        }
        left
    };
    let drained = poll(Duration::from_secs(30), || async {
        (left_pending().await == 0).then_some(())
    })
    .await;
    let left = if drained.is_some() {
        0
    } else {
        left_pending().await
    };
    let mut redis = wallet_ledger::broker::connect(&cluster.url).await.unwrap();
    // A late duplicate would show as a balance that goes on growing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = app.posted_balances(&wallets).await;
    let mut logs = String::new();
    let mut applied_by_survivors = 0;
    for consumer in consumers {
        let (output, _) = stop(consumer, Duration::from_secs(30)).await;
        let log = text(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{}", tail(&log));
        applied_by_survivors += stopped_total(&log, "applied");
        logs.push_str(&log);
    }
    assert_eq!(
        actual,
        expected,
        "every confirmed payment applied\n{}",
        tail(&logs)
    );
    assert_eq!(later, expected, "nothing applied twice\n{}", tail(&logs));
    assert_eq!(left, 0, "nothing stays pending\n{}", tail(&logs));
    let in_ledger = applied_payments(&app).await;
    let published: BTreeSet<Uuid> = payments.iter().map(|(id, _)| *id).collect();
    assert_eq!(published.len(), payments.len(), "distinct payment ids");
    assert_eq!(
        in_ledger.keys().copied().collect::<BTreeSet<_>>(),
        published,
        "the ledger holds exactly the confirmed payments"
    );
    assert!(in_ledger.values().all(|&n| n == 1));
    for stream in &streams {
        assert!(
            dead_letters(&mut redis, stream).await.is_empty(),
            "{stream}"
        );
    }
    let times: Vec<String> = failovers
        .iter()
        .map(|(old, new, after)| format!("{old}->{new} {:.1} s", after.as_secs_f64()))
        .collect();
    crate::report(&format!(
        "redis cluster chaos: {} payments confirmed (WAIT 1) and applied once each; {ROUNDS} \
         masters and {ROUNDS} consumers SIGKILLed; failovers {}; the surviving consumers \
         applied {applied_by_survivors}",
        payments.len(),
        times.join(", ")
    ));
    app.finish().await;
}

fn tail(log: &str) -> String {
    crate::stream_support::last_lines(log, 40)
}
