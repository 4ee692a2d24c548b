//! The API scenarios against a `serve` child: transfers between random wallets, transfers
//! from one hot wallet, top-ups through one clearing account, replays of one transfer, and
//! independent 1,000-item batches. Every plan is made before the clock starts, so the bench
//! knows each wallet's balance to expect and checks the ledger against it afterwards.

use super::client::{
    self, Api, CURRENCY, Request, Rng, balance_differences, batch_created, created, run_load,
    transaction_body, wallet_balances, wallet_ids,
};
use super::report::{self, Check, CpuClock, Measurement};
use super::server::Server;
use super::sets;
use super::{Bench, TransferPairs};
use crate::ledger::MAX_BATCH_ITEMS;
use crate::ledger::accounts::AccountType;
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use sqlx::{Connection, PgConnection};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;
use uuid::Uuid;

/// Transfer and payment amounts are 1 to this many minor units: small, so that the funding
/// that covers every planned debit stays far from any limit.
const MAX_AMOUNT: u64 = 100;
/// The provider of `api-topups`: its clearing account is `clearing:bench:SAR`.
const PROVIDER: &str = "bench";

/// Which wallets the transfers debit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Random distinct wallets (`api-transfers`, `api-batch`).
    Spread,
    /// Always the first wallet, crediting random others (`api-hot`).
    Hot,
}

struct Transfer {
    id: Uuid,
    from: usize,
    to: usize,
    amount: i64,
}

fn plan_transfers(count: u64, wallets: u64, shape: Shape, seed: u64) -> Vec<Transfer> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| {
            let from = match shape {
                Shape::Spread => rng.below(wallets) as usize,
                Shape::Hot => 0,
            };
            let to = (from + 1 + rng.below(wallets - 1) as usize) % wallets as usize;
            Transfer {
                id: Uuid::new_v4(),
                from,
                to,
                amount: 1 + rng.below(MAX_AMOUNT) as i64,
            }
        })
        .collect()
}

/// Where a wallet sits on a Citus cluster: its shard of `accounts` and the worker holding it
/// (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    worker: String,
    shard: i64,
}

/// `plan_transfers` for `Spread`, with each transfer's `to` drawn among the wallets that stand
/// in `pairs` to its `from` (`places[i]` is wallet i's). `Any` is `plan_transfers` itself, the
/// same plan as on plain PostgreSQL. A wallet with no such partner is never a `from`.
fn plan_placed_transfers(
    count: u64,
    places: &[Place],
    pairs: TransferPairs,
    seed: u64,
) -> anyhow::Result<Vec<Transfer>> {
    if pairs == TransferPairs::Any {
        return Ok(plan_transfers(
            count,
            places.len() as u64,
            Shape::Spread,
            seed,
        ));
    }
    // Wallets sorted by worker, then shard: a worker's wallets and a shard's are then each one
    // run of `order`, and the partners of a wallet are one run less another.
    let mut order: Vec<usize> = (0..places.len()).collect();
    order.sort_by(|&a, &b| places[a].cmp(&places[b]));
    let first = |before: &dyn Fn(&Place) -> bool| order.partition_point(|&j| before(&places[j]));
    // For each wallet (by position in `order`): the run its partners are drawn from, less the
    // run inside it that they are not.
    let choices: Vec<(usize, Range<usize>, Range<usize>)> = (0..order.len())
        .map(|pos| {
            let me = &places[order[pos]];
            let shard = first(&|p| p < me)..first(&|p| p <= me);
            let worker = first(&|p| p.worker < me.worker)..first(&|p| p.worker <= me.worker);
            let (outer, inner) = match pairs {
                TransferPairs::Any | TransferPairs::SameShard => (shard, pos..pos + 1),
                TransferPairs::SameWorker => (worker, shard),
                TransferPairs::CrossWorker => (0..order.len(), worker),
            };
            (order[pos], outer, inner)
        })
        .filter(|(_, outer, inner)| outer.len() > inner.len())
        .collect();
    anyhow::ensure!(
        !choices.is_empty(),
        "--transfer-pairs {}: no two of the {} wallets are placed that way",
        pairs.name(),
        places.len()
    );
    let mut rng = Rng::new(seed);
    Ok((0..count)
        .map(|_| {
            let (from, outer, inner) = &choices[rng.below(choices.len() as u64) as usize];
            let mut pos = outer.start + rng.below((outer.len() - inner.len()) as u64) as usize;
            if pos >= inner.start {
                pos += inner.len();
            }
            Transfer {
                id: Uuid::new_v4(),
                from: *from,
                to: order[pos],
                amount: 1 + rng.below(MAX_AMOUNT) as i64,
            }
        })
        .collect())
}

