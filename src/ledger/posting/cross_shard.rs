//! The journal rules that span shards, on Citus: checked by the write path after it inserted
//! entries, in the same transaction, before COMMIT.
//!
//! On one PostgreSQL the entries trigger checks every rule. On Citus it runs on each shard of
//! `entries` and sees only that shard (a wallet's chain, an entry against its co-located
//! account; see migrations/citus/distribute.sql). A transaction's entries are spread over
//! the shards of its accounts and its row lives on the shard of its id, so three rules are
//! checked here, on the rows the inserts returned or by reads planned on the coordinator,
//! which see this transaction's own writes:
//! the entries of each transaction sum to zero per currency; all of them were written by
//! this database transaction (the write path writes a transaction's entries in one
//! statement); each fits its transaction (exists, posted, in its currency or an exchange's
//! counter currency). A breach rolls the
//! transaction back with the trigger's own error (SQLSTATE 23514 and message), so callers
//! see what they see on one node. `verify` checks the same rules over the whole journal.

use crate::ledger::transactions::TransactionStatus;
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashSet};
use uuid::Uuid;

/// Refuses the current transaction's entries of `transactions` when they break a rule
/// that spans shards.
///
/// `inserted` are transaction rows this database transaction inserted, as the insert's
/// `RETURNING` gave them back (the posting path's new rows), and `written` the entries the
/// entries insert returned. A transaction inserted here has no entries but those: its id was
/// free until this transaction's insert took it, the write path writes a transaction's
/// entries only after its row, and a concurrent create of the same id skips its row and
/// writes nothing. So its rules are judged on the rows the two inserts returned, with no
/// read at all (entries of that id written by hand on the cluster before it existed are
/// `verify`'s to report, as any SQL written by hand). The posting path's check sends no
/// statement (docs/scaling.md, "The cross-shard check from the inserts' rows").
///
/// The others (a hold's capture writes entries of a transaction inserted before) are read:
/// their entries summed on the accounts just written (`accounts`, which Citus prunes to their
/// shards), and their rows. Entries' `xid` is the coordinator's (its default is evaluated
/// where the statement is planned), so "written by this transaction" compares it with the
/// coordinator's `pg_current_xact_id()`, read first (a statement on the coordinator alone).
/// Two plain distributed reads, each pushed down to the shards and merged on the coordinator,
/// and the verdict in [`breach`]: one query joining both tables (they are not co-located)
/// made Citus run each side as a subplan through intermediate results (docs/performance.md,
/// "The cross-shard check in two reads").
pub async fn check(
    conn: &mut PgConnection,
    transactions: &[Uuid],
    accounts: &[&str],
    inserted: &[TransactionRow],
    written: &[WrittenEntry],
) -> Result<(), sqlx::Error> {
    let unread = not_inserted(transactions, inserted);
    let mut sums = sums_of_written(written, inserted);
    let mut read = Vec::new();
    if !unread.is_empty() {
        sums.extend(read_sums(conn, &unread, accounts).await?);
        read = sqlx::query_as!(
            TransactionRow,
            r#"select id, currency, counter_currency, status from transactions where id = any($1)"#,
            &unread
        )
        .fetch_all(&mut *conn)
        .await?;
    }
    let Some(refusal) = breach(&sums, inserted.iter().chain(&read)) else {
        return Ok(());
    };
    // Raised by the database, so that the error is the trigger's own: a check_violation
    // that aborts the transaction, mapped by the callers exactly as on one node.
    sqlx::query("select wallet_ledger_refuse($1)")
        .bind(refusal)
        .execute(&mut *conn)
        .await?;
    unreachable_refusal(refusal)
}

