//! The volumes' SQL: rolling final minutes up, and reading a window (rolled-up minutes plus
//! the live rest). Statements of their own (`sqlx::query_as`, not kept prepared): the ranges
//! change every call, and each is planned with its own bounds so that the partial indexes on
//! `posted_at` and `created_at` serve it.

use super::{Bucket, LONGEST_WINDOW, MinuteVolume, live_ranges, minute};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// The amount of a posted transaction in its currency: what a capture took, else the sum of
/// its credits in that currency (an exchange's legs name their own currencies: it counts once,
/// in the currency it debits, at the amount debited).
const AMOUNT: &str = "coalesce(captured_amount, (select sum((l ->> 'amount')::bigint)
     from jsonb_array_elements(legs) l
     where (l ->> 'amount')::bigint > 0 and coalesce(l ->> 'currency', currency) = currency))";

/// Posted transactions per minute and currency in `[$1, $2)`, then refusals: one row each.
fn live_minutes() -> String {
    format!(
        "select date_trunc('minute', posted_at) as minute, currency, count(*) as posted_count,
                coalesce(sum({AMOUNT}), 0)::bigint as posted_amount, 0::bigint as refused_count
         from transactions where status = 'posted' and posted_at >= $1 and posted_at < $2
         group by 1, 2
         union all
         select date_trunc('minute', created_at), currency, 0, 0, count(*)
         from transactions where status = 'rejected' and created_at >= $1 and created_at < $2
         group by 1, 2"
    )
}

/// The rollup's range `[rolled_from, rolled_until)`, if it has one.
async fn rolled(
    conn: &mut PgConnection,
    lock: bool,
) -> Result<Option<(DateTime<Utc>, DateTime<Utc>)>, sqlx::Error> {
    let sql = if lock {
        "select rolled_from, rolled_until from volume_rollup for update"
    } else {
        "select rolled_from, rolled_until from volume_rollup"
    };
    sqlx::query_as(sql)
        .persistent(false)
        .fetch_optional(conn)
        .await
}

/// Rolls every final minute up to `horizon` (the finality horizon, read before this is called)
/// into `volume_minutes`, from where the rollup ends, or from the start of the hour a day before
/// `horizon` (the longest window) when it ends earlier or does not exist, and drops the minutes
/// before that. Concurrent callers serialize on the rollup's row; the second finds the work
/// done.
pub async fn roll_forward(
    conn: &mut PgConnection,
    horizon: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let until = minute(horizon);
    // The first bucket of the longest window, at the widest bucket: every window starts at or
    // after it (`window_range`), so none is left partly live.
    let earliest = Bucket::Hour.start(horizon - LONGEST_WINDOW);
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query("insert into volume_rollup (rolled_from, rolled_until) values ($1, $1) on conflict do nothing")
        .bind(earliest)
        .execute(&mut *tx)
        .await?;
    let (rolled_from, rolled_until) = rolled(&mut tx, true).await?.expect("inserted above");
    // Minutes before the longest window are never read again (a rollup that ends before it
    // starts again there), and are dropped below: the rollup holds about a day.
    let from = rolled_until.max(earliest);
    if from >= until {
        return tx.commit().await;
    }
    let insert = format!(
        "insert into volume_minutes (minute, currency, posted_count, posted_amount, refused_count)
         select minute, currency, sum(posted_count), sum(posted_amount), sum(refused_count)
         from ({}) live group by 1, 2",
        live_minutes()
    );
    sqlx::query(sqlx::AssertSqlSafe(insert))
        .persistent(false)
        .bind(from)
        .bind(until)
        .execute(&mut *tx)
        .await?;
    sqlx::query("delete from volume_minutes where minute < $1")
        .bind(earliest)
        .execute(&mut *tx)
        .await?;
    sqlx::query("update volume_rollup set rolled_from = $1, rolled_until = $2")
        .bind(rolled_from.max(earliest))
        .bind(until)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Every minute of `[from, to)` with something in it: the rolled-up ones, and the rest read
/// live. Several rows may name the same minute and currency (a live minute's posted and
/// refused parts); `into_buckets` adds them up.
pub async fn minutes(
    conn: &mut PgConnection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MinuteVolume>, sqlx::Error> {
    let rolled = rolled(conn, false).await?;
    let mut found: Vec<MinuteVolume> = match rolled {
        Some((rolled_from, rolled_until)) => {
            sqlx::query_as(
                "select minute, currency, posted_count, posted_amount, refused_count
                 from volume_minutes where minute >= greatest($1, $3) and minute < least($2, $4)",
            )
            .persistent(false)
            .bind(from)
            .bind(to)
            .bind(rolled_from)
            .bind(rolled_until)
            .fetch_all(&mut *conn)
            .await?
        }
        None => Vec::new(),
    };
    let live = live_minutes();
    for (start, end) in live_ranges((from, to), rolled) {
        let rows: Vec<MinuteVolume> = sqlx::query_as(sqlx::AssertSqlSafe(live.as_str()))
            .persistent(false)
            .bind(start)
            .bind(end)
            .fetch_all(&mut *conn)
            .await?;
        found.extend(rows);
    }
    Ok(found)
}
