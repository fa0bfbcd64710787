//! A selection whose pick is under way when its balancer's drain begins is counted before it
//! is checked: the drain either waits for it or the selection fails. The drain never reports
//! "drained" while a selection it did not see goes on.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::routing::{Algorithm, BuildContext, MemberView, Request, Selector};
use crate::{Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

/// Where an armed pick says it has begun, and where it waits to go on.
type Armed = (mpsc::Sender<()>, mpsc::Receiver<()>);

/// While armed, a pick tells the test it has begun and waits until the test lets it go on.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<Option<Armed>>>);

struct Gated(Gate);

impl Algorithm for Gated {
    fn name(&self) -> &'static str {
        "gated"
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(Gated(self.0.clone())))
    }
}

impl Selector for Gated {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        if let Some((entered, go_on)) = self.0 .0.lock().unwrap().take() {
            entered.send(()).unwrap();
            go_on.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        Ok(0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selection_picked_while_the_drain_began_is_refused_after_a_drained_report() {
    let node = Node::start(NodeConfig::new("drain_pick", "127.0.0.1:0").cookie("pick"))
        .await
        .unwrap();
    let gate = Gate::default();
    let balancer = Balancer::start(
        BalancerConfig::new("gated")
            .algorithm(Gated(gate.clone()))
            .leave_grace(Duration::ZERO),
    )
    .await
    .unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (go_on, go_on_rx) = mpsc::channel();
    *gate.0.lock().unwrap() = Some((entered_tx, go_on_rx));
    // A selection whose check passed and whose pick is under way.
    let selecting = {
        let balancer = balancer.clone();
        tokio::task::spawn_blocking(move || balancer.select_node(None))
    };
    tokio::task::spawn_blocking(move || entered.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the pick began");
    // The drain begins and ends while the pick goes on: it saw nothing in flight.
    let report = tokio::time::timeout(Duration::from_secs(10), balancer.stop())
        .await
        .expect("the drain ends");
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert_eq!(report.routed_in_flight, 0);
    // So the selection, counted once its pick returns, must not go on.
    go_on.send(()).unwrap();
    let selected = selecting.await.unwrap();
    assert!(
        matches!(selected, Err(Error::UnknownBalancer { .. })),
        "a selection after a drained report: {selected:?}"
    );
    assert_eq!(balancer.in_flight(), 0);
    assert_eq!(node.shutdown().await, vec![]);
}
