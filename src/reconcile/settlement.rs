//! Reading a provider's settlement file: streamed record by record, each line parsed exactly
//! (amounts with `rust_decimal` against the currency's exponent: more decimals than the
//! currency has is an `unparsable_row`, never a rounding), good lines sent to PostgreSQL with
//! `COPY`, bad ones kept as exceptions with their line number.

use super::model::Exception;
use crate::ledger::money::{Currency, MAX_AMOUNT};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
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
    pub status: &'static str,
    pub amount: i64,
    pub fee: i64,
    pub settled_at: DateTime<Utc>,
    pub payout_ref: Option<String>,
}

/// `text` in major units → minor units of `currency`, exactly.
pub fn parse_amount(text: &str, currency: Currency, field: &str) -> Result<i64, String> {
    let text = text.trim();
    let value = Decimal::from_str_exact(text)
        .map_err(|_| format!("{field}: {text:?} is not a decimal number"))?;
    if value.is_sign_negative() {
        return Err(format!("{field}: {text} is negative"));
    }
    if value.scale() > currency.exponent() {
        return Err(format!(
            "{field}: {text} has more decimals than {currency} allows ({})",
            currency.exponent()
        ));
    }
    value
        .checked_mul(Decimal::from(10_i64.pow(currency.exponent())))
        .and_then(|minor| minor.to_i64())
        .filter(|minor| *minor <= MAX_AMOUNT)
        .ok_or_else(|| format!("{field}: {text} is out of range"))
}

/// Parses one record; `Err` holds the reasons it is unparsable.
fn parse_record(get: impl Fn(&str) -> Option<String>, line: u64) -> Result<Line, Vec<String>> {
    let mut reasons = Vec::new();
    let text = |field: &str| {
        get(field)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let payment_id = match text("payment_id") {
        None => None,
        Some(id) => match Uuid::parse_str(&id) {
            Ok(id) => Some(id),
            Err(_) => {
                reasons.push(format!("payment_id: {id:?} is not a UUID"));
                None
            }
        },
    };
    let external_ref = text("external_ref");
    if payment_id.is_none() && external_ref.is_none() && reasons.is_empty() {
        reasons.push("payment_id: missing (and no external_ref)".to_owned());
    }
    let currency = match text("currency") {
        None => {
            reasons.push("currency: missing".to_owned());
            None
        }
        Some(code) => Currency::parse(&code).or_else(|| {
            reasons.push(format!("currency: {code:?} is not an ISO 4217 code"));
            None
        }),
    };
    let status = match text("status").as_deref() {
        Some("settled") => Some("settled"),
        Some("refunded") => Some("refunded"),
        Some("failed") => Some("failed"),
        Some(other) => {
            reasons.push(format!(
                "status: {other:?} is not settled, refunded or failed"
            ));
            None
        }
        None => {
            reasons.push("status: missing".to_owned());
            None
        }
    };
    let settled_at = match text("settled_at") {
        None => {
            reasons.push("settled_at: missing".to_owned());
            None
        }
        Some(t) => DateTime::parse_from_rfc3339(&t)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                reasons.push(format!("settled_at: {t:?} is not an RFC 3339 time"));
            })
            .ok(),
    };
    let (mut amount, mut fee) = (None, Some(0));
    if let Some(currency) = currency {
        amount = match text("amount") {
            None => {
                reasons.push("amount: missing".to_owned());
                None
            }
            Some(a) => parse_amount(&a, currency, "amount")
                .map_err(|r| reasons.push(r))
                .ok(),
        };
        fee = match text("fee") {
            None => Some(0),
            Some(f) => parse_amount(&f, currency, "fee")
                .map_err(|r| reasons.push(r))
                .ok(),
        };
        if let (Some(a), Some(f)) = (amount, fee)
            && f > a
        {
            reasons.push(format!(
                "fee: {} exceeds the amount {}",
                currency.format(f),
                currency.format(a)
            ));
        }
    }
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

/// What reading the file produced.
#[derive(Debug, Default)]
pub struct Imported {
    pub rows: i64,
    pub parsed: i64,
    pub unparsable: Vec<Exception>,
}

/// Streams the file at `path` into `settlement_lines` for `run_id` with `COPY`.
pub async fn import(
    conn: &mut PgConnection,
    run_id: Uuid,
    path: &Path,
    columns: &Columns,
) -> anyhow::Result<Imported> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path)?;
    let headers = reader.byte_headers()?.clone();
    let index: HashMap<&str, usize> = columns
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

    let mut copy = conn
        .copy_in_raw(
            "copy settlement_lines (run_id, line, payment_id, external_ref, currency, status, amount, fee,
                                    settled_at, payout_ref) from stdin (format csv)",
        )
        .await?;
    let mut imported = Imported::default();
    let mut buffer = csv::Writer::from_writer(Vec::with_capacity(COPY_CHUNK_BYTES));
    let mut record = csv::ByteRecord::new();
    loop {
        let line = reader.position().line() + 1;
        let more = match reader.read_byte_record(&mut record) {
            Ok(more) => more,
            Err(e) => {
                imported.rows += 1;
                imported
                    .unparsable
                    .push(unparsable(line, vec![format!("unreadable: {e}")]));
                continue;
            }
        };
        if !more {
            break;
        }
        imported.rows += 1;
        let line = record.position().map_or(line, |p| p.line());
        let get = |field: &str| -> Option<String> {
            let raw = record.get(*index.get(field)?)?;
            Some(String::from_utf8(raw.to_vec()).unwrap_or_else(|_| "\u{fffd}".to_owned()))
        };
        match parse_record(get, line) {
            Ok(parsed) => {
                imported.parsed += 1;
                buffer.write_record([
                    run_id.to_string(),
                    parsed.line.to_string(),
                    parsed.payment_id.map(|p| p.to_string()).unwrap_or_default(),
                    parsed.external_ref.unwrap_or_default(),
                    parsed.currency.code().to_owned(),
                    parsed.status.to_owned(),
                    parsed.amount.to_string(),
                    parsed.fee.to_string(),
                    parsed.settled_at.to_rfc3339(),
                    parsed.payout_ref.unwrap_or_default(),
                ])?;
            }
            Err(reasons) => imported.unparsable.push(unparsable(line, reasons)),
        }
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

fn unparsable(line: u64, reasons: Vec<String>) -> Exception {
    Exception {
        code: "unparsable_row".to_owned(),
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
    fn columns_map_to_other_headers() {
        let c = Columns::new(&["payment_id=PaymentID".into(), "amount=Gross".into()]).unwrap();
        assert_eq!(c.as_map()["payment_id"], "PaymentID");
        assert_eq!(c.as_map()["currency"], "currency");
        assert!(Columns::new(&["nope=X".into()]).is_err());
        assert!(Columns::new(&["amount".into()]).is_err());
    }
}
