//! A producer of payment events for tests, demos and the benchmark: N distinct payments, a
//! share of them sent a second time the way a producer does after a timeout (a new stream
//! id, the same event id), in the seed article's format plus the contract's optional fields.

use super::partition::Partitions;
use redis::aio::ConnectionLike;
use redis::{AsyncCommands, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
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
    conn: &mut impl ConnectionLike,
    stream: &str,
    events: &[Vec<(String, String)>],
) -> redis::RedisResult<Vec<String>> {
    let mut ids = Vec::with_capacity(events.len());
    for chunk in events.chunks(CHUNK) {
        let chunk_ids: Vec<String> = xadds(stream, chunk).query_async(conn).await?;
        ids.extend(chunk_ids);
    }
    Ok(ids)
}

/// Messages per pipeline round trip.
const CHUNK: usize = 500;

/// One `XADD` per message of `chunk`, in order.
fn xadds(stream: &str, chunk: &[Vec<(String, String)>]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for fields in chunk {
        pipe.xadd(stream, "*", fields);
    }
    pipe
}

/// `count` payments of `amount` to `wallets` in turn; `resend_percent` of them (by a fixed
/// pattern, so a run is reproducible in its totals) are sent a second time.
pub async fn publish_payments(
    conn: &mut impl ConnectionLike,
    stream: &str,
    count: usize,
    wallets: &[String],
    amount: i64,
    resend_percent: u8,
) -> anyhow::Result<Vec<Published>> {
    publish_payments_to(
        conn,
        stream,
        Partitions::ONE,
        count,
        wallets,
        amount,
        resend_percent,
    )
    .await
}

/// [`publish_payments`] over the partition streams of `base`, each payment to its wallet's.
pub async fn publish_payments_to(
    conn: &mut impl ConnectionLike,
    base: &str,
    partitions: Partitions,
    count: usize,
    wallets: &[String],
    amount: i64,
    resend_percent: u8,
) -> anyhow::Result<Vec<Published>> {
    let plan = Plan::new(count, wallets, amount, resend_percent)?;
    let messages = plan.messages();
    let mut ids = vec![String::new(); messages.len()];
    for (stream, positions) in plan.by_partition(base, partitions) {
        let mine: Vec<Vec<(String, String)>> =
            positions.iter().map(|&i| messages[i].clone()).collect();
        let sent = publish_raw(conn, &stream, &mine).await?;
        for (&i, id) in positions.iter().zip(sent) {
            ids[i] = id;
        }
    }
    Ok(plan.record(ids))
}

/// The payments to publish and the order of their messages, resends included.
struct Plan {
    published: Vec<Published>,
    /// Index into `published` of each message, in sending order.
    order: Vec<usize>,
}

impl Plan {
    fn new(
        count: usize,
        wallets: &[String],
        amount: i64,
        resend_percent: u8,
    ) -> anyhow::Result<Plan> {
        anyhow::ensure!(!wallets.is_empty(), "name at least one wallet");
        let published = (0..count)
            .map(|i| Published {
                event_id: Uuid::new_v4(),
                wallet: wallets[i % wallets.len()].clone(),
                amount,
                stream_ids: Vec::new(),
            })
            .collect();
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
        Ok(Plan { published, order })
    }

    fn messages(&self) -> Vec<Vec<(String, String)>> {
        self.order
            .iter()
            .map(|&i| {
                let p = &self.published[i];
                vec![
                    ("n".to_owned(), (i + 1).to_string()),
                    ("event_id".to_owned(), p.event_id.to_string()),
                    ("wallet".to_owned(), p.wallet.clone()),
                    ("amount".to_owned(), p.amount.to_string()),
                ]
            })
            .collect()
    }

