//! Reading a provider's settlement file: streamed record by record, each line parsed exactly
//! (amounts with `rust_decimal` against the currency's exponent: more decimals than the
//! currency has is an `unparsable_row`, never a rounding), good lines sent to PostgreSQL with
//! `COPY`, bad ones kept as exceptions with their line number.

use super::exceptions::ExceptionSink;
use super::model::ProviderStatus;
use super::model::{Exception, ExceptionCode};
use crate::ledger::money::{Currency, MAX_AMOUNT};
use chrono::{DateTime, Datelike, Utc};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::path::Path;
use uuid::Uuid;

/// Bytes of CSV sent to `COPY` at a time.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// The file's columns, by the names its header uses. Defaults are the contract's names; each
/// can be remapped with `--column field=Header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns(HashMap<&'static str, String>);

pub const FIELDS: &[&str] = &[
    "payment_id",
    "external_ref",
    "amount",
    "currency",
    "status",
    "settled_at",
    "fee",
    "payout_ref",
];

impl Columns {
    /// `mappings` are `field=Header` pairs.
    pub fn new(mappings: &[String]) -> Result<Columns, String> {
        let mut columns: HashMap<&'static str, String> =
            FIELDS.iter().map(|f| (*f, (*f).to_owned())).collect();
        for mapping in mappings {
            let (field, header) = mapping
                .split_once('=')
                .ok_or_else(|| format!("--column {mapping}: expected field=Header"))?;
            let field = FIELDS.iter().find(|f| **f == field.trim()).ok_or_else(|| {
                format!(
                    "--column {mapping}: unknown field {field} (fields: {})",
                    FIELDS.join(", ")
                )
            })?;
            columns.insert(field, header.trim().to_owned());
        }
        Ok(Columns(columns))
    }

    pub fn as_map(&self) -> std::collections::BTreeMap<&'static str, &str> {
        self.0.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }
}

/// A parsed settlement line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub line: u64,
    pub payment_id: Option<Uuid>,
    pub external_ref: Option<String>,
    pub currency: Currency,
    pub status: ProviderStatus,
    pub amount: i64,
    pub fee: i64,
    pub settled_at: DateTime<Utc>,
    pub payout_ref: Option<String>,
}

/// `text` in major units → minor units of `currency`, exactly: digits, optionally a point
/// and at most the currency's exponent of decimals. No sign, exponent, separator or space
/// inside (`1_000.00`, `1e3`, `-0` and `+5` are refused), and at most 2^53 − 1 minor units.
pub fn parse_amount(text: &str, currency: Currency, field: &str) -> Result<i64, String> {
    let text = text.trim();
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, decimals) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let well_formed =
        digits(whole) && (decimals.is_empty() && !unsigned.contains('.') || digits(decimals));
    if !well_formed {
        return Err(format!("{field}: {text:?} is not a decimal number"));
    }
    if negative {
        return Err(format!("{field}: {text} is negative"));
    }
    let exponent = currency.exponent() as usize;
    if decimals.len() > exponent {
        return Err(format!(
            "{field}: {text} has more decimals than {currency} allows ({exponent})"
        ));
    }
    // Minor units as digits: the whole part, the decimals padded to the exponent.
    let minor = format!("{whole}{decimals:0<exponent$}");
    let minor = minor.trim_start_matches('0');
    let out_of_range = || format!("{field}: {text} is out of range");
    if minor.len() > 16 {
        return Err(out_of_range());
    }
    let minor: i64 = if minor.is_empty() {
        0
    } else {
        minor.parse().map_err(|_| out_of_range())?
    };
    if minor > MAX_AMOUNT {
        return Err(out_of_range());
    }
    Ok(minor)
}

/// Settlement times the ledger stores and prints as RFC 3339: years 0001 to 9999 in UTC.
fn settled_at_in_range(t: &DateTime<Utc>) -> bool {
    (1..=9999).contains(&t.year())
}

