//! The JSON representations of ledger resources, shared by every way out of the ledger (API
//! answers, stored creation responses, later events). Every amount `x` has a sibling
//! `x_decimal` formatted exactly from the currency's exponent.

use super::accounts::{AccountStatus, AccountType};
use super::money::{Amount, Currency};
use super::transactions::{Kind, RefusalCode, TransactionStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

/// The schema of every `metadata`: any JSON object the client chose, returned as given (its
/// limits are in docs/api.md). A named schema, so that a typed client reads an open map
/// (`additionalProperties: true`) rather than an object with no properties at all.
pub struct Metadata;

impl utoipa::PartialSchema for Metadata {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        free_form_object("Any JSON object, stored and returned as sent.").into()
    }
}

impl ToSchema for Metadata {}

/// The schema of a currency a request names: one of the ISO 4217 codes the ledger knows
/// (`money.rs`), listed, so that a generated client can check a code before sending it.
pub struct CurrencyCode;

impl utoipa::PartialSchema for CurrencyCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(Currency::codes()))
            .description(Some("An ISO 4217 code the ledger knows."))
            .build()
            .into()
    }
}

impl ToSchema for CurrencyCode {}

/// An object whose keys are open: `type: object, additionalProperties: true`.
pub fn free_form_object(description: &str) -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(true)))
        .description(Some(description))
        .build()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Balances {
    pub posted: Amount,
    pub pending_in: Amount,
    pub pending_out: Amount,
}

