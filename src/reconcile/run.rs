//! `wallet-ledger reconcile`: one run, from the settlement file to the stored run and its
//! reports. The same provider, file content and options make the same key; a second run of
//! the same key answers the stored one unless `--force`.

use super::exceptions::{Collected, ExceptionSink};
use super::invariants::{self, Finding};
use super::matching::{self, Window};
use super::model::{CurrencyTotals, Payout, RunReport, Summary};
use super::report;
use super::settlement::{self, Columns};
use crate::ledger::store::Store;
use anyhow::Context;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use std::io::{Read, Write};
use std::time::Instant;
use uuid::Uuid;

/// Matches listed in a reconciliation report (every match is counted).
pub const MAX_LISTED_MATCHES: usize = 10_000;

/// Exceptions of each code kept in a reconciliation run and its HTML and JSON reports (every
/// exception is counted, and exceptions.csv of a fresh run lists them all).
pub const MAX_LISTED_EXCEPTIONS_PER_CODE: usize = 1_000;

/// Payouts listed in a reconciliation report, the disagreeing ones first (every payout is
/// counted).
pub const MAX_LISTED_PAYOUTS: i64 = 10_000;

/// One reconciliation's inputs (the flags of `reconcile`).
#[derive(Debug, Clone)]
pub struct ReconcileSettings {
    pub database: crate::db::DatabaseSettings,
    /// The provider whose clearing accounts (`clearing:{provider}:*`) are compared.
    pub provider: String,
    /// The provider's settlement file (CSV with a header row).
    pub settlement: std::path::PathBuf,
    /// Where the reports are written.
    pub out: std::path::PathBuf,
    pub format: Vec<report::Format>,
    /// The settlement period; by default the file's first and last `settled_at`.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Ledger payments younger than this at the period's end are not expected in the file yet.
    pub settlement_lag_hours: u32,
    /// Ledger payments this much before the period may still settle in it.
    pub date_tolerance_hours: u32,
    /// Amounts differing by at most this much (major units) are equal.
    pub amount_tolerance: rust_decimal::Decimal,
    /// `field=Header` mappings.
    pub columns: Vec<String>,
    /// Compare and report, but store nothing.
    pub dry_run: bool,
    /// Run again even if the same provider, file and options were reconciled before.
    pub force: bool,
    /// How long past its expiry a hold may stay pending before the invariant check flags it.
    pub hold_grace_ms: u64,
}

/// A run ready to meet the database: its flags checked, its file spooled and keyed.
pub struct Prepared {
    columns: Columns,
    options: Value,
    spooled: Spooled,
}

/// Checks the flags and reads the settlement file once: copied aside while it is hashed, and
/// the copy imported, so a pipe (`--settlement /dev/stdin`) works and a file that changes
/// meanwhile cannot be stored under the other content's key.
pub fn prepare(args: &ReconcileSettings) -> anyhow::Result<Prepared> {
    if !crate::ledger::ids::is_valid_provider(&args.provider) {
        anyhow::bail!(
            "--provider {:?}: expected 1-64 of [A-Za-z0-9._@-]",
            args.provider
        );
    }
    check_flags(args).map_err(anyhow::Error::msg)?;
    let columns = Columns::new(&args.columns).map_err(anyhow::Error::msg)?;
    let options = options(args, &columns);
    let spooled = spool(&args.provider, &options, &args.settlement)?;
    Ok(Prepared {
        columns,
        options,
        spooled,
    })
}

/// The run of this file with these options: the stored one (a dry run returns it too, storing
/// nothing of its own), or, with `--force` or none stored, a fresh one; with the exceptions.csv
/// it streamed, if any.
pub async fn find_or_reconcile(
    store: &Store,
    args: &ReconcileSettings,
    prepared: &Prepared,
) -> anyhow::Result<(RunReport, Option<std::path::PathBuf>)> {
    let key = prepared.spooled.key.clone();
    let stored = if args.force {
        None
    } else {
        stored_run(store.pool(), &key).await?
    };
    Ok(match stored {
        Some(report) => {
            eprintln!(
                "reconcile: provider {}, this file and these options were reconciled as run {} on {}; \
                 its stored result follows (--force runs again)",
                report.provider, report.id, report.created_at
            );
            (report, None)
        }
        None => {
            let (path, columns) = (&prepared.spooled.path, &prepared.columns);
            reconcile(store, args, path, columns, prepared.options.clone(), key).await?
        }
    })
}

