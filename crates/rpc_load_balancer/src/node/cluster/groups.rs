//! pg group changes (remote endpoints and client nodes) and the lock-free node table built
//! from the ready sessions and the endpoints.

use ractor::pg::GroupChangeMessage;

use super::{add_endpoint, ClusterState};
use crate::node::peer_table::PeerMap;
use crate::wire::{node_of_endpoint, CLIENT_GROUP, ENDPOINT_GROUP, SCOPE};

impl ClusterState {
    /// Records whether the peer `name`, just up, is a client node (its pg groups are synced
    /// by its ready).
    pub(super) fn note_client(&self, name: &str) {
        let client = ractor::pg::get_scoped_members(&SCOPE.to_string(), &CLIENT_GROUP.to_string())
            .iter()
            .any(|cell| cell.get_name().as_deref().and_then(node_of_endpoint) == Some(name));
        self.shared.peers.set_client(name, client);
    }

    pub(super) fn on_group_change(&mut self, change: GroupChangeMessage) {
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
    pub(super) fn publish(&self) {
        let table: PeerMap = self
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