/// How many transfers wrote their three rows (two wallets, the transaction) on one worker, on
/// two, on three: a transfer on one worker commits there in one phase, one on more with
/// two-phase commit. `tx_workers[i]` is the worker of `plan[i]`'s transaction row.
fn workers_spanned(
    plan: &[Transfer],
    places: &[Place],
    tx_workers: &[String],
) -> BTreeMap<usize, u64> {
    let mut spans = BTreeMap::new();
    for (t, tx) in plan.iter().zip(tx_workers) {
        let mut workers = vec![&places[t.from].worker, &places[t.to].worker, tx];
        workers.sort();
        workers.dedup();
        *spans.entry(workers.len()).or_default() += 1;
    }
    spans
}

/// Each wallet's shard and worker, read on the coordinator (in the order of `wallets`).
async fn wallet_places(pool: &PgPool, wallets: &[String]) -> anyhow::Result<Vec<Place>> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "select p.shardid, p.nodename || ':' || p.nodeport \
           from unnest($1::text[]) with ordinality w (id, n) \
           join pg_dist_shard_placement p \
             on p.shardid = get_shard_id_for_distribution_column('accounts', w.id) \
          order by w.n",
    )
    .bind(wallets)
    .fetch_all(pool)
    .await?;
    anyhow::ensure!(
        rows.len() == wallets.len(),
        "{} placements for {} wallets: each shard of accounts should have one",
        rows.len(),
        wallets.len()
    );
    Ok(rows
        .into_iter()
        .map(|(shard, worker)| Place { worker, shard })
        .collect())
}

/// The worker of each transfer's transaction row (`transactions` is distributed by id).
async fn transaction_workers(pool: &PgPool, plan: &[Transfer]) -> anyhow::Result<Vec<String>> {
    let ids: Vec<Uuid> = plan.iter().map(|t| t.id).collect();
    let workers: Vec<String> = sqlx::query_scalar(
        "select p.nodename || ':' || p.nodeport \
           from unnest($1::uuid[]) with ordinality t (id, n) \
           join pg_dist_shard_placement p \
             on p.shardid = get_shard_id_for_distribution_column('transactions', t.id) \
          order by t.n",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    anyhow::ensure!(
        workers.len() == plan.len(),
        "{} placements for {} transaction rows: each shard of transactions should have one",
        workers.len(),
        plan.len()
    );
    Ok(workers)
}

/// The postmaster of the PostgreSQL server at `url`, when it runs on this host: the parent of
/// the backend serving a connection to it.
async fn postmaster_of(url: &str) -> Option<u32> {
    let mut conn = PgConnection::connect(url).await.ok()?;
    let backend: i32 = sqlx::query_scalar("select pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{backend}/stat")).ok();
    let _ = conn.close().await;
    report::stat_parent(&stat?)
}

/// `host:port` of a server's URL.
fn server_name(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(format!(
        "{}:{}",
        parsed.host_str()?,
        parsed.port().unwrap_or(5432)
    ))
}

/// Every server of the bench database (the coordinator first, then each Citus worker), named
/// `host:port`, with its postmaster when it runs on this host.
async fn bench_servers(bench: &Bench) -> Vec<(String, u32)> {
    let mut servers = Vec::new();
    for url in std::iter::once(&bench.admin_url).chain(&bench.worker_admin_urls) {
        if let (Some(name), Some(pid)) = (server_name(url), postmaster_of(url).await) {
            servers.push((name, pid));
        }
    }
    servers
}

