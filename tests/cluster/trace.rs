//! Traces across nodes (issue 20 item 5): a caller with a trace propagator makes balanced
//! calls, a cast and a direct call to an `rpclb node --trace-record` child, and the child was
//! handed exactly the trace contexts the caller made, in order — the trace ids match.
//! (One node, in process: tests/trace_propagation.rs.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::telemetry::{set_trace_propagator, TraceContext, TracePropagator};
use rpc_load_balancer::{Balancer, BalancerConfig};
use rpclb::harness::Cluster;
use rpclb::trace_record::TracesSeen;
use tracing::Span;

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// Bound on each call (a debug build on 2 shared cores answers in milliseconds).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Makes trace 1, 2, … (one per call) and keeps the `traceparent`s it made.
#[derive(Clone, Default)]
struct Numbering {
    made: Arc<Mutex<Vec<String>>>,
    next: Arc<AtomicU64>,
}

impl TracePropagator for Numbering {
    fn inject(&self, _span: &Span) -> Option<TraceContext> {
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let parent = format!("00-{:032x}-{:016x}-01", (u128::from(n) << 64) | 0xabc, n);
        self.made.lock().unwrap().push(parent.clone());
        TraceContext::new(&parent, None)
    }
    fn extract(&self, _: &TraceContext, _: &Span) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_node_is_handed_the_callers_trace_context() {
    let numbering = Numbering::default();
    set_trace_propagator(numbering.clone()).unwrap();
    let cluster = Cluster::start_each(BIN, &[&["--trace-record", "--balancer", "traced"]])
        .await
        .unwrap();
    let child = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    // A caller only: every call goes to the child.
    let balancer =
        Balancer::start(BalancerConfig::new("traced").node_match_list(Vec::<String>::new()))
            .await
            .unwrap();
    balancer.wait_for_members(1, MESH_TIMEOUT).await.unwrap();

    for _ in 0..5 {
        let served_by = balancer
            .call::<Whoami>(())
            .timeout(CALL_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(served_by, child);
    }
    balancer.cast::<Whoami>(()).await.unwrap();
    me.call::<Whoami>(child.clone(), ())
        .timeout(CALL_TIMEOUT)
        .await
        .unwrap();
    // (The cast is served on a task of its own: ask until it has been recorded too.)
    let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
    let seen = loop {
        let seen = me
            .call::<TracesSeen>(child.clone(), ())
            .timeout(CALL_TIMEOUT)
            .await
            .unwrap();
        let made = numbering.made.lock().unwrap().clone();
        if seen.len() == made.len() || tokio::time::Instant::now() >= deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let made = numbering.made.lock().unwrap().clone();
    // 5 calls, the cast, the direct call and at least one `traces_seen`: each made one
    // context, and the child was handed each, with the caller's trace id.
    assert!(made.len() >= 8, "{made:?}");
    let mut seen_sorted = seen.clone();
    let mut made_sorted = made.clone();
    // (The cast may be served after a later call: compare as sets, then the ids.)
    seen_sorted.sort();
    made_sorted.sort();
    assert_eq!(
        seen_sorted, made_sorted,
        "the child was handed other contexts"
    );
    let trace_ids = |parents: &[String]| -> Vec<String> {
        parents
            .iter()
            .map(|p| TraceContext::new(p, None).unwrap().trace_id().to_owned())
            .collect()
    };
    assert_eq!(trace_ids(&seen_sorted), trace_ids(&made_sorted));
    cluster.shutdown().await;
}
