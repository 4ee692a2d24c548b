//! Where Redis is: one server (`redis://`, `rediss://`, `unix://`, used exactly as before), or
//! a master found through Sentinels:
//! `redis+sentinel://[[user]:password@]h1:p1,h2:p2,h3:p3/<master name>[/<db>]`.
//!
//! Behind Sentinels the master moves: when it is lost, Sentinel promotes a replica, and a
//! returning old master comes back as a replica that refuses writes (`READONLY`). Every
//! connection here asks the Sentinels where the master is when it connects, and a long-lived
//! [`MasterConnection`] asks again after any error that says the master may have moved, so
//! `consume`, the outbound events stream and `publish` follow a failover without a restart.
//! The credentials in the URL are the master's; the Sentinels are reached without them.
//!
//! Nothing acknowledged is lost only where writes were confirmed by a replica (`WAIT`, or
//! `min-replicas-to-write` on the master): Redis replicates asynchronously
//! (docs/operations.md, "High availability").

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, ConnectionAddr, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult};
use redis::{ServerErrorKind, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Where Redis or Valkey is: one server, or Sentinels and the master's name.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
}

impl Default for RedisSettings {
    fn default() -> RedisSettings {
        RedisSettings {
            url: DEFAULT_REDIS_URL.to_owned(),
        }
    }
}

const SENTINEL_SCHEME: &str = "redis+sentinel://";
const DEFAULT_SENTINEL_PORT: u16 = 26379;
/// How often a connection may ask the Sentinels where the master is: errors come in bursts
/// while the master is down, and the Sentinels answer the same until they promote.
const ASK_SENTINELS_EVERY: Duration = Duration::from_millis(200);

/// Reconnects to the same master before an error reaches the caller (and the Sentinels are
/// asked again).
const SENTINEL_RECONNECTS: usize = 1;

/// The Sentinels' part of a `redis+sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentinels {
    pub addresses: Vec<(String, u16)>,
    pub master: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<i64>,
}

/// What `REDIS_URL` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server: the URL as given, handed to the client library.
    Server(String),
    Sentinels(Sentinels),
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        match url.strip_prefix(SENTINEL_SCHEME) {
            Some(rest) => parse_sentinels(rest).map(Target::Sentinels),
            None => Ok(Target::Server(url.to_owned())),
        }
    }

    /// [`Target::parse`], with the client library's error for a URL it cannot use.
    fn parse_for_client(url: &str) -> RedisResult<Target> {
        Target::parse(url)
            .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "bad URL", e)))
    }
}

fn parse_sentinels(rest: &str) -> Result<Sentinels, String> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => {
            let (user, password) = info.split_once(':').unwrap_or((info, ""));
            let decode = |s: &str| -> Result<Option<String>, String> {
                let decoded = percent_encoding::percent_decode_str(s)
                    .decode_utf8()
                    .map_err(|_| "the URL's user or password is not UTF-8")?;
                Ok((!decoded.is_empty()).then(|| decoded.into_owned()))
            };
            (decode(user)?, decode(password)?)
        }
    };
    let addresses = hosts
        .split(',')
        .map(sentinel_address)
        .collect::<Result<Vec<_>, _>>()?;
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let master = segments
        .next()
        .ok_or("a redis+sentinel:// URL names its master after the hosts: .../payments")?
        .to_owned();
    let db = match segments.next() {
        None => None,
        Some(db) => Some(
            db.parse::<i64>()
                .map_err(|_| format!("the database number {db:?} is not a number"))?,
        ),
    };
    if segments.next().is_some() {
        return Err("a redis+sentinel:// URL's path is /<master name>[/<db>]".into());
    }
    Ok(Sentinels {
        addresses,
        master,
        username,
        password,
        db,
    })
}

