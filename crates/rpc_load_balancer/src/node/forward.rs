//! Node events and membership changes as messages to an actor: an actor that wants to hear of
//! peers coming and going ([`Node::forward_events_to`]) or of a balancer's members changing
//! ([`Balancer::forward_members_to`](crate::Balancer::forward_members_to)) gets them in its
//! own mailbox, mapped to its own message type, instead of polling a broadcast or a watch.
//!
//! The task, its guard and its end: [`Forwarding`].

use std::panic::{catch_unwind, AssertUnwindSafe};

use futures_util::stream::{self, Stream, StreamExt};
use ractor::{ActorRef, Message};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::event::NodeEvent;
use super::shared::Lifecycle;
use super::Node;

/// What [`Node::forward_events_to`] hands its map function.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardedEvent {
    /// A node event, in the order the node saw them.
    Node(NodeEvent),
    /// The forwarding fell this many events behind the node (the node keeps the last 256 for
    /// each subscriber) and they are lost: what the actor knows of the peers may be stale;
    /// [`Node::nodes`] has the current list.
    Lagged(u64),
}

/// Why a forwarding ended by itself (see [`Forwarding::finished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardingEnd {
    /// The actor stopped (or a message could not be sent to it).
    ActorStopped,
    /// The source ended: the node stopped, or the balancer began to stop.
    SourceEnded,
    /// The map function panicked.
    MapPanicked,
}

/// A running forwarding of events to an actor: from [`Node::forward_events_to`] or
/// [`Balancer::forward_members_to`](crate::Balancer::forward_members_to).
///
/// One task per forwarding reads the source, maps each item with the caller's function
/// (`None` skips it) and sends the result to the actor. It ends at the first of:
/// - the actor stops (it is watched, so an actor that gets no message still ends it);
/// - the source ends (the node is stopped; the balancer begins to stop);
/// - this guard is dropped or [`stop`](Forwarding::stop)ped (its task is aborted: at most a
///   message being sent at that very moment on another thread still arrives; messages already
///   sent stay in the actor's mailbox) — unless it was [`detach`](Forwarding::detach)ed, in
///   which case only the first two end it;
/// - the map function panics (the panic is caught and logged at WARN, and ends it).
///
/// ```
/// use rpc_load_balancer::{ForwardedEvent, Node, NodeConfig, NodeEvent};
/// use ractor::{Actor, ActorProcessingErr, ActorRef};
///
/// #[derive(ractor_cluster::RactorMessage)]
/// enum PeersMsg {
///     Up(String),
///     Down(String),
///     /// Events were missed: read `Node::nodes` again.
///     Resync,
/// }
///
/// struct Peers;
/// impl Actor for Peers {
///     type Msg = PeersMsg;
///     type State = ();
///     type Arguments = ();
///     async fn pre_start(&self, _: ActorRef<PeersMsg>, _: ()) -> Result<(), ActorProcessingErr> {
///         Ok(())
///     }
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let node = Node::start(NodeConfig::new("forward_docs", "127.0.0.1:0").cookie("secret")).await?;
/// let (peers, _) = Actor::spawn(None, Peers, ()).await?;
/// let forwarding = node.forward_events_to(peers.clone(), |event| match event {
///     ForwardedEvent::Node(NodeEvent::Up { node }) => Some(PeersMsg::Up(node)),
///     ForwardedEvent::Node(NodeEvent::Down { node }) => Some(PeersMsg::Down(node)),
///     ForwardedEvent::Lagged(_) => Some(PeersMsg::Resync),
///     _ => None,
/// });
/// // Forwarding runs while `forwarding` is held (or `forwarding.detach()`: while `peers` runs).
/// # drop(forwarding);
/// # peers.stop(None);
/// # node.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping a Forwarding stops it at once: hold it, or detach it"]
pub struct Forwarding {
    task: Option<JoinHandle<ForwardingEnd>>,
}

impl Forwarding {
    /// Whether the forwarding has ended (by itself, or stopped).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the forwarding, as dropping it does.
    pub fn stop(self) {}

