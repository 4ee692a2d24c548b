//! What a connection is doing, and the pure decision of when its time is up.
//!
//! hyper's own HTTP/1 header timeout starts as soon as a connection waits for a request, so it
//! cannot tell a keep-alive connection resting between requests (which a load balancer keeps
//! for a minute) from a client trickling a request head (which must be cut in seconds). Like
//! Go's `ReadHeaderTimeout`/`IdleTimeout`, this tells them apart: a connection is *idle* until
//! a byte of its next request arrives, then *reading a head* until the service is called.
//! Body reads are bounded in the router (`http::body`), and handlers by the request timeout.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The limits the watchdog applies to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// From a connection's opening, or the first byte of a next request, to its whole head.
    pub header_read: Duration,
    /// Between requests, with nothing being read.
    pub idle: Duration,
    /// How long a connection asked to close may take to finish what it is writing.
    pub closing_grace: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the first byte of a request (HTTP/1), or for a stream (HTTP/2).
    Idle { since: Instant },
    /// Bytes of a request head have arrived, the whole head has not.
    ReadingHead { since: Instant },
    /// This many requests are being handled (more than one only on HTTP/2).
    Busy { requests: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    pub phase: Phase,
    /// HTTP/2 has no head to trickle between requests: its frames between streams are pings
    /// and settings, which do not make a connection busy.
    pub http2: bool,
    /// Set when the connection was asked to close (idle, or shutting down).
    pub closing_since: Option<Instant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to do before this instant (`None`: until the state changes).
    Wait(Option<Instant>),
    /// Ask the connection to close: it finishes what it writes, then ends.
    CloseIdle,
    /// Drop the connection now.
    Cut(CutReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutReason {
    HeaderTimeout,
    ClosingTooLong,
}

impl CutReason {
    /// The `reason` label of `wallet_ledger_http_connections_cut_total` (a closed set).
    pub fn label(self) -> &'static str {
        match self {
            CutReason::HeaderTimeout => "header_timeout",
            CutReason::ClosingTooLong => "closing_timeout",
        }
    }
}

/// The decision, from the state alone.
pub fn verdict(state: &State, now: Instant, timers: &Timers) -> Verdict {
    if let Some(since) = state.closing_since {
        let deadline = since + timers.closing_grace;
        return if now >= deadline {
            Verdict::Cut(CutReason::ClosingTooLong)
        } else {
            Verdict::Wait(Some(deadline))
        };
    }
    match state.phase {
        Phase::Busy { .. } => Verdict::Wait(None),
        Phase::ReadingHead { since } => {
            let deadline = since + timers.header_read;
            if now >= deadline {
                Verdict::Cut(CutReason::HeaderTimeout)
            } else {
                Verdict::Wait(Some(deadline))
            }
        }
        Phase::Idle { since } => {
            let deadline = since + timers.idle;
            if now >= deadline {
                Verdict::CloseIdle
            } else {
                Verdict::Wait(Some(deadline))
            }
        }
    }
}

/// The state one connection's reads, its requests and its watchdog share.
#[derive(Debug, Clone)]
pub struct Activity(Arc<Mutex<State>>);

const HTTP2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

impl Activity {
    /// A new connection is reading its first head: the header timeout runs from the accept,
    /// so a client that connects and sends nothing is cut as one that trickles.
    pub fn new(now: Instant) -> Activity {
        Activity(Arc::new(Mutex::new(State {
            phase: Phase::ReadingHead { since: now },
            http2: false,
            closing_since: None,
        })))
    }

    pub fn state(&self) -> State {
        *self.lock()
    }

    /// Bytes arrived. `first` tells the very first read, whose bytes say the protocol.
    pub fn on_read(&self, bytes: &[u8], first: bool, now: Instant) {
        let mut state = self.lock();
        if first {
            let n = bytes.len().min(HTTP2_PREFACE_START.len());
            if n > 0 && bytes[..n] == HTTP2_PREFACE_START[..n] {
                state.http2 = true;
                // The preface is the whole "head" HTTP/2 has; streams come and go after it.
                state.phase = Phase::Idle { since: now };
            }
        }
        if let Phase::Idle { .. } = state.phase
            && !state.http2
        {
            state.phase = Phase::ReadingHead { since: now };
        }
    }

    pub fn request_started(&self) {
        let mut state = self.lock();
        state.phase = match state.phase {
            Phase::Busy { requests } => Phase::Busy {
                requests: requests + 1,
            },
            Phase::Idle { .. } | Phase::ReadingHead { .. } => Phase::Busy { requests: 1 },
        };
    }

    /// A request's response was handed to the connection (or the request was dropped).
    /// Bytes of a pipelined next request already buffered leave the connection idle rather
    /// than reading a head; the idle timeout still bounds it.
    pub fn request_ended(&self, now: Instant) {
        let mut state = self.lock();
        state.phase = match state.phase {
            Phase::Busy { requests } if requests > 1 => Phase::Busy {
                requests: requests - 1,
            },
            _ => Phase::Idle { since: now },
        };
    }

    pub fn closing(&self, now: Instant) {
        let mut state = self.lock();
        state.closing_since.get_or_insert(now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data, valid after any panic of a holder.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMERS: Timers = Timers {
        header_read: Duration::from_secs(10),
        idle: Duration::from_secs(75),
        closing_grace: Duration::from_secs(10),
    };

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn a_connection_that_sends_nothing_is_cut_after_the_header_timeout() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        assert_eq!(
            verdict(&activity.state(), at(t0, 9), &TIMERS),
            Verdict::Wait(Some(at(t0, 10)))
        );
        assert_eq!(
            verdict(&activity.state(), at(t0, 10), &TIMERS),
            Verdict::Cut(CutReason::HeaderTimeout)
        );
    }

    #[test]
    fn trickled_bytes_do_not_move_the_header_deadline() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        for s in 1..10 {
            activity.on_read(b"G", s == 1, at(t0, s));
        }
        assert_eq!(
            verdict(&activity.state(), at(t0, 10), &TIMERS),
            Verdict::Cut(CutReason::HeaderTimeout)
        );
    }

    #[test]
    fn a_keep_alive_connection_rests_for_the_idle_timeout_then_a_head_has_the_header_timeout() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        activity.on_read(b"GET / HTTP/1.1\r\n\r\n", true, t0);
        activity.request_started();
        assert_eq!(
            verdict(&activity.state(), at(t0, 500), &TIMERS),
            Verdict::Wait(None)
        );
        activity.request_ended(at(t0, 1));
        assert_eq!(
            verdict(&activity.state(), at(t0, 60), &TIMERS),
            Verdict::Wait(Some(at(t0, 76)))
        );
        activity.on_read(b"G", false, at(t0, 70));
        assert_eq!(
            verdict(&activity.state(), at(t0, 79), &TIMERS),
            Verdict::Wait(Some(at(t0, 80)))
        );
        assert_eq!(
            verdict(&activity.state(), at(t0, 80), &TIMERS),
            Verdict::Cut(CutReason::HeaderTimeout)
        );
        let idle = Activity::new(t0);
        idle.request_started();
        idle.request_ended(t0);
        assert_eq!(
            verdict(&idle.state(), at(t0, 75), &TIMERS),
            Verdict::CloseIdle
        );
    }

    #[test]
    fn http2_frames_between_streams_keep_a_connection_idle() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        activity.on_read(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", true, t0);
        activity.on_read(b"ping frame", false, at(t0, 30));
        assert!(activity.state().http2);
        assert_eq!(
            verdict(&activity.state(), at(t0, 75), &TIMERS),
            Verdict::CloseIdle
        );
        activity.request_started();
        activity.request_started();
        activity.request_ended(at(t0, 80));
        assert_eq!(
            verdict(&activity.state(), at(t0, 900), &TIMERS),
            Verdict::Wait(None)
        );
        activity.request_ended(at(t0, 90));
        assert_eq!(
            verdict(&activity.state(), at(t0, 165), &TIMERS),
            Verdict::CloseIdle
        );
    }

    #[test]
    fn a_connection_asked_to_close_is_cut_once_its_grace_is_over() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        activity.request_started();
        activity.closing(at(t0, 5));
        activity.closing(at(t0, 8));
        assert_eq!(
            verdict(&activity.state(), at(t0, 14), &TIMERS),
            Verdict::Wait(Some(at(t0, 15)))
        );
        assert_eq!(
            verdict(&activity.state(), at(t0, 15), &TIMERS),
            Verdict::Cut(CutReason::ClosingTooLong)
        );
    }
}
