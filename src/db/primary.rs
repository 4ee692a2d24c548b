//! Which of several PostgreSQL hosts takes writes, followed across a failover.
//!
//! The failover itself is the engine's (pg_auto_failover, Patroni): this only finds where it
//! put the primary. New connections go to the host last seen writable (the pool's connect
//! options are swapped); a connection that lands on a standby is refused; connections made
//! before a switch are dropped instead of being handed out, since their node may have been
//! demoted. The host is probed every [`PROBE_INTERVAL`], and at once when a request saw the
//! database go away ([`Primary::suspect`]).

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{ConnectOptions, Connection};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How long one host may take to answer a probe before it counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the primary's commits wait for a synchronous standby (what survives its loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStandby {
    Unknown,
    /// `synchronous_standby_names` is set and a standby is streaming as `sync` or `quorum`.
    Attached,
    /// No synchronous standby: a commit acknowledged now can be lost with the primary.
    Absent,
}

impl SyncStandby {
    fn from_u8(v: u8) -> SyncStandby {
        match v {
            1 => SyncStandby::Attached,
            2 => SyncStandby::Absent,
            _ => SyncStandby::Unknown,
        }
    }
    fn as_u8(self) -> u8 {
        match self {
            SyncStandby::Unknown => 0,
            SyncStandby::Attached => 1,
            SyncStandby::Absent => 2,
        }
    }
    pub fn as_json(self) -> serde_json::Value {
        match self {
            SyncStandby::Unknown => serde_json::Value::Null,
            SyncStandby::Attached => true.into(),
            SyncStandby::Absent => false.into(),
        }
    }
}

/// What one probe of a host found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    Writable(SyncStandby),
    Standby,
    Unreachable,
}

/// The hosts, in the URL's order, and which one writes.
pub struct Primary {
    hosts: Vec<PgConnectOptions>,
    current: AtomicUsize,
    /// No host was writable at the last probe (a failover in progress).
    lost: AtomicBool,
    sync: AtomicU8,
    /// When the primary last changed, in nanoseconds since `epoch`.
    switched_nanos: AtomicU64,
    epoch: Instant,
    wake: Notify,
}

