//! The benchmark's client side: an HTTP/1.1 keep-alive connection per task with the bench's
//! API key, a load runner (each task sends its share of the requests one after another and
//! times each), and the setup every API scenario shares: wallets, and their funding through
//! the batch endpoint.

use super::report::Latencies;
use crate::ledger::MAX_BATCH_ITEMS;
use crate::ledger::accounts::{self, AccountType, NewAccount};
use crate::ledger::ids::AccountId;
use crate::ledger::money::Currency;
use anyhow::{Context, anyhow};
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Every scenario's accounts hold this currency.
pub const CURRENCY: &str = "SAR";
/// The system account that funds wallets before a scenario starts.
pub const FUNDING_ACCOUNT: &str = "bench:funding";
/// A request that takes longer than this is counted as an error (not a hang).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a running load logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);
/// Unexpected answers quoted in a failed check.
const QUOTED_PROBLEMS: usize = 3;

/// The server's address and the bench's key.
#[derive(Clone)]
pub struct Api {
    pub base_url: String,
    authorization: String,
}

impl Api {
    pub fn new(base_url: String, token: &str) -> Api {
        Api {
            base_url,
            authorization: format!("Bearer {token}"),
        }
    }

    /// A client that keeps one connection alive: one per task, so `connections` tasks are
    /// exactly that many connections.
    pub fn connection(&self) -> anyhow::Result<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .tcp_nodelay(true)
            .timeout(REQUEST_TIMEOUT)
            .build()?)
    }

    pub fn get(&self, client: &reqwest::Client, path: &str) -> reqwest::RequestBuilder {
        client
            .get(format!("{}{path}", self.base_url))
            .header("authorization", &self.authorization)
    }

    pub fn post(
        &self,
        client: &reqwest::Client,
        path: &str,
        body: String,
    ) -> reqwest::RequestBuilder {
        client
            .post(format!("{}{path}", self.base_url))
            .header("authorization", &self.authorization)
            .header("content-type", "application/json")
            .body(body)
    }

    /// `GET path` as JSON; an answer other than 200 is an error.
    pub async fn get_json(&self, client: &reqwest::Client, path: &str) -> anyhow::Result<Value> {
        let response = self.get(client, path).send().await?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(status == StatusCode::OK, "GET {path}: {status} {text}");
        Ok(serde_json::from_str(&text)?)
    }
}

/// One request of a load: a POST of a prepared body, worth `ops` operations (1, or a batch's
/// items).
pub struct Request {
    pub path: &'static str,
    pub body: String,
    pub ops: u64,
}

/// How one answer went: operations that succeeded, that failed, and why.
pub struct Verdict {
    pub ok: u64,
    pub failed: u64,
    pub problem: Option<String>,
}

/// Judges an answer: status, whether `Idempotent-Replayed: true` was set, the body.
pub type Judge = dyn Fn(StatusCode, bool, &[u8], u64) -> Verdict + Send + Sync;

/// 201 for each single create.
pub fn created(status: StatusCode, _replayed: bool, body: &[u8], ops: u64) -> Verdict {
    if status == StatusCode::CREATED {
        Verdict {
            ok: ops,
            failed: 0,
            problem: None,
        }
    } else {
        Verdict {
            ok: 0,
            failed: ops,
            problem: Some(format!("{status} {}", String::from_utf8_lossy(body))),
        }
    }
}

#[derive(Deserialize)]
struct BatchAnswer {
    results: Vec<ItemAnswer>,
}

#[derive(Deserialize)]
struct ItemAnswer {
    status: u16,
    body: Value,
}

/// A batch answered 200 with every item 201.
pub fn batch_created(status: StatusCode, _replayed: bool, body: &[u8], ops: u64) -> Verdict {
    let parsed = (status == StatusCode::OK)
        .then(|| serde_json::from_slice::<BatchAnswer>(body).ok())
        .flatten();
    let Some(answer) = parsed else {
        return Verdict {
            ok: 0,
            failed: ops,
            problem: Some(format!("batch: {status} {}", String::from_utf8_lossy(body))),
        };
    };
    let ok = answer.results.iter().filter(|r| r.status == 201).count() as u64;
    let problem = answer
        .results
        .iter()
        .find(|r| r.status != 201)
        .map(|r| format!("batch item: {} {}", r.status, r.body));
    Verdict {
        ok,
        failed: ops - ok.min(ops),
        problem,
    }
}

