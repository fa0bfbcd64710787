//! [`Child`]: an actor a balancer's supervisor runs beside it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use ractor::{ActorCell, SpawnErr};

/// Spawns one child actor linked to the balancer's supervisor (given as the argument).
pub type SpawnChild =
    Arc<dyn Fn(ActorCell) -> BoxFuture<'static, Result<ActorCell, SpawnErr>> + Send + Sync>;

/// An actor to run beside a balancer ([`BalancerConfig::child`](super::BalancerConfig::child);
/// LeastCpu's Poller is one the balancer adds itself). The balancer's supervisor starts it
/// before the LoadBalancer and restarts it alone, with backoff, when it fails; a child's
/// failure never stops the balancer, and stopping the balancer stops it.
#[derive(Clone)]
pub struct Child {
    /// A name for logs.
    pub name: String,
    /// Starts the child linked to the given supervisor.
    pub spawn: SpawnChild,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