/// Every wallet is funded with the largest total any wallet's planned transfers debit, so no
/// order of arrival can refuse one; returns that funding and the balances to expect.
fn funding_and_expected(wallets: &[String], plan: &[Transfer]) -> (i64, HashMap<String, i64>) {
    let mut debits = vec![0i64; wallets.len()];
    let mut moved = vec![0i64; wallets.len()];
    for t in plan {
        debits[t.from] += t.amount;
        moved[t.from] -= t.amount;
        moved[t.to] += t.amount;
    }
    let funding = debits.iter().copied().max().unwrap_or(0).max(1);
    let expected = wallets
        .iter()
        .zip(moved)
        .map(|(w, m)| (w.clone(), funding + m))
        .collect();
    (funding, expected)
}

/// A scenario's server, key and wallets.
struct Setup {
    server: Server,
    api: Api,
    wallets: Vec<String>,
}

async fn setup(bench: &Bench, pool: &PgPool, label: &str, wallets: u64) -> anyhow::Result<Setup> {
    let wallets = wallet_ids(wallets);
    tracing::info!(wallets = wallets.len(), "{label}: creating wallets");
    client::create_accounts(pool, &wallets, AccountType::Wallet).await?;
    let (server, api) = bench.serve(pool, label).await?;
    Ok(Setup {
        server,
        api,
        wallets,
    })
}

/// Stops the server (a clean exit is part of the check), and records its peak memory first.
async fn finish(setup: Setup, m: &mut Measurement) {
    m.server_peak_rss_mib = setup.server.child.peak_rss_mib();
    let log = setup.server.child.log.clone();
    match setup.server.child.stop().await {
        Ok(status) => m.check.expect(status.success(), || {
            format!("serve exited with {status} (log: {})", log.display())
        }),
        Err(e) => m.check.expect(false, || format!("{e:#}")),
    }
}

/// The checks every transfer scenario shares: every answer as expected, one ledger row per
/// success, each wallet's balance as planned, the wallets' total as funded.
async fn check_transfers(
    pool: &PgPool,
    check: &mut Check,
    kind_count_sql: &'static str,
    expected_rows: i64,
    expected: &HashMap<String, i64>,
    funded_total: i64,
) -> anyhow::Result<()> {
    let rows = client::count(pool, kind_count_sql).await?;
    check.expect(rows == expected_rows, || {
        format!("{rows} posted transactions in the ledger, expected {expected_rows}")
    });
    let balances = wallet_balances(pool).await?;
    let differences = balance_differences(expected, &balances);
    check.expect(differences.is_empty(), || {
        format!("wallet balances differ: {}", differences.join(", "))
    });
    let total: i64 = balances.values().sum();
    check.expect(total == funded_total, || {
        format!("wallets hold {total} in total, funded {funded_total}")
    });
    Ok(())
}

/// Sends `requests` (single creates, each answered 201) over `--connections` connections and
/// measures them: the part `api-transfers`, `api-hot` and `api-topups` share.
async fn run_single_creates(
    bench: &Bench,
    setup: &Setup,
    name: &str,
    requests: Vec<Request>,
) -> anyhow::Result<(Measurement, client::LoadResult)> {
    let sizes = &bench.sizes;
    tracing::info!(
        requests = requests.len(),
        connections = sizes.connections,
        "{name}: running"
    );
    let clock = CpuClock::start(Some(setup.server.child.pid()));
    let result = run_load(
        &setup.api,
        sizes.connections as usize,
        Arc::new(requests),
        Arc::new(created),
    )
    .await?;
    let mut m = Measurement {
        scenario: name.into(),
        cpu: clock.stop(),
        ops: result.ok,
        errors: result.failed,
        ..Measurement::default()
    };
    m.params.insert("connections", sizes.connections.into());
    m.params.insert("accounts", sizes.accounts.into());
    m.params.insert("requests", sizes.requests.into());
    bench.server_params(&mut m);
    m.check.expect(result.failed == 0, || {
        format!(
            "{} of {} answers were not 201: {}",
            result.failed,
            sizes.requests,
            result.problems()
        )
    });
    Ok((m, result))
}

