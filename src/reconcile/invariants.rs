//! The ledger's own invariants, checked set-based in PostgreSQL: `wallet-ledger verify`.
//!
//! The write path and the schema's triggers already refuse to break these rules; this is the
//! independent audit that proves they held (and finds what a manual SQL session, a restored
//! backup or a bug elsewhere may have done). Every finding names the rows it is about.

use crate::db::Engine;
use crate::ledger::store::Db;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

/// One broken invariant, with the rows that show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Finding {
    #[schema(inline)]
    pub check: Check,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction: Option<Uuid>,
    pub detail: String,
}

/// Which invariant a finding breaks, by its stable name: `unbalanced_transaction`,
/// `trial_balance`, `wallet_chain`, `chain_link`, `checkpoint_seal`, `sealed_head`,
/// `sealed_transaction`, `checkpoint_mismatch`, `balance_range`, `posting_mismatch`, `overdue_hold`,
/// `stale_open_hold`, `over_reversed`, `entry_mismatch`, `set_totals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    UnbalancedTransaction,
    TrialBalance,
    WalletChain,
    ChainLink,
    CheckpointSeal,
    SealedHead,
    SealedTransaction,
    CheckpointMismatch,
    BalanceRange,
    PostingMismatch,
    OverdueHold,
    StaleOpenHold,
    OverReversed,
    EntryMismatch,
    SetTotals,
}

impl Check {
    /// Every check, in the order they run (the report lists each, found or not).
    pub const ALL: [Check; 15] = [
        Check::UnbalancedTransaction,
        Check::TrialBalance,
        Check::WalletChain,
        Check::ChainLink,
        Check::CheckpointSeal,
        Check::SealedHead,
        Check::SealedTransaction,
        Check::CheckpointMismatch,
        Check::BalanceRange,
        Check::PostingMismatch,
        Check::OverdueHold,
        Check::StaleOpenHold,
        Check::OverReversed,
        Check::EntryMismatch,
        Check::SetTotals,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Check::UnbalancedTransaction => "unbalanced_transaction",
            Check::TrialBalance => "trial_balance",
            Check::WalletChain => "wallet_chain",
            Check::ChainLink => "chain_link",
            Check::CheckpointSeal => "checkpoint_seal",
            Check::SealedHead => "sealed_head",
            Check::SealedTransaction => "sealed_transaction",
            Check::CheckpointMismatch => "checkpoint_mismatch",
            Check::BalanceRange => "balance_range",
            Check::PostingMismatch => "posting_mismatch",
            Check::OverdueHold => "overdue_hold",
            Check::StaleOpenHold => "stale_open_hold",
            Check::OverReversed => "over_reversed",
            Check::EntryMismatch => "entry_mismatch",
            Check::SetTotals => "set_totals",
        }
    }
}

