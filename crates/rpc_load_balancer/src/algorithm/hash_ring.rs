//! HashRing: consistent hashing of a routing key onto the members.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64;

use bounded::Loads;
use ring_index::RingIndex;

use crate::routing::{
    Algorithm, BuildContext, Change, Clock, Derived, Explanation, MemberView, Needs, Request, Rng,
    Selector,
};
use crate::Error;

/// Routes a call with a key to the member owning that key on a consistent-hash ring (Karger et
/// al., "Consistent Hashing and Random Trees", STOC 1997; the original used libring), so the
/// same key reaches the same node while membership is stable, and a membership change moves
/// only the keys of the nodes that came or went.
///
/// **Ring.** Each member has [`weight`](Self::weight) points (default 128): point `i` of node
/// `N` is `xxh3_64(N ++ [0] ++ i as u32 little-endian)`. Points are sorted by value, ties by
/// node name, so the ring depends on the member *set* only — not on member order, platform or
/// compiler. A key's owner is the member of the first point ≥ `xxh3_64(key)`, wrapping around;
/// an index by the key's top hash bits finds it among the few points of one arc of the ring
/// (one to two points an arc), not by a binary search over every point.
/// xxh3 is XXH3-64 with seed 0 (xxHash 0.8); golden vectors in the tests pin it.
///
/// **Keys** are bytes: pass strings as their UTF-8 bytes (`b"customer-42"`), integers as
/// 8 big-endian bytes (`42u64.to_be_bytes()`), anything else in an encoding every caller shares.
/// A call without a key goes to a random member (affinity is lost), counted in
/// [`keyless_selections`](Self::keyless_selections) and noted at DEBUG.
///
/// **Replicas.** [`Balancer::select_nodes`](crate::Balancer::select_nodes) walks the ring from
/// the key's position, wrapping around, and returns `min(count, members)` distinct nodes; the
/// first is the single-key answer.
///
/// **Bounded loads** (off by default): with [`balance_factor`](Self::balance_factor) `c`, a
/// key's owner takes the call only while its load is below `⌈c × (total + 1) ÷ members⌉`;
/// otherwise the key passes to the next member on the ring that is (Mirrokni, Thorup,
/// Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018; Envoy's
/// `hash_balance_factor`). See that option for what a member's load is.
///
/// Each balancer's selector rebuilds its ring once per membership change, before the balancer
/// publishes the new member list, which carries the ring to every selection over it; a
/// selection over another list (a re-selection that excludes
/// members) builds a ring for it on the spot.
#[derive(Debug, Clone)]
pub struct HashRing {
    weight: u32,
    seed: Option<u64>,
    /// Bounded loads: the balance factor `c` (≥ 1), or `None` (plain consistent hashing).
    balance_factor: Option<f64>,
    /// Keyless selections of every selector built from this instance.
    keyless: Arc<AtomicU64>,
}

/// Sorted points of one member list.
#[derive(Debug)]
struct Ring {
    /// (point, member index), sorted by point then node name.
    points: Vec<(u64, u32)>,
    /// Where a key's search starts in `points`, by the top bits of its hash.
    index: RingIndex,
    /// The members' loads as this caller knows them (used with a balance factor).
    loads: Loads,
}

impl Ring {
    /// The ring of `members` with `weight` points each ([`HashRing::point`]), sorted by
    /// [`sort_points`], and its index.
    fn new(members: &[MemberView], weight: u32) -> Self {
        let mut points: Vec<(u64, u32)> = Vec::with_capacity(members.len() * weight as usize);
        for (index, member) in members.iter().enumerate() {
            for i in 0..weight {
                points.push((HashRing::point(member.id(), i), index as u32));
            }
        }
        sort_points(&mut points, members);
        Self {
            index: RingIndex::new(&points),
            points,
            loads: Loads::new(members.len()),
        }
    }

    /// Position of the first point ≥ the key point `h`, wrapping to 0 past the last point
    /// (the same as `points.partition_point(|p| p.0 < h)`, read from the index).
    #[inline]
    fn start(&self, h: u64) -> usize {
        let position = self.index.first_at_or_after(&self.points, h);
        if position == self.points.len() {
            0
        } else {
            position
        }
    }
}

impl Default for HashRing {
    fn default() -> Self {
        Self::new()
    }
}

impl HashRing {
    /// Most points a member may have (4,096 points, 64 KiB of ring per member).
    pub const MAX_WEIGHT: u32 = 4096;

    /// A ring with 128 points per member, keyless calls drawn from a thread-local generator.
    pub fn new() -> Self {
        Self {
            weight: 128,
            seed: None,
            balance_factor: None,
            keyless: Arc::default(),
        }
    }

