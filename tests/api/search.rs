//! Search and listing: `GET /v1/accounts` by type, currency, status, metadata and id prefix,
//! and `metadata[...]` on `GET /v1/transactions`, with cursor paging; every malformed filter
//! is refused with its code, never ignored.

use super::common::{TestApp, TestResponse};
use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

async fn account(app: &TestApp, id: &str, currency: &str, kind: &str, metadata: Value) {
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": id, "currency": currency, "type": kind, "metadata": metadata}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{id}: {}", r.text);
}

/// The ids of one page, in order.
fn ids(r: &TestResponse) -> Vec<String> {
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every id of a list, page by page (`limit` 2, so that paging is exercised).
async fn all_pages(app: &TestApp, path_and_query: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path_and_query.contains('?') {
            '&'
        } else {
            '?'
        };
        let mut url = format!("{path_and_query}{sep}limit=2");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let r = app.get(&url).await;
        seen.extend(ids(&r));
        match r.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return seen,
        }
    }
}

/// Six customers' wallets (one frozen, one in USD), a system account, and money on two (on
/// both Citus workers: the ids are chosen so).
async fn customers(app: &TestApp) {
    account(
        app,
        "cust-1",
        "SAR",
        "wallet",
        json!({"customer": "c1", "tier": 2, "order": {"id": 42}}),
    )
    .await;
    account(
        app,
        "cust-23",
        "SAR",
        "wallet",
        json!({"customer": "c2", "tier": "2", "order": {"id": "42"}}),
    )
    .await;
    account(
        app,
        "cust-3",
        "SAR",
        "wallet",
        json!({"customer": "c1", "vip": true}),
    )
    .await;
    account(app, "cust-4", "USD", "wallet", json!({"customer": "c1"})).await;
    account(
        app,
        "cust-10",
        "SAR",
        "wallet",
        json!({"customer": "c3", "order": [{"id": 42}]}),
    )
    .await;
    account(app, "shop-1", "SAR", "wallet", json!({})).await;
    account(app, "fees", "SAR", "system", json!({"customer": "c1"})).await;
    let r = app.post_empty("/v1/accounts/cust-3/freeze").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.fund("cust-1", 700).await;
    app.fund("cust-23", 50).await;
}

#[tokio::test]
async fn accounts_are_found_by_type_currency_status_metadata_and_prefix() {
    let app = TestApp::new().await;
    customers(&app).await;
    let find = |q: &'static str| {
        let app = &app;
        async move { all_pages(app, &format!("/v1/accounts?{q}")).await }
    };
    // Bytewise id order; the provider's clearing account, made by the first payment, is listed too.
    assert_eq!(
        find("").await,
        [
            "clearing:test:SAR",
            "cust-1",
            "cust-10",
            "cust-23",
            "cust-3",
            "cust-4",
            "fees",
            "shop-1"
        ]
    );
    assert_eq!(find("type=system").await, ["clearing:test:SAR", "fees"]);
    assert_eq!(find("currency=USD").await, ["cust-4"]);
    assert_eq!(find("status=frozen").await, ["cust-3"]);
    assert_eq!(find("id_prefix=cust-1").await, ["cust-1", "cust-10"]);
    assert_eq!(
        find("metadata[customer]=c1").await,
        ["cust-1", "cust-3", "cust-4", "fees"]
    );
    assert_eq!(
        find("metadata[customer]=c1&type=wallet&currency=SAR").await,
        ["cust-1", "cust-3"]
    );
    // A value typed into a URL matches a string, and the number or boolean it spells.
    assert_eq!(find("metadata[tier]=2").await, ["cust-1", "cust-23"]);
    assert_eq!(find("metadata[vip]=true").await, ["cust-3"]);
    // A JSON pointer names a nested key, exactly: an array on the way is not searched into.
    assert_eq!(find("metadata[/order/id]=42").await, ["cust-1", "cust-23"]);
    assert_eq!(
        find("metadata[/order/id]=42&metadata[customer]=c2").await,
        ["cust-23"]
    );
    assert_eq!(find("metadata[/order/id]=43").await, Vec::<String>::new());
    assert_eq!(find("id_prefix=nobody").await, Vec::<String>::new());

    // Each listed account carries its balances, as its own read does.
    let r = app.get("/v1/accounts?id_prefix=cust-&limit=3").await;
    assert_eq!(ids(&r), ["cust-1", "cust-10", "cust-23"]);
    let first = &r.body["data"][0];
    assert_eq!(first["balances"]["posted"], 700);
    assert_eq!(first["balances"]["available_decimal"], "7.00");
    assert_eq!(first["metadata"]["order"]["id"], 42);
    assert_eq!(r.body["data"][2]["balances"]["posted"], 50);
    assert_eq!(*first, app.get("/v1/accounts/cust-1").await.body);
    app.finish().await;
}

#[tokio::test]
async fn an_account_cursor_continues_its_own_list_only() {
    let app = TestApp::new().await;
    customers(&app).await;
    let r = app.get("/v1/accounts?limit=3").await;
    let cursor = r.body["next_cursor"].as_str().unwrap().to_owned();
    let next = app
        .get(&format!("/v1/accounts?limit=3&cursor={cursor}"))
        .await;
    assert_eq!(ids(&next), ["cust-23", "cust-3", "cust-4"]);
    // A transactions cursor, or an altered one (here: the key gains a NUL), is not an accounts
    // cursor.
    app.transfer(Uuid::new_v4(), "cust-1", "shop-1", 1).await;
    app.transfer(Uuid::new_v4(), "cust-1", "shop-1", 1).await;
    let t = app.get("/v1/transactions?limit=1").await;
    let foreign = t.body["next_cursor"].as_str().unwrap().to_owned();
    for bad in [foreign.as_str(), &format!("{cursor}A"), "5", "YWNjb3VudHM6"] {
        let r = app.get(&format!("/v1/accounts?cursor={bad}")).await;
        assert_problem(&r, "/cursor", "cursor");
    }
    app.finish().await;
}

