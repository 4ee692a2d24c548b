//! `wallet-ledger verify`: runs the invariant checks and reports them, for people (text) or
//! machines (JSON). Exit code 0 when every check passes, 1 when any finds something.

use super::invariants::{self, Check, Finding};
use crate::ledger::store::Store;
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct VerifySettings {
    pub database: crate::db::DatabaseSettings,
    /// How long past its expiry a hold may stay pending before it is a finding.
    pub hold_grace_ms: u64,
    /// The report as JSON instead of text.
    pub json: bool,
    /// Where the consumer's dead letters are counted (`<stream>.dlq`).
    pub redis: crate::broker::RedisSettings,
    pub stream: crate::consumer::stream::StreamSettings,
}

/// Returns whether the ledger is clean.
pub async fn run(args: VerifySettings) -> anyhow::Result<bool> {
    let database = crate::db::open(&args.database, false).await?;
    let (pool, store) = (database.pool.clone(), Store::of(&database));
    let mut conn = pool.acquire().await?;
    let hold_grace = invariants::hold_grace(args.hold_grace_ms);
    let findings = invariants::check(&mut store.on(&mut conn), hold_grace).await?;
    let (dead_deliveries, pending_deliveries) =
        crate::outbox::deliveries::counts(&mut conn).await?;
    drop(conn);
    pool.close().await;
    let dead_letters_stream = args.stream.dead_letters();
    let dead_letters = count_dead_letters(&args.redis.url, &dead_letters_stream).await;
    let mut report = Report::new(findings);
    report.failures = Failures {
        dead_letters_stream,
        dead_letters,
        dead_deliveries,
        pending_deliveries,
    };
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        report.text()
    };
    // A reader that goes away (`verify | head -1`) is not an error: the exit code still says
    // whether the books are clean.
    let mut stdout = std::io::stdout().lock();
    match std::io::Write::write_all(&mut stdout, text.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut stdout))
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => {
            other.map_err(|e| anyhow::anyhow!("writing the report to standard output: {e}"))?
        }
    }
    Ok(report.clean)
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub clean: bool,
    pub checks: Vec<CheckResult>,
    /// Work that failed for good and waits for an operator. Counted, not a finding: the books
    /// can balance while a dead letter waits for a replay.
    pub failures: Failures,
}

#[derive(Debug, Default, Serialize)]
pub struct Failures {
    pub dead_letters_stream: String,
    /// `None` when the broker could not be asked.
    pub dead_letters: Option<u64>,
    pub dead_deliveries: i64,
    pub pending_deliveries: i64,
}

/// The length of the dead-letter stream, or `None` (logged) when Redis does not answer.
async fn count_dead_letters(url: &str, stream: &str) -> Option<u64> {
    let asked = async {
        let mut conn = crate::broker::connect(url).await?;
        let length = redis::cmd("XLEN")
            .arg(stream)
            .query_async::<u64>(&mut conn)
            .await?;
        anyhow::Ok(length)
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), asked).await {
        Ok(Ok(n)) => Some(n),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot count dead letters");
            None
        }
        Err(_) => {
            tracing::warn!("cannot count dead letters: Redis did not answer in 5 s");
            None
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CheckResult {
    pub check: Check,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn new(findings: Vec<Finding>) -> Report {
        let checks: Vec<CheckResult> = Check::ALL
            .into_iter()
            .map(|check| CheckResult {
                check,
                findings: findings
                    .iter()
                    .filter(|f| f.check == check)
                    .cloned()
                    .collect(),
            })
            .collect();
        Report {
            clean: findings.is_empty(),
            checks,
            failures: Failures::default(),
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let verdict = if c.findings.is_empty() {
                "ok".to_owned()
            } else {
                format!("FAILED ({})", c.findings.len())
            };
            out.push_str(&format!("{:<24} {verdict}\n", c.check));
            for f in &c.findings {
                let about =
                    json!({"account": f.account, "entry": f.entry, "transaction": f.transaction});
                let about: Vec<String> = about
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| {
                        format!(
                            "{k} {}",
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                        )
                    })
                    .collect();
                if about.is_empty() {
                    out.push_str(&format!("  - {}\n", f.detail));
                } else {
                    out.push_str(&format!("  - {}: {}\n", about.join(", "), f.detail));
                }
            }
        }
        let f = &self.failures;
        let letters = f
            .dead_letters
            .map_or("unknown (Redis unreachable)".to_owned(), |n| n.to_string());
        out.push_str(&format!(
            "{:<24} {letters} in {}\n",
            "dead letters", f.dead_letters_stream
        ));
        out.push_str(&format!(
            "{:<24} {} ({} pending)\n",
            "dead deliveries", f.dead_deliveries, f.pending_deliveries
        ));
        let total: usize = self.checks.iter().map(|c| c.findings.len()).sum();
        out.push_str(&if self.clean {
            "verify: the ledger is consistent\n".to_owned()
        } else {
            format!("verify: {total} finding(s)\n")
        });
        out
    }
}