/// The stored entries of `transactions` on `accounts`, summed per transaction and currency.
async fn read_sums(
    conn: &mut PgConnection,
    transactions: &[Uuid],
    accounts: &[&str],
) -> Result<Vec<EntrySums>, sqlx::Error> {
    let current: String = sqlx::query_scalar!(r#"select pg_current_xact_id()::text as "x!""#)
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query_as!(
        EntrySums,
        r#"select transaction_id as "transaction_id!", currency as "currency!",
                  sum(amount) = 0 as "balanced!",
                  bool_and(xid = $3::text::xid8) as "this_transaction!"
           from entries where account_id = any($2) and transaction_id = any($1)
           group by transaction_id, currency"#,
        transactions,
        accounts as &[&str],
        current
    )
    .fetch_all(&mut *conn)
    .await
}

/// An entry as the entries insert returned it.
#[derive(Debug, sqlx::FromRow)]
pub struct WrittenEntry {
    transaction_id: Uuid,
    currency: String,
    amount: i64,
}

impl WrittenEntry {
    /// An entry as written by an insert that returns no rows (one call per shard writes
    /// every row it is given, or fails).
    pub fn new(transaction_id: Uuid, currency: &str, amount: i64) -> WrittenEntry {
        let currency = currency.to_owned();
        WrittenEntry {
            transaction_id,
            currency,
            amount,
        }
    }
}

/// The sums of `written` entries whose transaction is among the rows `inserted`, per
/// transaction and currency: all of that transaction's entries, written by this statement.
fn sums_of_written(written: &[WrittenEntry], inserted: &[TransactionRow]) -> Vec<EntrySums> {
    let new: HashSet<Uuid> = inserted.iter().map(|t| t.id).collect();
    let mut totals: BTreeMap<(Uuid, &str), i128> = BTreeMap::new();
    for e in written.iter().filter(|e| new.contains(&e.transaction_id)) {
        *totals.entry((e.transaction_id, &e.currency)).or_default() += i128::from(e.amount);
    }
    totals
        .into_iter()
        .map(|((transaction_id, currency), total)| EntrySums {
            transaction_id,
            currency: currency.to_owned(),
            balanced: total == 0,
            this_transaction: true,
        })
        .collect()
}

/// A transaction's entries in one currency, summed over the shards.
#[derive(Debug)]
struct EntrySums {
    transaction_id: Uuid,
    currency: String,
    balanced: bool,
    /// Every one written by the current database transaction.
    this_transaction: bool,
}

/// A transaction row as the entries must fit it.
#[derive(Debug, sqlx::FromRow, serde::Deserialize)]
pub struct TransactionRow {
    id: Uuid,
    currency: String,
    /// An exchange's second currency.
    counter_currency: Option<String>,
    status: String,
}

/// The ids of `transactions` that are not among the rows `inserted`: those the check reads.
fn not_inserted(transactions: &[Uuid], inserted: &[TransactionRow]) -> Vec<Uuid> {
    let known: HashSet<Uuid> = inserted.iter().map(|t| t.id).collect();
    transactions
        .iter()
        .filter(|id| !known.contains(id))
        .copied()
        .collect()
}

impl TransactionRow {
    /// Whether entries in `currency` belong to it: its own, or an exchange's counter currency.
    fn holds(&self, currency: &str) -> bool {
        self.currency == currency || self.counter_currency.as_deref() == Some(currency)
    }

    /// A status the code does not know is not posted: the entries do not fit it.
    fn is_posted(&self) -> bool {
        TransactionStatus::parse(&self.status) == Some(TransactionStatus::Posted)
    }
}

/// The first rule the entries break, as the trigger words it on one node.
fn breach<'a>(
    sums: &[EntrySums],
    transactions: impl IntoIterator<Item = &'a TransactionRow> + Clone,
) -> Option<&'static str> {
    let fits = |e: &EntrySums| {
        transactions
            .clone()
            .into_iter()
            .any(|t| t.id == e.transaction_id && t.holds(&e.currency) && t.is_posted())
    };
    if sums.iter().any(|e| !e.balanced) {
        Some("unbalanced transaction: entries must sum to zero per currency")
    } else if sums.iter().any(|e| !e.this_transaction) {
        Some("entries of a transaction must all be written in one statement")
    } else if !sums.iter().all(fits) {
        Some("entry does not fit its account or transaction (currency, status, wallet chain)")
    } else {
        None
    }
}

fn unreachable_refusal(refusal: &str) -> Result<(), sqlx::Error> {
    Err(sqlx::Error::Protocol(format!(
        "wallet_ledger_refuse did not raise: {refusal}"
    )))
}

