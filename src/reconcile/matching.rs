//! Matching the staged settlement lines with the ledger, set-based in PostgreSQL (one query
//! per side, joined on payment id or `external_ref`), then naming each disagreement with a
//! reason per field.

use super::exceptions::ExceptionSink;
use super::model::{
    CurrencyTotals, Exception, ExceptionCode, Matched, Payout, ProviderStatus, minor_sibling,
};
use crate::db::Engine;
use crate::ledger::money::{Currency, MAX_AMOUNT};
use crate::ledger::store::Db;
use crate::ledger::transactions::TransactionStatus;
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use sqlx::PgConnection;
use uuid::Uuid;

/// Whether the ledger's payment (`posted`, and `refunded` when a reversal gave some back)
/// says what the provider says of it: a failed payment must not be posted, a settled one must
/// be posted and not refunded, a refunded one posted and refunded.
fn status_agrees(provider: ProviderStatus, ledger: TransactionStatus, refunded: bool) -> bool {
    let posted = ledger == TransactionStatus::Posted;
    match provider {
        ProviderStatus::Failed => !posted,
        ProviderStatus::Settled => posted && !refunded,
        ProviderStatus::Refunded => posted && refunded,
    }
}

/// What the ledger side is compared over.
#[derive(Debug, Clone)]
pub struct Window {
    /// The provider's clearing accounts (`clearing:{provider}:*`).
    pub clearing_accounts: Vec<String>,
    /// Ledger payments posted in `[from, to]` must be in the file (`to` already has the
    /// settlement lag taken off).
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Amount tolerance in major units (`0.01`), applied in each currency's minor units.
    pub amount_tolerance: rust_decimal::Decimal,
}

/// What matching found besides its exceptions (those went to the sink).
#[derive(Debug, Default)]
pub struct Matching {
    pub matched: Vec<Matched>,
    pub matched_count: i64,
    pub ledger_payments: i64,
}

/// `5000` in SAR → `"50.00"`: reasons read like the contract's `amount: ledger 50.00, provider 45.00`.
fn format(currency: &str, minor: i64) -> String {
    Currency::parse(currency).map_or_else(|| minor.to_string(), |c| c.format(minor))
}

/// The tolerance in `currency`'s minor units, rounded down to a whole minor unit: a tolerance
/// finer than the currency can express (0.001 in SAR, 0.5 in JPY) tolerates nothing, so
/// amounts must be equal. One beyond any amount (1e14) tolerates every difference.
/// `tolerance` is never negative (the command refuses it).
pub fn tolerance_minor(tolerance: rust_decimal::Decimal, currency: Currency) -> i64 {
    use rust_decimal::prelude::ToPrimitive;
    tolerance
        .checked_mul(rust_decimal::Decimal::from(10_i64.pow(currency.exponent())))
        .map(|minor| minor.trunc())
        .map_or(Some(MAX_AMOUNT), |minor| minor.to_i64())
        .unwrap_or(MAX_AMOUNT)
        .clamp(0, MAX_AMOUNT)
}

fn tolerance(window: &Window, currency: &str) -> i64 {
    Currency::parse(currency).map_or(0, |c| tolerance_minor(window.amount_tolerance, c))
}

/// Lines of one payment and status named in a `duplicate_in_file` reason; the rest are
/// counted, so a payment repeated a million times does not make a megabyte-long reason.
const MAX_NAMED_DUPLICATE_LINES: usize = 20;

/// `status settled: lines 7, 8`; beyond `MAX_NAMED_DUPLICATE_LINES`, `… and 9980 more`.
fn duplicate_reason(status: &str, lines: &[i64]) -> String {
    let named: Vec<String> = lines
        .iter()
        .take(MAX_NAMED_DUPLICATE_LINES)
        .map(i64::to_string)
        .collect();
    let more = lines.len().saturating_sub(MAX_NAMED_DUPLICATE_LINES);
    if more == 0 {
        format!("status {status}: lines {}", named.join(", "))
    } else {
        format!(
            "status {status}: lines {} and {more} more",
            named.join(", ")
        )
    }
}

