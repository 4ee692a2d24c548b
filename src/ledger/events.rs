//! The ledger's events: one `outbox_events` row per change worth telling, written by the same
//! database transaction as the change (a rolled-back change leaves no event; a committed one
//! always has its event). `src/outbox/` sends them.
//!
//! An event's id is UUIDv5 of its type and the change's natural key (the transaction id, the
//! account and its entry sequence, ...), so the id is the receivers' idempotency key and
//! recording the same change twice is a primary-key conflict, never a second event.

use super::money::Amount;
use super::posting::NewEntry;
use super::store::Db;
use super::transactions::TransactionStatus;
use super::views::TransactionView;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use std::borrow::Cow;
use std::collections::HashMap;
use uuid::Uuid;

/// The fixed namespace of event ids. Changing it would change every event id: it never changes.
pub const EVENT_NAMESPACE: Uuid = uuid::uuid!("3f0c2b7e-8d41-4a96-b5e3-1c7a9e2d6f48");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    TransactionPosted,
    TransactionRejected,
    TransactionVoided,
    TransactionExpired,
    TransactionReversed,
    HoldCreated,
    AccountFrozen,
    AccountClosed,
    AccountNegativeBalance,
    /// A balance monitor's condition made true by a change (`ledger::monitors`).
    BalanceMonitorTriggered,
    /// A signed checkpoint of the journal, committed by `wallet-ledger seal` (`ledger::seals`).
    LedgerCheckpoint,
    /// A transaction's metadata erased (`ledger::erasure`).
    TransactionMetadataErased,
}

impl EventType {
    pub const ALL: [EventType; 12] = [
        EventType::TransactionPosted,
        EventType::TransactionRejected,
        EventType::TransactionVoided,
        EventType::TransactionExpired,
        EventType::TransactionReversed,
        EventType::HoldCreated,
        EventType::AccountFrozen,
        EventType::AccountClosed,
        EventType::AccountNegativeBalance,
        EventType::BalanceMonitorTriggered,
        EventType::LedgerCheckpoint,
        EventType::TransactionMetadataErased,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TransactionPosted => "transaction.posted",
            EventType::TransactionRejected => "transaction.rejected",
            EventType::TransactionVoided => "transaction.voided",
            EventType::TransactionExpired => "transaction.expired",
            EventType::TransactionReversed => "transaction.reversed",
            EventType::HoldCreated => "hold.created",
            EventType::AccountFrozen => "account.frozen",
            EventType::AccountClosed => "account.closed",
            EventType::AccountNegativeBalance => "account.negative_balance",
            EventType::BalanceMonitorTriggered => "balance.monitor_triggered",
            EventType::LedgerCheckpoint => "ledger.checkpoint",
            EventType::TransactionMetadataErased => "transaction.metadata_erased",
        }
    }

    pub fn parse(value: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == value)
    }

    /// The event a newly stored transaction row gives, by its status and kind.
    pub fn of_new_transaction(status: TransactionStatus, is_reversal: bool) -> Option<EventType> {
        match status {
            TransactionStatus::Posted if is_reversal => Some(EventType::TransactionReversed),
            TransactionStatus::Posted => Some(EventType::TransactionPosted),
            TransactionStatus::Rejected => Some(EventType::TransactionRejected),
            TransactionStatus::Pending => Some(EventType::HoldCreated),
            TransactionStatus::Voided => Some(EventType::TransactionVoided),
            // A row is stored pending and expires later: never new as expired.
            TransactionStatus::Expired => None,
        }
    }
}

pub fn event_id(event: EventType, key: &str) -> Uuid {
    Uuid::new_v5(
        &EVENT_NAMESPACE,
        format!("{}\n{key}", event.as_str()).as_bytes(),
    )
}

/// A transaction's event as the change's writer renders it, from what it just wrote: the
/// transaction as the API shows it after the change, and the entries the change wrote. No
/// row is read back to build it.
pub(crate) struct TransactionEvent<'a> {
    event: EventType,
    transaction_id: Uuid,
    /// The transaction's API representation ([`TransactionView`]) as JSON text.
    transaction: Cow<'a, str>,
    /// Its currency, which formats the entries' `balance_after_decimal` (an exchange's
    /// entries carry their own).
    currency: Cow<'a, str>,
    /// The entries this change wrote (none for a hold, a refusal, a release, an expiry).
    entries: &'a [NewEntry],
}

