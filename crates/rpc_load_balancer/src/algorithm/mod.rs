//! Selection algorithms: how a balancer picks a member for a call.
//!
//! An algorithm implements [`SelectionAlgorithm`]. Only [`choose_from_nodes`] is required; the
//! other methods are the original's optional callbacks with their defaults:
//!
//! | method | called | default |
//! |---|---|---|
//! | [`init`] | once when the balancer starts, before this node joins | nothing |
//! | [`choose_from_nodes`] | every selection, concurrently, with the current members (never empty) | — |
//! | [`choose_nodes`] | replica selection (`count` distinct members) | `count` distinct members at random |
//! | [`on_node_change`] | after every membership change, with who joined and left | nothing |
//! | [`explain`] | only when DEBUG is on for `rpc_load_balancer::selection`: why a member was picked | the algorithm's name |
//! | [`release_node`] | exactly once per selection, when its [`SelectionGuard`](crate::SelectionGuard) drops | nothing |
//! | [`counts_in_flight`] | once when the balancer starts: whether selection reads members' in-flight counts | `false` |
//! | [`is_local`] | every routed call: `true` runs the call on this node without selecting | `false` |
//! | [`children`] | when the balancer starts: actors the balancer supervisor runs beside it | none |
//!
//! Members come sorted by node name, one per node, so index-based algorithms see the same list
//! on every node. Selection must not block, do I/O, or panic; it runs on the caller's task.
//!
//! [`init`]: SelectionAlgorithm::init
//! [`choose_from_nodes`]: SelectionAlgorithm::choose_from_nodes
//! [`choose_nodes`]: SelectionAlgorithm::choose_nodes
//! [`on_node_change`]: SelectionAlgorithm::on_node_change
//! [`release_node`]: SelectionAlgorithm::release_node
//! [`explain`]: SelectionAlgorithm::explain
//! [`counts_in_flight`]: SelectionAlgorithm::counts_in_flight
//! [`is_local`]: SelectionAlgorithm::is_local
//! [`children`]: SelectionAlgorithm::children

mod call_direct;
mod hash_ring;
mod least_connections;
mod least_cpu;
mod power_of_two;
mod random;
mod rng;
mod rotation;
mod round_robin;
mod snapshot_cache;
mod weighted_round_robin;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use ractor::{ActorCell, SpawnErr};

pub use call_direct::CallDirect;
pub use hash_ring::HashRing;
pub use least_connections::LeastConnections;
pub use least_cpu::{LeastCpu, LeastCpuOptions};
pub use power_of_two::PowerOfTwo;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use weighted_round_robin::WeightedRoundRobin;

use crate::balancer::Member;
use crate::Error;

/// What a selection is for: the balancer and the call's routing key, if any.
#[derive(Debug, Clone, Copy)]
pub struct SelectionRequest<'a> {
    /// The balancer's name.
    pub balancer: &'a str,
    /// The call's key, as bytes (for key-aware algorithms).
    pub key: Option<&'a [u8]>,
    /// The [`Members::version`](crate::Members::version) the member list comes from, so an
    /// algorithm can cache what it derives from a list (a schedule, a ring);
    /// [`SelectionRequest::UNCACHED`] for a list that is no snapshot (nothing cached applies).
    pub version: u64,
}

impl SelectionRequest<'_> {
    /// The `version` of a member list that is not a snapshot.
    pub const UNCACHED: u64 = u64::MAX;
}

/// Why a member was picked: see [`SelectionAlgorithm::explain`].
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The rule that decided, e.g. `"uniform random"`.
    pub rule: String,
    /// Each candidate's node and score, where the algorithm scores (lower or higher is better
    /// as the rule says).
    pub scores: Vec<(String, f64)>,
}

/// A membership change, delivered to [`SelectionAlgorithm::on_node_change`].
#[derive(Debug)]
pub struct NodeChange<'a> {
    /// The balancer's name.
    pub balancer: &'a str,
    /// Nodes that became members.
    pub joined: &'a [Arc<str>],
    /// Nodes that stopped being members.
    pub left: &'a [Arc<str>],
    /// All members after the change, sorted by node name.
    pub members: &'a [Member],
    /// The new snapshot's [`Members::version`](crate::Members::version).
    pub version: u64,
}

/// Spawns one child actor linked to the balancer's supervisor (given as the argument).
pub type SpawnChild =
    Arc<dyn Fn(ActorCell) -> BoxFuture<'static, Result<ActorCell, SpawnErr>> + Send + Sync>;

/// An actor an algorithm needs beside the balancer (e.g. LeastCpu's poller). The balancer's
/// supervisor starts it before the LoadBalancer and restarts it alone, with backoff, when it
/// fails; a child's failure never stops the balancer.
#[derive(Clone)]
pub struct AlgorithmChild {
    /// A name for logs.
    pub name: String,
    /// Starts the child linked to the given supervisor.
    pub spawn: SpawnChild,
}

