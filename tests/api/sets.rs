//! Account sets: created once per id, members (wallets and nested sets) added and removed
//! idempotently, balances that are the sums of the wallets counted in them (each once), now
//! and at a past moment; refusals for cycles, unknown members, system accounts and mixed
//! currencies; exact totals while transfers, holds and membership changes race; `verify`
//! finding totals changed behind the service's back. Wallets `vel-a`/`vel-b` and
//! `mon-a`/`mon-b` sit on different Citus workers.

use super::common::{TestApp, assert_problem};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;
use wallet_ledger::ledger::checkpoints;
use wallet_ledger::reconcile::invariants::{self, Check};

async fn create_set(app: &TestApp, id: &str) {
    let r = app
        .post("/v1/account-sets", &json!({"id": id, "currency": "SAR"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

async fn add(app: &TestApp, set: &str, kind: &str, id: &str) -> super::common::TestResponse {
    app.post(
        &format!("/v1/account-sets/{set}/members"),
        &json!({"type": kind, "id": id}),
    )
    .await
}

async fn remove(app: &TestApp, set: &str, member: &str) -> super::common::TestResponse {
    let path = format!("/v1/account-sets/{set}/members/{member}");
    app.raw(Method::DELETE, &path, &[], Body::empty()).await
}

/// `(posted, pending_in, pending_out, available)` of a set.
async fn totals(app: &TestApp, set: &str) -> (i64, i64, i64, i64) {
    let r = app.get(&format!("/v1/account-sets/{set}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let b = &r.body["balances"];
    let n = |f: &str| b[f].as_i64().unwrap();
    (
        n("posted"),
        n("pending_in"),
        n("pending_out"),
        n("available"),
    )
}

async fn checkpoint(app: &TestApp) {
    checkpoints::advance(&mut crate::backend::db(
        &mut app.pool.acquire().await.unwrap(),
    ))
    .await
    .unwrap();
}

async fn set_findings(app: &TestApp) -> Vec<invariants::Finding> {
    invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        chrono::TimeDelta::seconds(60),
    )
    .await
    .unwrap()
    .into_iter()
    .filter(|f| f.check == Check::SetTotals)
    .collect()
}

async fn hold(app: &TestApp, from: &str, to: &str, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let expires = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": id, "from": from, "to": to, "amount": amount, "status": "pending", "expires_at": expires}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    id
}

/// `team` holds vel-a and vel-b; `org` holds team, mon-a, and vel-a again (counted once).
async fn team_and_org(app: &TestApp) {
    for wallet in ["vel-a", "vel-b", "mon-a", "mon-b"] {
        app.create_wallet(wallet).await;
    }
    app.fund("vel-a", 1_000).await;
    app.fund("vel-b", 200).await;
    app.fund("mon-a", 30).await;
    create_set(app, "team").await;
    create_set(app, "org").await;
    for (set, kind, id) in [
        ("team", "account", "vel-a"),
        ("team", "account", "vel-b"),
        ("org", "set", "team"),
        ("org", "account", "mon-a"),
        ("org", "account", "vel-a"),
    ] {
        let r = add(app, set, kind, id).await;
        assert_eq!(r.status, StatusCode::CREATED, "{set} {id}: {}", r.text);
    }
}

#[tokio::test]
async fn a_set_sums_its_wallets_and_nested_sets_each_once() {
    let app = TestApp::new().await;
    team_and_org(&app).await;
    assert_eq!(totals(&app, "team").await, (1_200, 0, 0, 1_200));
    assert_eq!(totals(&app, "org").await, (1_230, 0, 0, 1_230));
    // Adding again changes nothing and says so.
    let again = add(&app, "team", "account", "vel-a").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["reference"], "account:vel-a");

    // Money moving inside a set leaves its total; leaving it lowers it.
    app.transfer(Uuid::new_v4(), "vel-a", "vel-b", 100).await;
    assert_eq!(totals(&app, "team").await.0, 1_200);
    app.transfer(Uuid::new_v4(), "vel-b", "mon-b", 50).await;
    assert_eq!(totals(&app, "team").await.0, 1_150);
    assert_eq!(totals(&app, "org").await.0, 1_180);
    checkpoint(&app).await;
    app.transfer(Uuid::new_v4(), "mon-b", "mon-a", 20).await;
    assert_eq!(totals(&app, "org").await.0, 1_200);

    // Holds count as pending until they are captured or voided.
    let voided = hold(&app, "vel-a", "mon-b", 300).await;
    let captured = hold(&app, "mon-b", "vel-b", 25).await;
    assert_eq!(totals(&app, "team").await, (1_150, 25, 300, 850));
    assert_eq!(totals(&app, "org").await, (1_200, 25, 300, 900));
    app.post_empty(&format!("/v1/transactions/{voided}/void"))
        .await;
    app.post_empty(&format!("/v1/transactions/{captured}/post"))
        .await;
    assert_eq!(totals(&app, "team").await, (1_175, 0, 0, 1_175));

    // A wallet that leaves takes its balance with it; one that comes back brings it again.
    let gone = remove(&app, "team", "account:vel-b").await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{}", gone.text);
    let repeat = remove(&app, "team", "account:vel-b").await;
    assert_eq!(repeat.status, StatusCode::NO_CONTENT, "{}", repeat.text);
    let vel_a = app.posted_balance("vel-a").await;
    let mon_a = app.posted_balance("mon-a").await;
    assert_eq!(totals(&app, "team").await.0, vel_a);
    assert_eq!(totals(&app, "org").await.0, vel_a + mon_a);
    // vel-a stays in org directly after team leaves it.
    assert_eq!(
        remove(&app, "org", "set:team").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(totals(&app, "org").await.0, vel_a + mon_a);
    add(&app, "org", "set", "team").await;
    add(&app, "team", "account", "vel-b").await;
    let vel_b = app.posted_balance("vel-b").await;
    assert_eq!(totals(&app, "org").await.0, vel_a + mon_a + vel_b);

    let members = app.get("/v1/account-sets/org/members?limit=2").await;
    let refs: Vec<&str> = members.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["reference"].as_str().unwrap())
        .collect();
    assert_eq!(refs, ["account:mon-a", "account:vel-a"], "{}", members.text);
    let cursor = members.body["next_cursor"].as_str().unwrap();
    let rest = app
        .get(&format!("/v1/account-sets/org/members?cursor={cursor}"))
        .await;
    assert_eq!(
        rest.body["data"][0]["reference"], "set:team",
        "{}",
        rest.text
    );
    assert_eq!(rest.body["next_cursor"], Value::Null);
    assert_eq!(set_findings(&app).await, vec![]);
    app.finish().await;
}

#[tokio::test]
async fn as_of_reads_what_the_set_held_then() {
    let app = TestApp::new().await;
    team_and_org(&app).await;
    let before = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    app.transfer(Uuid::new_v4(), "vel-a", "mon-b", 400).await;
    let r = app
        .get_final(
            &format!(
                "/v1/account-sets/team?as_of={}",
                urlencode(&before.to_rfc3339())
            ),
            before,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["balances"]["posted"], 1_200, "{}", r.text);
    assert!(r.body["as_of"].is_string());
    assert_eq!(totals(&app, "team").await.0, 800);
    let bad = app.get("/v1/account-sets/team?time=effective").await;
    assert_problem(&bad, 400, "invalid_query", "time without as_of");
    app.finish().await;
}

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}

#[tokio::test]
async fn bad_sets_and_members_are_refused_and_write_nothing() {
    let app = TestApp::new().await;
    team_and_org(&app).await;
    app.create_account("usd-w", "USD", "wallet").await;
    app.create_account("ops:fees", "SAR", "system").await;
    create_set(&app, "usd-set").await; // in SAR: the create below shows the mismatch
    let r = app
        .post(
            "/v1/account-sets",
            &json!({"id": "usd-set", "currency": "USD"}),
        )
        .await;
    assert_problem(&r, 422, "idempotency_mismatch", "same id, another currency");
    let r = app
        .post("/v1/account-sets", &json!({"id": "x", "currency": "XXQ"}))
        .await;
    assert_problem(&r, 422, "validation_failed", "unknown currency");

    let cases = [
        ("team", "set", "org", 409, "set_cycle"),
        ("team", "set", "team", 409, "set_cycle"),
        ("team", "account", "nobody", 422, "validation_failed"),
        ("team", "set", "no-such-set", 422, "validation_failed"),
        ("team", "account", "usd-w", 422, "validation_failed"),
        ("team", "account", "ops:fees", 422, "validation_failed"),
        ("no-such-set", "account", "vel-a", 404, "not_found"),
    ];
    for (set, kind, id, status, code) in cases {
        let r = add(&app, set, kind, id).await;
        assert_problem(&r, status, code, &format!("{set} <- {kind}:{id}"));
    }
    for (id, code) in [
        ("nobody", "unknown_member"),
        ("usd-w", "currency_mismatch"),
        ("ops:fees", "not_a_wallet"),
    ] {
        let r = add(&app, "team", "account", id).await;
        assert_eq!(r.body["errors"][0]["code"], code, "{}", r.text);
    }
    let r = add(&app, "team", "wallet", "vel-a").await;
    assert_problem(&r, 422, "validation_failed", "unknown member type");
    assert_problem(
        &remove(&app, "team", "vel-a").await,
        404,
        "not_found",
        "a member named without its type",
    );
    assert_problem(
        &remove(&app, "no-such-set", "account:vel-a").await,
        404,
        "not_found",
        "an unknown set",
    );
    assert_problem(
        &app.get("/v1/account-sets/team/members?limit=0").await,
        400,
        "invalid_query",
        "limit 0",
    );
    // Nothing was written: the same members, the same totals.
    let members = app.get("/v1/account-sets/team/members").await;
    assert_eq!(members.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(totals(&app, "org").await.0, 1_230);
    assert_eq!(set_findings(&app).await, vec![]);
    app.finish().await;
}

/// Transfers, holds, voids and checkpoints race with wallets and sets joining and leaving:
/// every set's total still equals the sum of the wallets counted in it, as `verify` and the
/// API both see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn totals_stay_exact_while_money_and_members_move_together() {
    let app = Arc::new(TestApp::unlimited().await);
    let wallets: Vec<String> = ["vel-a", "vel-b", "mon-a", "mon-b", "w-5", "w-6"]
        .map(String::from)
        .to_vec();
    for w in &wallets {
        app.create_wallet(w).await;
        app.fund(w, 10_000).await;
    }
    for set in ["left", "right", "all"] {
        create_set(&app, set).await;
    }
    for (set, kind, id) in [
        ("left", "account", "vel-a"),
        ("left", "account", "mon-a"),
        ("right", "account", "vel-b"),
        ("all", "set", "left"),
    ] {
        add(&app, set, kind, id).await;
    }
    let movers: Vec<_> = (0..4u64)
        .map(|seed| {
            let (app, wallets) = (app.clone(), wallets.clone());
            tokio::spawn(async move {
                let mut rng = super::common::Rng(seed + 1);
                for _ in 0..25 {
                    let (from, to) = rng.two_distinct(&wallets);
                    if rng.below(4) == 0 {
                        let id = hold(&app, from, to, 1 + rng.below(50) as i64).await;
                        let action = if rng.below(2) == 0 { "void" } else { "post" };
                        app.post_empty(&format!("/v1/transactions/{id}/{action}"))
                            .await;
                    } else {
                        app.transfer(Uuid::new_v4(), from, to, 1 + rng.below(90) as i64)
                            .await;
                    }
                }
            })
        })
        .collect();
    let changes = [
        ("all", "account", "mon-b", true),
        ("right", "account", "w-5", true),
        ("all", "set", "right", true),
        ("left", "account", "mon-a", false),
        ("all", "account", "vel-a", true),
        ("all", "set", "left", false),
        ("right", "account", "w-6", true),
        ("all", "set", "left", true),
        ("right", "account", "vel-b", false),
    ];
    for (set, kind, id, join) in changes {
        let r = if join {
            add(&app, set, kind, id).await
        } else {
            remove(&app, set, &format!("{kind}:{id}")).await
        };
        assert!(r.status.is_success(), "{set} {kind}:{id}: {}", r.text);
        checkpoint(&app).await;
    }
    for mover in movers {
        mover.await.unwrap();
    }
    let balances = app.posted_balances(&wallets).await;
    let sum = |ids: &[&str]| ids.iter().map(|w| balances[*w]).sum::<i64>();
    assert_eq!(totals(&app, "left").await.0, sum(&["vel-a"]));
    assert_eq!(totals(&app, "right").await.0, sum(&["w-5", "w-6"]));
    assert_eq!(
        totals(&app, "all").await.0,
        sum(&["vel-a", "mon-b", "w-5", "w-6"])
    );
    assert_eq!(set_findings(&app).await, vec![]);
    Arc::try_unwrap(app)
        .ok()
        .expect("tasks finished")
        .finish()
        .await;
}

#[tokio::test]
async fn verify_names_a_set_whose_totals_were_changed_behind_the_services_back() {
    let app = TestApp::new().await;
    team_and_org(&app).await;
    // A checkpoint sums only what finished below the oldest running transaction of the whole
    // server (other tests' included), so it may take a few rounds to cover team's movements.
    let taken = super::common::poll(std::time::Duration::from_secs(60), || async {
        checkpoint(&app).await;
        sqlx::query("update account_set_checkpoints set posted = posted + 1 where set_id = 'team'")
            .execute(&app.pool)
            .await
            .unwrap()
            .rows_affected()
            .gt(&0)
            .then_some(())
    })
    .await;
    assert!(taken.is_some(), "no checkpoint of team was taken");
    sqlx::query("delete from account_set_closure where set_id = 'org' and account_id = 'mon-a'")
        .execute(&app.pool)
        .await
        .unwrap();
    let findings = set_findings(&app).await;
    let details: Vec<&str> = findings.iter().map(|f| f.detail.as_str()).collect();
    assert_eq!(findings.len(), 3, "{details:?}");
    assert!(details[0].contains("set org"), "{details:?}");
    assert_eq!(findings[0].account.as_deref(), Some("mon-a"));
    assert!(
        details.iter().any(|d| d.starts_with("set team:")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.starts_with("set org:")),
        "{details:?}"
    );
    app.finish().await;
}