impl<'a> TransactionEvent<'a> {
    /// From an answer the change already serialized from the transaction's view (a creation's
    /// or a capture's stored response), so the view is not serialized twice.
    pub fn from_answer(
        event: EventType,
        transaction_id: Uuid,
        answer: &'a str,
        currency: &'a str,
        entries: &'a [NewEntry],
    ) -> TransactionEvent<'a> {
        TransactionEvent {
            event,
            transaction_id,
            transaction: Cow::Borrowed(answer),
            currency: Cow::Borrowed(currency),
            entries,
        }
    }

    pub fn new(
        event: EventType,
        view: &TransactionView,
        entries: &'a [NewEntry],
    ) -> TransactionEvent<'a> {
        TransactionEvent {
            event,
            transaction_id: view.id,
            transaction: Cow::Owned(
                serde_json::to_string(view).expect("a transaction view always serializes"),
            ),
            currency: Cow::Owned(view.currency.clone()),
            entries,
        }
    }

    /// `{"transaction": ..., "accounts": [...]}`: `accounts` lists each wallet entry's
    /// `sequence` and `balance_after` (by account), so receivers can order an account's events.
    fn data(&self) -> String {
        #[derive(Serialize)]
        struct Mark<'e> {
            account: &'e str,
            sequence: i64,
            balance_after: Amount,
            balance_after_decimal: String,
        }
        let mut marks: Vec<Mark> = self
            .entries
            .iter()
            .filter_map(|e| {
                let balance_after = e.balance_after?;
                Some(Mark {
                    account: &e.account,
                    sequence: e.sequence?,
                    balance_after,
                    balance_after_decimal: decimal(
                        e.currency_or(&self.currency),
                        balance_after.minor_units(),
                    ),
                })
            })
            .collect();
        marks.sort_by(|a, b| (a.account, a.sequence).cmp(&(b.account, b.sequence)));
        let marks = serde_json::to_string(&marks).expect("marks always serialize");
        format!(
            r#"{{"transaction":{},"accounts":{marks}}}"#,
            self.transaction
        )
    }
}

/// `amount` of `currency` as the API's `x_decimal` shows it (the ledger holds only currencies
/// it knows, so the plain integer is a fallback that cannot be reached).
pub(crate) fn decimal(currency: &str, amount: i64) -> String {
    super::money::Currency::parse(currency).map_or_else(|| amount.to_string(), |c| c.format(amount))
}

/// Records the events of a change, in its database transaction, numbered (`seq`) in the
/// order given: the order the batch was decided in. One event per `(transaction, type)`.
pub(crate) async fn record_transactions(
    conn: &mut PgConnection,
    events: &[TransactionEvent<'_>],
) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = events
        .iter()
        .map(|e| event_id(e.event, &e.transaction_id.to_string()))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    let transactions: Vec<Uuid> = events.iter().map(|e| e.transaction_id).collect();
    // Text cast in SQL, like the write path's other JSON columns.
    let data: Vec<String> = events.iter().map(TransactionEvent::data).collect();
    sqlx::query!(
        r#"insert into outbox_events (id, type, transaction_id, data)
           select id, type, transaction_id, data::jsonb
           from unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[]) with ordinality
                as ev(id, type, transaction_id, data, n)
           order by n
           on conflict (id) do nothing"#,
        &ids,
        &types as &[&str],
        &transactions,
        &data,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records an event per `(transaction, type)` for changes that wrote no entries (an expiry),
/// the transaction read as it now is in this database transaction.
pub async fn record_stored_transactions(
    db: &mut Db<'_>,
    events: &[(Uuid, EventType)],
) -> Result<(), crate::db::StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = events.iter().map(|(id, _)| *id).collect();
    let views: HashMap<Uuid, TransactionView> = super::transactions::find_many(db, &ids)
        .await?
        .into_iter()
        .map(|v| (v.id, v))
        .collect();
    let events: Vec<TransactionEvent> = events
        .iter()
        .filter_map(|(id, event)| Some(TransactionEvent::new(*event, views.get(id)?, &[])))
        .collect();
    Ok(record_transactions(db.conn(), &events).await?)
}

