//! Wallet chains as hash chains (docs/verification.md): every wallet entry links to the one
//! before it, the entries trigger refuses a link that does not follow, and `verify`, which
//! recomputes every chain, names the entries that were changed, removed or moved behind the
//! service's back (as a superuser, with the immutability trigger disabled). Also in tests/citus.

use super::common::{TestApp, behind_the_guards};
use chrono::TimeDelta;
use std::collections::BTreeSet;
use uuid::Uuid;
use wallet_ledger::reconcile::invariants::{self, Check};

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");

/// `wallet` with five payments of 100 from the test provider: sequences 1 to 5.
async fn funded(app: &TestApp, wallet: &str) {
    app.create_wallet(wallet).await;
    for _ in 0..5 {
        app.fund(wallet, 100).await;
    }
}

async fn sql(app: &TestApp, statement: &str) {
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&app.pool)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// The transaction of `wallet`'s entry at `sequence`.
async fn transaction_at(app: &TestApp, wallet: &str, sequence: i64) -> Uuid {
    sqlx::query_scalar("select transaction_id from entries where account_id = $1 and sequence = $2")
        .bind(wallet)
        .bind(sequence)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// The entry ids of `wallet` at `sequences` (as stored now).
async fn entry_ids(app: &TestApp, wallet: &str, sequences: &[i64]) -> BTreeSet<i64> {
    let ids: Vec<i64> =
        sqlx::query_scalar("select id from entries where account_id = $1 and sequence = any($2)")
            .bind(wallet)
            .bind(sequences)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    ids.into_iter().collect()
}

/// The entries `verify` names as broken links, by account.
async fn broken_links(app: &TestApp) -> Vec<(String, i64)> {
    let findings = invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap();
    findings
        .into_iter()
        .filter(|f| f.check == Check::ChainLink)
        .map(|f| (f.account.unwrap(), f.entry.unwrap()))
        .collect()
}

fn of(found: &[(String, i64)], wallet: &str) -> BTreeSet<i64> {
    found
        .iter()
        .filter(|(account, _)| account == wallet)
        .map(|(_, entry)| *entry)
        .collect()
}

#[tokio::test]
async fn entries_changed_removed_or_moved_behind_the_guards_are_named_by_their_links() {
    let app = TestApp::new().await;
    for wallet in ["link-edited", "link-removed", "link-moved", "link-kept"] {
        funded(&app, wallet).await;
    }
    assert_eq!(
        broken_links(&app).await,
        [],
        "a ledger written by the service"
    );

    // Sequence 2 credited 101 instead of 100, every balance after it made to agree and the
    // provider's side adjusted, so that the sums and the running balances still hold.
    let edited = entry_ids(&app, "link-edited", &[2, 3, 4, 5]).await;
    let payment = transaction_at(&app, "link-edited", 2).await;
    behind_the_guards(
        &app.pool,
        &[
            format!(
                "update entries set amount = amount - 1
                 where account_id = 'clearing:test:SAR' and transaction_id = '{payment}'"
            ),
            "update entries set amount = amount + 1 where account_id = 'link-edited' and sequence = 2"
                .into(),
            "update entries set balance_after = balance_after + 1
             where account_id = 'link-edited' and sequence >= 2"
                .into(),
        ],
    )
    .await;
    // Sequence 3 removed with its transaction's other entry.
    let after_the_gap = entry_ids(&app, "link-removed", &[4]).await;
    let payment = transaction_at(&app, "link-removed", 3).await;
    behind_the_guards(
        &app.pool,
        &[format!(
            "delete from entries where account_id in ('link-removed', 'clearing:test:SAR')
               and transaction_id = '{payment}'"
        )],
    )
    .await;
    // Sequences 2 and 3 (both +100) swapped, their running balances with them, so that the
    // chain's sequence and balances still follow.
    let moved = entry_ids(&app, "link-moved", &[2, 3]).await;
    let after_the_move = entry_ids(&app, "link-moved", &[4]).await;
    behind_the_guards(
        &app.pool,
        &[
            "update entries set sequence = 1002 where account_id = 'link-moved' and sequence = 2"
                .into(),
            "update entries set sequence = 2, balance_after = 200
             where account_id = 'link-moved' and sequence = 3"
                .into(),
            "update entries set sequence = 3, balance_after = 300
             where account_id = 'link-moved' and sequence = 1002"
                .into(),
        ],
    )
    .await;

    let found = broken_links(&app).await;
    assert_eq!(
        of(&found, "link-edited"),
        edited,
        "each changed entry: {found:?}"
    );
    assert_eq!(
        of(&found, "link-removed"),
        after_the_gap,
        "the entry after the removed one: {found:?}"
    );
    let mut expected = moved.clone();
    expected.extend(&after_the_move);
    assert_eq!(
        of(&found, "link-moved"),
        expected,
        "both moved entries and the one after their new places: {found:?}"
    );
    assert_eq!(of(&found, "link-kept"), BTreeSet::new(), "{found:?}");

    let out = tokio::process::Command::new(BIN)
        .args(["verify", "--database-url", &app.database_url])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let edited_entry = edited.first().unwrap();
    assert!(
        stdout.contains("chain_link")
            && stdout.contains(&format!("account link-edited, entry {edited_entry}")),
        "{stdout}"
    );
    app.finish().await;
}

/// A posted SAR transaction row without entries, written by hand.
async fn bare_transaction(app: &TestApp) -> Uuid {
    let id = Uuid::new_v4();
    sql(
        app,
        &format!(
            "insert into transactions (id, kind, status, currency, legs, account_ids, creation_request,
                                       creation_outcome, creation_response, created_at, posted_at, updated_at)
             values ('{id}', 'transaction', 'posted', 'SAR', '[]', '{{}}', '{{\"kind\": \"transaction\"}}',
                     'created', '{{\"status\": \"posted\"}}', now(), now(), now())"
        ),
    )
    .await;
    id
}

