//! A cast that runs on this node by choice (`call_directly`, `CallDirect`) is counted until
//! its function has ended, as such a call is: a drain waits for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::{
    Balancer, BalancerConfig, CallDirect, DrainOutcome, FunctionError, Node, NodeConfig,
    RemoteFunction,
};

/// Sleeps for its argument (ms), then counts itself finished.
struct SlowCast(Arc<AtomicUsize>);

impl RemoteFunction for SlowCast {
    const NAME: &'static str = "slow_cast";
    type Args = u64;
    type Reply = ();
    async fn call(&self, ms: u64) -> Result<(), FunctionError> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_casts_run_here_by_choice() {
    let node = Node::start(NodeConfig::new("local_cast", "127.0.0.1:0").cookie("cast"))
        .await
        .unwrap();
    let finished = Arc::new(AtomicUsize::new(0));
    node.register(SlowCast(Arc::clone(&finished))).unwrap();
    // Under CallDirect, and with `call_directly` on another algorithm.
    let direct = Balancer::start(
        BalancerConfig::new("direct")
            .algorithm(CallDirect)
            .leave_grace(Duration::ZERO),
    )
    .await
    .unwrap();
    let routed = Balancer::start(BalancerConfig::new("routed").leave_grace(Duration::ZERO))
        .await
        .unwrap();
    direct.cast::<SlowCast>(600).await.unwrap();
    routed
        .cast::<SlowCast>(600)
        .call_directly(true)
        .await
        .unwrap();
    assert_eq!(direct.in_flight(), 1, "the handed-over cast still counts");
    assert_eq!(routed.in_flight(), 1, "the handed-over cast still counts");
    let (direct_report, routed_report) = tokio::join!(direct.stop(), routed.stop());
    // Both drains waited for their cast's function to end.
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    for report in [direct_report, routed_report] {
        assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    }
    assert_eq!(node.shutdown().await, vec![]);
}