/// Writes the reports and prints the summary; true when the run is clean.
pub fn publish(
    args: &ReconcileSettings,
    report: &RunReport,
    streamed_csv: Option<&std::path::Path>,
) -> anyhow::Result<bool> {
    let written = report::write_all(report, &args.out, &args.format, streamed_csv)
        .with_context(|| format!("writing reports to {}", args.out.display()))?;
    // A reader that goes away (`reconcile ... | head -1`) does not make the run fail: the run
    // is stored and the reports written; its exit code still says what it found.
    match print_summary(
        &mut std::io::stdout().lock(),
        report,
        args.dry_run,
        &written,
    ) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("writing the summary to standard output")?,
    }
    Ok(report.is_clean())
}

fn print_summary(
    out: &mut impl Write,
    report: &RunReport,
    dry_run: bool,
    written: &[std::path::PathBuf],
) -> std::io::Result<()> {
    let summary = &report.summary;
    writeln!(out, "{}", summary_line(report, dry_run))?;
    for (code, count) in summary.exceptions.iter().filter(|(_, c)| **c > 0) {
        writeln!(out, "  {code}: {count}")?;
    }
    for path in written {
        writeln!(out, "  wrote {}", path.display())?;
    }
    out.flush()
}

/// The summary's first line: what the file held and what became of it, then, apart, how many
/// ledger payments the window expected (the two are counted on different sides: a line is
/// matched whatever the window, a payment is expected only inside it).
fn summary_line(report: &RunReport, dry_run: bool) -> String {
    let summary = &report.summary;
    let exceptions: i64 = summary.exceptions.values().sum();
    let stamp = |t: Option<DateTime<Utc>>| {
        t.map_or_else(
            || "?".to_owned(),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
    };
    format!(
        "reconcile {}: run {}{}: {} file rows ({} parsed): {} matched, {} exceptions; \
         {} ledger payments expected, posted {} to {}; {} invariant findings",
        report.provider,
        report.id,
        if dry_run {
            " (dry run, not stored)"
        } else {
            ""
        },
        summary.file_rows,
        summary.parsed_rows,
        summary.matched,
        exceptions,
        summary.ledger_payments,
        stamp(summary.period_from),
        stamp(summary.period_to),
        summary.invariant_findings,
    )
}

/// Refuses the flags no run can use, with the reason (exit 2), before anything is read.
fn check_flags(args: &ReconcileSettings) -> Result<(), String> {
    if args.amount_tolerance.is_sign_negative() && !args.amount_tolerance.is_zero() {
        return Err(format!(
            "--amount-tolerance {}: must not be negative",
            args.amount_tolerance
        ));
    }
    if let (Some(from), Some(to)) = (args.from, args.to) {
        window_bounds(
            from,
            to,
            args.settlement_lag_hours,
            args.date_tolerance_hours,
        )?;
    }
    Ok(())
}

/// The earliest moment PostgreSQL's `timestamptz` holds (4713 BC), with a day to spare.
fn earliest_storable() -> DateTime<Utc> {
    chrono::NaiveDate::from_ymd_opt(-4712, 1, 2)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The ledger window of the settlement period `[from, to]`: shifted back by the settlement
/// lag and widened at its start by the date tolerance (see docs/reconciliation.md). An
/// inverted period, or one that the flags push out of the range of dates the ledger can hold,
/// is refused with the reason.
pub fn window_bounds(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    settlement_lag_hours: u32,
    date_tolerance_hours: u32,
) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    if from > to {
        return Err(format!(
            "the settlement period is inverted: it starts at {} (--from, or the file's first \
             settled_at) after it ends at {} (--to, or the file's last settled_at)",
            from.to_rfc3339(),
            to.to_rfc3339()
        ));
    }
    let hours = |h: u32| TimeDelta::try_hours(h.into());
    let out_of_range = || {
        format!(
            "--settlement-lag-hours {settlement_lag_hours} and --date-tolerance-hours \
             {date_tolerance_hours} move the window before {}, the earliest time the ledger \
             can hold",
            earliest_storable().date_naive()
        )
    };
    let start = hours(settlement_lag_hours)
        .zip(hours(date_tolerance_hours))
        .and_then(|(lag, tolerance)| from.checked_sub_signed(lag)?.checked_sub_signed(tolerance))
        .filter(|t| *t >= earliest_storable())
        .ok_or_else(out_of_range)?;
    let end = hours(settlement_lag_hours)
        .and_then(|lag| to.checked_sub_signed(lag))
        .filter(|t| *t >= earliest_storable())
        .ok_or_else(out_of_range)?;
    Ok((start, end))
}

/// The settlement file, copied once to a private file while its run key was computed.
/// Removed on drop.
struct Spooled {
    path: std::path::PathBuf,
    key: String,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads `source` once: its bytes go to a private copy (in the temporary directory,
/// `TMPDIR`) and into the run key, SHA-256 over the provider, the options and the bytes.
fn spool(provider: &str, options: &Value, source: &std::path::Path) -> anyhow::Result<Spooled> {
    let mut file =
        std::fs::File::open(source).with_context(|| format!("opening {}", source.display()))?;
    let path = std::env::temp_dir().join(format!(
        "wallet-ledger-settlement-{}.csv",
        Uuid::new_v4().simple()
    ));
    let mut copy = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let mut spooled = Spooled {
        path,
        key: String::new(),
    };
    let mut hasher = Sha256::new();
    hasher.update(provider.as_bytes());
    hasher.update(b"\n");
    hasher.update(options.to_string().as_bytes());
    hasher.update(b"\n");
    let mut buffer = vec![0; 1 << 16];
    loop {
        let n = match file.read(&mut buffer) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", source.display())),
        };
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        copy.write_all(&buffer[..n])
            .with_context(|| format!("writing {}", spooled.path.display()))?;
    }
    copy.flush()
        .with_context(|| format!("writing {}", spooled.path.display()))?;
    spooled.key = crate::hex::encode(&hasher.finalize());
    Ok(spooled)
}

/// Everything that changes what a run finds, in a fixed order (it is part of the run key).
fn options(args: &ReconcileSettings, columns: &Columns) -> Value {
    json!({
        "from": args.from,
        "to": args.to,
        "settlement_lag_hours": args.settlement_lag_hours,
        "date_tolerance_hours": args.date_tolerance_hours,
        "amount_tolerance": args.amount_tolerance.to_string(),
        "columns": columns.as_map(),
    })
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
    ledger: &Store,
    args: &ReconcileSettings,
    settlement_file: &std::path::Path,
    columns: &Columns,
    options: Value,
    key: String,
) -> anyhow::Result<(RunReport, Option<std::path::PathBuf>)> {
    let id = Uuid::new_v4();
    let mut sink = exception_sink(args)?;
    // The invariants read the whole ledger in their own snapshot, on their own connection,
    // while the file is imported and matched on another: two PostgreSQL backends, so both
    // cores work (each phase alone is one backend, one core).
    let invariants = check_invariants(ledger, args.hold_grace_ms);
    let compared = compare_file(ledger, args, id, settlement_file, columns, &mut sink);
    let (invariants, (tx, compared)) = tokio::try_join!(invariants, compared)?;
    let (collected, pending_csv) = sink.finish().context("writing exceptions.csv")?;
    let head = RunHead {
        id,
        provider: args.provider.clone(),
        key,
        options,
    };
    let report = run_report(head, compared, collected, invariants);
    finish(tx, &report, args.dry_run).await?;
    let full_csv = pending_csv.publish().context("naming exceptions.csv")?;
    Ok((report, full_csv))
}

/// Where the run's exceptions go. Every exception is counted and, for exceptions.csv, written
/// as it is found; only the first of each code are kept in memory, for the stored run and the
/// other reports.
fn exception_sink(args: &ReconcileSettings) -> anyhow::Result<ExceptionSink> {
    let full_csv = args
        .format
        .contains(&report::Format::Csv)
        .then(|| args.out.join(report::Format::Csv.file_name()));
    if full_csv.is_some() {
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("creating {}", args.out.display()))?;
    }
    ExceptionSink::new(MAX_LISTED_EXCEPTIONS_PER_CODE, full_csv.as_deref())
        .with_context(|| format!("writing exceptions.csv in {}", args.out.display()))
}

/// The ledger's invariant findings, read on a connection of their own.
async fn check_invariants(ledger: &Store, hold_grace_ms: u64) -> anyhow::Result<Vec<Finding>> {
    let hold_grace = invariants::hold_grace(hold_grace_ms);
    let started = Instant::now();
    let mut conn = ledger.pool().acquire().await?;
    let findings = invariants::check(&mut ledger.on(&mut conn), hold_grace).await?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        findings = findings.len(),
        "reconcile: ledger invariants checked"
    );
    Ok(findings)
}