/// Records an account's status change (`account.frozen`, `account.closed`), keyed by the
/// moment of the change so that a second freeze after an unfreeze is a second event.
/// `overdraft_limit_decimal` is the locked row's limit formatted by the caller (the exponent
/// table lives in the code, not in the database).
pub async fn record_account(
    conn: &mut PgConnection,
    account: &str,
    event: EventType,
    changed_at: DateTime<Utc>,
    overdraft_limit_decimal: &str,
) -> Result<(), sqlx::Error> {
    let id = event_id(
        event,
        &format!("{account}\n{}", changed_at.timestamp_micros()),
    );
    sqlx::query!(
        r#"insert into outbox_events (id, type, account_id, data)
           select $1, $2, a.id,
                  jsonb_build_object('account', jsonb_build_object(
                      'id', a.id, 'currency', a.currency, 'type', a.type, 'status', a.status,
                      'overdraft_limit', a.overdraft_limit,
                      'overdraft_limit_decimal', $4::text, 'metadata', a.metadata,
                      'version', a.version, 'updated_at', a.updated_at))
           from accounts a where a.id = $3
           on conflict (id) do nothing"#,
        id,
        event.as_str(),
        account,
        overdraft_limit_decimal
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The wallets that `entries` of `transaction_id` took from zero or more to below zero.
pub(crate) fn negative_crossings<'a>(
    transaction_id: Uuid,
    currency: &str,
    entries: impl IntoIterator<Item = &'a NewEntry>,
) -> Vec<NegativeBalance> {
    entries
        .into_iter()
        .filter_map(|e| {
            let (after, sequence) = (e.balance_after?, e.sequence?);
            // A chained entry's balance before it was the chain's previous balance, in range.
            let before = after
                .checked_sub(e.amount)
                .expect("a chain's previous balance is in range");
            (after.is_negative() && !before.is_negative()).then(|| NegativeBalance {
                account: e.account.clone(),
                transaction_id,
                currency: e.currency_or(currency).to_owned(),
                sequence,
                balance_after: after,
            })
        })
        .collect()
}

/// A wallet whose balance went from zero or more to below zero at one entry.
#[derive(Debug, Clone)]
pub struct NegativeBalance {
    pub account: String,
    pub transaction_id: Uuid,
    pub currency: String,
    pub sequence: i64,
    pub balance_after: Amount,
}

pub async fn record_negative_balances(
    conn: &mut PgConnection,
    crossings: &[NegativeBalance],
) -> Result<(), sqlx::Error> {
    if crossings.is_empty() {
        return Ok(());
    }
    let event = EventType::AccountNegativeBalance;
    let ids: Vec<Uuid> = crossings
        .iter()
        .map(|c| event_id(event, &format!("{}\n{}", c.account, c.sequence)))
        .collect();
    let transactions: Vec<Uuid> = crossings.iter().map(|c| c.transaction_id).collect();
    let accounts: Vec<&str> = crossings.iter().map(|c| c.account.as_str()).collect();
    let data: Vec<serde_json::Value> = crossings
        .iter()
        .map(|c| {
            json!({"account": {"id": c.account, "currency": c.currency},
                   "transaction_id": c.transaction_id, "sequence": c.sequence,
                   "balance_after": c.balance_after,
                   "balance_after_decimal": decimal(&c.currency, c.balance_after.minor_units())})
        })
        .collect();
    sqlx::query!(
        r#"insert into outbox_events (id, type, transaction_id, account_id, data)
           select id, $1, transaction_id, account_id, data
           from unnest($2::uuid[], $3::uuid[], $4::text[], $5::jsonb[])
                as c(id, transaction_id, account_id, data)
           order by id
           on conflict (id) do nothing"#,
        event.as_str(),
        &ids,
        &transactions,
        &accounts as &[&str],
        &data,
    )
    .execute(conn)
    .await?;
    Ok(())
}
