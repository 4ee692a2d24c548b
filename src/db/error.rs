//! The store's one error type, and the one place that says whether a failure is worth a retry.
//!
//! Every database failure the ledger meets becomes a [`StoreError`] through
//! `From<sqlx::Error>`, which is the only code that reads sqlx's variants and SQLSTATEs. The
//! API (503 or 500), the consumer (back off or dead-letter), the outbox dispatcher (retry or
//! alarm) and group commit (answer every caller alike or decide each item apart) all ask
//! [`StoreError::is_transient`] rather than looking at the error themselves.

use std::sync::Arc;

/// Why a read or write of the ledger failed. Cheap to clone (the sqlx error is shared), so one
/// failure can answer every caller of a group.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or is unwell: pool exhausted or closed, connection
    /// lost, a standby or a demoted primary, shutting down, out of resources.
    #[error(transparent)]
    Unavailable(Arc<sqlx::Error>),
    /// A serialization failure or deadlock victim: the transaction rolled back, nothing else
    /// is wrong.
    #[error(transparent)]
    Conflict(Arc<sqlx::Error>),
    /// `lock_timeout` ran out waiting for a row another session holds.
    #[error(transparent)]
    LockTimeout(Arc<sqlx::Error>),
    /// `statement_timeout` (or a cancel) ended the statement.
    #[error(transparent)]
    TimedOut(Arc<sqlx::Error>),
    /// A stored row breaks what the code relies on (edited behind the service's back, or
    /// written by a bug). No retry mends it.
    #[error(transparent)]
    Corrupt(CorruptRow),
    /// A stored value sqlx itself could not decode: corrupt too, without a row to name.
    #[error(transparent)]
    Undecodable(Arc<sqlx::Error>),
    /// The writer is shutting down: nothing of the write was done.
    #[error("the writer is shutting down; nothing was written")]
    Stopped,
    /// The database refused the statement itself (a constraint, a check, a trigger) or
    /// anything else no retry changes.
    #[error(transparent)]
    Refused(Arc<sqlx::Error>),
}

/// A stored row the code cannot read, naming it so that an operator can find and repair it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {table} row {id} is corrupt: {what}")]
pub struct CorruptRow {
    pub table: &'static str,
    pub id: String,
    pub what: String,
}

/// A corrupt row of `table`, as the error the functions that read it return.
pub fn corrupt(table: &'static str, id: impl ToString, what: impl Into<String>) -> StoreError {
    StoreError::Corrupt(CorruptRow {
        table,
        id: id.to_string(),
        what: what.into(),
    })
}

impl StoreError {
    /// Whether the same work may succeed later unchanged (retry, back off, answer 503), rather
    /// than fail the same way every time (refuse, dead-letter, alarm). Nothing was written
    /// whichever it is: the transaction rolled back.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_)
            | StoreError::Conflict(_)
            | StoreError::LockTimeout(_)
            | StoreError::TimedOut(_)
            | StoreError::Stopped => true,
            StoreError::Corrupt(_) | StoreError::Undecodable(_) | StoreError::Refused(_) => false,
        }
    }

    /// Only no connection could be had in time (a failover, or merely a saturated pool).
    pub fn is_pool_timeout(&self) -> bool {
        matches!(self, StoreError::Unavailable(e) if matches!(**e, sqlx::Error::PoolTimedOut))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> StoreError {
        variant(&error)(Arc::new(error))
    }
}

/// [`StoreError::is_transient`] of an error that another one owns (a failed migration's).
pub fn is_transient(error: &sqlx::Error) -> bool {
    // Only the variant decides; the placeholder is never shown.
    variant(error)(Arc::new(sqlx::Error::WorkerCrashed)).is_transient()
}

