//! Currency exchange: one transaction debits a wallet in one currency and credits a wallet in
//! another through the `fx:{currency}` system accounts, balanced per currency; its terms are
//! checked (`rate_mismatch`), it is naturally idempotent, held, captured, voided and reversed
//! like a transfer, parallel exchanges never overdraw, and `verify` finds the journal whole.

use super::common::TestApp;
use super::stream_support::bin;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// A wallet in `currency`, funded with `amount` (none when 0) through the provider `test`.
async fn wallet(app: &TestApp, id: &str, currency: &str, amount: i64) {
    app.create_account(id, currency, "wallet").await;
    if amount > 0 {
        let body = json!({"id": Uuid::new_v4(), "account": id, "amount": amount,
                          "currency": currency, "provider": "test"});
        let r = app.post("/v1/payments", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
}

fn eur_to_usd(id: Uuid, amount: i64) -> Value {
    json!({"id": id, "from": "anna-eur", "to": "anna-dollars", "amount": amount,
           "currency": "EUR", "counter_currency": "USD", "rate": "1.0842"})
}

async fn verify_clean(app: &TestApp) {
    let output = tokio::process::Command::new(bin())
        .args(["verify", "--database-url", &app.database_url])
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "verify: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn an_exchange_moves_money_across_currencies_through_the_fx_accounts() {
    let app = TestApp::new().await;
    wallet(&app, "anna-eur", "EUR", 50_000).await;
    wallet(&app, "anna-dollars", "USD", 0).await;
    let id = Uuid::new_v4();
    let r = app.post("/v1/exchanges", &eur_to_usd(id, 10_000)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["kind"], "exchange");
    assert_eq!(r.body["currency"], "EUR");
    let legs: Vec<(&str, i64, &str)> = r.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["account"].as_str().unwrap(),
                l["amount"].as_i64().unwrap(),
                l["currency"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        legs,
        [
            ("anna-eur", -10_000, "EUR"),
            ("fx:EUR", 10_000, "EUR"),
            ("fx:USD", -10_842, "USD"),
            ("anna-dollars", 10_842, "USD"),
        ]
    );
    assert_eq!(
        r.body["exchange"],
        json!({"rate": "1.0842", "amount": 10_000, "amount_decimal": "100.00",
               "counter_currency": "USD", "counter_amount": 10_842,
               "counter_amount_decimal": "108.42"})
    );
    let balances = app
        .posted_balances(&["anna-eur", "anna-dollars", "fx:EUR", "fx:USD"])
        .await;
    let expected = [
        ("anna-eur", 40_000),
        ("anna-dollars", 10_842),
        ("fx:EUR", 10_000),
        ("fx:USD", -10_842),
    ];
    assert_eq!(balances, expected.map(|(a, b)| (a.to_owned(), b)).into());
    // Read back, replayed, and the wallet's entries: each in its own currency.
    let read = app.get(&format!("/v1/transactions/{id}")).await;
    assert_eq!(read.body, r.body, "{}", read.text);
    let again = app.post("/v1/exchanges", &eur_to_usd(id, 10_000)).await;
    assert_eq!((again.status, again.replayed()), (StatusCode::OK, true));
    assert_eq!(again.body, r.body);
    let entries = app.get("/v1/accounts/anna-dollars/entries").await;
    assert_eq!(
        entries.body["data"][0]["currency"], "USD",
        "{}",
        entries.text
    );
    assert_eq!(entries.body["data"][0]["balance_after_decimal"], "108.42");
    // The same id with other terms is another request.
    let mut other = eur_to_usd(id, 10_000);
    other["rate"] = json!("1.09");
    let r = app.post("/v1/exchanges", &other).await;
    assert_eq!(r.code(), "idempotency_mismatch", "{}", r.text);
    verify_clean(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn the_rate_or_the_counter_amount_decides_the_other() {
    let app = TestApp::new().await;
    wallet(&app, "anna-eur", "EUR", 50_000).await;
    wallet(&app, "ken-jpy", "JPY", 0).await;
    // 1.00 EUR at 161.237 yen: 161.237 yen, rounded half up to 161.
    let body = json!({"from": "anna-eur", "to": "ken-jpy", "amount": 100, "currency": "EUR",
                      "counter_currency": "JPY", "rate": "161.237", "id": Uuid::new_v4()});
    let r = app.post("/v1/exchanges", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["exchange"]["counter_amount"], 161);
    assert_eq!(r.body["exchange"]["counter_amount_decimal"], "161");
    // Given the rate and the counter amount rounded the other way: accepted as given.
    let mut down = body.clone();
    (down["id"], down["counter_amount"]) = (json!(Uuid::new_v4()), json!(162));
    let r = app.post("/v1/exchanges", &down).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // The counter amount alone: the rate is what the two amounts imply.
    let mut counter_only = body.clone();
    counter_only.as_object_mut().unwrap().remove("rate");
    (counter_only["id"], counter_only["counter_amount"]) = (json!(Uuid::new_v4()), json!(16_050));
    counter_only["amount"] = json!(10_000);
    let r = app.post("/v1/exchanges", &counter_only).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.body["exchange"]["rate"], "160.5");
    assert_eq!(app.posted_balance("ken-jpy").await, 161 + 162 + 16_050);
    assert_eq!(app.posted_balance("anna-eur").await, 50_000 - 10_200);
    app.finish().await;
}

#[tokio::test]
async fn bad_terms_and_bad_accounts_are_refused_with_nothing_written() {
    let app = TestApp::new().await;
    wallet(&app, "anna-eur", "EUR", 50_000).await;
    wallet(&app, "anna-dollars", "USD", 0).await;
    wallet(&app, "bob-gbp", "GBP", 0).await;
    let before = app.row_counts().await;
    let with = |changes: Value| {
        let mut body = eur_to_usd(Uuid::new_v4(), 10_000);
        for (k, v) in changes.as_object().unwrap() {
            match v {
                Value::Null => body.as_object_mut().unwrap().remove(k),
                v => body.as_object_mut().unwrap().insert(k.clone(), v.clone()),
            };
        }
        body
    };
    let cases = [
        (
            json!({"counter_amount": 10_843}),
            "/counter_amount",
            "rate_mismatch",
        ),
        (
            json!({"counter_amount": 10_841}),
            "/counter_amount",
            "rate_mismatch",
        ),
        (json!({"rate": null}), "/rate", "required"),
        (
            json!({"counter_currency": "EUR", "to": "anna-eur"}),
            "/counter_currency",
            "same_currency",
        ),
        (json!({"rate": "1e3"}), "/rate", "rate"),
        (json!({"rate": "-1.08"}), "/rate", "rate"),
        (json!({"rate": "0"}), "/rate", "rate"),
        (json!({"rate": "1.0000000000000000001"}), "/rate", "rate"),
        (json!({"rate": 1.0842}), "/rate", "invalid_type"),
        (json!({"amount": 1, "rate": "0.001"}), "/amount", "range"),
        (
            json!({"counter_currency": "XXX"}),
            "/counter_currency",
            "currency",
        ),
        (json!({"to": "bob-gbp"}), "/to", "currency_mismatch"),
        (json!({"currency": "GBP"}), "/from", "currency_mismatch"),
        (json!({"to": "fx:USD"}), "/to", "duplicate_account"),
        (
            json!({"effective_at": "2999-01-01T00:00:00Z"}),
            "/effective_at",
            "range",
        ),
    ];
    for (changes, field, code) in cases {
        let r = app.post("/v1/exchanges", &with(changes.clone())).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{changes}: {}",
            r.text
        );
        let errors = r.body["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", r.text));
        assert!(
            errors
                .iter()
                .any(|e| e["code"] == code && e["field"].as_str().unwrap().starts_with(field)),
            "{changes}: wanted {code} at {field}: {}",
            r.text
        );
    }
    let r = app
        .post("/v1/exchanges", &with(json!({"to": "nobody"})))
        .await;
    assert_eq!(r.code(), "unknown_account", "{}", r.text);
    // A wallet named like an exchange account cannot be created.
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "fx:CHF", "currency": "CHF", "type": "wallet"}),
        )
        .await;
    assert_eq!(r.body["errors"][0]["code"], "reserved_id", "{}", r.text);
    assert_eq!(app.row_counts().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_refused_exchange_is_stored_and_its_retry_refused_alike() {
    let app = TestApp::new().await;
    wallet(&app, "anna-eur", "EUR", 5_000).await;
    wallet(&app, "anna-dollars", "USD", 0).await;
    let id = Uuid::new_v4();
    let r = app.post("/v1/exchanges", &eur_to_usd(id, 10_000)).await;
    assert_eq!(r.code(), "insufficient_funds", "{}", r.text);
    let again = app.post("/v1/exchanges", &eur_to_usd(id, 10_000)).await;
    assert_eq!(
        (again.code(), again.replayed()),
        ("insufficient_funds", true)
    );
    assert_eq!(again.body, r.body);
    // Nothing moved, and the exchange accounts exist only once money went through them.
    let missing = app.get("/v1/accounts/fx:USD").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
    assert_eq!(app.posted_balance("anna-eur").await, 5_000);
    app.finish().await;
}

#[tokio::test]
async fn an_exchange_is_held_captured_voided_and_reversed_like_a_transfer() {
    let app = TestApp::new().await;
    wallet(&app, "anna-eur", "EUR", 50_000).await;
    wallet(&app, "anna-dollars", "USD", 0).await;
    let held = Uuid::new_v4();
    let mut hold = eur_to_usd(held, 10_000);
    hold["status"] = json!("pending");
    let r = app.post("/v1/exchanges", &hold).await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (StatusCode::CREATED, Some("pending")),
        "{}",
        r.text
    );
    let (eur, usd) = (
        app.balances("anna-eur").await,
        app.balances("anna-dollars").await,
    );
    assert_eq!((eur.pending_out, eur.available), (10_000, 40_000));
    assert_eq!((usd.pending_in, usd.posted), (10_842, 0));
    // Captured whole, like every hold of more than two legs.
    let partial = app
        .post(
            &format!("/v1/transactions/{held}/post"),
            &json!({"amount": 5}),
        )
        .await;
    assert_eq!(
        partial.body["errors"][0]["code"], "not_applicable",
        "{}",
        partial.text
    );
    let captured = app
        .post(&format!("/v1/transactions/{held}/post"), &json!({}))
        .await;
    assert_eq!(captured.status, StatusCode::OK, "{}", captured.text);
    assert_eq!(captured.body["exchange"]["counter_amount"], 10_842);
    assert_eq!(captured.body["entries"][3]["currency"], "USD");
    let read = app.get(&format!("/v1/transactions/{held}")).await;
    assert_eq!(read.body, captured.body);
    assert_eq!(app.balances("anna-dollars").await.posted, 10_842);
    // A second hold, released: nothing moves.
    let voided = Uuid::new_v4();
    let mut hold = eur_to_usd(voided, 2_000);
    hold["status"] = json!("pending");
    assert_eq!(
        app.post("/v1/exchanges", &hold).await.status,
        StatusCode::CREATED
    );
    let r = app
        .post(&format!("/v1/transactions/{voided}/void"), &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // The reversal gives both sides back, at the same rate, once.
    let reversal = app
        .post(
            &format!("/v1/transactions/{held}/reverse"),
            &json!({"id": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(reversal.status, StatusCode::CREATED, "{}", reversal.text);
    assert_eq!(reversal.body["exchange"]["rate"], "1.0842");
    assert_eq!(reversal.body["entries"][3]["amount"], -10_842);
    let balances = app
        .posted_balances(&["anna-eur", "anna-dollars", "fx:EUR", "fx:USD"])
        .await;
    let expected = [
        ("anna-eur", 50_000),
        ("anna-dollars", 0),
        ("fx:EUR", 0),
        ("fx:USD", 0),
    ];
    assert_eq!(balances, expected.map(|(a, b)| (a.to_owned(), b)).into());
    let twice = app
        .post(
            &format!("/v1/transactions/{held}/reverse"),
            &json!({"id": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(twice.code(), "reversal_exceeds_original", "{}", twice.text);
    verify_clean(&app).await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_exchanges_from_one_wallet_never_overdraw_it() {
    let app = Arc::new(TestApp::new().await);
    wallet(&app, "anna-eur", "EUR", 1_000).await;
    wallet(&app, "anna-dollars", "USD", 0).await;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let r = app
                    .post("/v1/exchanges", &eur_to_usd(Uuid::new_v4(), 300))
                    .await;
                (r.status, r.body)
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            _ => assert_eq!(body["code"], "insufficient_funds", "{body}"),
        }
    }
    assert_eq!(created, 3);
    // 3.00 EUR at 1.0842 is 3.2526 USD: 325 cents each.
    let balances = app
        .posted_balances(&["anna-eur", "anna-dollars", "fx:EUR", "fx:USD"])
        .await;
    let expected = [
        ("anna-eur", 100),
        ("anna-dollars", 975),
        ("fx:EUR", 900),
        ("fx:USD", -975),
    ];
    assert_eq!(balances, expected.map(|(a, b)| (a.to_owned(), b)).into());
    verify_clean(&app).await;
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}