/// Parses one record; `Err` holds the reasons it is unparsable, every one found, in the order
/// of the fields (so a line lists the same reasons in the same order on every run).
fn parse_record(get: impl Fn(&str) -> Option<String>, line: u64) -> Result<Line, Vec<String>> {
    let mut reasons = Vec::new();
    let text = |field: &str| {
        get(field)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let payment_id = noted(payment_id_of(text("payment_id")), &mut reasons).flatten();
    let external_ref = text("external_ref");
    // A payment_id that is not a UUID has said what is wrong with the key already.
    if payment_id.is_none() && external_ref.is_none() && reasons.is_empty() {
        reasons.push("payment_id: missing (and no external_ref)".to_owned());
    }
    let currency = required("currency", text("currency")).and_then(|c| currency_of(&c));
    let currency = noted(currency, &mut reasons);
    let status = required("status", text("status")).and_then(|s| status_of(&s));
    let status = noted(status, &mut reasons);
    let settled_at = required("settled_at", text("settled_at")).and_then(|t| settled_at_of(&t));
    let settled_at = noted(settled_at, &mut reasons);
    // Amounts are exact in the currency's exponent: without a currency there is nothing to
    // read them against (and its reason is given already).
    let (amount, fee) = match currency {
        Some(currency) => amounts_of(text("amount"), text("fee"), currency, &mut reasons),
        None => (None, Some(0)),
    };
    match (currency, status, settled_at, amount, fee) {
        (Some(currency), Some(status), Some(settled_at), Some(amount), Some(fee))
            if reasons.is_empty() =>
        {
            Ok(Line {
                line,
                payment_id,
                external_ref,
                currency,
                status,
                amount,
                fee,
                settled_at,
                payout_ref: text("payout_ref"),
            })
        }
        _ => Err(reasons),
    }
}

/// The value, or `None` with its reason noted: a record is read to its end, so that one
/// exception lists everything wrong with the line.
fn noted<T>(value: Result<T, String>, reasons: &mut Vec<String>) -> Option<T> {
    value.map_err(|reason| reasons.push(reason)).ok()
}

/// A field every line must have.
fn required(field: &str, value: Option<String>) -> Result<String, String> {
    value.ok_or_else(|| format!("{field}: missing"))
}

fn payment_id_of(text: Option<String>) -> Result<Option<Uuid>, String> {
    text.map(|id| Uuid::parse_str(&id).map_err(|_| format!("payment_id: {id:?} is not a UUID")))
        .transpose()
}

fn currency_of(code: &str) -> Result<Currency, String> {
    Currency::parse(code).ok_or_else(|| format!("currency: {code:?} is not an ISO 4217 code"))
}

fn status_of(text: &str) -> Result<ProviderStatus, String> {
    ProviderStatus::parse(text)
        .ok_or_else(|| format!("status: {text:?} is not settled, refunded or failed"))
}

fn settled_at_of(t: &str) -> Result<DateTime<Utc>, String> {
    match DateTime::parse_from_rfc3339(t).map(|t| t.with_timezone(&Utc)) {
        Ok(at) if settled_at_in_range(&at) => Ok(at),
        Ok(_) => Err(format!(
            "settled_at: {t:?} is out of range (years 0001 to 9999 in UTC)"
        )),
        Err(_) => Err(format!("settled_at: {t:?} is not an RFC 3339 time")),
    }
}

/// `amount` (required) and `fee` (0 when absent) in minor units of `currency`, with their
/// reasons noted; a fee larger than the amount would make the payout's net negative.
fn amounts_of(
    amount: Option<String>,
    fee: Option<String>,
    currency: Currency,
    reasons: &mut Vec<String>,
) -> (Option<i64>, Option<i64>) {
    let amount = required("amount", amount).and_then(|a| parse_amount(&a, currency, "amount"));
    let amount = noted(amount, reasons);
    let fee = fee.map_or(Ok(0), |f| parse_amount(&f, currency, "fee"));
    let fee = noted(fee, reasons);
    if let (Some(a), Some(f)) = (amount, fee)
        && f > a
    {
        reasons.push(format!(
            "fee: {} exceeds the amount {}",
            currency.format(f),
            currency.format(a)
        ));
    }
    (amount, fee)
}

/// Values no field can hold, one reason each: bytes that are not UTF-8 (two different
/// Latin-1 references would otherwise read alike) and NUL, which no PostgreSQL text holds.
fn unreadable_values<'a>(bytes: impl Fn(&str) -> Option<&'a [u8]>) -> Vec<String> {
    let mut reasons = Vec::new();
    for field in FIELDS {
        let Some(raw) = bytes(field) else { continue };
        match std::str::from_utf8(raw) {
            Err(e) => reasons.push(format!(
                "{field}: not UTF-8 (an invalid byte 0x{:02x} at byte {})",
                raw[e.valid_up_to()],
                e.valid_up_to() + 1
            )),
            Ok(text) if text.contains('\0') => {
                reasons.push(format!("{field}: contains a NUL byte"));
            }
            Ok(_) => {}
        }
    }
    reasons
}

/// What reading the file produced (its unparsable rows went to the sink).
#[derive(Debug, Default)]
pub struct Imported {
    pub rows: i64,
    pub parsed: i64,
}

