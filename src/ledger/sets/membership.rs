//! Adding and removing a set's members. A change of membership changes which sets each wallet
//! under the member counts in (`account_set_closure`); each wallet that joins or leaves a set
//! does so under its row lock, with its balances of that moment written as the set's movement
//! and its open holds copied (or removed), so no posting of the wallet falls between the two.
//!
//! Changes of the set graph are serialized by one advisory lock (they are rare, and a cycle
//! check must not race another edge): postings never take it, so writers never wait for it.

use super::store::MemberView;
use super::{ClosureChange, Counted, Member, makes_cycle};
use crate::db::StoreError;
use crate::ledger::accounts::AccountType;
use crate::ledger::posting::SystemLocks;
use crate::ledger::store::{Db, locks, marks, reads};
use crate::ledger::{audit, now_micros};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::collections::{BTreeSet, HashMap};
use uuid::Uuid;

/// The advisory lock every change of the set graph takes (an arbitrary, fixed key: "sets").
const TOPOLOGY_LOCK: i64 = 0x7365_7473;

/// Why a membership change was refused; nothing was written.
#[derive(Debug)]
pub enum MembershipError {
    UnknownSet,
    /// The member named does not exist.
    UnknownMember,
    /// Only wallets are members: a system account has no per-entry chain to lock and copy.
    NotAWallet,
    /// The member's currency is not the set's.
    CurrencyMismatch {
        set: String,
        member: String,
    },
    /// The set is the member or one of the sets under it.
    Cycle,
    Store(StoreError),
}

impl From<sqlx::Error> for MembershipError {
    fn from(e: sqlx::Error) -> Self {
        MembershipError::Store(e.into())
    }
}

impl From<StoreError> for MembershipError {
    fn from(e: StoreError) -> Self {
        MembershipError::Store(e)
    }
}

/// Adds `member` to `set`. `Ok((view, true))` when it was added now, `(view, false)` when it
/// already was a member (nothing changes: adding is idempotent).
pub async fn add(
    db: &mut Db<'_>,
    set: &str,
    member: &Member,
) -> Result<(MemberView, bool), MembershipError> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let mut db = Db::new(&mut tx, engine);
    let currency = lock_topology(db.conn(), set).await?;
    let (wallets, added_at) = match member {
        Member::Account(id) => {
            check_wallet(db.conn(), id, &currency).await?;
            (vec![id.clone()], add_account(db.conn(), set, id).await?)
        }
        Member::Set(child) => {
            check_child(db.conn(), set, child, &currency).await?;
            (
                wallets_under(db.conn(), child).await?,
                add_child(db.conn(), set, child).await?,
            )
        }
    };
    let Some(added_at) = added_at else {
        let added_at = stored_added_at(db.conn(), set, member).await?;
        tx.rollback().await?;
        return Ok((MemberView::new(member, added_at), false));
    };
    sync_closure(&mut db, &wallets).await?;
    audit::record(
        db.conn(),
        "account_set.member.add",
        &[set.to_owned(), member.reference()],
    )
    .await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    Ok((MemberView::new(member, added_at), true))
}

/// Removes `member` from `set`; `Ok(false)` when it was not a member (removing is idempotent).
pub async fn remove(db: &mut Db<'_>, set: &str, member: &Member) -> Result<bool, MembershipError> {
    let engine = db.engine();
    let mut tx = sqlx::Connection::begin(db.conn()).await?;
    let mut db = Db::new(&mut tx, engine);
    lock_topology(db.conn(), set).await?;
    let removed = match member {
        Member::Account(id) => sqlx::query!(
            "delete from account_set_accounts where set_id = $1 and account_id = $2",
            set,
            id
        ),
        Member::Set(child) => sqlx::query!(
            "delete from account_set_children where set_id = $1 and child_id = $2",
            set,
            child
        ),
    }
    .execute(db.conn())
    .await?
    .rows_affected()
        == 1;
    if !removed {
        tx.rollback().await?;
        return Ok(false);
    }
    let wallets = match member {
        Member::Account(id) => vec![id.clone()],
        Member::Set(child) => wallets_under(db.conn(), child).await?,
    };
    sync_closure(&mut db, &wallets).await?;
    audit::record(
        db.conn(),
        "account_set.member.remove",
        &[set.to_owned(), member.reference()],
    )
    .await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    Ok(true)
}

/// Takes the graph's lock and reads the set's currency.
async fn lock_topology(conn: &mut PgConnection, set: &str) -> Result<String, MembershipError> {
    sqlx::query("select pg_advisory_xact_lock($1)")
        .bind(TOPOLOGY_LOCK)
        .execute(&mut *conn)
        .await?;
    sqlx::query_scalar!("select currency from account_sets where id = $1", set)
        .fetch_optional(conn)
        .await?
        .ok_or(MembershipError::UnknownSet)
}

