//! `wallet-ledger verify`: runs the invariant checks and reports them, for people (text) or
//! machines (JSON). Exit code 0 when every check passes, 1 when any finds something.

use super::invariants::{self, CHECKS, Finding};
use crate::config::VerifyArgs;
use serde::Serialize;
use serde_json::json;

/// Returns whether the ledger is clean.
pub async fn run(args: VerifyArgs) -> anyhow::Result<bool> {
    let pool = crate::db::connect(&args.database).await?;
    let findings = invariants::check(&mut *pool.acquire().await?, args.hold_grace()).await?;
    pool.close().await;
    let report = Report::new(findings);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(report.clean)
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub clean: bool,
    pub checks: Vec<CheckResult>,
}

#[derive(Debug, Serialize)]
pub struct CheckResult {
    pub check: &'static str,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn new(findings: Vec<Finding>) -> Report {
        let checks: Vec<CheckResult> = CHECKS
            .iter()
            .map(|&check| CheckResult {
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
        let total: usize = self.checks.iter().map(|c| c.findings.len()).sum();
        out.push_str(&if self.clean {
            "verify: the ledger is consistent\n".to_owned()
        } else {
            format!("verify: {total} finding(s)\n")
        });
        out
    }
}
