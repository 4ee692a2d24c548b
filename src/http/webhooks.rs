//! `/v1/webhooks` (subscriptions: create, list, read, delete, rotate the secret) and
//! `/v1/deliveries` (list, read with attempts, redeliver).

use super::AppState;
use super::accounts::PageQuery;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody, OptionalJsonBody, PathParam, QueryParams};
use super::problem::Problem;
use super::responses::{REPLAYED_HEADER, created, json};
use crate::ledger::events::EventType;
use crate::ledger::views::Page;
use crate::outbox::deliveries::{
    self, DeliveryDetail, DeliveryStatus, DeliveryView, Filter, Redelivery,
};
use crate::outbox::signing;
use crate::outbox::subscriptions::{self, NewSubscription, SubscriptionView};
use crate::problem::FieldError;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;
use validator::Validate;

/// The tag of this file's `deliveries` cursors: issued and checked with the same value.
const DELIVERIES_LIST: &str = "deliveries";

/// The tag of this file's `webhooks` cursors: issued and checked with the same value.
const WEBHOOKS_LIST: &str = "webhooks";

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "3c1e0f7a-2b4d-4e6f-8a9b-0c1d2e3f4a5b", "url": "https://hooks.example.com/ledger", "event_types": ["transaction.posted"]})))]
pub struct CreateWebhookRequest {
    /// The caller's id; without it an `Idempotency-Key` header derives one.
    pub id: Option<Uuid>,
    /// `http` or `https`, without credentials, on a host the operator allows. The pattern is
    /// what `UrlPolicy::check` asks of the text before it parses it (no control character, a
    /// scheme of any case, spaces around it trimmed).
    #[schema(
        max_length = 2048,
        pattern = "^ *[Hh][Tt][Tt][Pp][Ss]?:[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub url: String,
    /// The event types to send (default: all of them).
    #[schema(schema_with = event_types)]
    pub event_types: Option<Vec<String>>,
    /// `whsec_` and 24-64 bytes in base64; generated when left out.
    #[schema(
        pattern = "^whsec_(?:(?:[A-Za-z0-9+/]{4}){8,21}(?:[A-Za-z0-9+/][AQgw]==)?|(?:[A-Za-z0-9+/]{4}){8,20}[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)$"
    )]
    pub secret: Option<String>,
}

/// `event_types`: a list of `EventType::ALL`'s names, the ones `EventType::parse` accepts;
/// `null` sends them all.
fn event_types() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let names = EventType::ALL.map(|t| t.as_str());
    let name = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names));
    ArrayBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::Array,
            Type::Null,
        ]))
        .items(name)
        .into()
}

#[derive(Debug, Default, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateSecretRequest {
    /// The new secret (`whsec_` and 24-64 bytes in base64, as for a new webhook); generated
    /// when left out.
    #[schema(
        pattern = "^whsec_(?:(?:[A-Za-z0-9+/]{4}){8,21}(?:[A-Za-z0-9+/][AQgw]==)?|(?:[A-Za-z0-9+/]{4}){8,20}[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)$"
    )]
    pub secret: Option<String>,
}

fn check_secret(secret: &str, field: &str) -> Result<()> {
    signing::secret_key(secret)
        .map(|_| ())
        .map_err(|message| ApiError::validation(field, "secret", message))
}

fn parse_id(raw: &str, what: &str) -> Result<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound(format!("{what} {raw}")))
}

#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", operation_id = "create_webhook", request_body = CreateWebhookRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "created; the only answer that shows the secret (a replay shows it again while it still signs)", body = SubscriptionView),
        (status = 200, description = "replay of the creation response (`Idempotent-Replayed: true`); its `secret` is null once rotated away or deleted", body = SubscriptionView),
        (status = 422, description = "validation_failed (url, url_scheme, url_credentials, url_not_allowed, url_not_public, event_type, secret), idempotency_mismatch", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<CreateWebhookRequest>,
) -> Result<Response> {
    let id = key.resolve(req.id)?;
    let mut errors: Vec<FieldError> = Vec::new();
    if let Err(e) = state.config.webhooks.url_policy().check(&req.url) {
        errors.push(e);
    }
    let mut types = Vec::new();
    for (i, raw) in req.event_types.iter().flatten().enumerate() {
        match EventType::parse(raw) {
            Some(t) => types.push(t),
            None => errors.push(FieldError::new(
                format!("/event_types/{i}"),
                "event_type",
                format!("{raw:?} is not an event type"),
            )),
        }
    }
    if let Some(secret) = &req.secret
        && let Err(ApiError::Validation(mut e)) = check_secret(secret, "/secret")
    {
        errors.append(&mut e);
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let new = NewSubscription::new(id, req.url, types, req.secret);
    let mut conn = state.pool.acquire().await?;
    created(subscriptions::create(&mut conn, &new).await?)
}

#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks", operation_id = "list_webhooks", params(PageQuery),
    responses((status = 200, description = "subscriptions, newest first", body = Page<SubscriptionView>)))]
pub async fn list(
    State(state): State<AppState>,
    QueryParams(page): QueryParams<PageQuery>,
) -> Result<Response> {
    let (limit, cursor) = (page.limit()?, page.cursor(WEBHOOKS_LIST)?);
    let mut conn = state.pool.acquire().await?;
    let (data, next) = subscriptions::list(&mut conn, cursor, limit).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|c| super::accounts::next_cursor(WEBHOOKS_LIST, c)),
        },
    )
}

#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "webhooks", operation_id = "get_webhook", params(("id" = Uuid, Path)),
    responses((status = 200, description = "the subscription (never its secret)", body = SubscriptionView), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(State(state): State<AppState>, PathParam(id): PathParam) -> Result<Response> {
    let uuid = parse_id(&id, "webhook")?;
    let mut conn = state.pool.acquire().await?;
    let subscription = subscriptions::find(&mut conn, uuid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("webhook {id}")))?;
    json(StatusCode::OK, &subscription.view())
}

