//! Warnings about refused handshakes, so that an operator learns why a peer cannot join (a
//! wrong cookie is otherwise only visible on the dialling side), without a flood of them
//! filling the log: at most one line per [`REFUSAL_LOG_INTERVAL`], which counts the refusals
//! left unlogged since the previous line.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shortest time between two warnings about refused handshakes.
pub(crate) const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs refused handshakes at WARN, rate-limited.
#[derive(Default)]
pub(crate) struct Refusals(Mutex<Limit>);

#[derive(Default)]
struct Limit {
    last: Option<Instant>,
    /// Refusals not logged since the last line.
    unlogged: u64,
}

impl Refusals {
    /// Notes that the handshake of the connection from `peer_addr` (`ip:port`), whose peer
    /// called itself `name` if it got that far, failed for `reason`; logs it unless a line
    /// was logged in the last [`REFUSAL_LOG_INTERVAL`].
    pub(crate) fn refused(&self, peer_addr: &str, name: Option<&str>, reason: &str) {
        let Some(unlogged) = self.admit(Instant::now()) else {
            return;
        };
        tracing::warn!(
            %peer_addr,
            peer = %name.unwrap_or("?"),
            %reason,
            also_refused_since_last_warning = unlogged,
            "refused a peer's handshake"
        );
    }

    /// Whether a line may be logged `now`: the refusals left unlogged before it, if so.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut limit = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match limit.last {
            Some(last) if now.saturating_duration_since(last) < REFUSAL_LOG_INTERVAL => {
                limit.unlogged += 1;
                None
            }
            _ => {
                limit.last = Some(now);
                Some(std::mem::take(&mut limit.unlogged))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_counting_the_rest() {
        let refusals = Refusals::default();
        let start = Instant::now();
        assert_eq!(refusals.admit(start), Some(0));
        for i in 1..=5 {
            assert_eq!(refusals.admit(start + Duration::from_secs(i)), None);
        }
        assert_eq!(refusals.admit(start + REFUSAL_LOG_INTERVAL), Some(5));
        assert_eq!(
            refusals.admit(start + REFUSAL_LOG_INTERVAL + Duration::from_secs(1)),
            None
        );
    }
}
