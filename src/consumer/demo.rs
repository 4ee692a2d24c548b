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

/// Returns whether the run ended as the article expects.
pub async fn run(args: DemoSettings) -> anyhow::Result<bool> {
    let wallet = AccountId::parse(&args.wallet).context("--wallet is not a valid account id")?;
    if crate::broker::is_cluster(&args.redis.url) {
        // Its consumers read one stream, not partitions: refused now rather than by c1.
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
    let pool = crate::db::connect_and_migrate(&args.database).await?;
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
    let currency = account.currency();
    let before = accounts::wallet_posted_balance(&mut conn, wallet.as_str()).await?;
    drop(conn);

    let mut redis = crate::broker::connect(&args.redis.url).await?;
    let dead_letters = format!("{}.dlq", args.stream);
    let _: () = redis
        .del(&[
            &args.stream,
            &dead_letters,
            &format!("{}.failures.{GROUP}", args.stream),
        ])
        .await?;
    let _: () = redis
        .xgroup_create_mkstream(&args.stream, GROUP, "0")
        .await?;

    // The producer: five payments, then payment 2 again after its call "timed out".
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
    let ids = publish_raw(&mut redis, &args.stream, &messages).await?;
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

    let (site, when) = match args.crash {
        DemoCrash::AfterCommit => (
            failpoint::CONSUMER_AFTER_COMMIT,
            "after its COMMIT, before its XACK",
        ),
        DemoCrash::BeforeCommit => (failpoint::CONSUMER_BEFORE_COMMIT, "before its COMMIT"),
    };
    println!("\nconsumer c1 (batch size 1) dies while handling event 3, {when}:");
    let c1 = consumer(&args, "c1", Some(&format!("{site}@3")))
        .status()
        .await
        .context("cannot start consumer c1")?;
    if c1.signal() != Some(libc::SIGKILL) {
        anyhow::bail!("consumer c1 should have been killed at {site}, but it exited with {c1}");
    }
    println!("  c1: killed by SIGKILL at the fail point {site}");

    // What c1 left pending must be idle long enough for c2 to reclaim it.
    tokio::time::sleep(std::time::Duration::from_millis(args.claim_idle_ms + 200)).await;
    println!("\nconsumer c2 starts:");
    let c2 = consumer(&args, "c2", None)
        .status()
        .await
        .context("cannot start consumer c2")?;
    anyhow::ensure!(c2.success(), "consumer c2 failed: {c2}");

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
