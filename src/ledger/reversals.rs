//! Reversals: a new transaction, with its own id, whose legs are the opposite of a posted
//! original's (all of it, or part of a two-leg original). The total reversed never exceeds
//! the original: `posting` locks the original's row and sums the reversal rows already
//! posted against it, in the same database transaction that writes the new one.

use super::exchange::{Exchange, Rate};
use super::ids::AccountId;
use super::journal::{Journal, Leg};
use super::money::{Amount, Currency};
use super::transactions::{
    Kind, NewTransaction, Requested, Reversal, TransactionStatus, credited_total_in,
};
use super::views::LegView;
use crate::db::StoreError;
use crate::problem::FieldError;
use serde_json::{Map, Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

/// What a reverse request becomes once the original is read.
#[derive(Debug)]
pub enum Plan {
    Ready(Box<NewTransaction>),
    NotFound,
    /// The original is not posted (a hold, a refusal, a voided or expired hold).
    InvalidTransition {
        current: TransactionStatus,
    },
    Invalid(Vec<FieldError>),
}

/// Builds the reversal `id` of `original`: `amount` (two-leg originals only) or all of it.
pub async fn plan(
    conn: &mut PgConnection,
    original: Uuid,
    id: Uuid,
    amount: Option<Amount>,
    metadata: Map<String, Value>,
) -> Result<Plan, StoreError> {
    let Some(row) = sqlx::query!(
        r#"select hold_status_at(status, expires_at, now()) as "status!",
                  legs, captured_amount, currency, counter_currency,
                  exchange_rate::text as exchange_rate
           from transactions where id = $1"#,
        original
    )
    .fetch_optional(conn)
    .await?
    else {
        return Ok(Plan::NotFound);
    };
    let status = TransactionStatus::parse(&row.status).ok_or_else(|| {
        let what = format!("unknown status {:?}", row.status);
        crate::db::corrupt("transactions", original, what)
    })?;
    match status {
        TransactionStatus::Posted => {}
        TransactionStatus::Pending
        | TransactionStatus::Voided
        | TransactionStatus::Rejected
        | TransactionStatus::Expired => return Ok(Plan::InvalidTransition { current: status }),
    }
    let captured = row.captured_amount.map(Amount::stored).transpose()?;
    let legs = posted_legs(row.legs, captured, original)?;
    let corrupt = |what: String| crate::db::corrupt("transactions", original, what);
    let currency = Currency::parse(&row.currency)
        .ok_or_else(|| corrupt(format!("unknown currency {:?}", row.currency)))?;
    let exchange = match (row.counter_currency, row.exchange_rate) {
        (Some(counter), Some(rate)) => Some(
            exchange_terms(&legs, &counter, &rate)
                .ok_or_else(|| corrupt(format!("its exchange terms {counter:?} at {rate:?}")))?,
        ),
        _ => None,
    };
    let original_amount = credited_total_in(&legs, currency);
    let reversed = match reversed_amount(amount, legs.len(), original_amount) {
        Ok(reversed) => reversed,
        Err(error) => return Ok(Plan::Invalid(vec![error])),
    };
    let journal = reversal_journal(&legs, amount.map(|_| reversed), original)?;
    let request = json!({"kind": Kind::Reversal.as_str(), "reverses": original, "amount": reversed, "metadata": metadata});
    Ok(Plan::Ready(Box::new(NewTransaction {
        id,
        kind: Kind::Reversal,
        status: Requested::Posted,
        journal,
        currency: Some((currency, "/reverses".into())),
        external_ref: None,
        metadata,
        request,
        created_on_use: Vec::new(),
        exchange,
        reversal: Some(Reversal {
            original,
            amount: reversed,
            original_amount,
        }),
        effective_at: None,
        provider_initiated: false,
    })))
}

/// The terms of an exchange being reversed: its rate and counter currency as stored, and
/// its counter amount (its credits in that currency), which the reversal debits back.
fn exchange_terms(legs: &[LegView], counter: &str, rate: &str) -> Option<Exchange> {
    let counter_currency = Currency::parse(counter)?;
    Some(Exchange {
        counter_currency,
        rate: Rate::parse(rate)?,
        counter_amount: credited_total_in(legs, counter_currency),
    })
}

/// The legs the original posted: its stored legs, scaled to `captured_amount` for a partly
/// captured hold (which posted that, not what it held).
fn posted_legs(
    legs: Value,
    captured: Option<Amount>,
    original: Uuid,
) -> Result<Vec<LegView>, StoreError> {
    let mut legs: Vec<LegView> = serde_json::from_value(legs)
        .map_err(|e| crate::db::corrupt("transactions", original, format!("its legs: {e}")))?;
    if let Some(captured) = captured {
        for leg in &mut legs {
            // In range: a captured amount is, and the sign keeps the magnitude.
            leg.amount = captured.minor_units() * leg.amount.signum();
        }
    }
    Ok(legs)
}

/// How much the reversal gives back: `asked` (two-leg originals only, at most the original)
/// or the whole original.
fn reversed_amount(
    asked: Option<Amount>,
    legs: usize,
    original_amount: Amount,
) -> Result<Amount, FieldError> {
    match asked {
        None => Ok(original_amount),
        Some(_) if legs != 2 => {
            let message =
                "a partial reversal applies to two-leg originals; omit amount to reverse in full";
            Err(FieldError::new("/amount", "not_applicable", message))
        }
        Some(a) if a > original_amount => {
            let message = format!("exceeds the original's {original_amount} minor units");
            Err(FieldError::new("/amount", "range", message))
        }
        Some(a) => Ok(a),
    }
}

/// The opposite of the original's legs: all of each, or `partial` with each leg's sign.
fn reversal_journal(
    legs: &[LegView],
    partial: Option<Amount>,
    original: Uuid,
) -> Result<Journal, StoreError> {
    let mut reversal_legs = Vec::with_capacity(legs.len());
    for (index, leg) in legs.iter().enumerate() {
        let signed = match partial {
            Some(reversed) => reversed.minor_units() * leg.amount.signum(),
            None => leg.amount,
        };
        let (Some(account), Some(amount)) = (AccountId::parse(&leg.account), Amount::new(-signed))
        else {
            return Err(crate::db::corrupt(
                "transactions",
                original,
                format!("its leg {index} is malformed"),
            ));
        };
        let own = leg.currency.as_deref().map(Currency::parse);
        let Some(currency) = own.map_or(Some(None), |c| c.map(Some)) else {
            return Err(crate::db::corrupt(
                "transactions",
                original,
                format!("its leg {index} has an unknown currency"),
            ));
        };
        reversal_legs.push(Leg {
            account,
            amount,
            account_field: "/amount".into(),
            amount_field: "/amount".into(),
            must_be_wallet: false,
            currency,
        });
    }
    Journal::new(reversal_legs).map_err(|e| {
        crate::db::corrupt(
            "transactions",
            original,
            format!("its legs do not form a journal: {e:?}"),
        )
    })
}
