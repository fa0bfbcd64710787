//! The `metrics` handles of calls and casts, made once per label set and reused.
//!
//! Building a series' key (its name and the `node`, `function`, `type` and `load_balancer`
//! labels) and asking the recorder for it was about a third of the caller's instructions per
//! call (`metrics` hashes a key even for its no-op recorder). So each label set gets one
//! [`RpcHandles`] — the start counter, and the `ok` stop counter and duration histogram — made
//! at its first call and found again by one hash of the labels in a lock-free table.
//!
//! **Which recorder**: a handle set remembers the recorder that was current (thread-local,
//! else global, else none) when it was made, and a call whose current recorder is another one
//! makes the set again. So a recorder installed after the node started (or after its first
//! calls) sees every later call; there is no rule about installing it first for these series.
//!
//! **Bounded**: the table holds at most [`CAPACITY`] label sets (distinct node, function,
//! kind and balancer combinations); past it, a call builds its keys as it goes (the cost of
//! before, nothing kept).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use arc_swap::ArcSwap;
use metrics::{Counter, Histogram, Label, SharedString};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::{RPC_DURATION, RPC_START, RPC_STOP};

/// Most label sets the table keeps.
pub(crate) const CAPACITY: usize = 4096;

/// Shards of the table (a power of two): an insertion copies one shard.
const SHARDS: usize = 16;

/// The recorder calls are recorded with now, by address and size (compared, never read). A
/// recorder that is not zero-sized lives at one address for as long as it is installed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RecorderId(usize, usize);

impl RecorderId {
    /// The recorder `metrics` hands out on this thread now.
    #[inline]
    pub(crate) fn current() -> Self {
        metrics::with_recorder(|recorder| {
            let address = std::ptr::from_ref(recorder).cast::<()>() as usize;
            Self(address, std::mem::size_of_val(recorder))
        })
    }
}

/// The handles of one label set: `node`, `function`, `type` and `load_balancer`.
pub(crate) struct RpcHandles {
    recorder: RecorderId,
    kind: &'static str,
    function: &'static str,
    balancer: SharedString,
    node: Arc<str>,
    start: Counter,
    /// The stop counter and duration of the status `ok`, registered at the first `ok` (so no
    /// empty series shows before it).
    ok: OnceLock<(Counter, Histogram)>,
}

impl RpcHandles {
    fn new(
        recorder: RecorderId,
        kind: &'static str,
        function: &'static str,
        balancer: &SharedString,
        node: Arc<str>,
    ) -> Self {
        let start = metrics::counter!(
            RPC_START,
            "node" => SharedString::from_shared(Arc::clone(&node)),
            "function" => function,
            "type" => kind,
            "load_balancer" => balancer.clone(),
        );
        Self {
            recorder,
            kind,
            function,
            balancer: balancer.clone(),
            node,
            start,
            ok: OnceLock::new(),
        }
    }

    /// Whether these are the handles of this label set.
    #[inline]
    fn labels_are(&self, kind: &str, function: &str, balancer: &str, node: &str) -> bool {
        *self.node == *node
            && self.function == function
            && self.kind == kind
            && *self.balancer == *balancer
    }

    /// The `node` label, shared.
    pub(crate) fn node(&self) -> &Arc<str> {
        &self.node
    }

    /// Counts a start.
    #[inline]
    pub(crate) fn started(&self) {
        self.start.increment(1);
    }

    /// Counts a stop with `status` that took `elapsed_ms`.
    #[inline]
    pub(crate) fn stopped(&self, status: &'static str, elapsed_ms: f64) {
        if status == "ok" {
            let (stop, duration) = self.ok.get_or_init(|| {
                let labels = self.labels("ok");
                (
                    metrics::counter!(RPC_STOP, labels.clone()),
                    metrics::histogram!(RPC_DURATION, labels),
                )
            });
            stop.increment(1);
            duration.record(elapsed_ms);
        } else {
            self.stopped_otherwise(status, elapsed_ms);
        }
    }

    /// A stop with another status than `ok` (an error, or cancelled): keys built here.
    #[cold]
    #[inline(never)]
    fn stopped_otherwise(&self, status: &'static str, elapsed_ms: f64) {
        let labels = self.labels(status);
        metrics::counter!(RPC_STOP, labels.clone()).increment(1);
        metrics::histogram!(RPC_DURATION, labels).record(elapsed_ms);
    }