/// One key of the file (a payment id, else a reference) with what the ledger has for it.
struct KeyRow {
    payment_id: Option<Uuid>,
    external_ref: Option<String>,
    currencies: Vec<String>,
    settled: i64,
    refunded: i64,
    settled_lines: Option<Vec<i64>>,
    refunded_lines: Option<Vec<i64>>,
    failed_lines: Option<Vec<i64>>,
    first_line: i64,
    ledger_id: Option<Uuid>,
    ledger_currency: Option<String>,
    ledger_status: Option<String>,
    ledger_gross: Option<i64>,
    ledger_refunded: Option<i64>,
}

/// A posted payment of the window that no line names.
struct MissingRow {
    id: Uuid,
    external_ref: Option<String>,
    currency: String,
    /// When it counts: its effective date (its ledger time unless it was backdated).
    posted_at: DateTime<Utc>,
    gross: i64,
}

/// Compares the file lines of `run_id` with the ledger. `max_listed` caps the matched list
/// kept in the report (every match is counted).
pub async fn compare(
    db: &mut Db<'_>,
    run_id: Uuid,
    window: &Window,
    max_listed: usize,
    sink: &mut ExceptionSink,
) -> anyhow::Result<Matching> {
    let mut out = Matching::default();
    // Streamed row by row (one per payment of the file), never collected: memory stays flat
    // however large the file.
    let mut rows = key_rows(db, run_id, window);
    while let Some(r) = rows.try_next().await? {
        let found = judge(&r, window, max_listed, &mut out)?;
        push_exceptions(&r, &found, sink)?;
    }
    drop(rows);
    missing_at_provider(db, run_id, window, sink).await?;
    out.ledger_payments = sqlx::query_scalar!(
        r#"select count(*) as "count!" from transactions
           where kind = 'payment' and account_ids && $1::text[]
             and coalesce(effective_at, posted_at) between $2 and $3"#,
        &window.clearing_accounts,
        window.from,
        window.to,
    )
    .fetch_one(db.conn())
    .await?;
    Ok(out)
}

/// A stream of rows, as `sqlx`'s `fetch` returns it.
type Rows<'c, T> =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<T, sqlx::Error>> + Send + 'c>>;

/// Each key of the file with what the ledger has for it, in the file's order.
///
/// The statement runs to sixty lines and has a Citus form, so both forms live side by side in
/// `sql/key_rows.plain.sql` and `sql/key_rows.citus.sql` (checked at build time like any
/// `query_as!`), with the comments on why they are shaped as they are.
fn key_rows<'d>(db: &'d mut Db<'_>, run_id: Uuid, window: &'d Window) -> Rows<'d, KeyRow> {
    let clearing = &window.clearing_accounts;
    match db.engine() {
        Engine::Plain => sqlx::query_file_as!(
            KeyRow,
            "src/reconcile/sql/key_rows.plain.sql",
            run_id,
            clearing
        )
        .fetch(db.conn()),
        Engine::Citus => sqlx::query_file_as!(
            KeyRow,
            "src/reconcile/sql/key_rows.citus.sql",
            run_id,
            clearing
        )
        .fetch(db.conn()),
    }
}

/// A reason found for an exception: its code and the reason.
type Found = Vec<(ExceptionCode, String)>;

/// The file's side of one key: its lines per status (sorted) and its currencies.
struct FileSide {
    settled_lines: Vec<i64>,
    refunded_lines: Vec<i64>,
    failed_lines: Vec<i64>,
    /// Sorted, each once.
    currencies: Vec<String>,
    file_currency: String,
}

impl FileSide {
    fn of(r: &KeyRow) -> FileSide {
        let lines = |l: &Option<Vec<i64>>| {
            let mut lines = l.clone().unwrap_or_default();
            lines.sort_unstable();
            lines
        };
        let mut currencies = r.currencies.clone();
        currencies.sort_unstable();
        currencies.dedup();
        FileSide {
            settled_lines: lines(&r.settled_lines),
            refunded_lines: lines(&r.refunded_lines),
            failed_lines: lines(&r.failed_lines),
            file_currency: currencies.first().cloned().unwrap_or_default(),
            currencies,
        }
    }

    /// `duplicate_in_file`: a status given on more than one line.
    fn duplicates(&self) -> Found {
        let mut found = Found::new();
        for (status, at) in [
            (ProviderStatus::Settled, &self.settled_lines),
            (ProviderStatus::Refunded, &self.refunded_lines),
            (ProviderStatus::Failed, &self.failed_lines),
        ] {
            if at.len() > 1 {
                found.push((
                    ExceptionCode::DuplicateInFile,
                    duplicate_reason(status.as_str(), at),
                ));
            }
        }
        found
    }

