//! `GET /v1/accounts`: accounts by what the business knows (type, currency, status, metadata,
//! an id prefix), in bytewise id order, each with its balances now.
//!
//! One statement serves both engines: on Citus it runs on every shard of `accounts` (each
//! ordered and limited by its `accounts_id_bytewise` index) and the coordinator merges the
//! pages. The statement is not kept prepared, so each call is planned with its own filters: a
//! generic plan, made without knowing which filters are set, could not use the metadata index.

use super::accounts::{self, Account, AccountRow, AccountStatus, AccountType};
use super::bounds::BalanceError;
use super::money::Currency;
use super::views::Balances;

/// Filters of `GET /v1/accounts`; `after_id` is the decoded cursor.
#[derive(Debug, Default)]
pub struct AccountFilter {
    pub kind: Option<AccountType>,
    pub currency: Option<Currency>,
    pub status: Option<AccountStatus>,
    /// A [`super::search::metadata_predicate`].
    pub metadata: Option<String>,
    /// A [`super::search::id_prefix_range`].
    pub id_range: Option<(String, String)>,
    pub after_id: Option<String>,
    pub limit: i64,
}

/// A page of accounts with their balances, read in one snapshot, and the id the next page
/// starts after.
pub struct AccountPage {
    pub accounts: Vec<(Account, Balances)>,
    pub next: Option<String>,
}

pub async fn list(
    conn: &mut sqlx::PgConnection,
    f: &AccountFilter,
) -> Result<AccountPage, BalanceError> {
    let mut tx = super::begin_snapshot(conn).await?;
    let mut found = matching(&mut tx, f).await?;
    let more = found.len() as i64 > f.limit;
    found.truncate(f.limit as usize);
    let next = more.then(|| found.last().map(|a| a.id.clone())).flatten();
    let ids: Vec<String> = found.iter().map(|a| a.id.clone()).collect();
    let mut pending = super::holds::pending_totals(&mut tx, &ids).await?;
    let mut page = Vec::with_capacity(found.len());
    for account in found {
        let posted = accounts::posted_now(&mut tx, &account).await?;
        let held = pending.remove(&account.id).unwrap_or_default();
        let balances = accounts::in_range(&account, posted, held)?;
        page.push((account, balances));
    }
    tx.commit().await?;
    Ok(AccountPage {
        accounts: page,
        next,
    })
}

/// Up to `limit + 1` accounts that pass the filters, after the cursor, in bytewise id order
/// (public for the plan tests: it opens no transaction of its own).
pub async fn matching(
    conn: &mut sqlx::PgConnection,
    f: &AccountFilter,
) -> Result<Vec<Account>, crate::db::StoreError> {
    let (from, to) = f.id_range.clone().unzip();
    let rows = sqlx::query_as!(
        AccountRow,
        r#"select id, currency, type as kind, status, overdraft_limit, metadata, version,
                  created_at, updated_at
           from accounts
           where ($1::text is null or type = $1)
             and ($2::text is null or currency = $2)
             and ($3::text is null or status = $3)
             and ($4::text is null or (metadata <> '{}' and metadata @@ $4::text::jsonpath))
             and ($5::text is null or (id collate "C" >= $5 and id collate "C" < $6))
             and ($7::text is null or id collate "C" > $7)
           order by id collate "C"
           limit $8"#,
        f.kind.map(AccountType::as_str),
        f.currency.map(|c| c.code()),
        f.status.map(AccountStatus::as_str),
        f.metadata,
        from,
        to,
        f.after_id,
        f.limit + 1,
    )
    .persistent(false)
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(AccountRow::parse).collect()
}
