//! `ceiling`: how fast this PostgreSQL can durably insert the rows a transfer writes (one
//! transaction row, two entry rows) when nothing else happens: no HTTP, no locks, no balance
//! logic, no triggers, 1,000 transfers per statement and one statement per commit. Every
//! other scenario's `ratio` is its throughput over this one.

use super::Bench;
use super::client::{CURRENCY, Rng, wallet_ids};
use super::report::{CpuClock, Latencies, Measurement};
use crate::ledger::transactions::{Kind, TransactionStatus};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use uuid::Uuid;

/// Transfers per statement: the size of the ledger's own batches.
const PER_STATEMENT: usize = crate::ledger::MAX_BATCH_ITEMS as usize;

/// `like ... including all` copies columns, defaults, identities, CHECK constraints and
/// indexes (the cost of a real insert), but neither the foreign keys nor the journal triggers:
/// exactly the bare insert this scenario measures. Nothing in these tables makes
/// `including all` awkward, so it is used as it is.
const CREATE_TABLES: [&str; 2] = [
    "create table bench_ceiling_transactions (like transactions including all)",
    "create table bench_ceiling_entries (like entries including all)",
];

/// The ledger's set-based write of a batch, folded into one statement: the same columns and
/// array parameters as the write path, entries after their transactions.
const INSERT: &str = r#"
with t as (
    insert into bench_ceiling_transactions (id, kind, status, currency, legs, account_ids,
                creation_request, creation_outcome, creation_response, created_at, posted_at,
                updated_at)
    select id, 'transfer', 'posted', $6, legs, string_to_array(account_ids, ','), request, 'created',
           body, $7, $7, $7
      from unnest($1::uuid[], $2::jsonb[], $3::text[], $4::jsonb[], $5::text[])
           as r(id, legs, account_ids, request, body)
     order by id
), e as (
    insert into bench_ceiling_entries (transaction_id, account_id, currency, amount, sequence,
                balance_after, ledger_time)
    select transaction_id, account, $6, amount, sequence, balance_after, $7
      from unnest($8::uuid[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[])
           with ordinality as e(transaction_id, account, amount, sequence, balance_after, n)
     order by n
)
select 1"#;

/// One statement's parameters, prepared before the clock starts so that the phase measures
/// the database, not the rendering of JSON.
struct Chunk {
    ids: Vec<Uuid>,
    legs: Vec<Value>,
    account_ids: Vec<String>,
    requests: Vec<Value>,
    bodies: Vec<String>,
    entry_transactions: Vec<Uuid>,
    entry_accounts: Vec<String>,
    entry_amounts: Vec<i64>,
    entry_sequences: Vec<i64>,
    entry_balances: Vec<i64>,
}

/// Realistic rows: random distinct wallets, a running sequence and balance per wallet, the
/// canonical request and a response body of the size the API stores.
fn plan(transfers: u64, accounts: u64, now: chrono::DateTime<chrono::Utc>) -> Vec<Chunk> {
    let wallets = wallet_ids(accounts);
    let mut rng = Rng::new(0xC0FFEE);
    let mut sequence = vec![0i64; wallets.len()];
    let mut balance = vec![0i64; wallets.len()];
    let mut chunks = Vec::new();
    let mut left = transfers as usize;
    while left > 0 {
        let n = left.min(PER_STATEMENT);
        left -= n;
        let mut chunk = Chunk {
            ids: Vec::with_capacity(n),
            legs: Vec::with_capacity(n),
            account_ids: Vec::with_capacity(n),
            requests: Vec::with_capacity(n),
            bodies: Vec::with_capacity(n),
            entry_transactions: Vec::with_capacity(2 * n),
            entry_accounts: Vec::with_capacity(2 * n),
            entry_amounts: Vec::with_capacity(2 * n),
            entry_sequences: Vec::with_capacity(2 * n),
            entry_balances: Vec::with_capacity(2 * n),
        };
        for _ in 0..n {
            let from = rng.below(accounts) as usize;
            let to = (from + 1 + rng.below(accounts - 1) as usize) % wallets.len();
            let amount = 1 + rng.below(100) as i64;
            let id = Uuid::new_v4();
            let legs = json!([{"account": wallets[from], "amount": -amount},
                              {"account": wallets[to], "amount": amount}]);
            let decimal = |a: i64| {
                format!(
                    "{}{}.{:02}",
                    if a < 0 { "-" } else { "" },
                    a.abs() / 100,
                    a.abs() % 100
                )
            };
            let (kind, status) = (Kind::Transfer.as_str(), TransactionStatus::Posted.as_str());
            let body = json!({
                "id": id, "kind": kind, "status": status, "currency": CURRENCY,
                "entries": [
                    {"account": wallets[from], "amount": -amount, "amount_decimal": decimal(-amount)},
                    {"account": wallets[to], "amount": amount, "amount_decimal": decimal(amount)}],
                "external_ref": null, "metadata": {}, "refusal": null,
                "created_at": now, "posted_at": now, "expires_at": null, "reverses": null,
                "captured_amount": null, "captured_amount_decimal": null,
            });
            chunk.requests.push(json!({
                "kind": kind, "from": wallets[from], "to": wallets[to], "amount": amount,
                "status": status, "expires_at": null, "external_ref": null, "metadata": {},
            }));
            chunk.ids.push(id);
            chunk.legs.push(legs);
            let (a, b) = if wallets[from] < wallets[to] {
                (from, to)
            } else {
                (to, from)
            };
            chunk
                .account_ids
                .push(format!("{},{}", wallets[a], wallets[b]));
            chunk.bodies.push(body.to_string());
            for (wallet, signed) in [(from, -amount), (to, amount)] {
                sequence[wallet] += 1;
                balance[wallet] += signed;
                chunk.entry_transactions.push(id);
                chunk.entry_accounts.push(wallets[wallet].clone());
                chunk.entry_amounts.push(signed);
                chunk.entry_sequences.push(sequence[wallet]);
                chunk.entry_balances.push(balance[wallet]);
            }
        }
        chunks.push(chunk);
    }
    chunks
}

pub async fn run(bench: &Bench, pool: &PgPool) -> anyhow::Result<Measurement> {
    let sizes = &bench.sizes;
    for statement in CREATE_TABLES {
        sqlx::query(statement).execute(pool).await?;
    }
    let now = crate::ledger::now_micros();
    tracing::info!(
        transfers = sizes.ceiling_transfers,
        "ceiling: preparing rows"
    );
    let chunks = Arc::new(plan(sizes.ceiling_transfers, sizes.accounts, now));
    let next = Arc::new(AtomicUsize::new(0));
    let mut connections = Vec::new();
    for _ in 0..sizes.ceiling_workers {
        let mut conn = pool.acquire().await?;
        // Durable commits, whatever the server's default: the ceiling must not cheat.
        sqlx::query("set synchronous_commit = on")
            .execute(&mut *conn)
            .await?;
        connections.push(conn);
    }
    tracing::info!(workers = sizes.ceiling_workers, "ceiling: inserting");
    let clock = CpuClock::start(None);
    let mut tasks = Vec::new();
    for mut conn in connections {
        let chunks = Arc::clone(&chunks);
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Latencies::default();
            while let Some(chunk) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                let started = Instant::now();
                sqlx::query(INSERT)
                    .bind(&chunk.ids)
                    .bind(&chunk.legs)
                    .bind(&chunk.account_ids)
                    .bind(&chunk.requests)
                    .bind(&chunk.bodies)
                    .bind(CURRENCY)
                    .bind(now)
                    .bind(&chunk.entry_transactions)
                    .bind(&chunk.entry_accounts)
                    .bind(&chunk.entry_amounts)
                    .bind(&chunk.entry_sequences)
                    .bind(&chunk.entry_balances)
                    .execute(&mut *conn)
                    .await?;
                latencies.record(started.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut latencies = Latencies::default();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let cpu = clock.stop();

    let mut m = Measurement {
        scenario: "ceiling".into(),
        ops: sizes.ceiling_transfers,
        cpu,
        latencies,
        ..Measurement::default()
    };
    m.params.insert("transfers", sizes.ceiling_transfers.into());
    m.params.insert("connections", sizes.ceiling_workers.into());
    m.params.insert("accounts", sizes.accounts.into());
    m.params
        .insert("transfers_per_statement", PER_STATEMENT.into());
    m.params.insert("synchronous_commit", "on".into());
    m.extra.insert("latency_is", "per statement".into());

    let (transactions, entries, sum): (i64, i64, Option<i64>) = sqlx::query_as(
        "select (select count(*) from bench_ceiling_transactions),
                (select count(*) from bench_ceiling_entries),
                (select sum(amount)::int8 from bench_ceiling_entries)",
    )
    .fetch_one(pool)
    .await?;
    let expected = sizes.ceiling_transfers as i64;
    m.check.expect(transactions == expected, || {
        format!("{transactions} transaction rows, expected {expected}")
    });
    m.check.expect(entries == 2 * expected, || {
        format!("{entries} entry rows, expected {}", 2 * expected)
    });
    m.check.expect(sum.unwrap_or(0) == 0, || {
        format!("entries sum to {sum:?}, expected 0")
    });
    Ok(m)
}
