//! The OpenAPI 3.1 document, generated from the handlers' annotations. The committed
//! `openapi/openapi.json` must equal [`document`] (a test checks it); regenerate it with
//! `cargo run -- openapi > openapi/openapi.json`.
//!
//! The handlers' annotations document what each operation answers of its own; [`Common`]
//! adds what every `/v1` operation may answer through the shared layers (authentication, the
//! rate limit, the extractors, the pool and the timeout), so that a client, and the schema
//! fuzzing of `scripts/schemathesis.sh`, find every status the server can send documented.

use super::{
    accounts, batch, checkpoints, consumer_state, dead_letters, exchanges, health, limits,
    metadata_erasure, metrics, monitors, reconciliations, search, sets, stats, transaction_events,
    transactions, webhooks,
};
use axum::http::Method;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterIn, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, Object, ObjectBuilder, Ref, RefOr, Response, ResponseBuilder, Type,
};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "wallet-ledger",
        description = "A double-entry wallet ledger built on natural idempotency. Every create is keyed by its id: a retry replays the stored answer (`Idempotent-Replayed: true`), a different payload under the same id is `idempotency_mismatch`. Errors are `application/problem+json` with a stable `code`. Integers are JSON integers: a number written with a fraction or an exponent (`5.0`, `5e0`) is refused (422 `invalid_type`), although JSON Schema counts it as the integer 5."
    ),
    paths(
        accounts::create, search::list_accounts, accounts::get, accounts::patch, accounts::entries, accounts::holds,
        accounts::freeze, accounts::unfreeze, accounts::close,
        limits::create, limits::list, limits::delete,
        limits::create_on_set, limits::list_on_set, limits::delete_on_set,
        monitors::create, monitors::list, monitors::get, monitors::delete,
        monitors::create_on_set, monitors::list_on_set, monitors::get_on_set,
        monitors::delete_on_set,
        sets::create, sets::get, sets::add_member, sets::list_members, sets::remove_member,
        transactions::create, transactions::list, transactions::get,
        transactions::transfer, transactions::payment, exchanges::exchange, batch::batch,
        transactions::post, transactions::void, transactions::reverse, metadata_erasure::erase,
        webhooks::create, webhooks::list, webhooks::get, webhooks::delete, webhooks::rotate_secret,
        webhooks::list_deliveries, webhooks::get_delivery, webhooks::redeliver, transaction_events::list,
        reconciliations::list, reconciliations::get, reconciliations::exceptions,
        checkpoints::list, checkpoints::get, checkpoints::head, checkpoints::transaction,
        dead_letters::list, dead_letters::get, dead_letters::replay, dead_letters::drop, consumer_state::get,
        stats::volumes,
        health::healthz, health::readyz, health::openapi, metrics::metrics,
    ),
    components(schemas(super::problem::Problem, crate::problem::FieldError, transactions::StatusFilter)),
    modifiers(&Common),
    tags(
        (name = "accounts", description = "wallets and system accounts, with derived balances"),
        (name = "transactions", description = "moving money, exactly once per id"),
        (name = "limits", description = "velocity limits: at most an amount or a count of movements through a wallet per rolling window, held exactly under its lock"),
        (name = "monitors", description = "balance monitors: an event when a change makes a wallet's balance cross a line, written under its lock with the change"),
        (name = "account sets", description = "groups of wallets and of other sets, with the sums of their balances"),
        (name = "holds", description = "reserving money, then capturing or releasing it exactly once"),
        (name = "webhooks", description = "subscriptions to ledger events and their deliveries (Standard Webhooks, sent once per event id)"),
        (name = "reconciliations", description = "stored runs of the reconciliation job"),
        (name = "checkpoints", description = "signed checkpoints of the journal (every wallet's chain head) and proofs that check offline"),
        (name = "stats", description = "the dashboard's figures, from a rollup"),
        (name = "consumer", description = "the stream consumer: its dead letters (replay, drop) and its backlog"),
        (name = "operations", description = "health, readiness, this document"),
    )
)]
pub struct ApiDoc;