fn sentinel_address(host: &str) -> Result<(String, u16), String> {
    if host.is_empty() {
        return Err("a redis+sentinel:// URL has an empty host in its host list".into());
    }
    // An IPv6 address is bracketed: its own colons are not a port.
    let after_address = host.rfind(']').map_or(0, |i| i + 1);
    let (name, port) = match host[after_address..].find(':') {
        Some(colon) => (
            &host[..after_address + colon],
            &host[after_address + colon + 1..],
        ),
        None => (host, ""),
    };
    let port = if port.is_empty() {
        DEFAULT_SENTINEL_PORT
    } else {
        port.parse()
            .map_err(|_| format!("the Sentinel port in {host:?} is not a port number"))?
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    Ok((name.to_owned(), port))
}

/// The URL without its password, for logs and errors.
pub fn redact(url: &str) -> String {
    match url.strip_prefix(SENTINEL_SCHEME) {
        Some(rest) => match rest.rfind('@') {
            Some(at) if rest[..at].contains(':') => {
                let user = rest[..at].split_once(':').map_or("", |(u, _)| u);
                format!("{SENTINEL_SCHEME}{user}:***{}", &rest[at..])
            }
            _ => url.to_owned(),
        },
        None => crate::db::redact(url),
    }
}

/// Whether an error says the broker is unreachable or cannot take writes now (a retry later
/// may succeed) rather than that the command was wrong. Behind Sentinels it is also the sign
/// that the master may have moved.
pub fn is_outage(error: &RedisError) -> bool {
    if error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
    {
        return true;
    }
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => true,
        // Memory full, a script running, replicas missing, a failed snapshot: the broker is
        // there but cannot take writes now. UNBLOCKED: a blocking read was ended because the
        // server became a replica.
        _ => error.code().is_some_and(|code| {
            ["OOM", "BUSY", "NOREPLICAS", "MISCONF", "UNBLOCKED"].contains(&code)
        }),
    }
}

/// A client for the server a URL names, or for the master its Sentinels name now.
pub async fn client(target: &Target) -> RedisResult<redis::Client> {
    match target {
        Target::Server(url) => redis::Client::open(url.as_str()),
        Target::Sentinels(sentinels) => sentinel_client(sentinels)?.async_get_client().await,
    }
}

fn sentinel_client(sentinels: &Sentinels) -> RedisResult<SentinelClient> {
    let addresses = sentinels
        .addresses
        .iter()
        .map(|(host, port)| ConnectionAddr::Tcp(host.clone(), *port));
    let mut builder =
        SentinelClientBuilder::new(addresses, &sentinels.master, SentinelServerType::Master)?;
    if let Some(username) = &sentinels.username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = &sentinels.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(db) = sentinels.db {
        builder = builder.set_client_to_redis_db(db);
    }
    builder.build()
}

/// A connection for the command-line tools and the events stream, with an error that names
/// the (password-free) URL. Behind Sentinels it goes to the master of the moment: callers
/// that keep it reconnect after an error.
pub async fn connect(url: &str) -> anyhow::Result<MultiplexedConnection> {
    let connected = async {
        let target = Target::parse_for_client(url)?;
        client(&target)
            .await?
            .get_multiplexed_async_connection()
            .await
    };
    connected
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to Redis at {}: {e}", redact(url)))
}

/// A long-lived connection that reconnects by itself ([`ConnectionManager`]) and, behind
/// Sentinels, moves to the new master after an error that may mean it moved. The error is
/// still returned: the caller's retry (after its back-off) goes to the new master.
#[derive(Clone)]
pub struct MasterConnection {
    target: Arc<Target>,
    config: ConnectionManagerConfig,
    current: Arc<Mutex<Current>>,
    db: i64,
}

struct Current {
    conn: ConnectionManager,
    /// `host:port` of the server it talks to.
    address: String,
    asked_at: Instant,
}

