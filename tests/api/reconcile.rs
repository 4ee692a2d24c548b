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

/// A payment imported today with the date it was made is expected in the settlement window of
/// that date, not in today's: the provider settles by the business date.
#[tokio::test]
async fn a_backdated_payment_is_expected_in_the_window_of_its_effective_date() {
    let app = TestApp::new().await;
    let payments = ledger_with_payments(&app, 2).await;
    let three_days_ago = (chrono::Utc::now() - chrono::TimeDelta::days(3)).to_rfc3339();
    let r = app
        .post(
            "/v1/payments",
            &json!({"id": Uuid::new_v4(), "account": "w1", "amount": 5_000, "currency": "SAR",
                    "provider": "psp", "external_ref": "psp_old", "effective_at": three_days_ago}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let dir = tmp();
    let file = write_file(&dir, &payments.iter().map(settled).collect::<Vec<_>>());
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["summary"]["ledger_payments"], json!(2));
    assert_eq!(report["exceptions"], json!([]));
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

// Issue 24: what was posted, per provider, exactly, one bad line confined to itself. --------

/// The job's raw output, for runs that must fail (exit 2) or be read from stdout.
async fn reconcile_output(app: &TestApp, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["reconcile", "--database-url", &app.database_url])
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .await
        .unwrap()
}

fn assert_refused(out: &std::process::Output, reason: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(reason), "{reason:?} not in {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

async fn payment(app: &TestApp, provider: &str, amount: i64, external_ref: &str) -> Payment {
    let id = Uuid::new_v4();
    let r = app
        .post(
            "/v1/payments",
            &json!({"id": id, "account": "w1", "amount": amount, "currency": "SAR",
                    "provider": provider, "external_ref": external_ref}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    Payment {
        id,
        external_ref: external_ref.to_owned(),
    }
}

#[tokio::test]
async fn a_partial_capture_through_the_stream_is_compared_at_what_was_posted() {
    use super::stream_support::*;
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let stream = unique_stream("recon-capture");
    let mut redis = redis_at(&shared_redis_url()).await;
    let payment_id = Uuid::new_v4();
    for (kind, amount) in [
        ("payment.authorized", "10000"),
        ("payment.captured", "6000"),
    ] {
        let fields = event(&[
            ("event_id", &Uuid::new_v4().to_string()),
            ("type", kind),
            ("payment_id", &payment_id.to_string()),
            ("wallet", "w1"),
            ("amount", amount),
            ("provider", "psp"),
            ("external_ref", "cap_1"),
        ]);
        xadd(&mut redis, &stream, &fields).await;
    }
    let drained = run_to_end(
        consumer_command(
            &app.database_url,
            &shared_redis_url(),
            &stream,
            "c1",
            &["--drain"],
        ),
        std::time::Duration::from_secs(60),
    )
    .await;
    assert!(drained.status.success(), "{drained:?}");
    assert_eq!(app.posted_balance("w1").await, 6_000);

    // The API shows what was posted, and what was authorized beside it.
    let t = app.get(&format!("/v1/transactions/{payment_id}")).await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let mut amounts: Vec<i64> = t.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["amount"].as_i64().unwrap())
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, [-6_000, 6_000], "{:#}", t.body);
    assert_eq!(
        (
            &t.body["captured_amount"],
            &t.body["authorized_amount"],
            &t.body["authorized_amount_decimal"]
        ),
        (&json!(6_000), &json!(10_000), &json!("100.00"))
    );

    let p = Payment {
        id: payment_id,
        external_ref: "cap_1".into(),
    };
    let at_captured = write_file(&tmp(), &[line_of(&p, "60.00", "SAR", "settled")]);
    let (code, report, _) = reconcile(&app, &at_captured, &[]).await;
    assert_eq!(code, 0, "the captured 60.00 is what was posted: {report:#}");
    assert_eq!(report["summary"]["matched"], 1);

    let at_authorized = write_file(
        &tmp(),
        &[line(
            &p.id.to_string(),
            "cap_1",
            "100.00",
            "SAR",
            "settled",
            "po_1",
        )],
    );
    let (code, report, _) = reconcile(&app, &at_authorized, &[]).await;
    assert_eq!(code, 1, "{report:#}");
    let e = exceptions(&report, "amount_mismatch");
    assert_eq!(e.len(), 1, "{report:#}");
    assert_eq!(
        e[0]["reasons"],
        json!(["amount: ledger 60.00, provider 100.00"])
    );
    assert_eq!(
        (
            &report["payouts"][0]["ledger_gross"],
            &report["payouts"][0]["agrees"]
        ),
        (&json!("60.00"), &json!(false))
    );
    app.finish().await;
}

#[tokio::test]
async fn a_reference_is_looked_up_among_this_providers_payments_only() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    // Another provider's older payment carries the same reference.
    payment(&app, "other", 9_900, "shared_ref").await;
    let ours = payment(&app, "psp", 5_000, "shared_ref").await;
    let file = write_file(
        &tmp(),
        &[line(
            "",
            &ours.external_ref,
            "50.00",
            "SAR",
            "settled",
            "po_1",
        )],
    );
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["matched"][0]["payment_id"], json!(ours.id));
    assert_eq!(
        (
            &report["matched"][0]["amount"],
            &report["matched"][0]["amount_minor"]
        ),
        (&json!("50.00"), &json!(5000))
    );
    assert_eq!(
        (
            &report["payouts"][0]["ledger_gross"],
            &report["payouts"][0]["agrees"]
        ),
        (&json!("50.00"), &json!(true))
    );
    let payout = &report["payouts"][0];
    assert_eq!(
        [
            &payout["gross_minor"],
            &payout["fee_minor"],
            &payout["net_minor"],
            &payout["ledger_gross_minor"]
        ],
        [&json!(5000), &json!(50), &json!(4950), &json!(5000)],
        "{payout}"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_reference_line_names_one_payment_and_a_second_with_that_reference_is_missing() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let first = payment(&app, "psp", 5_000, "twice").await;
    let second = payment(&app, "psp", 5_000, "twice").await;
    let file = write_file(&tmp(), &[line("", "twice", "50.00", "SAR", "settled", "")]);
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["matched"][0]["payment_id"], json!(first.id));
    let missing = exceptions(&report, "missing_at_provider");
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(missing[0]["payment_id"], json!(second.id));
    app.finish().await;
}

