//! The ClusterManager actor: turns NodeServer session events and pg changes into the node
//! table the call path reads, and into public node up/down events.
//!
//! ractor_cluster's event callbacks run synchronously inside the NodeServer actor, so the
//! subscription only forwards them here. A peer is **up** when one of its sessions reaches the
//! ready state (its pg memberships are synced by then) and **down** when its last ready session
//! closes: the losing session of a simultaneous connect closes too, and must not take the
//! winner's entry with it, so ready sessions are tracked per name.
//!
//! **Duplicate names.** ractor_cluster 0.16.5 elects between two authenticated sessions of the
//! same name by a random nonce, so a second process reusing a live node's name may win and
//! disconnect the original. Like Erlang, we keep the first: a session that authenticates under
//! the name of a ready peer advertising another address is stopped, and if the election
//! already dropped the original, it is dialled again. (A node restarted on the same address is
//! a reconnect, not a duplicate.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::pg::GroupChangeMessage;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage};

use super::event::{NodeEvent, SessionEvent, SessionStage};
use super::peer_table::Peer;
use super::refusals::{Opening, Refusals};
use super::shared::NodeShared;
use crate::wire::{node_of_endpoint, RpcMessage, CLIENT_GROUP, ENDPOINT_GROUP, SCOPE};

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
}

/// Forwards NodeServer callbacks to the manager without blocking the NodeServer.
struct Forwarder(ActorRef<ClusterMsg>);

impl Forwarder {
    fn forward(&self, stage: SessionStage, info: NodeServerSessionInformation) {
        let event = SessionEvent {
            stage,
            session_id: info.actor.get_id(),
            session: info.actor,
            name: info.peer_name.as_ref().map(|p| p.name.clone()),
            connection_string: info.peer_name.as_ref().map(|p| p.connection_string.clone()),
            peer_addr: info.peer_addr,
            is_server: info.is_server,
        };
        // The manager stops only at node shutdown; a lost event then is harmless.
        let _ = self.0.cast(ClusterMsg::Session(event));
    }
}

impl NodeEventSubscription for Forwarder {
    fn node_session_opened(&self, ses: NodeServerSessionInformation) {
        self.forward(SessionStage::Opened, ses);
    }
    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        self.forward(SessionStage::Disconnected, ses);
    }
    fn node_session_authenticated(&self, ses: NodeServerSessionInformation) {
        self.forward(SessionStage::Authenticated, ses);
    }
    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        self.forward(SessionStage::Ready, ses);
    }
}

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

impl ClusterState {
    /// Records whether the peer `name`, just up, is a client node (its pg groups are synced
    /// by its ready).
    fn note_client(&self, name: &str) {
        let client = ractor::pg::get_scoped_members(&SCOPE.to_string(), &CLIENT_GROUP.to_string())
            .iter()
            .any(|cell| cell.get_name().as_deref().and_then(node_of_endpoint) == Some(name));
        self.shared.peers.set_client(name, client);
    }

    /// Takes session `id` off the sessions waiting to authenticate.
    fn forget_opening(&mut self, id: &ActorId) -> Option<Opening> {
        self.opening.remove(id)
    }

    /// Closes session `id` if it is still not authenticated.
    fn on_handshake_deadline(&mut self, id: ActorId) {
        if let Some(opening) = self.forget_opening(&id) {
            if self.stalled.hit() {
                tracing::warn!(
                    peer_addr = %opening.peer_addr,
                    timeout_ms = self.shared.config.connect_timeout.as_millis() as u64,
                    times = self.stalled.count(),
                    "closing a session that did not authenticate in time"
                );
            }
            if let Some(handshake) = &opening.handshake {
                handshake.close("no handshake within connect_timeout".into());
            }
            opening.session.stop(Some("handshake timeout".into()));
        }
    }

