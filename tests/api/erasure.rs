//! Erasing a transaction's metadata (docs/verification.md, "Erasable metadata"): every stored
//! copy is emptied in one go (the row, the stored request and answers, the outbox events), the
//! digest the seals took is kept, the erasure is audited and announced once, and the schema
//! refuses every other change of the metadata. Also in tests/citus.

use super::common::{TestApp, api_key, assert_problem, behind_the_guards};
use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;
use wallet_ledger::api_keys::Scope;
use wallet_ledger::ledger::events::{EventType, event_id};
use wallet_ledger::ledger::seals::metadata;

/// What a customer may have left in a transaction's metadata.
const PERSONAL: &str = "Noura Al-Harbi";

fn erasure_path(id: Uuid) -> String {
    format!("/v1/transactions/{id}/metadata-erasure")
}

/// The row's salt and `metadata::text`, as the seals digest them.
async fn salt_and_text(app: &TestApp, id: Uuid) -> (Option<Vec<u8>>, String) {
    sqlx::query_as("select metadata_salt, metadata::text from transactions where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Every stored text of the transaction's row and of its outbox events that still holds the
/// personal data: none once erased.
async fn copies_left(app: &TestApp, id: Uuid) -> Vec<String> {
    let row: String = sqlx::query_scalar("select t::text from transactions t where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let events: Vec<String> = sqlx::query_scalar(
        "select data::text from outbox_events where transaction_id = $1 order by seq",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    std::iter::once(row)
        .chain(events)
        .filter(|text| text.contains(PERSONAL))
        .collect()
}

async fn erasure_events(app: &TestApp, id: Uuid) -> Vec<(Uuid, Value)> {
    sqlx::query_as(
        "select id, data from outbox_events
         where transaction_id = $1 and type = 'transaction.metadata_erased'",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_erasure_empties_every_copy_keeps_the_digest_and_is_told_once() {
    let app = TestApp::new().await;
    app.create_wallet("er-alice").await;
    app.create_wallet("er-ben").await;
    app.fund("er-alice", 10_000).await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "from": "er-alice", "to": "er-ben", "amount": 2500,
                      "metadata": {"customer": {"name": PERSONAL}, "order": 42}});
    let created = app.post("/v1/transfers", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    // Retried before the erasure: replayed, metadata and all.
    let replay = app.post("/v1/transfers", &body).await;
    assert!(
        replay.replayed() && replay.text == created.text,
        "{}",
        replay.text
    );
    let (salt, text) = salt_and_text(&app, id).await;
    assert_eq!(
        salt.as_ref().map(Vec::len),
        Some(16),
        "a new row has its salt"
    );
    let entries_before = app.get("/v1/accounts/er-alice/entries").await.text;
    let balances_before = app.posted_balances(&["er-alice", "er-ben"]).await;

    let reason = "erasure request 2026-118";
    let r = app
        .post(&erasure_path(id), &json!({"reason": reason}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(!r.replayed());
    assert_eq!(r.body["metadata"], json!({}));
    let erased_at = r.body["metadata_erased_at"].clone();
    assert!(erased_at.is_string(), "{}", r.text);
    assert_eq!(
        r.body["entries"], created.body["entries"],
        "the money is as it was"
    );

    let view = app.get(&format!("/v1/transactions/{id}")).await;
    assert_eq!(
        view.body, r.body,
        "the transaction reads as the erasure answered"
    );
    assert_eq!(
        app.get("/v1/accounts/er-alice/entries").await.text,
        entries_before
    );
    assert_eq!(
        app.posted_balances(&["er-alice", "er-ben"]).await,
        balances_before
    );

    // The seals' digest of what was erased, computed by the seals' own function from the salt
    // and text read before; the salt itself is gone.
    let (kept, salt_after): (Vec<u8>, Option<Vec<u8>>) = sqlx::query_as(
        "select metadata_erased_digest, metadata_salt from transactions where id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(kept, metadata::digest(salt.as_deref(), &text));
    assert_eq!(salt_after, None);
    assert_eq!(copies_left(&app, id).await, Vec::<String>::new());

    // A retry of the create: never a second transfer. With the erased metadata it is no longer
    // the stored request (422 idempotency_mismatch naming the keys it sent); with none it
    // replays the stored answer, which lost its metadata and nothing else.
    let again = app.post("/v1/transfers", &body).await;
    assert_problem(&again, 422, "idempotency_mismatch", "the original retried");
    assert_eq!(
        again.body["differing_fields"],
        json!(["/metadata/customer", "/metadata/order"])
    );
    let mut without = body.clone();
    without["metadata"] = json!({});
    let replay = app.post("/v1/transfers", &without).await;
    assert!(replay.replayed(), "{}", replay.text);
    let mut expected = created.body.clone();
    expected["metadata"] = json!({});
    assert_eq!(replay.body, expected);
    assert_eq!(app.entries_of(id).await, 2);
    assert_eq!(
        app.posted_balances(&["er-alice", "er-ben"]).await,
        balances_before
    );

    // Told once: its event, with the erased view, under the id of its type and transaction.
    let told = erasure_events(&app, id).await;
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0].0,
        event_id(EventType::TransactionMetadataErased, &id.to_string())
    );
    assert_eq!(told[0].1["transaction"]["metadata"], json!({}));
    assert_eq!(told[0].1["transaction"]["metadata_erased_at"], erased_at);
    let audited: Vec<(String, String, Option<String>, Option<Uuid>)> = sqlx::query_as(
        "select owner, resource, reason, key_id from audit_log
         where action = 'transaction.erase_metadata'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(
        (&audited[0].0, &audited[0].1, audited[0].2.as_deref()),
        (&"default".to_owned(), &id.to_string(), Some(reason))
    );
    assert!(audited[0].3.is_some(), "the key that erased");

    // Again: the same answer, nothing written.
    let twice = app
        .post(&erasure_path(id), &json!({"reason": "again"}))
        .await;
    assert_eq!(twice.status, StatusCode::OK, "{}", twice.text);
    assert!(twice.replayed());
    assert_eq!(twice.body, r.body);
    assert_eq!(erasure_events(&app, id).await.len(), 1);
    let audits: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where action = 'transaction.erase_metadata'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(audits, 1);
    app.finish().await;
}

/// A capture's stored answer holds the metadata too, and is erased with the rest; a hold erased
/// while pending is captured with its metadata empty.
#[tokio::test]
async fn captures_answer_without_the_erased_metadata() {
    let app = TestApp::new().await;
    app.create_wallet("er-carol").await;
    app.create_wallet("er-dana").await;
    app.fund("er-carol", 10_000).await;
    let (captured, pending) = (Uuid::new_v4(), Uuid::new_v4());
    for id in [captured, pending] {
        let body = json!({"id": id, "from": "er-carol", "to": "er-dana", "amount": 100,
                          "status": "pending", "metadata": {"name": PERSONAL}});
        let r = app.post("/v1/transfers", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let capture = json!({"amount": 60});
    let post = |id: Uuid| format!("/v1/transactions/{id}/post");
    let first = app.post(&post(captured), &capture).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["metadata"]["name"], json!(PERSONAL));

    for id in [captured, pending] {
        let r = app
            .post(&erasure_path(id), &json!({"reason": "asked"}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(copies_left(&app, id).await, Vec::<String>::new());
    }
    let replay = app.post(&post(captured), &capture).await;
    assert!(replay.replayed(), "{}", replay.text);
    let mut expected = first.body.clone();
    expected["metadata"] = json!({});
    assert_eq!(replay.body, expected);

    let late = app.post(&post(pending), &json!({})).await;
    assert_eq!(late.status, StatusCode::OK, "{}", late.text);
    assert_eq!(late.body["metadata"], json!({}));
    assert!(late.body["metadata_erased_at"].is_string(), "{}", late.text);
    assert_eq!(copies_left(&app, pending).await, Vec::<String>::new());
    app.finish().await;
}

/// A transaction written before salts existed (its salt null, as the migration left old rows)
/// keeps the digest of its text alone.
#[tokio::test]
async fn a_row_older_than_salts_keeps_the_digest_of_its_text() {
    let app = TestApp::new().await;
    app.create_wallet("er-erik").await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "account": "er-erik", "amount": 500, "currency": "SAR",
                      "provider": "test", "metadata": {"payer": PERSONAL}});
    assert_eq!(
        app.post("/v1/payments", &body).await.status,
        StatusCode::CREATED
    );
    behind_the_guards(
        &app.pool,
        &[format!(
            "update transactions set metadata_salt = null where id = '{id}'"
        )],
    )
    .await;
    let (_, text) = salt_and_text(&app, id).await;
    let r = app
        .post(&erasure_path(id), &json!({"reason": "old row"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let kept: Vec<u8> =
        sqlx::query_scalar("select metadata_erased_digest from transactions where id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(kept, metadata::digest(None, &text));
    app.finish().await;
}

#[tokio::test]
async fn unknown_ids_bad_reasons_and_short_scopes_are_refused() {
    let app = TestApp::new().await;
    app.create_wallet("er-frank").await;
    let paid = app.fund("er-frank", 100).await;
    let id: Uuid = paid.body["id"].as_str().unwrap().parse().unwrap();
    let ok = json!({"reason": "asked"});

    let r = app.post(&erasure_path(Uuid::new_v4()), &ok).await;
    assert_problem(&r, 404, "not_found", "an unknown transaction");
    let r = app
        .post("/v1/transactions/nope/metadata-erasure", &ok)
        .await;
    assert_problem(&r, 404, "not_found", "not a transaction id");

    let long = "x".repeat(501);
    for (body, field, code) in [
        (json!({}), "/reason", "required"),
        (json!({"reason": ""}), "/reason", "reason"),
        (json!({"reason": "  "}), "/reason", "reason"),
        (json!({"reason": "a\u{7}b"}), "/reason", "reason"),
        (json!({"reason": long}), "/reason", "reason"),
        (json!({"reason": 5}), "/reason", "invalid_type"),
        (
            json!({"reason": "asked", "why": 1}),
            "/why",
            "unknown_field",
        ),
    ] {
        let r = app.post(&erasure_path(id), &body).await;
        assert_problem(&r, 422, "validation_failed", &body.to_string());
        assert_eq!(
            (&r.body["errors"][0]["field"], &r.body["errors"][0]["code"]),
            (&json!(field), &json!(code)),
            "{body}: {}",
            r.text
        );
    }
    let r = app
        .raw(axum::http::Method::POST, &erasure_path(id), &[], "{}")
        .await;
    assert_problem(&r, 415, "unsupported_media_type", "no content type");
    for scope in [Scope::Read, Scope::Write] {
        let key = api_key(&app.pool, "er-writer", scope).await;
        let r = app
            .raw(
                axum::http::Method::POST,
                &erasure_path(id),
                &[
                    ("content-type", "application/json"),
                    ("authorization", &format!("Bearer {key}")),
                ],
                ok.to_string(),
            )
            .await;
        assert_problem(&r, 403, "insufficient_scope", "an erasure is an admin's");
    }
    assert!(erasure_events(&app, id).await.is_empty(), "nothing erased");
    let (salt, _) = salt_and_text(&app, id).await;
    assert!(salt.is_some());
    app.finish().await;
}

/// The statements an intruder or a bug would write, each refused by the schema; the one
/// erasure that keeps the digest of what it erased and changes nothing else is let through.
#[tokio::test]
async fn the_schema_lets_the_metadata_change_by_one_exact_erasure_only() {
    let app = TestApp::new().await;
    app.create_wallet("er-gita").await;
    let id = Uuid::new_v4();
    let body = json!({"id": id, "account": "er-gita", "amount": 700, "currency": "SAR",
                      "provider": "test", "metadata": {"payer": PERSONAL}});
    let created = app.post("/v1/payments", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let (salt, text) = salt_and_text(&app, id).await;
    let digest = metadata::digest(salt.as_deref(), &text);
    let wrong = metadata::digest(None, &text);
    let mut answer = created.body.clone();
    answer["metadata"] = json!({});
    let erased_answer = answer.to_string();

    let update = |set: &str| format!("update transactions set {set} where id = '{id}'");
    let erasure = |digest: &[u8], request: &str, response: &str| {
        update(&format!(
            "metadata = '{{}}', metadata_salt = null, metadata_erased_at = now(),
             metadata_erased_digest = '\\x{}', creation_request = {request},
             creation_response = {response}",
            wallet_ledger::hex::encode(digest)
        ))
    };
    let scrubbed_request = "jsonb_set(creation_request, '{metadata}', '{}')";
    let scrubbed_response = format!("'{erased_answer}'");
    let refused = [
        update("metadata = '{}'"),
        update("metadata = '{\"payer\": \"someone else\"}'"),
        update("metadata_salt = null"),
        update("metadata_salt = '\\x00000000000000000000000000000000'"),
        update("creation_request = jsonb_set(creation_request, '{metadata}', '{}')"),
        // An erasure that keeps another digest than the old metadata's and salt's.
        erasure(&wrong, scrubbed_request, &scrubbed_response),
        // One that leaves the metadata in the stored answer or request.
        erasure(&digest, scrubbed_request, "creation_response"),
        erasure(&digest, "creation_request", &scrubbed_response),
        // One that changes more than the metadata.
        erasure(
            &digest,
            "jsonb_set(jsonb_set(creation_request, '{metadata}', '{}'), '{amount}', '1')",
            &scrubbed_response,
        ),
    ];
    for statement in &refused {
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&app.pool)
            .await
            .expect_err(statement);
        let message = error.as_database_error().map(|e| e.message().to_owned());
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("immutable") || m.contains("erasure")),
            "{statement}: {error}"
        );
    }
    assert_eq!(salt_and_text(&app, id).await, (salt.clone(), text.clone()));

    let exact = erasure(&digest, scrubbed_request, &scrubbed_response);
    sqlx::query(sqlx::AssertSqlSafe(exact.clone()))
        .execute(&app.pool)
        .await
        .unwrap_or_else(|e| panic!("{exact}: {e}"));
    // Erased once and for all: nothing of it changes again, not even by a second erasure.
    for statement in [
        update("metadata_erased_at = now()"),
        update("metadata = '{\"payer\": \"back\"}'"),
        update(&format!(
            "metadata_erased_digest = '\\x{}'",
            wallet_ledger::hex::encode(&wrong)
        )),
    ] {
        let refused = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&app.pool)
            .await;
        assert!(refused.is_err(), "{statement}");
    }
    let r = app
        .post(&erasure_path(id), &json!({"reason": "asked"}))
        .await;
    assert!(r.replayed(), "already erased: {}", r.text);
    app.finish().await;
}