/// The name of the security scheme: `Authorization: Bearer <token>` with an API key.
pub const SECURITY_SCHEME: &str = "bearer";

/// Adds to every operation under `/v1` the bearer security requirement (its role: the scope
/// the operation needs, from [`super::auth::required_scope`], the function that enforces it)
/// and the shared error responses that apply to it, as references to `components/responses`.
/// An operation that documents a status itself keeps its own description.
pub struct Common;

/// What a shared response applies to.
#[derive(Clone, Copy, PartialEq)]
enum When {
    /// Every `/v1` operation.
    Always,
    /// An operation that reads a request body.
    Body,
    /// An operation with a path parameter (an id that may name nothing).
    PathParameter,
    /// An operation with a body or a header parameter (each is validated; a query string's
    /// errors are 400 `invalid_query`).
    BodyOrHeader,
}

/// status, component name, what it applies to, description (the `code`s it carries).
const SHARED: &[(&str, &str, When, &str)] = &[
    (
        "400",
        "BadRequest",
        When::Always,
        "duplicate_header: the `Authorization` (or `Idempotency-Key`) header sent more than once; malformed_json: the body is not one JSON document; id_required: a create with neither an `id` nor an `Idempotency-Key` (each operation lists the ones that apply to it)",
    ),
    (
        "401",
        "Unauthenticated",
        When::Always,
        "unauthenticated: no `Authorization: Bearer <token>`, or an unknown or revoked key",
    ),
    (
        "403",
        "InsufficientScope",
        When::Always,
        "insufficient_scope: the key's scope is below the one this operation needs (its security requirement names it)",
    ),
    (
        "404",
        "NotFound",
        When::PathParameter,
        "not_found: nothing has this id",
    ),
    (
        "408",
        "BodyTimeout",
        When::Body,
        "body_timeout: the body did not arrive within the time allowed (trickled, or shorter than its Content-Length); nothing was done",
    ),
    (
        "413",
        "PayloadTooLarge",
        When::Body,
        "payload_too_large: the body exceeds the configured limit",
    ),
    (
        "415",
        "UnsupportedMediaType",
        When::Body,
        "unsupported_media_type: the body is not `application/json`",
    ),
    (
        "422",
        "ValidationFailed",
        When::BodyOrHeader,
        "validation_failed: a field of the body or a header is invalid (`errors` names each by JSON pointer or name)",
    ),
    (
        "429",
        "RateLimited",
        When::Always,
        "rate_limited: this key sent more requests than its rate allows; retry after `Retry-After` seconds",
    ),
    (
        "500",
        "Internal",
        When::Always,
        "internal: an unexpected error; retry with the same id",
    ),
    (
        "503",
        "Unavailable",
        When::Always,
        "unavailable: the database cannot serve the request now (or it timed out); nothing of it was or will be written; retry with the same id after `Retry-After` seconds. outcome_unknown: the connection was lost after the request's COMMIT was sent; retry with the same id to learn whether it was written",
    ),
];

