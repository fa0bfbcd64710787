//! Deterministic subsetting: which `K` members of a balancer's full member list one caller
//! dials and balances over, computed from the list, the caller's index and the caller count
//! alone, the same on every node. Pure code, recomputed on a membership change only.
//!
//! Three schemes, compared in bench/README.md ("Issue 21: deterministic subsetting (lab)"):
//! - [`SubsetScheme::Aperture`] (the default): ring coordinates, after Finagle's
//!   deterministic aperture.
//! - [`SubsetScheme::Rounds`]: rounds of callers over a per-round shuffle of the members,
//!   after the Google SRE book's deterministic subsetting.
//! - [`SubsetScheme::Rendezvous`]: each caller keeps its `K` highest-ranked members by a
//!   hash of (caller, member), gRFC A68's rendezvous ranking.

use super::rng::splitmix64;
use super::Algorithm;
use crate::Error;

/// How a caller's subset is chosen; see [`Subsetting`] for which to use and why.
///
/// Every scheme is deterministic: the same member list (sorted the same way on every
/// caller), caller index, caller count and size give the same subset on any machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SubsetScheme {
    /// Ring coordinates (after Finagle's deterministic aperture, "Aperture Load Balancers"
    /// in Finagle's client documentation): the members are evenly spaced on a unit ring,
    /// member `j` of `m` at `j / m`; caller `i` of `n` starts at `i / n` and takes the `K`
    /// members from the one whose slot holds its start on. Every member is in
    /// ⌊K·n / m⌋ or ⌈K·n / m⌉ subsets (exactly K·n / m when that is whole), whatever the
    /// sizes; when a member leaves or joins, every start moves by less than one member, so
    /// each caller's subset changes by at most a member or two. O(K) per caller.
    #[default]
    Aperture,
    /// Rounds (after "Load Balancing in the Datacenter", chapter 20 of Google's *Site
    /// Reliability Engineering*, "A Subset Selection Algorithm: Deterministic Subsetting"):
    /// the callers go in rounds of ⌊m / K⌋ (at least 1); each round shuffles the member
    /// list with a generator seeded by the round's number, and the round's callers take
    /// consecutive slices of `K`. When K·n is a multiple of `m` and `m` of `K`, every member
    /// is in exactly K·n / m subsets; any change of the member count reshuffles every
    /// round, so nearly every subset changes. O(m) per caller.
    Rounds,
    /// Rendezvous ranking (gRFC A68, "Random subsetting with rendezvous hashing", with the
    /// caller's index as its seed): each caller ranks every member by a 64-bit hash of
    /// (caller index, member id) and keeps the `K` highest. Only callers that held a member
    /// that leaves, or that rank a joining member in their top `K`, change, by one member
    /// each; but how many subsets hold a member is a binomial draw (mean K·n / m), so the
    /// load is uneven. O(m) per caller.
    Rendezvous,
}

impl SubsetScheme {
    /// Every scheme, the default first.
    pub const ALL: [SubsetScheme; 3] = [
        SubsetScheme::Aperture,
        SubsetScheme::Rounds,
        SubsetScheme::Rendezvous,
    ];

    /// Its name: `aperture`, `rounds` or `rendezvous`.
    pub fn name(self) -> &'static str {
        match self {
            SubsetScheme::Aperture => "aperture",
            SubsetScheme::Rounds => "rounds",
            SubsetScheme::Rendezvous => "rendezvous",
        }
    }

    /// The scheme of that [name](Self::name), or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Deterministic subsetting's options: each caller dials, and balances over, only `size`
