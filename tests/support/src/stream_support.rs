//! Helpers for the stream consumer's tests: a unique stream per test on the shared Redis, a
//! private `redis-server` for tests that kill the broker, consumer processes of the real
//! binary, and reads of what the ledger and the broker hold afterwards.

use crate::backend::Backend;
use crate::common::TestApp;
pub use crate::common::eventually;
use redis::AsyncCommands;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use uuid::Uuid;

/// The service's binary, which `cargo test` builds beside the test binaries: `target/<profile>/
/// wallet-ledger` for a test running from `target/<profile>/deps/`. (Cargo names it in
/// `CARGO_BIN_EXE_wallet-ledger` only while compiling the test crates, not this library.)
pub fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let test = std::env::current_exe().expect("the test binary's path");
        let profile = test
            .parent()
            .and_then(Path::parent)
            .expect("a test binary under target/<profile>/deps");
        let bin = profile.join("wallet-ledger");
        assert!(bin.exists(), "{} is built by cargo test", bin.display());
        bin
    })
}
/// The consumer group the tests' consumers use.
pub const GROUP: &str = "wallet-ledger";

pub fn shared_redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A stream name no other test (or test run) uses.
pub fn unique_stream(label: &str) -> String {
    format!(
        "test.{label}.{}.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        Uuid::new_v4().simple()
    )
}

pub async fn redis_at(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("Redis reachable")
}