    /// What the provider says of the payment: refunded over settled over failed.
    fn status(&self) -> ProviderStatus {
        if !self.refunded_lines.is_empty() {
            ProviderStatus::Refunded
        } else if !self.settled_lines.is_empty() {
            ProviderStatus::Settled
        } else {
            ProviderStatus::Failed
        }
    }
}

/// One key judged: its disagreements, or (none) a match counted in `out`.
fn judge(
    r: &KeyRow,
    window: &Window,
    max_listed: usize,
    out: &mut Matching,
) -> anyhow::Result<Found> {
    let side = FileSide::of(r);
    let mut found = side.duplicates();
    match (
        &r.ledger_id,
        r.ledger_currency.as_deref(),
        r.ledger_status.as_deref(),
    ) {
        (Some(ledger_id), Some(ledger_currency), Some(ledger_status)) => {
            let ledger_status = TransactionStatus::parse(ledger_status).ok_or_else(|| {
                crate::db::corrupt(
                    "transactions",
                    ledger_id,
                    format!("status {ledger_status:?}"),
                )
            })?;
            let ledger = Ledger {
                id: *ledger_id,
                currency: ledger_currency,
                status: ledger_status,
                gross: r.ledger_gross.unwrap_or(0),
                refunded: r.ledger_refunded.unwrap_or(0),
            };
            found.extend(disagreements(r, &side, &ledger, window));
            if found.is_empty() {
                out.matched_count += 1;
                if out.matched.len() < max_listed {
                    out.matched.push(ledger.matched(r, side.status()));
                }
            }
        }
        _ if side.settled_lines.is_empty() && side.refunded_lines.is_empty() => {
            // Failed at the provider and unknown to the ledger: both agree nothing moved.
            if found.is_empty() {
                out.matched_count += 1;
            }
        }
        _ => found.push((ExceptionCode::MissingInLedger, missing_in_ledger(r, &side))),
    }
    Ok(found)
}

/// The ledger's side of one key that it has.
struct Ledger<'a> {
    id: Uuid,
    currency: &'a str,
    status: TransactionStatus,
    gross: i64,
    refunded: i64,
}

impl Ledger<'_> {
    fn matched(&self, r: &KeyRow, status: ProviderStatus) -> Matched {
        Matched {
            payment_id: self.id,
            external_ref: r.external_ref.clone(),
            currency: self.currency.to_owned(),
            amount: Currency::parse(self.currency)
                .map_or_else(|| self.gross.to_string(), |c| c.format(self.gross)),
            amount_minor: minor_sibling(self.gross.into()),
            status,
        }
    }
}

/// Where the file and the ledger disagree on a payment both have: currency, amounts, status.
fn disagreements(r: &KeyRow, side: &FileSide, ledger: &Ledger, window: &Window) -> Found {
    let mut found = Found::new();
    let currency = ledger.currency;
    if side.currencies.len() > 1 || side.file_currency != currency {
        found.push((
            ExceptionCode::CurrencyMismatch,
            format!(
                "currency: ledger {currency}, provider {}",
                side.currencies.join(" and ")
            ),
        ));
    } else {
        let tol = tolerance(window, currency);
        if !side.settled_lines.is_empty() && (r.settled - ledger.gross).abs() > tol {
            found.push((
                ExceptionCode::AmountMismatch,
                format!(
                    "amount: ledger {}, provider {}",
                    format(currency, ledger.gross),
                    format(currency, r.settled)
                ),
            ));
        }
        if !side.refunded_lines.is_empty()
            && ledger.refunded > 0
            && (r.refunded - ledger.refunded).abs() > tol
        {
            found.push((
                ExceptionCode::AmountMismatch,
                format!(
                    "refunded: ledger {}, provider {}",
                    format(currency, ledger.refunded),
                    format(currency, r.refunded)
                ),
            ));
        }
    }
    let provider_status = side.status();
    let refunded = ledger.refunded > 0;
    if !status_agrees(provider_status, ledger.status, refunded) {
        let ledger_said = if ledger.status == TransactionStatus::Posted && refunded {
            ProviderStatus::Refunded.as_str()
        } else {
            ledger.status.as_str()
        };
        found.push((
            ExceptionCode::StatusMismatch,
            format!(
                "status: ledger {ledger_said}, provider {}",
                provider_status.as_str()
            ),
        ));
    }
    found
}

