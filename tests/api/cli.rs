//! The binary itself: `migrate` creates the database, `serve` answers and stops cleanly on
//! SIGTERM, and an unreachable database is a clear message with exit code 2.

use super::common::{poll_until, server_url};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");

fn database_url(name: &str) -> String {
    let mut url = url::Url::parse(&server_url()).unwrap();
    url.set_path(name);
    url.to_string()
}

async fn drop_database(name: &str) {
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&server_url())
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database {name} with (force)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}

async fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    Some(response)
}

#[tokio::test]
async fn migrate_creates_the_database_and_serve_stops_cleanly_on_sigterm() {
    let name = format!("wl_test_{}_cli", std::process::id());
    let url = database_url(&name);

    let migrate = Command::new(BIN)
        .args(["migrate", "--database-url", &url])
        .output()
        .await
        .unwrap();
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    // Idempotent: a second run finds nothing to do.
    assert!(
        Command::new(BIN)
            .args(["migrate", "--database-url", &url])
            .status()
            .await
            .unwrap()
            .success()
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Command::new(BIN)
        .args(["serve", "--database-url", &url, "--listen-addr", &addr])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = poll_until(Duration::from_secs(10), "serve answering", || {
        http_get(&addr, "/readyz")
    })
    .await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");

    let pid = server.id().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("stopped in time")
        .unwrap();
    let mut log = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}\n{log}");
    assert!(
        log.contains("SIGTERM received") && log.contains("stopped"),
        "{log}"
    );

    drop_database(&name).await;
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_with_exit_code_2() {
    let out = Command::new(BIN)
        .args([
            "migrate",
            "--database-url",
            "postgres://postgres@127.0.0.1:1/nowhere",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot reach PostgreSQL at postgres://postgres@127.0.0.1:1/nowhere"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn no_migrate_on_a_database_without_the_schema_names_the_version_it_needs() {
    let name = format!("wl_test_{}_no_migrate", std::process::id());
    let url = database_url(&name);
    let admin = sqlx::PgPool::connect(&server_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {name}"
    )))
    .execute(&admin)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
        .execute(&admin)
        .await
        .unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--no-migrate",
            "--database-url",
            &url,
            "--listen-addr",
            "127.0.0.1:0",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    sqlx::query(sqlx::AssertSqlSafe(format!("drop database {name}")))
        .execute(&admin)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is at migration none, this binary needs"),
        "{stderr}"
    );
    assert!(stderr.contains("run `wallet-ledger migrate`"), "{stderr}");
}

/// Every subcommand's path (`dlq list`, `api-key create`, ...), from the code's definition,
/// so a new subcommand is covered without touching this test.
fn subcommand_paths() -> Vec<Vec<String>> {
    fn walk(command: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let mut sub_path = path.to_vec();
            sub_path.push(sub.get_name().to_owned());
            out.push(sub_path.clone());
            walk(sub, &sub_path, out);
        }
    }
    use clap::CommandFactory;
    let mut out = vec![vec![]];
    walk(&wallet_ledger::cli::Cli::command(), &[], &mut out);
    out
}

#[tokio::test]
async fn no_help_shows_a_password_from_the_environment() {
    const PASSWORD: &str = "hunter2-in-the-env";
    let secret_envs = ["DATABASE_URL", "REDIS_URL", "BENCH_DATABASE_URL"];
    for path in subcommand_paths() {
        let mut command = Command::new(BIN);
        command.args(&path).arg("--help");
        for name in secret_envs {
            command.env(
                name,
                format!("postgres://admin:{PASSWORD}@db.example:5432/x_bench"),
            );
        }
        let out = command.output().await.unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{path:?}: {shown}");
        assert!(
            !shown.contains(PASSWORD),
            "`{} --help` shows the password:\n{shown}",
            path.join(" ")
        );
    }
}

