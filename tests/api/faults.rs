//! Fault injection and adversarial tests with the real binary: nothing lost, nothing doubled,
//! under any failure.
//!
//! - `chaos_short` (CI; `FAULTS_LONG=1` runs the long form instead):
//!   producers that retry publish payment events, resends and a few poison messages among
//!   them, while three consumers are SIGKILLed at random, the broker is SIGKILLed and
//!   restarted, and the consumers' database sessions are terminated at random. After a drain
//!   every wallet holds exactly its distinct payments, nothing is pending, and the dead-letter
//!   stream holds exactly the poison, each message once.
//! - `http_clients_with_timeouts_and_a_killed_server`: 64 clients abandon requests at random
//!   client-side timeouts and retry with the same id and body while `serve` is SIGKILLed and
//!   restarted: every transfer a client saw succeed is in the ledger once, every refusal stays
//!   a refusal, nothing is partial, money is conserved.
//! - `http_503_while_the_database_is_down_and_recovery`: PostgreSQL stopped under load: 503
//!   problem+json with `Retry-After`, bounded by the acquire timeout, `/readyz` 503; then the
//!   same `serve` process recovers and the retried ids land exactly once.
//!
//! Seeds: `FAULTS_SEED` (decimal or 0x-hex) replays or varies a run's schedule and traffic.

use super::common::{Rng, TestApp};
use super::stream_support::{
    GROUP, PrivatePostgres, PrivateRedis, bin, consumer_command_with, dead_letters, eventually,
    free_port, http_get, redis_at, run_to_end, shared_redis_url, unique_stream,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// Shared helpers: seeds, logs, processes, verify, a raw HTTP/1.1 client.
// ---------------------------------------------------------------------------------------

fn env_seed(default: u64) -> u64 {
    std::env::var("FAULTS_SEED")
        .ok()
        .and_then(|v| match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        })
        .unwrap_or(default)
}

/// A directory for the logs of this test's processes; removed when the test passes, kept
/// (and named in the failure) when it does not.
fn log_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "wl-faults-{label}-{}-{}",
        std::process::id(),
        Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn append_to(path: &Path) -> Stdio {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Stdio::from)
        .expect("the log file opens")
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The name this test's processes give their database sessions, unique to the run, so that
/// terminating "our" sessions never touches anyone else's.
fn application_name(label: &str) -> String {
    format!(
        "faults-{label}-{}-{}",
        std::process::id(),
        &Uuid::new_v4().simple().to_string()[..8]
    )
}

async fn sigkill(child: &mut Child) {
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// `wallet-ledger verify` must exit 0; returns its JSON report.
async fn verify_clean(database_url: &str, redis_url: &str, stream: &str) -> Value {
    let mut command = Command::new(bin());
    command
        .args(["verify", "--json", "--database-url", database_url])
        .args(["--redis-url", redis_url, "--stream", stream])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = run_to_end(command, Duration::from_secs(120)).await;
    assert!(
        output.status.success(),
        "verify failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

/// `wallet-ledger api-key create --scope admin`: the token it prints.
async fn admin_token(database_url: &str) -> String {
    let mut command = Command::new(bin());
    command
        .args(["api-key", "create", "--owner", "faults", "--scope", "admin"])
        .args(["--database-url", database_url])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = run_to_end(command, Duration::from_secs(60)).await;
    assert!(
        output.status.success(),
        "api-key create failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("wl_"), "not a token: {token:?}");
    token
}

/// Every transaction whose entries do not sum to zero, every posted transaction without
/// entries, every other one with entries: what a partial write would leave.
async fn partial_transactions(pool: &sqlx::PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "select \
           (select count(*) from (select transaction_id from entries \
              group by transaction_id, currency having sum(amount) <> 0) u), \
           (select count(*) from transactions t where t.status = 'posted' \
              and not exists (select 1 from entries e where e.transaction_id = t.id)), \
           (select count(*) from transactions t where t.status <> 'posted' \
              and exists (select 1 from entries e where e.transaction_id = t.id))",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// One HTTP/1.1 response, read to the end of a `Connection: close` exchange.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or("").to_owned()
    }
}

/// Why an exchange produced no response.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// Nothing listens on the port (the server is down).
    Refused,
    /// The client gave up: the request was abandoned mid-flight.
    TimedOut,
    /// The connection broke, or the response was cut short.
    Broken(String),
}

/// A raw HTTP/1.1 exchange (`Connection: close`) bounded by `limit`: when the time is up the
/// socket is dropped wherever the exchange is, as a client with a timeout does.
async fn call(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
    limit: Duration,
) -> Result<Reply, Failure> {
    let exchange = async {
        let mut stream =
            tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::ConnectionRefused => Failure::Refused,
                    _ => Failure::Broken(e.to_string()),
                })?;
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        if let Some(token) = token {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.map(Value::to_string);
        if let Some(body) = &body {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        } else {
            request.push_str("\r\n");
        }
        let broken = |e: std::io::Error| Failure::Broken(e.to_string());
        stream.write_all(request.as_bytes()).await.map_err(broken)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(broken)?;
        parse_reply(&raw).ok_or_else(|| Failure::Broken(format!("{} bytes, cut short", raw.len())))
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::TimedOut),
    }
}

