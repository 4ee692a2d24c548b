//! `set-read`: the latency of an account set's balance read at 10 members and at
//! `--set-members` (10,000), which should not grow with the members: a set's posted balance is
//! its latest checkpoint plus the movements since, its pending amounts the copies of its
//! members' open holds (docs/performance.md, "Account sets"). Also what puts every wallet of
//! `api-transfers --wallets-in-set` in one set.
//!
//! The serve child runs with its checkpointer out of the way (`--checkpoint-interval-ms` of a
//! day: it runs once when serve starts, before any set exists); the bench advances the
//! checkpoints itself, with the function that checkpointer calls, at a known moment. So what
//! each measured read sums is known exactly: one checkpoint row, then the movements of the
//! transfers made after it, and no open holds.

use super::Bench;
use super::client::{
    self, Api, FUNDING_ACCOUNT, Request, Rng, batch_created, created, run_load, transaction_body,
    wallet_ids,
};
use super::history::{Reads, timed_reads};
use super::report::{Measurement, round};
use crate::ledger::accounts::AccountType;
use serde_json::{Map, Value, json};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The small set's members, the figure the largest set is compared with.
pub const SMALL_SET_MEMBERS: u64 = 10;
/// A set of the bench: its id and the path its members are added through (static, as every
/// load request's path is).
pub struct BenchSet {
    pub id: &'static str,
    pub members_path: &'static str,
}
/// The small set, then the large one.
const SETS: [BenchSet; 2] = [
    BenchSet {
        id: "bench-set-small",
        members_path: "/v1/account-sets/bench-set-small/members",
    },
    BenchSet {
        id: "bench-set-large",
        members_path: "/v1/account-sets/bench-set-large/members",
    },
];
/// The set every wallet of `api-transfers --wallets-in-set` joins.
pub const ALL_WALLETS_SET: BenchSet = BenchSet {
    id: "bench-set-all",
    members_path: "/v1/account-sets/bench-set-all/members",
};
/// Connections adding members (membership changes serialize on the set graph's lock anyway;
/// a few keep the server busy meanwhile).
const MEMBER_CONNECTIONS: usize = 8;
/// Each wallet's funding, before it joins: its join movement carries it.
const FUNDING: i64 = 1_000_000;
/// After the checkpoint, per set: transfers between two of its members (two movements each,
/// the total unchanged) and payments from the funding account to one (one movement each).
const TRANSFERS_AFTER_CHECKPOINT: u64 = 500;
const TOPUPS_AFTER_CHECKPOINT: u64 = 500;
/// The serve child's checkpoint interval: a day, so that only the bench advances them.
const CHECKPOINT_INTERVAL_MS: &str = "86400000";
/// How long the bench keeps advancing the checkpoints until they cover every join (an old
/// transaction of another session holds the horizon back meanwhile).
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(120);

/// Transfers among the members of a set of `members` after its checkpoint (none without two).
fn transfers_among(members: u64) -> u64 {
    if members > 1 {
        TRANSFERS_AFTER_CHECKPOINT
    } else {
        0
    }
}

/// 10 members, then `max` (just `max` when it is 10 or fewer).
pub fn set_sizes(max: u64) -> Vec<u64> {
    if max > SMALL_SET_MEMBERS {
        vec![SMALL_SET_MEMBERS, max]
    } else {
        vec![max]
    }
}

/// Creates `set` through the API and adds every wallet of `wallets` to it, on
/// `MEMBER_CONNECTIONS` connections; returns how long the members took.
pub async fn put_in_set(api: &Api, set: &BenchSet, wallets: &[String]) -> anyhow::Result<Duration> {
    let response = api
        .post(
            &api.connection()?,
            "/v1/account-sets",
            json!({"id": set.id, "currency": client::CURRENCY}).to_string(),
        )
        .send()
        .await?;
    let status = response.status();
    anyhow::ensure!(
        status.as_u16() == 201,
        "POST /v1/account-sets {}: {status} {}",
        set.id,
        response.text().await?
    );
    let requests: Vec<Request> = wallets
        .iter()
        .map(|wallet| Request {
            path: set.members_path,
            body: json!({"type": "account", "id": wallet}).to_string(),
            ops: 1,
        })
        .collect();
    tracing::info!(set = set.id, members = wallets.len(), "adding members");
    let started = Instant::now();
    let added = run_load(
        api,
        MEMBER_CONNECTIONS,
        Arc::new(requests),
        Arc::new(created),
    )
    .await?;
    anyhow::ensure!(
        added.failed == 0,
        "{} of {} members of {} were not added (201): {}",
        added.failed,
        wallets.len(),
        set.id,
        added.problems()
    );
    Ok(started.elapsed())
}

