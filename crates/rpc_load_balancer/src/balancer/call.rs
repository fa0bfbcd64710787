//! Balanced `call` and `cast`: select a member, send, and — only when the call could not be
//! handed over (a member that just went away, or one leaving that refused it unrun) — select
//! another. While the pool is empty, wait and select again as the call's [`Retry`] allows,
//! within its timeout. A call that was sent is never sent again.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use tokio::time::Instant;

use super::in_flight::{InFlightToken, OwnedInFlightToken, ServedToken};
use super::shared::BalancerShared;
use super::{Balancer, Members, Selection};
use crate::call::{self, Sent};
use crate::function::RemoteFunction;
use crate::payload;
use crate::retry::retryable;
use crate::routing::OutcomeKind;
use crate::telemetry::RpcTelemetry;
use crate::{Error, Retry, Unavailable};

/// How many members a call may skip because they could not take it without running it.
const MAX_RESELECTIONS: usize = 3;

/// Selects a member for a call or cast, waiting as `retry` allows while there is nobody to
/// send to, until `deadline`; also whether it waited. Errors: as [`BalancerShared::choose`].
async fn choose_with_retry(
    shared: &BalancerShared,
    key: Option<&[u8]>,
    exclude: &[Arc<str>],
    retry: Retry,
    deadline: Instant,
) -> Result<(arc_swap::Guard<Arc<Members>>, usize, bool), Error> {
    let mut attempt = 0u32;
    loop {
        // Subscribed before looking, so a change in between ends the wait at once.
        let mut members = shared.watch();
        match shared.choose(key, exclude) {
            Err(error)
                if retryable(&error)
                    && retry.allows_after(attempt)
                    && Instant::now() < deadline =>
            {
                attempt += 1;
                let wake = deadline.min(crate::deadline::after(retry.jittered()));
                tracing::debug!(balancer = %shared.name, attempt, %error, "nobody to send to; waiting to select again");
                // A membership change ends the wait early; a closed watch (the balancer is
                // gone) is seen by the next attempt.
                let _ = tokio::time::timeout_at(wake, members.changed()).await;
            }
            outcome => return outcome.map(|(members, index)| (members, index, attempt > 0)),
        }
    }
}