/// `api-transfers` and `api-hot`: one `POST /v1/transfers` per planned transfer.
pub async fn transfers(bench: &Bench, pool: &PgPool, shape: Shape) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    let name = match shape {
        Shape::Spread => "api-transfers",
        Shape::Hot => "api-hot",
    };
    let pairs = bench.transfer_pairs;
    let setup = setup(bench, pool, name, sizes.accounts).await?;
    // On Citus, where each wallet sits: what `--transfer-pairs` plans by, and what says how
    // many transfers committed on one worker.
    let places = if shape == Shape::Spread && !bench.worker_admin_urls.is_empty() {
        Some(wallet_places(pool, &setup.wallets).await?)
    } else {
        None
    };
    let plan = match &places {
        Some(places) => plan_placed_transfers(sizes.requests, places, pairs, 1)?,
        None => plan_transfers(sizes.requests, sizes.accounts, shape, 1),
    };
    let (funding, expected) = funding_and_expected(&setup.wallets, &plan);
    let funded: Vec<(String, i64)> = setup.wallets.iter().map(|w| (w.clone(), funding)).collect();
    client::fund(pool, &setup.api, &funded).await?;
    // Every wallet in one set: each entry then also writes the set's movement.
    let set_members = if bench.wallets_in_set {
        let took = sets::put_in_set(&setup.api, &sets::ALL_WALLETS_SET, &setup.wallets).await?;
        Some(took)
    } else {
        None
    };
    let requests: Vec<Request> = plan
        .iter()
        .map(|t| Request {
            path: "/v1/transfers",
            body: json!({"id": t.id, "from": setup.wallets[t.from], "to": setup.wallets[t.to],
                         "amount": t.amount})
            .to_string(),
            ops: 1,
        })
        .collect();

    // Each server's CPU apart (`db_cpu_pct` sums every postgres process of the host).
    let servers = bench_servers(bench).await;
    let before: Vec<Option<u64>> = servers
        .iter()
        .map(|(_, pid)| report::server_ticks(*pid))
        .collect();
    let (mut m, result) = run_single_creates(bench, &setup, name, requests).await?;
    let by_server: serde_json::Map<String, serde_json::Value> = servers
        .iter()
        .zip(before)
        .filter_map(|((server, pid), before)| {
            let used = report::server_ticks(*pid)?.saturating_sub(before?);
            Some((
                server.clone(),
                report::ticks_pct(used, m.cpu.seconds).into(),
            ))
        })
        .collect();
    m.extra.insert("db_cpu_pct_by_server", by_server.into());
    if shape == Shape::Spread {
        m.params.insert("transfer_pairs", pairs.name().into());
    }
    m.params
        .insert("wallets_in_set", bench.wallets_in_set.into());
    if let Some(took) = set_members {
        m.extra.insert(
            "member_adds_per_second",
            report::round(setup.wallets.len() as f64 / took.as_secs_f64().max(1e-9), 1).into(),
        );
        // Transfers between its members leave the set's total as funded.
        let funded_total = funding * setup.wallets.len() as i64;
        let view = setup
            .api
            .get_json(
                &setup.api.connection()?,
                &format!("/v1/account-sets/{}", sets::ALL_WALLETS_SET.id),
            )
            .await?;
        let posted = view["balances"]["posted"].as_i64();
        m.check.expect(posted == Some(funded_total), || {
            format!("the set of every wallet reads posted {posted:?}, expected {funded_total}")
        });
    }
    if !bench.worker_admin_urls.is_empty() {
        let workers: Vec<String> = bench
            .worker_admin_urls
            .iter()
            .filter_map(|url| server_name(url))
            .collect();
        m.params.insert("citus_workers", workers.into());
    }
    if let Some(places) = &places {
        let spans = workers_spanned(&plan, places, &transaction_workers(pool, &plan).await?);
        let spans: serde_json::Map<String, serde_json::Value> = spans
            .into_iter()
            .map(|(n, count)| (n.to_string(), count.into()))
            .collect();
        m.extra.insert("transfers_by_workers_written", spans.into());
    }
    check_transfers(
        pool,
        &mut m.check,
        "select count(*) from transactions where kind = 'transfer' and status = 'posted'",
        result.ok as i64,
        &expected,
        funding * setup.wallets.len() as i64,
    )
    .await?;
    m.latencies = result.latencies;
    finish(setup, &mut m).await;
    Ok(m)
}

