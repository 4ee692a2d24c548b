//! Every kind of bad input, as one table: each case names its request (method, path, headers,
//! raw body bytes) and the answer the contract promises (status, problem `code`, and for
//! validation failures the JSON pointer of the offending field). Every case must answer
//! `application/problem+json` with the RFC 9457 members and write nothing at all.

use super::common;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

/// 2^53 − 1: the largest amount the contract allows.
const MAX: i64 = 9_007_199_254_740_991;

/// One bad request and the answer it must get.
struct Case {
    name: &'static str,
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
    /// For 422 `validation_failed` and 400 `invalid_query`: a JSON pointer (or parameter name)
    /// that must appear among `errors[].field`.
    field: Option<&'static str>,
}

impl Case {
    fn new(name: &'static str, method: Method, path: impl Into<String>) -> Case {
        Case {
            name,
            method,
            path: path.into(),
            headers: Vec::new(),
            body: Vec::new(),
            status: 0,
            code: "",
            field: None,
        }
    }

    /// A POST with a JSON body and `content-type: application/json`.
    fn post(name: &'static str, path: &str, body: Value) -> Case {
        Case::post_raw(name, path, body.to_string())
    }

    /// A POST with these exact body bytes and `content-type: application/json`.
    fn post_raw(name: &'static str, path: &str, body: impl Into<Vec<u8>>) -> Case {
        let mut case = Case::new(name, Method::POST, path);
        case.body = body.into();
        case.header("content-type", "application/json")
    }

    fn get(name: &'static str, path: impl Into<String>) -> Case {
        Case::new(name, Method::GET, path)
    }

    fn body(mut self, body: Value) -> Case {
        self.body = body.to_string().into_bytes();
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }

    fn without_header(mut self, name: &'static str) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self
    }

    fn expect(mut self, status: u16, code: &'static str) -> Case {
        self.status = status;
        self.code = code;
        self
    }

    /// Shorthand for 422 `validation_failed` pointing at `field`.
    fn invalid(self, field: &'static str) -> Case {
        let mut case = self.expect(422, "validation_failed");
        case.field = Some(field);
        case
    }

    /// Shorthand for 400 `invalid_query` pointing at the query parameter `field`.
    fn bad_query(self, field: &'static str) -> Case {
        let mut case = self.expect(400, "invalid_query");
        case.field = Some(field);
        case
    }
}

fn id() -> String {
    Uuid::new_v4().to_string()
}

fn transfer(from: &str, to: &str, amount: Value) -> Value {
    json!({"id": id(), "from": from, "to": to, "amount": amount})
}

fn payment(account: &str, amount: Value, currency: &str, provider: &str) -> Value {
    json!({"id": id(), "account": account, "amount": amount, "currency": currency, "provider": provider})
}

fn transaction(entries: &[(&str, i64)]) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(account, amount)| json!({"account": account, "amount": amount}))
        .collect();
    json!({"id": id(), "entries": entries})
}

fn account(id: &str, currency: &str, kind: &str) -> Value {
    json!({"id": id, "currency": currency, "type": kind})
}

/// `base` with `key` set to `value`.
fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

/// `base` without `key`.
fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().unwrap().remove(key);
    base
}

