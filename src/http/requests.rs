//! The request bodies that create transactions, and how each becomes a
//! [`NewTransaction`]: its legs, its canonical form (what a replay is compared with), and
//! its requested status. Shared by the single endpoints and by the batch.

use super::error::{ApiError, Result};
use super::extract::IdempotencyKey;
use super::validate;
use crate::ledger::effective::EffectiveDate;
use crate::ledger::ids::AccountId;
use crate::ledger::journal::{Journal, Leg};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::transactions::{Kind, NewTransaction, Requested};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;
use validator::Validate;

/// `posted` (default): the money moves now. `pending`: a hold, captured later with
/// `/post` or released with `/void`, expiring at `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequestedStatus {
    #[default]
    Posted,
    Pending,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryRequest {
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub account: String,
    /// Signed minor units: positive credits the account, negative debits it. Not zero.
    #[validate(custom(function = "validate::signed_amount"))]
    #[schema(minimum = -9007199254740991_i64, maximum = 9007199254740991_i64)]
    #[serde(deserialize_with = "validate::integer::required")]
    pub amount: i64,
}

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f0a", "entries": [{"account": "alice", "amount": -500}, {"account": "bob", "amount": 500}]})))]
pub struct CreateTransactionRequest {
    /// The idempotency key. Without it, an `Idempotency-Key` header derives one.
    pub id: Option<Uuid>,
    /// Two or more legs on distinct accounts of one currency, summing to zero.
    #[validate(nested)]
    #[schema(min_items = 2, max_items = 100)]
    pub entries: Vec<EntryRequest>,
    pub status: Option<RequestedStatus>,
    /// Holds only: when the hold expires (default: the server's hold expiry from now).
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Posted transactions only: the past moment it counts from in balances by effective time
    /// (RFC 3339; default: its ledger time). Not in the future, at most the server's horizon
    /// (31 days by default) back; a debit dated in the past must not overdraw the wallet at any
    /// effective moment since.
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

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"id": "0b7e1a52-6f0d-4c55-9f4e-2a1c3d5e7f02", "from": "alice", "to": "bob", "amount": 3000})))]
pub struct TransferRequest {
    pub id: Option<Uuid>,
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub from: String,
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub to: String,
    /// Positive minor units moved from `from` to `to`.
    #[validate(custom(function = "validate::positive_amount"))]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    #[serde(deserialize_with = "validate::integer::required")]
    pub amount: i64,
    pub status: Option<RequestedStatus>,
    /// Holds only: when the hold expires (default: the server's hold expiry from now).
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Posted transactions only: the past moment it counts from in balances by effective time
    /// (RFC 3339; default: its ledger time). Not in the future, at most the server's horizon
    /// (31 days by default) back; a debit dated in the past must not overdraw the wallet at any
    /// effective moment since.
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

#[derive(Debug, Deserialize, Validate, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(json!({"account": "alice", "amount": 10000, "currency": "SAR", "provider": "moyasar", "external_ref": "pay_123"})))]
pub struct PaymentRequest {
    pub id: Option<Uuid>,
    /// The wallet credited.
    #[validate(custom(function = "validate::account_id"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub account: String,
    /// Positive minor units.
    #[validate(custom(function = "validate::positive_amount"))]
    #[schema(minimum = 1, maximum = 9007199254740991_i64)]
    #[serde(deserialize_with = "validate::integer::required")]
    pub amount: i64,
    /// Must be the wallet's currency.
    #[validate(custom(function = "validate::currency"))]
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub currency: String,
    /// The payment provider; its clearing account `clearing:{provider}:{currency}` is debited.
    #[validate(custom(function = "validate::provider"))]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")]
    pub provider: String,
    /// Posted transactions only: the past moment it counts from in balances by effective time
    /// (RFC 3339; default: its ledger time). Not in the future, at most the server's horizon
    /// (31 days by default) back; a debit dated in the past must not overdraw the wallet at any
    /// effective moment since.
    #[serde(default, deserialize_with = "validate::timestamp::optional")]
    pub effective_at: Option<DateTime<Utc>>,
    /// The provider's reference of the payment.
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

pub(super) fn account(id: &str, field: &str) -> Result<AccountId> {
    AccountId::parse(id)
        .ok_or_else(|| ApiError::validation(field, "account_id", "invalid account id"))
}

pub(super) fn amount(value: i64, field: &str) -> Result<Amount> {
    Amount::new(value).ok_or_else(|| ApiError::validation(field, "range", "out of range"))
}

pub(super) fn leg(
    account_id: AccountId,
    value: Amount,
    account_field: &str,
    amount_field: &str,
) -> Leg {
    Leg {
        account: account_id,
        amount: value,
        account_field: account_field.to_owned(),
        amount_field: amount_field.to_owned(),
        must_be_wallet: false,
        currency: None,
    }
}

/// What the service allows a create: a hold's default expiry, and how far back a posted
/// transaction may be dated.
#[derive(Debug, Clone, Copy)]
pub struct CreatePolicy {
    pub hold_expiry: TimeDelta,
    pub effective_horizon: TimeDelta,
}

/// The requested effective date, for posted transactions only. Its horizon is fixed now and
/// checked by the ledger after the stored id, so a retry past it still replays.
pub(super) fn effective(
    at: Option<DateTime<Utc>>,
    status: Option<RequestedStatus>,
    horizon: TimeDelta,
) -> Result<Option<EffectiveDate>> {
    let Some(at) = at else { return Ok(None) };
    if status == Some(RequestedStatus::Pending) {
        return Err(ApiError::validation(
            "/effective_at",
            "not_applicable",
            "effective_at applies to posted transactions only",
        ));
    }
    let at = DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at);
    let not_before = crate::ledger::now_micros()
        .checked_sub_signed(horizon)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    Ok(Some(EffectiveDate { at, not_before }))
}

/// The canonical request, with `effective_at` only when it was sent: a request stored before
/// effective dates existed is the same request as its retry without one.
pub(super) fn with_effective_at(mut request: Value, at: Option<DateTime<Utc>>) -> Value {
    if let (Some(at), Some(fields)) = (at, request.as_object_mut()) {
        fields.insert("effective_at".into(), json!(at));
    }
    request
}

/// Posted now, or a hold until `expires_at` (given, in the future; or the default expiry).
/// The canonical request keeps `expires_at` as sent, so a retry of a hold with the default
/// expiry is the same request.
pub(super) fn requested(
    status: Option<RequestedStatus>,
    expires_at: Option<DateTime<Utc>>,
    default_expiry: TimeDelta,
) -> Result<Requested> {
    match status.unwrap_or_default() {
        RequestedStatus::Posted => match expires_at {
            Some(_) => Err(ApiError::validation(
                "/expires_at",
                "not_applicable",
                "expires_at applies to holds only",
            )),
            None => Ok(Requested::Posted),
        },
        RequestedStatus::Pending => {
            let now = Utc::now();
            // A past `expires_at` is refused by the ledger for a new hold only: the same
            // request retried after that moment must still replay its stored answer.
            let expires_at = match expires_at {
                Some(t) => t,
                None => now
                    .checked_add_signed(default_expiry)
                    .unwrap_or(DateTime::<Utc>::MAX_UTC),
            };
            // PostgreSQL keeps microseconds: stored and answered times must be the same.
            let expires_at = DateTime::from_timestamp_micros(expires_at.timestamp_micros())
                .unwrap_or(expires_at);
            Ok(Requested::Pending { expires_at })
        }
    }
}

impl CreateTransactionRequest {
    pub fn into_new(self, key: &IdempotencyKey, policy: CreatePolicy) -> Result<NewTransaction> {
        let id = key.resolve(self.id)?;
        let status = requested(self.status, self.expires_at, policy.hold_expiry)?;
        let effective_at = effective(self.effective_at, self.status, policy.effective_horizon)?;
        let legs = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let (account_field, amount_field) = (
                    format!("/entries/{i}/account"),
                    format!("/entries/{i}/amount"),
                );
                Ok(leg(
                    account(&e.account, &account_field)?,
                    amount(e.amount, &amount_field)?,
                    &account_field,
                    &amount_field,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let metadata = self.metadata.unwrap_or_default();
        let request = json!({
            "kind": Kind::Transaction.as_str(),
            "entries": self.entries.iter().map(|e| json!({"account": e.account, "amount": e.amount})).collect::<Vec<_>>(),
            "status": self.status.unwrap_or_default(),
            "expires_at": self.expires_at,
            "external_ref": self.external_ref,
            "metadata": metadata,
        });
        let request = with_effective_at(request, effective_at.map(|d| d.at));
        Ok(NewTransaction {
            id,
            kind: Kind::Transaction,
            status,
            journal: Journal::new(legs).map_err(ApiError::Validation)?,
            currency: None,
            external_ref: self.external_ref,
            metadata,
            request,
            created_on_use: Vec::new(),
            exchange: None,
            reversal: None,
            effective_at,
            provider_initiated: false,
        })
    }
}

impl TransferRequest {
    pub fn into_new(self, key: &IdempotencyKey, policy: CreatePolicy) -> Result<NewTransaction> {
        let id = key.resolve(self.id)?;
        let status = requested(self.status, self.expires_at, policy.hold_expiry)?;
        let effective_at = effective(self.effective_at, self.status, policy.effective_horizon)?;
        if self.from == self.to {
            return Err(ApiError::validation(
                "/to",
                "same_account",
                "from and to must be different accounts",
            ));
        }
        let moved = amount(self.amount, "/amount")?;
        let legs = vec![
            leg(
                account(&self.from, "/from")?,
                moved.negate(),
                "/from",
                "/amount",
            ),
            leg(account(&self.to, "/to")?, moved, "/to", "/amount"),
        ];
        let metadata = self.metadata.unwrap_or_default();
        let request = json!({
            "kind": Kind::Transfer.as_str(),
            "from": self.from,
            "to": self.to,
            "amount": self.amount,
            "status": self.status.unwrap_or_default(),
            "expires_at": self.expires_at,
            "external_ref": self.external_ref,
            "metadata": metadata,
        });
        let request = with_effective_at(request, effective_at.map(|d| d.at));
        Ok(NewTransaction {
            id,
            kind: Kind::Transfer,
            status,
            journal: Journal::new(legs).map_err(ApiError::Validation)?,
            currency: None,
            external_ref: self.external_ref,
            metadata,
            request,
            created_on_use: Vec::new(),
            exchange: None,
            reversal: None,
            effective_at,
            provider_initiated: false,
        })
    }
}

impl PaymentRequest {
    pub fn into_new(self, key: &IdempotencyKey, policy: CreatePolicy) -> Result<NewTransaction> {
        let id = key.resolve(self.id)?;
        let effective_at = effective(self.effective_at, None, policy.effective_horizon)?;
        let currency = Currency::parse(&self.currency)
            .ok_or_else(|| ApiError::validation("/currency", "currency", "unknown currency"))?;
        let credited = amount(self.amount, "/amount")?;
        let clearing = AccountId::clearing(&self.provider, currency.code());
        let wallet = account(&self.account, "/account")?;
        if wallet == clearing {
            let message = "a payment cannot credit its own clearing account";
            return Err(ApiError::validation("/account", "same_account", message));
        }
        let mut credit = leg(wallet, credited, "/account", "/amount");
        credit.must_be_wallet = true;
        let legs = vec![
            credit,
            leg(clearing.clone(), credited.negate(), "/provider", "/amount"),
        ];
        let metadata = self.metadata.unwrap_or_default();
        let request = json!({
            "kind": Kind::Payment.as_str(),
            "account": self.account,
            "amount": self.amount,
            "currency": self.currency,
            "provider": self.provider,
            "external_ref": self.external_ref,
            "metadata": metadata,
        });
        let request = with_effective_at(request, effective_at.map(|d| d.at));
        Ok(NewTransaction {
            id,
            kind: Kind::Payment,
            status: Requested::Posted,
            journal: Journal::new(legs).map_err(ApiError::Validation)?,
            currency: Some((currency, "/currency".into())),
            external_ref: self.external_ref,
            metadata,
            request,
            created_on_use: vec![(clearing, currency)],
            exchange: None,
            reversal: None,
            effective_at,
            provider_initiated: false,
        })
    }
}
