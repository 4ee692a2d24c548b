//! `wallet-ledger dlq list | replay | drop`: the operator's side of the dead-letter stream.

use super::shared::{RedisArgs, StreamArgs};
use crate::consumer::dlq;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct DlqArgs {
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
    #[command(subcommand)]
    pub action: DlqAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum DlqAction {
    /// Print the dead letters, oldest first, one JSON object a line.
    List {
        /// Most dead letters printed.
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Publish dead letters to the stream again (same event id, so they stay idempotent)
    /// and remove them from the dead-letter stream, atomically.
    Replay {
        /// Dead-letter entry ids, exact and complete (`1796016587604-0`, as `dlq list` shows
        /// them); a repeated id counts once.
        #[arg(value_parser = stream_entry_id)]
        ids: Vec<String>,
        /// Every dead letter.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
    /// Delete dead letters for good.
    Drop {
        /// Dead-letter entry ids, exact and complete; a repeated id counts once.
        #[arg(value_parser = stream_entry_id)]
        ids: Vec<String>,
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
}

pub async fn run(args: DlqArgs) -> anyhow::Result<ExitCode> {
    let mut conn = crate::broker::connect(&args.redis.url).await?;
    let stream = args.stream.settings();
    match args.action {
        DlqAction::List { count } => {
            for entry in dlq::list(&mut conn, &stream.dead_letters(), count).await? {
                println!("{}", dlq::describe(&entry));
            }
        }
        DlqAction::Replay { ids, all } => {
            let n = dlq::replay(&mut conn, &stream, ids, all).await?;
            println!("replayed {n} dead letters to {}", stream.stream);
        }
        DlqAction::Drop { ids, all } => {
            let n = dlq::drop(&mut conn, &stream, ids, all).await?;
            println!("dropped {n} dead letters");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A complete stream entry id, `<milliseconds>-<sequence>`: Redis reads `1796156703304` alone
/// as a range covering every entry of that millisecond, which would act on more than was named.
fn stream_entry_id(value: &str) -> Result<String, String> {
    let complete = value.split_once('-').is_some_and(|(ms, seq)| {
        [ms, seq].iter().all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && part.parse::<u64>().is_ok()
        })
    });
    if complete {
        Ok(value.to_owned())
    } else {
        Err(
            "must be a complete entry id such as 1796016587604-0 (as `dlq list` prints it)"
                .to_owned(),
        )
    }
}
