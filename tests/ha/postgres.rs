//! Tests 1 and 2 of issue 19: the PostgreSQL primary's machine is lost under load, the engine
//! promotes the synchronous standby, and the old primary rejoins as a standby that the service
//! never writes to.

use crate::client::{Answer, Api};
use crate::common::Rng;
use crate::stream_support::bin;
use crate::topology::{Topology, one_at_a_time};
use serde_json::json;
use sqlx::{Connection, PgConnection};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

const CLIENTS: usize = 16;
const WALLETS: usize = 20;
const FUNDING: i64 = 1_000_000;

/// A transfer a client sent, and what it was finally answered.
struct Sent {
    id: Uuid,
    from: String,
    to: String,
    amount: i64,
    answer: Answer,
}

/// One client: transfers of 1 to 100 between random wallets until `stop`, each sent until it
/// gets a final answer, always under the same id; `answered` counts the final answers.
async fn client(
    api: Arc<Api>,
    wallets: Arc<Vec<String>>,
    seed: u64,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) -> Vec<Sent> {
    let mut rng = Rng(seed);
    let mut sent = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (from, to) = rng.two_distinct(&wallets);
        let amount = 1 + rng.below(100) as i64;
        let id = Uuid::new_v4();
        let body = json!({"id": id, "from": from, "to": to, "amount": amount});
        let answer = api.post("/v1/transfers", &body).await;
        answered.fetch_add(1, Ordering::Relaxed);
        sent.push(Sent {
            id,
            from: from.to_owned(),
            to: to.to_owned(),
            amount,
            answer,
        });
    }
    sent
}

/// Waits until each client counted `more` final answers beyond what it had now.
async fn every_client_answered_again(answered: &[Arc<AtomicUsize>], more: usize) {
    let now: Vec<usize> = answered.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let what = format!("every client answered {more} more times");
    crate::common::poll_until(Duration::from_secs(60), what, || async {
        let mut counts = answered.iter().zip(&now);
        counts
            .all(|(a, before)| a.load(Ordering::Relaxed) >= before + more)
            .then_some(())
    })
    .await;
}

/// What the clients sent, once each ran to its end; every transfer was finally accepted, and
/// no answer was a 5xx other than 503.
async fn all_accepted(clients: Vec<tokio::task::JoinHandle<Vec<Sent>>>) -> Vec<Sent> {
    let mut sent = Vec::new();
    for c in clients {
        sent.extend(c.await.expect("a client ran to its end"));
    }

    let other_5xx: Vec<&String> = sent.iter().flat_map(|s| &s.answer.other_5xx).collect();
    assert!(other_5xx.is_empty(), "5xx other than 503: {other_5xx:?}");
    let refused: Vec<String> = sent
        .iter()
        .filter(|s| !(200..300).contains(&s.answer.status))
        .map(|s| format!("{} {}", s.answer.status, s.answer.body))
        .collect();
    assert!(
        refused.is_empty(),
        "every transfer ends accepted: {refused:?}"
    );
    sent
}

