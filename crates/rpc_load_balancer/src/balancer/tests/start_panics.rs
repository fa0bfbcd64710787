//! A start that panics (a [`Child`]'s spawn is user code) frees the balancer's name and stops
//! the children it had started: a later start under the name is not refused.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::balancer::Child;
use crate::{Balancer, BalancerConfig, Error, Node, NodeConfig};

/// A child that does nothing.
struct Idle;

impl Actor for Idle {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_spawn_that_panics_fails_the_start_and_frees_the_name() {
    let node = Node::start(NodeConfig::new("start_panics", "127.0.0.1:0").cookie("panics"))
        .await
        .unwrap();
    let idle = Child {
        name: "idle".into(),
        spawn: Arc::new(|parent| {
            Box::pin(async move {
                let (actor, _) =
                    Actor::spawn_linked(Some("idle-child".into()), Idle, (), parent).await?;
                Ok(actor.get_cell())
            })
        }),
    };
    let panics = Child {
        name: "feeder".into(),
        spawn: Arc::new(|_parent| Box::pin(async move { panic!("feeder config missing") })),
    };
    let first = Balancer::start(BalancerConfig::new("c").child(idle).child(panics)).await;
    assert!(
        matches!(&first, Err(Error::Startup { reason }) if reason.contains("panic")),
        "{first:?}"
    );
    // The child started before the panic is stopped with the failed start.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ractor::registry::where_is("idle-child").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle child runs on"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The name is free.
    let second = Balancer::start(BalancerConfig::new("c")).await.unwrap();
    assert_eq!(second.members().len(), 1);
    let reports = node.shutdown().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
}
