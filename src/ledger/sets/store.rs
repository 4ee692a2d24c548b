//! The rows of account sets: creating one, and reading its balances now or at a past moment.
//! The statements are the same on both engines: every set table is a table of the coordinator
//! on Citus, and none of these statements reads a distributed table.

use super::Member;
use crate::db::StoreError;
use crate::ledger::accounts::TimeAxis;
use crate::ledger::bounds::BalanceError;
use crate::ledger::views::{Balances, BalancesView};
use crate::ledger::{Created, Outcome, audit, now_micros};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::PgConnection;

/// A set as the API shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SetView {
    pub id: String,
    pub currency: String,
    #[schema(value_type = crate::ledger::views::Metadata)]
    pub metadata: Map<String, Value>,
    /// Sums over the wallets that count in the set (its own and its nested sets', each once).
    pub balances: BalancesView,
    /// The moment these balances describe, when `as_of` was asked (see the account's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A set to create, checked by the API.
pub struct NewSet {
    pub id: String,
    pub currency: crate::ledger::money::Currency,
    pub metadata: Map<String, Value>,
    /// The request as understood, for idempotency.
    pub request: Value,
}

/// A stored set without its balances.
pub struct SetRow {
    pub id: String,
    pub currency: String,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

impl SetRow {
    pub fn view(&self, balances: Balances, as_of: Option<DateTime<Utc>>) -> SetView {
        let currency = crate::ledger::money::Currency::parse(&self.currency)
            .expect("the schema allows only known currency codes");
        SetView {
            id: self.id.clone(),
            currency: self.currency.clone(),
            metadata: match &self.metadata {
                Value::Object(map) => map.clone(),
                _ => Map::new(),
            },
            balances: BalancesView::new(balances, currency),
            as_of,
            created_at: self.created_at,
        }
    }
}

/// Creates the set, or answers a replay: the primary key decides, as for accounts.
pub async fn create(conn: &mut PgConnection, new: &NewSet) -> Result<Created, sqlx::Error> {
    let row = SetRow {
        id: new.id.clone(),
        currency: new.currency.code().to_owned(),
        metadata: Value::Object(new.metadata.clone()),
        created_at: now_micros(),
    };
    let body = serde_json::to_string(&row.view(Balances::default(), None))
        .expect("a set view always serializes");
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let inserted = sqlx::query!(
        r#"insert into account_sets (id, currency, metadata, creation_request, creation_response,
                                     created_at)
           values ($1, $2, $3, $4, $5, $6)
           on conflict (id) do nothing"#,
        row.id,
        row.currency,
        row.metadata,
        new.request,
        body,
        row.created_at,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if inserted {
        audit::record(&mut tx, "account_set.create", &[row.id]).await?;
        crate::ledger::caller::commit_in_request(tx).await?;
        return Ok(Created::First(Outcome::Created { body }));
    }
    tx.commit().await?;
    let stored = sqlx::query!(
        "select creation_request, creation_response from account_sets where id = $1",
        row.id
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(Created::replay_or_mismatch(
        &stored.creation_request,
        &new.request,
        Outcome::Created {
            body: stored.creation_response,
        },
    ))
}

pub async fn find(conn: &mut PgConnection, id: &str) -> Result<Option<SetRow>, sqlx::Error> {
    sqlx::query_as!(
        SetRow,
        "select id, currency, metadata, created_at from account_sets where id = $1",
        id
    )
    .fetch_optional(conn)
    .await
}

/// The set and its balances, now or at `as_of` (posted money only then: holds keep no
/// history), read in one snapshot. `None` when the set does not exist.
pub async fn read(
    conn: &mut PgConnection,
    id: &str,
    as_of: Option<(DateTime<Utc>, TimeAxis)>,
) -> Result<Option<(SetRow, Balances)>, BalanceError> {
    let mut tx = crate::ledger::begin_snapshot(conn).await?;
    let Some(set) = find(&mut tx, id).await? else {
        return Ok(None);
    };
    let (posted, pending_in, pending_out) = match as_of {
        None => balances_now(&mut tx, id).await?,
        Some((at, axis)) => (posted_at(&mut tx, id, at, axis).await?, 0, 0),
    };
    tx.commit().await?;
    Ok(Some((
        set,
        super::balances(id, posted, pending_in, pending_out)?,
    )))
}

/// Posted: the latest checkpoint plus the movements since (an index range of the set's own
/// rows, whatever its size); pending: the unexpired copies of its members' open holds. Each
/// saturated one past ±(2^53 − 1) (`super::balances`). Read by `GET`, and by a change of a
/// monitored set's wallet under the set's lock (`ledger::monitors`).
pub(crate) async fn balances_now(
    conn: &mut PgConnection,
    id: &str,
) -> Result<(i64, i64, i64), sqlx::Error> {
    let row = sqlx::query!(
        r#"with cp as (
               select posted, below_xid from account_set_checkpoints
               where set_id = $1 order by below_xid desc limit 1),
           holds as (
               select coalesce(sum(-amount) filter (where amount < 0), 0) as pending_out,
                      coalesce(sum(amount) filter (where amount > 0), 0) as pending_in
               from account_set_open_holds where set_id = $1 and expires_at > now())
           select least(greatest(
                      coalesce((select posted from cp), 0)
                      + coalesce((select sum(amount) from account_set_movements
                                  where set_id = $1
                                    and xid >= coalesce((select below_xid from cp), '0'::xid8)), 0),
                      -9007199254740992), 9007199254740992)::bigint as "posted!",
                  least((select pending_in from holds), 9007199254740992)::bigint as "pending_in!",
                  least((select pending_out from holds), 9007199254740992)::bigint as "pending_out!""#,
        id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.posted, row.pending_in, row.pending_out))
}

