//! `GET /v1/stats/volumes`: the dashboard's volumes over the last hour or day (`crate::stats`).

use super::AppState;
use super::error::Result;
use super::extract::QueryParams;
use super::responses::json;
use crate::ledger::money::Currency;
use crate::stats::{self, Bucket, Window};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VolumesQuery {
    /// How far back: `hour` (default) or `day`.
    pub window: Option<Window>,
    /// How wide a bucket is: `minute` (the default for an hour) or `hour` (for a day).
    pub bucket: Option<Bucket>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Volumes {
    pub window: Window,
    pub bucket: Bucket,
    /// The start of the first bucket.
    pub from: DateTime<Utc>,
    /// Now: the last bucket is the current one, still filling.
    pub to: DateTime<Utc>,
    /// The buckets with something in them, oldest first, then by currency.
    pub data: Vec<VolumeBucket>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeBucket {
    pub start: DateTime<Utc>,
    #[schema(value_type = crate::ledger::views::CurrencyCode)]
    pub currency: String,
    /// Transactions posted in the bucket (by ledger time), of every kind: captures, reversals,
    /// and exchanges (in the currency they debit).
    pub posted_count: i64,
    /// What they moved: a transaction's captured amount, else the sum of its credits in this
    /// currency.
    pub posted_amount: i64,
    pub posted_amount_decimal: String,
    /// Creates refused in the bucket (stored refusals: `insufficient_funds`, ...).
    pub refused_count: i64,
}

#[utoipa::path(get, path = "/v1/stats/volumes", tag = "stats", operation_id = "get_volumes", params(VolumesQuery),
    responses((status = 200, description = "posted transactions (count and amount) and refusals per bucket and currency", body = Volumes)))]
pub async fn volumes(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<VolumesQuery>,
) -> Result<Response> {
    let window = query.window.unwrap_or(Window::Hour);
    let bucket = query.bucket.unwrap_or(window.default_bucket());
    let mut conn = state.pool.acquire().await?;
    let horizon =
        crate::ledger::store::reads::final_horizon(&mut state.store.on(&mut conn)).await?;
    // Rolling up is an optimisation: a failure (a read-only node) still answers, live.
    if let Err(e) = stats::store::roll_forward(&mut conn, horizon).await {
        tracing::warn!(error = %e, "the volumes rollup could not move forward");
    }
    let (from, to) = stats::window_range(window, bucket, Utc::now());
    let minutes = stats::store::minutes(&mut conn, from, to).await?;
    let data = stats::into_buckets(&minutes, bucket)
        .into_iter()
        .map(|((start, currency), totals)| VolumeBucket {
            posted_amount_decimal: Currency::parse(&currency).map_or_else(
                || totals.posted_amount.to_string(),
                |c| c.format(totals.posted_amount),
            ),
            start,
            currency,
            posted_count: totals.posted_count,
            posted_amount: totals.posted_amount,
            refused_count: totals.refused_count,
        })
        .collect();
    json(
        StatusCode::OK,
        &Volumes {
            window,
            bucket,
            from,
            to,
            data,
        },
    )
}
