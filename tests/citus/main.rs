//! The service on Citus: one cluster (scripts/citus.sh, a coordinator and two workers on
//! loopback ports) for the whole binary, each test on its own database migrated by the real
//! `migrate`, which distributes the tables (backend.rs). `cargo test --test citus`.
//!
//! The tests of tests/api named below run here unchanged, so balances, holds, reversals,
//! batches, `as_of`, `reconcile` and a transaction's outbox events answer as on one node (their `TestApp` creates its databases
//! through this binary's `backend`, which also checks, as each finishes, that its wallets and
//! the accounts it posted to sit on both workers), and `cluster.rs` adds what only a cluster
//! shows: wallets on both workers, a transfer between them, a retry that names a wallet on the
//! other worker, `migrate` twice, and `verify` and the write path's cross-shard check finding
//! what the per-shard trigger cannot see; `grow.rs` adds a worker and rebalances under load.

mod backend;

/// The shared harness (tests/support) on the Citus cluster.
mod common {
    pub use test_support::common::*;

    pub type TestApp = test_support::TestApp<crate::backend::Citus>;
}
use test_support::stream_support;

mod cluster;
mod grow;
mod load;
mod node_loss;
mod upgrade;

#[path = "../api/balance_range.rs"]
mod balance_range;
#[path = "../api/balances.rs"]
mod balances;
#[path = "../api/batch.rs"]
mod batch;
#[path = "../api/chain_links.rs"]
mod chain_links;
#[path = "../api/consumer_apply.rs"]
mod consumer_apply;
#[path = "../api/effective.rs"]
mod effective;
#[path = "../api/erasure.rs"]
mod erasure;
#[path = "../api/exchange.rs"]
mod exchange;
#[path = "../api/history.rs"]
mod history;
#[path = "../api/holds.rs"]
mod holds;
#[path = "../api/idempotency.rs"]
mod idempotency;
#[path = "../api/limits.rs"]
mod limits;
#[path = "../api/model.rs"]
mod model;
#[path = "../api/monitors.rs"]
mod monitors;
#[path = "../api/reconcile.rs"]
mod reconcile;
#[path = "../api/reversals.rs"]
mod reversals;
#[path = "../api/seals.rs"]
mod seals;
#[path = "../api/search.rs"]
mod search;
#[path = "../api/set_monitors.rs"]
mod set_monitors;
#[path = "../api/sets.rs"]
mod sets;
#[path = "../api/snapshots.rs"]
mod snapshots;
#[path = "../api/transaction_events.rs"]
mod transaction_events;
#[path = "../api/transaction_seals.rs"]
mod transaction_seals;
#[path = "../api/transactions.rs"]
mod transactions;