fn cases() -> Vec<Case> {
    let ok_transfer = || transfer("w1", "w2", json!(100));
    let too_long = "a".repeat(129);
    let big_metadata = json!({"id": id(), "from": "w1", "to": "w2", "amount": 1,
        "metadata": {"blob": "x".repeat(300 * 1024)}});
    let many_legs: Vec<Value> = std::iter::once(json!({"account": "w1", "amount": -100}))
        .chain((0..100).map(|i| json!({"account": format!("a{i}"), "amount": 1})))
        .collect();
    vec![
        // --- Malformed JSON: 400 malformed_json.
        Case::post_raw("truncated JSON", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amount": "#, id()))
            .expect(400, "malformed_json"),
        Case::post_raw("trailing garbage after the document", "/v1/transfers", format!("{} xyz", ok_transfer()))
            .expect(400, "malformed_json"),
        Case::post_raw("two documents back to back", "/v1/transfers", format!("{}{}", ok_transfer(), ok_transfer()))
            .expect(400, "malformed_json"),
        Case::post_raw("empty body", "/v1/transfers", "").expect(400, "malformed_json"),
        Case::post_raw("whitespace-only body", "/v1/payments", "  \n ").expect(400, "malformed_json"),
        Case::post_raw("form-encoded body sent as JSON", "/v1/transfers", "from=w1&to=w2&amount=100")
            .expect(400, "malformed_json"),
        Case::post_raw("trailing comma", "/v1/transactions", format!(r#"{{"id": "{}", "entries": [],}}"#, id()))
            .expect(400, "malformed_json"),
        Case::post_raw("single-quoted strings", "/v1/accounts", "{'id': 'x1', 'currency': 'SAR', 'type': 'wallet'}")
            .expect(400, "malformed_json"),
        Case::post_raw("invalid UTF-8 in a string", "/v1/accounts", b"{\"id\": \"x\xff\", \"currency\": \"SAR\", \"type\": \"wallet\"}".to_vec())
            .expect(400, "malformed_json"),
        // --- Content type: 415 unsupported_media_type.
        Case::post("content type text/plain", "/v1/transfers", ok_transfer())
            .header("content-type", "text/plain")
            .expect(415, "unsupported_media_type"),
        Case::post("no content type", "/v1/transfers", ok_transfer())
            .without_header("content-type")
            .expect(415, "unsupported_media_type"),
        Case::post("content type form-urlencoded", "/v1/payments", payment("w1", json!(100), "SAR", "test"))
            .header("content-type", "application/x-www-form-urlencoded")
            .expect(415, "unsupported_media_type"),
        Case::post("content type application/jsonx", "/v1/accounts", account("x1", "SAR", "wallet"))
            .header("content-type", "application/jsonx")
            .expect(415, "unsupported_media_type"),
        // --- Well-formed JSON of the wrong shape: 422.
        Case::post_raw("JSON null instead of an object", "/v1/transfers", "null").expect(422, "validation_failed"),
        Case::post_raw("JSON array instead of an object", "/v1/transfers", "[1, 2]").expect(422, "validation_failed"),
        // serde would otherwise read a struct from a positional array: the contract's bodies
        // are objects with named fields, so an array that lines up with them is still refused.
        Case::post("positional array lining up with a transfer's fields", "/v1/transfers", json!([id(), "w1", "w2", 100, null, null, null, null]))
            .expect(422, "validation_failed"),
        Case::post("positional array lining up with an account's fields", "/v1/accounts", json!(["x9", "SAR", "wallet", null, null]))
            .expect(422, "validation_failed"),
        Case::post_raw("duplicate key", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amount": 1, "amount": 2}}"#, id()))
            .expect(422, "validation_failed"),
        // --- Missing fields.
        Case::post("transfer without amount", "/v1/transfers", without(ok_transfer(), "amount")).invalid("/amount"),
        Case::post("transfer without to", "/v1/transfers", without(ok_transfer(), "to")).invalid("/to"),
        Case::post("transaction without entries", "/v1/transactions", json!({"id": id()})).invalid("/entries"),
        Case::post("entry without amount", "/v1/transactions", json!({"id": id(), "entries": [{"account": "w1"}, {"account": "w2", "amount": 1}]}))
            .invalid("/entries/0/amount"),
        Case::post("payment without provider", "/v1/payments", without(payment("w1", json!(100), "SAR", "test"), "provider"))
            .invalid("/provider"),
        Case::post("account without type", "/v1/accounts", json!({"id": "x1", "currency": "SAR"})).invalid("/type"),
        // --- Unknown fields (typos must never be ignored).
        Case::post_raw("typo amout instead of amount", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amout": 100}}"#, id()))
            .invalid("/amout"),
        Case::post("typo amout next to amount", "/v1/transfers", with(ok_transfer(), "amout", json!(100))).invalid("/amout"),
        Case::post("unknown field in an entry", "/v1/transactions", json!({"id": id(), "entries": [{"account": "w1", "amount": -1, "memo": "x"}, {"account": "w2", "amount": 1}]}))
            .invalid("/entries/0/memo"),
        Case::post("unknown field on an account", "/v1/accounts", with(account("x1", "SAR", "wallet"), "overdraft", json!(5)))
            .invalid("/overdraft"),
        // --- Wrong types.
        Case::post("amount as a string", "/v1/transfers", transfer("w1", "w2", json!("100"))).invalid("/amount"),
        Case::post("amount as float 1.5", "/v1/transfers", transfer("w1", "w2", json!(1.5))).invalid("/amount"),
        Case::post_raw("amount as float 100.0", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amount": 100.0}}"#, id()))
            .invalid("/amount"),
        Case::post_raw("amount in exponent notation 1e2", "/v1/payments", format!(r#"{{"id": "{}", "account": "w1", "amount": 1e2, "currency": "SAR", "provider": "test"}}"#, id()))
            .invalid("/amount"),
        Case::post("amount as an object", "/v1/transfers", transfer("w1", "w2", json!({"value": 100}))).invalid("/amount"),
        Case::post("amount null", "/v1/transfers", transfer("w1", "w2", Value::Null)).invalid("/amount"),
        Case::post("from as a number", "/v1/transfers", with(ok_transfer(), "from", json!(1))).invalid("/from"),
        Case::post("entries as an object", "/v1/transactions", json!({"id": id(), "entries": {"w1": -1, "w2": 1}})).invalid("/entries"),
        Case::post("entry amount as a string", "/v1/transactions", json!({"id": id(), "entries": [{"account": "w1", "amount": "-1"}, {"account": "w2", "amount": 1}]}))
            .invalid("/entries/0/amount"),
        Case::post("invalid UUID id on a transfer", "/v1/transfers", with(ok_transfer(), "id", json!("not-a-uuid"))).invalid("/id"),
        Case::post("invalid UUID id on a transaction", "/v1/transactions", with(transaction(&[("w1", -1), ("w2", 1)]), "id", json!("1234"))).invalid("/id"),
        Case::post("id as a number", "/v1/payments", with(payment("w1", json!(1), "SAR", "test"), "id", json!(42))).invalid("/id"),
        // --- Amounts out of range on transfers and payments.
        Case::post("transfer of zero", "/v1/transfers", transfer("w1", "w2", json!(0))).invalid("/amount"),
        Case::post("transfer of a negative amount", "/v1/transfers", transfer("w1", "w2", json!(-100))).invalid("/amount"),
        Case::post_raw("transfer of minus zero", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amount": -0}}"#, id()))
            .invalid("/amount"),
        Case::post("transfer of 2^53", "/v1/transfers", transfer("w1", "w2", json!(MAX + 1))).invalid("/amount"),
        Case::post_raw("transfer of 1e20 as an integer literal", "/v1/transfers", format!(r#"{{"id": "{}", "from": "w1", "to": "w2", "amount": 100000000000000000000}}"#, id()))
            .invalid("/amount"),
        Case::post("transfer of i64::MIN", "/v1/transfers", transfer("w1", "w2", json!(i64::MIN))).invalid("/amount"),
        Case::post("payment of zero", "/v1/payments", payment("w1", json!(0), "SAR", "test")).invalid("/amount"),
        Case::post("payment of a negative amount", "/v1/payments", payment("w1", json!(-5), "SAR", "test")).invalid("/amount"),
        Case::post("payment of 2^53", "/v1/payments", payment("w1", json!(MAX + 1), "SAR", "test")).invalid("/amount"),
        Case::post_raw("payment of 1e20 as an integer literal", "/v1/payments", format!(r#"{{"id": "{}", "account": "w1", "amount": 100000000000000000000, "currency": "SAR", "provider": "test"}}"#, id()))
            .invalid("/amount"),
        Case::post("payment that would push the wallet past 2^53 - 1", "/v1/payments", payment("w1", json!(MAX), "SAR", "test")).invalid("/amount"),
        // --- Multi-leg transactions: the journal rules.
        Case::post("sum of legs overflows", "/v1/transactions", transaction(&[("w1", MAX), ("w2", MAX), ("clearing:test:SAR", -1)]))
            .invalid("/entries"),
        Case::post("balanced legs whose total exceeds 2^53 - 1", "/v1/transactions", transaction(&[("w1", MAX), ("w2", MAX), ("clearing:test:SAR", -MAX), ("x1", -MAX)]))
            .invalid("/entries"),
        Case::post("leg of 2^53", "/v1/transactions", transaction(&[("w1", -(MAX + 1)), ("w2", MAX + 1)])).invalid("/entries/0/amount"),
        Case::post("entries as positional arrays", "/v1/transactions", json!({"id": id(), "entries": [["w1", -100], ["w2", 100]]}))
            .invalid("/entries/0"),
        Case::post("unbalanced entries", "/v1/transactions", transaction(&[("w1", -100), ("w2", 99)])).invalid("/entries"),
        Case::post("a single entry", "/v1/transactions", transaction(&[("w1", 100)])).invalid("/entries"),
        Case::post("no entries", "/v1/transactions", transaction(&[])).invalid("/entries"),
        Case::post("101 entries (the most is 100)", "/v1/transactions", json!({"id": id(), "entries": many_legs})).invalid("/entries"),
        Case::post("zero-amount leg", "/v1/transactions", transaction(&[("w1", -100), ("w2", 100), ("clearing:test:SAR", 0)]))
            .invalid("/entries/2/amount"),
        Case::post("same account twice in a transaction", "/v1/transactions", transaction(&[("w1", -100), ("w1", 100)]))
            .invalid("/entries/1/account"),
        Case::post("mixed currencies in a transaction", "/v1/transactions", transaction(&[("w1", -100), ("u1", 100)]))
            .invalid("/entries/1/account"),
        Case::post("unknown account in a transaction", "/v1/transactions", transaction(&[("w1", -100), ("nobody", 100)]))
            .expect(422, "unknown_account"),
        Case::post("invalid account id in an entry", "/v1/transactions", transaction(&[("w1", -100), ("a b", 100)]))
            .invalid("/entries/1/account"),
        Case::post("transaction status bogus", "/v1/transactions", with(transaction(&[("w1", -1), ("w2", 1)]), "status", json!("bogus")))
            .invalid("/status"),
        Case::post("transaction metadata is an array", "/v1/transactions", with(transaction(&[("w1", -1), ("w2", 1)]), "metadata", json!([1, 2])))
            .invalid("/metadata"),
        Case::post("transaction without id nor Idempotency-Key", "/v1/transactions", without(transaction(&[("w1", -1), ("w2", 1)]), "id"))
            .expect(400, "id_required"),
        // --- Transfers.
        Case::post("transfer across currencies w1 -> u1", "/v1/transfers", transfer("w1", "u1", json!(100))).invalid("/to"),
        Case::post("transfer to an unknown account", "/v1/transfers", transfer("w1", "nobody", json!(100))).expect(422, "unknown_account"),
        Case::post("transfer from an unknown account", "/v1/transfers", transfer("nobody", "w2", json!(100))).expect(422, "unknown_account"),
        Case::post("transfer w1 -> w1", "/v1/transfers", transfer("w1", "w1", json!(100))).invalid("/to"),
        Case::post("transfer to an id of 129 characters", "/v1/transfers", transfer("w1", &too_long, json!(100))).invalid("/to"),
        Case::post("transfer from '.'", "/v1/transfers", transfer(".", "w2", json!(100))).invalid("/from"),
        Case::post("transfer to 'a/b'", "/v1/transfers", transfer("w1", "a/b", json!(100))).invalid("/to"),
        Case::post("transfer to an empty id", "/v1/transfers", transfer("w1", "", json!(100))).invalid("/to"),
        Case::post("transfer without id nor Idempotency-Key", "/v1/transfers", without(ok_transfer(), "id")).expect(400, "id_required"),
        Case::post("Idempotency-Key of 256 characters", "/v1/transfers", without(ok_transfer(), "id"))
            .header("idempotency-key", "k".repeat(256))
            .invalid("Idempotency-Key"),
        Case::post("Idempotency-Key quoted and empty", "/v1/transfers", without(ok_transfer(), "id"))
            .header("idempotency-key", "\"\"")
            .invalid("Idempotency-Key"),
        Case::post("Idempotency-Key with an unterminated quote", "/v1/transfers", without(ok_transfer(), "id"))
            .header("idempotency-key", "\"abc")
            .invalid("Idempotency-Key"),
        Case::post("body over the 256 KiB limit", "/v1/transfers", big_metadata).expect(413, "payload_too_large"),
        Case::post("metadata is a string", "/v1/transfers", with(ok_transfer(), "metadata", json!("note"))).invalid("/metadata"),
        Case::post("a hold expiring in the past", "/v1/transfers",
            with(with(ok_transfer(), "status", json!("pending")), "expires_at", json!("2020-01-01T00:00:00Z")))
            .invalid("/expires_at"),
        Case::post("status bogus", "/v1/transfers", with(ok_transfer(), "status", json!("bogus"))).invalid("/status"),
        Case::post("expires_at on a posted transfer", "/v1/transfers",
            with(with(ok_transfer(), "status", json!("posted")), "expires_at", json!("2030-01-01T00:00:00Z")))
            .invalid("/expires_at"),
        Case::post("expires_at that is not a time", "/v1/transfers", with(ok_transfer(), "expires_at", json!("tomorrow"))).invalid("/expires_at"),
        Case::post("external_ref of 256 characters", "/v1/transfers", with(ok_transfer(), "external_ref", json!("r".repeat(256))))
            .invalid("/external_ref"),
        Case::post("external_ref empty", "/v1/transfers", with(ok_transfer(), "external_ref", json!(""))).invalid("/external_ref"),
        // --- Payments.
        Case::post("payment in currency XYZ", "/v1/payments", payment("w1", json!(100), "XYZ", "test")).invalid("/currency"),
        Case::post("payment in lowercase sar", "/v1/payments", payment("w1", json!(100), "sar", "test")).invalid("/currency"),
        Case::post("payment to its own clearing account", "/v1/payments", payment("clearing:test:SAR", json!(100), "SAR", "test"))
            .invalid("/account"),
        Case::post("payment to a system account", "/v1/payments", payment("clearing:test:SAR", json!(100), "SAR", "other"))
            .invalid("/account"),
        Case::post("payment in USD to a SAR wallet", "/v1/payments", payment("w1", json!(100), "USD", "test")).invalid("/account"),
        Case::post("payment in SAR to a USD wallet", "/v1/payments", payment("u1", json!(100), "SAR", "test")).invalid("/account"),
        Case::post("payment to an unknown wallet via a new provider", "/v1/payments", payment("nobody", json!(100), "SAR", "newprovider"))
            .expect(422, "unknown_account"),
        Case::post("payment with a provider containing ':'", "/v1/payments", payment("w1", json!(100), "SAR", "a:b")).invalid("/provider"),
        Case::post("payment without id nor Idempotency-Key", "/v1/payments", without(payment("w1", json!(100), "SAR", "test"), "id"))
            .expect(400, "id_required"),
        // --- Accounts.
        Case::post("account in currency XYZ", "/v1/accounts", account("x1", "XYZ", "wallet")).invalid("/currency"),
        Case::post("account in lowercase sar", "/v1/accounts", account("x1", "sar", "wallet")).invalid("/currency"),
        Case::post("account type bogus", "/v1/accounts", account("x1", "SAR", "bogus")).invalid("/type"),
        Case::post("overdraft_limit on a system account", "/v1/accounts", with(account("x1", "SAR", "system"), "overdraft_limit", json!(100)))
            .invalid("/overdraft_limit"),
        Case::post("negative overdraft_limit", "/v1/accounts", with(account("x1", "SAR", "wallet"), "overdraft_limit", json!(-1)))
            .invalid("/overdraft_limit"),
        Case::post("overdraft_limit of 2^53", "/v1/accounts", with(account("x1", "SAR", "wallet"), "overdraft_limit", json!(MAX + 1)))
            .invalid("/overdraft_limit"),
        Case::post("account id of 129 characters", "/v1/accounts", account(&too_long, "SAR", "wallet")).invalid("/id"),
        Case::post("account id '.'", "/v1/accounts", account(".", "SAR", "wallet")).invalid("/id"),
        Case::post("account id starting with '-'", "/v1/accounts", account("-a", "SAR", "wallet")).invalid("/id"),
        Case::post("account id 'a b'", "/v1/accounts", account("a b", "SAR", "wallet")).invalid("/id"),
        Case::post("account id 'a/b'", "/v1/accounts", account("a/b", "SAR", "wallet")).invalid("/id"),
        Case::post("account id 'é'", "/v1/accounts", account("é", "SAR", "wallet")).invalid("/id"),
        Case::post("account id empty", "/v1/accounts", account("", "SAR", "wallet")).invalid("/id"),
        Case::post("account metadata is an array", "/v1/accounts", with(account("x1", "SAR", "wallet"), "metadata", json!(["a"])))
            .invalid("/metadata"),
        Case::post("account without id nor Idempotency-Key", "/v1/accounts", json!({"currency": "SAR", "type": "wallet"}))
            .expect(400, "id_required"),
        Case::post("existing account id with another currency", "/v1/accounts", account("w1", "USD", "wallet"))
            .expect(422, "idempotency_mismatch"),
        Case::new("PATCH with a negative version", Method::PATCH, "/v1/accounts/w1")
            .header("content-type", "application/json")
            .body(json!({"version": -1, "metadata": {"a": 1}}))
            .invalid("/version"),
        Case::new("PATCH of an unknown account", Method::PATCH, "/v1/accounts/nobody")
            .header("content-type", "application/json")
            .body(json!({"version": 1, "metadata": {"a": 1}}))
            .expect(404, "not_found"),
        Case::new("freeze an unknown account", Method::POST, "/v1/accounts/nobody/freeze").expect(404, "not_found"),
        // --- Routing.
        Case::get("unknown route", "/v1/nope").expect(404, "not_found"),
        Case::post("POST to an unknown route", "/v1/transfer", ok_transfer()).expect(404, "not_found"),
        Case::get("GET of a POST-only path", "/v1/transfers").expect(405, "method_not_allowed"),
        Case::new("DELETE of an account", Method::DELETE, "/v1/accounts/w1").expect(405, "method_not_allowed"),
        Case::new("PUT on transactions", Method::PUT, "/v1/transactions")
            .header("content-type", "application/json")
            .body(transaction(&[("w1", -1), ("w2", 1)]))
            .expect(405, "method_not_allowed"),
        Case::get("GET a transaction by a non-UUID id", "/v1/transactions/not-a-uuid").expect(404, "not_found"),
        Case::get("GET an unknown transaction", format!("/v1/transactions/{}", id())).expect(404, "not_found"),
        Case::get("GET an unknown account", "/v1/accounts/nobody").expect(404, "not_found"),
        Case::get("GET entries of an unknown account", "/v1/accounts/nobody/entries").expect(404, "not_found"),
        // --- Query parameters: 400 naming the parameter.
        Case::get("list with limit=0", "/v1/transactions?limit=0").bad_query("/limit"),
        Case::get("list with limit=501", "/v1/transactions?limit=501").bad_query("/limit"),
        Case::get("list with limit=abc", "/v1/transactions?limit=abc").bad_query("/limit"),
        Case::get("list with limit=-1", "/v1/transactions?limit=-1").bad_query("/limit"),
        Case::get("list with status=bogus", "/v1/transactions?status=bogus").bad_query("/status"),
        Case::get("list with an unknown parameter", "/v1/transactions?colour=red").bad_query("/colour"),
        Case::get("list with cursor=xyz", "/v1/transactions?cursor=xyz").bad_query("/cursor"),
        Case::get("entries with cursor=xyz", "/v1/accounts/w1/entries?cursor=xyz").bad_query("/cursor"),
        Case::get("entries with limit=501", "/v1/accounts/w1/entries?limit=501").bad_query("/limit"),
        Case::get("account as_of that is not a time", "/v1/accounts/w1?as_of=yesterday").bad_query("/as_of"),
    ]
}

/// Everything the requests could change, as one digest: a bad request must leave it alone
/// (row counts alone would miss an UPDATE).
async fn fingerprint(app: &common::TestApp) -> String {
    sqlx::query_scalar(
        "select md5(concat_ws('#',
            (select string_agg(a::text, '|' order by id) from accounts a),
            (select string_agg(t::text, '|' order by seq) from transactions t),
            (select string_agg(e::text, '|' order by id) from entries e),
            (select string_agg(c::text, '|' order by account_id, below_xid) from account_checkpoints c)))",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_bad_input_answers_its_status_and_code_and_writes_nothing() {
    let app = common::TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.create_account("u1", "USD", "wallet").await;
    app.fund("w1", 10_000).await;
    let mut counts = app.row_counts().await;
    assert_eq!(
        counts,
        (4, 1, 2),
        "setup: w1, w2, u1, clearing:test:SAR; one payment"
    );
    let mut digest = fingerprint(&app).await;

    let cases = cases();
    assert!(cases.len() >= 35, "the table has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let headers: Vec<(&str, &str)> =
            case.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let r = app
            .raw(case.method.clone(), &case.path, &headers, case.body.clone())
            .await;
        let mut problems = Vec::new();
        if r.status != StatusCode::from_u16(case.status).unwrap() {
            problems.push(format!(
                "status {} (expected {})",
                r.status.as_u16(),
                case.status
            ));
        }
        if r.code() != case.code {
            problems.push(format!("code {:?} (expected {:?})", r.code(), case.code));
        }
        if r.content_type() != "application/problem+json" {
            problems.push(format!("content-type {:?}", r.content_type()));
        }
        for member in ["type", "title", "detail", "code"] {
            if !r.body[member].is_string() {
                problems.push(format!("no string member {member:?}"));
            }
        }
        if r.body["status"].as_u64() != Some(u64::from(r.status.as_u16())) {
            problems.push(format!(
                "body status {} differs from HTTP {}",
                r.body["status"],
                r.status.as_u16()
            ));
        }
        if let Some(field) = case.field {
            let fields: Vec<&str> = r.body["errors"]
                .as_array()
                .map(|errors| errors.iter().filter_map(|e| e["field"].as_str()).collect())
                .unwrap_or_default();
            if !fields.contains(&field) {
                problems.push(format!("errors[].field {fields:?} lacks {field:?}"));
            }
        }
        // A case that wrote something is reported, and becomes the new baseline so that the
        // cases after it are judged on their own.
        let after = app.row_counts().await;
        if after != counts {
            problems.push(format!("row counts changed from {counts:?} to {after:?}"));
            counts = after;
        }
        let digest_after = fingerprint(&app).await;
        if digest_after != digest {
            problems.push("stored rows changed".into());
            digest = digest_after;
        }
        if !problems.is_empty() {
            let shown: String = r.text.chars().take(600).collect();
            failures.push(format!(
                "{} ({} {}): {}\n    body: {shown}",
                case.name,
                case.method,
                case.path.chars().take(80).collect::<String>(),
                problems.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n  {}",
        failures.len(),
        cases.len(),
        failures.join("\n  ")
    );
    app.finish().await;
}
