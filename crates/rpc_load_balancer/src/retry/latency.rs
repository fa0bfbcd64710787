//! A function's recent latency on one balancer, for hedged calls that wait for a percentile of
//! it ([`HedgeDelay::Percentile`](crate::HedgeDelay::Percentile), issue 22).
//!
//! A small log-bucketed histogram (the idea of HdrHistogram and of Prometheus' native
//! histograms, reduced: 4 buckets per power of two, so a percentile is read at most 25 % high)
//! whose counts are halved every [`HALVE_EVERY`] samples, so old latencies fade and a change
//! shows within about a thousand calls. Fixed size ([`BUCKETS`] counters, ~600 bytes), one
//! short lock per sample and per reading; no allocation after it is made.

use std::sync::Mutex;
use std::time::Duration;

/// Samples needed before a percentile is given: fewer say little about a tail (ours; with 100
/// samples a p95 rests on 5 of them).
pub(crate) const MIN_SAMPLES: u32 = 100;

/// After this many samples every count is halved (ours): a sample's weight halves with every
/// 1,024 samples after it.
pub(crate) const HALVE_EVERY: u32 = 1_024;

/// Buckets below 4 µs: one per microsecond (0, 1, 2, 3).
const LINEAR: usize = 4;
/// Octaves covered above that: 4 µs up to 2^40 µs (~12 days); longer samples count in the last.
const OCTAVES: usize = 38;
/// The number of buckets.
pub(crate) const BUCKETS: usize = LINEAR + 4 * OCTAVES;

/// The decaying histogram of one function's latencies (see the module docs).
#[derive(Debug)]
pub(crate) struct LatencyEstimate {
    inner: Mutex<Counts>,
}

#[derive(Debug)]
struct Counts {
    buckets: [u32; BUCKETS],
    /// The sum of `buckets`.
    total: u32,
    /// Samples since the last halving.
    since_halving: u32,
}

impl Default for LatencyEstimate {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Counts {
                buckets: [0; BUCKETS],
                total: 0,
                since_halving: 0,
            }),
        }
    }
}

/// The bucket of `micros`.
fn bucket_of(micros: u64) -> usize {
    if micros < LINEAR as u64 {
        return micros as usize;
    }
    let octave = 63 - micros.leading_zeros() as usize; // ≥ 2
    if octave - 2 >= OCTAVES {
        return BUCKETS - 1;
    }
    let mantissa = ((micros >> (octave - 2)) & 3) as usize;
    LINEAR + (octave - 2) * 4 + mantissa
}

/// The upper bound (exclusive) of bucket `index`, µs.
fn upper_bound(index: usize) -> u64 {
    if index < LINEAR {
        return index as u64 + 1;
    }
    let octave = (index - LINEAR) / 4 + 2;
    let mantissa = ((index - LINEAR) % 4) as u64;
    (4 + mantissa + 1) << (octave - 2)
}

impl LatencyEstimate {
    /// Counts one call's latency.
    pub(crate) fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let mut counts = self.lock();
        counts.buckets[bucket_of(micros)] += 1;
        counts.total += 1;
        counts.since_halving += 1;
        if counts.since_halving >= HALVE_EVERY {
            counts.since_halving = 0;
            let mut total = 0;
            for count in &mut counts.buckets {
                *count /= 2;
                total += *count;
            }
            counts.total = total;
        }
    }

    /// The `percentile` (percent, within `0.0..100.0`) of the latencies counted: the upper
    /// bound of the bucket it falls in; `None` while fewer than [`MIN_SAMPLES`] weigh in.
    pub(crate) fn percentile(&self, percentile: f64) -> Option<Duration> {
        let counts = self.lock();
        if counts.total < MIN_SAMPLES {
            return None;
        }
        // The rank of the sample the percentile falls on, 1-based.
        let rank = ((percentile / 100.0) * f64::from(counts.total))
            .ceil()
            .max(1.0) as u64;
        let mut seen = 0u64;
        for (index, count) in counts.buckets.iter().enumerate() {
            seen += u64::from(*count);
            if seen >= rank {
                return Some(Duration::from_micros(upper_bound(index)));
            }
        }
        Some(Duration::from_micros(upper_bound(BUCKETS - 1)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // (Nothing panics while it is held: a poisoned lock's data is whole.)
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_at_most_a_quarter_wide() {
        let mut last = 0;
        for micros in [0u64, 1, 3, 4, 5, 7, 8, 9, 15, 16, 1_000, 1 << 20, 1 << 39] {
            let index = bucket_of(micros);
            assert!(index >= last, "{micros}");
            last = index;
            let upper = upper_bound(index);
            assert!(upper > micros, "{micros} < {upper}");
            // The bucket's lower bound is the previous one's upper bound.
            let lower = if index == 0 {
                0
            } else {
                upper_bound(index - 1)
            };
            assert!(lower <= micros, "{lower} <= {micros}");
            assert!(
                upper - lower <= (lower / 4).max(1),
                "{micros}: {lower}..{upper}"
            );
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn no_percentile_before_min_samples() {
        let estimate = LatencyEstimate::default();
        for _ in 0..MIN_SAMPLES - 1 {
            estimate.record(Duration::from_millis(1));
        }
        assert_eq!(estimate.percentile(95.0), None);
        estimate.record(Duration::from_millis(1));
        assert!(estimate.percentile(95.0).is_some());
    }

    #[test]
    fn the_percentile_falls_in_the_right_bucket() {
        // 95 calls of 1 ms, 5 of 100 ms: p90 is about 1 ms, p99 about 100 ms.
        let estimate = LatencyEstimate::default();
        for i in 0..100 {
            let ms = if i % 20 == 0 { 100 } else { 1 };
            estimate.record(Duration::from_millis(ms));
        }
        let p90 = estimate.percentile(90.0).unwrap();
        assert!(
            p90 > Duration::from_millis(1) && p90 <= Duration::from_micros(1_250),
            "{p90:?}"
        );
        let p99 = estimate.percentile(99.0).unwrap();
        assert!(
            p99 > Duration::from_millis(100) && p99 <= Duration::from_millis(125),
            "{p99:?}"
        );
        // p95 is the last of the 1 ms calls.
        assert!(estimate.percentile(95.0).unwrap() <= Duration::from_micros(1_250));
    }

    #[test]
    fn old_latencies_fade() {
        let estimate = LatencyEstimate::default();
        for _ in 0..HALVE_EVERY {
            estimate.record(Duration::from_millis(50));
        }
        // Then the function gets faster: after a few halvings the old samples weigh < 5 %.
        for _ in 0..5 * HALVE_EVERY {
            estimate.record(Duration::from_millis(2));
        }
        let p95 = estimate.percentile(95.0).unwrap();
        assert!(p95 <= Duration::from_micros(2_560), "{p95:?}");
        // The counts stay bounded whatever the number of samples.
        assert!(estimate.lock().total < 2 * HALVE_EVERY);
    }
}
