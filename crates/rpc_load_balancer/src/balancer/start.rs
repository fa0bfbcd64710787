//! Starting a balancer and getting handles to it: [`Balancer::start`] and
//! [`Balancer::spawn_linked`] (thin helpers over spawning a [`BalancerActor`]),
//! [`Balancer::from_actor`] and [`Balancer::lookup`].

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorRef, SpawnErr};

use super::shared::BalancerShared;
use super::{Balancer, BalancerActor, BalancerConfig, BalancerLookup, SupervisorMsg};
use crate::node::shared::NodeShared;
use crate::{Error, Node};

impl Balancer {
    /// Starts the balancer on this process's node (see [`Node::current`]), standalone: spawns
    /// a [`BalancerActor`] with no parent and returns a handle to it. Returns once this node
    /// is selectable (if it is a member).
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::InvalidConfig`] naming the option;
    /// [`Error::BalancerAlreadyStarted`]; [`Error::Startup`] if its actors cannot start.
    pub async fn start(config: BalancerConfig) -> Result<Balancer, Error> {
        Self::spawn(config, None).await
    }

    /// Starts the balancer linked to `supervisor` (an actor of the app's supervision tree):
    /// the same as `Actor::spawn_linked(name, BalancerActor, config, supervisor)` followed by
    /// [`Balancer::from_actor`] — spawn the [`BalancerActor`] yourself to keep its `JoinHandle`
    /// or choose its actor name.
    ///
    /// The parent gets ordinary supervision events for the balancer's actor: an
    /// `ActorTerminated` when it stops — also after a deliberate [`Balancer::stop`] — and
    /// ractor's default `handle_supervisor_evt` stops the parent then: override it in the
    /// parent to keep running. The other way round, when the parent stops or is killed,
    /// ractor kills the balancer's actor; the balancer then drains all the same (node-owned
    /// machinery does it, see [`BalancerActor`]), so no call is lost and the parent's
    /// `post_stop` need not call [`Balancer::stop`] (it may, to wait for the drain).
    ///
    /// Errors: as [`Balancer::start`].
    pub async fn spawn_linked(
        config: BalancerConfig,
        supervisor: ActorCell,
    ) -> Result<Balancer, Error> {
        Self::spawn(config, Some(supervisor)).await
    }

    /// Spawns a [`BalancerActor`] (under `parent` if given) named after the balancer and
    /// returns its handle.
    async fn spawn(config: BalancerConfig, parent: Option<ActorCell>) -> Result<Balancer, Error> {
        Node::current().ok_or(Error::NodeNotRunning)?;
        let name = config.name.clone();
        let actor_name = Some(format!("rpc_load_balancer/@balancer/{name}"));
        let spawned = match parent {
            Some(parent) => Actor::spawn_linked(actor_name, BalancerActor, config, parent).await,
            None => Actor::spawn(actor_name, BalancerActor, config).await,
        };
        match spawned {
            Ok((actor, _)) => Balancer::from_actor(&actor).map_err(|_| Error::Startup {
                reason: format!("balancer {name}: its actor ended while starting"),
            }),
            Err(error) => Err(startup_error(&name, error)),
        }
    }

    /// Starts a balancer on the node whose state is `node` (the admin `StartBalancer`
    /// request). The node is this process's.
    pub(crate) async fn start_on(
        node: Arc<NodeShared>,
        config: BalancerConfig,
    ) -> Result<Balancer, Error> {
        let current = Node::current().ok_or(Error::NodeNotRunning)?;
        if !Arc::ptr_eq(&current.shared(), &node) {
            return Err(Error::NodeNotRunning);
        }
        Self::start(config).await
    }

    /// A handle to the balancer run by `actor` (a [`BalancerActor`] spawned on this node),
    /// for calls: cheap, clone it freely.
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::UnknownBalancer`] if `actor` runs no
    /// balancer on this node (any more: it has stopped).
    pub fn from_actor(actor: &ActorRef<SupervisorMsg>) -> Result<Balancer, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        BalancerLookup::by_actor(&node.shared().balancers, actor.get_id())
    }

    /// The balancer started on this node under `name`.
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::UnknownBalancer`] if none runs here.
    pub fn lookup(name: &str) -> Result<Balancer, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        node.shared().balancers.get(name)
    }

    /// A handle of the balancer whose state is `shared` and whose actor is `actor`.
    pub(crate) fn from_parts(shared: Arc<BalancerShared>, actor: ActorRef<SupervisorMsg>) -> Self {
        Balancer {
            shared,
            supervisor: actor,
        }
    }
}

/// The typed error of a failed spawn of a [`BalancerActor`] named `name`: the [`Error`] its
/// `pre_start` returned, else [`Error::Startup`].
fn startup_error(name: &str, error: SpawnErr) -> Error {
    match error {
        SpawnErr::StartupFailed(inner) => match inner.downcast::<Error>() {
            Ok(error) => *error,
            Err(other) => Error::Startup {
                reason: format!("balancer {name}: {other}"),
            },
        },
        // The actor name the helpers give is the balancer's: one runs under it already.
        SpawnErr::ActorAlreadyRegistered(_) => Error::BalancerAlreadyStarted {
            balancer: name.to_string(),
        },
        other => Error::Startup {
            reason: format!("balancer {name}: {other}"),
        },
    }
}
