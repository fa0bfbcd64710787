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

/// How long a stopping balancer waits for each of its actors to stop.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Stops `actor` (one of a balancer's: its own actor, an algorithm child, the member or its
/// keeper) with the reason `balancer stopped`, and waits for it to have stopped (at most 5
/// s; at once if it is gone already).
pub(crate) async fn stop_and_wait(actor: &ActorCell) {
    let _ = actor
        .stop_and_wait(Some("balancer stopped".into()), Some(STOP_WAIT))
        .await;
}

/// The actor an `event` says has ended (terminated or failed) and why, if it says so.
pub(crate) fn ended(event: &ractor::SupervisionEvent) -> Option<(&ActorCell, String)> {
    match event {
        ractor::SupervisionEvent::ActorTerminated(cell, _, reason) => {
            Some((cell, reason.clone().unwrap_or_default()))
        }
        ractor::SupervisionEvent::ActorFailed(cell, error) => Some((cell, error.to_string())),
        _ => None,
    }
}