/// A CSV reader whose records end at LF, so that a CRLF file counts its lines like an LF one
/// (the reader's default also ends records at a lone CR, and then numbers every line of a
/// CRLF file one too low). The CR left at the end of a record's last value is trimmed with
/// the value.
fn reader_of<R: std::io::Read>(source: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(source)
}

/// The next record into `record` and the file line it starts on (1 is the header);
/// `Err` with the line for a record the reader cannot read; `None` at the end.
/// Blank lines (a CR alone, in a CRLF file) are skipped, as the reader skips empty ones.
fn next_record<R: std::io::Read>(
    reader: &mut csv::Reader<R>,
    record: &mut csv::ByteRecord,
) -> Option<Result<u64, (u64, csv::Error)>> {
    loop {
        let line = reader.position().line();
        match reader.read_byte_record(record) {
            Err(e) => return Some(Err((line, e))),
            Ok(false) => return None,
            Ok(true) if record.len() == 1 && &record[0] == b"\r" => continue,
            Ok(true) => return Some(Ok(record.position().map_or(line, |p| p.line()))),
        }
    }
}

/// Where the parsed lines go, one CSV row each (see [`copy_row`]).
const COPY_LINES: &str =
    "copy settlement_lines (run_id, line, payment_id, external_ref, currency, status, amount, fee,
                                    settled_at, payout_ref) from stdin (format csv)";

/// Streams the file at `path` into `settlement_lines` for `run_id` with `COPY`.
pub async fn import(
    conn: &mut PgConnection,
    run_id: Uuid,
    path: &Path,
    columns: &Columns,
    sink: &mut ExceptionSink,
) -> anyhow::Result<Imported> {
    let mut reader = reader_of(std::fs::File::open(path)?);
    // The header is checked before COPY starts: a file without the columns a line needs is
    // refused whole, with nothing sent.
    let headers: Vec<Vec<u8>> = reader
        .byte_headers()?
        .iter()
        .map(|h| h.strip_suffix(b"\r").unwrap_or(h).to_vec())
        .collect();
    let index = column_index(&headers, columns)?;
    let mut copy = conn.copy_in_raw(COPY_LINES).await?;
    let mut imported = Imported::default();
    let mut buffer = csv::Writer::from_writer(Vec::with_capacity(COPY_CHUNK_BYTES));
    let mut record = csv::ByteRecord::new();
    while let Some(read) = next_record(&mut reader, &mut record) {
        imported.rows += 1;
        let line = match read {
            Ok(line) => line,
            // The file itself cannot be read further: no line is to blame.
            Err((_, e)) if e.is_io_error() => return Err(e.into()),
            Err((line, e)) => {
                sink.push(unparsable(line, vec![format!("unreadable: {e}")]))?;
                continue;
            }
        };
        match read_line(&record, &index, line) {
            Ok(parsed) => {
                imported.parsed += 1;
                buffer.write_record(copy_row(run_id, parsed))?;
            }
            Err(reasons) => sink.push(unparsable(line, reasons))?,
        }
        // Sent in chunks: memory stays flat however large the file.
        if buffer.get_ref().len() >= COPY_CHUNK_BYTES {
            let chunk = std::mem::replace(
                &mut buffer,
                csv::Writer::from_writer(Vec::with_capacity(COPY_CHUNK_BYTES)),
            );
            copy.send(chunk.into_inner()?).await?;
        }
    }
    copy.send(buffer.into_inner()?).await?;
    copy.finish().await?;
    Ok(imported)
}

/// Each field's column in the file (by its header, as `columns` names it). Refused: a file
/// without a column every line needs, or with no key to find its payment by.
fn column_index(
    headers: &[Vec<u8>],
    columns: &Columns,
) -> anyhow::Result<HashMap<&'static str, usize>> {
    let index: HashMap<&'static str, usize> = columns
        .0
        .iter()
        .filter_map(|(field, header)| {
            headers
                .iter()
                .position(|h| h == header.as_bytes())
                .map(|i| (*field, i))
        })
        .collect();
    for required in ["amount", "currency", "status", "settled_at"] {
        if !index.contains_key(required) {
            anyhow::bail!(
                "the settlement file has no {:?} column (map it with --column {required}=Header)",
                columns.0[required]
            );
        }
    }
    if !index.contains_key("payment_id") && !index.contains_key("external_ref") {
        anyhow::bail!("the settlement file has neither a payment_id nor an external_ref column");
    }
    Ok(index)
}