    /// Each partition stream of `base` with the positions (in sending order) of the messages
    /// that go to it, in partition order; a partition no wallet maps to is left out (with
    /// one partition, the base stream is always there).
    fn by_partition(&self, base: &str, partitions: Partitions) -> Vec<(String, Vec<usize>)> {
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); usize::from(partitions.count())];
        for (k, &i) in self.order.iter().enumerate() {
            positions[usize::from(partitions.of(&self.published[i].wallet))].push(k);
        }
        partitions
            .streams(base)
            .into_iter()
            .zip(positions)
            .filter(|(_, positions)| partitions.count() == 1 || !positions.is_empty())
            .collect()
    }

    /// The payments, given the stream id of each message in sending order.
    fn record(mut self, ids: Vec<String>) -> Vec<Published> {
        for (&i, id) in self.order.iter().zip(ids) {
            self.published[i].stream_ids.push(id);
        }
        self.published
    }
}

/// How `publish` makes sure a chunk is on the stream.
#[derive(Debug, Clone, Copy)]
pub struct Confirmation {
    /// Replicas that must have each chunk (Redis `WAIT`) before it counts as sent: without
    /// one, a master lost right after answering takes the entries with it.
    pub replicas: u32,
    /// How long a chunk is sent again (same event ids, so the ledger absorbs the copies)
    /// after a failed or unconfirmed attempt, which a failover behind Sentinels causes.
    pub retry_for: Duration,
}

/// How long one `WAIT` waits for the replicas.
const WAIT_TIMEOUT_MS: u64 = 1_000;
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Why one attempt at a chunk did not count.
#[derive(Debug, thiserror::Error)]
enum Attempt {
    #[error(transparent)]
    Connect(anyhow::Error),
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    #[error("only {confirmed} of {wanted} replicas confirmed the chunk in {WAIT_TIMEOUT_MS} ms")]
    Unconfirmed { confirmed: u32, wanted: u32 },
}

impl Attempt {
    fn retryable(&self) -> bool {
        match self {
            Attempt::Connect(_) | Attempt::Unconfirmed { .. } => true,
            Attempt::Redis(e) => crate::broker::is_outage(e),
        }
    }
}