impl std::fmt::Display for Check {
    /// Padded like a `str`, so that `verify`'s table lines up.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A hold still pending this long after its expiry means the sweeper is not running.
pub const DEFAULT_HOLD_GRACE_MS: u64 = 60_000;

/// `--hold-grace-ms` as a duration; one longer than a `TimeDelta` holds (about 292 million
/// years) is taken as the longest, which no hold can be overdue by.
pub fn hold_grace(ms: u64) -> TimeDelta {
    i64::try_from(ms)
        .ok()
        .and_then(TimeDelta::try_milliseconds)
        .unwrap_or(TimeDelta::MAX)
}

/// Most findings reported per check: a corrupted table should not produce a report the size
/// of the table.
pub const MAX_FINDINGS_PER_CHECK: i64 = 100;

/// Runs every check in one repeatable-read snapshot (so concurrent writers cannot make the
/// books look unbalanced halfway through a transaction) and returns what it found.
pub async fn check(db: &mut Db<'_>, hold_grace: TimeDelta) -> Result<Vec<Finding>, sqlx::Error> {
    let engine = db.engine();
    let mut tx = crate::ledger::begin_snapshot(db.conn()).await?;
    crate::db::tune_for_batch_job(&mut tx).await?;
    if engine == Engine::Citus {
        // Joins of entries or open_holds (by account) with transactions (by id) need Citus to
        // repartition one side; the checks that Citus cannot run that way have a form of their
        // own below, which brings the smaller side to the coordinator first.
        sqlx::query("select set_config('citus.enable_repartition_joins', 'on', true)")
            .execute(&mut *tx)
            .await?;
    }
    let mut findings = Vec::new();
    findings.extend(unbalanced_transactions(&mut tx).await?);
    findings.extend(trial_balance(&mut tx).await?);
    findings.extend(wallet_chains(&mut tx).await?);
    findings.extend(chain_links(&mut tx).await?);
    findings.extend(super::seals::check(&mut tx).await?);
    findings.extend(checkpoints(&mut tx).await?);
    findings.extend(balances_out_of_range(&mut tx).await?);
    let mut db = Db::new(&mut tx, engine);
    findings.extend(posting_mismatches(&mut db).await?);
    findings.extend(overdue_holds(&mut db, hold_grace).await?);
    findings.extend(over_reversed(&mut db).await?);
    let mut mismatches = entry_currencies(&mut db).await?;
    mismatches.extend(entries_against_legs(&mut db).await?);
    mismatches.truncate(MAX_FINDINGS_PER_CHECK as usize);
    findings.extend(mismatches);
    findings.extend(super::set_totals::check(&mut db).await?);
    tx.commit().await?;
    Ok(findings)
}

/// Every transaction's entries sum to zero per currency.
async fn unbalanced_transactions(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select transaction_id, currency, sum(amount)::bigint as "sum!"
           from entries group by transaction_id, currency having sum(amount) <> 0
           order by transaction_id limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Finding {
            check: Check::UnbalancedTransaction,
            account: None,
            entry: None,
            transaction: Some(r.transaction_id),
            detail: format!("entries in {} sum to {} instead of 0", r.currency, r.sum),
        })
        .collect())
}

/// The trial balance of each currency (all accounts together) is zero.
async fn trial_balance(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select currency, sum(amount)::bigint as "sum!" from entries
           group by currency having sum(amount) <> 0 order by currency"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Finding {
            check: Check::TrialBalance,
            account: None,
            entry: None,
            transaction: None,
            detail: format!(
                "all accounts in {} sum to {} instead of 0",
                r.currency, r.sum
            ),
        })
        .collect())
}

/// Every wallet entry's running balance equals the recomputed sum of the account's entries
/// up to it, and sequences run 1, 2, 3... with no gap.
async fn wallet_chains(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select account_id as "account_id!", id as "id!", sequence as "sequence!",
                  balance_after as "balance_after!", recomputed as "recomputed!", expected as "expected!"
           from (select account_id, id, sequence, balance_after,
                        sum(amount) over w::bigint as recomputed,
                        row_number() over w as expected
                 from entries where sequence is not null
                 window w as (partition by account_id order by sequence)) chain
           where balance_after <> recomputed or sequence <> expected
           order by account_id, sequence limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let detail = if r.sequence != r.expected {
                format!(
                    "sequence {} where {} was due (a gap or a repeat)",
                    r.sequence, r.expected
                )
            } else {
                format!(
                    "running balance {} at sequence {}, but the entries sum to {}",
                    r.balance_after, r.sequence, r.recomputed
                )
            };
            Finding {
                check: Check::WalletChain,
                account: Some(r.account_id),
                entry: Some(r.id),
                transaction: None,
                detail,
            }
        })
        .collect())
}

/// Every linked wallet entry's `chain_hash` is the link recomputed from the entry as stored and
/// the link of the entry now before it (`entry_chain_hash`, docs/verification.md). An entry
/// changed after it was written fails its own link; one removed, the entry after the gap; one
/// moved to another place in its chain, its own link and that of the entry after its new place.
/// Entries written before links existed (none on a chain's linked part) are not checked.
async fn chain_links(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select account_id as "account_id!", id as "id!", sequence as "sequence!",
                  chain_hash is null as "unlinked!"
           from (select account_id, id, sequence, chain_hash,
                        entry_chain_hash(lag(chain_hash) over w, transaction_id, account_id,
                                         currency, amount, sequence, balance_after,
                                         ledger_time, effective_at) as recomputed,
                        bool_or(chain_hash is not null) over w as linked
                 from entries where sequence is not null
                 window w as (partition by account_id order by sequence)) chain
           where linked and chain_hash is distinct from recomputed
           order by account_id, sequence limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let detail = if r.unlinked {
                format!("sequence {} has no link, after linked entries", r.sequence)
            } else {
                format!(
                    "the link at sequence {} is not the hash of the entry and the link before it",
                    r.sequence
                )
            };
            Finding {
                check: Check::ChainLink,
                account: Some(r.account_id),
                entry: Some(r.id),
                transaction: None,
                detail,
            }
        })
        .collect())
}

