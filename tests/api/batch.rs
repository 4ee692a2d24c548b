//! `POST /v1/transactions/batch`: atomic batches write all or nothing; independent batches
//! answer every item exactly as its single `POST /v1/transactions` would, in order, against
//! running balances, and a retried batch replays.

use super::common::Rng;
use super::common::{TestApp, TestResponse};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

const BATCH: &str = "/v1/transactions/batch";

/// The body of a two-leg `POST /v1/transactions` moving `amount` from `from` to `to`.
fn tx(id: Uuid, from: &str, to: &str, amount: i64) -> Value {
    json!({"id": id, "entries": [
        {"account": from, "amount": -amount},
        {"account": to, "amount": amount},
    ]})
}

async fn batch(app: &TestApp, mode: &str, items: &[Value]) -> TestResponse {
    app.post(BATCH, &json!({"mode": mode, "items": items}))
        .await
}

/// Sends an atomic batch that must fail at `index` with the item problem `code`, and checks
/// that nothing at all was written: no row anywhere, no balance moved, and none of
/// `absent` (ids not stored before) readable.
async fn assert_atomic_fails(
    app: &TestApp,
    case: &str,
    items: &[Value],
    index: usize,
    code: &str,
    absent: &[Uuid],
) -> TestResponse {
    let wallets = ["w1", "w2", "w3"];
    let counts = app.row_counts().await;
    let before = app.posted_balances(&wallets).await;
    let r = batch(app, "atomic", items).await;
    assert_eq!(
        r.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{case}: {}",
        r.text
    );
    assert_eq!(r.content_type(), "application/problem+json", "{case}");
    assert_eq!(r.code(), "batch_failed", "{case}: {}", r.text);
    assert_eq!(r.body["index"], json!(index), "{case}: {}", r.text);
    assert_eq!(r.body["problem"]["code"], code, "{case}: {}", r.text);
    for id in absent {
        let g = app.get(&format!("/v1/transactions/{id}")).await;
        assert_eq!(
            g.status,
            StatusCode::NOT_FOUND,
            "{case}: {id} must not be stored: {}",
            g.text
        );
    }
    assert_eq!(
        app.row_counts().await,
        counts,
        "{case}: an atomic batch that fails writes nothing (not even a refusal)"
    );
    assert_eq!(app.posted_balances(&wallets).await, before, "{case}");
    r
}

