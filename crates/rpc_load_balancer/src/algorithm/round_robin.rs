//! RoundRobin: members in turn.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::rotation::next_position;
use super::snapshot_cache::SnapshotCache;
use super::{Explanation, NodeChange, SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Picks members in turn over the sorted member list: one `fetch_add` per pick, so concurrent
/// callers never read the same position twice (the original's increment-then-read could).
///
/// Source: the original's RoundRobin; the classic round-robin scheduler (LVS's `rr`).
///
/// Each selector starts at a random offset (the trick of the cratis_chronicle client), so a
/// fleet of callers does not all hit the first member together. Because members are sorted by
/// node name, the rotation is the same list on every node; a membership change shifts the
/// position once, as in the original. Any `len` consecutive picks over `len` members hold each
/// member once, also across the position counter's wrap.
///
/// One instance may serve several balancers: each has its own position, so every balancer
/// cycles all its members however the calls interleave (up to 8 balancers at once; beyond
/// that, an evicted balancer shares one position until its next membership change).
#[derive(Debug)]
pub struct RoundRobin {
    /// A balancer's first position, and the position of selections over lists that are no
    /// snapshot.
    next: AtomicUsize,
    /// Each balancer's position, carried from snapshot to snapshot.
    positions: SnapshotCache<AtomicUsize>,
}

impl RoundRobin {
    /// Round robin from a random starting position (a random `u32`, modulo the member count).
    pub fn new() -> Self {
        Self::starting_at(rand::random::<u32>() as usize)
    }

    /// Round robin whose first pick is position `offset` (modulo the member count); for tests.
    pub fn starting_at(offset: usize) -> Self {
        Self {
            next: AtomicUsize::new(offset),
            positions: SnapshotCache::default(),
        }
    }
}

impl Default for RoundRobin {
    fn default() -> Self {
        Self::new()
    }
}

impl SelectionAlgorithm for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn explain(
        &self,
        members: &[Member],
        chosen: usize,
        _request: &SelectionRequest<'_>,
    ) -> Explanation {
        Explanation {
            rule: format!(
                "round robin: position {chosen} of {} in node-name order",
                members.len()
            ),
            scores: Vec::new(),
        }
    }

    fn on_node_change(&self, change: &NodeChange<'_>) {
        let next = self
            .positions
            .latest(change.balancer, |next| next.load(Ordering::Relaxed))
            .unwrap_or_else(|| self.next.load(Ordering::Relaxed));
        self.positions
            .store(change.balancer, change.version, AtomicUsize::new(next));
    }

    fn choose_from_nodes(
        &self,
        members: &[Member],
        request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        if members.is_empty() {
            // A balancer never asks with no members; a direct caller gets an error, not a panic.
            return Err(Error::NoMembers {
                balancer: request.balancer.to_string(),
            });
        }
        // In turn across the counter's wrap too (see `rotation`).
        Ok(self.positions.with(request.version, |cached| {
            next_position(cached.unwrap_or(&self.next), members.len())
        }))
    }
}