/// Every system-account checkpoint equals the sum and count of the entries below its line.
async fn checkpoints(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select c.account_id, c.posted, c.entry_count,
                  coalesce(e.sum, 0)::bigint as "sum!", coalesce(e.count, 0)::bigint as "count!"
           from account_checkpoints c
           left join lateral (
               select sum(amount) as sum, count(*) as count from entries
               where account_id = c.account_id and sequence is null and xid < c.below_xid) e on true
           where c.posted <> coalesce(e.sum, 0) or c.entry_count <> coalesce(e.count, 0)
           order by c.account_id limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Finding {
            check: Check::CheckpointMismatch,
            account: Some(r.account_id),
            entry: None,
            transaction: None,
            detail: format!(
                "checkpoint says {} over {} entries; the entries below it sum to {} over {}",
                r.posted, r.entry_count, r.sum, r.count
            ),
        })
        .collect())
}

/// The four figures a balance read shows are within ±(2^53 − 1) for every account: `posted`
/// (all its entries), `pending_in` and `pending_out` (its open, unexpired holds, as
/// `open_hold_totals` counts them) and `available = posted − pending_out`. Summed as numeric
/// over the whole journal, independent of checkpoints: an account out of range is exactly the
/// one whose checkpoints cannot be written. The hold sums repeat the view's filter rather than
/// read the view, which saturates its totals at the edge of the range.
async fn balances_out_of_range(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"with sums as (
               select account_id, sum(amount) as posted, 0::numeric as pending_in,
                      0::numeric as pending_out
               from entries group by account_id
               union all
               select account_id, 0, coalesce(sum(amount) filter (where amount > 0), 0),
                      coalesce(sum(-amount) filter (where amount < 0), 0)
               from open_holds where expires_at > now() group by account_id),
           totals as (
               select account_id, sum(posted) as posted, sum(pending_in) as pending_in,
                      sum(pending_out) as pending_out
               from sums group by account_id)
           select account_id as "account_id!", posted::text as "posted!",
                  pending_in::text as "pending_in!", pending_out::text as "pending_out!",
                  (posted - pending_out)::text as "available!"
           from totals
           where posted not between -9007199254740991 and 9007199254740991
              or pending_in > 9007199254740991 or pending_out > 9007199254740991
              or posted - pending_out < -9007199254740991
           order by account_id limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Finding {
            check: Check::BalanceRange,
            account: Some(r.account_id),
            entry: None,
            transaction: None,
            detail: format!(
                "posted {}, pending_in {}, pending_out {}, available {}: outside ±9007199254740991",
                r.posted, r.pending_in, r.pending_out, r.available
            ),
        })
        .collect())
}

/// Posted transactions have entries and nothing else does.
async fn posting_mismatches(db: &mut Db<'_>) -> Result<Vec<Finding>, sqlx::Error> {
    let (engine, conn) = (db.engine(), db.conn());
    // A transaction's entries are written by one statement of one database transaction (the
    // journal trigger refuses more on one node; on Citus each shard sees only its part), so
    // they all carry one `xid`: more than one means entries were added later.
    let split = sqlx::query_scalar!(
        r#"select transaction_id as "transaction_id!" from entries
           group by transaction_id having min(xid) <> max(xid)
           order by transaction_id limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(&mut *conn)
    .await?;
    let split = split.into_iter().map(|id| Finding {
        check: Check::PostingMismatch,
        account: None,
        entry: None,
        transaction: Some(id),
        detail: "entries written by more than one database transaction".to_owned(),
    });
    let rows: Vec<(Uuid, String, bool)> = match engine {
        Engine::Plain => sqlx::query!(
            r#"select t.id, t.status, exists (select 1 from entries e where e.transaction_id = t.id) as "has_entries!"
               from transactions t
               where (t.status = 'posted') <> exists (select 1 from entries e where e.transaction_id = t.id)
               order by t.seq limit $1"#,
            MAX_FINDINGS_PER_CHECK
        )
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|r| (r.id, r.status, r.has_entries))
        .collect(),
        // Citus cannot correlate entries (by account) with transactions (by id): the ids of
        // the transactions with entries come to the coordinator first.
        Engine::Citus => sqlx::query!(
            r#"with has as materialized (select distinct transaction_id from entries)
               select t.id, t.status, h.transaction_id is not null as "has_entries!"
               from transactions t left join has h on h.transaction_id = t.id
               where (t.status = 'posted') <> (h.transaction_id is not null)
               order by t.seq limit $1"#,
            MAX_FINDINGS_PER_CHECK
        )
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|r| (r.id, r.status, r.has_entries))
        .collect(),
    };
    Ok(split
        .chain(rows.into_iter().map(|(id, status, has_entries)| Finding {
            check: Check::PostingMismatch,
            account: None,
            entry: None,
            transaction: Some(id),
            detail: if has_entries {
                format!("a {status} transaction has entries")
            } else {
                "a posted transaction has no entries".to_owned()
            },
        }))
        .take(MAX_FINDINGS_PER_CHECK as usize)
        .collect())
}

