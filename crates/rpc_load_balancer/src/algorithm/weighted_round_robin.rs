//! WeightedRoundRobin: members in turn, each as often as its weight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::rotation::{next_position, next_position_in, Modulus};
use super::stride;
use crate::routing::{
    Algorithm, BuildContext, Change, Clock, Derived, Explanation, MemberView, Request, Selector,
};
use crate::Error;

/// How often, at most, the weights of a list whose members ramp (slow start) follow their
/// factors (ns).
const RAMP_REFRESH_NS: u64 = 100_000_000;

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
///
/// With [`SlowStart`](crate::SlowStart), a member in its window weighs its weight × its
/// [factor](crate::routing::MemberView::slow_start_factor): while a member of a list is in
/// its window, picks over that list follow a stride schedule (gRPC's static stride
/// scheduler, as [`LoadWeighted`](crate::LoadWeighted)'s: one atomic sequence, no lock)
/// over those weights, which follow the factors at most every 100 ms (the pick that finds
/// the time over recomputes them in place); from the first refresh that finds every factor
/// at 1, picks follow the cycle again. Slow start then skips no pick.
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
    /// The clock a list whose members ramp reads ([`Ramp`]).
    clock: Clock,
    /// The stride schedule's sequence over lists that are no published list, while members
    /// ramp.
    sequence: AtomicU64,
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
    /// When members of the list were in their slow-start window as it was derived: how its
    /// picks follow weight × factor until every factor is 1.
    ramp: Option<Ramp>,
}

/// The picks over a list while its members ramp (slow start): a stride schedule over each
/// member's weight × its slow-start factor, rescaled from the factors at most every
/// [`RAMP_REFRESH_NS`] by the pick that finds the time over (in place: no allocation).
#[derive(Debug)]
struct Ramp {
    /// The members that weigh more than 0 (indices into the list), and their weights.
    members: Vec<u32>,
    weights: Vec<u32>,
    /// Their weights × factors, scaled so the heaviest is [`stride::MAX_SCALED`].
    scaled: Vec<AtomicU32>,
    sequence: AtomicU64,
    /// When the weights next follow the factors (ns on the clock).
    next_refresh_ns: AtomicU64,
    /// Every factor was 1 at the last refresh: picks follow the cycle again.
    over: AtomicBool,
}

impl Ramp {
    /// The ramp of a list whose members weigh `weights` (by index), if a member that weighs
    /// more than 0 is in its slow-start window; its scaled weights as of the factors now.
    fn of(list: &[MemberView], weights: &[u32], start: usize) -> Option<Ramp> {
        let ramping = list
            .iter()
            .zip(weights)
            .any(|(m, &w)| w > 0 && m.slow_start_factor() < 1.0);
        if !ramping {
            return None;
        }
        let (members, weights): (Vec<u32>, Vec<u32>) = weights
            .iter()
            .enumerate()
            .filter(|(_, &w)| w > 0)
            .map(|(i, &w)| (i as u32, w))
            .unzip();
        let ramp = Ramp {
            scaled: weights.iter().map(|_| AtomicU32::new(0)).collect(),
            members,
            weights,
            sequence: AtomicU64::new(start as u64),
            // The first pick refreshes again, and notes the time.
            next_refresh_ns: AtomicU64::new(0),
            over: AtomicBool::new(false),
        };
        ramp.refresh(list);
        Some(ramp)
    }

    /// Each member's weight × factor now, scaled; notes when every factor is 1.
    fn refresh(&self, list: &[MemberView]) {
        let effective = |j: usize| {
            let factor = list
                .get(self.members[j] as usize)
                .map_or(1.0, MemberView::slow_start_factor);
            (f64::from(self.weights[j]) * factor, factor)
        };
        let (mut heaviest, mut ramping) = (0.0f64, false);
        for j in 0..self.members.len() {
            let (weight, factor) = effective(j);
            heaviest = heaviest.max(weight);
            ramping |= factor < 1.0;
        }
        for (j, scaled) in self.scaled.iter().enumerate() {
            scaled.store(stride::scale(effective(j).0, heaviest), Ordering::Relaxed);
        }
        if !ramping {
            self.over.store(true, Ordering::Relaxed);
        }
    }

