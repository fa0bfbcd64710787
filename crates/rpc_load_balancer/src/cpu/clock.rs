//! A process-wide monotonic clock in milliseconds, for reading timestamps that fit an atomic.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Where the clock starts: 2^32 ms (≈ 49.7 days), so `now − age` stays above 0 for any
/// reading age a node can report, and 0 is free to mean "no time".
const START_MS: u64 = 1 << 32;

/// Milliseconds on the process's clock: [`START_MS`] at its first use, monotonic.
#[inline]
pub(crate) fn now_ms() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    epoch.elapsed().as_millis() as u64 + START_MS
}