/// One payment event in the contract's format (fields as given, in order).
pub fn event(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub async fn xadd(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &str,
    fields: &[(String, String)],
) -> String {
    conn.xadd(stream, "*", fields).await.unwrap()
}

/// Pending (delivered, unacknowledged) messages of the group; 0 when the group is missing.
/// (Any connection: the shared Redis, or a cluster's.)
pub async fn pending(conn: &mut (impl ConnectionLike + Send + Sync), stream: &str) -> usize {
    let reply: redis::RedisResult<redis::streams::StreamPendingReply> =
        conn.xpending(stream, GROUP).await;
    reply.map(|r| r.count()).unwrap_or(0)
}

/// The dead letters of `stream`, each as its field map (strings).
pub async fn dead_letters(
    conn: &mut (impl ConnectionLike + Send + Sync),
    stream: &str,
) -> Vec<BTreeMap<String, String>> {
    let reply: redis::streams::StreamRangeReply =
        conn.xrange_all(format!("{stream}.dlq")).await.unwrap();
    reply
        .ids
        .into_iter()
        .map(|entry| {
            entry
                .map
                .into_iter()
                .map(|(k, v)| (k, redis::from_redis_value::<String>(v).unwrap()))
                .collect()
        })
        .collect()
}

/// `wallet-ledger consume` against `database_url` and `redis_url`, with short timings so tests
/// never wait long; `extra` adds flags it does not set (clap refuses a flag given twice: use
/// `consumer_command_with` to change one of these).
pub fn consumer_command(
    database_url: &str,
    redis_url: &str,
    stream: &str,
    name: &str,
    extra: &[&str],
) -> Command {
    let mut command = Command::new(bin());
    command
        .args([
            "consume",
            "--database-url",
            database_url,
            "--redis-url",
            redis_url,
        ])
        .args(["--stream", stream, "--group", GROUP, "--consumer", name])
        .args([
            "--block-ms",
            "100",
            "--claim-idle-ms",
            "1000",
            "--max-batch-ms",
            "800",
        ])
        .args([
            "--outage-backoff-ms",
            "50",
            "--outage-backoff-max-ms",
            "500",
            "--stats-interval-ms",
            "100",
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("WALLET_LEDGER_FAILPOINT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `command` to its end within `limit`; returns its exit status and output.
/// A process still running at `limit` is killed, and the test fails with what it printed.
pub async fn run_to_end(mut command: Command, limit: Duration) -> std::process::Output {
    use tokio::io::AsyncReadExt;
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the binary starts");
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
        tokio::spawn(async move {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes).await;
            }
            bytes
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let (status, timed_out) = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => (status.unwrap(), false),
        Err(_) => {
            let _ = child.kill().await;
            (child.wait().await.unwrap(), true)
        }
    };
    let output = Output {
        status,
        stdout: stdout.await.unwrap(),
        stderr: stderr.await.unwrap(),
    };
    assert!(
        !timed_out,
        "the process did not finish within {limit:?}: {}",
        describe(&output)
    );
    output
}

/// Sends SIGTERM (a graceful stop) to a child.
pub fn terminate(child: &Child) {
    let pid = child.id().expect("the child is running") as i32;
    // SAFETY: kill(2) on a child's pid has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released for the caller to use).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` of the test's own, on a free port, with an append-only file so that its
/// streams and consumer groups survive a restart. Killed (and its directory removed) on drop.
pub struct PrivateRedis {
    pub port: u16,
    dir: PathBuf,
    child: Option<std::process::Child>,
}

impl PrivateRedis {
    pub async fn start() -> PrivateRedis {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("wl-redis-{port}-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = PrivateRedis {
            port,
            dir,
            child: None,
        };
        redis.restart().await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server with SIGKILL (as a crash would).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it (again) on the same port and data directory, and waits until it answers.
    pub async fn restart(&mut self) {
        self.kill();
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        self.child = Some(child);
        let url = self.url();
        let up = eventually(Duration::from_secs(10), || {
            let url = url.clone();
            async move {
                match redis::Client::open(url.as_str())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                {
                    Ok(mut c) => redis::cmd("PING")
                        .query_async::<String>(&mut c)
                        .await
                        .is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        assert!(up, "the private redis-server did not start");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Like [`consumer_command`], but a flag that `extra` names replaces the default one instead of
/// repeating it: clap refuses a flag given twice ("cannot be used multiple times"), so
/// `consumer_command(.., &["--claim-idle-ms", "300"])` exits 2 before it does anything.
pub fn consumer_command_with(
    database_url: &str,
    redis_url: &str,
    stream: &str,
    name: &str,
    extra: &[&str],
) -> Command {
    let defaults = [
        ("--block-ms", "100"),
        ("--claim-idle-ms", "1000"),
        ("--max-batch-ms", "800"),
        ("--outage-backoff-ms", "50"),
        ("--outage-backoff-max-ms", "500"),
        ("--stats-interval-ms", "100"),
    ];
    let mut command = Command::new(bin());
    command
        .args([
            "consume",
            "--database-url",
            database_url,
            "--redis-url",
            redis_url,
        ])
        .args(["--stream", stream, "--group", GROUP, "--consumer", name]);
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            command.args([flag, value]);
        }
    }
    command
        .args(extra)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("WALLET_LEDGER_FAILPOINT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// A plain HTTP/1.1 GET (no client dependency): the status code and the body, or `None`
/// while nothing answers on `addr`.
pub async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Some((status, body))
}

/// A PostgreSQL server of the test's own (`initdb` into a fresh directory, trust
/// authentication, user `postgres`), on a free port of 127.0.0.1 and a private socket
/// directory, for tests that take the database away. As root the server runs as the
/// `postgres` user (`initdb` refuses root). Stopped (`-m immediate`) and removed on drop.
pub struct PrivatePostgres {
    pub port: u16,
    root: PathBuf,
    bin: PathBuf,
    running: bool,
}

impl PrivatePostgres {
    /// Creates the cluster and starts it; waits until it accepts connections.
    pub async fn start() -> PrivatePostgres {
        let bin = postgres_bin_dir();
        let port = free_port();
        // Under /tmp (not $TMPDIR): the `postgres` user must be able to reach it.
        let root = PathBuf::from("/tmp").join(format!("wl-pg-{port}-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(root.join("sock")).unwrap();
        if as_root() {
            let chown = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&root)
                .status()
                .expect("chown runs");
            assert!(
                chown.success(),
                "cannot give {} to the postgres user",
                root.display()
            );
        }
        let postgres = PrivatePostgres {
            port,
            root,
            bin,
            running: false,
        };
        let data = postgres.data_dir();
        let output = postgres
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .await
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let settings = format!(
            "\n# PrivatePostgres\nport = {port}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nfsync = off\nsynchronous_commit = off\n\
             full_page_writes = off\nshared_buffers = 16MB\nmax_connections = 60\n",
            postgres.root.join("sock").display()
        );
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .and_then(|mut f| f.write_all(settings.as_bytes()))
            .expect("postgresql.conf is writable");
        let mut postgres = postgres;
        postgres.restart().await;
        postgres
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stops the server the way an operator does (`pg_ctl stop -m fast`: open connections are
    /// terminated) and waits until it is down.
    pub async fn stop(&mut self) {
        if !self.running {
            return;
        }
        self.pg_ctl_succeeds(
            self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "30"]),
            "stop",
        )
        .await;
        self.running = false;
    }

    /// Runs a `pg_ctl` command; its failure fails the test with the server's log.
    async fn pg_ctl_succeeds(&self, mut command: Command, what: &str) {
        let output = command.output().await.expect("pg_ctl runs");
        assert!(
            output.status.success(),
            "pg_ctl {what} failed: {}",
            self.log_tail(&output)
        );
    }

    /// Starts it (again, after `stop`) on the same port and data, and waits until it accepts
    /// connections over TCP.
    pub async fn restart(&mut self) {
        self.stop().await;
        let log = self.root.join("postgres.log");
        let mut start = self.pg_ctl(&["start", "-w", "-t", "30", "-l"]);
        start.arg(&log);
        self.pg_ctl_succeeds(start, "start").await;
        self.running = true;
        let url = self.url("postgres");
        let up = eventually(Duration::from_secs(30), || {
            let url = url.clone();
            async move {
                use sqlx::Connection;
                match sqlx::PgConnection::connect(&url).await {
                    Ok(c) => c.close().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        assert!(up, "the private PostgreSQL does not accept connections");
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// A command of the server's binaries, as the `postgres` user when we are root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut command = if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        command.stdin(Stdio::null()).kill_on_drop(true);
        command
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut command = self.command("pg_ctl");
        command.arg("-D").arg(self.data_dir()).args(args);
        command
    }

    fn log_tail(&self, output: &std::process::Output) -> String {
        let log = std::fs::read_to_string(self.root.join("postgres.log")).unwrap_or_default();
        let tail: Vec<&str> = log
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!(
            "{}{}\n--- postgres.log ---\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            tail.join("\n")
        )
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.running {
            let mut command = if as_root() {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", "postgres", "--"])
                    .arg(self.bin.join("pg_ctl"));
                c
            } else {
                std::process::Command::new(self.bin.join("pg_ctl"))
            };
            let _ = command
                .arg("-D")
                .arg(self.data_dir())
                .args(["stop", "-m", "immediate", "-w", "-t", "30"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn as_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb` (or `PG_BIN_DIR`).
fn postgres_bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .expect("PostgreSQL server binaries under /usr/lib/postgresql/*/bin (or PG_BIN_DIR)")
}

impl PrivateRedis {
    /// Kills the server (SIGKILL) and starts it again on the same port with its data gone: what
    /// a failover to a replica that had not caught up, or a server without persistence, leaves.
    pub async fn restart_empty(&mut self) {
        self.kill();
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
        self.restart().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Running and reading the consumer and the dlq tools (shared by the consumer suites)

/// A consumer of `stream` on the shared Redis, writing to the test's database.
pub fn consume<B: Backend>(app: &TestApp<B>, stream: &str, name: &str, extra: &[&str]) -> Command {
    consumer_command_with(&app.database_url, &shared_redis_url(), stream, name, extra)
}

/// `wallet-ledger publish --redis-url .. --stream .. <extra...>`.
pub fn publish(stream: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args([
            "publish",
            "--redis-url",
            &shared_redis_url(),
            "--stream",
            stream,
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// `wallet-ledger dlq --redis-url .. --stream .. <action...>`.
pub fn dlq(stream: &str, action: &[&str]) -> Command {
    let mut command = Command::new(bin());
    command
        .args([
            "dlq",
            "--redis-url",
            &shared_redis_url(),
            "--stream",
            stream,
        ])
        .args(action)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// What a process printed, without terminal colours.
pub fn text(bytes: &[u8]) -> String {
    let raw = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A process's status and the ends of its output: enough to diagnose a failure, short enough
/// that a CI log keeps the assertion's own message next to it.
pub fn describe(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        last_lines(&text(&output.stdout), DESCRIBED_LINES),
        last_lines(&text(&output.stderr), DESCRIBED_LINES)
    )
}

const DESCRIBED_LINES: usize = 80;

/// The last `n` lines of `text`, saying how many were left out before them.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= n {
        return text.to_owned();
    }
    let cut = lines.len() - n;
    format!(
        "[{cut} earlier lines left out]\n{}",
        lines[cut..].join("\n")
    )
}

pub fn assert_exit_0(output: &Output, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what} should exit 0: {}",
        describe(output)
    );
}

/// Removes a test's keys from the shared Redis.
pub async fn forget(redis: &mut (impl ConnectionLike + Send + Sync), stream: &str, group: &str) {
    let keys = [
        stream.to_owned(),
        format!("{stream}.dlq"),
        format!("{stream}.failures.{group}"),
    ];
    let _: () = redis.del(&keys).await.unwrap();
}

/// `key=value` of the log line "consumer stopped" (the consumer's totals).
pub fn stopped_total(stderr: &str, key: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains("consumer stopped"))
        .unwrap_or_else(|| panic!("no \"consumer stopped\" line in:\n{stderr}"));
    let after = line
        .split_once(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        .1;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The value of one Prometheus series (`name{labels}` exactly as rendered).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

pub fn payment(event_id: Uuid, wallet: &str, amount: &str) -> Vec<(String, String)> {
    event(&[
        ("event_id", &event_id.to_string()),
        ("wallet", wallet),
        ("amount", amount),
    ])
}

/// A spawned consumer that runs until told to stop, its output collected.
pub fn spawn(mut command: Command) -> tokio::process::Child {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command.spawn().expect("the binary starts")
}

/// SIGTERM, then the output, which must come within `within`.
pub async fn stop(child: tokio::process::Child, within: Duration) -> (Output, Duration) {
    let asked = Instant::now();
    terminate(&child);
    let output = tokio::time::timeout(within, child.wait_with_output())
        .await
        .expect("the consumer stopped in time after SIGTERM")
        .unwrap();
    (output, asked.elapsed())
}

/// A `serve` process of the real binary on a free port, its stderr in a file.
pub struct Server {
    pub child: tokio::process::Child,
    pub addr: String,
    pub log: std::path::PathBuf,
}

pub async fn serve(database_url: &str, extra_env: &[(&str, &str)], extra_args: &[&str]) -> Server {
    let addr = format!("127.0.0.1:{}", free_port());
    let log = std::env::temp_dir().join(format!("wl-security-{}.log", Uuid::new_v4().simple()));
    let file = std::fs::File::create(&log).unwrap();
    let mut command = Command::new(bin());
    command
        .args([
            "serve",
            "--database-url",
            database_url,
            "--listen-addr",
            &addr,
        ])
        .args(extra_args)
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .kill_on_drop(true);
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let child = command.spawn().expect("the binary starts");
    let up = eventually(Duration::from_secs(30), || {
        let addr = addr.clone();
        async move { matches!(http_get(&addr, "/healthz").await, Some((200, _))) }
    })
    .await;
    assert!(
        up,
        "serve answered /healthz: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    Server { child, addr, log }
}

impl Server {
    /// SIGTERM, then the exit status and everything it logged.
    pub async fn stop(mut self) -> (std::process::ExitStatus, String) {
        terminate(&self.child);
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("serve stopped after SIGTERM")
            .unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap();
        let _ = std::fs::remove_file(&self.log);
        (status, log)
    }
}
