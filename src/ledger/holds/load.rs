//! Load: the hold's row under its lock, and for a capture its wallets under theirs, decoded
//! into what [`super::decide`] needs (statuses as enums, amounts as [`Amount`]).

use crate::db::StoreError;
use crate::ledger::accounts::AccountType;
use crate::ledger::money::{Amount, Currency};
use crate::ledger::monitors::{self, Balances, Watches};
use crate::ledger::posting::{
    RuledSets, SystemLocks, WalletState, balances, in_sets, lock_ruled_sets, monitored,
};
use crate::ledger::store::{Db, locks, reads};
use crate::ledger::transactions::{TransactionStatus, credited_total_in};
use crate::ledger::views::LegView;
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::HashMap;
use uuid::Uuid;

/// One leg of a hold as requested: signed like an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldLeg {
    pub account: String,
    pub amount: Amount,
    /// An exchange's leg: its own currency. `None`: the hold's.
    pub currency: Option<Currency>,
}

/// How the action that ended a hold was asked for and answered, kept on its row so that a
/// repeat replays the answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredResolution {
    pub request: Value,
    pub body: String,
}

/// A hold's row as read under its lock.
#[derive(Debug, Clone)]
pub(crate) struct LoadedHold {
    /// As stored: the sweeper may not have marked an overdue hold yet.
    pub status: TransactionStatus,
    /// Reads as expired at the moment the lock was granted (`hold_status_at` at
    /// `clock_timestamp()`, docs/architecture.md "Effective status"): stored as expired, or
    /// pending and past its expiry.
    pub past_expiry: bool,
    pub currency: Currency,
    pub legs: Vec<HeldLeg>,
    /// What the hold reserves: the sum of its credits.
    pub held: Amount,
    pub resolution: Option<StoredResolution>,
}

struct HoldRow {
    status: String,
    expired: bool,
    currency: String,
    legs: Value,
    resolution_request: Option<Value>,
    resolution_response: Option<String>,
}

/// Locks the hold's row, which serializes every post, void and expiry of this hold; `None`
/// when there is no such transaction.
pub(super) async fn lock_hold(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<LoadedHold>, StoreError> {
    let row = sqlx::query_as!(
        HoldRow,
        r#"select status, hold_status_at(status, expires_at, clock_timestamp()) = 'expired' as "expired!", currency, legs,
                  resolution_request, resolution_response
           from transactions where id = $1 for update"#,
        id
    )
    .fetch_optional(conn)
    .await?;
    row.map(|row| decode(id, row)).transpose()
}

fn decode(id: Uuid, row: HoldRow) -> Result<LoadedHold, StoreError> {
    let corrupt = |what: String| crate::db::corrupt("transactions", id, what);
    let status = TransactionStatus::parse(&row.status)
        .ok_or_else(|| corrupt(format!("unknown status {:?}", row.status)))?;
    let currency = Currency::parse(&row.currency)
        .ok_or_else(|| corrupt(format!("unknown currency {:?}", row.currency)))?;
    // A row whose legs do not decode holds nothing to capture (as before the split).
    let views: Vec<LegView> = serde_json::from_value(row.legs).unwrap_or_default();
    let legs = views
        .iter()
        .map(|l| {
            let amount = Amount::stored(l.amount)?;
            let account = l.account.clone();
            let currency = match l.currency.as_deref() {
                None => None,
                Some(code) => Some(
                    Currency::parse(code)
                        .ok_or_else(|| corrupt(format!("unknown leg currency {code:?}")))?,
                ),
            };
            Ok(HeldLeg {
                account,
                amount,
                currency,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let resolution = match (row.resolution_request, row.resolution_response) {
        (Some(request), Some(body)) => Some(StoredResolution { request, body }),
        _ => None,
    };
    Ok(LoadedHold {
        status,
        past_expiry: row.expired,
        currency,
        legs,
        held: credited_total_in(&views, currency),
        resolution,
    })
}

/// What a capture finds once its wallets are locked.
#[derive(Debug)]
pub(crate) enum LockedWallets {
    /// The hold expired before its wallets could be locked.
    Expired,
    /// Where each wallet's chain continues (system accounts are not chained).
    Ready(HashMap<String, WalletState>),
}

/// Locks the capture's accounts (sorted, system accounts shared) and reads its wallets'
/// states. Funds are not read: the hold reserved them. Expiry is checked again once the
/// wallets are locked, with the clock at that moment: a writer that already treated the hold
/// as expired (and spent what it reserved) held these locks first, so the capture must see
/// the expiry too. Then the monitored sets its wallets count in are locked, after them.
pub(super) async fn lock_wallets(
    db: &mut Db<'_>,
    id: Uuid,
    legs: &[HeldLeg],
) -> Result<(LockedWallets, Watches, Vec<String>), StoreError> {
    let mut ids: Vec<String> = legs.iter().map(|l| l.account.clone()).collect();
    ids.sort();
    let shared = SystemLocks::Shared;
    let locked = locks::lock_accounts(db, &ids, shared).await?;
    let in_sets = in_sets(&locked);
    let expired = sqlx::query_scalar!(
        r#"select hold_status_at(status, expires_at, clock_timestamp()) = 'expired' as "expired!" from transactions where id = $1"#,
        id
    )
    .fetch_one(db.conn())
    .await?;
    if expired {
        return Ok((LockedWallets::Expired, Watches::default(), in_sets));
    }
    let wallets: Vec<String> = locked
        .values()
        .filter(|a| a.kind == AccountType::Wallet)
        .map(|a| a.id.clone())
        .collect();
    let states = reads::wallet_states(db, &wallets).await?;
    let ruled = lock_ruled_sets(db, &in_sets, RuledSets::Monitored).await?;
    let watches = monitors::store::watches(db.conn(), &monitored(&locked), &ruled).await?;
    Ok((LockedWallets::Ready(states), watches, in_sets))
}

/// A void's accounts, locked as a capture locks them (and the monitored sets they count in,
/// after them): a void changes what its wallets reserve, which their monitors and the sets
/// they count in read, and a wallet joining a set copies its open holds under this same lock.
/// Returns the watched wallets with their balances, what watches them, and the wallets that
/// count in sets.
pub(super) async fn lock_for_void(
    db: &mut Db<'_>,
    legs: &[HeldLeg],
) -> Result<(Vec<(String, Balances)>, Watches, Vec<String>), StoreError> {
    let mut ids: Vec<String> = legs.iter().map(|l| l.account.clone()).collect();
    ids.sort();
    ids.dedup();
    let locked = locks::lock_accounts(db, &ids, SystemLocks::Shared).await?;
    let in_sets = in_sets(&locked);
    let ruled = lock_ruled_sets(db, &in_sets, RuledSets::Monitored).await?;
    let watches = monitors::store::watches(db.conn(), &monitored(&locked), &ruled).await?;
    let watched: Vec<String> = (locked.keys())
        .filter(|id| watches.watches(id))
        .cloned()
        .collect();
    if watched.is_empty() {
        return Ok((Vec::new(), watches, in_sets));
    }
    let states = reads::wallet_states(db, &watched).await?;
    let before = watched
        .into_iter()
        .filter_map(|id| {
            let before = balances(states.get(&id)?);
            Some((id, before))
        })
        .collect();
    Ok((before, watches, in_sets))
}