/// `api-topups`: payments from one provider crediting random wallets.
pub async fn topups(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    let name = "api-topups";
    let setup = setup(bench, pool, name, sizes.accounts).await?;
    let mut rng = Rng::new(2);
    let mut expected: HashMap<String, i64> = HashMap::new();
    let mut total = 0i64;
    let requests: Vec<Request> = (0..sizes.requests)
        .map(|_| {
            let wallet = &setup.wallets[rng.below(sizes.accounts) as usize];
            let amount = 1 + rng.below(MAX_AMOUNT) as i64;
            *expected.entry(wallet.clone()).or_default() += amount;
            total += amount;
            Request {
                path: "/v1/payments",
                body: json!({"id": Uuid::new_v4(), "account": wallet, "amount": amount,
                             "currency": CURRENCY, "provider": PROVIDER})
                .to_string(),
                ops: 1,
            }
        })
        .collect();

    let (mut m, result) = run_single_creates(bench, &setup, name, requests).await?;
    m.params.insert("provider", PROVIDER.into());
    check_transfers(
        pool,
        &mut m.check,
        "select count(*) from transactions where kind = 'payment' and status = 'posted'",
        result.ok as i64,
        &expected,
        total,
    )
    .await?;
    // The clearing account's balance, as the ledger sums it and as the API answers it
    // (checkpoint plus the entries since).
    let clearing = format!("clearing:{PROVIDER}:{CURRENCY}");
    let summed: Option<i64> =
        sqlx::query_scalar("select sum(amount)::int8 from entries where account_id = $1")
            .bind(&clearing)
            .fetch_one(pool)
            .await?;
    m.check.expect(summed == Some(-total), || {
        format!("{clearing} entries sum to {summed:?}, expected {}", -total)
    });
    let view = setup
        .api
        .get_json(
            &setup.api.connection()?,
            &format!("/v1/accounts/{clearing}"),
        )
        .await?;
    let posted = view["balances"]["posted"].as_i64();
    m.check.expect(posted == Some(-total), || {
        format!(
            "GET /v1/accounts/{clearing} answers posted {posted:?}, expected {}",
            -total
        )
    });
    m.latencies = result.latencies;
    finish(setup, &mut m).await;
    Ok(m)
}

/// An answer that is the stored one replayed.
fn replayed(status: StatusCode, replayed: bool, body: &[u8], ops: u64) -> client::Verdict {
    if status == StatusCode::OK && replayed {
        client::Verdict {
            ok: ops,
            failed: 0,
            problem: None,
        }
    } else {
        client::Verdict {
            ok: 0,
            failed: ops,
            problem: Some(format!(
                "{status} replayed={replayed} {}",
                String::from_utf8_lossy(body)
            )),
        }
    }
}

/// `api-replay`: one transfer, then the same request again and again: first on one
/// connection (its latency is the point), then on `--replay-connections` (its throughput).
/// Two lines: `api-replay-1` and `api-replay-<connections>`.
pub async fn replay(bench: &Bench, pool: &PgPool) -> anyhow::Result<Vec<Measurement>> {
    let sizes = &bench.sizes;
    let name = "api-replay";
    let setup = setup(bench, pool, name, 2).await?;
    let funding = 1_000;
    let amount = 100;
    client::fund(pool, &setup.api, &[(setup.wallets[0].clone(), funding)]).await?;
    let id = Uuid::new_v4();
    let body =
        json!({"id": id, "from": setup.wallets[0], "to": setup.wallets[1], "amount": amount})
            .to_string();
    let first = setup
        .api
        .post(&setup.api.connection()?, "/v1/transfers", body.clone())
        .send()
        .await?;
    let first_status = first.status();

    let mut lines = Vec::new();
    for (connections, requests) in [
        (1, sizes.replay_requests / 10),
        (sizes.replay_connections, sizes.replay_requests),
    ] {
        let load: Vec<Request> = (0..requests)
            .map(|_| Request {
                path: "/v1/transfers",
                body: body.clone(),
                ops: 1,
            })
            .collect();
        tracing::info!(requests, connections, "{name}: running");
        let clock = CpuClock::start(Some(setup.server.child.pid()));
        let result = run_load(
            &setup.api,
            connections as usize,
            Arc::new(load),
            Arc::new(replayed),
        )
        .await?;
        let mut m = Measurement {
            scenario: format!("api-replay-{connections}"),
            cpu: clock.stop(),
            ops: result.ok,
            errors: result.failed,
            ..Measurement::default()
        };
        m.params.insert("connections", connections.into());
        m.params.insert("requests", requests.into());
        bench.server_params(&mut m);
        m.check.expect(first_status == StatusCode::CREATED, || {
            format!("the first request answered {first_status}, expected 201")
        });
        m.check.expect(result.failed == 0, || {
            format!(
                "{} of {requests} answers were not 200 with Idempotent-Replayed: true: {}",
                result.failed,
                result.problems()
            )
        });
        m.latencies = result.latencies;
        lines.push(m);
    }

    // The ledger holds the one transfer, whatever was replayed.
    let transfers = client::count(
        pool,
        "select count(*) from transactions where kind = 'transfer'",
    )
    .await?;
    let stored: i64 = sqlx::query_scalar("select count(*) from transactions where id = $1")
        .bind(id)
        .fetch_one(pool)
        .await?;
    let balances = wallet_balances(pool).await?;
    let expected: HashMap<String, i64> = [
        (setup.wallets[0].clone(), funding - amount),
        (setup.wallets[1].clone(), amount),
    ]
    .into();
    let differences = balance_differences(&expected, &balances);
    let peak = setup.server.child.peak_rss_mib();
    let mut stopped = Measurement::default();
    finish(setup, &mut stopped).await;
    for m in &mut lines {
        m.check.expect(transfers == 1 && stored == 1, || {
            format!(
                "{transfers} transfers in the ledger ({stored} with the replayed id), expected 1"
            )
        });
        m.check.expect(differences.is_empty(), || {
            format!("wallet balances differ: {}", differences.join(", "))
        });
        if !stopped.check.passed() {
            m.check.expect(false, || stopped.check.verdict());
        }
        m.server_peak_rss_mib = peak;
    }
    Ok(lines)
}

