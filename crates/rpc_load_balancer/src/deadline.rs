//! Deadlines from user-given durations that never overflow: a timeout of `Duration::MAX` (or
//! a century) means "wait as long as it takes", not a panic.

use std::time::Duration;

use tokio::time::Instant;

/// The farthest deadline used: about 30 years ahead (as tokio does for its own far future).
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `Instant::now() + after`, or about 30 years ahead when that would overflow.
pub(crate) fn after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after.min(FAR)).unwrap_or(now)
}

/// `std::time::Instant::now() + after`, or about 30 years ahead when that would overflow (a
/// call's deadline as its function sees it, in [`CallContext`](crate::CallContext)).
pub(crate) fn after_std(after: Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(after.min(FAR)).unwrap_or(now)
}

/// `duration` scaled by `factor` (finite, ≥ 0), saturating at 30 years instead of panicking.
pub(crate) fn scaled(duration: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(duration.min(FAR).as_secs_f64() * factor)
        .unwrap_or(FAR)
        .min(FAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn huge_durations_saturate() {
        let far = after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(86_400 * 365 * 29));
        assert!(after(Duration::from_millis(5)) <= Instant::now() + Duration::from_millis(5));
        assert_eq!(scaled(Duration::MAX, 1.2), FAR);
        assert_eq!(
            scaled(Duration::from_millis(100), 1.2),
            Duration::from_millis(120)
        );
    }
}
