//! `wallet-ledger demo`: the seed article's lab, made real against the configured PostgreSQL
//! and Redis. Five payments of 50.00 to wallet `w1`, payment 2 sent twice, consumer c1 (batch
//! size 1, a child process) killed by a fail point while it handles payment 3, consumer c2
//! taking over. The wallet gains exactly 250.00; nothing stays pending or dead-lettered.

use super::producer::publish_raw;
use crate::failpoint;
use crate::ledger::accounts::{self, AccountType, NewAccount};
use crate::ledger::ids::AccountId;
use crate::ledger::money::Currency;
use anyhow::Context;
use redis::AsyncCommands;
use sqlx::PgPool;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use uuid::Uuid;

/// Where consumer c1 dies while it handles payment 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoCrash {
    /// c1 dies after its COMMIT and before its XACK (the article's crash).
    AfterCommit,
    /// c1 dies before its COMMIT.
    BeforeCommit,
}

#[derive(Debug, Clone)]
pub struct DemoSettings {
    pub database: crate::db::DatabaseSettings,
    pub redis: crate::broker::RedisSettings,
    /// The demo's own stream, recreated empty at the start.
    pub stream: String,
    /// The wallet credited (created in SAR if missing).
    pub wallet: String,
    pub crash: DemoCrash,
    /// Idle time after which c2 reclaims what c1 left pending.
    pub claim_idle_ms: u64,
}

const GROUP: &str = "wallet-ledger-demo";
const PAYMENTS: usize = 5;
const AMOUNT: i64 = 5_000;

/// The wallet to credit, checked before anything connects; on a Redis Cluster, the stream must
/// fit one slot (its consumers read one stream, not partitions: refused now rather than by c1).
pub fn check(args: &DemoSettings) -> anyhow::Result<AccountId> {
    let wallet = AccountId::parse(&args.wallet).context("--wallet is not a valid account id")?;
    if crate::broker::is_cluster(&args.redis.url) {
        super::stream::StreamSettings {
            stream: args.stream.clone(),
            group: GROUP.to_owned(),
        }
        .fits_one_slot()
        .map_err(|e| {
            anyhow::anyhow!(
                "{e}: the demo reads one stream, so give it a hash tag (--stream '{{{}}}')",
                args.stream
            )
        })?;
    }
    Ok(wallet)
}

/// Runs the lab on `pool`; returns whether it ended as the article expects.
pub async fn run(pool: &PgPool, args: &DemoSettings, wallet: &AccountId) -> anyhow::Result<bool> {
    let (currency, before) = open_wallet(pool, wallet).await?;
    let mut redis = crate::broker::connect(&args.redis.url).await?;
    let dead_letters = format!("{}.dlq", args.stream);
    let failures = format!("{}.failures.{GROUP}", args.stream);
    let _: () = redis.del(&[&args.stream, &dead_letters, &failures]).await?;
    let _: () = redis
        .xgroup_create_mkstream(&args.stream, GROUP, "0")
        .await?;
    produce(&mut redis, args, wallet, currency).await?;
    crash_and_take_over(args).await?;

    let mut conn = pool.acquire().await?;
    let after = accounts::wallet_posted_balance(&mut conn, wallet.as_str()).await?;
    let pending: redis::streams::StreamPendingReply = redis.xpending(&args.stream, GROUP).await?;
    let dead: usize = redis.xlen(&dead_letters).await?;
    let gained = after - before;
    println!(
        "\nfive different payments of {} were sent. wallet balance: {}   (gained {}, expected {})",
        currency.format(AMOUNT),
        currency.format(after),
        currency.format(gained),
        currency.format(AMOUNT * PAYMENTS as i64)
    );
    println!(
        "unacknowledged messages: {}   dead letters: {dead}",
        pending.count()
    );
    Ok(gained == AMOUNT * PAYMENTS as i64 && pending.count() == 0 && dead == 0)
}