    /// Points per member (1 ..= [`Self::MAX_WEIGHT`], default 128); more points spread keys
    /// more evenly and cost more memory (16 bytes each, and at most 4 more in the ring's
    /// lookup index) and rebuild time.
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `weight` when it is 0 or above [`Self::MAX_WEIGHT`].
    pub fn weight(mut self, points: u32) -> Self {
        self.weight = points;
        self
    }

    /// Bounded loads (default: off): a member whose load is at or above the cap
    /// `⌈factor × (total + 1) ÷ members⌉` passes the key on, where `total` is the members'
    /// loads summed. A keyed pick walks the ring from the key's position, as replica selection
    /// does, and takes the first member whose load is below the cap — the key's owner while it
    /// is not overloaded, else the next member clockwise that is not. Some member is always
    /// below the cap (the cap is above the mean load); should concurrent picks change the
    /// loads mid-walk so that none is, the pick fails open to the owner. `1.25` is a common
    /// choice (Envoy's `hash_balance_factor` 125): no member carries more than about 1.25 ×
    /// the mean load, at the cost of some keys leaving their owner while it is busy; the
    /// closer to 1, the more keys move. Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing
    /// with Bounded Loads", SODA 2018.
    ///
    /// **Load** is what this caller knows of the member's calls of this balancer in flight:
    /// the member's last reported calls in flight — from every caller, carried by each of its
    /// replies ([`MemberView::report`], [`LoadReport::in_flight`](crate::LoadReport::in_flight))
    /// — plus this caller's picks of it since that report arrived, and never less than this
    /// caller's own calls in flight to it ([`MemberView::in_flight`], which the balancer
    /// counts when this option is set). A report older than 1 s no longer counts (a member
    /// that gets no calls sends none): its load is then this caller's in-flight calls alone.
    /// So callers bound the members' totals, not only their own calls, as far as replies
    /// flow.
    ///
    /// Cost: a keyed pick sums the members' loads (a few atomic loads each, O(members)
    /// per pick, only when this is set; members are typically at most a few hundred) and walks
    /// the ring past overloaded members' points; no lock, no allocation. Keyless calls stay
    /// uniform random; replica selection ([`Balancer::select_nodes`](crate::Balancer::select_nodes))
    /// keeps the plain ring order. With this set the algorithm is named `hash_ring_bounded`
    /// (logs, the `algorithm` metric label, `rpclb lab`).
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `balance_factor` unless it is finite and ≥ 1.
    pub fn balance_factor(mut self, factor: f64) -> Self {
        self.balance_factor = Some(factor);
        self
    }

    /// Keyless picks from `seed` (for tests).
    pub fn seeded(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Selections made without a key (routed at random), counted since this instance was
    /// created, over every balancer it configures; a keyless replica selection counts one.
    pub fn keyless_selections(&self) -> u64 {
        self.keyless.load(Ordering::Relaxed)
    }

    /// The ring point `i` (0-based, below the ring's [`weight`](Self::weight)) of the node with
    /// full name `node`: `xxh3_64(node ++ [0] ++ i as u32 little-endian)`, a position on the
    /// 64-bit ring.
    pub fn point(node: &str, i: u32) -> u64 {
        let mut bytes = Vec::with_capacity(node.len() + 5);
        bytes.extend_from_slice(node.as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&i.to_le_bytes());
        xxh3_64(&bytes)
    }

    /// Where `key` lands on the 64-bit ring: `xxh3_64(key)`. Its owner is the member of the
    /// first point ≥ this value, wrapping around.
    pub fn key_point(key: &[u8]) -> u64 {
        xxh3_64(key)
    }

    /// Checks the options, `weight` first. Errors: [`Error::InvalidConfig`] naming `weight` or
    /// `balance_factor`.
    fn validate(&self) -> Result<(), Error> {
        if self.weight == 0 || self.weight > Self::MAX_WEIGHT {
            return Err(Error::InvalidConfig {
                option: "weight",
                reason: format!(
                    "{} points per member: must be 1 ..= {}",
                    self.weight,
                    Self::MAX_WEIGHT
                ),
            });
        }
        if let Some(factor) = self.balance_factor {
            if !factor.is_finite() || factor < 1.0 {
                return Err(Error::InvalidConfig {
                    option: "balance_factor",
                    reason: format!("{factor}: must be finite and at least 1.0"),
                });
            }
        }
        Ok(())
    }
}

impl Algorithm for HashRing {
    fn name(&self) -> &'static str {
        if self.balance_factor.is_some() {
            "hash_ring_bounded"
        } else {
            "hash_ring"
        }
    }

    /// In-flight counts with a [`balance_factor`](Self::balance_factor); else nothing.
    fn needs(&self) -> Needs {
        if self.balance_factor.is_some() {
            Needs::default().in_flight()
        } else {
            Needs::default()
        }
    }

