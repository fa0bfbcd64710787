//! A mesh that forms under load (issue 21): 32 `rpclb node` processes dialling one hub at
//! once, all on this machine's few cores, become a full mesh — without any node deciding its
//! name is taken, and without any session closed for missed heartbeats. Behaviour, not
//! timing: the bound is generous (a debug build on a shared machine); how fast it forms is
//! measured by bench/mesh_form.py (bench/README.md).

use std::collections::BTreeSet;
use std::time::Duration;

use rpclb::harness::{random_cookie, NodeProcess, NodeSpec};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::BIN;

/// Nodes of the test, the hub included.
const NODES: usize = 32;

/// Bound for every node to list all others.
const MESH_BOUND: Duration = Duration::from_secs(90);

/// What one node reported: its process, the peers it lists at the end, and how many
/// `node_down` lines it printed (a peer lost while the mesh formed).
struct Seen {
    process: NodeProcess,
    peers: BTreeSet<String>,
    downs: usize,
}

/// Reads `process`'s event lines until it lists `want` peers or `deadline` passes.
async fn watch(mut process: NodeProcess, want: usize, deadline: tokio::time::Instant) -> Seen {
    let mut peers: BTreeSet<String> = process.ready_line()["peers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let mut downs = 0;
    while peers.len() < want && tokio::time::Instant::now() < deadline {
        for line in process.events_within(Duration::from_millis(200)).await {
            let node = line["node"].as_str().unwrap_or_default().to_string();
            match line["event"].as_str() {
                Some("node_up") => {
                    peers.insert(node);
                }
                Some("node_down") => {
                    downs += 1;
                    peers.remove(&node);
                }
                Some("events_lagged") => {
                    peers = line["peers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect();
                }
                _ => {}
            }
        }
    }
    Seen {
        process,
        peers,
        downs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_nodes_dialling_one_hub_at_once_form_a_full_mesh_without_false_verdicts() {
    let cookie = random_cookie();
    let hub = NodeSpec::new("hub", &cookie)
        .capture_stderr()
        .start(BIN)
        .await
        .unwrap();
    let hub_addr = hub.addr().to_string();
    // The others all at once, each given only the hub.
    let mut starting = JoinSet::new();
    for i in 1..NODES {
        let spec = NodeSpec::new(format!("m{i}"), &cookie)
            .peer(&hub_addr)
            .capture_stderr();
        starting.spawn(async move { spec.start(BIN).await });
    }
    let deadline = tokio::time::Instant::now() + MESH_BOUND;
    let mut watching = JoinSet::new();
    watching.spawn(watch(hub, NODES - 1, deadline));
    while let Some(started) = starting.join_next().await {
        let process = started.unwrap().expect("a node starts");
        watching.spawn(watch(process, NODES - 1, deadline));
    }
    let mut seen = Vec::new();
    while let Some(node) = watching.join_next().await {
        seen.push(node.unwrap());
    }
    let names: BTreeSet<String> = seen.iter().map(|s| s.process.node().to_string()).collect();
    assert_eq!(names.len(), NODES);
    let mut problems = Vec::new();
    for node in &seen {
        let me = node.process.node();
        let others: BTreeSet<String> = names.iter().filter(|n| *n != me).cloned().collect();
        if node.peers != others {
            let missing: Vec<&String> = others.difference(&node.peers).collect();
            problems.push(format!("{me} does not list {missing:?}"));
        }
        let log = node.process.stderr();
        for (what, line) in [
            ("decided its name was taken", "this node's name is taken"),
            (
                "rejected a duplicate name",
                "rejecting a second node with the same name",
            ),
            (
                "closed a session for missed heartbeats",
                "did not answer heartbeats",
            ),
        ] {
            let times = log.matches(line).count();
            if times > 0 {
                problems.push(format!("{me} {what} {times} times"));
            }
        }
    }
    let downs: usize = seen.iter().map(|s| s.downs).sum();
    for mut node in seen {
        node.process.kill().await;
    }
    assert!(
        problems.is_empty(),
        "{} problems (and {downs} node_down lines while forming):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
