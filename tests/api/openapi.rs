//! The committed OpenAPI document is the one the code generates, and the server serves it; it
//! types every body, declares every header and range the server uses, and names each shape
//! once, so a generated client can trust it.

use super::common::TestApp;
use axum::http::StatusCode;
use serde_json::{Value, json};

#[test]
fn committed_openapi_matches_the_code() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
            .unwrap();
    let generated = wallet_ledger::http::openapi::document();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: regenerate it with `cargo run -- openapi > openapi/openapi.json`"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/v1/accounts",
        "/v1/accounts/{id}",
        "/v1/accounts/{id}/entries",
        "/v1/transactions",
        "/v1/transactions/{id}",
        "/v1/transfers",
        "/v1/payments",
        "/healthz",
        "/readyz",
        "/openapi.json",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
}

#[tokio::test]
async fn the_server_serves_its_document() {
    let app = TestApp::new().await;
    let r = app.get("/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, wallet_ledger::http::openapi::document());
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(app.get("/readyz").await.body["status"], "ready");
    app.finish().await;
}

/// The committed document, parsed.
fn doc() -> Value {
    serde_json::from_str(&wallet_ledger::http::openapi::document()).unwrap()
}

/// Every schema object in `value`, with its JSON pointer.
fn schemas<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            if map.contains_key("type") || map.contains_key("$ref") || map.contains_key("oneOf") {
                out.push((at.clone(), value));
            }
            for (key, child) in map {
                schemas(child, format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                schemas(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn no_schema_is_an_object_without_properties() {
    // `type: object` alone reads as `Record<string, never>` in a TypeScript client: an
    // object is either described or declared open (`additionalProperties`).
    let doc = doc();
    let mut all = Vec::new();
    schemas(&doc, String::new(), &mut all);
    let untyped: Vec<&String> = all
        .iter()
        .filter(|(_, s)| {
            let object = match &s["type"] {
                Value::String(t) => t == "object",
                Value::Array(ts) => ts.iter().any(|t| t == "object"),
                _ => false,
            };
            object && s.get("properties").is_none() && s.get("additionalProperties").is_none()
        })
        .map(|(at, _)| at)
        .collect();
    assert!(untyped.is_empty(), "untyped objects: {untyped:#?}");
    // The shapes the issue named are real schemas, not open maps.
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["ItemResult"]["properties"]["body"]["oneOf"],
        json!([{"$ref": "#/components/schemas/TransactionView"}, {"$ref": "#/components/schemas/Problem"}])
    );
    assert_eq!(
        schemas["Problem"]["properties"]["problem"]["$ref"],
        "#/components/schemas/Problem"
    );
    assert_eq!(
        schemas["RunReport"]["properties"]["invariants"]["items"]["$ref"],
        "#/components/schemas/Finding"
    );
    for (path, schema) in [("/healthz", "Health"), ("/readyz", "Readiness")] {
        assert_eq!(
            doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"],
            format!("#/components/schemas/{schema}")
        );
    }
}

#[test]
fn no_schema_repeats_a_named_one_inline() {
    // A page whose items copy `EntryView` gives a generated client a second type for it.
    let doc = doc();
    let named = doc["components"]["schemas"].as_object().unwrap();
    let mut all = Vec::new();
    schemas(&doc, String::new(), &mut all);
    let copies: Vec<String> = all
        .iter()
        .filter(|(at, _)| !at.starts_with("/components/schemas/") || at.matches('/').count() > 3)
        .filter_map(|(at, s)| {
            let (name, _) = named.iter().find(|(_, n)| *n == *s)?;
            Some(format!("{at} copies {name}"))
        })
        .collect();
    assert!(copies.is_empty(), "{copies:#?}");
}

#[test]
fn every_amount_in_a_response_has_both_forms() {
    // The contract: every amount `x` has a sibling `x_decimal`. The reconciliation report's
    // amounts are decimal strings (its format predates the API), so theirs is `x_minor`.
    let doc = doc();
    let amount = |p: &str| {
        [
            "amount",
            "balance_after",
            "posted",
            "pending_in",
            "pending_out",
            "available",
            "overdraft_limit",
            "gross",
            "fee",
            "net",
            "ledger_gross",
        ]
        .contains(&p)
            || p.ends_with("_amount")
    };
    let types = |v: &Value| match &v["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap().to_owned()).collect(),
        _ => vec![],
    };
    let mut missing = Vec::new();
    let mut seen = 0;
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if name.ends_with("Request") {
            continue; // what a client sends: integers only
        }
        let Some(properties) = schema["properties"].as_object() else {
            continue;
        };
        for (property, value) in properties.iter().filter(|(p, _)| amount(p)) {
            seen += 1;
            let (sibling, wanted) = if types(value).contains(&"integer".to_owned()) {
                (format!("{property}_decimal"), "string")
            } else {
                (format!("{property}_minor"), "integer")
            };
            if !properties
                .get(&sibling)
                .is_some_and(|s| types(s).contains(&wanted.to_owned()))
            {
                missing.push(format!("{name}.{property} has no {wanted} {sibling}"));
            }
        }
    }
    assert!(seen >= 15, "found only {seen} amounts");
    assert!(missing.is_empty(), "{missing:#?}");
}

#[tokio::test]
async fn every_limit_states_the_range_the_server_enforces() {
    use wallet_ledger::http::accounts::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
    let doc = doc();
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let mut lists = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(parameters) = item["get"]["parameters"].as_array() else {
            continue;
        };
        let Some(limit) = parameters.iter().find(|p| p["name"] == "limit") else {
            continue;
        };
        lists += 1;
        let schema = &limit["schema"];
        assert_eq!(
            (&schema["minimum"], &schema["maximum"], &schema["default"]),
            (&json!(1), &json!(MAX_PAGE_SIZE), &json!(DEFAULT_PAGE_SIZE)),
            "{path}"
        );
        // The server agrees at both edges (a made-up run id still checks `limit` first).
        let path = path.replace("{id}", "w1").replace(
            "reconciliations/w1",
            &format!("reconciliations/{}", uuid::Uuid::new_v4()),
        );
        for (limit, ok) in [
            (1, true),
            (MAX_PAGE_SIZE, true),
            (0, false),
            (MAX_PAGE_SIZE + 1, false),
        ] {
            let r = app.get(&format!("{path}?limit={limit}")).await;
            let status = r.status.as_u16();
            assert!(
                if ok { status != 400 } else { status == 400 },
                "{path}?limit={limit}: {status} {}",
                r.text
            );
        }
    }
    assert_eq!(lists, 12, "the lists with a limit");
    app.finish().await;
}

/// The headers the document declares for `method path` answering `status` (a response by
/// reference included).
fn declared_headers(doc: &Value, method: &str, path: &str, status: u16) -> Vec<String> {
    let mut response = &doc["paths"][path][method]["responses"][status.to_string()];
    if let Some(reference) = response["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap();
        response = &doc["components"]["responses"][name];
    }
    assert!(
        response.is_object(),
        "{method} {path} does not document {status}"
    );
    response["headers"]
        .as_object()
        .map(|h| h.keys().map(|k| k.to_ascii_lowercase()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn every_response_declares_the_headers_it_carries() {
    let doc = doc();
    for name in ["RequestId", "IdempotentReplayed"] {
        assert!(doc["components"]["headers"][name].is_object(), "{name}");
    }
    // The request-id layers wrap every route: every documented response carries the header.
    let mut undeclared = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for status in operation["responses"].as_object().unwrap().keys() {
                let declared = declared_headers(&doc, method, path, status.parse().unwrap());
                if !declared.contains(&"x-request-id".to_owned()) {
                    undeclared.push(format!("{method} {path} {status}"));
                }
            }
        }
    }
    assert!(undeclared.is_empty(), "no x-request-id: {undeclared:#?}");
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    app.fund("w1", 10_000).await;
    let hold = json!({"id": uuid::Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 100, "status": "pending"});
    let hold_id = hold["id"].as_str().unwrap().to_owned();
    let released = json!({"id": uuid::Uuid::new_v4(), "from": "w1", "to": "w2", "amount": 100, "status": "pending"});
    let released_id = released["id"].as_str().unwrap().to_owned();
    let payment = json!({"id": uuid::Uuid::new_v4(), "account": "w1", "amount": 500, "currency": "SAR", "provider": "p"});
    let payment_id = payment["id"].as_str().unwrap().to_owned();
    let webhook = json!({"id": uuid::Uuid::new_v4(), "url": "https://hooks.example.com/x"});
    // Each request twice: a first answer, then its replay. (A secret rotation's replay is
    // declared too; its header is issue 34's item 9, tested with the webhooks.)
    let requests: Vec<(&str, String, Value)> = vec![
        (
            "/v1/accounts",
            "/v1/accounts".into(),
            json!({"id": "w3", "currency": "SAR", "type": "wallet"}),
        ),
        ("/v1/transfers", "/v1/transfers".into(), hold),
        ("/v1/transfers", "/v1/transfers".into(), released),
        (
            "/v1/transfers",
            "/v1/transfers".into(),
            json!({"id": uuid::Uuid::new_v4(), "from": "w2", "to": "w1", "amount": 1_000_000}),
        ),
        ("/v1/payments", "/v1/payments".into(), payment),
        (
            "/v1/transactions",
            "/v1/transactions".into(),
            json!({"id": uuid::Uuid::new_v4(), "entries": [{"account": "w1", "amount": -1}, {"account": "w2", "amount": 1}]}),
        ),
        (
            "/v1/transactions/{id}/post",
            format!("/v1/transactions/{hold_id}/post"),
            json!({}),
        ),
        (
            "/v1/transactions/{id}/void",
            format!("/v1/transactions/{released_id}/void"),
            json!({}),
        ),
        (
            "/v1/transactions/{id}/reverse",
            format!("/v1/transactions/{payment_id}/reverse"),
            json!({"id": uuid::Uuid::new_v4(), "amount": 100}),
        ),
        ("/v1/webhooks", "/v1/webhooks".into(), webhook),
    ];
    let mut replays = 0;
    let mut problems = Vec::new();
    for (template, path, body) in &requests {
        for attempt in 0..2 {
            let r = app.post(path, body).await;
            let declared = declared_headers(&doc, "post", template, r.status.as_u16());
            if r.headers.contains_key("x-request-id")
                && !declared.contains(&"x-request-id".to_owned())
            {
                problems.push(format!("{template} {}: x-request-id undeclared", r.status));
            }
            if r.replayed() {
                replays += 1;
                if !declared.contains(&"idempotent-replayed".to_owned()) {
                    problems.push(format!(
                        "{template} {}: Idempotent-Replayed undeclared",
                        r.status
                    ));
                }
            } else if attempt == 1 {
                problems.push(format!(
                    "{template}: the repeat was not a replay ({} {})",
                    r.status, r.text
                ));
            }
        }
    }
    // Every other kind of answer carries the request id too: a read, a 404, a shared 401.
    for (template, path, status) in [
        ("/healthz", "/healthz", 200),
        ("/readyz", "/readyz", 200),
        ("/v1/accounts/{id}", "/v1/accounts/w1", 200),
        ("/v1/accounts/{id}", "/v1/accounts/nobody", 404),
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status.as_u16(), status, "{path}: {}", r.text);
        assert!(r.headers.contains_key("x-request-id"), "{path}");
        if !declared_headers(&doc, "get", template, status).contains(&"x-request-id".to_owned()) {
            problems.push(format!("GET {template} {status}: x-request-id undeclared"));
        }
    }
    let r = app
        .raw(
            axum::http::Method::GET,
            "/v1/accounts/w1",
            &[("authorization", "Bearer nope")],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(
        declared_headers(&doc, "get", "/v1/accounts/{id}", 401)
            .contains(&"x-request-id".to_owned())
    );
    assert!(replays >= 10, "{replays} replays");
    assert!(problems.is_empty(), "{problems:#?}");
    app.finish().await;
}
