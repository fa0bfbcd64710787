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
///
/// A re-selection (a retry, or a re-send of a call refused unrun, among the members the call
/// has not tried; a hedge's member) goes in turn on a second position of the selector's own:
/// the first picks keep their rotation, and re-picks spread evenly over the members left.
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
        let first = first_position(self.start, context);
        Ok(Box::new(RoundRobinSelector {
            next: AtomicUsize::new(first),
            again: AtomicUsize::new(first),
        }))
    }
}

/// One balancer's [`RoundRobin`]: its position, carried across member lists, and the
/// position of its re-selections.
#[derive(Debug)]
struct RoundRobinSelector {
    next: AtomicUsize,
    /// Re-picks (among the members a call has not tried) take their turn here, not from
    /// `next`: on `next` a re-pick over the shorter list shifted the first picks' rotation
    /// and, with every caller's retries landing on positions correlated with the member that
    /// failed, skewed re-picks toward one member (bench/README.md, "Issue 22: retry budgets").
    again: AtomicUsize,
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

    /// In turn over the members left, on a position of its own: the first picks' rotation is
    /// untouched, and re-picks spread evenly over the members a call has not tried.
    fn repick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if members.is_empty() {
            return Err(Error::NoMembers {
                balancer: request.balancer.to_string(),
            });
        }
        Ok(next_position(&self.again, members.len()))
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
