//! Integration tests against the real PostgreSQL: one crate root (one test binary, one link)
//! with a module per capability. Each test gets a fresh database.

mod backend;
mod common;
use test_support::stream_support;

mod accounts;
mod bad_input;
mod balance_range;
mod balances;
mod batch;
mod bench;
mod cli;
mod console;
mod consumer_apply;
mod consumer_chaos;
mod consumer_hostile;
mod consumer_model;
mod consumer_partitions;
mod consumer_stream;
mod containers;
mod contract;
mod dispatch;
mod doc_examples;
mod effective;
mod exchange;
mod faults;
mod fuzz;
mod group_commit;
mod history;
mod holds;
mod idempotency;
mod model;
mod openapi;
mod operations_doc;
mod plans;
mod reconcile;
mod reversals;
mod schema;
mod search;
mod search_plans;
mod security;
mod snapshots;
mod transactions;
mod transport;
mod verify;
mod webhooks;
