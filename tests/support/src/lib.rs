//! What the test binaries share (tests/api, tests/citus, tests/ha): the per-test database and
//! router (`common`), the backend that says where databases live (`backend`), and the stream
//! consumer's processes and reads (`stream_support`). A library rather than files included by
//! `#[path]`, so each binary uses what it needs without `dead_code` allowances.

pub mod backend;
pub mod common;
pub mod stream_support;

pub use backend::{Backend, Plain};
pub use common::TestApp;
