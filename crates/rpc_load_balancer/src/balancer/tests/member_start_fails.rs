//! A member actor whose start keeps failing (its selector's `members_changed` panics from the
//! second list on) is not retried forever: every failed start counts toward the restart
//! limit, and past it the balancer ends without a drain, as a crash loop does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::keeper::{retry_delay, MAX_RESTARTS, RESTART_WINDOW, RETRY_FIRST, RETRY_MAX};
use crate::routing::{Algorithm, BuildContext, Change, MemberView, Request, Selector};
use crate::{Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

/// Picks the first member; its `members_changed` counts the lists it is told of and panics
/// from the second on.
struct PanicsOnSecondList(Arc<AtomicUsize>);

struct PanicsOnSecondListSelector(Arc<AtomicUsize>);

impl Algorithm for PanicsOnSecondList {
    fn name(&self) -> &'static str {
        "panics_on_second_list"
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(PanicsOnSecondListSelector(Arc::clone(&self.0))))
    }
}

impl Selector for PanicsOnSecondListSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn members_changed(&self, _: &Change<'_>) {
        if self.0.fetch_add(1, Ordering::SeqCst) >= 1 {
            panic!("members_changed fails from the second list on");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_keeps_failing_to_start_ends_the_balancer_within_the_restart_limit() {
    let node = Node::start(NodeConfig::new("start_fails", "127.0.0.1:0").cookie("fails"))
        .await
        .unwrap();
    let lists = Arc::new(AtomicUsize::new(0));
    let balancer = Balancer::start(
        BalancerConfig::new("fails").algorithm(PanicsOnSecondList(Arc::clone(&lists))),
    )
    .await
    .unwrap();
    assert_eq!(lists.load(Ordering::SeqCst), 1, "the first list");
    let member = format!("rpc_load_balancer/fails/{}", node.name());
    ractor::registry::where_is(member.clone())
        .expect("the member runs")
        .kill();
    // Each start of a new member tells its selector of a list, and panics: the keeper tries
    // again with backoff, and gives up past the limit (10 attempts take about 3.3 s).
    let deadline = Instant::now() + RESTART_WINDOW + Duration::from_secs(5);
    while balancer.is_running() {
        assert!(
            Instant::now() < deadline,
            "still running after {} start attempts",
            lists.load(Ordering::SeqCst) - 1
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let attempts = lists.load(Ordering::SeqCst) - 1;
    assert!(
        (1..=MAX_RESTARTS).contains(&attempts),
        "{attempts} start attempts"
    );
    // It ended without a drain, freed its name, and left nothing running.
    let report = balancer.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Killed, "{report:?}");
    assert!(ractor::registry::where_is(member).is_none());
    assert!(matches!(
        Balancer::lookup("fails"),
        Err(Error::UnknownBalancer { .. })
    ));
    // No more attempts after giving up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(lists.load(Ordering::SeqCst) - 1, attempts);
    assert_eq!(node.shutdown().await, vec![]);
}

#[test]
fn failed_starts_back_off_doubling_to_a_cap_within_the_restart_window() {
    let delays: Vec<Duration> = (1..=12).map(retry_delay).collect();
    assert_eq!(delays[0], RETRY_FIRST);
    assert_eq!(delays[1], RETRY_FIRST * 2);
    assert!(delays.windows(2).all(|w| w[1] >= w[0]));
    assert_eq!(*delays.last().unwrap(), RETRY_MAX);
    assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    // The delays between MAX_RESTARTS failed attempts fit in the window, so the limit is
    // reached.
    let between: Duration = delays[..MAX_RESTARTS - 1].iter().sum();
    assert!(between < RESTART_WINDOW / 2, "{between:?}");
}
