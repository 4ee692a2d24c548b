//! Who a rule belongs to: a wallet, or an account set (every wallet counted in it, summed:
//! `ledger::sets`). Velocity limits and balance monitors are both owned this way, with the same
//! columns (`account_id` or `set_id`, exactly one of them).

use sqlx::PgConnection;

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
}
