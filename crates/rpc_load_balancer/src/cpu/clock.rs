//! A process-wide monotonic clock in milliseconds, for reading timestamps that fit an atomic.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Milliseconds since the process's clock epoch (its first use), plus one: never 0, so 0 can
/// mean "no time".
#[inline]
pub(crate) fn now_ms() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_millis() as u64 + 1
}
