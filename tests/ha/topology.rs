//! `scripts/ha.sh` driven from a test: a topology of its own in a temporary folder, removed
//! (everything in it killed) when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::{Mutex, MutexGuard};
use uuid::Uuid;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/ha.sh");

/// One HA test at a time: a topology is a handful of servers on two cores. (Each test has a
/// runtime of its own; tokio's mutex is not tied to one.)
pub async fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::const_new(());
    TURN.lock().await
}

pub struct Topology {
    dir: PathBuf,
    /// Every data node, `target_session_attrs=read-write` (with `pg`).
    pub database_url: String,
    /// `redis+sentinel://` with the three Sentinels (with `redis`).
    pub redis_url: String,
}

impl Topology {
    /// `ha.sh up <parts>`: `pg`, `redis` or `all`.
    pub async fn up(parts: &str) -> Topology {
        let dir = std::env::temp_dir().join(format!("wl-ha-{}", Uuid::new_v4().simple()));
        let mut topology = Topology {
            dir,
            database_url: String::new(),
            redis_url: String::new(),
        };
        let printed = topology.run(&["up", parts], Duration::from_secs(240)).await;
        for line in printed.lines() {
            if let Some(url) = line.strip_prefix("DATABASE_URL=") {
                topology.database_url = url.to_owned();
            } else if let Some(url) = line.strip_prefix("REDIS_URL=") {
                topology.redis_url = url.to_owned();
            }
        }
        topology
    }

    /// Runs one `ha.sh` subcommand on this topology; its stdout, trimmed. A failure fails the
    /// test with what the script said.
    pub async fn run(&self, args: &[&str], limit: Duration) -> String {
        run_script(SCRIPT, ("HA_DIR", &self.dir), args, limit).await
    }

    /// `(node name, port)` of the node the monitor calls primary.
    pub async fn pg_primary(&self) -> (String, u16) {
        node_and_port(&self.run(&["primary"], Duration::from_secs(30)).await)
    }

    /// Kills the primary's machine (postmaster and keeper together); returns the node's name.
    pub async fn kill_pg_primary(&self) -> String {
        self.run(&["kill-pg-primary"], Duration::from_secs(30))
            .await
    }

    /// Freezes the primary's machine (SIGSTOP of its keeper, postmaster and backends, as a
    /// paused VM): the guard thaws it when dropped, whatever the test did meanwhile.
    pub async fn freeze_pg_primary(&self) -> Frozen {
        Frozen::from_printed(
            &self
                .run(&["freeze-pg-primary"], Duration::from_secs(30))
                .await,
        )
    }

    /// Freezes the Redis master's server (SIGSTOP, as a paused VM); `Frozen::node` is its
    /// port. The guard thaws it when dropped.
    pub async fn freeze_redis_master(&self) -> Frozen {
        Frozen::from_printed(
            &self
                .run(&["freeze-redis-master"], Duration::from_secs(30))
                .await,
        )
    }

    /// Waits until the Redis server of `port` (a thawed old master) is a replica again.
    pub async fn wait_redis_replica(&self, port: u16) {
        let port = port.to_string();
        self.run(
            &["wait-redis-replica", &port, "90"],
            Duration::from_secs(100),
        )
        .await;
    }

    /// Waits until a node other than `old` is primary and takes writes.
    pub async fn wait_pg_primary(&self, old: &str) -> (String, u16) {
        node_and_port(
            &self
                .run(&["wait-pg-primary", old, "120"], Duration::from_secs(130))
                .await,
        )
    }

    /// Starts `node`'s keeper again and waits until the pair is whole.
    pub async fn rejoin(&self, node: &str) {
        self.run(&["restart-node", node], Duration::from_secs(30))
            .await;
        self.run(&["wait-pg-pair", "120"], Duration::from_secs(130))
            .await;
    }

    /// SIGKILLs the Redis master; returns its port.
    pub async fn kill_redis_master(&self) -> u16 {
        port(
            &self
                .run(&["kill-redis-master"], Duration::from_secs(30))
                .await,
        )
    }

    /// Waits until the Sentinels name a master other than `old` and it answers as one.
    pub async fn wait_redis_master(&self, old: u16) -> u16 {
        let old = old.to_string();
        port(
            &self
                .run(&["wait-redis-master", &old, "60"], Duration::from_secs(70))
                .await,
        )
    }

    /// Starts the killed Redis on `port` again: it comes back as a replica.
    pub async fn restart_redis(&self, port: u16) {
        let port = port.to_string();
        self.run(&["restart-redis", &port], Duration::from_secs(60))
            .await;
    }

    /// The port of data node `node`.
    pub async fn port_of(&self, node: &str) -> u16 {
        let ports = std::fs::read_to_string(self.dir.join("pg").join("ports"))
            .expect("ha.sh wrote its ports");
        let key = format!("{}_PORT=", node.to_uppercase());
        let line = ports
            .lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("no {key} in {ports}"));
        port(line)
    }

    /// A single-host URL of the data node on `port`.
    pub fn node_url(&self, port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/wallet_ledger")
    }
}

/// A frozen node: its processes stopped, until [`Frozen::thaw`] or the guard's drop.
pub struct Frozen {
    pub node: String,
    pids: Vec<String>,
}

impl Frozen {
    /// From ha.sh's last line: "NODE PID...".
    fn from_printed(printed: &str) -> Frozen {
        let mut words = printed
            .lines()
            .last()
            .unwrap_or_default()
            .split_whitespace();
        let node = words.next().expect("the frozen node's name").to_owned();
        let pids: Vec<String> = words.map(str::to_owned).collect();
        assert!(!pids.is_empty(), "no process frozen: {printed}");
        Frozen { node, pids }
    }

    /// SIGCONT to every process frozen (idempotent).
    pub fn thaw(&mut self) {
        if self.pids.is_empty() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .arg("-CONT")
            .args(&self.pids)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status();
        self.pids.clear();
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.thaw();
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(SCRIPT)
            .arg("down")
            .env("HA_DIR", &self.dir)
            .stdin(Stdio::null())
            .status();
    }
}

/// Runs `script` with `args` and the folder variable `dir` (name, value); its stdout, trimmed.
/// A failure, or a run past `limit`, fails the test with what the script said.
pub async fn run_script(
    script: &str,
    dir: (&str, &std::path::Path),
    args: &[&str],
    limit: Duration,
) -> String {
    let mut command = Command::new("bash");
    command
        .arg(script)
        .args(args)
        .env(dir.0, dir.1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("{script} {args:?} did not finish in {limit:?}"))
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        output.status.success(),
        "{script} {args:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn node_and_port(printed: &str) -> (String, u16) {
    let line = printed.lines().last().unwrap_or_default();
    let (node, p) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("`node port`, not {line:?}"));
    (node.to_owned(), port(p))
}

fn port(printed: &str) -> u16 {
    let text = printed.lines().last().unwrap_or_default();
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("a port, not {text:?}"))
}