/// What the file's side of a run found.
struct Compared {
    /// When the run started, as the run's `created_at`.
    now: DateTime<Utc>,
    window: Window,
    imported: settlement::Imported,
    matching: matching::Matching,
    /// The listed payouts and how many there are.
    payouts: (Vec<Payout>, i64),
    totals: Vec<CurrencyTotals>,
}

/// Imports the file and compares it with the ledger, in a transaction that is handed back
/// with what was found: the run is stored in it (the staged lines never outlive the run).
async fn compare_file(
    ledger: &Store,
    args: &ReconcileSettings,
    id: Uuid,
    settlement_file: &std::path::Path,
    columns: &Columns,
    sink: &mut ExceptionSink,
) -> anyhow::Result<(Transaction<'static, Postgres>, Compared)> {
    let mut tx = ledger.pool().begin().await?;
    crate::db::tune_for_batch_job(&mut tx).await?;
    let imported = import(&mut tx, id, settlement_file, columns, sink).await?;
    let (now, window) = window_of(&mut tx, args, id).await?;
    let started = Instant::now();
    let mut db = ledger.on(&mut tx);
    let matching = matching::compare(&mut db, id, &window, MAX_LISTED_MATCHES, sink).await?;
    let clearing = &window.clearing_accounts;
    let payouts = matching::payouts(&mut db, id, clearing, MAX_LISTED_PAYOUTS).await?;
    let totals = matching::totals(&mut tx, id).await?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        matched = matching.matched_count,
        "reconcile: file matched with the ledger"
    );
    let compared = Compared {
        now,
        window,
        imported,
        matching,
        payouts,
        totals,
    };
    Ok((tx, compared))
}