/// The `missing_in_ledger` reason of a key the ledger does not have.
fn missing_in_ledger(r: &KeyRow, side: &FileSide) -> String {
    let (status, amount) = if side.settled_lines.is_empty() {
        (ProviderStatus::Refunded, r.refunded)
    } else {
        (ProviderStatus::Settled, r.settled)
    };
    format!(
        "payment: provider {} {} {} (line {}), the ledger has no such payment through this provider",
        status.as_str(),
        format(&side.file_currency, amount),
        side.file_currency,
        r.first_line
    )
}

/// One exception per payment and category, with every reason of that category.
fn push_exceptions(r: &KeyRow, found: &Found, sink: &mut ExceptionSink) -> anyhow::Result<()> {
    let mut codes: Vec<ExceptionCode> = found.iter().map(|(c, _)| *c).collect();
    codes.dedup();
    for code in codes {
        sink.push(Exception {
            code,
            // A line without a payment_id that found its payment by reference names it.
            payment_id: r.payment_id.or(r.ledger_id),
            external_ref: r.external_ref.clone(),
            line: Some(r.first_line),
            reasons: found
                .iter()
                .filter(|(c, _)| *c == code)
                .map(|(_, reason)| reason.clone())
                .collect(),
        })?;
    }
    Ok(())
}

/// `missing_at_provider`: the payments of the window that no line names.
async fn missing_at_provider(
    db: &mut Db<'_>,
    run_id: Uuid,
    window: &Window,
    sink: &mut ExceptionSink,
) -> anyhow::Result<()> {
    // A hash anti-join (the file's lines hashed once, the window's payments scanned once) is
    // right at any size, while a nested loop over a staging table without an index would scan
    // the lines once per payment. Fresh statistics pick the hash anyway; this keeps it when
    // they are stale.
    sqlx::query("select set_config('enable_nestloop', 'off', true)")
        .execute(db.conn())
        .await?;
    let mut missing = missing_rows(db, run_id, window);
    while let Some(m) = missing.try_next().await? {
        sink.push(m.exception())?;
    }
    drop(missing);
    sqlx::query("select set_config('enable_nestloop', 'on', true)")
        .execute(db.conn())
        .await?;
    Ok(())
}

impl MissingRow {
    /// The `missing_at_provider` exception of a payment no line names.
    fn exception(self) -> Exception {
        Exception {
            code: ExceptionCode::MissingAtProvider,
            payment_id: Some(self.id),
            external_ref: self.external_ref,
            line: None,
            reasons: vec![format!(
                "payment: ledger posted {} {} at {}, the provider's file has no such payment",
                format(&self.currency, self.gross),
                self.currency,
                self.posted_at.to_rfc3339()
            )],
        }
    }
}

/// The posted payments of the window that no line names (by id, or by reference as the
/// matching takes it), oldest first. Both forms in `sql/missing_rows.{plain,citus}.sql`.
fn missing_rows<'d>(db: &'d mut Db<'_>, run_id: Uuid, window: &'d Window) -> Rows<'d, MissingRow> {
    let (clearing, from, to) = (&window.clearing_accounts, window.from, window.to);
    match db.engine() {
        Engine::Plain => sqlx::query_file_as!(
            MissingRow,
            "src/reconcile/sql/missing_rows.plain.sql",
            run_id,
            clearing,
            from,
            to,
        )
        .fetch(db.conn()),
        Engine::Citus => sqlx::query_file_as!(
            MissingRow,
            "src/reconcile/sql/missing_rows.citus.sql",
            run_id,
            clearing,
            from,
            to,
        )
        .fetch(db.conn()),
    }
}

/// Minor units summed exactly (PostgreSQL `numeric`, read as text): a file may hold more
/// than `bigint` can sum, 1,030 lines of 2^53 − 1 already.
/// A numeric sum of bigint columns is an integer; for any file PostgreSQL can stage it has at
/// most ~25 digits, far inside `i128` (so the differences taken of them cannot overflow).
/// A sum that does not read as an integer is a value that does not decode (permanent), not a
/// broken connection.
fn wide(text: &str) -> Result<i128, sqlx::Error> {
    text.parse()
        .map_err(|_| sqlx::Error::Decode(format!("a sum of minor units read as {text:?}").into()))
}

