//! Scenarios about a grown ledger. `balance-read`: the latency of one wallet's balance read
//! as its history grows to a million entries (it should not grow with it: the balance is the
//! last entry's running balance, one index lookup). `reconcile`: a `reconcile` child process
//! on a large settlement file with a known handful of deliberate exceptions.

use super::Bench;
use super::client::{
    self, FUNDING_ACCOUNT, Rng, batch_created, run_load, transaction_body, wallet_ids,
};
use super::consumer::{PAYMENT_AMOUNT, delete_stream, start_consumer, unique_stream, wait_applied};
use super::report::{CpuClock, Latencies, Measurement, round};
use super::server::Child;
use crate::consumer::producer::publish_payments_to;
use crate::ledger::accounts::AccountType;
use serde_json::{Map, Value, json};
use sqlx::PgPool;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The history sizes measured, up to `--balance-read-max-entries`.
const HISTORY_STEPS: [u64; 3] = [1_000, 100_000, 1_000_000];
/// Batches in flight while a history is built: every item credits the same wallet, so its
/// row lock serializes them anyway; a second one keeps the server busy meanwhile.
const BUILD_CONNECTIONS: usize = 2;
/// Reads before the measured ones at each size (connection, caches, prepared statements).
const WARM_UP_READS: u64 = 200;
/// The wallet whose history grows.
const HISTORY_WALLET: &str = "w-history";

/// 1,000, 100,000, 1,000,000 entries, as far as `max` allows, and `max` itself.
fn history_sizes(max: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = HISTORY_STEPS.into_iter().filter(|s| *s < max).collect();
    sizes.push(max);
    sizes
}

pub async fn balance_read(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    let name = "balance-read";
    client::create_accounts(pool, &[HISTORY_WALLET.to_owned()], AccountType::Wallet).await?;
    client::create_accounts(pool, &[FUNDING_ACCOUNT.to_owned()], AccountType::System).await?;
    let (server, api) = bench.serve(pool, name).await?;
    let reader = api.connection()?;
    let path = format!("/v1/accounts/{HISTORY_WALLET}");
    let mut rng = Rng::new(4);
    let mut entries = 0u64;
    let mut total = 0i64;
    let mut build = Duration::ZERO;
    let mut m = Measurement {
        scenario: name.into(),
        ..Measurement::default()
    };
    let mut p50s = Map::new();
    let mut first_p50 = None;
    for target in history_sizes(sizes.balance_read_max_entries) {
        // Payments into the wallet from the funding account, as 1,000-item batches.
        let items: Vec<String> = (entries..target)
            .map(|_| {
                let amount = 1 + rng.below(100) as i64;
                total += amount;
                transaction_body(Uuid::new_v4(), FUNDING_ACCOUNT, HISTORY_WALLET, amount)
            })
            .collect();
        let requests = client::batch_requests(&items);
        tracing::info!(from = entries, to = target, "{name}: building the history");
        let started = Instant::now();
        let built = run_load(
            &api,
            BUILD_CONNECTIONS,
            Arc::new(requests),
            Arc::new(batch_created),
        )
        .await?;
        build += started.elapsed();
        m.check.expect(built.failed == 0, || {
            format!(
                "{} history items were not 201: {}",
                built.failed,
                built.problems()
            )
        });
        entries = target;

        tracing::info!(
            entries,
            reads = sizes.balance_reads,
            "{name}: reading the balance"
        );
        let Reads {
            mut latencies,
            cpu,
            errors,
            problem,
        } = timed_reads(
            &api,
            &reader,
            &path,
            sizes.balance_reads,
            total,
            Some(server.child.pid()),
        )
        .await?;
        m.check.expect(errors == 0, || {
            format!(
                "{errors} balance reads at {entries} entries did not answer posted {total}: {}",
                problem.unwrap_or_default()
            )
        });
        let p50 = latencies.percentile_ms(50.0);
        first_p50.get_or_insert(p50);
        p50s.insert(entries.to_string(), json!(p50));
        // The line's main figures are those of the largest history.
        m.ops = sizes.balance_reads - errors;
        m.errors = errors;
        m.cpu = cpu;
        m.latencies = latencies;
    }
    let largest = m.latencies.percentile_ms(50.0);
    let stored = client::count(
        pool,
        "select count(*) from entries where account_id = 'w-history'",
    )
    .await?;
    m.check.expect(stored as u64 == entries, || {
        format!("the wallet has {stored} entries, expected {entries}")
    });
    m.params.insert("max_entries", entries.into());
    m.params
        .insert("reads_per_size", sizes.balance_reads.into());
    m.params
        .insert("build_connections", BUILD_CONNECTIONS.into());
    bench.server_params(&mut m);
    m.extra.insert("p50_ms_by_entries", Value::Object(p50s));
    m.extra.insert(
        "p50_ratio_largest_to_first",
        match (first_p50.flatten(), largest) {
            (Some(first), Some(last)) if first > 0.0 => json!(round(last / first, 2)),
            _ => Value::Null,
        },
    );
    m.extra
        .insert("build_seconds", round(build.as_secs_f64(), 1).into());
    m.extra.insert(
        "build_entries_per_second",
        round(entries as f64 / build.as_secs_f64().max(1e-9), 1).into(),
    );
    m.extra.insert(
        "latency_is",
        "per sequential balance read, largest history".into(),
    );
    m.server_peak_rss_mib = server.child.peak_rss_mib();
    let log = server.child.log.clone();
    match server.child.stop().await {
        Ok(status) => m.check.expect(status.success(), || {
            format!("serve exited with {status} (log: {})", log.display())
        }),
        Err(e) => m.check.expect(false, || format!("{e:#}")),
    }
    Ok(m)
}

