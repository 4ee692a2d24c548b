//! Where Redis is: one server (`redis://`, `rediss://`, `unix://`, used exactly as before), a
//! master found through Sentinels:
//! `redis+sentinel://[[user]:password@]h1:p1,h2:p2,h3:p3/<master name>[/<db>]`, or a Redis
//! Cluster: `redis+cluster://[[user]:password@]h1:p1,h2:p2,...` (any of its nodes; the client
//! learns the rest and the slot map from them).
//!
//! On a cluster every command goes to the master of its key's slot, and the client library
//! follows `MOVED`/`ASK` and failovers by itself (it reads the slot map again). What cannot
//! work there is refused or routed deliberately: all keys of one command, script or pipeline
//! must share a slot (the consumer checks its keys before it starts, [`same_slot`]), and a
//! keyless command in a pipeline (`publish`'s `WAIT`) goes where the pipeline's keyed
//! commands go, the master that took them.
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
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
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
const CLUSTER_SCHEME: &str = "redis+cluster://";
const DEFAULT_CLUSTER_PORT: u16 = 6379;
/// How long a command-line tool waits for one cluster command, retries after `MOVED` or a
/// lost node included: a failover (node timeout, election) takes a few seconds, and the tools
/// retry on their own after an outage (`publish` sends the chunk again).
const CLUSTER_TOOL_RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one cluster node may take.
const CLUSTER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Retries of one command inside the cluster client (after an I/O error, `TRYAGAIN`,
/// `CLUSTERDOWN`), with its exponential back-off; bounded by the response timeout anyway.
const CLUSTER_RETRIES: u32 = 8;
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

/// The nodes of a `redis+cluster://` URL: where to start; the client finds the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNodes {
    pub addresses: Vec<(String, u16)>,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// What `REDIS_URL` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server: the URL as given, handed to the client library.
    Server(String),
    Sentinels(Sentinels),
    Cluster(ClusterNodes),
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        if let Some(rest) = url.strip_prefix(SENTINEL_SCHEME) {
            return parse_sentinels(rest).map(Target::Sentinels);
        }
        if let Some(rest) = url.strip_prefix(CLUSTER_SCHEME) {
            return parse_cluster(rest).map(Target::Cluster);
        }
        Ok(Target::Server(url.to_owned()))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// [`Target::parse`], with the client library's error for a URL it cannot use.
    fn parse_for_client(url: &str) -> RedisResult<Target> {
        Target::parse(url)
            .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "bad URL", e)))
    }
}

/// The user, the password and the hosts of `user:password@h1:p1,h2:p2` (`scheme` for errors).
type Authority = (Option<String>, Option<String>, Vec<(String, u16)>);

fn parse_authority(authority: &str, scheme: &str, default_port: u16) -> Result<Authority, String> {
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
        .map(|host| host_and_port(host, scheme, default_port))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((username, password, addresses))
}

fn parse_sentinels(rest: &str) -> Result<Sentinels, String> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (username, password, addresses) =
        parse_authority(authority, SENTINEL_SCHEME, DEFAULT_SENTINEL_PORT)?;
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

