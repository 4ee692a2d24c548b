//! Applying a batch of payment events in one database transaction, through the ledger's own
//! write path (`posting::create_many_in`, `holds::resolve_on`, `reversals::plan`): the same
//! journal rules, refusals and idempotency as the API.
//!
//! The payment id is the transaction's primary key, so a redelivered or resent event finds
//! its payment and is a no-op; the payment's status only moves forward (the event × state
//! table of the contract), so events arriving out of order end in the right state.
//!
//! A batch runs in *waves*: the first event of every payment in the batch, then the second
//! event of those that have two, and so on. Within a wave every payment appears once, so all
//! of its creations go to the write path as one set (one lock per wallet, one insert per
//! table); the rare later waves see what the earlier ones did.

use super::event::{self, EventType, Fields, PaymentEvent};
use crate::db::StoreError;
use crate::failpoint;
use crate::ledger::holds::{self, Action, Resolution};
use crate::ledger::ids::AccountId;
use crate::ledger::journal::{Journal, Leg};
use crate::ledger::money::{Amount, Currency};
use crate::ledger::posting::{self, BatchResult, Mode};
use crate::ledger::reversals::{self, Plan};
use crate::ledger::store::{self, Db, Store};
use crate::ledger::transactions::{
    ItemError, Kind, NewTransaction, RefusalCode, Requested, TransactionStatus, WriteError,
};
use crate::ledger::{self, Created, now_micros};
use crate::problem::FieldError;
use chrono::TimeDelta;
use serde_json::{Map, json};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};
use uuid::Uuid;

/// One stream entry as read from the broker.
#[derive(Debug, Clone)]
pub struct Message {
    /// The broker's id (`1791609321289-0`): where the entry is, never what it means.
    pub id: String,
    pub fields: Fields,
    /// Reclaimed from another consumer (or from this one after a retryable failure).
    pub redelivered: bool,
}

/// Why a message is dead-lettered, as the contract names it (serialized as [`Reason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    MalformedEvent,
    IdempotencyMismatch,
    UnknownAccount,
    UnknownPayment,
    ConflictingState,
    /// A provider's refund whose wallet is closed: the money was paid out, but the ledger
    /// cannot take it from a closed wallet; an operator decides.
    AccountClosed,
    /// Applied alone, the event still took longer than `--max-batch-ms` (a lock held
    /// elsewhere, an overloaded database): retried, then dead-lettered.
    TimedOut,
    /// A stored row it reads is corrupt (edited by hand, or written by a bug): dead-lettered
    /// at once; replay it once the row is repaired.
    CorruptRow,
}

impl Reason {
    pub const ALL: [Reason; 8] = [
        Reason::MalformedEvent,
        Reason::IdempotencyMismatch,
        Reason::UnknownAccount,
        Reason::UnknownPayment,
        Reason::ConflictingState,
        Reason::AccountClosed,
        Reason::TimedOut,
        Reason::CorruptRow,
    ];

    /// The reason a dead letter names (`dlq_reason`), if this version knows it.
    pub fn parse(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::MalformedEvent => "malformed_event",
            Reason::IdempotencyMismatch => "idempotency_mismatch",
            Reason::UnknownAccount => "unknown_account",
            Reason::UnknownPayment => "unknown_payment",
            Reason::ConflictingState => "conflicting_state",
            Reason::AccountClosed => "account_closed",
            Reason::TimedOut => "timed_out",
            Reason::CorruptRow => "corrupt_row",
        }
    }
}

