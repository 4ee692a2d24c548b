//! Accounts: creation (naturally idempotent on the caller's id), reads with derived balances,
//! metadata versioning and the status lifecycle. Every status change locks the row, decides in
//! [`Action::step`], then writes.

use super::audit;
use super::bounds::{BalanceError, BalanceOutOfRange};
use super::events::{self, EventType};
use super::ids::AccountId;
use super::money::{Amount, Currency};
use super::store::{Db, reads};
use super::views::{AccountView, Balances, BalancesView};
use super::{Created, Outcome, now_micros};
use crate::db::StoreError;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sqlx::PgConnection;
use utoipa::ToSchema;

/// What an account is: `wallet` (a customer's balance, with its limits) or `system` (the
/// ledger's own accounts, e.g. a provider's clearing account).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountType {
    Wallet,
    System,
}

impl AccountType {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountType::Wallet => "wallet",
            AccountType::System => "system",
        }
    }

    /// The stored `accounts.type`; `None` for anything the schema's check would refuse.
    pub fn parse(stored: &str) -> Option<AccountType> {
        [AccountType::Wallet, AccountType::System]
            .into_iter()
            .find(|t| t.as_str() == stored)
    }
}

/// Where an account is in its lifecycle: `active`, then `frozen` (no debits) and back, or
/// `closed` for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccountStatus {
    Active,
    Frozen,
    Closed,
}

impl AccountStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "active",
            AccountStatus::Frozen => "frozen",
            AccountStatus::Closed => "closed",
        }
    }

    /// The stored `accounts.status`; `None` for anything the schema's check would refuse.
    pub fn parse(stored: &str) -> Option<AccountStatus> {
        [
            AccountStatus::Active,
            AccountStatus::Frozen,
            AccountStatus::Closed,
        ]
        .into_iter()
        .find(|s| s.as_str() == stored)
    }
}

/// A validated create request; `request` is its canonical form (defaults applied, no id).
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub id: AccountId,
    pub currency: Currency,
    pub kind: AccountType,
    pub overdraft_limit: i64,
    pub metadata: Map<String, Value>,
}

impl NewAccount {
    pub fn canonical_request(&self) -> Value {
        json!({
            "currency": self.currency.code(),
            "type": self.kind.as_str(),
            "overdraft_limit": self.overdraft_limit,
            "metadata": self.metadata,
        })
    }
}

impl NewAccount {
    /// Why this account may not be created under its id, if it may not: an id in the system
    /// namespace (`clearing:`, `fx:`) names the account the ledger itself creates for a
    /// provider's payments or an exchange's currency, a system account in the currency the id
    /// ends with, and nothing else. Any
    /// other account there would be met by the payments' entries (which decide it as that
    /// system account) and refused by the journal's trigger halfway through a write.
    pub fn reserved_id_refusal(&self) -> Option<String> {
        if !self.id.is_reserved() {
            return None;
        }
        let fits = self.kind == AccountType::System
            && self.id.reserved_currency() == Some(self.currency.code());
        (!fits).then(|| {
            format!(
                "ids starting with {:?} or {:?} are reserved for the ledger's system accounts: \
                 only the system account clearing:{{provider}}:{{currency}} or fx:{{currency}} \
                 in that currency may be created",
                super::ids::CLEARING_PREFIX,
                super::ids::EXCHANGE_PREFIX
            )
        })
    }
}