#[cfg(test)]
mod tests {
    use super::{EntrySums, TransactionRow, WrittenEntry, breach, not_inserted, sums_of_written};
    use uuid::Uuid;

    fn sums(balanced: bool, this_transaction: bool) -> EntrySums {
        EntrySums {
            transaction_id: Uuid::from_u128(1),
            currency: "SAR".into(),
            balanced,
            this_transaction,
        }
    }

    fn posted(currency: &str, status: &str) -> Vec<TransactionRow> {
        vec![TransactionRow {
            id: Uuid::from_u128(1),
            currency: currency.into(),
            counter_currency: None,
            status: status.into(),
        }]
    }

    #[test]
    fn an_exchanges_entries_fit_in_either_of_its_currencies() {
        let mut rows = posted("USD", "posted");
        assert!(breach(&[sums(true, true)], &rows).is_some());
        rows[0].counter_currency = Some("SAR".into());
        assert_eq!(breach(&[sums(true, true)], &rows), None);
    }

    #[test]
    fn balanced_entries_of_this_transaction_that_fit_pass() {
        assert_eq!(breach(&[sums(true, true)], &posted("SAR", "posted")), None);
        assert_eq!(breach(&[], &[]), None);
    }

    #[test]
    fn each_rule_is_named_first_unbalanced_then_earlier_then_misfit() {
        let unbalanced = breach(&[sums(false, false)], &[]).unwrap();
        assert!(unbalanced.starts_with("unbalanced transaction"));
        let earlier = breach(&[sums(true, false)], &[]).unwrap();
        assert!(earlier.contains("written in one statement"));
        for rows in [vec![], posted("USD", "posted"), posted("SAR", "pending")] {
            let misfit = breach(&[sums(true, true)], &rows).unwrap();
            assert!(misfit.starts_with("entry does not fit"), "{rows:?}");
        }
    }

    #[test]
    fn only_transactions_not_inserted_by_this_transaction_are_read() {
        let inserted = posted("SAR", "posted");
        let (mine, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(not_inserted(&[mine, other], &inserted), vec![other]);
        assert_eq!(not_inserted(&[mine], &inserted), Vec::<Uuid>::new());
        assert_eq!(not_inserted(&[mine, other], &[]), vec![mine, other]);
    }

    fn written(transaction: u128, currency: &str, amount: i64) -> WrittenEntry {
        WrittenEntry {
            transaction_id: Uuid::from_u128(transaction),
            currency: currency.into(),
            amount,
        }
    }

    #[test]
    fn entries_of_an_inserted_transaction_are_judged_as_returned() {
        let inserted = posted("SAR", "posted");
        let pair = [written(1, "SAR", 5), written(1, "SAR", -5)];
        assert_eq!(breach(&sums_of_written(&pair, &inserted), &inserted), None);
        let one_more = [
            written(1, "SAR", 5),
            written(1, "SAR", -5),
            written(1, "SAR", 7),
        ];
        let refused = breach(&sums_of_written(&one_more, &inserted), &inserted).unwrap();
        assert!(refused.starts_with("unbalanced transaction"));
        let other_currency = [written(1, "USD", 4), written(1, "USD", -4)];
        let refused = breach(&sums_of_written(&other_currency, &inserted), &inserted).unwrap();
        assert!(refused.starts_with("entry does not fit"));
    }

    #[test]
    fn sums_of_extreme_amounts_do_not_overflow() {
        let inserted = posted("SAR", "posted");
        let extremes = [written(1, "SAR", i64::MAX), written(1, "SAR", i64::MAX)];
        let sums = sums_of_written(&extremes, &inserted);
        assert_eq!(sums.len(), 1);
        assert!(!sums[0].balanced);
    }

    #[test]
    fn entries_of_transactions_not_inserted_here_are_left_to_the_read() {
        let inserted = posted("SAR", "posted");
        let capture = [written(2, "SAR", 5), written(2, "SAR", -5)];
        assert!(sums_of_written(&capture, &inserted).is_empty());
        assert!(sums_of_written(&capture, &[]).is_empty());
    }
}