async fn check_wallet(
    conn: &mut PgConnection,
    id: &str,
    currency: &str,
) -> Result<(), MembershipError> {
    let account = sqlx::query!(
        "select currency, type as kind from accounts where id = $1",
        id
    )
    .fetch_optional(conn)
    .await?
    .ok_or(MembershipError::UnknownMember)?;
    if AccountType::parse(&account.kind) != Some(AccountType::Wallet) {
        return Err(MembershipError::NotAWallet);
    }
    same_currency(currency, account.currency)
}

async fn check_child(
    conn: &mut PgConnection,
    set: &str,
    child: &str,
    currency: &str,
) -> Result<(), MembershipError> {
    let child_currency =
        sqlx::query_scalar!("select currency from account_sets where id = $1", child)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(MembershipError::UnknownMember)?;
    same_currency(currency, child_currency)?;
    let under: BTreeSet<String> = sqlx::query_scalar!(
        r#"with recursive down(id) as (
               select $1::text
               union
               select c.child_id from account_set_children c join down on c.set_id = down.id)
           select id as "id!" from down"#,
        child
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .collect();
    if makes_cycle(set, &under) {
        return Err(MembershipError::Cycle);
    }
    Ok(())
}

fn same_currency(set: &str, member: String) -> Result<(), MembershipError> {
    if set == member {
        Ok(())
    } else {
        Err(MembershipError::CurrencyMismatch {
            set: set.to_owned(),
            member,
        })
    }
}

/// The edge's `added_at`, `None` when it was there already.
async fn add_account(
    conn: &mut PgConnection,
    set: &str,
    account: &str,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        "insert into account_set_accounts (set_id, account_id, added_at) values ($1, $2, $3)
         on conflict do nothing returning added_at",
        set,
        account,
        now_micros()
    )
    .fetch_optional(conn)
    .await
}

async fn add_child(
    conn: &mut PgConnection,
    set: &str,
    child: &str,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        "insert into account_set_children (set_id, child_id, added_at) values ($1, $2, $3)
         on conflict do nothing returning added_at",
        set,
        child,
        now_micros()
    )
    .fetch_optional(conn)
    .await
}

async fn stored_added_at(
    conn: &mut PgConnection,
    set: &str,
    member: &Member,
) -> Result<DateTime<Utc>, sqlx::Error> {
    match member {
        Member::Account(id) => {
            sqlx::query_scalar!(
                "select added_at from account_set_accounts where set_id = $1 and account_id = $2",
                set,
                id
            )
            .fetch_one(conn)
            .await
        }
        Member::Set(child) => {
            sqlx::query_scalar!(
                "select added_at from account_set_children where set_id = $1 and child_id = $2",
                set,
                child
            )
            .fetch_one(conn)
            .await
        }
    }
}

/// The wallets that count in `set` now.
async fn wallets_under(conn: &mut PgConnection, set: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "select account_id from account_set_closure where set_id = $1 order by account_id",
        set
    )
    .fetch_all(conn)
    .await
}

/// Brings the stored pairs of `wallets` to what the (already changed) graph implies: each
/// wallet that joins or leaves a set is locked, and its balances of that moment written.
async fn sync_closure(db: &mut Db<'_>, wallets: &[String]) -> Result<(), StoreError> {
    let before = stored_pairs(db.conn(), Some(wallets)).await?;
    let after = implied_pairs(db.conn(), Some(wallets)).await?;
    let change = ClosureChange::between(&before, &after);
    if change.is_empty() {
        return Ok(());
    }
    let touched = change.wallets();
    locks::lock_accounts(db, &touched, SystemLocks::Shared).await?;
    super::bookkeeping::lock_sets(db.conn(), &change.sets()).await?;
    let states = reads::wallet_states(db, &touched).await?;
    let posted: HashMap<&str, i64> = states
        .iter()
        .map(|(id, s)| (id.as_str(), s.chain.balance.minor_units()))
        .collect();
    let holds = open_holds_of(db.conn(), &touched).await?;
    let now = now_micros();
    write_closure(db.conn(), &change).await?;
    write_movements(db.conn(), &change, &posted, now).await?;
    copy_holds(db.conn(), &change, &holds).await?;
    let in_sets: BTreeSet<&str> = after.iter().map(|(w, _)| w.as_str()).collect();
    let (now_in, now_out): (Vec<String>, Vec<String>) = touched
        .into_iter()
        .partition(|w| in_sets.contains(w.as_str()));
    marks::in_sets(db, &now_in, true).await?;
    marks::in_sets(db, &now_out, false).await?;
    Ok(())
}

/// The stored (wallet, set) pairs of `wallets`, or of every wallet (`None`: `verify`).
pub(crate) async fn stored_pairs(
    conn: &mut PgConnection,
    wallets: Option<&[String]>,
) -> Result<BTreeSet<Counted>, sqlx::Error> {
    Ok(sqlx::query!(
        "select account_id, set_id from account_set_closure
         where $1::text[] is null or account_id = any($1)",
        wallets as Option<&[String]>
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.account_id, r.set_id))
    .collect())
}