impl Balances {
    /// What a debit or a hold may draw on: posted money not already promised to open holds.
    pub fn available(self) -> Amount {
        // `bounds.rs` keeps `posted − pending_out` within ±M on every write.
        self.posted
            .checked_sub(self.pending_out)
            .expect("bounds.rs keeps available within the range")
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BalancesView {
    pub posted: i64,
    pub posted_decimal: String,
    pub pending_in: i64,
    pub pending_in_decimal: String,
    pub pending_out: i64,
    pub pending_out_decimal: String,
    pub available: i64,
    pub available_decimal: String,
}

impl BalancesView {
    pub fn new(b: Balances, currency: Currency) -> BalancesView {
        BalancesView {
            posted: b.posted.minor_units(),
            posted_decimal: currency.format_amount(b.posted),
            pending_in: b.pending_in.minor_units(),
            pending_in_decimal: currency.format_amount(b.pending_in),
            pending_out: b.pending_out.minor_units(),
            pending_out_decimal: currency.format_amount(b.pending_out),
            available: b.available().minor_units(),
            available_decimal: currency.format_amount(b.available()),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AccountView {
    pub id: String,
    pub currency: String,
    // The enums' own docs describe these in the OpenAPI document (a field comment here would
    // wrap the inlined enum in an `allOf`).
    #[serde(rename = "type")]
    #[schema(inline)]
    pub kind: AccountType,
    #[schema(inline)]
    pub status: AccountStatus,
    pub overdraft_limit: i64,
    pub overdraft_limit_decimal: String,
    #[schema(value_type = Metadata)]
    pub metadata: Map<String, Value>,
    pub version: i64,
    pub balances: BalancesView,
    /// The moment these balances describe: the `as_of` asked for, or the finality horizon
    /// when that is earlier (an instant not final yet is answered at the horizon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LegView {
    pub account: String,
    pub amount: i64,
    pub amount_decimal: String,
    /// Exchanges and their reversals only, whose legs are in two currencies: this leg's.
    /// Absent elsewhere: every leg is in the transaction's `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

impl LegView {
    /// `amount` of `currency` as a leg shows it; `per_leg` when the transaction's legs are in
    /// more than one currency, so each names its own.
    pub fn new(account: String, amount: i64, currency: Currency, per_leg: bool) -> LegView {
        LegView {
            account,
            amount,
            amount_decimal: currency.format(amount),
            currency: per_leg.then(|| currency.code().to_owned()),
        }
    }

    /// The leg's currency: its own, else the transaction's.
    pub fn currency_or(&self, transaction: Currency) -> Option<Currency> {
        match &self.currency {
            Some(code) => Currency::parse(code),
            None => Some(transaction),
        }
    }
}

/// An exchange, or the reversal of one: what it moved in each currency, and at which rate.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExchangeView {
    /// Units of `counter_currency` one unit of the transaction's `currency` buys (major
    /// units), as a decimal string: the caller's rate, or the one its two amounts imply.
    pub rate: String,
    /// What moved in the transaction's `currency` (debited from the source wallet; by a
    /// reversal, credited back), in its minor units.
    pub amount: i64,
    pub amount_decimal: String,
    pub counter_currency: String,
    /// What moved in `counter_currency` (credited to the counter wallet; by a reversal,
    /// debited back), in its minor units.
    pub counter_amount: i64,
    pub counter_amount_decimal: String,
}

impl ExchangeView {
    /// The view of an exchange in `currency` and `counter` at `rate` whose legs are `legs`:
    /// each side's amount is the sum of its credits.
    pub fn new(rate: String, currency: Currency, counter: Currency, legs: &[LegView]) -> Self {
        // An exchange's legs each name their currency.
        let credited = |c| super::transactions::credited_total_in(legs, c).minor_units();
        let (amount, counter_amount) = (credited(currency), credited(counter));
        ExchangeView {
            rate,
            amount,
            amount_decimal: currency.format(amount),
            counter_currency: counter.code().to_owned(),
            counter_amount,
            counter_amount_decimal: counter.format(counter_amount),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RefusalView {
    #[schema(inline)]
    pub code: RefusalCode,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TransactionView {
    pub id: Uuid,
    #[schema(inline)]
    pub kind: Kind,
    #[schema(inline)]
    pub status: TransactionStatus,
    pub currency: String,
    /// A posted transaction: the entries it posted (for a partly captured hold, the captured
    /// amount; see `authorized_amount` for what was held). Otherwise the legs as requested:
    /// what is held, or what was refused.
    pub entries: Vec<LegView>,
    pub external_ref: Option<String>,
    #[schema(value_type = Metadata)]
    pub metadata: Map<String, Value>,
    pub refusal: Option<RefusalView>,
    pub created_at: DateTime<Utc>,
    /// Ledger time: when the entries were written.
    pub posted_at: Option<DateTime<Utc>>,
    /// When the transaction counts in balances by effective time: the `effective_at` it was
    /// dated with, else its ledger time (`posted_at`); `null` until it is posted.
    pub effective_at: Option<DateTime<Utc>>,
    /// Holds: when an uncaptured hold stops counting and becomes `expired`.
    pub expires_at: Option<DateTime<Utc>>,
    /// Reversals: the transaction this one gives money back for.
    pub reverses: Option<Uuid>,
    /// Captured holds: how much was captured (the rest was released).
    pub captured_amount: Option<i64>,
    pub captured_amount_decimal: Option<String>,
    /// Captured holds: how much the hold reserved (its credits) before it was captured.
    pub authorized_amount: Option<i64>,
    pub authorized_amount_decimal: Option<String>,
    /// Exchanges and their reversals only: both sides and the rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeView>,
    /// When its `metadata` was erased (`POST /v1/transactions/{id}/metadata-erasure`): the
    /// metadata is `{}` since. Absent while it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_erased_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntryView {
    pub id: i64,
    pub transaction_id: Uuid,
    pub account: String,
    pub currency: String,
    pub amount: i64,
    pub amount_decimal: String,
    /// Wallets only: the entry's place in the account's gap-free chain.
    pub sequence: Option<i64>,
    /// Wallets only: the posted balance right after this entry.
    pub balance_after: Option<i64>,
    pub balance_after_decimal: Option<String>,
    /// When the entry was written: its chain's order (`balance_after` is by ledger time).
    pub ledger_time: DateTime<Utc>,
    /// When it counts in balances by effective time: its transaction's `effective_at`.
    pub effective_at: DateTime<Utc>,
    /// Wallets only: the entry's link in its hash chain (`chain_hash`, lowercase hex), SHA-256
    /// over the previous entry's link and this entry (docs/verification.md); `null` on a system
    /// account and on entries written before links existed.
    pub link: Option<String>,
}

/// A page of a list: `next_cursor` is opaque; pass it back as `?cursor=` for the next page.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

/// The open holds of an account and its balances, read in one snapshot.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HoldsPage {
    pub balances: BalancesView,
    pub data: Vec<TransactionView>,
    pub next_cursor: Option<String>,
}
