//! High availability against real engines: a pg_auto_failover group (a monitor, a primary and a
//! synchronous standby) and a Redis master with a replica and three Sentinels, started by
//! `scripts/ha.sh` on loopback ports of their own; primaries are lost to SIGKILL and the
//! engines, not this code, promote the standbys. Its own test binary (`cargo test --test ha`),
//! so the rest of the suite runs without these engines; the tests take turns, since each
//! topology alone keeps two cores busy.

#[allow(dead_code)]
#[path = "../api/backend.rs"]
mod backend;
#[allow(dead_code)]
#[path = "../api/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../api/stream_support.rs"]
mod stream_support;

mod client;
mod postgres;
mod redis_sentinel;
mod topology;

/// A measurement for the log: written to stderr directly, which the test harness does not
/// capture, so CI's log shows it for passing tests too.
fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "ha: {line}");
}
