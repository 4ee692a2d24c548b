//! Tests 3 and 4 of issue 19: payment events flow through the consumer while the Redis master
//! is lost (and, in test 4, the PostgreSQL primary with it); Sentinel promotes the replica.
//! Issue 34: the same with a master frozen rather than killed (a paused VM: its socket stays
//! open and nothing answers), where the consumer must go on from the new master while the
//! old one is still frozen.
//! The producer counts an event as sent only once `WAIT 1` said a replica has it, and sends
//! it again (same event id) until then, as a producer that must not lose a payment does.

use crate::client::Api;
use crate::common::TestApp;
use crate::stream_support::{
    consumer_command, dead_letters, eventually, free_port, http_get, spawn, stop, stopped_total,
    text, unique_stream,
};
use crate::topology::{Topology, one_at_a_time};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Payments per `publish_confirmed` call, one call every PAUSE: the producer goes on through
/// the failover until told to stop.
const GROUP_OF: usize = 20;
const PAUSE: Duration = Duration::from_millis(50);
const AMOUNT: i64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_redis_master_loses_no_confirmed_event_and_applies_none_twice() {
    let _turn = one_at_a_time().await;
    let ha = Topology::up("redis").await;
    let app = TestApp::new().await;
    payments_through_a_failover(&ha, &app.database_url, RedisLoss::Kill, false).await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_master_does_not_hold_the_consumer_after_the_promotion() {
    let _turn = one_at_a_time().await;
    let ha = Topology::up("redis").await;
    let app = TestApp::new().await;
    payments_through_a_failover(&ha, &app.database_url, RedisLoss::Freeze, false).await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_redis_master_and_the_postgres_primary_at_once_loses_nothing() {
    let _turn = one_at_a_time().await;
    let ha = Topology::up("all").await;
    payments_through_a_failover(&ha, &ha.database_url.clone(), RedisLoss::Kill, true).await;
}

/// How the Redis master is lost.
#[derive(Clone, Copy, PartialEq)]
enum RedisLoss {
    /// SIGKILL: its connections break at once.
    Kill,
    /// SIGSTOP: its connections stay open and nothing answers until it is thawed.
    Freeze,
}

async fn payments_through_a_failover(
    ha: &Topology,
    database_url: &str,
    loss: RedisLoss,
    lose_postgres: bool,
) {
    let api = Api::start(database_url).await;
    let wallets: Vec<String> = (0..8).map(|i| format!("ha-p{i}")).collect();
    for wallet in &wallets {
        api.create_wallet(wallet).await;
    }
    let stream = unique_stream("ha");
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let mut command = consumer_command(
        database_url,
        &ha.redis_url,
        &stream,
        "ha-c1",
        &["--metrics-addr", &metrics_addr, "--batch-size", "50"],
    );
    command.env("RUST_LOG", "info,sqlx=warn");
    let consumer = spawn(command);
    let ready = eventually(Duration::from_secs(30), || {
        let addr = metrics_addr.clone();
        async move { matches!(http_get(&addr, "/readyz").await, Some((200, _))) }
    })
    .await;
    assert!(ready, "the consumer became ready");
    // Its /readyz says whether commits wait for a standby: the pg_auto_failover group has
    // one, the machine's single PostgreSQL does not.
    let (_, body) = http_get(&metrics_addr, "/readyz").await.unwrap();
    let expected = format!("\"synchronous_standby\":{lose_postgres}");
    assert!(
        body.contains(&expected),
        "/readyz says {expected:?}: {body:?}"
    );

    let stop_producing = Arc::new(AtomicBool::new(false));
    let producer = crate::Producer {
        url: ha.redis_url.clone(),
        base: stream.clone(),
        partitions: wallet_ledger::consumer::partition::Partitions::ONE,
        wallets: wallets.clone(),
        group_of: GROUP_OF,
        pause: PAUSE,
        amount: AMOUNT,
    };
    let producer = tokio::spawn(producer.run(stop_producing.clone()));
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let mut frozen = None;
    let old_master = match loss {
        RedisLoss::Kill => ha.kill_redis_master().await,
        RedisLoss::Freeze => {
            let guard = ha.freeze_redis_master().await;
            let port = guard.node.parse().expect("a port");
            frozen = Some(guard);
            port
        }
    };
    let killed_at = Instant::now();
    let old_primary = if lose_postgres {
        Some(ha.kill_pg_primary().await)
    } else {
        None
    };
    let new_master = ha.wait_redis_master(old_master).await;
    let redis_after = killed_at.elapsed();
    let mut applied_while_frozen = None;
    if let Some(mut guard) = frozen.take() {
        // The producer's events reach the new master (unconfirmed: it has no replica while
        // the old master is frozen, so they are sent again later) and the consumer, which
        // followed it, applies them: money moves before the old master thaws.
        let at_promotion = total(&api.posted_balances(&wallets).await);
        let moved = eventually(Duration::from_secs(20), || async {
            total(&api.posted_balances(&wallets).await) > at_promotion
        })
        .await;
        applied_while_frozen = Some(killed_at.elapsed());
        assert!(
            moved,
            "nothing applied from the new master while the old one was frozen"
        );
        guard.thaw();
        ha.wait_redis_replica(old_master).await;
    } else {
        // A replica again, so that `WAIT 1` can confirm what is sent from now on.
        ha.restart_redis(old_master).await;
    }
    if let Some(old) = &old_primary {
        ha.wait_pg_primary(old).await;
    }
    let database_after = killed_at.elapsed();
    // Payments confirmed by the new master's replica too, then the producer stops.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_producing.store(true, Ordering::Relaxed);
    let payments = tokio::time::timeout(Duration::from_secs(180), producer)
        .await
        .expect("the producer finished")
        .expect("the producer ran");

    // Every payment applied exactly once: each wallet holds exactly its share, and goes on
    // holding it (a late duplicate would add to it).
    let expected = crate::expected_balances(&payments, AMOUNT);
    let actual = crate::settled_balances(&expected, || api.posted_balances(&wallets)).await;
    let mut redis = wallet_ledger::broker::connect(&ha.redis_url).await.unwrap();
    let left_pending = || async {
        let mut redis = wallet_ledger::broker::connect(&ha.redis_url).await.unwrap();
        crate::stream_support::pending(&mut redis, &stream).await
    };
    let drained = crate::common::poll(Duration::from_secs(30), || async {
        (left_pending().await == 0).then_some(())
    })
    .await;
    let pending = if drained.is_some() {
        0
    } else {
        left_pending().await
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = api.posted_balances(&wallets).await;
    let (output, _) = stop(consumer, Duration::from_secs(30)).await;
    let log = text(&output.stderr);
    assert_eq!(actual, expected, "every payment applied\n{}", tail(&log));
    assert_eq!(later, expected, "nothing applied twice\n{}", tail(&log));
    assert_eq!(pending, 0, "nothing stays pending\n{}", tail(&log));
    assert!(dead_letters(&mut redis, &stream).await.is_empty());
    assert_eq!(output.status.code(), Some(0), "{}", tail(&log));
    let applied = stopped_total(&log, "applied");
    let duplicates = stopped_total(&log, "duplicates");
    assert_eq!(applied, payments.len() as u64, "each payment applied once");
    assert!(
        log.contains("the Redis master moved"),
        "the consumer followed the new master: {}",
        tail(&log)
    );
    crate::report(&format!(
        "{} payments applied once each, {duplicates} copies absorbed; Redis master \
         {old_master} {} -> {new_master} after {:.1} s{}{}",
        payments.len(),
        if loss == RedisLoss::Freeze {
            "frozen"
        } else {
            "lost"
        },
        redis_after.as_secs_f64(),
        applied_while_frozen.map_or(String::new(), |t| format!(
            ", money moved {:.1} s after the freeze with the old master still frozen",
            t.as_secs_f64()
        )),
        if lose_postgres {
            format!(
                ", PostgreSQL primary {} replaced after {:.1} s",
                old_primary.unwrap_or_default(),
                database_after.as_secs_f64()
            )
        } else {
            String::new()
        }
    ));
    let (_, _) = api.server.stop().await;
}

fn total(balances: &BTreeMap<String, i64>) -> i64 {
    balances.values().sum()
}

fn tail(log: &str) -> String {
    crate::stream_support::last_lines(log, 40)
}
