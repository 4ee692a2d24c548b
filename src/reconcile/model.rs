//! What a reconciliation run finds, as data: rendered by `report` (HTML, JSON, CSV), stored
//! in `reconciliation_runs`, and served at `GET /v1/reconciliations/{id}`.

use super::invariants::Finding;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;
use uuid::Uuid;

/// What an exception says is wrong: one of the contract's seven codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExceptionCode {
    MissingInLedger,
    MissingAtProvider,
    AmountMismatch,
    CurrencyMismatch,
    StatusMismatch,
    DuplicateInFile,
    UnparsableRow,
}

impl ExceptionCode {
    /// Every code, in the order reports list them.
    pub const ALL: [ExceptionCode; 7] = [
        ExceptionCode::MissingInLedger,
        ExceptionCode::MissingAtProvider,
        ExceptionCode::AmountMismatch,
        ExceptionCode::CurrencyMismatch,
        ExceptionCode::StatusMismatch,
        ExceptionCode::DuplicateInFile,
        ExceptionCode::UnparsableRow,
    ];

    /// The contract's name: the JSON and CSV `code`, the `?code=` filter.
    pub fn as_str(self) -> &'static str {
        match self {
            ExceptionCode::MissingInLedger => "missing_in_ledger",
            ExceptionCode::MissingAtProvider => "missing_at_provider",
            ExceptionCode::AmountMismatch => "amount_mismatch",
            ExceptionCode::CurrencyMismatch => "currency_mismatch",
            ExceptionCode::StatusMismatch => "status_mismatch",
            ExceptionCode::DuplicateInFile => "duplicate_in_file",
            ExceptionCode::UnparsableRow => "unparsable_row",
        }
    }

    pub fn parse(name: &str) -> Option<ExceptionCode> {
        ExceptionCode::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// What the code means, in a few words (the HTML report's tooltips).
    pub fn meaning(self) -> &'static str {
        match self {
            ExceptionCode::MissingInLedger => "in the settlement file, not in the ledger",
            ExceptionCode::MissingAtProvider => "in the ledger, not in the settlement file",
            ExceptionCode::AmountMismatch => "the amounts differ",
            ExceptionCode::CurrencyMismatch => "the currencies differ",
            ExceptionCode::StatusMismatch => "the statuses differ",
            ExceptionCode::DuplicateInFile => "the same payment and status twice in the file",
            ExceptionCode::UnparsableRow => "a line of the file that could not be read",
        }
    }
}

impl std::fmt::Display for ExceptionCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One exception: one payment (or file line) and one category, with a reason per field,
/// e.g. `"amount: ledger 50.00, provider 45.00"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Exception {
    #[schema(inline)]
    pub code: ExceptionCode,
    pub payment_id: Option<Uuid>,
    pub external_ref: Option<String>,
    /// The settlement file's line (1 is the header), when the exception comes from the file.
    pub line: Option<i64>,
    pub reasons: Vec<String>,
}

// Amounts: each decimal string `x` (exact in the currency's exponent, what the reports have
// always shown) has an integer sibling `x_minor` in minor units, as every amount of the API
// has both forms. A sibling is `null` when the sum is beyond ±(2^53 − 1), where a JSON number
// stops being exact for JavaScript readers (a file's sums can get there), and in runs stored
// before it existed.

/// What the provider says became of a payment: paid out, given back, or never paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderStatus {
    Settled,
    Refunded,
    Failed,
}

