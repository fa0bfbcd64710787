//! [`ServingLoad`]: what a serving node measures of its own load for the
//! [`LoadReport`] every reply carries — calls finished and failed per second, its CPU slot and
//! the application utilization the user set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::load::{clock, CpuSlot, LoadReport};

/// A serving node's load figures (one per node, in its transport).
#[derive(Debug, Default)]
pub(crate) struct ServingLoad {
    /// Calls finished, and failed, per second.
    rates: RateWindow,
    /// The application utilization (`f64` bits), or [`UNSET`].
    utilization: AtomicU64,
    /// The node's own CPU reading, which its sampler fills; `None` for a transport without a
    /// node (tests).
    pub(crate) cpu: Option<Arc<CpuSlot>>,
    /// The oldest sample a report carries, ms (3 × the node's sampling interval): a sampler
    /// that stopped publishing (its samples fail) sends no CPU rather than a frozen one.
    cpu_max_age_ms: u64,
}

/// The bits of no utilization (a NaN no arithmetic produces).
const UNSET: u64 = u64::MAX;

impl ServingLoad {
    /// A node's load figures reading its CPU from `cpu`, sampled every `sample_interval`.
    pub(crate) fn new(cpu: Option<Arc<CpuSlot>>, sample_interval: std::time::Duration) -> Self {
        Self {
            rates: RateWindow::default(),
            utilization: AtomicU64::new(UNSET),
            cpu,
            cpu_max_age_ms: (sample_interval.as_millis() as u64)
                .saturating_mul(3)
                .max(1),
        }
    }

    /// Counts one call (or cast) finished here, `ok` when it returned a value.
    #[inline]
    pub(crate) fn finished(&self, ok: bool) {
        self.rates.record(clock::now_ms() / 1_000, ok);
    }

    /// Sets (or, with `None`, clears) the application utilization reports carry.
    pub(crate) fn set_utilization(&self, utilization: Option<f64>) {
        let bits = utilization.map_or(UNSET, f64::to_bits);
        self.utilization.store(bits, Ordering::Relaxed);
    }

    /// The report a reply leaving now carries: `in_flight` calls of its balancer and
    /// `node_in_flight` in all still running (the replying call not counted).
    pub(crate) fn report(&self, in_flight: usize, node_in_flight: usize) -> LoadReport {
        self.report_at(clock::now_ms(), in_flight, node_in_flight)
    }

    /// [`Self::finished`] then [`Self::report`], reading the clock once: for a reply to a
    /// call served here.
    #[inline]
    pub(crate) fn finish(&self, ok: bool, in_flight: usize, node_in_flight: usize) -> LoadReport {
        let now_ms = clock::now_ms();
        self.rates.record(now_ms / 1_000, ok);
        self.report_at(now_ms, in_flight, node_in_flight)
    }

    fn report_at(&self, now_ms: u64, in_flight: usize, node_in_flight: usize) -> LoadReport {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let (qps, eps) = self.rates.last_second(now_ms / 1_000);
        let utilization = match self.utilization.load(Ordering::Relaxed) {
            UNSET => None,
            bits => Some(f64::from_bits(bits)),
        };
        LoadReport {
            in_flight: count(in_flight),
            node_in_flight: count(node_in_flight),
            qps,
            eps,
            cpu: self
                .cpu
                .as_ref()
                .and_then(|slot| slot.fresh(now_ms, self.cpu_max_age_ms)),
            utilization,
        }
    }
}

/// Bits of a [`RateWindow`] word per count.
const COUNT_BITS: u32 = 21;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Bits of the second in a word (it wraps; only equality and succession are compared).
const SECOND_MASK: u64 = (1 << (64 - 2 * COUNT_BITS)) - 1;

/// Calls and failures counted per whole second, lock-free: the current second's counts in one
/// word (second | calls | failures), the previous second's in another. A count saturates at
/// 2,097,151 per second.
#[derive(Debug, Default)]
struct RateWindow {
    current: AtomicU64,
    /// calls | failures of the second before `current`'s (0 when that was not the second
    /// before).
    previous: AtomicU64,
}

impl RateWindow {
    fn record(&self, second: u64, ok: bool) {
        let second = second & SECOND_MASK;
        let one = 1 << COUNT_BITS | u64::from(!ok);
        let mut word = self.current.load(Ordering::Relaxed);
        loop {
            let at = word >> (2 * COUNT_BITS);
            // A record that read the clock just before another rolled the window on (it was
            // descheduled at a second's end) counts in the current second: the window never
            // moves back.
            let behind = at.wrapping_sub(second) & SECOND_MASK;
            if at == second || (behind != 0 && behind < SECOND_MASK / 2) {
                // Saturating: a count at its limit stays there (never spills into the second).
                let _ = self
                    .current
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                        ((w >> COUNT_BITS) & COUNT_MASK < COUNT_MASK).then_some(w + one)
                    });
                return;
            }
            let fresh = second << (2 * COUNT_BITS) | one;
            match self.current.compare_exchange_weak(
                word,
                fresh,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let before = at.wrapping_add(1) & SECOND_MASK;
                    let carried = if before == second {
                        word & (COUNT_MASK << COUNT_BITS | COUNT_MASK)
                    } else {
                        0
                    };
                    self.previous.store(carried, Ordering::Relaxed);
                    return;
                }
                Err(now) => word = now,
            }
        }
    }

    /// Calls and failures of the whole second before `second`.
    fn last_second(&self, second: u64) -> (u32, u32) {
        let second = second & SECOND_MASK;
        let word = self.current.load(Ordering::Relaxed);
        let at = word >> (2 * COUNT_BITS);
        let counts = if at == second {
            self.previous.load(Ordering::Relaxed)
        } else if at.wrapping_add(1) & SECOND_MASK == second {
            word
        } else {
            0
        };
        (
            ((counts >> COUNT_BITS) & COUNT_MASK) as u32,
            (counts & COUNT_MASK) as u32,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_last_whole_second() {
        let window = RateWindow::default();
        assert_eq!(window.last_second(100), (0, 0));
        for i in 0..10 {
            window.record(100, i % 5 != 0);
        }
        assert_eq!(window.last_second(100), (0, 0), "second 100 is not over");
        assert_eq!(window.last_second(101), (10, 2));
        assert_eq!(window.last_second(102), (0, 0), "nothing in second 101");
        window.record(101, true);
        assert_eq!(window.last_second(101), (10, 2), "101 is not over yet");
        assert_eq!(window.last_second(102), (1, 0));
        window.record(105, false);
        assert_eq!(
            window.last_second(105),
            (0, 0),
            "a gap clears the previous second"
        );
        assert_eq!(window.last_second(106), (1, 1));
    }

    #[test]
    fn a_report_carries_the_figures_and_the_utilization_set() {
        let slot = Arc::new(CpuSlot::default());
        let load = ServingLoad::new(Some(Arc::clone(&slot)), std::time::Duration::from_secs(1));
        let report = load.report(2, 7);
        assert_eq!((report.in_flight, report.node_in_flight), (2, 7));
        assert_eq!((report.cpu, report.utilization), (None, None));
        slot.store(37.5, 0, clock::now_ms());
        load.set_utilization(Some(0.25));
        let report = load.report(0, 0);
        assert_eq!((report.cpu, report.utilization), (Some(37.5), Some(0.25)));
        load.set_utilization(None);
        assert_eq!(load.report(0, 0).utilization, None);
        // A sample older than 3 sampling intervals (the sampler stopped) is not reported.
        slot.store(37.5, 3_001, clock::now_ms());
        assert_eq!(load.report(0, 0).cpu, None);
    }
}