#[tokio::test]
async fn a_tolerance_finer_than_the_minor_unit_means_exact_equality() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let file = write_file(&tmp(), &[line_of(&p[0], "50.01", "SAR", "settled")]);
    let (code, report, _) = reconcile(&app, &file, &["--amount-tolerance", "0.001"]).await;
    assert_eq!(code, 1, "0.001 SAR tolerates nothing: {report:#}");
    assert_eq!(exceptions(&report, "amount_mismatch").len(), 1);
    let (code, report, _) = reconcile(&app, &file, &["--amount-tolerance", "0.01"]).await;
    assert_eq!(code, 0, "{report:#}");
    let (code, report, _) =
        reconcile(&app, &file, &["--amount-tolerance", "100000000000000"]).await;
    assert_eq!(
        code, 0,
        "a huge tolerance tolerates the difference: {report:#}"
    );
    let file = write_file(&tmp(), &[line_of(&p[0], "50.00", "SAR", "settled")]);
    let out = reconcile_output(
        &app,
        &[
            "--provider",
            "psp",
            "--settlement",
            file.to_str().unwrap(),
            "--amount-tolerance=-0.01",
        ],
    )
    .await;
    assert_refused(&out, "--amount-tolerance -0.01: must not be negative");
    app.finish().await;
}

