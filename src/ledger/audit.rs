//! Who made each write: the ledger's write functions add `audit_log` rows inside their own
//! database transactions, naming the actor of the task they run in.
//!
//! The actor travels as task-local context rather than as a parameter of every write function:
//! the HTTP layer sets it once per request after authentication (key id, owner, request id),
//! the stream consumer once per batch (its name); code outside such a scope (the hold sweeper,
//! a migration) writes no audit row. Handlers do not spawn tasks, so the context follows them
//! into the ledger.

use sqlx::PgConnection;
use std::future::Future;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The API key, when the writer has one.
    pub key_id: Option<Uuid>,
    /// The key's owner, or the name of a writer without a key (`consumer:c1`).
    pub owner: String,
    /// The request's `x-request-id`.
    pub request_id: Option<String>,
}

tokio::task_local! {
    static ACTOR: Actor;
}

/// Runs `work` with `actor` as the author of its writes.
pub async fn scope<F: Future>(actor: Actor, work: F) -> F::Output {
    ACTOR.scope(actor, work).await
}

/// The actor of the current task, if any.
pub fn current() -> Option<Actor> {
    ACTOR.try_with(Actor::clone).ok()
}

/// Records `action` on each of `resources` by the current actor (nothing outside a scope).
pub async fn record(
    conn: &mut PgConnection,
    action: &str,
    resources: &[String],
) -> Result<(), sqlx::Error> {
    let Some(actor) = current() else {
        return Ok(());
    };
    if resources.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        r#"insert into audit_log (key_id, owner, request_id, action, resource)
           select $1, $2, $3, $4, resource from unnest($5::text[]) as r(resource)"#,
        actor.key_id,
        actor.owner,
        actor.request_id,
        action,
        resources
    )
    .execute(conn)
    .await?;
    Ok(())
}