/// Every acknowledged transfer of `sent` is on the primary of `new_port` exactly once, with
/// its two entries, money is conserved, and each wallet holds what its acknowledged transfers
/// say. Returns a connection to that primary.
async fn assert_each_acknowledged_once(
    ha: &Topology,
    api: &Api,
    sent: &[Sent],
    wallets: &[String],
    new_port: u16,
) -> PgConnection {
    // Every acknowledged transfer is on the new primary exactly once, with its two entries.
    let mut primary = PgConnection::connect(&ha.node_url(new_port)).await.unwrap();
    let ids: Vec<Uuid> = sent.iter().map(|s| s.id).collect();
    let stored: Vec<(Uuid, i64)> = sqlx::query_as(
        "select t.id, (select count(*) from entries e where e.transaction_id = t.id)
           from transactions t where t.id = any($1)",
    )
    .bind(&ids)
    .fetch_all(&mut primary)
    .await
    .unwrap();
    assert_eq!(
        stored.len(),
        sent.len(),
        "every acknowledged transfer is stored"
    );
    assert!(
        stored.iter().all(|(_, entries)| *entries == 2),
        "two entries each"
    );

    // Money conserved, and each wallet holds exactly what its acknowledged transfers say.
    let mut expected: BTreeMap<&str, i64> = wallets.iter().map(|w| (w.as_str(), FUNDING)).collect();
    for s in sent {
        *expected.get_mut(s.from.as_str()).unwrap() -= s.amount;
        *expected.get_mut(s.to.as_str()).unwrap() += s.amount;
    }
    let mut actual = BTreeMap::new();
    for wallet in wallets.iter() {
        actual.insert(wallet.as_str(), api.posted_balance(wallet).await);
    }
    assert_eq!(actual, expected);
    assert_eq!(actual.values().sum::<i64>(), FUNDING * WALLETS as i64);
    primary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_primary_loses_no_acknowledged_transfer_and_rejoins_as_a_standby() {
    let _turn = one_at_a_time().await;
    let ha = Topology::up("pg").await;
    let api = Arc::new(Api::start(&ha.database_url).await);
    let wallets: Vec<String> = (0..WALLETS).map(|i| format!("ha-w{i}")).collect();
    for wallet in &wallets {
        api.create_wallet(wallet).await;
        api.fund(wallet, FUNDING).await;
    }
    let wallets = Arc::new(wallets);

    // 1. Clients under load; the primary's machine is lost a few seconds in.
    let stop = Arc::new(AtomicBool::new(false));
    let answered: Vec<Arc<AtomicUsize>> = (0..CLIENTS).map(|_| Arc::default()).collect();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|k| {
            tokio::spawn(client(
                api.clone(),
                wallets.clone(),
                0x9e37_79b9 + k as u64,
                stop.clone(),
                answered[k].clone(),
            ))
        })
        .collect();
    // Under load: every client has had answers from the primary.
    every_client_answered_again(&answered, 3).await;
    let old = ha.kill_pg_primary().await;
    // From the moment the node is gone (the script returns once nothing of it runs).
    let killed_at = Instant::now();
    let (new, new_port) = ha.wait_pg_primary(&old).await;
    let promoted_after = killed_at.elapsed();
    // Traffic goes on until every client had a few answers from the new primary.
    every_client_answered_again(&answered, 3).await;
    stop.store(true, Ordering::Relaxed);
    let sent = all_accepted(clients).await;
    let retried = sent.iter().filter(|s| s.answer.retries > 0).count();
    let retries: u32 = sent.iter().map(|s| s.answer.retries).sum();
    let first_after = sent
        .iter()
        .map(|s| s.answer.at)
        .filter(|at| *at > killed_at)
        .min()
        .expect("answers after the kill");
    crate::report(&format!(
        "{} transfers acknowledged; {old} lost, {new} promoted after {:.1} s; first 2xx {:.1} s \
         after the kill; {retried} transfers retried, {retries} 503s or lost connections",
        sent.len(),
        promoted_after.as_secs_f64(),
        (first_after - killed_at).as_secs_f64(),
    ));

    let mut primary = assert_each_acknowledged_once(&ha, &api, &sent, &wallets, new_port).await;

    let verify = std::process::Command::new(bin())
        .args(["verify", "--database-url", &ha.database_url])
        .output()
        .unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "verify is clean on the new primary: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    // 2. The old primary rejoins as a standby; writes keep going to the new one only.
    ha.rejoin(&old).await;
    let (still, _) = ha.pg_primary().await;
    assert_eq!(
        still, new,
        "the rejoined node did not take the primary back"
    );
    for _ in 0..50 {
        let (from, to) = (&wallets[0], &wallets[1]);
        let r = api
            .post(
                "/v1/transfers",
                &json!({"id": Uuid::new_v4(), "from": from, "to": to, "amount": 1}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let old_port = ha.port_of(&old).await;
    let mut rejoined = PgConnection::connect(&ha.node_url(old_port)).await.unwrap();
    let in_recovery: bool = sqlx::query_scalar("select pg_is_in_recovery()")
        .fetch_one(&mut rejoined)
        .await
        .unwrap();
    assert!(in_recovery, "{old} came back as a standby");
    let our_sessions: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where application_name = 'wallet-ledger-ha'",
    )
    .fetch_one(&mut rejoined)
    .await
    .unwrap();
    assert_eq!(
        our_sessions, 0,
        "the service holds no session on the standby"
    );
    let on_new: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where application_name = 'wallet-ledger-ha'",
    )
    .fetch_one(&mut primary)
    .await
    .unwrap();
    assert!(on_new > 0, "the service's sessions are on the new primary");

    let api = Arc::into_inner(api).expect("the clients are done");
    let (_, log) = api.server.stop().await;
    assert!(
        log.contains("the PostgreSQL primary moved"),
        "serve logged the switch: {}",
        crate::stream_support::last_lines(&log, 40)
    );
}

/// Issue 34, item 0: the primary's machine freezes (a paused VM, a stuck disk) instead of
/// dying. Its kernel keeps the connections open and acknowledges every packet, so nothing at
/// the TCP level fails: writes must still resume on the promoted standby while it is frozen,
/// each acknowledged transfer stored exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_does_not_hold_writes_after_the_promotion() {
    const WRITERS: usize = 8;
    /// How long the old node stays frozen after the promotion: writes must resume within it.
    const FROZEN_AFTER_PROMOTION: Duration = Duration::from_secs(15);
    let _turn = one_at_a_time().await;
    let ha = Topology::up("pg").await;
    let api = Arc::new(Api::start(&ha.database_url).await);
    let wallets: Vec<String> = (0..WALLETS).map(|i| format!("fz-w{i}")).collect();
    for wallet in &wallets {
        api.create_wallet(wallet).await;
        api.fund(wallet, FUNDING).await;
    }
    let wallets = Arc::new(wallets);
    let stop = Arc::new(AtomicBool::new(false));
    let answered: Vec<Arc<AtomicUsize>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let clients: Vec<_> = (0..WRITERS)
        .map(|k| {
            let seed = 0x7f4a_7c15 + k as u64;
            let count = answered[k].clone();
            tokio::spawn(client(
                api.clone(),
                wallets.clone(),
                seed,
                stop.clone(),
                count,
            ))
        })
        .collect();
    every_client_answered_again(&answered, 3).await;
    let mut frozen = ha.freeze_pg_primary().await;
    let frozen_at = Instant::now();
    let readiness = tokio::spawn(readiness_answers(api.clone(), stop.clone()));
    let (new, new_port) = ha.wait_pg_primary(&frozen.node).await;
    let promoted_after = frozen_at.elapsed();
    tokio::time::sleep(FROZEN_AFTER_PROMOTION).await;
    stop.store(true, Ordering::Relaxed);
    let readiness = readiness.await.expect("the readiness poller ran");
    let thawed_at = Instant::now();
    frozen.thaw();
    let sent = all_accepted(clients).await;
    // The first write acknowledged after the promotion was seen: one answered earlier could be
    // a commit the old node made just before it froze.
    let promoted_at = frozen_at + promoted_after;
    let first_after = sent
        .iter()
        .map(|s| s.answer.at)
        .filter(|at| *at > promoted_at)
        .min()
        .expect("answers after the promotion");
    let resumed_after = first_after - frozen_at;
    crate::report(&format!(
        "{} transfers acknowledged; {} frozen, {new} promoted after {:.1} s; first 2xx {:.1} s \
         after the freeze, with the old node still frozen for {:.1} s more",
        sent.len(),
        frozen.node,
        promoted_after.as_secs_f64(),
        resumed_after.as_secs_f64(),
        thawed_at
            .saturating_duration_since(first_after)
            .as_secs_f64(),
    ));
    assert!(
        first_after < thawed_at,
        "no write succeeded while the old primary was frozen ({:.1} s after the promotion)",
        FROZEN_AFTER_PROMOTION.as_secs_f64()
    );
    assert!(
        resumed_after < Duration::from_secs(30),
        "writes resumed {resumed_after:?} after the freeze"
    );
    // Any 2xx a second past the freeze came from the new primary (the frozen node answers
    // nothing); the promotion as ha.sh sees it may come later than the service's switch.
    let first_write = sent
        .iter()
        .map(|s| s.answer.at)
        .filter(|at| *at > frozen_at + Duration::from_secs(1))
        .min()
        .expect("answers after the freeze");
    assert_ready_only_when_writes_succeed(&readiness, frozen_at, first_write);
    assert_each_acknowledged_once(&ha, &api, &sent, &wallets, new_port).await;
}

