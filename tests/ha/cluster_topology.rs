//! `scripts/redis-cluster.sh` driven from a test: three masters and three replicas of a Redis
//! Cluster of its own in a temporary folder, removed (every server killed) when dropped; and
//! what a chaos test needs of it: which master serves a key's slot, SIGKILL of one server, and
//! the killed one brought back as a replica.

use crate::topology::run_script;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use uuid::Uuid;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/redis-cluster.sh");

pub struct RedisCluster {
    dir: PathBuf,
    /// `redis+cluster://` naming all six nodes, as `up` prints it.
    pub url: String,
    /// The six nodes' client ports.
    pub ports: Vec<u16>,
}

/// One line of `CLUSTER NODES`, as far as the tests need it.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub port: u16,
    pub master: bool,
    pub failed: bool,
    /// The master's id, for a replica.
    pub master_id: Option<String>,
    /// Slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    pub async fn up() -> RedisCluster {
        let dir = std::env::temp_dir().join(format!("wl-rc-{}", Uuid::new_v4().simple()));
        let mut cluster = RedisCluster {
            dir,
            url: String::new(),
            ports: Vec::new(),
        };
        let printed = cluster.run("up", Duration::from_secs(120)).await;
        cluster.url = printed
            .lines()
            .find_map(|l| l.strip_prefix("REDIS_URL="))
            .unwrap_or_else(|| panic!("no REDIS_URL= line in {printed:?}"))
            .to_owned();
        cluster.ports = cluster
            .url
            .trim_start_matches("redis+cluster://")
            .split(',')
            .map(|a| a.rsplit_once(':').unwrap().1.parse().unwrap())
            .collect();
        assert_eq!(cluster.ports.len(), 6, "{}", cluster.url);
        cluster
    }

    /// One subcommand of the script on this cluster; its stdout. A failure fails the test.
    async fn run(&self, subcommand: &str, limit: Duration) -> String {
        run_script(
            SCRIPT,
            ("REDIS_CLUSTER_DIR", &self.dir),
            &[subcommand],
            limit,
        )
        .await
    }

    /// `CLUSTER NODES` as the first node that answers sees it.
    pub async fn nodes(&self) -> Vec<Node> {
        for &port in &self.ports {
            let Some(text) = node_command(port, &["CLUSTER", "NODES"]).await else {
                continue;
            };
            return text.lines().filter_map(parse_node).collect();
        }
        panic!("no node of {} answers", self.url);
    }

    /// The port of the master serving `key`'s slot, as the cluster sees it now (a master
    /// marked failed counts as none).
    pub async fn master_of(&self, key: &str) -> Option<u16> {
        let slot = self.slot_of(key).await;
        self.nodes()
            .await
            .into_iter()
            .find(|n| {
                n.master && !n.failed && n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .map(|n| n.port)
    }

    /// `CLUSTER KEYSLOT key`: the server's own hashing, not a copy of it.
    pub async fn slot_of(&self, key: &str) -> u16 {
        for &port in &self.ports {
            if let Some(slot) = node_command(port, &["CLUSTER", "KEYSLOT", key]).await {
                return slot.parse().unwrap();
            }
        }
        panic!("no node of {} answers", self.url);
    }

    /// The port of `master`'s replica.
    pub async fn replica_of(&self, master: u16) -> u16 {
        let nodes = self.nodes().await;
        let id = &nodes.iter().find(|n| n.port == master).expect("known").id;
        nodes
            .iter()
            .find(|n| n.master_id.as_ref() == Some(id))
            .unwrap_or_else(|| panic!("{master} has no replica: {nodes:?}"))
            .port
    }

    /// SIGKILL of the server on `port` (no shutdown, no last write to its replica).
    pub fn kill(&self, port: u16) {
        let file = self.dir.join(format!("server-{port}.pid"));
        let pid: i32 = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .trim()
            .parse()
            .unwrap();
        // SAFETY: kill(2) on a pid the script started for this cluster.
        let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(killed, 0, "SIGKILL of redis-server {port} (pid {pid})");
    }

    /// Waits until a master other than `old` serves `key`'s slot and takes a write there;
    /// returns its port.
    pub async fn wait_new_master(&self, key: &str, old: u16) -> u16 {
        let replaced = crate::common::poll(Duration::from_secs(60), || async {
            let port = self.master_of(key).await.filter(|port| *port != old)?;
            node_command(port, &["SET", &format!("{key}.probe"), "1"])
                .await
                .map(|_| port)
        })
        .await;
        match replaced {
            Some(port) => port,
            None => panic!(
                "no master replaced {old} for {key} in 60 s: {:?}",
                self.nodes().await
            ),
        }
    }

    /// Starts every killed server again (each comes back as a replica once its slots moved)
    /// and waits until the cluster is whole: three masters, each with a replica in sync.
    pub async fn heal(&self) {
        self.run("up", Duration::from_secs(120)).await;
    }

    /// Connected replicas of the master on `port` (`INFO replication`).
    pub async fn connected_replicas(&self, port: u16) -> Option<u32> {
        let info = node_command(port, &["INFO", "replication"]).await?;
        info.lines()
            .find_map(|l| l.trim().strip_prefix("connected_slaves:"))
            .and_then(|n| n.parse().ok())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(SCRIPT)
            .arg("down")
            .env("REDIS_CLUSTER_DIR", &self.dir)
            .stdin(Stdio::null())
            .status();
    }
}

/// One command to one node (no cluster routing, no redirection); its reply as text, or
/// `None` when the node does not answer or refuses.
async fn node_command(port: u16, args: &[&str]) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .ok()?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    let value: redis::Value = cmd.query_async(&mut conn).await.ok()?;
    match value {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        redis::Value::VerbatimString { text, .. } => Some(text),
        redis::Value::SimpleString(s) => Some(s),
        redis::Value::Int(n) => Some(n.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// `<id> <ip:port@bus> <flags> <master id or -> <ping> <pong> <epoch> <link> <slot>...`
fn parse_node(line: &str) -> Option<Node> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let port = fields[1]
        .split('@')
        .next()?
        .rsplit_once(':')?
        .1
        .parse()
        .ok()?;
    let flags = fields[2];
    let slots = fields[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|n| (n, n)),
        })
        .collect();
    Some(Node {
        id: fields[0].to_owned(),
        port,
        master: flags.contains("master"),
        failed: flags.contains("fail"),
        master_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
    })
}

/// Masters by port, each with the partition streams of `streams` its slots hold.
pub async fn masters_of(cluster: &RedisCluster, streams: &[String]) -> BTreeMap<u16, Vec<String>> {
    let mut masters: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for stream in streams {
        let master = cluster.master_of(stream).await.expect("every slot served");
        masters.entry(master).or_default().push(stream.clone());
    }
    masters
}
