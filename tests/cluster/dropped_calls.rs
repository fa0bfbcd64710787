//! A call to a remote member whose caller drops it before its outcome — an outer
//! `tokio::time::timeout`, an aborted task — still ends its telemetry: one start, one stop
//! with status `cancelled`, its span closed with that status. Routed, direct and random-node,
//! each to a real `rpclb node` process running the demo `sleep` (the local cases are in
//! tests/dropped_calls.rs).

use rpc_load_balancer::{Balancer, BalancerConfig};
use rpclb::harness::Cluster;

use crate::support::{abort, time_out, Telemetry};
use crate::{Sleep, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_remote_calls_stop_as_cancelled() {
    let t = Telemetry::install();
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let remote = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    // The remote node is its only member.
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    t.counters();
    t.take_spans(&[]);

    // Routed to the remote member.
    time_out(work.call::<Sleep>(10_000)).await;
    t.one_cancelled("call", "sleep", &remote, "work");
    abort(work.call::<Sleep>(10_000)).await;
    t.one_cancelled("call", "sleep", &remote, "work");
    assert_eq!(
        work.in_flight(),
        0,
        "the dropped calls are no longer in flight"
    );

    // Direct.
    time_out(me.call::<Sleep>(remote.clone(), 10_000)).await;
    t.one_cancelled("call", "sleep", &remote, "");
    abort(me.call::<Sleep>(remote.clone(), 10_000)).await;
    t.one_cancelled("call", "sleep", &remote, "");

    // On a random matching node (the remote one), tracked by the balancer or not.
    let filter = format!("{}@", remote.split('@').next().unwrap());
    time_out(me.call_on_random_node::<Sleep>(filter.as_str(), 10_000)).await;
    t.one_cancelled("call", "sleep", &remote, "");
    abort(
        me.call_on_random_node::<Sleep>(filter.as_str(), 10_000)
            .load_balancer("work"),
    )
    .await;
    t.one_cancelled("call", "sleep", &remote, "");
    assert_eq!(work.in_flight(), 0, "the tracked call is no longer counted");
    me.shutdown().await;
    cluster.shutdown().await;
}
