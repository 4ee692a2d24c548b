//! Signed checkpoints of the journal (docs/verification.md): `keys generate` makes a key,
//! `seal` commits every account's chain head under it (wallets' and, extended by the sealer,
//! system accounts'), and `verify` finds a rewrite that the links alone cannot show (the last
//! entry of a chain changed and its link recomputed), a sealed head changed in the checkpoint
//! tables, and a signature that is not the key's. Sealed transactions: transaction_seals.rs.
//! Also in tests/citus.

use super::common::{TestApp, behind_the_guards};
use chrono::TimeDelta;
use serde_json::Value;
use tokio::process::Command;
use wallet_ledger::reconcile::invariants::{self, Check, Finding};

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");

pub async fn findings(app: &TestApp) -> Vec<Finding> {
    invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap()
}

fn of(found: &[Finding], check: Check) -> Vec<(Option<String>, Option<i64>, String)> {
    found
        .iter()
        .filter(|f| f.check == check)
        .map(|f| (f.account.clone(), f.entry, f.detail.clone()))
        .collect()
}

/// `keys generate`'s two lines, as (signing key, public key).
pub async fn generated_key() -> (String, String) {
    let out = Command::new(BIN)
        .args(["keys", "generate"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_owned()
    };
    (
        value("CHECKPOINT_SIGNING_KEY"),
        value("CHECKPOINT_PUBLIC_KEY"),
    )
}

/// Runs `seal` once; its JSON line, or `None` when nothing moved.
pub async fn seal(app: &TestApp, key: &str) -> Option<Value> {
    let out = Command::new(BIN)
        .args(["seal", "--database-url", &app.database_url])
        .env("CHECKPOINT_SIGNING_KEY", key)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .next()
        .map(|l| serde_json::from_str(l).unwrap())
}

/// Seals until every transaction with entries is sealed, and returns the last checkpoint's
/// line (the latest checkpoint's number and heads when everything was sealed already). A checkpoint's window ends at the oldest transaction still running anywhere on the
/// server (the tests of other databases too), so one seal may leave the newest transactions
/// to the next.
pub async fn seal_all(app: &TestApp, key: &str) -> Value {
    let mut last = None;
    for _ in 0..200 {
        if let Some(line) = seal(app, key).await {
            last = Some(line);
        }
        let sealed: Vec<uuid::Uuid> =
            sqlx::query_scalar("select transaction_id from journal_checkpoint_transactions")
                .fetch_all(&app.pool)
                .await
                .unwrap();
        let written: Vec<uuid::Uuid> =
            sqlx::query_scalar("select distinct transaction_id from entries")
                .fetch_all(&app.pool)
                .await
                .unwrap();
        if written.iter().all(|t| sealed.contains(t)) {
            return match last {
                Some(line) => line,
                None => latest_checkpoint(app).await,
            };
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("transactions still unsealed after 200 seals");
}

/// `verify-proof`'s exit code and output (trimmed) for `proof` under `key`, with no database.
pub async fn verify_proof(proof: &Value, key: &str) -> (Option<i32>, String) {
    let file = std::env::temp_dir().join(format!("wl-proof-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&file, proof.to_string()).unwrap();
    let out = Command::new(BIN)
        .arg("verify-proof")
        .arg(&file)
        .args(["--public-key", key])
        .env_remove("DATABASE_URL")
        .output()
        .await
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (out.status.code(), stdout.trim().to_owned())
}

/// The latest checkpoint's number and head count, as `seal` prints them.
async fn latest_checkpoint(app: &TestApp) -> Value {
    let (n, heads): (i64, i64) =
        sqlx::query_as("select n, head_count from journal_checkpoints order by n desc limit 1")
            .fetch_one(&app.pool)
            .await
            .expect("a checkpoint");
    serde_json::json!({"checkpoint": n, "heads": heads})
}

/// The accounts whose heads checkpoints after `n` stored.
async fn heads_stored_after(app: &TestApp, n: i64) -> Vec<String> {
    sqlx::query_scalar(
        "select distinct account_id from journal_checkpoint_heads where checkpoint > $1
         order by account_id",
    )
    .bind(n)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_rewrite_past_the_links_is_found_by_the_signed_heads() {
    let app = TestApp::new().await;
    let (key, public) = generated_key().await;
    for wallet in ["seal-a", "seal-b", "seal-c"] {
        app.create_wallet(wallet).await;
        app.fund(wallet, 100).await;
        app.fund(wallet, 200).await;
    }
    let first = seal_all(&app, &key).await;
    // Three wallets and the provider's clearing account, which only the sealer chains.
    assert_eq!(first["heads"], 4, "{first}");
    assert_eq!(seal(&app, &key).await, None, "nothing moved since");
    app.fund("seal-b", 300).await;
    let first = first["checkpoint"].as_i64().unwrap();
    let second = seal_all(&app, &key).await;
    assert!(second["checkpoint"].as_i64().unwrap() > first);
    assert_eq!(
        heads_stored_after(&app, first).await,
        ["clearing:test:SAR", "seal-b"]
    );
    let stored: Vec<u8> =
        sqlx::query_scalar("select public_key from journal_checkpoints where n = 1")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(wallet_ledger::ledger::seals::keys::encode(&stored), public);
    assert_eq!(findings(&app).await, []);

    // seal-a's last entry (sequence 2, sealed) made 201 instead of 200, the provider's side to
    // agree, and its link recomputed: every sum, balance and link holds again.
    let (entry, payment): (i64, uuid::Uuid) = sqlx::query_as(
        "select id, transaction_id from entries where account_id = 'seal-a' and sequence = 2",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    // The new link computed first: Citus takes neither a subquery nor a stable function of the
    // columns in an UPDATE's SET.
    let link: String = sqlx::query_scalar(
        "select encode(entry_chain_hash(p.chain_hash, e.transaction_id, e.account_id, e.currency,
                                        201, e.sequence, 301, e.ledger_time, e.effective_at), 'hex')
         from entries e join entries p on p.account_id = e.account_id and p.sequence = 1
         where e.account_id = 'seal-a' and e.sequence = 2",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    behind_the_guards(
        &app.pool,
        &[
            format!(
                "update entries set amount = amount - 1
                 where account_id = 'clearing:test:SAR' and transaction_id = '{payment}'"
            ),
            format!(
                "update entries set amount = 201, balance_after = 301,
                        chain_hash = decode('{link}', 'hex')
                 where account_id = 'seal-a' and sequence = 2"
            ),
        ],
    )
    .await;
    let found = findings(&app).await;
    assert_eq!(
        of(&found, Check::ChainLink),
        [],
        "the links were recomputed"
    );
    let sealed = of(&found, Check::SealedHead);
    assert_eq!(sealed.len(), 2, "{found:?}");
    assert_eq!(
        (sealed[0].0.as_deref(), sealed[0].1),
        (Some("seal-a"), Some(entry))
    );
    assert!(
        sealed[0].2.contains("checkpoint 1 sealed sequence 2"),
        "{sealed:?}"
    );
    // The clearing account's chain, recomputed over the window that holds the payment, ends
    // elsewhere (in that window only: the next ones continue from what was sealed).
    assert_eq!(sealed[1].0.as_deref(), Some("clearing:test:SAR"));
    assert!(sealed[1].2.contains(" entries with link "), "{sealed:?}");
    let transactions: Vec<_> = found
        .iter()
        .filter(|f| f.check == Check::SealedTransaction)
        .map(|f| f.transaction)
        .collect();
    assert_eq!(transactions, [Some(payment)], "{found:?}");
    assert_eq!(of(&found, Check::CheckpointSeal), []);

    // A sealed head rewritten in the checkpoint's own table, and a signature replaced.
    behind_the_guards(
        &app.pool,
        &[
            "update journal_checkpoint_heads set link = sha256(link) where account_id = 'seal-c'"
                .into(),
            "update journal_checkpoints set signature = overlay(signature placing '\\x00' from 1)
             where n = 2"
                .into(),
        ],
    )
    .await;
    let found = findings(&app).await;
    let seals: Vec<String> = of(&found, Check::CheckpointSeal)
        .into_iter()
        .map(|f| f.2)
        .collect();
    // seal-c's head was stored by checkpoint 1, so every checkpoint's heads break.
    let checkpoints: i64 = sqlx::query_scalar("select count(*) from journal_checkpoints")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(seals.len() as i64, checkpoints, "{seals:?}");
    for (n, seal) in (1..).zip(&seals) {
        assert!(
            seal.starts_with(&format!("checkpoint {n}: its "))
                && seal.contains(" stored heads do not hash"),
            "{seals:?}"
        );
    }
    let out = Command::new(BIN)
        .args(["verify", "--database-url", &app.database_url])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("checkpoint_seal") && stdout.contains("sealed_head"),
        "{stdout}"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_signature_that_is_not_the_keys_is_named_and_bad_keys_are_refused() {
    let app = TestApp::new().await;
    let (key, _) = generated_key().await;
    app.create_wallet("seal-d").await;
    app.fund("seal-d", 100).await;
    seal(&app, &key).await.expect("a checkpoint");
    let other = Command::new(BIN)
        .args(["keys", "generate"])
        .output()
        .await
        .unwrap();
    let other = String::from_utf8(other.stdout).unwrap();
    let other_public = other
        .lines()
        .find_map(|l| l.strip_prefix("CHECKPOINT_PUBLIC_KEY="))
        .unwrap();
    behind_the_guards(
        &app.pool,
        &[format!(
            "update journal_checkpoints set public_key = decode('{other_public}', 'base64') where n = 1"
        )],
    )
    .await;
    let found = findings(&app).await;
    let seals = of(&found, Check::CheckpointSeal);
    assert_eq!(seals.len(), 1, "{found:?}");
    assert_eq!(
        seals[0].2,
        "checkpoint 1: the signature is not its public key's over its root"
    );

    for bad in ["not base64!", "AAAA"] {
        let out = Command::new(BIN)
            .args(["seal", "--database-url", &app.database_url])
            .env("CHECKPOINT_SIGNING_KEY", bad)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("checkpoint signing key"), "{stderr}");
    }
    app.finish().await;
}

#[tokio::test]
async fn a_head_proof_from_the_api_checks_offline_and_a_bent_one_is_refused() {
    let app = TestApp::new().await;
    let (key, public) = generated_key().await;
    for wallet in ["proof-a", "proof-b", "proof-c"] {
        app.create_wallet(wallet).await;
        app.fund(wallet, 100).await;
    }
    seal(&app, &key).await.expect("checkpoint 1");
    app.fund("proof-b", 50).await;
    seal(&app, &key).await.expect("checkpoint 2");

    let page = app.get("/v1/checkpoints?limit=1").await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.body["data"][0]["n"], 2);
    assert_eq!(page.body["data"][0]["public_key"], public.as_str());
    let cursor = page.body["next_cursor"].as_str().expect("a second page");
    let older = app.get(&format!("/v1/checkpoints?cursor={cursor}")).await;
    assert_eq!(older.body["data"][0]["n"], 1);
    assert_eq!(older.body["data"][0]["previous_root"], Value::Null);
    assert_eq!(
        app.get("/v1/checkpoints/2").await.body["previous_root"],
        older.body["data"][0]["root"]
    );
    for missing in [
        "/v1/checkpoints/3",
        "/v1/checkpoints/0",
        "/v1/checkpoints/two",
    ] {
        assert_eq!(app.get(missing).await.status, 404, "{missing}");
    }
    let nobody = app.get("/v1/checkpoints/2/heads/nobody").await;
    assert_eq!(nobody.status, 404);
    assert_eq!(nobody.headers["content-type"], "application/problem+json");

    let check = verify_proof;
    for (n, wallet, sequence) in [(1, "proof-b", 1), (2, "proof-b", 2), (2, "proof-c", 1)] {
        let proof = app
            .get(&format!("/v1/checkpoints/{n}/heads/{wallet}"))
            .await;
        assert_eq!(proof.status, 200, "{}", proof.text);
        assert_eq!(proof.body["head"]["sequence"], sequence);
        let (code, out) = check(&proof.body, &public).await;
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.starts_with(&format!("proof holds: {wallet} was at sequence {sequence}")),
            "{out}"
        );
    }
    let proof = app.get("/v1/checkpoints/2/heads/proof-a").await.body;
    let mut bent = proof.clone();
    bent["head"]["sequence"] = 2.into();
    let (code, out) = check(&bent, &public).await;
    assert_eq!(
        (code, out.as_str()),
        (
            Some(1),
            "proof refused: the head and its path do not lead to the checkpoint's heads_root"
        )
    );
    let (_, other) = generated_key().await;
    let (code, out) = check(&proof, &other).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("signed by another key"), "{out}");
    app.finish().await;
}