/// A complete response, or `None` when it is cut short (a server killed while answering).
fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body)?;
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().ok()?;
        if body.len() < length {
            return None;
        }
        body.truncate(length);
    }
    Some(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&data[..end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        data = &data[end + 2..];
        if size == 0 {
            return Some(out);
        }
        if data.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Sends until the answer is not a 5xx, a 429 or a failure (setup requests, before the chaos).
async fn definitive(addr: &str, token: &str, path: &str, body: &Value) -> Reply {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match call(
            addr,
            "POST",
            path,
            Some(token),
            Some(body),
            Duration::from_secs(10),
        )
        .await
        {
            Ok(reply) if reply.status < 500 && reply.status != 429 => return reply,
            other => assert!(
                Instant::now() < until,
                "no definitive answer to POST {path}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The real `serve` binary on a port of its own, restartable on the same port.
struct Served {
    addr: String,
    database_url: String,
    app_name: String,
    extra: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    starts: usize,
}

impl Served {
    async fn start(database_url: &str, app_name: &str, extra: &[&str], log: PathBuf) -> Served {
        let mut served = Served {
            addr: format!("127.0.0.1:{}", free_port()),
            database_url: database_url.to_owned(),
            app_name: app_name.to_owned(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            log,
            child: None,
            starts: 0,
        };
        served.spawn().await;
        served
    }

    async fn spawn(&mut self) {
        let child = Command::new(bin())
            .args(["serve", "--database-url", &self.database_url])
            .args(["--listen-addr", &self.addr, "--no-outbox"])
            .args(["--application-name", &self.app_name])
            .args(["--rate-limit-per-second", "1000000"])
            .args(["--rate-limit-burst", "1000000"])
            .args(&self.extra)
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(append_to(&self.log))
            .kill_on_drop(true)
            .spawn()
            .expect("serve starts");
        self.child = Some(child);
        self.starts += 1;
        let addr = self.addr.clone();
        let ready = eventually(Duration::from_secs(60), || {
            let addr = addr.clone();
            async move { http_get(&addr, "/readyz").await.map(|(s, _)| s) == Some(200) }
        })
        .await;
        let exited = self.child.as_mut().unwrap().try_wait().unwrap();
        assert!(
            ready,
            "serve on {} never became ready (exit: {exited:?}):\n{}",
            self.addr,
            tail(&self.log, 30)
        );
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            sigkill(&mut child).await;
        }
    }

    /// Still the process that was started last, and running.
    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

// ---------------------------------------------------------------------------------------
// Test 1: the stream consumer under every fault at once.
// ---------------------------------------------------------------------------------------

const CHAOS_SEED: u64 = 0xFA17_5EED_2026_0001;

/// The size and pace of one chaos run.
#[derive(Debug, Clone)]
struct ChaosPlan {
    label: &'static str,
    /// Distinct payments (about 10% more messages: resends).
    payments: usize,
    wallets: usize,
    consumers: usize,
    producers: usize,
    /// Publishing is spread over this long.
    publish_span: Duration,
    /// Kills and session terminations go on at least this long.
    chaos_span: Duration,
    min_kills: usize,
    broker_restarts: usize,
    drain_limit: Duration,
}

fn short_plan() -> ChaosPlan {
    ChaosPlan {
        label: "short",
        payments: 2_000,
        wallets: 40,
        consumers: 3,
        producers: 2,
        publish_span: Duration::from_secs(8),
        chaos_span: Duration::from_secs(10),
        min_kills: 6,
        broker_restarts: 2,
        drain_limit: Duration::from_secs(90),
    }
}

fn long_plan() -> ChaosPlan {
    ChaosPlan {
        label: "long",
        payments: 50_000,
        wallets: 200,
        consumers: 3,
        producers: 4,
        publish_span: Duration::from_secs(60),
        chaos_span: Duration::from_secs(70),
        min_kills: 45,
        broker_restarts: 6,
        drain_limit: Duration::from_secs(600),
    }
}

/// Payments sent a second time (the same fields under a new stream id), in percent.
const RESEND_PERCENT: u64 = 10;
/// Messages per producer round trip.
const PRODUCER_BATCH: usize = 20;

/// A message to publish: the payment it carries and its fields.
type Outgoing = (Uuid, Vec<(String, String)>);

#[derive(Debug, Clone)]
struct Payment {
    event_id: Uuid,
    wallet: String,
    amount: i64,
    typed: bool,
}

impl Payment {
    fn random(rng: &mut Rng, wallets: &[String]) -> Payment {
        Payment {
            event_id: Uuid::from_u64_pair(rng.next_u64(), rng.next_u64()),
            wallet: rng.pick(wallets).clone(),
            // Varied amounts: a payment lost and another doubled cannot cancel out.
            amount: 1 + rng.below(99_999) as i64,
            typed: rng.below(2) == 0,
        }
    }

    fn fields(&self, n: usize) -> Vec<(String, String)> {
        let mut fields = vec![
            ("n".to_owned(), n.to_string()),
            ("event_id".to_owned(), self.event_id.to_string()),
            ("wallet".to_owned(), self.wallet.clone()),
            ("amount".to_owned(), self.amount.to_string()),
        ];
        if self.typed {
            fields.push(("type".to_owned(), "payment.succeeded".to_owned()));
        }
        fields
    }
}

/// A message that must end in the dead-letter stream, once, with `reason`. Each carries a
/// `poison` field (unknown fields are ignored, and a dead letter keeps the original fields),
/// so its dead letter is found even when it has no `event_id`.
#[derive(Debug, Clone)]
struct Poison {
    tag: &'static str,
    fields: Vec<(String, String)>,
    reason: &'static str,
    /// Published only once this payment is committed (an idempotency mismatch needs the
    /// payment it disagrees with).
    after: Option<Uuid>,
}

fn poisons(rng: &mut Rng, wallets: &[String], payments: &[Payment]) -> Vec<Poison> {
    let mut fresh = || Uuid::from_u64_pair(rng.next_u64(), rng.next_u64()).to_string();
    let w0 = wallets[0].clone();
    let malformed = |tag: &'static str, pairs: Vec<(&str, String)>| Poison {
        tag,
        fields: std::iter::once(("poison".to_owned(), tag.to_owned()))
            .chain(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)))
            .collect(),
        reason: "malformed_event",
        after: None,
    };
    let mut list = vec![
        malformed(
            "no-event-id",
            vec![("wallet", w0.clone()), ("amount", "100".into())],
        ),
        malformed(
            "event-id-not-a-uuid",
            vec![
                ("event_id", "not-a-uuid".into()),
                ("wallet", w0.clone()),
                ("amount", "100".into()),
            ],
        ),
        malformed(
            "decimal-amount",
            vec![
                ("event_id", fresh()),
                ("wallet", w0.clone()),
                ("amount", "50.00".into()),
            ],
        ),
        malformed(
            "unknown-type",
            vec![
                ("event_id", fresh()),
                ("type", "payment.teleported".into()),
                ("wallet", w0.clone()),
                ("amount", "100".into()),
            ],
        ),
        malformed(
            "invalid-wallet-id",
            vec![
                ("event_id", fresh()),
                ("wallet", "no such wallet!".into()),
                ("amount", "100".into()),
            ],
        ),
        malformed(
            "zero-amount",
            vec![
                ("event_id", fresh()),
                ("wallet", w0.clone()),
                ("amount", "0".into()),
            ],
        ),
        // Decodes, and the ledger refuses it: a currency other than the wallet's.
        malformed(
            "foreign-currency",
            vec![
                ("event_id", fresh()),
                ("wallet", w0.clone()),
                ("amount", "100".into()),
                ("currency", "USD".into()),
            ],
        ),
    ];
    // Idempotency mismatches: the event id of a payment already applied, with another
    // amount, wallet or currency.
    let mismatch = |tag: &'static str, p: &Payment, change: (&str, String)| {
        let mut fields = vec![("poison".to_owned(), tag.to_owned())];
        for (k, v) in p.fields(0) {
            if k != "n" && k != change.0 {
                fields.push((k, v));
            }
        }
        fields.push((change.0.to_owned(), change.1));
        Poison {
            tag,
            fields,
            reason: "idempotency_mismatch",
            after: Some(p.event_id),
        }
    };
    let (a, b, c) = (&payments[0], &payments[1], &payments[2]);
    let other = wallets.iter().find(|w| **w != b.wallet).unwrap().clone();
    list.push(mismatch(
        "mismatch-amount",
        a,
        ("amount", (a.amount + 1).to_string()),
    ));
    list.push(mismatch("mismatch-wallet", b, ("wallet", other)));
    list.push(mismatch("mismatch-currency", c, ("currency", "USD".into())));
    list
}

#[derive(Debug)]
enum Action {
    Kill { slot: usize, same_name: bool },
    TerminateSessions,
    BrokerRestart { down: Duration },
    Poison(usize),
}

fn millis(rng: &mut Rng, from: u64, to: u64) -> Duration {
    Duration::from_millis(from + rng.below(to - from + 1))
}

/// The schedule, decided up front by the seeded generator: kills every 0.5-2 s, session
/// terminations every 0.3-1.2 s, broker restarts and poison spread over the publishing.
fn chaos_schedule(rng: &mut Rng, plan: &ChaosPlan, poisons: usize) -> Vec<(Duration, Action)> {
    let mut schedule = Vec::new();
    let mut at = millis(rng, 500, 2_000);
    let mut kills = 0;
    while at <= plan.chaos_span || kills < plan.min_kills {
        let slot = rng.below(plan.consumers as u64) as usize;
        let same_name = rng.below(2) == 0;
        schedule.push((at, Action::Kill { slot, same_name }));
        kills += 1;
        at += millis(rng, 500, 2_000);
    }
    let mut at = millis(rng, 300, 1_200);
    while at <= plan.chaos_span {
        schedule.push((at, Action::TerminateSessions));
        at += millis(rng, 300, 1_200);
    }
    let n = plan.broker_restarts as u32;
    for i in 0..n {
        let at = plan.publish_span * (i + 1) / (n + 1) + millis(rng, 0, 300);
        let down = millis(rng, 200, 1_000);
        schedule.push((at, Action::BrokerRestart { down }));
    }
    for k in 0..poisons as u32 {
        // From 10% to 90% of the publishing, so some are in flight at broker restarts.
        let at = plan.publish_span * (1 + 8 * k / poisons as u32) / 10 + millis(rng, 0, 200);
        schedule.push((at, Action::Poison(k as usize)));
    }
    schedule.sort_by_key(|(at, _)| *at);
    schedule
}

/// A producer's link to a broker that may die at any moment: a fresh connection after every
/// error, every command bounded in time.
struct Link {
    client: redis::Client,
    conn: Option<MultiplexedConnection>,
}

impl Link {
    fn new(url: &str) -> Link {
        Link {
            client: redis::Client::open(url).unwrap(),
            conn: None,
        }
    }

    async fn query<T: redis::FromRedisValue>(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> Result<T, String> {
        if self.conn.is_none() {
            let connect = self.client.get_multiplexed_async_connection();
            match tokio::time::timeout(Duration::from_secs(1), connect).await {
                Ok(Ok(conn)) => self.conn = Some(conn),
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("connect timed out".into()),
            }
        }
        let conn = self.conn.as_mut().unwrap();
        match tokio::time::timeout(Duration::from_secs(2), pipe.query_async::<T>(conn)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.to_string())
            }
            Err(_) => {
                self.conn = None;
                Err("timed out".into())
            }
        }
    }
}

#[derive(Debug, Default)]
struct ProducerReport {
    /// Messages the broker acknowledged.
    published: usize,
    /// Round trips that failed and were sent again (the broker may have kept some of their
    /// messages: a retry is then a resend).
    failed_round_trips: usize,
    messages_sent_again: usize,
}

/// A producer with retries: its messages in round trips of `PRODUCER_BATCH`, paced over
/// `span`, each round trip sent again (the same fields: the same event ids) until the broker
/// acknowledges it.
async fn produce(
    url: String,
    stream: String,
    messages: Vec<Outgoing>,
    started: Instant,
    span: Duration,
    ids: Arc<Mutex<HashMap<String, Uuid>>>,
) -> ProducerReport {
    let mut link = Link::new(&url);
    let mut report = ProducerReport::default();
    let batches: Vec<&[Outgoing]> = messages.chunks(PRODUCER_BATCH).collect();
    let count = batches.len().max(1) as u32;
    for (k, batch) in batches.iter().enumerate() {
        tokio::time::sleep_until((started + span * k as u32 / count).into()).await;
        let mut pipe = redis::pipe();
        for (_, fields) in batch.iter() {
            pipe.xadd(&stream, "*", fields);
        }
        loop {
            match link.query::<Vec<String>>(&pipe).await {
                Ok(stream_ids) => {
                    report.published += stream_ids.len();
                    let mut ids = ids.lock().unwrap();
                    for (stream_id, (event_id, _)) in stream_ids.into_iter().zip(batch.iter()) {
                        ids.insert(stream_id, *event_id);
                    }
                    break;
                }
                Err(_) => {
                    report.failed_round_trips += 1;
                    report.messages_sent_again += batch.len();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    report
}

struct Slot {
    name: String,
    child: Child,
    log: PathBuf,
}

/// The consumer processes: spawned with this test's application name, one log file each.
struct Fleet {
    database_url: String,
    redis_url: String,
    stream: String,
    app_name: String,
    logs: PathBuf,
    slots: Vec<Slot>,
    spawned: usize,
    /// Exits at start-up because a dependency was away (a supervisor restarts those).
    startup_exits: Vec<String>,
    /// Any other exit of a running consumer: a bug.
    crashes: Vec<String>,
}

/// Errors a consumer stops on before it consumes anything (see `consumer::run`, `db.rs`).
const STARTUP_ERRORS: [&str; 5] = [
    "cannot reach PostgreSQL",
    "applying migrations",
    "creating database",
    "cannot connect to Redis",
    "cannot create consumer group",
];

impl Fleet {
    fn spawn(&mut self, name: &str) -> Slot {
        self.spawned += 1;
        let log = self.logs.join(format!("{name}.{}.log", self.spawned));
        let mut command = consumer_command_with(
            &self.database_url,
            &self.redis_url,
            &self.stream,
            name,
            &[
                "--batch-size",
                "100",
                "--trim-interval-ms",
                "1000",
                "--application-name",
                &self.app_name,
            ],
        );
        command.stdout(Stdio::null()).stderr(append_to(&log));
        Slot {
            name: name.to_owned(),
            child: command.spawn().expect("the consumer starts"),
            log,
        }
    }

    /// Restarts consumers that exited on their own, and sorts their exits.
    fn check_exits(&mut self) {
        for i in 0..self.slots.len() {
            let Some(status) = self.slots[i].child.try_wait().unwrap() else {
                continue;
            };
            let log = std::fs::read_to_string(&self.slots[i].log).unwrap_or_default();
            let error = log
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("")
                .to_owned();
            let what = format!(
                "{} ({status}): {}",
                self.slots[i].name,
                tail(&self.slots[i].log, 5)
            );
            if status.code() == Some(2) && STARTUP_ERRORS.iter().any(|e| error.contains(e)) {
                self.startup_exits.push(error);
            } else {
                self.crashes.push(what);
            }
            let name = self.slots[i].name.clone();
            self.slots[i] = self.spawn(&name);
        }
    }
}

/// The group's (pending, lag).
async fn backlog(conn: &mut MultiplexedConnection, stream: &str) -> (usize, Option<usize>) {
    let groups: redis::streams::StreamInfoGroupsReply = conn.xinfo_groups(stream).await.unwrap();
    let group = groups
        .groups
        .into_iter()
        .find(|g| g.name == GROUP)
        .expect("the consumer group exists");
    (group.pending, group.lag)
}

/// The stream ids pending with consumer `name`.
async fn pending_with(url: &str, stream: &str, name: &str) -> Vec<String> {
    let mut conn = redis_at(url).await;
    let reply: redis::RedisResult<redis::streams::StreamPendingCountReply> = conn
        .xpending_consumer_count(stream, GROUP, "-", "+", 100_000, name)
        .await;
    reply
        .map(|r| r.ids.into_iter().map(|p| p.id).collect())
        .unwrap_or_default()
}

const TERMINATE_SESSIONS: &str = "select count(*) filter (where pg_terminate_backend(pid)) \
     from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()";

async fn chaos(plan: ChaosPlan) {
    let test_started = Instant::now();
    let seed = env_seed(CHAOS_SEED);
    let mut rng = Rng(seed);
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..plan.wallets)
        .map(|i| format!("faults-w{i:03}"))
        .collect();
    for wallet in &wallets {
        app.create_wallet(wallet).await;
    }
    let mut redis = PrivateRedis::start().await;
    let redis_url = redis.url();
    let stream = unique_stream("faults");
    let app_name = application_name("chaos");
    let logs = log_dir("chaos");

    // The traffic: every payment once, ~10% again up to ~300 messages later.
    let payments: Vec<Payment> = (0..plan.payments)
        .map(|_| Payment::random(&mut rng, &wallets))
        .collect();
    let mut keyed: Vec<(u64, usize)> = Vec::with_capacity(plan.payments * 11 / 10 + 1);
    for i in 0..plan.payments {
        keyed.push((i as u64 * 8, i));
        if rng.below(100) < RESEND_PERCENT {
            keyed.push((i as u64 * 8 + 1 + rng.below(8 * 300), i));
        }
    }
    keyed.sort_by_key(|&(key, _)| key);
    let resends = keyed.len() - plan.payments;
    // The producers take round trips in turn.
    let mut per_producer: Vec<Vec<Outgoing>> = vec![Vec::new(); plan.producers];
    for (k, &(_, i)) in keyed.iter().enumerate() {
        per_producer[(k / PRODUCER_BATCH) % plan.producers]
            .push((payments[i].event_id, payments[i].fields(i + 1)));
    }
    let poisons = poisons(&mut rng, &wallets, &payments);
    let schedule = chaos_schedule(&mut rng, &plan, poisons.len());

    let mut fleet = Fleet {
        database_url: app.database_url.clone(),
        redis_url: redis_url.clone(),
        stream: stream.clone(),
        app_name: app_name.clone(),
        logs: logs.clone(),
        slots: Vec::new(),
        spawned: 0,
        startup_exits: Vec::new(),
        crashes: Vec::new(),
    };
    for s in 0..plan.consumers {
        let slot = fleet.spawn(&format!("faults-c{s}-g0"));
        fleet.slots.push(slot);
    }

    let ids: Arc<Mutex<HashMap<String, Uuid>>> = Arc::new(Mutex::new(HashMap::new()));
    let chaos_started = Instant::now();
    let producers: Vec<_> = per_producer
        .into_iter()
        .map(|messages| {
            tokio::spawn(produce(
                redis_url.clone(),
                stream.clone(),
                messages,
                chaos_started,
                plan.publish_span,
                ids.clone(),
            ))
        })
        .collect();

    let mut generation = 0;
    let mut kills = 0;
    let mut kills_holding = 0;
    let mut held_at_kills = 0;
    let mut held_committed = 0i64;
    let mut termination_rounds = 0;
    let mut sessions_terminated = 0i64;
    let mut broker_restarts = 0;
    let mut broker_down = Duration::ZERO;
    let mut poison_ids: Vec<Option<String>> = vec![None; poisons.len()];
    for (offset, action) in &schedule {
        tokio::time::sleep_until((chaos_started + *offset).into()).await;
        fleet.check_exits();
        match *action {
            Action::Kill { slot, same_name } => {
                let victim = &mut fleet.slots[slot];
                sigkill(&mut victim.child).await;
                kills += 1;
                let held = pending_with(&redis_url, &stream, &victim.name).await;
                if !held.is_empty() {
                    kills_holding += 1;
                    held_at_kills += held.len();
                    let events: Vec<Uuid> = {
                        let ids = ids.lock().unwrap();
                        held.iter().filter_map(|id| ids.get(id).copied()).collect()
                    };
                    held_committed += sqlx::query_scalar::<_, i64>(
                        "select count(*) from transactions where id = any($1)",
                    )
                    .bind(&events)
                    .fetch_one(&app.pool)
                    .await
                    .unwrap();
                }
                let mut name = victim.name.clone();
                if !same_name {
                    generation += 1;
                    name = format!("faults-c{slot}-g{generation}");
                }
                fleet.slots[slot] = fleet.spawn(&name);
            }
            Action::TerminateSessions => {
                let n: i64 = sqlx::query_scalar(TERMINATE_SESSIONS)
                    .bind(&app_name)
                    .fetch_one(&app.pool)
                    .await
                    .unwrap();
                termination_rounds += 1;
                sessions_terminated += n;
            }
            Action::BrokerRestart { down } => {
                let killed = Instant::now();
                redis.kill();
                tokio::time::sleep(down).await;
                redis.restart().await;
                broker_down += killed.elapsed();
                broker_restarts += 1;
            }
            Action::Poison(k) => {
                let poison = &poisons[k];
                if let Some(payment) = poison.after {
                    let pool = app.pool.clone();
                    let committed = eventually(Duration::from_secs(60), || {
                        let pool = pool.clone();
                        async move {
                            sqlx::query_scalar::<_, i64>(
                                "select count(*) from transactions where id = $1",
                            )
                            .bind(payment)
                            .fetch_one(&pool)
                            .await
                            .unwrap()
                                == 1
                        }
                    })
                    .await;
                    assert!(committed, "payment {payment} never reached the ledger");
                }
                // A fresh connection to a broker known to be up: published exactly once.
                let mut conn = redis_at(&redis_url).await;
                let id: String = conn.xadd(&stream, "*", &poison.fields).await.unwrap();
                poison_ids[k] = Some(id);
            }
        }
    }
    let mut producer_reports = Vec::new();
    for producer in producers {
        producer_reports.push(producer.await.unwrap());
    }
    let chaos_duration = chaos_started.elapsed();
    fleet.check_exits();
    for slot in &mut fleet.slots {
        sigkill(&mut slot.child).await;
    }
    let mut conn = redis_at(&redis_url).await;
    let (pending_after_chaos, lag_after_chaos) = backlog(&mut conn, &stream).await;

    // One consumer drains what is left: new messages and the dead consumers' pending ones.
    let drain_started = Instant::now();
    let drainer = consumer_command_with(
        &app.database_url,
        &redis_url,
        &stream,
        "faults-drainer",
        &[
            "--batch-size",
            "100",
            "--drain",
            "--application-name",
            &app_name,
        ],
    );
    let drained = run_to_end(drainer, plan.drain_limit).await;
    let drain_duration = drain_started.elapsed();
    assert!(
        drained.status.success(),
        "the draining consumer failed ({}):\n{}\nlogs in {}",
        drained.status,
        String::from_utf8_lossy(&drained.stderr),
        logs.display()
    );

    // The ledger: every wallet exactly its distinct payments, each payment once and whole.
    let mut expected: BTreeMap<&str, i64> = wallets.iter().map(|w| (w.as_str(), 0)).collect();
    for p in &payments {
        *expected.get_mut(p.wallet.as_str()).unwrap() += p.amount;
    }
    let mut wrong = Vec::new();
    for (wallet, want) in &expected {
        let got = app.posted_balance(wallet).await;
        if got != *want {
            wrong.push(format!("{wallet}: posted {got}, expected {want}"));
        }
    }
    let stored: Vec<Uuid> =
        sqlx::query_scalar("select id from transactions where kind = 'payment'")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let stored: BTreeSet<Uuid> = stored.into_iter().collect();
    let distinct: BTreeSet<Uuid> = payments.iter().map(|p| p.event_id).collect();
    let missing: Vec<&Uuid> = distinct.difference(&stored).collect();
    let extra: Vec<&Uuid> = stored.difference(&distinct).collect();
    let (not_posted, odd_entries): (i64, i64) = sqlx::query_as(
        "select (select count(*) from transactions where kind = 'payment' and status <> 'posted'), \
                (select count(*) from (select transaction_id from entries group by transaction_id \
                   having count(*) <> 2) t)",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let partial = partial_transactions(&app.pool).await;

    // The broker: nothing pending or undelivered, the poison dead-lettered once each.
    let (pending_now, lag_now) = backlog(&mut conn, &stream).await;
    let dead = dead_letters(&mut conn, &stream).await;
    let charged: usize = conn
        .hlen(format!("{stream}.failures.{GROUP}"))
        .await
        .unwrap();
    let mut by_tag: BTreeMap<String, Vec<&BTreeMap<String, String>>> = BTreeMap::new();
    for letter in &dead {
        let tag = letter.get("poison").cloned().unwrap_or_default();
        by_tag.entry(tag).or_default().push(letter);
    }
    let mut dlq_problems = Vec::new();
    for (k, poison) in poisons.iter().enumerate() {
        let letters = by_tag.remove(poison.tag).unwrap_or_default();
        let Some(original) = &poison_ids[k] else {
            dlq_problems.push(format!("{}: never published", poison.tag));
            continue;
        };
        if letters.len() != 1 {
            dlq_problems.push(format!(
                "{}: {} dead letters (original ids {:?})",
                poison.tag,
                letters.len(),
                letters
                    .iter()
                    .map(|l| l.get("dlq_original_id"))
                    .collect::<Vec<_>>()
            ));
            continue;
        }
        let letter = letters[0];
        let field = |name: &str| letter.get(name).map(String::as_str).unwrap_or("");
        if field("dlq_reason") != poison.reason || field("dlq_original_id") != original {
            dlq_problems.push(format!(
                "{}: reason {} (expected {}), original id {} (published as {original}): {}",
                poison.tag,
                field("dlq_reason"),
                poison.reason,
                field("dlq_original_id"),
                field("dlq_detail")
            ));
        }
        for (name, value) in &poison.fields {
            if field(name) != value {
                dlq_problems.push(format!(
                    "{}: field {name} is {:?}, was {value:?}",
                    poison.tag,
                    field(name)
                ));
            }
        }
    }
    for (tag, letters) in by_tag {
        for letter in letters {
            dlq_problems.push(format!("unexpected dead letter ({tag:?}): {letter:?}"));
        }
    }
    let report = verify_clean(&app.database_url, &redis_url, &stream).await;

    let published: usize = producer_reports.iter().map(|r| r.published).sum();
    let failed_round_trips: usize = producer_reports.iter().map(|r| r.failed_round_trips).sum();
    let sent_again: usize = producer_reports.iter().map(|r| r.messages_sent_again).sum();
    eprintln!(
        "faults chaos ({}, seed {seed:#x}): {} distinct payments to {} wallets as {published} \
         payment messages acknowledged by the broker ({resends} deliberate resends; {failed_round_trips} producer \
         round trips failed and were sent again, {sent_again} messages) + {} poison messages \
         ({} malformed, {} idempotency mismatches); {} consumers (batch 100) SIGKILLed {kills} \
         times at random ({kills_holding} kills left {held_at_kills} messages unacknowledged, \
         {held_committed} of them already committed); broker SIGKILLed and restarted \
         {broker_restarts} times ({:.1} s down in all); {sessions_terminated} database sessions \
         terminated in {termination_rounds} rounds; {} consumer start-ups failed on a dependency \
         and were restarted; chaos {:.1} s, then {pending_after_chaos} pending and {} undelivered, \
         drained in {:.1} s; balances exact, 0 pending, {} dead letters = the poison, verify OK \
         (dead letters counted: {}); test {:.1} s",
        plan.label,
        plan.payments,
        plan.wallets,
        poisons.len(),
        poisons
            .iter()
            .filter(|p| p.reason == "malformed_event")
            .count(),
        poisons
            .iter()
            .filter(|p| p.reason == "idempotency_mismatch")
            .count(),
        plan.consumers,
        broker_down.as_secs_f64(),
        fleet.startup_exits.len(),
        chaos_duration.as_secs_f64(),
        lag_after_chaos.map_or("?".to_owned(), |l| l.to_string()),
        drain_duration.as_secs_f64(),
        dead.len(),
        report["failures"]["dead_letters"],
        test_started.elapsed().as_secs_f64(),
    );
    for exit in &fleet.startup_exits {
        eprintln!("  consumer start-up exit: {exit}");
    }

    assert!(
        fleet.crashes.is_empty(),
        "consumers exited on their own while running:\n{}\nlogs in {}",
        fleet.crashes.join("\n"),
        logs.display()
    );
    assert!(
        wrong.is_empty() && missing.is_empty() && extra.is_empty(),
        "balances off in {} wallets: {wrong:#?}\n{} payments missing (first {:?}), {} unknown \
         payments stored (first {:?})\nlogs in {}",
        wrong.len(),
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first(),
        logs.display()
    );
    assert_eq!(
        (not_posted, odd_entries),
        (0, 0),
        "payments not posted, transactions with other than 2 entries"
    );
    assert_eq!(
        partial,
        (0, 0, 0),
        "unbalanced transactions, posted without entries, unposted with entries"
    );
    assert_eq!(
        (pending_now, lag_now.unwrap_or(0)),
        (0, 0),
        "the group has a backlog after the drain"
    );
    assert!(
        dlq_problems.is_empty(),
        "the dead-letter stream is not exactly the poison, once each:\n{}",
        dlq_problems.join("\n")
    );
    assert_eq!(
        charged, 0,
        "failures were charged to messages (a kill, an outage or a terminated session is not \
         the message's fault)"
    );
    assert_eq!(report["failures"]["dead_letters"], json!(poisons.len()));
    assert!(kills >= 5, "only {kills} kills");
    assert!(broker_restarts >= 1, "the broker was never restarted");
    assert!(
        sessions_terminated > 0,
        "no database session was terminated"
    );
    assert!(
        published >= plan.payments,
        "only {published} messages published"
    );

    let _ = std::fs::remove_dir_all(&logs);
    let _: redis::RedisResult<()> = conn.del(&stream).await;
    drop(redis);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_short() {
    // The long form (50,000 payments, 45+ kills, 6 broker restarts: minutes) is the same test
    // with another plan: `FAULTS_LONG=1 cargo test --test api faults::chaos_short -- --nocapture`.
    let long = std::env::var("FAULTS_LONG").is_ok_and(|v| v == "1");
    chaos(if long { long_plan() } else { short_plan() }).await;
}

// ---------------------------------------------------------------------------------------
// Test 2: HTTP clients with timeouts, retrying with the same id, and a killed server.
// ---------------------------------------------------------------------------------------

const HTTP_SEED: u64 = 0xFA17_5EED_2026_0002;
const HTTP_CLIENTS: usize = 64;
const TRANSFERS_PER_CLIENT: usize = 25;
const HTTP_WALLETS: usize = 16;
const FUNDING: i64 = 100_000;
/// Progress (fraction of transfers answered) at which the server is SIGKILLed.
const SERVER_KILLS_AT: [f64; 2] = [0.3, 0.65];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Posted,
    Refused(String),
}

#[derive(Debug)]
struct Sent {
    id: Uuid,
    from: usize,
    to: usize,
    amount: i64,
    /// The definitive answer, or what was wrong with it.
    answer: Result<Answer, String>,
    attempts: u32,
}

#[derive(Debug, Default)]
struct HttpStats {
    attempts: AtomicU64,
    abandoned: AtomicU64,
    refused_connections: AtomicU64,
    broken: AtomicU64,
    unavailable: AtomicU64,
    rate_limited: AtomicU64,
    internal: AtomicU64,
    replays: AtomicU64,
    escalated: AtomicU64,
    asked_again: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Sends `body` to `path` until a definitive answer: 2xx, or a 422 refusal. Each attempt has
/// a random client-side timeout (1-200 ms; up to 1 s after 6 attempts, 5 s after 12, so that
/// a slow server still gets through) and is abandoned mid-flight when it runs out.
async fn until_definitive(
    addr: &str,
    token: &str,
    body: &Value,
    id: Uuid,
    rng: &mut Rng,
    stats: &HttpStats,
) -> (Result<(Answer, bool), String>, u32) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let limit = match attempts {
            1..=6 => 1 + rng.below(200),
            7..=12 => 1 + rng.below(1_000),
            _ => 5_000,
        };
        if attempts == 7 {
            bump(&stats.escalated);
        }
        bump(&stats.attempts);
        let reply = call(
            addr,
            "POST",
            "/v1/transfers",
            Some(token),
            Some(body),
            Duration::from_millis(limit),
        )
        .await;
        match reply {
            Ok(r) if r.status == 200 || r.status == 201 => {
                let replayed = r.header("idempotent-replayed") == Some("true");
                if replayed {
                    bump(&stats.replays);
                }
                let view = r.json();
                if view["id"] != json!(id) || view["status"] != "posted" {
                    return (Err(format!("{}: {}", r.status, r.body)), attempts);
                }
                return (Ok((Answer::Posted, replayed)), attempts);
            }
            Ok(r) if r.status == 422 && r.code() == "insufficient_funds" => {
                let replayed = r.header("idempotent-replayed") == Some("true");
                return (Ok((Answer::Refused(r.code()), replayed)), attempts);
            }
            Ok(r) if r.status == 503 => {
                bump(&stats.unavailable);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(r) if r.status == 429 => {
                bump(&stats.rate_limited);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(r) if r.status == 500 => {
                bump(&stats.internal);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(r) => return (Err(format!("{}: {}", r.status, r.body)), attempts),
            Err(Failure::TimedOut) => bump(&stats.abandoned),
            Err(Failure::Refused) => {
                bump(&stats.refused_connections);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(Failure::Broken(_)) => {
                bump(&stats.broken);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        if attempts >= 3_000 {
            return (
                Err("no definitive answer in 3,000 attempts".into()),
                attempts,
            );
        }
    }
}

/// One client: `count` transfers between random wallets, each retried with the same id and
/// body until definitive; one in eight is then asked once more, and must replay the same
/// answer (never a late success after a refusal, never a second effect).
async fn http_client(
    seed: u64,
    addr: String,
    token: String,
    wallets: Arc<Vec<String>>,
    count: usize,
    stats: Arc<HttpStats>,
    done: Arc<AtomicUsize>,
) -> Vec<Sent> {
    let mut rng = Rng(seed);
    let mut sent = Vec::with_capacity(count);
    for _ in 0..count {
        let id = Uuid::from_u64_pair(rng.next_u64(), rng.next_u64());
        let from = rng.below(wallets.len() as u64) as usize;
        let to = (from + 1 + rng.below(wallets.len() as u64 - 1) as usize) % wallets.len();
        let amount = 1 + rng.below(30_000) as i64;
        let body = json!({"id": id, "from": wallets[from], "to": wallets[to], "amount": amount});
        let (result, mut attempts) =
            until_definitive(&addr, &token, &body, id, &mut rng, &stats).await;
        let mut answer = result.map(|(a, _)| a);
        if let Ok(first) = &answer
            && rng.below(8) == 0
        {
            bump(&stats.asked_again);
            let (again, more) = until_definitive(&addr, &token, &body, id, &mut rng, &stats).await;
            attempts += more;
            answer = match again {
                Ok((a, true)) if a == *first => Ok(a),
                Ok((a, replayed)) => Err(format!(
                    "first answered {first:?}, asked again: {a:?} (replayed: {replayed})"
                )),
                Err(e) => Err(format!("first answered {first:?}, asked again: {e}")),
            };
        }
        done.fetch_add(1, Ordering::Relaxed);
        sent.push(Sent {
            id,
            from,
            to,
            amount,
            answer,
            attempts,
        });
    }
    sent
}

/// Terminates the sessions named `app_name` every 300-1200 ms while `on`; returns the rounds
/// and the sessions terminated.
async fn terminate_sessions_while(
    pool: sqlx::PgPool,
    app_name: String,
    on: Arc<AtomicBool>,
    seed: u64,
) -> (usize, i64) {
    let mut rng = Rng(seed ^ 0x7E57);
    let (mut rounds, mut sessions) = (0, 0);
    while on.load(Ordering::Relaxed) {
        tokio::time::sleep(millis(&mut rng, 300, 1_200)).await;
        let n: i64 = sqlx::query_scalar(TERMINATE_SESSIONS)
            .bind(&app_name)
            .fetch_one(&pool)
            .await
            .unwrap();
        rounds += 1;
        sessions += n;
    }
    (rounds, sessions)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_clients_with_timeouts_and_a_killed_server() {
    let test_started = Instant::now();
    let seed = env_seed(HTTP_SEED);
    let app = TestApp::new().await;
    let logs = log_dir("http");
    let token = admin_token(&app.database_url).await;
    let app_name = application_name("http");
    let mut server = Served::start(&app.database_url, &app_name, &[], logs.join("serve.log")).await;
    let addr = server.addr.clone();

    let wallets: Vec<String> = (0..HTTP_WALLETS).map(|i| format!("http-w{i:02}")).collect();
    for wallet in &wallets {
        let r = definitive(
            &addr,
            &token,
            "/v1/accounts",
            &json!({"id": wallet, "currency": "SAR", "type": "wallet"}),
        )
        .await;
        assert_eq!(r.status, 201, "create {wallet}: {}", r.body);
        let r = definitive(
            &addr,
            &token,
            "/v1/payments",
            &json!({"id": Uuid::new_v4(), "account": wallet, "amount": FUNDING,
                    "currency": "SAR", "provider": "test"}),
        )
        .await;
        assert_eq!(r.status, 201, "fund {wallet}: {}", r.body);
    }

    let stats = Arc::new(HttpStats::default());
    let done = Arc::new(AtomicUsize::new(0));
    let shared_wallets = Arc::new(wallets.clone());
    let load_started = Instant::now();
    // Meanwhile the server's database sessions are terminated at random.
    let terminating = Arc::new(AtomicBool::new(true));
    let terminator = tokio::spawn(terminate_sessions_while(
        app.pool.clone(),
        app_name.clone(),
        terminating.clone(),
        seed,
    ));
    let clients: Vec<_> = (0..HTTP_CLIENTS)
        .map(|k| {
            tokio::spawn(http_client(
                seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                addr.clone(),
                token.clone(),
                shared_wallets.clone(),
                TRANSFERS_PER_CLIENT,
                stats.clone(),
                done.clone(),
            ))
        })
        .collect();

    // Mid-load, the server dies (SIGKILL) and comes back on the same port.
    let total = HTTP_CLIENTS * TRANSFERS_PER_CLIENT;
    let mut server_down = Duration::ZERO;
    let mut kill_progress = Vec::new();
    let mut rng = Rng(seed);
    for fraction in SERVER_KILLS_AT {
        let target = (total as f64 * fraction) as usize;
        let reached = eventually(Duration::from_secs(180), || {
            let done = done.clone();
            async move { done.load(Ordering::Relaxed) >= target }
        })
        .await;
        assert!(
            reached,
            "the clients stalled at {}",
            done.load(Ordering::Relaxed)
        );
        kill_progress.push(done.load(Ordering::Relaxed));
        let killed = Instant::now();
        server.kill().await;
        tokio::time::sleep(millis(&mut rng, 200, 600)).await;
        server.spawn().await;
        server_down += killed.elapsed();
    }
    let mut sent = Vec::with_capacity(total);
    for client in clients {
        sent.extend(client.await.unwrap());
    }
    terminating.store(false, Ordering::Relaxed);
    let (termination_rounds, sessions_terminated) = terminator.await.unwrap();
    let load_duration = load_started.elapsed();

    // Every answer a client got, against the ledger.
    let mut anomalies: Vec<String> = Vec::new();
    let mut expected: Vec<i64> = vec![FUNDING; wallets.len()];
    let (mut posted, mut refused) = (0, 0);
    let rows: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "select t.id, t.status, count(e.id) from transactions t \
         left join entries e on e.transaction_id = t.id \
         where t.kind = 'transfer' group by t.id, t.status",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut rows: HashMap<Uuid, (String, i64)> =
        rows.into_iter().map(|(id, s, n)| (id, (s, n))).collect();
    for s in &sent {
        let row = rows.remove(&s.id);
        match (&s.answer, row) {
            (Ok(Answer::Posted), Some((status, 2))) if status == "posted" => {
                posted += 1;
                expected[s.from] -= s.amount;
                expected[s.to] += s.amount;
                let r = app.get(&format!("/v1/transactions/{}", s.id)).await;
                if r.status != 200 || r.body["status"] != "posted" {
                    anomalies.push(format!("GET {}: {} {}", s.id, r.status, r.text));
                }
            }
            (Ok(Answer::Refused(_)), Some((status, 0))) if status == "rejected" => refused += 1,
            (answer, row) => anomalies.push(format!(
                "transfer {} ({} -> {}, {}): the client got {answer:?} after {} attempts, the \
                 ledger has {row:?}",
                s.id, wallets[s.from], wallets[s.to], s.amount, s.attempts
            )),
        }
    }
    for (id, row) in &rows {
        anomalies.push(format!("transfer {id} in the ledger, never sent: {row:?}"));
    }
    let mut wrong_balances = Vec::new();
    let mut total_balance = 0;
    for (i, wallet) in wallets.iter().enumerate() {
        let got = app.posted_balance(wallet).await;
        total_balance += got;
        if got != expected[i] {
            wrong_balances.push(format!("{wallet}: posted {got}, expected {}", expected[i]));
        }
    }
    let partial = partial_transactions(&app.pool).await;
    verify_clean(
        &app.database_url,
        &shared_redis_url(),
        &unique_stream("faults-http"),
    )
    .await;

    let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let max_attempts = sent.iter().map(|s| s.attempts).max().unwrap_or(0);
    eprintln!(
        "faults http (seed {seed:#x}): {HTTP_CLIENTS} clients, {total} transfers between \
         {HTTP_WALLETS} wallets in {:.1} s: {posted} posted, {refused} refused \
         (insufficient_funds); {} attempts ({} abandoned mid-flight by a 1-200 ms client \
         timeout, {} transfers needed a longer one, {} refused connections, {} broken or cut \
         short, {} 503, {} 429, {} 500; {} replays; {} transfers asked once more and replayed; \
         at most {max_attempts} attempts for one); serve SIGKILLed {} times at {kill_progress:?} \
         answered and restarted on the same port ({:.1} s down in all); {sessions_terminated} of its \
         database sessions terminated in {termination_rounds} rounds; every 2xx in the \
         ledger once with 2 entries, every refusal stored, nothing partial, balances exact, sum \
         conserved ({total_balance}), verify OK; test {:.1} s",
        load_duration.as_secs_f64(),
        count(&stats.attempts),
        count(&stats.abandoned),
        count(&stats.escalated),
        count(&stats.refused_connections),
        count(&stats.broken),
        count(&stats.unavailable),
        count(&stats.rate_limited),
        count(&stats.internal),
        count(&stats.replays),
        count(&stats.asked_again),
        SERVER_KILLS_AT.len(),
        server_down.as_secs_f64(),
        test_started.elapsed().as_secs_f64(),
    );
    assert!(
        anomalies.is_empty(),
        "{} anomalies:\n{}\nserve log: {}",
        anomalies.len(),
        anomalies.join("\n"),
        tail(&server.log, 20)
    );
    assert!(wrong_balances.is_empty(), "{wrong_balances:#?}");
    assert_eq!(
        total_balance,
        FUNDING * HTTP_WALLETS as i64,
        "money created or lost"
    );
    assert_eq!(
        partial,
        (0, 0, 0),
        "unbalanced transactions, posted without entries, unposted with entries"
    );
    assert!(
        count(&stats.abandoned) > 0,
        "no request was abandoned mid-flight"
    );
    assert!(
        posted > 0 && refused > 0,
        "posted {posted}, refused {refused}"
    );

    server.kill().await;
    let _ = std::fs::remove_dir_all(&logs);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------
// Test 3: PostgreSQL stopped under load, then started again.
// ---------------------------------------------------------------------------------------

const OUTAGE_SEED: u64 = 0xFA17_5EED_2026_0003;
const OUTAGE_CLIENTS: usize = 8;
const ACQUIRE_TIMEOUT_MS: u64 = 500;
/// The longest an answer may take while the database is down: the acquire timeout and a
/// margin for a loaded machine. More is a hang.
const OUTAGE_ANSWER_BOUND: Duration = Duration::from_millis(2_500);
/// A client gives up on an attempt after this long (far beyond any bound: a hang).
const HANG: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Attempt {
    transfer: Uuid,
    started: Instant,
    finished: Instant,
    result: Result<Reply, Failure>,
}

#[derive(Debug)]
struct OutageTransfer {
    id: Uuid,
    from: usize,
    to: usize,
    amount: i64,
    result: Result<(), String>,
    /// Got a 503 (or no answer) before its success.
    retried: bool,
}

async fn outage_client(
    seed: u64,
    addr: String,
    token: String,
    wallets: usize,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Attempt>>>,
) -> Vec<OutageTransfer> {
    let mut rng = Rng(seed);
    let mut transfers = Vec::new();
    let wallet = |i: usize| format!("outage-w{i}");
    while !stop.load(Ordering::Relaxed) {
        let id = Uuid::from_u64_pair(rng.next_u64(), rng.next_u64());
        let from = rng.below(wallets as u64) as usize;
        let to = (from + 1 + rng.below(wallets as u64 - 1) as usize) % wallets;
        let amount = 1 + rng.below(100) as i64;
        let body = json!({"id": id, "from": wallet(from), "to": wallet(to), "amount": amount});
        let mut retried = false;
        let mut tries = 0;
        let result = loop {
            tries += 1;
            let started = Instant::now();
            let result = call(
                &addr,
                "POST",
                "/v1/transfers",
                Some(&token),
                Some(&body),
                HANG,
            )
            .await;
            let finished = Instant::now();
            log.lock().unwrap().push(Attempt {
                transfer: id,
                started,
                finished,
                result: result.clone(),
            });
            match result {
                Ok(r) if r.status == 200 || r.status == 201 => break Ok(()),
                Ok(r) if r.status == 503 => {
                    retried = true;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(r) => break Err(format!("{}: {}", r.status, r.body)),
                Err(_) => {
                    retried = true;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            if tries >= 1_000 {
                break Err("no success in 1,000 attempts".into());
            }
        };
        transfers.push(OutageTransfer {
            id,
            from,
            to,
            amount,
            result,
            retried,
        });
    }
    transfers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_503_while_the_database_is_down_and_recovery() {
    let test_started = Instant::now();
    let seed = env_seed(OUTAGE_SEED);
    let mut postgres = PrivatePostgres::start().await;
    let database_url = postgres.url("wallet_ledger_faults");
    let mut migrate = Command::new(bin());
    migrate
        .args(["migrate", "--database-url", &database_url])
        .env("RUST_LOG", "warn");
    let migrated = run_to_end(migrate, Duration::from_secs(60)).await;
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let token = admin_token(&database_url).await;
    let logs = log_dir("outage");
    let app_name = application_name("outage");
    let acquire = ACQUIRE_TIMEOUT_MS.to_string();
    let mut server = Served::start(
        &database_url,
        &app_name,
        &["--pool-acquire-timeout-ms", &acquire],
        logs.join("serve.log"),
    )
    .await;
    let addr = server.addr.clone();
    let pid = server.pid();
    const WALLETS: usize = 4;
    const OUTAGE_FUNDING: i64 = 100_000_000;
    for i in 0..WALLETS {
        let wallet = format!("outage-w{i}");
        let r = definitive(
            &addr,
            &token,
            "/v1/accounts",
            &json!({"id": wallet, "currency": "SAR", "type": "wallet"}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let r = definitive(
            &addr,
            &token,
            "/v1/payments",
            &json!({"id": Uuid::new_v4(), "account": wallet, "amount": OUTAGE_FUNDING,
                    "currency": "SAR", "provider": "test"}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..OUTAGE_CLIENTS)
        .map(|k| {
            tokio::spawn(outage_client(
                seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                addr.clone(),
                token.clone(),
                WALLETS,
                stop.clone(),
                attempts.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    // The database stops under load.
    let stop_called = Instant::now();
    postgres.stop().await;
    let stopped = Instant::now();
    let readyz = |addr: String| async move { http_get(&addr, "/readyz").await.map(|(s, _)| s) };
    let went_unready = eventually(Duration::from_secs(10), || {
        let addr = addr.clone();
        async move { readyz(addr).await == Some(503) }
    })
    .await;
    let unready_after = stopped.elapsed();
    let readyz_answer_started = Instant::now();
    let readyz_during = readyz(addr.clone()).await;
    let readyz_latency = readyz_answer_started.elapsed();
    tokio::time::sleep_until((stopped + Duration::from_secs(3)).into()).await;

    // It starts again; the same serve process must recover by itself.
    let restart_called = Instant::now();
    postgres.restart().await;
    let restarted = Instant::now();
    let ready_again = eventually(Duration::from_secs(20), || {
        let addr = addr.clone();
        async move { readyz(addr).await == Some(200) }
    })
    .await;
    let ready_after = restarted.elapsed();
    let log = attempts.clone();
    let served_again = eventually(Duration::from_secs(20), || {
        let log = log.clone();
        async move {
            log.lock().unwrap().iter().any(|a| {
                a.started >= restarted
                    && matches!(&a.result, Ok(r) if r.status == 200 || r.status == 201)
            })
        }
    })
    .await;
    let first_success_after = attempts
        .lock()
        .unwrap()
        .iter()
        .filter(|a| {
            a.finished >= restarted
                && matches!(&a.result, Ok(r) if r.status == 200 || r.status == 201)
        })
        .map(|a| a.finished - restarted)
        .min();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut transfers = Vec::new();
    for client in clients {
        transfers.extend(client.await.unwrap());
    }
    let still_running = server.running() && server.pid() == pid;

    // What the clients saw.
    let attempts = attempts.lock().unwrap().clone();
    let mut violations = Vec::new();
    let mut during = 0;
    let mut max_latency = Duration::ZERO;
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for a in &attempts {
        let latency = a.finished - a.started;
        let label = match &a.result {
            Ok(r) => r.status.to_string(),
            Err(f) => format!("{f:?}"),
        };
        *statuses.entry(label.clone()).or_default() += 1;
        if matches!(&a.result, Err(Failure::TimedOut)) {
            violations.push(format!(
                "transfer {}: no answer in {HANG:?} (a hang), started {:.2} s after the stop",
                a.transfer,
                a.started.saturating_duration_since(stopped).as_secs_f64()
            ));
        }
        if matches!(&a.result, Ok(r) if r.status == 500) {
            violations.push(format!(
                "transfer {}: 500 instead of 503, {:.2} s into the outage: {}",
                a.transfer,
                a.started
                    .saturating_duration_since(stop_called)
                    .as_secs_f64(),
                a.result.as_ref().unwrap().body
            ));
        }
        if a.finished <= stop_called && !matches!(&a.result, Ok(r) if r.status < 300) {
            violations.push(format!("before the outage: {label}"));
        }
        if a.started >= stopped && a.finished <= restart_called {
            during += 1;
            max_latency = max_latency.max(latency);
            let fine = match &a.result {
                Ok(r) => {
                    r.status == 503
                        && r.header("content-type")
                            .is_some_and(|c| c.starts_with("application/problem+json"))
                        && r.header("retry-after").is_some()
                        && r.code() == "unavailable"
                        && latency <= OUTAGE_ANSWER_BOUND
                }
                Err(_) => false,
            };
            if !fine {
                violations.push(format!(
                    "during the outage, after {:.2} s: {:?}",
                    latency.as_secs_f64(),
                    a.result
                ));
            }
        }
    }
    let failed: Vec<&OutageTransfer> = transfers.iter().filter(|t| t.result.is_err()).collect();
    let retried = transfers.iter().filter(|t| t.retried).count();

    // The ledger: every transfer once, whole.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&database_url)
        .await
        .unwrap();
    let rows: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "select t.id, t.status, count(e.id) from transactions t \
         left join entries e on e.transaction_id = t.id \
         where t.kind = 'transfer' group by t.id, t.status",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut rows: HashMap<Uuid, (String, i64)> =
        rows.into_iter().map(|(id, s, n)| (id, (s, n))).collect();
    let mut ledger_problems = Vec::new();
    let mut expected = [OUTAGE_FUNDING; WALLETS];
    for t in &transfers {
        match rows.remove(&t.id) {
            Some((status, 2)) if status == "posted" && t.result.is_ok() => {
                expected[t.from] -= t.amount;
                expected[t.to] += t.amount;
            }
            row => {
                ledger_problems.push(format!("transfer {}: {:?}, ledger {row:?}", t.id, t.result))
            }
        }
    }
    for (id, row) in &rows {
        ledger_problems.push(format!(
            "transfer {id} in the ledger, never answered: {row:?}"
        ));
    }
    let balances: Vec<(String, i64)> = sqlx::query_as(
        "select account_id, sum(amount)::bigint from entries \
         where account_id like 'outage-w%' group by account_id order by account_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (wallet, got) in &balances {
        let i: usize = wallet.trim_start_matches("outage-w").parse().unwrap();
        if *got != expected[i] {
            ledger_problems.push(format!("{wallet}: posted {got}, expected {}", expected[i]));
        }
    }
    let partial = partial_transactions(&pool).await;
    pool.close().await;
    verify_clean(
        &database_url,
        &shared_redis_url(),
        &unique_stream("faults-outage"),
    )
    .await;

    eprintln!(
        "faults database outage (seed {seed:#x}): {OUTAGE_CLIENTS} clients, {} transfers, {} \
         attempts {statuses:?}; PostgreSQL stopped (pg_ctl -m fast, {:.2} s) under load: \
         /readyz 503 {:.2} s after it (answered {readyz_during:?} in {:.2} s), {during} \
         requests during the {:.1} s outage, all 503 problem+json with Retry-After, the \
         slowest in {:.2} s (acquire timeout {ACQUIRE_TIMEOUT_MS} ms); started again ({:.2} \
         s): /readyz 200 after {:.2} s, first success {:?} after, the same serve process \
         (pid {pid:?}); {retried} transfers retried across the outage, every transfer in the \
         ledger once, balances exact, verify OK; test {:.1} s",
        transfers.len(),
        attempts.len(),
        (stopped - stop_called).as_secs_f64(),
        unready_after.as_secs_f64(),
        readyz_latency.as_secs_f64(),
        (restart_called - stopped).as_secs_f64(),
        max_latency.as_secs_f64(),
        (restarted - restart_called).as_secs_f64(),
        ready_after.as_secs_f64(),
        first_success_after,
        test_started.elapsed().as_secs_f64(),
    );
    assert!(
        went_unready,
        "/readyz never answered 503 while the database was down"
    );
    assert_eq!(readyz_during, Some(503), "/readyz during the outage");
    assert!(
        ready_again,
        "/readyz never answered 200 again:\n{}",
        tail(&server.log, 20)
    );
    assert!(
        served_again,
        "no request succeeded after the restart:\n{}",
        tail(&server.log, 20)
    );
    assert!(
        still_running,
        "serve exited or was replaced:\n{}",
        tail(&server.log, 20)
    );
    assert!(during > 0, "no request was answered during the outage");
    assert!(
        violations.is_empty(),
        "{} violations:\n{}\nserve log:\n{}",
        violations.len(),
        violations.join("\n"),
        tail(&server.log, 20)
    );
    assert!(failed.is_empty(), "transfers without success: {failed:#?}");
    assert!(retried > 0, "no transfer was retried across the outage");
    assert!(ledger_problems.is_empty(), "{ledger_problems:#?}");
    assert_eq!(balances.len(), WALLETS);
    assert_eq!(
        partial,
        (0, 0, 0),
        "unbalanced transactions, posted without entries, unposted with entries"
    );

    server.kill().await;
    let _ = std::fs::remove_dir_all(&logs);
    drop(postgres);
}

// ---------------------------------------------------------------------------------------
// Test 4: the broker comes back without its data (the stream and the group are gone).
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_back_without_its_data_is_consumed_again() {
    let app = TestApp::new().await;
    let wallets = vec!["lost-w1".to_owned()];
    app.create_wallet(&wallets[0]).await;
    let mut redis = PrivateRedis::start().await;
    let redis_url = redis.url();
    let stream = unique_stream("faults-lost");
    let metrics = format!("127.0.0.1:{}", free_port());
    let logs = log_dir("lost");
    let log = logs.join("consumer.log");
    let mut command = consumer_command_with(
        &app.database_url,
        &redis_url,
        &stream,
        "lost-c1",
        &["--metrics-addr", &metrics],
    );
    command.stdout(Stdio::null()).stderr(append_to(&log));
    let mut consumer = command.spawn().expect("the consumer starts");
    let mut rng = Rng(env_seed(0xFA17_5EED_2026_0004));
    let payments: Vec<Payment> = (0..20)
        .map(|_| Payment::random(&mut rng, &wallets))
        .collect();
    let stored = |n: i64| {
        let pool = app.pool.clone();
        move || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "select count(*) from transactions where kind = 'payment'",
                )
                .fetch_one(&pool)
                .await
                .unwrap()
                    == n
            }
        }
    };
    let mut conn = redis_at(&redis_url).await;
    for (i, p) in payments[..10].iter().enumerate() {
        let _: String = conn.xadd(&stream, "*", &p.fields(i + 1)).await.unwrap();
    }
    assert!(
        eventually(Duration::from_secs(20), stored(10)).await,
        "the first 10 payments were not applied:\n{}",
        tail(&log, 20)
    );

    // The broker dies and comes back empty; producers go on publishing.
    redis.restart_empty().await;
    let back = Instant::now();
    let mut conn = redis_at(&redis_url).await;
    for (i, p) in payments[10..].iter().enumerate() {
        let _: String = conn.xadd(&stream, "*", &p.fields(i + 11)).await.unwrap();
    }
    let caught_up = eventually(Duration::from_secs(20), stored(20)).await;
    let ready = http_get(&metrics, "/readyz").await.map(|(s, _)| s);
    let applied: i64 =
        sqlx::query_scalar("select count(*) from transactions where kind = 'payment'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    eprintln!(
        "faults broker without its data: 10 payments applied, the broker SIGKILLed and \
         restarted empty, 10 more published: {} of them applied {:.1} s later, /readyz \
         {ready:?}, the consumer {}",
        applied - 10,
        back.elapsed().as_secs_f64(),
        if consumer.try_wait().unwrap().is_none() {
            "still running"
        } else {
            "exited"
        }
    );
    // A broker back without the stream and its group (a failover to a replica that had not
    // caught up, a restart without persistence, a deleted key) answers NOGROUP: the consumer
    // creates the group again and goes on (re-reading from 0 is safe: payments are idempotent).
    assert!(
        caught_up && ready == Some(200),
        "after the broker came back empty, {} of 10 new payments applied in 20 s, /readyz \
         {ready:?}:\n{}",
        applied - 10,
        tail(&log, 5)
    );
    assert_eq!(
        app.posted_balance(&wallets[0]).await,
        payments.iter().map(|p| p.amount).sum::<i64>()
    );
    sigkill(&mut consumer).await;
    let _ = std::fs::remove_dir_all(&logs);
    drop(redis);
    app.finish().await;
}
