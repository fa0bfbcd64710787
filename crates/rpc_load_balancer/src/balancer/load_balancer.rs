//! The LoadBalancer actor: this node's member of a balancer. It joins the balancer's pg group
//! (when this node matches `node_match_list`), watches the group, publishes the members
//! snapshot, and serves the calls routed to this node through the balancer.
//!
//! It is named `rpc_load_balancer/<balancer>/<node>`, so any node learns the member's node from
//! the name alone. `pre_start` joins and publishes before anyone can talk to it, so when
//! `Balancer::start` returns, this node is selectable. After a crash the supervisor starts a
//! new one, which joins again and rebuilds the snapshot from pg.

use std::sync::Arc;

use ractor::pg::GroupChangeMessage;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use std::sync::atomic::Ordering;

use super::in_flight::ServedToken;
use super::shared::BalancerShared;
use crate::endpoint::{dispatch, dispatch_with, refusal, Held, Serving};
use crate::wire::reply::Refusal;
use crate::wire::{RpcMessage, SCOPE};

pub(crate) struct LoadBalancer;

impl Actor for LoadBalancer {
    type Msg = RpcMessage;
    type State = Arc<BalancerShared>;
    type Arguments = Arc<BalancerShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<RpcMessage>,
        shared: Arc<BalancerShared>,
    ) -> Result<Arc<BalancerShared>, ActorProcessingErr> {
        ractor::pg::monitor_scope(SCOPE.to_string(), myself.get_cell());
        // A member restarted while its balancer drains does not join again.
        if shared.member && !shared.stopping.load(Ordering::Acquire) {
            ractor::pg::join_scoped(
                SCOPE.to_string(),
                shared.name.clone(),
                vec![myself.get_cell()],
            );
        }
        shared.refresh();
        shared.watch_labels();
        shared.watch_subset();
        Ok(shared)
    }

    async fn handle(
        &self,
        _myself: ActorRef<RpcMessage>,
        message: RpcMessage,
        shared: &mut Arc<BalancerShared>,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            message @ (RpcMessage::Call(..) | RpcMessage::Cast(..)) => {
                // Counted before the check: a drain stops accepting, then reads the served
                // count, so it either sees this call or this call sees the refusal.
                let serving = ServedToken::new(shared);
                match message {
                    RpcMessage::Call(call, port) if !shared.accepting.load(Ordering::SeqCst) => {
                        // Past the leave grace: refuse unrun, handing the call back so the
                        // caller sends it elsewhere.
                        let in_flight = serving.balancer_in_flight();
                        drop(serving);
                        let transport = shared.node.transport();
                        let reply = refusal(transport, call, Refusal::Leaving, in_flight);
                        let _ = port.send(reply);
                    }
                    message => {
                        let abandoned = Arc::clone(&shared.abandoned);
                        dispatch_with(&shared.node, message, serving, abandoned);
                    }
                }
            }
            other => dispatch(&shared.node, other),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<RpcMessage>,
        message: SupervisionEvent,
        shared: &mut Arc<BalancerShared>,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(change) = message {
            let ours = match &change {
                GroupChangeMessage::Join(scope, group, _)
                | GroupChangeMessage::Leave(scope, group, _) => {
                    scope == SCOPE && *group == shared.name
                }
            };
            if ours {
                shared.refresh();
            }
        }
        Ok(())
    }
}
