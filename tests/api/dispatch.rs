//! The webhook dispatcher end to end: events written by the ledger are fanned out, claimed,
//! POSTed to a real receiver process that checks every signature with the Standard Webhooks
//! reference library (`tests/webhook_receiver.py`, or the scripted variant below for answers
//! it cannot give), and recorded. Deterministic cases drive `Dispatcher::step` in-process; the
//! crash and the CLI cases run the binary.

use super::common::TestApp;
use super::stream_support::{
    PrivateRedis, bin, eventually, free_port, http_get, redis_at, run_to_end, serve,
    shared_redis_url, terminate, unique_stream,
};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use uuid::Uuid;
use wallet_ledger::http::HttpSettings;
use wallet_ledger::ledger::events::{EventType, event_id};
use wallet_ledger::outbox::dispatcher::{Dispatcher, Settings, StepReport};
use wallet_ledger::outbox::signing::generate_secret;
use wallet_ledger::outbox::subscriptions::UrlPolicy;
use wallet_ledger::outbox::subscriptions::WebhookPolicy;

// ---------------------------------------------------------------------------------------------
// Receiver processes
// ---------------------------------------------------------------------------------------------

/// A receiver for answers `tests/webhook_receiver.py` cannot give, written to a temporary file
/// when used. Same log format, same signature check (the `standardwebhooks` package).
///
/// MODE: `random:PERCENT:SEED` (500 with that probability, else 204, from a seeded generator)
/// or `codes:C1,C2,...` (request n answers Cn, the last one repeats; `429@2` adds
/// `Retry-After: 2`).
const SCRIPTED_RECEIVER: &str = r#"
import json, random, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from standardwebhooks import Webhook

port, log_path, mode, secrets = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(",")
webhooks = [Webhook(s) for s in secrets]
lock = threading.Lock()
seen = 0
kind, _, rest = mode.partition(":")
if kind == "random":
    percent, seed = rest.split(":")
    rng = random.Random(int(seed))
elif kind == "codes":
    script = [c.split("@") for c in rest.split(",")]
else:
    sys.exit("unknown mode " + mode)


def verified(body, headers):
    for wh in webhooks:
        try:
            wh.verify(body, headers)
            return True
        except Exception:
            pass
    return False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global seen
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        retry_after = None
        with lock:
            seen += 1
            n = seen
            if kind == "random":
                status = 500 if rng.random() * 100 < float(percent) else 204
            else:
                step = script[min(n, len(script)) - 1]
                status = int(step[0])
                retry_after = step[1] if len(step) > 1 else None
        record = {
            "n": n,
            "answered": status,
            "verified": verified(body, headers),
            "webhook_id": headers.get("webhook-id"),
            "idempotency_key": headers.get("idempotency-key"),
            "signatures": headers.get("webhook-signature", "").count("v1,"),
            "retry_after": retry_after,
            "body": json.loads(body or b"null"),
        }
        with lock, open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        self.send_response(status)
        if retry_after is not None:
            self.send_header("retry-after", retry_after)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()
"#;

/// A receiver process on 127.0.0.1:`port`, killed (and its files removed) on drop.
struct Receiver {
    port: u16,
    dir: PathBuf,
    child: Child,
}

impl Receiver {
    /// `tests/webhook_receiver.py` in MODE `ok`, `fail:N`, `status:CODE` or `slow:SECONDS`.
    async fn start(port: u16, mode: &str, secrets: &[&str]) -> Receiver {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webhook_receiver.py");
        Receiver::spawn(port, script, mode, secrets).await
    }