/// The metric names docs/operations.md tells operators to watch: every `wallet_ledger_*` name
/// in its Alerts section, and on any line that calls it a gauge, a counter or a metric.
fn documented_metrics() -> std::collections::BTreeSet<String> {
    let doc = include_str!("../../docs/operations.md");
    let start = doc.find("\n## Alerts").expect("an Alerts section");
    let end = doc[start + 1..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + 1 + e);
    let watched = doc[..start]
        .lines()
        .chain(doc[end..].lines())
        .filter(|l| ["gauge", "counter", "metric"].iter().any(|w| l.contains(w)))
        .chain(doc[start..end].lines());
    let mut names = std::collections::BTreeSet::new();
    for line in watched {
        for (at, _) in line.match_indices("wallet_ledger_") {
            let name: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names
}

/// Starts the binary with `args`, waits until `addr` answers ready, and returns the process,
/// its first scrape of `metrics_path` there and its `/readyz` body.
async fn first_scrape(
    args: &[&str],
    addr: &str,
    metrics_path: &str,
) -> (tokio::process::Child, String, String) {
    let child = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let what = format!("{args:?} answering ready");
    let r = poll_until(Duration::from_secs(30), what, || async {
        http_get(addr, "/readyz")
            .await
            .filter(|r| r.starts_with("HTTP/1.1 200"))
    })
    .await;
    let scrape = http_get(addr, metrics_path).await.expect("a scrape");
    let body = r.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (child, scrape, body)
}

fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// A series line of `name` (with or without labels) in Prometheus text.
fn has_series(scrape: &str, name: &str) -> bool {
    scrape.lines().any(|l| {
        l.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
    })
}

#[tokio::test]
async fn a_fresh_serve_and_consume_export_every_metric_the_operations_doc_watches() {
    let name = format!("wl_test_{}_metrics_doc", std::process::id());
    let url = database_url(&name);
    let redis = super::stream_support::shared_redis_url();
    let stream = super::stream_support::unique_stream("metrics-doc");
    let api = free_addr();
    let (mut server, api_scrape, api_ready) = first_scrape(
        &["serve", "--database-url", &url, "--listen-addr", &api],
        &api,
        "/metrics",
    )
    .await;
    let probes = free_addr();
    let (mut consumer, consumer_scrape, consumer_ready) = first_scrape(
        &[
            "consume",
            "--database-url",
            &url,
            "--redis-url",
            &redis,
            "--stream",
            &stream,
            "--metrics-addr",
            &probes,
        ],
        &probes,
        "/metrics",
    )
    .await;
    for child in [&mut server, &mut consumer] {
        let _ = child.kill().await;
    }
    // Both processes answer readiness in one shape (JSON), whichever a probe asks.
    for body in [&api_ready, &consumer_ready] {
        let ready: serde_json::Value = serde_json::from_str(body.trim())
            .unwrap_or_else(|e| panic!("/readyz is not JSON ({e}): {body:?}"));
        assert_eq!(ready["status"], "ready", "{body}");
        assert!(
            ready["database"].get("synchronous_standby").is_some(),
            "{body}"
        );
    }
    let documented = documented_metrics();
    assert!(
        documented.len() >= 15,
        "the doc parser found {documented:?}"
    );
    let missing: Vec<&String> = documented
        .iter()
        .filter(|m| !has_series(&api_scrape, m) && !has_series(&consumer_scrape, m))
        .collect();
    drop_database(&name).await;
    assert!(
        missing.is_empty(),
        "documented but not exported at the first scrape: {missing:?}\n--- serve:\n{api_scrape}\n--- consume:\n{consumer_scrape}"
    );
    // The dead-letter reasons the doc pages on start at 0, so `increase()` sees the first one.
    for reason in ["idempotency_mismatch", "conflicting_state"] {
        let series = format!("wallet_ledger_consumer_dead_letters_total{{reason=\"{reason}\"}} 0");
        assert!(
            consumer_scrape.contains(&series),
            "{series} missing:\n{consumer_scrape}"
        );
    }
}

#[tokio::test]
async fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let name = format!("wl_test_{}_no_colour", std::process::id());
    let url = database_url(&name);
    let out = Command::new(BIN)
        .args(["migrate", "--database-url", &url])
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    drop_database(&name).await;
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("INFO"), "a log line was written: {log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a piped log: {log:?}"
    );
}

#[tokio::test]
async fn a_missing_database_is_named_with_its_server_and_the_fix() {
    let name = format!("wl_test_{}_never_created", std::process::id());
    let out = Command::new(BIN)
        .args(["verify", "--database-url", &database_url(&name)])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let host = url::Url::parse(&server_url()).unwrap();
    let at = format!(
        "{}:{}",
        host.host_str().unwrap(),
        host.port().unwrap_or(5432)
    );
    assert!(
        stderr.contains(&format!("PostgreSQL at {at} has no database \"{name}\"")),
        "{stderr}"
    );
    assert!(stderr.contains("wallet-ledger migrate"), "{stderr}");
    for misleading in ["Is PostgreSQL running?", "at line "] {
        assert!(!stderr.contains(misleading), "{misleading:?} in: {stderr}");
    }
}

#[tokio::test]
async fn dlq_list_with_nothing_says_so_on_stderr_and_keeps_stdout_json_lines() {
    let stream = super::stream_support::unique_stream("dlq-empty");
    let out = Command::new(BIN)
        .args([
            "dlq",
            "--redis-url",
            &super::stream_support::shared_redis_url(),
        ])
        .args(["--stream", &stream, "list"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout holds only dead letters");
    assert!(
        stderr.contains(&format!("no dead letters in {stream}.dlq")),
        "{stderr:?}"
    );
}
