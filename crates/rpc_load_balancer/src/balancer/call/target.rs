//! Where a call or cast goes: its [`Target`] (a node, a balancer's selection, a random node
//! matching a filter), checked and resolved into a [`Route`], and each attempt's
//! [`Attempt`] — the node, whether it runs here or is sent (decided in one place,
//! [`Route::destination`]), and what counts it for a drain.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::options::{CallOptions, Resolved};
use super::telemetry::Telemetry;
use crate::balancer::in_flight::{OwnedInFlightToken, ServedToken};
use crate::balancer::shared::BalancerShared;
use crate::balancer::{Balancer, BalancerLookup, Selection};
use crate::filter::NodeFilter;
use crate::function::{RemoteFunction, Signal};
use crate::node::shared::NodeShared;
use crate::routing::LoadReport;
use crate::routing::OutcomeKind;
use crate::wire::RpcMessage;
use crate::{call, Error};

/// Where a call or cast is to go.
pub(crate) enum Target {
    /// The node of this full name (a direct call; this node's own name calls itself).
    Node(Arc<str>),
    /// A member this balancer selects.
    Balancer(Arc<BalancerShared>),
    /// A connected node matching this filter, picked at random (or this node, when it
    /// matches).
    RandomNode(NodeFilter),
}

/// A call (waits for its reply) or a cast (handed over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Waits for the reply.
    Call,
    /// Resolves once handed over.
    Cast,
}

impl Kind {
    /// The `type` label of its telemetry.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Call => "call",
            Kind::Cast => "cast",
        }
    }
}

/// What counts one attempt for a drain until it has ended: a local run holds it in its task.
pub(crate) enum Counted {
    /// Nothing: a direct call, or a random-node call no balancer tracks.
    Nothing,
    /// A balancer's in-flight total: a routed call run here (`call_directly`, a local
    /// algorithm) or a random-node call tracked by `load_balancer`.
    InFlight(OwnedInFlightToken),
    /// A balancer's served total: a routed call that a member on this node serves.
    Served(ServedToken),
}

impl crate::endpoint::Held for Counted {
    fn balancer_in_flight(&self) -> Option<usize> {
        match self {
            Counted::Served(token) => token.balancer_in_flight(),
            Counted::Nothing | Counted::InFlight(_) => None,
        }
    }
}

impl Counted {
    /// What cancels a run counted so when the drain of its count gives up: the balancer's
    /// signal, or `node`'s (its shutdown gave up) for an uncounted run.
    pub(crate) fn abandoned<'a>(&'a self, node: &'a Arc<Signal>) -> &'a Arc<Signal> {
        match self {
            Counted::Nothing => node,
            Counted::InFlight(token) => token.abandoned(),
            Counted::Served(token) => token.abandoned(),
        }
    }
}

/// Where one attempt goes.
pub(crate) enum Destination<F> {
    /// Run in this process: a call of a function this node registered with type `F`.
    Here(Arc<F>),
    /// Send to this actor: a node's endpoint.
    Actor(ActorRef<RpcMessage>),
    /// Send to the selected member's actor.
    Member,
}

/// One attempt of a call or cast.
pub(crate) struct Attempt<'r, F> {
    /// The node it goes to (this node's name for a run here).
    pub(crate) node: Arc<str>,
    /// Run here, or sent to whom.
    pub(crate) destination: Destination<F>,
    /// The routing balancer, for the call's header (`None`: direct).
    pub(crate) balancer: Option<&'r str>,
    /// The selection of a routed attempt: released when the attempt ends.
    pub(crate) selection: Option<Selection>,
    /// What counts it for a drain: held until the reply, or moved into a run here.
    pub(crate) counted: Counted,
    /// The time it has: the call's timeout, or what is left of it after waiting or a
    /// previous attempt.
    pub(crate) timeout: Duration,
    /// When that time is up: the call's deadline.
    pub(crate) deadline: Instant,
    /// The serving node's load report its reply carried, if any.
    pub(crate) load: Option<LoadReport>,
}

