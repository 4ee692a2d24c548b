//! `POST /v1/exchanges`: money from a wallet in one currency to a wallet in another, through
//! the exchange's system accounts `fx:{currency}`, as one transaction whose entries balance
//! per currency. The terms (rate, counter amount) are decided by `ledger::exchange`; the write
//! is the one every create takes (`ledger::posting`).

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{IdempotencyKey, JsonBody};
use super::problem::Problem;
use super::requests::{
    CreatePolicy, RequestedStatus, account, amount, effective, leg, requested, with_effective_at,
};
use super::responses::created;
use super::validate;
use crate::ledger::exchange::{self, Exchange, Rate, TermsError};
use crate::ledger::ids::AccountId;
use crate::ledger::journal::{Journal, Leg};
use crate::ledger::money::{Amount, Currency, MAX_AMOUNT};
use crate::ledger::transactions::{Kind, NewTransaction};
use crate::ledger::views::TransactionView;
use crate::problem::FieldError;
use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;
use validator::Validate;

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f09", "from": "alice", "to": "alice-usd", "amount": 2000, "currency": "SAR", "counter_currency": "USD", "rate": "0.2666", "counter_amount": 533})))]
pub struct ExchangeRequest {
    pub id: Option<Uuid>,
    /// The account debited `amount`, in `currency`.
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub from: String,
    /// The account credited the counter amount, in `counter_currency`.
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub to: String,
    /// Positive minor units of `currency` debited from `from`.
    #[validate(custom(function = "validate::positive_amount"))]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    #[serde(deserialize_with = "validate::integer::required")]
    pub amount: i64,
    /// `from`'s currency.
    #[validate(custom(function = "validate::currency"))]
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub currency: String,
    /// `to`'s currency; not `currency`.
    #[validate(custom(function = "validate::currency"))]
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub counter_currency: String,
    /// Units of `counter_currency` one unit of `currency` buys (major units), as a decimal
    /// string: at most 18 significant digits and 18 decimal places (`"1.0842"`). Without
    /// `counter_amount`, the counter amount is `amount` at this rate rounded half up.
    #[validate(custom(function = "rate_text"))]
    #[schema(pattern = "^[0-9]{1,18}(\\.[0-9]{1,18})?$")]
    pub rate: Option<String>,
    /// Positive minor units of `counter_currency` credited to `to`. With `rate`, it must be
    /// `amount` at that rate rounded either way (`rate_mismatch` otherwise); alone, it implies
    /// the rate.
    #[validate(custom(function = "validate::positive_amount"))]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    #[serde(default, deserialize_with = "validate::integer::optional")]
    pub counter_amount: Option<i64>,
    pub status: Option<RequestedStatus>,
    /// Holds only: when the hold expires (default: the server's hold expiry from now).
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Posted exchanges only: the past moment it counts from in balances by effective time
    /// (see `POST /v1/transfers`).
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub effective_at: Option<DateTime<Utc>>,
    #[validate(custom(function = "validate::external_ref"))]
    #[schema(
        min_length = 1,
        max_length = 255,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub external_ref: Option<String>,
    #[validate(custom(function = "validate::metadata"))]
    #[serde(default, deserialize_with = "validate::metadata_field::optional")]
    #[schema(value_type = Option<crate::ledger::views::Metadata>)]
    pub metadata: Option<Map<String, Value>>,
}

fn rate_text(text: &str) -> std::result::Result<(), validator::ValidationError> {
    match Rate::parse(text) {
        Some(_) => Ok(()),
        None => {
            let mut e = validator::ValidationError::new("rate");
            e.message = Some(
                "must be a positive decimal string with at most 18 significant digits and 18 \
                 decimal places, e.g. \"1.0842\""
                    .into(),
            );
            Err(e)
        }
    }
}