/// Every entry is in its account's currency and one of its transaction's (its own, or an
/// exchange's counter currency; the triggers check it on
/// insert; a currency changed later mislabels money without unbalancing anything), and
/// carries its transaction's effective date (a backdated transaction's, or none).
async fn entry_currencies(db: &mut Db<'_>) -> Result<Vec<Finding>, sqlx::Error> {
    let (engine, conn) = (db.engine(), db.conn());
    let rows = match engine {
        Engine::Plain => {
            sqlx::query_as!(
                EntryCurrencies,
                r#"select e.id, e.account_id, e.transaction_id, e.currency,
                          a.currency as account_currency, t.currency as "transaction_currency?",
                          t.counter_currency as "counter_currency?",
                          e.effective_at, t.effective_at as "transaction_effective_at?"
                   from entries e
                   join accounts a on a.id = e.account_id
                   left join transactions t on t.id = e.transaction_id
                   where e.currency <> a.currency
                      or t.id is null
                      or (e.currency <> t.currency and e.currency is distinct from t.counter_currency)
                      or e.effective_at is distinct from t.effective_at
                   order by e.id limit $1"#,
                MAX_FINDINGS_PER_CHECK
            )
            .fetch_all(conn)
            .await?
        }
        // Citus joins entries with accounts on each shard (co-located), but an outer join
        // with transactions (another distribution) only against a result on the coordinator.
        Engine::Citus => {
            sqlx::query_as!(
                EntryCurrencies,
                r#"with t as materialized (select id, currency, counter_currency, effective_at
                                          from transactions)
                   select e.id, e.account_id, e.transaction_id, e.currency,
                          a.currency as account_currency, t.currency as "transaction_currency?",
                          t.counter_currency as "counter_currency?",
                          e.effective_at, t.effective_at as "transaction_effective_at?"
                   from entries e
                   join accounts a on a.id = e.account_id
                   left join t on t.id = e.transaction_id
                   where e.currency <> a.currency
                      or t.id is null
                      or (e.currency <> t.currency and e.currency is distinct from t.counter_currency)
                      or e.effective_at is distinct from t.effective_at
                   order by e.id limit $1"#,
                MAX_FINDINGS_PER_CHECK
            )
            .fetch_all(conn)
            .await?
        }
    };
    Ok(rows
        .into_iter()
        .map(|r| Finding {
            check: Check::EntryMismatch,
            detail: entry_mismatch(&r),
            account: Some(r.account_id),
            entry: Some(r.id),
            transaction: Some(r.transaction_id),
        })
        .collect())
}

fn entry_mismatch(r: &EntryCurrencies) -> String {
    let shown = |t: Option<DateTime<Utc>>| t.map_or("none".to_owned(), |t| t.to_rfc3339());
    match &r.transaction_currency {
        None => format!(
            "entry in {} on an account in {} for a transaction that does not exist",
            r.currency, r.account_currency
        ),
        Some(t) if !r.fits_transaction(t) || r.currency != r.account_currency => format!(
            "entry in {} on an account in {} for a transaction in {}",
            r.currency,
            r.account_currency,
            match &r.counter_currency {
                Some(counter) => format!("{t} and {counter}"),
                None => t.clone(),
            }
        ),
        Some(_) => format!(
            "entry effective at {} for a transaction effective at {}",
            shown(r.effective_at),
            shown(r.transaction_effective_at)
        ),
    }
}

