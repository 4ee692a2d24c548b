//! Rendering a reconciliation run: HTML for people, JSON for machines, CSV of exceptions.
//!
//! The HTML is one self-contained file (inline CSS and SVG, no script, nothing fetched), so it
//! can be mailed or archived as it is. Settlement files are untrusted input: every string that
//! reaches the HTML is escaped by the askama template `templates/report.html` (with [`escape`]'s
//! entities), and every CSV field through `csv_field`, which also
//! defuses spreadsheet formulas.

use super::model::{ExceptionCode, RunReport};
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// A report file `write_all` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `report.html`, for people.
    Html,
    /// `report.json`, for machines.
    Json,
    /// `exceptions.csv`, for spreadsheets.
    Csv,
}

impl Format {
    /// Every format, in the order `write_all` writes them.
    pub const ALL: &[Format] = &[Format::Html, Format::Json, Format::Csv];

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Html => "report.html",
            Format::Json => "report.json",
            Format::Csv => "exceptions.csv",
        }
    }

    pub fn render(self, report: &RunReport) -> String {
        match self {
            Format::Html => html(report),
            Format::Json => json(report),
            Format::Csv => exceptions_csv(report),
        }
    }
}

/// Writes the report in each format into `dir` (created if missing) and returns the paths
/// written, in the order asked (a format asked twice is written once).
///
/// `streamed_csv` is an exceptions.csv the run already wrote with every exception (see
/// `exceptions::ExceptionSink`): it is listed, not rewritten from the report's sample.
pub fn write_all(
    report: &RunReport,
    dir: &Path,
    formats: &[Format],
    streamed_csv: Option<&Path>,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::with_capacity(formats.len());
    for &format in formats {
        let path = dir.join(format.file_name());
        if written.contains(&path) {
            continue;
        }
        match streamed_csv {
            Some(streamed) if format == Format::Csv => written.push(streamed.to_owned()),
            _ => {
                std::fs::write(&path, format.render(report))?;
                written.push(path);
            }
        }
    }
    Ok(written)
}

/// The whole run as pretty JSON, newline-terminated.
pub fn json(report: &RunReport) -> String {
    let mut out = serde_json::to_string_pretty(report)
        .expect("a RunReport always serializes: plain data with string map keys");
    out.push('\n');
    out
}

/// The header of exceptions.csv, newline-terminated.
pub const CSV_HEADER: &str = "code,payment_id,external_ref,line,reasons\n";

/// The exceptions as CSV: a header, then one row per exception, reasons joined with `"; "`.
pub fn exceptions_csv(report: &RunReport) -> String {
    let mut out = String::from(CSV_HEADER);
    for e in &report.exceptions {
        out.push_str(&exception_csv_row(e));
    }
    out
}

/// One exception as a row of exceptions.csv, newline-terminated.
pub fn exception_csv_row(e: &super::model::Exception) -> String {
    let fields = [
        e.code.as_str().to_owned(),
        e.payment_id.map(|id| id.to_string()).unwrap_or_default(),
        e.external_ref.clone().unwrap_or_default(),
        e.line.map(|line| line.to_string()).unwrap_or_default(),
        e.reasons.join("; "),
    ];
    let row: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    let mut row = row.join(",");
    row.push('\n');
    row
}

/// One CSV field (RFC 4180 quoting), made inert for spreadsheets: a value a spreadsheet would
/// read as a formula (leading `=`, `+`, `-`, `@`, tab or CR) gets a leading `'`.
fn csv_field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if value.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// Escapes text for HTML content and (quoted) attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1 exception`, `2 exceptions`.
fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