#[tokio::test]
async fn an_atomic_batch_with_one_bad_item_writes_nothing() {
    let app = TestApp::new().await;
    for w in ["w1", "w2", "w3"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 1_000).await;

    // A successful atomic batch: every item 201, in order, against running balances (item 1
    // spends what item 0 credited, item 2 what item 1 credited).
    for w in ["a1", "a2", "a3"] {
        app.create_wallet(w).await;
    }
    app.fund("a1", 100).await;
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let items = vec![
        tx(ids[0], "a1", "a2", 100),
        tx(ids[1], "a2", "a3", 100),
        tx(ids[2], "a3", "a1", 40),
    ];
    let counts = app.row_counts().await;
    let r = batch(&app, "atomic", &items).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let results = r.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["status"], 201, "item {i}: {result}");
        assert_eq!(result["replayed"], false, "item {i}");
        assert_eq!(result["body"]["id"], json!(ids[i]), "item {i}");
        assert_eq!(result["body"]["status"], "posted", "item {i}");
        let g = app.get(&format!("/v1/transactions/{}", ids[i])).await;
        assert_eq!(g.status, StatusCode::OK, "{}", g.text);
        assert_eq!(g.body["status"], "posted");
    }
    assert_eq!(
        app.posted_balances(&["a1", "a2", "a3"]).await,
        BTreeMap::from([("a1".into(), 40), ("a2".into(), 0), ("a3".into(), 60)])
    );
    let after = app.row_counts().await;
    assert_eq!((after.1 - counts.1, after.2 - counts.2), (3, 6));

    // The same batch again replays every item, and still writes nothing.
    let again = batch(&app, "atomic", &items).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    for (i, (a, b)) in again.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(results)
        .enumerate()
    {
        assert_eq!(
            (&a["status"], &a["replayed"]),
            (&json!(200), &json!(true)),
            "item {i}"
        );
        assert_eq!(a["body"], b["body"], "item {i}: the creation answer again");
    }
    assert_eq!(app.row_counts().await, after);
    assert_eq!(
        app.posted_balances(&["a1", "a2", "a3"]).await,
        BTreeMap::from([("a1".into(), 40), ("a2".into(), 0), ("a3".into(), 60)])
    );

    // 1. One item overdraws: its refusal is not stored either.
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let items = [
        tx(ids[0], "w1", "w2", 100),
        tx(ids[1], "w2", "w3", 5_000),
        tx(ids[2], "w1", "w3", 50),
    ];
    let r = assert_atomic_fails(&app, "overdraft", &items, 1, "insufficient_funds", &ids).await;
    assert_eq!(r.body["problem"]["status"], 422, "{}", r.text);

    // The last item overdraws only because of the items before it (running balances).
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let items = [
        tx(ids[0], "w1", "w2", 600),
        tx(ids[1], "w1", "w3", 300),
        tx(ids[2], "w1", "w3", 101),
    ];
    assert_atomic_fails(
        &app,
        "running overdraft",
        &items,
        2,
        "insufficient_funds",
        &ids,
    )
    .await;

    // 2. One item names an account that does not exist.
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let items = [
        tx(ids[0], "w1", "w2", 10),
        tx(ids[1], "w1", "w3", 10),
        tx(ids[2], "w1", "nobody", 10),
    ];
    assert_atomic_fails(&app, "unknown account", &items, 2, "unknown_account", &ids).await;

    // 3. Invalid items: an unknown field, unbalanced entries, a zero amount, no id.
    let ids: Vec<Uuid> = (0..2).map(|_| Uuid::new_v4()).collect();
    let mut unknown_field = tx(ids[1], "w1", "w3", 10);
    unknown_field["memo"] = json!("not a field");
    let items = [tx(ids[0], "w1", "w2", 10), unknown_field];
    let r = assert_atomic_fails(&app, "unknown field", &items, 1, "validation_failed", &ids).await;
    assert_eq!(
        r.body["problem"]["errors"][0]["field"], "/memo",
        "{}",
        r.text
    );

    let ids: Vec<Uuid> = (0..2).map(|_| Uuid::new_v4()).collect();
    let unbalanced = json!({"id": ids[0], "entries": [
        {"account": "w1", "amount": -100}, {"account": "w2", "amount": 90}]});
    let items = [unbalanced, tx(ids[1], "w1", "w2", 10)];
    assert_atomic_fails(&app, "unbalanced", &items, 0, "validation_failed", &ids).await;

    let ids: Vec<Uuid> = (0..2).map(|_| Uuid::new_v4()).collect();
    let items = [tx(ids[0], "w1", "w2", 10), tx(ids[1], "w1", "w2", 0)];
    assert_atomic_fails(&app, "zero amount", &items, 1, "validation_failed", &ids).await;

    let ids: Vec<Uuid> = vec![Uuid::new_v4()];
    let items = [
        tx(ids[0], "w1", "w2", 10),
        json!({"entries": [{"account": "w1", "amount": -10}, {"account": "w2", "amount": 10}]}),
    ];
    let r = assert_atomic_fails(&app, "no id", &items, 1, "id_required", &ids).await;
    assert_eq!(r.body["problem"]["status"], 400, "{}", r.text);

    // 4. An id stored before, sent with another payload.
    let stored = Uuid::new_v4();
    let single = app
        .post("/v1/transactions", &tx(stored, "w1", "w2", 10))
        .await;
    assert_eq!(single.status, StatusCode::CREATED, "{}", single.text);
    let ids: Vec<Uuid> = vec![Uuid::new_v4()];
    let items = [tx(ids[0], "w1", "w3", 10), tx(stored, "w1", "w2", 20)];
    let r = assert_atomic_fails(
        &app,
        "stored id, other payload",
        &items,
        1,
        "idempotency_mismatch",
        &ids,
    )
    .await;
    let differing = r.body["problem"]["differing_fields"].as_array().unwrap();
    assert!(
        differing.contains(&json!("/entries/0/amount")),
        "{}",
        r.text
    );

    // The same stored id with the same payload is a replay: the batch succeeds.
    let fresh = Uuid::new_v4();
    let r = batch(
        &app,
        "atomic",
        &[tx(stored, "w1", "w2", 10), tx(fresh, "w1", "w3", 10)],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["results"][0]["status"], 200);
    assert_eq!(r.body["results"][0]["replayed"], true);
    assert_eq!(r.body["results"][0]["body"], single.body);
    assert_eq!(r.body["results"][1]["status"], 201);

    // A stored refusal replayed inside an atomic batch is still a failure (422).
    let refused = Uuid::new_v4();
    let single = app
        .post("/v1/transactions", &tx(refused, "w3", "w1", 1_000_000))
        .await;
    assert_eq!(
        single.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        single.text
    );
    assert_eq!(single.code(), "insufficient_funds");
    let ids: Vec<Uuid> = vec![Uuid::new_v4()];
    let items = [
        tx(ids[0], "w1", "w2", 10),
        tx(refused, "w3", "w1", 1_000_000),
    ];
    let r = assert_atomic_fails(
        &app,
        "stored refusal",
        &items,
        1,
        "insufficient_funds",
        &ids,
    )
    .await;
    assert_eq!(r.body["problem"], single.body, "the stored refusal's body");

    // An id used earlier in the same batch with another payload: item 0 would be created,
    // item 1 is a mismatch, so the atomic batch fails and item 0 must not be stored.
    let reused = Uuid::new_v4();
    let items = [tx(reused, "w1", "w2", 10), tx(reused, "w1", "w2", 20)];
    assert_atomic_fails(
        &app,
        "in-batch id, other payload",
        &items,
        1,
        "idempotency_mismatch",
        &[reused],
    )
    .await;

    app.finish().await;
}