/// What the ledger did for an applied event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A posted credit was created.
    Posted,
    /// A pending credit (a hold) was created.
    Held,
    /// A pending payment was posted (captured), fully or partly.
    Captured,
    /// A pending payment was voided.
    Voided,
    /// A payment that failed before anything else arrived was recorded as voided.
    RecordedFailed,
    /// A refund was posted as a reversal; `negative` when it overdrew the wallet.
    Refunded { negative: bool },
    /// The ledger refused it (a closed wallet, a refund beyond the payment) and stored the
    /// refusal under the id, as it would for an API request.
    Rejected { code: RefusalCode },
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Effect::Posted => f.write_str("posted"),
            Effect::Held => f.write_str("held"),
            Effect::Captured => f.write_str("captured"),
            Effect::Voided => f.write_str("voided"),
            Effect::RecordedFailed => f.write_str("recorded as failed"),
            Effect::Refunded { negative: false } => f.write_str("refunded"),
            Effect::Refunded { negative: true } => f.write_str("refunded, wallet now negative"),
            Effect::Rejected { code } => write!(f, "rejected: {}", code.as_str()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Applied(Effect),
    /// Already done: acknowledged, nothing changed.
    Duplicate,
    /// Not applicable yet for a reason of its own (unknown wallet, refund before its payment):
    /// left pending to be retried, and dead-lettered once its failure budget is spent.
    Retry {
        reason: Reason,
        detail: String,
    },
    /// Cannot apply now through no fault of its own (its wallet is locked by someone else):
    /// left pending, uncharged, and applied once it is reclaimed and the lock is gone.
    Wait {
        detail: String,
    },
    /// Can never apply as it is: dead-lettered now.
    DeadLetter {
        reason: Reason,
        detail: String,
        differing_fields: Vec<String>,
    },
}

impl Outcome {
    pub fn dead(reason: Reason, detail: impl Into<String>) -> Outcome {
        Outcome::DeadLetter {
            reason,
            detail: detail.into(),
            differing_fields: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Database(#[from] StoreError),
    #[error("concurrent writers kept taking this batch's ids")]
    Contention,
    #[error("the batch went on past its deadline and was abandoned")]
    Abandoned,
}

impl From<sqlx::Error> for ApplyError {
    fn from(error: sqlx::Error) -> ApplyError {
        ApplyError::Database(error.into())
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ApplySettings {
    /// How long a hold made by `payment.authorized` lasts.
    pub hold_expiry: TimeDelta,
    /// The longest one statement of the batch may run (`statement_timeout`): a batch the
    /// caller gave up on stops in the database too, instead of holding its locks while it
    /// waits for someone else's. A lock is waited for half as long (`lock_timeout`), so that
    /// a row someone else holds shows as such (SQLSTATE 55P03), not as a slow batch.
    pub statement_timeout: Option<std::time::Duration>,
}

/// A payment as stored, locked for the batch.
#[derive(Debug, Clone)]
struct Payment {
    kind: Kind,
    status: TransactionStatus,
    wallet: String,
    currency: Currency,
    /// What was authorized (or paid).
    amount: Amount,
    /// What was posted: a partial capture posts less than was authorized.
    posted_amount: Amount,
    /// Created as a hold (and captured or voided since, or still pending), rather than
    /// posted or recorded straight away.
    from_hold: bool,
}

/// What one event needs, decided against its payment's state.
enum Step {
    Create(Box<NewTransaction>),
    Resolve(Action, Option<Amount>),
    Refund,
    Done(Outcome),
}

/// Applies `messages` in one database transaction and says what became of each, in order.
/// An error means nothing was written (the transaction rolled back): the caller retries the
/// whole batch, and no message is charged for it.
pub async fn apply_batch(
    store: &Store,
    messages: &[Message],
    settings: ApplySettings,
) -> Result<Vec<Outcome>, ApplyError> {
    apply_batch_in(store, messages, settings, &BatchSession::default()).await
}

/// The database session a batch is being applied in, recorded as soon as it is known, so that
/// a caller past its deadline can cancel the batch's statement (`store::sessions::cancel`):
/// until then the abandoned transaction keeps its row locks, and the next attempt at the same
/// wallets would wait for them and fail as "locked".
#[derive(Debug, Default)]
pub struct BatchSession(AtomicI32);

impl BatchSession {
    fn set(&self, pid: i32) {
        self.0.store(pid, Ordering::Relaxed);
    }

    /// The backend's pid, once the batch's transaction has begun.
    pub fn pid(&self) -> Option<i32> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&pid| pid != 0)
    }
}

/// [`apply_batch`], recording its session in `session`.
pub async fn apply_batch_in(
    store: &Store,
    messages: &[Message],
    settings: ApplySettings,
    session: &BatchSession,
) -> Result<Vec<Outcome>, ApplyError> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; messages.len()];
    let mut events: Vec<(usize, PaymentEvent)> = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        match event::decode(&message.fields) {
            Ok(event) => events.push((index, event)),
            Err(why) => {
                outcomes[index] = Some(Outcome::dead(Reason::MalformedEvent, why.to_string()))
            }
        }
    }
    if !events.is_empty() {
        let mut conn = store.pool().acquire().await?;
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let pid = store::sessions::bound_and_identify(&mut tx, settings.statement_timeout).await?;
        session.set(pid);
        let applied = apply_events(&mut store.on(&mut tx), &events, settings, &mut outcomes).await;
        match applied {
            Ok(()) => {
                failpoint::hit(failpoint::CONSUMER_BEFORE_COMMIT);
                tx.commit().await?;
            }
            Err(e) => {
                // Rolled back here rather than when the connection is next used, so that its
                // locks are gone before the caller tries again.
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.expect("every message gets an outcome"))
        .collect())
}

/// What a batch knows while its waves are applied: read once, then kept current as waves lock
/// and change payments.
struct BatchState {
    settings: ApplySettings,
    wallet_currencies: HashMap<String, Currency>,
    payments: HashMap<Uuid, Payment>,
    /// Refunds this batch created, with their message's index.
    refunds_done: HashMap<Uuid, usize>,
}

/// The holds a wave resolves: message index, event, action and the amount to capture.
type Resolutions<'e> = Vec<(usize, &'e PaymentEvent, Action, Option<Amount>)>;

