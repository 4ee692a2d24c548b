//! Transactions: what a request to move money is ([`NewTransaction`]), and the reads of
//! transactions and entries. The write path lives in `posting` (creates), `holds` (capture,
//! release, expiry) and `reversals`.

use super::ids::AccountId;
use super::journal::Journal;
use super::money::{Amount, Currency, MAX_AMOUNT};
use super::store::{Db, reads};
use super::views::{EntryView, ExchangeView, LegView, RefusalView, TransactionView};
use crate::db::StoreError;
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

/// Which endpoint created a transaction: `transaction`, `transfer`, `payment`, `reversal` or
/// `exchange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Transaction,
    Transfer,
    Payment,
    Reversal,
    Exchange,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Transaction => "transaction",
            Kind::Transfer => "transfer",
            Kind::Payment => "payment",
            Kind::Reversal => "reversal",
            Kind::Exchange => "exchange",
        }
    }

    /// The stored `transactions.kind`; `None` for anything the schema's check would refuse.
    pub fn parse(stored: &str) -> Option<Kind> {
        [
            Kind::Transaction,
            Kind::Transfer,
            Kind::Payment,
            Kind::Reversal,
            Kind::Exchange,
        ]
        .into_iter()
        .find(|k| k.as_str() == stored)
    }
}

/// A transaction's status as a reader sees it: `pending` (a hold), `posted`, `rejected`,
/// `voided` or `expired`; a pending hold past its expiry reads as `expired` before the sweeper
/// marks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransactionStatus {
    Pending,
    Posted,
    Voided,
    Rejected,
    Expired,
}

impl TransactionStatus {
    pub const ALL: [TransactionStatus; 5] = [
        TransactionStatus::Pending,
        TransactionStatus::Posted,
        TransactionStatus::Voided,
        TransactionStatus::Rejected,
        TransactionStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TransactionStatus::Pending => "pending",
            TransactionStatus::Posted => "posted",
            TransactionStatus::Voided => "voided",
            TransactionStatus::Rejected => "rejected",
            TransactionStatus::Expired => "expired",
        }
    }

    pub fn parse(stored: &str) -> Option<TransactionStatus> {
        TransactionStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == stored)
    }
}

impl std::fmt::Display for TransactionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the caller asked for: money that moves now, a hold until `expires_at`, or the record
/// of a payment that failed before it was ever authorized (no entries, no hold: a `voided`
/// row whose id later events find, so a late `payment.authorized` cannot revive it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    Posted,
    Pending { expires_at: DateTime<Utc> },
    Voided,
}

/// A reversal gives back `amount` of the posted transaction `original`, whose own amount
/// (the sum of its credits) is `original_amount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reversal {
    pub original: Uuid,
    pub amount: Amount,
    pub original_amount: Amount,
}

/// A validated request to move money. `request` is its canonical form (defaults applied, no
/// id), compared field by field when the id comes again.
#[derive(Debug, Clone)]
pub struct NewTransaction {
    pub id: Uuid,
    pub kind: Kind,
    pub status: Requested,
    pub journal: Journal,
    /// The currency the caller named (payments), and the field that named it.
    pub currency: Option<(Currency, String)>,
    pub external_ref: Option<String>,
    pub metadata: Map<String, Value>,
    pub request: Value,
    /// The system accounts the ledger creates on first use that this item names: a payment's
    /// clearing account (created by the provider's first posted payment), an exchange's
    /// `fx:{currency}` accounts.
    pub created_on_use: Vec<(AccountId, Currency)>,
    /// An exchange (or its reversal): the terms of its legs in the counter currency.
    pub exchange: Option<super::exchange::Exchange>,
    pub reversal: Option<Reversal>,
    /// A posted transaction dated in the past (`effective_at`): see `ledger::effective`.
    pub effective_at: Option<super::effective::EffectiveDate>,
    /// A provider's refund reported on the stream: the money already left through the provider,
    /// so the ledger records it even when it overdraws the wallet or the wallet is frozen.
    /// Every request made through the API leaves it `false`.
    pub provider_initiated: bool,
}

/// Why a create could not even be decided: nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    #[error("unknown accounts: {0:?}")]
    UnknownAccounts(Vec<String>),
    #[error("invalid request")]
    Invalid(Vec<FieldError>),
}

