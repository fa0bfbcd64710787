//! The node directory of a sparse mesh: what this node knows of every node of the cluster,
//! connected or not — name → where to dial it, its incarnation, the balancers it is a member
//! of and those it calls with subsetting, and its heartbeat counter.
//!
//! In a full mesh every node sees every other through its sessions; in the sparse mesh
//! ([`NodeConfig::sparse_mesh`](crate::NodeConfig::sparse_mesh)) a node is connected to a few,
//! so the member list and the caller list a subsetting balancer needs (issue 21) come from
//! here instead. Nodes reconcile their directories with connected peers (digests, then only
//! the newer counters and the new or changed entries: `gossip.rs`, `directory/anti_entropy.rs`)
//! and merge entries by `(incarnation, counter)`. Failure detection is
//! gossip-style (van Renesse, Minsky and Hayden, "A Gossip-Style Failure Detection Service",
//! Middleware 1998): each node bumps its own counter once per period, and an entry whose
//! counter has not advanced for [`ENTRY_TTL`] is dropped. A node this one saw go down while it
//! wanted it (`Directory::peer_down`) is dropped at once. Either way its word is taken again
//! only when newer than what was held (a live node's counter moves on), for [`DOWN_KEPT`].
//!
//! Bounded whatever peers send: at most [`MAX_DIRECTORY_ENTRIES`] entries (a new name past
//! that is not taken), names and addresses of at most [`MAX_NAME_BYTES`], at most
//! [`MAX_ENTRY_BALANCERS`] balancer names of at most [`MAX_NAME_BYTES`] per list (the
//! decode keeps no more: `control::directory_entry`). Entries that break these are skipped.
//! And at most [`MAX_DIRECTORY_BYTES`] encoded in all, its own entry included (counted by
//! [`DirectoryEntry::encoded_bound`]): a new or grown entry that would pass it is not taken,
//! so this node's exchanges and replies stay far below the session's frame limit whatever
//! peers pad their entries with.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::control::{
    DirectoryEntry, MAX_DIRECTORY_BYTES, MAX_DIRECTORY_ENTRIES, MAX_ENTRY_BALANCERS,
};

/// How long an entry whose counter does not advance is kept: 15 exchange periods.
pub(crate) const ENTRY_TTL: Duration = Duration::from_secs(15);

/// How long a node seen going down, or dropped for silence, is ignored unless its word is
/// newer: twice [`ENTRY_TTL`], so that every peer that still relays its last word has dropped
/// it by then (each drops it [`ENTRY_TTL`] after the word reached it, and words travel the
/// mesh in a few periods). After van Renesse et al.'s `T_cleanup = 2 T_fail`.
pub(crate) const DOWN_KEPT: Duration = Duration::from_secs(30);

/// The longest node name, address or balancer name an entry may carry (bytes).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// A node's directory (see the module docs).
pub(crate) struct Directory {
    state: Mutex<State>,
    /// Bumped whenever the directory's shape changes: an entry joins or leaves, or changes its
    /// address or balancer lists (not on counter bumps). Subsetting balancers watch it.
    shape: watch::Sender<u64>,
}

struct State {
    /// This node's own entry.
    own: DirectoryEntry,
    /// The other nodes' entries, by name, with when each last advanced.
    others: HashMap<String, (DirectoryEntry, Instant)>,
    /// Nodes dropped after they went down: the `(incarnation, counter)` held then, and when.
    down: HashMap<String, ((u64, u64), Instant)>,
}

impl Directory {
    /// The directory of the node `name` advertising `addr`, in its run `incarnation`.
    pub(crate) fn new(name: &str, addr: &str, incarnation: u64) -> Self {
        Self {
            state: Mutex::new(State {
                own: DirectoryEntry {
                    node: name.to_string(),
                    addr: addr.to_string(),
                    incarnation,
                    counter: 0,
                    serves: Vec::new(),
                    calls: Vec::new(),
                },
                others: HashMap::new(),
                down: HashMap::new(),
            }),
            shape: watch::channel(0).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self) {
        self.shape.send_modify(|v| *v += 1);
    }

    /// A receiver that sees each change of the directory's shape.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.shape.subscribe()
    }

    /// Sets the balancers this node is a member of and those it calls with subsetting (each
    /// sorted and deduplicated here).
    pub(crate) fn set_own_roles(&self, mut serves: Vec<String>, mut calls: Vec<String>) {
        for list in [&mut serves, &mut calls] {
            list.sort();
            list.dedup();
            list.truncate(MAX_ENTRY_BALANCERS);
        }
        let mut state = self.lock();
        if state.own.serves == serves && state.own.calls == calls {
            return;
        }
        state.own.serves = serves;
        state.own.calls = calls;
        drop(state);
        self.changed();
    }