#[tokio::test]
async fn flags_out_of_range_and_an_inverted_period_are_refused_with_a_reason() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let file = write_file(&tmp(), &[settled(&p[0])]);
    let file = file.to_str().unwrap();
    let base = ["--provider", "psp", "--settlement", file];
    for flag in ["--settlement-lag-hours", "--date-tolerance-hours"] {
        let out = reconcile_output(&app, &[&base[..], &[flag, "4294967295"]].concat()).await;
        assert_refused(&out, "the earliest time the ledger can hold");
    }
    let inverted = [
        "--from",
        "2026-12-02T00:00:00Z",
        "--to",
        "2026-12-01T00:00:00Z",
    ];
    let out = reconcile_output(&app, &[&base[..], &inverted].concat()).await;
    assert_refused(&out, "the settlement period is inverted");
    // --from after the file's last settled_at inverts the period too.
    let out = reconcile_output(
        &app,
        &[&base[..], &["--from", "2999-01-01T00:00:00Z"]].concat(),
    )
    .await;
    assert_refused(&out, "the settlement period is inverted");
    let runs: i64 = sqlx::query_scalar("select count(*) from reconciliation_runs")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(runs, 0, "nothing stored");
    // A huge hold grace turns the overdue-hold check off instead of failing.
    let (code, report, _) = reconcile(
        &app,
        Path::new(file),
        &["--hold-grace-ms", "18446744073709551615"],
    )
    .await;
    assert_eq!(code, 0, "{report:#}");
    app.finish().await;
}