    /// The scripted receiver above in MODE `random:PERCENT:SEED` or `codes:...`.
    async fn scripted(port: u16, mode: &str, secrets: &[&str]) -> Receiver {
        let dir = std::env::temp_dir().join(format!("wl-scripted-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("scripted_receiver.py");
        std::fs::write(&script, SCRIPTED_RECEIVER).unwrap();
        Receiver::spawn(port, script, mode, secrets).await
    }

    async fn spawn(port: u16, script: PathBuf, mode: &str, secrets: &[&str]) -> Receiver {
        let dir =
            std::env::temp_dir().join(format!("wl-receiver-{port}-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let stderr = std::fs::File::create(dir.join("stderr")).unwrap();
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .arg(dir.join("log.jsonl"))
            .arg(mode)
            .arg(secrets.join(","))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(15), lines.next_line())
            .await
            .ok()
            .and_then(|l| l.ok())
            .flatten();
        assert_eq!(
            first.as_deref(),
            Some("ready"),
            "the receiver on port {port} did not start (is `standardwebhooks` installed? \
             scripts/services.sh installs it): {}",
            std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
        );
        Receiver { port, dir, child }
    }

    fn url(&self) -> String {
        hook_url(self.port)
    }

    /// Every request received so far, in the order logged.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until the receiver logged `n` requests (it logs after answering is decided; a
    /// `slow` one logs after its sleep).
    async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Value> {
        let seen = eventually(limit, || async { self.requests().len() >= n }).await;
        let got = self.requests();
        assert!(
            seen,
            "the receiver expected {n} requests, got {}: {got:?}",
            got.len()
        );
        got
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hook_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/hooks")
}

// ---------------------------------------------------------------------------------------------
// Set-up and reads
// ---------------------------------------------------------------------------------------------

/// A test app whose webhook allow-list names these receivers' ports.
async fn app_allowing(ports: &[u16]) -> TestApp {
    TestApp::with_config(HttpSettings {
        webhooks: WebhookPolicy {
            allowed_hosts: ports.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
        },
        ..Default::default()
    })
    .await
}

/// Short timings: 2 s per request (a 4 s lease), 20 ms backoff doubling up to 200 ms.
fn settings(ports: &[u16]) -> Settings {
    Settings {
        interval: Duration::from_millis(20),
        batch: 100,
        timeout: Duration::from_secs(2),
        max_attempts: 5,
        backoff: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        policy: UrlPolicy {
            allowed_hosts: ports.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
        },
        concurrency: 16,
        per_subscription: 4,
        events_stream: None,
    }
}

/// Creates a subscription (every event type) and returns its id and secret.
async fn subscribe(app: &TestApp, url: &str, secret: Option<&str>) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let mut body = json!({"id": id, "url": url});
    if let Some(secret) = secret {
        body["secret"] = json!(secret);
    }
    let r = app.post("/v1/webhooks", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "create webhook: {}", r.text);
    let secret = r.body["secret"].as_str().unwrap().to_owned();
    (id, secret)
}

/// A payment into `wallet`; returns the id of its `transaction.posted` event.
async fn pay(app: &TestApp, wallet: &str, amount: i64) -> Uuid {
    let r = app.fund(wallet, amount).await;
    let transaction: Uuid = r.body["id"].as_str().unwrap().parse().unwrap();
    sqlx::query_scalar(
        "select id from outbox_events where transaction_id = $1 and type = 'transaction.posted'",
    )
    .bind(transaction)
    .fetch_one(&app.pool)
    .await
    .expect("a posted payment has its event")
}

async fn all_event_ids(app: &TestApp) -> BTreeSet<Uuid> {
    sqlx::query_scalar::<_, Uuid>("select id from outbox_events")
        .fetch_all(&app.pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// (pending deliveries, events not yet fanned out).
async fn backlog(app: &TestApp) -> (i64, i64) {
    sqlx::query_as(
        "select (select count(*) from webhook_deliveries where status = 'pending'),
                (select count(*) from outbox_events where fanned_out_at is null)",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

/// Steps until nothing is pending and every event is fanned out; returns the summed reports.
async fn settle(app: &TestApp, dispatcher: &mut Dispatcher, limit: Duration) -> StepReport {
    let until = Instant::now() + limit;
    let mut total = StepReport::default();
    loop {
        let r = dispatcher.step().await.expect("a step succeeds");
        total.fanned_out += r.fanned_out;
        total.claimed += r.claimed;
        total.delivered += r.delivered;
        total.retried += r.retried;
        total.dead += r.dead;
        total.streamed += r.streamed;
        if backlog(app).await == (0, 0) {
            return total;
        }
        assert!(
            Instant::now() < until,
            "deliveries still pending after {limit:?}: {:?}",
            backlog(app).await
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The deliveries of one event (GET /v1/deliveries?event_id=).
async fn deliveries_of(app: &TestApp, event: Uuid) -> Vec<Value> {
    let r = app.get(&format!("/v1/deliveries?event_id={event}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["data"].as_array().unwrap().clone()
}

/// The one delivery of `event` with its attempts (GET /v1/deliveries/{id}).
async fn only_delivery(app: &TestApp, event: Uuid) -> Value {
    let list = deliveries_of(app, event).await;
    assert_eq!(list.len(), 1, "one delivery of {event}: {list:?}");
    delivery(app, list[0]["id"].as_str().unwrap()).await
}

async fn delivery(app: &TestApp, id: &str) -> Value {
    let r = app.get(&format!("/v1/deliveries/{id}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body
}

fn attempt_statuses(detail: &Value) -> Vec<Option<i64>> {
    detail["attempts_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_i64())
        .collect()
}

fn attempt_starts(detail: &Value) -> Vec<DateTime<Utc>> {
    detail["attempts_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["started_at"].as_str().unwrap().parse().unwrap())
        .collect()
}

fn ms(d: chrono::TimeDelta) -> i64 {
    d.num_milliseconds()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn webhook_ids(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .map(|r| text(&r["webhook_id"]).to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Retries with backoff until the receiver accepts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_failing_receiver_gets_the_same_signed_event_until_it_accepts_with_growing_gaps() {
    let port = free_port();
    // The receiver needs the secret: the subscription is created with one we chose.
    let secret = generate_secret();
    let receiver = Receiver::start(port, "fail:3", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let r = app.fund("w1", 5_000).await;
    let transaction = text(&r.body["id"]).to_owned();
    let event = pay_event(&app, &transaction).await;
    assert_eq!(
        event,
        event_id(EventType::TransactionPosted, &transaction),
        "the event id is UUIDv5 of its type and the transaction id"
    );

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            backoff: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            max_attempts: 10,
            ..settings(&[port])
        },
    )
    .await
    .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(20)).await;
    assert_eq!((report.delivered, report.retried, report.dead), (1, 3, 0));

    let requests = receiver.wait_for(4, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 4, "exactly N + 1 requests: {requests:?}");
    for (i, req) in requests.iter().enumerate() {
        assert_eq!(text(&req["webhook_id"]), event.to_string(), "request {i}");
        assert_eq!(
            text(&req["idempotency_key"]),
            event.to_string(),
            "request {i}"
        );
        assert_eq!(
            req["verified"], true,
            "request {i}: the library verifies it"
        );
        assert_eq!(req["signatures"], 1);
        assert_eq!(text(&req["body"]["id"]), event.to_string());
        assert_eq!(text(&req["body"]["type"]), "transaction.posted");
        assert_eq!(text(&req["body"]["data"]["transaction"]["id"]), transaction);
    }
    let answered: Vec<i64> = requests
        .iter()
        .map(|r| r["answered"].as_i64().unwrap())
        .collect();
    assert_eq!(answered, [500, 500, 500, 204]);

    let detail = only_delivery(&app, event).await;
    assert_eq!(detail["status"], "delivered", "{detail}");
    assert_eq!(detail["attempts"], 4);
    assert_eq!(detail["last_status"], 204);
    assert!(detail["delivered_at"].is_string());
    assert_eq!(
        attempt_statuses(&detail),
        [Some(500), Some(500), Some(500), Some(204)]
    );
    // Backoff 200 ms doubling, drawn between half and all of it: the k-th gap is at least
    // 100·2^(k-1) ms, and the third (≥ 400 ms) is longer than the first (≤ 200 ms + step lag).
    let starts = attempt_starts(&detail);
    let gaps: Vec<i64> = starts.windows(2).map(|w| ms(w[1] - w[0])).collect();
    for (k, gap) in gaps.iter().enumerate() {
        let least = 100 * (1 << k);
        assert!(
            *gap >= least,
            "gap {} is {gap} ms, below {least} ms: {gaps:?}",
            k + 1
        );
    }
    assert!(gaps[2] > gaps[0], "the gaps grow: {gaps:?}");
    assert!(gaps[0] < 600, "the first retry came late: {gaps:?}");
    receiver.stop().await;
    app.finish().await;
}

async fn pay_event(app: &TestApp, transaction: &str) -> Uuid {
    sqlx::query_scalar(
        "select id from outbox_events where transaction_id = $1::uuid and type = 'transaction.posted'",
    )
    .bind(transaction)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// 2. Timeouts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_receiver_slower_than_the_timeout_is_retried_then_dead_naming_the_timeout() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "slow:1", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            timeout: Duration::from_millis(300),
            max_attempts: 3,
            ..settings(&[port])
        },
    )
    .await
    .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(20)).await;
    assert_eq!((report.delivered, report.retried, report.dead), (0, 2, 1));

    let detail = only_delivery(&app, event).await;
    assert_eq!(detail["status"], "dead", "{detail}");
    assert_eq!(detail["attempts"], 3);
    assert!(detail["last_status"].is_null());
    let last_error = text(&detail["last_error"]);
    assert!(
        last_error.contains("no answer within 300ms")
            && last_error.contains("retry budget (3 attempts)"),
        "{last_error}"
    );
    let log = detail["attempts_log"].as_array().unwrap();
    assert_eq!(log.len(), 3);
    for a in log {
        assert!(a["status"].is_null());
        assert!(text(&a["error"]).contains("no answer within 300ms"), "{a}");
        assert!(a["duration_ms"].as_i64().unwrap() >= 290, "{a}");
    }
    // The slow receiver logs each request after its sleep: all three arrive, signed alike.
    let requests = receiver.wait_for(3, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r["verified"] == true));
    assert!(
        webhook_ids(&requests)
            .iter()
            .all(|id| *id == event.to_string())
    );
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Which answers are final and which are retried
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_400_or_a_redirect_is_final_at_once_while_408_and_429_are_retried_until_the_budget() {
    let (p400, p408, p429, p302) = (free_port(), free_port(), free_port(), free_port());
    let secret = generate_secret();
    let r400 = Receiver::start(p400, "status:400", &[&secret]).await;
    let r408 = Receiver::start(p408, "status:408", &[&secret]).await;
    let r429 = Receiver::start(p429, "status:429", &[&secret]).await;
    let r302 = Receiver::start(p302, "status:302", &[&secret]).await;
    let app = app_allowing(&[p400, p408, p429, p302]).await;
    let (s400, _) = subscribe(&app, &r400.url(), Some(&secret)).await;
    let (s408, _) = subscribe(&app, &r408.url(), Some(&secret)).await;
    let (s429, _) = subscribe(&app, &r429.url(), Some(&secret)).await;
    let (s302, _) = subscribe(&app, &r302.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            max_attempts: 3,
            ..settings(&[p400, p408, p429, p302])
        },
    )
    .await
    .unwrap();
    let first = dispatcher.step().await.unwrap();
    assert_eq!(first.fanned_out, 1);
    assert_eq!(
        (first.claimed, first.dead, first.retried),
        (4, 2, 2),
        "{first:?}"
    );
    let report = settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!(report.dead, 2, "408 and 429 die once the budget is spent");

    let by_subscription: BTreeMap<String, Value> = {
        let mut m = BTreeMap::new();
        for d in deliveries_of(&app, event).await {
            let full = delivery(&app, text(&d["id"])).await;
            m.insert(text(&d["subscription_id"]).to_owned(), full);
        }
        m
    };
    let d400 = &by_subscription[&s400.to_string()];
    assert_eq!(d400["status"], "dead");
    assert_eq!(d400["attempts"], 1);
    assert_eq!(d400["last_status"], 400);
    assert!(text(&d400["last_error"]).contains("(final)"), "{d400}");
    assert_eq!(attempt_statuses(d400), [Some(400)]);
    let d302 = &by_subscription[&s302.to_string()];
    assert_eq!(d302["status"], "dead");
    assert_eq!(d302["attempts"], 1);
    assert_eq!(d302["last_status"], 302);
    assert!(
        text(&d302["last_error"]).contains("redirects are not followed"),
        "{d302}"
    );
    for (sub, code) in [(s408, 408), (s429, 429)] {
        let d = &by_subscription[&sub.to_string()];
        assert_eq!(d["status"], "dead", "{d}");
        assert_eq!(d["attempts"], 3);
        assert_eq!(d["last_status"], code);
        assert_eq!(attempt_statuses(d), [Some(code); 3]);
        assert!(
            text(&d["last_error"]).contains(&format!("answered {code}"))
                && text(&d["last_error"]).contains("retry budget (3 attempts)"),
            "{d}"
        );
    }
    // A few more steps send nothing more.
    for _ in 0..5 {
        let r = dispatcher.step().await.unwrap();
        assert_eq!(r.claimed, 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(r400.requests().len(), 1, "one request to the 400 receiver");
    assert_eq!(r302.requests().len(), 1, "one request to the 302 receiver");
    assert_eq!(r408.wait_for(3, Duration::from_secs(5)).await.len(), 3);
    assert_eq!(r429.wait_for(3, Duration::from_secs(5)).await.len(), 3);
    for r in [&r400, &r408, &r429, &r302] {
        assert!(r.requests().iter().all(|q| q["verified"] == true));
    }
    r400.stop().await;
    r408.stop().await;
    r429.stop().await;
    r302.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn retry_after_of_a_429_is_honoured_up_to_the_longest_backoff() {
    let (honoured, capped) = (free_port(), free_port());
    let secret = generate_secret();
    // Retry-After: 1 s (under the 1.5 s cap) and 60 s (capped to 1.5 s); then 204.
    let r1 = Receiver::scripted(honoured, "codes:429@1,204", &[&secret]).await;
    let r60 = Receiver::scripted(capped, "codes:429@60,204", &[&secret]).await;
    let app = app_allowing(&[honoured, capped]).await;
    let (s1, _) = subscribe(&app, &r1.url(), Some(&secret)).await;
    let (s60, _) = subscribe(&app, &r60.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            backoff: Duration::from_millis(20),
            backoff_max: Duration::from_millis(1_500),
            ..settings(&[honoured, capped])
        },
    )
    .await
    .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!((report.delivered, report.retried), (2, 2));

    for (sub, least, receiver) in [(s1, 1_000, &r1), (s60, 1_500, &r60)] {
        let d = deliveries_of(&app, event)
            .await
            .into_iter()
            .find(|d| d["subscription_id"] == sub.to_string())
            .unwrap();
        let d = delivery(&app, text(&d["id"])).await;
        assert_eq!(d["status"], "delivered", "{d}");
        assert_eq!(attempt_statuses(&d), [Some(429), Some(204)]);
        let starts = attempt_starts(&d);
        let gap = ms(starts[1] - starts[0]);
        // Without Retry-After the 20 ms backoff would have retried within ~20 ms.
        assert!(
            (least..least + 800).contains(&gap),
            "Retry-After: expected a gap of about {least} ms, got {gap} ms"
        );
        let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
        assert_eq!(requests.len(), 2);
        assert!(requests.iter().all(|q| q["verified"] == true));
    }
    r1.stop().await;
    r60.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 4. A receiver that is down, then redelivery (API and CLI)
// ---------------------------------------------------------------------------------------------

fn deliveries_cli(database_url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args(["deliveries", "--database-url", database_url])
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("WALLET_LEDGER_FAILPOINT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_receiver_that_is_down_goes_dead_and_is_redelivered_by_the_api_and_the_cli() {
    let port = free_port(); // nothing listens yet
    let secret = generate_secret();
    let app = app_allowing(&[port]).await;
    subscribe(&app, &hook_url(port), Some(&secret)).await;
    app.create_wallet("w1").await;
    let e1 = pay(&app, "w1", 100).await;
    let e2 = pay(&app, "w1", 200).await;

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            max_attempts: 3,
            ..settings(&[port])
        },
    )
    .await
    .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!((report.delivered, report.retried, report.dead), (0, 4, 2));
    let d1 = only_delivery(&app, e1).await;
    let d2 = only_delivery(&app, e2).await;
    for d in [&d1, &d2] {
        assert_eq!(d["status"], "dead", "{d}");
        assert_eq!(d["attempts"], 3);
        assert_eq!(attempt_statuses(d), [None, None, None]);
        let e = text(&d["last_error"]);
        assert!(
            e.contains("could not be reached") && e.contains("retry budget (3 attempts)"),
            "{e}"
        );
    }
    let (id1, id2) = (text(&d1["id"]).to_owned(), text(&d2["id"]).to_owned());

    // The receiver comes back; the operator sends the first one again through the API.
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let r = app
        .post_empty(&format!("/v1/deliveries/{id1}/redeliver"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "pending");
    assert_eq!(r.body["attempts"], 0);
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    let d1 = delivery(&app, &id1).await;
    assert_eq!(d1["status"], "delivered", "{d1}");
    assert_eq!(d1["attempts"], 1, "a fresh budget");
    assert_eq!(attempt_statuses(&d1), [None, None, None, Some(204)]);
    assert_eq!(delivery(&app, &id2).await["status"], "dead");
    let requests = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(webhook_ids(&requests), [e1.to_string()]);
    assert_eq!(text(&requests[0]["idempotency_key"]), e1.to_string());
    assert_eq!(requests[0]["verified"], true);

    // The command line: list the dead ones, send them all again.
    let out = run_to_end(
        deliveries_cli(&app.database_url, &["list", "--status", "dead"]),
        Duration::from_secs(30),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(text(&listed[0]["id"]), id2);
    assert_eq!(text(&listed[0]["event_id"]), e2.to_string());
    assert_eq!(listed[0]["status"], "dead");

    let out = run_to_end(
        deliveries_cli(&app.database_url, &["redeliver", "--all-dead"]),
        Duration::from_secs(30),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("{id2}: due now")),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("1 deliveries scheduled"),
        "{}",
        stdout(&out)
    );
    // Audited as the API's redelivery is, under the operator's operating-system user.
    let audited: Vec<String> = sqlx::query_scalar(
        "select owner from audit_log where action = 'delivery.redeliver' and resource = $1",
    )
    .bind(&id2)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert!(audited[0].starts_with("cli:"), "{audited:?}");
    // A status that is not one refuses, as the API does (422), instead of listing nothing.
    let out = run_to_end(
        deliveries_cli(&app.database_url, &["list", "--status", "bogus"]),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--status"), "{}", stderr(&out));
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!(delivery(&app, &id2).await["status"], "delivered");
    let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(webhook_ids(&requests), [e1.to_string(), e2.to_string()]);
    assert!(requests.iter().all(|q| q["verified"] == true));

    let out = run_to_end(
        deliveries_cli(&app.database_url, &["list", "--status", "dead"]),
        Duration::from_secs(30),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "", "no dead delivery is left");

    // A delivered one may be sent again too: same webhook-id, the receiver recognises it.
    let r = app
        .post_empty(&format!("/v1/deliveries/{id1}/redeliver"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "pending");
    assert!(r.body["delivered_at"].is_null());
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!(delivery(&app, &id1).await["status"], "delivered");
    let requests = receiver.wait_for(3, Duration::from_secs(5)).await;
    assert_eq!(
        webhook_ids(&requests),
        [e1.to_string(), e2.to_string(), e1.to_string()]
    );
    assert_eq!(requests[0]["body"], requests[2]["body"]);
    let r = app
        .post_empty(&format!("/v1/deliveries/{}/redeliver", Uuid::new_v4()))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    receiver.stop().await;
    app.finish().await;
}

// The database flags are taken after the action too, as `outbox`, `purge`, `consume` and
// `verify` take them.
#[tokio::test]
async fn the_deliveries_cli_takes_the_database_url_after_its_action() {
    let app = TestApp::new().await;
    let mut redeliver = Command::new(bin());
    redeliver
        .args([
            "deliveries",
            "redeliver",
            "--all-dead",
            "--database-url",
            &app.database_url,
        ])
        .env_remove("WALLET_LEDGER_FAILPOINT")
        .kill_on_drop(true);
    let out = run_to_end(redeliver, Duration::from_secs(30)).await;
    assert!(
        out.status.success(),
        "deliveries redeliver --all-dead --database-url: {:?} {}",
        out.status,
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("0 deliveries scheduled"),
        "{}",
        stdout(&out)
    );
    let mut list = Command::new(bin());
    list.args([
        "deliveries",
        "list",
        "--status",
        "dead",
        "--database-url",
        &app.database_url,
    ])
    .env_remove("WALLET_LEDGER_FAILPOINT")
    .kill_on_drop(true);
    let out = run_to_end(list, Duration::from_secs(30)).await;
    assert!(
        out.status.success(),
        "deliveries list --database-url: {}",
        stderr(&out)
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Nothing lost under random failures
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn fifty_payments_to_a_receiver_failing_a_third_of_the_time_are_all_delivered_once() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::scripted(port, "random:30:20261130", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    for i in 0..50 {
        pay(&app, "w1", 100 + i).await;
    }
    let events = all_event_ids(&app).await;
    assert!(events.len() >= 50);

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            max_attempts: 100,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(40),
            batch: 10,
            ..settings(&[port])
        },
    )
    .await
    .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(60)).await;
    assert_eq!(report.delivered, events.len());
    assert_eq!(report.dead, 0);

    let statuses: Vec<(Uuid, String, i32)> = sqlx::query_as(
        "select event_id, status, attempts from webhook_deliveries order by event_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        statuses.iter().map(|s| s.0).collect::<BTreeSet<_>>(),
        events,
        "one delivery per event"
    );
    assert!(statuses.iter().all(|s| s.1 == "delivered"), "{statuses:?}");

    let total_attempts: i64 = statuses.iter().map(|s| i64::from(s.2)).sum();
    let requests = receiver
        .wait_for(total_attempts as usize, Duration::from_secs(5))
        .await;
    assert_eq!(
        requests.len() as i64,
        total_attempts,
        "one request per recorded attempt"
    );
    let mut per_event: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for q in &requests {
        assert_eq!(q["verified"], true, "{q}");
        assert_eq!(q["webhook_id"], q["idempotency_key"]);
        per_event
            .entry(text(&q["webhook_id"]).to_owned())
            .or_default()
            .push(q["answered"].as_i64().unwrap());
    }
    assert_eq!(
        per_event.keys().cloned().collect::<BTreeSet<_>>(),
        events.iter().map(Uuid::to_string).collect::<BTreeSet<_>>(),
        "no event missing, none unknown"
    );
    for (event, answers) in &per_event {
        // Duplicates only from retries after failures: every answer but the last is a 500.
        assert_eq!(answers.last(), Some(&204), "{event}: {answers:?}");
        assert!(
            answers[..answers.len() - 1].iter().all(|a| *a == 500),
            "{event} was accepted twice: {answers:?}"
        );
    }
    let failures = requests.iter().filter(|q| q["answered"] == 500).count();
    assert!(
        failures > 5,
        "the receiver should have failed some: {failures}"
    );
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 6. A dispatcher killed between sending and recording
// ---------------------------------------------------------------------------------------------

/// `wallet-ledger outbox` with short timings; `timeout_ms` per request (the lease is twice it)
/// and `batch` deliveries sent at once per step.
fn outbox_command(database_url: &str, port: u16, timeout_ms: u64, batch: u32) -> Command {
    outbox_command_for(database_url, &[port], timeout_ms, batch)
}

/// [`outbox_command`] allowing the receivers on `ports`.
fn outbox_command_for(database_url: &str, ports: &[u16], timeout_ms: u64, batch: u32) -> Command {
    let allowed: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut command = Command::new(bin());
    command
        .args(["outbox", "--database-url", database_url])
        .args(["--webhook-allowed-hosts", &allowed.join(",")])
        .args(["--webhook-timeout-ms", &timeout_ms.to_string()])
        .args([
            "--outbox-interval-ms",
            "50",
            "--outbox-batch",
            &batch.to_string(),
        ])
        .args([
            "--webhook-backoff-ms",
            "20",
            "--webhook-backoff-max-ms",
            "200",
        ])
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("WALLET_LEDGER_FAILPOINT")
        .env_remove("WEBHOOK_ALLOWED_HOSTS")
        .env_remove("EVENTS_STREAM")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn a_dispatcher_killed_after_sending_leaves_the_delivery_to_be_sent_again_after_the_lease() {
    use std::os::unix::process::ExitStatusExt;
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;

    let mut crashing = outbox_command(&app.database_url, port, 500, 100);
    crashing.env("WALLET_LEDGER_FAILPOINT", "outbox.after_send");
    let child = crashing.spawn().expect("the binary starts");
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the dispatcher reached its fail point")
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "killed by its fail point: {:?} {}",
        out.status,
        stderr(&out)
    );
    assert!(stderr(&out).contains("fail point outbox.after_send reached"));

    // The receiver got it; the database does not know.
    let requests = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(text(&requests[0]["webhook_id"]), event.to_string());
    let detail = only_delivery(&app, event).await;
    assert_eq!(detail["status"], "pending", "{detail}");
    assert_eq!(detail["attempts"], 1);
    assert_eq!(attempt_statuses(&detail), [], "nothing recorded");
    let lease_end: DateTime<Utc> = text(&detail["next_attempt_at"]).parse().unwrap();

    // Another dispatcher, without the fail point: after the lease (2 × 500 ms) it sends the
    // same event again, with the same webhook-id and Idempotency-Key, and records it.
    let mut again = outbox_command(&app.database_url, port, 500, 100)
        .spawn()
        .unwrap();
    let delivered = eventually(Duration::from_secs(15), || async {
        only_delivery(&app, event).await["status"] == "delivered"
    })
    .await;
    assert!(delivered, "{}", only_delivery(&app, event).await);
    terminate(&again);
    let status = tokio::time::timeout(Duration::from_secs(10), again.wait())
        .await
        .expect("the dispatcher stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");

    let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    for q in &requests {
        assert_eq!(text(&q["webhook_id"]), event.to_string());
        assert_eq!(text(&q["idempotency_key"]), event.to_string());
        assert_eq!(q["verified"], true);
    }
    assert_eq!(
        requests[0]["body"], requests[1]["body"],
        "the same event body"
    );
    let detail = only_delivery(&app, event).await;
    assert_eq!(detail["attempts"], 2);
    assert_eq!(attempt_statuses(&detail), [Some(204)]);
    let resent_at = attempt_starts(&detail)[0];
    assert!(
        resent_at >= lease_end,
        "sent again at {resent_at}, before the lease ended at {lease_end}"
    );
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Two dispatchers at once
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dispatchers_share_a_hundred_events_without_sending_any_twice() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    for i in 0..100 {
        pay(&app, "w1", 100 + i).await;
    }
    let events = all_event_ids(&app).await;
    assert_eq!(events.len(), 100);

    let mut workers = Vec::new();
    for _ in 0..2 {
        let pool = app.pool.clone();
        let s = Settings {
            batch: 7,
            timeout: Duration::from_secs(5),
            ..settings(&[port])
        };
        workers.push(tokio::spawn(async move {
            let mut dispatcher = Dispatcher::new(pool.clone(), s).await.unwrap();
            let mut total = StepReport::default();
            let until = Instant::now() + Duration::from_secs(60);
            loop {
                let r = dispatcher.step().await.unwrap();
                total.fanned_out += r.fanned_out;
                total.claimed += r.claimed;
                total.delivered += r.delivered;
                total.retried += r.retried;
                total.dead += r.dead;
                let left: (i64, i64) = sqlx::query_as(
                    "select (select count(*) from webhook_deliveries where status <> 'delivered'),
                            (select count(*) from outbox_events where fanned_out_at is null)",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                if left == (0, 0) {
                    return total;
                }
                assert!(Instant::now() < until, "not done: {left:?}");
            }
        }));
    }
    let mut reports = Vec::new();
    for w in workers {
        reports.push(w.await.unwrap());
    }
    eprintln!("two dispatchers: {reports:?}");
    let sum = |f: fn(&StepReport) -> usize| reports.iter().map(f).sum::<usize>();
    assert_eq!(
        sum(|r| r.claimed),
        100,
        "each delivery claimed once: {reports:?}"
    );
    assert_eq!(sum(|r| r.delivered), 100);
    assert_eq!(reports.iter().map(|r| r.fanned_out).sum::<i64>(), 100);
    assert_eq!(sum(|r| r.retried) + sum(|r| r.dead), 0);

    let requests = receiver.wait_for(100, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let requests_after = receiver.requests();
    assert_eq!(requests_after.len(), requests.len());
    assert_eq!(requests.len(), 100, "every event received exactly once");
    let ids: BTreeSet<String> = webhook_ids(&requests).into_iter().collect();
    assert_eq!(ids, events.iter().map(Uuid::to_string).collect());
    assert!(requests.iter().all(|q| q["verified"] == true));
    let attempts: i64 = sqlx::query_scalar("select count(*) from delivery_attempts")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(attempts, 100);
    receiver.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn two_outbox_processes_running_while_payments_arrive_send_each_event_once() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    // Small batches and a generous timeout: the Python receiver (a listen backlog of 5) must
    // not be flooded into connection timeouts, so that every attempt is a request it answers.
    let mut a = outbox_command(&app.database_url, port, 3_000, 5)
        .spawn()
        .unwrap();
    let mut b = outbox_command(&app.database_url, port, 3_000, 5)
        .spawn()
        .unwrap();
    for i in 0..100 {
        pay(&app, "w1", 100 + i).await;
    }
    let events = all_event_ids(&app).await;
    assert_eq!(events.len(), 100);
    let done = eventually(Duration::from_secs(30), || async {
        let delivered: i64 = sqlx::query_scalar(
            "select count(*) from webhook_deliveries where status = 'delivered'",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap();
        delivered == 100
    })
    .await;
    assert!(done, "not all delivered: {:?}", backlog(&app).await);
    // Give a double send the time to show, then stop both.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for child in [&mut a, &mut b] {
        terminate(child);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the dispatcher stops on SIGTERM")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }
    let requests = receiver.requests();
    assert_eq!(requests.len(), 100, "every event received exactly once");
    let ids: BTreeSet<String> = webhook_ids(&requests).into_iter().collect();
    assert_eq!(ids, events.iter().map(Uuid::to_string).collect());
    assert!(requests.iter().all(|q| q["verified"] == true));
    let attempts: i64 = sqlx::query_scalar("select count(*) from delivery_attempts")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let kinds: Vec<(Option<i32>, Option<String>, i64)> = sqlx::query_as(
        "select status, error, count(*) from delivery_attempts group by 1, 2 order by 3 desc",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(attempts, 100, "one attempt per delivery: {kinds:?}");
    receiver.stop().await;
    app.finish().await;
}

/// Seconds from each event to its arrival at `receiver`, sorted.
fn latencies(receiver: &Receiver) -> Vec<f64> {
    let mut seconds: Vec<f64> = receiver
        .requests()
        .iter()
        .map(|q| {
            let created: DateTime<Utc> = q["body"]["timestamp"].as_str().unwrap().parse().unwrap();
            let created = created.timestamp_micros() as f64 / 1e6;
            q["received_at"].as_f64().unwrap() - created
        })
        .collect();
    seconds.sort_by(f64::total_cmp);
    seconds
}

/// One receiver that never answers within the timeout beside a healthy one, two dispatcher
/// processes (the documented way to scale): the healthy receiver gets every event once and on
/// time, whatever the hanging one holds, and no lease runs out on a delivery still queued.
#[tokio::test]
async fn a_hanging_receiver_costs_only_its_own_deliveries_and_nothing_is_sent_twice() {
    let (hanging_port, healthy_port) = (free_port(), free_port());
    let secret = generate_secret();
    let hanging = Receiver::start(hanging_port, "slow:30", &[&secret]).await;
    let healthy = Receiver::start(healthy_port, "ok", &[&secret]).await;
    let app = app_allowing(&[hanging_port, healthy_port]).await;
    subscribe(&app, &healthy.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let ports = [hanging_port, healthy_port];
    let mut dispatchers = [
        outbox_command_for(&app.database_url, &ports, 2_000, 100)
            .spawn()
            .unwrap(),
        outbox_command_for(&app.database_url, &ports, 2_000, 100)
            .spawn()
            .unwrap(),
    ];
    // First the healthy receiver alone, for comparison; then with the hanging one beside it.
    for i in 0..32 {
        pay(&app, "w1", 100 + i).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    healthy.wait_for(32, Duration::from_secs(30)).await;
    let alone = latencies(&healthy);
    subscribe(&app, &hanging.url(), Some(&secret)).await;
    for i in 0..64 {
        pay(&app, "w1", 1_000 + i).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    healthy.wait_for(96, Duration::from_secs(30)).await;
    // Past a whole lease (twice the timeout): a delivery whose lease ran out while it waited
    // in a dispatcher's queue would arrive a second time now.
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    for child in &mut dispatchers {
        terminate(child);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the dispatcher stops on SIGTERM")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }
    let requests = healthy.requests();
    let ids: BTreeSet<String> = webhook_ids(&requests).into_iter().collect();
    assert_eq!(
        requests.len(),
        96,
        "every event once at the healthy receiver"
    );
    assert_eq!(
        ids,
        all_event_ids(&app)
            .await
            .iter()
            .map(Uuid::to_string)
            .collect()
    );
    let beside: Vec<f64> = latencies(&healthy)
        .into_iter()
        .filter(|s| !alone.contains(s))
        .collect();
    let median = |s: &[f64]| s[s.len() / 2];
    let worst = |s: &[f64]| s[s.len() - 1];
    eprintln!(
        "healthy receiver alone: median {:.3} s, worst {:.3} s; beside a hanging one: median {:.3} s, worst {:.3} s",
        median(&alone),
        worst(&alone),
        median(&beside),
        worst(&beside)
    );
    // Generous bounds: the hanging receiver's timeout is 2 s, which every healthy delivery
    // waited out before (a median of 3.3 s here on the old dispatcher).
    assert!(median(&beside) < 1.0, "{beside:?}");
    assert!(worst(&beside) < 1.9, "{beside:?}");
    hanging.stop().await;
    healthy.stop().await;
    app.finish().await;
}

/// After `DELETE /v1/webhooks/{id}` answers, at most the requests already in flight arrive:
/// nothing claimed earlier waits in memory to be sent later.
#[tokio::test]
async fn no_delivery_starts_after_its_webhook_was_deleted() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "slow:0.2", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    let (webhook, _) = subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    for i in 0..60 {
        pay(&app, "w1", 100 + i).await;
    }
    let settings = Settings {
        per_subscription: 4,
        ..settings(&[port])
    };
    let dispatcher = Dispatcher::new(app.pool.clone(), settings).await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(dispatcher.run(stop.clone()));
    receiver.wait_for(8, Duration::from_secs(20)).await;
    let r = app
        .raw(
            Method::DELETE,
            &format!("/v1/webhooks/{webhook}"),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let at_delete = receiver.requests().len();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let after = receiver.requests().len() - at_delete;
    assert!(
        after <= 4,
        "{after} requests arrived after DELETE answered (4 were in flight at most)"
    );
    stop.cancel();
    running.await.unwrap();
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Secret rotation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn after_a_rotation_deliveries_carry_two_signatures_each_verifying_alone() {
    let port = free_port();
    let old = generate_secret();
    let app = app_allowing(&[port]).await;
    let (hook, _) = subscribe(&app, &hook_url(port), Some(&old)).await;
    app.create_wallet("w1").await;
    let mut dispatcher = Dispatcher::new(app.pool.clone(), settings(&[port]))
        .await
        .unwrap();

    // Before: one signature, the old secret.
    let receiver = Receiver::start(port, "ok", &[&old]).await;
    let before = pay(&app, "w1", 100).await;
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    let q = &receiver.wait_for(1, Duration::from_secs(5)).await[0];
    assert_eq!(
        (q["signatures"].as_i64(), &q["verified"]),
        (Some(1), &json!(true))
    );
    assert_eq!(text(&q["webhook_id"]), before.to_string());

    let r = app
        .raw(
            Method::POST,
            &format!("/v1/webhooks/{hook}/rotate-secret"),
            &[("idempotency-key", "rotation-1")],
            Body::empty(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["active_secrets"], 2);
    let new = text(&r.body["secret"]).to_owned();
    assert!(new.starts_with("whsec_") && new != old);

    // After: two signatures; a receiver that knows only the old secret accepts it...
    let after = pay(&app, "w1", 200).await;
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    let q = receiver.wait_for(2, Duration::from_secs(5)).await[1].clone();
    assert_eq!(text(&q["webhook_id"]), after.to_string());
    assert_eq!(q["signatures"], 2);
    assert_eq!(q["verified"], true, "verifies with the old secret alone");
    receiver.stop().await;

    let after_delivery = text(&only_delivery(&app, after).await["id"]).to_owned();
    let resend = async |dispatcher: &mut Dispatcher| {
        let r = app
            .post_empty(&format!("/v1/deliveries/{after_delivery}/redeliver"))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        settle(&app, dispatcher, Duration::from_secs(10)).await;
    };
    // ... and so does one that knows only the new secret ...
    let receiver = Receiver::start(port, "ok", &[&new]).await;
    resend(&mut dispatcher).await;
    let q = &receiver.wait_for(1, Duration::from_secs(5)).await[0];
    assert_eq!(text(&q["webhook_id"]), after.to_string());
    assert_eq!(q["signatures"], 2);
    assert_eq!(q["verified"], true, "verifies with the new secret alone");
    receiver.stop().await;
    // ... while one with an unrelated secret does not (the check is real).
    let stranger = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&stranger]).await;
    resend(&mut dispatcher).await;
    let q = &receiver.wait_for(1, Duration::from_secs(5)).await[0];
    assert_eq!(q["verified"], false, "an unrelated secret must not verify");
    receiver.stop().await;

    // A second rotation drops the oldest secret: the first one no longer verifies.
    let newest = generate_secret();
    let r = app
        .post(
            &format!("/v1/webhooks/{hook}/rotate-secret"),
            &json!({"secret": newest}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["active_secrets"], 2);
    let receiver = Receiver::start(port, "ok", &[&old]).await;
    let third = pay(&app, "w1", 300).await;
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    let q = &receiver.wait_for(1, Duration::from_secs(5)).await[0];
    assert_eq!(text(&q["webhook_id"]), third.to_string());
    assert_eq!(q["signatures"], 2);
    assert_eq!(q["verified"], false, "the first secret is no longer used");
    receiver.stop().await;
    let receiver = Receiver::start(port, "ok", &[&new]).await;
    let third_delivery = text(&only_delivery(&app, third).await["id"]).to_owned();
    let r = app
        .post_empty(&format!("/v1/deliveries/{third_delivery}/redeliver"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    let q = &receiver.wait_for(1, Duration::from_secs(5)).await[0];
    assert_eq!(q["verified"], true, "the previous secret still verifies");
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 9. The URL policy at send time
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_url_no_longer_allowed_when_sending_is_dead_without_a_request() {
    let (allowed, removed) = (free_port(), free_port());
    let secret = generate_secret();
    let receiver = Receiver::start(removed, "ok", &[&secret]).await;
    // The API allowed the host when the webhook was created...
    let app = app_allowing(&[allowed, removed]).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;

    // ... the dispatcher's allow-list no longer names it.
    let mut dispatcher = Dispatcher::new(app.pool.clone(), settings(&[allowed]))
        .await
        .unwrap();
    let first = dispatcher.step().await.unwrap();
    assert_eq!(
        (first.claimed, first.dead, first.delivered, first.retried),
        (1, 1, 0, 0)
    );
    let detail = only_delivery(&app, event).await;
    assert_eq!(detail["status"], "dead", "{detail}");
    assert_eq!(detail["attempts"], 1);
    assert!(detail["last_status"].is_null());
    let e = text(&detail["last_error"]);
    assert!(
        e.contains("the URL is refused") && e.contains("allow-list"),
        "{e}"
    );
    assert_eq!(attempt_statuses(&detail), [None]);
    for _ in 0..5 {
        assert_eq!(dispatcher.step().await.unwrap().claimed, 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(receiver.requests().is_empty(), "no request was sent");
    receiver.stop().await;
    app.finish().await;
}

/// Gives every name one answer, as a DNS server an attacker controls would.
struct FixedResolver(std::net::IpAddr);

impl reqwest::dns::Resolve for FixedResolver {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let address = std::net::SocketAddr::new(self.0, 0);
        Box::pin(async move { Ok(Box::new(std::iter::once(address)) as reqwest::dns::Addrs) })
    }
}

/// A public-looking name accepted when the webhook was created, resolving to this machine when
/// the dispatcher connects (DNS rebinding, or a name pointed at an internal address): refused
/// at connect time, naming the address, with no request sent. Listed by the operator, the same
/// name is delivered to.
#[tokio::test]
async fn a_name_that_resolves_to_a_private_address_is_refused_at_connect_time() {
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let app = TestApp::new().await;
    let url = format!("http://hooks.rebind.test:{port}/hook");
    subscribe(&app, &url, Some(&secret)).await;
    app.create_wallet("w1").await;
    let event = pay(&app, "w1", 100).await;
    let loopback = Arc::new(FixedResolver("127.0.0.1".parse().unwrap()));
    let mut open = Dispatcher::with_resolver(app.pool.clone(), settings(&[]), loopback.clone())
        .await
        .unwrap();
    let first = open.step().await.unwrap();
    assert_eq!((first.claimed, first.delivered, first.retried), (1, 0, 1));
    let detail = only_delivery(&app, event).await;
    let e = text(&detail["last_error"]);
    assert!(
        e.contains("hooks.rebind.test resolves only to non-public addresses (127.0.0.1)")
            && e.contains("WEBHOOK_ALLOWED_HOSTS"),
        "{e}"
    );
    assert!(
        receiver.requests().is_empty(),
        "no request reached the address"
    );

    // The operator lists the host: it is an in-house receiver.
    sqlx::query("update webhook_deliveries set next_attempt_at = now()")
        .execute(&app.pool)
        .await
        .unwrap();
    let listed = Settings {
        policy: UrlPolicy {
            allowed_hosts: vec!["hooks.rebind.test".into()],
        },
        ..settings(&[])
    };
    let mut listed = Dispatcher::with_resolver(app.pool.clone(), listed, loopback)
        .await
        .unwrap();
    assert_eq!(listed.step().await.unwrap().delivered, 1);
    assert_eq!(receiver.requests().len(), 1);
    receiver.stop().await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 10. The outbound stream
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_event_goes_to_the_outbound_stream_once() {
    let stream = unique_stream("events");
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let mut expected = BTreeSet::new();
    for i in 0..3 {
        expected.insert(pay(&app, "w1", 100 + i).await);
    }
    assert_eq!(all_event_ids(&app).await, expected);

    let mut dispatcher = Dispatcher::new(
        app.pool.clone(),
        Settings {
            events_stream: Some((shared_redis_url(), stream.clone())),
            ..settings(&[])
        },
    )
    .await
    .unwrap();
    let first = dispatcher.step().await.unwrap();
    assert_eq!(first.streamed, 3, "{first:?}");
    let mut redis = redis_at(&shared_redis_url()).await;
    let read = async |redis: &mut redis::aio::MultiplexedConnection| {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .query_async(redis)
            .await
            .unwrap();
        reply
            .ids
            .into_iter()
            .map(|e| {
                e.map
                    .into_iter()
                    .map(|(k, v)| (k, redis::from_redis_value::<String>(v).unwrap()))
                    .collect::<BTreeMap<String, String>>()
            })
            .collect::<Vec<_>>()
    };
    let entries = read(&mut redis).await;
    assert_eq!(entries.len(), 3, "{entries:?}");
    let on_stream: BTreeSet<Uuid> = entries
        .iter()
        .map(|e| e["event_id"].parse().unwrap())
        .collect();
    assert_eq!(on_stream, expected);
    for e in &entries {
        assert_eq!(e["type"], "transaction.posted");
        let data: Value = serde_json::from_str(&e["data"]).unwrap();
        assert!(data["transaction"]["id"].is_string(), "{data}");
    }
    let unstreamed: i64 =
        sqlx::query_scalar("select count(*) from outbox_events where streamed_at is null")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(unstreamed, 0);

    let second = dispatcher.step().await.unwrap();
    assert_eq!(second.streamed, 0, "{second:?}");
    assert_eq!(read(&mut redis).await.len(), 3, "nothing published again");

    // A later event goes out on the next step, alone.
    let later = pay(&app, "w1", 999).await;
    assert_eq!(dispatcher.step().await.unwrap().streamed, 1);
    let entries = read(&mut redis).await;
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[3]["event_id"], later.to_string());
    let _: i64 = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut redis)
        .await
        .unwrap();
    app.finish().await;
}

/// `serve` with `--events-stream` starts while the feed's Redis is down: the API serves,
/// `/readyz` stays ready and says the feed is down, and the events published meanwhile go out,
/// in order and once each, when Redis answers; after a Redis crash and restart the feed
/// reconnects by itself.
#[tokio::test]
async fn the_events_feed_neither_blocks_start_nor_stays_down_after_its_redis_returns() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let mut redis = PrivateRedis::start().await;
    redis.kill();
    let stream = unique_stream("feed");
    let server = serve(
        &app.database_url,
        &[],
        &[
            "--events-stream",
            &stream,
            "--redis-url",
            &redis.url(),
            "--outbox-interval-ms",
            "50",
        ],
    )
    .await;
    let readyz = || {
        let addr = server.addr.clone();
        async move { http_get(&addr, "/readyz").await.expect("serve answers") }
    };
    let (status, body) = readyz().await;
    assert_eq!(status, 200, "{body}");
    let feed = |body: &str| -> Value {
        serde_json::from_str::<Value>(body).unwrap()["events_stream"].clone()
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            feed(&readyz().await.1) == "down"
        })
        .await,
        "/readyz says the feed is down"
    );
    let mut before = Vec::new();
    for i in 0..3 {
        before.push(pay(&app, "w1", 100 + i).await);
    }
    redis.restart().await;
    let mut conn = redis_at(&redis.url()).await;
    let published = |conn: &MultiplexedConnection| {
        let (mut conn, stream) = (conn.clone(), stream.clone());
        async move {
            let reply: redis::streams::StreamRangeReply = conn.xrange_all(&stream).await.unwrap();
            reply
                .ids
                .iter()
                .map(|e| redis::from_redis_value::<String>(e.map["event_id"].clone()).unwrap())
                .collect::<Vec<String>>()
        }
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            published(&conn).await.len() == 3
        })
        .await,
        "the events waiting in the outbox were published once Redis answered"
    );
    let want: Vec<String> = before.iter().map(Uuid::to_string).collect();
    assert_eq!(published(&conn).await, want, "in order, each once");
    assert!(
        eventually(Duration::from_secs(5), || async {
            feed(&readyz().await.1) == "up"
        })
        .await
    );
    // The timestamp is RFC 3339 in UTC with `Z`, as in the webhook bodies.
    let reply: redis::streams::StreamRangeReply = conn.xrange_all(&stream).await.unwrap();
    let timestamp: String = redis::from_redis_value(reply.ids[0].map["timestamp"].clone()).unwrap();
    assert!(timestamp.ends_with('Z'), "{timestamp}");

    // A crash and restart of Redis: the broken connection is replaced.
    redis.kill();
    let during = pay(&app, "w1", 900).await;
    redis.restart().await;
    conn = redis_at(&redis.url()).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            published(&conn).await.contains(&during.to_string())
        })
        .await,
        "publishing resumed after the restart: {}",
        std::fs::read_to_string(&server.log).unwrap_or_default()
    );
    let (status, log) = server.stop().await;
    assert!(status.success(), "{log}");
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 11. Purge
// ---------------------------------------------------------------------------------------------

fn purge_command(database_url: &str, stream: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args(["purge", "--database-url", database_url])
        .args(["--redis-url", &shared_redis_url(), "--stream", stream])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("RETENTION_DAYS")
        .env_remove("BROKER_RETENTION_HOURS")
        .env_remove("PRODUCER_RETRY_WINDOW_HOURS")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn purge_counts(app: &TestApp) -> (i64, i64, i64) {
    sqlx::query_as(
        "select (select count(*) from delivery_attempts), (select count(*) from webhook_deliveries),
                (select count(*) from outbox_events)",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn purge_refuses_a_short_retention_and_deletes_only_old_finished_rows() {
    let stream = unique_stream("purge");
    let port = free_port();
    let secret = generate_secret();
    let receiver = Receiver::start(port, "ok", &[&secret]).await;
    let app = app_allowing(&[port]).await;
    app.create_wallet("w1").await;
    // p0 happens before the webhook exists: fanned out to nobody.
    let p0 = pay(&app, "w1", 100).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    subscribe(&app, &receiver.url(), Some(&secret)).await;
    let p1 = pay(&app, "w1", 101).await;
    let p2 = pay(&app, "w1", 102).await;
    let p3 = pay(&app, "w1", 103).await;
    let p4 = pay(&app, "w1", 104).await;
    let mut dispatcher = Dispatcher::new(app.pool.clone(), settings(&[port]))
        .await
        .unwrap();
    let report = settle(&app, &mut dispatcher, Duration::from_secs(10)).await;
    assert_eq!(report.delivered, 4);
    // p5 is not fanned out yet.
    let p5 = pay(&app, "w1", 105).await;

    // Age p0, p1, p2 (delivered), p4 (made pending again) and p5 by 10 days; p3 stays recent.
    // p4's attempt stays recent.
    let old = [p0, p1, p2, p4, p5];
    sqlx::query(
        "update outbox_events set created_at = now() - interval '10 days' where id = any($1)",
    )
    .bind(&old[..])
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "update webhook_deliveries set updated_at = now() - interval '10 days',
                created_at = now() - interval '10 days' where event_id = any($1)",
    )
    .bind(&old[..])
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "update delivery_attempts a set started_at = now() - interval '10 days'
           from webhook_deliveries d where d.id = a.delivery_id and d.event_id = any($1)",
    )
    .bind(&[p1, p2][..])
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "update webhook_deliveries set status = 'pending', delivered_at = null,
                next_attempt_at = now() + interval '1 day' where event_id = $1",
    )
    .bind(p4)
    .execute(&app.pool)
    .await
    .unwrap();
    let ledger_before = app.row_counts().await;
    // 4 attempts, 4 deliveries, 6 events.
    assert_eq!(purge_counts(&app).await, (4, 4, 6));

    // Refused: 1 day < 48 h of broker retention + 24 h of producer retries.
    let out = run_to_end(
        purge_command(
            &app.database_url,
            &stream,
            &["--retention-days", "1", "--broker-retention-hours", "48"],
        ),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("--retention-days 1 (24 h) is shorter than the broker's retention plus the producers' retry window (72 h)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(purge_counts(&app).await, (4, 4, 6));
    // A retention past any timestamp is refused with the reason, never a panic.
    for days in ["4294967295", "90000000", "0"] {
        let out = run_to_end(
            purge_command(&app.database_url, &stream, &["--retention-days", days]),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(out.status.code(), Some(2), "{days}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--retention-days") && !stderr(&out).contains("panicked"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(purge_counts(&app).await, (4, 4, 6));

    let valid = [
        "--retention-days",
        "3",
        "--broker-retention-hours",
        "48",
        "--producer-retry-window-hours",
        "24",
    ];
    // A dry run counts and deletes nothing.
    let mut args = valid.to_vec();
    args.push("--dry-run");
    let out = run_to_end(
        purge_command(&app.database_url, &stream, &args),
        Duration::from_secs(30),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("would delete: 2 delivery attempts, 2 deliveries, 3 outbox events"),
        "{}",
        stdout(&out)
    );
    assert_eq!(purge_counts(&app).await, (4, 4, 6));

    let out = run_to_end(
        purge_command(&app.database_url, &stream, &valid),
        Duration::from_secs(30),
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("deleted: 2 delivery attempts, 2 deliveries, 3 outbox events"),
        "{}",
        stdout(&out)
    );
    assert_eq!(purge_counts(&app).await, (2, 2, 3));
    let left = all_event_ids(&app).await;
    assert_eq!(
        left,
        [p3, p4, p5].into_iter().collect(),
        "kept: the recent one, the one still pending, the one not fanned out"
    );
    let kept: Vec<(Uuid, String, i64)> = sqlx::query_as(
        "select d.event_id, d.status, (select count(*) from delivery_attempts a where a.delivery_id = d.id)
           from webhook_deliveries d order by d.seq",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        kept,
        [
            (p3, "delivered".to_owned(), 1),
            (p4, "pending".to_owned(), 1)
        ]
    );
    assert_eq!(
        app.row_counts().await,
        ledger_before,
        "transactions and entries are never purged"
    );
    receiver.stop().await;
    app.finish().await;
}