/// One record read as a line: values no field can hold first (then nothing else is read of
/// it), else the parsed line or its reasons.
fn read_line(
    record: &csv::ByteRecord,
    index: &HashMap<&str, usize>,
    line: u64,
) -> Result<Line, Vec<String>> {
    let bytes = |field: &str| -> Option<&[u8]> { record.get(*index.get(field)?) };
    let unreadable = unreadable_values(bytes);
    if !unreadable.is_empty() {
        return Err(unreadable);
    }
    let get = |field: &str| -> Option<String> {
        // Checked above: every value read is UTF-8.
        std::str::from_utf8(bytes(field)?).ok().map(str::to_owned)
    };
    parse_record(get, line)
}

/// A parsed line as the CSV row of [`COPY_LINES`] (an absent value is an empty field, which
/// `COPY ... (format csv)` reads as NULL).
fn copy_row(run_id: Uuid, parsed: Line) -> [String; 10] {
    [
        run_id.to_string(),
        parsed.line.to_string(),
        parsed.payment_id.map(|p| p.to_string()).unwrap_or_default(),
        parsed.external_ref.unwrap_or_default(),
        parsed.currency.code().to_owned(),
        parsed.status.as_str().to_owned(),
        parsed.amount.to_string(),
        parsed.fee.to_string(),
        parsed.settled_at.to_rfc3339(),
        parsed.payout_ref.unwrap_or_default(),
    ]
}