/// `i128` minor units of `currency` → `"50.00"`, exact (the plain integer for an unknown
/// currency or beyond `rust_decimal`'s 28 digits).
pub fn format_wide(currency: &str, minor: i128) -> String {
    Currency::parse(currency)
        .and_then(|c| rust_decimal::Decimal::try_from_i128_with_scale(minor, c.exponent()).ok())
        .map_or_else(|| minor.to_string(), |d| d.to_string())
}

/// One payout of the file with the ledger's gross of its payments.
struct PayoutRow {
    payout_ref: String,
    currency: String,
    lines: i64,
    total: i64,
    agrees: bool,
    gross: String,
    refunded: String,
    fee: String,
    ledger_gross: String,
}

impl PayoutRow {
    /// The report's payout: the sums (exact, as text) read as `i128` and formatted in the
    /// payout's currency; net is gross − refunds − fees.
    fn payout(self) -> Result<Payout, sqlx::Error> {
        let (gross, refunded, fee, ledger_gross) = (
            wide(&self.gross)?,
            wide(&self.refunded)?,
            wide(&self.fee)?,
            wide(&self.ledger_gross)?,
        );
        let f = |minor: i128| format_wide(&self.currency, minor);
        Ok(Payout {
            gross: f(gross),
            fee: f(fee),
            net: f(gross - refunded - fee),
            ledger_gross: f(ledger_gross),
            gross_minor: minor_sibling(gross),
            fee_minor: minor_sibling(fee),
            net_minor: minor_sibling(gross - refunded - fee),
            ledger_gross_minor: minor_sibling(ledger_gross),
            agrees: self.agrees,
            lines: self.lines,
            payout_ref: self.payout_ref,
            currency: self.currency,
        })
    }
}

/// Lines sharing a `payout_ref` checked as one bank payout: its gross against the ledger's
/// amounts (what was posted) for the same payments of this provider.
/// Returns at most `max_listed` payouts, the disagreeing ones first, and how many there are.
pub async fn payouts(
    db: &mut Db<'_>,
    run_id: Uuid,
    clearing_accounts: &[String],
    max_listed: i64,
) -> Result<(Vec<Payout>, i64), sqlx::Error> {
    let rows = payout_rows(db, run_id, clearing_accounts, max_listed).await?;
    // Every row carries the count of all payouts (a window function), listed or not.
    let total = rows.first().map_or(0, |r| r.total);
    let listed = rows
        .into_iter()
        .map(PayoutRow::payout)
        .collect::<Result<Vec<Payout>, sqlx::Error>>()?;
    Ok((listed, total))
}

/// The payouts' sums, both forms in `sql/payouts.{plain,citus}.sql`.
async fn payout_rows(
    db: &mut Db<'_>,
    run_id: Uuid,
    clearing_accounts: &[String],
    max_listed: i64,
) -> Result<Vec<PayoutRow>, sqlx::Error> {
    let engine = db.engine();
    let conn = db.conn();
    match engine {
        Engine::Plain => {
            sqlx::query_file_as!(
                PayoutRow,
                "src/reconcile/sql/payouts.plain.sql",
                run_id,
                clearing_accounts,
                max_listed,
            )
            .fetch_all(conn)
            .await
        }
        Engine::Citus => {
            sqlx::query_file_as!(
                PayoutRow,
                "src/reconcile/sql/payouts.citus.sql",
                run_id,
                clearing_accounts,
                max_listed,
            )
            .fetch_all(conn)
            .await
        }
    }
}

/// Gross (settled), fee and net (gross − refunds − fees) of the file, per currency, summed
/// exactly.
pub async fn totals(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> Result<Vec<CurrencyTotals>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select currency,
                  coalesce(sum(amount) filter (where status = 'settled'), 0)::text as "gross!",
                  coalesce(sum(amount) filter (where status = 'refunded'), 0)::text as "refunded!",
                  sum(fee)::text as "fee!"
           from settlement_lines where run_id = $1 group by currency order by currency"#,
        run_id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            let (gross, refunded, fee) = (wide(&r.gross)?, wide(&r.refunded)?, wide(&r.fee)?);
            Ok(CurrencyTotals {
                currency: r.currency.clone(),
                gross: format_wide(&r.currency, gross),
                fee: format_wide(&r.currency, fee),
                net: format_wide(&r.currency, gross - refunded - fee),
                gross_minor: minor_sibling(gross),
                fee_minor: minor_sibling(fee),
                net_minor: minor_sibling(gross - refunded - fee),
            })
        })
        .collect()
}

