//! `Selector::members_changed` through a real balancer: the initial snapshot arrives first
//! (everything joining), then every join and leave, by node name, each with the members after
//! it and the version of the snapshot the balancer then publishes.
//!
//! Runs a `Node` in this process; the other members are local stand-in actors joined to the
//! balancer's pg group under member names (stopping one makes its member leave).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, Change, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, Error, MemberView, Node, NodeConfig, Selector,
};
use rpclb::harness::{join_stand_ins, stand_in_node};

/// One delivered change: joined, left, members after, version.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    joined: Vec<String>,
    left: Vec<String>,
    members: Vec<String>,
    version: u64,
}

/// Picks the first member and records every change it is told of.
#[derive(Default)]
struct Recording {
    changes: Arc<Mutex<Vec<Seen>>>,
}

impl Algorithm for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        assert_eq!(context.balancer, "changes");
        Ok(Box::new(RecordingSelector {
            changes: Arc::clone(&self.changes),
        }))
    }
}

/// The selector of [`Recording`]: shares its record.
struct RecordingSelector {
    changes: Arc<Mutex<Vec<Seen>>>,
}

impl Selector for RecordingSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }

    fn members_changed(&self, change: &Change<'_>) {
        assert_eq!(change.balancer, "changes");
        let names = |nodes: &[Arc<str>]| nodes.iter().map(|n| n.to_string()).collect();
        self.changes.lock().unwrap().push(Seen {
            joined: names(change.joined),
            left: names(change.left),
            members: change
                .members
                .iter()
                .map(|m| m.node().to_string())
                .collect(),
            version: change.version,
        });
    }
}

/// `names`, sorted.
fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_initial_snapshot_comes_first_then_joins_and_leaves_by_node_name() {
    let node = Node::start(NodeConfig::new("changes", "127.0.0.1:0").cookie("changes"))
        .await
        .unwrap();
    let me = node.name().to_string();
    let (one, two) = (stand_in_node(1), stand_in_node(2));
    let recording = Arc::new(Recording::default());
    let balancer = Balancer::start(BalancerConfig::new("changes").algorithm_arc(recording.clone()))
        .await
        .unwrap();
    let seen = || recording.changes.lock().unwrap().clone();
    let version = || balancer.members().version();

    // The initial snapshot: this node, joining.
    let mut expected = vec![Seen {
        joined: vec![me.clone()],
        left: vec![],
        members: vec![me.clone()],
        version: version(),
    }];
    assert_eq!(seen(), expected);

    // Two joins, one at a time.
    let mut stand_ins = join_stand_ins("changes", [1]).await.unwrap();
    balancer
        .wait_for_members(2, Duration::from_secs(5))
        .await
        .unwrap();
    expected.push(Seen {
        joined: vec![one.clone()],
        left: vec![],
        members: sorted(&[&me, &one]),
        version: version(),
    });
    assert_eq!(seen(), expected);
    stand_ins.extend(join_stand_ins("changes", [2]).await.unwrap());
    balancer
        .wait_for_members(3, Duration::from_secs(5))
        .await
        .unwrap();
    expected.push(Seen {
        joined: vec![two.clone()],
        left: vec![],
        members: sorted(&[&me, &one, &two]),
        version: version(),
    });
    assert_eq!(seen(), expected);

    // Stand-in 1 leaves.
    stand_ins
        .remove(0)
        .stop_and_wait(None, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let mut watch = balancer.watch_members();
    tokio::time::timeout(
        Duration::from_secs(5),
        watch.wait_for(|m| !m.contains(&one)),
    )
    .await
    .unwrap()
    .unwrap();
    expected.push(Seen {
        joined: vec![],
        left: vec![one.clone()],
        members: sorted(&[&me, &two]),
        version: version(),
    });
    assert_eq!(seen(), expected);
    // Versions increase with every change.
    assert!(expected.windows(2).all(|w| w[0].version < w[1].version));

    balancer.stop().await;
    node.shutdown().await;
}
