//! wallet-ledger patch: TCP sockets that time out on a dead peer and that the application can
//! cut from outside (see vendor/README.md).
//!
//! A query waits on its socket with no deadline. A peer that stops answering (a host gone,
//! packets dropped) is found by keepalives and `TCP_USER_TIMEOUT` ([`tune`]). A peer whose
//! *process* is frozen (SIGSTOP, a paused VM) is not: its kernel still acknowledges every
//! segment, so nothing at the TCP level ever fails. For that the application, which knows the
//! node was demoted, cuts every socket to it with [`sever_tcp`]: a shutdown of the local
//! socket ends each pending read at once (end of file), whatever the peer does.

use std::io;
use std::net::Shutdown;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::io::ReadBuf;
use crate::net::Socket;

/// Idle time before the first keepalive probe, then the time between probes.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
const KEEPALIVE_PROBES: u32 = 3;
/// Longest time sent data may stay unacknowledged before the kernel drops the connection
/// (instead of retransmitting for about 15 minutes).
const USER_TIMEOUT: Duration = Duration::from_secs(10);

/// A TCP socket registered under the host and port it was opened to.
pub struct SeverableTcp(Arc<TcpStream>);

struct Registered {
    host: String,
    port: u16,
    stream: Weak<TcpStream>,
}

static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<Registered>> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets keepalives and `TCP_USER_TIMEOUT`, and registers the socket for [`sever_tcp`].
pub fn register(stream: TcpStream, host: &str, port: u16) -> io::Result<SeverableTcp> {
    tune(&stream)?;
    let stream = Arc::new(stream);
    let mut registry = registry();
    registry.retain(|r| r.stream.strong_count() > 0);
    registry.push(Registered {
        host: host.to_owned(),
        port,
        stream: Arc::downgrade(&stream),
    });
    Ok(SeverableTcp(stream))
}

fn tune(stream: &TcpStream) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new().with_time(KEEPALIVE_IDLE);
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
    let keepalive = keepalive
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&keepalive)?;
    #[cfg(target_os = "linux")]
    socket.set_tcp_user_timeout(Some(USER_TIMEOUT))?;
    let _ = (KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, USER_TIMEOUT);
    Ok(())
}

/// Shuts down every open socket to `host`:`port`: each read or write pending or to come on
/// them fails at once. Returns how many were cut.
pub fn sever_tcp(host: &str, port: u16) -> usize {
    let streams: Vec<Arc<TcpStream>> = {
        let mut registry = registry();
        registry.retain(|r| r.stream.strong_count() > 0);
        registry
            .iter()
            .filter(|r| r.port == port && r.host == host)
            .filter_map(|r| r.stream.upgrade())
            .collect()
    };
    streams
        .iter()
        .filter(|s| socket2::SockRef::from(&***s).shutdown(Shutdown::Both).is_ok())
        .count()
}

impl Socket for SeverableTcp {
    fn try_read(&mut self, mut buf: &mut dyn ReadBuf) -> io::Result<usize> {
        self.0.try_read_buf(&mut buf)
    }

    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_read_ready(cx)
    }

    fn poll_write_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_write_ready(cx)
    }

    fn poll_shutdown(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // What tokio's own shutdown does for a TcpStream: shut the writing half.
        Poll::Ready(socket2::SockRef::from(&*self.0).shutdown(Shutdown::Write))
    }
}