fn shared_response(status: &str, description: &str) -> Response {
    let problem = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .build();
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", problem);
    let seconds = || {
        HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1)),
            ))
            .description(Some("whole seconds to wait before retrying"))
            .build()
    };
    response = match status {
        "401" => response.header(
            "WWW-Authenticate",
            HeaderBuilder::new()
                .schema(Some(Object::with_type(Type::String)))
                .description(Some("`Bearer`"))
                .build(),
        ),
        "429" | "503" => response.header("Retry-After", seconds()),
        _ => response,
    };
    response.build()
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
        (Method::OPTIONS, item.options.as_mut()),
        (Method::HEAD, item.head.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
        (Method::TRACE, item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
}

fn has_parameter_in(operation: &Operation, wanted: &[ParameterIn]) -> bool {
    operation.parameters.iter().flatten().any(|p| match p {
        RefOr::T(p) => wanted.contains(&p.parameter_in),
        RefOr::Ref(_) => false,
    })
}

fn applies(when: When, operation: &Operation) -> bool {
    match when {
        When::Always => true,
        When::Body => operation.request_body.is_some(),
        When::PathParameter => has_parameter_in(operation, &[ParameterIn::Path]),
        When::BodyOrHeader => {
            operation.request_body.is_some() || has_parameter_in(operation, &[ParameterIn::Header])
        }
    }
}

/// The security scheme, the shared responses and headers, and named page items.
fn register_components(components: &mut utoipa::openapi::Components) {
    components.add_security_scheme(
        SECURITY_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API key's token (`wallet-ledger api-key create`). The requirement's role is the scope the operation needs: read < write < admin.",
                ))
                .build(),
        ),
    );
    for (status, name, _, description) in SHARED {
        components.responses.insert(
            (*name).to_owned(),
            RefOr::T(shared_response(status, description)),
        );
    }
    components.headers.insert(
        REQUEST_ID_COMPONENT.to_owned(),
        RefOr::T(header(&format!("The request's id: the caller's `x-request-id` when it is one header of 1-{} visible ASCII characters, else a new UUID. The log line and the audit row carry the same value.", super::auth::MAX_REQUEST_ID_LEN), None)),
    );
    components.headers.insert(
        REPLAYED_COMPONENT.to_owned(),
        RefOr::T(header("`true`: this is the stored answer of an earlier request with the same id, replayed; nothing was done again. Absent on a first answer.", Some("true"))),
    );
    refer_to_named_items(components);
    super::openapi_rules::refine_schemas(components);
}

impl Modify for Common {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        register_components(doc.components.get_or_insert_with(Default::default));
        for (path, item) in doc.paths.paths.iter_mut() {
            if !path.starts_with("/v1/") {
                continue;
            }
            for (method, operation) in operations(item) {
                if let Some(scope) = super::auth::required_scope(&method, path, false) {
                    operation.security = Some(vec![SecurityRequirement::new(
                        SECURITY_SCHEME,
                        [scope.as_str()],
                    )]);
                }
                for (status, name, when, description) in SHARED {
                    if !applies(*when, operation) {
                        continue;
                    }
                    let response = operation
                        .responses
                        .responses
                        .entry((*status).to_owned())
                        .or_insert_with(|| {
                            RefOr::Ref(Ref::new(format!("#/components/responses/{name}")))
                        });
                    // OpenAPI requires a description on every response: one the handler lists
                    // without its own gets the shared one.
                    if let RefOr::T(response) = response
                        && response.description.is_empty()
                    {
                        response.description = (*description).to_owned();
                    }
                }
                // Which 400s an operation can answer depends on its body and headers.
                let bad_request = bad_request(operation);
                operation.responses.responses.insert(
                    "400".to_owned(),
                    RefOr::T(shared_response("400", &bad_request)),
                );
                optional_body_is_never_null(operation);
                page_limits(operation);
                super::openapi_rules::refine_parameters(operation);
            }
        }
        // Last: the responses added above get their headers too.
        every_response_has_its_headers(doc);
    }
}

/// The names of the reusable headers in `components/headers`.
const REQUEST_ID_COMPONENT: &str = "RequestId";
const REPLAYED_COMPONENT: &str = "IdempotentReplayed";

/// The operations that replay a stored answer with `Idempotent-Replayed: true`, and the
/// statuses such a replay can have: a creation's 200 (its 201 replayed), a stored refusal's
/// 422, a capture's, release's, rotation's or erasure's 200 (the handlers use
/// `responses::created` or set the header themselves).
const REPLAYS: &[(&str, &[&str])] = &[
    ("create_account", &["200"]),
    ("create_transaction", &["200", "422"]),
    ("create_transfer", &["200", "422"]),
    ("create_payment", &["200", "422"]),
    ("create_exchange", &["200", "422"]),
    ("reverse_transaction", &["200", "422"]),
    ("create_webhook", &["200"]),
    ("create_limit", &["200"]),
    ("create_set_limit", &["200"]),
    ("create_set_monitor", &["200"]),
    ("create_monitor", &["200"]),
    ("create_account_set", &["200"]),
    ("capture_hold", &["200"]),
    ("void_hold", &["200"]),
    ("rotate_webhook_secret", &["200"]),
    ("erase_transaction_metadata", &["200"]),
];