#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "webhooks", operation_id = "delete_webhook", params(("id" = Uuid, Path)),
    responses((status = 200, description = "deleted (a repeat answers the same); its pending deliveries are cancelled", body = SubscriptionView),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete(State(state): State<AppState>, PathParam(id): PathParam) -> Result<Response> {
    let uuid = parse_id(&id, "webhook")?;
    let mut conn = state.pool.acquire().await?;
    let subscription = subscriptions::delete(&mut conn, uuid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("webhook {id}")))?;
    json(StatusCode::OK, &subscription.view())
}

#[utoipa::path(post, path = "/v1/webhooks/{id}/rotate-secret", tag = "webhooks", operation_id = "rotate_webhook_secret",
    params(("id" = Uuid, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "required unless the body names the `secret`: a retry with the same key answers the secret the first made")),
    request_body(content = Option<RotateSecretRequest>),
    responses((status = 200, description = "the new secret signs alongside the previous one until the next rotation; a retry (the same Idempotency-Key as the last rotation, or the current secret again) writes nothing and answers `Idempotent-Replayed: true`", body = SubscriptionView),
        (status = 400, description = "id_required: neither a `secret` nor an Idempotency-Key", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    PathParam(id): PathParam,
    key: IdempotencyKey,
    OptionalJsonBody(req): OptionalJsonBody<RotateSecretRequest>,
) -> Result<Response> {
    let uuid = parse_id(&id, "webhook")?;
    // A retried POST must not rotate twice (the second rotation would drop the secret the
    // receivers still use): the caller's own secret, or an Idempotency-Key, makes it a replay.
    let rotation_key = key.resolve(None).ok();
    let secret = match req.secret {
        Some(secret) => {
            check_secret(&secret, "/secret")?;
            secret
        }
        None if rotation_key.is_some() => signing::generate_secret(),
        None => return Err(ApiError::IdRequired),
    };
    let mut conn = state.pool.acquire().await?;
    let (view, rotation) = subscriptions::rotate_secret(&mut conn, uuid, &secret, rotation_key)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("active webhook {id}")))?;
    let mut response = json(StatusCode::OK, &view)?;
    if rotation == subscriptions::Rotation::Replay {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    Ok(response)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    /// `pending`, `delivered`, `dead` or `cancelled`.
    #[param(schema_with = delivery_status)]
    pub status: Option<String>,
    pub webhook_id: Option<Uuid>,
    pub event_id: Option<Uuid>,
    /// 1-500, default 50.
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page of this same list, unchanged: opaque, tagged with
    /// its list; any other value (a made-up one, another list's) is 400 `cursor`.
    pub cursor: Option<String>,
}

/// `status` of `GET /v1/deliveries`: the names `DeliveryStatus::parse` accepts.
fn delivery_status() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(DeliveryStatus::ALL.map(|s| s.as_str())))
        .into()
}

#[utoipa::path(get, path = "/v1/deliveries", tag = "webhooks", params(DeliveryQuery),
    responses((status = 200, description = "deliveries, newest first", body = Page<DeliveryView>)))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<DeliveryQuery>,
) -> Result<Response> {
    let status = q
        .status
        .as_deref()
        .map(|s| {
            DeliveryStatus::parse(s).ok_or_else(|| {
                ApiError::query(
                    "/status",
                    "delivery_status",
                    "must be pending, delivered, dead or cancelled",
                )
            })
        })
        .transpose()?;
    let page = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    };
    let filter = Filter {
        status,
        subscription: q.webhook_id,
        event: q.event_id,
        before_seq: page.cursor(DELIVERIES_LIST)?,
        limit: page.limit()?,
    };
    let mut conn = state.pool.acquire().await?;
    let (data, next) = deliveries::list(&mut conn, &filter).await?;
    json(
        StatusCode::OK,
        &Page {
            data,
            next_cursor: next.map(|c| super::accounts::next_cursor(DELIVERIES_LIST, c)),
        },
    )
}

#[utoipa::path(get, path = "/v1/deliveries/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, description = "the delivery and its attempts", body = DeliveryDetail), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get_delivery(
    State(state): State<AppState>,
    PathParam(id): PathParam,
) -> Result<Response> {
    let uuid = parse_id(&id, "delivery")?;
    let mut conn = state.pool.acquire().await?;
    let detail = deliveries::find(&mut conn, uuid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("delivery {id}")))?;
    json(StatusCode::OK, &detail)
}

#[utoipa::path(post, path = "/v1/deliveries/{id}/redeliver", tag = "webhooks", operation_id = "redeliver_delivery", params(("id" = Uuid, Path)),
    responses((status = 200, description = "due now with a fresh retry budget; sent again with the same webhook-id", body = DeliveryDetail),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "invalid_transition: the webhook was deleted", body = Problem, content_type = "application/problem+json")))]
pub async fn redeliver(
    State(state): State<AppState>,
    PathParam(id): PathParam,
) -> Result<Response> {
    let uuid = parse_id(&id, "delivery")?;
    let mut conn = state.pool.acquire().await?;
    match deliveries::redeliver(&mut conn, uuid).await? {
        Redelivery::Scheduled(detail) => json(StatusCode::OK, &detail),
        Redelivery::NotFound => Err(ApiError::NotFound(format!("delivery {id}"))),
        Redelivery::Cancelled => Err(ApiError::InvalidTransition {
            current: DeliveryStatus::Cancelled.as_str().into(),
            detail: "the delivery's webhook was deleted: there is nowhere to send it".into(),
        }),
    }
}