fn timestamp(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The exceptions of each code, in `ExceptionCode::ALL` order (from the list itself, so the
/// chart, the total and the table always agree).
/// Each code's exact count (the summary's; the list may hold only the first of each code).
fn exception_counts(report: &RunReport) -> Vec<(ExceptionCode, usize)> {
    ExceptionCode::ALL
        .into_iter()
        .map(|code| {
            let listed = report.exceptions.iter().filter(|e| e.code == code).count();
            let counted = report
                .summary
                .exceptions
                .get(code.as_str())
                .and_then(|n| usize::try_from(*n).ok())
                .unwrap_or(0);
            (code, counted.max(listed))
        })
        .collect()
}

const STYLE: &str = r#"
:root { --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; --soft: #f8fafc; --accent: #1e40af;
  --bad: #b91c1c; --bad-bg: #fef2f2; --bad-line: #fecaca; --good: #15803d; --good-bg: #f0fdf4;
  --good-line: #bbf7d0; --bar: #dc6b2f; }
* { box-sizing: border-box; }
body { margin: 0; background: #f1f5f9; color: var(--ink);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 28px 32px 40px; }
h1 { font-size: 24px; line-height: 1.25; margin: 2px 0 4px; }
h2 { font-size: 16px; margin: 0 0 12px; }
h2 .n { color: var(--muted); font-weight: 500; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px; }
.eyebrow { margin: 0; text-transform: uppercase; letter-spacing: .08em; font-size: 11px; font-weight: 600; color: var(--muted); }
.meta { margin: 0; color: var(--muted); }
.meta code { color: var(--ink); }
header { display: flex; justify-content: space-between; align-items: flex-end; gap: 24px; margin-bottom: 16px; }
.status { border-radius: 8px; padding: 14px 18px; margin-bottom: 16px; font-size: 15px; border: 1px solid; }
.status strong { font-size: 17px; margin-right: 6px; }
.status.clean { background: var(--good-bg); border-color: var(--good-line); color: var(--good); }
.status.dirty { background: var(--bad-bg); border-color: var(--bad-line); color: var(--bad); }
.figures { display: grid; grid-template-columns: repeat(6, 1fr); gap: 12px; margin-bottom: 16px; }
.figure { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.figure .label { color: var(--muted); font-size: 12px; }
.figure .value { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums; line-height: 1.2; }
.figure .note { color: var(--muted); font-size: 12px; }
.figure.alert { border-color: var(--bad-line); background: var(--bad-bg); }
.figure.alert .value { color: var(--bad); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 18px 20px; margin-bottom: 16px; }
.row { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; }
.row > .card { margin-bottom: 16px; }
.scroll { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th { text-align: left; font-size: 11px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted);
  font-weight: 600; padding: 6px 10px; border-bottom: 1px solid var(--line); background: var(--soft); white-space: nowrap; }
td { padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
tbody tr:last-child td { border-bottom: 0; }
th.num, td.num { text-align: right; white-space: nowrap; }
td.wrap { overflow-wrap: anywhere; max-width: 240px; }
td.mono { white-space: nowrap; }
.reason { white-space: pre-wrap; overflow-wrap: anywhere; }
.reason + .reason { margin-top: 3px; padding-top: 3px; border-top: 1px dashed var(--line); }
.tag { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  background: #fff4ed; color: #9a3412; border: 1px solid #fed7aa; white-space: nowrap; }
.pill { display: inline-block; min-width: 38px; text-align: center; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 700; }
.pill.yes { background: var(--good-bg); color: var(--good); border: 1px solid var(--good-line); }
.pill.no { background: var(--bad-bg); color: var(--bad); border: 1px solid var(--bad-line); }
tr.disagree td { background: var(--bad-bg); }
.muted { color: var(--muted); }
.none { margin: 0; color: var(--good); font-weight: 600; }
.chart { display: block; max-width: 100%; height: auto; }
.chart .bar-label { font-size: 13px; fill: var(--ink); }
.chart .bar-count { font-size: 13px; font-weight: 700; fill: var(--ink); }
.chart .zero .bar-label, .chart .zero .bar-count { fill: var(--muted); font-weight: 400; }
.chart .track { fill: var(--soft); stroke: var(--line); }
.chart .fill { fill: var(--bar); }
.totals td:first-child { font-weight: 600; }
.period { margin: 0 0 14px; }
.period dd { font-weight: 600; }
details summary { cursor: pointer; color: var(--accent); font-weight: 600; margin: 4px 0 8px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
footer { color: var(--muted); font-size: 12px; margin-top: 8px; }
@media (max-width: 900px) { .figures { grid-template-columns: repeat(3, 1fr); } .row { grid-template-columns: 1fr; } }
@media print { body { background: #fff; } .card, .figure { break-inside: avoid; } }
"#;

/// askama's escaper for the report (see askama.toml): [`escape`]'s named entities.
#[derive(Debug, Clone, Copy)]
pub struct Html;

impl askama::filters::Escaper for Html {
    fn write_escaped_str<W: std::fmt::Write>(&self, mut dest: W, text: &str) -> std::fmt::Result {
        dest.write_str(&escape(text))
    }
}

/// The page `templates/report.html` renders: the run, and what the template cannot compute.
#[derive(askama::Template)]
#[template(path = "report.html")]
struct Page<'a> {
    r: &'a RunReport,
    s: &'a super::model::Summary,
    style: &'static str,
    date: String,
    created: String,
    /// What needs review (`2 exceptions and 1 ledger invariant finding`), or none: clean.
    needs_review: Option<String>,
    figures: Vec<Figure>,
    chart: Chart,
    period_from: String,
    period_to: String,
    n_exceptions: usize,
    max_listed_per_code: usize,
    payouts_note: String,
    n_matched: usize,
    matched_agree: String,
    matched_listed: String,
    max_listed_matches: usize,
    version: &'static str,
}

/// One of the headline figures.
struct Figure {
    label: &'static str,
    value: String,
    note: String,
    alert: bool,
}

/// The exceptions-by-category bar chart (inline SVG): its geometry, one bar per code, a zero
/// shown as an empty track.
struct Chart {
    width: usize,
    height: usize,
    label_right: usize,
    track_x: usize,
    track_w: usize,
    bar: usize,
    title: String,
    desc: String,
    bars: Vec<Bar>,
}

struct Bar {
    code: ExceptionCode,
    meaning: &'static str,
    n: usize,
    y: usize,
    mid: usize,
    width: usize,
    count_x: usize,
}

impl Chart {
    fn new(counts: &[(ExceptionCode, usize)]) -> Chart {
        const LABEL_RIGHT: usize = 160;
        const TRACK_X: usize = 172;
        const TRACK_W: usize = 360;
        const ROW: usize = 32;
        const BAR: usize = 20;
        let max = counts.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1);
        let total: usize = counts.iter().map(|&(_, n)| n).sum();
        let desc: Vec<String> = counts
            .iter()
            .map(|&(code, n)| format!("{code}: {n}"))
            .collect();
        let bars = counts.iter().enumerate().map(|(i, &(code, n))| {
            let y = 2 + i * ROW + (ROW - BAR) / 2;
            let width = if n == 0 {
                0
            } else {
                (n * TRACK_W / max).max(3)
            };
            Bar {
                code,
                meaning: code.meaning(),
                n,
                y,
                mid: y + BAR / 2,
                width,
                count_x: TRACK_X + width + 8,
            }
        });
        Chart {
            width: TRACK_X + TRACK_W + 44,
            height: ROW * counts.len() + 4,
            label_right: LABEL_RIGHT,
            track_x: TRACK_X,
            track_w: TRACK_W,
            bar: BAR,
            title: count(total, "exception", "exceptions"),
            desc: desc.join(", "),
            bars: bars.collect(),
        }
    }
}

/// The headline figures: file rows, parsed, ledger payments, matched, exceptions, findings.
fn figures(report: &RunReport, n_exceptions: usize) -> Vec<Figure> {
    let s = &report.summary;
    let unparsed = s.file_rows - s.parsed_rows;
    let n_findings = report.invariants.len();
    let figure = |label, value: String, note: &str, alert| Figure {
        label,
        value,
        note: note.to_owned(),
        alert,
    };
    let parsed_note = if unparsed > 0 {
        format!("{unparsed} unreadable")
    } else {
        "all lines".to_owned()
    };
    vec![
        figure("File rows", s.file_rows.to_string(), "data lines", false),
        figure(
            "Parsed",
            s.parsed_rows.to_string(),
            &parsed_note,
            unparsed > 0,
        ),
        figure(
            "Ledger payments",
            s.ledger_payments.to_string(),
            "in the period",
            false,
        ),
        figure(
            "Matched",
            s.matched.to_string(),
            "agree on both sides",
            false,
        ),
        figure(
            "Exceptions",
            n_exceptions.to_string(),
            "to review",
            n_exceptions > 0,
        ),
        figure(
            "Invariant findings",
            n_findings.to_string(),
            "ledger checks",
            n_findings > 0,
        ),
    ]
}

/// What a dirty run asks to review, or `None` for a clean run.
fn needs_review(report: &RunReport, n_exceptions: usize) -> Option<String> {
    if report.is_clean() {
        return None;
    }
    let n_findings = report.invariants.len();
    let mut parts = Vec::new();
    if n_exceptions > 0 {
        parts.push(count(n_exceptions, "exception", "exceptions"));
    }
    if n_findings > 0 {
        parts.push(count(
            n_findings,
            "ledger invariant finding",
            "ledger invariant findings",
        ));
    }
    Some(parts.join(" and "))
}

/// The payouts heading's note: how many agree, of how many listed and in all.
fn payouts_note(report: &RunReport) -> String {
    let agreeing = report.payouts.iter().filter(|p| p.agrees).count();
    match (report.payouts.len(), report.summary.payouts_total) {
        (0, _) => "(0)".to_owned(),
        (n, Some(total)) if (n as i64) < total => format!(
            "({total}; {agreeing} of the {n} listed, disagreeing first, agree with the ledger)"
        ),
        (n, _) => format!("({agreeing} of {n} agree with the ledger)"),
    }
}

/// The report as one self-contained HTML5 page.
pub fn html(report: &RunReport) -> String {
    use askama::Template as _;
    let s = &report.summary;
    let counts = exception_counts(report);
    let n_exceptions: usize = counts.iter().map(|(_, n)| n).sum();
    let period = |at: &Option<DateTime<Utc>>| at.as_ref().map_or_else(|| "—".to_owned(), timestamp);
    // Every match is counted; the list may be capped (MAX_LISTED_MATCHES).
    let n_matched = usize::try_from(s.matched).unwrap_or(report.matched.len());
    let page = Page {
        r: report,
        s,
        style: STYLE,
        date: report.created_at.format("%Y-%m-%d").to_string(),
        created: timestamp(&report.created_at),
        needs_review: needs_review(report, n_exceptions),
        figures: figures(report, n_exceptions),
        chart: Chart::new(&counts),
        period_from: period(&s.period_from),
        period_to: period(&s.period_to),
        n_exceptions,
        max_listed_per_code: super::run::MAX_LISTED_EXCEPTIONS_PER_CODE,
        payouts_note: payouts_note(report),
        n_matched,
        matched_agree: count(n_matched, "payment agrees", "payments agree"),
        matched_listed: count(report.matched.len(), "listed match", "listed matches"),
        max_listed_matches: super::run::MAX_LISTED_MATCHES,
        version: env!("CARGO_PKG_VERSION"),
    };
    let mut out = page
        .render()
        .expect("the report page renders: its values all display infallibly");
    out.push('\n'); // askama drops the template's final newline
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::reconcile::invariants::Finding;
    use crate::reconcile::model::{
        CurrencyTotals, Exception, Matched, Payout, ProviderStatus, Summary,
    };
    use chrono::TimeZone;
    use std::collections::BTreeMap;
    use uuid::Uuid;

    const HOSTILE_REF: &str = "=HYPERLINK(\"http://evil.example\",\"x\"),<script>alert(1)</script>";
    const HOSTILE_REASON: &str = "raw line: '<script>alert(1)</script>', \"quoted\"\nsecond line";

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(0x5f1c_2d3e_0000_4000_8000_0000_0000_0000 + n)
    }

    fn exception(
        code: ExceptionCode,
        payment: Option<u128>,
        external_ref: Option<&str>,
        line: Option<i64>,
        reasons: &[&str],
    ) -> Exception {
        Exception {
            code,
            payment_id: payment.map(id),
            external_ref: external_ref.map(Into::into),
            line,
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    /// A run with every exception code (amount mismatches twice), a hostile file line, a payout
    /// that disagrees and an invariant finding.
    pub(crate) fn sample() -> RunReport {
        let exceptions = sample_exceptions();
        let mut by_code: BTreeMap<String, i64> = ExceptionCode::ALL
            .iter()
            .map(|c| (c.as_str().to_owned(), 0))
            .collect();
        for e in &exceptions {
            *by_code.entry(e.code.as_str().to_owned()).or_default() += 1;
        }
        let matched = sample_matched();
        RunReport {
            id: Uuid::parse_str("0195a3c4-7e21-7b3d-9f10-3c5be0a4d8e2").unwrap(),
            provider: "acme-pay".into(),
            key: "9c2f4b1e8a7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170615e4d3".into(),
            created_at: Utc.with_ymd_and_hms(2025, 3, 6, 7, 30, 12).unwrap(),
            options: serde_json::json!({
                "settlement_lag_hours": 48,
                "columns": {"payment_id": "reference"},
            }),
            summary: Summary {
                provider: "acme-pay".into(),
                period_from: Some(Utc.with_ymd_and_hms(2025, 3, 1, 0, 0, 0).unwrap()),
                period_to: Some(Utc.with_ymd_and_hms(2025, 3, 5, 0, 0, 0).unwrap()),
                file_rows: 32,
                parsed_rows: 31,
                exceptions_listed: None,
                payouts_total: None,
                ledger_payments: 31,
                matched: 24,
                exceptions: by_code,
                totals: sample_totals(),
                invariant_findings: 1,
            },
            exceptions,
            matched,
            payouts: sample_payouts(),
            invariants: vec![Finding {
                check: crate::reconcile::invariants::Check::WalletChain,
                account: Some("wallet:cust_8841:EUR".into()),
                entry: Some(48213),
                transaction: None,
                detail: "running balance 12000 at sequence 7, but the entries sum to 11500".into(),
            }],
        }
    }

    /// Every exception code (amount mismatches twice), one from a hostile file line.
    fn sample_exceptions() -> Vec<Exception> {
        vec![
            exception(
                ExceptionCode::MissingInLedger,
                Some(101),
                Some("ch_3PqL8sAc91"),
                Some(14),
                &["not in the ledger: settled 120.00 EUR on 2025-03-03"],
            ),
            exception(
                ExceptionCode::MissingAtProvider,
                Some(102),
                Some("ch_3PqM02Bd44"),
                None,
                &["not in the file: settled 75.00 EUR in the ledger on 2025-03-04"],
            ),
            exception(
                ExceptionCode::AmountMismatch,
                Some(103),
                Some("ch_3PqN7fKe18"),
                Some(9),
                &["amount: ledger 50.00, provider 45.00"],
            ),
            exception(
                ExceptionCode::AmountMismatch,
                Some(104),
                Some("ch_3PqP1xLm73"),
                Some(17),
                &["amount: ledger 19.99, provider 19.90"],
            ),
            exception(
                ExceptionCode::CurrencyMismatch,
                Some(105),
                Some("ch_3PqQ5rTt02"),
                Some(21),
                &[
                    "currency: ledger EUR, provider USD",
                    "amount: ledger 30.00, provider 32.61",
                ],
            ),
            exception(
                ExceptionCode::StatusMismatch,
                Some(106),
                Some("ch_3PqR9wVb57"),
                Some(25),
                &["status: ledger settled, provider refunded"],
            ),
            exception(
                ExceptionCode::DuplicateInFile,
                Some(103),
                Some("ch_3PqN7fKe18"),
                Some(28),
                &["settled twice: also on line 9"],
            ),
            exception(
                ExceptionCode::UnparsableRow,
                None,
                Some(HOSTILE_REF),
                Some(31),
                &[
                    "amount: \"12.345\" has more decimals than EUR allows",
                    HOSTILE_REASON,
                ],
            ),
        ]
    }

    fn sample_matched() -> Vec<Matched> {
        (0..24)
            .map(|i| Matched {
                payment_id: id(1000 + i),
                external_ref: Some(format!("ch_3Pq{:06X}", 0x1a2b3 * (i + 7))),
                currency: if i % 4 == 0 { "USD" } else { "EUR" }.into(),
                amount: format!("{}.{:02}", 10 + i * 7 % 90, i * 13 % 100),
                amount_minor: i64::try_from((10 + i * 7 % 90) * 100 + i * 13 % 100).ok(),
                status: if i % 9 == 5 {
                    ProviderStatus::Refunded
                } else {
                    ProviderStatus::Settled
                },
            })
            .collect()
    }

    fn sample_totals() -> Vec<CurrencyTotals> {
        vec![
            CurrencyTotals {
                currency: "EUR".into(),
                gross: "1284.55".into(),
                fee: "37.25".into(),
                net: "1247.30".into(),
                gross_minor: Some(128455),
                fee_minor: Some(3725),
                net_minor: Some(124730),
            },
            CurrencyTotals {
                currency: "USD".into(),
                gross: "312.61".into(),
                fee: "9.38".into(),
                net: "303.23".into(),
                gross_minor: Some(31261),
                fee_minor: Some(938),
                net_minor: Some(30323),
            },
        ]
    }

    /// Three payouts, the second disagreeing with the ledger.
    fn sample_payouts() -> Vec<Payout> {
        vec![
            Payout {
                payout_ref: "po_1PqA2025-03-03".into(),
                currency: "EUR".into(),
                lines: 14,
                gross: "684.20".into(),
                fee: "19.84".into(),
                net: "664.36".into(),
                ledger_gross: "684.20".into(),
                gross_minor: Some(68420),
                fee_minor: Some(1984),
                net_minor: Some(66436),
                ledger_gross_minor: Some(68420),
                agrees: true,
            },
            Payout {
                payout_ref: "po_1PqB2025-03-04".into(),
                currency: "EUR".into(),
                lines: 12,
                gross: "600.35".into(),
                fee: "17.41".into(),
                net: "582.94".into(),
                ledger_gross: "605.35".into(),
                gross_minor: Some(60035),
                fee_minor: Some(1741),
                net_minor: Some(58294),
                ledger_gross_minor: Some(60535),
                agrees: false,
            },
            Payout {
                payout_ref: "po_1PqC2025-03-04".into(),
                currency: "USD".into(),
                lines: 5,
                gross: "312.61".into(),
                fee: "9.38".into(),
                net: "303.23".into(),
                ledger_gross: "312.61".into(),
                gross_minor: Some(31261),
                fee_minor: Some(938),
                net_minor: Some(30323),
                ledger_gross_minor: Some(31261),
                agrees: true,
            },
        ]
    }

    fn clean() -> RunReport {
        let mut report = sample();
        report.exceptions.clear();
        report.invariants.clear();
        report.payouts.retain(|p| p.agrees);
        report.summary.exceptions.values_mut().for_each(|n| *n = 0);
        report.summary.invariant_findings = 0;
        report
    }

    /// A small RFC 4180 reader: rows of fields, quotes and embedded line breaks honoured.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') if field.is_empty() => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        assert!(!quoted, "unterminated quoted field");
        assert!(
            field.is_empty() && row.is_empty(),
            "the last row lacks its newline"
        );
        rows
    }

    #[test]
    fn escape_covers_the_five_characters() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain — text"), "plain — text");
    }

    #[test]
    fn html_escapes_untrusted_text() {
        let html = html(&sample());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(
            !html.to_lowercase().contains("<script"),
            "no script element may get through"
        );
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("=HYPERLINK(&quot;http://evil.example&quot;,&quot;x&quot;)"));
        assert!(html.contains("raw line: &#39;&lt;script&gt;"));
        // Self-contained: nothing fetched.
        for external in ["<link", "src=", "@import", "url("] {
            assert!(
                !html.contains(external),
                "{external} in a self-contained report"
            );
        }
    }

    #[test]
    fn html_shows_a_bar_per_code_and_every_section() {
        let report = sample();
        let html = html(&report);
        let svg =
            &html[html.find("<svg").expect("an inline SVG chart")..html.find("</svg>").unwrap()];
        assert!(svg.contains("<title"));
        assert_eq!(
            svg.matches(r#"class="bar-label""#).count(),
            ExceptionCode::ALL.len()
        );
        let mut last = 0;
        for code in ExceptionCode::ALL {
            let at = svg
                .find(&format!(">{code}</text>"))
                .unwrap_or_else(|| panic!("no bar label for {code}"));
            assert!(at > last, "bars in ExceptionCode::ALL order");
            last = at;
            assert!(
                html.contains(&format!(">{code}</span>")),
                "{code} not named in the table"
            );
        }
        assert!(svg.contains("amount_mismatch: 2"));
        assert!(html.contains("Needs attention"));
        assert!(html.contains(&report.id.to_string()));
        assert!(html.contains("acme-pay"));
        assert!(html.contains("2025-03-06"));
        assert!(html.contains(r#"<span class="pill no">no</span>"#));
        assert!(html.contains("wallet_chain"));
        assert!(html.contains("<details>"));
        assert!(html.contains(&report.matched[0].payment_id.to_string()));
        // Each reason on its own line.
        assert!(html.contains(r#"<div class="reason">currency: ledger EUR, provider USD</div><div class="reason">amount: ledger 30.00"#));
    }

    #[test]
    fn html_counts_every_exception_and_says_how_many_it_lists() {
        let mut report = sample();
        let listed = report.exceptions.len() as i64;
        *report.summary.exceptions.get_mut("unparsable_row").unwrap() += 5_000;
        report.summary.exceptions_listed = Some(listed);
        let page = html(&report);
        let total = listed + 5_000;
        assert!(
            page.contains(&format!(
                "<h2>Exceptions <span class=\"n\">({total})</span>"
            )),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "The first {listed} listed (at most 1000 of each code)"
            )),
            "{page}"
        );
    }

    #[test]
    fn html_says_how_many_matches_the_table_does_not_list() {
        let mut report = clean();
        let listed = report.matched.len();
        report.summary.matched = listed as i64 + 1;
        let page = html(&report);
        assert!(
            page.contains(&format!(
                "{listed} listed below. The other 1 are failed lines"
            )),
            "{page}"
        );
        report.summary.matched = listed as i64;
        assert!(!html(&report).contains("listed below"));
    }

    #[test]
    fn html_says_a_clean_run_is_clean() {
        let html = html(&clean());
        assert!(html.contains("Clean run"));
        assert!(!html.contains("Needs attention"));
        assert!(html.contains("None: every ledger invariant holds."));
        assert!(html.contains("(2 of 2 agree with the ledger)"));
        let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
        assert_eq!(
            svg.matches(r#"class="bar zero""#).count(),
            ExceptionCode::ALL.len()
        );
        assert!(!svg.contains(r#"class="fill""#));
    }

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        let report = sample();
        let csv = exceptions_csv(&report);
        let rows = parse_csv(&csv);
        assert_eq!(rows.len(), 1 + report.exceptions.len());
        assert_eq!(
            rows[0],
            ["code", "payment_id", "external_ref", "line", "reasons"]
        );
        for (row, e) in rows[1..].iter().zip(&report.exceptions) {
            assert_eq!(row.len(), 5, "{row:?}");
            assert_eq!(row[0], e.code.as_str());
            assert_eq!(
                row[1],
                e.payment_id.map(|i| i.to_string()).unwrap_or_default()
            );
            assert_eq!(row[3], e.line.map(|l| l.to_string()).unwrap_or_default());
        }
        let hostile = rows.last().unwrap();
        assert_eq!(hostile[2], format!("'{HOSTILE_REF}"));
        assert_eq!(
            hostile[4],
            format!("amount: \"12.345\" has more decimals than EUR allows; {HOSTILE_REASON}")
        );
        assert_eq!(
            rows[5][4],
            "currency: ledger EUR, provider USD; amount: ledger 30.00, provider 32.61"
        );
    }

    #[test]
    fn csv_fields_exactly() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field(""), "");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field("cr\r"), "\"cr\r\"");
        assert_eq!(csv_field("=1+2"), "'=1+2");
        assert_eq!(csv_field("+1"), "'+1");
        assert_eq!(csv_field("-1"), "'-1");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("=A1,B1"), "\"'=A1,B1\"");
        assert_eq!(csv_field("a=b"), "a=b");
    }

    #[test]
    fn csv_of_a_clean_run_is_the_header() {
        assert_eq!(
            exceptions_csv(&clean()),
            "code,payment_id,external_ref,line,reasons\n"
        );
    }

    #[test]
    fn json_round_trips() {
        let report = sample();
        let text = json(&report);
        assert!(text.ends_with("}\n"));
        let back: RunReport = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&report).unwrap()
        );
        assert_eq!(back.exceptions, report.exceptions);
        assert_eq!(back.invariants, report.invariants);
    }

    #[test]
    fn write_all_writes_each_format_once() {
        let dir = std::env::temp_dir().join(format!("wallet-ledger-report-{}", Uuid::new_v4()));
        let nested = dir.join("run");
        let report = sample();
        let paths = write_all(
            &report,
            &nested,
            &[Format::Html, Format::Json, Format::Csv, Format::Html],
            None,
        )
        .unwrap();
        assert_eq!(
            paths,
            ["report.html", "report.json", "exceptions.csv"].map(|f| nested.join(f))
        );
        assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), html(&report));
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), json(&report));
        assert_eq!(
            std::fs::read_to_string(&paths[2]).unwrap(),
            exceptions_csv(&report)
        );
        assert_eq!(
            write_all(&report, &nested, &[Format::Csv], None).unwrap(),
            [nested.join("exceptions.csv")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `WRITE_SAMPLE_REPORT=/tmp/sample.html cargo test --lib reconcile::report` writes the
    /// sample report (for the screenshot in docs/); without the variable it does nothing.
    #[test]
    fn write_sample_report() {
        if let Some(path) = std::env::var_os("WRITE_SAMPLE_REPORT") {
            std::fs::write(path, html(&sample())).unwrap();
        }
    }
}
