//! One member's latency estimate: Peak-EWMA over time, read lock-free.

use std::sync::atomic::{AtomicU64, Ordering};

/// `ewma`'s value before the first sample (a NaN pattern no sample stores).
const NO_HISTORY: u64 = u64::MAX;

/// A member's latency estimate (ns, as `f64` bits) and when it was last updated (ns on the
/// selector's clock). A reader may see one updated before the other: the estimate is off by
/// one sample's decay at most.
#[derive(Debug)]
pub(super) struct Estimate {
    ewma: AtomicU64,
    at_ns: AtomicU64,
    /// When the member last replied (ns on the clock; 0: never).
    replied_ns: AtomicU64,
    /// When it was last picked with no call of this balancer in flight (ns on the clock).
    busy_since_ns: AtomicU64,
}

impl Default for Estimate {
    fn default() -> Self {
        Self {
            ewma: AtomicU64::new(NO_HISTORY),
            at_ns: AtomicU64::new(0),
            replied_ns: AtomicU64::new(0),
            busy_since_ns: AtomicU64::new(0),
        }
    }
}

/// The weight an estimate keeps after `elapsed_ns`: exp(−elapsed / decay), by its first-order
/// Taylor term when that is exact to 5 × 10⁻⁷ (most reads, at a busy member).
#[inline]
pub(super) fn weight(elapsed_ns: u64, decay_ns: f64) -> f64 {
    let x = elapsed_ns as f64 / decay_ns;
    if x < 1e-3 {
        1.0 - x
    } else {
        (-x).exp()
    }
}

impl Estimate {
    /// How long a member with `in_flight` calls of this balancer has been silent at `now_ns`:
    /// since its last reply or since it became busy, whichever is later; 0 when it has no call
    /// in flight.
    #[inline]
    pub(super) fn silent_ns(&self, in_flight: usize, now_ns: u64) -> u64 {
        if in_flight == 0 {
            return 0;
        }
        let since = self
            .replied_ns
            .load(Ordering::Relaxed)
            .max(self.busy_since_ns.load(Ordering::Relaxed));
        now_ns.saturating_sub(since)
    }

    /// Notes a pick of the member at `now_ns` with `in_flight` calls of this balancer in
    /// flight before it: the first one starts its busy time.
    #[inline]
    pub(super) fn picked(&self, in_flight: usize, now_ns: u64) {
        if in_flight == 0 {
            self.busy_since_ns.store(now_ns, Ordering::Relaxed);
        }
    }

    /// Notes a reply (or a failure: an answer all the same) at `now_ns`.
    pub(super) fn replied(&self, now_ns: u64) {
        self.replied_ns.fetch_max(now_ns, Ordering::Relaxed);
    }

    /// The estimate at `now_ns`, decayed toward 0 since its last update; `None` before the
    /// first sample.
    #[inline]
    pub(super) fn load(&self, now_ns: u64, decay_ns: f64) -> Option<f64> {
        let bits = self.ewma.load(Ordering::Relaxed);
        if bits == NO_HISTORY {
            return None;
        }
        let at = self.at_ns.load(Ordering::Relaxed);
        Some(f64::from_bits(bits) * weight(now_ns.saturating_sub(at), decay_ns))
    }

    /// Learns a sample of `sample_ns` at `now_ns`: a slower one replaces the estimate, a
    /// faster one is averaged in with the weight the estimate lost since its last update.
    /// Returns whether it was the first sample.
    pub(super) fn observe(&self, sample_ns: f64, now_ns: u64, decay_ns: f64) -> bool {
        let sample = sample_ns.max(0.0);
        let at = self.at_ns.load(Ordering::Relaxed);
        let keep = weight(now_ns.saturating_sub(at), decay_ns);
        let before = self
            .ewma
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                let next = if bits == NO_HISTORY {
                    sample
                } else {
                    let old = f64::from_bits(bits);
                    if sample > old {
                        sample
                    } else {
                        old * keep + sample * (1.0 - keep)
                    }
                };
                Some(next.to_bits())
            });
        self.at_ns.fetch_max(now_ns, Ordering::Relaxed);
        before == Ok(NO_HISTORY)
    }
}