/// `api-batch`: independent batches of 1,000 transfers (as two-leg transactions) between
/// random distinct wallets. `per_second` counts items.
pub async fn batch(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    let name = "api-batch";
    let per_batch = MAX_BATCH_ITEMS;
    let items = sizes.batches * per_batch;
    let setup = setup(bench, pool, name, sizes.accounts).await?;
    let plan = plan_transfers(items, sizes.accounts, Shape::Spread, 3);
    let (funding, expected) = funding_and_expected(&setup.wallets, &plan);
    let funded: Vec<(String, i64)> = setup.wallets.iter().map(|w| (w.clone(), funding)).collect();
    let funding_rows = client::fund(pool, &setup.api, &funded).await?;
    let requests: Vec<Request> = plan
        .chunks(per_batch as usize)
        .map(|chunk| {
            let items: Vec<String> = chunk
                .iter()
                .map(|t| {
                    transaction_body(t.id, &setup.wallets[t.from], &setup.wallets[t.to], t.amount)
                })
                .collect();
            Request {
                path: "/v1/transactions/batch",
                body: format!(r#"{{"mode":"independent","items":[{}]}}"#, items.join(",")),
                ops: chunk.len() as u64,
            }
        })
        .collect();

    tracing::info!(
        batches = requests.len(),
        connections = sizes.batch_connections,
        "{name}: running"
    );
    let clock = CpuClock::start(Some(setup.server.child.pid()));
    let result = run_load(
        &setup.api,
        sizes.batch_connections as usize,
        Arc::new(requests),
        Arc::new(batch_created),
    )
    .await?;
    let mut m = Measurement {
        scenario: name.into(),
        cpu: clock.stop(),
        ops: result.ok,
        errors: result.failed,
        ..Measurement::default()
    };
    m.params
        .insert("connections", sizes.batch_connections.into());
    m.params.insert("accounts", sizes.accounts.into());
    m.params.insert("batches", sizes.batches.into());
    m.params.insert("items_per_batch", per_batch.into());
    m.extra.insert("latency_is", "per batch".into());
    bench.server_params(&mut m);
    m.check.expect(result.failed == 0, || {
        format!(
            "{} of {items} items were not 201: {}",
            result.failed,
            result.problems()
        )
    });
    check_transfers(
        pool,
        &mut m.check,
        "select count(*) from transactions where kind = 'transaction' and status = 'posted'",
        result.ok as i64 + funding_rows as i64,
        &expected,
        funding * setup.wallets.len() as i64,
    )
    .await?;
    m.latencies = result.latencies;
    finish(setup, &mut m).await;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// 13 wallets: on worker a, shards 1 (wallets 0, 3, 6), 2 (1, 4) and 3 (7, alone on its
    /// shard); on worker b, shards 4 (2, 5, 8, 9) and 5 (10, 11, 12).
    fn places() -> Vec<Place> {
        let at = |worker: &str, shard| Place {
            worker: worker.into(),
            shard,
        };
        vec![
            at("a", 1),
            at("a", 2),
            at("b", 4),
            at("a", 1),
            at("a", 2),
            at("b", 4),
            at("a", 1),
            at("a", 3),
            at("b", 4),
            at("b", 4),
            at("b", 5),
            at("b", 5),
            at("b", 5),
        ]
    }

    fn related(pairs: TransferPairs, a: &Place, b: &Place) -> bool {
        match pairs {
            TransferPairs::Any => true,
            TransferPairs::SameShard => a == b,
            TransferPairs::SameWorker => a.worker == b.worker && a.shard != b.shard,
            TransferPairs::CrossWorker => a.worker != b.worker,
        }
    }

    #[test]
    fn each_transfer_pairs_its_wallets_as_asked_and_every_such_pair_is_drawn() {
        let places = places();
        for &pairs in TransferPairs::ALL {
            let plan = plan_placed_transfers(20_000, &places, pairs, 7).unwrap();
            assert_eq!(plan.len(), 20_000);
            let drawn: BTreeSet<(usize, usize)> = plan.iter().map(|t| (t.from, t.to)).collect();
            let possible: BTreeSet<(usize, usize)> = (0..places.len())
                .flat_map(|i| (0..places.len()).map(move |j| (i, j)))
                .filter(|&(i, j)| i != j && related(pairs, &places[i], &places[j]))
                .collect();
            assert_eq!(drawn, possible, "{pairs:?}");
            assert!(
                plan.iter()
                    .all(|t| (1..=MAX_AMOUNT as i64).contains(&t.amount)),
                "{pairs:?}"
            );
        }
        // Wallet 7 is alone on its shard: never a same-shard transfer's.
        let plan = plan_placed_transfers(2_000, &places, TransferPairs::SameShard, 7).unwrap();
        assert!(plan.iter().all(|t| t.from != 7 && t.to != 7));
    }

    #[test]
    fn any_is_the_plan_of_plain_postgresql() {
        let placed = plan_placed_transfers(500, &places(), TransferPairs::Any, 1).unwrap();
        let plain = plan_transfers(500, 13, Shape::Spread, 1);
        let pairs = |plan: &[Transfer]| -> Vec<(usize, usize, i64)> {
            plan.iter().map(|t| (t.from, t.to, t.amount)).collect()
        };
        assert_eq!(pairs(&placed), pairs(&plain));
    }

    #[test]
    fn a_placement_without_such_pairs_is_refused() {
        let one_worker: Vec<Place> = places()
            .into_iter()
            .map(|p| Place {
                worker: "a".into(),
                ..p
            })
            .collect();
        let e = plan_placed_transfers(10, &one_worker, TransferPairs::CrossWorker, 1)
            .err()
            .unwrap();
        assert!(e.to_string().contains("no two of the 13 wallets"), "{e}");
        let one_each: Vec<Place> = (0..3)
            .map(|shard| Place {
                worker: "a".into(),
                shard,
            })
            .collect();
        assert!(plan_placed_transfers(10, &one_each, TransferPairs::SameShard, 1).is_err());
    }

    #[test]
    fn transfers_count_the_workers_their_three_rows_are_on() {
        let places = places();
        let transfer = |from, to| Transfer {
            id: Uuid::nil(),
            from,
            to,
            amount: 1,
        };
        // a,a + a; a,a + b; a,b + a; a,b + b; b,b + b.
        let plan = [
            transfer(0, 3),
            transfer(0, 1),
            transfer(0, 2),
            transfer(1, 2),
            transfer(2, 5),
        ];
        let tx: Vec<String> = ["a", "b", "a", "b", "b"].map(String::from).to_vec();
        let spans = workers_spanned(&plan, &places, &tx);
        assert_eq!(spans, BTreeMap::from([(1, 2), (2, 3)]));
    }
}
