//! Three nodes form a full mesh, and every node can call every other.

use std::collections::BTreeSet;

use rpc_load_balancer::{ControlReply, ControlRequest};
use rpclb::harness::Cluster;

use crate::{CallWhoami, Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_form_a_full_mesh_and_call_each_other() {
    let cluster = Cluster::start(BIN, 3, &[]).await.unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    assert_eq!(me.nodes(), names, "the test node sees all three children");

    // Each child lists the other two (plus the test node) within 5 s.
    for (i, name) in names.iter().enumerate() {
        let expected: BTreeSet<String> = names
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, n)| n.clone())
            .chain([me.name().to_string()])
            .collect();
        let deadline = tokio::time::Instant::now() + MESH_TIMEOUT;
        loop {
            let listed = match me.control(name, ControlRequest::Nodes).await.unwrap() {
                ControlReply::Nodes(nodes) => nodes.into_iter().collect::<BTreeSet<_>>(),
                other => panic!("unexpected reply {other:?}"),
            };
            if listed == expected {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} lists {listed:?}, expected {expected:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    // A direct call from each node to each other node's whoami answers its name.
    for from in &names {
        assert_eq!(&me.call::<Whoami>(from.clone(), ()).await.unwrap(), from);
        for to in names.iter().filter(|n| *n != from) {
            let answer = me
                .call::<CallWhoami>(from.clone(), to.clone())
                .await
                .unwrap();
            assert_eq!(&answer, to, "{from} asked {to}");
        }
    }
    me.shutdown().await;
}
