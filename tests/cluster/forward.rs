//! Node events and membership changes forwarded to an actor across real processes: a peer
//! that comes up and joins a balancer, then is killed, reaches the actor as mapped messages.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{Balancer, BalancerConfig, ForwardedEvent, NodeEvent};
use rpclb::harness::{Cluster, NodeSpec};
use tokio::sync::mpsc;

use crate::{BIN, MESH_TIMEOUT};

/// Bound on every wait of this test.
const BOUND: Duration = Duration::from_secs(10);

/// What the actor was told, as text.
#[derive(ractor_cluster::RactorMessage)]
struct Got(String);

/// Passes what it gets on to the test.
struct Collector;

impl Actor for Collector {
    type Msg = Got;
    type State = mpsc::UnboundedSender<String>;
    type Arguments = mpsc::UnboundedSender<String>;

    async fn pre_start(
        &self,
        _: ActorRef<Got>,
        out: mpsc::UnboundedSender<String>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(out)
    }

    async fn handle(
        &self,
        _: ActorRef<Got>,
        Got(text): Got,
        out: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = out.send(text);
        Ok(())
    }
}

/// What the actor got, in order.
struct Seen {
    got: mpsc::UnboundedReceiver<String>,
    all: Vec<String>,
}

impl Seen {
    /// Waits (≤ [`BOUND`]) until the actor has got `wanted` since `from` (an index into all it
    /// got), and returns the index after it. A node event and a membership change it causes
    /// may come in either order.
    async fn wait_for(&mut self, from: usize, wanted: &str) -> usize {
        let seen = tokio::time::timeout(BOUND, async {
            loop {
                if let Some(i) = self.all[from..].iter().position(|t| t == wanted) {
                    return from + i + 1;
                }
                let text = self.got.recv().await.expect("the collector runs");
                self.all.push(text);
            }
        })
        .await;
        seen.unwrap_or_else(|_| panic!("no {wanted:?} within {BOUND:?}; got {:?}", self.all))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_a_peer_up_joining_then_killed_reaches_the_actor() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = Balancer::start(BalancerConfig::new("work")).await.unwrap();
    let (out, got) = mpsc::unbounded_channel();
    let mut seen = Seen {
        got,
        all: Vec::new(),
    };
    let (actor, _) = Actor::spawn(None, Collector, out).await.unwrap();
    let events = me.forward_events_to(actor.clone(), |event| match event {
        ForwardedEvent::Node(NodeEvent::Up { node }) => Some(Got(format!("up {node}"))),
        ForwardedEvent::Node(NodeEvent::Down { node }) => Some(Got(format!("down {node}"))),
        _ => None,
    });
    let members = balancer.forward_members_to(actor.clone(), |members| {
        Some(Got(format!("members {}", members.nodes().join(","))))
    });

    let mut late = NodeSpec::new("late", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .start(cluster.bin())
        .await
        .unwrap();
    let late_name = late.node().to_string();
    let mut both = [me.name().to_string(), late_name.clone()];
    both.sort();
    let up = seen.wait_for(0, &format!("up {late_name}")).await;
    let joined = seen
        .wait_for(0, &format!("members {}", both.join(",")))
        .await;

    late.kill().await;
    seen.wait_for(up, &format!("down {late_name}")).await;
    seen.wait_for(joined, &format!("members {}", me.name()))
        .await;

    // Both end with the actor.
    actor.stop(None);
    for forwarding in [events, members] {
        let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
        assert_eq!(end, Ok(rpc_load_balancer::ForwardingEnd::ActorStopped));
    }
    balancer.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