fn header(description: &str, value: Option<&str>) -> utoipa::openapi::header::Header {
    let mut schema = ObjectBuilder::new().schema_type(Type::String);
    if let Some(value) = value {
        schema = schema.enum_values(Some([value]));
    }
    HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

fn header_ref(component: &str) -> RefOr<utoipa::openapi::header::Header> {
    RefOr::Ref(Ref::new(format!("#/components/headers/{component}")))
}

/// Every response carries `x-request-id` (the request-id layers wrap every route and the
/// fallbacks); the replaying operations' responses carry `Idempotent-Replayed`.
fn every_response_has_its_headers(doc: &mut utoipa::openapi::OpenApi) {
    let with_request_id = |response: &mut Response| {
        response
            .headers
            .insert("x-request-id".to_owned(), header_ref(REQUEST_ID_COMPONENT));
    };
    if let Some(components) = doc.components.as_mut() {
        for response in components.responses.values_mut() {
            if let RefOr::T(response) = response {
                with_request_id(response);
            }
        }
    }
    for item in doc.paths.paths.values_mut() {
        for (_, operation) in operations(item) {
            let replays = REPLAYS
                .iter()
                .find(|(id, _)| operation.operation_id.as_deref() == Some(*id))
                .map_or(&[][..], |(_, statuses)| *statuses);
            for (status, response) in operation.responses.responses.iter_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                with_request_id(response);
                if replays.contains(&status.as_str()) {
                    response.headers.insert(
                        "Idempotent-Replayed".to_owned(),
                        header_ref(REPLAYED_COMPONENT),
                    );
                }
            }
        }
    }
}

/// `limit` of every list: the range and default that `PageQuery::limit` (and the other
/// queries, through the same constants) enforce, so a typed client never sends `limit: 0`.
fn page_limits(operation: &mut Operation) {
    use super::accounts::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
    for parameter in operation.parameters.iter_mut().flatten() {
        let RefOr::T(parameter) = parameter else {
            continue;
        };
        if parameter.parameter_in == ParameterIn::Query && parameter.name == "limit" {
            parameter.schema = Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::Int64,
                    )))
                    .minimum(Some(1))
                    .maximum(Some(MAX_PAGE_SIZE))
                    .default(Some(DEFAULT_PAGE_SIZE.into()))
                    .into(),
            );
        }
    }
}

/// utoipa writes the items of a generic page (`Page<EntryView>`) inline, a copy of the named
/// schema, so a generated client gets one type per page for the same thing. Each property (or
/// array item) that equals a named schema becomes a reference to it.
fn refer_to_named_items(components: &mut utoipa::openapi::Components) {
    use utoipa::openapi::schema::{ArrayItems, Schema};
    let named: Vec<(String, RefOr<Schema>)> = components
        .schemas
        .iter()
        .map(|(name, schema)| (name.clone(), schema.clone()))
        .collect();
    let as_ref = |schema: &RefOr<Schema>| {
        named
            .iter()
            .find(|(_, named)| named == schema)
            .map(|(name, _)| RefOr::Ref(Ref::from_schema_name(name.clone())))
    };
    for schema in components.schemas.values_mut() {
        let RefOr::T(Schema::Object(object)) = schema else {
            continue;
        };
        for property in object.properties.values_mut() {
            if let RefOr::T(Schema::Array(array)) = property
                && let ArrayItems::RefOrSchema(items) = &mut array.items
                && let Some(reference) = as_ref(items)
            {
                **items = reference;
            } else if let Some(reference) = as_ref(property) {
                *property = reference;
            }
        }
    }
}

