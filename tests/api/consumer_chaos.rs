//! The stream consumer under chaos, with the real binary: consumer processes SIGKILLed at
//! random moments while payment events are still being published, and the database taken
//! away under a running consumer. Either way every distinct payment must reach its wallet
//! exactly once, nothing may be dead-lettered, nothing may stay pending, and `verify` passes.

use super::common::{Rng, TestApp};
use super::stream_support::{
    GROUP, PrivatePostgres, bin, consumer_command, dead_letters, eventually, free_port, http_get,
    pending, redis_at, run_to_end, shared_redis_url, terminate, unique_stream,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use uuid::Uuid;
use wallet_ledger::consumer::producer::publish_raw;

/// One distinct payment as published: what its wallet must gain, once.
#[derive(Debug, Clone)]
struct Payment {
    event_id: Uuid,
    wallet: String,
    amount: i64,
    /// Sends `type` explicitly (the others rely on the default `payment.succeeded`).
    typed: bool,
}

impl Payment {
    fn random(rng: &mut Rng, wallets: &[String]) -> Payment {
        Payment {
            event_id: Uuid::from_u64_pair(rng.next_u64(), rng.next_u64()),
            wallet: rng.pick(wallets).clone(),
            // Varied amounts: a payment lost and another doubled cannot cancel out.
            amount: 1 + rng.below(99_999) as i64,
            typed: rng.below(2) == 0,
        }
    }

    /// Its stream entry; a resend is the very same fields under a new stream id.
    fn fields(&self, n: usize) -> Vec<(String, String)> {
        let mut fields = vec![
            ("n".to_owned(), n.to_string()),
            ("event_id".to_owned(), self.event_id.to_string()),
            ("wallet".to_owned(), self.wallet.clone()),
            ("amount".to_owned(), self.amount.to_string()),
        ];
        if self.typed {
            fields.push(("type".to_owned(), "payment.succeeded".to_owned()));
        }
        fields
    }
}

/// What the wallets must hold: the sum of their distinct payments.
fn expected_balances(payments: &[Payment], wallets: &[String]) -> BTreeMap<String, i64> {
    let mut expected: BTreeMap<String, i64> = wallets.iter().map(|w| (w.clone(), 0)).collect();
    for p in payments {
        *expected.get_mut(&p.wallet).unwrap() += p.amount;
    }
    expected
}

/// The group's (pending, lag) from `XINFO GROUPS`: delivered and unacknowledged, and never
/// delivered. The lag is `None` when Redis cannot tell.
async fn backlog(conn: &mut MultiplexedConnection, stream: &str) -> (usize, Option<usize>) {
    let groups: redis::streams::StreamInfoGroupsReply = conn.xinfo_groups(stream).await.unwrap();
    let group = groups
        .groups
        .into_iter()
        .find(|g| g.name == GROUP)
        .expect("the consumer group exists");
    (group.pending, group.lag)
}

/// The stream ids pending with consumer `name`.
async fn pending_with(conn: &mut MultiplexedConnection, stream: &str, name: &str) -> Vec<String> {
    let reply: redis::streams::StreamPendingCountReply = conn
        .xpending_consumer_count(stream, GROUP, "-", "+", 100_000, name)
        .await
        .unwrap();
    reply.ids.into_iter().map(|p| p.id).collect()
}

/// Failure counts charged to messages (`<stream>.failures.<group>`): a kill or an outage
/// must charge none.
async fn charged_failures(conn: &mut MultiplexedConnection, stream: &str) -> usize {
    conn.hlen(format!("{stream}.failures.{GROUP}"))
        .await
        .unwrap()
}

async fn forget_stream(conn: &mut MultiplexedConnection, stream: &str) {
    let keys = [
        stream.to_owned(),
        format!("{stream}.dlq"),
        format!("{stream}.failures.{GROUP}"),
    ];
    let _: redis::RedisResult<()> = conn.del(&keys).await;
}

/// A log file for the consumers' stderr (kept when the test fails, for inspection).
fn log_file(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "wl-{label}-{}-{}.log",
        std::process::id(),
        Uuid::new_v4().simple()
    ))
}

