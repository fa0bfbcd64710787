//! Random-node helpers (the original's `call_on_random_node` / `cast_on_random_node`): run a
//! function on some connected node whose name matches a [`NodeFilter`], without a balancer.
//!
//! 1. With `call_directly` (per call, else [`NodeConfig::call_directly`]), or when **this**
//!    node matches the filter, the call runs here — with the remote call's error contract and
//!    timeout (it is a direct [`Node::call`] to this node's own name).
//! 2. Otherwise the candidates are the connected peers ([`Node::nodes`]) that serve rpc and
//!    match the filter, this node's
//!    [`excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns) applied (see
//!    [`filter::matches`]). While there are none, the call waits as its [`Retry`] allows —
//!    asynchronously, jittered, ending early when a peer comes or goes, never past the call's
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

use rand::Rng as _;
use tokio::time::Instant;

use crate::balancer::{Balancer, BalancerLookup, OwnedInFlightToken};
use crate::filter::{self, NodeFilter};
use crate::function::RemoteFunction;
use crate::node::shared::{Lifecycle, NodeShared};
use crate::telemetry::RpcTelemetry;
use crate::{call, Error, Node, Retry};

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
        RandomNodeCall {
            options: Options::new(self.clone(), filter.into()),
            args,
            function: PhantomData,
        }
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
        RandomNodeCast {
            options: Options::new(self.clone(), filter.into()),
            args,
            function: PhantomData,
        }
    }
}

/// What a random-node call and cast share: the node, the filter and the builder options.
struct Options {
    node: Node,
    filter: NodeFilter,
    timeout: Option<Duration>,
    retry: Option<Retry>,
    call_directly: Option<bool>,
    load_balancer: Option<String>,
}

/// Where a random-node call or cast goes, decided by [`Options::target`].
struct Target {
    /// The chosen node's full name (this node's own name for a local run).
    node: Arc<str>,
    /// The timeout for the call itself: the whole timeout, or what is left after waiting.
    timeout: Duration,
    /// The balancer that tracks the call, when one was named.
    balancer: Option<Balancer>,
}

impl Options {
    fn new(node: Node, filter: NodeFilter) -> Self {
        Self {
            node,
            filter,
            timeout: None,
            retry: None,
            call_directly: None,
            load_balancer: None,
        }
    }

    /// Checks the options and finds the node to run on: this one, or a random matching peer
    /// once there is one (waiting as the retry allows).
    ///
    /// Errors: [`Error::InvalidConfig`] (zero timeout), [`Error::ServiceUnavailable`] (this
    /// node is shut down), [`Error::UnknownBalancer`], [`Error::NoMatchingNodes`],
    /// [`Error::RequestTimeout`] (a node appeared, but the timeout was used up waiting).
    async fn target(&self) -> Result<Target, Error> {
        let shared = self.node.shared();
        let timeout = self.timeout.unwrap_or(shared.config.call_timeout);
        call::check_timeout(timeout)?;
        shared.check_running(&shared.name)?;
        let balancer = match &self.load_balancer {
            Some(name) => {
                let balancer = shared.balancers.get(name)?;
                balancer.shared().check_running()?;
                Some(balancer)
            }
            None => None,
        };
        let excluded = &shared.config.excluded_node_patterns;
        let directly = self.call_directly.unwrap_or(shared.config.call_directly);
        if directly || filter::matches(&shared.name, &self.filter, excluded) {
            return Ok(Target {
                node: Arc::from(shared.name.as_str()),
                timeout,
                balancer,
            });
        }
        let deadline = crate::deadline::after(timeout);
        let retry = self.retry.unwrap_or(shared.config.retry);
        let mut attempt = 0u32;
        loop {
            // Subscribed before looking, so a peer coming up in between ends the wait at once.
            let mut nodes = self.node.watch_nodes();
            nodes.borrow_and_update();
            if let Some(node) = pick(&shared, &self.filter) {
                let timeout = if attempt == 0 {
                    timeout
                } else {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::RequestTimeout {
                            node: node.to_string(),
                            timeout,
                        });
                    }
                    left
                };
                return Ok(Target {
                    node,
                    timeout,
                    balancer,
                });
            }
            if !retry.allows_after(attempt) || Instant::now() >= deadline {
                return Err(Error::NoMatchingNodes {
                    filter: self.filter.to_string(),
                });
            }
            attempt += 1;
            let wake = deadline.min(crate::deadline::after(retry.jittered()));
            tracing::debug!(
                filter = %self.filter,
                attempt,
                "no connected node matches; waiting to look again"
            );
            // A peer coming or going ends the wait early; so do this node starting to shut
            // down and the tracking balancer starting to stop.
            let mut lifecycle = shared.lifecycle.subscribe();
            let mut members = balancer.as_ref().map(|b| b.watch_members());
            let balancer_changed = async {
                match members.as_mut() {
                    Some(members) => {
                        let _ = members.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::time::timeout_at(wake, nodes.changed()) => {}
                _ = lifecycle.wait_for(|l| *l != Lifecycle::Running) => {}
                _ = balancer_changed => {}
            }
            if *shared.lifecycle.borrow() != Lifecycle::Running {
                return Err(Error::ServiceUnavailable {
                    node: shared.name.clone(),
                    reason: crate::Unavailable::NodeStopped,
                });
            }
            if let Some(balancer) = &balancer {
                balancer.shared().check_running()?;
            }
            shared.check_running(&shared.name)?;
        }
    }
}

