//! Extractors that turn a request into validated input, answering problem+json on any fault:
//! body (content type, size, JSON syntax, shape), path and query parameters, and the
//! `Idempotency-Key` header.

use super::error::ApiError;
use crate::ledger::ids::{id_from_idempotency_key, parse_idempotency_key};
use crate::problem::FieldError;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::{header, request::Parts};
use serde::de::DeserializeOwned;
use uuid::Uuid;
use validator::{Validate, ValidationErrors, ValidationErrorsKind};

/// A JSON body, deserialized strictly (unknown fields are refused by the request types) and
/// then validated field by field. Every error names its field as a JSON pointer.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Validate> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = super::body::read(req).await?;
        parse_valid(&bytes).map(JsonBody)
    }
}

/// A JSON body that may be left out (an empty body is `T::default()`), for actions such as
/// `/post` and `/void` whose body is optional; a body that is sent follows [`JsonBody`]'s rules.
pub struct OptionalJsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Validate + Default> FromRequest<S>
    for OptionalJsonBody<T>
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let declared_empty = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() == b"0");
        let has_type = req.headers().contains_key(header::CONTENT_TYPE);
        if declared_empty && !has_type {
            return Ok(OptionalJsonBody(T::default()));
        }
        if !has_type {
            // No content type: accept only an empty body.
            let bytes = super::body::read(req).await?;
            return if bytes.is_empty() {
                Ok(OptionalJsonBody(T::default()))
            } else {
                Err(ApiError::UnsupportedMediaType)
            };
        }
        JsonBody::<T>::from_request(req, state)
            .await
            .map(|JsonBody(v)| OptionalJsonBody(v))
    }
}

/// Parses and validates one JSON document: the body of a request, or one item of a batch
/// (kept as raw text, so an item is held to exactly the rules its single call would be,
/// repeated keys included). Field errors are pointers relative to the document.
pub fn parse_valid<T: DeserializeOwned + Validate>(bytes: &[u8]) -> Result<T, ApiError> {
    let parsed: T = parse_json(bytes)?;
    parsed
        .validate()
        .map_err(|e| ApiError::Validation(field_errors(&e)))?;
    Ok(parsed)
}

fn is_json(content_type: Option<&header::HeaderValue>) -> bool {
    let Some(essence) = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
    else {
        return false;
    };
    let essence = essence.trim().to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Syntax errors are 400 `malformed_json`; a well-formed document of the wrong shape is 422
/// with the pointer of the offending field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|error| {
        let pointer = pointer_of(error.path());
        let inner = error.into_inner();
        // serde_json files some type errors (a number where an enum's string is due) as
        // syntax errors: a body that is valid JSON has only data errors.
        let well_formed = serde_json::from_slice::<serde_json::Value>(bytes).is_ok();
        match inner.classify() {
            serde_json::error::Category::Data => {
                ApiError::Validation(vec![data_error(&pointer, &inner.to_string())])
            }
            _ if well_formed => {
                ApiError::Validation(vec![data_error(&pointer, &inner.to_string())])
            }
            _ => ApiError::MalformedJson(inner.to_string()),
        }
    })?;
    // Trailing characters after the document are a syntax error, not something to ignore.
    de.end()
        .map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    require_named_fields(bytes)?;
    Ok(value)
}

/// serde also accepts a struct written as a positional array (`["id", "w1", "w2", 100]`);
/// every field of a request must be named, so the body must be an object, and so must the
/// items of its arrays of sub-requests (`entries`). Request types have no top-level field
/// that is an array of arrays, so any such array is a positional struct.
fn require_named_fields(bytes: &[u8]) -> Result<(), ApiError> {
    let document: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    let Some(fields) = document.as_object() else {
        return Err(ApiError::validation(
            "",
            "invalid_type",
            "the body must be a JSON object",
        ));
    };
    for (name, value) in fields {
        if let Some(index) = value
            .as_array()
            .and_then(|items| items.iter().position(|i| i.is_array()))
        {
            return Err(ApiError::validation(
                format!("/{name}/{index}"),
                "invalid_type",
                "must be an object with named fields",
            ));
        }
    }
    Ok(())
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
            Segment::Map { key } => {
                pointer.push('/');
                pointer.push_str(&crate::problem::pointer_token(key));
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    pointer
}

/// serde names a missing or unknown field only in its message (`missing field \`amount\``);
/// point at that field rather than at the object that lacks it.
fn data_error(pointer: &str, message: &str) -> FieldError {
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(message)
        .to_owned();
    let named = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('`'))
            .and_then(|rest| rest.split('`').next())
    };
    // The path ends at the object for a missing field and at the key itself for an unknown
    // or duplicate one; either way, point at the field.
    let at = |field: &str| {
        if pointer.ends_with(&format!("/{field}")) {
            pointer.to_owned()
        } else {
            format!("{pointer}/{field}")
        }
    };
    if message.starts_with(super::validate::NUMBER_RANGE) {
        return FieldError::new(pointer, "number_range", message);
    }
    for (prefix, code) in [
        ("missing field ", "required"),
        ("unknown field ", "unknown_field"),
        ("duplicate field ", "duplicate_field"),
    ] {
        if let Some(field) = named(prefix) {
            return FieldError::new(at(field), code, message.clone());
        }
    }
    FieldError::new(pointer, "invalid_type", message)
}

