//! `consumer`: payment events on a stream of this run's own (10% of them resent, as a producer
//! does after a timeout), spread over `--consumer-partitions` partition streams by wallet,
//! applied by a `consume` child process. The clock runs from the child's start until the group
//! has nothing pending or unread on any partition and the ledger holds every payment.

use super::BENCH_CONSUMER_RESEND_PERCENT;
use super::Bench;
use super::client::{self, balance_differences, wallet_balances, wallet_ids};
use super::report::{CpuClock, Measurement};
use super::server::Child;
use crate::broker::Connection;
use crate::consumer::partition::Partitions;
use crate::consumer::producer::{Published, publish_payments_to};
use crate::consumer::stream::DEFAULT_GROUP;
use crate::ledger::accounts::AccountType;
use anyhow::bail;
use redis::AsyncCommands;
use redis::streams::StreamInfoGroupsReply;
use sqlx::PgPool;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Minor units per published payment (50.00).
pub const PAYMENT_AMOUNT: i64 = 5_000;
/// How often the backlog is polled: small next to a run of seconds.
const POLL: Duration = Duration::from_millis(20);
/// A backlog that does not move for this long means the consumer is stuck.
const STALL: Duration = Duration::from_secs(120);

/// A stream name of this run's own (the shared Redis is never flushed), remembered so that an
/// interrupted run can still delete it.
pub fn unique_stream(bench: &Bench) -> String {
    let stream = format!("bench-{}", uuid::Uuid::new_v4().simple());
    bench.remember_stream(&stream);
    stream
}

/// Deletes the partition streams of `stream` and what the consumer keeps beside them, one
/// partition (one cluster slot) per command.
pub async fn delete_stream(redis: &mut Connection, stream: &str, partitions: Partitions) {
    for partition in partitions.streams(stream) {
        let keys = [
            partition.clone(),
            format!("{partition}.dlq"),
            format!("{partition}.failures.{DEFAULT_GROUP}"),
        ];
        if let Err(e) = redis.del::<_, ()>(&keys).await {
            tracing::warn!(stream = partition, "could not delete the bench stream: {e}");
        }
    }
}

