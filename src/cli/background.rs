//! `serve`'s background maintenance: balance checkpoints and the hold sweeper, each a step
//! repeated until shutdown.

use crate::ledger::store::Store;
use crate::ledger::{checkpoints, holds};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Advances system-account balance checkpoints every `every` until `shutdown`.
pub async fn checkpointer(store: Store, every: Duration, shutdown: CancellationToken) {
    let name = crate::metrics_catalog::CHECKPOINT_TASK;
    periodically(name, every, shutdown, move || {
        let store = store.clone();
        async move {
            let mut conn = store.pool().acquire().await?;
            let advanced = checkpoints::advance(&mut store.on(&mut conn)).await?;
            Ok(advanced as i64)
        }
    })
    .await
}

/// Marks overdue holds `expired` every `every` until `shutdown`.
pub async fn hold_sweeper(store: Store, every: Duration, shutdown: CancellationToken) {
    let name = crate::metrics_catalog::HOLD_SWEEP_TASK;
    periodically(name, every, shutdown, move || {
        let store = store.clone();
        async move {
            let mut conn = store.pool().acquire().await?;
            holds::sweep(&mut store.on(&mut conn), holds::HOLD_SWEEP_BATCH).await
        }
    })
    .await
}

/// Runs `step` every `every` until `shutdown` is cancelled (a step in progress finishes); a
/// failed step is retried at the next tick (the database decides every step's effect, so a
/// retry is always safe). Only a transient failure can mend by itself: a permanent one (a
/// corrupt row, a refused statement) fails every tick until someone repairs it, so it is logged
/// at error level and counted for an alert.
async fn periodically<F, Fut>(
    name: &'static str,
    every: Duration,
    shutdown: CancellationToken,
    mut step: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<i64, crate::db::StoreError>>,
{
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = shutdown.cancelled() => return,
        }
        match step().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(task = name, rows = n, "background step"),
            Err(e) if e.is_transient() => {
                tracing::warn!(task = name, error = %e, "background step failed; will retry")
            }
            Err(e) => {
                ::metrics::counter!("wallet_ledger_background_permanent_errors_total", "task" => name)
                    .increment(1);
                tracing::error!(task = name, error = %e, "background step failed; retrying will not mend it");
            }
        }
    }
}
