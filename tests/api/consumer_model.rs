//! Model test of the consumer: random streams of consistent event sequences per payment
//! (authorized then captured, succeeded or failed; refunds within what was captured; resends
//! by the producer), consumed by 1 and by 4 workers with batches of 1 and of 50, must end in
//! the balances and statuses that the event × state table gives when applied in order by a
//! reference model: nothing pending, nothing dead-lettered, the ledger's invariants whole.
//! With several workers one payment's events are applied out of stream order; the table must
//! still land every payment where the in-order model does.

use super::common::{Rng, TestApp};
use super::stream_support::{
    GROUP, consume, dead_letters, describe, forget, pending, redis_at, run_to_end,
    shared_redis_url, unique_stream,
};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;
use wallet_ledger::reconcile::invariants;

const WALLETS: [&str; 5] = ["m0", "m1", "m2", "m3", "m4"];

/// One event as the producer writes it.
type Fields = Vec<(String, String)>;

/// Where the model says a payment ends.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    status: &'static str,
    /// Credited to the wallet and posted.
    posted: i64,
    /// Still held (a pending authorization).
    held: i64,
    /// Refund ids and amounts, each posted once.
    refunds: Vec<(Uuid, i64)>,
}

struct Scenario {
    /// The stream, in order: every payment's events in its own order, interleaved, with
    /// resends of some events later on.
    stream: Vec<Fields>,
    payments: BTreeMap<Uuid, (String, Expected)>,
}

fn fields(kind: &str, payment: Uuid, wallet: &str, amount: i64) -> Fields {
    vec![
        ("event_id".into(), Uuid::new_v4().to_string()),
        ("type".into(), kind.into()),
        ("payment_id".into(), payment.to_string()),
        ("wallet".into(), wallet.into()),
        ("amount".into(), amount.to_string()),
    ]
}

/// One payment's events and where the table, applied in order, leaves it.
fn lifecycle(rng: &mut Rng, payment: Uuid, wallet: &str) -> (Vec<Fields>, Expected) {
    let amount = 100 + rng.below(9_900) as i64;
    let partial = 1 + rng.below(amount as u64) as i64;
    let event = |kind: &str, amount: i64| fields(kind, payment, wallet, amount);
    let ended = |status, posted, held| Expected {
        status,
        posted,
        held,
        refunds: Vec::new(),
    };
    let (mut events, mut expected) = match rng.below(7) {
        0 => (
            vec![event("payment.succeeded", amount)],
            ended("posted", amount, 0),
        ),
        1 => (
            vec![
                event("payment.authorized", amount),
                event("payment.captured", partial),
            ],
            ended("posted", partial, 0),
        ),
        2 => (
            vec![
                event("payment.authorized", amount),
                event("payment.succeeded", amount),
            ],
            ended("posted", amount, 0),
        ),
        3 => (
            vec![
                event("payment.authorized", amount),
                event("payment.failed", amount),
            ],
            ended("voided", 0, 0),
        ),
        4 => (vec![event("payment.failed", amount)], ended("voided", 0, 0)),
        5 => (
            vec![event("payment.authorized", amount)],
            ended("pending", 0, amount),
        ),
        _ => (
            vec![
                event("payment.authorized", amount),
                event("payment.captured", amount),
            ],
            ended("posted", amount, 0),
        ),
    };
    // Refunds of a posted payment, within what was posted.
    if expected.status == "posted" && rng.below(3) == 0 {
        let mut left = expected.posted;
        for _ in 0..=rng.below(2) {
            if left == 0 {
                break;
            }
            let refund = 1 + rng.below(left as u64) as i64;
            left -= refund;
            let refund_id = Uuid::new_v4();
            let mut e = event("payment.refunded", refund);
            e.push(("refund_id".into(), refund_id.to_string()));
            events.push(e);
            expected.refunds.push((refund_id, refund));
        }
    }
    (events, expected)
}