struct EntryCurrencies {
    id: i64,
    account_id: String,
    transaction_id: Uuid,
    currency: String,
    account_currency: String,
    transaction_currency: Option<String>,
    /// An exchange's second currency.
    counter_currency: Option<String>,
    effective_at: Option<DateTime<Utc>>,
    transaction_effective_at: Option<DateTime<Utc>>,
}

impl EntryCurrencies {
    /// Whether the entry is in its transaction's currency (`transaction`) or its counter one.
    fn fits_transaction(&self, transaction: &str) -> bool {
        self.currency == transaction || self.counter_currency.as_deref() == Some(&self.currency)
    }
}

/// A posted transaction's entries post, to each account, what its legs say (a captured hold:
/// the captured amount with each leg's sign). An entry moved to another account, or one
/// added or removed, breaks it even when every sum still balances.
async fn entries_against_legs(db: &mut Db<'_>) -> Result<Vec<Finding>, sqlx::Error> {
    let (engine, conn) = (db.engine(), db.conn());
    if engine == Engine::Citus {
        return entries_against_legs_citus(conn).await;
    }
    let rows = sqlx::query_as!(
        LegMismatch,
        r#"with posted_tx as (
               select t.id, t.legs, t.captured_amount from transactions t
               where t.status = 'posted'
                 and exists (select 1 from entries x where x.transaction_id = t.id)),
           legs as (
               select t.id as transaction_id, leg ->> 'account' as account_id,
                      sum(case when t.captured_amount is null then (leg ->> 'amount')::bigint
                               else sign((leg ->> 'amount')::bigint)::bigint * t.captured_amount
                          end) as amount
               from posted_tx t cross join jsonb_array_elements(t.legs) leg
               group by 1, 2),
           posted as (
               select e.transaction_id, e.account_id, sum(e.amount) as amount
               from entries e join posted_tx t on t.id = e.transaction_id
               group by 1, 2)
           select coalesce(l.transaction_id, p.transaction_id) as "transaction_id!",
                  coalesce(l.account_id, p.account_id) as "account_id!",
                  coalesce(l.amount, 0)::text as "legs!", coalesce(p.amount, 0)::text as "posted!"
           from legs l
           full join posted p on p.transaction_id = l.transaction_id and p.account_id = l.account_id
           where l.amount is distinct from p.amount
           order by 1, 2 limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(LegMismatch::finding).collect())
}

/// [`entries_against_legs`] on Citus, which correlates entries (by account) with
/// transactions (by id) only through results on the coordinator: the ids of transactions with
/// entries, then the posted ones among them, then their entries.
async fn entries_against_legs_citus(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query_as!(
        LegMismatch,
        r#"with touched as materialized (select distinct transaction_id from entries),
           posted_tx as materialized (
               select t.id, t.legs, t.captured_amount from transactions t
               join touched x on x.transaction_id = t.id
               where t.status = 'posted'),
           legs as materialized (
               select t.id as transaction_id, leg ->> 'account' as account_id,
                      sum(case when t.captured_amount is null then (leg ->> 'amount')::bigint
                               else sign((leg ->> 'amount')::bigint)::bigint * t.captured_amount
                          end) as amount
               from posted_tx t cross join jsonb_array_elements(t.legs) leg
               group by 1, 2),
           posted as materialized (
               select e.transaction_id, e.account_id, sum(e.amount) as amount
               from entries e join posted_tx t on t.id = e.transaction_id
               group by 1, 2)
           select coalesce(l.transaction_id, p.transaction_id) as "transaction_id!",
                  coalesce(l.account_id, p.account_id) as "account_id!",
                  coalesce(l.amount, 0)::text as "legs!", coalesce(p.amount, 0)::text as "posted!"
           from legs l
           full join posted p on p.transaction_id = l.transaction_id and p.account_id = l.account_id
           where l.amount is distinct from p.amount
           order by 1, 2 limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(LegMismatch::finding).collect())
}