    /// The stop series' labels, with `status`.
    fn labels(&self, status: &'static str) -> Vec<Label> {
        vec![
            Label::new("node", SharedString::from_shared(Arc::clone(&self.node))),
            Label::new("function", self.function),
            Label::new("type", self.kind),
            Label::new("load_balancer", self.balancer.clone()),
            Label::new("status", status),
        ]
    }
}

/// A map keyed by a hash computed beforehand: the hasher passes it through.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One shard: label sets by hash (a list for the rare hashes two sets share).
type Shard = HashMap<u64, Vec<Arc<RpcHandles>>, BuildHasherDefault<Prehashed>>;

/// Label sets' handles, read lock-free; writers take the shard's lock and publish a copy.
pub(crate) struct Table {
    shards: [ArcSwap<Shard>; SHARDS],
    writers: [Mutex<()>; SHARDS],
    len: AtomicUsize,
    capacity: usize,
}

/// The process's table (the recorder is process-wide too).
static TABLE: LazyLock<Table> = LazyLock::new(|| Table::new(CAPACITY));

/// The hash of a label set.
#[inline]
fn hash(kind: &str, function: &str, balancer: &str, node: &str) -> u64 {
    let kind = kind.len() as u64 | (u64::from(kind.as_bytes().last().copied().unwrap_or(0)) << 8);
    let seed = xxh3_64_with_seed(function.as_bytes(), kind);
    let seed = xxh3_64_with_seed(balancer.as_bytes(), seed);
    xxh3_64_with_seed(node.as_bytes(), seed)
}

/// The handles of a `kind` (`"call"`/`"cast"`) of `function` to `node` (its full name),
/// routed by `balancer` (empty for direct calls), made with the current recorder.
#[inline]
pub(crate) fn handles(
    kind: &'static str,
    function: &'static str,
    balancer: &SharedString,
    node: &str,
) -> Arc<RpcHandles> {
    TABLE.get(kind, function, balancer, node)
}

impl Table {
    /// An empty table that keeps at most `capacity` label sets.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            shards: std::array::from_fn(|_| ArcSwap::default()),
            writers: std::array::from_fn(|_| Mutex::new(())),
            len: AtomicUsize::new(0),
            capacity,
        }
    }

    /// A label set's handles made with the current recorder: found, else made (and kept,
    /// while there is room).
    #[inline]
    pub(crate) fn get(
        &self,
        kind: &'static str,
        function: &'static str,
        balancer: &SharedString,
        node: &str,
    ) -> Arc<RpcHandles> {
        let recorder = RecorderId::current();
        let hash = hash(kind, function, balancer, node);
        let shard = &self.shards[hash as usize % SHARDS];
        if let Some(list) = shard.load().get(&hash) {
            if let Some(found) = list
                .iter()
                .find(|h| h.recorder == recorder && h.labels_are(kind, function, balancer, node))
            {
                return Arc::clone(found);
            }
        }
        self.insert(hash, recorder, kind, function, balancer, node)
    }

    /// Makes a label set's handles and keeps them (replacing ones made with another
    /// recorder), unless the table is full.
    #[cold]
    #[inline(never)]
    fn insert(
        &self,
        hash: u64,
        recorder: RecorderId,
        kind: &'static str,
        function: &'static str,
        balancer: &SharedString,
        node: &str,
    ) -> Arc<RpcHandles> {
        let made = Arc::new(RpcHandles::new(
            recorder,
            kind,
            function,
            balancer,
            Arc::from(node),
        ));
        let index = hash as usize % SHARDS;
        let _writer = self.writers[index]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut shard = Shard::clone(&self.shards[index].load());
        let list = shard.entry(hash).or_default();
        match list
            .iter_mut()
            .find(|h| h.labels_are(kind, function, balancer, node))
        {
            Some(stale) => *stale = Arc::clone(&made),
            None if self.len.load(Ordering::Relaxed) < self.capacity => {
                self.len.fetch_add(1, Ordering::Relaxed);
                list.push(Arc::clone(&made));
            }
            None => return made,
        }
        self.shards[index].store(Arc::new(shard));
        made
    }

    /// How many label sets it keeps.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
