//! Balanced `call` and `cast`: select a member, send, and — only when the send failed before
//! anything left this node (a member that just went away) — select once more. A call that was
//! sent is never sent again.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::in_flight::{InFlightToken, ServedToken};

/// How many members a call may skip because they could not take it without running it.
const MAX_RESELECTIONS: usize = 3;
use super::shared::BalancerShared;
use super::{Balancer, SelectionGuard};
use crate::call::{self, Sent};
use crate::function::RemoteFunction;
use crate::telemetry::RpcTelemetry;
use crate::{Error, Unavailable};

/// A balanced call of `F`, built by [`Balancer::call`]. Await it.
#[must_use = "a call does nothing until awaited"]
pub struct BalancedCall<F: RemoteFunction> {
    balancer: Balancer,
    args: F::Args,
    key: Option<Vec<u8>>,
    timeout: Option<Duration>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> BalancedCall<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        Self {
            balancer,
            args,
            key: None,
            timeout: None,
            function: PhantomData,
        }
    }

    /// The routing key, as bytes (used by key-aware algorithms).
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
        let shared = Arc::clone(self.balancer.shared());
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
            .unwrap_or(node.call_timeout);
        shared.check_running()?;
        call::check_timeout(timeout)?;
        if shared.config.algorithm.is_local() {
            let here: Arc<str> = Arc::from(node.name.as_str());
            telemetry.target(&here);
            let _counted = InFlightToken::new(shared);
            return call::call::<F>(node, &here, self.args, timeout)
                .await
                .map(|r| (r, here));
        }
        let key = self.key.as_deref();
        let mut encoded = None;
        // Members that turned out unable to take the call without running it: the call goes
        // to another member, up to MAX_RESELECTIONS times.
        let mut exclude: Vec<Arc<str>> = Vec::new();
        loop {
            let (members, index) = shared.choose(key, &exclude)?;
            // Held across the call: by a full reference, so it doesn't keep one of the
            // thread's few fast arc-swap slots.
            let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
            let guard = SelectionGuard::new(shared, members, index);
            let member = guard.member();
            telemetry.target(member.node_arc());
            if member.is_local() {
                if let Some(function) = node.registry.get_typed::<F>() {
                    let _serving = ServedToken::new(shared);
                    let served = call::call_local(node, function, self.args, timeout).await;
                    return served.map(|reply| (reply, Arc::clone(member.node_arc())));
                }
            }
            let bytes = match encoded.take() {
                Some(bytes) => bytes,
                None => call::encode::<F>(node, Some(&shared.name), &self.args, timeout)?,
            };
            match call::send_encoded::<F>(member.actor(), member.node(), bytes, timeout).await {
                Sent::Replied(result) => {
                    return result.map(|reply| (reply, Arc::clone(member.node_arc())))
                }
                Sent::Unsent(bytes) if exclude.len() < MAX_RESELECTIONS => {
                    // The member went away before the call left: pick another.
                    exclude.push(Arc::clone(member.node_arc()));
                    encoded = Some(bytes);
                }
                Sent::Refused if exclude.len() < MAX_RESELECTIONS => {
                    // The member is leaving (draining) and did not run it: pick another.
                    exclude.push(Arc::clone(member.node_arc()));
                }
                Sent::Unsent(_) | Sent::Refused => {
                    return Err(Error::ServiceUnavailable {
                        node: member.node().to_string(),
                        reason: Unavailable::Disconnected,
                    })
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

/// A balanced cast of `F`, built by [`Balancer::cast`]. Await it.
#[must_use = "a cast does nothing until awaited"]
pub struct BalancedCast<F: RemoteFunction> {
    balancer: Balancer,
    args: F::Args,
    key: Option<Vec<u8>>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> BalancedCast<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        Self {
            balancer,
            args,
            key: None,
            function: PhantomData,
        }
    }

    /// The routing key, as bytes.
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
        if shared.config.algorithm.is_local() {
            let here: Arc<str> = Arc::from(node.name.as_str());
            telemetry.target(&here);
            let _counted = InFlightToken::new(shared);
            return call::cast::<F>(node, &here, &self.args);
        }
        let key = self.key.as_deref();
        let mut exclude: Vec<Arc<str>> = Vec::new();
        loop {
            let (members, index) = shared.choose(key, &exclude)?;
            // Held across the call: by a full reference, so it doesn't keep one of the
            // thread's few fast arc-swap slots.
            let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
            let guard = SelectionGuard::new(shared, members, index);
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
                other => return other,
            }
        }
    }
}

impl<F: RemoteFunction> IntoFuture for BalancedCast<F> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let shared = Arc::clone(self.balancer.shared());
            let mut telemetry =
                RpcTelemetry::start("cast", F::NAME, Some(shared.metrics.balancer()));
            let span = telemetry.span().clone();
            let outcome = self.route(&shared, &mut telemetry).instrument(span).await;
            telemetry.finish(&outcome);
            outcome
        })
    }
}
