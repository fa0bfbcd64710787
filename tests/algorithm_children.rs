//! A balancer's child actors (`BalancerConfig::child`) run beside the balancer and are
//! restarted alone when they fail: the balancer (its LoadBalancer member) is untouched.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::balancer::Child;
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, RoundRobin};

/// A child that fails on any message.
struct Fragile {
    starts: Arc<AtomicU32>,
}

impl Actor for Fragile {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn handle(&self, _: ActorRef<()>, _: (), _: &mut ()) -> Result<(), ActorProcessingErr> {
        Err("deliberate failure".into())
    }
}

/// A child `fragile-<balancer>` that counts its starts in `starts`.
fn fragile(balancer: &str, starts: &Arc<AtomicU32>) -> Child {
    let starts = Arc::clone(starts);
    let name = format!("fragile-{balancer}");
    Child {
        name: name.clone(),
        spawn: Arc::new(move |supervisor| {
            let (starts, name) = (Arc::clone(&starts), name.clone());
            Box::pin(async move {
                let (actor, _) =
                    Actor::spawn_linked(Some(name), Fragile { starts }, (), supervisor).await?;
                Ok(actor.get_cell())
            })
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_is_restarted_alone() {
    let node = Node::start(NodeConfig::new("children", "127.0.0.1:0").cookie("children"))
        .await
        .unwrap();
    let starts = Arc::new(AtomicU32::new(0));
    let config = BalancerConfig::new("kids")
        .algorithm(RoundRobin::new())
        .child(fragile("kids", &starts));
    let balancer = Balancer::start(config).await.unwrap();
    assert_eq!(
        starts.load(Ordering::SeqCst),
        1,
        "the child starts with the balancer"
    );
    let member = balancer.members().as_slice()[0].id();

    for round in 1..=3u32 {
        let child = ractor::registry::where_is("fragile-kids").expect("the child runs");
        child.send_message(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while starts.load(Ordering::SeqCst) < round + 1 {
            assert!(
                Instant::now() < deadline,
                "child not restarted (round {round})"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(balancer.is_running());
    assert_eq!(
        balancer.members().as_slice()[0].id(),
        member,
        "the LoadBalancer was not restarted"
    );
    balancer.stop().await;
    assert!(
        ractor::registry::where_is("fragile-kids").is_none(),
        "stop stops the children"
    );
    node.shutdown().await;
}
