//! WeightedRoundRobin: members in turn, each as often as its weight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::rotation::{next_position, next_position_in, Modulus};
use crate::routing::{
    Algorithm, BuildContext, Change, Derived, Explanation, MemberView, Request, Selector,
};
use crate::Error;

/// Picks members in a fixed cycle in which each appears as often as its weight: with weights
/// a = 3, b = 1, every 4 consecutive picks are 3 × a and 1 × b, interleaved (a, a, b, a — the
/// smooth weighted round robin of nginx, so a heavy member is not hit in a burst). One
/// `fetch_add` per pick over a cycle built once per membership change; any window of
/// `sum of weights` consecutive picks holds each member its weight times, also across the
/// position counter's wrap.
///
/// Weights are by node full name (`u32`, at most [`WeightedRoundRobin::MAX_WEIGHT`]); nodes
/// without one weigh [`default_weight`](Self::default_weight) (1); weight 0 removes a node from
/// the cycle. Errors: [`Balancer::start`](crate::Balancer::start) refuses invalid options with
/// [`Error::InvalidConfig`] naming `weights` or `default_weight`; when every current member
/// weighs 0, selection fails with [`Error::NoEligibleMembers`].
///
/// One instance may configure several balancers: each balancer's selector keeps its own cycle
/// and position.
#[derive(Debug, Clone)]
pub struct WeightedRoundRobin {
    weights: HashMap<String, u32>,
    default_weight: u32,
    /// The first position of a selector's cycle; `None` = random per selector.
    start: Option<usize>,
}

/// One balancer's [`WeightedRoundRobin`]. The cycle of each member list travels with that
/// list ([`Selector::derive`]), so a pick reads it from its request.
#[derive(Debug)]
struct WeightedRoundRobinSelector {
    weights: WeightedRoundRobin,
    /// The position of selections over lists that are no published list.
    next: AtomicUsize,
    /// The latest list's cycle (its position carries over to the next list's); written and
    /// read by the single writer of member changes only, never by a pick.
    latest: Mutex<Option<Arc<Cycle>>>,
}

/// One balancer's cycle over one member list: member indices, and the next position.
#[derive(Debug)]
struct Cycle {
    slots: Vec<u32>,
    /// `slots.len()`, for a position without a division.
    modulus: Modulus,
    next: AtomicUsize,
}

impl Default for WeightedRoundRobin {
    fn default() -> Self {
        Self::new()
    }
}

impl WeightedRoundRobin {
    /// Largest weight one node may have.
    pub const MAX_WEIGHT: u32 = 1000;

    /// Every node weighs 1 until [`weight`](Self::weight) says otherwise (plain round robin).
    pub fn new() -> Self {
        Self {
            weights: HashMap::new(),
            default_weight: 1,
            start: None,
        }
    }

    /// `node` (full name, e.g. `worker_a@10.0.0.5`) weighs `weight` (0 ..= [`Self::MAX_WEIGHT`];
    /// 0 takes it out of the cycle). Nodes that are not members are ignored.
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `weights` when a node is not a full name (`name@host`)
    /// or a weight is above [`Self::MAX_WEIGHT`].
    ///
    /// ```
    /// use rpc_load_balancer::routing::{Algorithm, BuildContext};
    /// use rpc_load_balancer::{Error, WeightedRoundRobin};
    ///
    /// let weighted = WeightedRoundRobin::new().weight("worker_a@10.0.0.5", 3);
    /// assert!(weighted.build(&BuildContext::new("jobs")).is_ok());
    /// let short_name = WeightedRoundRobin::new().weight("worker_a", 3);
    /// assert!(matches!(
    ///     short_name.build(&BuildContext::new("jobs")),
    ///     Err(Error::InvalidConfig { option: "weights", .. })
    /// ));
    /// ```
    pub fn weight(mut self, node: impl Into<String>, weight: u32) -> Self {
        self.weights.insert(node.into(), weight);
        self
    }

    /// The weight of nodes not named with [`weight`](Self::weight) (default 1; 0 = only named
    /// nodes serve).
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `default_weight` when it is above [`Self::MAX_WEIGHT`].
    pub fn default_weight(mut self, weight: u32) -> Self {
        self.default_weight = weight;
        self
    }

    /// The cycle starts at position `offset` (default random per selector); for tests.
    pub fn starting_at(mut self, offset: usize) -> Self {
        self.start = Some(offset);
        self
    }

    fn weight_of(&self, node: &str) -> u32 {
        self.weights
            .get(node)
            .copied()
            .unwrap_or(self.default_weight)
    }

