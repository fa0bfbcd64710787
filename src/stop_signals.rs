//! The stop signals of `rpclb node` (SIGTERM, SIGINT, SIGHUP), with one stop request per
//! burst: the same signal again within [`REPEAT_WINDOW`] of the first is the same request.
//!
//! GNU `timeout` signals the command and then its whole process group, so one stop arrives as
//! two SIGTERMs a few microseconds apart (a shell or supervisor that forwards a signal to a
//! group it is part of does the same). Only a *different* signal, or the same one after the
//! window, is a second request (which abandons the drain).

use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};

/// How long after a stop signal the same signal again is taken as a repeat of it, not a second
/// request: 100 ms.
pub const REPEAT_WINDOW: Duration = Duration::from_millis(100);

/// Which stop signal came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM.
    Terminate,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGHUP.
    Hangup,
}

/// Whether `signal`, seen at `now`, repeats `first` (the signal that made the stop request,
/// seen at `first_at`): the same signal within [`REPEAT_WINDOW`].
pub fn is_repeat(first: StopSignal, first_at: Instant, signal: StopSignal, now: Instant) -> bool {
    signal == first && now.saturating_duration_since(first_at) < REPEAT_WINDOW
}

/// The stop signals of a process, listened to from [`StopSignals::listen`] on.
pub struct StopSignals {
    term: Signal,
    interrupt: Signal,
    hangup: Signal,
    /// The signal of the first request and when it was seen.
    first: Option<(StopSignal, Instant)>,
}

impl StopSignals {
    /// Starts listening to SIGTERM, SIGINT and SIGHUP (from now on they no longer end the
    /// process by default).
    ///
    /// Errors: the OS error of installing a handler.
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
            first: None,
        })
    }

    /// Waits for the next stop request: the first signal, then the next one that is not a
    /// repeat of the first (see [`is_repeat`]); repeats are skipped.
    pub async fn request(&mut self) -> StopSignal {
        loop {
            let signal = self.next().await;
            let now = Instant::now();
            match self.first {
                None => {
                    self.first = Some((signal, now));
                    return signal;
                }
                Some((first, at)) if is_repeat(first, at, signal, now) => {
                    tracing::debug!(?signal, "the same stop signal again at once: one request");
                }
                Some(_) => return signal,
            }
        }
    }

    /// The next stop signal of any kind.
    async fn next(&mut self) -> StopSignal {
        tokio::select! {
            _ = self.term.recv() => StopSignal::Terminate,
            _ = self.interrupt.recv() => StopSignal::Interrupt,
            _ = self.hangup.recv() => StopSignal::Hangup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_signal_within_the_window_repeats_the_request() {
        let first = Instant::now();
        let soon = first + REPEAT_WINDOW / 2;
        assert!(is_repeat(
            StopSignal::Terminate,
            first,
            StopSignal::Terminate,
            soon
        ));
        assert!(is_repeat(
            StopSignal::Terminate,
            first,
            StopSignal::Terminate,
            first
        ));
    }

    #[test]
    fn another_signal_or_the_same_after_the_window_is_a_second_request() {
        let first = Instant::now();
        let soon = first + Duration::from_millis(1);
        assert!(!is_repeat(
            StopSignal::Terminate,
            first,
            StopSignal::Interrupt,
            soon
        ));
        assert!(!is_repeat(
            StopSignal::Hangup,
            first,
            StopSignal::Terminate,
            soon
        ));
        let later = first + REPEAT_WINDOW;
        assert!(!is_repeat(
            StopSignal::Terminate,
            first,
            StopSignal::Terminate,
            later
        ));
    }
}
