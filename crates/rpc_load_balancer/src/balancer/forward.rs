//! A balancer's membership changes as messages to an actor
//! ([`Balancer::forward_members_to`]), over the forwarding task of `node::forward`.

use std::sync::Arc;

use futures_util::stream;
use ractor::{ActorRef, Message};

use super::{Balancer, Members};
use crate::node::forward::{self, Forwarding};

impl Balancer {
    /// Sends this balancer's members to `actor` as its own messages: first the current
    /// snapshot, then a snapshot on every join and leave (as [`Balancer::watch_members`] sees
    /// them: changes close together may come as one, the latest). `map` turns each snapshot
    /// into a message, or `None` to skip it.
    ///
    /// Returns a [`Forwarding`] guard: forwarding runs until the actor stops, the balancer
    /// begins to stop (its last, empty snapshot is not sent), or the guard is dropped (or
    /// [`detach`](Forwarding::detach)ed: then only the first two end it). Like
    /// `watch_members`, it follows the balancer this handle stands for when called: after a
    /// [restart](Balancer#restarts-a-handle-follows-its-name) the forwarding has ended, so
    /// forward again. It runs on its own tokio task, which calls `map`; a panic in `map` ends
    /// it. No errors: a stopped balancer or actor ends it at once.
    pub fn forward_members_to<M: Message>(
        &self,
        actor: ActorRef<M>,
        map: impl Fn(Arc<Members>) -> Option<M> + Send + 'static,
    ) -> Forwarding {
        forward_members(self.current_shared(), actor, map)
    }
}

/// Forwards the members snapshots of the balancer (or actor group) whose state is `shared` to
/// `actor`, as [`Balancer::forward_members_to`] describes.
pub(crate) fn forward_members<M: Message>(
    shared: Arc<super::BalancerShared>,
    actor: ActorRef<M>,
    map: impl Fn(Arc<Members>) -> Option<M> + Send + 'static,
) -> Forwarding {
    let watch = shared.watch();
    let source = stream::unfold(
        (watch, shared, true),
        |(mut watch, shared, first)| async move {
            if !first && watch.changed().await.is_err() {
                return None;
            }
            // Stopping wakes the watch without a change, then publishes empty members.
            if shared.is_stopping() {
                return None;
            }
            let members = Arc::clone(&watch.borrow_and_update());
            Some((members, (watch, shared, false)))
        },
    );
    forward::spawn(source, actor, map)
}

#[cfg(test)]
mod tests;