    /// Errors: [`Error::InvalidConfig`] naming `weight` or `balance_factor`.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.validate()?;
        Ok(Box::new(HashRingSelector {
            weight: self.weight,
            balance_factor: self.balance_factor,
            rng: context.rng(self.seed),
            clock: context.clock.clone(),
            keyless: Arc::clone(&self.keyless),
        }))
    }
}

/// One balancer's [`HashRing`]. The ring of each member list travels with that list
/// ([`Selector::derive`]), so a pick reads it from its request.
#[derive(Debug)]
struct HashRingSelector {
    weight: u32,
    balance_factor: Option<f64>,
    rng: Rng,
    clock: Clock,
    keyless: Arc<AtomicU64>,
}

/// Sorts `(point, member index)` pairs by point, equal points by the members' node names: two
/// members whose points collide are ordered the same whatever their order in `members`, so
/// the key landing there has the same owner on every node.
pub(super) fn sort_points(points: &mut [(u64, u32)], members: &[MemberView]) {
    points.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| members[a.1 as usize].id().cmp(members[b.1 as usize].id()))
    });
}

impl HashRingSelector {
    fn build(&self, members: &[MemberView]) -> Ring {
        Ring::new(members, self.weight)
    }

    /// Runs `f` on the ring for `members`: the one their list carries (derived when it was
    /// published), else one built now.
    fn with_ring<T>(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
        f: impl FnOnce(&Ring) -> T,
    ) -> T {
        match request.derived_as::<Ring>() {
            Some(ring) => f(ring),
            None => f(&self.build(members)),
        }
    }

    /// Position of the first point ≥ the key's, wrapping to 0.
    fn start(ring: &Ring, key: &[u8]) -> usize {
        ring.start(HashRing::key_point(key))
    }

    fn keyless_pick(&self, members: &[MemberView], request: &Request<'_>) -> usize {
        self.keyless.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            balancer = request.balancer,
            "hash ring selection without a key: routed at random"
        );
        self.rng.below(members.len())
    }
}

impl Selector for HashRingSelector {
    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        Some(Arc::new(self.build(change.members)))
    }

    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let Some(key) = request.key else {
            return Ok(self.keyless_pick(members, request));
        };
        Ok(self.with_ring(members, request, |ring| {
            let start = Self::start(ring, key);
            match self.balance_factor {
                None => ring.points[start].1 as usize,
                Some(factor) => {
                    let now = self.clock.now_ms();
                    ring.loads.pick_bounded(ring, members, start, factor, now)
                }
            }
        }))
    }

    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let Some(key) = request.key else {
            self.keyless.fetch_add(1, Ordering::Relaxed);
            return Ok(self.rng.distinct(members.len(), count));
        };
        let wanted = count.min(members.len());
        Ok(self.with_ring(members, request, |ring| {
            let mut chosen: Vec<usize> = Vec::with_capacity(wanted);
            let start = Self::start(ring, key);
            for step in 0..ring.points.len() {
                if chosen.len() == wanted {
                    break;
                }
                let (_, index) = ring.points[(start + step) % ring.points.len()];
                if !chosen.contains(&(index as usize)) {
                    chosen.push(index as usize);
                }
            }
            chosen
        }))
    }

    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let rule = match (request.key, self.balance_factor) {
            (Some(key), Some(factor)) => {
                let now = self.clock.now_ms();
                let (owner, owner_load, (cap, total)) = self.with_ring(members, request, |ring| {
                    let owner = ring.points[Self::start(ring, key)].1 as usize;
                    let load = ring.loads.load(members, owner, now);
                    (owner, load, ring.loads.cap(members, factor, now))
                });
                let owner_view = members.get(owner);
                format!(
                    "bounded loads (factor {factor}): key point {:#018x} on a ring of {} points per member; \
                     owner {} has load {} (reported in flight + sent since, at least in flight), cap {cap} (⌈{factor} × ({total} + 1) ÷ {}⌉); chose {}",
                    HashRing::key_point(key),
                    self.weight,
                    owner_view.map_or("?", MemberView::id),
                    owner_load,
                    members.len(),
                    members.get(chosen).map_or("?", MemberView::id)
                )
            }
            (Some(key), None) => format!(
                "owner of key point {:#018x} on a ring of {} points per member ({})",
                HashRing::key_point(key),
                self.weight,
                members.get(chosen).map_or("?", MemberView::id)
            ),
            (None, _) => "no key: uniform random".to_string(),
        };
        Explanation {
            rule,
            scores: Vec::new(),
        }
    }
}

mod bounded;
#[cfg(test)]
mod bounded_tests;
mod ring_index;
#[cfg(test)]
mod tests;