fn unparsable(line: u64, reasons: Vec<String>) -> Exception {
    Exception {
        code: ExceptionCode::UnparsableRow,
        payment_id: None,
        external_ref: None,
        line: Some(i64::try_from(line).unwrap_or(i64::MAX)),
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_exact_in_the_currency_exponent() {
        let sar = Currency::parse("SAR").unwrap();
        assert_eq!(parse_amount("50.00", sar, "amount"), Ok(5000));
        assert_eq!(parse_amount("50", sar, "amount"), Ok(5000));
        assert_eq!(parse_amount("0.1", sar, "amount"), Ok(10));
        assert!(
            parse_amount("50.005", sar, "amount")
                .unwrap_err()
                .contains("more decimals than SAR")
        );
        assert!(parse_amount("-1", sar, "amount").is_err());
        assert!(parse_amount("1e3", sar, "amount").is_err());
        assert!(parse_amount("abc", sar, "amount").is_err());
        assert!(parse_amount("99999999999999999", sar, "amount").is_err());
        let jpy = Currency::parse("JPY").unwrap();
        assert!(parse_amount("1.5", jpy, "amount").is_err());
        assert_eq!(parse_amount("1500", jpy, "amount"), Ok(1500));
    }

    #[test]
    fn amounts_are_digits_a_point_and_decimals_only() {
        let sar = Currency::parse("SAR").unwrap();
        for bad in ["1_000.00", "1__0", "+5", "5.", ".5", "1 000", "0x10", ""] {
            assert_eq!(
                parse_amount(bad, sar, "amount"),
                Err(format!("amount: {bad:?} is not a decimal number")),
                "{bad}"
            );
        }
        assert_eq!(
            parse_amount("-0", sar, "amount"),
            Err("amount: -0 is negative".into())
        );
        assert_eq!(parse_amount("000.10", sar, "amount"), Ok(10));
        assert_eq!(parse_amount("0", sar, "amount"), Ok(0));
        assert_eq!(
            parse_amount("90071992547409.91", sar, "amount"),
            Ok(MAX_AMOUNT)
        );
        for big in ["90071992547409.92", "12345678901234567890123456789012"] {
            assert_eq!(
                parse_amount(big, sar, "amount"),
                Err(format!("amount: {big} is out of range")),
                "{big}"
            );
        }
        let kwd = Currency::parse("KWD").unwrap();
        assert_eq!(parse_amount("1.5", kwd, "fee"), Ok(1_500));
    }

    /// The line each record of `text` starts on, as the import numbers them.
    fn lines(text: &str) -> Vec<u64> {
        let mut reader = reader_of(text.as_bytes());
        reader.byte_headers().unwrap();
        let mut record = csv::ByteRecord::new();
        let mut lines = Vec::new();
        while let Some(read) = next_record(&mut reader, &mut record) {
            lines.push(read.unwrap());
        }
        lines
    }

    #[test]
    fn crlf_and_lf_files_number_their_lines_alike() {
        assert_eq!(lines("a,b\n1,2\n3,4\n"), [2, 3]);
        assert_eq!(lines("a,b\r\n1,2\r\n3,4\r\n"), [2, 3]);
        assert_eq!(
            lines("a,b\r\n1,2\r\n\r\n3,4"),
            [2, 4],
            "a blank line is skipped"
        );
        assert_eq!(
            lines("a,b\r\n\"x\r\ny\",2\r\n3,4\r\n"),
            [2, 4],
            "a quoted value spans two lines"
        );
    }

    #[test]
    fn values_no_text_column_holds_are_named() {
        let values = [
            ("external_ref", &b"ch\xe9"[..]),
            ("payout_ref", &b"p\0o"[..]),
        ];
        let get = |field: &str| values.iter().find(|(f, _)| *f == field).map(|(_, v)| *v);
        assert_eq!(
            unreadable_values(get),
            [
                "external_ref: not UTF-8 (an invalid byte 0xe9 at byte 3)",
                "payout_ref: contains a NUL byte"
            ]
        );
    }

    #[test]
    fn settlement_times_outside_years_1_to_9999_in_utc_are_out_of_range() {
        let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
        assert!(settled_at_in_range(&at("0001-01-01T00:00:00Z")));
        assert!(settled_at_in_range(&at("9999-12-31T23:59:59Z")));
        assert!(!settled_at_in_range(&at("0000-06-01T00:00:00Z")));
        assert!(!settled_at_in_range(&at("9999-12-31T23:00:00-05:00")));
    }

    /// `parse_record` of the `fields` given (the others absent), as line 7.
    fn parse(fields: &[(&str, &str)]) -> Result<Line, Vec<String>> {
        let get = |field: &str| {
            let value = fields.iter().find(|(f, _)| *f == field);
            value.map(|(_, v)| (*v).to_owned())
        };
        parse_record(get, 7)
    }

    #[test]
    fn a_complete_record_parses_exactly_with_a_fee_of_zero_when_absent() {
        let line = parse(&[
            ("payment_id", " 00000000-0000-0000-0000-000000000001 "),
            ("currency", "SAR"),
            ("status", "settled"),
            ("settled_at", "2026-11-30T10:00:00+03:00"),
            ("amount", "50.00"),
            ("payout_ref", ""),
        ])
        .unwrap();
        assert_eq!(line.payment_id, Some(Uuid::from_u128(1)));
        assert_eq!((line.line, line.amount, line.fee), (7, 5000, 0));
        assert_eq!(line.settled_at.to_rfc3339(), "2026-11-30T07:00:00+00:00");
        assert_eq!((line.external_ref, line.payout_ref), (None, None));
    }

    #[test]
    fn a_bad_record_lists_every_reason_in_the_order_of_its_fields() {
        assert_eq!(
            parse(&[
                ("payment_id", "p-1"),
                ("currency", "SAR"),
                ("status", "paid"),
                ("amount", "1.005"),
                ("fee", "x"),
            ]),
            Err(vec![
                "payment_id: \"p-1\" is not a UUID".to_owned(),
                "status: \"paid\" is not settled, refunded or failed".to_owned(),
                "settled_at: missing".to_owned(),
                "amount: 1.005 has more decimals than SAR allows (2)".to_owned(),
                "fee: \"x\" is not a decimal number".to_owned(),
            ])
        );
        assert_eq!(
            parse(&[("currency", "XYZ"), ("status", "failed")]),
            Err(vec![
                "payment_id: missing (and no external_ref)".to_owned(),
                "currency: \"XYZ\" is not an ISO 4217 code".to_owned(),
                "settled_at: missing".to_owned(),
            ]),
            "no amount is read without a currency"
        );
        let no_amount = parse(&[
            ("external_ref", "ch_1"),
            ("currency", "SAR"),
            ("status", "settled"),
            ("settled_at", "10000-01-01T00:00:00Z"),
            ("fee", "2"),
        ]);
        assert_eq!(
            no_amount,
            Err(vec![
                "settled_at: \"10000-01-01T00:00:00Z\" is not an RFC 3339 time".to_owned(),
                "amount: missing".to_owned(),
            ])
        );
        let fee_over = parse(&[
            ("external_ref", "ch_1"),
            ("currency", "SAR"),
            ("status", "settled"),
            ("settled_at", "0000-06-01T00:00:00Z"),
            ("amount", "1"),
            ("fee", "2"),
        ]);
        assert_eq!(
            fee_over,
            Err(vec![
                "settled_at: \"0000-06-01T00:00:00Z\" is out of range (years 0001 to 9999 in UTC)"
                    .to_owned(),
                "fee: 2.00 exceeds the amount 1.00".to_owned(),
            ])
        );
    }

    #[test]
    fn columns_map_to_other_headers() {
        let c = Columns::new(&["payment_id=PaymentID".into(), "amount=Gross".into()]).unwrap();
        assert_eq!(c.as_map()["payment_id"], "PaymentID");
        assert_eq!(c.as_map()["currency"], "currency");
        assert!(Columns::new(&["nope=X".into()]).is_err());
        assert!(Columns::new(&["amount".into()]).is_err());
    }
}
