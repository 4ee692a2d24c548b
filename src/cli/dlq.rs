//! `wallet-ledger dlq list | replay | drop`: the operator's side of the dead-letter stream.

use super::shared::{PartitionArgs, RedisArgs, StreamArgs};
use crate::consumer::dlq;
use crate::consumer::stream::StreamSettings;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct DlqArgs {
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub stream: StreamArgs,
    /// With several, every command covers all partitions' dead letters; single ids need the
    /// partition's own stream (`--stream 'payments:{2}'`, as `dlq list` prints it).
    #[command(flatten)]
    pub partitions: PartitionArgs,
    #[command(subcommand)]
    pub action: DlqAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum DlqAction {
    /// Print the dead letters, oldest first, one JSON object a line on stdout (with none,
    /// `no dead letters in <stream>.dlq` on stderr).
    #[command(after_help = "Example:\n  wallet-ledger dlq list --count 10")]
    List {
        /// Most dead letters printed.
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
    /// Publish dead letters to the stream again (same event id, so they stay idempotent)
    /// and remove them from the dead-letter stream, atomically.
    #[command(after_help = "Example:\n  wallet-ledger dlq replay 1796016587604-0")]
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
    #[command(after_help = "Example:\n  wallet-ledger dlq drop --all")]
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
    let partitions = args.partitions.settings();
    let base = args.stream.settings();
    let partitioned = partitions.count() > 1;
    // One partition is the base stream itself: everything as before.
    let streams: Vec<StreamSettings> = partitions
        .streams(&base.stream)
        .into_iter()
        .map(|stream| StreamSettings {
            stream,
            group: base.group.clone(),
        })
        .collect();
    match args.action {
        DlqAction::List { count } => list(&mut conn, &streams, count, partitioned).await?,
        DlqAction::Replay { ids, all } => {
            let n = settle(&mut conn, &streams, dlq::Action::Replay, &ids, all, &base).await?;
            if partitioned {
                println!(
                    "replayed {n} dead letters to the {} partitions of {}",
                    partitions.count(),
                    base.stream
                );
            } else {
                println!("replayed {n} dead letters to {}", base.stream);
            }
        }
        DlqAction::Drop { ids, all } => {
            let n = settle(&mut conn, &streams, dlq::Action::Drop, &ids, all, &base).await?;
            println!("dropped {n} dead letters");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Replays or drops the chosen dead letters of every stream (`dlq::settle_chosen`, which the
/// API uses too); returns how many this run settled, and says on stderr how many named ones
/// had been settled before (a no-op).
async fn settle(
    conn: &mut crate::broker::Connection,
    streams: &[StreamSettings],
    action: dlq::Action,
    ids: &[String],
    all: bool,
    base: &StreamSettings,
) -> anyhow::Result<usize> {
    if ids.is_empty() && !all {
        anyhow::bail!("name the dead letters (ids from `dlq list`) or pass --all");
    }
    refuse_ids_across_partitions(streams.len() > 1, ids, &base.stream)?;
    let (mut now, mut before) = (0, 0);
    for stream in streams {
        for settled in dlq::settle_chosen(conn, stream, action, ids, all).await? {
            match settled {
                dlq::Settled::Now(_) => now += 1,
                dlq::Settled::Before(_) => before += 1,
            }
        }
    }
    if before > 0 {
        eprintln!(
            "{before} of the named dead letters had been settled before: nothing done to them"
        );
    }
    Ok(now)
}

/// Prints up to `count` dead letters on stdout, one JSON object a line (nothing else there, so
/// a script reads every line as JSON); with none, says so on stderr.
async fn list(
    conn: &mut crate::broker::Connection,
    streams: &[StreamSettings],
    count: usize,
    partitioned: bool,
) -> anyhow::Result<()> {
    let mut left = count;
    for stream in streams {
        if left == 0 {
            break;
        }
        for entry in dlq::page(conn, &stream.dead_letters(), None, left).await? {
            let mut line = dlq::describe(&entry);
            if partitioned {
                line["stream"] = stream.stream.clone().into();
            }
            println!("{line}");
            left -= 1;
        }
    }
    if left == count {
        let names: Vec<String> = streams.iter().map(|s| s.dead_letters()).collect();
        eprintln!("no dead letters in {}", names.join(", "));
    }
    Ok(())
}

/// An entry id is unique only within one stream: the same id may name dead letters of two
/// partitions, so single ids are taken only with the partition's own stream.
fn refuse_ids_across_partitions(
    partitioned: bool,
    ids: &[String],
    base: &str,
) -> anyhow::Result<()> {
    if partitioned && !ids.is_empty() {
        anyhow::bail!(
            "dead-letter ids are per partition: name the partition's stream instead of \
             --partitions (`--stream '{base}:{{2}}'`, as `dlq list --partitions N` prints it), \
             or pass --all"
        );
    }
    Ok(())
}

/// A complete stream entry id (see `dlq::is_entry_id`), as clap's value parser.
fn stream_entry_id(value: &str) -> Result<String, String> {
    if dlq::is_entry_id(value) {
        Ok(value.to_owned())
    } else {
        Err(
            "must be a complete entry id such as 1796016587604-0 (as `dlq list` prints it)"
                .to_owned(),
        )
    }
}