/// The link of `wallet`'s entry at `sequence`.
async fn link_at(app: &TestApp, wallet: &str, sequence: i64) -> Option<Vec<u8>> {
    sqlx::query_scalar("select chain_hash from entries where account_id = $1 and sequence = $2")
        .bind(wallet)
        .bind(sequence)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Sequence 6 of `link-hand` (+5, after five payments of 100), linked to `previous`, in one
/// statement with the provider's side, at a ledger time taken first (Citus evaluates no
/// function of an insert's values on the shards).
async fn append(app: &TestApp, previous: Option<Vec<u8>>) -> Result<(), sqlx::Error> {
    let id = bare_transaction(app).await;
    let (at, link): (chrono::DateTime<chrono::Utc>, Vec<u8>) = sqlx::query_as(
        "select now(), entry_chain_hash($1, $2, 'link-hand', 'SAR', 5, 6, 505, now(), null)",
    )
    .bind(previous)
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "insert into entries (transaction_id, account_id, currency, amount, sequence, balance_after,
                              ledger_time, chain_hash)
         values ($1, 'link-hand', 'SAR', 5, 6, 505, $2, $3),
                ($1, 'clearing:test:SAR', 'SAR', -5, null, null, $2, null)",
    )
    .bind(id)
    .bind(at)
    .bind(link)
    .execute(&app.pool)
    .await
    .map(|_| ())
}

#[tokio::test]
async fn an_entry_whose_link_does_not_follow_is_refused_by_the_schema() {
    let app = TestApp::new().await;
    funded(&app, "link-hand").await;
    funded(&app, "link-other").await;
    let head = link_at(&app, "link-hand", 5).await;
    for (what, previous) in [
        ("no predecessor", None),
        (
            "the wrong predecessor",
            link_at(&app, "link-other", 5).await,
        ),
        (
            "a predecessor two back",
            link_at(&app, "link-hand", 4).await,
        ),
    ] {
        let refused = append(&app, previous).await.unwrap_err();
        assert!(
            refused.to_string().contains("broken wallet chain"),
            "{what}: {refused}"
        );
    }
    append(&app, head)
        .await
        .expect("an entry linked to its wallet's last one is accepted");
    assert_eq!(broken_links(&app).await, []);
    app.finish().await;
}

#[tokio::test]
async fn the_entries_api_shows_each_link_and_an_auditor_recomputes_it_from_the_view() {
    let app = TestApp::new().await;
    funded(&app, "link-shown").await;
    app.create_wallet("link-peer").await;
    app.transfer(Uuid::new_v4(), "link-shown", "link-peer", 30)
        .await;
    let page = app.get("/v1/accounts/link-shown/entries?limit=10").await;
    assert_eq!(page.status, 200, "{}", page.text);
    let mut entries = page.body["data"].as_array().unwrap().clone();
    entries.reverse(); // oldest first, as the chain runs
    assert_eq!(entries.len(), 6);
    let mut previous: Option<Vec<u8>> = None;
    for e in &entries {
        // Not backdated: the view's effective_at is its ledger_time, and the link hashes `-`.
        assert_eq!(e["effective_at"], e["ledger_time"]);
        let recomputed: String = sqlx::query_scalar(
            "select encode(entry_chain_hash($1, $2::uuid, $3, $4, $5, $6, $7, $8::timestamptz, null), 'hex')",
        )
        .bind(&previous)
        .bind(e["transaction_id"].as_str().unwrap())
        .bind(e["account"].as_str().unwrap())
        .bind(e["currency"].as_str().unwrap())
        .bind(e["amount"].as_i64().unwrap())
        .bind(e["sequence"].as_i64().unwrap())
        .bind(e["balance_after"].as_i64().unwrap())
        .bind(e["ledger_time"].as_str().unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
        assert_eq!(e["link"], recomputed.as_str(), "{e}");
        previous = Some(
            (0..32)
                .map(|i| u8::from_str_radix(&recomputed[2 * i..2 * i + 2], 16).unwrap())
                .collect(),
        );
    }
    let clearing = app
        .get("/v1/accounts/clearing:test:SAR/entries?limit=1")
        .await;
    assert_eq!(clearing.body["data"][0]["link"], serde_json::Value::Null);
    app.finish().await;
}