/// What a load did.
#[derive(Default)]
pub struct LoadResult {
    pub ok: u64,
    pub failed: u64,
    pub latencies: Latencies,
    /// The first few unexpected answers, for the check's message.
    pub problems: Vec<String>,
}

impl LoadResult {
    pub fn problems(&self) -> String {
        self.problems.join(" | ")
    }
}

/// Sends `requests` over `connections` tasks: task i sends requests i, i + C, i + 2C, ...
/// one after another, timing each from send to the last byte of its answer.
pub async fn run_load(
    api: &Api,
    connections: usize,
    requests: Arc<Vec<Request>>,
    judge: Arc<Judge>,
) -> anyhow::Result<LoadResult> {
    let connections = connections.max(1);
    let total_ops: u64 = requests.iter().map(|r| r.ops).sum();
    let done = Arc::new(AtomicU64::new(0));
    // Aborted when the load ends, however it ends.
    let _progress = AbortOnDrop(tokio::spawn(report_progress(Arc::clone(&done), total_ops)));
    let mut tasks = Vec::with_capacity(connections);
    for task in 0..connections {
        let client = api.connection()?;
        let api = api.clone();
        let requests = Arc::clone(&requests);
        let judge = Arc::clone(&judge);
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut result = LoadResult {
                latencies: Latencies::with_capacity(requests.len() / connections + 1),
                ..LoadResult::default()
            };
            for request in requests.iter().skip(task).step_by(connections) {
                let started = Instant::now();
                let answer = async {
                    let response = api
                        .post(&client, request.path, request.body.clone())
                        .send()
                        .await?;
                    let status = response.status();
                    let replayed = response
                        .headers()
                        .get("idempotent-replayed")
                        .is_some_and(|v| v == "true");
                    let body = response.bytes().await?;
                    Ok::<_, reqwest::Error>((status, replayed, body))
                }
                .await;
                result.latencies.record(started.elapsed());
                done.fetch_add(request.ops, Ordering::Relaxed);
                let verdict = match answer {
                    Ok((status, replayed, body)) => judge(status, replayed, &body, request.ops),
                    Err(e) => Verdict {
                        ok: 0,
                        failed: request.ops,
                        problem: Some(format!("{}: {e}", request.path)),
                    },
                };
                result.ok += verdict.ok;
                result.failed += verdict.failed;
                if let Some(problem) = verdict.problem
                    && result.problems.len() < QUOTED_PROBLEMS
                {
                    result.problems.push(problem);
                }
            }
            result
        }));
    }
    let mut total = LoadResult::default();
    for task in tasks {
        let part = task.await.context("a load task panicked")?;
        total.ok += part.ok;
        total.failed += part.failed;
        total.latencies.extend(part.latencies);
        for problem in part.problems {
            if total.problems.len() < QUOTED_PROBLEMS {
                total.problems.push(problem);
            }
        }
    }
    Ok(total)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Long loads (a hot wallet runs for minutes) say how far they are, on stderr.
async fn report_progress(done: Arc<AtomicU64>, total: u64) {
    let mut last = 0;
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let now = done.load(Ordering::Relaxed);
        tracing::info!(
            done = now,
            total,
            per_second = (now - last) / PROGRESS_EVERY.as_secs(),
            "load in progress"
        );
        last = now;
    }
}

/// Wallet ids `w000000`, `w000001`, ...
pub fn wallet_ids(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("w{i:06}")).collect()
}

