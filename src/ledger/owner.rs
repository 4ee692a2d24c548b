//! Who a rule belongs to: a wallet, or an account set (every wallet counted in it, summed:
//! `ledger::sets`). Velocity limits and balance monitors are both owned this way, with the same
//! columns (`account_id` or `set_id`, exactly one of them).

use sqlx::PgConnection;

/// Which rules an owner's row flag says it has: the write path reads the flag under the row's
/// lock and loads the rules only when it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Velocity limits (`has_limits`).
    Limits,
    /// Balance monitors (`has_monitors`).
    Monitors,
}

/// A rule's owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Account(String),
    Set(String),
}

impl Owner {
    pub fn account(&self) -> Option<&str> {
        match self {
            Owner::Account(id) => Some(id),
            Owner::Set(_) => None,
        }
    }

    pub fn set(&self) -> Option<&str> {
        match self {
            Owner::Account(_) => None,
            Owner::Set(id) => Some(id),
        }
    }

    /// How answers name it: `account carol`, `account set family`.
    pub fn label(&self) -> String {
        match self {
            Owner::Account(id) => format!("account {id}"),
            Owner::Set(id) => format!("account set {id}"),
        }
    }

    /// The key a creation request names it by, so that one rule id reused on a wallet and on
    /// a set is a mismatch: `account_id` or `set_id`.
    pub fn request_key(&self) -> (&'static str, &str) {
        match self {
            Owner::Account(id) => ("account_id", id),
            Owner::Set(id) => ("set_id", id),
        }
    }

    /// Whether it exists. One statement per kind: on Citus `accounts` is distributed and
    /// `account_sets` is the coordinator's, which one statement may not read together.
    pub async fn exists(&self, conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
        match self {
            Owner::Account(id) => {
                sqlx::query_scalar!(
                    r#"select exists (select 1 from accounts where id = $1) as "e!""#,
                    id
                )
                .fetch_one(conn)
                .await
            }
            Owner::Set(id) => {
                sqlx::query_scalar!(
                    r#"select exists (select 1 from account_sets where id = $1) as "e!""#,
                    id
                )
                .fetch_one(conn)
                .await
            }
        }
    }

    /// Marks it as having rules of this kind, taking its row's lock: a rule added in this
    /// transaction binds every change that locks the row after it commits. Its currency;
    /// `None` when it does not exist.
    pub async fn mark(
        &self,
        conn: &mut PgConnection,
        rule: Rule,
    ) -> Result<Option<String>, sqlx::Error> {
        match (self, rule) {
            (Owner::Account(id), Rule::Limits) => {
                sqlx::query_scalar!(
                    "update accounts set has_limits = true where id = $1 returning currency",
                    id
                )
                .fetch_optional(conn)
                .await
            }
            (Owner::Set(id), Rule::Limits) => {
                sqlx::query_scalar!(
                    "update account_sets set has_limits = true where id = $1 returning currency",
                    id
                )
                .fetch_optional(conn)
                .await
            }
            (Owner::Account(id), Rule::Monitors) => {
                sqlx::query_scalar!(
                    "update accounts set has_monitors = true where id = $1 returning currency",
                    id
                )
                .fetch_optional(conn)
                .await
            }
            (Owner::Set(id), Rule::Monitors) => {
                sqlx::query_scalar!(
                    "update account_sets set has_monitors = true where id = $1 returning currency",
                    id
                )
                .fetch_optional(conn)
                .await
            }
        }
    }

    /// Locks its row and sets its flag to whether it still has a rule of this kind that counts
    /// (one not deleted).
    pub async fn remark(&self, conn: &mut PgConnection, rule: Rule) -> Result<(), sqlx::Error> {
        match (self, rule) {
            (Owner::Account(id), Rule::Limits) => sqlx::query!(
                r#"update accounts set has_limits = exists (
                       select 1 from account_limits where account_id = $1 and deleted_at is null)
                   where id = $1"#,
                id
            ),
            (Owner::Set(id), Rule::Limits) => sqlx::query!(
                r#"update account_sets set has_limits = exists (
                       select 1 from account_limits where set_id = $1 and deleted_at is null)
                   where id = $1"#,
                id
            ),
            (Owner::Account(id), Rule::Monitors) => sqlx::query!(
                r#"update accounts set has_monitors = exists (
                       select 1 from account_monitors where account_id = $1 and deleted_at is null)
                   where id = $1"#,
                id
            ),
            (Owner::Set(id), Rule::Monitors) => sqlx::query!(
                r#"update account_sets set has_monitors = exists (
                       select 1 from account_monitors where set_id = $1 and deleted_at is null)
                   where id = $1"#,
                id
            ),
        }
        .execute(conn)
        .await?;
        Ok(())
    }
}