fn scenario(seed: u64, payments: usize) -> Scenario {
    let mut rng = Rng(seed);
    let mut sequences: Vec<std::collections::VecDeque<Fields>> = Vec::new();
    let mut expected = BTreeMap::new();
    for _ in 0..payments {
        let payment = Uuid::new_v4();
        let wallet = rng.pick(&WALLETS).to_string();
        let (events, end) = lifecycle(&mut rng, payment, &wallet);
        sequences.push(events.into());
        expected.insert(payment, (wallet, end));
    }
    // Interleave: take the next event of a random payment that has one left.
    let mut stream: Vec<Fields> = Vec::new();
    let mut resends: Vec<(usize, Fields)> = Vec::new();
    while sequences.iter().any(|s| !s.is_empty()) {
        let open: Vec<usize> = (0..sequences.len())
            .filter(|&i| !sequences[i].is_empty())
            .collect();
        let i = *rng.pick(&open);
        let event = sequences[i].pop_front().unwrap();
        // About one event in eight is sent again a little later (a producer's retry).
        if rng.below(8) == 0 {
            resends.push((stream.len() + 1 + rng.below(40) as usize, event.clone()));
        }
        stream.push(event);
    }
    resends.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, event) in resends {
        stream.insert(at.min(stream.len()), event);
    }
    Scenario {
        stream,
        payments: expected,
    }
}

async fn account(app: &TestApp, id: &str) -> (i64, i64) {
    let r = app.get(&format!("/v1/accounts/{id}")).await;
    (
        r.body["balances"]["posted"].as_i64().unwrap(),
        r.body["balances"]["pending_in"].as_i64().unwrap(),
    )
}

async fn status(app: &TestApp, id: Uuid) -> String {
    let r = app.get(&format!("/v1/transactions/{id}")).await;
    r.body["status"].as_str().unwrap_or("absent").to_owned()
}

async fn consume_scenario(scenario: &Scenario, workers: usize, batch: usize) {
    let what = format!("{workers} workers, batches of {batch}");
    let app = TestApp::new().await;
    for wallet in WALLETS {
        app.create_wallet(wallet).await;
    }
    let stream = unique_stream("model");
    let mut redis = redis_at(&shared_redis_url()).await;
    let mut pipe = redis::pipe();
    for event in &scenario.stream {
        pipe.xadd(&stream, "*", event).ignore();
    }
    let _: () = pipe.query_async(&mut redis).await.unwrap();

    let (workers_flag, batch_flag) = (workers.to_string(), batch.to_string());
    let flags = [
        "--drain",
        "--workers",
        &workers_flag,
        "--batch-size",
        &batch_flag,
        "--max-failures",
        "20",
    ];
    let output = run_to_end(
        consume(&app, &stream, "model", &flags),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what}: {}",
        describe(&output)
    );
    assert_eq!(pending(&mut redis, &stream).await, 0, "{what}: pending");
    let dead = dead_letters(&mut redis, &stream).await;
    assert!(dead.is_empty(), "{what}: dead letters {dead:?}");

    let mut wallets: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (payment, (wallet, end)) in &scenario.payments {
        assert_eq!(
            status(&app, *payment).await,
            end.status,
            "{what}: payment {payment} {end:?}"
        );
        let refunded: i64 = end.refunds.iter().map(|(_, r)| r).sum();
        let balance = wallets.entry(wallet.as_str()).or_default();
        balance.0 += end.posted - refunded;
        balance.1 += end.held;
        for (refund, _) in &end.refunds {
            assert_eq!(
                status(&app, *refund).await,
                "posted",
                "{what}: refund {refund}"
            );
        }
    }
    for wallet in WALLETS {
        let want = wallets.get(wallet).copied().unwrap_or_default();
        assert_eq!(
            account(&app, wallet).await,
            want,
            "{what}: {wallet} (posted, pending_in)"
        );
    }
    let findings = invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        chrono::TimeDelta::seconds(60),
    )
    .await
    .unwrap();
    assert_eq!(findings, [], "{what}: the ledger's invariants");
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

#[tokio::test]
async fn any_number_of_workers_and_any_batch_size_end_where_the_table_applied_in_order_does() {
    let seed = std::env::var("MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Uuid::new_v4().as_u64_pair().0);
    eprintln!("consumer model: MODEL_SEED={seed}");
    let scenario = scenario(seed, 150);
    for (workers, batch) in [(1, 1), (1, 50), (4, 1), (4, 50)] {
        consume_scenario(&scenario, workers, batch).await;
    }
}
