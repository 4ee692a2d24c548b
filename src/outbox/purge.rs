//! `wallet-ledger purge`: retention for what only exists to be sent or inspected: delivered
//! outbox events, finished deliveries and their attempts, old dead-letter copies, and
//! reconciliation staging a crashed run left behind.
//!
//! Transactions, entries and stored refusals are never purged (nor time-partitioned): their
//! primary key is the promise that a duplicate is recognised forever. The retention must
//! exceed the broker's retention plus the producers' retry window, so nothing that may still
//! be delivered again is forgotten early.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// The shortest retention `purge` accepts beyond the broker's and producers' windows.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// The longest retention `purge` takes: a century, far inside what timestamps hold.
pub const MAX_RETENTION_DAYS: u32 = 36_500;

#[derive(Debug, Clone)]
pub struct PurgeSettings {
    pub database: crate::db::DatabaseSettings,
    pub redis: crate::broker::RedisSettings,
    pub stream: crate::consumer::stream::StreamSettings,
    /// Everything younger than this many days is kept.
    pub retention_days: u32,
    /// How long the broker keeps messages (a purge must not forget what it may still deliver).
    pub broker_retention_hours: u32,
    /// How long producers keep retrying one event.
    pub producer_retry_window_hours: u32,
    /// Count what would be deleted, delete nothing.
    pub dry_run: bool,
    /// When the dispatcher publishes to an events stream, events not yet published are kept.
    pub events_stream: Option<String>,
}

impl PurgeSettings {
    /// The oldest time kept: now less the retention.
    pub fn cutoff(&self) -> Result<chrono::DateTime<chrono::Utc>, String> {
        chrono::Utc::now()
            .checked_sub_signed(chrono::TimeDelta::days(i64::from(self.retention_days)))
            .ok_or_else(|| {
                format!(
                    "--retention-days {} reaches before year 1",
                    self.retention_days
                )
            })
    }

    /// Refuses a retention shorter than the broker's retention plus the producers' retry
    /// window: an event could still arrive again after its traces were purged.
    pub fn check(&self) -> Result<(), String> {
        let needed =
            u64::from(self.broker_retention_hours) + u64::from(self.producer_retry_window_hours);
        let retention = u64::from(self.retention_days) * 24;
        if retention < needed {
            return Err(format!(
                "--retention-days {} ({retention} h) is shorter than the broker's retention plus the producers' retry window ({needed} h)",
                self.retention_days
            ));
        }
        Ok(())
    }
}

/// What a purge deleted (or, with `--dry-run`, would delete).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub attempts: i64,
    pub deliveries: i64,
    pub events: i64,
    pub staging_lines: i64,
    pub dead_letters: u64,
}

/// Deletes, in one database transaction, the rows older than `cutoff`: attempts, finished
/// deliveries (delivered, dead or cancelled), events that were fanned out, have no delivery
/// left and (when an events stream is configured, `streaming`) were published, and staging
/// lines whose run is not a recent one.
pub async fn purge_database(
    conn: &mut PgConnection,
    cutoff: DateTime<Utc>,
    streaming: bool,
    dry_run: bool,
) -> Result<Purged, sqlx::Error> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let attempts = sqlx::query!(
        "delete from delivery_attempts a using webhook_deliveries d
         where a.delivery_id = d.id and (a.started_at < $1 or (d.status <> 'pending' and d.updated_at < $1))",
        cutoff
    )
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    let deliveries = sqlx::query!(
        "delete from webhook_deliveries where status <> 'pending' and updated_at < $1",
        cutoff
    )
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    let events = sqlx::query!(
        "delete from outbox_events e
         where e.created_at < $1 and e.fanned_out_at is not null
           and (e.streamed_at is not null or not $2)
           and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)",
        cutoff,
        streaming
    )
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    let staging_lines = sqlx::query!(
        "delete from settlement_lines l
         where not exists (select 1 from reconciliation_runs r where r.id = l.run_id and r.created_at >= $1)",
        cutoff
    )
    .execute(&mut *tx)
    .await?
    .rows_affected() as i64;
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok(Purged {
        attempts,
        deliveries,
        events,
        staging_lines,
        dead_letters: 0,
    })
}

pub async fn run(args: PurgeSettings) -> anyhow::Result<()> {
    args.check().map_err(anyhow::Error::msg)?;
    let cutoff = args.cutoff().map_err(anyhow::Error::msg)?;
    let pool = crate::db::connect(&args.database).await?;
    let mut conn = pool.acquire().await?;
    let streaming = args.events_stream.is_some();
    let mut purged = purge_database(&mut conn, cutoff, streaming, args.dry_run).await?;
    drop(conn);
    pool.close().await;

    // Dead-letter ids are their arrival time in milliseconds, so `MINID` keeps the recent ones.
    let dead_letters = args.stream.dead_letters();
    match crate::broker::connect(&args.redis.url).await {
        Ok(mut redis) => {
            let min_id = format!("{}-0", cutoff.timestamp_millis());
            purged.dead_letters = if args.dry_run {
                let old: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                    .arg(&dead_letters)
                    .arg("-")
                    .arg(format!("({min_id}"))
                    .query_async(&mut redis)
                    .await?;
                old.ids.len() as u64
            } else {
                redis::cmd("XTRIM")
                    .arg(&dead_letters)
                    .arg("MINID")
                    .arg(&min_id)
                    .query_async(&mut redis)
                    .await?
            };
        }
        Err(e) => tracing::warn!(error = %e, "Redis is unreachable: dead letters were not purged"),
    }
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    println!(
        "{verb}: {} delivery attempts, {} deliveries, {} outbox events, {} staging lines, {} dead letters of {dead_letters} (older than {})",
        purged.attempts,
        purged.deliveries,
        purged.events,
        purged.staging_lines,
        purged.dead_letters,
        cutoff.to_rfc3339()
    );
    Ok(())
}
