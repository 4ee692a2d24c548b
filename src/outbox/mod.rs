//! The outbox: events the ledger wrote in the same transaction as its changes
//! (`ledger::events`), sent to webhook subscribers by a dispatcher with the event id as the
//! receiver's idempotency key (`webhook-id` and `Idempotency-Key`).
//!
//! - `signing`: the Standard Webhooks signature;
//! - `address`: which addresses webhooks may reach (public ones, or hosts the operator lists);
//! - `subscriptions`: webhook subscriptions (create, read, delete, rotate the secret) and the
//!   URL policy;
//! - `deliveries`: fan-out of events into deliveries, claiming, recording results, listing,
//!   redelivering;
//! - `events`: a transaction's events with their deliveries, for the API and the console;
//! - `dispatcher`: the worker that sends, inside `serve` or as `wallet-ledger outbox`;
//! - `stream`: the optional outbound stream (`--events-stream`);
//! - `purge`: retention.

pub mod address;
pub mod deliveries;
pub mod dispatcher;
pub mod events;
pub mod purge;
pub mod signing;
pub mod stream;
pub mod subscriptions;