/// The 400 of one operation: a repeated `Authorization` (every `/v1` operation) or
/// `Idempotency-Key` (those that take one) is `duplicate_header`; a body that is not one JSON
/// document is `malformed_json`; a create without an id is `id_required`.
fn bad_request(operation: &Operation) -> String {
    let idempotent = operation.parameters.iter().flatten().any(|p| match p {
        RefOr::T(p) => p.parameter_in == ParameterIn::Header && p.name == "Idempotency-Key",
        RefOr::Ref(_) => false,
    });
    let mut codes = vec![if idempotent {
        "duplicate_header: the `Authorization` or `Idempotency-Key` header sent more than once"
    } else {
        "duplicate_header: the `Authorization` header sent more than once"
    }];
    if operation.request_body.is_some() {
        codes.push("malformed_json: the body is not one JSON document");
    }
    if idempotent {
        codes.push("id_required: neither an `id` (for a secret rotation, the `secret`) nor an `Idempotency-Key`");
    }
    if has_parameter_in(operation, &[ParameterIn::Query]) {
        codes.push("invalid_query: a query parameter is unknown, malformed or out of range (`errors` names each by name and code)");
    }
    codes.join("; ")
}

/// utoipa writes an optional body (`Option<T>`) as `oneOf: [T, null]`, but a JSON `null` body
/// is refused (422 `invalid_type`: the body must be an object). Optional means the body may be
/// left out, which `required: false` already says; the schema is just `T`.
fn optional_body_is_never_null(operation: &mut Operation) {
    use utoipa::openapi::schema::{Schema, SchemaType};
    let Some(RefOr::T(body)) = operation.request_body.as_mut() else {
        return;
    };
    for content in body.content.values_mut() {
        let RefOr::T(content) = content else { continue };
        let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema else {
            continue;
        };
        let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
        let rest: Vec<RefOr<Schema>> = one_of
            .items
            .iter()
            .filter(|s| !is_null(s))
            .cloned()
            .collect();
        if let [only] = rest.as_slice() {
            content.schema = Some(only.clone());
        }
    }
}

/// The document as committed: pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut json = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    json.push('\n');
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_v1_operation_documents_its_key_and_the_shared_errors() {
        let doc: serde_json::Value = serde_json::from_str(&document()).unwrap();
        let mut seen = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let responses = operation["responses"].as_object().unwrap();
                if !path.starts_with("/v1/") {
                    assert!(operation.get("security").is_none(), "{method} {path}");
                    continue;
                }
                seen += 1;
                let scope = &operation["security"][0][SECURITY_SCHEME][0];
                assert!(scope.is_string(), "{method} {path} names its scope");
                for status in ["401", "403", "429", "500", "503"] {
                    assert!(responses.contains_key(status), "{method} {path} {status}");
                }
                if path.contains('{') {
                    assert!(responses.contains_key("404"), "{method} {path} 404");
                }
                if operation.get("requestBody").is_some() {
                    for status in ["400", "408", "413", "415", "422"] {
                        assert!(responses.contains_key(status), "{method} {path} {status}");
                    }
                }
            }
        }
        assert!(seen >= 27, "{seen} /v1 operations");
        // Every operation has its own id (a generated client's method name), and every
        // response a description (OpenAPI requires one).
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str().unwrap();
                assert!(
                    ids.insert(id.to_owned()),
                    "{method} {path}: operationId {id} twice"
                );
                for (status, response) in operation["responses"].as_object().unwrap() {
                    assert!(
                        response.get("$ref").is_some()
                            || response["description"]
                                .as_str()
                                .is_some_and(|d| !d.is_empty()),
                        "{method} {path} {status} has no description"
                    );
                }
            }
        }
        // An operation keyed by an `Idempotency-Key` replays, so its 200 declares the header.
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let keyed = operation["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
                let id = operation["operationId"].as_str().unwrap();
                if keyed {
                    assert!(
                        REPLAYS.iter().any(|(r, _)| *r == id),
                        "{method} {path}: {id} takes an Idempotency-Key but is not in REPLAYS"
                    );
                }
            }
        }
        let shared = doc["components"]["responses"].as_object().unwrap();
        assert_eq!(shared.len(), SHARED.len());
        for (_, response) in shared {
            let schema = &response["content"]["application/problem+json"]["schema"]["$ref"];
            assert_eq!(schema, "#/components/schemas/Problem");
        }
    }
}
