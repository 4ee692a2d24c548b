//! Effective dates: a posted transaction dated in the past counts from that date in balances
//! read by effective time; a backdated debit must not overdraw its wallet at any effective
//! moment since; bad dates are refused with nothing written; and a model that replays the
//! same operations in effective order agrees with the ledger.

use super::common::TestApp;
use axum::http::StatusCode;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use uuid::Uuid;

fn ago(d: TimeDelta) -> DateTime<Utc> {
    let t = Utc::now() - d;
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap()
}

fn text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

async fn pay(app: &TestApp, wallet: &str, amount: i64, at: Option<DateTime<Utc>>) -> Value {
    let mut body = json!({"id": Uuid::new_v4(), "account": wallet, "amount": amount,
                          "currency": "SAR", "provider": "test"});
    if let Some(at) = at {
        body["effective_at"] = json!(text(at));
    }
    let r = app.post("/v1/payments", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body
}

async fn send(
    app: &TestApp,
    from: &str,
    to: &str,
    amount: i64,
    at: Option<DateTime<Utc>>,
) -> (StatusCode, Value) {
    let mut body = json!({"id": Uuid::new_v4(), "from": from, "to": to, "amount": amount});
    if let Some(at) = at {
        body["effective_at"] = json!(text(at));
    }
    let r = app.post("/v1/transfers", &body).await;
    (r.status, r.body)
}

async fn posted_at(app: &TestApp, wallet: &str, at: DateTime<Utc>, time: &str) -> i64 {
    answered_at(app, wallet, at, time).await.0
}

/// The posted balance at `at` on the `time` axis, and the instant it describes (`at`, or the
/// finality horizon when that is earlier: docs/api.md, `as_of`).
async fn answered_at(
    app: &TestApp,
    wallet: &str,
    at: DateTime<Utc>,
    time: &str,
) -> (i64, DateTime<Utc>) {
    let t = form_urlencoded::byte_serialize(text(at).as_bytes()).collect::<String>();
    let r = app
        .get(&format!("/v1/accounts/{wallet}?as_of={t}&time={time}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let described = serde_json::from_value(r.body["as_of"].clone()).unwrap();
    (r.body["balances"]["posted"].as_i64().unwrap(), described)
}

#[tokio::test]
async fn a_backdated_transaction_counts_from_its_date_by_effective_time() {
    let app = TestApp::new().await;
    app.create_wallet("a").await;
    app.create_wallet("b").await;
    // Money that arrived today cannot pay for a purchase dated two days ago.
    pay(&app, "a", 1_000, None).await;
    let (status, body) = send(&app, "a", "b", 300, Some(ago(TimeDelta::days(2)))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "insufficient_funds");
    // Imported with its real date, it can.
    let five_days = ago(TimeDelta::days(5));
    let payment = pay(&app, "a", 1_000, Some(five_days)).await;
    assert_eq!(payment["effective_at"], json!(text(five_days)));
    assert_ne!(payment["effective_at"], payment["posted_at"]);
    let two_days = ago(TimeDelta::days(2));
    let (status, transfer) = send(&app, "a", "b", 300, Some(two_days)).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}");
    assert_eq!(transfer["effective_at"], json!(text(two_days)));

    // By effective time: 1,000 from five days ago, 300 gone two days ago, 1,000 more today.
    assert_eq!(
        posted_at(&app, "a", ago(TimeDelta::days(3)), "effective").await,
        1_000
    );
    assert_eq!(
        posted_at(&app, "a", ago(TimeDelta::days(1)), "effective").await,
        700
    );
    assert_eq!(
        posted_at(&app, "b", ago(TimeDelta::days(1)), "effective").await,
        300
    );
    // By ledger time nothing of it existed yesterday.
    assert_eq!(
        posted_at(&app, "a", ago(TimeDelta::days(1)), "ledger").await,
        0
    );
    assert_eq!(app.posted_balance("a").await, 1_700);

    // Entries show both times; a transaction that was not backdated counts from its ledger time.
    let entries = app.get("/v1/accounts/a/entries").await;
    let times: Vec<(Value, Value)> = entries.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["effective_at"].clone(), e["ledger_time"].clone()))
        .collect();
    assert_eq!(times[0].0, json!(text(two_days)));
    assert_eq!(times[1].0, json!(text(five_days)));
    assert_eq!(times[2].0, times[2].1);
    let got = app
        .get(&format!(
            "/v1/transactions/{}",
            transfer["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(got.body["effective_at"], json!(text(two_days)));
    app.finish().await;
}

#[tokio::test]
async fn a_backdated_debit_may_not_overdraw_any_moment_since_its_date() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    app.create_wallet("payee").await;
    pay(&app, "w", 500, Some(ago(TimeDelta::days(10)))).await;
    // Spent 400 yesterday: 100 left from then until 300 came in today.
    let (status, body) = send(&app, "w", "payee", 400, Some(ago(TimeDelta::days(1)))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    pay(&app, "w", 300, None).await;
    // 400 now and 500 five days ago cover 200, but yesterday's 100 does not.
    let (status, body) = send(&app, "w", "payee", 200, Some(ago(TimeDelta::days(5)))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["code"], "insufficient_funds");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("as little as 1.00"), "{body}");
    // The refusal is stored: nothing moved.
    assert_eq!(app.posted_balance("w").await, 400);
    let (status, body) = send(&app, "w", "payee", 100, Some(ago(TimeDelta::days(5)))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(app.posted_balance("w").await, 300);
    // A hold reserves money at every moment too: 300 − 250 leaves 50, short of 60.
    let hold = json!({"id": Uuid::new_v4(), "from": "w", "to": "payee", "amount": 250, "status": "pending"});
    assert_eq!(
        app.post("/v1/transfers", &hold).await.status,
        StatusCode::CREATED
    );
    let (status, body) = send(&app, "w", "payee", 60, Some(ago(TimeDelta::hours(1)))).await;
    assert_eq!(
        (status, body["code"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("insufficient_funds")
        ),
        "{body}"
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_backdated_debits_are_decided_one_after_another() {
    let app = std::sync::Arc::new(TestApp::new().await);
    app.create_wallet("w").await;
    app.create_wallet("payee").await;
    pay(&app, "w", 100, Some(ago(TimeDelta::days(5)))).await;
    // A payment today does not help a moment before it: three debits of 30 fit, not four.
    pay(&app, "w", 1_000, None).await;
    let dated = ago(TimeDelta::days(2));
    let debits: Vec<_> = (0..10)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, "w", "payee", 30, Some(dated)).await })
        })
        .collect();
    let mut created = 0;
    for debit in debits {
        let (status, body) = debit.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            _ => assert_eq!(body["code"], "insufficient_funds", "{body}"),
        }
    }
    assert_eq!(created, 3);
    assert_eq!(
        posted_at(&app, "w", ago(TimeDelta::days(1)), "effective").await,
        10
    );
    assert_eq!(app.posted_balance("w").await, 1_010);
    std::sync::Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn bad_dates_are_refused_and_a_retry_is_held_to_its_date() {
    let app = TestApp::new().await;
    app.create_wallet("a").await;
    app.create_wallet("b").await;
    pay(&app, "a", 1_000, Some(ago(TimeDelta::days(3)))).await;
    let id = Uuid::new_v4();
    let at = text(ago(TimeDelta::days(1)));
    for (body, field, code) in [
        (
            json!({"id": id, "from": "a", "to": "b", "amount": 1, "effective_at": text(Utc::now() + TimeDelta::minutes(5))}),
            "/effective_at",
            "range",
        ),
        (
            json!({"id": id, "from": "a", "to": "b", "amount": 1, "effective_at": text(ago(TimeDelta::days(32)))}),
            "/effective_at",
            "range",
        ),
        (
            json!({"id": id, "from": "a", "to": "b", "amount": 1, "effective_at": at, "status": "pending"}),
            "/effective_at",
            "not_applicable",
        ),
        (
            json!({"id": id, "from": "a", "to": "b", "amount": 1, "effective_at": "yesterday"}),
            "/effective_at",
            "invalid_type",
        ),
    ] {
        let r = app.post("/v1/transfers", &body).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        let errors = r.body["errors"].as_array().unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e["field"] == field && e["code"] == code),
            "{}",
            r.text
        );
    }
    assert_eq!(
        app.get(&format!("/v1/transactions/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let r = app.get("/v1/accounts/a?time=effective").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["errors"][0]["code"], "not_applicable", "{}", r.text);

    let body = json!({"id": id, "from": "a", "to": "b", "amount": 10, "effective_at": at});
    assert_eq!(
        app.post("/v1/transfers", &body).await.status,
        StatusCode::CREATED
    );
    let again = app.post("/v1/transfers", &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    let mut moved = body.clone();
    moved["effective_at"] = json!(text(ago(TimeDelta::days(2))));
    let undated = json!({"id": id, "from": "a", "to": "b", "amount": 10});
    for other in [moved, undated] {
        let r = app.post("/v1/transfers", &other).await;
        assert_eq!(r.body["code"], "idempotency_mismatch", "{}", r.text);
        assert_eq!(
            r.body["differing_fields"],
            json!(["/effective_at"]),
            "{}",
            r.text
        );
    }
    app.finish().await;
}

/// One step of a model run: a payment into the wallet or a transfer out of it, dated now or
/// `minutes_back` minutes ago.
#[derive(Debug, Clone)]
struct Step {
    debit: bool,
    amount: i64,
    minutes_back: Option<i64>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        proptest::bool::weighted(0.55),
        1i64..=400,
        proptest::option::weighted(0.6, 1i64..=20_000),
    )
        .prop_map(|(debit, amount, minutes_back)| Step {
            debit,
            amount,
            minutes_back,
        })
}

/// The model: the wallet's posted entries as (effective time, amount).
#[derive(Default)]
struct Model {
    moves: Vec<(DateTime<Utc>, i64)>,
}

impl Model {
    fn at(&self, t: DateTime<Utc>) -> i64 {
        self.moves
            .iter()
            .filter(|(e, _)| *e <= t)
            .map(|(_, a)| a)
            .sum()
    }

    /// Whether a debit dated `from` keeps every effective moment since at zero or above.
    fn allows(&self, amount: i64, from: DateTime<Utc>) -> bool {
        let mut moments: Vec<DateTime<Utc>> = self
            .moves
            .iter()
            .map(|(e, _)| *e)
            .filter(|e| *e >= from)
            .collect();
        moments.push(from);
        moments.iter().all(|t| self.at(*t) - amount >= 0)
    }
}

static CASES: AtomicUsize = AtomicUsize::new(0);

async fn run(app: &TestApp, steps: &[Step]) -> Result<(), TestCaseError> {
    let case = CASES.fetch_add(1, Ordering::Relaxed);
    let (wallet, sink) = (format!("m{case}"), format!("m{case}-sink"));
    app.create_wallet(&wallet).await;
    app.create_wallet(&sink).await;
    let mut model = Model::default();
    for (i, s) in steps.iter().enumerate() {
        let dated = s.minutes_back.map(|m| ago(TimeDelta::minutes(m)));
        if !s.debit {
            let body = pay(app, &wallet, s.amount, dated).await;
            let eff: DateTime<Utc> = serde_json::from_value(body["effective_at"].clone()).unwrap();
            model.moves.push((eff, s.amount));
            continue;
        }
        let expected = model.allows(s.amount, dated.unwrap_or_else(Utc::now));
        let (status, body) = send(app, &wallet, &sink, s.amount, dated).await;
        prop_assert_eq!(
            status == StatusCode::CREATED,
            expected,
            "step {} {:?}: {}",
            i,
            s,
            body
        );
        if status == StatusCode::CREATED {
            let eff: DateTime<Utc> = serde_json::from_value(body["effective_at"].clone()).unwrap();
            model.moves.push((eff, -s.amount));
        } else {
            prop_assert_eq!(&body["code"], &json!("insufficient_funds"));
        }
    }
    // Balances by effective time at every moment the model knows, and just before each.
    let mut moments: Vec<DateTime<Utc>> = model.moves.iter().map(|(e, _)| *e).collect();
    moments.extend(
        model
            .moves
            .iter()
            .map(|(e, _)| *e - TimeDelta::microseconds(1)),
    );
    for t in moments {
        let (posted, described) = answered_at(app, &wallet, t, "effective").await;
        prop_assert_eq!(
            posted,
            model.at(described),
            "at {} (asked {})",
            text(described),
            text(t)
        );
    }
    prop_assert_eq!(app.posted_balance(&wallet).await, model.at(Utc::now()));
    Ok(())
}

#[test]
fn effective_balances_match_a_model_replayed_in_effective_order() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let app = rt.block_on(TestApp::unlimited());
    let config = ProptestConfig {
        cases: 12,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&proptest::collection::vec(step(), 1..=25), |steps| {
        rt.block_on(run(&app, &steps))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    rt.block_on(app.finish());
}