#[tokio::test]
async fn one_bad_line_is_its_own_unparsable_row_and_the_run_goes_on() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let now = chrono::Utc::now().to_rfc3339();
    let lines = vec![
        settled(&p[0]),                                                       // 2
        format!(",ref\0nul,1.00,SAR,settled,{now},0,"),                       // 3
        format!(",ref_ok,1.00,SAR,settled,{now},0,po\0x"),                    // 4
        ",ref_y0,1.00,SAR,settled,0000-06-01T00:00:00Z,0,".to_owned(),        // 5
        ",ref_y10k,1.00,SAR,settled,9999-12-31T23:00:00-05:00,0,".to_owned(), // 6
    ];
    let file = write_file(&tmp(), &lines);
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1, "{report:#}");
    let bad: Vec<(i64, String)> = exceptions(&report, "unparsable_row")
        .iter()
        .map(|e| {
            (
                e["line"].as_i64().unwrap(),
                e["reasons"][0].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        bad,
        [
            (3, "external_ref: contains a NUL byte".to_owned()),
            (4, "payout_ref: contains a NUL byte".to_owned()),
            (5, "settled_at: \"0000-06-01T00:00:00Z\" is out of range (years 0001 to 9999 in UTC)".to_owned()),
            (6, "settled_at: \"9999-12-31T23:00:00-05:00\" is out of range (years 0001 to 9999 in UTC)".to_owned()),
        ]
    );
    assert_eq!(report["summary"]["matched"], 1);
    app.finish().await;
}

#[tokio::test]
async fn totals_and_payouts_beyond_bigint_are_summed_exactly() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let mut lines = vec![settled(&p[0])];
    let now = chrono::Utc::now().to_rfc3339();
    // 1,030 failed lines of 2^53 − 1 halalas (failed: nothing to match), amount and fee.
    for i in 0..1_030 {
        lines.push(format!(
            ",big_{i},90071992547409.91,SAR,failed,{now},90071992547409.91,po_big"
        ));
    }
    let file = write_file(&tmp(), &lines);
    let (code, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 0, "{:#}", report["summary"]);
    assert_eq!(
        report["summary"]["totals"][0],
        json!({"currency": "SAR", "gross": "50.00", "fee": "92774152323832207.80",
               "net": "-92774152323832157.80",
               // Minor units beyond 2^53 − 1 would not be exact as JSON numbers: null.
               "gross_minor": 5000, "fee_minor": null, "net_minor": null}),
        "1,030 × 90071992547409.91 + 0.50 fees"
    );
    let payout = report["payouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["payout_ref"] == "po_big")
        .unwrap();
    assert_eq!(
        (&payout["fee"], &payout["lines"]),
        (&json!("92774152323832207.30"), &json!(1_030))
    );
    app.finish().await;
}

#[tokio::test]
async fn a_settlement_file_from_a_pipe_is_read_once() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let content = format!("{HEADER}\n{}\n", settled(&p[0]));
    let out_dir = tmp();
    let (from, to) = period();
    let mut child = Command::new(BIN)
        .args([
            "reconcile",
            "--database-url",
            &app.database_url,
            "--provider",
            "psp",
        ])
        .args([
            "--settlement",
            "/dev/stdin",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .args(["--from", &from, "--to", &to, "--settlement-lag-hours", "0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(content.as_bytes()).await.unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["summary"]["matched"], 1);
    // The key is the content's: the same bytes from a file are the same run.
    let file = tmp().join("same.csv");
    std::fs::write(&file, &content).unwrap();
    let (_, again, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(again["id"], report["id"]);
    app.finish().await;
}

#[tokio::test]
async fn a_crlf_file_numbers_its_lines_like_an_lf_file() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 2).await;
    let lines = [settled(&p[0]), line_of(&p[1], "45.00", "SAR", "settled")];
    let path = tmp().join("crlf.csv");
    std::fs::write(&path, format!("{HEADER}\r\n{}\r\n", lines.join("\r\n"))).unwrap();
    let (code, report, _) = reconcile(&app, &path, &[]).await;
    assert_eq!(code, 1, "{report:#}");
    let e = exceptions(&report, "amount_mismatch");
    assert_eq!((e.len(), &e[0]["line"]), (1, &json!(3)), "{report:#}");
    assert_eq!(report["summary"]["matched"], 1);
    app.finish().await;
}

#[tokio::test]
async fn a_dry_run_returns_the_stored_run_unless_forced() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let file = write_file(&tmp(), &[settled(&p[0])]);
    let (_, stored, _) = reconcile(&app, &file, &[]).await;
    let (_, dry, _) = reconcile(&app, &file, &["--dry-run"]).await;
    assert_eq!(
        dry["id"], stored["id"],
        "the docs: a dry run returns a stored run"
    );
    let (_, forced, _) = reconcile(&app, &file, &["--dry-run", "--force"]).await;
    assert_ne!(forced["id"], stored["id"]);
    app.finish().await;
}

#[tokio::test]
async fn a_reader_that_goes_away_does_not_make_the_job_panic() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let file = write_file(&tmp(), &[settled(&p[0])]);
    let (from, to) = period();
    let mut child = Command::new(BIN)
        .args([
            "reconcile",
            "--database-url",
            &app.database_url,
            "--provider",
            "psp",
        ])
        .args(["--settlement", file.to_str().unwrap()])
        .args(["--out", tmp().to_str().unwrap()])
        .args(["--from", &from, "--to", &to, "--settlement-lag-hours", "0"])
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Like `| head -0`: the reading end is closed before the job prints anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    app.finish().await;
}

#[tokio::test]
async fn a_cursor_the_api_never_returned_is_400() {
    let app = TestApp::new().await;
    // A bare row number is not a cursor either: cursors are tagged with their list.
    for cursor in ["-5", "0", "x", "1"] {
        let r = app
            .get(&format!("/v1/reconciliations?cursor={cursor}"))
            .await;
        super::common::assert_problem(&r, 400, "invalid_query", cursor);
    }
    app.finish().await;
}

#[tokio::test]
async fn exceptions_are_counted_exactly_listed_up_to_a_limit_and_all_in_the_csv() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let mut lines = vec![settled(&p[0])];
    for i in 0..1_500 {
        lines.push(format!(
            ",bad_{i},12.345,SAR,settled,2026-11-30T00:00:00Z,,"
        ));
    }
    let file = write_file(&tmp(), &lines);
    let (code, report, out) = reconcile(&app, &file, &[]).await;
    assert_eq!(code, 1);
    assert_eq!(report["summary"]["exceptions"]["unparsable_row"], 1_500);
    assert_eq!(report["summary"]["exceptions_listed"], 1_000);
    let listed = report["exceptions"].as_array().unwrap();
    assert_eq!(listed.len(), 1_000, "the first 1,000 of the code");
    assert_eq!(
        (&listed[0]["line"], &listed[999]["line"]),
        (&json!(3), &json!(1_002))
    );
    let csv = std::fs::read_to_string(out.join("exceptions.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 1_500,
        "exceptions.csv lists every exception"
    );
    assert!(
        csv.lines()
            .last()
            .unwrap()
            .starts_with("unparsable_row,,,1502,")
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("The first 1000 listed"),
        "the HTML says it lists a sample"
    );
    let stored = app
        .get(&format!(
            "/v1/reconciliations/{}",
            report["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stored.body["exceptions"].as_array().unwrap().len(), 1_000);
    assert!(
        std::fs::read_dir(&out).unwrap().all(|f| !f
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("partial")),
        "no partial file left"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_runs_exceptions_are_served_a_page_at_a_time() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 3).await;
    let file = write_file(
        &tmp(),
        &[
            line_of(&p[0], "1.001", "SAR", "settled"),
            line_of(&p[1], "2.002", "SAR", "settled"),
            line("", "nowhere", "3.00", "SAR", "settled", ""),
        ],
    );
    let (_, report, _) = reconcile(&app, &file, &[]).await;
    let id = report["id"].as_str().unwrap();
    let mut seen = Vec::new();
    let mut path = format!("/v1/reconciliations/{id}/exceptions?limit=2");
    loop {
        let page = app.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        seen.extend(page.body["data"].as_array().unwrap().iter().cloned());
        match page.body["next_cursor"].as_str() {
            Some(next) => {
                path = format!("/v1/reconciliations/{id}/exceptions?limit=2&cursor={next}")
            }
            None => break,
        }
    }
    assert_eq!(
        Value::Array(seen),
        report["exceptions"],
        "every page, in report order"
    );
    let only = app
        .get(&format!(
            "/v1/reconciliations/{id}/exceptions?code=missing_in_ledger"
        ))
        .await;
    assert_eq!(
        only.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        only.text
    );
    let bad = app
        .get(&format!("/v1/reconciliations/{id}/exceptions?code=nope"))
        .await;
    super::common::assert_problem(&bad, 400, "invalid_query", "unknown code");
    let missing = app
        .get(&format!(
            "/v1/reconciliations/{}/exceptions",
            Uuid::new_v4()
        ))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

// The property test of issue 24 -----------------------------------------------------------

/// A payment as the model knows it: what was posted through which provider.
#[derive(Debug, Clone)]
struct Modelled {
    id: Uuid,
    external_ref: String,
    provider: &'static str,
    /// `posted`, `pending` (authorized only) or `voided` (failed).
    status: &'static str,
    /// What was posted (the captured amount for a partial capture), in halalas.
    gross: i64,
    refunded: i64,
}

/// A perturbation of one payment's lines, and the exceptions it must cause.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Perturbation {
    Amount,
    Currency,
    Status,
    Duplicate,
    Omission,
    BadBytes,
}

/// One line of a derived settlement file, as bytes (bad bytes included).
struct FileLine {
    bytes: Vec<u8>,
    /// The payment it is about (`None` for an unknown one).
    payment: Option<Uuid>,
}

fn settlement_bytes(
    p: &Modelled,
    by_id: bool,
    amount: i64,
    currency: &str,
    status: &str,
) -> Vec<u8> {
    let now = chrono::Utc::now().to_rfc3339();
    let id = if by_id {
        p.id.to_string()
    } else {
        String::new()
    };
    let amount = format!("{}.{:02}", amount / 100, amount % 100);
    format!(
        "{id},{},{amount},{currency},{status},{now},0,",
        p.external_ref
    )
    .into_bytes()
}

/// Builds a random ledger through the stream (two providers; payments, partial captures,
/// authorizations left pending, failures, refunds) and returns the model of it.
async fn random_ledger(app: &TestApp, rng: &mut super::common::Rng) -> Vec<Modelled> {
    use super::stream_support::*;
    app.create_wallet("w1").await;
    let stream = unique_stream("recon-property");
    let mut redis = redis_at(&shared_redis_url()).await;
    let mut model = Vec::new();
    let mut events = Vec::new();
    let mut refunds = Vec::new();
    for i in 0..(8 + rng.below(8)) {
        let provider = if rng.below(3) == 0 { "other" } else { "psp" };
        // References are unique within a provider; the other provider often uses one that
        // a later payment of this provider will use too (so the other's is the older).
        let external_ref = match provider {
            "psp" => format!("ref_{i}"),
            _ if rng.below(2) == 0 => format!("ref_{}", i + rng.below(4)),
            _ => format!("other_ref_{i}"),
        };
        let id = Uuid::new_v4();
        let amount = 100 + rng.below(90_000) as i64;
        let ev = |kind: &str, amount: i64| {
            event(&[
                ("event_id", &Uuid::new_v4().to_string()),
                ("type", kind),
                ("payment_id", &id.to_string()),
                ("wallet", "w1"),
                ("amount", &amount.to_string()),
                ("provider", provider),
                ("external_ref", &external_ref),
            ])
        };
        let (status, gross) = match rng.below(5) {
            0 | 1 => {
                events.push(ev("payment.succeeded", amount));
                ("posted", amount)
            }
            2 => {
                let captured = 1 + rng.below(amount as u64) as i64;
                events.push(ev("payment.authorized", amount));
                events.push(ev("payment.captured", captured));
                ("posted", captured)
            }
            3 => {
                events.push(ev("payment.authorized", amount));
                ("pending", 0)
            }
            _ => {
                events.push(ev("payment.failed", amount));
                ("voided", 0)
            }
        };
        let mut refunded = 0;
        if status == "posted" && rng.below(3) == 0 {
            for _ in 0..(1 + rng.below(2)) {
                let part = 1 + rng.below((gross - refunded).max(1) as u64 / 2) as i64;
                if refunded + part > gross {
                    break;
                }
                refunded += part;
                refunds.push(event(&[
                    ("event_id", &Uuid::new_v4().to_string()),
                    ("type", "payment.refunded"),
                    ("payment_id", &id.to_string()),
                    ("refund_id", &Uuid::new_v4().to_string()),
                    ("wallet", "w1"),
                    ("amount", &part.to_string()),
                    ("provider", provider),
                ]));
            }
        }
        model.push(Modelled {
            id,
            external_ref,
            provider,
            status,
            gross,
            refunded,
        });
    }
    for batch in [events, refunds] {
        for fields in &batch {
            xadd(&mut redis, &stream, fields).await;
        }
        let drained = run_to_end(
            consumer_command(
                &app.database_url,
                &shared_redis_url(),
                &stream,
                "c1",
                &["--drain"],
            ),
            std::time::Duration::from_secs(60),
        )
        .await;
        assert!(drained.status.success(), "{drained:?}");
        assert!(dead_letters(&mut redis, &stream).await.is_empty());
    }
    model
}

/// `(code, payment id or line)` of every exception in a report.
fn named(report: &Value, model: &[Modelled]) -> std::collections::BTreeSet<(String, String)> {
    report["exceptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let code = e["code"].as_str().unwrap().to_owned();
            let key = if code == "unparsable_row" {
                format!("line {}", e["line"])
            } else if let Some(id) = e["payment_id"].as_str() {
                id.to_owned()
            } else {
                let r = e["external_ref"].as_str().unwrap_or("");
                model
                    .iter()
                    .find(|p| p.provider == "psp" && p.external_ref == r)
                    .map_or_else(|| format!("ref {r}"), |p| p.id.to_string())
            };
            (code, key)
        })
        .collect()
}

#[tokio::test]
async fn a_derived_file_is_clean_and_each_perturbation_is_named_and_nothing_else() {
    const PERTURBATIONS: [Perturbation; 6] = [
        Perturbation::Amount,
        Perturbation::Currency,
        Perturbation::Status,
        Perturbation::Duplicate,
        Perturbation::Omission,
        Perturbation::BadBytes,
    ];
    for seed in [24_u64, 2_024, 424_242, 7, 77, 777] {
        let mut rng = super::common::Rng(seed);
        let app = TestApp::new().await;
        let model = random_ledger(&app, &mut rng).await;
        let ours: Vec<&Modelled> = model.iter().filter(|p| p.provider == "psp").collect();
        let crlf = rng.below(2) == 0;
        let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };

        // Each payment of this provider gets at most one perturbation.
        let mut plan: Vec<(&Modelled, Option<Perturbation>, bool)> = Vec::new();
        for p in &ours {
            let by_id = rng.below(2) == 0;
            let perturb = (rng.below(3) > 0).then(|| *rng.pick(&PERTURBATIONS));
            plan.push((p, perturb, by_id));
        }
        let foreign = model
            .iter()
            .find(|p| p.provider == "other" && p.status == "posted")
            .filter(|_| rng.below(2) == 0);
        let derive = |perturbed: bool| -> (Vec<u8>, std::collections::BTreeSet<(String, String)>) {
            let mut lines: Vec<FileLine> = Vec::new();
            let mut expected = std::collections::BTreeSet::new();
            let mut expect = |code: &str, key: String| {
                expected.insert((code.to_owned(), key));
            };
            for (p, perturb, by_id) in &plan {
                let perturb = perturb.filter(|_| perturbed);
                let key = p.id.to_string();
                let line = |amount: i64, currency: &str, status: &str| FileLine {
                    bytes: settlement_bytes(p, *by_id, amount, currency, status),
                    payment: Some(p.id),
                };
                let mut mine = match p.status {
                    "posted" => {
                        let mut v = vec![line(p.gross, "SAR", "settled")];
                        if p.refunded > 0 {
                            v.push(line(p.refunded, "SAR", "refunded"));
                        }
                        v
                    }
                    "voided" => vec![line(0, "SAR", "failed")],
                    _ => vec![], // pending: not settled yet, not expected
                };
                if mine.is_empty() {
                    continue;
                }
                match perturb {
                    None => {}
                    Some(Perturbation::Amount) if p.status == "posted" => {
                        mine[0] = line(p.gross + 1 + rng_amount(p), "SAR", "settled");
                        expect("amount_mismatch", key);
                    }
                    Some(Perturbation::Currency) if p.status == "posted" => {
                        for l in &mut mine {
                            let text = String::from_utf8(l.bytes.clone()).unwrap();
                            l.bytes = text.replace(",SAR,", ",USD,").into_bytes();
                        }
                        expect("currency_mismatch", key);
                    }
                    Some(Perturbation::Status) if p.status == "posted" && p.refunded > 0 => {
                        mine.truncate(1); // the refund left out: settled, not refunded
                        expect("status_mismatch", key);
                    }
                    Some(Perturbation::Status) if p.status == "posted" => {
                        mine[0] = line(p.gross, "SAR", "failed");
                        expect("status_mismatch", key);
                    }
                    Some(Perturbation::Duplicate) => {
                        let again = FileLine {
                            bytes: mine[0].bytes.clone(),
                            payment: mine[0].payment,
                        };
                        mine.push(again);
                        expect("duplicate_in_file", key);
                    }
                    Some(Perturbation::Omission) if p.status == "posted" => {
                        mine.clear();
                        expect("missing_at_provider", key);
                    }
                    Some(Perturbation::BadBytes) if p.status == "posted" && mine.len() == 1 => {
                        // A Latin-1 reference: the line is unparsable, so the payment is
                        // missing at the provider.
                        let mut bytes = mine[0].bytes.clone();
                        let at = bytes.iter().position(|b| *b == b',').unwrap() + 1;
                        bytes.insert(at, 0xe9);
                        mine[0].bytes = bytes;
                        mine[0].payment = None;
                        expect("missing_at_provider", key);
                        expect("unparsable_row", format!("line {}", lines.len() + 2));
                    }
                    Some(_) => {} // not applicable to this payment: left as it is
                }
                lines.extend(mine);
            }
            // Another provider's payment in this provider's file: not through this provider.
            if perturbed && let Some(foreign) = foreign {
                lines.push(FileLine {
                    bytes: settlement_bytes(foreign, true, foreign.gross, "SAR", "settled"),
                    payment: Some(foreign.id),
                });
                expect("missing_in_ledger", foreign.id.to_string());
            }
            let mut bytes = HEADER.as_bytes().to_vec();
            for l in &lines {
                bytes.extend_from_slice(eol);
                bytes.extend_from_slice(&l.bytes);
            }
            bytes.extend_from_slice(eol);
            (bytes, expected)
        };

        let dir = tmp();
        let (clean, none) = derive(false);
        assert!(none.is_empty());
        let clean_path = dir.join("clean.csv");
        std::fs::write(&clean_path, clean).unwrap();
        let (code, report, _) = reconcile(&app, &clean_path, &[]).await;
        assert_eq!(
            (
                code,
                report["summary"]["exceptions"]
                    .as_object()
                    .unwrap()
                    .values()
                    .all(|n| n == 0)
            ),
            (0, true),
            "seed {seed}: a file derived from what was posted is clean: {report:#}"
        );

        let (perturbed, expected) = derive(true);
        let perturbed_path = dir.join("perturbed.csv");
        std::fs::write(&perturbed_path, perturbed).unwrap();
        let (code, report, _) = reconcile(&app, &perturbed_path, &[]).await;
        let found = named(&report, &model);
        assert_eq!(
            found, expected,
            "seed {seed} (crlf {crlf}): the report names exactly the perturbations: {:#}",
            report["exceptions"]
        );
        assert_eq!(code, if expected.is_empty() { 0 } else { 1 }, "seed {seed}");
        app.finish().await;
    }
}

/// A deterministic extra for an amount perturbation, so it never lands back on the gross.
fn rng_amount(p: &Modelled) -> i64 {
    (p.id.as_u128() % 500) as i64
}

#[tokio::test]
async fn a_database_error_reads_without_postgresqls_source_line() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 1).await;
    let file = write_file(&tmp(), &[settled(&p[0])]);
    sqlx::query("drop table settlement_lines")
        .execute(&app.pool)
        .await
        .unwrap();
    let out = reconcile_output(
        &app,
        &[
            "--provider",
            "psp",
            "--settlement",
            file.to_str().unwrap(),
            "--out",
            tmp().to_str().unwrap(),
        ],
    )
    .await;
    assert_refused(
        &out,
        "relation \"settlement_lines\" does not exist (SQLSTATE 42P01)",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(" at line "), "{stderr}");
    app.finish().await;
}

/// A line without a payment_id finds its payment through external_ref: the exception names
/// the payment the ledger found, so an operator need not look it up again.
#[tokio::test]
async fn a_status_mismatch_found_through_the_reference_names_the_ledgers_payment() {
    let app = TestApp::new().await;
    let p = ledger_with_payments(&app, 2).await;
    let lines = [
        line("", &p[0].external_ref, "50.00", "SAR", "failed", ""),
        settled(&p[1]),
    ];
    let file = write_file(&tmp(), &lines);
    let (exit, report, _) = reconcile(&app, &file, &[]).await;
    assert_eq!(exit, 1, "{report:#}");
    let found = exceptions(&report, "status_mismatch");
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["payment_id"], json!(p[0].id), "{report:#}");
    app.finish().await;
}
