//! How a long-running command stops, and in what order: the one place that says so.
//!
//! A long-running command makes one tree of [`CancellationToken`]s at start and hands a clone
//! of a token to every worker. Cancelling a token cancels its children, never its parent, so
//! each later stage of the drain is the parent of the stage before it: the first SIGINT or
//! SIGTERM cancels the leaf ([`cancel_on_signal`], the only place a signal is caught), and
//! the command cancels each parent once the stage below it has drained. Cancelling a later
//! stage's token cancels every earlier one too, so no stage is told to stop while one before
//! it is still told to run. Workers await `cancelled()` in a
//! `select!`, or look at `is_cancelled()` only between two units of work that must not be cut
//! in half (a consumer's step, a dispatcher's round); nothing polls a flag.
//!
//! `serve` (`cli::serve::run`):
//! 1. The signal cancels `accepting`: the accept loop and the heap trimmer stop. The transport
//!    counts what is open, then cancels its `closing` token: each connection finishes the
//!    request in hand and closes (idle ones at once); at `--shutdown-timeout-ms` its `cut`
//!    token (the parent of `closing`) closes the rest. Logged: `connections closed` with
//!    `open_at_signal` and `cut_at_deadline`.
//! 2. `shutdown`, the parent of `accepting`: the checkpointer and the hold sweeper (a step in
//!    progress finishes) and the outbox dispatcher (no new round; the sends in flight finish
//!    within the webhook timeout and are recorded). `serve` waits for all three.
//! 3. The pool closes, and the primary tracker and the synchronous-standby watcher end with
//!    it (they follow the pool, whose last user is step 2; see `db::primary::Primary::follow`).
//!    The group-commit writer and the key lookups have no token: they are queues, ending once
//!    the last `AppState` is dropped with the last connection. Logged: `stopped: requests
//!    finished or cut, pool closed`; exit 0.
//!
//! `consume` (`cli::consume::run`):
//! 1. The signal cancels `stopping`: each worker finishes its step (the batch in hand applied
//!    and acknowledged; a blocking read ends within `--block-ms`), then stops. A pause while
//!    the database is unreachable ends at once and leaves its batch pending for another
//!    consumer; so does a wait between two steps while the broker is unreachable (nothing is
//!    in hand then). A process whose workers had all stopped for good
//!    (the broker refused them) was waiting for this alone. With `--drain` the workers may
//!    end before any signal.
//! 2. The pool closes (the tracker and the watcher with it).
//! 3. `shutdown`, the parent of `stopping`: `/metrics` and `/readyz` stop, so that probes are
//!    answered to the end. Logged: `consumer stopped`; exit 0, or 2 if a worker was refused.
//!
//! `outbox` (`cli::outbox::run`): the signal stops the dispatcher as in
//! `serve`'s step 2, then the pool closes. Logged: `outbox dispatcher stopped`; exit 0.
//!
//! `bench`: the signal drops the scenario running (its child processes die with their
//! handles), or stops the next before it starts; exit 2.
//!
//! Every other command takes no token and installs no handler: a signal ends it at once.

use tokio_util::sync::CancellationToken;

/// Cancels `token` at the first SIGINT or SIGTERM, saying which in the log; the one place a
/// signal becomes a shutdown. The handlers are installed before this returns, so from here on
/// either signal is a graceful stop, never the default (an abrupt exit). The listener ends
/// with the first signal, or when `token` is cancelled otherwise; later signals change
/// nothing.
pub fn cancel_on_signal(token: CancellationToken) {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    tokio::spawn(async move {
        #[cfg(unix)]
        let (interrupt, terminate) = {
            let (interrupt, terminate) = signals;
            (received(interrupt), received(terminate))
        };
        #[cfg(not(unix))]
        let (interrupt, terminate) = (
            async {
                let _ = tokio::signal::ctrl_c().await;
            },
            std::future::pending::<()>(),
        );
        tokio::select! {
            () = interrupt => tracing::info!("SIGINT received, shutting down"),
            () = terminate => tracing::info!("SIGTERM received, shutting down"),
            () = token.cancelled() => return,
        }
        token.cancel();
    });
}

/// The first delivery of a signal; never, if its handler could not be installed.
#[cfg(unix)]
async fn received(signal: std::io::Result<tokio::signal::unix::Signal>) {
    match signal {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}