async fn apply_events(
    db: &mut Db<'_>,
    events: &[(usize, PaymentEvent)],
    settings: ApplySettings,
    outcomes: &mut [Option<Outcome>],
) -> Result<(), ApplyError> {
    let mut wallets: Vec<String> = events.iter().map(|(_, e)| e.wallet.to_string()).collect();
    wallets.sort();
    wallets.dedup();
    let wallet_currencies = wallet_currencies(db, &wallets).await?;
    let mut payment_ids: Vec<Uuid> = events.iter().map(|(_, e)| e.payment_id).collect();
    payment_ids.sort();
    payment_ids.dedup();
    // Payments first, sorted, then (in the write path) wallets, sorted: every consumer takes
    // its locks in the same order.
    let payments = lock_payments(db, &payment_ids).await?;
    let mut state = BatchState {
        settings,
        wallet_currencies,
        payments,
        refunds_done: HashMap::new(),
    };

    let waves = waves(events);
    let wave_count = waves.len();
    for (wave_number, wave) in waves.into_iter().enumerate() {
        let (creates, mut resolutions) = decide_wave(db, &state, &wave, outcomes).await?;
        if !creates.is_empty() {
            create_wave(db, &mut state, &wave, creates, &mut resolutions, outcomes).await?;
        }
        if wave_number == 0 {
            failpoint::hit(failpoint::CONSUMER_MID_BATCH);
        }
        resolve_wave(db, resolutions, outcomes).await?;

        // The next wave, if any, sees what this one did.
        if wave_number + 1 < wave_count {
            let mut touched: Vec<Uuid> = wave.iter().map(|(_, e)| e.payment_id).collect();
            touched.sort();
            state.payments.extend(lock_payments(db, &touched).await?);
        }
    }

    for (refund_id, index) in overdrawn_by(db, &state.refunds_done).await? {
        tracing::warn!(%refund_id, "a provider refund took the wallet below zero");
        metrics::counter!("wallet_ledger_consumer_negative_balances_total").increment(1);
        outcomes[index] = Some(Outcome::Applied(Effect::Refunded { negative: true }));
    }
    Ok(())
}