/// A single create's failure: the request's own, or the database's. Cheap to clone, so that
/// group commit answers every caller of a failed group with the same error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Item(#[from] ItemError),
    #[error(transparent)]
    Database(#[from] StoreError),
    /// Concurrent requests kept taking this batch's ids; a retry will replay them.
    #[error("concurrent requests with the same ids; retry")]
    Contention,
    /// The caller was answered 503 at its deadline before the COMMIT: rolled back, nothing
    /// written (`ledger::caller`).
    #[error("the request timed out before its commit; nothing was written")]
    CallerGone,
}

impl WriteError {
    /// Whether the same write may succeed later unchanged ([`StoreError::is_transient`]; ids
    /// taken concurrently are too). A request error never is.
    pub fn is_transient(&self) -> bool {
        match self {
            WriteError::Contention | WriteError::CallerGone => true,
            WriteError::Item(_) => false,
            WriteError::Database(e) => e.is_transient(),
        }
    }
}

impl From<sqlx::Error> for WriteError {
    fn from(error: sqlx::Error) -> WriteError {
        WriteError::Database(error.into())
    }
}

/// The sum of a transaction's credits in `currency`, its own: what "the amount" of an
/// exchange is (its credits in the counter currency are the counter amount). For a
/// transaction in one currency, [`credited_total`].
pub fn credited_total_in(legs: &[LegView], currency: Currency) -> Amount {
    credits(
        legs.iter()
            .filter(|l| l.currency_or(currency) == Some(currency)),
    )
}

/// The sum of a transaction's credits: what "the amount" of a transfer or payment is.
/// A stored journal's credits sum to its debits, each within the range, so the sum is in range;
/// should a stored row say otherwise, the total saturates at M rather than wrap or fail.
pub fn credited_total(legs: &[LegView]) -> Amount {
    credits(legs.iter())
}

fn credits<'a>(legs: impl Iterator<Item = &'a LegView>) -> Amount {
    legs.map(|l| Amount::new(l.amount.clamp(0, MAX_AMOUNT)).expect("clamped into the range"))
        .fold(Amount::ZERO, Amount::saturating_add)
}

/// A stored transaction's row, as read; [`StoredTransaction::view`] parses its kind and
/// status (the text columns) into [`Kind`] and [`TransactionStatus`].
pub(crate) struct StoredTransaction {
    pub id: Uuid,
    pub seq: i64,
    pub kind: String,
    /// A pending hold past its expiry reads as `expired` even before the sweeper marks it.
    pub status: String,
    pub currency: String,
    pub legs: Value,
    pub external_ref: Option<String>,
    pub metadata: Value,
    pub refusal_code: Option<String>,
    pub refusal_detail: Option<String>,
    pub created_at: DateTime<Utc>,
    pub posted_at: Option<DateTime<Utc>>,
    /// Set when it was backdated; otherwise it counts from `posted_at`.
    pub effective_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub reverses: Option<Uuid>,
    pub captured_amount: Option<i64>,
    /// The entries it posted (`[{account, amount, currency}]` in entry order), `None` when
    /// it has none.
    pub posted_entries: Option<Value>,
    /// Exchanges and their reversals: the counter currency and the rate (as text).
    pub counter_currency: Option<String>,
    pub exchange_rate: Option<String>,
    /// When its metadata was erased (`ledger::erasure`).
    pub metadata_erased_at: Option<DateTime<Utc>>,
}

/// One posted entry as `StoredTransaction::posted_entries` holds it.
#[derive(serde::Deserialize)]
struct PostedEntry {
    account: String,
    amount: i64,
    currency: String,
}

