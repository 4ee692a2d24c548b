//! Every metric the processes export, described in one place, and the series an alert watches
//! started when a process starts. Why at start: a counter whose first series appears with its
//! first event makes `increase()` miss that event (there is no earlier sample to compare), and a
//! gauge set before the recorder existed is lost until its value next changes. So each
//! long-running process installs the recorder first, then calls [`start`], which registers
//! every counter at 0 for each value its labels can take (closed sets, never client input).

use crate::consumer::apply::Reason;
use metrics::{describe_counter, describe_gauge, describe_histogram};

/// The label of `wallet_ledger_background_permanent_errors_total` for `serve`'s checkpointer.
pub const CHECKPOINT_TASK: &str = "advance system-account checkpoints";
/// The same label for `serve`'s hold sweeper.
pub const HOLD_SWEEP_TASK: &str = "expire overdue holds";

/// What a process runs, and so which metrics it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `serve`: the API, its background steps and (unless disabled) a dispatcher.
    Api,
    /// `consume`: the stream consumer.
    Consumer,
    /// `outbox` (and `serve`): the webhook dispatcher.
    Dispatcher,
}

/// An unlabelled counter, or one with a label and every value that label can take.
type Counter = (
    &'static str,
    Option<(&'static str, &'static [&'static str])>,
);

const EVERY_PROCESS: &[Counter] = &[
    ("wallet_ledger_database_primary_switches_total", None),
    ("wallet_ledger_redis_master_switches_total", None),
];

const API: &[Counter] = &[
    (
        "wallet_ledger_background_permanent_errors_total",
        Some(("task", &[CHECKPOINT_TASK, HOLD_SWEEP_TASK])),
    ),
    ("wallet_ledger_checkpoint_failures_total", None),
    ("wallet_ledger_group_commit_lock_timeouts_total", None),
    ("wallet_ledger_group_commit_set_apart_total", None),
    ("wallet_ledger_replay_cache_hits_total", None),
    ("wallet_ledger_http_failover_retries_total", None),
    ("wallet_ledger_http_accept_errors_total", None),
    ("wallet_ledger_http_overflow_refusals_total", None),
    (
        "wallet_ledger_http_connections_cut_total",
        Some(("reason", &["header_timeout", "closing_timeout"])),
    ),
];

const DISPATCHER: &[Counter] = &[
    ("wallet_ledger_outbox_permanent_errors_total", None),
    (
        "wallet_ledger_webhook_attempts_total",
        Some(("outcome", &["delivered", "retried", "dead"])),
    ),
];

const CONSUMER: &[Counter] = &[
    ("wallet_ledger_consumer_negative_balances_total", None),
    ("wallet_ledger_consumer_workers_stopped_total", None),
    ("wallet_ledger_consumer_corrupt_rows_total", None),
    ("wallet_ledger_consumer_batch_splits_total", None),
    (
        "wallet_ledger_consumer_events_total",
        Some((
            "outcome",
            &["applied", "duplicate", "retried", "dead_lettered"],
        )),
    ),
];

/// Installs the recorder (if not yet) and starts every counter of `roles` at 0; an error costs
/// the metrics only, so it is logged, not returned.
pub fn start(roles: &[Role]) {
    if let Err(e) = crate::telemetry::recorder() {
        tracing::warn!(error = %e, "metrics are off");
        return;
    }
    let mut counters: Vec<&Counter> = EVERY_PROCESS.iter().collect();
    for role in roles {
        counters.extend(match role {
            Role::Api => API,
            Role::Consumer => CONSUMER,
            Role::Dispatcher => DISPATCHER,
        });
    }
    counters.into_iter().for_each(zero);
    if roles.contains(&Role::Consumer) {
        for reason in Reason::ALL {
            metrics::counter!("wallet_ledger_consumer_dead_letters_total", "reason" => reason.as_str())
                .increment(0);
        }
    }
}

/// Registers the counter's series at 0. `increment(0)`, not `absolute(0)`: a series already
/// counting keeps its count.
fn zero(counter: &Counter) {
    match counter {
        (name, None) => metrics::counter!(*name).increment(0),
        (name, Some((label, values))) => {
            for value in *values {
                metrics::counter!(*name, *label => *value).increment(0);
            }
        }
    }
}

/// The consumer's gauges before their first reading: the database was just opened, and "no
/// batch since start" is the heartbeat's first value (so the stalled alert can fire for a
/// consumer that never applies anything).
pub fn consumer_started(unix_now: f64) {
    metrics::gauge!("wallet_ledger_consumer_database_up").set(1.0);
    metrics::gauge!("wallet_ledger_consumer_last_batch_timestamp_seconds").set(unix_now);
}

/// Whether the (single) database host answers as a writable primary, for the gauge the
/// failover alert watches; with several hosts the primary tracker sets it.
pub fn primary_up(up: bool) {
    metrics::gauge!("wallet_ledger_database_primary_up").set(if up { 1.0 } else { 0.0 });
}

/// The help text of every metric, shown as `# HELP` by the exporter.
pub fn describe() {
    for (name, help) in COUNTER_HELP {
        describe_counter!(*name, *help);
    }
    for (name, help) in GAUGE_HELP {
        describe_gauge!(*name, *help);
    }
    for (name, help) in HISTOGRAM_HELP {
        describe_histogram!(*name, *help);
    }
}

const COUNTER_HELP: &[(&str, &str)] = &[
    (
        "wallet_ledger_http_requests_total",
        "Answers by method, route and status.",
    ),
    (
        "wallet_ledger_http_failover_retries_total",
        "Requests tried again after the primary moved.",
    ),
    (
        "wallet_ledger_http_accept_errors_total",
        "Failed accepts of connections.",
    ),
    (
        "wallet_ledger_http_overflow_refusals_total",
        "Requests refused past the connection limit.",
    ),
    (
        "wallet_ledger_http_connections_cut_total",
        "Connections cut, by reason.",
    ),
    (
        "wallet_ledger_background_permanent_errors_total",
        "Background steps failing for good, by task.",
    ),
    (
        "wallet_ledger_checkpoint_failures_total",
        "System-account checkpoints skipped.",
    ),
    (
        "wallet_ledger_group_commit_lock_timeouts_total",
        "Groups that waited out the lock timeout.",
    ),
    (
        "wallet_ledger_group_commit_set_apart_total",
        "Creates written apart from a group.",
    ),
    (
        "wallet_ledger_replay_cache_hits_total",
        "Retried creates answered from memory.",
    ),
    (
        "wallet_ledger_outbox_permanent_errors_total",
        "Dispatcher failures no retry mends.",
    ),
    (
        "wallet_ledger_webhook_attempts_total",
        "Webhook sends, by outcome.",
    ),
    (
        "wallet_ledger_consumer_events_total",
        "Stream events, by outcome.",
    ),
    (
        "wallet_ledger_consumer_dead_letters_total",
        "Events dead-lettered, by reason.",
    ),
    (
        "wallet_ledger_consumer_negative_balances_total",
        "Refunds that took a wallet below zero.",
    ),
    (
        "wallet_ledger_consumer_workers_stopped_total",
        "Consumer workers stopped for good.",
    ),
    (
        "wallet_ledger_consumer_corrupt_rows_total",
        "Corrupt stored rows met by the consumer.",
    ),
    (
        "wallet_ledger_consumer_batch_splits_total",
        "Batches split to isolate a failing event.",
    ),
    (
        "wallet_ledger_database_primary_switches_total",
        "Moves of the PostgreSQL primary.",
    ),
    (
        "wallet_ledger_redis_master_switches_total",
        "Moves of the Redis master.",
    ),
];

const GAUGE_HELP: &[(&str, &str)] = &[
    (
        "wallet_ledger_database_synchronous_standby",
        "1 when the primary has a synchronous standby.",
    ),
    (
        "wallet_ledger_database_primary_up",
        "1 when a host takes writes.",
    ),
    (
        "wallet_ledger_db_pool_connections",
        "Pooled connections, by state.",
    ),
    (
        "wallet_ledger_db_pool_max_connections",
        "The pool's size limit.",
    ),
    (
        "wallet_ledger_outbox_dead_deliveries",
        "Webhook deliveries given up.",
    ),
    (
        "wallet_ledger_outbox_pending_deliveries",
        "Webhook deliveries waiting.",
    ),
    (
        "wallet_ledger_events_stream_up",
        "1 when the outbound events stream takes events.",
    ),
    (
        "wallet_ledger_consumer_database_up",
        "1 when the consumer's database answers.",
    ),
    (
        "wallet_ledger_consumer_lag",
        "Events in the stream not yet delivered to the group.",
    ),
    (
        "wallet_ledger_consumer_pending",
        "Events delivered and not yet acknowledged.",
    ),
    (
        "wallet_ledger_consumer_last_batch_timestamp_seconds",
        "When a batch was last applied (or the consumer started).",
    ),
];

const HISTOGRAM_HELP: &[(&str, &str)] = &[
    (
        "wallet_ledger_http_request_duration_seconds",
        "Request latency by method and route.",
    ),
    (
        "wallet_ledger_group_commit_size",
        "Creates per group commit.",
    ),
    ("wallet_ledger_key_lookup_size", "API keys read per lookup."),
    (
        "wallet_ledger_consumer_batch_size",
        "Events per consumer batch.",
    ),
    (
        "wallet_ledger_consumer_batch_duration_seconds",
        "Time to apply a consumer batch.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric the code records is described here, so a new one cannot skip the catalog.
    #[test]
    fn every_metric_in_the_code_is_described() {
        let described: Vec<&str> = [COUNTER_HELP, GAUGE_HELP, HISTOGRAM_HELP]
            .concat()
            .iter()
            .map(|(name, _)| *name)
            .collect();
        let mut missing = Vec::new();
        for file in source_files(std::path::Path::new("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            for name in metric_names(&text) {
                if !described.contains(&name.as_str()) && !file.starts_with("src/bench") {
                    missing.push(format!("{name} ({})", file.display()));
                }
            }
        }
        assert!(missing.is_empty(), "not in the catalog: {missing:?}");
    }

    fn source_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(source_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
        out
    }

    /// The `"wallet_ledger_..."` string literals right after a `counter!`, `gauge!` or
    /// `histogram!` (on the same line or the next).
    fn metric_names(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        for macro_name in ["counter!(", "gauge!(", "histogram!("] {
            for (at, _) in text.match_indices(macro_name) {
                let rest = text[at + macro_name.len()..].trim_start();
                if let Some(name) = rest.strip_prefix("\"wallet_ledger_") {
                    let end = name.find('"').unwrap();
                    names.push(format!("wallet_ledger_{}", &name[..end]));
                }
            }
        }
        names
    }
}
