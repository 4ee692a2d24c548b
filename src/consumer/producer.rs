//! A producer of payment events for tests, demos and the benchmark: N distinct payments, a
//! share of them sent a second time the way a producer does after a timeout (a new stream
//! id, the same event id), in the seed article's format plus the contract's optional fields.

use crate::config::PublishArgs;
use redis::AsyncCommands;
use std::collections::BTreeMap;
use uuid::Uuid;

/// One published payment: what the ledger should end up with.
#[derive(Debug, Clone)]
pub struct Published {
    pub event_id: Uuid,
    pub wallet: String,
    pub amount: i64,
    /// Its stream ids: two when it was resent.
    pub stream_ids: Vec<String>,
}

/// Sends every event in `events` (fields in order) to `stream`, one pipeline round trip per
/// chunk; returns their stream ids in order.
pub async fn publish_raw(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    events: &[Vec<(String, String)>],
) -> redis::RedisResult<Vec<String>> {
    let mut ids = Vec::with_capacity(events.len());
    for chunk in events.chunks(500) {
        let mut pipe = redis::pipe();
        for fields in chunk {
            pipe.xadd(stream, "*", fields);
        }
        let chunk_ids: Vec<String> = pipe.query_async(conn).await?;
        ids.extend(chunk_ids);
    }
    Ok(ids)
}

/// `count` payments of `amount` to `wallets` in turn; `resend_percent` of them (by a fixed
/// pattern, so a run is reproducible in its totals) are sent a second time.
pub async fn publish_payments(
    conn: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    count: usize,
    wallets: &[String],
    amount: i64,
    resend_percent: u8,
) -> anyhow::Result<Vec<Published>> {
    anyhow::ensure!(!wallets.is_empty(), "name at least one wallet");
    let mut published: Vec<Published> = (0..count)
        .map(|i| Published {
            event_id: Uuid::new_v4(),
            wallet: wallets[i % wallets.len()].clone(),
            amount,
            stream_ids: Vec::new(),
        })
        .collect();
    let fields = |n: usize, p: &Published| {
        vec![
            ("n".to_owned(), (n + 1).to_string()),
            ("event_id".to_owned(), p.event_id.to_string()),
            ("wallet".to_owned(), p.wallet.clone()),
            ("amount".to_owned(), p.amount.to_string()),
        ]
    };
    // Resends interleave with first sends: payment i is resent right after payment
    // i + 3 went out, as a producer's retry after a timeout would land.
    let share = usize::from(resend_percent);
    let resent = |i: usize| (i * share) % 100 < share;
    let mut order: Vec<usize> = Vec::with_capacity(count * 2);
    for i in 0..count {
        order.push(i);
        if i >= 3 && resent(i - 3) {
            order.push(i - 3);
        }
    }
    for i in count.saturating_sub(3)..count {
        if resent(i) {
            order.push(i);
        }
    }
    let events: Vec<Vec<(String, String)>> =
        order.iter().map(|&i| fields(i, &published[i])).collect();
    let ids = publish_raw(conn, stream, &events).await?;
    for (&i, id) in order.iter().zip(ids) {
        published[i].stream_ids.push(id);
    }
    Ok(published)
}

/// `wallet-ledger publish`: prints one line per payment and a summary of the expected totals.
pub async fn run(args: PublishArgs) -> anyhow::Result<()> {
    let mut conn = super::stream::connect_redis(&args.redis.url).await?;
    let published = publish_payments(
        &mut conn,
        &args.stream,
        args.count,
        &args.wallets,
        args.amount,
        args.resend_percent,
    )
    .await?;
    let mut totals: BTreeMap<&str, i64> = BTreeMap::new();
    let mut messages = 0;
    for p in &published {
        *totals.entry(p.wallet.as_str()).or_default() += p.amount;
        messages += p.stream_ids.len();
    }
    let length: usize = conn.xlen(&args.stream).await?;
    println!(
        "published {} payments as {messages} messages to {} (now {length} entries)",
        published.len(),
        args.stream
    );
    for (wallet, total) in totals {
        println!("  {wallet}: +{total} minor units expected");
    }
    Ok(())
}