    fn on_session(&mut self, event: SessionEvent) {
        match event.stage {
            SessionStage::Opened => {
                let handshake = match &self.shared.handshakes {
                    Some(handshakes) if event.is_server => handshakes.find(&event.peer_addr),
                    _ => None,
                };
                let opening = Opening {
                    session: event.session.clone(),
                    peer_addr: event.peer_addr.clone(),
                    is_server: event.is_server,
                    handshake,
                };
                self.opening.insert(event.session_id, opening);
                let id = event.session_id;
                self.myself
                    .send_after(self.shared.config.connect_timeout, move || {
                        ClusterMsg::HandshakeDeadline(id)
                    });
            }
            SessionStage::Disconnected => {
                if let Some(opening) = self.forget_opening(&event.session_id) {
                    if let (Some(handshakes), Some(handshake)) =
                        (&self.shared.handshakes, &opening.handshake)
                    {
                        // Its slot ends with its session, not at its handshake deadline.
                        handshakes.ended(handshake);
                    }
                    let name = event.name.clone();
                    Arc::clone(&self.refusals).closed_unauthenticated(&self.shared, opening, name);
                }
            }
            _ => {
                let opening = self.forget_opening(&event.session_id);
                let handshake = opening.and_then(|o| o.handshake);
                if let (Some(handshakes), Some(handshake)) = (&self.shared.handshakes, handshake) {
                    // Authenticated: its frames are no longer limited.
                    handshakes.authenticated(&handshake);
                }
            }
        }
        tracing::debug!(
            stage = ?event.stage,
            peer = event.name.as_deref().unwrap_or("?"),
            peer_addr = %event.peer_addr,
            is_server = event.is_server,
            "node session event"
        );
        match (event.stage, &event.name) {
            (SessionStage::Ready, Some(name)) => {
                let peer = Peer {
                    session_id: event.session_id,
                    session: event.session.get_cell(),
                    connection_string: event.connection_string.clone().unwrap_or_default(),
                    endpoint: None,
                };
                let sessions = self.ready.entry(name.clone()).or_default();
                let first = sessions.is_empty();
                sessions.retain(|p| p.session_id != peer.session_id);
                sessions.push(peer);
                if !self.endpoints.contains_key(name) {
                    // The ready event follows the peer's pg sync; read pg in case our monitor's
                    // notification has not arrived yet.
                    for cell in ractor::pg::get_scoped_members(
                        &SCOPE.to_string(),
                        &ENDPOINT_GROUP.to_string(),
                    ) {
                        add_endpoint(&mut self.endpoints, &cell);
                    }
                }
                self.publish();
                if first {
                    self.note_client(name);
                    tracing::info!(node = %name, "node up");
                    // Back (e.g. restarted): no longer a node that left.
                    self.shared.peers.forget_left(name);
                    let (shared, server) = (Arc::clone(&self.shared), self.server.clone());
                    let (peer, session) = (name.clone(), event.session.get_cell());
                    tokio::spawn(async move {
                        if super::version::check(&shared, &peer, &session).await {
                            super::mesh::introduce(shared, server, peer).await;
                        }
                    });
                    let _ = self
                        .shared
                        .events
                        .send(NodeEvent::Up { node: name.clone() });
                }
            }
            (SessionStage::Disconnected, _) => self.on_disconnected(event.session_id),
            (SessionStage::Authenticated, Some(name))
                if self
                    .shared
                    .peers
                    .refused_within(name, super::version::REFUSAL_KEPT) =>
            {
                tracing::debug!(node = %name, "closing a new session of a refused peer");
                event
                    .session
                    .stop(Some("refused: another wire version".into()));
            }
            (SessionStage::Authenticated, Some(name)) => self.reject_duplicate(name, &event),
            _ => {}
        }
        // Waiters in `connect` see the event after the table is updated.
        let _ = self.shared.sessions.send(event);
    }