impl StoredTransaction {
    /// The transaction as the API shows it; a kind, status or refusal code the code does not
    /// know is a corrupt row, never passed on.
    pub(crate) fn view(self) -> Result<TransactionView, StoreError> {
        let kind = Kind::parse(&self.kind).ok_or_else(|| {
            crate::db::corrupt(
                "transactions",
                self.id,
                format!("unknown kind {:?}", self.kind),
            )
        })?;
        let status = TransactionStatus::parse(&self.status).ok_or_else(|| {
            let what = format!("unknown status {:?}", self.status);
            crate::db::corrupt("transactions", self.id, what)
        })?;
        let refusal_code = match self.refusal_code.as_deref() {
            None => None,
            Some(code) => Some(RefusalCode::parse(code).ok_or_else(|| {
                let what = format!("unknown refusal code {code:?}");
                crate::db::corrupt("transactions", self.id, what)
            })?),
        };
        let currency = Currency::parse(&self.currency);
        let legs: Vec<LegView> = serde_json::from_value(self.legs).unwrap_or_default();
        let authorized = self.captured_amount.map(|_| credited_total(&legs));
        let per_leg = self.counter_currency.is_some();
        let entries = posted_or_asked(self.posted_entries, legs, per_leg);
        let exchange = match (currency, self.counter_currency, self.exchange_rate) {
            (Some(c), Some(counter), Some(rate)) => {
                let counter = Currency::parse(&counter).ok_or_else(|| {
                    let what = format!("unknown counter currency {counter:?}");
                    crate::db::corrupt("transactions", self.id, what)
                })?;
                Some(ExchangeView::new(rate, c, counter, &entries))
            }
            _ => None,
        };
        Ok(TransactionView {
            id: self.id,
            kind,
            status,
            currency: self.currency,
            entries,
            external_ref: self.external_ref,
            metadata: match self.metadata {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            refusal: refusal_code.map(|code| RefusalView {
                code,
                detail: self.refusal_detail.unwrap_or_default(),
            }),
            created_at: self.created_at,
            posted_at: self.posted_at,
            effective_at: self.effective_at.or(self.posted_at),
            expires_at: self.expires_at,
            reverses: self.reverses,
            captured_amount: self.captured_amount,
            captured_amount_decimal: self.captured_amount.zip(currency).map(|(a, c)| c.format(a)),
            authorized_amount: authorized.map(Amount::minor_units),
            authorized_amount_decimal: authorized.zip(currency).map(|(a, c)| c.format_amount(a)),
            exchange,
            metadata_erased_at: self.metadata_erased_at,
        })
    }
}

/// What a transaction shows as its entries: what it posted, once it did (a partly captured
/// hold posted less than its legs held); before (a hold, a refusal) there are no entries, and
/// the legs say what was asked.
fn posted_or_asked(posted: Option<Value>, legs: Vec<LegView>, per_leg: bool) -> Vec<LegView> {
    let posted: Option<Vec<PostedEntry>> = posted.and_then(|e| serde_json::from_value(e).ok());
    let Some(posted) = posted else {
        return legs;
    };
    let shown: Option<Vec<LegView>> = posted
        .into_iter()
        .map(|e| {
            let currency = Currency::parse(&e.currency)?;
            Some(LegView::new(e.account, e.amount, currency, per_leg))
        })
        .collect();
    shown.unwrap_or(legs)
}

pub async fn find(db: &mut Db<'_>, id: Uuid) -> Result<Option<TransactionView>, StoreError> {
    Ok(find_many(db, &[id]).await?.pop())
}

/// The stored transactions of `ids`, in no particular order; missing ids are left out and a
/// repeated id comes back once per mention.
pub async fn find_many(db: &mut Db<'_>, ids: &[Uuid]) -> Result<Vec<TransactionView>, StoreError> {
    reads::transactions(db, ids).await
}

/// Filters of `GET /v1/transactions`; `before_seq` is the decoded cursor.
#[derive(Debug, Default)]
pub struct TransactionFilter {
    pub account: Option<String>,
    pub status: Option<TransactionStatus>,
    pub external_ref: Option<String>,
    /// Only the reversals of this transaction.
    pub reverses: Option<Uuid>,
    /// A [`super::search::metadata_predicate`].
    pub metadata: Option<String>,
    pub before_seq: Option<i64>,
    pub limit: i64,
}

/// Newest first. Returns the page and the cursor of the next one.
pub async fn list(
    db: &mut Db<'_>,
    f: &TransactionFilter,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    reads::transaction_page(db, f).await
}

/// A page of stored transactions as views, and the cursor of the next one.
pub(crate) fn page(
    rows: Vec<StoredTransaction>,
    limit: i64,
) -> Result<(Vec<TransactionView>, Option<i64>), StoreError> {
    let (views, next) = paginate(rows, limit, |r| r.seq, StoredTransaction::view);
    Ok((views.into_iter().collect::<Result<_, _>>()?, next))
}

/// Keeps `limit` rows and, when one more came back, the cursor that continues after them.
pub(crate) fn paginate<R, V>(
    mut rows: Vec<R>,
    limit: i64,
    key: impl Fn(&R) -> i64,
    view: impl Fn(R) -> V,
) -> (Vec<V>, Option<i64>) {
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next = if more { rows.last().map(&key) } else { None };
    (rows.into_iter().map(view).collect(), next)
}

/// The entries of an account, newest first (entry ids grow along a wallet's sequence, since
/// they are drawn while the wallet is locked).
pub async fn entries(
    conn: &mut PgConnection,
    account: &str,
    currency: Currency,
    before_id: Option<i64>,
    limit: i64,
) -> Result<(Vec<EntryView>, Option<i64>), sqlx::Error> {
    let rows = sqlx::query!(
        r#"select id, transaction_id, account_id, currency, amount, sequence, balance_after, ledger_time,
                  coalesce(effective_at, ledger_time) as "effective_at!", chain_hash
           from entries
           where account_id = $1 and ($2::bigint is null or id < $2)
           order by id desc limit $3"#,
        account,
        before_id,
        limit + 1
    )
    .fetch_all(conn)
    .await?;
    Ok(paginate(
        rows,
        limit,
        |r| r.id,
        |r| EntryView {
            id: r.id,
            transaction_id: r.transaction_id,
            account: r.account_id,
            currency: r.currency,
            amount: r.amount,
            amount_decimal: currency.format(r.amount),
            sequence: r.sequence,
            balance_after: r.balance_after,
            balance_after_decimal: r.balance_after.map(|b| currency.format(b)),
            ledger_time: r.ledger_time,
            effective_at: r.effective_at,
            link: r.chain_hash.as_deref().map(crate::hex::encode),
        },
    ))
}

/// Why a create was refused for a business reason: stored under its id, and every retry gets
/// the same refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    InsufficientFunds,
    AccountFrozen,
    AccountClosed,
    ReversalExceedsOriginal,
    /// A movement past one of the wallet's velocity limits (`ledger::limits`).
    VelocityLimitExceeded,
}