    /// A pick over `list` (the list this ramp was derived from) at `now_ns`.
    #[cold]
    #[inline(never)]
    fn pick(&self, list: &[MemberView], now_ns: u64) -> usize {
        let due = self.next_refresh_ns.load(Ordering::Relaxed);
        if now_ns >= due
            && self
                .next_refresh_ns
                .compare_exchange(
                    due,
                    now_ns.saturating_add(RAMP_REFRESH_NS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.refresh(list);
        }
        let j = stride::next(&self.sequence, self.members.len(), |j| {
            self.scaled[j].load(Ordering::Relaxed)
        });
        self.members[j] as usize
    }

    /// Whether picks still follow this ramp.
    #[inline]
    fn on(&self) -> bool {
        !self.over.load(Ordering::Relaxed)
    }
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
        cycle_of(&weights)
    }
}

/// The smooth weighted cycle over members weighing `weights`: each index appears
/// `weight / gcd` times.
fn cycle_of(weights: &[u64]) -> Vec<u32> {
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
            clock: context.clock.clone(),
            sequence: AtomicU64::new(0),
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
        let weights: Vec<u32> = change
            .members
            .iter()
            .map(|m| self.weights.weight_of(m.node()))
            .collect();
        let slots = cycle_of(&weights.iter().map(|&w| u64::from(w)).collect::<Vec<_>>());
        // Slow start wrote the factors of this list's members before it came here.
        let ramp = Ramp::of(change.members, &weights, next);
        let cycle = Arc::new(Cycle {
            modulus: Modulus::new(slots.len().max(1)),
            slots,
            next: AtomicUsize::new(next),
            ramp,
        });
        *latest = Some(Arc::clone(&cycle));
        Some(cycle)
    }

    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        match request.derived_as::<Cycle>() {
            Some(Cycle {
                ramp: Some(ramp), ..
            }) if ramp.on() => Ok(ramp.pick(members, self.clock.now_ns())),
            Some(cycle) => pick_in(cycle, request),
            None => self.pick_unpublished(members, request),
        }
    }

    /// Weights are multiplied by the slow-start factor while a member ramps ([`Ramp`]).
    fn applies_slow_start(&self) -> bool {
        true
    }

    fn explain(
        &self,
        members: &[MemberView],
        _chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        let ramping = members.iter().any(|m| m.slow_start_factor() < 1.0);
        Explanation {
            rule: if ramping {
                "weighted round robin by weight × slow-start factor (stride schedule while members ramp)"
                    .into()
            } else {
                "smooth weighted round robin".into()
            },
            scores: members
                .iter()
                .map(|m| {
                    let weight = f64::from(self.weights.weight_of(m.node()));
                    (m.id().to_string(), weight * m.slow_start_factor())
                })
                .collect(),
        }
    }
}

impl WeightedRoundRobinSelector {
    /// A pick over a list that is no published one (a re-selection that excludes members):
    /// its cycle built for it, or while a member of it ramps, the stride schedule over weight
    /// × factor.
    #[cold]
    #[inline(never)]
    fn pick_unpublished(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
    ) -> Result<usize, Error> {
        if !members.iter().any(|m| m.slow_start_factor() < 1.0) {
            return pick(&self.weights.cycle(members), &self.next, request);
        }
        let weighed: Vec<(usize, f64)> = members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let weight = self.weights.weight_of(m.node());
                (weight > 0).then(|| (i, f64::from(weight) * m.slow_start_factor()))
            })
            .collect();
        if weighed.is_empty() {
            return Err(no_weight(request));
        }
        let heaviest = weighed.iter().map(|(_, w)| *w).fold(0.0, f64::max);
        let j = stride::next(&self.sequence, weighed.len(), |j| {
            stride::scale(weighed[j].1, heaviest)
        });
        Ok(weighed[j].0)
    }
}

#[cfg(test)]
mod tests;
