//! A balancer and one remote function as a [`tower_service::Service`] (feature `tower`), so
//! that tower's middleware — timeout, rate limit, concurrency limit, load shedding, buffering —
//! wraps routed calls the way it wraps any other service: [`FunctionService`], made by
//! [`Balancer::service`].
//!
//! The request is the function's arguments (`F::Args`), the response its reply
//! (`F::Reply`), the error the crate's [`Error`]. Each call is a [`Balancer::call`] with the
//! balancer's defaults (its `call_timeout`, `retry`, no routing key).
//!
//! **Readiness.** [`poll_ready`](tower_service::Service::poll_ready) is `Ready` when the
//! balancer has a member that can take a call now, and `Pending` while it cannot — its pool
//! is empty, or every member is at the balancer's
//! [`max_in_flight_per_member`](crate::BalancerConfig::max_in_flight_per_member) — so that
//! tower's `LoadShed` refuses at once and `Buffer` queues instead of sending calls that would
//! wait (empty pool) or fail with [`Error::Overloaded`] (every member full). It is a check,
//! not a reservation: a member free at `poll_ready` may be taken by another caller (or leave)
//! before [`call`](tower_service::Service::call) picks, and that call then waits or fails as
//! any [`BalancedCall`](crate::BalancedCall) does. (Holding a [`SelectionGuard`] from
//! `poll_ready` to `call` would make it a reservation, but a routed call cannot yet be sent
//! through a selection chosen beforehand: the call pipeline picks its member itself, and
//! re-picks when a member cannot take the call.)
//!
//! [`SelectionGuard`]: crate::SelectionGuard

use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::shared::BalancerShared;
use super::{Balancer, Members};
use crate::function::RemoteFunction;
use crate::Error;

/// How often a service whose every member is at its cap looks again (releases of in-flight
/// calls are not announced; a change of members wakes it at once).
pub(crate) const CAP_POLL: Duration = Duration::from_millis(5);

#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
/// The future of one call through a [`FunctionService`]: the reply of `F`, or the call's
/// [`Error`].
pub type FunctionFuture<R> = Pin<Box<dyn Future<Output = Result<R, Error>> + Send>>;

/// A balancer and one remote function `F` as a [`tower_service::Service<F::Args>`] (feature
/// `tower`): `call(args)` is [`Balancer::call::<F>(args)`](Balancer::call), its response
/// `F::Reply`, its error [`Error`]. Made by [`Balancer::service`] or [`FunctionService::new`].
///
/// [`poll_ready`](tower_service::Service::poll_ready):
/// - `Ready(Ok(()))` when a call can be handed to a member now: the balancer has a member
///   under its [`max_in_flight_per_member`](crate::BalancerConfig::max_in_flight_per_member)
///   cap (any member, without a cap), or its calls run on this node without selecting
///   ([`NodeConfig::call_directly`](crate::NodeConfig::call_directly),
///   [`CallDirect`](crate::CallDirect));
/// - `Pending` while the pool is empty (woken when the members change) or every member is at
///   the cap (looked at again every 5 ms, and when the members change);
/// - `Ready(Err(`[`Error::UnknownBalancer`]`))` once the balancer has stopped (and no
///   balancer runs under its name: a handle follows its name across restarts).
///
/// It is a readiness check, not a reservation: a member free at `poll_ready` may be taken by
/// another caller (or leave) before `call` picks, and the call then waits while the pool is
/// empty (as its balancer's `retry` allows) and fails with [`Error::Overloaded`] if every
/// member is full when it picks. (Holding a [`SelectionGuard`](crate::SelectionGuard) from
/// `poll_ready` to `call` would make it a reservation, but a routed call cannot yet be sent
/// through a selection made beforehand: the call pipeline picks its member itself, and picks
/// again when a member cannot take the call.)
///
/// The [`call`](tower_service::Service::call) future errors as awaiting a
/// [`BalancedCall`](crate::BalancedCall) does; it is `Send + 'static` and does not borrow the
/// service. Clones share the balancer, not readiness: each clone polls its own.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{Balancer, BalancerConfig, FunctionError, Node, NodeConfig, RemoteFunction};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// struct Double;
/// impl RemoteFunction for Double {
///     const NAME: &'static str = "docs.double";
///     type Args = u64;
///     type Reply = u64;
///     async fn call(&self, n: u64) -> Result<u64, FunctionError> {
///         Ok(2 * n)
///     }
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let node = Node::start(NodeConfig::new("tower_docs", "127.0.0.1:0").cookie("secret")).await?;
/// node.register(Double)?;
/// let balancer = Balancer::start(BalancerConfig::new("doubling")).await?;
///
/// let mut service = ServiceBuilder::new()
///     .timeout(Duration::from_secs(2))
///     .concurrency_limit(64)
///     .service(balancer.service::<Double>());
/// let reply = service.ready().await?.call(21).await?;
/// assert_eq!(reply, 42);
/// # balancer.stop().await;
/// # node.shutdown().await;
/// # Ok(()) }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub struct FunctionService<F: RemoteFunction> {
    balancer: Balancer,
    /// What `poll_ready` waits on after it answered `Pending`: a change of members, or
    /// [`CAP_POLL`] too when every member was full.
    waiting: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> FunctionService<F> {
    /// A service calling `F` through `balancer` (as [`Balancer::service`]).
    pub fn new(balancer: Balancer) -> Self {
        Self {
            balancer,
            waiting: None,
            function: PhantomData,
        }
    }

    /// The balancer the calls go through.
    pub fn balancer(&self) -> &Balancer {
        &self.balancer
    }
}

