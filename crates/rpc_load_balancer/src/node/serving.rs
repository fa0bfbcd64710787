//! What the serving side (`endpoint`) asks of the node: the node's answers to the control
//! requests about its peers (`Nodes`, `ConnectionOf`, `Peers`), a join notice (`Joined`), a
//! peer's leave announcement (`Leaving`), and — through the balancer layer's handler it was
//! given — those about its balancers.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::shared::NodeShared;
use crate::control::{ControlReply, ControlRequest};
use crate::endpoint::Serving;
use crate::transport::Transport;
use crate::Error;

impl Serving for NodeShared {
    fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    fn answer(
        self: Arc<Self>,
        request: ControlRequest,
    ) -> BoxFuture<'static, Result<ControlReply, Error>> {
        let answer = match request {
            ControlRequest::Nodes => ControlReply::Nodes(self.peers.names()),
            ControlRequest::ConnectionOf(name) => {
                ControlReply::ConnectionOf(self.peers.connection_of(&name))
            }
            ControlRequest::Peers => ControlReply::Peers(self.peers.addresses()),
            ControlRequest::Labels => ControlReply::Labels(self.config.labels.to_pairs()),
            ControlRequest::Gossip(entries) => super::gossip::answer(&self, entries),
            ControlRequest::GossipDigest(digest) => super::gossip::answer_digest(&self, digest),
            ControlRequest::GossipEntries(entries) => super::gossip::answer_entries(&self, entries),
            ControlRequest::Directory => ControlReply::Directory(self.directory.entries()),
            ControlRequest::Heartbeat(node) => {
                super::heartbeat::on_heartbeat(&self, &node);
                ControlReply::Pong {
                    node: self.name.clone(),
                    wire_version: crate::wire::local_version(),
                }
            }
            ControlRequest::Joined { node, addr } => {
                super::on_joined(&self, node, addr);
                ControlReply::Done
            }
            ControlRequest::Leaving(node) if !self.peers.is_connected(&node) => {
                // Only a connected peer can be leaving: a name we don't know is not recorded,
                // so the set stays bounded by the peers this node has had.
                tracing::debug!(%node, "ignoring a leave announcement for a node that is not a peer");
                ControlReply::Done
            }
            ControlRequest::Leaving(node) => {
                tracing::debug!(%node, "peer announced it is leaving");
                self.peers.mark_leaving(&node);
                let _ = self.events.send(crate::NodeEvent::Leaving { node });
                ControlReply::Done
            }
            request => {
                let admin = self.balancer_admin;
                return admin(self, request);
            }
        };
        Box::pin(std::future::ready(Ok(answer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{answer_control, serve_control};
    use crate::node::NodeConfig;

    /// A node's shared state named `name@127.0.0.1`, built from `config`.
    fn shared_named(name: &str, config: NodeConfig) -> Arc<NodeShared> {
        Arc::new(NodeShared::new(
            format!("{name}@127.0.0.1"),
            "127.0.0.1:0".into(),
            None,
            &config,
        ))
    }

    /// Serves `request` as the node's endpoint does and decodes the reply as a caller would.
    async fn control_of(
        shared: &Arc<NodeShared>,
        request: &ControlRequest,
    ) -> Result<ControlReply, Error> {
        let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
        decode_control(shared, serve_control(shared, &bytes).await)
    }

    /// Serves `request` as a node built without the `test-hooks` feature would, and decodes
    /// the reply as a caller would.
    async fn control_without_hooks(
        shared: &Arc<NodeShared>,
        request: &ControlRequest,
    ) -> Result<ControlReply, Error> {
        let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
        decode_control(shared, answer_control(shared, &bytes, false).await)
    }

    /// Decodes a control reply of `shared` as a caller would.
    fn decode_control(shared: &Arc<NodeShared>, reply: Vec<u8>) -> Result<ControlReply, Error> {
        let timeout = std::time::Duration::from_secs(1);
        crate::call::decode_reply(&shared.name, "control", reply, timeout)
    }

    #[tokio::test]
    async fn the_node_answers_its_peer_requests_and_ignores_a_stranger_leaving() {
        let shared = shared_named("peers", NodeConfig::new("peers", "127.0.0.1:0").cookie("c"));
        assert_eq!(
            control_of(&shared, &ControlRequest::Nodes).await,
            Ok(ControlReply::Nodes(Vec::new()))
        );
        assert_eq!(
            control_of(&shared, &ControlRequest::Peers).await,
            Ok(ControlReply::Peers(Vec::new()))
        );
        assert_eq!(
            control_of(&shared, &ControlRequest::ConnectionOf("x@h".into())).await,
            Ok(ControlReply::ConnectionOf(None))
        );
        let mut events = shared.events.subscribe();
        let stranger = ControlRequest::Leaving("stranger@127.0.0.1".into());
        assert_eq!(control_of(&shared, &stranger).await, Ok(ControlReply::Done));
        assert!(
            !shared.peers.has_left("stranger@127.0.0.1"),
            "a node that is not a peer is not recorded as leaving"
        );
        assert!(events.try_recv().is_err(), "and no event is sent");
        // A heartbeat is answered like a ping; one from a stranger is not recorded.
        let heartbeat = ControlRequest::Heartbeat("stranger@127.0.0.1".into());
        assert!(matches!(
            control_of(&shared, &heartbeat).await,
            Ok(ControlReply::Pong { node, .. }) if node == "peers@127.0.0.1"
        ));
        assert_eq!(shared.peers.heard_at("stranger@127.0.0.1"), None);
    }

    #[tokio::test]
    async fn balancer_requests_about_no_balancer_are_answered_by_the_default_handler() {
        let shared = shared_named(
            "no-balancers",
            NodeConfig::new("no-balancers", "127.0.0.1:0").cookie("c"),
        );
        assert_eq!(
            control_of(&shared, &ControlRequest::Members("none".into()))
                .await
                .unwrap(),
            ControlReply::Members(None)
        );
        assert_eq!(
            control_of(&shared, &ControlRequest::InFlight("none".into()))
                .await
                .unwrap(),
            ControlReply::InFlight(None)
        );
        assert_eq!(
            control_of(&shared, &ControlRequest::CpuSelection)
                .await
                .unwrap(),
            ControlReply::CpuSelection(Vec::new())
        );
    }

    #[tokio::test]
    async fn crash_poller_is_admin_gated() {
        let closed = shared_named(
            "crash-closed",
            NodeConfig::new("crash-closed", "127.0.0.1:0").cookie("c"),
        );
        let request = ControlRequest::CrashPoller("no-such-balancer".into());
        match control_of(&closed, &request).await {
            Err(crate::Error::Remote { message, .. }) => {
                assert!(message.contains("remote_admin"), "{message}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let open = shared_named(
            "crash-open",
            NodeConfig::new("crash-open", "127.0.0.1:0")
                .cookie("c")
                .remote_admin(true),
        );
        match control_of(&open, &request).await {
            Err(crate::Error::Remote { message, .. }) => {
                assert!(message.contains("no-such-balancer"), "{message}")
            }
            other => panic!("expected the poller's error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_node_built_without_test_hooks_refuses_them_with_bad_request_and_serves_the_rest() {
        let shared = shared_named(
            "no-hooks",
            NodeConfig::new("no-hooks", "127.0.0.1:0")
                .cookie("c")
                .remote_admin(true),
        );
        for request in [
            ControlRequest::KillLoadBalancer("work".into()),
            ControlRequest::CrashPoller("work".into()),
            ControlRequest::EndBalancerParent {
                name: "work".into(),
                kill: false,
            },
        ] {
            // Built with the hooks (as this test build is), the request is carried out: no such
            // balancer or Poller here, a remote error naming it.
            match control_of(&shared, &request).await {
                Err(crate::Error::Remote { message, .. }) => {
                    assert!(message.contains("work"), "{message}")
                }
                other => panic!("expected the hook's own error for {request:?}, got {other:?}"),
            }
            // Built without them, it is refused unrun, as an unknown request is.
            match control_without_hooks(&shared, &request).await {
                Err(crate::Error::BadRequest { node, message }) => {
                    assert_eq!(node, shared.name);
                    assert!(message.contains("`test-hooks`"), "{message}");
                }
                other => panic!("expected BadRequest for {request:?}, got {other:?}"),
            }
        }
        assert!(matches!(
            control_without_hooks(&shared, &ControlRequest::Ping).await,
            Ok(ControlReply::Pong { .. })
        ));
    }
}
