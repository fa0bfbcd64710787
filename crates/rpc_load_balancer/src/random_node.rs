//! Random-node helpers (the original's `call_on_random_node` / `cast_on_random_node`): run a
//! function on some connected node whose name matches a [`NodeFilter`], without a balancer.
//!
//! 1. With `call_directly` (per call, else [`NodeConfig::call_directly`]), or when **this**
//!    node matches the filter, the call runs here — with the remote call's error contract and
//!    timeout (it is a direct [`Node::call`] to this node's own name).
//! 2. Otherwise the candidates are the connected peers ([`Node::nodes`]) that serve rpc and
//!    match the filter, this node's
//!    [`excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns) applied (see
//!    [`filter::matches`]; a [label filter](NodeFilter::label) against each peer's labels as
//!    learnt, [`filter::matches_labeled`]). While there are none, the call waits as its
//!    [`Retry`] allows — asynchronously, jittered, ending early when a peer comes or goes (or
//!    a peer's labels become known), never past the call's
//!    timeout — and then fails with [`Error::NoMatchingNodes`]. Otherwise one candidate is
//!    picked uniformly at random and gets a direct [`Node::call`] (resp. [`Node::cast`]) with
//!    what is left of the timeout. A call that was sent is never sent again.
//!
//! Telemetry is the direct path's: one `rpc_load_balancer.rpc` span and its metrics per call,
//! with `node` = the node that ran it and an empty `load_balancer`. A call that fails or is
//! dropped before it has a node is recorded once too, with `node` empty, the tracking
//! balancer's name if one was given, and the error's status or `cancelled`.
//!
//! [`NodeConfig::call_directly`]: crate::NodeConfig::call_directly

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::balancer::call::dispatch;
use crate::balancer::call::options::{option_setters, CallOptions};
use crate::balancer::call::Target;
use crate::filter::NodeFilter;
use crate::function::RemoteFunction;
use crate::{Error, Node, Retry};

impl Node {
    /// A call of `F` with `args` on a random connected node whose full name matches `filter`
    /// (a substring — `"worker".into()`, `""` matches every node — or
    /// [`NodeFilter::regex`]), or on this node when it matches itself. Await the returned
    /// [`RandomNodeCall`] for `Result<F::Reply, Error>`; set options on it first. The rules are
    /// in [`RandomNodeCall`]'s docs.
    ///
    /// ```
    /// use rpc_load_balancer::{FunctionError, Node, NodeConfig, RemoteFunction};
    ///
    /// struct Whoami;
    /// impl RemoteFunction for Whoami {
    ///     const NAME: &'static str = "docs.whoami";
    ///     type Args = ();
    ///     type Reply = String;
    ///     async fn call(&self, _: ()) -> Result<String, FunctionError> {
    ///         Ok(Node::current().map(|n| n.name().to_string()).unwrap_or_default())
    ///     }
    /// }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
    /// let node = Node::start(NodeConfig::new("worker_1", "127.0.0.1:0").cookie("secret")).await?;
    /// node.register(Whoami)?;
    /// // "worker" matches this node itself, so the call runs here.
    /// let served_by = node.call_on_random_node::<Whoami>("worker", ()).await?;
    /// assert_eq!(served_by, node.name());
    /// node.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn call_on_random_node<F: RemoteFunction>(
        &self,
        filter: impl Into<NodeFilter>,
        args: F::Args,
    ) -> RandomNodeCall<F> {
        let pending = Pending::new(self, filter.into(), args);
        RandomNodeCall { pending }
    }

    /// A cast of `F` with `args` to a random connected node whose full name matches `filter`,
    /// or to this node when it matches itself. Await the returned [`RandomNodeCast`] for
    /// `Result<(), Error>`: it resolves once the cast is handed to the chosen node's session
    /// (or to this node's endpoint). The rules are in [`RandomNodeCall`]'s docs.
    pub fn cast_on_random_node<F: RemoteFunction>(
        &self,
        filter: impl Into<NodeFilter>,
        args: F::Args,
    ) -> RandomNodeCast<F> {
        let pending = Pending::new(self, filter.into(), args);
        RandomNodeCast { pending }
    }
}