/// (`K`) members of a balancer, chosen by a [`SubsetScheme`] from the full member list (ids
/// sorted the same on every caller), the caller's index and the caller count
/// ([`subset`](Self::subset)). For large clusters, where every caller connecting to every
/// member costs each member a session per caller: with `n` callers and `m` members a member
/// then serves about K·n / m callers instead of `n`.
///
/// **The default scheme is [`Aperture`](SubsetScheme::Aperture)**, because it is the only
/// one of the three that gives both even load and small change:
/// - even load is the goal (a member's share of the calls follows how many subsets hold
///   it): aperture puts every member in ⌊K·n / m⌋ or ⌈K·n / m⌉ subsets for any sizes;
///   [`Rounds`](SubsetScheme::Rounds) is as even only when the sizes divide (its leftover
///   members sit out a round), and [`Rendezvous`](SubsetScheme::Rendezvous) is a binomial
///   draw per member: in the lab's `large` scenario (1,000 members, 200 callers, K = 20)
///   some members are in no subset and others in 2× the mean;
/// - on a member's leave or join aperture changes at most a member or two per subset
///   (rendezvous changes the fewest, only the subsets that held or now rank the member;
///   rounds reshuffles nearly all of them).
///
/// The measured figures (members' shares in the lab, entries changed per leave and join) are
/// in bench/README.md, "Issue 21: deterministic subsetting (lab)". Sources, cited not copied:
/// the Google SRE book, chapter 20 "Load Balancing in the Datacenter" (rounds); Finagle's
/// "Aperture Load Balancers" documentation (deterministic aperture, ring coordinates); gRFC
/// A68 "Random subsetting with rendezvous hashing" (ranking).
///
/// **HashRing is refused** ([`check`](Self::check)): a key's owner on a ring over one
/// caller's subset depends on the caller (each subset's ring has other owners), so the
/// same key would land on up to one member per distinct subset, which defeats the point of
/// hashing (a key's state or cache on one member). Routing through the subset's ring would
/// run, but silently; keyed routing should dial every member instead. CallDirect is refused
/// too: it selects nothing (its calls run on the local node).
///
/// Large clusters: the subset decides only whom a caller dials; which members exist stays
/// the balancer's full member list, and the caller's index and the caller count come from
/// the cluster, not from configuration (another caller joining moves indices, so a subset
/// can change when callers come and go as well as when members do). The subset of a
/// caller is recomputed on a membership change only: O(K) for aperture, O(m) for the
/// others.
///
/// ```
/// use rpc_load_balancer::routing::{SubsetScheme, Subsetting};
///
/// let members: Vec<String> = (0..10).map(|i| format!("m{i}@host")).collect();
/// let subsetting = Subsetting::new(4);
/// assert_eq!(subsetting.scheme(), SubsetScheme::Aperture);
/// // Caller 1 of 5 starts at 1/5 of the ring: member 2.
/// assert_eq!(subsetting.subset(&members, 1, 5), vec![2, 3, 4, 5]);
/// // Every caller gets 4 distinct members, the same on every node.
/// let rounds = Subsetting::with(SubsetScheme::Rounds, 4);
/// assert_eq!(rounds.subset(&members, 3, 5).len(), 4);
/// assert!(Subsetting::new(0).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subsetting {
    size: usize,
    scheme: SubsetScheme,
}

impl Subsetting {
    /// Subsets of `size` members (`K`, at least 1: [`validate`](Self::validate)) with the
    /// default scheme, [`SubsetScheme::Aperture`].
    pub fn new(size: usize) -> Self {
        Self::with(SubsetScheme::default(), size)
    }

    /// Subsets of `size` members with `scheme`.
    pub fn with(scheme: SubsetScheme, size: usize) -> Self {
        Self { size, scheme }
    }

    /// The subset size `K`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The scheme.
    pub fn scheme(&self) -> SubsetScheme {
        self.scheme
    }

    /// Checks the options.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `subset_size` when the size is 0.
    pub fn validate(&self) -> Result<(), Error> {
        if self.size == 0 {
            return Err(Error::InvalidConfig {
                option: "subset_size",
                reason: "must be at least 1".to_string(),
            });
        }
        Ok(())
    }