/// An account row as stored.
#[derive(Debug, Clone)]
pub struct Account {
    pub id: String,
    pub currency: String,
    pub kind: AccountType,
    pub status: AccountStatus,
    pub overdraft_limit: i64,
    pub metadata: Value,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An account row as the SQL reads it, before its type and status are parsed.
pub(crate) struct AccountRow {
    pub(crate) id: String,
    pub(crate) currency: String,
    pub(crate) kind: String,
    pub(crate) status: String,
    pub(crate) overdraft_limit: i64,
    pub(crate) metadata: Value,
    pub(crate) version: i64,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

impl AccountRow {
    /// The schema's checks admit only known types and statuses; anything else was written
    /// behind the ledger's back and is refused as corrupt rather than guessed at.
    pub(crate) fn parse(self) -> Result<Account, StoreError> {
        let kind = AccountType::parse(&self.kind).ok_or_else(|| {
            crate::db::corrupt("accounts", &self.id, format!("type {:?}", self.kind))
        })?;
        let status = AccountStatus::parse(&self.status).ok_or_else(|| {
            crate::db::corrupt("accounts", &self.id, format!("status {:?}", self.status))
        })?;
        Ok(Account {
            id: self.id,
            currency: self.currency,
            kind,
            status,
            overdraft_limit: self.overdraft_limit,
            metadata: self.metadata,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

impl Account {
    pub fn currency(&self) -> Currency {
        // Only validated currencies are ever written through the ledger; a row made by hand
        // with another code is formatted with two decimals and logged, never a panic.
        Currency::parse(&self.currency).unwrap_or_else(|| {
            tracing::error!(account = %self.id, currency = %self.currency, "unknown currency in database");
            Currency::parse("USD").expect("USD is in the currency table")
        })
    }

    pub fn is_wallet(&self) -> bool {
        self.kind == AccountType::Wallet
    }

    pub fn view(&self, balances: Balances, as_of: Option<DateTime<Utc>>) -> AccountView {
        let currency = self.currency();
        AccountView {
            id: self.id.clone(),
            currency: self.currency.clone(),
            kind: self.kind,
            status: self.status,
            overdraft_limit: self.overdraft_limit,
            overdraft_limit_decimal: currency.format(self.overdraft_limit),
            metadata: match &self.metadata {
                Value::Object(map) => map.clone(),
                _ => Map::new(),
            },
            version: self.version,
            balances: BalancesView::new(balances, currency),
            as_of,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Creates the account, or answers a replay: the primary key decides, so two concurrent
/// creates of one id give one row, and the second waits for the first to commit.
pub async fn create(conn: &mut PgConnection, new: &NewAccount) -> Result<Created, sqlx::Error> {
    let request = new.canonical_request();
    let now = now_micros();
    let account = Account {
        id: new.id.to_string(),
        currency: new.currency.code().to_owned(),
        kind: new.kind,
        status: AccountStatus::Active,
        overdraft_limit: new.overdraft_limit,
        metadata: Value::Object(new.metadata.clone()),
        version: 0,
        created_at: now,
        updated_at: now,
    };
    let body = serde_json::to_string(&account.view(Balances::default(), None))
        .expect("an account view always serializes");
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let inserted = sqlx::query!(
        r#"insert into accounts (id, currency, type, overdraft_limit, metadata,
                                 creation_request, creation_response, created_at, updated_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $8)
           on conflict (id) do nothing"#,
        account.id,
        account.currency,
        account.kind.as_str(),
        account.overdraft_limit,
        account.metadata,
        request,
        body,
        now,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if inserted {
        audit::record(&mut tx, "account.create", &[account.id]).await?;
        super::caller::commit_in_request(tx).await?;
        return Ok(Created::First(Outcome::Created { body }));
    }
    tx.commit().await?;
    let stored = sqlx::query!(
        "select creation_request, creation_response from accounts where id = $1",
        account.id
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(Created::replay_or_mismatch(
        &stored.creation_request,
        &request,
        Outcome::Created {
            body: stored.creation_response,
        },
    ))
}

/// The system account `id` in `currency`, created if missing (provider clearing accounts
/// come into being with their first posted payment). Its canonical request is what an explicit
/// `POST /v1/accounts` of it would store, so such a later call replays.
pub async fn ensure_system_account(
    conn: &mut PgConnection,
    id: &AccountId,
    currency: Currency,
) -> Result<(), sqlx::Error> {
    let new = NewAccount {
        id: id.clone(),
        currency,
        kind: AccountType::System,
        overdraft_limit: 0,
        metadata: Map::new(),
    };
    create(conn, &new).await.map(|_| ())
}

pub async fn find(conn: &mut PgConnection, id: &str) -> Result<Option<Account>, StoreError> {
    sqlx::query_as!(
        AccountRow,
        r#"select id, currency, type as kind, status, overdraft_limit, metadata, version,
                  created_at, updated_at
           from accounts where id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await?
    .map(AccountRow::parse)
    .transpose()
}

/// An account and its balances, now or (posted only) at `as_of`, read in one snapshot (see
/// [`super::begin_snapshot`]): the posted balance and the open-hold totals are separate
/// statements, and read apart a capture committing between them shows the posted balance from
/// before it with the hold already gone, an `available` too high by the hold.
///
/// An `as_of` later than [`reads::final_horizon`] is answered at the horizon instead, and the third
/// value says which instant the balances describe, so that every `as_of` answer is final.
pub async fn read(
    db: &mut Db<'_>,
    id: &str,
    as_of: Option<(DateTime<Utc>, TimeAxis)>,
) -> Result<Option<(Account, Balances, Option<DateTime<Utc>>)>, BalanceError> {
    // The horizon is read before the snapshot is taken: see `final_horizon`.
    let (as_of, axis) = match as_of {
        Some((asked, axis)) => (
            Some(final_instant(asked, reads::final_horizon(db).await?)),
            axis,
        ),
        None => (None, TimeAxis::Ledger),
    };
    let mut tx = super::begin_snapshot(db.conn()).await?;
    let Some(account) = find(&mut tx, id).await? else {
        return Ok(None);
    };
    let balances = match as_of {
        None => balances(&mut tx, &account).await?,
        // Holds keep no history: a past moment shows posted money only.
        Some(as_of) => Balances {
            posted: posted_balance_at(&mut tx, &account, as_of, axis).await?,
            ..Balances::default()
        },
    };
    tx.commit().await?;
    Ok(Some((account, balances, as_of)))
}

/// A page of the account's open holds, newest first, with its balances, read in one snapshot
/// (the balances include exactly the holds listed). `None` when the account does not exist.
pub async fn holds_page(
    conn: &mut PgConnection,
    id: &str,
    before_seq: Option<i64>,
    limit: i64,
) -> Result<Option<HoldsOfAccount>, BalanceError> {
    let mut tx = super::begin_snapshot(conn).await?;
    let Some(account) = find(&mut tx, id).await? else {
        return Ok(None);
    };
    let balances = balances(&mut tx, &account).await?;
    let (holds, next) = super::holds::list_open(&mut tx, &account.id, before_seq, limit).await?;
    tx.commit().await?;
    Ok(Some(HoldsOfAccount {
        account,
        balances,
        holds,
        next,
    }))
}

/// What [`holds_page`] read.
pub struct HoldsOfAccount {
    pub account: Account,
    pub balances: Balances,
    pub holds: Vec<super::views::TransactionView>,
    /// Where the next page starts, if there is one.
    pub next: Option<i64>,
}

/// The instant an `as_of` answer describes: the one asked for, or the horizon when that is
/// earlier (a later instant is not final yet).
pub fn final_instant(asked: DateTime<Utc>, horizon: DateTime<Utc>) -> DateTime<Utc> {
    asked.min(horizon)
}

/// The account's balances now, without scanning its history: a wallet's posted balance is
/// its last entry's running balance (one index lookup); a system account's is its latest
/// checkpoint plus the entries written since; pending amounts are summed over its open,
/// unexpired holds only. Several statements: call it inside one snapshot ([`read`],
/// [`super::begin_snapshot`]) or with the account's row locked against every writer.
pub async fn balances(
    conn: &mut PgConnection,
    account: &Account,
) -> Result<Balances, BalanceError> {
    let posted = posted_now(conn, account).await?;
    let pending = super::holds::pending_totals(conn, std::slice::from_ref(&account.id))
        .await?
        .remove(&account.id)
        .unwrap_or_default();
    Ok(in_range(account, posted, pending)?)
}

/// The account's posted balance now, saturated one past the range (see [`in_range`]).
pub(crate) async fn posted_now(
    conn: &mut PgConnection,
    account: &Account,
) -> Result<i64, sqlx::Error> {
    if account.is_wallet() {
        wallet_posted_balance(conn, &account.id).await
    } else {
        super::checkpoints::system_posted_balance(conn, &account.id).await
    }
}

/// The balances of sums read from the database. Sums saturate one past the range
/// (`bounds.rs`): a balance taken out of range before the bound held for system accounts is
/// answered as such, never as a wrong number or a 500.
pub(crate) fn in_range(
    account: &Account,
    posted: i64,
    pending: super::holds::Pending,
) -> Result<Balances, BalanceOutOfRange> {
    let in_range = |v| Amount::new(v).ok_or_else(|| BalanceOutOfRange(account.id.clone()));
    Ok(Balances {
        posted: in_range(posted)?,
        pending_in: in_range(pending.pending_in)?,
        pending_out: in_range(pending.pending_out)?,
    })
}

pub async fn wallet_posted_balance(
    conn: &mut PgConnection,
    account: &str,
) -> Result<i64, sqlx::Error> {
    let last = sqlx::query_scalar!(
        r#"select balance_after as "balance_after!" from entries
           where account_id = $1 and sequence is not null
           order by sequence desc limit 1"#,
        account
    )
    .fetch_optional(conn)
    .await?;
    Ok(last.unwrap_or(0))
}

/// Which clock an `as_of` reads: when entries were written (`ledger`, final once the horizon
/// passes) or when they count for the business (`effective`: a transaction backdated later
/// can still change the answer for a moment within the backdating horizon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeAxis {
    #[default]
    Ledger,
    Effective,
}

/// The posted balance at `as_of` on `axis`: by effective time, the balance by ledger time
/// corrected by the account's backdated entries (`effective::backdating_at`).
pub async fn posted_balance_at(
    conn: &mut PgConnection,
    account: &Account,
    as_of: DateTime<Utc>,
    axis: TimeAxis,
) -> Result<Amount, BalanceError> {
    let by_ledger = posted_balance_as_of(conn, account, as_of).await?;
    if axis == TimeAxis::Ledger {
        return Ok(by_ledger);
    }
    let delta = super::effective::backdating_at(conn, &account.id, as_of).await?;
    by_ledger
        .minor_units()
        .checked_add(delta)
        .and_then(Amount::new)
        .ok_or_else(|| BalanceOutOfRange(account.id.clone()).into())
}

/// The posted balance at `as_of`: a wallet's last entry with ledger time ≤ `as_of`; a system
/// account's sum of entries up to then (an audit read, allowed to scan).
pub async fn posted_balance_as_of(
    conn: &mut PgConnection,
    account: &Account,
    as_of: DateTime<Utc>,
) -> Result<Amount, BalanceError> {
    if account.is_wallet() {
        let last = sqlx::query_scalar!(
            r#"select balance_after as "balance_after!" from entries
               where account_id = $1 and sequence is not null and ledger_time <= $2
               order by sequence desc limit 1"#,
            account.id,
            as_of
        )
        .fetch_optional(conn)
        .await?;
        Ok(Amount::stored(last.unwrap_or(0))?)
    } else {
        // Saturated one past the range, like every system-account sum (see `balances`).
        let posted = sqlx::query_scalar!(
            r#"select least(greatest(coalesce(sum(amount), 0), -9007199254740992),
                            9007199254740992)::bigint as "sum!"
               from entries where account_id = $1 and ledger_time <= $2"#,
            account.id,
            as_of
        )
        .fetch_one(conn)
        .await?;
        Ok(Amount::new(posted).ok_or_else(|| BalanceOutOfRange(account.id.clone()))?)
    }
}

/// Applies `metadata` only when `version` is newer than the stored one. Returns `false`
/// when the account does not exist; an older or equal version changes nothing.
pub async fn update_metadata(
    conn: &mut PgConnection,
    id: &str,
    version: i64,
    metadata: &Map<String, Value>,
) -> Result<bool, sqlx::Error> {
    let metadata = Value::Object(metadata.clone());
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let row = sqlx::query!(
        r#"with upd as (
               update accounts set metadata = $3, version = $2, updated_at = now()
               where id = $1 and version < $2
               returning id)
           select exists (select 1 from accounts where id = $1) as "exists!",
                  exists (select 1 from upd) as "updated!""#,
        id,
        version,
        metadata
    )
    .fetch_one(&mut *tx)
    .await?;
    if row.updated {
        audit::record(&mut tx, "account.update", &[id.to_owned()]).await?;
    }
    super::caller::commit_in_request(tx).await?;
    Ok(row.exists)
}

/// A lifecycle change a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Freeze,
    Unfreeze,
    Close,
}

/// What an action does to an account in a given status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The account moves to `to` (a close only once its balances are zero).
    Move { to: AccountStatus },
    /// It is there already: nothing to write, and answered as done so that a retry succeeds.
    Already,
    /// The action cannot leave this status: a closed account stays closed.
    Refused,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Freeze => "freeze",
            Action::Unfreeze => "unfreeze",
            Action::Close => "close",
        }
    }

    /// May an account in `from` take this action, and where does it go: `active ⇄ frozen`,
    /// either of them `→ closed`, and nothing out of `closed`.
    pub fn step(self, from: AccountStatus) -> Step {
        use AccountStatus::{Active, Closed, Frozen};
        match (self, from) {
            (Action::Freeze, Active) => Step::Move { to: Frozen },
            (Action::Unfreeze, Frozen) => Step::Move { to: Active },
            (Action::Close, Active | Frozen) => Step::Move { to: Closed },
            (Action::Freeze, Frozen) | (Action::Unfreeze, Active) | (Action::Close, Closed) => {
                Step::Already
            }
            (Action::Freeze | Action::Unfreeze, Closed) => Step::Refused,
        }
    }

    /// The event subscribers hear of; an unfreeze has none of its own.
    fn event(self) -> Option<EventType> {
        match self {
            Action::Freeze => Some(EventType::AccountFrozen),
            Action::Unfreeze => None,
            Action::Close => Some(EventType::AccountClosed),
        }
    }

    fn audit_action(self) -> &'static str {
        match self {
            Action::Freeze => "account.freeze",
            Action::Unfreeze => "account.unfreeze",
            Action::Close => "account.close",
        }
    }
}

/// Outcome of a lifecycle transition.
#[derive(Debug, PartialEq, Eq)]
pub enum Transition {
    /// The transition happened, or the account was already in the target state.
    Done,
    NotFound,
    /// The account is in a state the transition cannot leave (`closed`).
    Invalid {
        current: AccountStatus,
    },
    /// Close refused: the account still holds money.
    NotEmpty {
        posted: Amount,
    },
}

/// Applies `action` to the account: locks its row, decides with [`Action::step`], and writes
/// the new status with its event and audit record. The row lock excludes concurrent postings
/// (wallet postings lock `FOR UPDATE`, system ones `FOR SHARE`), so the balance a close checks
/// is the balance closed.
pub async fn transition(
    conn: &mut PgConnection,
    id: &str,
    action: Action,
) -> Result<Transition, BalanceError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let Some(account) = sqlx::query_as!(
        AccountRow,
        r#"select id, currency, type as kind, status, overdraft_limit, metadata, version,
                  created_at, updated_at
           from accounts where id = $1 for update"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    .map(AccountRow::parse)
    .transpose()?
    else {
        return Ok(Transition::NotFound);
    };
    let to = match action.step(account.status) {
        Step::Move { to } => to,
        Step::Already => return Ok(Transition::Done),
        Step::Refused => {
            return Ok(Transition::Invalid {
                current: account.status,
            });
        }
    };
    if to == AccountStatus::Closed {
        // Read under the row lock, which every posting and capture of the account also takes,
        // so its posted balance cannot move between the statements; a void or an expiry can
        // only lower the pending totals, which makes the check stricter, never wrong.
        let balances = balances(&mut tx, &account).await?;
        let amounts = [balances.posted, balances.pending_in, balances.pending_out];
        if !amounts.iter().all(|a| a.is_zero()) {
            return Ok(Transition::NotEmpty {
                posted: balances.posted,
            });
        }
    }
    // The row is locked, so the status read above is the status this changes.
    let changed_at = sqlx::query_scalar!(
        "update accounts set status = $3, updated_at = now() where id = $1 and status = $2
         returning updated_at",
        id,
        account.status.as_str(),
        to.as_str()
    )
    .fetch_one(&mut *tx)
    .await?;
    if let Some(event) = action.event() {
        let overdraft_limit = events::decimal(&account.currency, account.overdraft_limit);
        events::record_account(&mut tx, id, event, changed_at, &overdraft_limit).await?;
    }
    audit::record(&mut tx, action.audit_action(), &[id.to_owned()]).await?;
    super::caller::commit_in_request(tx).await?;
    Ok(Transition::Done)
}

#[cfg(test)]
mod tests {
    use super::{AccountStatus, AccountType, Action, Step};

