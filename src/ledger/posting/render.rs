//! Render: a decided item as the row, entries and holds it stores and the exact answer it
//! gets, serialized once.

use super::chain::NewEntry;
use super::decide::Decision;
use crate::ledger::holds;
use crate::ledger::money::{Amount, Currency};
use crate::ledger::transactions::{Kind, NewTransaction, RefusalCode, TransactionStatus};
use crate::ledger::views::{ExchangeView, LegView, RefusalView, TransactionView};
use crate::ledger::{Outcome, Refusal};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A decided item, rendered: its row, entries and holds, and the exact answer it gets.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    pub(crate) item_id: Uuid,
    pub(crate) kind: Kind,
    pub(crate) status: TransactionStatus,
    pub(crate) view: TransactionView,
    pub(crate) account_ids: Vec<String>,
    /// The canonical request as JSON text: what the insert sends (a tree would be copied).
    pub(crate) request: String,
    /// What the row stores as its creation's outcome, and every replay answers.
    pub(crate) outcome: Outcome,
    pub(crate) reverses: Option<Uuid>,
    pub(crate) reversed_amount: Option<Amount>,
    /// What the row and its entries store as `effective_at`: a backdated posting's date.
    pub(crate) backdated_to: Option<DateTime<Utc>>,
    pub(crate) entries: Vec<NewEntry>,
    pub(crate) holds: Vec<holds::OpenHold>,
}

impl Rendered {
    /// Whether the row posts or holds money on its accounts (a refusal or a record does not).
    pub(super) fn moves_money(&self) -> bool {
        match self.status {
            TransactionStatus::Posted | TransactionStatus::Pending => true,
            TransactionStatus::Rejected
            | TransactionStatus::Voided
            | TransactionStatus::Expired => false,
        }
    }

    /// The refusal the row stores, if it is one.
    pub(crate) fn refusal(&self) -> Option<&Refusal> {
        match &self.outcome {
            Outcome::Refused(refusal) => Some(refusal),
            Outcome::Created { .. } => None,
        }
    }
}

/// What a decision makes of a row's state: its status and currency, when it posted or
/// expires, and its refusal.
struct Settled {
    status: TransactionStatus,
    currency: Currency,
    posted_at: Option<DateTime<Utc>>,
    /// A backdated posting's date.
    backdated_to: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    refusal: Option<(RefusalCode, String)>,
}

fn settle(decision: &Decision) -> Settled {
    use TransactionStatus::{Pending, Posted, Rejected, Voided};
    let settled = |status, currency: &Currency| Settled {
        status,
        currency: *currency,
        posted_at: None,
        backdated_to: None,
        expires_at: None,
        refusal: None,
    };
    match decision {
        Decision::Post {
            currency,
            ledger_time,
            effective_at,
            ..
        } => Settled {
            posted_at: Some(*ledger_time),
            backdated_to: *effective_at,
            ..settled(Posted, currency)
        },
        Decision::Hold {
            currency,
            expires_at,
            ..
        } => Settled {
            expires_at: Some(*expires_at),
            ..settled(Pending, currency)
        },
        Decision::Refuse {
            currency,
            code,
            detail,
        } => Settled {
            refusal: Some((*code, detail.clone())),
            ..settled(Rejected, currency)
        },
        Decision::Record { currency } => settled(Voided, currency),
    }
}

/// The transaction as the API shows it, as it is created.
fn view(item: &NewTransaction, s: &Settled, now: DateTime<Utc>) -> TransactionView {
    let currency = s.currency;
    let per_leg = item.exchange.is_some();
    let entries: Vec<LegView> = item
        .journal
        .legs()
        .iter()
        .map(|l| {
            let leg_currency = l.currency.unwrap_or(currency);
            LegView::new(
                l.account.to_string(),
                l.amount.minor_units(),
                leg_currency,
                per_leg,
            )
        })
        .collect();
    let exchange = item
        .exchange
        .map(|x| ExchangeView::new(x.rate.as_text(), currency, x.counter_currency, &entries));
    TransactionView {
        id: item.id,
        kind: item.kind,
        status: s.status,
        currency: currency.code().to_owned(),
        entries,
        external_ref: item.external_ref.clone(),
        metadata: item.metadata.clone(),
        refusal: s.refusal.as_ref().map(|(code, detail)| RefusalView {
            code: *code,
            detail: detail.clone(),
        }),
        created_at: now,
        posted_at: s.posted_at,
        effective_at: s.backdated_to.or(s.posted_at),
        expires_at: s.expires_at,
        reverses: item.reversal.map(|r| r.original),
        captured_amount: None,
        captured_amount_decimal: None,
        authorized_amount: None,
        authorized_amount_decimal: None,
        exchange,
        // A new transaction's metadata is as sent.
        metadata_erased_at: None,
    }
}

pub(super) fn render(item: &NewTransaction, decision: &Decision, now: DateTime<Utc>) -> Rendered {
    let settled = settle(decision);
    let view = view(item, &settled, now);
    let outcome = match settled.refusal {
        None => Outcome::Created {
            body: serde_json::to_string(&view).expect("a transaction view always serializes"),
        },
        Some((code, detail)) => Outcome::Refused(Refusal {
            transaction: item.id,
            code,
            detail,
            recorded_answer: None,
        }),
    };
    let (entries, holds) = match decision {
        Decision::Post { entries, .. } => (entries.clone(), Vec::new()),
        Decision::Hold { holds, .. } => (Vec::new(), holds.clone()),
        Decision::Refuse { .. } | Decision::Record { .. } => (Vec::new(), Vec::new()),
    };
    Rendered {
        item_id: item.id,
        kind: item.kind,
        status: settled.status,
        view,
        account_ids: item.journal.sorted_accounts(),
        request: item.request.to_string(),
        outcome,
        reverses: item.reversal.map(|r| r.original),
        reversed_amount: item.reversal.map(|r| r.amount),
        backdated_to: settled.backdated_to,
        entries,
        holds,
    }
}