/// A balanced call of `F`, built by [`Balancer::call`]. Await it (it implements
/// `IntoFuture`) for `Result<F::Reply, Error>`, or use [`with_node`](Self::with_node).
///
/// The algorithm picks a member; a member on this node runs the call in-process. A call that
/// could not be handed over (the member went away, or is leaving and refused it unrun) goes to
/// another member, at most 3 times; a call that was sent is never sent again. While the pool is
/// empty the call waits as its [`Retry`] allows, within its timeout.
///
/// Errors: [`Error::InvalidConfig`] (`timeout`) for a zero timeout; [`Error::UnknownBalancer`]
/// once the balancer is stopped; [`Error::NoMembers`] (or the algorithm's
/// [`Error::NoEligibleMembers`]) when no member can be picked after the retries;
/// [`Error::Overloaded`] when every member is at the balancer's `max_in_flight_per_member`;
/// [`Error::RequestTimeout`] when the timeout ran out, waiting included; then everything
/// [`Node::call`](crate::Node::call) returns.
#[must_use = "a call does nothing until awaited"]
pub struct BalancedCall<F: RemoteFunction> {
    balancer: Balancer,
    args: F::Args,
    key: Option<Vec<u8>>,
    timeout: Option<Duration>,
    retry: Option<Retry>,
    call_directly: Option<bool>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> BalancedCall<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        Self {
            balancer,
            args,
            key: None,
            timeout: None,
            retry: None,
            call_directly: None,
            function: PhantomData,
        }
    }

    /// `true` runs the call on this node, ignoring the algorithm and the members (the
    /// original's `call_directly?`), with the remote call's errors and timeout; `false` routes
    /// it even when the node's [`NodeConfig::call_directly`](crate::NodeConfig::call_directly)
    /// default is on.
    pub fn call_directly(mut self, directly: bool) -> Self {
        self.call_directly = Some(directly);
        self
    }

    /// How this call retries while the balancer has no member to send to (default: the
    /// balancer's, else the node's [`Retry`]). Waiting counts against the call's timeout.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// The routing key, as bytes (used by key-aware algorithms such as [`HashRing`]; others
    /// ignore it). Default: none.
    ///
    /// [`HashRing`]: crate::HashRing
    pub fn key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.key = Some(key.as_ref().to_vec());
        self
    }

    /// How long to wait for the reply (default: the balancer's, else the node's
    /// `call_timeout`). Zero is refused with [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the call and also returns the node that served it.
    ///
    /// Errors: as awaiting the call.
    pub async fn with_node(self) -> Result<(F::Reply, Arc<str>), Error> {
        let shared = self.balancer.current_shared();
        let mut telemetry = RpcTelemetry::start("call", F::NAME, Some(shared.metrics.balancer()));
        let span = telemetry.span().clone();
        let outcome = self.route(&shared, &mut telemetry).instrument(span).await;
        telemetry.finish(&outcome);
        outcome
    }

    async fn route(
        self,
        shared: &Arc<BalancerShared>,
        telemetry: &mut RpcTelemetry,
    ) -> Result<(F::Reply, Arc<str>), Error> {
        let node = &shared.node;
        let timeout = self
            .timeout
            .or(shared.config.call_timeout)
            .unwrap_or(node.config.call_timeout);
        shared.check_running()?;
        call::check_timeout(timeout)?;
        let deadline = crate::deadline::after(timeout);
        let retry = self
            .retry
            .or(shared.config.retry)
            .unwrap_or(node.config.retry);
        let directly = self.call_directly.unwrap_or(node.config.call_directly);
        if directly || shared.config.algorithm.is_local() {
            let here: Arc<str> = Arc::from(node.name.as_str());
            telemetry.target(&here);
            // Counted until the run has ended, even if this future is dropped first.
            let counted = OwnedInFlightToken::new(shared);
            let abandoned = &shared.abandoned;
            return call::call::<F, _>(node, &here, self.args, timeout, counted, abandoned)
                .await
                .map(|r| (r, here));
        }
        let key = self.key.as_deref();
        // The arguments until they are encoded — a `Payload` is moved into its call, other
        // types are encoded by reference and kept — and a call readied earlier: one that never
        // left, or that a leaving member handed back.
        let mut args = Some(self.args);
        let mut encoded: Option<Vec<u8>> = None;
        let mut waited = false;
        // Members that turned out unable to take the call without running it (the call goes
        // to another member, up to MAX_RESELECTIONS times) or at the in-flight cap.
        let mut exclude: Vec<Arc<str>> = Vec::new();
        let mut reselections = 0;
        loop {
            let (members, index, waited_now) =
                choose_with_retry(shared, key, &exclude, retry, deadline).await?;
            waited |= waited_now;
            // Held across the call: by a full reference, so it doesn't keep one of the
            // thread's few fast arc-swap slots.
            let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
            // Reports how the call ended to a selector that learns (else nothing is built).
            let mut guard = match shared.config.max_in_flight_per_member {
                None => Selection::new(&**shared, members, index),
                Some(limit) if members.as_slice()[index].try_acquire(limit) => {
                    Selection::acquired(&**shared, members, index)
                }
                Some(limit) => {
                    // At the cap: another member under it, or refuse at once.
                    let full = Arc::clone(members.as_slice()[index].node_arc());
                    exclude.push(Arc::clone(&full));
                    let all_full = members
                        .as_slice()
                        .iter()
                        .all(|m| exclude.iter().any(|n| **n == *m.node()));
                    if all_full {
                        return Err(Error::Overloaded {
                            balancer: shared.name.clone(),
                            node: full.to_string(),
                            limit,
                        });
                    }
                    continue;
                }
            };
            let member = guard.member();
            telemetry.target(member.node_arc());
            // What is left of the call's timeout after waiting for members, if it waited.
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                let timed_out = Error::RequestTimeout {
                    node: member.node().to_string(),
                    timeout,
                };
                guard.report(|| OutcomeKind::Timeout);
                return Err(timed_out);
            }
            // (A re-selected call keeps its deadline too.)
            let timeout = if waited || reselections > 0 {
                remaining
            } else {
                timeout
            };
            if member.is_local() {
                if let Some(function) = node.registry.get_typed::<F>() {
                    let args = match (args.take(), encoded.take()) {
                        (Some(args), _) => args,
                        (None, Some(bytes)) => call::decode_args::<F>(bytes)?,
                        (None, None) => return Err(call::args_gone::<F>()),
                    };
                    // Counted until the run has ended, even if this future is dropped first.
                    let serving = ServedToken::new(shared);
                    let balancer = Some(shared.name.as_str());
                    let abandoned = &shared.abandoned;
                    let served = call::call_local_capped(
                        node, balancer, function, args, timeout, serving, abandoned,
                    )
                    .await
                    .map(|reply| (reply, Arc::clone(member.node_arc())));
                    guard.report(|| OutcomeKind::of(&served));
                    return served;
                }
            }
            let balancer = Some(shared.name.as_str());
            let bytes = if let Some(bytes) = encoded.take() {
                call::reencode::<F>(node, balancer, bytes, timeout)?
            } else if payload::is_payload::<F::Args>() {
                match args.take() {
                    Some(owned) => call::encode_owned::<F>(node, balancer, owned, timeout)?,
                    None => return Err(call::args_gone::<F>()),
                }
            } else {
                match &args {
                    Some(kept) => call::encode::<F>(node, balancer, kept, timeout)?,
                    None => return Err(call::args_gone::<F>()),
                }
            };
            match call::send_encoded::<F>(member.actor(), member.node(), bytes, timeout).await {
                Sent::Replied(result) => {
                    let result = result.map(|reply| (reply, Arc::clone(member.node_arc())));
                    guard.report(|| OutcomeKind::of(&result));
                    return result;
                }
                Sent::Unsent((bytes, _id)) if reselections < MAX_RESELECTIONS => {
                    // The member went away before the call left: pick another.
                    reselections += 1;
                    exclude.push(Arc::clone(member.node_arc()));
                    encoded = Some(bytes);
                }
                Sent::Refused(_, handed_back)
                    if reselections < MAX_RESELECTIONS
                        && (handed_back.is_some() || args.is_some()) =>
                {
                    // The member is leaving (draining) or of another wire version and did not
                    // run it: pick another.
                    reselections += 1;
                    exclude.push(Arc::clone(member.node_arc()));
                    encoded = handed_back;
                }
                Sent::Dropped => {
                    // The call may have run (the node went away, or the member actor stopped
                    // while serving it): never sent again.
                    let lost: Result<_, Error> = Err(Error::ServiceUnavailable {
                        node: member.node().to_string(),
                        reason: Unavailable::ConnectionLost,
                    });
                    guard.report(|| OutcomeKind::of(&lost));
                    return lost;
                }
                Sent::Unsent(_) => {
                    let unsent: Result<_, Error> = Err(Error::ServiceUnavailable {
                        node: member.node().to_string(),
                        reason: Unavailable::Disconnected,
                    });
                    guard.report(|| OutcomeKind::of(&unsent));
                    return unsent;
                }
                Sent::Refused(error, _) => {
                    let refused = Err(error);
                    guard.report(|| OutcomeKind::of(&refused));
                    return refused;
                }
            }
        }
    }
}