/// A transaction's entries on one account against what its legs say, as text (sums).
struct LegMismatch {
    transaction_id: Uuid,
    account_id: String,
    legs: String,
    posted: String,
}

impl LegMismatch {
    fn finding(self) -> Finding {
        Finding {
            check: Check::EntryMismatch,
            account: Some(self.account_id),
            entry: None,
            transaction: Some(self.transaction_id),
            detail: format!(
                "entries post {} to this account where the legs say {}",
                self.posted, self.legs
            ),
        }
    }
}

/// A transaction whose reversals give back more than it moved.
struct OverReversed {
    original: Uuid,
    reversed: i64,
    moved: i64,
}

impl OverReversed {
    fn finding(self) -> Finding {
        Finding {
            check: Check::OverReversed,
            account: None,
            entry: None,
            transaction: Some(self.original),
            detail: format!(
                "reversals give back {} of the {} it moved",
                self.reversed, self.moved
            ),
        }
    }
}

/// A hold still pending that expired before this is overdue. `None` when `now − grace` is
/// before any time the ledger can hold (PostgreSQL's 4713 BC): no hold can be that overdue,
/// so a huge grace turns the check off instead of failing on an out-of-range timestamp.
pub fn overdue_before(now: DateTime<Utc>, grace: TimeDelta) -> Option<DateTime<Utc>> {
    let earliest = chrono::NaiveDate::from_ymd_opt(-4712, 1, 2)?
        .and_hms_opt(0, 0, 0)?
        .and_utc();
    now.checked_sub_signed(grace).filter(|t| *t >= earliest)
}

/// No hold stays pending past its expiry by more than `grace` (the sweeper is running), and
/// no open-hold reservation outlives its hold.
async fn overdue_holds(db: &mut Db<'_>, grace: TimeDelta) -> Result<Vec<Finding>, sqlx::Error> {
    let overdue = overdue_pending(db.conn(), grace).await?;
    let stale = stale_open_holds(db).await?;
    let overdue = overdue.into_iter().map(OverdueHold::finding);
    let stale = stale.into_iter().map(StaleHold::finding);
    Ok(overdue.chain(stale).collect())
}

/// A hold still pending past its expiry (and the grace).
struct OverdueHold {
    id: Uuid,
    expires_at: DateTime<Utc>,
}

impl OverdueHold {
    fn finding(self) -> Finding {
        Finding {
            check: Check::OverdueHold,
            account: None,
            entry: None,
            transaction: Some(self.id),
            detail: format!(
                "still pending, expired at {} (is the sweeper running?)",
                self.expires_at.to_rfc3339()
            ),
        }
    }
}

/// An open-hold reservation whose transaction is no longer pending: its status, or `None`
/// when the transaction does not exist.
struct StaleHold {
    transaction: Uuid,
    account: String,
    status: Option<String>,
}

impl StaleHold {
    fn finding(self) -> Finding {
        Finding {
            check: Check::StaleOpenHold,
            account: Some(self.account),
            entry: None,
            transaction: Some(self.transaction),
            detail: match self.status {
                Some(status) => format!("reserves money for a {status} transaction"),
                None => "reserves money for a transaction that does not exist".to_owned(),
            },
        }
    }
}