fn append_to(path: &PathBuf) -> Stdio {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(Stdio::from)
        .expect("the log file opens")
}

fn tail(path: &PathBuf, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

async fn verify(database_url: &str) {
    let output = Command::new(bin())
        .args(["verify", "--database-url", database_url])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "verify failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------------
// Test 1: randomized SIGKILLs of three consumers while events are still being published.
// ---------------------------------------------------------------------------------------

/// The schedule's seed; `CONSUMER_CHAOS_SEED` (decimal or 0x-hex) replays or varies a run.
const CHAOS_SEED: u64 = 0xC4A0_5EED_2026_0001;

fn chaos_seed() -> u64 {
    std::env::var("CONSUMER_CHAOS_SEED")
        .ok()
        .and_then(|v| match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        })
        .unwrap_or(CHAOS_SEED)
}

const PAYMENTS: usize = 10_000;
const WALLETS: usize = 50;
/// Payments sent a second time (a new stream id, the same event), in percent.
const RESEND_PERCENT: u64 = 10;
const CHUNKS: usize = 40;
const CONSUMERS: usize = 3;
/// Kills scheduled at least (more if publishing takes longer).
const MIN_KILLS: usize = 15;

/// One step of the chaos schedule, at a fixed offset from its start (decided up front by the
/// seeded generator, so a run's schedule does not depend on how fast the machine is).
#[derive(Debug)]
enum Action {
    Publish { chunk: usize },
    Kill { slot: usize, same_name: bool },
}

struct Slot {
    name: String,
    child: Child,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_sigkilled_at_random_moments_lose_and_double_nothing() {
    let test_started = Instant::now();
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..WALLETS).map(|i| format!("chaos-w{i:02}")).collect();
    for wallet in &wallets {
        app.create_wallet(wallet).await;
    }
    let redis_url = shared_redis_url();
    let stream = unique_stream("chaos");
    let mut conn = redis_at(&redis_url).await;
    let seed = chaos_seed();
    let mut rng = Rng(seed);

    // The payments, and the order their messages go out in: each first send in turn, and a
    // resend landing anywhere from right after it to ~1,500 messages later (often in a later
    // chunk, after the original was applied; sometimes in the same batch).
    let payments: Vec<Payment> = (0..PAYMENTS)
        .map(|_| Payment::random(&mut rng, &wallets))
        .collect();
    let mut keyed: Vec<(u64, usize)> = Vec::with_capacity(PAYMENTS * 11 / 10 + 1);
    for i in 0..PAYMENTS {
        keyed.push((i as u64 * 8, i));
        if rng.below(100) < RESEND_PERCENT {
            keyed.push((i as u64 * 8 + 1 + rng.below(8 * 1_500), i));
        }
    }
    keyed.sort_by_key(|&(key, _)| key);
    let messages: Vec<Vec<(String, String)>> = keyed
        .iter()
        .map(|&(_, i)| payments[i].fields(i + 1))
        .collect();
    let resends = messages.len() - PAYMENTS;
    let chunk_len = messages.len().div_ceil(CHUNKS);
    let chunks: Vec<&[Vec<(String, String)>]> = messages.chunks(chunk_len).collect();

    // The schedule: a chunk every 100-350 ms (about as fast as three consumers apply them),
    // a kill every 200-1000 ms, until everything is published and at least MIN_KILLS kills
    // happened.
    let mut schedule: Vec<(Duration, Action)> = Vec::new();
    let mut at = Duration::ZERO;
    for chunk in 0..chunks.len() {
        schedule.push((at, Action::Publish { chunk }));
        at += Duration::from_millis(100 + rng.below(250));
    }
    let last_publish = at;
    let mut at = Duration::from_millis(200 + rng.below(800));
    let mut scheduled_kills = 0;
    while at <= last_publish || scheduled_kills < MIN_KILLS {
        let slot = rng.below(CONSUMERS as u64) as usize;
        schedule.push((
            at,
            Action::Kill {
                slot,
                same_name: rng.below(2) == 0,
            },
        ));
        scheduled_kills += 1;
        at += Duration::from_millis(200 + rng.below(800));
    }
    schedule.sort_by_key(|(at, _)| *at);

    let log = log_file("chaos");
    let consumer = |name: &str| {
        let mut command = consumer_command(
            &app.database_url,
            &redis_url,
            &stream,
            name,
            &["--batch-size", "100", "--trim-interval-ms", "300"],
        );
        command.stdout(Stdio::null()).stderr(append_to(&log));
        command.spawn().expect("the consumer starts")
    };
    let mut generation = 0;
    let mut slots: Vec<Slot> = (0..CONSUMERS)
        .map(|s| {
            let name = format!("chaos-c{s}-g0");
            Slot {
                child: consumer(&name),
                name,
            }
        })
        .collect();

    let chaos_started = Instant::now();
    let mut kills = 0;
    let mut kills_holding_messages = 0;
    let mut messages_held_at_kills = 0;
    let mut committed_unacknowledged = 0;
    let mut published = 0;
    // Stream id -> the payment its message carries.
    let mut payment_of: HashMap<String, Uuid> = HashMap::with_capacity(messages.len());
    for (offset, action) in &schedule {
        tokio::time::sleep_until((chaos_started + *offset).into()).await;
        match *action {
            Action::Publish { chunk } => {
                let ids = publish_raw(&mut conn, &stream, chunks[chunk])
                    .await
                    .unwrap();
                for (k, id) in ids.into_iter().enumerate() {
                    let payment = keyed[chunk * chunk_len + k].1;
                    payment_of.insert(id, payments[payment].event_id);
                }
                published += chunks[chunk].len();
            }
            Action::Kill { slot, same_name } => {
                let victim = &mut slots[slot];
                if let Some(status) = victim.child.try_wait().unwrap() {
                    panic!(
                        "consumer {} exited on its own ({status}) before it was killed:\n{}",
                        victim.name,
                        tail(&log, 40)
                    );
                }
                victim.child.start_kill().unwrap(); // SIGKILL
                victim.child.wait().await.unwrap();
                kills += 1;
                // What it left unacknowledged (its name's pending entries, frozen until
                // reclaimed), and how much of that the database already committed: the
                // redeliveries that must come out as duplicates.
                let held = pending_with(&mut conn, &stream, &victim.name).await;
                if !held.is_empty() {
                    kills_holding_messages += 1;
                    messages_held_at_kills += held.len();
                    let ids: Vec<Uuid> = held.iter().map(|id| payment_of[id]).collect();
                    let committed: i64 =
                        sqlx::query_scalar("select count(*) from transactions where id = any($1)")
                            .bind(&ids)
                            .fetch_one(&app.pool)
                            .await
                            .unwrap();
                    committed_unacknowledged += committed;
                }
                if !same_name {
                    generation += 1;
                    victim.name = format!("chaos-c{slot}-g{generation}");
                }
                victim.child = consumer(&victim.name);
            }
        }
    }
    let chaos_duration = chaos_started.elapsed();
    // The last three die too, whatever they hold.
    for slot in &mut slots {
        if let Some(status) = slot.child.try_wait().unwrap() {
            panic!(
                "consumer {} exited on its own ({status}):\n{}",
                slot.name,
                tail(&log, 40)
            );
        }
        slot.child.start_kill().unwrap();
        slot.child.wait().await.unwrap();
    }
    let (pending_after_chaos, lag_after_chaos) = backlog(&mut conn, &stream).await;

    // One consumer drains what is left: new messages and the dead consumers' pending ones.
    let drain_started = Instant::now();
    let drainer = consumer_command(
        &app.database_url,
        &redis_url,
        &stream,
        "chaos-drainer",
        &["--batch-size", "100", "--drain"],
    );
    let output = run_to_end(drainer, Duration::from_secs(60)).await;
    let drain_duration = drain_started.elapsed();
    assert!(
        output.status.success(),
        "the draining consumer failed ({}):\n{}\n--- chaos consumers ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        tail(&log, 40)
    );

    // Every wallet holds exactly the sum of its distinct payments.
    let expected = expected_balances(&payments, &wallets);
    let mut wrong = Vec::new();
    for (wallet, want) in &expected {
        let got = app.posted_balance(wallet).await;
        if got != *want {
            wrong.push(format!(
                "{wallet}: posted {got}, expected {want} (off by {})",
                got - want
            ));
        }
    }
    let stored: Vec<Uuid> =
        sqlx::query_scalar("select id from transactions where kind = 'payment'")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let stored: BTreeSet<Uuid> = stored.into_iter().collect();
    let missing: Vec<Uuid> = payments
        .iter()
        .map(|p| p.event_id)
        .filter(|id| !stored.contains(id))
        .collect();
    let odd_entries: i64 = sqlx::query_scalar(
        "select count(*) from (select transaction_id from entries group by transaction_id \
         having count(*) <> 2) t",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        wrong.is_empty() && missing.is_empty() && stored.len() == PAYMENTS && odd_entries == 0,
        "balances off in {} wallets: {wrong:#?}\n{} payments missing (first: {:?}), {} stored, \
         {odd_entries} transactions with other than 2 entries\n--- consumers ---\n{}",
        wrong.len(),
        missing.len(),
        missing.first(),
        stored.len(),
        tail(&log, 40)
    );

    // Nothing pending, nothing left undelivered, nothing dead-lettered, nothing charged.
    assert_eq!(
        pending(&mut conn, &stream).await,
        0,
        "messages left pending"
    );
    let (pending_now, lag_now) = backlog(&mut conn, &stream).await;
    assert_eq!(
        (pending_now, lag_now.unwrap_or(0)),
        (0, 0),
        "the group has a backlog"
    );
    let dead = dead_letters(&mut conn, &stream).await;
    assert!(
        dead.is_empty(),
        "{} dead letters, first: {:?}",
        dead.len(),
        dead.first()
    );
    assert_eq!(
        charged_failures(&mut conn, &stream).await,
        0,
        "a redelivery after a kill was charged as the message's own failure"
    );
    verify(&app.database_url).await;

    eprintln!(
        "consumer chaos (seed {seed:#x}): {PAYMENTS} payments to {WALLETS} wallets as \
         {published} messages ({resends} resends) in {} chunks; {CONSUMERS} consumers (batch \
         100) SIGKILLed {kills} times at random moments during {:.1} s \
         ({kills_holding_messages} kills left unacknowledged messages, {messages_held_at_kills} \
         in all, {committed_unacknowledged} whose payment was already committed), then the \
         last {CONSUMERS} killed with {pending_after_chaos} pending and {} undelivered; the \
         drain took {:.1} s; balances exact, 0 pending, 0 dead letters, verify OK; test {:.1} s",
        chunks.len(),
        chaos_duration.as_secs_f64(),
        lag_after_chaos.map_or("?".to_owned(), |l| l.to_string()),
        drain_duration.as_secs_f64(),
        test_started.elapsed().as_secs_f64()
    );
    assert!(kills >= 5, "only {kills} kills");
    forget_stream(&mut conn, &stream).await;
    let _ = std::fs::remove_file(&log);
    app.finish().await;
}

// ---------------------------------------------------------------------------------------
// Test 2: the database goes away under a running consumer, and comes back.
// ---------------------------------------------------------------------------------------

const OUTAGE_SEED: u64 = 0x0D7A_6E00_2026_0002;

async fn readyz(addr: &str) -> Option<u16> {
    http_get(addr, "/readyz").await.map(|(status, _)| status)
}

fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').expect("a stream id");
    (ms.parse().unwrap(), seq.parse().unwrap())
}