/// Stages the file's lines for run `id` and refreshes the staging table's statistics.
async fn import(
    tx: &mut PgConnection,
    id: Uuid,
    settlement_file: &std::path::Path,
    columns: &Columns,
    sink: &mut ExceptionSink,
) -> anyhow::Result<settlement::Imported> {
    let started = Instant::now();
    let imported = settlement::import(&mut *tx, id, settlement_file, columns, sink).await?;
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
    Ok(imported)
}

/// The run's instant and the ledger window its staged lines are compared over: the period
/// of the flags, else of the file, else the current time.
async fn window_of(
    tx: &mut PgConnection,
    args: &ReconcileSettings,
    id: Uuid,
) -> anyhow::Result<(DateTime<Utc>, Window)> {
    let (file_from, file_to) = matching::file_period(&mut *tx, id).await?;
    let now = Utc::now();
    let from = args.from.or(file_from).unwrap_or(now);
    let to = args.to.or(file_to).unwrap_or(now);
    // A provider settles a payment `lag` after it was paid: the file's period, shifted
    // back by the lag, is when the ledger took the payments it should list (widened at
    // the start by the date tolerance, for payments that settle late).
    let (window_from, window_to) = window_bounds(
        from,
        to,
        args.settlement_lag_hours,
        args.date_tolerance_hours,
    )
    .map_err(anyhow::Error::msg)?;
    let window = Window {
        clearing_accounts: clearing_accounts(tx, &args.provider).await?,
        from: window_from,
        to: window_to,
        amount_tolerance: args.amount_tolerance,
    };
    Ok((now, window))
}

