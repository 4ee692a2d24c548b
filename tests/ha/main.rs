//! High availability against real engines: a pg_auto_failover group (a monitor, a primary and a
//! synchronous standby) and a Redis master with a replica and three Sentinels, started by
//! `scripts/ha.sh` on loopback ports of their own, and a Redis Cluster of three masters and
//! three replicas started by `scripts/redis-cluster.sh`; primaries are lost to SIGKILL and the
//! engines, not this code, promote the standbys. Its own test binary (`cargo test --test ha`),
//! so the rest of the suite runs without these engines; the tests take turns, since each
//! topology alone keeps two cores busy.

/// The shared harness (tests/support) on the databases the tests start themselves.
mod common {
    pub use test_support::common::*;

    pub type TestApp = test_support::TestApp<test_support::Plain>;
}
use test_support::stream_support;

mod client;
mod cluster_topology;
mod postgres;
mod redis_cluster;
mod redis_sentinel;
mod topology;

/// A measurement for the log: written to stderr directly, which the test harness does not
/// capture, so CI's log shows it for passing tests too.
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "ha: {line}");
}

/// What each wallet should hold once every payment of `amount` in `payments` is applied once.
fn expected_balances(
    payments: &[(uuid::Uuid, String)],
    amount: i64,
) -> std::collections::BTreeMap<String, i64> {
    let mut expected = std::collections::BTreeMap::new();
    for (_, wallet) in payments {
        *expected.entry(wallet.clone()).or_default() += amount;
    }
    expected
}

/// Reads the balances with `read` until they equal `expected` or two minutes pass (consumers
/// catching up after a failover); returns the last reading.
async fn settled_balances<F, Fut>(
    expected: &std::collections::BTreeMap<String, i64>,
    mut read: F,
) -> std::collections::BTreeMap<String, i64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::collections::BTreeMap<String, i64>>,
{
    let within = std::time::Duration::from_secs(120);
    let settled = common::poll(within, || {
        let reading = read();
        async move { Some(reading.await).filter(|actual| actual == expected) }
    })
    .await;
    match settled {
        Some(actual) => actual,
        None => read().await,
    }
}

/// A producer that must not lose a payment: payments of `amount` to `wallets` in turn,
/// `group_of` at a time, each to its wallet's partition stream of `base` (with one partition,
/// `base` itself), each stream's share of a group confirmed by one replica (`WAIT 1`) and sent
/// again, same event ids, until it is; a pause between groups.
struct Producer {
    url: String,
    base: String,
    partitions: wallet_ledger::consumer::partition::Partitions,
    wallets: Vec<String>,
    group_of: usize,
    pause: std::time::Duration,
    amount: i64,
}

impl Producer {
    /// Publishes until `stop`; returns the payments confirmed, as (event id, wallet).
    async fn run(
        self,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Vec<(uuid::Uuid, String)> {
        use wallet_ledger::consumer::producer::{Confirmation, publish_confirmed};
        let confirmation = Confirmation {
            replicas: 1,
            retry_for: std::time::Duration::from_secs(120),
        };
        let mut confirmed = Vec::new();
        let mut n = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let mut by_stream: std::collections::BTreeMap<String, Vec<(uuid::Uuid, String)>> =
                Default::default();
            for _ in 0..self.group_of {
                let wallet = self.wallets[n % self.wallets.len()].clone();
                n += 1;
                by_stream
                    .entry(self.partitions.stream_for(&self.base, &wallet))
                    .or_default()
                    .push((uuid::Uuid::new_v4(), wallet));
            }
            for (stream, group) in by_stream {
                let messages: Vec<Vec<(String, String)>> = group
                    .iter()
                    .map(|(id, wallet)| {
                        stream_support::payment(*id, wallet, &self.amount.to_string())
                    })
                    .collect();
                publish_confirmed(&self.url, &stream, &messages, confirmation)
                    .await
                    .expect("every group confirmed in the end");
                confirmed.extend(group);
            }
            tokio::time::sleep(self.pause).await;
        }
        confirmed
    }
}
