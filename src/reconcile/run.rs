//! `wallet-ledger reconcile`: one run, from the settlement file to the stored run and its
//! reports. The same provider, file content and options make the same key; a second run of
//! the same key answers the stored one unless `--force`.

use super::invariants;
use super::matching::{self, Window};
use super::model::{EXCEPTION_CODES, RunReport, Summary};
use super::report;
use super::settlement::{self, Columns};
use crate::config::{MAX_LISTED_MATCHES, ReconcileArgs};
use anyhow::Context;
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};
use std::io::Read;
use std::time::Instant;
use uuid::Uuid;

/// Runs a reconciliation and writes its reports; returns whether it was clean.
pub async fn run(args: ReconcileArgs) -> anyhow::Result<bool> {
    if !crate::ledger::ids::is_valid_provider(&args.provider) {
        anyhow::bail!(
            "--provider {:?}: expected 1-64 of [A-Za-z0-9._@-]",
            args.provider
        );
    }
    let columns = Columns::new(&args.columns).map_err(anyhow::Error::msg)?;
    let options = options(&args, &columns);
    let key = run_key(&args.provider, &options, &args.settlement)?;
    let pool = crate::db::connect_and_migrate(&args.database).await?;

    // A dry run always compares afresh (and stores nothing).
    let stored = if args.force || args.dry_run {
        None
    } else {
        stored_run(&pool, &key).await?
    };
    let report = match stored {
        Some(report) => {
            eprintln!(
                "reconcile: provider {}, this file and these options were reconciled as run {} on {}; \
                 its stored result follows (--force runs again)",
                report.provider, report.id, report.created_at
            );
            report
        }
        None => reconcile(&pool, &args, &columns, options, key).await?,
    };
    pool.close().await;

    let written = report::write_all(&report, &args.out, &args.format)
        .with_context(|| format!("writing reports to {}", args.out.display()))?;
    let summary = &report.summary;
    let exceptions: i64 = summary.exceptions.values().sum();
    println!(
        "reconcile {}: run {}{}: {} file rows ({} parsed), {} ledger payments, {} matched, {} exceptions, {} invariant findings",
        report.provider,
        report.id,
        if args.dry_run {
            " (dry run, not stored)"
        } else {
            ""
        },
        summary.file_rows,
        summary.parsed_rows,
        summary.ledger_payments,
        summary.matched,
        exceptions,
        summary.invariant_findings,
    );
    for (code, count) in summary.exceptions.iter().filter(|(_, c)| **c > 0) {
        println!("  {code}: {count}");
    }
    for path in written {
        println!("  wrote {}", path.display());
    }
    Ok(report.is_clean())
}

/// Everything that changes what a run finds, in a fixed order (it is part of the run key).
fn options(args: &ReconcileArgs, columns: &Columns) -> Value {
    json!({
        "from": args.from,
        "to": args.to,
        "settlement_lag_hours": args.settlement_lag_hours,
        "date_tolerance_hours": args.date_tolerance_hours,
        "amount_tolerance": args.amount_tolerance.to_string(),
        "columns": columns.as_map(),
    })
}