impl ProviderStatus {
    pub const ALL: [ProviderStatus; 3] = [
        ProviderStatus::Settled,
        ProviderStatus::Refunded,
        ProviderStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderStatus::Settled => "settled",
            ProviderStatus::Refunded => "refunded",
            ProviderStatus::Failed => "failed",
        }
    }

    /// A file's `status` column; `None` for anything else.
    pub fn parse(text: &str) -> Option<ProviderStatus> {
        ProviderStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl std::fmt::Display for ProviderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payment found on both sides and agreeing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Matched {
    pub payment_id: Uuid,
    pub external_ref: Option<String>,
    pub currency: String,
    /// Gross, as a decimal string in the currency's exponent.
    pub amount: String,
    /// `amount` in minor units.
    #[serde(default)]
    pub amount_minor: Option<i64>,
    #[schema(inline)]
    pub status: ProviderStatus,
}

/// Lines of the file that share a `payout_ref`: one bank payout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Payout {
    pub payout_ref: String,
    pub currency: String,
    pub lines: i64,
    pub gross: String,
    pub fee: String,
    pub net: String,
    /// The ledger's amount for the payments in this payout that it knows.
    pub ledger_gross: String,
    #[serde(default)]
    pub gross_minor: Option<i64>,
    #[serde(default)]
    pub fee_minor: Option<i64>,
    #[serde(default)]
    pub net_minor: Option<i64>,
    #[serde(default)]
    pub ledger_gross_minor: Option<i64>,
    /// Whether the payout's gross equals the ledger's for its payments.
    pub agrees: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Summary {
    pub provider: String,
    /// The settlement period the ledger side was taken from (after the settlement lag).
    pub period_from: Option<DateTime<Utc>>,
    pub period_to: Option<DateTime<Utc>>,
    /// Data lines in the file (header excluded), and how many parsed.
    pub file_rows: i64,
    pub parsed_rows: i64,
    /// Ledger payments through the provider's clearing accounts in the period.
    pub ledger_payments: i64,
    pub matched: i64,
    /// Every exception code with its exact count (zero included).
    pub exceptions: BTreeMap<String, i64>,
    /// How many of them the run lists in `exceptions`: at most
    /// `MAX_LISTED_EXCEPTIONS_PER_CODE` (1,000) of each code, the first found. A fresh run's
    /// exceptions.csv lists them all. `null` in runs stored before the limit.
    #[serde(default)]
    pub exceptions_listed: Option<i64>,
    /// How many payouts the file has; `payouts` lists at most `MAX_LISTED_PAYOUTS` (10,000),
    /// the disagreeing ones first. `null` in runs stored before the limit.
    #[serde(default)]
    pub payouts_total: Option<i64>,
    /// Gross, fee and net of the file per currency, as decimal strings.
    pub totals: Vec<CurrencyTotals>,
    /// Broken ledger invariants found by the same run (see `verify`).
    pub invariant_findings: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CurrencyTotals {
    pub currency: String,
    pub gross: String,
    pub fee: String,
    pub net: String,
    #[serde(default)]
    pub gross_minor: Option<i64>,
    #[serde(default)]
    pub fee_minor: Option<i64>,
    #[serde(default)]
    pub net_minor: Option<i64>,
}

/// The integer sibling of a decimal amount or sum: its minor units, or `None` beyond
/// ±(2^53 − 1).
pub fn minor_sibling(minor: i128) -> Option<i64> {
    i64::try_from(minor)
        .ok()
        .filter(|m| m.abs() <= crate::ledger::money::MAX_AMOUNT)
}

/// A whole run: what every report shows.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunReport {
    pub id: Uuid,
    pub provider: String,
    /// SHA-256 of provider, file content and options: the same again is the same run.
    pub key: String,
    pub created_at: DateTime<Utc>,
    /// What the run was asked (period, tolerances, column names): part of its `key`.
    #[schema(schema_with = run_options)]
    pub options: serde_json::Value,
    pub summary: Summary,
    pub exceptions: Vec<Exception>,
    pub matched: Vec<Matched>,
    pub payouts: Vec<Payout>,
    pub invariants: Vec<Finding>,
}

fn run_options() -> utoipa::openapi::Object {
    crate::ledger::views::free_form_object(
        "`from`, `to`, `settlement_lag_hours`, `date_tolerance_hours`, `amount_tolerance`, `columns`",
    )
}

impl RunReport {
    pub fn is_clean(&self) -> bool {
        self.exceptions.is_empty()
            && self.summary.exceptions.values().all(|n| *n == 0)
            && self.invariants.is_empty()
    }
}