impl<F> Attempt<'_, F> {
    /// The actor to send to; `None` for a run here.
    pub(crate) fn actor(&self) -> Option<&ActorRef<RpcMessage>> {
        match &self.destination {
            Destination::Here(_) => None,
            Destination::Actor(actor) => Some(actor),
            Destination::Member => self.selection.as_ref().map(|s| s.member().actor()),
        }
    }

    /// Reports `error` as the attempt's outcome (see [`Self::report`]) and returns it.
    pub(crate) fn fail(&mut self, error: Error) -> Error {
        if let Some(selection) = &mut self.selection {
            selection.report(
                self.timeout,
                || OutcomeKind::of_error(&error),
                self.load.as_ref(),
            );
        }
        error
    }

    /// Reports the attempt's outcome to a selector that learns (routed attempts only).
    pub(crate) fn report<T>(&mut self, outcome: &Result<T, Error>) {
        if let Some(selection) = &mut self.selection {
            selection.report(
                self.timeout,
                || OutcomeKind::of(outcome),
                self.load.as_ref(),
            );
        }
    }
}

/// A call's target, checked, with its options resolved.
pub(crate) struct Route<'r> {
    pub(super) node: &'r Arc<NodeShared>,
    target: &'r Target,
    pub(super) key: Option<&'r [u8]>,
    pub(super) options: Resolved,
    pub(super) deadline: Instant,
    /// The balancer tracking a random-node call.
    pub(super) tracking: Option<Balancer>,
}

impl<'r> Route<'r> {
    /// Checks the call and resolves its options.
    ///
    /// Errors: [`Error::InvalidConfig`] (`timeout`) for a zero timeout;
    /// [`Error::UnknownBalancer`] for a stopped routing or tracking balancer (or a tracking
    /// one not started here); [`Error::ServiceUnavailable`] (`NodeStopped`) for a random-node
    /// call on a node shut down.
    pub(crate) fn new(
        node: &'r Arc<NodeShared>,
        target: &'r Target,
        options: &'r CallOptions,
    ) -> Result<Self, Error> {
        let resolved = options.resolve(node, target);
        let mut tracking = None;
        match target {
            Target::Node(_) => call::check_timeout(resolved.timeout)?,
            Target::Balancer(shared) => {
                shared.check_running()?;
                call::check_timeout(resolved.timeout)?;
            }
            Target::RandomNode(_) => {
                call::check_timeout(resolved.timeout)?;
                node.check_running(&node.name)?;
                if let Some(name) = &options.load_balancer {
                    let balancer = node.balancers.get(name)?;
                    balancer.shared().check_running()?;
                    tracking = Some(balancer);
                }
            }
        }
        Ok(Self {
            node,
            target,
            key: options.key.as_deref(),
            options: resolved,
            deadline: crate::deadline::after(resolved.timeout),
            tracking,
        })
    }

    /// Whether an attempt that could not be handed over may go to another node: a routed
    /// call, selected by the algorithm.
    pub(crate) fn reselects(&self) -> bool {
        matches!(self.target, Target::Balancer(_)) && !self.here_by_choice()
    }

