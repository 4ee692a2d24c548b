//! `GET /v1/stats/volumes`: posted transactions (how many, for how much) and refusals per
//! bucket and currency, the same whether a minute is read live or from the rollup.

use super::common::{TestApp, assert_problem};
use serde_json::{Value, json};
use uuid::Uuid;
use wallet_ledger::stats;

/// (posted_count, posted_amount, refused_count) of `currency` over every bucket of a page.
fn totals(body: &Value, currency: &str) -> (i64, i64, i64) {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["currency"] == currency)
        .fold((0, 0, 0), |(c, a, r), b| {
            (
                c + b["posted_count"].as_i64().unwrap(),
                a + b["posted_amount"].as_i64().unwrap(),
                r + b["refused_count"].as_i64().unwrap(),
            )
        })
}

/// A transaction written straight into the table `minutes_ago` (posted, or refused), as an
/// older ledger holds them: final, so the rollup takes it.
async fn backdated(app: &TestApp, minutes_ago: i32, amount: i64, refused: bool) {
    let legs = json!([{"account": "va", "amount": -amount}, {"account": "vb", "amount": amount}]);
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, refusal_code,
                                   creation_request, creation_outcome, creation_response,
                                   created_at, posted_at, updated_at)
         select $1, 'transfer', case when $4 then 'rejected' else 'posted' end, 'SAR', $2,
                '{va,vb}', case when $4 then 'insufficient_funds' end, '{}',
                case when $4 then 'refused' else 'created' end, case when $4 then null else '{}' end,
                t, case when $4 then null else t end, t
         from (select now() - make_interval(mins => $3) as t) at",
    )
    .bind(Uuid::new_v4())
    .bind(legs)
    .bind(minutes_ago)
    .bind(refused)
    .execute(&app.pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn volumes_count_posted_money_and_refusals_per_bucket_and_currency() {
    let app = TestApp::new().await;
    for wallet in ["a", "b"] {
        app.create_wallet(wallet).await;
    }
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "u", "currency": "USD", "type": "wallet"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    app.fund("a", 10_000).await;
    assert_eq!(
        app.transfer(Uuid::new_v4(), "a", "b", 3_000).await.status,
        201
    );
    assert_eq!(
        app.transfer(Uuid::new_v4(), "a", "b", 999_999).await.status,
        422,
        "refused"
    );
    let (captured, open) = (Uuid::new_v4(), Uuid::new_v4());
    for (hold, amount) in [(captured, 2_000), (open, 500)] {
        let body =
            json!({"id": hold, "from": "a", "to": "b", "amount": amount, "status": "pending"});
        assert_eq!(app.post("/v1/transfers", &body).await.status, 201);
    }
    let r = app
        .post(
            &format!("/v1/transactions/{captured}/post"),
            &json!({"amount": 1_500}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.post("/v1/payments", &json!({"id": Uuid::new_v4(), "account": "u", "amount": 700, "currency": "USD", "provider": "p"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let exchange = json!({"id": Uuid::new_v4(), "from": "a", "to": "u", "amount": 1_000,
                          "currency": "SAR", "counter_currency": "USD", "rate": "0.2667"});
    let r = app.post("/v1/exchanges", &exchange).await;
    assert_eq!(r.status, 201, "{}", r.text);

    // Older, final minutes (written before any read rolled their minutes up, as a real
    // writer's always are): the first read rolls them up, and later reads answer them the
    // same from the rollup.
    backdated(&app, 30, 2_500, false).await;
    backdated(&app, 40, 9_999, true).await;
    backdated(&app, 2 * 24 * 60, 1_000_000, false).await;
    // Read live (nothing rolled up yet), then through the API, which rolls up first.
    let live = {
        let mut conn = app.pool.acquire().await.unwrap();
        let to = chrono::Utc::now();
        let minutes = stats::store::minutes(&mut conn, to - chrono::TimeDelta::hours(2), to)
            .await
            .unwrap();
        stats::into_buckets(&minutes, stats::Bucket::Hour)
            .into_iter()
            .filter(|((_, currency), _)| currency == "SAR")
            .fold((0, 0, 0), |(c, a, r), (_, t)| {
                (c + t.posted_count, a + t.posted_amount, r + t.refused_count)
            })
    };
    // The payment, the transfer, the capture (at what it took), the exchange (in the currency
    // it debits) and the older transfer; the open hold is not money moved yet; two refusals.
    let now = app.get("/v1/stats/volumes").await;
    assert_eq!(now.status, 200, "{}", now.text);
    assert_eq!(
        (now.body["window"].as_str(), now.body["bucket"].as_str()),
        (Some("hour"), Some("minute"))
    );
    assert_eq!(totals(&now.body, "SAR"), (5, 18_000, 2), "{}", now.text);
    assert_eq!(live, (5, 18_000, 2), "read live, the same");
    assert_eq!(totals(&now.body, "USD"), (1, 700, 0), "{}", now.text);
    let usd = now.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["currency"] == "USD")
        .unwrap();
    assert_eq!(usd["posted_amount_decimal"], "7.00");

    let first = app.get("/v1/stats/volumes?window=hour&bucket=minute").await;
    assert_eq!(totals(&first.body, "SAR"), (5, 18_000, 2), "{}", first.text);
    let rolled: i64 = sqlx::query_scalar("select count(*) from volume_minutes where currency = 'SAR' and minute < now() - interval '20 minutes'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(rolled, 2, "the two final minutes are in the rollup");
    let again = app.get("/v1/stats/volumes").await;
    assert_eq!(
        again.body["data"], first.body["data"],
        "rollup and live agree"
    );
    let minute = first.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["posted_amount"] == 2_500)
        .unwrap();
    assert_eq!(minute["posted_count"], 1, "{minute}");

    // A day in hours: the same money (the transaction of two days ago is outside it).
    let day = app.get("/v1/stats/volumes?window=day").await;
    assert_eq!(day.body["bucket"], "hour");
    assert_eq!(totals(&day.body, "SAR"), (5, 18_000, 2), "{}", day.text);
    for bucket in day.body["data"].as_array().unwrap() {
        assert!(
            bucket["start"].as_str().unwrap().ends_with(":00:00Z"),
            "{bucket}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn bad_volume_queries_answer_400() {
    let app = TestApp::new().await;
    for query in [
        "window=week",
        "bucket=second",
        "window=",
        "window=Hour",
        "span=day",
    ] {
        let r = app.get(&format!("/v1/stats/volumes?{query}")).await;
        assert_problem(&r, 400, "invalid_query", query);
    }
    app.finish().await;
}
