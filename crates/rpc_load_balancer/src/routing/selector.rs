//! [`Selector`]: one balancer's selection state and rule, built by an
//! [`Algorithm`](super::Algorithm).

use std::any::Any;
use std::sync::Arc;

use super::{MemberView, Outcome, Rng};
use crate::Error;

/// What a selection is for: the balancer, the call's routing key, and which member list it
/// picks from (with what the selector [derived](Selector::derive) from that list).
///
/// ```
/// use rpc_load_balancer::routing::Request;
///
/// let request = Request::new("jobs", Some(b"user-42"), 3);
/// assert_eq!((request.version, request.derived_as::<Vec<u32>>()), (3, None));
/// ```
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The balancer's name.
    pub balancer: &'a str,
    /// The call's key, as bytes (for key-aware algorithms).
    pub key: Option<&'a [u8]>,
    /// The version of the member list picked from: per balancer, increasing with every list
    /// it publishes (the [`Change::version`] the selector was told of), so a selector can use
    /// what it derived from that list ([`PerList`](super::PerList));
    /// [`Request::UNCACHED`] for a list that is no published list (a re-selection that
    /// excludes members): nothing derived applies.
    pub version: u64,
    /// What the selector's [`derive`](Selector::derive) returned for this list, held with the
    /// list and handed to every pick over it (read it with [`derived_as`](Self::derived_as));
    /// `None` when it derived nothing, or for a list that is no published list
    /// ([`Request::UNCACHED`]).
    pub derived: Option<&'a Derived>,
}

impl<'a> Request<'a> {
    /// The `version` of a member list that is not a published list.
    pub const UNCACHED: u64 = u64::MAX;

    /// A request of balancer `balancer` for `key` over list `version`, with nothing derived.
    pub fn new(balancer: &'a str, key: Option<&'a [u8]>, version: u64) -> Self {
        Request {
            balancer,
            key,
            version,
            derived: None,
        }
    }

    /// What the selector derived from this list, if it is a `T`: a type check, no load, no
    /// lock, no reference count.
    #[inline]
    pub fn derived_as<T: Any>(&self) -> Option<&'a T> {
        self.derived?.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("balancer", &self.balancer)
            .field("key", &self.key)
            .field("version", &self.version)
            .field("derived", &self.derived.is_some())
            .finish()
    }
}

/// What a selector derives from one member list (a weighted cycle, a hash ring), returned by
/// [`Selector::derive`]: the balancer keeps it with that list and hands it to every pick over
/// the list in [`Request::derived`]. Reading it there costs a pick nothing beyond a type check
/// — no load of a shared slot, no reference count — where a [`PerList`](super::PerList) costs
/// one lock-free load per pick.
pub type Derived = Arc<dyn Any + Send + Sync>;

/// A new member list, given to [`Selector::members_changed`] (the first arrives as every
/// member joining).
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// The balancer's name.
    pub balancer: &'a str,
    /// The [ids](MemberView::id) of the members that joined (for a balancer: their nodes).
    pub joined: &'a [Arc<str>],
    /// The [ids](MemberView::id) of the members that left (for a balancer: their nodes).
    pub left: &'a [Arc<str>],
    /// All members after the change, sorted by node name (an actor group's: by node name,
    /// then the actor's pid on its node).
    pub members: &'a [MemberView],
    /// The new list's version (see [`Request::version`]).
    pub version: u64,
}

/// Why a member was picked: see [`Selector::explain`].
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The rule that decided, e.g. `"uniform random"`.
    pub rule: String,
    /// Each candidate's [member id](MemberView::id) (its node, for a balancer) and score, where the algorithm scores (lower or higher is better
    /// as the rule says).
    pub scores: Vec<(String, f64)>,
}

