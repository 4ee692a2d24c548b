//! The stored runs as the API reads them: listed a page at a time, one report whole, or a
//! page of one report's exceptions.

use super::model::ExceptionCode;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A stored run as listed, newest first by `seq`.
pub struct StoredRun {
    pub seq: i64,
    pub id: Uuid,
    pub provider: String,
    pub clean: bool,
    pub created_at: DateTime<Utc>,
    /// The report's `summary` as stored.
    pub summary: Value,
}

/// Up to `limit` runs older than `before_seq` (all when `None`), newest first.
pub async fn list(
    pool: &PgPool,
    before_seq: Option<i64>,
    limit: i64,
) -> Result<Vec<StoredRun>, sqlx::Error> {
    sqlx::query_as!(
        StoredRun,
        r#"select seq, id, provider, clean, created_at, report -> 'summary' as "summary!"
           from reconciliation_runs
           where ($1::bigint is null or seq < $1)
           order by seq desc limit $2"#,
        before_seq,
        limit
    )
    .fetch_all(pool)
    .await
}

/// The stored report of run `id`, as the job wrote it.
pub async fn report(pool: &PgPool, id: Uuid) -> Result<Option<Value>, sqlx::Error> {
    sqlx::query_scalar!("select report from reconciliation_runs where id = $1", id)
        .fetch_optional(pool)
        .await
}

/// Up to `limit` exceptions of run `id` after position `after` (1-based, in report order),
/// only those of `code` when given, each with its position; `None` when the run is not stored.
pub async fn exceptions(
    pool: &PgPool,
    id: Uuid,
    after: Option<i64>,
    code: Option<ExceptionCode>,
    limit: i64,
) -> Result<Option<Vec<(i64, Value)>>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let stored = sqlx::query_scalar!(
        r#"select exists(select 1 from reconciliation_runs where id = $1) as "stored!""#,
        id
    )
    .fetch_one(&mut *conn)
    .await?;
    if !stored {
        return Ok(None);
    }
    // Unnested in PostgreSQL: only the page crosses to the server, however long the list.
    let rows = sqlx::query!(
        r#"select e.ord as "position!", e.value as "exception!"
           from reconciliation_runs r
           cross join lateral jsonb_array_elements(r.report -> 'exceptions')
                with ordinality as e(value, ord)
           where r.id = $1 and ($2::bigint is null or e.ord > $2)
             and ($3::text is null or e.value ->> 'code' = $3)
           order by e.ord limit $4"#,
        id,
        after,
        code.map(ExceptionCode::as_str),
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Some(
        rows.into_iter()
            .map(|r| (r.position, r.exception))
            .collect(),
    ))
}