#[tokio::test]
async fn an_atomic_batch_names_the_first_failing_item_in_request_order() {
    let app = TestApp::new().await;
    for w in ["w1", "w6", "w3"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 1_000).await;
    let stored = Uuid::new_v4();
    let single = app
        .post("/v1/transactions", &tx(stored, "w1", "w6", 10))
        .await;
    assert_eq!(single.status, StatusCode::CREATED, "{}", single.text);

    // Each case: item 0 is the first item that would not be created, and a later item fails
    // for a reason found earlier in the server's work (parsing, or a stored id).
    let cases = [
        (
            "overdraft before an invalid item",
            vec![
                tx(Uuid::new_v4(), "w6", "w3", 5_000),
                tx(Uuid::new_v4(), "w1", "w6", 0),
            ],
            "insufficient_funds",
        ),
        (
            "unknown account before an invalid item",
            vec![
                tx(Uuid::new_v4(), "w1", "nobody", 10),
                json!({"entries": [{"account": "w1", "amount": -1}, {"account": "w6", "amount": 1}]}),
            ],
            "unknown_account",
        ),
        (
            "overdraft before a stored id with another payload",
            vec![
                tx(Uuid::new_v4(), "w6", "w3", 5_000),
                tx(stored, "w1", "w6", 99),
            ],
            "insufficient_funds",
        ),
    ];
    let counts = app.row_counts().await;
    let mut wrong = Vec::new();
    for (case, items, code) in cases {
        let r = batch(&app, "atomic", &items).await;
        assert_eq!(r.code(), "batch_failed", "{case}: {}", r.text);
        if (&r.body["index"], &r.body["problem"]["code"]) != (&json!(0), &json!(code)) {
            wrong.push(format!("{case}: {}", r.text));
        }
    }
    assert_eq!(app.row_counts().await, counts);
    assert!(
        wrong.is_empty(),
        "batch_failed named a later item than the first failing one:\n{}",
        wrong.join("\n")
    );
    app.finish().await;
}

/// The answer a single `POST /v1/transactions` of an item would get.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// 201, stored now.
    Created,
    /// 422 `insufficient_funds`, stored now.
    Refused,
    /// A stored answer again (`replayed: true`), with the body of `Source`.
    Replay { status: u16, of: Source },
    /// A problem, nothing stored.
    Problem { status: u16, code: &'static str },
}

#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// An earlier item of the batch.
    Item(usize),
    /// A single call made before the batch (the index into `singles`).
    Single(usize),
}

/// What the model remembers of a stored id.
#[derive(Debug, Clone)]
struct StoredModel {
    canonical: Value,
    status: u16,
    source: Source,
}