/// SHA-256 over the provider, the options and the file's bytes (read in chunks).
fn run_key(provider: &str, options: &Value, path: &std::path::Path) -> anyhow::Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    hasher.update(provider.as_bytes());
    hasher.update(b"\n");
    hasher.update(options.to_string().as_bytes());
    hasher.update(b"\n");
    let mut buffer = vec![0; 1 << 16];
    loop {
        let n = file
            .read(&mut buffer)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

async fn stored_run(pool: &PgPool, key: &str) -> anyhow::Result<Option<RunReport>> {
    let report = sqlx::query_scalar!(
        "select report from reconciliation_runs where key = $1 order by created_at desc limit 1",
        key
    )
    .fetch_optional(pool)
    .await?;
    Ok(report.map(serde_json::from_value).transpose()?)
}

/// Imports the file, matches it, checks the invariants, and stores the run, all in one
/// database transaction (rolled back for `--dry-run`).
async fn reconcile(
    pool: &PgPool,
    args: &ReconcileArgs,
    columns: &Columns,
    options: Value,
    key: String,
) -> anyhow::Result<RunReport> {
    let id = Uuid::new_v4();
    // The invariants read the whole ledger in their own snapshot, on their own connection,
    // while the file is imported and matched on another: two PostgreSQL backends, so both
    // cores work (each phase alone is one backend, one core).
    let hold_grace =
        TimeDelta::milliseconds(i64::try_from(args.hold_grace_ms).unwrap_or(i64::MAX / 1_000));
    let invariants = async {
        let started = Instant::now();
        let findings = invariants::check(&mut *pool.acquire().await?, hold_grace).await?;
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            findings = findings.len(),
            "reconcile: ledger invariants checked"
        );
        Ok::<_, anyhow::Error>(findings)
    };
    let compared = async {
        let mut tx = pool.begin().await?;
        crate::db::tune_for_batch_job(&mut tx).await?;
        let started = Instant::now();
        let imported = settlement::import(&mut tx, id, &args.settlement, columns).await?;
        // The staging table was empty a moment ago: without fresh statistics the planner
        // takes a million lines for a few and joins them row by row. Only the table's owner
        // may analyze it; for another role PostgreSQL warns and the plans stay as they were.
        sqlx::query("analyze settlement_lines")
            .execute(&mut *tx)
            .await?;
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            rows = imported.rows,
            "reconcile: file imported"
        );
        let (file_from, file_to) = matching::file_period(&mut tx, id).await?;
        let now = Utc::now();
        let from = args.from.or(file_from).unwrap_or(now);
        let to = args.to.or(file_to).unwrap_or(now);
        // A provider settles a payment `lag` after it was paid: the file's period, shifted
        // back by the lag, is when the ledger took the payments it should list (widened at
        // the start by the date tolerance, for payments that settle late).
        let lag = TimeDelta::hours(args.settlement_lag_hours.into());
        let window = Window {
            clearing_accounts: clearing_accounts(&mut tx, &args.provider).await?,
            from: from - lag - TimeDelta::hours(args.date_tolerance_hours.into()),
            to: to - lag,
            amount_tolerance: args.amount_tolerance,
        };
        let started = Instant::now();
        let matching = matching::compare(&mut tx, id, &window, MAX_LISTED_MATCHES).await?;
        let payouts = matching::payouts(&mut tx, id, &window.clearing_accounts).await?;
        let totals = matching::totals(&mut tx, id).await?;
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            matched = matching.matched_count,
            "reconcile: file matched with the ledger"
        );
        Ok::<_, anyhow::Error>((tx, now, window, imported, matching, payouts, totals))
    };
    let (invariants, (mut tx, now, window, imported, matching, payouts, totals)) =
        tokio::try_join!(invariants, compared)?;

    let mut exceptions = imported.unparsable;
    exceptions.extend(matching.exceptions);
    let counts = EXCEPTION_CODES
        .iter()
        .map(|code| {
            (
                (*code).to_owned(),
                exceptions.iter().filter(|e| e.code == *code).count() as i64,
            )
        })
        .collect();
    let report = RunReport {
        id,
        provider: args.provider.clone(),
        key,
        created_at: now,
        options,
        summary: Summary {
            provider: args.provider.clone(),
            period_from: Some(window.from),
            period_to: Some(window.to),
            file_rows: imported.rows,
            parsed_rows: imported.parsed,
            ledger_payments: matching.ledger_payments,
            matched: matching.matched_count,
            exceptions: counts,
            totals,
            invariant_findings: invariants.len() as i64,
        },
        exceptions,
        matched: matching.matched,
        payouts,
        invariants,
    };
    sqlx::query!("delete from settlement_lines where run_id = $1", id)
        .execute(&mut *tx)
        .await?;
    if args.dry_run {
        tx.rollback().await?;
    } else {
        store(&mut tx, &report).await?;
        tx.commit().await?;
    }
    Ok(report)
}

async fn clearing_accounts(
    conn: &mut PgConnection,
    provider: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "select id from accounts
         where type = 'system' and split_part(id, ':', 1) = 'clearing' and split_part(id, ':', 2) = $1",
        provider
    )
    .fetch_all(conn)
    .await
}

async fn store(conn: &mut PgConnection, report: &RunReport) -> anyhow::Result<()> {
    sqlx::query!(
        "insert into reconciliation_runs (id, key, provider, options, clean, report, created_at)
         values ($1, $2, $3, $4, $5, $6, $7)",
        report.id,
        report.key,
        report.provider,
        report.options,
        report.is_clean(),
        serde_json::to_value(report)?,
        report.created_at,
    )
    .execute(conn)
    .await?;
    Ok(())
}