/// The wallet, created in SAR if missing: its currency and its posted balance before the lab.
async fn open_wallet(pool: &PgPool, wallet: &AccountId) -> anyhow::Result<(Currency, i64)> {
    let mut conn = pool.acquire().await?;
    let sar = Currency::parse("SAR").expect("SAR is in the currency table");
    let new = NewAccount {
        id: wallet.clone(),
        currency: sar,
        kind: AccountType::Wallet,
        overdraft_limit: 0,
        metadata: Default::default(),
    };
    accounts::create(&mut conn, &new).await?;
    let account = accounts::find(&mut conn, wallet.as_str())
        .await?
        .context("the wallet vanished")?;
    let before = accounts::wallet_posted_balance(&mut conn, wallet.as_str()).await?;
    Ok((account.currency(), before))
}

/// The producer: five payments, then payment 2 again after its call "timed out".
async fn produce(
    redis: &mut crate::broker::Connection,
    args: &DemoSettings,
    wallet: &AccountId,
    currency: Currency,
) -> anyhow::Result<()> {
    let events: Vec<Uuid> = (0..PAYMENTS).map(|_| Uuid::new_v4()).collect();
    let mut order: Vec<usize> = (0..PAYMENTS).collect();
    order.push(1);
    let messages: Vec<Vec<(String, String)>> = order
        .iter()
        .map(|&i| {
            vec![
                ("n".to_owned(), (i + 1).to_string()),
                ("event_id".to_owned(), events[i].to_string()),
                ("wallet".to_owned(), wallet.to_string()),
                ("amount".to_owned(), AMOUNT.to_string()),
            ]
        })
        .collect();
    let ids = publish_raw(redis, &args.stream, &messages).await?;
    for (k, (&i, id)) in order.iter().zip(&ids).enumerate() {
        let resent = if k == PAYMENTS {
            "   <- sent again after a timeout"
        } else {
            ""
        };
        let short: String = events[i].to_string().chars().take(8).collect();
        println!(
            "producer: {id}  event {} ({short}) +{}{resent}",
            i + 1,
            currency.format(AMOUNT)
        );
    }
    Ok(())
}

/// Consumer c1 dies at the fail point while it handles payment 3; c2 takes over once what c1
/// left pending is idle long enough to reclaim.
async fn crash_and_take_over(args: &DemoSettings) -> anyhow::Result<()> {
    let (site, when) = match args.crash {
        DemoCrash::AfterCommit => (
            failpoint::CONSUMER_AFTER_COMMIT,
            "after its COMMIT, before its XACK",
        ),
        DemoCrash::BeforeCommit => (failpoint::CONSUMER_BEFORE_COMMIT, "before its COMMIT"),
    };
    println!("\nconsumer c1 (batch size 1) dies while handling event 3, {when}:");
    let c1 = consumer(args, "c1", Some(&format!("{site}@3")))
        .status()
        .await
        .context("cannot start consumer c1")?;
    if c1.signal() != Some(libc::SIGKILL) {
        anyhow::bail!("consumer c1 should have been killed at {site}, but it exited with {c1}");
    }
    println!("  c1: killed by SIGKILL at the fail point {site}");

    tokio::time::sleep(std::time::Duration::from_millis(args.claim_idle_ms + 200)).await;
    println!("\nconsumer c2 starts:");
    let c2 = consumer(args, "c2", None)
        .status()
        .await
        .context("cannot start consumer c2")?;
    anyhow::ensure!(c2.success(), "consumer c2 failed: {c2}");
    Ok(())
}

/// A consumer child process of this same binary: batch size 1, printing each event, exiting
/// once the group is drained.
fn consumer(args: &DemoSettings, name: &str, failpoint: Option<&str>) -> tokio::process::Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "wallet-ledger".into());
    let mut command = tokio::process::Command::new(exe);
    let claim_idle = args.claim_idle_ms.to_string();
    let max_batch = (args.claim_idle_ms / 2).to_string();
    command
        .args([
            "consume",
            "--drain",
            "--print-events",
            "--batch-size",
            "1",
            "--block-ms",
            "200",
        ])
        .args([
            "--consumer",
            name,
            "--stream",
            &args.stream,
            "--group",
            GROUP,
        ])
        .args(["--claim-idle-ms", &claim_idle, "--max-batch-ms", &max_batch])
        .args([
            "--database-url",
            &args.database.url,
            "--redis-url",
            &args.redis.url,
        ])
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned()),
        )
        .stdin(Stdio::null());
    match failpoint {
        Some(site) => command.env(failpoint::ENV, site),
        None => command.env_remove(failpoint::ENV),
    };
    command
}