/// What `timed_reads` measured.
pub(super) struct Reads {
    pub latencies: Latencies,
    pub cpu: super::report::CpuUse,
    /// Answers that were not 200 with `balances.posted` as expected.
    pub errors: u64,
    /// The first such answer.
    pub problem: Option<String>,
}

/// `WARM_UP_READS` untimed reads of `path` (at most `reads`), then `reads` sequential timed
/// ones on the one connection `reader`, each checked to answer 200 with `balances.posted`
/// equal to `posted`. `child`: the server whose CPU the phase reports.
pub(super) async fn timed_reads(
    api: &client::Api,
    reader: &reqwest::Client,
    path: &str,
    reads: u64,
    posted: i64,
    child: Option<u32>,
) -> anyhow::Result<Reads> {
    for _ in 0..WARM_UP_READS.min(reads) {
        api.get_json(reader, path).await?;
    }
    let clock = CpuClock::start(child);
    let mut latencies = Latencies::with_capacity(reads as usize);
    let mut errors = 0;
    let mut problem = None;
    for _ in 0..reads {
        let started = Instant::now();
        let answer = async {
            let response = api.get(reader, path).send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.bytes().await?))
        }
        .await;
        latencies.record(started.elapsed());
        let read = answer.as_ref().ok().and_then(|(status, body)| {
            (status.as_u16() == 200)
                .then(|| serde_json::from_slice::<Value>(body).ok())
                .flatten()
                .and_then(|v| v["balances"]["posted"].as_i64())
        });
        if read != Some(posted) {
            errors += 1;
            problem.get_or_insert_with(|| match &answer {
                Ok((status, body)) => format!("{status} {}", String::from_utf8_lossy(body)),
                Err(e) => e.to_string(),
            });
        }
    }
    Ok(Reads {
        latencies,
        cpu: clock.stop(),
        errors,
        problem,
    })
}

/// Deliberate exceptions of each kind in the settlement file.
const DELIBERATE: u64 = 10;
/// Payments published and applied per round while the ledger side is built: the stream stays
/// small on the shared Redis (the consumer trims what it acknowledged).
const SETUP_CHUNK: usize = 50_000;
/// The consumer's default provider: its clearing account is `clearing:default:SAR`.
const PROVIDER: &str = "default";

/// Payment ids in the ledger, built through the stream consumer (the fastest way in that
/// creates real `payment` transactions through the ledger's write path; the batch endpoint
/// creates `transaction`s, which reconciliation rightly ignores).
async fn ledger_payments(bench: &Bench, pool: &PgPool, count: u64) -> anyhow::Result<Vec<Uuid>> {
    let wallets = wallet_ids(bench.sizes.accounts);
    client::create_accounts(pool, &wallets, AccountType::Wallet).await?;
    let mut redis = crate::broker::connect(&bench.redis_url).await?;
    let stream = unique_stream(bench);
    let built = async {
        let mut consumer: Child = start_consumer(
            bench,
            &stream,
            "consume-reconcile-setup",
            &["--trim-interval-ms", "1000"],
        )?;
        let mut ids = Vec::with_capacity(count as usize);
        while (ids.len() as u64) < count {
            let n = SETUP_CHUNK.min(count as usize - ids.len());
            let partitions = bench.sizes.consumer_partitions;
            let published = publish_payments_to(
                &mut redis,
                &stream,
                partitions,
                n,
                &wallets,
                PAYMENT_AMOUNT,
                0,
            )
            .await?;
            ids.extend(published.iter().map(|p| p.event_id));
            wait_applied(
                &mut redis,
                pool,
                &stream,
                partitions,
                &mut consumer,
                ids.len() as i64,
            )
            .await?;
            tracing::info!(payments = ids.len(), "reconcile: ledger payments applied");
        }
        consumer.stop().await?;
        Ok::<_, anyhow::Error>(ids)
    }
    .await;
    delete_stream(&mut redis, &stream, bench.sizes.consumer_partitions).await;
    built
}

/// Minor units as the file's decimal major units (SAR: two decimals), without floats.
fn major(minor: i64) -> String {
    format!("{}.{:02}", minor / 100, minor % 100)
}