/// The pending holds that expired more than `grace` before the database's `now()`, oldest
/// first (none when the grace reaches before any storable time, see [`overdue_before`]).
async fn overdue_pending(
    conn: &mut PgConnection,
    grace: TimeDelta,
) -> Result<Vec<OverdueHold>, sqlx::Error> {
    let now: DateTime<Utc> = sqlx::query_scalar!(r#"select now() as "now!""#)
        .fetch_one(&mut *conn)
        .await?;
    let Some(cutoff) = overdue_before(now, grace) else {
        return Ok(Vec::new());
    };
    sqlx::query_as!(
        OverdueHold,
        r#"select id, expires_at as "expires_at!" from transactions
           where status = 'pending' and expires_at < $1
           order by expires_at limit $2"#,
        cutoff,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await
}

/// The open-hold reservations whose transaction is not pending.
async fn stale_open_holds(db: &mut Db<'_>) -> Result<Vec<StaleHold>, sqlx::Error> {
    let (engine, conn) = (db.engine(), db.conn());
    match engine {
        Engine::Plain => {
            sqlx::query_as!(
                StaleHold,
                r#"select h.transaction_id as transaction, h.account_id as account,
                      t.status as "status?"
               from open_holds h join transactions t on t.id = h.transaction_id
               where t.status <> 'pending' order by h.transaction_id limit $1"#,
                MAX_FINDINGS_PER_CHECK
            )
            .fetch_all(conn)
            .await
        }
        // On Citus a hold has no foreign key to its transaction (not co-located): a hold
        // whose transaction is missing is stale too.
        Engine::Citus => {
            sqlx::query_as!(
                StaleHold,
                r#"with t as materialized (
                   select id, status from transactions
                   where id in (select transaction_id from open_holds))
               select h.transaction_id as transaction, h.account_id as account,
                      t.status as "status?"
               from open_holds h left join t on t.id = h.transaction_id
               where t.status is distinct from 'pending' order by h.transaction_id limit $1"#,
                MAX_FINDINGS_PER_CHECK
            )
            .fetch_all(conn)
            .await
        }
    }
}

/// The reversals of a transaction never give back more than it moved.
async fn over_reversed(db: &mut Db<'_>) -> Result<Vec<Finding>, sqlx::Error> {
    let (engine, conn) = (db.engine(), db.conn());
    if engine == Engine::Citus {
        return over_reversed_citus(conn).await;
    }
    let rows = sqlx::query_as!(
        OverReversed,
        r#"select r.reverses as "original!", sum(r.reversed_amount)::bigint as "reversed!",
                  (select coalesce(sum(amount), 0) from entries e
                   where e.transaction_id = r.reverses and e.amount > 0
                     and e.currency = r.currency)::bigint as "moved!"
           from transactions r
           where r.kind = 'reversal' and r.status = 'posted'
           group by r.reverses, r.currency
           having sum(r.reversed_amount) > (select coalesce(sum(amount), 0) from entries e
                                            where e.transaction_id = r.reverses and e.amount > 0
                                              and e.currency = r.currency)
           limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(OverReversed::finding).collect())
}

/// [`over_reversed`] on Citus: the reversals' totals per original first (on the
/// coordinator), then what those originals moved. An original that does not exist (no
/// foreign key on Citus) moved nothing, so its reversals show here too.
async fn over_reversed_citus(conn: &mut PgConnection) -> Result<Vec<Finding>, sqlx::Error> {
    let rows = sqlx::query_as!(
        OverReversed,
        r#"with r as materialized (
               select reverses, currency, sum(reversed_amount) as reversed from transactions
               where kind = 'reversal' and status = 'posted' group by reverses, currency),
           moved as materialized (
               select transaction_id, currency, sum(amount) as moved from entries
               where amount > 0 and transaction_id in (select reverses from r)
               group by transaction_id, currency)
           select r.reverses as "original!", r.reversed::bigint as "reversed!",
                  coalesce(m.moved, 0)::bigint as "moved!"
           from r left join moved m on m.transaction_id = r.reverses and m.currency = r.currency
           where r.reversed > coalesce(m.moved, 0)
           limit $1"#,
        MAX_FINDINGS_PER_CHECK
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(OverReversed::finding).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grace_beyond_any_storable_time_turns_the_overdue_check_off() {
        let now = Utc::now();
        assert_eq!(
            overdue_before(now, TimeDelta::milliseconds(60_000)),
            Some(now - TimeDelta::milliseconds(60_000))
        );
        assert_eq!(overdue_before(now, hold_grace(u64::MAX)), None);
        assert_eq!(overdue_before(now, TimeDelta::days(366 * 7_000)), None);
        assert!(overdue_before(now, TimeDelta::days(365 * 6_000)).is_some());
    }

    #[test]
    fn a_reservation_names_the_status_of_its_transaction_or_its_absence() {
        let stale = |status: Option<&str>| StaleHold {
            transaction: Uuid::nil(),
            account: "w1".into(),
            status: status.map(str::to_owned),
        };
        let posted = stale(Some("posted")).finding();
        assert_eq!(
            (posted.check, posted.account.as_deref()),
            (Check::StaleOpenHold, Some("w1"))
        );
        assert_eq!(posted.detail, "reserves money for a posted transaction");
        assert_eq!(
            stale(None).finding().detail,
            "reserves money for a transaction that does not exist"
        );
    }
}