    /// The smooth weighted cycle over `members`: each index appears `weight / gcd` times.
    fn cycle(&self, members: &[MemberView]) -> Vec<u32> {
        let weights: Vec<u64> = members
            .iter()
            .map(|m| u64::from(self.weight_of(m.node())))
            .collect();
        let gcd = weights.iter().copied().filter(|w| *w > 0).fold(0, gcd);
        if gcd == 0 {
            return Vec::new();
        }
        let weights: Vec<i64> = weights.iter().map(|w| (w / gcd) as i64).collect();
        let total: i64 = weights.iter().sum();
        let mut current = vec![0i64; weights.len()];
        let mut slots = Vec::with_capacity(total as usize);
        for _ in 0..total {
            let mut best = 0;
            for i in 0..weights.len() {
                current[i] += weights[i];
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total;
            slots.push(best as u32);
        }
        slots
    }
}

/// The member at the next position of `slots`.
///
/// Errors: [`Error::NoEligibleMembers`] when the cycle is empty (every member weighs 0).
#[inline]
fn pick(slots: &[u32], next: &AtomicUsize, request: &Request<'_>) -> Result<usize, Error> {
    if slots.is_empty() {
        return Err(no_weight(request));
    }
    Ok(slots[next_position(next, slots.len())] as usize)
}

/// A pick from a cycle derived for the snapshot (the position without a division).
#[inline]
fn pick_in(cycle: &Cycle, request: &Request<'_>) -> Result<usize, Error> {
    if cycle.slots.is_empty() {
        return Err(no_weight(request));
    }
    Ok(cycle.slots[next_position_in(&cycle.next, &cycle.modulus)] as usize)
}

#[cold]
fn no_weight(request: &Request<'_>) -> Error {
    Error::NoEligibleMembers {
        balancer: request.balancer.to_string(),
        reason: "every member weighs 0".into(),
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Algorithm for WeightedRoundRobin {
    fn name(&self) -> &'static str {
        "weighted_round_robin"
    }

    /// Errors: [`Error::InvalidConfig`] naming `weights` or `default_weight`.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.validate()?;
        Ok(Box::new(WeightedRoundRobinSelector {
            weights: self.clone(),
            next: AtomicUsize::new(super::round_robin::first_position(self.start, context)),
            latest: Mutex::new(None),
        }))
    }
}

impl WeightedRoundRobin {
    /// Checks the options. Errors: [`Error::InvalidConfig`] naming `weights` or
    /// `default_weight`.
    fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| {
            Err(Error::InvalidConfig {
                option: "weights",
                reason,
            })
        };
        if self.default_weight > Self::MAX_WEIGHT {
            return Err(Error::InvalidConfig {
                option: "default_weight",
                reason: format!(
                    "{} is over the maximum weight {}",
                    self.default_weight,
                    Self::MAX_WEIGHT
                ),
            });
        }
        for (node, weight) in &self.weights {
            let full = node
                .split_once('@')
                .is_some_and(|(name, host)| !name.is_empty() && !host.is_empty());
            if !full {
                return invalid(format!("{node:?} is not a full node name (name@host)"));
            }
            if *weight > Self::MAX_WEIGHT {
                return invalid(format!(
                    "{node}: {weight} is over the maximum weight {}",
                    Self::MAX_WEIGHT
                ));
            }
        }
        Ok(())
    }
}

impl Selector for WeightedRoundRobinSelector {
    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        // Only the writer of member changes comes here: the lock is never contended, and a
        // panic while it was held leaves a value that is still whole.
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        // The position carries over to the new cycle.
        let next = latest.as_ref().map_or_else(
            || self.next.load(Ordering::Relaxed),
            |cycle| cycle.next.load(Ordering::Relaxed),
        );
        let slots = self.weights.cycle(change.members);
        let cycle = Arc::new(Cycle {
            modulus: Modulus::new(slots.len().max(1)),
            slots,
            next: AtomicUsize::new(next),
        });
        *latest = Some(Arc::clone(&cycle));
        Some(cycle)
    }

    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        match request.derived_as::<Cycle>() {
            Some(cycle) => pick_in(cycle, request),
            None => pick(&self.weights.cycle(members), &self.next, request),
        }
    }

    fn explain(
        &self,
        members: &[MemberView],
        _chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        Explanation {
            rule: "smooth weighted round robin".into(),
            scores: members
                .iter()
                .map(|m| {
                    let weight = self.weights.weight_of(m.node());
                    (m.node().to_string(), f64::from(weight))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
