//! A balancer and one remote function as a [`tower_service::Service`] (feature `tower`), so
//! that tower's middleware — timeout, rate limit, concurrency limit, load shedding, buffering —
//! wraps routed calls the way it wraps any other service: [`FunctionService`], made by
//! [`Balancer::service`].
//!
//! The request is the function's arguments (`F::Args`), the response its reply
//! (`F::Reply`), the error the crate's [`Error`]. Each call is a [`Balancer::call`] with the
//! balancer's defaults (its `call_timeout`, `retry`, no routing key).
//!
//! **Readiness is a reservation.** [`poll_ready`](tower_service::Service::poll_ready) picks the
//! member the next [`call`](tower_service::Service::call) goes to — the algorithm's pick, under
//! the balancer's [`max_in_flight_per_member`](crate::BalancerConfig::max_in_flight_per_member)
//! — and counts it in flight from then on (as a [`SelectionGuard`] does), so a call made after
//! `Ready` is not refused for a cap another caller filled in between. It is `Pending` while no
//! member can take a call — the pool is empty, or every member is at the cap — so that tower's
//! `LoadShed` refuses at once and `Buffer` queues instead of sending calls that would wait
//! (empty pool) or fail with [`Error::Overloaded`] (every member full).
//!
//! [`SelectionGuard`]: crate::SelectionGuard

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::shared::BalancerShared;
use super::{BalancedCall, Balancer, Selection};
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
/// - `Ready(Ok(()))` once a member is reserved for the next call: the algorithm's pick among
///   the members under the balancer's
///   [`max_in_flight_per_member`](crate::BalancerConfig::max_in_flight_per_member) cap (any
///   member, without a cap); also when its calls run on this node without selecting, or the
///   algorithm refuses to pick (the call then returns its error);
/// - `Pending` while the pool is empty (woken when the members change) or every member is at
///   the cap (looked at again every 5 ms, and when the members change);
/// - `Ready(Err(`[`Error::UnknownBalancer`]`))` once the balancer has stopped (and no
///   balancer runs under its name: a handle follows its name across restarts).
///
/// A `Ready` service holds its reservation — the member counts it in flight, and the balancer's
/// [`in_flight`](Balancer::in_flight) total with it — until the next `call` (which is sent to
/// that member, its latency measured from the `call`) or until the service is dropped (the
/// reservation is released, as a dropped [`SelectionGuard`](crate::SelectionGuard) is). A
/// reserved member that has left by the time of the `call` is skipped as any member that
/// cannot take a call is: the call goes to another one. Calls that run on this node without
/// selecting ([`NodeConfig::call_directly`](crate::NodeConfig::call_directly),
/// [`CallDirect`](crate::CallDirect)) reserve nothing.
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
    /// The member `poll_ready` reserved for the next `call` (counted in flight until the
    /// call ends, or the service drops), with the balancer state it was selected from.
    reserved: Option<(Arc<BalancerShared>, Selection)>,
    /// Ready without a reservation (see [`Reserve::Unreserved`]), until the next `call`.
    ready: bool,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> FunctionService<F> {
    /// A service calling `F` through `balancer` (as [`Balancer::service`]).
    pub fn new(balancer: Balancer) -> Self {
        Self {
            balancer,
            waiting: None,
            reserved: None,
            ready: false,
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

/// What `poll_ready` found.
enum Reserve {
    /// A member was reserved for the next call.
    Selected(Selection),
    /// Ready without a reservation: the calls run on this node without selecting, or the
    /// selection fails in a way the call itself will report (an algorithm's error).
    Unreserved,
    /// No members.
    Empty,
    /// Every member at the balancer's cap.
    Full,
}

/// Reserves a member of `shared` for a call: the algorithm's pick, past members at the
/// balancer's `max_in_flight_per_member` cap (counted in flight from now on).
fn reserve(shared: &BalancerShared) -> Reserve {
    if shared.node.config.call_directly || shared.config.algorithm.is_local() {
        return Reserve::Unreserved;
    }
    let limit = shared.config.max_in_flight_per_member;
    let mut exclude = Vec::new();
    loop {
        match shared.choose(None, &exclude) {
            Ok((members, index)) => {
                // Held until the call: by a full reference, so it doesn't keep one of the
                // thread's few fast arc-swap slots.
                let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
                match shared.count_capped(members, index, limit, &mut exclude) {
                    Ok(Some(selection)) => return Reserve::Selected(selection),
                    // At the cap, with another member left to try.
                    Ok(None) => continue,
                    Err(_overloaded) => return Reserve::Full,
                }
            }
            Err(Error::NoMembers { .. }) => return Reserve::Empty,
            Err(_) => return Reserve::Unreserved,
        }
    }
}

impl<F: RemoteFunction> FunctionService<F> {
    /// Records what `reserve` found: whether the service is ready.
    fn take(&mut self, shared: &Arc<BalancerShared>, found: Reserve) -> Option<Reserve> {
        match found {
            Reserve::Selected(selection) => {
                self.reserved = Some((Arc::clone(shared), selection));
                None
            }
            Reserve::Unreserved => {
                self.ready = true;
                None
            }
            not_ready => Some(not_ready),
        }
    }
}

impl<F: RemoteFunction> tower_service::Service<F::Args> for FunctionService<F> {
    type Response = F::Reply;
    type Error = Error;
    type Future = FunctionFuture<F::Reply>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.reserved.is_some() || self.ready {
            return Poll::Ready(Ok(()));
        }
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
            if self.take(&shared, reserve(&shared)).is_none() {
                return Poll::Ready(Ok(()));
            }
            let mut watch = shared.watch();
            watch.borrow_and_update();
            self.waiting = match self.take(&shared, reserve(&shared)) {
                None => return Poll::Ready(Ok(())),
                Some(Reserve::Full) => Some(Box::pin(async move {
                    tokio::select! {
                        _ = watch.changed() => {}
                        () = tokio::time::sleep(CAP_POLL) => {}
                    }
                })),
                Some(_) => Some(Box::pin(async move {
                    // A closed watch (the balancer is gone) is seen by the next look.
                    let _ = watch.changed().await;
                })),
            };
        }
    }

    fn call(&mut self, args: F::Args) -> Self::Future {
        let reserved = self.reserved.take();
        self.ready = false;
        Box::pin(BalancedCall::<F>::new(self.balancer.clone(), args).call_reserved(reserved))
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
            .field("reserved", &self.reserved.as_ref().map(|(_, s)| s.node()))
            .finish()
    }
}
