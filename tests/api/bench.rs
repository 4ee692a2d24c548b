//! `wallet-ledger bench`: every scenario at tiny sizes against a bench database of the test's
//! own, each line parsed and checked; and the refusal of a database not named as disposable.

use super::common::server_url;
use super::stream_support::{bin, shared_redis_url};
use serde_json::Value;
use sqlx::Connection;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::process::Command;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// `wl_test_<pid>_<n>_bench`: the bench's suffix, and the test databases' prefix, so that an
/// abandoned one is swept like theirs.
fn bench_database() -> (String, String) {
    let name = format!(
        "wl_test_{}_{}_bench",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut url = url::Url::parse(&server_url()).expect("TEST_DATABASE_URL is a URL");
    url.set_path(&name);
    (name, url.to_string())
}

async fn database_exists(name: &str) -> bool {
    let mut admin = sqlx::PgConnection::connect(&server_url()).await.unwrap();
    sqlx::query_scalar::<_, bool>("select exists (select 1 from pg_database where datname = $1)")
        .bind(name)
        .fetch_one(&mut admin)
        .await
        .unwrap()
}

async fn drop_database(name: &str) {
    let mut admin = sqlx::PgConnection::connect(&server_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {name} with (force)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}

#[tokio::test]
async fn every_scenario_runs_checks_itself_and_prints_one_json_line() {
    let (name, url) = bench_database();
    let dir = std::env::temp_dir().join(format!("wl-bench-test-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results.jsonl");
    let mut command = Command::new(bin());
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["bench", "--quick", "--bench-database-url", &url])
        .args(["--redis-url", &shared_redis_url()])
        .arg("--results")
        .arg(&results)
        // Tiny sizes: the point is every code path and every check, not the figures.
        .args([
            "--accounts",
            "50",
            "--connections",
            "8",
            "--requests",
            "200",
        ])
        .args(["--batch-connections", "2", "--batches", "2"])
        .args(["--replay-connections", "4", "--replay-requests", "200"])
        .args(["--consumer-payments", "500", "--consumer-batch-size", "100"])
        .args([
            "--reconcile-rows",
            "300",
            "--balance-read-max-entries",
            "1500",
        ])
        .args(["--balance-reads", "50", "--ceiling-transfers", "2000"])
        .args(["--set-members", "30"])
        .env("RUST_LOG", "warn")
        .env_remove("BENCH_DATABASE_URL")
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(240), command.output())
        .await
        .expect("the bench finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let kept = database_exists(&name).await;
    drop_database(&name).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(!kept, "a clean run drops its database");

    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|l| l["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "ceiling",
            "api-transfers",
            "api-hot",
            "api-topups",
            "api-replay-1",
            "api-replay-4",
            "api-batch",
            "consumer",
            "balance-read",
            "set-read",
            "reconcile"
        ]
    );
    let ceiling = lines[0]["per_second"].as_f64().unwrap();
    for line in &lines {
        let scenario = line["scenario"].as_str().unwrap();
        assert_eq!(line["check"], "passed", "{line}");
        assert_eq!(line["errors"], 0, "{line}");
        assert!(line["ops"].as_u64().unwrap() > 0, "{line}");
        assert!(line["seconds"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["per_second"].as_f64().unwrap() > 0.0, "{line}");
        assert!(
            chrono::DateTime::parse_from_rfc3339(line["at"].as_str().unwrap()).is_ok(),
            "{line}"
        );
        assert!(line["git"].is_string() || line["git"].is_null(), "{line}");
        let cores = line["host_cores"].as_u64().unwrap();
        assert!(cores >= 1, "{line}");
        // Percentages of one core: every scenario keeps the client busy a little, and no
        // process can use more than every core. The slack: /proc's 10 ms ticks over a short
        // phase, and the 0.1 rounding.
        let cores = cores as f64;
        let tick_slack = 2.0 * 0.01 * cores / line["seconds"].as_f64().unwrap() * 100.0;
        let most = 100.0 * cores + tick_slack + 0.1;
        for field in ["client_cpu_pct", "host_cpu_pct"] {
            let pct = line[field].as_f64().unwrap();
            assert!(
                pct > 0.0 && pct <= most,
                "{field} {pct} not in (0, {most}]: {line}"
            );
        }
        assert_eq!(line["ceiling_per_second"].as_f64(), Some(ceiling), "{line}");
        assert!(line["ratio"].as_f64().unwrap() > 0.0, "{line}");
        let latency = !matches!(scenario, "consumer" | "reconcile");
        assert_eq!(line["p50_ms"].is_number(), latency, "{line}");
        if latency {
            let (p50, p99) = (line["p50_ms"].as_f64(), line["p99_ms"].as_f64());
            assert!(p50 <= p99, "{line}");
        }
        if scenario != "ceiling" {
            assert!(line["server_cpu_pct"].as_f64().unwrap() > 0.0, "{line}");
            assert!(
                line["server_peak_rss_mib"].as_f64().unwrap() > 1.0,
                "{line}"
            );
        }
        if scenario.starts_with("api-") || scenario.ends_with("-read") {
            assert_eq!(line["rate_limit_per_second"], 10_000_000, "{line}");
        }
    }
    assert_eq!(lines[1]["requests"], 200);
    assert_eq!(lines[1]["transfer_pairs"], "any");
    assert_eq!(lines[1]["wallets_in_set"], false);
    // The one server of the bench database, by its host:port, its CPU apart from the host's
    // other PostgreSQL servers.
    let url = url::Url::parse(&server_url()).unwrap();
    let server = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let by_server = lines[1]["db_cpu_pct_by_server"].as_object().unwrap();
    assert_eq!(
        by_server.keys().collect::<Vec<_>>(),
        [&server],
        "{}",
        lines[1]
    );
    assert!(by_server[&server].as_f64().unwrap() > 0.0, "{}", lines[1]);
    assert_eq!(lines[6]["ops"], 2_000, "two batches of 1,000 items");
    assert_eq!(lines[7]["payments"], 500);
    assert_eq!(lines[7]["messages"], 550, "10% resent");
    let sizes = lines[8]["p50_ms_by_entries"].as_object().unwrap();
    assert_eq!(sizes.keys().collect::<Vec<_>>(), ["1000", "1500"]);
    let set = &lines[9];
    let sizes = set["p50_ms_by_members"].as_object().unwrap();
    assert_eq!(sizes.keys().collect::<Vec<_>>(), ["10", "30"], "{set}");
    assert!(
        set["p50_ratio_largest_to_first"].as_f64().unwrap() > 0.0,
        "{set}"
    );
    // What each read summed after the checkpoint: 500 transfers (two movements) and 500
    // top-ups per set.
    let since = set["movements_since_checkpoint_by_members"]
        .as_object()
        .unwrap();
    assert!(since.values().all(|n| n == 1_500), "{set}");
    assert_eq!(set["largest_without_checkpoint"]["movements_summed"], 30);
    assert_eq!(lines[10]["exceptions"]["missing_in_ledger"], 10);

    let written = std::fs::read_to_string(&results).unwrap();
    assert_eq!(written, stdout, "the results file holds the same lines");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn api_transfers_with_every_wallet_in_one_set_checks_the_sets_total() {
    let (name, url) = bench_database();
    let dir = std::env::temp_dir().join(format!("wl-bench-test-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results.jsonl");
    let output = Command::new(bin())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["bench", "api-transfers", "--wallets-in-set"])
        .args(["--bench-database-url", &url])
        .args([
            "--accounts",
            "40",
            "--connections",
            "4",
            "--requests",
            "200",
        ])
        .arg("--results")
        .arg(&results)
        .env("RUST_LOG", "warn")
        .env_remove("BENCH_DATABASE_URL")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    drop_database(&name).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["scenario"], "api-transfers", "{line}");
    assert_eq!(line["check"], "passed", "{line}");
    assert_eq!(line["wallets_in_set"], true, "{line}");
    assert!(
        line["member_adds_per_second"].as_f64().unwrap() > 0.0,
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_database_not_named_as_disposable_is_refused_with_exit_code_2() {
    let mut url = url::Url::parse(&server_url()).unwrap();
    url.set_path("wallet_ledger");
    let dir = std::env::temp_dir().join(format!("wl-bench-test-{}", uuid::Uuid::new_v4().simple()));
    let results = dir.join("results.jsonl");
    let output = Command::new(bin())
        .args([
            "bench",
            "--quick",
            "ceiling",
            "--bench-database-url",
            url.as_str(),
        ])
        .arg("--results")
        .arg(&results)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("does not end in \"_bench\""),
        "the reason names the rule: {stderr}"
    );
    assert!(output.stdout.is_empty());
    assert!(!results.exists(), "nothing was measured");
}

#[tokio::test]
async fn transfer_pairs_other_than_any_are_refused_without_citus_with_exit_code_2() {
    let (name, url) = bench_database();
    let dir = std::env::temp_dir().join(format!("wl-bench-test-{}", uuid::Uuid::new_v4().simple()));
    let results = dir.join("results.jsonl");
    let output = Command::new(bin())
        .args([
            "bench",
            "--quick",
            "api-transfers",
            "--bench-database-url",
            &url,
        ])
        .args(["--transfer-pairs", "same-shard"])
        .arg("--results")
        .arg(&results)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--transfer-pairs same-shard") && stderr.contains("--citus-workers"),
        "the reason names the option and what it needs: {stderr}"
    );
    assert!(output.stdout.is_empty());
    assert!(!results.exists(), "nothing was measured");
    assert!(!database_exists(&name).await, "nothing was created");
}