/// What names a run: its id, its provider, its key and the options in that key.
struct RunHead {
    id: Uuid,
    provider: String,
    key: String,
    options: Value,
}

/// The run as every report shows it.
fn run_report(
    head: RunHead,
    compared: Compared,
    collected: Collected,
    invariants: Vec<Finding>,
) -> RunReport {
    let Compared {
        now,
        window,
        imported,
        matching,
        payouts: (payouts, payouts_total),
        totals,
    } = compared;
    RunReport {
        id: head.id,
        provider: head.provider.clone(),
        key: head.key,
        created_at: now,
        options: head.options,
        summary: Summary {
            provider: head.provider,
            period_from: Some(window.from),
            period_to: Some(window.to),
            file_rows: imported.rows,
            parsed_rows: imported.parsed,
            ledger_payments: matching.ledger_payments,
            matched: matching.matched_count,
            exceptions_listed: Some(collected.listed.len() as i64),
            exceptions: collected
                .counts
                .into_iter()
                .map(|(code, n)| (code.as_str().to_owned(), n))
                .collect(),
            payouts_total: Some(payouts_total),
            totals,
            invariant_findings: invariants.len() as i64,
        },
        exceptions: collected.listed,
        matched: matching.matched,
        payouts,
        invariants,
    }
}

/// Ends the run's transaction: the staged lines are deleted either way (they are scratch),
/// and the run is stored, unless this is a dry run, whose transaction rolls back.
async fn finish(
    mut tx: Transaction<'static, Postgres>,
    report: &RunReport,
    dry_run: bool,
) -> anyhow::Result<()> {
    sqlx::query!("delete from settlement_lines where run_id = $1", report.id)
        .execute(&mut *tx)
        .await?;
    if dry_run {
        tx.rollback().await?;
    } else {
        store(&mut tx, report).await?;
        tx.commit().await?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_window_is_the_period_shifted_back_by_the_lag_and_widened_by_the_tolerance() {
        assert_eq!(
            window_bounds(
                at("2026-11-30T00:00:00Z"),
                at("2026-12-01T00:00:00Z"),
                24,
                48
            ),
            Ok((at("2026-11-27T00:00:00Z"), at("2026-11-30T00:00:00Z")))
        );
    }

    #[test]
    fn the_summary_says_which_window_the_ledger_payments_were_expected_in() {
        let mut report = crate::reconcile::report::tests::sample();
        report.summary.ledger_payments = 0;
        report.summary.matched = 1;
        report.summary.period_from = Some(at("2026-11-29T00:00:00Z"));
        report.summary.period_to = Some(at("2026-11-30T00:00:00Z"));
        let line = summary_line(&report, false);
        assert!(
            line.contains(": 1 matched, ")
                && line.contains(
                    "0 ledger payments expected, posted 2026-11-29T00:00:00Z to 2026-11-30T00:00:00Z;"
                ),
            "{line}"
        );
    }

    #[test]
    fn an_inverted_period_is_refused() {
        let e = window_bounds(at("2026-12-02T00:00:00Z"), at("2026-12-01T00:00:00Z"), 0, 0)
            .unwrap_err();
        assert!(e.starts_with("the settlement period is inverted"), "{e}");
    }

    #[test]
    fn flags_that_push_the_window_out_of_range_are_refused_not_a_panic() {
        let (from, to) = (at("2026-11-30T00:00:00Z"), at("2026-12-01T00:00:00Z"));
        for (lag, tolerance) in [(u32::MAX, 0), (0, u32::MAX), (u32::MAX, u32::MAX)] {
            let e = window_bounds(from, to, lag, tolerance).unwrap_err();
            assert!(e.contains("the earliest time the ledger can hold"), "{e}");
        }
        // Near the start of the calendar, a modest lag is fine.
        assert!(window_bounds(at("0001-01-01T00:00:00Z"), to, 24, 24).is_ok());
    }
}