/// What a random-node call or cast holds until it is awaited.
struct Pending<F: RemoteFunction> {
    node: Node,
    /// The filter.
    target: Target,
    options: CallOptions,
    args: F::Args,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> Pending<F> {
    fn new(node: &Node, filter: NodeFilter, args: F::Args) -> Self {
        Self {
            node: node.clone(),
            target: Target::RandomNode(filter),
            options: CallOptions::default(),
            args,
            function: PhantomData,
        }
    }
}

/// A call of `F` on a random node matching a filter, built by
/// [`Node::call_on_random_node`]. Await it (it implements `IntoFuture`) for
/// `Result<F::Reply, Error>`, or use [`with_node`](Self::with_node).
///
/// How it runs:
///
/// 1. With [`call_directly(true)`](Self::call_directly) (default: the node's
///    [`NodeConfig::call_directly`](crate::NodeConfig::call_directly)), or when this node's
///    own name matches the filter (its
///    [`excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns) applied), it runs
///    on this node, with the same errors and timeout as a remote call (a function that is not
///    registered here is [`Error::BadRequest`]).
/// 2. Otherwise it runs on a connected peer that serves rpc and matches the filter, picked
///    uniformly at random. While there is none it waits as its [`Retry`] allows (the wait
///    ends early when a peer connects or disconnects, and never outlasts the timeout), then
///    fails with [`Error::NoMatchingNodes`]. The call is sent once, with what is left of the
///    timeout; whatever becomes of it is the result (it is never sent to a second node).
///
/// Errors: [`Error::InvalidConfig`] (`timeout` of zero), [`Error::UnknownBalancer`] at once
/// for a [`load_balancer`](Self::load_balancer) not started (or stopping) on this node,
/// [`Error::NoMatchingNodes`], and everything [`Node::call`] returns.
#[must_use = "a call does nothing until awaited"]
pub struct RandomNodeCall<F: RemoteFunction> {
    pending: Pending<F>,
}

impl<F: RemoteFunction> RandomNodeCall<F> {
    option_setters! {
        pending;
        /// The call's timeout (default: the node's
        /// [`NodeConfig::call_timeout`](crate::NodeConfig::call_timeout), 10 s): it bounds the
        /// wait for a matching node and the call itself together. Zero is refused with
        /// [`Error::InvalidConfig`] (`timeout`).
        fn timeout(timeout: Duration) => timeout = timeout;

        /// How the call waits while no connected node matches (default: the node's
        /// [`NodeConfig::retry`](crate::NodeConfig::retry), 5 retries 5,000 ms apart ±20 %):
        /// `retry.count` more looks, `retry.sleep` apart. [`Retry::never`] fails at once.
        fn retry(retry: Retry) => retry = retry;

        /// `true` runs the call on this node whatever the filter; `false` looks for a matching
        /// node even when the node's
        /// [`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on (this
        /// node still runs it when it matches the filter itself).
        fn call_directly(directly: bool) => call_directly = directly;

        /// Counts the call in the in-flight total of the balancer `name` on this node while it
        /// runs ([`Balancer::in_flight`](crate::Balancer::in_flight)), so that [`Balancer::stop`](crate::Balancer::stop) waits for it. The wait for a
        /// matching node is not counted. Errors when awaited: [`Error::UnknownBalancer`] at once
        /// if no balancer of that name runs here, or when it has begun stopping.
        fn load_balancer(name: impl Into<String>) => load_balancer = name.into();
    }

    /// Runs the call and also returns the full name of the node that served it.
    ///
    /// Errors: as awaiting the call.
    pub async fn with_node(self) -> Result<(F::Reply, Arc<str>), Error> {
        let Pending {
            node,
            target,
            options,
            args,
            ..
        } = self.pending;
        dispatch::call::<F>(node.state(), &target, &options, args).await
    }
}

impl<F: RemoteFunction> IntoFuture for RandomNodeCall<F> {
    type Output = Result<F::Reply, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.with_node().await.map(|(reply, _node)| reply) })
    }
}

/// A cast of `F` to a random node matching a filter, built by
/// [`Node::cast_on_random_node`]. Await it (it implements `IntoFuture`) for
/// `Result<(), Error>`, or use [`with_node`](Self::with_node).
///
/// It chooses its node as [`RandomNodeCall`] does and resolves once the cast is handed over
/// (to the chosen peer's session, or to this node's endpoint); what happens then is only
/// logged on the node that runs it.
///
/// Errors: [`Error::InvalidConfig`] (`timeout` of zero), [`Error::UnknownBalancer`],
/// [`Error::NoMatchingNodes`], and everything [`Node::cast`] returns.
#[must_use = "a cast does nothing until awaited"]
pub struct RandomNodeCast<F: RemoteFunction> {
    pending: Pending<F>,
}

impl<F: RemoteFunction> RandomNodeCast<F> {
    option_setters! {
        pending;
        /// The longest the cast waits for a matching node (default: the node's
        /// [`NodeConfig::call_timeout`](crate::NodeConfig::call_timeout), 10 s). Zero is refused
        /// with [`Error::InvalidConfig`] (`timeout`).
        fn timeout(timeout: Duration) => timeout = timeout;

        /// How the cast waits while no connected node matches (default: the node's
        /// [`NodeConfig::retry`](crate::NodeConfig::retry)). [`Retry::never`] fails at once.
        fn retry(retry: Retry) => retry = retry;

        /// `true` sends the cast to this node whatever the filter; `false` looks for a matching
        /// node even when the node's
        /// [`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on.
        fn call_directly(directly: bool) => call_directly = directly;

        /// Counts the cast in the in-flight total of the balancer `name` on this node while it is
        /// handed over. Errors when awaited: [`Error::UnknownBalancer`] at once if no balancer of
        /// that name runs here, or when it has begun stopping.
        fn load_balancer(name: impl Into<String>) => load_balancer = name.into();
    }

    /// Sends the cast and returns the full name of the node it was handed to.
    ///
    /// Errors: as awaiting the cast.
    pub async fn with_node(self) -> Result<Arc<str>, Error> {
        let Pending {
            node,
            target,
            options,
            args,
            ..
        } = self.pending;
        dispatch::cast::<F>(node.state(), &target, &options, args).await
    }
}

impl<F: RemoteFunction> IntoFuture for RandomNodeCast<F> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.with_node().await.map(|_node| ()) })
    }
}