/// Creates accounts with the ledger's own function (as `POST /v1/accounts` does), on a few
/// connections at once.
pub async fn create_accounts(
    pool: &PgPool,
    ids: &[String],
    kind: AccountType,
) -> anyhow::Result<()> {
    const WORKERS: usize = 8;
    let currency = Currency::parse(CURRENCY).ok_or_else(|| anyhow!("unknown currency"))?;
    let new: Vec<NewAccount> = ids
        .iter()
        .map(|id| {
            Ok(NewAccount {
                id: AccountId::parse(id).ok_or_else(|| anyhow!("bad account id {id}"))?,
                currency,
                kind,
                overdraft_limit: 0,
                metadata: serde_json::Map::new(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let new = Arc::new(new);
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let pool = pool.clone();
        let new = Arc::clone(&new);
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await?;
            for account in new.iter().skip(worker).step_by(WORKERS) {
                accounts::create(&mut conn, account).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// A two-leg transaction body (`POST /v1/transactions`, or a batch item).
pub fn transaction_body(id: Uuid, from: &str, to: &str, amount: i64) -> String {
    json!({"id": id, "entries": [{"account": from, "amount": -amount}, {"account": to, "amount": amount}]})
        .to_string()
}

/// Credits each wallet its amount from `FUNDING_ACCOUNT` (created here), in 1,000-item
/// batches; returns how many funding transactions were written.
pub async fn fund(pool: &PgPool, api: &Api, funding: &[(String, i64)]) -> anyhow::Result<u64> {
    create_accounts(pool, &[FUNDING_ACCOUNT.to_owned()], AccountType::System).await?;
    let items: Vec<String> = funding
        .iter()
        .filter(|(_, amount)| *amount > 0)
        .map(|(wallet, amount)| transaction_body(Uuid::new_v4(), FUNDING_ACCOUNT, wallet, *amount))
        .collect();
    let requests = batch_requests(&items);
    let result = run_load(api, 4, Arc::new(requests), Arc::new(batch_created)).await?;
    anyhow::ensure!(
        result.failed == 0,
        "funding the wallets failed: {}",
        result.problems()
    );
    Ok(result.ok)
}

/// Every wallet's posted balance, summed from its entries (the definition of a balance).
pub async fn wallet_balances(pool: &PgPool) -> anyhow::Result<HashMap<String, i64>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "select e.account_id, sum(e.amount)::int8 from entries e
           join accounts a on a.id = e.account_id
          where a.type = 'wallet' group by e.account_id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Compares balances with what the bench expects; at most a few differences, described.
pub fn balance_differences(
    expected: &HashMap<String, i64>,
    actual: &HashMap<String, i64>,
) -> Vec<String> {
    let mut differences: Vec<String> = expected
        .iter()
        .filter(|(wallet, amount)| actual.get(*wallet).copied().unwrap_or(0) != **amount)
        .map(|(wallet, amount)| {
            format!(
                "{wallet}: ledger {}, expected {amount}",
                actual.get(wallet).copied().unwrap_or(0)
            )
        })
        .collect();
    differences.extend(
        actual
            .iter()
            .filter(|(wallet, amount)| **amount != 0 && !expected.contains_key(*wallet))
            .map(|(wallet, amount)| format!("{wallet}: ledger {amount}, expected nothing")),
    );
    differences.sort();
    differences.truncate(QUOTED_PROBLEMS);
    differences
}

/// A count from SQL with bound parameters (`$1`...): `select count(*) ...`.
pub async fn count(pool: &PgPool, sql: &'static str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(sql).fetch_one(pool).await?)
}

/// splitmix64: reproducible pseudo-random plans without another dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for a benchmark plan (n is far below 2^32).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `POST /v1/transactions/batch` requests of up to 1,000 independent items each, from the
/// items' JSON bodies.
pub fn batch_requests(items: &[String]) -> Vec<Request> {
    items
        .chunks(MAX_BATCH_ITEMS as usize)
        .map(|chunk| Request {
            path: "/v1/transactions/batch",
            body: format!(r#"{{"mode":"independent","items":[{}]}}"#, chunk.join(",")),
            ops: chunk.len() as u64,
        })
        .collect()
}
