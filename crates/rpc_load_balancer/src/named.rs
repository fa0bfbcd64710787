//! Named balancers: a type bound once to a balancer name (the original's
//! `use RpcLoadBalancer`), with [`Balancer`]'s operations as associated functions.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorCell;

use crate::function::RemoteFunction;
use crate::{
    BalancedCall, BalancedCast, Balancer, BalancerConfig, Error, Members, Node, NodeFilter,
    RandomNodeCall, RandomNodeCast,
};

/// A balancer bound to a name at compile time: the Rust form of the original's
/// `use RpcLoadBalancer` module. Implement it on a unit type (by hand or with
/// [`named_balancer!`](crate::named_balancer)), then call `Reports::start()`,
/// `Reports::call::<F>(args)` and so on, without repeating the name.
///
/// [`NAME`](Self::NAME) is the balancer's name (its `ractor::pg` group) and cannot be
/// overridden: [`config`](Self::config) customises everything else (algorithm,
/// `node_match_list`, timeouts), and a config naming another balancer is refused at start
/// with [`Error::InvalidConfig`] naming `name`. There is no extra process or registry:
/// `Reports::handle()` is [`Balancer::lookup`]`(Reports::NAME)`, so the named and the plain
/// API are interchangeable. One instance per name runs on a node.
///
/// Every function except `start`, `spawn_linked` and `config` looks the balancer up on this
/// node first, and fails with [`Error::UnknownBalancer`] at once when it is not started here
/// (or stopped), or [`Error::NodeNotRunning`] without a [`Node`](crate::Node). Don't override
/// the provided functions: they are what keeps the name fixed.
///
/// ```
/// use rpc_load_balancer::{
///     BalancerConfig, Error, FunctionError, NamedBalancer, Node, NodeConfig, RemoteFunction,
///     RoundRobin,
/// };
///
/// struct Render;
/// impl RemoteFunction for Render {
///     const NAME: &'static str = "render";
///     type Args = u32;
///     type Reply = String;
///     async fn call(&self, page: u32) -> Result<String, FunctionError> {
///         Ok(format!("page {page}"))
///     }
/// }
///
/// /// The `reports` balancer, round-robin over every node.
/// struct Reports;
/// impl NamedBalancer for Reports {
///     const NAME: &'static str = "reports";
///     fn config() -> BalancerConfig {
///         BalancerConfig::new(Self::NAME).algorithm(RoundRobin::new())
///     }
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Error> {
/// let node = Node::start(NodeConfig::new("docs", "127.0.0.1:0").cookie("secret")).await?;
/// node.register(Render)?;
/// assert!(matches!(Reports::call::<Render>(1), Err(Error::UnknownBalancer { .. })));
///
/// Reports::start().await?;
/// assert_eq!(Reports::members()?.nodes(), vec![node.name().to_string()]);
/// assert_eq!(Reports::select_node(None)?, node.name());
/// let page = Reports::call::<Render>(7)?.await?; // `?` on the lookup, then on the call
/// assert_eq!(page, "page 7");
/// Reports::stop().await?;
/// node.shutdown().await;
/// # Ok(()) }
/// ```
pub trait NamedBalancer {
    /// The balancer's name (its `ractor::pg` group, and what [`Balancer::lookup`] finds).
    /// Rules as [`BalancerConfig::new`]'s name: 1-255 bytes, not starting with `@`, without
    /// `/`, whitespace or control characters (checked at start).
    const NAME: &'static str;

    /// The balancer's settings, read at every [`start`](Self::start) and
    /// [`spawn_linked`](Self::spawn_linked). Default: `BalancerConfig::new(Self::NAME)`
    /// ([`Random`](crate::Random), every node a member). Override it to choose the algorithm
    /// and the other options; it must keep the name [`NAME`](Self::NAME).
    fn config() -> BalancerConfig {
        BalancerConfig::new(Self::NAME)
    }

    /// Starts the balancer standalone on this process's node, as [`Balancer::start`] with
    /// [`config`](Self::config); returns its handle.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `name` when `config()` names another
    /// balancer; then as [`Balancer::start`] ([`Error::BalancerAlreadyStarted`] if it runs
    /// already).
    fn start() -> impl Future<Output = Result<Balancer, Error>> + Send {
        async { Balancer::start(checked_config::<Self>()?).await }
    }

    /// Starts the balancer linked to `supervisor` (an actor of the app's supervision tree),
    /// as [`Balancer::spawn_linked`] with [`config`](Self::config). Stopping or killing the
    /// parent kills the balancer's actor, and the balancer drains all the same (call
    /// [`stop`](Self::stop) to wait for that drain's report).
    ///
    /// Errors: as [`start`](Self::start).
    fn spawn_linked(supervisor: ActorCell) -> impl Future<Output = Result<Balancer, Error>> + Send {
        async { Balancer::spawn_linked(checked_config::<Self>()?, supervisor).await }
    }

    /// The handle of the balancer running on this node: [`Balancer::lookup`]`(Self::NAME)`.
    /// Use it to keep a [`SelectionGuard`](crate::SelectionGuard) or to watch members.
    ///
    /// Errors: [`Error::UnknownBalancer`] if it is not started here; [`Error::NodeNotRunning`].
    fn handle() -> Result<Balancer, Error> {
        Balancer::lookup(Self::NAME)
    }

    /// Stops the balancer on this node gracefully, as [`Balancer::stop`] (draining), and
    /// returns its [`DrainReport`](crate::DrainReport).
    ///
    /// Errors: [`Error::UnknownBalancer`] if it was not running here (nothing is stopped);
    /// [`Error::NodeNotRunning`].
    fn stop() -> impl Future<Output = Result<crate::DrainReport, Error>> + Send {
        async { Ok(Self::handle()?.stop().await) }
    }

    /// A call of `F` with `args` on a member, as [`Balancer::call`]: the returned
    /// [`BalancedCall`] takes `.key(..)`, `.timeout(..)` etc.; await it. The balancer is
    /// looked up now, so an unknown one fails here, before any call exists:
    /// `Reports::call::<F>(args)?.await?`.
    ///
    /// Errors: [`Error::UnknownBalancer`], [`Error::NodeNotRunning`]; when awaited, as
    /// [`Balancer::call`].
    fn call<F: RemoteFunction>(args: F::Args) -> Result<BalancedCall<F>, Error> {
        Ok(Self::handle()?.call::<F>(args))
    }

    /// A cast of `F` with `args` to a member, as [`Balancer::cast`]; looked up now like
    /// [`call`](Self::call): `Reports::cast::<F>(args)?.await?`.
    ///
    /// Errors: [`Error::UnknownBalancer`], [`Error::NodeNotRunning`]; when awaited, as
    /// [`Balancer::cast`].
    fn cast<F: RemoteFunction>(args: F::Args) -> Result<BalancedCast<F>, Error> {
        Ok(Self::handle()?.cast::<F>(args))
    }

    /// A call of `F` on a random connected node matching `filter`, as
    /// [`Node::call_on_random_node`], counted in this balancer's in-flight total so that its
    /// [`stop`](Self::stop) drains it (the original's named `call_on_random_node`: the filter
    /// chooses the node, not the balancer). Looked up now like [`call`](Self::call).
    ///
    /// Errors: [`Error::UnknownBalancer`], [`Error::NodeNotRunning`]; when awaited, as
    /// [`RandomNodeCall`].
    fn call_on_random_node<F: RemoteFunction>(
        filter: impl Into<NodeFilter>,
        args: F::Args,
    ) -> Result<RandomNodeCall<F>, Error> {
        Self::handle()?;
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        Ok(node
            .call_on_random_node::<F>(filter, args)
            .load_balancer(Self::NAME))
    }

    /// A cast of `F` to a random connected node matching `filter`, as
    /// [`Node::cast_on_random_node`], counted in this balancer's in-flight total while it is
    /// handed over; looked up now like [`call`](Self::call).
    ///
    /// Errors: [`Error::UnknownBalancer`], [`Error::NodeNotRunning`]; when awaited, as
    /// [`RandomNodeCast`].
    fn cast_on_random_node<F: RemoteFunction>(
        filter: impl Into<NodeFilter>,
        args: F::Args,
    ) -> Result<RandomNodeCast<F>, Error> {
        Self::handle()?;
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        Ok(node
            .cast_on_random_node::<F>(filter, args)
            .load_balancer(Self::NAME))
    }

    /// Selects a member for the routing `key` (the original's `select_node`) and returns its
    /// node's full name. The selection is released before this returns, so counting
    /// algorithms don't count the member busy: to hold it while you use the node, keep the
    /// guard of `Self::handle()?.select_node(key)`.
    ///
    /// Errors: as [`handle`](Self::handle); then as [`Balancer::select_node`]
    /// ([`Error::NoMembers`], the algorithm's errors).
    fn select_node(key: Option<&[u8]>) -> Result<String, Error> {
        let balancer = Self::handle()?;
        let node = balancer.select_node(key)?.node().to_string();
        Ok(node)
    }

    /// `min(count, members)` distinct member nodes for `key`, the preferred first, as
    /// [`Balancer::select_nodes`].
    ///
    /// Errors: as [`handle`](Self::handle); then as [`Balancer::select_nodes`].
    fn select_nodes(count: usize, key: Option<&[u8]>) -> Result<Vec<String>, Error> {
        Self::handle()?.select_nodes(count, key)
    }

    /// The current members, as [`Balancer::members`] (sorted by node name; may be empty).
    ///
    /// Errors: as [`handle`](Self::handle).
    fn members() -> Result<Arc<Members>, Error> {
        Ok(Self::handle()?.members())
    }

    /// Waits until the balancer has at least `count` members, at most `timeout`, as
    /// [`Balancer::wait_for_members`]. The balancer is looked up when the future is first
    /// polled.
    ///
    /// Errors: as [`handle`](Self::handle); [`Error::NoMembers`] at the deadline.
    fn wait_for_members(
        count: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Arc<Members>, Error>> + Send {
        async move { Self::handle()?.wait_for_members(count, timeout).await }
    }

    /// Routed calls, casts and held selections of this balancer in flight on this node, as
    /// [`Balancer::in_flight`].
    ///
    /// Errors: as [`handle`](Self::handle).
    fn in_flight() -> Result<usize, Error> {
        Ok(Self::handle()?.in_flight())
    }

    /// Calls of this balancer this node is serving as a member now, as [`Balancer::served`].
    ///
    /// Errors: as [`handle`](Self::handle).
    fn served() -> Result<usize, Error> {
        Ok(Self::handle()?.served())
    }
}

/// `B::config()`, refused unless it is named `B::NAME`.
fn checked_config<B: NamedBalancer + ?Sized>() -> Result<BalancerConfig, Error> {
    let config = B::config();
    if config.name() != B::NAME {
        return Err(Error::InvalidConfig {
            option: "name",
            reason: format!(
                "config() names the balancer {:?}, but a named balancer's name is its NAME {:?}",
                config.name(),
                B::NAME
            ),
        });
    }
    Ok(config)
}

/// Declares a unit struct implementing [`NamedBalancer`]: attributes (doc comments, derives
/// beyond the generated `Debug, Clone, Copy, Default, PartialEq, Eq, Hash`), visibility, type
/// name, `= name`, and optionally the algorithm (default [`Random`](crate::Random)). For
/// other options implement the trait by hand and override
/// [`config`](NamedBalancer::config).
///
/// `named_balancer!(pub Reports = "reports", RoundRobin::new());` expands to
///
/// ```
/// # use rpc_load_balancer::RoundRobin;
/// #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
/// pub struct Reports;
/// impl rpc_load_balancer::NamedBalancer for Reports {
///     const NAME: &'static str = "reports";
///     fn config() -> rpc_load_balancer::BalancerConfig {
///         rpc_load_balancer::BalancerConfig::new(Self::NAME).algorithm(RoundRobin::new())
///     }
/// }
/// ```
///
/// A call of the algorithm expression builds a new instance at each start, so balancers
/// never share one.
///
/// ```
/// use rpc_load_balancer::{named_balancer, Error, NamedBalancer, Node, NodeConfig, RoundRobin};
///
/// named_balancer!(
///     /// Report rendering, round-robin.
///     pub Reports = "reports", RoundRobin::new()
/// );
/// named_balancer!(Audit = "audit"); // Random
///
/// # #[tokio::main] async fn main() -> Result<(), Error> {
/// let node = Node::start(NodeConfig::new("docs", "127.0.0.1:0").cookie("secret")).await?;
/// assert_eq!(Reports::NAME, "reports");
/// assert_eq!(Reports::start().await?.algorithm_name(), "round_robin");
/// assert_eq!(Audit::start().await?.algorithm_name(), "random");
/// assert_eq!(Audit::select_node(None)?, node.name());
/// Reports::stop().await?;
/// Audit::stop().await?;
/// node.shutdown().await;
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! named_balancer {
    ($(#[$attr:meta])* $vis:vis $ty:ident = $name:expr $(, $algorithm:expr)? $(,)?) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        $vis struct $ty;

        impl $crate::NamedBalancer for $ty {
            const NAME: &'static str = $name;
            $(
                fn config() -> $crate::BalancerConfig {
                    $crate::BalancerConfig::new(<Self as $crate::NamedBalancer>::NAME)
                        .algorithm($algorithm)
                }
            )?
        }
    };
}
