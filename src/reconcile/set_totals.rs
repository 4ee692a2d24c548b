//! `set_totals`, a check of `verify`: every account set's stored totals (its checkpoint plus
//! the movements since, and the copies of its wallets' open holds) equal the sums over the
//! wallets that count in it, and those wallets are exactly the ones its members imply
//! (`ledger::sets`). Reads only the coordinator's set tables and the wallets' heads, so the
//! same code runs on both engines.

use super::invariants::{Check, Finding, MAX_FINDINGS_PER_CHECK};
use crate::ledger::sets::{self, Counted, membership};
use crate::ledger::store::{Db, reads};
use sqlx::PgConnection;
use std::collections::{BTreeSet, HashMap};

pub async fn check(db: &mut Db<'_>) -> Result<Vec<Finding>, sqlx::Error> {
    let stored = membership::stored_pairs(db.conn(), None).await?;
    let implied = membership::implied_pairs(db.conn(), None).await?;
    let mut findings = membership_findings(&stored, &implied);
    let pairs: Vec<Counted> = stored.into_iter().collect();
    let wallets: Vec<String> = pairs
        .iter()
        .map(|(w, _)| w.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let states: HashMap<String, (i64, i64, i64)> = reads::wallet_states(db, &wallets)
        .await?
        .into_iter()
        .map(|(id, s)| {
            let balances = (
                s.chain.balance.minor_units(),
                s.pending_in.minor_units(),
                s.pending_out.minor_units(),
            );
            (id, balances)
        })
        .collect();
    let expected = sets::expected_totals(&pairs, &states);
    for set in stored_totals(db.conn()).await? {
        let due = expected.get(&set.id).copied().unwrap_or_default();
        let held = (set.posted, set.pending_in, set.pending_out);
        if held != due {
            findings.push(Finding {
                check: Check::SetTotals,
                account: None,
                entry: None,
                transaction: None,
                detail: format!(
                    "set {}: stored (posted, pending_in, pending_out) {held:?}, its wallets sum to {due:?}",
                    set.id
                ),
            });
        }
    }
    findings.truncate(MAX_FINDINGS_PER_CHECK as usize);
    Ok(findings)
}

fn membership_findings(stored: &BTreeSet<Counted>, implied: &BTreeSet<Counted>) -> Vec<Finding> {
    let finding = |(wallet, set): &Counted, what: &str| Finding {
        check: Check::SetTotals,
        account: Some(wallet.clone()),
        entry: None,
        transaction: None,
        detail: format!("counts in set {set} {what}"),
    };
    let extra = stored
        .difference(implied)
        .map(|p| finding(p, "although no member puts it there"));
    let missing = implied
        .difference(stored)
        .map(|p| finding(p, "by its memberships, but is not counted there"));
    extra.chain(missing).collect()
}

struct StoredTotals {
    id: String,
    posted: i128,
    pending_in: i128,
    pending_out: i128,
}

/// Each set's totals as a read answers them, unsaturated (text, parsed: numeric sums).
async fn stored_totals(conn: &mut PgConnection) -> Result<Vec<StoredTotals>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select s.id,
                  (coalesce(cp.posted, 0)
                   + coalesce((select sum(m.amount) from account_set_movements m
                               where m.set_id = s.id
                                 and m.xid >= coalesce(cp.below_xid, '0'::xid8)), 0))::text
                      as "posted!",
                  coalesce((select sum(amount) from account_set_open_holds h
                            where h.set_id = s.id and h.amount > 0
                              and h.expires_at > now()), 0)::text as "pending_in!",
                  coalesce((select sum(-amount) from account_set_open_holds h
                            where h.set_id = s.id and h.amount < 0
                              and h.expires_at > now()), 0)::text as "pending_out!"
           from account_sets s
           left join lateral (
               select posted, below_xid from account_set_checkpoints c
               where c.set_id = s.id order by below_xid desc limit 1) cp on true
           order by s.id"#
    )
    .fetch_all(conn)
    .await?;
    let number = |text: &str| {
        text.parse::<i128>()
            .map_err(|e| sqlx::Error::Decode(e.into()))
    };
    rows.into_iter()
        .map(|r| {
            Ok(StoredTotals {
                posted: number(&r.posted)?,
                pending_in: number(&r.pending_in)?,
                pending_out: number(&r.pending_out)?,
                id: r.id,
            })
        })
        .collect()
}