/// `consume` on the bench database and `stream`, with `extra` flags.
pub fn start_consumer(
    bench: &Bench,
    stream: &str,
    log: &str,
    extra: &[&str],
) -> anyhow::Result<Child> {
    let mut args: Vec<String> = [
        "consume",
        "--database-url",
        &bench.database_url,
        "--redis-url",
        &bench.redis_url,
        "--stream",
        stream,
        "--group",
        DEFAULT_GROUP,
        "--consumer",
        "bench",
        "--batch-size",
        &bench.sizes.consumer_batch_size.to_string(),
        "--workers",
        &bench.sizes.consumer_workers.to_string(),
        "--block-ms",
        "200",
        "--partitions",
        &bench.sizes.consumer_partitions.count().to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    Child::spawn(&bench.binary, &args, bench.log(log), "consume")
}

/// (pending, lag) of the group summed over the partitions; `None` before the consumer created
/// the group on every partition that has messages.
async fn backlog(
    redis: &mut Connection,
    stream: &str,
    partitions: Partitions,
) -> anyhow::Result<Option<(u64, u64)>> {
    let mut total = (0u64, 0u64);
    for partition in partitions.streams(stream) {
        let exists: bool = redis.exists(&partition).await?;
        if !exists {
            // A partition no wallet maps to stays missing until the consumer creates its group.
            return Ok(None);
        }
        let groups: StreamInfoGroupsReply = redis.xinfo_groups(&partition).await?;
        let Some((pending, lag)) = groups
            .groups
            .into_iter()
            .find(|g| g.name == DEFAULT_GROUP)
            .map(|g| (g.pending as u64, g.lag.map_or(u64::MAX, |l| l as u64)))
        else {
            return Ok(None);
        };
        total = (total.0 + pending, total.1.saturating_add(lag));
    }
    Ok(Some(total))
}

/// Waits until the group has read and acknowledged everything and the ledger holds `payments`
/// posted payments. Fails when the consumer exits or stops making progress.
pub async fn wait_applied(
    redis: &mut Connection,
    pool: &PgPool,
    stream: &str,
    partitions: Partitions,
    consumer: &mut Child,
    payments: i64,
) -> anyhow::Result<()> {
    let mut last = None;
    let mut moved = Instant::now();
    loop {
        if let Some(status) = consumer.exited() {
            bail!(
                "the consumer exited ({status}) before it applied everything; its log: {}",
                consumer.log.display()
            );
        }
        let now = backlog(redis, stream, partitions).await?;
        if now == Some((0, 0)) {
            let stored = client::count(
                pool,
                "select count(*) from transactions where kind = 'payment' and status = 'posted'",
            )
            .await?;
            if stored >= payments {
                return Ok(());
            }
        }
        if now != last {
            last = now;
            moved = Instant::now();
        } else if moved.elapsed() > STALL {
            bail!(
                "the consumer made no progress for {} s (pending and lag {now:?}); its log: {}",
                STALL.as_secs(),
                consumer.log.display()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What the published payments should have done to each wallet.
pub fn expected_balances(published: &[Published]) -> HashMap<String, i64> {
    let mut expected = HashMap::new();
    for p in published {
        *expected.entry(p.wallet.clone()).or_default() += p.amount;
    }
    expected
}

pub async fn run(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let mut redis = crate::broker::connect(&bench.redis_url).await?;
    let stream = unique_stream(bench);
    let measured = measure(bench, pool, &mut redis, &stream).await;
    delete_stream(&mut redis, &stream, bench.sizes.consumer_partitions).await;
    measured
}

async fn measure(
    bench: &Bench,
    pool: &PgPool,
    redis: &mut Connection,
    stream: &str,
) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    let wallets = wallet_ids(sizes.accounts);
    tracing::info!(wallets = wallets.len(), "consumer: creating wallets");
    client::create_accounts(pool, &wallets, AccountType::Wallet).await?;
    tracing::info!(
        payments = sizes.consumer_payments,
        stream,
        "consumer: publishing"
    );
    let published = publish_payments_to(
        redis,
        stream,
        sizes.consumer_partitions,
        sizes.consumer_payments as usize,
        &wallets,
        PAYMENT_AMOUNT,
        BENCH_CONSUMER_RESEND_PERCENT,
    )
    .await?;
    let messages: usize = published.iter().map(|p| p.stream_ids.len()).sum();
    let payments = published.len() as i64;

    tracing::info!(
        messages,
        batch_size = sizes.consumer_batch_size,
        "consumer: consuming"
    );
    // The clock starts before the child does: its start-up is part of the time.
    let mut clock = CpuClock::start(None);
    let mut consumer = start_consumer(bench, stream, "consume", &[])?;
    clock.follow_new_child(consumer.pid());
    wait_applied(
        redis,
        pool,
        stream,
        sizes.consumer_partitions,
        &mut consumer,
        payments,
    )
    .await?;
    let cpu = clock.stop();
    let peak = consumer.peak_rss_mib();
    let stopped = consumer.stop().await;

    let mut m = Measurement {
        scenario: "consumer".into(),
        ops: messages as u64,
        cpu,
        server_peak_rss_mib: peak,
        ..Measurement::default()
    };
    m.params.insert("payments", sizes.consumer_payments.into());
    m.params.insert("messages", messages.into());
    m.params.insert("accounts", sizes.accounts.into());
    m.params
        .insert("batch_size", sizes.consumer_batch_size.into());
    m.params.insert("workers", sizes.consumer_workers.into());
    m.params
        .insert("partitions", sizes.consumer_partitions.count().into());
    m.params.insert(
        "redis",
        if redis.is_cluster() {
            "cluster"
        } else {
            "server"
        }
        .into(),
    );
    m.params
        .insert("resend_percent", BENCH_CONSUMER_RESEND_PERCENT.into());
    m.extra.insert(
        "payments_per_second",
        super::report::round(payments as f64 / m.cpu.seconds.max(1e-9), 1).into(),
    );
    match stopped {
        Ok(status) => m.check.expect(status.success(), || {
            format!("consume exited with {status} on SIGTERM")
        }),
        Err(e) => m.check.expect(false, || format!("{e:#}")),
    }
    let stored = client::count(
        pool,
        "select count(*) from transactions where kind = 'payment' and status = 'posted'",
    )
    .await?;
    m.check.expect(stored == payments, || {
        format!("{stored} payments in the ledger, published {payments}")
    });
    let differences = balance_differences(
        &expected_balances(&published),
        &wallet_balances(pool).await?,
    );
    m.check.expect(differences.is_empty(), || {
        format!("wallet balances differ: {}", differences.join(", "))
    });
    let mut dead = 0;
    for partition in sizes.consumer_partitions.streams(stream) {
        let n: usize = redis.xlen(format!("{partition}.dlq")).await?;
        dead += n;
    }
    m.check
        .expect(dead == 0, || format!("{dead} dead letters, expected 0"));
    Ok(m)
}