impl RefusalCode {
    pub const ALL: [RefusalCode; 5] = [
        RefusalCode::InsufficientFunds,
        RefusalCode::AccountFrozen,
        RefusalCode::AccountClosed,
        RefusalCode::ReversalExceedsOriginal,
        RefusalCode::VelocityLimitExceeded,
    ];

    /// The stable code: `refusal_code` as stored, `refusal.code` of the view, the problem's
    /// `code` in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::InsufficientFunds => "insufficient_funds",
            RefusalCode::AccountFrozen => "account_frozen",
            RefusalCode::AccountClosed => "account_closed",
            RefusalCode::ReversalExceedsOriginal => "reversal_exceeds_original",
            RefusalCode::VelocityLimitExceeded => "velocity_limit_exceeded",
        }
    }

    /// A stored `refusal_code`; `None` for a word the code does not know (a corrupt row).
    pub fn parse(stored: &str) -> Option<RefusalCode> {
        RefusalCode::ALL.into_iter().find(|c| c.as_str() == stored)
    }
}

#[cfg(test)]
mod refusal_code_tests {
    use super::{Kind, RefusalCode, TransactionStatus};
    use std::collections::HashSet;

    #[test]
    fn stored_kinds_and_statuses_read_back_and_nothing_else_does() {
        for kind in [
            Kind::Transaction,
            Kind::Transfer,
            Kind::Payment,
            Kind::Reversal,
            Kind::Exchange,
        ] {
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
        }
        for status in TransactionStatus::ALL {
            assert_eq!(TransactionStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(TransactionStatus::parse("Posted"), None);
        for code in RefusalCode::ALL {
            assert_eq!(RefusalCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(RefusalCode::parse("Insufficient funds"), None);
        assert_eq!(Kind::parse(""), None);
    }

    #[test]
    fn each_refusal_code_has_its_own_code() {
        let codes: HashSet<&str> = RefusalCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes.len(), RefusalCode::ALL.len());
    }
}
