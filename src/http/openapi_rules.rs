//! Rules of the validation that the handlers' annotations cannot state field by field, added to
//! the OpenAPI document by [`super::openapi::Common`]: the shape of the `Idempotency-Key` header
//! and of list cursors (checked by extractors shared by many operations), and the rules that
//! tie one field of a create to another. Each is written next to the constant or function that
//! enforces it, or says which one, so that the document stays as strict as the server and no
//! stricter.

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{Components, ObjectBuilder, RefOr, Type};

/// Every `Idempotency-Key` header: the rule of `ids::parse_idempotency_key`.
/// Every `cursor` query parameter: base64url without padding, as `accounts::next_cursor` and
/// `next_key_cursor` write it (anything else is refused before it is decoded).
pub fn refine_parameters(operation: &mut Operation) {
    for parameter in operation.parameters.iter_mut().flatten() {
        let RefOr::T(parameter) = parameter else {
            continue;
        };
        let schema = match (&parameter.parameter_in, parameter.name.as_str()) {
            (ParameterIn::Header, "Idempotency-Key") => ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(crate::ledger::ids::IDEMPOTENCY_KEY_PATTERN))
                .examples(["order-42"]),
            (ParameterIn::Query, "cursor") => ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[A-Za-z0-9_-]+$")),
            _ => continue,
        };
        parameter.schema = Some(schema.into());
    }
}

/// The creates whose `status` decides which of `expires_at` and `effective_at` applies
/// (`requests::requested` and `requests::effective` refuse the other as `not_applicable`).
const DATED: &[&str] = &[
    "CreateTransactionRequest",
    "TransferRequest",
    "ExchangeRequest",
];

/// What no create may combine, as one `not` over the refused combinations (a single keyword,
/// which typed-client generators leave alone: the request types stay plain objects).
pub fn refine_schemas(components: &mut Components) {
    for (name, schema) in components.schemas.iter_mut() {
        let mut refused = Vec::new();
        if DATED.contains(&name.as_str()) {
            refused.extend(dated_refusals());
        }
        if name == "ExchangeRequest" {
            refused.push(no_exchange_terms());
        }
        if name == "CreateLimitRequest" {
            refused.extend(limit_bound_refusals());
        }
        let RefOr::T(Schema::Object(object)) = schema else {
            continue;
        };
        for (property, not) in refused_values(name) {
            if let Some(RefOr::T(Schema::Object(field))) = object.properties.get_mut(*property) {
                field
                    .extensions
                    .get_or_insert_with(Default::default)
                    .insert("not".into(), not());
            }
        }
        if !refused.is_empty() {
            object
                .extensions
                .get_or_insert_with(Default::default)
                .insert("not".into(), serde_json::json!({ "anyOf": refused }));
        }
    }
}

/// Values of one field that its type, range and pattern admit and its validation refuses, each
/// as the `not` of that property.
type RefusedValue = (&'static str, fn() -> serde_json::Value);

fn refused_values(schema: &str) -> &'static [RefusedValue] {
    match schema {
        // `validate::signed_amount`: a leg of zero is `range` ("must not be zero").
        "EntryRequest" => &[("amount", zero)],
        // `exchange::Rate::parse`: a rate of zero (`"0"`, `"0.00"`) is `rate`.
        "ExchangeRequest" => &[("rate", zero_rate)],
        _ => &[],
    }
}

fn zero() -> serde_json::Value {
    serde_json::json!({ "const": 0 })
}

fn zero_rate() -> serde_json::Value {
    serde_json::json!({ "type": "string", "pattern": "^[0.]*$" })
}

/// `expires_at` on a posted transaction (no `status` is `posted`), `effective_at` on a hold.
fn dated_refusals() -> [serde_json::Value; 2] {
    use serde_json::json;
    [
        json!({
            "description": "expires_at applies to holds (`status: pending`) only",
            "required": ["expires_at"],
            "properties": {"expires_at": {"type": "string"}, "status": {"not": {"const": "pending"}}}
        }),
        json!({
            "description": "effective_at applies to posted transactions only",
            "required": ["status", "effective_at"],
            "properties": {"status": {"const": "pending"}, "effective_at": {"type": "string"}}
        }),
    ]
}

/// An exchange needs `rate`, `counter_amount` or both (`exchange::terms`, `TermsError::NoTerms`);
/// `null` is the field left out.
fn no_exchange_terms() -> serde_json::Value {
    serde_json::json!({
        "description": "an exchange needs rate, counter_amount or both",
        "properties": {"rate": {"type": "null"}, "counter_amount": {"type": "null"}}
    })
}

/// A velocity limit bounds `amount` or `count`, exactly one (`limits::CreateLimitRequest::limit`,
/// `required` otherwise); `null` is the field left out.
fn limit_bound_refusals() -> [serde_json::Value; 2] {
    use serde_json::json;
    [
        json!({
            "description": "a limit needs amount or count",
            "properties": {"amount": {"type": "null"}, "count": {"type": "null"}}
        }),
        json!({
            "description": "a limit bounds amount or count, not both",
            "required": ["amount", "count"],
            "properties": {"amount": {"type": "integer"}, "count": {"type": "integer"}}
        }),
    ]
}
