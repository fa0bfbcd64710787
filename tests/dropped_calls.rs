//! A call or cast whose caller drops it before its outcome — an outer `tokio::time::timeout`,
//! an aborted task — still ends its telemetry: one start, one stop with status `cancelled`, and
//! its `rpc_load_balancer.rpc` span closes with that status. In one process: local members,
//! `call_directly`, calls to this node's own name, random-node calls run here, and calls and
//! casts dropped while they wait for someone to send to (the remote cases are in
//! tests/cluster/dropped_calls.rs).
//!
//! One `Node` per process: nextest runs each test alone.
#![cfg(feature = "telemetry")]

#[path = "support/telemetry.rs"]
mod support;

use std::time::Duration;

use rpc_load_balancer::telemetry::{RPC_START, RPC_STOP};
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, Retry, RetryCount};
use rpclb::functions::{register_all, Sleep, Whoami};
use rpclb::harness::random_cookie;
use support::{abort, time_out, Telemetry, GIVE_UP};

/// A retry that keeps a call waiting for someone to send to far longer than [`GIVE_UP`].
fn patient() -> Retry {
    Retry::new(RetryCount::Times(100), GIVE_UP * 10)
}

async fn node() -> Node {
    let node = Node::start(NodeConfig::new("dropper", "127.0.0.1:0").cookie(random_cookie()))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_local_calls_stop_as_cancelled() {
    let t = Telemetry::install();
    let node = node().await;
    let me = node.name().to_string();
    let here = Balancer::start(BalancerConfig::new("here")).await.unwrap();
    assert!(here.members().as_slice()[0].is_local());

    // A finished call stops once, with its outcome (the drop after it records nothing).
    here.call::<Whoami>(()).await.unwrap();
    let counts = t.counters();
    let whoami = [("function", "whoami"), ("load_balancer", "here")];
    assert_eq!(counts.sum(RPC_START, &whoami), 1, "{counts:?}");
    assert_eq!(counts.sum(RPC_STOP, &whoami), 1, "{counts:?}");
    assert_eq!(
        counts.sum(RPC_STOP, &[&whoami[..], &[("status", "ok")]].concat()),
        1
    );
    t.take_spans(&[]);

    // A direct call to this node's own name.
    time_out(node.call::<Sleep>(me.clone(), 10_000)).await;
    t.one_cancelled("call", "sleep", &me, "");
    abort(node.call::<Sleep>(me.clone(), 10_000)).await;
    t.one_cancelled("call", "sleep", &me, "");

    // A balanced call served by the local member.
    time_out(here.call::<Sleep>(10_000)).await;
    t.one_cancelled("call", "sleep", &me, "here");
    abort(here.call::<Sleep>(10_000)).await;
    t.one_cancelled("call", "sleep", &me, "here");
    let with_node = here.call::<Sleep>(10_000).with_node();
    abort(async move { with_node.await.map(|_| ()) }).await;
    t.one_cancelled("call", "sleep", &me, "here");

    // `call_directly`.
    time_out(here.call::<Sleep>(10_000).call_directly(true)).await;
    t.one_cancelled("call", "sleep", &me, "here");

    // A random-node call that runs here (this node matches the filter).
    time_out(node.call_on_random_node::<Sleep>("dropper@", 10_000)).await;
    t.one_cancelled("call", "sleep", &me, "");
    abort(
        node.call_on_random_node::<Sleep>("dropper@", 10_000)
            .load_balancer("here"),
    )
    .await;
    t.one_cancelled("call", "sleep", &me, "");
    // The tracked count lives in the in-process run, which ends (aborted) just after its
    // caller: released once it has.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while here.in_flight() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tracked call is still counted 5 s after it was dropped"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_casts_dropped_before_a_target_stop_as_cancelled() {
    let t = Telemetry::install();
    let node = node().await;
    // A balancer this node is not a member of, with nobody to send to.
    let nobody = Balancer::start(
        BalancerConfig::new("nobody")
            .node_match_list(Vec::<String>::new())
            .retry(patient()),
    )
    .await
    .unwrap();

    // Dropped while they wait for a member: started and stopped with `node` empty, as a call
    // that fails before it has a target.
    time_out(nobody.call::<Whoami>(())).await;
    t.one_cancelled("call", "whoami", "", "nobody");
    abort(nobody.cast::<Whoami>(())).await;
    t.one_cancelled("cast", "whoami", "", "nobody");
    time_out(nobody.cast::<Whoami>(())).await;
    t.one_cancelled("cast", "whoami", "", "nobody");

    // Random-node calls and casts dropped while no node matches.
    let unmatched = "nobody-is-called-this@";
    time_out(
        node.call_on_random_node::<Whoami>(unmatched, ())
            .retry(patient()),
    )
    .await;
    t.one_cancelled("call", "whoami", "", "");
    abort(
        node.cast_on_random_node::<Whoami>(unmatched, ())
            .retry(patient()),
    )
    .await;
    t.one_cancelled("cast", "whoami", "", "");
    let _here = Balancer::start(BalancerConfig::new("here")).await.unwrap();
    time_out(
        node.call_on_random_node::<Whoami>(unmatched, ())
            .retry(patient())
            .load_balancer("here"),
    )
    .await;
    t.one_cancelled("call", "whoami", "", "here");
    node.shutdown().await;
}