/// How many of `ids` the group has not acknowledged: pending with some consumer, or not
/// delivered yet (beyond the group's last delivered id).
async fn unacknowledged(conn: &mut MultiplexedConnection, stream: &str, ids: &[String]) -> usize {
    let reply: redis::streams::StreamPendingCountReply = conn
        .xpending_count(stream, GROUP, "-", "+", 100_000)
        .await
        .unwrap();
    let in_pel: BTreeSet<String> = reply.ids.into_iter().map(|p| p.id).collect();
    let groups: redis::streams::StreamInfoGroupsReply = conn.xinfo_groups(stream).await.unwrap();
    let last = groups
        .groups
        .iter()
        .find(|g| g.name == GROUP)
        .map(|g| parse_id(&g.last_delivered_id))
        .unwrap();
    ids.iter()
        .filter(|id| in_pel.contains(*id) || parse_id(id) > last)
        .count()
}

/// What the test needs around the one consumer process and the private server.
struct Outage<'a> {
    postgres: &'a mut PrivatePostgres,
    database_url: &'a str,
    conn: MultiplexedConnection,
    stream: &'a str,
    metrics_addr: &'a str,
    consumer: &'a mut Child,
    log: &'a PathBuf,
    wallets: &'a [String],
    rng: Rng,
    /// Every distinct payment published so far.
    payments: Vec<Payment>,
    /// Messages published so far.
    messages: usize,
}

