//! Session events: sessions waiting to authenticate and their handshake deadline, a peer up
//! at its first ready session and down at its last, and duplicate names (see the module docs
//! of [`cluster`](super)).

use std::sync::Arc;
use std::time::Instant;

use ractor::ActorId;

use super::{add_endpoint, ClusterMsg, ClusterState, DUPLICATE_WINDOW};
use crate::node::event::{NodeEvent, SessionEvent, SessionStage};
use crate::node::incarnation;
use crate::node::peer_table::Peer;
use crate::node::refusals::Opening;
use crate::wire::{ENDPOINT_GROUP, SCOPE};

impl ClusterState {
    /// Takes session `id` off the sessions waiting to authenticate.
    pub(super) fn forget_opening(&mut self, id: &ActorId) -> Option<Opening> {
        self.opening.remove(id)
    }

    /// Closes session `id` if it is still not authenticated.
    pub(super) fn on_handshake_deadline(&mut self, id: ActorId) {
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

    pub(super) fn on_session(&mut self, event: SessionEvent) {
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
            (SessionStage::Authenticated, Some(name)) => {
                self.shared.peers.note_session_node(event.node_id, name);
                self.shared
                    .peers
                    .session_authenticated(event.session_id, name);
            }
            (SessionStage::Ready, Some(name)) => {
                self.shared.peers.note_session_node(event.node_id, name);
                self.shared.peers.session_settled(&event.session_id);
            }
            (SessionStage::Disconnected, _) => {
                self.shared.peers.forget_session_node(event.node_id);
                self.shared.peers.session_settled(&event.session_id);
            }
            _ => {}
        }
        match (event.stage, &event.name) {
            (SessionStage::Ready, Some(name)) => self.on_ready(name, &event),
            (SessionStage::Disconnected, name) => {
                self.on_disconnected(event.session_id, name.as_deref())
            }
            (SessionStage::Authenticated, Some(name))
                if self
                    .shared
                    .peers
                    .refused_within(name, crate::node::version::REFUSAL_KEPT) =>
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

    /// A session of `name` is ready: the peer is up unless another of its sessions is (or
    /// was, in a handover) carrying it for the same process; a peer that restarted under the
    /// same name and address (another incarnation) is reported down, then up.
    fn on_ready(&mut self, name: &str, event: &SessionEvent) {
        let peer = Peer {
            session_id: event.session_id,
            session: event.session.get_cell(),
            connection_string: event.connection_string.clone().unwrap_or_default(),
            peer_addr: event.peer_addr.clone(),
            endpoint: None,
        };
        let seen = incarnation::of_session(event.node_id);
        let recorded = self.incarnations.get(name).copied();
        let sessions = self.ready.entry(name.to_string()).or_default();
        let first = sessions.is_empty();
        // Sessions of the process that was there before (its connection not seen closed yet):
        // they carry nothing of the new one.
        let mut stale = Vec::new();
        if !first && incarnation::differs(recorded, seen) {
            stale = std::mem::take(sessions);
        }
        sessions.retain(|p| p.session_id != peer.session_id);
        let addr = peer.connection_string.clone();
        sessions.push(peer);
        if !self.endpoints.contains_key(name) || !stale.is_empty() {
            // The ready event follows the peer's pg sync; read pg in case our monitor's
            // notification has not arrived yet — the new session's endpoint last, so that it
            // is the one kept for its name.
            let (new, others): (Vec<_>, Vec<_>) =
                ractor::pg::get_scoped_members(&SCOPE.to_string(), &ENDPOINT_GROUP.to_string())
                    .into_iter()
                    .partition(|cell| cell.get_id().node() == event.node_id);
            for cell in others.iter().chain(&new) {
                add_endpoint(&mut self.endpoints, cell);
            }
        }
        self.publish();
        let restarted = if !stale.is_empty() {
            for old in &stale {
                old.session.stop(Some("the peer restarted".into()));
            }
            let old_addr = stale.last().map(|p| p.connection_string.clone());
            Some(old_addr.unwrap_or_default())
        } else if first && self.handovers.remove(name) {
            let old_addr = self.handover_addr.remove(name).map(|(addr, _)| addr);
            let old_addr = old_addr.unwrap_or_default();
            if old_addr == addr && !incarnation::differs(recorded, seen) {
                tracing::debug!(node = %name, "a peer's session handed over to its other one");
                if let Some(incarnation) = seen {
                    self.incarnations.insert(name.to_string(), incarnation);
                }
                return;
            }
            Some(old_addr)
        } else {
            None
        };
        if let Some(old_addr) = restarted {
            tracing::info!(node = %name, %old_addr, new_addr = %addr, "peer restarted (another process under its name)");
            self.peer_down(name.to_string(), old_addr);
        } else if !first {
            return;
        }
        match seen {
            Some(incarnation) => self.incarnations.insert(name.to_string(), incarnation),
            None => self.incarnations.remove(name),
        };
        self.note_client(name);
        tracing::info!(node = %name, "node up");
        // Back (e.g. restarted): no longer a node that left.
        self.shared.peers.forget_left(name);
        let (shared, server) = (Arc::clone(&self.shared), self.server.clone());
        let (peer, session) = (name.to_string(), event.session.get_cell());
        tokio::spawn(async move {
            if crate::node::version::check(&shared, &peer, &session).await {
                tokio::spawn(crate::node::labels::fetch(
                    Arc::clone(&shared),
                    peer.clone(),
                ));
                crate::node::mesh::introduce(shared, server, peer).await;
            }
        });
        let _ = self.shared.events.send(NodeEvent::Up {
            node: name.to_string(),
        });
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

    fn on_disconnected(&mut self, session_id: ActorId, name: Option<&str>) {
        // A session that was on its way up to a peer in handover closed: unless another one is
        // still on its way, the peer is down after all.
        if let Some(name) = name.filter(|n| self.handovers.contains(*n)) {
            if !self.shared.peers.is_authenticating(name) && !self.ready.contains_key(name) {
                self.on_handover_end(name.to_string());
                return;
            }
        }
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
                            let _ = crate::node::tls::dial(&shared, &server, &lost, bound).await;
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
            let coming = self.shared.peers.is_authenticating(&name);
            if coming || !self.opening.is_empty() {
                tracing::debug!(node = %name, coming, "a peer's session in use closed while others are on their way up");
                let ended = name.clone();
                self.myself.send_after(super::HANDOVER_GRACE, move || {
                    ClusterMsg::HandoverEnd(ended)
                });
                self.handover_addr
                    .insert(name.clone(), (gone_addr, Instant::now()));
                self.handovers.insert(name);
                return;
            }
            self.peer_down(name, gone_addr);
        } else {
            self.publish();
        }
    }

    /// Ends the handover of `name` (see `ClusterState::handovers`) if it is still in one and
    /// has no session on its way up: it is down.
    pub(super) fn on_handover_end(&mut self, name: String) {
        if self.ready.contains_key(&name) || !self.handovers.contains(&name) {
            return;
        }
        let since = self.handover_addr.get(&name).map(|(_, at)| at.elapsed());
        let within = since.is_some_and(|s| s < self.shared.config.connect_timeout);
        if within && self.shared.peers.is_authenticating(&name) {
            // Still on its way up: look again after another grace, within connect_timeout.
            self.myself
                .send_after(super::HANDOVER_GRACE, move || ClusterMsg::HandoverEnd(name));
            return;
        }
        if self.handovers.remove(&name) {
            let addr = self.handover_addr.remove(&name).map(|(addr, _)| addr);
            let addr = addr.unwrap_or_default();
            self.peer_down(name, addr);
        }
    }

    /// Reports `name`, last ready at `gone_addr`, down: redials it if it should be, forgets
    /// what is kept only while a peer is up, and sends the `Down` event.
    fn peer_down(&mut self, name: String, gone_addr: String) {
        tracing::info!(node = %name, "node down");
        if crate::node::reconnect::should_redial(&self.shared, &name, &gone_addr) {
            let (shared, server) = (Arc::clone(&self.shared), self.server.clone());
            tokio::spawn(crate::node::reconnect::redial(
                shared,
                server,
                name.clone(),
                gone_addr,
            ));
        }
        // A client is done with once gone (a new one has a new name): forget it, so these
        // sets don't grow with every `rpclb call` made against this node.
        self.shared.peers.note_down(&name);
        self.shared.peers.forget_labels(&name);
        self.incarnations.remove(&name);
        let _ = self.shared.events.send(NodeEvent::Down { node: name });
    }
}
