//! Selection counts are released exactly once when the caller panics: while it holds a
//! selection guard (on its thread, or on another thread), and while a balanced call is in
//! progress on a task that panics. Each check holds other guards on the same members, so a
//! second release would show as a count below the live guards (counts floor at 0, so a double
//! release could otherwise hide), and ends with every count at 0.
//!
//! Runs a `Node` in this process (one per process: nextest runs each test alone); members
//! other than this node are local stand-in actors joined to the balancer's pg group.

use std::future::IntoFuture;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, FunctionError, LeastConnections, Node, NodeConfig,
    PowerOfTwo, RemoteFunction, SelectionGuard,
};
use rpclb::harness::join_stand_ins;
use tokio::sync::{oneshot, Notify};

/// Every member's in-flight count, by node.
fn counts(balancer: &Balancer) -> Vec<(String, usize)> {
    balancer
        .members()
        .as_slice()
        .iter()
        .map(|m| (m.node().to_string(), m.in_flight()))
        .collect()
}

/// Counts that `guards` alone account for.
fn counts_of(balancer: &Balancer, guards: &[SelectionGuard]) -> Vec<(String, usize)> {
    balancer
        .members()
        .as_slice()
        .iter()
        .map(|m| {
            let live = guards.iter().filter(|g| g.node() == m.node()).count();
            (m.node().to_string(), live)
        })
        .collect()
}

/// Quiets the expected panics' messages (the test's own assertions still report).
fn quiet_expected_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let expected = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|m| m.starts_with("expected:"));
        if !expected {
            default(info);
        }
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_panicking_with_a_guard_releases_it_once() {
    quiet_expected_panics();
    let node = Node::start(NodeConfig::new("guard-panic", "127.0.0.1:0").cookie("exits"))
        .await
        .unwrap();
    let algorithms: [(&str, Arc<dyn Algorithm>); 2] = [
        ("exits-lc", Arc::new(LeastConnections::new())),
        ("exits-p2c", Arc::new(PowerOfTwo::new())),
    ];
    for (name, algorithm) in algorithms {
        let balancer = Balancer::start(BalancerConfig::new(name).algorithm_arc(algorithm))
            .await
            .unwrap();
        let _stand_ins = join_stand_ins(name, 1..3).await.unwrap();
        balancer
            .wait_for_members(3, Duration::from_secs(5))
            .await
            .unwrap();
        // Two guards per member on average stay live throughout.
        let held: Vec<SelectionGuard> = (0..6)
            .map(|_| balancer.select_node(None).unwrap())
            .collect();
        let live = counts_of(&balancer, &held);
        assert_eq!(counts(&balancer), live, "{name}");

        for round in 0..20 {
            // On this thread: the guard is dropped while the panic unwinds.
            let caught = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let guard = balancer.select_node(None).unwrap();
                std::hint::black_box(guard.node());
                panic!("expected: the caller panics holding a guard");
            }));
            assert!(caught.is_err());
            assert_eq!(
                counts(&balancer),
                live,
                "{name}, round {round}, same thread"
            );
            assert_eq!(balancer.in_flight(), held.len(), "{name}: balancer total");

            // On another thread, which dies of the panic.
            let joined = std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        let _guard = balancer.select_node(None).unwrap();
                        panic!("expected: a thread panics holding a guard");
                    })
                    .join()
            });
            assert!(joined.is_err());
            assert_eq!(
                counts(&balancer),
                live,
                "{name}, round {round}, other thread"
            );
            assert_eq!(balancer.in_flight(), held.len(), "{name}: balancer total");
        }
        drop(held);
        assert!(
            counts(&balancer).iter().all(|(_, n)| *n == 0),
            "{name}: {:?}",
            counts(&balancer)
        );
        assert_eq!(balancer.in_flight(), 0);
        balancer.stop().await;
    }
    node.shutdown().await;
}

/// Tells the test it started, then takes `hold_ms`.
struct Hold {
    started: Arc<Notify>,
}

impl RemoteFunction for Hold {
    const NAME: &'static str = "hold";
    type Args = u64;
    type Reply = ();
    async fn call(&self, hold_ms: u64) -> Result<(), FunctionError> {
        self.started.notify_one();
        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_panicking_during_a_balanced_call_releases_its_selection_once() {
    quiet_expected_panics();
    let node = Node::start(NodeConfig::new("call-panic", "127.0.0.1:0").cookie("exits"))
        .await
        .unwrap();
    let started = Arc::new(Notify::new());
    node.register(Hold {
        started: Arc::clone(&started),
    })
    .unwrap();
    let algorithms: [(&str, Arc<dyn Algorithm>); 2] = [
        ("calls-lc", Arc::new(LeastConnections::new())),
        ("calls-p2c", Arc::new(PowerOfTwo::new())),
    ];
    for (name, algorithm) in algorithms {
        // This node is the only member: its calls run in-process and take as long as asked.
        let balancer = Balancer::start(BalancerConfig::new(name).algorithm_arc(algorithm))
            .await
            .unwrap();
        let me = node.name().to_string();
        let held = balancer.select_node(None).unwrap();
        assert_eq!(held.node(), me);

        for round in 0..10 {
            let (in_call_tx, in_call) = oneshot::channel::<()>();
            let (go, go_rx) = oneshot::channel::<()>();
            let caller = {
                let balancer = balancer.clone();
                let started = Arc::clone(&started);
                tokio::spawn(async move {
                    let call = balancer
                        .call::<Hold>(10_000)
                        .timeout(Duration::from_secs(30))
                        .into_future();
                    let mut call = std::pin::pin!(call);
                    tokio::select! {
                        _ = &mut call => unreachable!("the call takes 10 s"),
                        () = started.notified() => {}
                    }
                    let _ = in_call_tx.send(());
                    let _ = go_rx.await;
                    panic!("expected: the caller panics during the call");
                })
            };
            tokio::time::timeout(Duration::from_secs(10), in_call)
                .await
                .expect("the call started")
                .unwrap();
            assert_eq!(
                counts(&balancer),
                [(me.clone(), 2)],
                "{name}, round {round}"
            );
            assert_eq!(balancer.in_flight(), 2);
            go.send(()).unwrap();
            let outcome = tokio::time::timeout(Duration::from_secs(10), caller)
                .await
                .expect("the caller ended");
            assert!(outcome.unwrap_err().is_panic(), "{name}: the task panicked");
            assert_eq!(
                counts(&balancer),
                [(me.clone(), 1)],
                "{name}, round {round}: released once"
            );
            assert_eq!(balancer.in_flight(), 1);
            // The served count lives in the in-process run, which ends (aborted) just after
            // its caller: released once it has.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while balancer.served() != 0 {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{name}: the served count too"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        drop(held);
        assert_eq!(counts(&balancer), [(me.clone(), 0)]);
        assert_eq!(balancer.in_flight(), 0);
        balancer.stop().await;
    }
    node.shutdown().await;
}
