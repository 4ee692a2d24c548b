//! Balances at past moments (`GET /v1/accounts/{id}?as_of=`) against a recomputation from the
//! entries themselves.

use super::common::Rng;
use super::common::{TestApp, assert_problem};
use axum::http::StatusCode;
use chrono::{DateTime, FixedOffset, SecondsFormat, TimeDelta, Utc};
use serde_json::json;
use std::collections::BTreeSet;
use uuid::Uuid;

/// RFC 3339 with microseconds, in UTC (`Z`) or at +03:00 with the `+` percent-encoded (a bare
/// `+` in a query string is a space).
fn as_of_param(t: DateTime<Utc>, riyadh: bool) -> String {
    if riyadh {
        let offset = FixedOffset::east_opt(3 * 3600).unwrap();
        t.with_timezone(&offset)
            .to_rfc3339_opts(SecondsFormat::Micros, false)
            .replace('+', "%2B")
    } else {
        t.to_rfc3339_opts(SecondsFormat::Micros, true)
    }
}

#[tokio::test]
async fn as_of_balances_agree_with_a_recomputation_from_entries_at_a_dozen_moments() {
    let app = TestApp::new().await;
    let wallets = ["h1", "h2", "h3", "h4"];
    for w in wallets {
        app.create_wallet(w).await;
    }
    let mut rng = Rng(0x0000_a50f_2026);

    // ~40 operations: top-ups, transfers (some refused), a three-leg transaction, a batch.
    let mut refused = 0;
    for n in 0..40 {
        let a = wallets[rng.below(4) as usize];
        match n % 10 {
            0 | 5 => {
                app.fund(a, 100 + rng.below(900) as i64).await;
            }
            7 => {
                let others: Vec<&str> = wallets.iter().copied().filter(|w| *w != a).collect();
                let body = json!({"id": Uuid::new_v4(), "entries": [
                    {"account": a, "amount": -30}, {"account": others[0], "amount": 10},
                    {"account": others[1], "amount": 20}]});
                let r = app.post("/v1/transactions", &body).await;
                if r.status != 201 {
                    assert_problem(&r, 422, "insufficient_funds", "a refused posting");
                }
                refused += usize::from(r.status != 201);
            }
            9 => {
                let items: Vec<_> = (0..3)
                    .map(|k| {
                        let from = wallets[(n + k) % 4];
                        let to = wallets[(n + k + 1) % 4];
                        let amount = 1 + rng.below(400) as i64;
                        json!({"id": Uuid::new_v4(), "entries": [
                            {"account": from, "amount": -amount}, {"account": to, "amount": amount}]})
                    })
                    .collect();
                let r = app
                    .post(
                        "/v1/transactions/batch",
                        &json!({"mode": "independent", "items": items}),
                    )
                    .await;
                assert_eq!(r.status, StatusCode::OK, "{}", r.text);
                for result in r.body["results"].as_array().unwrap() {
                    assert!(
                        result["status"] == 201 || result["status"] == 422,
                        "{result}"
                    );
                    refused += usize::from(result["status"] != 201);
                }
            }
            _ => {
                let b = wallets[(wallets.iter().position(|w| *w == a).unwrap()
                    + 1
                    + rng.below(3) as usize)
                    % 4];
                let r = app
                    .transfer(Uuid::new_v4(), a, b, 1 + rng.below(600) as i64)
                    .await;
                if r.status != 201 {
                    assert_problem(&r, 422, "insufficient_funds", "a refused posting");
                }
                refused += usize::from(r.status != 201);
            }
        }
    }
    assert!(refused > 0, "some operations were refused");

    let rows: Vec<(String, i64, DateTime<Utc>)> =
        sqlx::query_as("select account_id, amount, ledger_time from entries")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert!(rows.len() > 40, "{} entries", rows.len());
    let accounts: BTreeSet<String> = rows.iter().map(|r| r.0.clone()).collect();
    assert!(accounts.contains("clearing:test:SAR"));
    let times: Vec<DateTime<Utc>> = rows
        .iter()
        .map(|r| r.2)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(times.len() > 10, "{} distinct ledger times", times.len());

    // A dozen moments: before everything, after everything, five ledger times exactly (the
    // bound is inclusive), five midpoints between consecutive ledger times.
    let first = times[0];
    let last = *times.last().unwrap();
    let mut moments = vec![
        first - TimeDelta::milliseconds(1),
        last + TimeDelta::seconds(1),
    ];
    for _ in 0..5 {
        moments.push(times[rng.below(times.len() as u64) as usize]);
    }
    for _ in 0..5 {
        let k = rng.below(times.len() as u64 - 1) as usize;
        let mid = times[k] + (times[k + 1] - times[k]) / 2;
        moments.push(DateTime::from_timestamp_micros(mid.timestamp_micros()).unwrap());
    }

    for (m, moment) in moments.iter().enumerate() {
        for account in &accounts {
            let expected: i64 = rows
                .iter()
                .filter(|r| &r.0 == account && r.2 <= *moment)
                .map(|r| r.1)
                .sum();
            let path = format!(
                "/v1/accounts/{account}?as_of={}",
                as_of_param(*moment, m % 2 == 1)
            );
            let r = app.get_final(&path, (*moment).min(last)).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
            assert_eq!(
                r.body["balances"]["posted"],
                json!(expected),
                "{account} as of {moment:?} (moment {m}): {}",
                r.text
            );
            // A moment not final yet (`last + 1 s` may still be ahead) is answered at the
            // horizon, and the echo says so; a past one, with nothing in flight, is echoed.
            let echoed: DateTime<Utc> = r.body["as_of"].as_str().unwrap().parse().unwrap();
            if *moment <= last {
                assert_eq!(echoed, *moment, "{path}: as_of echoed");
            } else {
                assert!(
                    echoed <= *moment && echoed >= last,
                    "{path}: as_of {echoed}"
                );
            }
        }
    }
    // Before everything every balance is zero; after everything it is the current one.
    for account in &accounts {
        let now = app.posted_balance(account).await;
        let sum: i64 = rows.iter().filter(|r| &r.0 == account).map(|r| r.1).sum();
        assert_eq!(
            now, sum,
            "{account}: the current balance is the sum of its entries"
        );
        let path = format!(
            "/v1/accounts/{account}?as_of={}",
            as_of_param(last + TimeDelta::seconds(1), true)
        );
        let r = app.get_final(&path, last).await;
        assert_eq!(
            r.body["balances"]["posted"],
            json!(now),
            "{path}: {}",
            r.text
        );
        let path = format!(
            "/v1/accounts/{account}?as_of={}",
            as_of_param(first - TimeDelta::microseconds(1), false)
        );
        let r = app.get(&path).await;
        assert_eq!(r.body["balances"]["posted"], 0, "{path}: {}", r.text);
    }
    app.finish().await;
}