/// A random-node call or cast until it has its node and is tracked: one that ends here (no
/// matching node, a zero timeout, an unknown tracking balancer) or is dropped here (its caller
/// gave up while it waited for a node) is recorded as the library's span and metrics record
/// any call (`node` empty; status the error's code, or `cancelled`). Once it has a node,
/// [`Node::call`] and [`Node::cast`] record it.
struct Choosing<'a> {
    options: &'a Options,
    kind: &'static str,
    function: &'static str,
    /// Whether the call left this stage (recorded as failed, or handed to the direct path).
    settled: bool,
}

impl<'a> Choosing<'a> {
    fn new(options: &'a Options, kind: &'static str, function: &'static str) -> Self {
        Self {
            options,
            kind,
            function,
            settled: false,
        }
    }

    /// The telemetry of a call that ends before it has a node.
    fn telemetry(&self) -> RpcTelemetry {
        let balancer: Option<Arc<str>> = self.options.load_balancer.as_deref().map(Arc::from);
        RpcTelemetry::start(self.kind, self.function, balancer.as_ref())
    }

    /// Records the call as failed with `error` and gives the error back.
    fn failed(&mut self, error: Error) -> Error {
        self.settled = true;
        self.telemetry().finish::<()>(&Err(error.clone()));
        error
    }

    /// The call has its node: the direct path records it from now on.
    fn chosen(&mut self) {
        self.settled = true;
    }
}

impl Drop for Choosing<'_> {
    fn drop(&mut self) {
        if !self.settled {
            // Dropped unfinished: recorded as cancelled.
            drop(self.telemetry());
        }
    }
}

/// A connected peer that serves rpc and matches `filter` (this node's exclusions applied),
/// chosen uniformly at random; `None` if there is none.
fn pick(shared: &NodeShared, filter: &NodeFilter) -> Option<Arc<str>> {
    let peers = shared.peers.load();
    let candidates: Vec<&String> = peers
        .iter()
        .filter(|(name, peer)| {
            peer.endpoint.is_some()
                && **name != shared.name
                && filter::matches(name, filter, &shared.config.excluded_node_patterns)
        })
        .map(|(name, _)| name)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let index = rand::rng().random_range(0..candidates.len());
    Some(Arc::from(candidates[index].as_str()))
}

