//! Render: a decided item as the row, entries and holds it stores and the exact answer it
//! gets, serialized once.

use super::chain::NewEntry;
use super::decide::Decision;
use crate::ledger::Created;
use crate::ledger::holds;
use crate::ledger::transactions::{Kind, NewTransaction, RefusalCode, TransactionStatus};
use crate::ledger::views::{LegView, RefusalView, TransactionView};
use crate::problem::Problem;
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
    pub(crate) refusal: Option<RefusalView>,
    pub(crate) creation_status: i16,
    pub(crate) body: String,
    pub(crate) reverses: Option<Uuid>,
    pub(crate) reversed_amount: Option<i64>,
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

    pub(super) fn outcome(&self) -> Created {
        if self.creation_status == 201 {
            Created::New {
                body: self.body.clone(),
            }
        } else {
            Created::Refused {
                body: self.body.clone(),
            }
        }
    }
}

pub(super) fn render(item: &NewTransaction, decision: &Decision, now: DateTime<Utc>) -> Rendered {
    use TransactionStatus::{Pending, Posted, Rejected, Voided};
    let (status, currency, posted_at, expires_at, refusal) = match decision {
        Decision::Post {
            currency,
            ledger_time,
            ..
        } => (Posted, *currency, Some(*ledger_time), None, None),
        Decision::Hold {
            currency,
            expires_at,
            ..
        } => (Pending, *currency, None, Some(*expires_at), None),
        Decision::Refuse {
            currency,
            code,
            detail,
        } => (
            Rejected,
            *currency,
            None,
            None,
            Some((
                *code,
                RefusalView {
                    code: code.as_str().to_owned(),
                    detail: detail.clone(),
                },
            )),
        ),
        Decision::Record { currency } => (Voided, *currency, None, None, None),
    };
    let view = TransactionView {
        id: item.id,
        kind: item.kind.as_str().to_owned(),
        status: status.as_str().to_owned(),
        currency: currency.code().to_owned(),
        entries: item
            .journal
            .legs()
            .iter()
            .map(|l| LegView {
                account: l.account.to_string(),
                amount: l.amount.minor_units(),
                amount_decimal: currency.format(l.amount.minor_units()),
            })
            .collect(),
        external_ref: item.external_ref.clone(),
        metadata: item.metadata.clone(),
        refusal: refusal.as_ref().map(|(_, view)| view.clone()),
        created_at: now,
        posted_at,
        expires_at,
        reverses: item.reversal.map(|r| r.original),
        captured_amount: None,
        captured_amount_decimal: None,
        authorized_amount: None,
        authorized_amount_decimal: None,
    };
    let (creation_status, body) = match &refusal {
        None => (
            201,
            serde_json::to_string(&view).expect("a transaction view always serializes"),
        ),
        Some((code, view)) => (422, refusal_body(item.id, *code, &view.detail)),
    };
    let (entries, holds) = match decision {
        Decision::Post { entries, .. } => (entries.clone(), Vec::new()),
        Decision::Hold { holds, .. } => (Vec::new(), holds.clone()),
        Decision::Refuse { .. } | Decision::Record { .. } => (Vec::new(), Vec::new()),
    };
    Rendered {
        item_id: item.id,
        kind: item.kind,
        status,
        view,
        account_ids: item.journal.sorted_accounts(),
        request: item.request.to_string(),
        refusal: refusal.map(|(_, view)| view),
        creation_status,
        body,
        reverses: item.reversal.map(|r| r.original),
        reversed_amount: item.reversal.map(|r| r.amount.minor_units()),
        entries,
        holds,
    }
}

/// The problem body of a stored refusal; a retry gets these exact bytes again.
pub fn refusal_body(id: Uuid, code: RefusalCode, detail: &str) -> String {
    let mut problem = Problem::new(422, code.as_str(), code.title(), detail);
    problem.instance = Some(format!("/v1/transactions/{id}"));
    serde_json::to_string(&problem).expect("a problem always serializes")
}
