//! The directory's side of the digest exchange (`gossip.rs`; Scuttlebutt-style
//! anti-entropy, van Renesse et al., LADIS 2008): this node's directory as a digest, a peer's
//! digest reconciled against it, a peer's beats taken, and whole entries looked up by name.
//!
//! A digest item carries a node's `(incarnation, counter)` and the hash of its entry's
//! content ([`DirectoryEntry::content_hash`]). Two directories holding a node "alike" (same
//! run, same content hash) differ only by its counter, which an item says in full: the
//! newer counter is taken and the entry counts as advanced, as a merged whole entry would
//! ([`Directory::merge`]). Anything else — a node one side lacks, or holds in another run or
//! content — goes as a whole entry and through [`Directory::merge`], so the bounds and the
//! failure detection stay those of the module above.

use std::collections::HashSet;
use std::time::Instant;

use super::{is_valid_name, Directory};
use crate::control::{DigestItem, DirectoryEntry, MAX_DIRECTORY_ENTRIES};

/// What a peer's digest leads this node to answer (the fields of
/// [`ControlReply::GossipDelta`](crate::control::ControlReply::GossipDelta)).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    /// Whole entries the peer lacks, or holds in an older run or with other content.
    pub(crate) entries: Vec<DirectoryEntry>,
    /// Newer counters of entries the peer holds alike.
    pub(crate) beats: Vec<DigestItem>,
    /// Nodes whose whole entries this node wants from the peer.
    pub(crate) wants: Vec<String>,
}

/// Whether `held` and `item` are the same node's entry in the same run with the same content.
fn alike(held: &DirectoryEntry, item: &DigestItem) -> bool {
    held.incarnation == item.incarnation && held.content_hash() == item.content
}

impl Directory {
    /// This node's directory in digest form: its own entry's item first, then the others'
    /// (in no particular order).
    pub(crate) fn digest(&self) -> Vec<DigestItem> {
        let state = self.lock();
        let mut items = Vec::with_capacity(state.others.len() + 1);
        items.push(DigestItem::of(&state.own));
        items.extend(state.others.values().map(|(e, _)| DigestItem::of(e)));
        items
    }

    /// Reconciles a peer's `digest` (its first [`MAX_DIRECTORY_ENTRIES`] items) at `now`:
    /// takes the newer counters of the entries held alike, and answers with the entries the
    /// peer lacks or holds older in another run or content, the beats of those it holds
    /// alike but older, and the nodes it holds newer in a run or content this node does not
    /// hold (and may take: not a node seen going down with no newer word, nor an invalid
    /// name). Counters taken do not change the directory's shape.
    pub(crate) fn reconcile(&self, digest: Vec<DigestItem>, now: Instant) -> Delta {
        let mut state = self.lock();
        let state = &mut *state;
        let mut delta = Delta::default();
        let mut seen: HashSet<String> =
            HashSet::with_capacity(digest.len().min(MAX_DIRECTORY_ENTRIES));
        for item in digest.into_iter().take(MAX_DIRECTORY_ENTRIES) {
            let word = (item.incarnation, item.counter);
            if item.node == state.own.node {
                // Nobody speaks for this node but itself: only its newer word goes back.
                if (state.own.incarnation, state.own.counter) > word {
                    if alike(&state.own, &item) {
                        delta.beats.push(DigestItem::of(&state.own));
                    } else {
                        delta.entries.push(state.own.clone());
                    }
                }
            } else if let Some((held, advanced)) = state.others.get_mut(&item.node) {
                let held_word = (held.incarnation, held.counter);
                if word > held_word {
                    if alike(held, &item) {
                        held.counter = item.counter;
                        *advanced = now;
                    } else {
                        delta.wants.push(item.node.clone());
                    }
                } else if held_word > word {
                    if alike(held, &item) {
                        delta.beats.push(DigestItem::of(held));
                    } else {
                        delta.entries.push(held.clone());
                    }
                }
            } else {
                let blocked = state
                    .down
                    .get(&item.node)
                    .is_some_and(|(held, _)| word <= *held);
                if !blocked && is_valid_name(&item.node) {
                    delta.wants.push(item.node.clone());
                }
            }
            seen.insert(item.node);
        }
        if !seen.contains(&state.own.node) {
            delta.entries.push(state.own.clone());
        }
        delta.entries.extend(
            state
                .others
                .iter()
                .filter(|(node, _)| !seen.contains(*node))
                .map(|(_, (e, _))| e.clone()),
        );
        delta
    }

    /// Takes a peer's `beats` (the first [`MAX_DIRECTORY_ENTRIES`]) at `now`: the newer
    /// counter of each entry held alike. Beats of entries not held, or held in another run
    /// or content, are ignored (the whole entry comes as such).
    pub(crate) fn take_beats(&self, beats: Vec<DigestItem>, now: Instant) {
        let mut state = self.lock();
        for item in beats.into_iter().take(MAX_DIRECTORY_ENTRIES) {
            if let Some((held, advanced)) = state.others.get_mut(&item.node) {
                if alike(held, &item) && item.counter > held.counter {
                    held.counter = item.counter;
                    *advanced = now;
                }
            }
        }
    }

    /// The whole entries of those of `nodes` held (this node's own included), in the order
    /// asked; at most [`MAX_DIRECTORY_ENTRIES`].
    pub(crate) fn entries_of(&self, nodes: &[String]) -> Vec<DirectoryEntry> {
        let state = self.lock();
        nodes
            .iter()
            .filter_map(|node| {
                if *node == state.own.node {
                    Some(state.own.clone())
                } else {
                    state.others.get(node).map(|(e, _)| e.clone())
                }
            })
            .take(MAX_DIRECTORY_ENTRIES)
            .collect()
    }
}

#[cfg(test)]
mod tests;
