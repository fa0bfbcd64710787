//! RoundRobin: members in turn.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Explanation, SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Picks members in turn over the sorted member list: one `fetch_add` per pick, so concurrent
/// callers never read the same position twice (the original's increment-then-read could).
///
/// Each selector starts at a random offset (the trick of the cratis_chronicle client), so a
/// fleet of callers does not all hit the first member together. Because members are sorted by
/// node name, the rotation is the same list on every node; a membership change shifts the
/// position once, as in the original.
#[derive(Debug)]
pub struct RoundRobin {
    next: AtomicUsize,
}

impl RoundRobin {
    /// Round robin from a random starting position.
    pub fn new() -> Self {
        Self::starting_at(rand::random::<u32>() as usize)
    }

    /// Round robin whose first pick is position `offset` (modulo the member count); for tests.
    pub fn starting_at(offset: usize) -> Self {
        Self {
            next: AtomicUsize::new(offset),
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

    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        // Wrapping at usize::MAX skews one cycle by at most one position.
        Ok(self.next.fetch_add(1, Ordering::Relaxed) % members.len())
    }
}
