//! One member's health as outlier ejection keeps it: failures in a row, the interval's calls
//! and failures, its ejection, its silence, and its reply latencies.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::routing::MemberView;

/// Latency buckets: bucket `b` holds replies of [2^b, 2^(b+1)) µs (the first also holds
/// faster ones, the last slower ones): 1 µs to about 16 s.
const BUCKETS: usize = 24;

/// After this many samples the histogram's counts are halved, so old latencies fade.
const HALVE_AT: u32 = 2_000;

/// One member's health (all fields atomics: read by picks, written by outcomes and sweeps
/// on any thread). Times are ns on the selector's clock; 0 means "never" or "not".
#[derive(Debug)]
pub(super) struct Health {
    /// The member, for its calls in flight.
    pub(super) view: MemberView,
    /// Failures since its last success.
    pub(super) consecutive: AtomicU32,
    /// Calls that ended in this interval (success-rate detector).
    pub(super) calls: AtomicU64,
    /// Of which failed.
    pub(super) failures: AtomicU64,
    /// Ejected until then (0: not ejected).
    pub(super) ejected_until: AtomicU64,
    /// Ejections not yet decayed: the next one lasts one more base time.
    pub(super) times_ejected: AtomicU32,
    /// Its last reply (an error reply too; not a timeout).
    pub(super) replied: AtomicU64,
    /// Its last call that timed out (when the timeout came).
    pub(super) timed_out: AtomicU64,
    /// When a sweep first saw it with calls in flight since it last had none.
    pub(super) busy_since: AtomicU64,
    /// Suspected of being silent: not picked while it has enough calls in flight.
    pub(super) suspected: AtomicBool,
    latency: Histogram,
}

impl Health {
    pub(super) fn new(view: MemberView) -> Self {
        Self {
            view,
            consecutive: AtomicU32::new(0),
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            ejected_until: AtomicU64::new(0),
            times_ejected: AtomicU32::new(0),
            replied: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
            busy_since: AtomicU64::new(0),
            suspected: AtomicBool::new(false),
            latency: Histogram::default(),
        }
    }

    /// Whether it is ejected at `now`.
    #[inline]
    pub(super) fn is_ejected(&self, now: u64) -> bool {
        let until = self.ejected_until.load(Ordering::Relaxed);
        until != 0 && now < until
    }

    /// A reply came at `now` after `latency_ns` (`ok`: a success, whose latency is kept).
    pub(super) fn replied(&self, now: u64, latency_ns: u64, ok: bool) {
        self.replied.store(now.max(1), Ordering::Relaxed);
        if ok {
            self.latency.record(latency_ns);
        }
    }

    /// Whether it failed to answer since `at`: a call of it timed out after `at` with no
    /// reply since, or it holds calls in flight and has not replied for `limit` before `now`.
    pub(super) fn unanswered_since(&self, at: u64, now: u64, limit: u64) -> bool {
        let replied = self.replied.load(Ordering::Relaxed);
        let timed_out = self.timed_out.load(Ordering::Relaxed);
        (timed_out > at && timed_out >= replied)
            || (self.view.in_flight() > 0 && now.saturating_sub(replied) >= limit)
    }

    /// Its p99 reply latency (ns), from the buckets' upper bounds; `None` without samples.
    pub(super) fn p99_ns(&self) -> Option<u64> {
        self.latency.quantile(0.99)
    }

    /// When its current silence began, if it has calls in flight that a sweep has seen: its
    /// last reply or the start of its busy time, whichever is later.
    pub(super) fn silent_since(&self) -> Option<u64> {
        let busy = self.busy_since.load(Ordering::Relaxed);
        (busy != 0).then(|| busy.max(self.replied.load(Ordering::Relaxed)))
    }
}

/// Counts of reply latencies in power-of-two µs buckets, halved every [`HALVE_AT`] samples.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU32; BUCKETS],
    total: AtomicU32,
}

impl Histogram {
    fn record(&self, latency_ns: u64) {
        let micros = (latency_ns / 1_000).max(1);
        let bucket = (micros.ilog2() as usize).min(BUCKETS - 1);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        if self.total.fetch_add(1, Ordering::Relaxed) + 1 >= HALVE_AT {
            // Racy with concurrent records by design: a lost count or two changes no p99.
            for b in &self.buckets {
                b.store(b.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
            }
            self.total.store(HALVE_AT / 2, Ordering::Relaxed);
        }
    }

    /// The upper bound (ns) of the bucket holding quantile `q` of the counts.
    fn quantile(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| u64::from(b.load(Ordering::Relaxed)))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some((1u64 << (bucket + 1)) * 1_000);
            }
        }
        Some((1u64 << BUCKETS) * 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_is_the_upper_bound_of_the_bucket_of_the_99th_percentile() {
        let histogram = Histogram::default();
        assert_eq!(histogram.quantile(0.99), None);
        for _ in 0..990 {
            histogram.record(100_000); // 100 µs: bucket [64, 128) µs
        }
        for _ in 0..10 {
            histogram.record(40_000_000); // 40 ms: bucket [32.8, 65.5) ms
        }
        assert_eq!(histogram.quantile(0.99), Some(128_000));
        assert_eq!(histogram.quantile(0.999), Some(65_536_000));
    }

    #[test]
    fn old_latencies_fade_as_counts_are_halved() {
        let histogram = Histogram::default();
        for _ in 0..1_000 {
            histogram.record(40_000_000);
        }
        for _ in 0..10 * HALVE_AT {
            histogram.record(100_000);
        }
        assert_eq!(histogram.quantile(0.99), Some(128_000), "slow past faded");
    }

    #[test]
    fn silence_starts_at_the_later_of_the_busy_start_and_the_last_reply() {
        let health = Health::new(MemberView::new("a@h", false));
        assert_eq!(health.silent_since(), None, "not seen busy");
        health.busy_since.store(100, Ordering::Relaxed);
        assert_eq!(health.silent_since(), Some(100));
        health.replied(250, 10, true);
        assert_eq!(health.silent_since(), Some(250));
        assert!(!health.is_ejected(300));
        health.ejected_until.store(400, Ordering::Relaxed);
        assert!(health.is_ejected(399) && !health.is_ejected(400));
    }
}
