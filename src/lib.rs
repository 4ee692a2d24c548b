//! wallet-ledger: a double-entry wallet ledger built on natural idempotency.
//!
//! Dependencies point one way: `http`, `consumer` and `reconcile` use `ledger`; the ledger
//! core knows nothing of HTTP, Redis or reports.

/// API keys: tokens, scopes and lookups (the command is `cli::api_key`).
pub mod api_keys;
/// `wallet-ledger bench`: the benchmark scenarios, each checking its own result.
pub mod bench;
/// Where Redis is: one server or a master behind Sentinels.
pub mod broker;
/// The command line: one file per subcommand with its flags and its `run`.
pub mod cli;
/// The stream consumer of payment events (Redis/Valkey Streams) and its tools.
pub mod consumer;
/// Creating, connecting to and migrating the database; `StoreError`, what is transient.
pub mod db;
/// Named sites where a test can make the process die (`WALLET_LEDGER_FAILPOINT`).
pub mod failpoint;
/// Lowercase hex of digests, links and roots.
pub mod hex;
/// The REST API: router, handlers, the one error type, extractors.
pub mod http;
/// Money, ids, journal rules and the SQL that writes and reads the ledger.
pub mod ledger;
/// Every metric described once; the series alerts watch started with each process.
pub mod metrics_catalog;
/// Events written with ledger changes, sent to webhooks (and optionally a stream) by a dispatcher.
pub mod outbox;
/// One invalid field of a request, found by the API or by the ledger.
pub mod problem;
/// The ledger's invariant checks (`verify`) and reconciliation with providers.
pub mod reconcile;
/// How a long-running command stops: SIGINT or SIGTERM cancels one token tree, in a set order.
pub mod shutdown;
/// The dashboard's volumes: a rollup of final minutes plus the live rest, never entries.
pub mod stats;
/// `/metrics` and `/readyz` for the workers.
pub mod telemetry;

/// Makes ring the process's TLS crypto provider (once; later calls do nothing). reqwest and
/// redis-rs take the process default, and only ring is compiled in.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An error's one-paragraph reason for stderr: each cause, outermost first, joined by ": ".
/// A PostgreSQL error shows its message and SQLSTATE, not the line of PostgreSQL's own source
/// that raised it (sqlx's " at line 1798"), which an operator would look for in their file.
pub fn error_reason(error: &anyhow::Error) -> String {
    let mut reasons = Vec::new();
    let mut causes = error.chain();
    while let Some(cause) = causes.next() {
        match cause.downcast_ref::<sqlx::Error>() {
            Some(sqlx::Error::Database(db)) => {
                reasons.push(match db.code() {
                    Some(code) => format!("{} (SQLSTATE {code})", db.message()),
                    None => db.message().to_owned(),
                });
                // Next in the chain is PostgreSQL's own error, said already.
                causes.next();
            }
            _ => reasons.push(cause.to_string()),
        }
    }
    reasons.join(": ")
}