pub async fn reconcile(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let rows = bench.sizes.reconcile_rows;
    let period_from = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    tracing::info!(payments = rows, "reconcile: building the ledger side");
    let started = Instant::now();
    let ids = ledger_payments(bench, pool, rows).await?;
    // A production PostgreSQL's autovacuum would have analyzed a million new payments long
    // before their settlement file arrives; this machine's runs without it (`show
    // autovacuum`), and plans made on empty-table statistics are not what is measured here.
    sqlx::query("analyze").execute(pool).await?;
    let setup = started.elapsed();

    // The file: every payment but the last DELIBERATE (missing at the provider), the first
    // DELIBERATE with one minor unit more (amount mismatches), and DELIBERATE payments the
    // ledger never saw (missing in the ledger).
    let file = bench.dir.join("settlement.csv");
    let settled_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file)?);
        writeln!(out, "payment_id,amount,currency,status,settled_at")?;
        let in_file = &ids[..ids.len() - DELIBERATE as usize];
        for (i, id) in in_file.iter().enumerate() {
            let amount = PAYMENT_AMOUNT + i64::from((i as u64) < DELIBERATE);
            writeln!(out, "{id},{},SAR,settled,{settled_at}", major(amount))?;
        }
        for _ in 0..DELIBERATE {
            writeln!(
                out,
                "{},{},SAR,settled,{settled_at}",
                Uuid::new_v4(),
                major(PAYMENT_AMOUNT)
            )?;
        }
        out.flush()?;
    }
    let out_dir = bench.dir.join("reconcile-report");
    let period_to = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let args: Vec<String> = vec![
        "reconcile".into(),
        "--database-url".into(),
        bench.database_url.clone(),
        "--provider".into(),
        PROVIDER.into(),
        "--settlement".into(),
        file.display().to_string(),
        "--out".into(),
        out_dir.display().to_string(),
        // The ledger's payments were made just now: a period around now and no settlement
        // lag put all of them in the window.
        "--from".into(),
        period_from.to_rfc3339(),
        "--to".into(),
        period_to.to_rfc3339(),
        "--settlement-lag-hours".into(),
        "0".into(),
    ];

    tracing::info!(rows, "reconcile: running the job");
    let clock = CpuClock::start(None);
    let child = Child::spawn(&bench.binary, &args, bench.log("reconcile"), "reconcile")?;
    let log = child.log.clone();
    let finished = child.finish().await?;
    let mut cpu = clock.stop();
    cpu.server_pct = Some(round(
        finished.cpu.as_secs_f64() / cpu.seconds.max(1e-9) * 100.0,
        1,
    ));

    let mut m = Measurement {
        scenario: "reconcile".into(),
        ops: rows,
        cpu,
        server_peak_rss_mib: Some(finished.peak_rss_mib),
        ..Measurement::default()
    };
    m.params.insert("rows", rows.into());
    m.params
        .insert("ledger_payments", (ids.len() as u64).into());
    m.params
        .insert("deliberate_exceptions_per_kind", DELIBERATE.into());
    m.extra
        .insert("setup_seconds", round(setup.as_secs_f64(), 1).into());
    m.extra.insert("latency_is", "none (one job)".into());
    m.check.expect(finished.code == Some(1), || {
        format!(
            "reconcile exited {:?}, expected 1 (exceptions found); log: {}",
            finished.code,
            log.display()
        )
    });
    let report: Value = std::fs::read_to_string(out_dir.join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let summary = &report["summary"];
    m.check.expect(!summary.is_null(), || {
        format!("no readable report.json in {}", out_dir.display())
    });
    if !summary.is_null() {
        use crate::reconcile::model::ExceptionCode;
        let expected = |code: ExceptionCode| match code {
            ExceptionCode::MissingInLedger
            | ExceptionCode::MissingAtProvider
            | ExceptionCode::AmountMismatch => DELIBERATE as i64,
            _ => 0,
        };
        for code in ExceptionCode::ALL {
            let found = summary["exceptions"][code.as_str()].as_i64();
            m.check.expect(found == Some(expected(code)), || {
                format!("{code}: {found:?}, expected {}", expected(code))
            });
        }
        let matched = summary["matched"].as_i64();
        let expected_matched = (rows - 2 * DELIBERATE) as i64;
        m.check.expect(matched == Some(expected_matched), || {
            format!("matched {matched:?}, expected {expected_matched}")
        });
        let ledger = summary["ledger_payments"].as_i64();
        m.check.expect(ledger == Some(ids.len() as i64), || {
            format!("ledger_payments {ledger:?}, expected {}", ids.len())
        });
        let findings = summary["invariant_findings"].as_i64();
        m.check.expect(findings == Some(0), || {
            format!("invariant_findings {findings:?}, expected 0")
        });
        m.extra.insert("exceptions", summary["exceptions"].clone());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_sizes_stop_at_the_maximum() {
        assert_eq!(history_sizes(1_000_000), vec![1_000, 100_000, 1_000_000]);
        assert_eq!(history_sizes(50_000), vec![1_000, 50_000]);
        assert_eq!(history_sizes(500), vec![500]);
    }

    #[test]
    fn amounts_are_written_in_major_units() {
        assert_eq!(major(5_000), "50.00");
        assert_eq!(major(5_001), "50.01");
        assert_eq!(major(7), "0.07");
    }
}
