//! SIGINT and SIGTERM, as the cancellation of a `CancellationToken`: the one shutdown signal
//! that every long-running command hands to its workers.

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
