//! A balancer's total of selections in flight on this node (taken by every selection guard,
//! read for draining and by [`Balancer::in_flight`](super::Balancer::in_flight)).
//!
//! One shared atomic written by every selection would make callers on different threads
//! fight over its cache line (≈ 4× the cost of an uncontended selection on a 2-core machine).
//! The total is therefore striped: each thread adds to its own cache-padded stripe, and a
//! release subtracts from the stripe its selection added to, so every stripe stays ≥ 0 and a
//! selection that is live during a whole read of [`InFlightTotal::get`] is always seen.

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Number of stripes (a power of two); threads share one when there are more threads.
const STRIPES: usize = 16;

/// The next thread's stripe.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, assigned round-robin at first use.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

/// One call or cast (run on this node, or tracked) counted in a balancer's in-flight total
/// and gauge until dropped. It holds its balancer's state, so it can move into the task that
/// runs a call on this node (released when that run has ended, not when its caller stops
/// waiting).
pub(crate) struct OwnedInFlightToken {
    shared: std::sync::Arc<super::shared::BalancerShared>,
    stripe: usize,
}

impl OwnedInFlightToken {
    pub(crate) fn new(shared: &std::sync::Arc<super::shared::BalancerShared>) -> Self {
        shared.metrics.enter();
        let stripe = shared.in_flight.acquire();
        Self {
            shared: std::sync::Arc::clone(shared),
            stripe,
        }
    }

    /// What cancels the calls counted by this token when their balancer's drain gives up.
    pub(crate) fn abandoned(&self) -> &std::sync::Arc<crate::function::Signal> {
        &self.shared.abandoned
    }
}

impl Drop for OwnedInFlightToken {
    fn drop(&mut self) {
        self.shared.in_flight.release(self.stripe);
        self.shared.metrics.exit();
    }
}

/// One routed call or cast this node serves as a member, counted in the balancer's served
/// total until dropped (owned, so it can move into the task that serves the call).
pub(crate) struct ServedToken {
    shared: std::sync::Arc<super::shared::BalancerShared>,
    stripe: usize,
}

impl ServedToken {
    pub(crate) fn new(shared: &std::sync::Arc<super::shared::BalancerShared>) -> Self {
        let stripe = shared.served.acquire();
        Self {
            shared: std::sync::Arc::clone(shared),
            stripe,
        }
    }

    /// What cancels the calls counted by this token when their balancer's drain gives up.
    pub(crate) fn abandoned(&self) -> &std::sync::Arc<crate::function::Signal> {
        &self.shared.abandoned
    }
}

impl crate::endpoint::Held for ServedToken {
    fn balancer_in_flight(&self) -> Option<usize> {
        Some(self.shared.served.get())
    }
}

impl Drop for ServedToken {
    fn drop(&mut self) {
        self.shared.served.release(self.stripe);
    }
}

/// A striped count of selections in flight.
pub(crate) struct InFlightTotal {
    stripes: Box<[CachePadded<AtomicUsize>; STRIPES]>,
}

impl Default for InFlightTotal {
    fn default() -> Self {
        Self {
            stripes: Box::new(std::array::from_fn(|_| {
                CachePadded::new(AtomicUsize::new(0))
            })),
        }
    }
}

impl InFlightTotal {
    /// Counts one more selection; returns the stripe to give back to [`Self::release`].
    #[inline]
    pub(crate) fn acquire(&self) -> usize {
        let stripe = STRIPE.with(|s| *s);
        // Sequentially consistent, as the drain's read of the total and the stopping flag
        // checked after this count are (`BalancerShared::check_running`).
        self.stripes[stripe].fetch_add(1, Ordering::SeqCst);
        stripe
    }

    /// Counts one selection finished, on the stripe [`Self::acquire`] returned (saturating).
    #[inline]
    pub(crate) fn release(&self, stripe: usize) {
        let _ =
            self.stripes[stripe % STRIPES]
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Selections in flight now.
    pub(crate) fn get(&self) -> usize {
        self.stripes.iter().map(|s| s.load(Ordering::SeqCst)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_across_threads_and_releases_on_the_acquiring_stripe() {
        let total = Arc::new(InFlightTotal::default());
        let stripes: Vec<usize> = (0..8)
            .map(|_| {
                let total = Arc::clone(&total);
                std::thread::spawn(move || total.acquire()).join().unwrap()
            })
            .collect();
        assert_eq!(total.get(), 8);
        // Released from this thread, each on the stripe its acquire used.
        for (i, stripe) in stripes.iter().enumerate() {
            total.release(*stripe);
            assert_eq!(total.get(), 7 - i);
        }
        total.release(stripes[0]);
        assert_eq!(total.get(), 0, "never below zero");
    }

    #[test]
    fn threads_spread_over_stripes() {
        let total = InFlightTotal::default();
        let used: std::collections::BTreeSet<usize> = (0..STRIPES)
            .map(|_| std::thread::scope(|s| s.spawn(|| total.acquire()).join().unwrap()))
            .collect();
        assert!(used.len() > 1, "every thread on one stripe: {used:?}");
        assert_eq!(total.get(), STRIPES);
    }
}
