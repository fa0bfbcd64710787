//! What a node tells about its peers: [`NodeEvent`]s for users (see
//! [`Node::events`](crate::Node::events)), and the session events the ClusterManager forwards
//! from the NodeServer to the node's own tasks.

use ractor::{ActorId, ActorRef};
use ractor_cluster::NodeSessionMessage;

/// A change in the set of connected nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeEvent {
    /// A session to `node` reached the ready state: its memberships are known and it can be
    /// called.
    Up {
        /// Full name of the node.
        node: String,
    },
    /// The last session to `node` closed (node stopped, killed, or evicted).
    Down {
        /// Full name of the node.
        node: String,
    },
    /// `node` announced it is shutting down, having drained (a `Down` follows when its
    /// sessions close). It is redialled only at the slowest pace.
    Leaving {
        /// Full name of the node.
        node: String,
    },
    /// `node` connected but was refused: it speaks another wire version of this library
    /// (see [`WIRE_VERSION`](crate::WIRE_VERSION)). Its session is closed and it is not
    /// redialled unless it is a configured peer (which may be upgraded meanwhile); a `Down`
    /// follows if it had been reported `Up`.
    Refused {
        /// Full name of the node.
        node: String,
        /// What was wrong, e.g. the [`Error::WireVersion`](crate::Error::WireVersion) message.
        reason: String,
    },
}

/// What happened to a session, forwarded from the NodeServer's event callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionStage {
    Opened,
    Authenticated,
    Ready,
    Disconnected,
}

/// A session event with what the NodeServer knew of the peer at that moment.
#[derive(Debug, Clone)]
pub(crate) struct SessionEvent {
    pub(crate) stage: SessionStage,
    pub(crate) session_id: ActorId,
    /// The NodeServer's number for the session (the `node_id` of its remote actors' ids).
    pub(crate) node_id: u64,
    pub(crate) session: ActorRef<NodeSessionMessage>,
    pub(crate) name: Option<String>,
    pub(crate) connection_string: Option<String>,
    pub(crate) peer_addr: String,
    pub(crate) is_server: bool,
}
