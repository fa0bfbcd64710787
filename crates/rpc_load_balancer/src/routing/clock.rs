//! The clock selectors read: monotonic time since the clock's own epoch, as a [`Duration`].
//!
//! [`Clock::system`] reads the process's coarse monotonic clock (a few ms of resolution, about
//! 5 ns a read), the clock CPU readings' sample times are on, so a member's
//! [`cpu`](super::MemberView::cpu) and [`Clock::now_ms`] agree. [`Clock::manual`] gives a
//! clock that only moves when its [`ManualClock`] is advanced: for the
//! test kit (`rpc_load_balancer::testkit`, feature `testkit`) and simulations. Both start at 2^32 ms (≈ 49.7 days), so
//! `now − age` stays above 0 for any age a test gives.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::load::clock;

/// A cheap-to-clone handle on a monotonic clock: the process's coarse clock
/// ([`Clock::system`]) or a manual one ([`Clock::manual`]); see [`crate::routing`].
#[derive(Clone, Debug)]
pub struct Clock(Source);

#[derive(Clone, Debug)]
enum Source {
    /// The process's coarse monotonic clock.
    System,
    /// Nanoseconds, moved by a [`ManualClock`].
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The process's coarse monotonic clock (what a balancer's selector reads).
    pub fn system() -> Clock {
        Clock(Source::System)
    }

    /// A clock that stands still until the returned handle advances it; it starts at
    /// 2^32 ms, as the system clock does.
    pub fn manual() -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(clock::START_MS * 1_000_000)))
    }

    /// The time now, since the clock's epoch.
    #[inline]
    pub fn now(&self) -> Duration {
        match &self.0 {
            Source::System => clock::now(),
            Source::Manual(nanos) => Duration::from_nanos(nanos.load(Ordering::Acquire)),
        }
    }

    /// The time now on a precise clock, for latencies (a difference of two readings): the
    /// process's time-stamp counter (`quanta`, ns resolution) for
    /// [`Clock::system`], whose epoch is its own (do not compare it with [`now`](Self::now));
    /// the same as [`now`](Self::now) for a manual clock.
    #[inline]
    pub fn now_precise(&self) -> Duration {
        match &self.0 {
            Source::System => clock::precise_now(),
            Source::Manual(nanos) => Duration::from_nanos(nanos.load(Ordering::Acquire)),
        }
    }

    /// [`now`](Self::now) in ns, saturating, never 0 (0 can then mean "never").
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.now().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The time now in whole milliseconds since the clock's epoch (the unit CPU readings'
    /// sample times are kept in).
    #[inline]
    pub fn now_ms(&self) -> u64 {
        match &self.0 {
            Source::System => clock::now_ms(),
            Source::Manual(nanos) => nanos.load(Ordering::Acquire) / 1_000_000,
        }
    }

    /// Whether this is a manual clock.
    pub fn is_manual(&self) -> bool {
        matches!(self.0, Source::Manual(_))
    }
}

/// The handle that moves a [manual](Clock::manual) clock; every [`Clock`] it gave out moves
/// with it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A [`Clock`] that reads this manual clock.
    pub fn clock(&self) -> Clock {
        Clock(Source::Manual(Arc::clone(&self.0)))
    }

    /// Moves the clock forward by `by` (saturating at about 584 years).
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_add(nanos))
            });
    }

    /// The time now, since the clock's epoch.
    pub fn now(&self) -> Duration {
        self.clock().now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_agrees_in_ms() {
        let manual = Clock::manual();
        let clock = manual.clock();
        let start = clock.now();
        assert_eq!(start, Duration::from_millis(clock::START_MS));
        assert_eq!(clock.now(), start);
        manual.advance(Duration::from_micros(1_500));
        assert_eq!(clock.now() - start, Duration::from_micros(1_500));
        assert_eq!(clock.now_ms(), clock::START_MS + 1);
        assert!(clock.is_manual() && !Clock::system().is_manual());
        assert_eq!(
            clock.now_precise(),
            clock.now(),
            "one time on a manual clock"
        );
    }

    #[test]
    fn the_system_clock_is_the_cpu_slot_clock() {
        let system = Clock::system();
        let (a, b) = (system.now_ms(), clock::now_ms());
        assert!(b >= a && b - a < 1_000, "{a} vs {b}");
        assert!(system.now() >= Duration::from_millis(a));
    }
}
