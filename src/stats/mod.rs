//! The dashboard's volumes: per time bucket and currency, how many transactions were posted
//! and for how much, and how many creates were refused (`GET /v1/stats/volumes`).
//!
//! Read from a rollup of final minutes (`volume_minutes`, migration
//! `20261206040000_volume_rollup.sql`) plus the minutes not rolled up yet, which are few and
//! read from `transactions` by time through partial indexes: never a scan of entries, and a
//! day's window reads at most 1,440 rows a currency whatever the ledger holds. This module
//! decides, without a database, which minutes come from where and how they add up into
//! buckets; `store` runs the SQL.

pub mod store;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::collections::BTreeMap;

/// How far back the volumes reach.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Window {
    Hour,
    Day,
}

/// How wide one bucket is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    Minute,
    Hour,
}

impl Window {
    pub fn length(self) -> TimeDelta {
        match self {
            Window::Hour => TimeDelta::hours(1),
            Window::Day => TimeDelta::days(1),
        }
    }

    /// The bucket when none is asked: 60 of a minute for an hour, 24 of an hour for a day.
    pub fn default_bucket(self) -> Bucket {
        match self {
            Window::Hour => Bucket::Minute,
            Window::Day => Bucket::Hour,
        }
    }
}

impl Bucket {
    fn width(self) -> TimeDelta {
        match self {
            Bucket::Minute => TimeDelta::minutes(1),
            Bucket::Hour => TimeDelta::hours(1),
        }
    }

    /// The start of the bucket `t` falls in (buckets are aligned on UTC).
    pub fn start(self, t: DateTime<Utc>) -> DateTime<Utc> {
        t.duration_trunc(self.width())
            .expect("a minute or an hour divides any UTC instant")
    }
}

/// The longest window: the rollup never reaches further back than this before now.
pub const LONGEST_WINDOW: TimeDelta = TimeDelta::days(1);

/// The window `[from, to)` ending now: from the start of the bucket an hour (or a day) ago,
/// so that the first bucket is whole.
pub fn window_range(
    window: Window,
    bucket: Bucket,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, DateTime<Utc>) {
    (bucket.start(now - window.length()), now)
}

/// The minute `t` falls in.
pub fn minute(t: DateTime<Utc>) -> DateTime<Utc> {
    Bucket::Minute.start(t)
}

/// The parts of `[from, to)` the rollup `[rolled_from, rolled_until)` does not hold, which are
/// read live: none, one, or two ranges (before and after the rollup).
pub fn live_ranges(
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    rolled: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let Some((rolled_from, rolled_until)) = rolled.filter(|(f, u)| f < u && *f < to && *u > from)
    else {
        return if from < to {
            vec![(from, to)]
        } else {
            Vec::new()
        };
    };
    [(from, rolled_from), (rolled_until, to)]
        .into_iter()
        .filter(|(start, end)| start < end)
        .collect()
}

/// One minute (or a part of one) of one currency, rolled up or read live.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MinuteVolume {
    pub minute: DateTime<Utc>,
    pub currency: String,
    pub posted_count: i64,
    pub posted_amount: i64,
    pub refused_count: i64,
}

/// The figures of one bucket and currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub posted_count: i64,
    pub posted_amount: i64,
    pub refused_count: i64,
}

/// Adds minutes up into buckets, by bucket start then currency. A sum that would pass
/// `i64::MAX` saturates (9.2 × 10^18 minor units in one bucket is no real ledger's).
pub fn into_buckets(
    minutes: &[MinuteVolume],
    bucket: Bucket,
) -> BTreeMap<(DateTime<Utc>, String), Totals> {
    let mut buckets: BTreeMap<(DateTime<Utc>, String), Totals> = BTreeMap::new();
    for m in minutes {
        let totals = buckets
            .entry((bucket.start(m.minute), m.currency.clone()))
            .or_default();
        totals.posted_count += m.posted_count;
        totals.posted_amount = totals.posted_amount.saturating_add(m.posted_amount);
        totals.refused_count += m.refused_count;
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_window_starts_at_a_whole_bucket() {
        let now = at("2026-12-06T10:17:42Z");
        assert_eq!(
            window_range(Window::Hour, Bucket::Minute, now),
            (at("2026-12-06T09:17:00Z"), now)
        );
        assert_eq!(
            window_range(Window::Day, Bucket::Hour, now),
            (at("2026-12-05T10:00:00Z"), now)
        );
        assert_eq!(Window::Day.default_bucket(), Bucket::Hour);
    }

    #[test]
    fn what_the_rollup_holds_is_not_read_again() {
        let window = (at("2026-12-06T09:00:00Z"), at("2026-12-06T10:00:30Z"));
        // Nothing rolled up: all of it live.
        assert_eq!(live_ranges(window, None), vec![window]);
        // Rolled up to 09:59: only the last minute and a half is live.
        let rolled = Some((at("2026-12-05T12:00:00Z"), at("2026-12-06T09:59:00Z")));
        assert_eq!(
            live_ranges(window, rolled),
            vec![(at("2026-12-06T09:59:00Z"), window.1)]
        );
        // A rollup that started inside the window leaves its start live too.
        let late = Some((at("2026-12-06T09:30:00Z"), at("2026-12-06T09:59:00Z")));
        assert_eq!(
            live_ranges(window, late),
            vec![
                (window.0, at("2026-12-06T09:30:00Z")),
                (at("2026-12-06T09:59:00Z"), window.1)
            ]
        );
        // A rollup wholly before the window does not count.
        let old = Some((at("2026-12-01T00:00:00Z"), at("2026-12-02T00:00:00Z")));
        assert_eq!(live_ranges(window, old), vec![window]);
        // An empty or reversed window reads nothing.
        assert_eq!(live_ranges((window.1, window.1), None), vec![]);
    }

    #[test]
    fn minutes_add_up_into_their_buckets_per_currency() {
        let m =
            |minute: &str, currency: &str, posted: i64, amount: i64, refused: i64| MinuteVolume {
                minute: at(minute),
                currency: currency.into(),
                posted_count: posted,
                posted_amount: amount,
                refused_count: refused,
            };
        let minutes = [
            m("2026-12-06T09:01:00Z", "SAR", 2, 300, 1),
            m("2026-12-06T09:59:00Z", "SAR", 1, 50, 0),
            m("2026-12-06T09:59:00Z", "USD", 1, 7, 2),
            m("2026-12-06T10:00:00Z", "SAR", 1, i64::MAX, 0),
            m("2026-12-06T10:00:00Z", "SAR", 1, 1, 0),
        ];
        let hours = into_buckets(&minutes, Bucket::Hour);
        let get = |start: &str, currency: &str| hours[&(at(start), currency.to_owned())];
        assert_eq!(
            get("2026-12-06T09:00:00Z", "SAR"),
            Totals {
                posted_count: 3,
                posted_amount: 350,
                refused_count: 1
            }
        );
        assert_eq!(
            get("2026-12-06T09:00:00Z", "USD"),
            Totals {
                posted_count: 1,
                posted_amount: 7,
                refused_count: 2
            }
        );
        assert_eq!(
            get("2026-12-06T10:00:00Z", "SAR").posted_amount,
            i64::MAX,
            "saturates"
        );
        assert_eq!(into_buckets(&minutes, Bucket::Minute).len(), 4);
    }
}
