//! Ctrl-C (SIGINT) and SIGTERM as a flag that `rpclb demo`, `rpclb bench`, `rpclb call` and
//! `rpclb load` check and await: they stop what runs (dropping calls in flight, which cancels
//! them on their serving nodes), stop their nodes and report.

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Raised by the first SIGINT or SIGTERM after [`Interrupt::listen`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct Interrupt(watch::Receiver<bool>);

impl Interrupt {
    /// Listens from now on: the handlers are installed before it returns (from then on the
    /// signals no longer end the process). Call it inside a tokio runtime.
    ///
    /// Errors: the OS error when a handler cannot be installed.
    pub fn listen() -> std::io::Result<Self> {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let (raise, raised) = watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            let _ = raise.send(true);
        });
        Ok(Self(raised))
    }

    /// Whether a signal came.
    pub fn raised(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when a signal has come (at once if one already did); never if the listener
    /// ended without one (the runtime shutting down).
    pub async fn wait(&self) {
        let mut raised = self.0.clone();
        if raised.wait_for(|raised| *raised).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