/// Decides each event of `wave` against its payment: the creations to write, the holds to
/// resolve; the events already answered get their outcome.
async fn decide_wave<'e>(
    db: &mut Db<'_>,
    state: &BatchState,
    wave: &[(usize, &'e PaymentEvent)],
    outcomes: &mut [Option<Outcome>],
) -> Result<(Vec<(usize, NewTransaction, Effect)>, Resolutions<'e>), ApplyError> {
    let mut creates: Vec<(usize, NewTransaction, Effect)> = Vec::new();
    let mut resolutions: Resolutions<'e> = Vec::new();
    for &(index, event) in wave {
        let wallet_currency = state.wallet_currencies.get(event.wallet.as_str()).copied();
        let payment = state.payments.get(&event.payment_id);
        match decide(event, payment, wallet_currency, state.settings) {
            Step::Create(new) => {
                let effect = match new.status {
                    Requested::Posted => Effect::Posted,
                    Requested::Pending { .. } => Effect::Held,
                    Requested::Voided => Effect::RecordedFailed,
                };
                creates.push((index, *new, effect));
            }
            Step::Resolve(action, amount) => resolutions.push((index, event, action, amount)),
            Step::Refund => match refund(db, event).await? {
                Ok(new) => creates.push((index, new, Effect::Refunded { negative: false })),
                Err(outcome) => outcomes[index] = Some(outcome),
            },
            Step::Done(outcome) => outcomes[index] = Some(outcome),
        }
    }
    Ok((creates, resolutions))
}

/// Writes a wave's creations as one set; a payment another writer stored meanwhile is decided
/// again and may join `resolutions`.
async fn create_wave<'e>(
    db: &mut Db<'_>,
    state: &mut BatchState,
    wave: &[(usize, &'e PaymentEvent)],
    creates: Vec<(usize, NewTransaction, Effect)>,
    resolutions: &mut Resolutions<'e>,
    outcomes: &mut [Option<Outcome>],
) -> Result<(), ApplyError> {
    let by_index: HashMap<usize, &PaymentEvent> = wave.iter().copied().collect();
    let items: Vec<NewTransaction> = creates.iter().map(|(_, n, _)| n.clone()).collect();
    let results = match posting::create_many_in(db, &items, Mode::Independent).await {
        Ok(BatchResult::Done(results)) => results,
        Ok(BatchResult::Failed { .. }) => {
            unreachable!("independent mode never fails a batch")
        }
        Err(WriteError::Database(e)) => return Err(e.into()),
        Err(WriteError::Contention) => return Err(ApplyError::Contention),
        // The consumer runs outside any request, so no caller gates its COMMIT.
        Err(WriteError::CallerGone) => return Err(ApplyError::Abandoned),
        Err(WriteError::Item(_)) => unreachable!("item errors come back per item"),
    };
    let mut contested: Vec<(usize, &PaymentEvent)> = Vec::new();
    for ((index, new, effect), result) in creates.into_iter().zip(results) {
        let refund = matches!(effect, Effect::Refunded { .. });
        if refund && matches!(result, Ok(Created::First(ledger::Outcome::Created { .. }))) {
            state.refunds_done.insert(new.id, index);
        }
        if !refund && stored_by_another(&result) {
            contested.push((index, by_index[&index]));
        } else {
            outcomes[index] = Some(created_outcome(result, effect));
        }
    }
    if !contested.is_empty() {
        decide_contested(db, state, contested, resolutions, outcomes).await?;
    }
    Ok(())
}

/// Another writer (a worker of this group, another consumer, the API) stored these payments
/// after this batch found them absent: what the event does is decided again from the stored
/// payment, under its lock, by the same table. Comparing the whole stored request instead
/// would call the event's own id a mismatch, and a capture racing its authorization would
/// leave the hold pending.
async fn decide_contested<'e>(
    db: &mut Db<'_>,
    state: &mut BatchState,
    contested: Vec<(usize, &'e PaymentEvent)>,
    resolutions: &mut Resolutions<'e>,
    outcomes: &mut [Option<Outcome>],
) -> Result<(), ApplyError> {
    let mut ids: Vec<Uuid> = contested.iter().map(|(_, e)| e.payment_id).collect();
    ids.sort();
    ids.dedup();
    state.payments.extend(lock_payments(db, &ids).await?);
    for (index, event) in contested {
        let wallet_currency = state.wallet_currencies.get(event.wallet.as_str()).copied();
        let stored = state.payments.get(&event.payment_id);
        match decide(event, stored, wallet_currency, state.settings) {
            Step::Resolve(action, amount) => resolutions.push((index, event, action, amount)),
            Step::Done(outcome) => outcomes[index] = Some(outcome),
            // The id is stored but not as a payment this table knows.
            Step::Create(_) | Step::Refund => {
                outcomes[index] = Some(Outcome::dead(
                    Reason::ConflictingState,
                    format!(
                        "transaction {} is stored, but not as a payment",
                        event.payment_id
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// Captures and voids lock the hold, then its wallets; sorted by wallet so that two consumers
/// meet their wallets in one order.
async fn resolve_wave(
    db: &mut Db<'_>,
    mut resolutions: Resolutions<'_>,
    outcomes: &mut [Option<Outcome>],
) -> Result<(), ApplyError> {
    resolutions.sort_by(|a, b| {
        (a.1.wallet.as_str(), a.1.payment_id).cmp(&(b.1.wallet.as_str(), b.1.payment_id))
    });
    for (index, event, action, amount) in resolutions {
        let resolution = holds::resolve_on(db, event.payment_id, action, amount).await?;
        outcomes[index] = Some(resolved_outcome(resolution, action));
    }
    Ok(())
}

/// Groups events by payment, then takes the first event of each payment, the second, ...
fn waves(events: &[(usize, PaymentEvent)]) -> Vec<Vec<(usize, &PaymentEvent)>> {
    let mut per_payment: BTreeMap<Uuid, usize> = BTreeMap::new();
    let mut waves: Vec<Vec<(usize, &PaymentEvent)>> = Vec::new();
    for (index, event) in events {
        let seen = per_payment.entry(event.payment_id).or_default();
        if waves.len() <= *seen {
            waves.push(Vec::new());
        }
        waves[*seen].push((*index, event));
        *seen += 1;
    }
    waves
}

/// The contract's event × state table.
fn decide(
    event: &PaymentEvent,
    payment: Option<&Payment>,
    wallet_currency: Option<Currency>,
    settings: ApplySettings,
) -> Step {
    use EventType::*;
    use TransactionStatus::*;
    let Some(payment) = payment else {
        return decide_new(event, wallet_currency, settings);
    };
    if payment.kind != Kind::Payment {
        let detail = format!(
            "transaction {} is a {}, not a payment",
            event.payment_id,
            payment.kind.as_str()
        );
        return Step::Done(Outcome::dead(Reason::ConflictingState, detail));
    }
    let conflict = || {
        let detail = format!(
            "{} cannot apply to a payment that is {}",
            event.kind.as_str(),
            payment.status.as_str()
        );
        Step::Done(Outcome::dead(Reason::ConflictingState, detail))
    };
    // The contract's event x state table, every cell spelled out.
    let step = match (event.kind, payment.status) {
        (Authorized, _) => Step::Done(Outcome::Duplicate),
        (Succeeded, Pending) => Step::Resolve(Action::Post, None),
        (Captured, Pending) => Step::Resolve(Action::Post, Some(event.amount)),
        (Succeeded | Captured, Voided | Expired) => conflict(),
        (Succeeded | Captured, Posted | Rejected) => Step::Done(Outcome::Duplicate),
        (Failed, Pending) => Step::Resolve(Action::Void, None),
        (Failed, Posted) => conflict(),
        (Failed, Voided | Expired | Rejected) => Step::Done(Outcome::Duplicate),
        (Refunded, Posted) => Step::Refund,
        (Refunded, Pending) => {
            let detail = format!(
                "payment {} is authorized but not captured yet",
                event.payment_id
            );
            Step::Done(Outcome::Retry {
                reason: Reason::UnknownPayment,
                detail,
            })
        }
        (Refunded, Voided | Expired | Rejected) => conflict(),
    };
    // A state the event cannot apply to is the finding, whatever its amount; otherwise an
    // event that disagrees with the stored payment is a mismatch, not a retry.
    if matches!(&step, Step::Done(Outcome::DeadLetter { .. })) {
        return step;
    }
    let (differing_fields, detail) = differences(event, payment);
    if !differing_fields.is_empty() {
        return Step::Done(Outcome::DeadLetter {
            reason: Reason::IdempotencyMismatch,
            detail,
            differing_fields,
        });
    }
    step
}

/// [`decide`] for an event whose payment is not stored: the payment it creates, if any.
fn decide_new(
    event: &PaymentEvent,
    wallet_currency: Option<Currency>,
    settings: ApplySettings,
) -> Step {
    use EventType::*;
    let requested = match event.kind {
        Refunded => {
            let detail = format!("payment {} is not in the ledger", event.payment_id);
            return Step::Done(Outcome::Retry {
                reason: Reason::UnknownPayment,
                detail,
            });
        }
        Authorized => match now_micros().checked_add_signed(settings.hold_expiry) {
            Some(expires_at) => Requested::Pending { expires_at },
            // The flag's range keeps this from happening; checked all the same.
            None => {
                let detail = "the hold's expiry is past the last representable time";
                return Step::Done(Outcome::dead(Reason::MalformedEvent, detail));
            }
        },
        Succeeded | Captured => Requested::Posted,
        Failed => Requested::Voided,
    };
    let Some(wallet_currency) = wallet_currency else {
        let detail = format!("wallet {} does not exist", event.wallet);
        return Step::Done(Outcome::Retry {
            reason: Reason::UnknownAccount,
            detail,
        });
    };
    match new_payment(event, wallet_currency, requested) {
        Ok(new) => Step::Create(Box::new(new)),
        Err(errors) => Step::Done(Outcome::dead(Reason::MalformedEvent, describe(&errors))),
    }
}

/// Where a creating event disagrees with the stored payment: the field names and a sentence
/// giving both values of each.
fn differences(event: &PaymentEvent, payment: &Payment) -> (Vec<String>, String) {
    let mut fields = Vec::new();
    let mut parts = Vec::new();
    if event.wallet.as_str() != payment.wallet {
        fields.push("wallet".to_owned());
        parts.push(format!(
            "wallet: payment has {}, event has {}",
            payment.wallet, event.wallet
        ));
    }
    if let Some(currency) = event.currency
        && currency != payment.currency
    {
        fields.push("currency".to_owned());
        parts.push(format!(
            "currency: payment has {}, event has {}",
            payment.currency.code(),
            currency.code()
        ));
    }
    let amount = event.amount;
    let mismatch = match (event.kind, payment.status) {
        // A refund carries the refunded part; the write path checks it against the payment.
        (EventType::Refunded, _) => None,
        (EventType::Captured, TransactionStatus::Pending) => {
            (amount > payment.amount).then_some(("authorized at most", payment.amount))
        }
        (EventType::Captured, TransactionStatus::Posted) => {
            (amount != payment.posted_amount).then_some(("payment has", payment.posted_amount))
        }
        // An authorization applied after its capture (workers take one payment's events out
        // of stream order): a payment posted straight from a capture knows only what was
        // captured, which the authorization must cover.
        (EventType::Authorized, TransactionStatus::Posted) if !payment.from_hold => {
            (amount < payment.amount).then_some(("captured", payment.amount))
        }
        _ => (amount != payment.amount).then_some(("payment has", payment.amount)),
    };
    if let Some((what, expected)) = mismatch {
        let format = |a| payment.currency.format_amount(a);
        fields.push("amount".to_owned());
        parts.push(format!(
            "amount: {what} {}, event has {}",
            format(expected),
            format(amount)
        ));
    }
    (fields, parts.join("; "))
}

/// The payment an event creates: the wallet credited from the provider's clearing account,
/// exactly as `POST /v1/payments` builds it.
fn new_payment(
    event: &PaymentEvent,
    wallet_currency: Currency,
    status: Requested,
) -> Result<NewTransaction, Vec<FieldError>> {
    let currency = event.currency.unwrap_or(wallet_currency);
    let clearing = AccountId::clearing(&event.provider, currency.code());
    if event.wallet == clearing {
        return Err(vec![FieldError::new(
            "wallet",
            "not_a_wallet",
            format!("{clearing} is the provider's clearing account, not a wallet"),
        )]);
    }
    let legs = vec![
        Leg {
            account: event.wallet.clone(),
            amount: event.amount,
            account_field: "wallet".into(),
            amount_field: "amount".into(),
            must_be_wallet: true,
            currency: None,
        },
        Leg {
            account: clearing.clone(),
            amount: event.amount.negate(),
            account_field: "provider".into(),
            amount_field: "amount".into(),
            must_be_wallet: false,
            currency: None,
        },
    ];
    let mut metadata = Map::new();
    metadata.insert("source".into(), json!("stream"));
    metadata.insert("event_id".into(), json!(event.event_id));
    metadata.insert("event_type".into(), json!(event.kind.as_str()));
    if let Some(at) = event.occurred_at {
        metadata.insert("occurred_at".into(), json!(at));
    }
    let request = json!({
        "kind": Kind::Payment.as_str(),
        "account": event.wallet,
        "amount": event.amount.minor_units(),
        "currency": currency.code(),
        "provider": event.provider,
        "external_ref": event.external_ref,
        "metadata": metadata,
    });
    Ok(NewTransaction {
        id: event.payment_id,
        kind: Kind::Payment,
        status,
        journal: Journal::new(legs)?,
        currency: Some((currency, "currency".into())),
        external_ref: event.external_ref.clone(),
        metadata,
        request,
        created_on_use: vec![(clearing, currency)],
        exchange: None,
        reversal: None,
        effective_at: None,
        provider_initiated: false,
    })
}

/// The reversal a refund becomes: `amount` of the payment, under `refund_id`.
async fn refund(
    db: &mut Db<'_>,
    event: &PaymentEvent,
) -> Result<Result<NewTransaction, Outcome>, StoreError> {
    let mut metadata = Map::new();
    metadata.insert("source".into(), json!("stream"));
    metadata.insert("event_type".into(), json!(event.kind.as_str()));
    let plan = reversals::plan(
        db.conn(),
        event.payment_id,
        event.refund_id,
        Some(event.amount),
        metadata,
    )
    .await?;
    Ok(match plan {
        Plan::Ready(new) => {
            // The payment is locked, so what is refunded of it cannot change under us. A new
            // refund past the payment is the provider disagreeing with the ledger: visible as
            // a dead letter, not stored as a refusal that nobody reads. (A refund id already
            // stored goes on to the write path, which replays it or reports the mismatch.)
            let seen = store::reads::refund_progress(db, event.payment_id, event.refund_id).await?;
            let original = new.reversal.map_or(Amount::ZERO, |r| r.original_amount);
            let amount = event.amount;
            // A sum out of range exceeds any payment.
            let exceeds = seen
                .refunded
                .checked_add(amount)
                .is_none_or(|total| total > original);
            if !seen.stored && exceeds {
                return Ok(Err(Outcome::dead(
                    Reason::ConflictingState,
                    format!(
                        "refunds would exceed the payment: {} of its {original} minor units already refunded, {amount} more",
                        seen.refunded
                    ),
                )));
            }
            Ok(NewTransaction {
                effective_at: None,
                provider_initiated: true,
                ..*new
            })
        }
        Plan::NotFound => Err(Outcome::Retry {
            reason: Reason::UnknownPayment,
            detail: format!("payment {} is not in the ledger", event.payment_id),
        }),
        Plan::InvalidTransition { current } => Err(Outcome::dead(
            Reason::ConflictingState,
            format!("a refund cannot apply to a payment that is {current}"),
        )),
        Plan::Invalid(errors) => Err(Outcome::dead(Reason::ConflictingState, describe(&errors))),
    })
}

/// The wallet a message is about ("" when it does not decode): the unit a slow or locked
/// batch is split by.
pub fn wallet_of(message: &Message) -> &[u8] {
    message.fields.get("wallet").unwrap_or_default()
}

/// Whether the write path found the id already stored by someone else (it answers such an
/// item as a replay or a mismatch of the stored request).
fn stored_by_another(result: &Result<Created, ItemError>) -> bool {
    matches!(result, Ok(Created::Replayed(_) | Created::Mismatch { .. }))
}

fn created_outcome(result: Result<Created, ItemError>, effect: Effect) -> Outcome {
    match result {
        Ok(Created::First(ledger::Outcome::Created { .. })) => Outcome::Applied(effect),
        Ok(Created::First(ledger::Outcome::Refused(refusal))) => {
            Outcome::Applied(Effect::Rejected { code: refusal.code })
        }
        // Another writer (a concurrent consumer, the API) stored this id first.
        Ok(Created::Replayed(_)) => Outcome::Duplicate,
        Ok(Created::Mismatch { differing_fields }) => {
            let fields: Vec<String> = differing_fields
                .iter()
                .map(|f| f.trim_start_matches('/').to_owned())
                .collect();
            Outcome::DeadLetter {
                reason: Reason::IdempotencyMismatch,
                detail: format!("the stored transaction differs in {}", fields.join(", ")),
                differing_fields: fields,
            }
        }
        Err(ItemError::UnknownAccounts(ids)) => Outcome::Retry {
            reason: Reason::UnknownAccount,
            detail: format!("no such account: {}", ids.join(", ")),
        },
        Err(ItemError::Invalid(errors))
            if errors
                .iter()
                .any(|e| e.code == RefusalCode::AccountClosed.as_str()) =>
        {
            Outcome::dead(Reason::AccountClosed, describe(&errors))
        }
        Err(ItemError::Invalid(errors)) => Outcome::dead(Reason::MalformedEvent, describe(&errors)),
    }
}

fn resolved_outcome(resolution: Resolution, action: Action) -> Outcome {
    match resolution {
        Resolution::Done { .. } => Outcome::Applied(match action {
            Action::Post => Effect::Captured,
            Action::Void => Effect::Voided,
        }),
        Resolution::Replayed { .. } => Outcome::Duplicate,
        Resolution::Mismatch { differing_fields } => Outcome::DeadLetter {
            reason: Reason::IdempotencyMismatch,
            detail: "the payment was settled before with another amount".to_owned(),
            differing_fields: differing_fields
                .iter()
                .map(|f| f.trim_start_matches('/').to_owned())
                .collect(),
        },
        Resolution::NotFound => Outcome::Retry {
            reason: Reason::UnknownPayment,
            detail: "the payment is not in the ledger".to_owned(),
        },
        Resolution::InvalidTransition { current } => Outcome::dead(
            Reason::ConflictingState,
            format!("the payment is {current}"),
        ),
        Resolution::Invalid(errors) => Outcome::dead(Reason::MalformedEvent, describe(&errors)),
    }
}

fn describe(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field.trim_start_matches('/'), e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

async fn wallet_currencies(
    db: &mut Db<'_>,
    wallets: &[String],
) -> Result<HashMap<String, Currency>, sqlx::Error> {
    let rows = store::reads::account_currencies(db, wallets).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, currency)| Currency::parse(&currency).map(|c| (id, c)))
        .collect())
}

async fn lock_payments(
    db: &mut Db<'_>,
    sorted_ids: &[Uuid],
) -> Result<HashMap<Uuid, Payment>, StoreError> {
    let rows = store::locks::payments(db, sorted_ids).await?;
    // A row that does not read as a transaction is corrupt, never "no payment yet": that
    // would make the event create it again under the same id.
    rows.into_iter()
        .map(|r| {
            let corrupt = |what: String| crate::db::corrupt("transactions", r.id, what);
            let legs: Vec<crate::ledger::views::LegView> =
                serde_json::from_value(r.legs).map_err(|e| corrupt(format!("its legs: {e}")))?;
            let credit = legs
                .iter()
                .find(|l| l.amount > 0)
                .ok_or_else(|| corrupt("no leg credits anything".into()))?;
            let in_range = |minor: i64, what: &str| {
                Amount::new(minor).ok_or_else(|| corrupt(format!("{what} {minor} out of range")))
            };
            let amount = in_range(credit.amount, "amount")?;
            let posted_amount = match r.captured_amount {
                Some(captured) => in_range(captured, "captured amount")?,
                None => amount,
            };
            let payment = Payment {
                kind: r.kind,
                status: r.status,
                wallet: credit.account.clone(),
                currency: r.currency,
                amount,
                posted_amount,
                from_hold: r.from_hold,
            };
            Ok((r.id, payment))
        })
        .collect()
}

/// The refunds (by id) among `refunds` that left their wallet below zero.
async fn overdrawn_by(
    db: &mut Db<'_>,
    refunds: &HashMap<Uuid, usize>,
) -> Result<Vec<(Uuid, usize)>, sqlx::Error> {
    if refunds.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = refunds.keys().copied().collect();
    let overdrawn = store::reads::overdrawing(db, &ids).await?;
    Ok(overdrawn
        .into_iter()
        .filter_map(|id| refunds.get(&id).map(|&index| (id, index)))
        .collect())
}