/// `/readyz` asked every 250 ms until `stop`: when, and its status (`None`: no answer).
async fn readiness_answers(api: Arc<Api>, stop: Arc<AtomicBool>) -> Vec<(Instant, Option<u16>)> {
    let mut answers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let status = api.readiness().await;
        answers.push((Instant::now(), status));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    answers
}

/// Issue 34: `/readyz` must not say ready while no write can succeed. From the freeze (plus
/// the 2 s a probe already under way may take) until writes resume, every readiness answer is
/// "not ready" but for the last 3 s before the first write, and it says ready again by then.
fn assert_ready_only_when_writes_succeed(
    answers: &[(Instant, Option<u16>)],
    frozen_at: Instant,
    writes_resumed: Instant,
) {
    let lies: Vec<f64> = answers
        .iter()
        .filter(|(at, status)| {
            *status == Some(200)
                && *at > frozen_at + Duration::from_secs(3)
                && *at + Duration::from_secs(3) < writes_resumed
        })
        .map(|(at, _)| (*at - frozen_at).as_secs_f64())
        .collect();
    assert!(
        lies.is_empty(),
        "/readyz said ready at {lies:?} s after the freeze, though writes resumed only after {:.1} s",
        (writes_resumed - frozen_at).as_secs_f64()
    );
    let ready_again = answers
        .iter()
        .any(|(at, status)| *status == Some(200) && *at > writes_resumed);
    assert!(ready_again, "/readyz said ready again once writes resumed");
}
