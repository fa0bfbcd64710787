//! RoundRobin: members in turn.

use std::sync::atomic::AtomicUsize;

use super::rotation::next_position;
use crate::routing::{Algorithm, BuildContext, Explanation, MemberView, Request, Selector};
use crate::Error;

/// Picks members in turn over the sorted member list: one `fetch_add` per pick, so concurrent
/// callers never read the same position twice (the original's increment-then-read could).
///
/// Source: the original's RoundRobin; the classic round-robin scheduler (LVS's `rr`).
///
/// Each balancer's selector starts at a random offset (the trick of the cratis_chronicle
/// client), so a fleet of callers does not all hit the first member together. Because members
/// are sorted by node name, the rotation is the same list on every node; a membership change
/// shifts the position once, as in the original. Any `len` consecutive picks over `len`
/// members hold each member once, also across the position counter's wrap. One instance may
/// configure several balancers: each has its own position.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundRobin {
    /// The first position; `None` = random per selector.
    start: Option<usize>,
}

impl RoundRobin {
    /// Round robin from a random starting position per balancer (a random `u32`, modulo the
    /// member count).
    pub fn new() -> Self {
        Self { start: None }
    }

    /// Round robin whose first pick is position `offset` (modulo the member count); for tests.
    pub fn starting_at(offset: usize) -> Self {
        Self {
            start: Some(offset),
        }
    }
}

/// A selector's first position: `start` if set, else drawn from the context's seed or at
/// random (a `u32`, so the counter starts far from its wrap).
pub(super) fn first_position(start: Option<usize>, context: &BuildContext<'_>) -> usize {
    start.unwrap_or_else(|| context.rng(None).next_u64() as u32 as usize)
}

impl Algorithm for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(RoundRobinSelector {
            next: AtomicUsize::new(first_position(self.start, context)),
        }))
    }
}

/// One balancer's [`RoundRobin`]: its position, carried across member lists.
#[derive(Debug)]
struct RoundRobinSelector {
    next: AtomicUsize,
}

impl Selector for RoundRobinSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if members.is_empty() {
            // A balancer never asks with no members; a direct caller gets an error, not a panic.
            return Err(Error::NoMembers {
                balancer: request.balancer.to_string(),
            });
        }
        // In turn across the counter's wrap too (see `rotation`).
        Ok(next_position(&self.next, members.len()))
    }

    fn explain(
        &self,
        members: &[MemberView],
        chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        Explanation {
            rule: format!(
                "round robin: position {chosen} of {} in node-name order",
                members.len()
            ),
            scores: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
