//! The balancer registry: the balancers started on this node, by name, so that a name runs
//! one balancer at a time, a control request or a LeastCpu Poller can find its balancer, and
//! the node's shutdown can stop them all.
//!
//! The node holds each balancer as a [`RegisteredBalancer`], a trait the balancer layer
//! implements: the node (a lower layer) never names the balancer's types.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use crate::control::{ControlReply, ControlRequest, DrainReport};
use crate::Error;

/// What the node needs of a balancer started on it: to tell it apart, stop it at shutdown,
/// and give its load sources (the LeastCpu Poller) and diagnostics the members to work on.
/// Implemented by the balancer layer (`balancer::Balancer`).
pub(crate) trait RegisteredBalancer: Send + Sync + 'static {
    /// The balancer's name.
    fn name(&self) -> &str;

    /// Whether this balancer's own actor still runs (it may still drain once it has not).
    fn is_own_running(&self) -> bool;

    /// The id of the balancer's own actor.
    fn actor_id(&self) -> ractor::ActorId;

    /// The address of this balancer's state: tells its entry from one of a balancer started
    /// under the same name since.
    fn state_ptr(&self) -> *const ();

    /// Stops it gracefully (draining, as `Balancer::stop` does) and resolves to its report;
    /// for one that drains already (its actor has ended), waits for that drain's report.
    fn stop(&self) -> BoxFuture<'static, DrainReport>;

    /// The nodes of its members whose calls do not run in this process, in member order.
    fn remote_member_nodes(&self) -> Vec<Arc<str>>;

    /// Yields once per change of its members (joins and leaves), until the balancer's state
    /// is gone.
    fn member_changes(&self) -> BoxStream<'static, ()>;

    /// For a running LeastCpu balancer: `(member node, value %)` that its selection gives each
    /// member now (see `ControlRequest::CpuSelection`); `None` for other algorithms.
    fn cpu_selection(&self) -> Option<Vec<(String, f64)>>;

    /// What this node says of the balancer in its node directory (`directory.rs`): whether
    /// this node is its member (matches its `node_match_list`), and whether it calls it with
    /// subsetting.
    fn directory_roles(&self) -> (bool, bool);

    /// The balancer itself, for the layer that implements this trait to get its own type
    /// back.
    fn as_any(&self) -> &dyn Any;
}

/// A registered balancer, shared.
pub(crate) type Registered = Arc<dyn RegisteredBalancer>;

/// Balancers started on this node by name; `None` while one is starting.
#[derive(Default)]
pub(crate) struct BalancerRegistry {
    balancers: Mutex<HashMap<String, Option<Registered>>>,
    /// Set (under the lock) when the node begins to shut down: no start may claim a name from
    /// then on.
    closed: AtomicBool,
    /// Set (under the lock) when the node's shutdown has stopped waiting for starts under way:
    /// none may register from then on.
    sealed: AtomicBool,
}