    /// Lets the forwarding run on its own until the actor stops or the source ends: the
    /// actor's lifetime (or the node's, or the balancer's) bounds it.
    pub fn detach(mut self) {
        self.task = None;
    }

    /// Waits until the forwarding ends by itself and says why. Dropping this future before
    /// then stops the forwarding (it owns the handle), so a bounded wait is
    /// `tokio::time::timeout(bound, forwarding.finished())`.
    pub async fn finished(mut self) -> ForwardingEnd {
        match self.task.take() {
            Some(task) => task.await.unwrap_or(ForwardingEnd::MapPanicked),
            None => ForwardingEnd::SourceEnded,
        }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts the task that sends each item of `source`, mapped by `map` (`None` skips it), to
/// `actor`, until the actor stops, the source ends or the returned handle drops.
pub(crate) fn spawn<T, M, S, F>(source: S, actor: ActorRef<M>, map: F) -> Forwarding
where
    T: Send + 'static,
    M: Message,
    S: Stream<Item = T> + Send + 'static,
    F: Fn(T) -> Option<M> + Send + 'static,
{
    let task = tokio::spawn(async move {
        let cell = actor.get_cell();
        let stopped = cell.wait(None);
        let mut stopped = std::pin::pin!(stopped);
        let mut source = std::pin::pin!(source);
        loop {
            let item = tokio::select! {
                biased;
                _ = &mut stopped => return ForwardingEnd::ActorStopped,
                item = source.next() => item,
            };
            let Some(item) = item else {
                return ForwardingEnd::SourceEnded;
            };
            let message = match catch_unwind(AssertUnwindSafe(|| map(item))) {
                Ok(message) => message,
                Err(_) => {
                    tracing::warn!("a forwarding's map function panicked: forwarding ends");
                    return ForwardingEnd::MapPanicked;
                }
            };
            if let Some(message) = message {
                if actor.send_message(message).is_err() {
                    return ForwardingEnd::ActorStopped;
                }
            }
        }
    });
    Forwarding { task: Some(task) }
}

/// The node's events as a stream: each event (or how many were lost) until the broadcast
/// closes or the node has stopped (events already sent before it stopped come first).
pub(crate) fn node_events(
    events: broadcast::Receiver<NodeEvent>,
    lifecycle: watch::Receiver<Lifecycle>,
) -> impl Stream<Item = ForwardedEvent> + Send + 'static {
    stream::unfold(
        (events, lifecycle),
        |(mut events, mut lifecycle)| async move {
            let stopped = lifecycle.wait_for(|l| *l == Lifecycle::Stopped);
            let next = tokio::select! {
                biased;
                next = events.recv() => next,
                _ = stopped => return None,
            };
            let item = match next {
                Ok(event) => ForwardedEvent::Node(event),
                Err(RecvError::Lagged(missed)) => ForwardedEvent::Lagged(missed),
                Err(RecvError::Closed) => return None,
            };
            Some((item, (events, lifecycle)))
        },
    )
}

impl Node {
    /// Sends this node's events from now on to `actor` as its own messages: `map` turns each
    /// [`ForwardedEvent`] (a [`NodeEvent`], or [`ForwardedEvent::Lagged`] when the actor's
    /// forwarding fell behind and events were lost) into a message, or `None` to skip it.
    ///
    /// Returns a [`Forwarding`] guard: forwarding runs until the actor stops, this node
    /// stops, or the guard is dropped (or [`detach`](Forwarding::detach)ed: then only the
    /// first two end it). It runs on its own tokio task, which calls `map`; a panic in `map`
    /// ends it. No errors: an actor that has already stopped ends it at once.
    ///
    /// [`Node::events`] is the same stream as a broadcast receiver.
    pub fn forward_events_to<M: Message>(
        &self,
        actor: ActorRef<M>,
        map: impl Fn(ForwardedEvent) -> Option<M> + Send + 'static,
    ) -> Forwarding {
        let shared = &self.inner.shared;
        let source = node_events(shared.events.subscribe(), shared.lifecycle.subscribe());
        spawn(source, actor, map)
    }
}

#[cfg(test)]
pub(crate) mod tests;