/// The set's latest checkpoint's movement count (0 without one), and the movements since it.
async fn checkpoint_state(pool: &PgPool, set: &str) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "with cp as (select below_xid, movement_count from account_set_checkpoints
                      where set_id = $1 order by below_xid desc limit 1)
         select coalesce((select movement_count from cp), 0)::int8,
                (select count(*) from account_set_movements
                  where set_id = $1
                    and xid >= coalesce((select below_xid from cp), '0'::xid8))::int8",
    )
    .bind(set)
    .fetch_one(pool)
    .await?)
}

/// Advances the checkpoints, as serve's checkpointer does, until each of `sets` has one that
/// covers `movements` of its movements (every one written so far).
async fn checkpoint(pool: &PgPool, sets: &[(&str, i64)]) -> anyhow::Result<()> {
    let engine = crate::db::Engine::detect_on(pool).await?;
    let until = Instant::now() + CHECKPOINT_TIMEOUT;
    loop {
        {
            let mut conn = pool.acquire().await?;
            let mut db = crate::ledger::store::Db::new(&mut conn, engine);
            crate::ledger::store::checkpoints::advance(&mut db).await?;
        }
        let mut covered = true;
        for (set, movements) in sets {
            covered &= checkpoint_state(pool, set).await?.0 == *movements;
        }
        if covered {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < until,
            "the sets' checkpoints did not cover their joins within {} s (a transaction open \
             elsewhere holds the horizon back?)",
            CHECKPOINT_TIMEOUT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a set's reads measured, as the line reports it.
fn read_figures(reads: &mut Reads) -> Value {
    json!({
        "p50_ms": reads.latencies.percentile_ms(50.0),
        "p99_ms": reads.latencies.percentile_ms(99.0),
    })
}

pub async fn set_read(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let name = "set-read";
    let sizes = set_sizes(bench.sizes.set_members);
    let reads = bench.sizes.balance_reads;
    let started = Instant::now();
    let wallets = wallet_ids(sizes.iter().sum());
    // Each set's wallets, apart: a wallet in both would write two movements per entry.
    let mut members: Vec<&[String]> = Vec::new();
    let mut first = 0;
    for size in &sizes {
        members.push(&wallets[first..first + *size as usize]);
        first += *size as usize;
    }
    // The sets in use: the large one alone when there is one size.
    let sets: Vec<&BenchSet> = SETS[SETS.len() - sizes.len()..].iter().collect();
    tracing::info!(
        wallets = wallets.len(),
        "{name}: creating and funding wallets"
    );
    client::create_accounts(pool, &wallets, AccountType::Wallet).await?;
    // Unless the flags already set it: then the checkpointer may fold movements in while the
    // reads are measured, and the line says so.
    let own_interval = !bench
        .server_args
        .iter()
        .any(|a| a.starts_with("--checkpoint-interval-ms"));
    let extra: Vec<String> = if own_interval {
        vec![format!("--checkpoint-interval-ms={CHECKPOINT_INTERVAL_MS}")]
    } else {
        Vec::new()
    };
    let (server, api) = bench.serve_with(pool, name, &extra).await?;
    let funded: Vec<(String, i64)> = wallets.iter().map(|w| (w.clone(), FUNDING)).collect();
    client::fund(pool, &api, &funded).await?;

    let mut m = Measurement {
        scenario: name.into(),
        ..Measurement::default()
    };
    let mut adds = Duration::ZERO;
    for (set, members) in sets.iter().zip(&members) {
        adds += put_in_set(&api, set, members).await?;
    }
    let reader = api.connection()?;
    let mut expected: Vec<i64> = sizes.iter().map(|s| *s as i64 * FUNDING).collect();
    for (set, posted) in sets.iter().zip(&expected) {
        let view = api
            .get_json(&reader, &format!("/v1/account-sets/{}", set.id))
            .await?;
        let read = view["balances"]["posted"].as_i64();
        m.check.expect(read == Some(*posted), || {
            format!(
                "{} after its joins: posted {read:?}, expected {posted}",
                set.id
            )
        });
    }

    // For context, the largest set before any checkpoint: its read sums every join.
    let largest = sets.len() - 1;
    let path = format!("/v1/account-sets/{}", sets[largest].id);
    tracing::info!(reads, "{name}: reading the largest set before a checkpoint");
    let mut unchecked = timed_reads(
        &api,
        &reader,
        &path,
        reads,
        expected[largest],
        Some(server.child.pid()),
    )
    .await?;
    m.check.expect(unchecked.errors == 0, || {
        format!(
            "{} reads of {} before its checkpoint did not answer posted {}: {}",
            unchecked.errors,
            sets[largest].id,
            expected[largest],
            unchecked.problem.clone().unwrap_or_default()
        )
    });
    let mut without_checkpoint = read_figures(&mut unchecked);
    without_checkpoint["members"] = json!(sizes[largest]);
    without_checkpoint["movements_summed"] = json!(sizes[largest]);

    tracing::info!("{name}: advancing the checkpoints");
    let joins: Vec<(&str, i64)> = sets
        .iter()
        .zip(&sizes)
        .map(|(set, size)| (set.id, *size as i64))
        .collect();
    checkpoint(pool, &joins).await?;

    // After the checkpoint: transfers among each set's members, and top-ups into them.
    let mut rng = Rng::new(5);
    let mut items = Vec::new();
    for (i, members) in members.iter().enumerate() {
        let n = members.len() as u64;
        for _ in 0..transfers_among(n) {
            let from = rng.below(n) as usize;
            let to = (from + 1 + rng.below(n - 1) as usize) % n as usize;
            let amount = 1 + rng.below(100) as i64;
            items.push(transaction_body(
                Uuid::new_v4(),
                &members[from],
                &members[to],
                amount,
            ));
        }
        for _ in 0..TOPUPS_AFTER_CHECKPOINT {
            let to = rng.below(n) as usize;
            let amount = 1 + rng.below(100) as i64;
            expected[i] += amount;
            items.push(transaction_body(
                Uuid::new_v4(),
                FUNDING_ACCOUNT,
                &members[to],
                amount,
            ));
        }
    }
    let moved = run_load(
        &api,
        2,
        Arc::new(client::batch_requests(&items)),
        Arc::new(batch_created),
    )
    .await?;
    m.check.expect(moved.failed == 0, || {
        format!(
            "{} transfers after the checkpoint were not 201: {}",
            moved.failed,
            moved.problems()
        )
    });

    let mut p50s = Map::new();
    let mut p99s = Map::new();
    let mut since = Map::new();
    let mut first_p50 = None;
    for (i, set) in sets.iter().enumerate() {
        let (_, movements) = checkpoint_state(pool, set.id).await?;
        since.insert(sizes[i].to_string(), movements.into());
        if own_interval {
            let planned = (2 * transfers_among(sizes[i]) + TOPUPS_AFTER_CHECKPOINT) as i64;
            m.check.expect(movements == planned, || {
                format!(
                    "{}: {movements} movements since its checkpoint, expected {planned}",
                    set.id
                )
            });
        }
        let path = format!("/v1/account-sets/{}", set.id);
        tracing::info!(members = sizes[i], reads, "{name}: reading the set");
        let Reads {
            mut latencies,
            cpu,
            errors,
            problem,
        } = timed_reads(
            &api,
            &reader,
            &path,
            reads,
            expected[i],
            Some(server.child.pid()),
        )
        .await?;
        m.check.expect(errors == 0, || {
            format!(
                "{errors} reads of {} ({} members) did not answer posted {}: {}",
                set.id,
                sizes[i],
                expected[i],
                problem.unwrap_or_default()
            )
        });
        let p50 = latencies.percentile_ms(50.0);
        first_p50.get_or_insert(p50);
        p50s.insert(sizes[i].to_string(), json!(p50));
        p99s.insert(sizes[i].to_string(), json!(latencies.percentile_ms(99.0)));
        // The line's main figures are those of the largest set.
        m.ops = reads - errors;
        m.errors = errors;
        m.cpu = cpu;
        m.latencies = latencies;
    }
    let largest_p50 = m.latencies.percentile_ms(50.0);
    m.params.insert("set_members", sizes[largest].into());
    m.params.insert("reads_per_size", reads.into());
    m.params.insert(
        "checkpoint_interval_ms",
        if own_interval {
            CHECKPOINT_INTERVAL_MS.into()
        } else {
            "as --server-arg gives".into()
        },
    );
    bench.server_params(&mut m);
    m.extra.insert("p50_ms_by_members", Value::Object(p50s));
    m.extra.insert("p99_ms_by_members", Value::Object(p99s));
    m.extra.insert(
        "p50_ratio_largest_to_first",
        match (first_p50.flatten(), largest_p50) {
            (Some(first), Some(last)) if first > 0.0 => json!(round(last / first, 2)),
            _ => Value::Null,
        },
    );
    m.extra.insert(
        "movements_since_checkpoint_by_members",
        Value::Object(since),
    );
    m.extra.insert("open_holds", 0.into());
    m.extra
        .insert("largest_without_checkpoint", without_checkpoint);
    m.extra.insert(
        "member_adds_per_second",
        round(wallets.len() as f64 / adds.as_secs_f64().max(1e-9), 1).into(),
    );
    m.extra.insert(
        "setup_seconds",
        round(started.elapsed().as_secs_f64(), 1).into(),
    );
    m.extra.insert(
        "latency_is",
        "per sequential set balance read, largest set, after its checkpoint".into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_sizes_are_ten_and_the_largest() {
        assert_eq!(set_sizes(10_000), vec![10, 10_000]);
        assert_eq!(set_sizes(11), vec![10, 11]);
        assert_eq!(set_sizes(10), vec![10]);
        assert_eq!(set_sizes(3), vec![3]);
    }

    #[test]
    fn every_set_path_names_its_set() {
        for set in SETS.iter().chain([&ALL_WALLETS_SET]) {
            assert_eq!(
                set.members_path,
                format!("/v1/account-sets/{}/members", set.id)
            );
        }
    }
}