    #[test]
    fn stored_types_and_statuses_read_back_and_nothing_else_does() {
        for kind in [AccountType::Wallet, AccountType::System] {
            assert_eq!(AccountType::parse(kind.as_str()), Some(kind));
        }
        for status in [
            AccountStatus::Active,
            AccountStatus::Frozen,
            AccountStatus::Closed,
        ] {
            assert_eq!(AccountStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(AccountType::parse("Wallet"), None);
        assert_eq!(AccountStatus::parse("closed "), None);
    }

    #[test]
    fn an_as_of_answer_describes_the_instant_asked_for_or_the_horizon_if_earlier() {
        let t = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
        let horizon = t("2026-12-05T00:00:00Z");
        let past = t("2026-12-04T23:59:59.999999Z");
        assert_eq!(super::final_instant(past, horizon), past);
        assert_eq!(super::final_instant(horizon, horizon), horizon);
        assert_eq!(
            super::final_instant(t("2999-01-01T00:00:00Z"), horizon),
            horizon
        );
    }

    #[test]
    fn only_the_clearing_account_itself_may_be_created_in_the_system_namespace() {
        let new = |id: &str, currency: &str, kind: AccountType| super::NewAccount {
            id: crate::ledger::ids::AccountId::parse(id).unwrap(),
            currency: crate::ledger::money::Currency::parse(currency).unwrap(),
            kind,
            overdraft_limit: 0,
            metadata: serde_json::Map::new(),
        };
        use AccountType::{System, Wallet};
        let allowed = [
            ("clearing:p1:SAR", "SAR", System),
            ("w1", "SAR", Wallet),
            ("fees", "USD", System),
            ("fx:USD", "USD", System),
        ];
        for (id, currency, kind) in allowed {
            assert_eq!(new(id, currency, kind).reserved_id_refusal(), None, "{id}");
        }
        let refused = [
            ("clearing:p1:SAR", "SAR", Wallet),
            ("clearing:p1:SAR", "USD", System),
            ("clearing:p1", "SAR", System),
            ("clearing:p1:SAR:x", "SAR", System),
            ("fx:USD", "USD", Wallet),
            ("fx:USD", "EUR", System),
            ("fx:", "USD", System),
        ];
        for (id, currency, kind) in refused {
            assert!(
                new(id, currency, kind).reserved_id_refusal().is_some(),
                "{id}"
            );
        }
    }

    #[test]
    fn closed_is_final_and_every_other_move_goes_where_its_action_says() {
        use AccountStatus::{Active, Closed, Frozen};
        let cases = [
            (Action::Freeze, Active, Step::Move { to: Frozen }),
            (Action::Freeze, Frozen, Step::Already),
            (Action::Freeze, Closed, Step::Refused),
            (Action::Unfreeze, Active, Step::Already),
            (Action::Unfreeze, Frozen, Step::Move { to: Active }),
            (Action::Unfreeze, Closed, Step::Refused),
            (Action::Close, Active, Step::Move { to: Closed }),
            (Action::Close, Frozen, Step::Move { to: Closed }),
            (Action::Close, Closed, Step::Already),
        ];
        for (action, from, step) in cases {
            assert_eq!(
                action.step(from),
                step,
                "{} from {}",
                action.as_str(),
                from.as_str()
            );
        }
    }
}