    /// One exchange period has passed at `now`: bumps this node's counter and drops the
    /// entries that have not advanced for [`ENTRY_TTL`] (and the records of nodes seen down
    /// [`DOWN_KEPT`] ago).
    pub(crate) fn tick(&self, now: Instant) {
        let mut state = self.lock();
        state.own.counter += 1;
        state
            .down
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < DOWN_KEPT);
        let expired: Vec<String> = state
            .others
            .iter()
            .filter(|(_, (_, advanced))| now.saturating_duration_since(*advanced) >= ENTRY_TTL)
            .map(|(node, _)| node.clone())
            .collect();
        // Remembered as down: a peer that dropped it later still relays its last word for a
        // while, which must not bring it back (nor ping-pong it between two nodes for ever).
        for node in &expired {
            if let Some((held, _)) = state.others.remove(node) {
                let word = (held.incarnation, held.counter);
                state.down.insert(node.clone(), (word, now));
            }
        }
        let dropped = !expired.is_empty();
        drop(state);
        if dropped {
            self.changed();
        }
    }

    /// Merges a peer's entries at `now`: an entry is taken when it is valid, not this node's,
    /// and newer by `(incarnation, counter)` than the one held (and than the word held when
    /// the node was seen going down); a new name only while fewer than
    /// [`MAX_DIRECTORY_ENTRIES`] are held; and a new or grown entry only while the held
    /// directory stays within [`MAX_DIRECTORY_BYTES`].
    pub(crate) fn merge(&self, entries: Vec<DirectoryEntry>, now: Instant) {
        let mut state = self.lock();
        let mut changed = false;
        let mut bytes = state.own.encoded_bound()
            + state
                .others
                .values()
                .map(|(e, _)| e.encoded_bound())
                .sum::<usize>();
        for entry in entries.into_iter().take(MAX_DIRECTORY_ENTRIES) {
            if entry.node == state.own.node || !is_valid(&entry) {
                continue;
            }
            let word = (entry.incarnation, entry.counter);
            if state
                .down
                .get(&entry.node)
                .is_some_and(|(held, _)| word <= *held)
            {
                continue;
            }
            let room = state.others.len() + 1 < MAX_DIRECTORY_ENTRIES;
            match state.others.get_mut(&entry.node) {
                Some((held, advanced)) => {
                    if word <= (held.incarnation, held.counter) {
                        continue;
                    }
                    let after = bytes - held.encoded_bound() + entry.encoded_bound();
                    if after > MAX_DIRECTORY_BYTES && after > bytes {
                        continue;
                    }
                    bytes = after;
                    changed |= held.addr != entry.addr
                        || held.serves != entry.serves
                        || held.calls != entry.calls;
                    *held = entry;
                    *advanced = now;
                }
                None if room && bytes + entry.encoded_bound() <= MAX_DIRECTORY_BYTES => {
                    bytes += entry.encoded_bound();
                    state.down.remove(&entry.node);
                    state.others.insert(entry.node.clone(), (entry, now));
                    changed = true;
                }
                None => {}
            }
        }
        drop(state);
        if changed {
            self.changed();
        }
    }

    /// `node` went down while this node wanted it (its session closed): its entry is dropped
    /// now, not after [`ENTRY_TTL`], and its word is taken again only when newer.
    pub(crate) fn peer_down(&self, node: &str, now: Instant) {
        let mut state = self.lock();
        let Some((held, _)) = state.others.remove(node) else {
            return;
        };
        state
            .down
            .insert(node.to_string(), ((held.incarnation, held.counter), now));
        drop(state);
        self.changed();
    }

    /// Every entry: this node's first, then the others sorted by node.
    pub(crate) fn entries(&self) -> Vec<DirectoryEntry> {
        let state = self.lock();
        let mut others: Vec<&DirectoryEntry> = state.others.values().map(|(e, _)| e).collect();
        others.sort_by(|a, b| a.node.cmp(&b.node));
        std::iter::once(&state.own).chain(others).cloned().collect()
    }

    /// The nodes (this one included) that are members of `balancer`, sorted by name.
    pub(crate) fn serving(&self, balancer: &str) -> Vec<String> {
        self.nodes_where(|e| e.serves.iter().any(|b| b == balancer))
    }

    /// The nodes (this one included) that call `balancer` with subsetting, sorted by name.
    pub(crate) fn calling(&self, balancer: &str) -> Vec<String> {
        self.nodes_where(|e| e.calls.iter().any(|b| b == balancer))
    }

    fn nodes_where(&self, keep: impl Fn(&DirectoryEntry) -> bool) -> Vec<String> {
        let state = self.lock();
        let mut nodes: Vec<String> = std::iter::once(&state.own)
            .chain(state.others.values().map(|(e, _)| e))
            .filter(|e| keep(e))
            .map(|e| e.node.clone())
            .collect();
        nodes.sort();
        nodes
    }

    /// Whether `node`'s entry says it calls, with subsetting, a balancer this node is a
    /// member of (so it may want this node in its subset).
    pub(crate) fn calls_a_balancer_served_here(&self, node: &str) -> bool {
        let state = self.lock();
        state
            .others
            .get(node)
            .is_some_and(|(e, _)| e.calls.iter().any(|b| state.own.serves.contains(b)))
    }

    /// The address `node` advertises, if its entry is held.
    pub(crate) fn addr_of(&self, node: &str) -> Option<String> {
        self.lock().others.get(node).map(|(e, _)| e.addr.clone())
    }

    /// How many entries are held, this node's included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().others.len() + 1
    }
}

/// Whether an entry keeps the bounds: non-empty name and address and balancer names within
/// [`MAX_NAME_BYTES`], at most [`MAX_ENTRY_BALANCERS`] per list.
fn is_valid(entry: &DirectoryEntry) -> bool {
    is_valid_name(&entry.node)
        && is_valid_name(&entry.addr)
        && [&entry.serves, &entry.calls]
            .iter()
            .all(|list| list.len() <= MAX_ENTRY_BALANCERS && list.iter().all(|b| is_valid_name(b)))
}

/// Whether a node name, address or balancer name is non-empty and within [`MAX_NAME_BYTES`].
fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES
}

mod anti_entropy;

#[cfg(test)]
mod tests;