/// Which kind of store error a sqlx error is: the one place that reads sqlx's variants and
/// PostgreSQL's SQLSTATEs.
fn variant(error: &sqlx::Error) -> fn(Arc<sqlx::Error>) -> StoreError {
    match error {
        // Protocol: the pool's own refusal of a standby, or a connection that broke
        // mid-message.
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => StoreError::Unavailable,
        sqlx::Error::Decode(_) | sqlx::Error::ColumnDecode { .. } => StoreError::Undecodable,
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("40001" | "40P01") => StoreError::Conflict,
            Some("55P03") => StoreError::LockTimeout,
            // query_canceled: statement_timeout, or a cancel.
            Some("57014") => StoreError::TimedOut,
            // read_only_sql_transaction: the primary was demoted under the session.
            Some("25006") => StoreError::Unavailable,
            // 08: connection, 53: resources, 57: operator intervention (shutdown, terminated
            // session), 58: system.
            Some(code) if ["08", "53", "57", "58"].iter().any(|c| code.starts_with(c)) => {
                StoreError::Unavailable
            }
            _ => StoreError::Refused,
        },
        _ => StoreError::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    /// A PostgreSQL error with only a SQLSTATE, as the server would send it.
    #[derive(Debug)]
    struct Sqlstate(&'static str);

    impl std::fmt::Display for Sqlstate {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Sqlstate {}

    impl sqlx::error::DatabaseError for Sqlstate {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn state(code: &'static str) -> StoreError {
        sqlx::Error::Database(Box::new(Sqlstate(code))).into()
    }

    #[test]
    fn sqlstates_map_to_their_kind() {
        for code in [
            "08006", "08001", "53300", "57P01", "57P03", "58030", "25006",
        ] {
            assert!(matches!(state(code), StoreError::Unavailable(_)), "{code}");
        }
        assert!(matches!(state("40001"), StoreError::Conflict(_)));
        assert!(matches!(state("40P01"), StoreError::Conflict(_)));
        assert!(matches!(state("55P03"), StoreError::LockTimeout(_)));
        assert!(matches!(state("57014"), StoreError::TimedOut(_)));
        for code in ["23505", "23514", "P0001", "42P01", "22003"] {
            assert!(matches!(state(code), StoreError::Refused(_)), "{code}");
        }
    }

    #[test]
    fn an_outage_a_conflict_or_a_timeout_is_transient() {
        for code in [
            "08006", "53300", "57P01", "25006", "40001", "40P01", "55P03", "57014",
        ] {
            assert!(state(code).is_transient(), "{code}");
        }
        let pool = StoreError::from(sqlx::Error::PoolTimedOut);
        assert!(pool.is_transient() && pool.is_pool_timeout());
        let io = StoreError::from(sqlx::Error::Io(std::io::Error::other("reset")));
        assert!(matches!(io, StoreError::Unavailable(_)) && !io.is_pool_timeout());
        let standby = sqlx::Error::Protocol("connected to a standby, not the primary".into());
        assert!(StoreError::from(standby).is_transient());
        assert!(StoreError::Stopped.is_transient());
    }

    #[test]
    fn a_corrupt_row_or_a_refusal_is_permanent() {
        let row = corrupt("transactions", "t1", "its leg 1 is malformed");
        assert!(!row.is_transient());
        assert_eq!(
            row.to_string(),
            "the transactions row t1 is corrupt: its leg 1 is malformed"
        );
        let decode = StoreError::from(sqlx::Error::Decode("not a status".into()));
        assert!(matches!(decode, StoreError::Undecodable(_)) && !decode.is_transient());
        let column = StoreError::from(sqlx::Error::ColumnDecode {
            index: "status".into(),
            source: "not a status".into(),
        });
        assert!(matches!(column, StoreError::Undecodable(_)) && !column.is_transient());
        assert!(!state("23505").is_transient());
        assert!(!StoreError::from(sqlx::Error::RowNotFound).is_transient());
    }

    #[test]
    fn a_clone_keeps_the_kind_and_the_message() {
        let lost = state("57P01");
        let copy = lost.clone();
        assert!(matches!(copy, StoreError::Unavailable(_)));
        assert_eq!(copy.to_string(), lost.to_string());
    }
}