/// Flattens validator's nested errors into JSON pointers, sorted for stable answers.
pub fn field_errors(errors: &ValidationErrors) -> Vec<FieldError> {
    let mut out = Vec::new();
    flatten(errors, "", &mut out);
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

fn flatten(errors: &ValidationErrors, prefix: &str, out: &mut Vec<FieldError>) {
    for (field, kind) in errors.errors() {
        let path = format!("{prefix}/{field}");
        match kind {
            ValidationErrorsKind::Field(list) => out.extend(list.iter().map(|e| {
                let message = e
                    .message
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| e.code.to_string());
                FieldError::new(path.clone(), &e.code, message)
            })),
            ValidationErrorsKind::Struct(inner) => flatten(inner, &path, out),
            ValidationErrorsKind::List(items) => {
                for (index, inner) in items {
                    flatten(inner, &format!("{path}/{index}"), out);
                }
            }
        }
    }
}

/// The `Idempotency-Key` header, if sent and valid, and the owner of the request's API key.
pub struct IdempotencyKey {
    pub key: Option<String>,
    pub owner: String,
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let owner = parts
            .extensions
            .get::<crate::api_keys::Principal>()
            .map_or_else(|| DEFAULT_OWNER.to_owned(), |p| p.owner.clone());
        let mut sent = parts.headers.get_all("idempotency-key").iter();
        let Some(raw) = sent.next() else {
            return Ok(IdempotencyKey { key: None, owner });
        };
        if sent.next().is_some() {
            return Err(ApiError::DuplicateHeader("Idempotency-Key"));
        }
        raw.to_str()
            .ok()
            .and_then(parse_idempotency_key)
            .map(|key| IdempotencyKey {
                key: Some(key),
                owner,
            })
            .ok_or_else(|| {
                ApiError::validation(
                    "Idempotency-Key",
                    "invalid_header",
                    "must be 1-255 printable ASCII characters, bare or quoted",
                )
            })
    }
}

/// The owner of requests that carry no API key (none reach a handler of `/v1` in `serve`;
/// the contract's name for the owner before authentication existed).
pub const DEFAULT_OWNER: &str = "default";

impl IdempotencyKey {
    /// The request's id: the body's when given (it wins), else derived from the header and the
    /// API key's owner (so it survives key rotation), else 400 `id_required`.
    pub fn resolve(&self, body_id: Option<Uuid>) -> Result<Uuid, ApiError> {
        match (body_id, &self.key) {
            (Some(id), _) => Ok(id),
            (None, Some(key)) => Ok(id_from_idempotency_key(&self.owner, key)),
            (None, None) => Err(ApiError::IdRequired),
        }
    }
}

/// One path parameter; a malformed one is simply a resource that does not exist.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // U+0000 cannot be stored in PostgreSQL text, so no resource can be named by it.
        Path::<String>::from_request_parts(parts, state)
            .await
            .ok()
            .filter(|Path(p)| !p.contains('\0'))
            .map(|Path(p)| PathParam(p))
            .ok_or_else(|| ApiError::NotFound("resource".into()))
    }
}

/// Two path parameters (`/v1/dead-letters/{partition}/{id}`); as with [`PathParam`], malformed
/// ones name nothing (404).
pub struct PathPair(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathPair {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .ok()
            .filter(|Path((a, b))| !a.contains('\0') && !b.contains('\0'))
            .map(|Path((a, b))| PathPair(a, b))
            .ok_or_else(|| ApiError::NotFound("resource".into()))
    }
}

/// Query parameters, strictly typed; errors are 400 `invalid_query` naming the parameter.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query().unwrap_or_default()).map(QueryParams)
    }
}

/// A query string as `T`, held to `T`'s rules (unknown parameters are `unknown_field`).
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    // U+0000 cannot reach PostgreSQL: a parameter holding it is refused, not a 500.
    if let Some((name, _)) =
        form_urlencoded::parse(query.as_bytes()).find(|(_, v)| v.contains('\0'))
    {
        return Err(ApiError::query(
            format!("/{name}"),
            "invalid_character",
            "must not contain the character U+0000",
        ));
    }
    let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
    serde_path_to_error::deserialize(de).map_err(|error| {
        let pointer = pointer_of(error.path());
        ApiError::InvalidQuery(vec![data_error(&pointer, &error.into_inner().to_string())])
    })
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}