/// The posted balance at `at`: every movement up to then on the chosen clock. A member counts
/// from when it joined (its join carries its balance of that moment), so this is what the set
/// held then, not what today's members held. It reads the set's history up to `at`.
async fn posted_at(
    conn: &mut PgConnection,
    id: &str,
    at: DateTime<Utc>,
    axis: TimeAxis,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select least(greatest(coalesce(sum(amount), 0), -9007199254740992),
                        9007199254740992)::bigint as "posted!"
           from account_set_movements
           where set_id = $1
             and case when $3 then coalesce(effective_at, ledger_time) else ledger_time end <= $2"#,
        id,
        at,
        axis == TimeAxis::Effective
    )
    .fetch_one(conn)
    .await
}

/// A page of a set's direct members in reference order (`account:…` before `set:…`), after
/// `after` (a reference). `None` when the set does not exist.
pub async fn members_page(
    conn: &mut PgConnection,
    id: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Option<(Vec<MemberView>, Option<String>)>, StoreError> {
    let mut tx = crate::ledger::begin_snapshot(conn).await?;
    if find(&mut tx, id).await?.is_none() {
        return Ok(None);
    }
    let rows = sqlx::query!(
        r#"select reference as "reference!", added_at as "added_at!" from (
               select 'account:' || account_id as reference, added_at
               from account_set_accounts where set_id = $1
               union all
               select 'set:' || child_id, added_at from account_set_children where set_id = $1) m
           where $2::text is null or reference collate "C" > $2 collate "C"
           order by reference collate "C" limit $3"#,
        id,
        after,
        limit + 1
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut members = rows
        .into_iter()
        .map(|r| {
            let member = Member::parse(&r.reference)
                .ok_or_else(|| crate::db::corrupt("account_sets", id, "member reference"))?;
            Ok(MemberView::new(&member, r.added_at))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let next = (members.len() as i64 > limit).then(|| {
        members.truncate(limit as usize);
        members.last().map(|m| m.reference.clone())
    });
    Ok(Some((members, next.flatten())))
}

/// A direct member as the API shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct MemberView {
    #[serde(rename = "type")]
    pub kind: MemberKind,
    pub id: String,
    /// `account:<id>` or `set:<id>`: how a path names it (`DELETE .../members/{member}`).
    pub reference: String,
    pub added_at: DateTime<Utc>,
}

impl MemberView {
    pub fn new(member: &Member, added_at: DateTime<Utc>) -> MemberView {
        let (kind, id) = match member {
            Member::Account(id) => (MemberKind::Account, id),
            Member::Set(id) => (MemberKind::Set, id),
        };
        MemberView {
            kind,
            id: id.clone(),
            reference: member.reference(),
            added_at,
        }
    }
}

/// What a member is: a wallet or a nested set.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MemberKind {
    Account,
    Set,
}