/// The period the file covers: its first and last `settled_at`.
pub async fn file_period(
    conn: &mut PgConnection,
    run_id: Uuid,
) -> Result<(Option<DateTime<Utc>>, Option<DateTime<Utc>>), sqlx::Error> {
    let r = sqlx::query!(
        "select min(settled_at) as from_at, max(settled_at) as to_at from settlement_lines where run_id = $1",
        run_id
    )
    .fetch_one(conn)
    .await?;
    Ok((r.from_at, r.to_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;
    use std::str::FromStr;

    fn tol(text: &str, currency: &str) -> i64 {
        tolerance_minor(
            Decimal::from_str(text).unwrap(),
            Currency::parse(currency).unwrap(),
        )
    }

    #[test]
    fn a_tolerance_finer_than_the_minor_unit_tolerates_nothing() {
        assert_eq!(tol("0.001", "SAR"), 0, "0.001 SAR is below one halala");
        assert_eq!(tol("0.0001", "KWD"), 0);
        assert_eq!(tol("0.5", "JPY"), 0);
        assert_eq!(tol("0", "SAR"), 0);
    }

    #[test]
    fn a_tolerance_is_taken_in_whole_minor_units_rounded_down() {
        assert_eq!(tol("0.01", "SAR"), 1);
        assert_eq!(tol("0.019", "SAR"), 1);
        assert_eq!(tol("0.001", "KWD"), 1);
        assert_eq!(tol("1", "JPY"), 1);
        assert_eq!(tol("2.5", "JPY"), 2);
    }

    #[test]
    fn a_huge_tolerance_tolerates_every_difference() {
        assert_eq!(tol("100000000000000", "SAR"), MAX_AMOUNT);
        assert_eq!(tol("79228162514264337593543950335", "KWD"), MAX_AMOUNT);
    }

    #[test]
    fn a_duplicate_reason_names_the_first_lines_and_counts_the_rest() {
        assert_eq!(
            duplicate_reason("settled", &[7, 8]),
            "status settled: lines 7, 8"
        );
        let many: Vec<i64> = (2..10_002).collect();
        let reason = duplicate_reason("failed", &many);
        assert!(
            reason.starts_with("status failed: lines 2, 3, 4,"),
            "{reason}"
        );
        assert!(reason.ends_with(", 21 and 9980 more"), "{reason}");
    }

    #[test]
    fn a_status_agrees_only_with_the_ledger_state_it_names() {
        for ledger in TransactionStatus::ALL {
            for refunded in [false, true] {
                let posted = ledger == TransactionStatus::Posted;
                let agreeing: Vec<ProviderStatus> = ProviderStatus::ALL
                    .into_iter()
                    .filter(|p| status_agrees(*p, ledger, refunded))
                    .collect();
                let expected = match (posted, refunded) {
                    (false, _) => ProviderStatus::Failed,
                    (true, false) => ProviderStatus::Settled,
                    (true, true) => ProviderStatus::Refunded,
                };
                assert_eq!(
                    agreeing,
                    [expected],
                    "{} refunded={refunded}",
                    ledger.as_str()
                );
            }
        }
    }

    fn window() -> Window {
        Window {
            clearing_accounts: vec!["clearing:acme:sar".into()],
            from: DateTime::<Utc>::MIN_UTC,
            to: DateTime::<Utc>::MAX_UTC,
            amount_tolerance: Decimal::from_str("0.01").unwrap(),
        }
    }

    /// A key of the file settled once at `settled` minor units in SAR (line 2), with the
    /// ledger's payment `ledger` (status, gross, refunded) if it has one.
    fn key(settled: i64, ledger: Option<(&str, i64, i64)>) -> KeyRow {
        KeyRow {
            payment_id: Some(Uuid::nil()),
            external_ref: Some("ch_1".into()),
            currencies: vec!["SAR".into()],
            settled,
            refunded: 0,
            settled_lines: Some(vec![2]),
            refunded_lines: None,
            failed_lines: None,
            first_line: 2,
            ledger_id: ledger.map(|_| Uuid::nil()),
            ledger_currency: ledger.map(|_| "SAR".into()),
            ledger_status: ledger.map(|(status, _, _)| status.into()),
            ledger_gross: ledger.map(|(_, gross, _)| gross),
            ledger_refunded: ledger.map(|(_, _, refunded)| refunded),
        }
    }

    fn judged(r: &KeyRow) -> (Vec<(ExceptionCode, String)>, i64, usize) {
        let mut out = Matching::default();
        let found = judge(r, &window(), 1, &mut out).unwrap();
        (found, out.matched_count, out.matched.len())
    }

    #[test]
    fn a_settled_payment_the_ledger_posted_within_the_tolerance_matches() {
        assert_eq!(
            judged(&key(5000, Some(("posted", 5001, 0)))),
            (vec![], 1, 1)
        );
    }

    #[test]
    fn amounts_beyond_the_tolerance_and_a_status_the_ledger_does_not_share_are_named() {
        let (found, matched, _) = judged(&key(4500, Some(("posted", 5000, 0))));
        assert_eq!(
            (found, matched),
            (
                vec![(
                    ExceptionCode::AmountMismatch,
                    "amount: ledger 50.00, provider 45.00".into()
                )],
                0
            )
        );
        let (found, matched, _) = judged(&key(5000, Some(("pending", 5000, 0))));
        assert_eq!(
            (found, matched),
            (
                vec![(
                    ExceptionCode::StatusMismatch,
                    "status: ledger pending, provider settled".into()
                )],
                0
            )
        );
    }

    #[test]
    fn a_payment_the_ledger_lacks_is_missing_unless_the_provider_says_it_failed() {
        let (found, matched, _) = judged(&key(5000, None));
        assert_eq!(
            (found, matched),
            (
                vec![(
                    ExceptionCode::MissingInLedger,
                    "payment: provider settled 50.00 SAR (line 2), the ledger has no such \
                     payment through this provider"
                        .into()
                )],
                0
            )
        );
        let mut failed = key(5000, None);
        (failed.settled_lines, failed.failed_lines) = (None, Some(vec![2]));
        assert_eq!(judged(&failed), (vec![], 1, 0), "counted, not listed");
    }

    #[test]
    fn a_payment_no_line_names_reads_what_the_ledger_posted_and_when() {
        let at = DateTime::parse_from_rfc3339("2026-11-30T03:55:12Z").unwrap();
        let missing = MissingRow {
            id: Uuid::nil(),
            external_ref: None,
            currency: "SAR".into(),
            posted_at: at.with_timezone(&Utc),
            gross: 3000,
        };
        let e = missing.exception();
        assert_eq!((e.code, e.line), (ExceptionCode::MissingAtProvider, None));
        assert_eq!(
            e.reasons,
            [
                "payment: ledger posted 30.00 SAR at 2026-11-30T03:55:12+00:00, the provider's \
              file has no such payment"
            ]
        );
    }

    /// A payout of three SAR lines, its sums as PostgreSQL reads them out (text).
    fn payout_row(gross: &str, refunded: &str, fee: &str, ledger_gross: &str) -> PayoutRow {
        PayoutRow {
            payout_ref: "po_1".into(),
            currency: "SAR".into(),
            lines: 3,
            total: 1,
            agrees: false,
            gross: gross.into(),
            refunded: refunded.into(),
            fee: fee.into(),
            ledger_gross: ledger_gross.into(),
        }
    }

    #[test]
    fn a_payouts_net_is_its_gross_less_refunds_and_fees_summed_exactly() {
        let p = payout_row("10000", "2500", "150", "9000").payout().unwrap();
        assert_eq!(
            (
                p.gross.as_str(),
                p.fee.as_str(),
                p.net.as_str(),
                p.ledger_gross.as_str()
            ),
            ("100.00", "1.50", "73.50", "90.00")
        );
        assert_eq!((p.net_minor, p.agrees, p.lines), (Some(7350), false, 3));
        assert!(
            payout_row("1.5", "0", "0", "0").payout().is_err(),
            "a sum that is not an integer does not decode"
        );
    }

    #[test]
    fn wide_sums_format_exactly() {
        let sum = 1_030 * i128::from(MAX_AMOUNT);
        assert_eq!(format_wide("SAR", sum), "92774152323832207.30");
        assert_eq!(format_wide("JPY", -5), "-5");
        assert_eq!(format_wide("XXX", 7), "7");
    }
}