/// Counts the call in `balancer`'s in-flight total (which its drain waits for) until the
/// returned token drops; [`Error::UnknownBalancer`] if the balancer began stopping meanwhile.
fn track(balancer: Option<&Balancer>) -> Result<Option<OwnedInFlightToken>, Error> {
    let Some(balancer) = balancer else {
        return Ok(None);
    };
    // Counted before checking: a drain that starts after the check sees the call.
    let token = balancer.track();
    balancer.shared().check_running()?;
    Ok(Some(token))
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
    options: Options,
    args: F::Args,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> RandomNodeCall<F> {
    /// The call's timeout (default: the node's
    /// [`NodeConfig::call_timeout`](crate::NodeConfig::call_timeout), 10 s): it bounds the
    /// wait for a matching node and the call itself together. Zero is refused with
    /// [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = Some(timeout);
        self
    }

    /// How the call waits while no connected node matches (default: the node's
    /// [`NodeConfig::retry`](crate::NodeConfig::retry), 5 retries 5,000 ms apart ±20 %):
    /// `retry.count` more looks, `retry.sleep` apart. [`Retry::never`] fails at once.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.options.retry = Some(retry);
        self
    }

    /// `true` runs the call on this node whatever the filter; `false` looks for a matching
    /// node even when the node's
    /// [`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on (this
    /// node still runs it when it matches the filter itself).
    pub fn call_directly(mut self, directly: bool) -> Self {
        self.options.call_directly = Some(directly);
        self
    }

    /// Counts the call in the in-flight total of the balancer `name` on this node while it
    /// runs ([`Balancer::in_flight`]), so that [`Balancer::stop`] waits for it. The wait for a
    /// matching node is not counted. Errors when awaited: [`Error::UnknownBalancer`] at once
    /// if no balancer of that name runs here, or when it has begun stopping.
    pub fn load_balancer(mut self, name: impl Into<String>) -> Self {
        self.options.load_balancer = Some(name.into());
        self
    }

    /// Runs the call and also returns the full name of the node that served it.
    ///
    /// Errors: as awaiting the call.
    pub async fn with_node(self) -> Result<(F::Reply, Arc<str>), Error> {
        let mut choosing = Choosing::new(&self.options, "call", F::NAME);
        let target = match self.options.target().await {
            Ok(target) => target,
            Err(error) => return Err(choosing.failed(error)),
        };
        let tracked = track(target.balancer.as_ref()).map_err(|e| choosing.failed(e))?;
        choosing.chosen();
        let mut call = self
            .options
            .node
            .call::<F>(&*target.node, self.args)
            .timeout(target.timeout);
        if let Some(tracked) = tracked {
            // Held by the run itself when it runs on this node.
            let abandoned = Arc::clone(tracked.abandoned());
            call = call.counted_by(tracked, abandoned);
        }
        let reply = call.await?;
        Ok((reply, target.node))
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
    options: Options,
    args: F::Args,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> RandomNodeCast<F> {
    /// The longest the cast waits for a matching node (default: the node's
    /// [`NodeConfig::call_timeout`](crate::NodeConfig::call_timeout), 10 s). Zero is refused
    /// with [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = Some(timeout);
        self
    }

    /// How the cast waits while no connected node matches (default: the node's
    /// [`NodeConfig::retry`](crate::NodeConfig::retry)). [`Retry::never`] fails at once.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.options.retry = Some(retry);
        self
    }

    /// `true` sends the cast to this node whatever the filter; `false` looks for a matching
    /// node even when the node's
    /// [`NodeConfig::call_directly`](crate::NodeConfig::call_directly) default is on.
    pub fn call_directly(mut self, directly: bool) -> Self {
        self.options.call_directly = Some(directly);
        self
    }

    /// Counts the cast in the in-flight total of the balancer `name` on this node while it is
    /// handed over. Errors when awaited: [`Error::UnknownBalancer`] at once if no balancer of
    /// that name runs here, or when it has begun stopping.
    pub fn load_balancer(mut self, name: impl Into<String>) -> Self {
        self.options.load_balancer = Some(name.into());
        self
    }

    /// Sends the cast and returns the full name of the node it was handed to.
    ///
    /// Errors: as awaiting the cast.
    pub async fn with_node(self) -> Result<Arc<str>, Error> {
        let mut choosing = Choosing::new(&self.options, "cast", F::NAME);
        let target = match self.options.target().await {
            Ok(target) => target,
            Err(error) => return Err(choosing.failed(error)),
        };
        let _tracked = track(target.balancer.as_ref()).map_err(|e| choosing.failed(e))?;
        choosing.chosen();
        self.options.node.cast::<F>(&target.node, self.args).await?;
        Ok(target.node)
    }
}

impl<F: RemoteFunction> IntoFuture for RandomNodeCast<F> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.with_node().await.map(|_node| ()) })
    }
}
