//! `wallet-ledger reconcile`: settlement files with every exception category, each named with
//! its reason; a clean file exits 0; a run is stored, keyed, and served by the API.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio::process::Command;
use uuid::Uuid;

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");
const HEADER: &str = "payment_id,external_ref,amount,currency,status,settled_at,fee,payout_ref";

struct Payment {
    id: Uuid,
    external_ref: String,
}

/// Wallets and `n` payments of 50.00 SAR through provider `psp`.
async fn ledger_with_payments(app: &TestApp, n: usize) -> Vec<Payment> {
    app.create_wallet("w1").await;
    let mut payments = Vec::new();
    for i in 0..n {
        let id = Uuid::new_v4();
        let external_ref = format!("psp_{i}");
        let r = app
            .post(
                "/v1/payments",
                &json!({"id": id, "account": "w1", "amount": 5_000, "currency": "SAR",
                "provider": "psp", "external_ref": external_ref}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        payments.push(Payment { id, external_ref });
    }
    payments
}

fn line(
    id: &str,
    external_ref: &str,
    amount: &str,
    currency: &str,
    status: &str,
    payout: &str,
) -> String {
    let now = chrono::Utc::now().to_rfc3339();
    format!("{id},{external_ref},{amount},{currency},{status},{now},0.50,{payout}")
}

fn settled(p: &Payment) -> String {
    line(
        &p.id.to_string(),
        &p.external_ref,
        "50.00",
        "SAR",
        "settled",
        "payout-1",
    )
}

fn write_file(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join(format!("settlement-{}.csv", Uuid::new_v4()));
    std::fs::write(&path, format!("{HEADER}\n{}\n", lines.join("\n"))).unwrap();
    path
}

/// The settlement period of every run in these tests: today, so that the payments the tests
/// just made are in it (fixed per day, so that repeated runs have the same options).
fn period() -> (String, String) {
    let today = chrono::Utc::now().date_naive();
    let at = |d: chrono::NaiveDate| d.and_hms_opt(0, 0, 0).unwrap().and_utc().to_rfc3339();
    (at(today), at(today + chrono::TimeDelta::days(1)))
}

/// Runs the job; returns the exit code and report.json.
async fn reconcile(app: &TestApp, file: &Path, extra: &[&str]) -> (i32, Value, PathBuf) {
    let out = file.with_extension(format!("{}.out", Uuid::new_v4()));
    let (window_from, window_to) = period();
    let result = Command::new(BIN)
        .args([
            "reconcile",
            "--database-url",
            &app.database_url,
            "--provider",
            "psp",
        ])
        .args([
            "--settlement",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args([
            "--from",
            &window_from,
            "--to",
            &window_to,
            "--settlement-lag-hours",
            "0",
        ])
        .args(extra)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    let code = result.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "exit {code}: {stderr}");
    let report =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    (code, report, out)
}

fn exceptions<'a>(report: &'a Value, code: &str) -> Vec<&'a Value> {
    report["exceptions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["code"] == code)
        .collect()
}

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wl-reconcile-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn a_clean_file_exits_0_with_every_payment_matched() {
    let app = TestApp::new().await;
    let payments = ledger_with_payments(&app, 4).await;
    let dir = tmp();
    let file = write_file(&dir, &payments.iter().map(settled).collect::<Vec<_>>());
    let (code, report, out) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["exceptions"], json!([]));
    assert_eq!(
        (
            &report["summary"]["matched"],
            &report["summary"]["ledger_payments"]
        ),
        (&json!(4), &json!(4))
    );
    assert_eq!(report["matched"].as_array().unwrap().len(), 4);
    assert_eq!(report["payouts"][0]["agrees"], true);
    assert_eq!(
        report["payouts"][0]["net"], "198.00",
        "4 × 50.00 − 4 × 0.50 fees"
    );
    assert!(out.join("report.html").exists() && out.join("exceptions.csv").exists());
    app.finish().await;
}

#[tokio::test]
async fn every_exception_category_is_named_with_its_reason() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 7).await;
    let unknown = Uuid::new_v4();
    let dir = tmp();
    let lines = vec![
        settled(&p[0]),                                                     // line 2: fine
        line(&unknown.to_string(), "psp_x", "12.00", "SAR", "settled", ""), // 3: missing_in_ledger
        line(
            &p[1].id.to_string(),
            &p[1].external_ref,
            "45.00",
            "SAR",
            "settled",
            "",
        ), // 4: amount_mismatch
        line(
            &p[2].id.to_string(),
            &p[2].external_ref,
            "50.00",
            "USD",
            "settled",
            "",
        ), // 5: currency_mismatch
        line(
            &p[3].id.to_string(),
            &p[3].external_ref,
            "50.00",
            "SAR",
            "failed",
            "",
        ), // 6: status_mismatch
        settled(&p[4]),                                                     // 7
        settled(&p[4]),                                                     // 8: duplicate_in_file
        line(
            &p[5].id.to_string(),
            &p[5].external_ref,
            "50.005",
            "SAR",
            "settled",
            "",
        ), // 9: unparsable_row
                                                                            // p[6] is not in the file: missing_at_provider
    ];
    let file = write_file(&dir, &lines);
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1);
    let only = |code: &str| {
        let found = exceptions(&report, code);
        assert_eq!(found.len(), 1, "{code}: {report:#}");
        found[0].clone()
    };
    let e = only("missing_in_ledger");
    assert_eq!((&e["payment_id"], &e["line"]), (&json!(unknown), &json!(3)));
    assert!(
        e["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("payment: provider settled 12.00 SAR (line 3)"),
        "{e}"
    );
    let e = only("amount_mismatch");
    assert_eq!(
        (&e["payment_id"], &e["reasons"]),
        (
            &json!(p[1].id),
            &json!(["amount: ledger 50.00, provider 45.00"])
        )
    );
    let e = only("currency_mismatch");
    assert_eq!(
        (&e["payment_id"], &e["reasons"]),
        (
            &json!(p[2].id),
            &json!(["currency: ledger SAR, provider USD"])
        )
    );
    let e = only("status_mismatch");
    assert_eq!(
        (&e["payment_id"], &e["reasons"]),
        (
            &json!(p[3].id),
            &json!(["status: ledger posted, provider failed"])
        )
    );
    let e = only("duplicate_in_file");
    assert_eq!(
        (&e["payment_id"], &e["reasons"]),
        (&json!(p[4].id), &json!(["status settled: lines 7, 8"]))
    );
    let e = only("unparsable_row");
    assert_eq!(e["line"], 9);
    assert_eq!(
        e["reasons"],
        json!(["amount: 50.005 has more decimals than SAR allows (2)"])
    );
    let missing = exceptions(&report, "missing_at_provider");
    let e = missing
        .iter()
        .find(|e| e["payment_id"] == json!(p[6].id))
        .expect("p[6] is missing at the provider");
    assert!(
        e["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("payment: ledger posted 50.00 SAR at"),
        "{e}"
    );
    // p[5]'s only line was unparsable, so the ledger's payment is also missing at the provider.
    assert_eq!(report["summary"]["exceptions"]["missing_at_provider"], 2);
    assert_eq!(
        (
            &report["summary"]["matched"],
            &report["summary"]["file_rows"]
        ),
        (&json!(1), &json!(8))
    );
    app.finish().await;
}

#[tokio::test]
async fn refunds_are_checked_against_the_ledgers_reversals() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 2).await;
    // The ledger refunded 20.00 of p[0] twice (a partial refund recorded twice), p[1] once.
    for (payment, amount) in [(&p[0], 2_000), (&p[0], 2_000), (&p[1], 1_000)] {
        let r = app
            .post(
                &format!("/v1/transactions/{}/reverse", payment.id),
                &json!({"id": Uuid::new_v4(), "amount": amount}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let refund = |p: &Payment, amount: &str| {
        line(
            &p.id.to_string(),
            &p.external_ref,
            amount,
            "SAR",
            "refunded",
            "",
        )
    };
    let file = write_file(
        &tmp(),
        &[
            settled(&p[0]),
            refund(&p[0], "20.00"),
            settled(&p[1]),
            refund(&p[1], "10.00"),
        ],
    );
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1);
    let e = exceptions(&report, "amount_mismatch");
    assert_eq!(e.len(), 1, "{report:#}");
    assert_eq!(
        (&e[0]["payment_id"], &e[0]["reasons"]),
        (
            &json!(p[0].id),
            &json!(["refunded: ledger 40.00, provider 20.00"])
        )
    );
    assert_eq!(report["summary"]["matched"], 1);
    app.finish().await;
}

#[tokio::test]
async fn a_run_is_stored_keyed_and_served_by_the_api() {
    let app = TestApp::new().await;
    let payments = ledger_with_payments(&app, 2).await;
    let file = write_file(&tmp(), &[settled(&payments[0])]);
    let (code, first, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1, "payments[1] is missing at the provider");
    let (_, again, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(
        again["id"], first["id"],
        "the same provider, file and options return the stored run"
    );
    let (_, forced, _) = reconcile(&app, &file, &["--force"]).await;
    assert_ne!(forced["id"], first["id"]);
    let (_, other_options, _) = reconcile(&app, &file, &["--amount-tolerance", "0.01"]).await;
    assert_ne!(other_options["key"], first["key"]);
    let (_, dry, _) = reconcile(&app, &file, &["--dry-run", "--force"]).await;

    let list = app.get("/v1/reconciliations").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    let ids: Vec<&Value> = list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(
        ids.len(),
        3,
        "first, forced, other options; not the dry run"
    );
    assert!(!ids.contains(&&dry["id"]));
    let one = app
        .get(&format!(
            "/v1/reconciliations/{}",
            first["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(one.body["exceptions"], first["exceptions"]);
    assert_eq!(one.body["summary"]["exceptions"]["missing_at_provider"], 1);
    assert_eq!(
        app.get(&format!("/v1/reconciliations/{}", Uuid::new_v4()))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let staged: i64 = sqlx::query_scalar("select count(*) from settlement_lines")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(staged, 0, "staging is emptied by every run");
    app.finish().await;
}

#[tokio::test]
async fn mapped_columns_and_a_file_without_required_columns() {
    let app = TestApp::new().await;
    let payments = ledger_with_payments(&app, 1).await;
    let dir = tmp();
    let file = dir.join("mapped.csv");
    let now = chrono::Utc::now().to_rfc3339();
    std::fs::write(
        &file,
        format!(
            "Ref,Gross,Ccy,State,When\n{},50.00,SAR,settled,{now}\n",
            payments[0].external_ref
        ),
    )
    .unwrap();
    let mapping = [
        "--column",
        "external_ref=Ref",
        "--column",
        "amount=Gross",
        "--column",
        "currency=Ccy",
        "--column",
        "status=State",
        "--column",
        "settled_at=When",
    ];
    let (code, report, _) = reconcile(&app, &file, &mapping).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["summary"]["matched"], 1);

    let out = Command::new(BIN)
        .args([
            "reconcile",
            "--database-url",
            &app.database_url,
            "--provider",
            "psp",
            "--settlement",
            file.to_str().unwrap(),
        ])
        .args(["--out", dir.join("x").to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no \"amount\" column"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    app.finish().await;
}

/// A ledger of three payments and a file that settles them all except where `faulty` (given
/// the payments) replaces the first one's line: the report holds exactly one exception, of
/// `code`, whose first reason starts with `reason`, and the job exits 1.
async fn only_exception(code: &str, faulty: impl Fn(&[Payment]) -> Vec<String>, reason: &str) {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 3).await;
    let mut lines = faulty(&p);
    lines.push(settled(&p[1]));
    lines.push(settled(&p[2]));
    let file = write_file(&tmp(), &lines);
    let (exit, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(exit, 1, "{report:#}");
    let all = report["exceptions"].as_array().unwrap();
    let found: Vec<&Value> = all.iter().filter(|e| e["code"] == code).collect();
    assert_eq!(found.len(), 1, "{code}: {report:#}");
    let first = found[0]["reasons"][0].as_str().unwrap();
    assert!(
        first.starts_with(reason),
        "{code}: {first:?} should start with {reason:?}"
    );
    // An unparsable line also leaves its payment unmatched; every other category stands alone.
    let others: Vec<&Value> = all.iter().filter(|e| e["code"] != code).collect();
    let expected_others = if code == "unparsable_row" { 1 } else { 0 };
    assert_eq!(others.len(), expected_others, "{report:#}");
    app.finish().await;
}

fn line_of(p: &Payment, amount: &str, currency: &str, status: &str) -> String {
    line(
        &p.id.to_string(),
        &p.external_ref,
        amount,
        currency,
        status,
        "",
    )
}

#[tokio::test]
async fn category_missing_in_ledger() {
    let id = Uuid::new_v4();
    only_exception(
        "missing_in_ledger",
        |p| {
            vec![
                settled(&p[0]),
                line(&id.to_string(), "psp_x", "12.00", "SAR", "settled", ""),
            ]
        },
        "payment: provider settled 12.00 SAR (line 3)",
    )
    .await;
}

#[tokio::test]
async fn category_missing_at_provider() {
    only_exception(
        "missing_at_provider",
        |_| vec![],
        "payment: ledger posted 50.00 SAR at",
    )
    .await;
}

#[tokio::test]
async fn category_amount_mismatch() {
    only_exception(
        "amount_mismatch",
        |p| vec![line_of(&p[0], "45.00", "SAR", "settled")],
        "amount: ledger 50.00, provider 45.00",
    )
    .await;
}

#[tokio::test]
async fn category_currency_mismatch() {
    only_exception(
        "currency_mismatch",
        |p| vec![line_of(&p[0], "50.00", "USD", "settled")],
        "currency: ledger SAR, provider USD",
    )
    .await;
}

#[tokio::test]
async fn category_status_mismatch() {
    only_exception(
        "status_mismatch",
        |p| vec![line_of(&p[0], "50.00", "SAR", "failed")],
        "status: ledger posted, provider failed",
    )
    .await;
}

#[tokio::test]
async fn category_duplicate_in_file() {
    only_exception(
        "duplicate_in_file",
        |p| vec![settled(&p[0]), settled(&p[0])],
        "status settled: lines 2, 3",
    )
    .await;
}

#[tokio::test]
async fn category_unparsable_row() {
    only_exception(
        "unparsable_row",
        |p| vec![line_of(&p[0], "50.005", "SAR", "settled")],
        "amount: 50.005 has more decimals than SAR allows (2)",
    )
    .await;
}