impl MasterConnection {
    pub async fn connect(url: &str, config: ConnectionManagerConfig) -> RedisResult<Self> {
        let target = Target::parse_for_client(url)?;
        // The manager's own reconnects (6 by default, 6 s in all) go to the same address,
        // which behind Sentinels may be gone for good: fail fast and ask the Sentinels.
        let config = match target {
            Target::Server(_) => config,
            Target::Sentinels(_) => config
                .set_number_of_retries(SENTINEL_RECONNECTS)
                .set_max_delay(ASK_SENTINELS_EVERY),
        };
        let client = client(&target).await?;
        let address = address_of(&client);
        let db = client.get_connection_info().redis_settings().db();
        let conn = ConnectionManager::new_with_config(client, config.clone()).await?;
        if let Target::Sentinels(sentinels) = &target {
            tracing::info!(master = %address, name = %sentinels.master, "the Sentinels' master");
        }
        Ok(MasterConnection {
            target: Arc::new(target),
            config,
            current: Arc::new(Mutex::new(Current {
                conn,
                address,
                asked_at: Instant::now(),
            })),
            db,
        })
    }

    fn conn(&self) -> ConnectionManager {
        self.current.lock().expect("not poisoned").conn.clone()
    }

    /// After an outage-like error behind Sentinels: asks them where the master is now, and
    /// moves there if it changed. Failures to ask are logged; the next error asks again.
    async fn follow(&self, error: &RedisError) {
        let Target::Sentinels(sentinels) = self.target.as_ref() else {
            return;
        };
        if !is_outage(error) {
            return;
        }
        let old = {
            let mut current = self.current.lock().expect("not poisoned");
            if current.asked_at.elapsed() < ASK_SENTINELS_EVERY {
                return;
            }
            current.asked_at = Instant::now();
            current.address.clone()
        };
        let moved = async {
            let client = sentinel_client(sentinels)?.async_get_client().await?;
            let address = address_of(&client);
            if address == old {
                return Ok(None);
            }
            let conn = ConnectionManager::new_with_config(client, self.config.clone()).await?;
            RedisResult::Ok(Some((conn, address)))
        };
        match moved.await {
            Ok(Some((conn, address))) => {
                tracing::warn!(from = %old, to = %address, "the Redis master moved");
                metrics::counter!("wallet_ledger_redis_master_switches_total").increment(1);
                let mut current = self.current.lock().expect("not poisoned");
                current.conn = conn;
                current.address = address;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot ask the Sentinels where the master is"),
        }
    }
}

fn address_of(client: &redis::Client) -> String {
    client.get_connection_info().addr().to_string()
}

impl ConnectionLike for MasterConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = self.conn().req_packed_command(cmd).await;
            if let Err(e) = &result {
                self.follow(e).await;
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = self
                .conn()
                .req_packed_commands(pipeline, offset, count)
                .await;
            if let Err(e) = &result {
                self.follow(e).await;
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.db
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_url_is_one_server() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/2"),
            Ok(Target::Server("redis://127.0.0.1:6379/2".into()))
        );
    }

    #[test]
    fn a_sentinel_url_lists_sentinels_and_names_the_master() {
        let parsed = Target::parse("redis+sentinel://:s%40cret@h1:26380,h2,[::1]:26381/payments/3");
        assert_eq!(
            parsed,
            Ok(Target::Sentinels(Sentinels {
                addresses: vec![
                    ("h1".into(), 26380),
                    ("h2".into(), DEFAULT_SENTINEL_PORT),
                    ("::1".into(), 26381)
                ],
                master: "payments".into(),
                username: None,
                password: Some("s@cret".into()),
                db: Some(3),
            }))
        );
    }

    #[test]
    fn a_sentinel_url_without_a_master_name_is_refused() {
        assert!(Target::parse("redis+sentinel://h1:26379").is_err());
        assert!(Target::parse("redis+sentinel://h1:26379/").is_err());
        assert!(Target::parse("redis+sentinel://h1:x/payments").is_err());
        assert!(Target::parse("redis+sentinel://h1,,h2/payments").is_err());
        assert!(Target::parse("redis+sentinel://h1/payments/x").is_err());
    }

    #[test]
    fn the_password_is_redacted() {
        assert_eq!(
            redact("redis+sentinel://app:secret@h1:1,h2:2/payments"),
            "redis+sentinel://app:***@h1:1,h2:2/payments"
        );
        assert_eq!(
            redact("redis+sentinel://h1:1/payments"),
            "redis+sentinel://h1:1/payments"
        );
    }
}
