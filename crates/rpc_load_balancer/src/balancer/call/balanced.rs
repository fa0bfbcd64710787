//! The routed builders, [`BalancedCall`] and [`BalancedCast`] (made by
//! [`Balancer::call`] and [`Balancer::cast`]): the one dispatch path with the balancer's
//! selection as their target.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;

use super::dispatch;
use super::forward_reply::{forward, ForwardedReply};
use super::options::{option_setters, CallOptions};
use super::target::Target;
use crate::balancer::{Balancer, BalancerShared, Selection};
use crate::function::RemoteFunction;
use crate::{Error, Retry, Unavailable};

/// The option setters of a routed builder (over its field `routed`): `$what` (`"call"` or
/// `"cast"`) names it in their docs, followed by the doc of its `timeout`.
macro_rules! routed_setters {
    ($what:literal; $(#[$timeout:meta])*) => {
        option_setters! {
            routed;
            #[doc = concat!(
                "`true` runs the ", $what, " on this node, ignoring the algorithm and the ",
                "members (the original's `call_directly?`), as a ", $what, " to this node ",
                "runs; `false` routes it even when the node's ",
                "[`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on."
            )]
            fn call_directly(directly: bool) => call_directly = directly;

            #[doc = concat!(
                "How this ", $what, " retries while the balancer has no member to send to ",
                "(default: the balancer's, else the node's [`Retry`]). Waiting counts against ",
                "its timeout."
            )]
            fn retry(retry: Retry) => retry = retry;

            /// The routing key, as bytes (used by key-aware algorithms such as [`HashRing`];
            /// others ignore it). Default: none.
            ///
            /// [`HashRing`]: crate::HashRing
            fn key(key: impl AsRef<[u8]>) => key = key.as_ref().to_vec();

            $(#[$timeout])*
            fn timeout(timeout: Duration) => timeout = timeout;
        }
    };
}

/// A balanced call of `F`, built by [`Balancer::call`]. Await it (it implements
/// `IntoFuture`) for `Result<F::Reply, Error>`, or use [`with_node`](Self::with_node).
///
/// The algorithm picks a member; a member on this node runs the call in-process. A call that
/// could not be handed over (the member went away, or is leaving and refused it unrun) goes to
/// another member, at most 3 times. A call that was sent is never sent again — unless its
/// function is idempotent ([`RemoteFunction::IDEMPOTENT`], [`idempotent`](Self::idempotent)):
/// then a failure of the retryable kind (connection lost, member unreachable, pushback) is
/// retried on another member as the balancer's [`RetryBudget`](crate::RetryBudget) allows,
/// within the call's timeout. While the pool is empty the call waits as its [`Retry`] allows,
/// within its timeout.
///
/// Errors: [`Error::InvalidConfig`] (`timeout`) for a zero timeout; [`Error::UnknownBalancer`]
/// once the balancer is stopped; [`Error::NoMembers`] (or the algorithm's
/// [`Error::NoEligibleMembers`]) when no member can be picked after the retries;
/// [`Error::Overloaded`] when every member is at the balancer's `max_in_flight_per_member`;
/// [`Error::RequestTimeout`] when the timeout ran out, waiting included; then everything
/// [`Node::call`](crate::Node::call) returns.
#[must_use = "a call does nothing until awaited"]
pub struct BalancedCall<F: RemoteFunction> {
    routed: Routed<F>,
}