/// One balancer's way to pick members, built by [`Algorithm::build`](super::Algorithm::build);
/// its state belongs to that balancer. See the [module docs](super) for when each method is
/// called.
///
/// Selection runs on callers' tasks, concurrently: [`pick`](Self::pick) takes `&self`, must
/// not block, lock, allocate, do I/O or panic.
pub trait Selector: Send + Sync + 'static {
    /// Picks one of `members` (never empty, sorted by node name, one per node — an actor
    /// group's: by node name then pid, several per node, told apart by
    /// [`MemberView::id`]) and returns
    /// its index in `members`.
    ///
    /// Errors: a typed error when no member can be picked, by convention
    /// [`Error::NoEligibleMembers`] (e.g. all weigh 0), which a routed call retries as it
    /// retries an empty pool (see [`Retry`](crate::Retry)). The balancer turns an index out
    /// of range into [`Error::InvalidConfig`] naming `algorithm`.
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error>;

    /// Re-selection: picks one of `members` for another attempt of a call whose earlier
    /// attempt failed or was refused (a retry, a re-send of a call refused unrun) or for a
    /// hedge's second copy. `members` are the balancer's members less those the call tried
    /// (never empty, in the same order as for [`pick`](Self::pick)), asked with
    /// [`Request::UNCACHED`]. Returns an index into `members`.
    ///
    /// Default: [`pick`](Self::pick). A selector whose picks share state across calls
    /// overrides it when that state would skew re-picks or disturb first picks: RoundRobin
    /// re-picks in turn on a position of its own, so re-picks spread evenly over the members
    /// left and the first picks keep their rotation (bench/README.md, "Issue 22: RoundRobin's
    /// re-selection order").
    ///
    /// Errors: as [`pick`](Self::pick).
    fn repick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        self.pick(members, request)
    }

    /// Replica selection: `min(count, members.len())` distinct indices into `members`, the
    /// preferred first. Default: distinct members uniformly at random, drawn from thread-local
    /// entropy (not from [`BuildContext::seed`](super::BuildContext::seed): override it with a
    /// seeded [`Rng`](super::Rng) when replica picks must repeat under a seed).
    ///
    /// Errors: as [`pick`](Self::pick).
    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let _ = request;
        Ok(Rng::Thread.distinct(members.len(), count))
    }

    /// Learns of a new member list (the first arrives as every member joining), before it is
    /// published to pickers; called by one writer at a time.
    fn members_changed(&self, change: &Change<'_>) {
        let _ = change;
    }

    /// What this selector derives from a new member list (a weighted cycle, a hash ring), if
    /// anything: called right after [`members_changed`](Self::members_changed) with the same
    /// change, by the same single writer. The balancer (and the test kit) keeps the value with
    /// the list and hands it to every [`pick`](Self::pick) and
    /// [`pick_many`](Self::pick_many) over that list in [`Request::derived`]; a list that is
    /// no published list (a re-selection that excludes members) comes with none. Default:
    /// nothing.
    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let _ = change;
        None
    }

    /// A selection of `member` ended: called exactly once per pick, when its guard drops,
    /// however the call ended — on whichever thread drops it (a
    /// [`SelectionGuard`](crate::SelectionGuard) may move into another task), and also after
    /// the balancer stopped.
    /// A panic here is caught and logged at ERROR; the counts are released all the same.
    fn released(&self, member: &MemberView) {
        let _ = member;
    }

    /// Whether this selector applies each member's slow-start factor
    /// ([`MemberView::slow_start_factor`]) itself — a cost divided by it, a weight multiplied
    /// by it — so that [`SlowStart`](super::SlowStart) over it does not also skip its picks
    /// of ramping members (the factor would count twice); asked once when slow start's
    /// selector is built. Default `false`: slow start keeps a pick of a member in its window
    /// with probability its factor, else asks this selector again.
    fn applies_slow_start(&self) -> bool {
        false
    }

    /// Whether [`observe`](Self::observe) wants call outcomes; asked once when the balancer
    /// starts. When `false` (default) the call path reads no clock and builds no outcome.
    fn learns(&self) -> bool {
        false
    }

    /// Whether [`observe`](Self::observe) wants [`Cancelled`](super::OutcomeKind::Cancelled)
    /// outcomes too (selections that ended without a result: a dropped
    /// [`SelectionGuard`](crate::SelectionGuard), a routed call dropped or out of time before
    /// it was sent); asked once when the balancer starts, and only read when
    /// [`learns`](Self::learns). When `false`, such a selection is not observed at all: its
    /// release builds no outcome and makes no call of `observe` (about 95 instructions less
    /// per [`SelectionGuard`](crate::SelectionGuard) for `PeakEwma`, bench/README.md). Default
    /// `true`.
    fn observes_cancelled(&self) -> bool {
        true
    }

    /// A routed call or cast of a member ended (see [`Outcome`]); before its
    /// [`released`](Self::released). Called only when [`learns`](Self::learns) is `true`, once
    /// per selection; a selection that ended without a result is
    /// [`Cancelled`](super::OutcomeKind::Cancelled) (observed only when
    /// [`observes_cancelled`](Self::observes_cancelled)).
    /// A panic here is caught and logged at ERROR: the call's reply and the selection's release
    /// do not depend on it.
    fn observe(&self, outcome: &Outcome<'_>) {
        let _ = outcome;
    }

    /// Explains a pick for the DEBUG event `selection explained`: the rule that decided and
    /// each candidate's score. Called only when that event is enabled, so it may allocate.
    /// Default: `"picked"` with the chosen node, no scores.
    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let _ = request;
        Explanation {
            rule: format!(
                "picked {}",
                members.get(chosen).map_or("?", MemberView::node)
            ),
            scores: Vec::new(),
        }
    }
}