/// The request with defaults applied, without its id: what "same payload" compares.
fn canonical(item: &Value) -> Value {
    json!({
        "entries": item["entries"],
        "status": item.get("status").cloned().unwrap_or(json!("posted")),
        "expires_at": item.get("expires_at").cloned().unwrap_or(Value::Null),
        "external_ref": item.get("external_ref").cloned().unwrap_or(Value::Null),
        "metadata": item.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A tiny in-test ledger: balances of wallets (overdraft limit 0) and stored ids.
struct Model {
    balances: BTreeMap<String, i64>,
    stored: HashMap<Uuid, StoredModel>,
}

impl Model {
    /// Decides one item as its single call would be, in order, and applies it.
    fn decide(&mut self, index: usize, item: &Value) -> Expect {
        const FIELDS: [&str; 6] = [
            "id",
            "entries",
            "status",
            "expires_at",
            "external_ref",
            "metadata",
        ];
        let fields = item.as_object().unwrap();
        let entries = item["entries"].as_array().unwrap();
        let amounts: Vec<i64> = entries
            .iter()
            .map(|e| e["amount"].as_i64().unwrap())
            .collect();
        let invalid = fields.keys().any(|k| !FIELDS.contains(&k.as_str()))
            || entries.len() < 2
            || amounts.contains(&0)
            || amounts.iter().sum::<i64>() != 0;
        if invalid {
            return Expect::Problem {
                status: 422,
                code: "validation_failed",
            };
        }
        let Some(id) = item
            .get("id")
            .map(|v| v.as_str().unwrap().parse::<Uuid>().unwrap())
        else {
            return Expect::Problem {
                status: 400,
                code: "id_required",
            };
        };
        let canonical = canonical(item);
        if let Some(s) = self.stored.get(&id) {
            return if s.canonical == canonical {
                Expect::Replay {
                    status: if s.status == 201 { 200 } else { s.status },
                    of: s.source.clone(),
                }
            } else {
                Expect::Problem {
                    status: 422,
                    code: "idempotency_mismatch",
                }
            };
        }
        let legs: Vec<(&str, i64)> = entries
            .iter()
            .map(|e| {
                (
                    e["account"].as_str().unwrap(),
                    e["amount"].as_i64().unwrap(),
                )
            })
            .collect();
        if legs.iter().any(|(a, _)| !self.balances.contains_key(*a)) {
            return Expect::Problem {
                status: 422,
                code: "unknown_account",
            };
        }
        let covered = legs
            .iter()
            .all(|(a, amount)| *amount > 0 || self.balances[*a] + amount >= 0);
        let (expect, status) = if covered {
            for (a, amount) in &legs {
                *self.balances.get_mut(*a).unwrap() += amount;
            }
            (Expect::Created, 201)
        } else {
            (Expect::Refused, 422)
        };
        self.stored.insert(
            id,
            StoredModel {
                canonical,
                status,
                source: Source::Item(index),
            },
        );
        expect
    }
}

/// `(account, amount)` of each entry of a request or a transaction.
fn legs_of(v: &Value) -> Vec<(Value, Value)> {
    v["entries"]
        .as_array()
        .map(|es| {
            es.iter()
                .map(|e| (e["account"].clone(), e["amount"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The item with `amount` moved from its first leg's account to its last's (same id).
fn with_amount(item: &Value, amount: i64) -> Value {
    let mut item = item.clone();
    let entries = item["entries"].as_array_mut().unwrap();
    let n = entries.len();
    entries[0]["amount"] = json!(-amount);
    entries[n - 1]["amount"] = json!(amount);
    // A multi-leg item becomes a two-leg one (first and last account), still balanced.
    if n > 2 {
        entries.drain(1..n - 1);
    }
    item
}

#[tokio::test]
async fn an_independent_batch_of_1000_answers_each_item_as_its_single_call_would() {
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
        app.fund(w, 3_000).await;
    }
    let mut rng = Rng(0x5eed_ba7c_0000_1000);

    // Single calls before the batch: stored creations and stored refusals.
    let mut singles: Vec<(Value, TestResponse)> = Vec::new();
    for i in 0..8 {
        let (from, to) = rng.two_distinct(&wallets);
        let amount = if i % 4 == 3 {
            500_000
        } else {
            1 + rng.below(300) as i64
        };
        let body = tx(Uuid::new_v4(), from, to, amount);
        let r = app.post("/v1/transactions", &body).await;
        let expected = if amount > 3_000 { 422 } else { 201 };
        assert_eq!(r.status.as_u16(), expected, "{}", r.text);
        singles.push((body, r));
    }

    let mut model = Model {
        balances: BTreeMap::new(),
        stored: HashMap::new(),
    };
    for w in &wallets {
        model
            .balances
            .insert(w.clone(), app.posted_balance(w).await);
    }
    for (n, (body, r)) in singles.iter().enumerate() {
        let id = body["id"].as_str().unwrap().parse().unwrap();
        let stored = StoredModel {
            canonical: canonical(body),
            status: r.status.as_u16(),
            source: Source::Single(n),
        };
        model.stored.insert(id, stored);
    }

    // 1000 items, each decided by the model as it is generated.
    let mut items: Vec<Value> = Vec::with_capacity(1000);
    let mut expected: Vec<Expect> = Vec::with_capacity(1000);
    for i in 0..1000 {
        let roll = rng.below(100);
        let with_id: Vec<usize> = (0..i).filter(|&j| items[j].get("id").is_some()).collect();
        let stored_in_batch: Vec<usize> = (0..i)
            .filter(|&j| matches!(expected[j], Expect::Created | Expect::Refused))
            .collect();
        let item = match roll {
            // A fresh transfer, sometimes with metadata or an external reference.
            _ if i < 20 || roll < 45 => {
                let (from, to) = rng.two_distinct(&wallets);
                let mut item = tx(Uuid::new_v4(), from, to, 1 + rng.below(800) as i64);
                match rng.below(4) {
                    0 => item["metadata"] = json!({"n": i}),
                    1 => item["external_ref"] = json!(format!("ref-{i}")),
                    _ => {}
                }
                item
            }
            // A three-leg transaction.
            45..50 => {
                let (a, b) = rng.two_distinct(&wallets);
                let c = wallets
                    .iter()
                    .find(|w| w.as_str() != a && w.as_str() != b)
                    .unwrap();
                let x = 2 + rng.below(600) as i64;
                let y = 1 + rng.below(x as u64 - 1) as i64;
                json!({"id": Uuid::new_v4(), "entries": [
                    {"account": a, "amount": -x}, {"account": b, "amount": y}, {"account": c, "amount": x - y}]})
            }
            // An explicit overdraft.
            50..56 => {
                let (from, to) = rng.two_distinct(&wallets);
                tx(Uuid::new_v4(), from, to, 1_000_000 + rng.below(1000) as i64)
            }
            // A duplicate of an earlier item (sometimes spelling the defaults out).
            56..66 => {
                let j = *rng.pick(&with_id);
                let mut item = items[j].clone();
                if rng.below(2) == 0 && item.get("status").is_none() {
                    item["status"] = json!("posted");
                }
                if rng.below(2) == 0 && item.get("metadata").is_none() {
                    item["metadata"] = json!({});
                }
                item
            }
            // The id of an earlier stored item with another payload.
            66..71 if !stored_in_batch.is_empty() => {
                let j = *rng.pick(&stored_in_batch);
                let amount = items[j]["entries"][0]["amount"].as_i64().unwrap().abs();
                with_amount(&items[j], amount + 1 + rng.below(5) as i64)
            }
            // An unknown account, on either side.
            66..76 => {
                let (from, to) = rng.two_distinct(&wallets);
                let ghost = format!("ghost-{i}");
                if rng.below(2) == 0 {
                    tx(Uuid::new_v4(), &ghost, to, 10)
                } else {
                    tx(Uuid::new_v4(), from, &ghost, 10)
                }
            }
            // A zero amount.
            76..80 => {
                let (from, to) = rng.two_distinct(&wallets);
                tx(Uuid::new_v4(), from, to, 0)
            }
            // No id.
            80..84 => {
                let (from, to) = rng.two_distinct(&wallets);
                let mut item = tx(Uuid::nil(), from, to, 5);
                item.as_object_mut().unwrap().remove("id");
                item
            }
            // An unknown field.
            84..86 => {
                let (from, to) = rng.two_distinct(&wallets);
                let mut item = tx(Uuid::new_v4(), from, to, 5);
                item["memo"] = json!("lunch");
                item
            }
            // Unbalanced entries.
            86..88 => {
                let (from, to) = rng.two_distinct(&wallets);
                json!({"id": Uuid::new_v4(), "entries": [
                    {"account": from, "amount": -7}, {"account": to, "amount": 6}]})
            }
            // A single call's request again.
            88..96 => rng.pick(&singles).0.clone(),
            // A single call's id with another payload.
            _ => {
                let body = &rng.pick(&singles).0;
                let amount = body["entries"][1]["amount"].as_i64().unwrap();
                with_amount(body, amount + 1)
            }
        };
        expected.push(model.decide(i, &item));
        items.push(item);
    }

    // The mix covers every kind of answer.
    let count = |f: &dyn Fn(&Expect) -> bool| expected.iter().filter(|e| f(e)).count();
    let created = count(&|e| *e == Expect::Created);
    let refused = count(&|e| *e == Expect::Refused);
    let kinds = [
        ("created", created),
        ("refused", refused),
        (
            "replay of an item",
            count(&|e| {
                matches!(
                    e,
                    Expect::Replay {
                        of: Source::Item(_),
                        status: 200
                    }
                )
            }),
        ),
        (
            "replayed refusal of an item",
            count(&|e| {
                matches!(
                    e,
                    Expect::Replay {
                        of: Source::Item(_),
                        status: 422
                    }
                )
            }),
        ),
        (
            "replay of a single call",
            count(&|e| {
                matches!(
                    e,
                    Expect::Replay {
                        of: Source::Single(_),
                        status: 200
                    }
                )
            }),
        ),
        (
            "replayed refusal of a single call",
            count(&|e| {
                matches!(
                    e,
                    Expect::Replay {
                        of: Source::Single(_),
                        status: 422
                    }
                )
            }),
        ),
        (
            "mismatch",
            count(&|e| {
                matches!(
                    e,
                    Expect::Problem {
                        code: "idempotency_mismatch",
                        ..
                    }
                )
            }),
        ),
        (
            "unknown",
            count(&|e| {
                matches!(
                    e,
                    Expect::Problem {
                        code: "unknown_account",
                        ..
                    }
                )
            }),
        ),
        (
            "invalid",
            count(&|e| {
                matches!(
                    e,
                    Expect::Problem {
                        code: "validation_failed",
                        ..
                    }
                )
            }),
        ),
        (
            "id required",
            count(&|e| {
                matches!(
                    e,
                    Expect::Problem {
                        code: "id_required",
                        ..
                    }
                )
            }),
        ),
    ];
    for (kind, n) in kinds {
        assert!(
            n > 0,
            "the generated batch has no item of kind {kind}: {kinds:?}"
        );
    }

    let counts_before = app.row_counts().await;
    let r = batch(&app, "independent", &items).await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "{}",
        &r.text[..r.text.len().min(2000)]
    );
    let results = r.body["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 1000);

    let mut wrong = Vec::new();
    for (i, (result, expect)) in results.iter().zip(&expected).enumerate() {
        let status = result["status"].as_u64().unwrap() as u16;
        let replayed = result["replayed"].as_bool().unwrap();
        let body = &result["body"];
        let ok = match expect {
            Expect::Created => {
                status == 201
                    && !replayed
                    && body["status"] == "posted"
                    && body["id"] == items[i]["id"]
                    && legs_of(body) == legs_of(&items[i])
            }
            Expect::Refused => status == 422 && !replayed && body["code"] == "insufficient_funds",
            Expect::Replay { status: s, of } => {
                let source = match of {
                    Source::Item(j) => results[*j]["body"].clone(),
                    Source::Single(n) => singles[*n].1.body.clone(),
                };
                status == *s && replayed && *body == source
            }
            Expect::Problem { status: s, code } => {
                status == *s && !replayed && body["code"] == *code
            }
        };
        if !ok {
            wrong.push(format!(
                "item {i} {}: expected {expect:?}, got {result}",
                items[i]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of 1000 items answered otherwise than their single call would:\n{}",
        wrong.len(),
        wrong
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Balances and rows follow the model.
    let mut actual = BTreeMap::new();
    for w in &wallets {
        actual.insert(w.clone(), app.posted_balance(w).await);
    }
    assert_eq!(actual, model.balances, "final balances");
    let legs: i64 = items
        .iter()
        .zip(&expected)
        .filter(|(_, e)| **e == Expect::Created)
        .map(|(item, _)| item["entries"].as_array().unwrap().len() as i64)
        .sum();
    let counts_after = app.row_counts().await;
    assert_eq!(
        (
            counts_after.0 - counts_before.0,
            counts_after.1 - counts_before.1,
            counts_after.2 - counts_before.2
        ),
        (0, (created + refused) as i64, legs),
        "rows written: one transaction per created or refused item, one entry per leg"
    );

    // The same batch again: every stored answer replays, the rest answer as before, and
    // nothing is written.
    let again = batch(&app, "independent", &items).await;
    assert_eq!(
        again.status,
        StatusCode::OK,
        "{}",
        &again.text[..again.text.len().min(2000)]
    );
    let second = again.body["results"].as_array().unwrap();
    assert_eq!(second.len(), 1000);
    let mut wrong = Vec::new();
    for (i, (first, second)) in results.iter().zip(second).enumerate() {
        let want = match &expected[i] {
            Expect::Created => json!({"status": 200, "replayed": true, "body": first["body"]}),
            Expect::Refused => json!({"status": 422, "replayed": true, "body": first["body"]}),
            _ => first.clone(),
        };
        if *second != want {
            wrong.push(format!("item {i}: first {first}, then {second}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} items answered a retried batch otherwise:\n{}",
        wrong.len(),
        wrong
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        app.row_counts().await,
        counts_after,
        "a retried batch writes nothing"
    );
    let mut actual = BTreeMap::new();
    for w in &wallets {
        actual.insert(w.clone(), app.posted_balance(w).await);
    }
    assert_eq!(actual, model.balances, "balances after the retried batch");

    // A single call of a batch item's id and payload replays the batch's answer.
    let i = expected.iter().position(|e| *e == Expect::Created).unwrap();
    let single = app.post("/v1/transactions", &items[i]).await;
    assert_eq!(single.status, StatusCode::OK, "{}", single.text);
    assert!(single.replayed());
    assert_eq!(
        single.body, results[i]["body"],
        "item {i}'s creation answer"
    );
    let i = expected.iter().position(|e| *e == Expect::Refused).unwrap();
    let single = app.post("/v1/transactions", &items[i]).await;
    assert_eq!(
        single.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        single.text
    );
    assert!(single.replayed());
    assert_eq!(single.body, results[i]["body"], "item {i}'s stored refusal");
    let g = app
        .get(&format!(
            "/v1/transactions/{}",
            items[i]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(g.body["status"], "rejected", "{}", g.text);
    assert_eq!(app.row_counts().await, counts_after);

    app.finish().await;
}

#[tokio::test]
async fn an_independent_batch_item_reusing_the_id_of_an_unstored_item_is_decided_afresh() {
    // Item 0 names an unknown account, so nothing is stored under its id; item 1 reuses the
    // id with another (valid) payload. Two single calls in that order would answer
    // 422 unknown_account, then 201: nothing was stored to mismatch with.
    let app = TestApp::new().await;
    for w in ["w1", "w6"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 100).await;
    let id = Uuid::new_v4();
    let items = [tx(id, "w1", "nobody", 10), tx(id, "w1", "w6", 10)];
    let r = batch(&app, "independent", &items).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.body["results"][0]["body"]["code"], "unknown_account",
        "{}",
        r.text
    );
    assert_eq!(
        r.body["results"][1]["status"], 201,
        "as two single calls would answer: {}",
        r.text
    );
    app.finish().await;
}

#[tokio::test]
async fn a_batch_over_1000_items_or_empty_is_refused() {
    let app = TestApp::new().await;
    for w in ["w1", "w6"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 100_000).await;
    let counts = app.row_counts().await;

    let items: Vec<Value> = (0..1001)
        .map(|_| tx(Uuid::new_v4(), "w1", "w6", 1))
        .collect();
    for mode in ["atomic", "independent"] {
        let r = batch(&app, mode, &items).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{mode}: {}",
            r.text
        );
        assert_eq!(r.code(), "validation_failed", "{mode}: {}", r.text);
        assert_eq!(r.body["errors"][0]["field"], "/items", "{mode}: {}", r.text);

        let r = batch(&app, mode, &[]).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{mode}: {}",
            r.text
        );
        assert_eq!(r.code(), "validation_failed", "{mode}: {}", r.text);
        assert_eq!(r.body["errors"][0]["field"], "/items", "{mode}: {}", r.text);
    }

    let some = &items[..2];
    for (case, body) in [
        ("mode missing", json!({"items": some})),
        ("mode bogus", json!({"mode": "sometimes", "items": some})),
        ("mode capitalised", json!({"mode": "Atomic", "items": some})),
    ] {
        let r = app.post(BATCH, &body).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{case}: {}",
            r.text
        );
        assert_eq!(r.code(), "validation_failed", "{case}: {}", r.text);
        assert_eq!(r.body["errors"][0]["field"], "/mode", "{case}: {}", r.text);
    }
    for (case, body) in [
        ("items missing", json!({"mode": "atomic"})),
        (
            "items not an array",
            json!({"mode": "atomic", "items": {"0": some[0]}}),
        ),
        (
            "unknown field",
            json!({"mode": "atomic", "items": some, "extra": 1}),
        ),
    ] {
        let r = app.post(BATCH, &body).await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{case}: {}",
            r.text
        );
        assert_eq!(r.code(), "validation_failed", "{case}: {}", r.text);
    }

    assert_eq!(
        app.row_counts().await,
        counts,
        "a refused batch writes nothing"
    );
    for item in items.iter().take(3) {
        let id = &item["id"];
        let g = app
            .get(&format!("/v1/transactions/{}", id.as_str().unwrap()))
            .await;
        assert_eq!(g.status, StatusCode::NOT_FOUND);
    }
    app.finish().await;
}

#[tokio::test]
async fn a_mistyped_mode_or_item_status_is_a_validation_failure_not_malformed_json() {
    // `{"mode": null}` and `{"mode": 7}` are well-formed JSON with a mistyped field: the
    // contract's 422 validation_failed, not 400 malformed_json. Likewise an item whose
    // `status` is a number (the item was already parsed as JSON, so it cannot be malformed),
    // in a batch and in its single call.
    let app = TestApp::new().await;
    for w in ["w1", "w6"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 100).await;
    let counts = app.row_counts().await;
    let mut wrong = Vec::new();
    let mut check = |case: &str, status: u16, body: &Value, field: &str| {
        let got = (
            status,
            body["code"].as_str().unwrap_or(""),
            &body["errors"][0]["field"],
        );
        if got != (422, "validation_failed", &json!(field)) {
            wrong.push(format!("{case}: {status} {body}"));
        }
    };
    let some = [tx(Uuid::new_v4(), "w1", "w6", 1)];
    for (case, mode) in [("mode null", json!(null)), ("mode a number", json!(7))] {
        let r = app.post(BATCH, &json!({"mode": mode, "items": some})).await;
        check(case, r.status.as_u16(), &r.body, "/mode");
    }
    let mut item = tx(Uuid::new_v4(), "w1", "w6", 1);
    item["status"] = json!(7);
    let single = app.post("/v1/transactions", &item).await;
    check(
        "single call, status a number",
        single.status.as_u16(),
        &single.body,
        "/status",
    );
    let r = batch(&app, "independent", std::slice::from_ref(&item)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let result = &r.body["results"][0];
    check(
        "batch item, status a number",
        result["status"].as_u64().unwrap_or(0) as u16,
        &result["body"],
        "/status",
    );
    assert_eq!(app.row_counts().await, counts);
    assert!(
        wrong.is_empty(),
        "mistyped fields answered otherwise:\n{}",
        wrong.join("\n")
    );
    app.finish().await;
}

#[tokio::test]
async fn holds_in_a_batch_reserve_funds_for_later_items() {
    let app = TestApp::new().await;
    for w in ["w1", "w6"] {
        app.create_wallet(w).await;
    }
    app.fund("w1", 100).await;
    let hold = |id: Uuid| {
        let mut item = tx(id, "w1", "w6", 80);
        item["status"] = json!("pending");
        item
    };

    // Atomic: the hold leaves 20 available, the transfer of 30 fails the whole batch.
    let ids = [Uuid::new_v4(), Uuid::new_v4()];
    let counts = app.row_counts().await;
    let r = batch(&app, "atomic", &[hold(ids[0]), tx(ids[1], "w1", "w6", 30)]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.code(), "batch_failed");
    assert_eq!(r.body["index"], 1, "{}", r.text);
    assert_eq!(
        r.body["problem"]["code"], "insufficient_funds",
        "{}",
        r.text
    );
    assert_eq!(app.row_counts().await, counts);
    let w1 = app.get("/v1/accounts/w1").await;
    assert_eq!(
        w1.body["balances"]["pending_out"], 0,
        "no hold left behind: {}",
        w1.text
    );

    // Independent: the hold is created, the transfer refused against what is available.
    let ids = [Uuid::new_v4(), Uuid::new_v4()];
    let r = batch(
        &app,
        "independent",
        &[hold(ids[0]), tx(ids[1], "w1", "w6", 30)],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let results = &r.body["results"];
    assert_eq!(results[0]["status"], 201, "{}", r.text);
    assert_eq!(results[0]["body"]["status"], "pending", "{}", r.text);
    assert_eq!(results[1]["status"], 422, "{}", r.text);
    assert_eq!(results[1]["replayed"], false);
    assert_eq!(
        results[1]["body"]["code"], "insufficient_funds",
        "{}",
        r.text
    );
    let detail = results[1]["body"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("0.20"),
        "the detail names the 0.20 available: {detail}"
    );

    let w1 = app.get("/v1/accounts/w1").await;
    let b = &w1.body["balances"];
    assert_eq!(
        (&b["posted"], &b["pending_out"], &b["available"]),
        (&json!(100), &json!(80), &json!(20)),
        "{}",
        w1.text
    );
    let w6 = app.get("/v1/accounts/w6").await;
    let b = &w6.body["balances"];
    assert_eq!(
        (&b["posted"], &b["pending_in"], &b["available"]),
        (&json!(0), &json!(80), &json!(0)),
        "{}",
        w6.text
    );
    let g = app.get(&format!("/v1/transactions/{}", ids[0])).await;
    assert_eq!(g.body["status"], "pending", "{}", g.text);
    let g = app.get(&format!("/v1/transactions/{}", ids[1])).await;
    assert_eq!(g.body["status"], "rejected", "{}", g.text);

    // What is left available can still be spent.
    let r = batch(&app, "independent", &[tx(Uuid::new_v4(), "w1", "w6", 20)]).await;
    assert_eq!(r.body["results"][0]["status"], 201, "{}", r.text);
    let w1 = app.get("/v1/accounts/w1").await;
    assert_eq!(w1.body["balances"]["available"], 0, "{}", w1.text);
    app.finish().await;
}

#[tokio::test]
async fn a_batch_item_with_a_repeated_key_is_refused_like_its_single_call() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    app.fund("w1", 100).await;
    let id = Uuid::new_v4();
    let item = format!(
        r#"{{"id": "{id}", "entries": [{{"account": "w1", "amount": -10}}, {{"account": "w6", "amount": 10}}],
            "metadata": {{}}, "metadata": {{"x": 1}}}}"#
    );
    let single = app
        .raw(
            axum::http::Method::POST,
            "/v1/transactions",
            &[("content-type", "application/json")],
            item.clone(),
        )
        .await;
    assert_eq!(single.body["errors"][0]["code"], "duplicate_field");
    let body = format!(r#"{{"mode": "independent", "items": [{item}]}}"#);
    let r = app
        .raw(
            axum::http::Method::POST,
            "/v1/transactions/batch",
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["results"][0]["status"], 422);
    assert_eq!(r.body["results"][0]["body"], single.body);
    assert_eq!(app.posted_balance("w6").await, 0);
    app.finish().await;
}
