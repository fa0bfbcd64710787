//! NodeCpuCache: the process-wide CPU reading of every node, keyed by node name.
//!
//! Each node's reading lives in a [`CpuSlot`]: one atomic word packing the CPU (hundredths of
//! a percent) and the local clock time the sample was taken at its source. LeastCpu balancers
//! keep the slots of their members beside each members snapshot, so a selection reads one
//! atomic per member and takes no lock. The map itself (a mutex) is touched only to find or
//! create a node's slot (at membership changes), to store polled readings and for
//! diagnostics. Entries older than 3 × the largest `cpu_cache_ttl` in use are cleared, and
//! dropped once no balancer holds them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use crate::load::clock;
use crate::load::{CpuReading, CpuSlot};

/// The cache: node name → slot, and the `cpu_cache_ttl`s in use (for eviction).
#[derive(Default)]
pub(crate) struct NodeCpuCache {
    slots: Mutex<HashMap<Arc<str>, Arc<CpuSlot>>>,
    /// `cpu_cache_ttl` ms → number of LeastCpu balancers using it.
    ttls: Mutex<BTreeMap<u64, usize>>,
}

/// The process's cache.
pub(crate) fn cache() -> &'static NodeCpuCache {
    static CACHE: OnceLock<NodeCpuCache> = OnceLock::new();
    CACHE.get_or_init(NodeCpuCache::default)
}

impl NodeCpuCache {
    /// `node`'s slot, created empty if there is none.
    pub(crate) fn slot(&self, node: &str) -> Arc<CpuSlot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.get(node) {
            return Arc::clone(slot);
        }
        let slot = Arc::new(CpuSlot::default());
        slots.insert(Arc::from(node), Arc::clone(&slot));
        slot
    }

    /// Stores `node`'s reading: `cpu` %, sampled `age_ms` ago.
    pub(crate) fn store(&self, node: &str, cpu: f64, age_ms: u64) {
        self.slot(node).store(cpu, age_ms, clock::now_ms());
    }

    /// `node`'s reading with its age now, if any.
    pub(crate) fn get(&self, node: &str) -> Option<CpuReading> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(node)?.reading(clock::now_ms())
    }

    /// Every reading held, sorted by node.
    pub(crate) fn all(&self) -> Vec<(String, CpuReading)> {
        let now = clock::now_ms();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<(String, CpuReading)> = slots
            .iter()
            .filter_map(|(node, slot)| Some((node.to_string(), slot.reading(now)?)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Registers a balancer's `cpu_cache_ttl` (ms) as in use.
    pub(crate) fn use_ttl(&self, ttl_ms: u64) {
        let mut ttls = self.ttls.lock().unwrap_or_else(|e| e.into_inner());
        *ttls.entry(ttl_ms).or_default() += 1;
    }

    /// Undoes one [`Self::use_ttl`].
    pub(crate) fn unuse_ttl(&self, ttl_ms: u64) {
        let mut ttls = self.ttls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = ttls.get_mut(&ttl_ms) {
            *count -= 1;
            if *count == 0 {
                ttls.remove(&ttl_ms);
            }
        }
    }

    /// Clears readings older than 3 × the largest TTL in use, and drops the entries of nodes
    /// no balancer holds once their reading is gone. Returns how many readings it cleared.
    pub(crate) fn evict(&self) -> usize {
        self.evict_at(clock::now_ms())
    }

    /// [`Self::evict`] as of `now` (clock ms).
    fn evict_at(&self, now: u64) -> usize {
        let Some(largest) = self
            .ttls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .next_back()
            .copied()
        else {
            return 0;
        };
        let max_age = largest.saturating_mul(3);
        let mut cleared = 0;
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|_, slot| {
            if let Some((_, at)) = slot.load() {
                if now.saturating_sub(at) > max_age {
                    slot.clear();
                    cleared += 1;
                }
            }
            slot.load().is_some() || Arc::strong_count(slot) > 1
        });
        cleared
    }
}

/// Every CPU reading this process holds — its own node's and those its LeastCpu balancers
/// polled — as `(node, reading)` sorted by node, each with its age now (ms since the sample was
/// taken at its source). For diagnostics; selection reads the same values.
pub fn readings() -> Vec<(String, CpuReading)> {
    cache().all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_are_cleared_then_dropped_when_unheld() {
        let cache = NodeCpuCache::default();
        cache.use_ttl(10);
        let held = cache.slot("held@h");
        let now = clock::now_ms() + 10_000;
        held.store(10.0, 1_000, now);
        cache.slot("loose@h").store(20.0, 1_000, now);
        cache.slot("fresh@h").store(30.0, 30, now);
        assert_eq!(
            cache.evict_at(now),
            2,
            "both readings are older than 3 × 10 ms"
        );
        let nodes: Vec<String> = cache.all().into_iter().map(|(n, _)| n).collect();
        assert_eq!(nodes, vec!["fresh@h".to_string()]);
        // The held slot stays in the map (a balancer reads it) and takes new readings.
        cache.store("held@h", 11.0, 0);
        assert_eq!(held.load().map(|(cpu, _)| cpu), Some(11.0));
        cache.unuse_ttl(10);
        held.store(11.0, 1_000, now);
        assert_eq!(cache.evict_at(now), 0, "no TTL in use: nothing is evicted");
    }

    #[test]
    fn eviction_uses_the_largest_ttl_in_use() {
        let cache = NodeCpuCache::default();
        // Two balancers at 1 s and one at 4 s: readings live up to 3 × 4 s = 12 s.
        cache.use_ttl(1_000);
        cache.use_ttl(1_000);
        cache.use_ttl(4_000);
        let now = clock::now_ms() + 100_000;
        cache.slot("young@h").store(10.0, 11_999, now);
        cache.slot("edge@h").store(20.0, 12_000, now);
        cache.slot("old@h").store(30.0, 12_001, now);
        assert_eq!(cache.evict_at(now), 1, "only the reading older than 12 s");
        let nodes: Vec<String> = cache.all().into_iter().map(|(n, _)| n).collect();
        assert_eq!(nodes, ["edge@h", "young@h"], "3 × 1 s is not the limit");
        // The 4 s balancer stops: the limit falls to 3 × 1 s (one 1 s balancer still runs).
        cache.unuse_ttl(4_000);
        cache.unuse_ttl(1_000);
        assert_eq!(cache.evict_at(now), 2);
        assert!(cache.all().is_empty());
        cache.slot("recent@h").store(40.0, 3_000, now);
        cache.slot("older@h").store(50.0, 3_001, now);
        assert_eq!(cache.evict_at(now), 1, "3 × 1 s = 3 s is the limit now");
        assert_eq!(cache.all().len(), 1);
    }
}