impl BalancerRegistry {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Option<Registered>>> {
        self.balancers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims `name` for a balancer being started.
    ///
    /// Errors: [`Error::NodeNotRunning`] once the node has begun to shut down
    /// ([`BalancerRegistry::close`]); [`Error::BalancerAlreadyStarted`] if one runs, drains
    /// (see [`BalancerRegistry::draining`]) or is starting under that name.
    pub(crate) fn reserve(&self, name: &str) -> Result<(), Error> {
        let mut balancers = self.lock();
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::NodeNotRunning);
        }
        match balancers.get(name) {
            Some(_) => {}
            None => {
                balancers.insert(name.to_string(), None);
                return Ok(());
            }
        }
        Err(Error::BalancerAlreadyStarted {
            balancer: name.to_string(),
        })
    }

    /// Records `balancer`, started under the name it reserved.
    ///
    /// Errors: [`Error::NodeNotRunning`] once the node's shutdown has stopped waiting for
    /// starts ([`BalancerRegistry::seal`]): the start must undo itself (its name stays
    /// reserved until it frees it).
    pub(crate) fn register(&self, balancer: impl RegisteredBalancer) -> Result<(), Error> {
        let balancer: Registered = Arc::new(balancer);
        let mut balancers = self.lock();
        if self.sealed.load(Ordering::Relaxed) {
            return Err(Error::NodeNotRunning);
        }
        balancers.insert(balancer.name().to_string(), Some(balancer));
        Ok(())
    }

    /// Frees `name` after a start under it failed (only while it is still reserved).
    pub(crate) fn release_reservation(&self, name: &str) {
        let mut balancers = self.lock();
        if matches!(balancers.get(name), Some(None)) {
            balancers.remove(name);
        }
    }

    /// Forgets the balancer whose state is `state` when it has stopped: only its own entry
    /// (a balancer started under the name since, or reserving it, stays).
    pub(crate) fn release<S>(&self, name: &str, state: &Arc<S>) {
        let mut balancers = self.lock();
        if let Some(Some(balancer)) = balancers.get(name) {
            if std::ptr::eq(balancer.state_ptr(), Arc::as_ptr(state).cast()) {
                balancers.remove(name);
            }
        }
    }

    /// The running balancer called `name`.
    ///
    /// Errors: [`Error::UnknownBalancer`].
    pub(crate) fn entry(&self, name: &str) -> Result<Registered, Error> {
        match self.lock().get(name) {
            Some(Some(balancer)) if balancer.is_own_running() => Ok(Arc::clone(balancer)),
            _ => Err(Error::UnknownBalancer {
                balancer: name.to_string(),
            }),
        }
    }

    /// The running balancer whose actor has the id `actor`.
    ///
    /// Errors: [`Error::UnknownBalancer`].
    pub(crate) fn by_actor(&self, actor: ractor::ActorId) -> Result<Registered, Error> {
        self.lock()
            .values()
            .flatten()
            .find(|b| b.actor_id() == actor && b.is_own_running())
            .cloned()
            .ok_or_else(|| Error::UnknownBalancer {
                balancer: format!("(of actor {actor})"),
            })
    }

    /// The balancer registered under `name` whose actor has ended but which has not stopped
    /// yet (it drains; its entry goes when it has).
    pub(crate) fn draining(&self, name: &str) -> Option<Registered> {
        match self.lock().get(name) {
            Some(Some(balancer)) if !balancer.is_own_running() => Some(Arc::clone(balancer)),
            _ => None,
        }
    }

    /// Every balancer still registered: running, or draining after its actor ended (to stop
    /// them, or wait for their drains, at shutdown).
    pub(crate) fn running(&self) -> Vec<Registered> {
        self.lock().values().flatten().cloned().collect()
    }

    /// Refuses every later [`BalancerRegistry::reserve`] (the node begins to shut down).
    /// Starts that reserved their name before still register (or free it).
    pub(crate) fn close(&self) {
        let _balancers = self.lock();
        self.closed.store(true, Ordering::Relaxed);
    }

    /// Refuses every later [`BalancerRegistry::register`] (the node's shutdown has stopped
    /// waiting for starts under way).
    pub(crate) fn seal(&self) {
        let _balancers = self.lock();
        self.sealed.store(true, Ordering::Relaxed);
    }

    /// The balancers this node is a member of and those it calls with subsetting, among the
    /// running ones (for its node directory entry).
    pub(crate) fn directory_roles(&self) -> (Vec<String>, Vec<String>) {
        let (mut serves, mut calls) = (Vec::new(), Vec::new());
        for balancer in self.lock().values().flatten() {
            if !balancer.is_own_running() {
                continue;
            }
            let (member, subsetting) = balancer.directory_roles();
            if member {
                serves.push(balancer.name().to_string());
            }
            if subsetting {
                calls.push(balancer.name().to_string());
            }
        }
        (serves, calls)
    }

    /// Whether a start has reserved a name and not yet registered or freed it.
    pub(crate) fn starting(&self) -> bool {
        self.lock().values().any(Option::is_none)
    }
}

/// The balancer admin handler of a node state that was given none (unit tests and fuzzing of
/// the lower layers): it answers as a node with no balancers started — no members, calls in
/// flight, served calls or LeastCpu scores; [`Error::UnknownBalancer`] for a stop;
/// [`Error::BadRequest`] naming the request for a start (and any other request: the test
/// hooks' kill and Poller crash). A started node is given the balancer layer's
/// (`Node::start`, `Node::attach`).
pub(crate) fn no_balancer_admin(
    shared: Arc<super::shared::NodeShared>,
    request: ControlRequest,
) -> BoxFuture<'static, Result<ControlReply, Error>> {
    Box::pin(async move {
        Ok(match request {
            ControlRequest::InFlight(_) => ControlReply::InFlight(None),
            ControlRequest::Members(_) => ControlReply::Members(None),
            ControlRequest::Served(_) => ControlReply::Served(None),
            ControlRequest::CpuSelection => ControlReply::CpuSelection(Vec::new()),
            ControlRequest::StopBalancer(balancer)
            | ControlRequest::StopBalancerReport(balancer) => {
                return Err(Error::UnknownBalancer { balancer })
            }
            other => {
                return Err(Error::BadRequest {
                    node: shared.name.clone(),
                    message: format!("this node runs no balancers: {other:?}"),
                })
            }
        })
    })
}