    /// Stops a newly authenticated session that claims the name of a ready peer at another
    /// address (see the module docs).
    fn reject_duplicate(&mut self, name: &str, event: &SessionEvent) {
        let Some(current) = self.ready.get(name).and_then(|sessions| sessions.last()) else {
            return;
        };
        let claimed = event.connection_string.as_deref().unwrap_or_default();
        if current.session_id == event.session_id || current.connection_string == claimed {
            return;
        }
        tracing::warn!(
            node = %name,
            original = %current.connection_string,
            newcomer = %claimed,
            "rejecting a second node with the same name"
        );
        self.duplicates.insert(
            name.to_string(),
            (current.connection_string.clone(), Instant::now()),
        );
        event.session.stop(Some("duplicate node name".to_string()));
    }

    fn on_disconnected(&mut self, session_id: ActorId) {
        let mut gone = None;
        let mut gone_addr = String::new();
        for (name, sessions) in self.ready.iter_mut() {
            let before = sessions.len();
            let mut lost = None;
            sessions.retain(|p| {
                let keep = p.session_id != session_id;
                if !keep {
                    lost = Some(p.connection_string.clone());
                }
                keep
            });
            if sessions.len() != before {
                if let (Some(lost), Some((original, at))) = (&lost, self.duplicates.get(name)) {
                    if original == lost && at.elapsed() < DUPLICATE_WINDOW {
                        // The election dropped the original for the duplicate: dial it again.
                        let (shared, server) = (Arc::clone(&self.shared), self.server.clone());
                        let lost = lost.clone();
                        tokio::spawn(async move {
                            let bound = shared.config.connect_timeout;
                            let _ = super::tls::dial(&shared, &server, &lost, bound).await;
                        });
                    }
                }
                if sessions.is_empty() {
                    gone = Some(name.clone());
                    gone_addr = lost.unwrap_or_default();
                }
                break;
            }
        }
        self.duplicates
            .retain(|_, (_, at)| at.elapsed() < DUPLICATE_WINDOW);
        if let Some(name) = gone {
            self.ready.remove(&name);
            self.publish();
            tracing::info!(node = %name, "node down");
            if super::reconnect::should_redial(&self.shared, &name, &gone_addr) {
                let (shared, server) = (Arc::clone(&self.shared), self.server.clone());
                tokio::spawn(super::reconnect::redial(
                    shared,
                    server,
                    name.clone(),
                    gone_addr,
                ));
            }
            // A client is done with once gone (a new one has a new name): forget it, so these
            // sets don't grow with every `rpclb call` made against this node.
            self.shared.peers.note_down(&name);
            let _ = self.shared.events.send(NodeEvent::Down { node: name });
        } else {
            self.publish();
        }
    }

    fn on_group_change(&mut self, change: GroupChangeMessage) {
        match change {
            GroupChangeMessage::Join(scope, group, cells)
                if scope == SCOPE && group == ENDPOINT_GROUP =>
            {
                for cell in &cells {
                    add_endpoint(&mut self.endpoints, cell);
                }
                self.publish();
            }
            GroupChangeMessage::Join(scope, group, cells)
                if scope == SCOPE && group == CLIENT_GROUP =>
            {
                // Kept after the client's session closes (that is when it matters); a node
                // of the same name that comes back as a server is taken out at its ready.
                let clients = cells
                    .iter()
                    .filter(|c| !c.get_id().is_local())
                    .filter_map(|cell| {
                        let name = cell.get_name()?;
                        node_of_endpoint(&name).map(str::to_string)
                    });
                self.shared.peers.add_clients(clients);
            }
            GroupChangeMessage::Leave(scope, group, cells)
                if scope == SCOPE && group == ENDPOINT_GROUP =>
            {
                for cell in &cells {
                    let id = cell.get_id();
                    self.endpoints.retain(|_, endpoint| endpoint.get_id() != id);
                }
                self.publish();
            }
            _ => {}
        }
    }

    /// Rebuilds the lock-free table and the node list from the ready sessions.
    fn publish(&self) {
        let table: HashMap<String, Peer> = self
            .ready
            .iter()
            .filter_map(|(name, sessions)| {
                let mut peer = sessions.last()?.clone();
                peer.endpoint = self.endpoints.get(name).cloned();
                Some((name.clone(), peer))
            })
            .collect();
        self.shared.peers.publish(table);
    }
}
