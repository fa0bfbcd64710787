//! Forwarding NodeServer session callbacks to the [`ClusterManager`](super::ClusterManager).

use ractor::ActorRef;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::NodeEventSubscription;

use super::ClusterMsg;
use crate::node::event::{SessionEvent, SessionStage};

/// Forwards NodeServer callbacks to the manager without blocking the NodeServer.
pub(super) struct Forwarder(pub(super) ActorRef<ClusterMsg>);

impl Forwarder {
    fn forward(&self, stage: SessionStage, info: NodeServerSessionInformation) {
        let event = SessionEvent {
            stage,
            session_id: info.actor.get_id(),
            node_id: info.node_id,
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