#[utoipa::path(post, path = "/v1/exchanges", tag = "transactions", operation_id = "create_exchange", request_body = ExchangeRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "derives the id when the body has none")),
    responses(
        (status = 201, description = "posted, or a hold (`status: pending`): `from` debited and `fx:{currency}` credited in `currency`, `fx:{counter_currency}` debited and `to` credited in `counter_currency`", body = TransactionView),
        (status = 200, description = "replay (`Idempotent-Replayed: true`)", body = TransactionView),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "validation_failed (among its errors `rate_mismatch`, `same_currency`, `currency_mismatch`), idempotency_mismatch, unknown_account, or a stored refusal", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn exchange(
    State(state): State<AppState>,
    key: IdempotencyKey,
    JsonBody(req): JsonBody<ExchangeRequest>,
) -> Result<Response> {
    let new = req.into_new(&key, state.config.create_policy())?;
    created(state.writer.create(new).await?)
}

impl ExchangeRequest {
    pub fn into_new(self, key: &IdempotencyKey, policy: CreatePolicy) -> Result<NewTransaction> {
        let id = key.resolve(self.id)?;
        let status = requested(self.status, self.expires_at, policy.hold_expiry)?;
        let effective_at = effective(self.effective_at, self.status, policy.effective_horizon)?;
        // The extractor validated both codes and the amount; parsed once here.
        let source = Currency::parse(&self.currency).ok_or_else(unknown_currency)?;
        let counter = Currency::parse(&self.counter_currency).ok_or_else(unknown_currency)?;
        let debited = amount(self.amount, "/amount")?;
        let terms = self.terms(debited, source, counter)?;
        let legs = self.legs(debited, source, &terms)?;
        let metadata = self.metadata.unwrap_or_default();
        let request = json!({
            "kind": Kind::Exchange.as_str(),
            "from": self.from,
            "to": self.to,
            "amount": self.amount,
            "currency": self.currency,
            "counter_currency": self.counter_currency,
            "rate": self.rate.as_ref().map(|_| terms.rate.as_text()),
            "counter_amount": self.counter_amount,
            "status": self.status.unwrap_or_default(),
            "expires_at": self.expires_at,
            "external_ref": self.external_ref,
            "metadata": metadata,
        });
        let request = with_effective_at(request, effective_at.map(|d| d.at));
        Ok(NewTransaction {
            id,
            kind: Kind::Exchange,
            status,
            journal: Journal::new(legs).map_err(ApiError::Validation)?,
            currency: Some((source, "/currency".into())),
            external_ref: self.external_ref,
            metadata,
            request,
            created_on_use: vec![
                (AccountId::exchange(source.code()), source),
                (
                    AccountId::exchange(terms.counter_currency.code()),
                    terms.counter_currency,
                ),
            ],
            exchange: Some(terms),
            reversal: None,
            effective_at,
            provider_initiated: false,
        })
    }

    /// The exchange's terms from the request's rate and counter amount.
    fn terms(&self, debited: Amount, source: Currency, counter: Currency) -> Result<Exchange> {
        let rate = self.rate.as_deref().and_then(Rate::parse);
        let counter_amount = self.counter_amount.and_then(Amount::new);
        exchange::terms(debited, source, counter, rate, counter_amount)
            .map_err(|e| ApiError::Validation(vec![terms_error(e, self, source, counter)]))
    }

    /// `from` → `fx:{currency}` in `currency`, `fx:{counter_currency}` → `to` in the counter
    /// currency: each currency's legs sum to zero.
    fn legs(&self, debited: Amount, source: Currency, terms: &Exchange) -> Result<Vec<Leg>> {
        let counter = terms.counter_currency;
        let credited = terms.counter_amount;
        let in_currency = |mut leg: Leg, currency: Currency| {
            leg.currency = Some(currency);
            leg
        };
        let (source_fx, counter_fx) = (
            AccountId::exchange(source.code()),
            AccountId::exchange(counter.code()),
        );
        Ok(vec![
            in_currency(
                leg(
                    account(&self.from, "/from")?,
                    debited.negate(),
                    "/from",
                    "/amount",
                ),
                source,
            ),
            in_currency(leg(source_fx, debited, "/currency", "/amount"), source),
            in_currency(
                leg(
                    counter_fx,
                    credited.negate(),
                    "/counter_currency",
                    "/counter_amount",
                ),
                counter,
            ),
            in_currency(
                leg(
                    account(&self.to, "/to")?,
                    credited,
                    "/to",
                    "/counter_amount",
                ),
                counter,
            ),
        ])
    }
}

fn unknown_currency() -> ApiError {
    ApiError::validation("/currency", "currency", "unknown currency")
}

/// Why the terms do not hold, as the field error that names the field to change.
fn terms_error(
    e: TermsError,
    req: &ExchangeRequest,
    source: Currency,
    counter: Currency,
) -> FieldError {
    let at_rate = || {
        format!(
            "{} {source} at {}",
            source.format(req.amount),
            req.rate.as_deref().unwrap_or("?")
        )
    };
    match e {
        TermsError::SameCurrency => FieldError::new(
            "/counter_currency",
            "same_currency",
            "must differ from currency: moving money within one currency is a transfer",
        ),
        TermsError::NoTerms => {
            FieldError::new("/rate", "required", "give rate, counter_amount, or both")
        }
        TermsError::RateMismatch { lowest, highest } => {
            let shown = |units: u128| counter.format(i64::try_from(units).unwrap_or(MAX_AMOUNT));
            let expected = if lowest == highest {
                format!("exactly {} {counter}", shown(lowest))
            } else {
                format!("{} or {} {counter}", shown(lowest), shown(highest))
            };
            FieldError::new(
                "/counter_amount",
                "rate_mismatch",
                format!("{} is {expected} (rounded either way)", at_rate()),
            )
        }
        TermsError::CounterOutOfRange { .. } => FieldError::new(
            "/amount",
            "range",
            format!(
                "{} comes to less than one minor unit of {counter} or more than 9007199254740991",
                at_rate()
            ),
        ),
        TermsError::RateOutOfRange => FieldError::new(
            "/counter_amount",
            "range",
            "the rate these amounts imply needs more than 18 decimal places",
        ),
    }
}
