//! The payload cap does not depend on the pick: through a balancer with a local and a remote
//! member, an oversized argument or reply gets the same `PayloadTooLarge` whichever member
//! serves it, and a call at the cap succeeds on both — the local run measures the same bytes
//! as the remote path (the call as encoded on the caller, the reply as encoded on the serving
//! node).

use std::collections::BTreeSet;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, PayloadDirection, RoundRobin, DEFAULT_MAX_PAYLOAD_BYTES,
};
use rpclb::harness::Cluster;

use crate::{Blob, Echo, Whoami, BIN, MESH_TIMEOUT};

/// Calls per case: RoundRobin over the two members sends half of them to each.
const CALLS: usize = 4;

/// The `PayloadTooLarge` sizes of `outcomes`, checking direction and limit (the default cap,
/// on both nodes).
fn too_large<T>(outcomes: Vec<Result<T, Error>>, direction: PayloadDirection) -> Vec<usize> {
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Err(Error::PayloadTooLarge {
                direction: d,
                size,
                limit,
            }) if d == direction && limit == DEFAULT_MAX_PAYLOAD_BYTES => size,
            Ok(_) => panic!("{direction:?}: the call succeeded"),
            Err(other) => panic!("{direction:?}: {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payload_cap_is_the_same_whoever_serves_the_call() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let remote = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    rpclb::functions::register_all(&me, Duration::ZERO).unwrap();
    // This node is a member too.
    let work = Balancer::start(BalancerConfig::new("work").algorithm(RoundRobin::new()))
        .await
        .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let mut served = BTreeSet::new();
    for _ in 0..CALLS {
        served.insert(
            work.call::<Whoami>(())
                .with_node()
                .await
                .unwrap()
                .1
                .to_string(),
        );
    }
    let both: BTreeSet<String> = [me.name().to_string(), remote.clone()].into();
    assert_eq!(served, both, "both members are picked");

    // A 9 MiB argument: refused before anything runs, whoever was picked.
    let nine_mib = "x".repeat(9 << 20);
    let mut outcomes = Vec::new();
    for _ in 0..CALLS {
        outcomes.push(work.call::<Echo>(nine_mib.clone()).await);
    }
    let sizes = too_large(outcomes, PayloadDirection::Argument);
    // The same bytes measured: they differ only in the call id's varint (a random u64).
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max - min <= 9, "{sizes:?}");
    assert!(*min > 9 << 20, "{sizes:?}");

    // A reply of the cap + 1 byte (a string of `len` bytes is encoded in len + 6 + the varint
    // of len, 4 bytes at this size, so len + 10: docs/reference/rpclb.md says `blob 8388598`
    // is the largest that succeeds at the default cap): the same error and size either way.
    let at_cap = (DEFAULT_MAX_PAYLOAD_BYTES - 10) as u64;
    let mut outcomes = Vec::new();
    for _ in 0..CALLS {
        outcomes.push(work.call::<Blob>(at_cap + 1).await);
    }
    let sizes = too_large(outcomes, PayloadDirection::Reply);
    assert_eq!(sizes, vec![DEFAULT_MAX_PAYLOAD_BYTES + 1; CALLS]);

    // At the cap: served by either member.
    let mut served = BTreeSet::new();
    for _ in 0..2 {
        let (reply, node) = work.call::<Blob>(at_cap).with_node().await.unwrap();
        assert_eq!(reply.len() as u64, at_cap);
        served.insert(node.to_string());
    }
    assert_eq!(served, both, "the reply at the cap came from both members");
    me.shutdown().await;
    cluster.shutdown().await;
}