    /// The routing balancer, if this call may be retried after a failure of the retryable
    /// kind: an `idempotent` call it selects for, with a retry budget that is not
    /// [`none`](crate::RetryBudget::none).
    pub(crate) fn retry_budget(&self, idempotent: bool) -> Option<&'r Arc<BalancerShared>> {
        match self.target {
            Target::Balancer(shared)
                if idempotent && self.reselects() && !shared.retry_budget.is_off() =>
            {
                Some(shared)
            }
            _ => None,
        }
    }

    /// The routing balancer and its hedging state, if this call may be hedged: an
    /// `idempotent` call it selects for, with a [`HedgePolicy`](crate::HedgePolicy), that did
    /// not turn hedging off (`hedge`: the call's own say).
    pub(crate) fn hedging(
        &self,
        idempotent: bool,
        hedge: Option<bool>,
    ) -> Option<(&'r Arc<BalancerShared>, &'r crate::retry::Hedging)> {
        match self.target {
            Target::Balancer(shared) if idempotent && hedge != Some(false) && self.reselects() => {
                shared.hedging.as_deref().map(|hedging| (shared, hedging))
            }
            _ => None,
        }
    }

    /// Whether no member is left to take the call: every member of the routing balancer is
    /// in `exclude` (always, for a call that is not routed).
    pub(crate) fn nobody_else(&self, exclude: &[Arc<str>]) -> bool {
        match self.target {
            Target::Balancer(shared) => shared
                .members()
                .as_slice()
                .iter()
                .all(|m| exclude.iter().any(|node| **node == *m.node())),
            _ => true,
        }
    }

    /// Whether a routed call runs here without selecting (`call_directly`, `CallDirect`).
    fn here_by_choice(&self) -> bool {
        match self.target {
            Target::Balancer(shared) => self.options.directly || shared.config.algorithm.is_local(),
            _ => false,
        }
    }

    /// `error` as the caller sees it: a [`Error::RequestTimeout`] carries the call's own
    /// timeout, whatever the attempt that timed out had left (a re-sent or retried one).
    pub(super) fn callers_timeout(&self, error: Error) -> Error {
        match error {
            Error::RequestTimeout { node, .. } => Error::RequestTimeout {
                node,
                timeout: self.options.timeout,
            },
            other => other,
        }
    }

    /// What is left of the call's time, for an attempt that waited or follows another.
    ///
    /// Errors: [`Error::RequestTimeout`] about `node` when nothing is left.
    pub(super) fn time_left(&self, node: &str) -> Result<Duration, Error> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::RequestTimeout {
                node: node.to_string(),
                timeout: self.options.timeout,
            });
        }
        Ok(left)
    }

    /// The next attempt: where it goes, waiting as the retry allows while there is nobody to
    /// send to; `exclude` lists the nodes that could not take the call, and grows with those
    /// at the balancer's in-flight cap. `again`: a previous attempt was not handed over.
    /// `reserved`: a selection made beforehand, taken by a routed attempt that selects.
    ///
    /// Errors: those of the balancer's selection ([`Error::NoMembers`], ...),
    /// [`Error::Overloaded`], [`Error::NoMatchingNodes`], [`Error::RequestTimeout`] (the time
    /// was used up waiting), [`Error::ServiceUnavailable`] (this node stopped; no endpoint
    /// for the node), [`Error::UnknownBalancer`].
    pub(crate) async fn choose<F: RemoteFunction>(
        &self,
        kind: Kind,
        exclude: &mut Vec<Arc<str>>,
        again: bool,
        reserved: &mut Option<Selection>,
        telemetry: &mut Telemetry,
    ) -> Result<Attempt<'r, F>, Error> {
        let node = self.node;
        match self.target {
            Target::Node(name) => {
                let here = **name == *node.name;
                let destination = self.destination(kind, name, here, false)?;
                Ok(self.attempt(name, destination, Counted::Nothing, self.options.timeout))
            }
            Target::Balancer(shared) if self.here_by_choice() => {
                let here = Arc::clone(&node.transport.own_name);
                telemetry.target(&here);
                // Counted until the run has ended, even if the caller's future is dropped first.
                let counted = Counted::InFlight(OwnedInFlightToken::new(shared));
                let destination = self.destination(kind, &here, true, false)?;
                Ok(self.attempt(&here, destination, counted, self.options.timeout))
            }
            Target::Balancer(shared) => {
                self.select(shared, kind, exclude, again, reserved, telemetry)
                    .await
            }
            Target::RandomNode(filter) => self.random(filter, kind, telemetry).await,
        }
    }

    /// The one place that decides whether an attempt runs here: a call to this node (`here`)
    /// of a function registered here with type `F` runs in-process; anything else is sent —
    /// to the selected member (`to_member`), else to `node`'s endpoint.
    ///
    /// Errors: [`Error::ServiceUnavailable`] when this node is shut down (a run here) or
    /// there is no endpoint for `node`.
    pub(super) fn destination<F: RemoteFunction>(
        &self,
        kind: Kind,
        node: &str,
        here: bool,
        to_member: bool,
    ) -> Result<Destination<F>, Error> {
        let transport = &self.node.transport;
        if here && !to_member {
            transport.check_running(node)?;
        }
        if here && kind == Kind::Call {
            if let Some(function) = transport.registry.get_typed::<F>() {
                return Ok(Destination::Here(function));
            }
        }
        match to_member {
            true => Ok(Destination::Member),
            false => Ok(Destination::Actor(transport.endpoint_of(node)?)),
        }
    }

    /// An attempt to `node` not tracked by a balancer.
    pub(super) fn attempt<F>(
        &self,
        node: &Arc<str>,
        destination: Destination<F>,
        counted: Counted,
        timeout: Duration,
    ) -> Attempt<'r, F> {
        Attempt {
            node: Arc::clone(node),
            destination,
            balancer: None,
            selection: None,
            counted,
            timeout,
            deadline: self.deadline,
            load: None,
        }
    }
}