impl std::fmt::Debug for AlgorithmChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlgorithmChild")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A way to pick members. See the [module docs](self) for when each method is called.
pub trait SelectionAlgorithm: Send + Sync + 'static {
    /// A short name for logs and metrics, e.g. `"round_robin"`.
    fn name(&self) -> &'static str;

    /// Prepares the algorithm for the balancer named `balancer` when it starts (after its
    /// config is checked, before its actors start).
    ///
    /// Errors: return [`Error::InvalidConfig`] naming the option when an option is invalid;
    /// the balancer then does not start.
    fn init(&self, balancer: &str) -> Result<(), Error> {
        let _ = balancer;
        Ok(())
    }

    /// Picks one of `members` (never empty) and returns its index in `members`.
    ///
    /// Errors: a typed error when no member can be picked, by convention
    /// [`Error::NoEligibleMembers`] (e.g. all weigh 0), which a routed call retries as it
    /// retries an empty pool (see [`Retry`](crate::Retry)). The balancer
    /// turns an index out of range into [`Error::InvalidConfig`] naming `algorithm`.
    fn choose_from_nodes(
        &self,
        members: &[Member],
        request: &SelectionRequest<'_>,
    ) -> Result<usize, Error>;

    /// Picks `min(count, members.len())` distinct members; indices into `members`, the
    /// preferred one first. Default: distinct members uniformly at random.
    ///
    /// Errors: as [`choose_from_nodes`](Self::choose_from_nodes).
    fn choose_nodes(
        &self,
        members: &[Member],
        count: usize,
        request: &SelectionRequest<'_>,
    ) -> Result<Vec<usize>, Error> {
        let _ = request;
        Ok(random_distinct(members.len(), count))
    }

    /// Learns of a membership change (the initial snapshot arrives as everything joining).
    fn on_node_change(&self, change: &NodeChange<'_>) {
        let _ = change;
    }

    /// Releases what a selection of `member` took (e.g. an in-flight count). Called exactly
    /// once per selection by the guard, however the call ends.
    fn release_node(&self, member: &Member) {
        let _ = member;
    }

    /// Explains a pick for the DEBUG event `selection explained`: the rule that decided and
    /// each candidate's score. Called only when that event is enabled, so it may allocate.
    /// Default: the algorithm's name as the rule, no scores.
    fn explain(
        &self,
        members: &[Member],
        chosen: usize,
        request: &SelectionRequest<'_>,
    ) -> Explanation {
        let _ = (members, chosen, request);
        Explanation {
            rule: self.name().to_string(),
            scores: Vec::new(),
        }
    }

    /// Whether [`choose_from_nodes`](Self::choose_from_nodes) reads members' in-flight counts
    /// ([`Member::in_flight`]). When `true`, every selection adds one to its member's count
    /// and the guard subtracts it: an atomic shared between the threads that pick that member.
    /// When `false` (default), member counts stay 0 and a selection writes no memory another
    /// thread writes. Asked once, when the balancer starts.
    fn counts_in_flight(&self) -> bool {
        false
    }

    /// `true` makes every routed call run on the calling node without selection (CallDirect).
    fn is_local(&self) -> bool {
        false
    }

    /// Actors to run beside the balancer (see [`AlgorithmChild`]).
    fn children(&self, balancer: &str) -> Vec<AlgorithmChild> {
        let _ = balancer;
        Vec::new()
    }
}

/// `min(count, len)` distinct indices below `len`, uniformly at random (partial Fisher–Yates).
pub(crate) fn random_distinct(len: usize, count: usize) -> Vec<usize> {
    use rand::Rng;
    let mut indices: Vec<usize> = (0..len).collect();
    let take = count.min(len);
    let mut rng = rand::rng();
    for i in 0..take {
        let j = rng.random_range(i..len);
        indices.swap(i, j);
    }
    indices.truncate(take);
    indices
}

/// The built-in algorithm called `name` (one of [`BUILT_IN`]), with default options.
/// Used by the `rpclb` binary and admin control.
///
/// Errors: [`Error::InvalidConfig`] (`algorithm`) for an unknown name.
///
/// ```
/// use rpc_load_balancer::{algorithm, Error};
///
/// assert_eq!(algorithm::by_name("hash_ring")?.name(), "hash_ring");
/// assert!(matches!(
///     algorithm::by_name("fastest"),
///     Err(Error::InvalidConfig { option: "algorithm", .. })
/// ));
/// # Ok::<(), Error>(())
/// ```
pub fn by_name(name: &str) -> Result<Arc<dyn SelectionAlgorithm>, Error> {
    match name {
        "random" => Ok(Arc::new(Random::new())),
        "round_robin" => Ok(Arc::new(RoundRobin::new())),
        "weighted_round_robin" => Ok(Arc::new(WeightedRoundRobin::new())),
        "least_connections" => Ok(Arc::new(LeastConnections::new())),
        "power_of_two" => Ok(Arc::new(PowerOfTwo::new())),
        "hash_ring" => Ok(Arc::new(HashRing::new())),
        "least_cpu" => Ok(Arc::new(LeastCpu::new())),
        "call_direct" => Ok(Arc::new(CallDirect)),
        other => Err(Error::InvalidConfig {
            option: "algorithm",
            reason: format!(
                "unknown algorithm {other:?}; known: {}",
                BUILT_IN.join(", ")
            ),
        }),
    }
}

/// Names of the built-in algorithms [`by_name`] knows.
pub const BUILT_IN: &[&str] = &[
    "random",
    "round_robin",
    "weighted_round_robin",
    "least_connections",
    "power_of_two",
    "hash_ring",
    "call_direct",
    "least_cpu",
];

#[cfg(test)]
mod tests;
