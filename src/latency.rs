//! Call latencies of a load run in a bounded histogram: the memory it takes is fixed when it
//! is made, whatever the number of calls or the length of the run.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Significant decimal digits the histogram keeps: a percentile is within 0.1 % of the
/// latency it stands for (its value is at most 1/1024 above it).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// The largest latency the histogram tells apart, µs (one hour): a longer one counts as an
/// hour in the percentiles (`max` stays exact).
pub const HIGHEST_US: u64 = 3_600_000_000;

/// Latencies in µs, as a histogram of [`SIGNIFICANT_DIGITS`] digits from 1 µs to
/// [`HIGHEST_US`], plus the exact largest one. Its size in bytes ([`Latencies::size_bytes`])
/// does not change as samples are recorded.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
    max_us: u64,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty recorder (about 190 KB, allocated here once).
    pub fn new() -> Self {
        let mut histogram = Histogram::new_with_bounds(1, HIGHEST_US, SIGNIFICANT_DIGITS)
            .expect("1 µs to an hour with 3 digits are valid bounds");
        histogram.auto(false);
        Self {
            histogram,
            max_us: 0,
        }
    }

    /// Records one latency of `us` µs (above [`HIGHEST_US`]: counted as [`HIGHEST_US`]).
    pub fn record(&mut self, us: u64) {
        self.histogram.saturating_record(us);
        self.max_us = self.max_us.max(us);
    }

    /// Adds every latency of `other` to this recorder.
    pub fn absorb(&mut self, other: &Latencies) {
        // Same bounds on both sides: `add` cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.max_us = self.max_us.max(other.max_us);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The `p`-th percentile in µs (`p` in 0..=100, nearest rank), within the histogram's
    /// precision and never above [`Latencies::max_us`]; 0 when empty.
    pub fn percentile_us(&self, p: f64) -> u64 {
        if self.histogram.is_empty() {
            return 0;
        }
        self.histogram
            .value_at_percentile(p.clamp(0.0, 100.0))
            .min(self.max_us)
    }

    /// The largest latency recorded, µs, exact; 0 when empty.
    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// Bytes this recorder holds: its own size and its counters'. Fixed at
    /// [`Latencies::new`].
    pub fn size_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.histogram.distinct_values() * std::mem::size_of::<u64>()
    }

    /// `{"p50","p90","p99","max"}` in µs, as every report prints them.
    pub fn to_json(&self) -> Value {
        json!({
            "p50": self.percentile_us(50.0),
            "p90": self.percentile_us(90.0),
            "p99": self.percentile_us(99.0),
            "max": self.max_us(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest-rank percentile of ascending `sorted`.
    fn exact(sorted: &[u64], p: f64) -> u64 {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted[rank - 1]
    }

    #[test]
    fn percentiles_are_within_the_precision() {
        // A spread from µs to seconds, in a scrambled order.
        let mut samples: Vec<u64> = (0..50_000u64)
            .map(|i| 1 + (i * 7_919 % 50_000).pow(2) / 1_000)
            .collect();
        let mut latencies = Latencies::new();
        for &us in &samples {
            latencies.record(us);
        }
        samples.sort_unstable();
        assert_eq!(latencies.count(), 50_000);
        for p in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            let want = exact(&samples, p);
            let got = latencies.percentile_us(p);
            assert!(
                got.abs_diff(want) <= want / 1_000,
                "p{p}: {got} µs, exactly {want} µs"
            );
        }
        assert_eq!(latencies.max_us(), *samples.last().unwrap());
        assert_eq!(latencies.percentile_us(100.0), latencies.max_us());
    }

    #[test]
    fn small_values_are_exact_and_an_empty_recorder_reads_zero() {
        let mut latencies = Latencies::new();
        assert_eq!(
            latencies.to_json(),
            json!({"p50": 0, "p90": 0, "p99": 0, "max": 0})
        );
        for us in 1..=100 {
            latencies.record(us);
        }
        assert_eq!(
            latencies.to_json(),
            json!({"p50": 50, "p90": 90, "p99": 99, "max": 100})
        );
    }

    #[test]
    fn its_size_does_not_grow_with_the_samples() {
        let empty = Latencies::new().size_bytes();
        let mut few = Latencies::new();
        few.record(250);
        let mut many = Latencies::new();
        for i in 0..1_000_000u64 {
            many.record(i.wrapping_mul(2_654_435_761) % 10_000_000);
        }
        // Beyond the histogram's range: counted at its top, the max stays exact.
        many.record(u64::MAX);
        assert_eq!(few.size_bytes(), empty);
        assert_eq!(many.size_bytes(), empty);
        assert!(empty < 256 * 1024, "{empty} bytes");
        assert_eq!(many.max_us(), u64::MAX);
        assert_eq!(many.count(), 1_000_001);
        let mut merged = Latencies::new();
        merged.absorb(&many);
        merged.absorb(&few);
        assert_eq!(merged.size_bytes(), empty);
        assert_eq!(merged.count(), 1_000_002);
    }
}