impl<F: RemoteFunction> IntoFuture for BalancedCall<F> {
    type Output = Result<F::Reply, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.with_node().await.map(|(reply, _node)| reply) })
    }
}

/// A balanced cast of `F`, built by [`Balancer::cast`]. Await it (it implements `IntoFuture`)
/// for `Result<(), Error>`: it resolves once the cast is handed to the chosen member (or to
/// this node's endpoint); what happens then is only logged on the node that runs it. Casts
/// are not capped by `max_in_flight_per_member`.
///
/// Errors: [`Error::InvalidConfig`] (`timeout`) for a zero timeout; [`Error::UnknownBalancer`]
/// once the balancer is stopped; [`Error::NoMembers`] (or the algorithm's
/// [`Error::NoEligibleMembers`]) when no member can be picked after the retries; then
/// everything [`Node::cast`](crate::Node::cast) returns.
#[must_use = "a cast does nothing until awaited"]
pub struct BalancedCast<F: RemoteFunction> {
    balancer: Balancer,
    args: F::Args,
    key: Option<Vec<u8>>,
    timeout: Option<Duration>,
    retry: Option<Retry>,
    call_directly: Option<bool>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> BalancedCast<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        Self {
            balancer,
            args,
            key: None,
            timeout: None,
            retry: None,
            call_directly: None,
            function: PhantomData,
        }
    }

    /// `true` runs the cast on this node, ignoring the algorithm and the members; `false`
    /// routes it even when the node's
    /// [`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on.
    pub fn call_directly(mut self, directly: bool) -> Self {
        self.call_directly = Some(directly);
        self
    }

    /// How this cast retries while the balancer has no member to send to (default: the
    /// balancer's, else the node's [`Retry`]).
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// The longest this cast waits for a member to send to when retrying (default: the
    /// balancer's, else the node's `call_timeout`). Zero is refused with
    /// [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The routing key, as bytes (used by key-aware algorithms such as [`HashRing`]; others
    /// ignore it). Default: none.
    ///
    /// [`HashRing`]: crate::HashRing
    pub fn key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.key = Some(key.as_ref().to_vec());
        self
    }

    async fn route(
        self,
        shared: &Arc<BalancerShared>,
        telemetry: &mut RpcTelemetry,
    ) -> Result<(), Error> {
        let node = &shared.node;
        shared.check_running()?;
        let timeout = self
            .timeout
            .or(shared.config.call_timeout)
            .unwrap_or(node.config.call_timeout);
        call::check_timeout(timeout)?;
        let deadline = crate::deadline::after(timeout);
        let retry = self
            .retry
            .or(shared.config.retry)
            .unwrap_or(node.config.retry);
        let directly = self.call_directly.unwrap_or(node.config.call_directly);
        if directly || shared.config.algorithm.is_local() {
            let here: Arc<str> = Arc::from(node.name.as_str());
            telemetry.target(&here);
            let _counted = InFlightToken::new(shared);
            return call::cast::<F>(node, &here, &self.args);
        }
        let key = self.key.as_deref();
        let mut exclude: Vec<Arc<str>> = Vec::new();
        loop {
            let (members, index, _) =
                choose_with_retry(shared, key, &exclude, retry, deadline).await?;
            // Held across the call: by a full reference, so it doesn't keep one of the
            // thread's few fast arc-swap slots.
            let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
            let mut guard = Selection::new(&**shared, members, index);
            let member = guard.member();
            telemetry.target(member.node_arc());
            let sent = call::cast_endpoint::<F>(
                node,
                member.actor(),
                member.node(),
                Some(&shared.name),
                &self.args,
            );
            match sent {
                Err(Error::ServiceUnavailable {
                    reason: Unavailable::Disconnected,
                    ..
                }) if exclude.len() < MAX_RESELECTIONS => {
                    exclude.push(Arc::clone(member.node_arc()));
                }
                other => {
                    // (The latency of a cast: from the pick to its hand-over.)
                    guard.report(|| OutcomeKind::of(&other));
                    return other;
                }
            }
        }
    }
}

impl<F: RemoteFunction> IntoFuture for BalancedCast<F> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let shared = self.balancer.current_shared();
            let mut telemetry =
                RpcTelemetry::start("cast", F::NAME, Some(shared.metrics.balancer()));
            let span = telemetry.span().clone();
            let outcome = self.route(&shared, &mut telemetry).instrument(span).await;
            telemetry.finish(&outcome);
            outcome
        })
    }
}