impl<F: RemoteFunction> BalancedCall<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        let routed = Routed::new(balancer, args);
        Self { routed }
    }

    routed_setters! {
        "call";
        /// How long to wait for the reply (default: the balancer's, else the node's
        /// `call_timeout`). Zero is refused with [`Error::InvalidConfig`] (`timeout`).
    }

    option_setters! {
        routed;
        /// Whether this call may run twice (default: its function's
        /// [`RemoteFunction::IDEMPOTENT`], itself `false` by default). `true` lets the call
        /// be sent again, to a member it has not tried, after the connection was lost, the
        /// member was unreachable or it pushed back, as the balancer's
        /// [`RetryBudget`](crate::RetryBudget) allows and within the call's timeout; `false`
        /// never sends it twice once it may have run. See docs/how-to/retries.md.
        fn idempotent(idempotent: bool) => idempotent = idempotent;

        /// Whether this call may be hedged (default: as its balancer's
        /// [`BalancerConfig::hedge`](crate::BalancerConfig::hedge) says). `false` never sends
        /// it a second time while the first copy is running; `true` lets the balancer's
        /// [`HedgePolicy`](crate::HedgePolicy) hedge it — only if the call is idempotent (a
        /// call that is not is never sent twice) and the balancer has a policy (without one
        /// there is no delay or budget to hedge by, and `true` changes nothing). See
        /// docs/how-to/deadlines-and-overload.md.
        fn hedge(hedge: bool) => hedge = hedge;
    }

    /// Runs the call and also returns the node that served it.
    ///
    /// Errors: as awaiting the call.
    pub async fn with_node(self) -> Result<(F::Reply, Arc<str>), Error> {
        self.routed.call().await
    }

    /// Runs the call on a task of its own and delivers its outcome to `receiver` as the
    /// message `map(result)` (`result` as awaiting the call gives it), instead of being
    /// awaited — the shape of ractor's `call_and_forward`: an actor's handler starts the call
    /// and returns at once, and the reply arrives as one of the actor's next messages.
    ///
    /// The call is dropped — and so cancelled, on its serving node too — if `receiver` stops
    /// before it ends. Returns at once with the [`ForwardedReply`] handle (drop it to let the
    /// call run on; [`ForwardedReply::outcome`] says whether the message was delivered).
    /// Needs a tokio runtime (ractor's); without one `receiver` gets
    /// `map(Err(`[`Error::NodeNotRunning`]`))` at once. A panic in `map` drops the outcome
    /// ([`ForwardOutcome::Panicked`](crate::ForwardOutcome::Panicked)); a receiver already
    /// draining or stopped gets no call sent.
    ///
    /// ```
    /// use rpc_load_balancer::{Balancer, Error, RemoteFunction};
    /// # use rpc_load_balancer::FunctionError;
    /// # struct Square;
    /// # impl RemoteFunction for Square {
    /// #     const NAME: &'static str = "doc.square";
    /// #     type Args = u32;
    /// #     type Reply = u64;
    /// #     async fn call(&self, n: u32) -> Result<u64, FunctionError> { Ok(u64::from(n).pow(2)) }
    /// # }
    ///
    /// #[derive(ractor_cluster::RactorMessage)]
    /// enum WorkerMsg {
    ///     Start(u32),
    ///     Squared(Result<u64, Error>),
    /// }
    ///
    /// // Inside a `handle` of an actor whose messages are `WorkerMsg`:
    /// fn on_start(balancer: &Balancer, myself: &ractor::ActorRef<WorkerMsg>, n: u32) {
    ///     // Returns at once; `WorkerMsg::Squared` arrives later in the mailbox.
    ///     balancer
    ///         .call::<Square>(n)
    ///         .forward_to(myself, WorkerMsg::Squared);
    /// }
    /// ```
    pub fn forward_to<T, M>(self, receiver: &ActorRef<T>, map: M) -> ForwardedReply
    where
        T: ractor::Message,
        M: FnOnce(Result<F::Reply, Error>) -> T + Send + 'static,
    {
        forward(self.into_future(), receiver, map)
    }

    /// The call, sent through `reserved` (see `Routed::call_reserved`).
    #[cfg(feature = "tower")]
    pub(crate) async fn call_reserved(
        self,
        reserved: Option<(Arc<BalancerShared>, Selection)>,
    ) -> Result<F::Reply, Error> {
        let (reply, _node) = self.routed.call_reserved(reserved).await?;
        Ok(reply)
    }
}

/// What a routed call or cast holds until it is awaited.
struct Routed<F: RemoteFunction> {
    balancer: Balancer,
    args: F::Args,
    options: CallOptions,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> Routed<F> {
    fn new(balancer: Balancer, args: F::Args) -> Self {
        Self {
            balancer,
            args,
            options: CallOptions::default(),
            function: PhantomData,
        }
    }

    /// Runs it as a call, on the balancer this handle stands for now: the reply and the node
    /// that served it.
    async fn call(self) -> Result<(F::Reply, Arc<str>), Error> {
        self.call_reserved(None).await
    }

    /// As [`Self::call`], sent through `reserved` — a selection made beforehand by the
    /// balancer state it names — if that is still the balancer this handle stands for (else
    /// the reservation is released and the call selects).
    async fn call_reserved(
        self,
        reserved: Option<(Arc<BalancerShared>, Selection)>,
    ) -> Result<(F::Reply, Arc<str>), Error> {
        let target = Target::Balancer(self.balancer.current_shared());
        let Target::Balancer(shared) = &target else {
            return Err(not_routed(&self.balancer));
        };
        let reserved = reserved
            .filter(|(by, _)| Arc::ptr_eq(by, shared))
            .map(|(_, selection)| selection);
        dispatch::call_reserved::<F>(&shared.node, &target, &self.options, self.args, reserved)
            .await
    }

    /// Sends it as a cast, on the balancer this handle stands for now.
    async fn cast(self) -> Result<(), Error> {
        let target = Target::Balancer(self.balancer.current_shared());
        let Target::Balancer(shared) = &target else {
            return Err(not_routed(&self.balancer));
        };
        dispatch::cast::<F>(&shared.node, &target, &self.options, self.args).await?;
        Ok(())
    }
}

/// (Not reached: a routed target.)
fn not_routed(balancer: &Balancer) -> Error {
    Error::ServiceUnavailable {
        node: balancer.name().to_string(),
        reason: Unavailable::NoEndpoint,
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
    routed: Routed<F>,
}

impl<F: RemoteFunction> BalancedCast<F> {
    pub(crate) fn new(balancer: Balancer, args: F::Args) -> Self {
        let routed = Routed::new(balancer, args);
        Self { routed }
    }

    routed_setters! {
        "cast";
        /// The longest this cast waits for a member to send to when retrying (default: the
        /// balancer's, else the node's `call_timeout`). Zero is refused with
        /// [`Error::InvalidConfig`] (`timeout`).
    }
}

impl<F: RemoteFunction> IntoFuture for BalancedCast<F> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.routed.cast())
    }
}