/// The pairs the graph implies for `wallets` (or for every wallet, `None`): each set a wallet
/// is a direct member of, and every set above those.
pub(crate) async fn implied_pairs(
    conn: &mut PgConnection,
    wallets: Option<&[String]>,
) -> Result<BTreeSet<Counted>, sqlx::Error> {
    Ok(sqlx::query!(
        r#"with recursive up(account_id, set_id) as (
               select account_id, set_id from account_set_accounts
               where $1::text[] is null or account_id = any($1)
               union
               select up.account_id, c.set_id
               from up join account_set_children c on c.child_id = up.set_id)
           select account_id as "account_id!", set_id as "set_id!" from up"#,
        wallets as Option<&[String]>
    )
    .fetch_all(conn)
    .await?
    .into_iter()
    .map(|r| (r.account_id, r.set_id))
    .collect())
}

/// An open hold of a wallet, as a set copies it.
struct OpenHold {
    transaction_id: Uuid,
    account_id: String,
    amount: i64,
    expires_at: DateTime<Utc>,
}

async fn open_holds_of(
    conn: &mut PgConnection,
    wallets: &[String],
) -> Result<Vec<OpenHold>, sqlx::Error> {
    sqlx::query_as!(
        OpenHold,
        "select transaction_id, account_id, amount, expires_at from open_holds
         where account_id = any($1) and expires_at > now()",
        wallets
    )
    .fetch_all(conn)
    .await
}

fn split(pairs: &[Counted]) -> (Vec<&str>, Vec<&str>) {
    pairs.iter().map(|(w, s)| (w.as_str(), s.as_str())).unzip()
}

async fn write_closure(conn: &mut PgConnection, change: &ClosureChange) -> Result<(), sqlx::Error> {
    let (wallets, sets) = split(&change.left);
    sqlx::query!(
        "delete from account_set_closure c using unnest($1::text[], $2::text[]) as l(w, s)
         where c.account_id = l.w and c.set_id = l.s",
        &wallets as &[&str],
        &sets as &[&str]
    )
    .execute(&mut *conn)
    .await?;
    let (wallets, sets) = split(&change.joined);
    sqlx::query!(
        "insert into account_set_closure (account_id, set_id)
         select * from unnest($1::text[], $2::text[])",
        &wallets as &[&str],
        &sets as &[&str]
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A join adds the wallet's posted balance to the set, a leave takes it away; a zero balance
/// moves nothing and writes no row.
async fn write_movements(
    conn: &mut PgConnection,
    change: &ClosureChange,
    posted: &HashMap<&str, i64>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let signed = |pairs: &[Counted], sign: i64, kind: &'static str| {
        pairs
            .iter()
            .map(|(w, s)| {
                (
                    s.clone(),
                    w.clone(),
                    kind,
                    sign * posted.get(w.as_str()).copied().unwrap_or(0),
                )
            })
            .filter(|(.., amount)| *amount != 0)
            .collect::<Vec<_>>()
    };
    let rows: Vec<_> = signed(&change.joined, 1, "join")
        .into_iter()
        .chain(signed(&change.left, -1, "leave"))
        .collect();
    let sets: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let wallets: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r.2).collect();
    let amounts: Vec<i64> = rows.iter().map(|r| r.3).collect();
    sqlx::query!(
        "insert into account_set_movements (set_id, account_id, kind, amount, ledger_time)
         select s, w, k, a, $5 from unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
                                   as m(s, w, k, a)",
        &sets as &[&str],
        &wallets as &[&str],
        &kinds as &[&str],
        &amounts,
        now
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A set that a wallet joins gets copies of its open holds; one it leaves loses them.
async fn copy_holds(
    conn: &mut PgConnection,
    change: &ClosureChange,
    holds: &[OpenHold],
) -> Result<(), sqlx::Error> {
    let (wallets, sets) = split(&change.left);
    sqlx::query!(
        "delete from account_set_open_holds h using unnest($1::text[], $2::text[]) as l(w, s)
         where h.account_id = l.w and h.set_id = l.s",
        &wallets as &[&str],
        &sets as &[&str]
    )
    .execute(&mut *conn)
    .await?;
    let copies: Vec<(&str, &OpenHold)> = change
        .joined
        .iter()
        .flat_map(|(w, s)| {
            holds
                .iter()
                .filter(move |h| &h.account_id == w)
                .map(move |h| (s.as_str(), h))
        })
        .collect();
    let sets: Vec<&str> = copies.iter().map(|c| c.0).collect();
    let transactions: Vec<Uuid> = copies.iter().map(|c| c.1.transaction_id).collect();
    let wallets: Vec<&str> = copies.iter().map(|c| c.1.account_id.as_str()).collect();
    let amounts: Vec<i64> = copies.iter().map(|c| c.1.amount).collect();
    let expiries: Vec<DateTime<Utc>> = copies.iter().map(|c| c.1.expires_at).collect();
    sqlx::query!(
        "insert into account_set_open_holds (set_id, transaction_id, account_id, amount, expires_at)
         select * from unnest($1::text[], $2::uuid[], $3::text[], $4::bigint[], $5::timestamptz[])",
        &sets as &[&str],
        &transactions,
        &wallets as &[&str],
        &amounts,
        &expiries
    )
    .execute(conn)
    .await?;
    Ok(())
}
