//! A database session as a unit of work that can be bounded and interrupted: the consumer's
//! batches give their transaction a statement and lock timeout and record its backend, so that
//! a batch past its deadline can have its statement cancelled from another connection.

use sqlx::{PgConnection, PgPool};
use std::time::Duration;

/// Bounds the current transaction's statements by `statement_timeout` (and its lock waits by
/// half of it), when given; returns the session's backend pid, for [`cancel`].
pub async fn bound_and_identify(
    conn: &mut PgConnection,
    statement_timeout: Option<Duration>,
) -> Result<i32, sqlx::Error> {
    let Some(limit) = statement_timeout else {
        return sqlx::query_scalar!(r#"select pg_backend_pid() as "pid!""#)
            .fetch_one(conn)
            .await;
    };
    let statement = format!("{}ms", limit.as_millis().max(1));
    let lock = format!("{}ms", (limit.as_millis() / 2).max(1));
    let bounded = sqlx::query!(
        r#"select set_config('statement_timeout', $1, true) as "statement!",
                  set_config('lock_timeout', $2, true) as "lock!",
                  pg_backend_pid() as "pid!""#,
        statement,
        lock
    )
    .fetch_one(conn)
    .await?;
    Ok(bounded.pid)
}

/// Cancels the statement the session `pid` is running (none if it is between statements).
pub async fn cancel(pool: &PgPool, pid: i32) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"select pg_cancel_backend($1) as "cancelled!""#, pid)
        .fetch_one(pool)
        .await
}
