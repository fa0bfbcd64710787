//! The ClusterManager actor: turns NodeServer session events and pg changes into the node
//! table the call path reads, and into public node up/down events.
//!
//! ractor_cluster's event callbacks run synchronously inside the NodeServer actor, so the
//! subscription only forwards them here. A peer is **up** when one of its sessions reaches the
//! ready state (its pg memberships are synced by then) and **down** when its last ready session
//! closes: the losing session of a simultaneous connect closes too, and must not take the
//! winner's entry with it, so ready sessions are tracked per name. And when the session in use
//! is the one closed, while the other is on its way up, the peer is neither reported down nor
//! up again: a handover, not a flap (`ClusterState::handovers`) — provided the session that
//! comes up is the same process: same name, same advertised address and, when the peer
//! publishes one, the same incarnation (`incarnation.rs`). A peer restarted under its name
//! and address is reported `Down`, then `Up`, and checked again like any new peer (wire
//! version, labels, its peers), whether its old session closed first or lingers.
//!
//! **Duplicate names.** ractor_cluster 0.16.5 elects between two authenticated sessions of the
//! same name by a random nonce, so a second process reusing a live node's name may win and
//! disconnect the original. Like Erlang, we keep the first: a session that authenticates under
//! the name of a ready peer advertising another address is stopped, and if the election
//! already dropped the original, it is dialled again. (A node restarted on the same address is
//! a reconnect, not a duplicate.)

mod forwarder;
mod groups;
mod sessions;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::NodeServerMessage;

use super::event::SessionEvent;
use super::peer_table::Peer;
use super::refusals::{Opening, Refusals};
use super::shared::NodeShared;
use crate::wire::{node_of_endpoint, RpcMessage, ENDPOINT_GROUP, SCOPE};
use forwarder::Forwarder;

/// Id of our event subscription on the NodeServer.
pub(crate) const SUBSCRIPTION_ID: &str = "rpc_load_balancer.cluster";

/// Messages of the [`ClusterManager`].
#[derive(ractor_cluster::RactorMessage)]
pub(crate) enum ClusterMsg {
    /// A NodeServer session event.
    Session(SessionEvent),
    /// `connect_timeout` has passed since this session opened: close it if it has not
    /// authenticated (see `listener.rs`).
    HandshakeDeadline(ActorId),
    /// [`HANDOVER_GRACE`] has passed since the peer's session in use closed while other
    /// sessions were in their handshake: report it down unless one of its sessions is ready
    /// again.
    HandoverEnd(String),
}

/// How long after a peer's session in use closed, while other sessions of this node were in
/// their handshake, the peer may come back over one of them without being reported down.
pub(crate) const HANDOVER_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Owns the node table. One per node.
pub(crate) struct ClusterManager;

/// Arguments of the [`ClusterManager`].
pub(crate) struct ClusterArgs {
    pub(crate) shared: Arc<NodeShared>,
    pub(crate) server: ActorRef<NodeServerMessage>,
}

/// How long after rejecting a duplicate the original's disconnect is taken as the election's
/// doing, and the original is dialled again.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(5);

pub(crate) struct ClusterState {
    myself: ActorRef<ClusterMsg>,
    shared: Arc<NodeShared>,
    /// Sessions opened and not authenticated yet, closed at their handshake deadline.
    opening: HashMap<ActorId, Opening>,
    /// Warnings about refused handshakes.
    refusals: Arc<Refusals>,
    /// Sessions closed for not authenticating in time (for throttled warnings).
    stalled: super::listener::Throttle,
    server: ActorRef<NodeServerMessage>,
    /// Names whose newcomer was rejected as a duplicate: the original's address, and when.
    duplicates: HashMap<String, (String, Instant)>,
    /// Peers whose last ready session closed while another session of theirs was on its way
    /// up (authenticated, not ready), or other sessions were in their handshake: the peer is
    /// not reported down unless that one closes too (or [`HANDOVER_GRACE`] passes), nor up
    /// again when it is ready. ractor_cluster keeps one session of two to the same peer (a
    /// dial each way at once) and may close the one in use: a handover, not a flap.
    handovers: std::collections::HashSet<String>,
    /// The address each peer in handover was last ready at, and when its handover began.
    handover_addr: HashMap<String, (String, Instant)>,
    /// The incarnation of each connected peer (or peer in handover) that published one
    /// (`incarnation.rs`), recorded when it came up.
    incarnations: HashMap<String, u64>,
    /// Ready sessions per peer name, oldest first; the last one carries traffic.
    ready: HashMap<String, Vec<Peer>>,
    /// Remote endpoints seen in pg, by node name.
    endpoints: HashMap<String, ActorRef<RpcMessage>>,
}

impl Actor for ClusterManager {
    type Msg = ClusterMsg;
    type State = ClusterState;
    type Arguments = ClusterArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ClusterMsg>,
        args: ClusterArgs,
    ) -> Result<ClusterState, ActorProcessingErr> {
        ractor::pg::monitor_scope(SCOPE.to_string(), myself.get_cell());
        let mut endpoints = HashMap::new();
        for cell in ractor::pg::get_scoped_members(&SCOPE.to_string(), &ENDPOINT_GROUP.to_string())
        {
            add_endpoint(&mut endpoints, &cell);
        }
        args.server.cast(NodeServerMessage::SubscribeToEvents {
            id: SUBSCRIPTION_ID.to_string(),
            subscription: Box::new(Forwarder(myself.clone())),
        })?;
        Ok(ClusterState {
            myself,
            shared: args.shared,
            opening: HashMap::new(),
            refusals: Default::default(),
            stalled: Default::default(),
            server: args.server,
            duplicates: HashMap::new(),
            handovers: Default::default(),
            handover_addr: HashMap::new(),
            incarnations: HashMap::new(),
            ready: HashMap::new(),
            endpoints,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ClusterMsg>,
        message: ClusterMsg,
        state: &mut ClusterState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ClusterMsg::Session(event) => state.on_session(event),
            ClusterMsg::HandshakeDeadline(id) => state.on_handshake_deadline(id),
            ClusterMsg::HandoverEnd(name) => state.on_handover_end(name),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ClusterMsg>,
        state: &mut ClusterState,
    ) -> Result<(), ActorProcessingErr> {
        // A later node in this process starts from zero.
        let ids: Vec<ActorId> = state.opening.keys().copied().collect();
        for id in ids {
            state.forget_opening(&id);
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<ClusterMsg>,
        message: SupervisionEvent,
        state: &mut ClusterState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(change) = message {
            state.on_group_change(change);
        }
        Ok(())
    }
}

/// Records `cell` if it is a remote node's endpoint.
fn add_endpoint(
    endpoints: &mut HashMap<String, ActorRef<RpcMessage>>,
    cell: &ActorCell,
) -> Option<String> {
    if cell.get_id().is_local() {
        return None;
    }
    let name = cell.get_name()?;
    let node = node_of_endpoint(&name)?.to_string();
    endpoints.insert(node.clone(), ActorRef::from(cell.clone()));
    Some(node)
}