/// Sends `messages` to `stream` at `url` chunk by chunk, each confirmed as `confirmation`
/// asks, reconnecting (behind Sentinels: to the master of the moment) after any failure;
/// returns the stream ids of the attempt that counted.
pub async fn publish_confirmed(
    url: &str,
    stream: &str,
    messages: &[Vec<(String, String)>],
    confirmation: Confirmation,
) -> anyhow::Result<Vec<String>> {
    let mut conn: Option<crate::broker::Connection> = None;
    let mut ids = Vec::with_capacity(messages.len());
    for chunk in messages.chunks(CHUNK) {
        let give_up_at = Instant::now() + confirmation.retry_for;
        loop {
            match send_chunk(&mut conn, url, stream, chunk, confirmation.replicas).await {
                Ok(chunk_ids) => {
                    ids.extend(chunk_ids);
                    break;
                }
                Err(e) if e.retryable() && Instant::now() < give_up_at => {
                    tracing::warn!(error = %e, "sending the chunk again");
                    conn = None;
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(e) => return Err(anyhow::Error::new(e).context("cannot publish")),
            }
        }
    }
    Ok(ids)
}

async fn send_chunk(
    conn: &mut Option<crate::broker::Connection>,
    url: &str,
    stream: &str,
    chunk: &[Vec<(String, String)>],
    replicas: u32,
) -> Result<Vec<String>, Attempt> {
    if conn.is_none() {
        *conn = Some(
            crate::broker::connect(url)
                .await
                .map_err(Attempt::Connect)?,
        );
    }
    let conn = conn.as_mut().expect("connected above");
    let mut pipe = xadds(stream, chunk);
    if replicas == 0 {
        return Ok(pipe.query_async(conn).await?);
    }
    // WAIT names no key. In the same pipeline it goes where the XADDs go: on a cluster the
    // pipeline is routed by its keyed commands, to the master of the stream's slot, so WAIT
    // counts the replicas of the master that took these entries (sent alone, the cluster
    // client would ask every master and report the fewest).
    pipe.cmd("WAIT").arg(replicas).arg(WAIT_TIMEOUT_MS);
    let mut replies: Vec<Value> = pipe.query_async(conn).await?;
    let confirmed: u32 = redis::from_redis_value(replies.pop().unwrap_or(Value::Nil))
        .map_err(redis::RedisError::from)?;
    if confirmed < replicas {
        return Err(Attempt::Unconfirmed {
            confirmed,
            wanted: replicas,
        });
    }
    let ids = replies
        .into_iter()
        .map(redis::from_redis_value)
        .collect::<Result<Vec<String>, _>>()
        .map_err(redis::RedisError::from)?;
    Ok(ids)
}

/// What `publish` sends, and how it makes sure it arrived.
#[derive(Debug, Clone)]
pub struct PublishSettings {
    pub redis: crate::broker::RedisSettings,
    pub stream: String,
    /// The partition streams of `stream` the payments are spread over, by wallet.
    pub partitions: Partitions,
    /// Distinct payments.
    pub count: usize,
    /// Wallets credited, in turn.
    pub wallets: Vec<String>,
    /// Minor units per payment.
    pub amount: i64,
    /// Percentage of payments sent a second time (a new stream id, the same event id).
    pub resend_percent: u8,
    /// Replicas that must confirm each chunk (Redis `WAIT`) before it counts as sent.
    pub wait_replicas: u32,
    /// How long a chunk that failed or was not confirmed is sent again.
    pub retry_for_ms: u64,
}

/// `wallet-ledger publish`: prints one line per payment and a summary of the expected totals.
pub async fn run(args: PublishSettings) -> anyhow::Result<()> {
    let plan = Plan::new(args.count, &args.wallets, args.amount, args.resend_percent)?;
    let confirmation = Confirmation {
        replicas: args.wait_replicas,
        retry_for: Duration::from_millis(args.retry_for_ms),
    };
    // Each partition's messages go to its stream in their sending order, one stream after
    // another; the stream ids are put back in sending order for the summary.
    let messages = plan.messages();
    let mut ids = vec![String::new(); messages.len()];
    let mut sent_to = Vec::new();
    for (stream, positions) in plan.by_partition(&args.stream, args.partitions) {
        let mine: Vec<Vec<(String, String)>> =
            positions.iter().map(|&i| messages[i].clone()).collect();
        let sent = publish_confirmed(&args.redis.url, &stream, &mine, confirmation).await?;
        for (&i, id) in positions.iter().zip(sent) {
            ids[i] = id;
        }
        sent_to.push((stream, positions.len()));
    }
    let mut conn = crate::broker::connect(&args.redis.url).await?;
    let mut lengths = Vec::new();
    for (stream, sent) in sent_to {
        let length: usize = conn.xlen(&stream).await?;
        lengths.push((stream, sent, length));
    }
    let published = plan.record(ids);
    let mut totals: BTreeMap<&str, i64> = BTreeMap::new();
    let mut messages = 0;
    for p in &published {
        *totals.entry(p.wallet.as_str()).or_default() += p.amount;
        messages += p.stream_ids.len();
    }
    if args.partitions.count() == 1 {
        let length = lengths.first().map_or(0, |l| l.2);
        println!(
            "published {} payments as {messages} messages to {} (now {length} entries)",
            published.len(),
            args.stream
        );
    } else {
        println!(
            "published {} payments as {messages} messages to {} partitions of {}",
            published.len(),
            args.partitions.count(),
            args.stream
        );
        for (stream, sent, length) in lengths {
            println!("  {stream}: {sent} messages (now {length} entries)");
        }
    }
    for (wallet, total) in totals {
        println!("  {wallet}: +{total} minor units expected");
    }
    Ok(())
}
