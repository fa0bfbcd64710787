//! A selector's `observe` and `released` are user code: when they panic, the selection is still
//! released (the member's and the balancer's in-flight counts go back to 0, a per-member cap
//! keeps admitting calls, the drain completes), a routed call that succeeded still returns its
//! reply, and a guard dropped while its thread unwinds from a panic of its own does not abort
//! the process.
//!
//! Runs a `Node` in this process (one per process: nextest runs each test alone); this node is
//! the only member.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, MemberView, Needs, Outcome, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, DrainOutcome, Error, FunctionError, Node, NodeConfig,
    RemoteFunction, Selector,
};

/// Picks the first member, counts in flight, learns — and panics in `observe` and `released`
/// (after counting the call, so the test sees they ran).
#[derive(Default)]
struct Panicking {
    calls: Arc<AtomicUsize>,
}

struct PanickingSelector {
    calls: Arc<AtomicUsize>,
}

impl Algorithm for Panicking {
    fn name(&self) -> &'static str {
        "panicking"
    }
    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(PanickingSelector {
            calls: Arc::clone(&self.calls),
        }))
    }
}

impl Selector for PanickingSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn learns(&self) -> bool {
        true
    }
    fn observe(&self, _: &Outcome<'_>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        panic!("observe fails");
    }
    fn released(&self, _: &MemberView) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        panic!("released fails");
    }
}

struct Hello;
impl RemoteFunction for Hello {
    const NAME: &'static str = "hello";
    type Args = ();
    type Reply = String;
    async fn call(&self, _: ()) -> Result<String, FunctionError> {
        Ok("hello".into())
    }
}

/// The only member's in-flight count and the balancer's total.
fn counts(balancer: &Balancer) -> (usize, usize) {
    let members = balancer.members();
    (members.as_slice()[0].in_flight(), balancer.in_flight())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_observe_or_released_still_releases_the_selection() {
    let node = Node::start(NodeConfig::new("panics", "127.0.0.1:0").cookie("panics"))
        .await
        .unwrap();
    node.register(Hello).unwrap();
    let algorithm = Panicking::default();
    let calls = Arc::clone(&algorithm.calls);
    let balancer = Balancer::start(
        BalancerConfig::new("panics")
            .algorithm(algorithm)
            .max_in_flight_per_member(1),
    )
    .await
    .unwrap();
    balancer
        .wait_for_members(1, Duration::from_secs(5))
        .await
        .unwrap();

    // A guard dropped normally: Cancelled outcome and release both panic.
    drop(balancer.select_node(None).unwrap());
    assert_eq!(calls.load(Ordering::SeqCst), 2, "observe and released ran");
    assert_eq!(counts(&balancer), (0, 0), "a guard's counts are released");

    // Routed calls succeed although the selector panics on their outcome and release, and
    // the per-member cap of 1 keeps admitting them (nothing stays counted).
    for _ in 0..3 {
        let reply = balancer
            .call::<Hello>(())
            .timeout(Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply, "hello");
    }
    assert_eq!(
        counts(&balancer),
        (0, 0),
        "routed calls' counts are released"
    );

    // A guard dropped while its thread unwinds from the caller's own panic: no abort (a
    // second panic in a destructor during an unwind would abort the process).
    let handle = balancer.clone();
    let thread = std::thread::spawn(move || {
        let _guard = handle.select_node(None).unwrap();
        panic!("the caller's own panic");
    });
    assert!(
        thread.join().is_err(),
        "the caller's panic reaches its join"
    );
    assert_eq!(counts(&balancer), (0, 0), "released during the unwind");

    let report = balancer.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    node.shutdown().await;
}
