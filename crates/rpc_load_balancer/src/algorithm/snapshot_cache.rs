//! What an algorithm derives from a members snapshot (a ring, a weighted cycle, cache slots),
//! cached once per membership change and read lock-free by every selection — one entry per
//! balancer, so an algorithm instance shared by several balancers keeps each one's.
//!
//! Entries live in a small fixed array of [`arc_swap`] slots keyed by the snapshot's
//! [`version`](crate::Members::version) (unique in the process, so two balancers' entries never
//! mix). A selection scans the filled slots (a few lock-free loads, no reference count
//! written, no allocation); [`SnapshotCache::store`] — called from `on_node_change` — replaces
//! the balancer's own entry, else takes a free slot, else evicts the slots in turn. With more
//! than [`SLOTS`] balancers on one instance, an evicted balancer's selections derive what they
//! need on the spot (correct, but slower and allocating) until its next membership change.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use super::SelectionRequest;

/// Balancers one instance caches for at once.
pub(crate) const SLOTS: usize = 8;

/// Per-balancer entries of `T`, one per balancer's latest snapshot.
pub(crate) struct SnapshotCache<T> {
    /// Filled in order (a slot is taken only after every earlier one is) and never emptied.
    slots: [ArcSwapOption<Entry<T>>; SLOTS],
    /// The next slot to evict when every slot is taken.
    evict: AtomicUsize,
}

struct Entry<T> {
    balancer: Box<str>,
    version: u64,
    value: T,
}

impl<T> Default for SnapshotCache<T> {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| ArcSwapOption::empty()),
            evict: AtomicUsize::new(0),
        }
    }
}

impl<T> std::fmt::Debug for SnapshotCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let balancers: Vec<String> = self
            .slots
            .iter()
            .filter_map(|slot| slot.load().as_ref().map(|e| e.balancer.to_string()))
            .collect();
        f.debug_struct("SnapshotCache")
            .field("balancers", &balancers)
            .finish()
    }
}

impl<T> SnapshotCache<T> {
    /// Runs `f` on the value cached for snapshot `version`, or on `None` when there is none
    /// (never for [`SelectionRequest::UNCACHED`]). Lock-free and allocation-free.
    #[inline]
    pub(crate) fn with<R>(&self, version: u64, f: impl FnOnce(Option<&T>) -> R) -> R {
        if version != SelectionRequest::UNCACHED {
            for slot in &self.slots {
                let entry = slot.load();
                match entry.as_deref() {
                    Some(entry) if entry.version == version => return f(Some(&entry.value)),
                    Some(_) => {}
                    // Slots fill in order: nothing after a free one.
                    None => break,
                }
            }
        }
        f(None)
    }

    /// Runs `f` on `balancer`'s latest entry, if it has one (e.g. to carry a position over to
    /// its next snapshot).
    pub(crate) fn latest<R>(&self, balancer: &str, f: impl FnOnce(&T) -> R) -> Option<R> {
        for slot in &self.slots {
            let entry = slot.load();
            if let Some(entry) = entry.as_deref() {
                if *entry.balancer == *balancer {
                    return Some(f(&entry.value));
                }
            }
        }
        None
    }

    /// Caches `value` for `balancer`'s snapshot `version`, replacing that balancer's previous
    /// entry, else in a free slot, else over the next slot in turn.
    pub(crate) fn store(&self, balancer: &str, version: u64, value: T) {
        let entry = Arc::new(Entry {
            balancer: balancer.into(),
            version,
            value,
        });
        'retry: loop {
            for slot in &self.slots {
                let current = slot.load();
                let replace = match current.as_deref() {
                    Some(taken) => *taken.balancer == *balancer,
                    None => true,
                };
                if !replace {
                    continue;
                }
                // Another balancer may take the free slot (or evict this one) meanwhile.
                let previous = slot.compare_and_swap(&current, Some(Arc::clone(&entry)));
                if same(&previous, &current) {
                    return;
                }
                continue 'retry;
            }
            let victim = self.evict.fetch_add(1, Ordering::Relaxed) % SLOTS;
            self.slots[victim].store(Some(entry));
            return;
        }
    }
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(cache: &SnapshotCache<u32>, version: u64) -> Option<u32> {
        cache.with(version, |v| v.copied())
    }

    #[test]
    fn keeps_one_entry_per_balancer() {
        let cache = SnapshotCache::default();
        cache.store("x", 1, 10);
        cache.store("y", 2, 20);
        assert_eq!((cached(&cache, 1), cached(&cache, 2)), (Some(10), Some(20)));
        // x's next snapshot replaces x's entry only.
        cache.store("x", 3, 30);
        assert_eq!(cached(&cache, 1), None);
        assert_eq!((cached(&cache, 3), cached(&cache, 2)), (Some(30), Some(20)));
        assert_eq!(cache.latest("x", |v| *v), Some(30));
        assert_eq!(cache.latest("z", |v| *v), None);
        assert_eq!(cached(&cache, SelectionRequest::UNCACHED), None);
    }

    #[test]
    fn more_balancers_than_slots_evict_in_turn() {
        let cache = SnapshotCache::default();
        for i in 0..SLOTS as u64 {
            cache.store(&format!("b{i}"), i, i as u32);
        }
        assert!((0..SLOTS as u64).all(|i| cached(&cache, i) == Some(i as u32)));
        cache.store("late", 100, 100);
        assert_eq!(cached(&cache, 100), Some(100));
        assert_eq!(cached(&cache, 0), None, "the first slot was evicted");
        assert!((1..SLOTS as u64).all(|i| cached(&cache, i) == Some(i as u32)));
    }

    #[test]
    fn concurrent_stores_of_different_balancers_all_land() {
        let cache = SnapshotCache::default();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let cache = &cache;
                s.spawn(move || {
                    for round in 0..200u64 {
                        cache.store(
                            &format!("b{t}"),
                            t * 1000 + round,
                            (t * 1000 + round) as u32,
                        );
                    }
                });
            }
        });
        for t in 0..4u64 {
            assert_eq!(
                cached(&cache, t * 1000 + 199),
                Some((t * 1000 + 199) as u32)
            );
        }
        let filled = cache.slots.iter().filter(|s| s.load().is_some()).count();
        assert_eq!(filled, 4, "one slot per balancer: {cache:?}");
    }
}
