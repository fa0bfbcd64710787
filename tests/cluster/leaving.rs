//! Leaving: a node stopped by SIGTERM (a drained shutdown) tells its peers it is leaving, so
//! they do not redial it; a node SIGKILLed in the same cluster is redialled at once. A peer
//! that left and is a *configured* peer (`--peer`) of a survivor is redialled only at the
//! slowest pace, `dial_backoff_max` (see `node/reconnect.rs` and `node/connect.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use rpclb::harness::{Cluster, NodeProcess};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::BIN;

/// Waits (≤ 10 s) until `node` has reported `node_up` for every one of `peers`.
async fn connected(node: &mut NodeProcess, peers: &[String]) {
    let mut up = BTreeSet::new();
    while !peers.iter().all(|p| up.contains(p)) {
        let line = node
            .wait_event("node_up", Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("{} saw only {up:?}: {e}", node.node()));
        up.insert(line["node"].as_str().unwrap_or_default().to_string());
    }
}

/// Dials by our cluster accepted on `listener` within `window`, each as its time after
/// `since`. A dialler's first frame (ractor_cluster's handshake `Name`) carries its own listen
/// address: only dials naming one of `ours` count, so a node of another test on this machine
/// redialling a peer that once had this port is not mistaken for ours.
async fn dials(
    listener: &TcpListener,
    ours: &[String],
    since: Instant,
    window: Duration,
) -> Vec<Duration> {
    let deadline = Instant::now() + window;
    // Each connection is kept open until the window ends (the dialler waits for a handshake
    // that never comes, then dials again).
    let mut accepted = Vec::new();
    while let Ok(Ok((stream, _))) = tokio::time::timeout_at(deadline, listener.accept()).await {
        let at = since.elapsed();
        accepted.push(tokio::spawn(async move {
            let mut first = vec![0u8; 1024];
            let mut read = 0;
            let bound = Instant::now() + Duration::from_secs(1);
            while read < first.len() {
                match tokio::time::timeout_at(bound, stream.readable()).await {
                    Ok(Ok(())) => match stream.try_read(&mut first[read..]) {
                        Ok(0) => break,
                        Ok(n) => read += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => break,
                    },
                    _ => break,
                }
            }
            first.truncate(read);
            (at, first, stream)
        }));
    }
    let mut ours_dialled = Vec::new();
    for connection in accepted {
        let (at, first, _stream) = connection.await.unwrap();
        let names_ours = ours
            .iter()
            .any(|addr| first.windows(addr.len()).any(|w| w == addr.as_bytes()));
        if names_ours {
            ours_dialled.push(at);
        }
    }
    ours_dialled
}

/// Index of the first line `{"event": event, "node": node}` in `lines`.
fn position(lines: &[Value], event: &str, node: &str) -> Option<usize> {
    lines
        .iter()
        .position(|l| l["event"] == event && l["node"] == node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_left_is_not_redialled_a_killed_one_is() {
    // n1, n2, n3 dial n0 (`--peer`); the mesh connects them to each other.
    let mut cluster = Cluster::start(BIN, 4, &["--dial-backoff-max-ms", "2000"])
        .await
        .unwrap();
    let names = cluster.names();
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        let others: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, n)| n.clone())
            .collect();
        connected(node, &others).await;
    }
    let (left, killed) = (names[1].clone(), names[2].clone());
    let left_addr = cluster.nodes[1].addr().to_string();
    let killed_addr = cluster.nodes[2].addr().to_string();

    // n1 drains and exits; n2 dies. Their ports are then ours: whoever redials them dials us.
    cluster.nodes[1].signal(libc::SIGTERM);
    let status = cluster.nodes[1]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("n1 exits after SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    let left_port = TcpListener::bind(&left_addr).await.unwrap();
    cluster.nodes[2].kill().await;
    let killed_port = TcpListener::bind(&killed_addr).await.unwrap();
    let since = Instant::now();
    let window = Duration::from_secs(3);
    let survivors = [
        cluster.nodes[0].addr().to_string(),
        cluster.nodes[3].addr().to_string(),
    ];
    let (left_dials, killed_dials) = tokio::join!(
        dials(&left_port, &survivors, since, window),
        dials(&killed_port, &survivors, since, window)
    );
    assert!(
        left_dials.is_empty(),
        "the node that left was redialled at {left_dials:?}"
    );
    assert!(
        !killed_dials.is_empty(),
        "the killed node was not redialled within {window:?}"
    );

    // What the survivors (n0, whom n1 dialled, and n3, who met n1 through the mesh) reported.
    for i in [0, 3] {
        let survivor = cluster.nodes[i].node().to_string();
        let lines = cluster.nodes[i]
            .events_within(Duration::from_millis(200))
            .await;
        let leaving = position(&lines, "node_leaving", &left)
            .unwrap_or_else(|| panic!("{survivor} did not report {left} leaving: {lines:?}"));
        let down = position(&lines, "node_down", &left)
            .unwrap_or_else(|| panic!("{survivor} did not report {left} down: {lines:?}"));
        assert!(leaving < down, "{survivor}: {lines:?}");
        assert_eq!(position(&lines, "node_up", &left), None, "{survivor}");
        assert!(
            position(&lines, "node_down", &killed).is_some(),
            "{survivor}: {lines:?}"
        );
        assert_eq!(
            position(&lines, "node_leaving", &killed),
            None,
            "{survivor}: a killed node said nothing"
        );
    }
    drop((left_port, killed_port));

    // n0 leaves too. It is n3's configured peer: n3 redials it, but only after waiting
    // `dial_backoff_max` (2 s ±20 %), not the 100 ms it waits for a peer lost uncleanly.
    let hub_addr = cluster.nodes[0].addr().to_string();
    let hub = names[0].clone();
    cluster.nodes[0].signal(libc::SIGTERM);
    let status = cluster.nodes[0]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("n0 exits after SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    let exited = Instant::now();
    let hub_port = TcpListener::bind(&hub_addr).await.unwrap();
    let n3 = [cluster.nodes[3].addr().to_string()];
    let redials = dials(&hub_port, &n3, exited, Duration::from_secs(4)).await;
    let first = *redials
        .first()
        .expect("n3 never redialled its configured peer that left");
    assert!(
        first >= Duration::from_millis(1_000),
        "n3 redialled its configured peer {first:?} after it left"
    );
    let lines = cluster.nodes[3]
        .events_within(Duration::from_millis(200))
        .await;
    assert!(
        position(&lines, "node_leaving", &hub).is_some(),
        "{lines:?}"
    );
    cluster.shutdown().await;
}
