//! Transactions sealed in signed checkpoints (docs/verification.md): each checkpoint seals the
//! transactions written since the one before, `GET /v1/transactions/{id}/proof` answers one's
//! entries and metadata digest with the path to the signed root, `verify-proof` checks it
//! offline and refuses it bent, and `verify`'s `sealed_transaction` names exactly the
//! transaction rewritten behind the service's back. Also in tests/citus.

use super::common::{TestApp, behind_the_guards};
use super::seals::{findings, generated_key, seal_all, verify_proof};
use serde_json::{Value, json};
use uuid::Uuid;
use wallet_ledger::reconcile::invariants::{Check, Finding};

async fn transfer_with_metadata(app: &TestApp, from: &str, to: &str, amount: i64) -> Uuid {
    let id = Uuid::new_v4();
    let r = app
        .post(
            "/v1/transfers",
            &json!({"id": id, "from": from, "to": to, "amount": amount,
                    "metadata": {"customer": "Noura Al-Harbi", "order": 17}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    id
}

fn named(found: &[Finding], check: Check) -> Vec<(Option<Uuid>, Option<String>, String)> {
    found
        .iter()
        .filter(|f| f.check == check)
        .map(|f| (f.transaction, f.account.clone(), f.detail.clone()))
        .collect()
}

#[tokio::test]
async fn a_transaction_proof_checks_offline_and_a_bent_one_is_refused() {
    let app = TestApp::new().await;
    let (key, public) = generated_key().await;
    for wallet in ["txp-a", "txp-d"] {
        app.create_wallet(wallet).await;
    }
    app.fund("txp-a", 500).await;
    let id = transfer_with_metadata(&app, "txp-a", "txp-d", 120).await;
    let path = format!("/v1/transactions/{id}/proof");
    let unsealed = app.get(&path).await;
    assert_eq!(unsealed.status, 404, "not sealed yet: {}", unsealed.text);
    assert_eq!(unsealed.headers["content-type"], "application/problem+json");
    let first = seal_all(&app, &key).await["checkpoint"].as_i64().unwrap();

    let proof = app.get(&path).await;
    assert_eq!(proof.status, 200, "{}", proof.text);
    let proof = proof.body;
    let n = proof["checkpoint"]["n"].as_i64().unwrap();
    assert!(n <= first, "{proof}");
    let count = proof["checkpoint"]["transaction_count"].as_i64().unwrap();
    let entries = proof["transaction"]["entries"].as_array().unwrap();
    let legs: Vec<(&str, i64)> = entries
        .iter()
        .map(|e| {
            (
                e["account"].as_str().unwrap(),
                e["amount"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(legs, [("txp-a", -120), ("txp-d", 120)]);
    let metadata = &proof["transaction"]["metadata"];
    assert_eq!(metadata["erased"], false);
    assert!(
        metadata["text"]
            .as_str()
            .unwrap()
            .contains("Noura Al-Harbi"),
        "{metadata}"
    );
    assert_eq!(metadata["salt"].as_str().map(str::len), Some(32));
    let (code, out) = verify_proof(&proof, &public).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out,
        format!(
            "proof holds: transaction {id} with 2 entries is sealed in checkpoint {n} (root {})",
            proof["checkpoint"]["root"].as_str().unwrap()
        )
    );

    let bend = |change: &dyn Fn(&mut Value)| {
        let mut bent = proof.clone();
        change(&mut bent);
        bent
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "an amount",
            bend(&|p| p["transaction"]["entries"][0]["amount"] = (-121).into()),
            "fields do not hash to its digest",
        ),
        (
            "an amount and its digest",
            bend(&|p| {
                let entry = &mut p["transaction"]["entries"][1];
                entry["account"] = "txp-c".into();
                entry["digest"] = "00".repeat(32).into();
            }),
            "fields do not hash to its digest",
        ),
        (
            "the metadata",
            bend(&|p| p["transaction"]["metadata"]["text"] = r#"{"order": 18}"#.into()),
            "the metadata and its salt do not hash to its digest",
        ),
        (
            "a digest claimed erased",
            bend(&|p| {
                p["transaction"]["metadata"]["erased"] = true.into();
                p["transaction"]["metadata"]["digest"] = "11".repeat(32).into();
            }),
            "do not lead to the checkpoint's transactions_root",
        ),
        (
            "an entry left out",
            bend(&|p| {
                p["transaction"]["entries"].as_array_mut().unwrap().pop();
            }),
            "do not lead to the checkpoint's transactions_root",
        ),
        (
            "the leaf index",
            bend(&|p| {
                let index = p["leaf_index"].as_i64().unwrap();
                p["leaf_index"] = (if index == 0 { 1 } else { index - 1 }).into();
            }),
            "",
        ),
        (
            "the transactions root",
            bend(&|p| p["checkpoint"]["transactions_root"] = "22".repeat(32).into()),
            "do not lead to the checkpoint's transactions_root",
        ),
        (
            "the count",
            bend(&|p| p["checkpoint"]["transaction_count"] = (count + 1).into()),
            "",
        ),
    ];
    for (what, bent, reason) in cases {
        let (code, out) = verify_proof(&bent, &public).await;
        assert_eq!(code, Some(1), "{what}: {out}");
        assert!(
            out.starts_with("proof refused: ") && out.contains(reason),
            "{what}: {out}"
        );
    }
    let (_, other) = generated_key().await;
    let (code, out) = verify_proof(&proof, &other).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("signed by another key"), "{out}");

    // Sealed by the next checkpoint, not this one; a refusal has no entries and is never sealed.
    let later = transfer_with_metadata(&app, "txp-d", "txp-a", 20).await;
    let refused = Uuid::new_v4();
    let r = app.transfer(refused, "txp-d", "txp-a", 1_000_000).await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        app.get(&format!("/v1/transactions/{later}/proof"))
            .await
            .status,
        404
    );
    seal_all(&app, &key).await;
    let second = app.get(&format!("/v1/transactions/{later}/proof")).await;
    let n = second.body["checkpoint"]["n"].as_i64();
    assert!(n > Some(first), "{}", second.text);
    assert_eq!(verify_proof(&second.body, &public).await.0, Some(0));
    for missing in [
        format!("/v1/transactions/{refused}/proof"),
        format!("/v1/transactions/{}/proof", Uuid::new_v4()),
        "/v1/transactions/not-an-id/proof".to_owned(),
    ] {
        assert_eq!(app.get(&missing).await.status, 404, "{missing}");
    }
    assert_eq!(findings(&app).await, []);

    // Its metadata erased after the seal: the kept digest is the sealed one, so the proof
    // still holds with neither text nor salt, and `verify` finds nothing.
    let erased = app
        .post(
            &format!("/v1/transactions/{id}/metadata-erasure"),
            &json!({"reason": "the customer asked"}),
        )
        .await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    let after = app.get(&path).await.body;
    let metadata = &after["transaction"]["metadata"];
    assert_eq!(
        (&metadata["erased"], &metadata["text"], &metadata["salt"]),
        (&Value::Bool(true), &Value::Null, &Value::Null)
    );
    assert_eq!(
        metadata["digest"],
        proof["transaction"]["metadata"]["digest"]
    );
    assert!(!after.to_string().contains("Noura"), "{after}");
    let (code, out) = verify_proof(&after, &public).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(findings(&app).await, []);
    app.finish().await;
}

#[tokio::test]
async fn verify_names_the_sealed_transaction_rewritten_and_only_it() {
    let app = TestApp::new().await;
    let (key, _) = generated_key().await;
    for wallet in ["txv-a", "txv-b", "txv-c"] {
        app.create_wallet(wallet).await;
        app.fund(wallet, 300).await;
    }
    let edited = transfer_with_metadata(&app, "txv-a", "txv-b", 10).await;
    let retimed = app.fund("txv-c", 40).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let retimed: Uuid = retimed.parse().unwrap();
    seal_all(&app, &key).await;
    assert_eq!(findings(&app).await, []);

    // The metadata of a sealed transfer edited, and the clearing account's entry of a sealed
    // payment moved a second earlier: no sum, balance or link notices either. The new time is
    // computed first: Citus takes no stable function of the columns in an UPDATE's SET.
    let earlier: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "select ledger_time - interval '1 second' from entries
         where transaction_id = $1 and account_id = 'clearing:test:SAR'",
    )
    .bind(retimed)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    behind_the_guards(
        &app.pool,
        &[
            format!(
                "update transactions set metadata = '{{\"customer\": \"someone else\"}}'
                 where id = '{edited}'"
            ),
            format!(
                "update entries set ledger_time = '{}'
                 where transaction_id = '{retimed}' and account_id = 'clearing:test:SAR'",
                earlier.to_rfc3339()
            ),
        ],
    )
    .await;
    let found = findings(&app).await;
    let mut transactions: Vec<Option<Uuid>> = named(&found, Check::SealedTransaction)
        .into_iter()
        .map(|f| f.0)
        .collect();
    transactions.sort();
    let mut expected = vec![Some(edited), Some(retimed)];
    expected.sort();
    assert_eq!(transactions, expected, "{found:?}");
    let heads = named(&found, Check::SealedHead);
    assert_eq!(heads.len(), 1, "{found:?}");
    assert_eq!(heads[0].1.as_deref(), Some("clearing:test:SAR"));
    let others: Vec<&Finding> = found
        .iter()
        .filter(|f| ![Check::SealedTransaction, Check::SealedHead].contains(&f.check))
        .collect();
    assert_eq!(others, Vec::<&Finding>::new());

    // A stored leaf rewritten: its checkpoint's transactions no longer hash to the signed root.
    behind_the_guards(
        &app.pool,
        &[format!(
            "update journal_checkpoint_transactions set leaf = sha256(leaf)
             where transaction_id = '{edited}'"
        )],
    )
    .await;
    let found = findings(&app).await;
    let seals = named(&found, Check::CheckpointSeal);
    assert_eq!(seals.len(), 1, "{found:?}");
    assert!(
        seals[0]
            .2
            .contains("stored transaction leaves do not hash to its transactions_root"),
        "{seals:?}"
    );
    app.finish().await;
}

#[tokio::test]
async fn seals_taken_while_writers_run_seal_every_transaction_once() {
    let app = TestApp::new().await;
    let (key, _) = generated_key().await;
    let wallets = ["sw-a", "sw-b", "sw-c", "sw-d", "sw-e", "sw-f"];
    for wallet in wallets {
        app.create_wallet(wallet).await;
        app.fund(wallet, 100_000).await;
    }
    // Four writers, each 20 transfers around the wallets, and a sealer that seals over and over
    // until they are done: every window ends mid-load.
    let done = std::sync::atomic::AtomicBool::new(false);
    let writer = |w: usize| {
        let app = &app;
        async move {
            for i in 0..20 {
                let (from, to) = (wallets[(w + i) % 6], wallets[(w + i + 1 + w % 5) % 6]);
                let r = app.transfer(Uuid::new_v4(), from, to, 1 + i as i64).await;
                assert_eq!(r.status, 201, "{}", r.text);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    };
    let writers = async {
        futures_util::future::join_all((0..4).map(writer)).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let sealer = async {
        let mut sealed = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            sealed += i32::from(super::seals::seal(&app, &key).await.is_some());
        }
        sealed
    };
    let ((), during) = tokio::join!(writers, sealer);
    assert!(during >= 1, "no checkpoint was sealed during the load");
    seal_all(&app, &key).await;
    let (sealed, distinct): (i64, i64) = sqlx::query_as(
        "select count(*), count(distinct transaction_id) from journal_checkpoint_transactions",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let written: Vec<Uuid> = sqlx::query_scalar("select distinct transaction_id from entries")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        (sealed, distinct),
        (86, 86),
        "6 payments and 80 transfers, once each"
    );
    assert_eq!(written.len(), 86);
    assert_eq!(findings(&app).await, []);
    app.finish().await;
}
