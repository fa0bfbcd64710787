//! The `metrics` handles of calls and casts, made once per label set and reused.
//!
//! Building a series' key (its name and the `node`, `function`, `type` and `load_balancer`
//! labels) and asking the recorder for it was about a third of the caller's instructions per
//! call (`metrics` hashes a key even for its no-op recorder). So each label set gets one
//! [`RpcHandles`] — the start counter, and the `ok` stop counter and duration histogram — made
//! at its first call and found again by one hash of the labels in a lock-free table.
//!
//! **Which recorder**: only handles of a recorder that lives as long as the process are kept:
//! the global one, or none (the no-op recorder). A handle set remembers the recorder that was
//! current when it was made, and a call whose current recorder is another one makes the set
//! again: so a global recorder installed after the node started (or after its first calls)
//! sees every later call. A thread-local recorder (`metrics::with_local_recorder`,
//! `set_default_local_recorder`) may be dropped and a new one made at the same address (a loop
//! in a test), and the handles made with the old one would count into it: while one is current,
//! a call makes its handles anew and keeps none (the cost of before the table).
//!
//! Which recorder a thread with no local one gets ([`static_recorders`]) is not something
//! `metrics` tells; it is learned on a new thread of its own (which has none): at the first
//! call, and when a call finds a recorder it does not know, as long as the global one has not
//! been seen (at most once per [`PROBE_EVERY`]).
//!
//! **Bounded**: the table holds at most [`CAPACITY`] label sets (distinct node, function,
//! kind and balancer combinations); past it, a call builds its keys as it goes (the cost of
//! before, nothing kept).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// The recorders a thread with no thread-local recorder has had: the first one learned (the
/// no-op recorder, or the global one if it was installed before), and a second, other one
/// (the global one, installed later). Neither changes once learned: the global recorder is
/// set once and never dropped, and the no-op one is a static.
static STATIC_RECORDERS: [OnceLock<RecorderId>; 2] = [OnceLock::new(), OnceLock::new()];

/// When the recorder of a thread with no local one was last learned, in ms since
/// [`PROBE_EPOCH`] (0: never).
static LAST_PROBE_MS: AtomicU64 = AtomicU64::new(0);

/// The time [`LAST_PROBE_MS`] counts from.
static PROBE_EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The least time between two probes of the recorder of a thread with no local one.
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(100);

impl RecorderId {
    /// Whether handles made with this recorder may be kept: it is the global or the no-op
    /// recorder, not a thread-local one. Cheap when the answer is known (one or two loads);
    /// else it learns the recorder of a thread with no local one (see [`static_recorders`]).
    #[inline]
    fn lives_forever(self) -> bool {
        let known = || STATIC_RECORDERS.iter().any(|id| id.get() == Some(&self));
        known() || (static_recorders() && known())
    }
}

/// Learns the recorder of a thread with no thread-local one, on a new thread (there is no other
/// way to look past a thread-local recorder), and records it in [`STATIC_RECORDERS`]. Only while
/// the second one is unknown, and at most once per [`PROBE_EVERY`] after the first. Returns
/// whether it learned one (false: none to learn now, or no thread could be started).
#[cold]
#[inline(never)]
fn static_recorders() -> bool {
    if STATIC_RECORDERS[1].get().is_some() {
        return false;
    }
    let now_ms = (PROBE_EPOCH.elapsed().as_millis() as u64).max(1);
    let last = LAST_PROBE_MS.load(Ordering::Relaxed);
    let first = STATIC_RECORDERS[0].get().is_none();
    if !first && now_ms.saturating_sub(last) < PROBE_EVERY.as_millis() as u64 {
        return false;
    }
    if LAST_PROBE_MS
        .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        // Another thread probes now.
        return false;
    }
    let probed = std::thread::Builder::new()
        .name("rpclb-metrics-probe".into())
        .spawn(RecorderId::current)
        .ok()
        .and_then(|probe| probe.join().ok());
    let Some(id) = probed else {
        return false;
    };
    match STATIC_RECORDERS[0].get() {
        None => {
            let _ = STATIC_RECORDERS[0].set(id);
        }
        Some(first) if *first != id => {
            let _ = STATIC_RECORDERS[1].set(id);
        }
        Some(_) => return false,
    }
    true
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
    /// while there is room, unless the recorder is a thread-local one).
    #[inline]
    pub(crate) fn get(
        &self,
        kind: &'static str,
        function: &'static str,
        balancer: &SharedString,
        node: &str,
    ) -> Arc<RpcHandles> {
        let recorder = RecorderId::current();
        if !recorder.lives_forever() {
            // A thread-local recorder: handles made with it now, and not kept.
            return Self::made_for_a_local(recorder, kind, function, balancer, node);
        }
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

    /// A label set's handles made with `recorder`, a thread-local one, not kept.
    #[cold]
    #[inline(never)]
    fn made_for_a_local(
        recorder: RecorderId,
        kind: &'static str,
        function: &'static str,
        balancer: &SharedString,
        node: &str,
    ) -> Arc<RpcHandles> {
        Arc::new(RpcHandles::new(
            recorder,
            kind,
            function,
            balancer,
            Arc::from(node),
        ))
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