    /// Checks the options, and that `algorithm` can balance over a subset: not
    /// [`HashRing`](crate::HashRing) (bounded or not) nor [`CallDirect`](crate::CallDirect),
    /// under any wrapper (see the [type's docs](Self) for why).
    ///
    /// Errors: as [`validate`](Self::validate); [`Error::InvalidConfig`] naming `subsetting`
    /// for those two.
    pub fn check(&self, algorithm: &dyn Algorithm) -> Result<(), Error> {
        self.validate()?;
        let base = algorithm.name().split('+').next().unwrap_or_default();
        if algorithm.is_local() || matches!(base, "hash_ring" | "hash_ring_bounded" | "call_direct")
        {
            return Err(Error::InvalidConfig {
                option: "subsetting",
                reason: format!(
                    "not for {}: a key's owner or the local node must not depend on the caller's subset",
                    algorithm.name()
                ),
            });
        }
        Ok(())
    }

    /// Caller `caller`'s subset of `members`: indices into `members`, ascending, distinct,
    /// `min(size, members.len())` of them (every index when the size is at least the member
    /// count; none when there are no members or the size is 0).
    ///
    /// `members` are the ids (node names) of the full member list, sorted the same on every
    /// caller; only [`Rendezvous`](SubsetScheme::Rendezvous) reads their bytes. `caller` is
    /// this caller's index among `callers`; an index at or past the count (a count read
    /// before the caller's own join, say) is taken modulo the count, and a count of 0 as 1,
    /// so a caller always gets a subset.
    ///
    /// O(K) for aperture, O(m) for the others (plus sorting the K indices); deterministic.
    pub fn subset<M: AsRef<[u8]>>(
        &self,
        members: &[M],
        caller: usize,
        callers: usize,
    ) -> Vec<usize> {
        let m = members.len();
        let k = self.size.min(m);
        if k == m {
            return (0..m).collect();
        }
        let callers = callers.max(1);
        let caller = caller % callers;
        let mut chosen = match self.scheme {
            SubsetScheme::Aperture => aperture(m, k, caller, callers),
            SubsetScheme::Rounds => rounds(m, k, caller),
            SubsetScheme::Rendezvous => rendezvous(members, k, caller),
        };
        chosen.sort_unstable();
        chosen
    }
}

/// Aperture: the `k` members from ⌊caller·m / callers⌋ on, around the ring.
fn aperture(m: usize, k: usize, caller: usize, callers: usize) -> Vec<usize> {
    let start = (caller as u128 * m as u128 / callers as u128) as usize;
    (0..k).map(|j| (start + j) % m).collect()
}

/// A round's shuffle seed's salt (any fixed value: every node must use the same).
const ROUND_SALT: u64 = 0x5EED_5B5E_7000_0021;

/// Rounds: caller `caller`'s slice of its round's shuffle.
fn rounds(m: usize, k: usize, caller: usize) -> Vec<usize> {
    let per_round = (m / k).max(1);
    let round = (caller / per_round) as u64;
    let slot = caller % per_round;
    // Fisher-Yates over the member indices, drawing from SplitMix64 seeded by the round.
    let mut order: Vec<usize> = (0..m).collect();
    let mut state = splitmix64(round ^ ROUND_SALT);
    for i in (1..m).rev() {
        state = state.wrapping_add(1);
        let draw = splitmix64(state);
        // Uniform in 0..=i by multiply-high (its bias, below 2^-40 here, does not matter).
        let j = ((u128::from(draw) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order[slot * k..slot * k + k].to_vec()
}

/// Rendezvous: the `k` members of highest weight hash(caller, member) (ties by index).
fn rendezvous<M: AsRef<[u8]>>(members: &[M], k: usize, caller: usize) -> Vec<usize> {
    let salt = splitmix64(caller as u64 ^ ROUND_SALT.rotate_left(17));
    let mut ranked: Vec<(u64, usize)> = members
        .iter()
        .enumerate()
        .map(|(j, id)| (rendezvous_weight(salt, id.as_ref()), j))
        .collect();
    // Highest weight first; the index breaks ties so the order is total.
    ranked.select_nth_unstable_by(k - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked[..k].iter().map(|&(_, j)| j).collect()
}

/// A member's weight for a caller: FNV-1a (64-bit) of its id, mixed with the caller's salt
/// by SplitMix64's output function (stable across machines and releases).
fn rendezvous_weight(salt: u64, id: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in id {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    splitmix64(hash ^ salt)
}

#[cfg(test)]
mod tests;
