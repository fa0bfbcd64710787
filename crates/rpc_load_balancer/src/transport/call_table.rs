//! The call table: the calls this node is serving, by call id, so that a caller's
//! cancellation ([`ControlRequest::Cancel`](crate::ControlRequest::Cancel)) can abort one, and
//! the counters of served calls.
//!
//! A cancellation can overtake its call, so the ids of calls cancelled before they arrived are
//! kept for a while (bounded) and such a call is skipped when it comes. The table is sharded
//! by id (ids are random) so that concurrent calls rarely share a lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use futures_util::future::AbortHandle;

/// Shards of the table of running and cancelled calls.
const CALL_SHARDS: usize = 16;

/// Most ids of calls cancelled before they arrived kept at once; past it (a flood of
/// cancellations, or a hostile peer) new ones are not recorded and such a call runs until its
/// deadline.
const CANCELLED_MAX: usize = 65_536;

/// How long the id of a call cancelled before it arrived is kept (its call is skipped if it
/// arrives within this time).
const CANCELLED_KEPT: Duration = Duration::from_secs(60);

/// Calls running on this node and calls cancelled before they started, by call id, in
/// [`CALL_SHARDS`] shards.
pub(crate) struct CallTable {
    shards: [CachePadded<Mutex<Shard>>; CALL_SHARDS],
}

/// Maps by call id, hashed with foldhash (SipHash cost ~140 instructions per lookup, three
/// per served call); randomly seeded per map, and each shard's maps are bounded.
type ById<V> = HashMap<u64, V, foldhash::fast::RandomState>;

/// One shard of the [`CallTable`].
#[derive(Default)]
struct Shard {
    running: ById<AbortHandle>,
    cancelled: ById<Instant>,
}

impl Default for CallTable {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Default::default()),
        }
    }
}

impl CallTable {
    /// A call id for the header: random (callers on different nodes share no counter, and a
    /// serving node keys cancellations by id alone), never 0.
    pub(crate) fn next_id(&self) -> u64 {
        rand::random::<u64>() | 1
    }

    /// Registers the handler of call `id` as running, so a cancellation can abort it; the
    /// returned guard unregisters it. `None` if the call was cancelled before it started:
    /// then it must not run.
    pub(crate) fn running(&self, id: u64, abort: AbortHandle) -> Option<RunningCall<'_>> {
        let mut calls = self.shard(id);
        if calls.cancelled.remove(&id).is_some() {
            return None;
        }
        calls.running.insert(id, abort);
        Some(RunningCall { table: self, id })
    }

    /// Aborts the handler of call `id` if it runs here, or else makes it skip when it arrives
    /// (a cancellation can overtake its call); whether it was running.
    pub(crate) fn cancel(&self, id: u64) -> bool {
        let mut calls = self.shard(id);
        if let Some(handle) = calls.running.remove(&id) {
            handle.abort();
            return true;
        }
        let now = Instant::now();
        let max = CANCELLED_MAX / CALL_SHARDS;
        if calls.cancelled.len() >= max {
            calls
                .cancelled
                .retain(|_, at| now.duration_since(*at) < CANCELLED_KEPT);
        }
        if calls.cancelled.len() < max {
            calls.cancelled.insert(id, now);
        }
        false
    }

    /// The shard of the table holding call `id`, locked.
    fn shard(&self, id: u64) -> MutexGuard<'_, Shard> {
        self.shards[(id % CALL_SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// A call's handler registered as running (see [`CallTable::running`]).
pub(crate) struct RunningCall<'a> {
    table: &'a CallTable,
    id: u64,
}

impl Drop for RunningCall<'_> {
    fn drop(&mut self) {
        self.table.shard(self.id).running.remove(&self.id);
    }
}

/// Counters of calls this node serves.
#[derive(Debug, Default)]
pub(crate) struct ServedStats {
    pub(crate) in_flight: AtomicU64,
    pub(crate) total: AtomicU64,
}

impl ServedStats {
    /// Counts one served call until the returned guard drops, however the call ends.
    pub(crate) fn enter(&self) -> ServedGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
        ServedGuard(self)
    }
}

/// Decrements the in-flight count of served calls when dropped.
pub(crate) struct ServedGuard<'a>(&'a ServedStats);

impl Drop for ServedGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_aborts_a_running_call_or_skips_one_not_started() {
        let table = CallTable::default();
        let (abort, registration) = AbortHandle::new_pair();
        let running = table.running(7, abort).expect("not cancelled");
        assert!(table.cancel(7), "it was running");
        assert!(registration.handle().is_aborted());
        drop(running);
        // Cancelled before it arrived: it must not run, once.
        assert!(!table.cancel(9));
        assert!(table.running(9, AbortHandle::new_pair().0).is_none());
        assert!(table.running(9, AbortHandle::new_pair().0).is_some());
        // Ended: a late cancellation finds nothing running.
        let running = table.running(11, AbortHandle::new_pair().0);
        drop(running);
        assert!(!table.cancel(11));
    }

    #[test]
    fn cancellations_of_calls_not_started_are_kept_up_to_a_bound() {
        let table = CallTable::default();
        let per_shard = (CANCELLED_MAX / CALL_SHARDS) as u64;
        // Ids of one shard, all recent: past the bound a new one is not recorded.
        let shard_ids = |n: u64| n * CALL_SHARDS as u64;
        for n in 0..per_shard {
            assert!(!table.cancel(shard_ids(n)));
        }
        assert!(!table.cancel(shard_ids(per_shard)));
        assert!(
            table
                .running(shard_ids(per_shard), AbortHandle::new_pair().0)
                .is_some(),
            "over the bound: not recorded, so the call runs"
        );
        assert!(table
            .running(shard_ids(0), AbortHandle::new_pair().0)
            .is_none());
        // Other shards are not affected.
        assert!(!table.cancel(1));
        assert!(table.running(1, AbortHandle::new_pair().0).is_none());
    }
}
