//! A selection holds only its snapshot: what its selector derived from that list reaches the
//! pick, and its release needs no reference to the balancer's state.

use std::sync::Arc;
use std::time::Duration;

use crate::routing::{Algorithm, BuildContext, Change, Derived, MemberView, Request, Selector};
use crate::{Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

/// Derives each list's version, and refuses a pick whose request does not carry its list's.
struct VersionCheck;

impl Algorithm for VersionCheck {
    fn name(&self) -> &'static str {
        "version_check"
    }

    fn build(&self, _context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(VersionCheck))
    }
}

impl Selector for VersionCheck {
    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        Some(Arc::new(change.version))
    }

    fn pick(&self, _members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        match request.derived_as::<u64>() {
            Some(version) if *version == request.version => Ok(0),
            other => Err(Error::NoEligibleMembers {
                balancer: request.balancer.to_string(),
                reason: format!("derived {other:?} with list {}", request.version),
            }),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn picks_get_their_lists_derived_value_and_guards_hold_no_balancer_state() {
    let node = Node::start(NodeConfig::new("derived_state", "127.0.0.1:0").cookie("derived"))
        .await
        .unwrap();
    let balancer = Balancer::start(BalancerConfig::new("derived").algorithm(VersionCheck))
        .await
        .unwrap();
    balancer
        .wait_for_members(1, Duration::from_secs(5))
        .await
        .unwrap();
    let holders = Arc::strong_count(balancer.shared());
    let guards: Vec<_> = (0..3)
        .map(|_| {
            balancer
                .select_node(None)
                .expect("the list's derived value")
        })
        .collect();
    assert_eq!(balancer.in_flight(), 3);
    assert_eq!(
        Arc::strong_count(balancer.shared()),
        holders,
        "a guard holds its snapshot, not the balancer's state"
    );
    // Released on another thread, after the balancer stopped: the count still drops.
    let stop = tokio::spawn({
        let balancer = balancer.clone();
        async move { balancer.stop().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::thread::spawn(move || drop(guards)).join().unwrap();
    let report = stop.await.unwrap();
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert_eq!(balancer.in_flight(), 0, "{report:?}");
    assert_eq!(node.shutdown().await, vec![]);
}

/// Learns, counting the outcomes it observes; observes `Cancelled` ones as told.
struct Counting {
    cancelled_too: bool,
    observed: Arc<std::sync::atomic::AtomicUsize>,
}

impl Algorithm for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn build(&self, _context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(Counting {
            cancelled_too: self.cancelled_too,
            observed: Arc::clone(&self.observed),
        }))
    }
}

impl Selector for Counting {
    fn pick(&self, _members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }

    fn learns(&self) -> bool {
        true
    }

    fn observes_cancelled(&self) -> bool {
        self.cancelled_too
    }

    fn observe(&self, _outcome: &crate::routing::Outcome<'_>) {
        self.observed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_is_observed_only_by_a_selector_that_observes_cancelled_outcomes() {
    let node = Node::start(NodeConfig::new("cancelled_state", "127.0.0.1:0").cookie("cancelled"))
        .await
        .unwrap();
    for cancelled_too in [true, false] {
        let observed = Arc::default();
        let algorithm = Counting {
            cancelled_too,
            observed: Arc::clone(&observed),
        };
        let name = format!("cancelled-{cancelled_too}");
        let balancer = Balancer::start(BalancerConfig::new(&name).algorithm(algorithm))
            .await
            .unwrap();
        balancer
            .wait_for_members(1, Duration::from_secs(5))
            .await
            .unwrap();
        drop(balancer.select_node(None).unwrap());
        let seen = observed.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            seen,
            usize::from(cancelled_too),
            "observes_cancelled {cancelled_too}"
        );
        assert_eq!(balancer.in_flight(), 0);
        balancer.stop().await;
    }
    assert_eq!(node.shutdown().await, vec![]);
}
