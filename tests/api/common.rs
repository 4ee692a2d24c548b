//! The shared harness (tests/support: a fresh database per test, the real router driven
//! in-process, typed helpers) on this binary's backend, one PostgreSQL.

pub use test_support::common::*;

pub type TestApp = test_support::TestApp<crate::backend::Backend>;