/// The figures of one outage, for the test's output.
struct Round {
    /// Messages published before the stop that were still unacknowledged when it came.
    in_flight: usize,
    /// Messages published during the outage.
    during: usize,
    max_pending: usize,
    unready_after: Duration,
    outage: Duration,
    recovery: Duration,
}

impl Outage<'_> {
    /// `count` new payments, and resends of `resend` (indexes into all payments so far,
    /// taken after the new ones are added): returns their stream ids.
    async fn publish(&mut self, count: usize, resend: &[usize]) -> Vec<String> {
        let first_n = self.payments.len() + 1;
        let new: Vec<Payment> = (0..count)
            .map(|_| Payment::random(&mut self.rng, self.wallets))
            .collect();
        self.payments.extend(new);
        let mut messages: Vec<Vec<(String, String)>> = (first_n - 1..self.payments.len())
            .map(|i| self.payments[i].fields(i + 1))
            .collect();
        for &i in resend {
            messages.push(self.payments[i].fields(i + 1));
        }
        self.messages += messages.len();
        publish_raw(&mut self.conn, self.stream, &messages)
            .await
            .unwrap()
    }

    /// Waits until the group has nothing left and /readyz answers 200, then checks every
    /// wallet, the stored payments, the dead letters and the failure counts.
    async fn assert_all_applied_once(&mut self, within: Duration, when: &str) {
        let stream = self.stream.to_owned();
        let addr = self.metrics_addr.to_owned();
        let conn = self.conn.clone();
        let done = eventually(within, || {
            let mut conn = conn.clone();
            let (stream, addr) = (stream.clone(), addr.clone());
            async move {
                matches!(backlog(&mut conn, &stream).await, (0, Some(0)))
                    && readyz(&addr).await == Some(200)
            }
        })
        .await;
        assert!(
            done,
            "{when}: not caught up within {within:?}: backlog {:?}, /readyz {:?}\n{}",
            backlog(&mut self.conn, self.stream).await,
            readyz(self.metrics_addr).await,
            tail(self.log, 30)
        );
        assert!(
            self.consumer.try_wait().unwrap().is_none(),
            "{when}: the consumer exited:\n{}",
            tail(self.log, 30)
        );
        let ledger = TestApp::attach(self.database_url).await;
        for (wallet, want) in expected_balances(&self.payments, self.wallets) {
            assert_eq!(
                ledger.posted_balance(&wallet).await,
                want,
                "{wallet} {when}"
            );
        }
        let stored: i64 =
            sqlx::query_scalar("select count(*) from transactions where kind = 'payment'")
                .fetch_one(&ledger.pool)
                .await
                .unwrap();
        assert_eq!(
            stored as usize,
            self.payments.len(),
            "payments stored {when}"
        );
        ledger.finish().await;
        let dead = dead_letters(&mut self.conn, self.stream).await;
        assert!(
            dead.is_empty(),
            "{when}: {} dead letters: {:?}",
            dead.len(),
            dead.first()
        );
        assert_eq!(
            charged_failures(&mut self.conn, self.stream).await,
            0,
            "{when}: failures charged"
        );
    }

    /// Stops PostgreSQL (once `preload` payments were published and the consumer is applying
    /// them, if any), publishes more, checks the consumer holds everything unacknowledged and
    /// dead-letters nothing while /readyz fails, starts PostgreSQL again and checks the same
    /// process applies everything exactly once.
    async fn round(&mut self, preload: usize) -> Round {
        let mut in_flight = 0;
        if preload > 0 {
            let ids = self.publish(preload, &[]).await;
            // Stop while it is busy, batch after batch: a few hundred acknowledged already,
            // most not.
            let (conn, stream) = (self.conn.clone(), self.stream.to_owned());
            let ids_ref = &ids;
            let busy =
                eventually(Duration::from_secs(15), || {
                    let (mut conn, stream) = (conn.clone(), stream.clone());
                    async move {
                        unacknowledged(&mut conn, &stream, ids_ref).await + 250 <= ids_ref.len()
                    }
                })
                .await;
            assert!(
                busy,
                "the consumer did not start on the preload:\n{}",
                tail(self.log, 30)
            );
            self.postgres.stop().await;
            in_flight = unacknowledged(&mut self.conn, self.stream, &ids).await;
        } else {
            self.postgres.stop().await;
        }
        let outage_started = Instant::now();

        // During the outage: new payments, resends of ones applied before, of ones in flight
        // and of new ones.
        let known = self.payments.len();
        let resend = [0, known / 2, known - 1, known + 2, known + 14, known + 29];
        let during_ids = self.publish(30, &resend).await;

        let addr = self.metrics_addr.to_owned();
        let went_unready = eventually(Duration::from_secs(5), || {
            let addr = addr.clone();
            async move { readyz(&addr).await == Some(503) }
        })
        .await;
        let unready_after = outage_started.elapsed();
        assert!(
            went_unready,
            "/readyz still answers {:?} {unready_after:?} into the outage:\n{}",
            readyz(self.metrics_addr).await,
            tail(self.log, 30)
        );
        // For a while: nothing more is acknowledged (the new messages least of all), nothing
        // is dead-lettered or charged, /readyz fails, the process stays up.
        let (pending_then, lag_then) = backlog(&mut self.conn, self.stream).await;
        let frozen = pending_then + lag_then.expect("Redis knows the lag");
        let watch_until = Instant::now() + Duration::from_secs(2);
        let mut max_pending = 0;
        while Instant::now() < watch_until {
            assert_eq!(
                unacknowledged(&mut self.conn, self.stream, &during_ids).await,
                during_ids.len(),
                "a message published during the outage was acknowledged"
            );
            let (pending_now, lag) = backlog(&mut self.conn, self.stream).await;
            assert_eq!(
                pending_now + lag.unwrap(),
                frozen,
                "a message was acknowledged while the database was down"
            );
            max_pending = max_pending.max(pending_now);
            let dead = dead_letters(&mut self.conn, self.stream).await;
            assert!(
                dead.is_empty(),
                "dead-lettered during the outage: {:?}",
                dead.first()
            );
            assert_eq!(
                charged_failures(&mut self.conn, self.stream).await,
                0,
                "the outage was charged to messages"
            );
            assert_eq!(
                readyz(self.metrics_addr).await,
                Some(503),
                "ready while the database is down"
            );
            assert!(
                self.consumer.try_wait().unwrap().is_none(),
                "the consumer exited:\n{}",
                tail(self.log, 30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            max_pending > 0,
            "the consumer never took a message during the outage"
        );
        let outage = outage_started.elapsed();

        // The database comes back: the same process picks up where it stopped.
        let back = Instant::now();
        self.postgres.restart().await;
        self.assert_all_applied_once(Duration::from_secs(30), "after the outage")
            .await;
        Round {
            in_flight,
            during: during_ids.len(),
            max_pending,
            unready_after,
            outage,
            recovery: back.elapsed(),
        }
    }
}

/// A PostgreSQL of the test's own with `database` created and migrated by the binary.
async fn migrated_private_database(database: &str) -> (PrivatePostgres, String) {
    let postgres = PrivatePostgres::start().await;
    let database_url = postgres.url(database);
    let mut migrate = Command::new(bin());
    migrate.args(["migrate", "--database-url", &database_url]);
    let migrate = run_to_end(migrate, Duration::from_secs(60)).await;
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    (postgres, database_url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_holds_events_pending_and_the_consumer_recovers_without_a_restart() {
    let test_started = Instant::now();
    let (mut postgres, database_url) = migrated_private_database("wallet_ledger_outage").await;
    let wallets: Vec<String> = (1..=4).map(|i| format!("outage-w{i}")).collect();
    let ledger = TestApp::attach(&database_url).await;
    for wallet in &wallets {
        ledger.create_wallet(wallet).await;
    }
    ledger.finish().await;

    let redis_url = shared_redis_url();
    let stream = unique_stream("outage");
    let conn = redis_at(&redis_url).await;
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let log = log_file("outage");
    let mut command = consumer_command(
        &database_url,
        &redis_url,
        &stream,
        "outage-c1",
        &["--batch-size", "100", "--metrics-addr", &metrics_addr],
    );
    command.stdout(Stdio::null()).stderr(append_to(&log));
    let mut consumer = command.spawn().expect("the consumer starts");
    assert!(
        eventually(Duration::from_secs(20), || async {
            readyz(&metrics_addr).await == Some(200)
        })
        .await,
        "the consumer never became ready:\n{}",
        tail(&log, 30)
    );

    let mut outage = Outage {
        postgres: &mut postgres,
        database_url: &database_url,
        conn,
        stream: &stream,
        metrics_addr: &metrics_addr,
        consumer: &mut consumer,
        log: &log,
        wallets: &wallets,
        rng: Rng(OUTAGE_SEED),
        payments: Vec::new(),
        messages: 0,
    };
    // Before: 40 payments, 4 of them resent, all applied.
    outage.publish(40, &[3, 11, 25, 39]).await;
    outage
        .assert_all_applied_once(Duration::from_secs(20), "before the outage")
        .await;
    // The database stops while the consumer waits for events, then while it applies 1,500.
    let idle = outage.round(0).await;
    let busy = outage.round(1_500).await;
    let (payments, messages) = (outage.payments.len(), outage.messages);
    let mut conn = outage.conn.clone();
    drop(outage);

    terminate(&consumer);
    let status = tokio::time::timeout(Duration::from_secs(10), consumer.wait())
        .await
        .expect("the consumer stops on SIGTERM")
        .unwrap();
    assert!(
        status.success(),
        "the consumer's exit: {status}\n{}",
        tail(&log, 30)
    );
    verify(&database_url).await;

    for (label, r) in [("idle", &idle), ("busy", &busy)] {
        eprintln!(
            "database outage ({label}): stopped with {} messages in flight; {} published \
             during it; /readyz 503 {:.2} s into it; 0 acknowledged, up to {} pending, 0 dead \
             letters, 0 failures charged for {:.1} s; the same consumer (no restart) had \
             everything applied exactly once and /readyz 200 {:.2} s after `pg_ctl start` began",
            r.in_flight,
            r.during,
            r.unready_after.as_secs_f64(),
            r.max_pending,
            r.outage.as_secs_f64(),
            r.recovery.as_secs_f64(),
        );
    }
    eprintln!(
        "database outage (seed {OUTAGE_SEED:#x}): {payments} payments as {messages} messages, \
         balances exact, verify OK; test {:.1} s",
        test_started.elapsed().as_secs_f64()
    );
    forget_stream(&mut conn, &stream).await;
    let _ = std::fs::remove_file(&log);
    drop(postgres);
}

/// While one consumer retries its batch through a database outage longer than the claim idle
/// time, a second, idle consumer of the group must not reclaim that batch: the holder claims
/// it again before each retry. Every message is delivered once, and applied once afterwards.
#[tokio::test]
async fn a_batch_retried_through_an_outage_is_never_reclaimed_by_another_consumer() {
    let (mut postgres, database_url) = migrated_private_database("wallet_ledger_reclaim").await;
    let ledger = TestApp::attach(&database_url).await;
    ledger.create_wallet("held").await;
    ledger.finish().await;

    let redis_url = shared_redis_url();
    let stream = unique_stream("reclaim");
    let mut conn = redis_at(&redis_url).await;
    let log = log_file("reclaim");
    let mut consumers = Vec::new();
    for name in ["c1", "c2"] {
        let mut command = consumer_command(
            &database_url,
            &redis_url,
            &stream,
            name,
            &["--batch-size", "100"],
        );
        command.stdout(Stdio::null()).stderr(append_to(&log));
        consumers.push(command.spawn().expect("the consumer starts"));
    }
    let group_ready = eventually(Duration::from_secs(20), || {
        let mut conn = conn.clone();
        let stream = stream.clone();
        async move {
            let groups: redis::RedisResult<redis::streams::StreamInfoGroupsReply> =
                conn.xinfo_groups(&stream).await;
            groups.is_ok_and(|g| !g.groups.is_empty())
        }
    })
    .await;
    assert!(group_ready, "{}", tail(&log, 30));

    postgres.stop().await;
    // One transaction: the first consumer woken reads the whole batch, the other stays idle
    // and scans for messages idle longer than --claim-idle-ms (1 s).
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..50 {
        let fields = vec![
            ("event_id".to_owned(), Uuid::new_v4().to_string()),
            ("wallet".to_owned(), "held".to_owned()),
            ("amount".to_owned(), "100".to_owned()),
        ];
        pipe.xadd(&stream, "*", &fields).ignore();
    }
    let _: () = pipe.query_async(&mut conn).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let reply: redis::streams::StreamPendingCountReply = conn
        .xpending_count(&stream, GROUP, "-", "+", 100)
        .await
        .unwrap();
    let owners: BTreeSet<&str> = reply.ids.iter().map(|p| p.consumer.as_str()).collect();
    let deliveries: BTreeSet<usize> = reply.ids.iter().map(|p| p.times_delivered).collect();
    assert_eq!(reply.ids.len(), 50, "{}", tail(&log, 30));
    assert_eq!(
        owners.len(),
        1,
        "one holder throughout: {owners:?}\n{}",
        tail(&log, 30)
    );
    assert_eq!(
        deliveries,
        BTreeSet::from([1]),
        "never reclaimed during the outage\n{}",
        tail(&log, 30)
    );

    postgres.restart().await;
    let drained = eventually(Duration::from_secs(20), || {
        let mut conn = conn.clone();
        let stream = stream.clone();
        async move { pending(&mut conn, &stream).await == 0 }
    })
    .await;
    assert!(drained, "{}", tail(&log, 30));
    let ledger = TestApp::attach(&database_url).await;
    assert_eq!(
        ledger.posted_balance("held").await,
        5_000,
        "each payment once"
    );
    ledger.finish().await;
    assert!(dead_letters(&mut conn, &stream).await.is_empty());
    for mut consumer in consumers {
        let _ = consumer.start_kill();
        let _ = consumer.wait().await;
    }
    forget_stream(&mut conn, &stream).await;
}