impl Primary {
    /// Probes `hosts` in order and keeps the first writable one; `None` if none is, after
    /// trying for `patience`.
    pub async fn find(hosts: Vec<PgConnectOptions>, patience: Duration) -> Option<Arc<Primary>> {
        let until = Instant::now() + patience;
        loop {
            for (index, host) in hosts.iter().enumerate() {
                if let HostState::Writable(sync) = probe(host).await {
                    let primary = Primary {
                        hosts,
                        current: AtomicUsize::new(index),
                        lost: AtomicBool::new(false),
                        sync: AtomicU8::new(sync.as_u8()),
                        switched_nanos: AtomicU64::new(0),
                        epoch: Instant::now(),
                        wake: Notify::new(),
                    };
                    return Some(Arc::new(primary));
                }
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }

    pub fn current(&self) -> &PgConnectOptions {
        &self.hosts[self.current.load(Ordering::Relaxed)]
    }

    /// `host:port` of the current primary, for logs and `/readyz`.
    pub fn describe(&self) -> String {
        describe(self.current())
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    pub fn sync_standby(&self) -> SyncStandby {
        SyncStandby::from_u8(self.sync.load(Ordering::Relaxed))
    }

    /// Asks for a probe now: a request saw its connection fail.
    pub fn suspect(&self) {
        self.wake.notify_one();
    }

    /// Whether a pooled connection of this age was made before the last switch (to a node
    /// that may since have been demoted).
    pub fn predates_switch(&self, age: Duration) -> bool {
        let switched = self.switched_nanos.load(Ordering::Relaxed);
        if switched == 0 {
            return false;
        }
        let since_switch = self
            .epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(switched));
        age > since_switch
    }

    /// Follows the primary until the pool closes. The pool's close, not the shutdown token,
    /// ends it: every command closes its pool last, once nothing uses it (a drain may still
    /// write, and a failover then must still be followed), and one-shot commands, which have
    /// no token, close theirs too.
    pub async fn follow(self: Arc<Primary>, pool: PgPool) {
        let closed = pool.close_event();
        tokio::pin!(closed);
        loop {
            tokio::select! {
                () = &mut closed => return,
                _ = tokio::time::sleep(PROBE_INTERVAL) => {}
                _ = self.wake.notified() => {}
            }
            self.step(&pool).await;
        }
    }

    /// The index, in the URL's order, of the current primary.
    pub fn index(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    async fn step(&self, pool: &PgPool) {
        let current = self.current.load(Ordering::Relaxed);
        if let HostState::Writable(sync) = probe(&self.hosts[current]).await {
            self.set_sync(sync);
            self.set_lost(false);
            return;
        }
        // The current host is gone or was demoted: the first writable one in the URL's
        // order, the current one excepted, becomes the primary.
        for (index, host) in self.hosts.iter().enumerate() {
            if index == current {
                continue;
            }
            if let HostState::Writable(sync) = probe(host).await {
                pool.set_connect_options(host.clone());
                self.current.store(index, Ordering::Relaxed);
                let severed = abandon(&self.hosts[current]);
                let nanos = self.epoch.elapsed().as_nanos().max(1) as u64;
                self.switched_nanos.store(nanos, Ordering::Relaxed);
                self.set_sync(sync);
                self.set_lost(false);
                metrics::counter!("wallet_ledger_database_primary_switches_total").increment(1);
                tracing::warn!(
                    from = %describe(&self.hosts[current]),
                    to = %describe(host),
                    severed,
                    "the PostgreSQL primary moved; new connections go to the new one, those to the old one are cut"
                );
                return;
            }
        }
        if !self.is_lost() {
            tracing::warn!(host = %describe(&self.hosts[current]), "no PostgreSQL host takes writes; probing until one does");
        }
        self.set_lost(true);
    }

    fn set_lost(&self, lost: bool) {
        self.lost.store(lost, Ordering::Relaxed);
        metrics::gauge!("wallet_ledger_database_primary_up").set(if lost { 0.0 } else { 1.0 });
    }

    fn set_sync(&self, sync: SyncStandby) {
        let before = self.sync.swap(sync.as_u8(), Ordering::Relaxed);
        if before != sync.as_u8() {
            report_sync(sync, &self.describe());
        }
    }
}

/// Logs and records whether the primary has a synchronous standby.
pub fn report_sync(sync: SyncStandby, host: &str) {
    let value = match sync {
        SyncStandby::Attached => 1.0,
        SyncStandby::Absent => 0.0,
        SyncStandby::Unknown => return,
    };
    metrics::gauge!("wallet_ledger_database_synchronous_standby").set(value);
    // Info either way: one server without a standby is a choice (development, tests); the
    // metric is what an alert watches.
    let says = match sync {
        SyncStandby::Attached => "an acknowledged commit survives the primary's loss",
        _ => "no synchronous standby: a commit acknowledged now can be lost with the primary",
    };
    tracing::info!(primary = %host, synchronous_standby = value == 1.0, "{says}");
}

/// Whether the session `conn` is on has a synchronous standby.
pub async fn sync_standby(conn: &mut PgConnection) -> Result<SyncStandby, sqlx::Error> {
    let attached: bool = sqlx::query_scalar(SYNC_STANDBY).fetch_one(conn).await?;
    Ok(if attached {
        SyncStandby::Attached
    } else {
        SyncStandby::Absent
    })
}

// `sync_state` is shown only to roles with pg_read_all_stats (pg_monitor): to others no
// standby counts as synchronous (docs/operations.md).
const SYNC_STANDBY: &str = "select current_setting('synchronous_standby_names') <> ''
       and exists (select 1 from pg_stat_replication where sync_state in ('sync', 'quorum'))";

/// Commits a transaction that takes a transaction id: the round trip of a write (its commit
/// record waits for the synchronous standby) without a row. Says on the way whether commits
/// wait for a synchronous standby. Fails on a standby (no transaction id in recovery) and on
/// a read-only node (no row: `RowNotFound`).
pub async fn commits(conn: &mut PgConnection) -> Result<SyncStandby, sqlx::Error> {
    use sqlx::Connection;
    let mut tx = conn.begin().await?;
    // A read-only transaction takes a transaction id too: refuse it here, as writes would be.
    sqlx::query(
        "select pg_current_xact_id() where not current_setting('transaction_read_only')::bool",
    )
    .fetch_one(&mut *tx)
    .await?;
    let sync = sync_standby(&mut tx).await?;
    tx.commit().await?;
    Ok(sync)
}

/// Whether `conn`'s node takes writes: not in recovery (a standby), and not read-only. A
/// standby pg_auto_failover has just promoted leaves recovery some seconds before it lets
/// sessions write (`default_transaction_read_only` until the monitor makes it primary): a
/// switch to it then would only trade a frozen primary's timeouts for read-only errors.
pub async fn takes_writes(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "select not pg_is_in_recovery() and not current_setting('transaction_read_only')::bool",
    )
    .fetch_one(conn)
    .await
}

async fn probe(host: &PgConnectOptions) -> HostState {
    let attempt = async {
        let mut conn = match host.connect().await {
            // The database is made at start-up, on the primary: until then the node is asked
            // through the maintenance database, as `create database` itself is.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3D000") => {
                host.clone().database("postgres").connect().await?
            }
            other => other?,
        };
        let state = if takes_writes(&mut conn).await? {
            HostState::Writable(sync_standby(&mut conn).await?)
        } else {
            HostState::Standby
        };
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(state)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
        Ok(Ok(state)) => state,
        Ok(Err(e)) => {
            tracing::debug!(host = %describe(host), error = %e, "probe failed");
            HostState::Unreachable
        }
        Err(_) => HostState::Unreachable,
    }
}

/// Cuts every connection open to `host`, a primary no longer: each wait on it ends now with
/// an error (the request is tried again on the new primary, see `http::failover`) and the
/// connection is closed instead of going back to the pool. Waiting would not do: a node that
/// is frozen (a paused VM, a stuck disk) keeps its sockets open, its kernel acknowledging
/// every packet, so a statement sent to it waits until it thaws. Returns how many were cut.
fn abandon(host: &PgConnectOptions) -> usize {
    sqlx_core::net::sever_tcp(host.get_host(), host.get_port())
}

fn describe(host: &PgConnectOptions) -> String {
    format!("{}:{}", host.get_host(), host.get_port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connections_older_than_the_switch_are_dropped() {
        let primary = Primary {
            hosts: vec![PgConnectOptions::new()],
            current: AtomicUsize::new(0),
            lost: AtomicBool::new(false),
            sync: AtomicU8::new(0),
            switched_nanos: AtomicU64::new(0),
            epoch: Instant::now() - Duration::from_secs(100),
            wake: Notify::new(),
        };
        assert!(
            !primary.predates_switch(Duration::from_secs(99)),
            "no switch yet"
        );
        primary
            .switched_nanos
            .store(Duration::from_secs(90).as_nanos() as u64, Ordering::Relaxed);
        assert!(primary.predates_switch(Duration::from_secs(11)));
        assert!(!primary.predates_switch(Duration::from_secs(9)));
    }
}