#[tokio::test]
async fn transactions_are_found_by_metadata() {
    let app = TestApp::new().await;
    for w in ["a", "b", "c"] {
        app.create_wallet(w).await;
    }
    app.fund("a", 1_000).await;
    let mut made = Vec::new();
    for (to, metadata) in [
        ("b", json!({"order": {"id": 42}, "channel": "web"})),
        ("c", json!({"order": {"id": "42"}, "channel": "app"})),
        ("b", json!({"order": {"id": 43}, "channel": "web"})),
        (
            "c",
            json!({"note": "quote\" and \\ backslash", "channel": "web"}),
        ),
    ] {
        let id = Uuid::new_v4();
        let r = app
            .post(
                "/v1/transfers",
                &json!({"id": id, "from": "a", "to": to, "amount": 10, "metadata": metadata}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        made.push(id.to_string());
    }
    let find = |q: String| {
        let app = &app;
        async move { all_pages(app, &format!("/v1/transactions?{q}")).await }
    };
    let newest_first = |picked: &[usize]| -> Vec<String> {
        picked.iter().rev().map(|&i| made[i].clone()).collect()
    };
    assert_eq!(
        find("metadata[/order/id]=42".into()).await,
        newest_first(&[0, 1])
    );
    assert_eq!(
        find("metadata[channel]=web".into()).await,
        newest_first(&[0, 2, 3])
    );
    assert_eq!(
        find("metadata[channel]=web&account=b".into()).await,
        newest_first(&[0, 2])
    );
    assert_eq!(
        find("metadata[channel]=web&metadata[/order/id]=43".into()).await,
        newest_first(&[2])
    );
    // Quotes and backslashes are matched as themselves, never read as path syntax.
    let note = form_urlencoded::byte_serialize(br#"quote" and \ backslash"#).collect::<String>();
    assert_eq!(
        find(format!("metadata[note]={note}")).await,
        newest_first(&[3])
    );
    let injection =
        form_urlencoded::byte_serialize(br#"x" || $.channel == "web"#).collect::<String>();
    assert_eq!(
        find(format!("metadata[note]={injection}")).await,
        Vec::<String>::new()
    );
    // The deposit has no metadata; it is found without filters only.
    assert_eq!(find(String::new()).await.len(), 5);
    app.finish().await;
}

fn assert_problem(r: &TestResponse, field: &str, code: &str) {
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.body["code"], "invalid_query", "{}", r.text);
    let errors = r.body["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e["field"] == field && e["code"] == code),
        "expected {code} at {field}: {}",
        r.text
    );
}

#[tokio::test]
async fn malformed_or_unknown_filters_are_refused_never_ignored() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let eleven: String = (0..11).map(|i| format!("&metadata[k{i}]=v")).collect();
    let deep = format!("metadata[{}]=v", "/k".repeat(17));
    for (list, query, field, code) in [
        ("accounts", "owner=x", "/owner", "unknown_field"),
        ("accounts", "meta[x]=1", "/meta[x]", "unknown_field"),
        (
            "transactions",
            "metadatas[x]=1",
            "/metadatas[x]",
            "metadata_filter",
        ),
        ("accounts", "metadata=1", "/metadata", "metadata_filter"),
        ("accounts", "metadata[]=1", "/metadata[]", "metadata_filter"),
        ("accounts", "metadata[a=1", "/metadata[a", "metadata_filter"),
        (
            "transactions",
            "metadata[/a~2]=1",
            "/metadata[~1a~02]",
            "metadata_filter",
        ),
        ("accounts", &eleven[1..], "/metadata", "filter_limit"),
        (
            "transactions",
            &deep,
            &format!("/metadata[{}]", "~1k".repeat(17)),
            "filter_limit",
        ),
        (
            "accounts",
            "metadata[a]=%00",
            "/metadata[a]",
            "invalid_character",
        ),
        ("accounts", "type=bank", "/type", "invalid_type"),
        ("accounts", "status=open", "/status", "invalid_type"),
        ("accounts", "currency=XYZ", "/currency", "currency"),
        ("accounts", "id_prefix=-w", "/id_prefix", "account_id"),
        ("accounts", "id_prefix=w%20x", "/id_prefix", "account_id"),
        ("accounts", "limit=0", "/limit", "range"),
    ] {
        let r = app.get(&format!("/v1/{list}?{query}")).await;
        assert_problem(&r, field, code);
    }
    // Every fault of one request is named at once.
    let r = app.get("/v1/accounts?metadata[]=1&owner=x").await;
    assert_eq!(r.body["errors"].as_array().unwrap().len(), 2, "{}", r.text);
    // Unusual but valid filters are answered, not failed.
    for query in [
        "metadata[%C3%A9t%C3%A9]=%F0%9F%98%80",
        "metadata[a]=%01%1F",
        "metadata[/]=x",
        "metadata[/a~0b~1c]=x",
        "metadata[a]b]=x",
    ] {
        let r = app.get(&format!("/v1/accounts?{query}")).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {}", r.text);
        assert_eq!(ids(&r), Vec::<String>::new(), "{query}");
    }
    app.finish().await;
}