/// A cluster has one database (0) and no options here: anything after the hosts is refused
/// rather than silently ignored.
fn parse_cluster(rest: &str) -> Result<ClusterNodes, String> {
    if let Some(i) = rest.find('?') {
        return Err(format!(
            "a redis+cluster:// URL takes no options, not {:?}",
            &rest[i..]
        ));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() {
        return Err(format!(
            "a Redis Cluster has one database: a redis+cluster:// URL has no path, not /{path}"
        ));
    }
    let (username, password, addresses) =
        parse_authority(authority, CLUSTER_SCHEME, DEFAULT_CLUSTER_PORT)?;
    Ok(ClusterNodes {
        addresses,
        username,
        password,
    })
}

fn host_and_port(host: &str, scheme: &str, default_port: u16) -> Result<(String, u16), String> {
    if host.is_empty() {
        return Err(format!("a {scheme} URL has an empty host in its host list"));
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
        default_port
    } else {
        port.parse()
            .map_err(|_| format!("the port in {host:?} is not a port number"))?
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    if name.is_empty() {
        return Err(format!(
            "a {scheme} URL has a host without a name: {host:?}"
        ));
    }
    Ok((name.to_owned(), port))
}

/// Whether all `keys` hash to one cluster slot (their hash tags, `{...}`, or the whole key),
/// as every multi-key command and script must on a Redis Cluster.
pub fn same_slot(keys: &[&str]) -> bool {
    let mut slots = keys.iter().map(|k| Slot::for_key(k.as_bytes()));
    match slots.next() {
        Some(first) => slots.all(|s| s == first),
        None => true,
    }
}

/// The URL without its password, for logs and errors.
pub fn redact(url: &str) -> String {
    for scheme in [SENTINEL_SCHEME, CLUSTER_SCHEME] {
        if let Some(rest) = url.strip_prefix(scheme) {
            return match rest.rfind('@') {
                Some(at) if rest[..at].contains(':') => {
                    let user = rest[..at].split_once(':').map_or("", |(u, _)| u);
                    format!("{scheme}{user}:***{}", &rest[at..])
                }
                _ => url.to_owned(),
            };
        }
    }
    crate::db::redact(url)
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
        // The cluster client has no connection to the node that serves the slot (it died and
        // the slot map still names it): a failover in progress.
        ErrorKind::ClusterConnectionNotFound => true,
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

/// A client for the server a URL names, or for the master its Sentinels name now. A cluster
/// has no one server: [`connect`] and [`MasterConnection`] make cluster connections.
async fn client(target: &Target) -> RedisResult<redis::Client> {
    match target {
        Target::Server(url) => redis::Client::open(url.as_str()),
        Target::Sentinels(sentinels) => sentinel_client(sentinels)?.async_get_client().await,
        Target::Cluster(_) => Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "a Redis Cluster is reached through a cluster connection, not one server",
        ))),
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

/// A cluster client that waits up to `response_timeout` for one command, its retries after a
/// lost node or a redirection included. It reads the slot map from the first node that
/// answers and again after `MOVED` or a lost connection, so it follows a failover by itself.
fn cluster_client(nodes: &ClusterNodes, response_timeout: Duration) -> RedisResult<ClusterClient> {
    let addresses = nodes
        .addresses
        .iter()
        .map(|(host, port)| ConnectionAddr::Tcp(host.clone(), *port));
    let mut builder = ClusterClientBuilder::new(addresses)
        .connection_timeout(CLUSTER_CONNECT_TIMEOUT)
        .response_timeout(response_timeout)
        .retries(CLUSTER_RETRIES);
    if let Some(username) = &nodes.username {
        builder = builder.username(username);
    }
    if let Some(password) = &nodes.password {
        builder = builder.password(password);
    }
    builder.build()
}

/// One server's connection (`S`) or a cluster connection, which routes each command to its
/// key's master; either way a `ConnectionLike`.
#[derive(Clone)]
pub enum Link<S> {
    Server(S),
    Cluster(ClusterConnection),
}

/// A connection for the command-line tools and the events stream: to one server (behind
/// Sentinels, the master of the moment: callers that keep it reconnect after an error), or
/// to a cluster.
pub type Connection = Link<MultiplexedConnection>;

impl<S> Link<S> {
    pub fn is_cluster(&self) -> bool {
        matches!(self, Link::Cluster(_))
    }
}

impl<S: ConnectionLike> ConnectionLike for Link<S> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Server(conn) => conn.req_packed_command(cmd),
            Link::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Server(conn) => conn.req_packed_commands(pipeline, offset, count),
            Link::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Server(conn) => conn.get_db(),
            Link::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Whether `url` names a Redis Cluster (a URL that does not parse is not one: connecting says
/// what is wrong with it).
pub fn is_cluster(url: &str) -> bool {
    Target::parse(url).is_ok_and(|t| t.is_cluster())
}

/// A connection for the command-line tools and the events stream, with an error that names
/// the (password-free) URL.
pub async fn connect(url: &str) -> anyhow::Result<Connection> {
    let connected = async {
        match Target::parse_for_client(url)? {
            Target::Cluster(nodes) => cluster_client(&nodes, CLUSTER_TOOL_RESPONSE_TIMEOUT)?
                .get_async_connection()
                .await
                .map(Link::Cluster),
            target => client(&target)
                .await?
                .get_multiplexed_async_connection()
                .await
                .map(Link::Server),
        }
    };
    connected
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to Redis at {}: {e}", redact(url)))
}

/// The consumer's long-lived connection. To one server or behind Sentinels it reconnects by
/// itself ([`ConnectionManager`]) and, behind Sentinels, moves to the new master after an
/// error that may mean it moved; the error is still returned, and the caller's retry (after
/// its back-off) goes to the new master. On a cluster the cluster client does all of that
/// itself (a lost node, `MOVED` after a failover).
#[derive(Clone)]
pub struct MasterConnection(Link<Followed>);

impl MasterConnection {
    /// Connects with `response_timeout` for each command (the consumer's outlasts its
    /// blocking reads).
    pub async fn connect(url: &str, response_timeout: Duration) -> RedisResult<Self> {
        let link = match Target::parse_for_client(url)? {
            Target::Cluster(nodes) => Link::Cluster(
                cluster_client(&nodes, response_timeout)?
                    .get_async_connection()
                    .await?,
            ),
            target => Link::Server(Followed::connect(target, response_timeout).await?),
        };
        Ok(MasterConnection(link))
    }
}

/// A connection to one server, or to the master Sentinels name, following it when it moves.
#[derive(Clone)]
struct Followed {
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

impl Followed {
    async fn connect(target: Target, response_timeout: Duration) -> RedisResult<Self> {
        let config = ConnectionManagerConfig::new().set_response_timeout(Some(response_timeout));
        // The manager's own reconnects (6 by default, 6 s in all) go to the same address,
        // which behind Sentinels may be gone for good: fail fast and ask the Sentinels.
        let config = match target {
            Target::Sentinels(_) => config
                .set_number_of_retries(SENTINEL_RECONNECTS)
                .set_max_delay(ASK_SENTINELS_EVERY),
            Target::Server(_) | Target::Cluster(_) => config,
        };
        let client = client(&target).await?;
        let address = address_of(&client);
        let db = client.get_connection_info().redis_settings().db();
        let conn = ConnectionManager::new_with_config(client, config.clone()).await?;
        if let Target::Sentinels(sentinels) = &target {
            tracing::info!(master = %address, name = %sentinels.master, "the Sentinels' master");
        }
        Ok(Followed {
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
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

impl ConnectionLike for Followed {
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
    fn a_cluster_url_lists_its_nodes() {
        assert_eq!(
            Target::parse("redis+cluster://app:s%40cret@h1:7000,h2,[::1]:7002"),
            Ok(Target::Cluster(ClusterNodes {
                addresses: vec![
                    ("h1".into(), 7000),
                    ("h2".into(), DEFAULT_CLUSTER_PORT),
                    ("::1".into(), 7002)
                ],
                username: Some("app".into()),
                password: Some("s@cret".into()),
            }))
        );
        assert_eq!(
            Target::parse("redis+cluster://127.0.0.1:7000/"),
            Ok(Target::Cluster(ClusterNodes {
                addresses: vec![("127.0.0.1".into(), 7000)],
                username: None,
                password: None,
            }))
        );
        assert!(is_cluster("redis+cluster://h1:7000"));
        assert!(!is_cluster("redis://h1:7000"));
        assert!(!is_cluster("redis+sentinel://h1:26379/payments"));
    }

    #[test]
    fn a_bad_cluster_url_is_refused_with_why() {
        let refused = |url: &str| Target::parse(url).expect_err(url);
        assert!(refused("redis+cluster://h1:7000/2").contains("one database"));
        assert!(refused("redis+cluster://h1:7000?timeout=1").contains("no options"));
        assert!(refused("redis+cluster://h1:x").contains("not a port number"));
        assert!(refused("redis+cluster://h1:70000").contains("not a port number"));
        assert!(refused("redis+cluster://h1,,h2").contains("empty host"));
        assert!(refused("redis+cluster://").contains("empty host"));
        assert!(refused("redis+cluster://:7000").contains("without a name"));
    }

    #[test]
    fn keys_share_a_slot_only_through_a_hash_tag() {
        assert!(same_slot(&[
            "payments:{3}",
            "payments:{3}.dlq",
            "payments:{3}.failures.wallet-ledger"
        ]));
        assert!(same_slot(&["{payments}", "{payments}.dlq"]));
        // Without a tag the whole key is hashed: these land in different slots.
        assert!(!same_slot(&["payments", "payments.dlq"]));
        assert!(same_slot(&["payments"]));
        assert!(same_slot(&[]));
    }

    #[test]
    fn a_cluster_node_not_connected_is_an_outage_and_crossslot_is_not() {
        let lost = RedisError::from((ErrorKind::ClusterConnectionNotFound, "no connection"));
        assert!(is_outage(&lost));
        let cross = RedisError::from((ServerErrorKind::CrossSlot.into(), "keys in two slots"));
        assert!(!is_outage(&cross), "no retry mends a command across slots");
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
        assert_eq!(
            redact("redis+cluster://app:secret@h1:1,h2:2"),
            "redis+cluster://app:***@h1:1,h2:2"
        );
        assert_eq!(
            redact("redis+cluster://:secret@h1:1"),
            "redis+cluster://:***@h1:1"
        );
        assert_eq!(redact("redis+cluster://h1:1"), "redis+cluster://h1:1");
    }
}