impl Balancer {
    /// This balancer and remote function `F` as a [`tower_service::Service<F::Args>`]
    /// (feature `tower`): see [`FunctionService`] for its readiness rule and errors.
    #[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
    pub fn service<F: RemoteFunction>(&self) -> FunctionService<F> {
        FunctionService::new(self.clone())
    }
}

/// Whether a balancer can take a call now, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    Ready,
    /// No members.
    Empty,
    /// Every member at the balancer's cap.
    Full,
}

fn readiness(shared: &BalancerShared, members: &Members) -> Readiness {
    if shared.node.config.call_directly || shared.config.algorithm.is_local() {
        return Readiness::Ready;
    }
    if members.is_empty() {
        return Readiness::Empty;
    }
    match shared.config.max_in_flight_per_member {
        Some(limit) if members.as_slice().iter().all(|m| m.in_flight() >= limit) => Readiness::Full,
        _ => Readiness::Ready,
    }
}

impl<F: RemoteFunction> tower_service::Service<F::Args> for FunctionService<F> {
    type Response = F::Reply;
    type Error = Error;
    type Future = FunctionFuture<F::Reply>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        loop {
            if let Some(waiting) = self.waiting.as_mut() {
                if waiting.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.waiting = None;
            }
            let shared = self.balancer.current_shared();
            shared.check_running()?;
            // The common case without a watch; else watched first, then looked at again, so
            // that a change between the two is not missed.
            if readiness(&shared, &shared.members()) == Readiness::Ready {
                return Poll::Ready(Ok(()));
            }
            let mut watch = shared.watch();
            let members = Arc::clone(&watch.borrow_and_update());
            self.waiting = match readiness(&shared, &members) {
                Readiness::Ready => return Poll::Ready(Ok(())),
                Readiness::Empty => Some(Box::pin(async move {
                    // A closed watch (the balancer is gone) is seen by the next look.
                    let _ = watch.changed().await;
                })),
                Readiness::Full => Some(Box::pin(async move {
                    tokio::select! {
                        _ = watch.changed() => {}
                        () = tokio::time::sleep(CAP_POLL) => {}
                    }
                })),
            };
        }
    }

    fn call(&mut self, args: F::Args) -> Self::Future {
        self.balancer.call::<F>(args).into_future()
    }
}

impl<F: RemoteFunction> Clone for FunctionService<F> {
    fn clone(&self) -> Self {
        Self::new(self.balancer.clone())
    }
}

impl<F: RemoteFunction> fmt::Debug for FunctionService<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionService")
            .field("balancer", &self.balancer.name())
            .field("function", &F::NAME)
            .field("waiting", &self.waiting.is_some())
            .finish()
    }
}
