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

/// The operator of a command-line tool: the operating-system user who ran it (`cli:<user>`),
/// so that what an operator did by hand (API keys, redeliveries) is audited like an API call.
pub fn operator() -> Actor {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|u| !u.is_empty()))
        // SAFETY: getuid(2) has no preconditions and cannot fail.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
    Actor {
        key_id: None,
        owner: format!("cli:{user}"),
        request_id: None,
    }
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

/// Records `action` on `resource` by the current actor with the `reason` the actor gave (an
/// erasure's); nothing outside a scope.
pub async fn record_with_reason(
    conn: &mut PgConnection,
    action: &str,
    resource: &str,
    reason: &str,
) -> Result<(), sqlx::Error> {
    let Some(actor) = current() else {
        return Ok(());
    };
    sqlx::query!(
        r#"insert into audit_log (key_id, owner, request_id, action, resource, reason)
           values ($1, $2, $3, $4, $5, $6)"#,
        actor.key_id,
        actor.owner,
        actor.request_id,
        action,
        resource,
        reason
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records `action` once per `(actor, resource)`: the writes of several callers committed
/// together (group commit) each name their own caller. Pairs without an actor write nothing.
pub async fn record_each(
    conn: &mut PgConnection,
    action: &str,
    writes: &[(Option<Actor>, String)],
) -> Result<(), sqlx::Error> {
    let writes: Vec<(&Actor, &String)> = writes
        .iter()
        .filter_map(|(actor, resource)| actor.as_ref().map(|a| (a, resource)))
        .collect();
    if writes.is_empty() {
        return Ok(());
    }
    let key_ids: Vec<Option<Uuid>> = writes.iter().map(|(a, _)| a.key_id).collect();
    let owners: Vec<&str> = writes.iter().map(|(a, _)| a.owner.as_str()).collect();
    let request_ids: Vec<Option<&str>> = writes
        .iter()
        .map(|(a, _)| a.request_id.as_deref())
        .collect();
    let resources: Vec<&str> = writes.iter().map(|(_, r)| r.as_str()).collect();
    sqlx::query!(
        r#"insert into audit_log (key_id, owner, request_id, action, resource)
           select w.key_id, w.owner, w.request_id, $1, w.resource
           from unnest($2::uuid[], $3::text[], $4::text[], $5::text[])
             as w(key_id, owner, request_id, resource)"#,
        action,
        &key_ids as &[Option<Uuid>],
        &owners as &[&str],
        &request_ids as &[Option<&str>],
        &resources as &[&str]
    )
    .execute(conn)
    .await?;
    Ok(())
}
