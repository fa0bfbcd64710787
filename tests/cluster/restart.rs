//! A `Balancer` handle across a kill of its balancer: it follows the balancer its app's
//! supervisor starts under the same name (live members, in-flight counts), and without one its
//! calls fail with `UnknownBalancer`; the killed balancer drains, then leaves no member in pg
//! and no entry in the node's registry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, DrainOutcome, Error, FunctionError,
    Node, RemoteFunction, RoundRobin, SCOPE,
};
use rpclb::harness::{Cluster, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// Bound for a membership change or a restart to be seen.
const BOUND: Duration = Duration::from_secs(3);

/// The demo's `whoami`, served by the test's own node too (it is a member here).
struct WhoamiHere(String);
impl RemoteFunction for WhoamiHere {
    const NAME: &'static str = "whoami";
    type Args = ();
    type Reply = String;
    async fn call(&self, _: ()) -> Result<String, FunctionError> {
        Ok(self.0.clone())
    }
}

/// An app's supervisor: starts the balancer linked to itself and, while `restart` is set,
/// starts it again whenever it ends.
struct App {
    restart: Arc<AtomicBool>,
}

struct AppState {
    config: BalancerConfig,
    balancer: Balancer,
}

impl Actor for App {
    type Msg = ();
    type State = AppState;
    type Arguments = BalancerConfig;

    async fn pre_start(
        &self,
        myself: ActorRef<()>,
        config: BalancerConfig,
    ) -> Result<AppState, ActorProcessingErr> {
        let balancer = Balancer::spawn_linked(config.clone(), myself.get_cell()).await?;
        Ok(AppState { config, balancer })
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        state: &mut AppState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorTerminated(cell, ..)
        | SupervisionEvent::ActorFailed(cell, _) = &event
        {
            if cell.get_id() == state.balancer.actor().get_id()
                && self.restart.load(Ordering::Acquire)
            {
                state.balancer =
                    Balancer::spawn_linked(state.config.clone(), myself.get_cell()).await?;
            }
        }
        Ok(())
    }
}

/// Waits (≤ [`BOUND`]) until `check` holds, naming `what` on failure.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !check() {
        assert!(Instant::now() < deadline, "not within {BOUND:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `observer`'s view of the members of `work`, through admin control.
async fn members_seen_by(me: &Node, observer: &str) -> Option<Vec<String>> {
    match me
        .control(observer, ControlRequest::Members("work".into()))
        .await
        .unwrap()
    {
        ControlReply::Members(members) => members,
        other => panic!("unexpected reply {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_handle_follows_its_restarted_balancer_and_fails_typed_without_one() {
    let mut cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let here = me.name().to_string();
    me.register(WhoamiHere(here.clone())).unwrap();
    let restart = Arc::new(AtomicBool::new(true));
    let config = BalancerConfig::new("work").algorithm(RoundRobin::new());
    let (app, _) = Actor::spawn(
        None,
        App {
            restart: Arc::clone(&restart),
        },
        config,
    )
    .await
    .unwrap();
    let old = Balancer::lookup("work").unwrap();
    old.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let killed_member = old.members().get(&here).unwrap().id();

    // Killed: no post_stop, yet it drains (the node's keeper does it). The app's supervisor
    // starts it again: the start waits for that drain.
    old.actor().kill();
    let mut current = None;
    eventually("the app restarted the balancer", || {
        current = Balancer::lookup("work")
            .ok()
            .filter(|b| b.actor().get_id() != old.actor().get_id());
        current.is_some()
    })
    .await;
    let current = current.unwrap();
    current.wait_for_members(3, BOUND).await.unwrap();
    let member = current.members().get(&here).unwrap().id();
    assert_ne!(member, killed_member, "a new member actor joined");
    let here_in_pg: Vec<_> =
        ractor::pg::get_scoped_members(&SCOPE.to_string(), &"work".to_string())
            .into_iter()
            .filter(|cell| cell.get_id().is_local())
            .map(|cell| cell.get_id())
            .collect();
    assert_eq!(here_in_pg, vec![member], "the killed member left pg");

    // The cluster changes after the restart: a node joins, another leaves.
    let mut late = NodeSpec::new("late", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();
    let gone = cluster.nodes[1].node().to_string();
    cluster.nodes[1].kill().await;
    let expected: BTreeSet<String> = [cluster.nodes[0].node(), late.node(), here.as_str()]
        .into_iter()
        .map(String::from)
        .collect();
    let mut watch = current.watch_members();
    tokio::time::timeout(
        BOUND,
        watch.wait_for(|m| m.nodes().into_iter().collect::<BTreeSet<_>>() == expected),
    )
    .await
    .unwrap_or_else(|_| panic!("members {:?}", current.members().nodes()))
    .unwrap();

    // The old handle follows the running balancer: its members, its routing, its counts.
    assert!(old.is_running());
    assert_eq!(
        old.members().nodes().into_iter().collect::<BTreeSet<_>>(),
        expected
    );
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..30 {
        let node = old.call::<Whoami>(()).await.unwrap();
        *served.entry(node).or_default() += 1;
    }
    assert_eq!(
        served.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "{served:?}"
    );
    assert!(!served.contains_key(&gone));
    assert!(served.values().all(|n| *n == 10), "round robin: {served:?}");
    let selected = old.select_node(None).unwrap();
    assert_eq!(current.in_flight(), 1, "counted in the running balancer");
    drop(selected);
    assert_eq!(current.in_flight(), 0);

    // Killed again, and nobody starts it: calls fail typed, nothing is left behind.
    restart.store(false, Ordering::Release);
    current.actor().kill();
    eventually("the killed balancer is unknown", || {
        matches!(Balancer::lookup("work"), Err(Error::UnknownBalancer { .. }))
    })
    .await;
    for handle in [&old, &current] {
        assert!(!handle.is_running());
        match handle.call::<Whoami>(()).await {
            Err(Error::UnknownBalancer { balancer }) => assert_eq!(balancer, "work"),
            other => panic!("a call through a killed balancer gave {other:?}"),
        }
        assert!(matches!(
            handle.select_node(None),
            Err(Error::UnknownBalancer { .. })
        ));
    }
    // Both drained, though nobody called stop: each handle's report is its own balancer's
    // drain's (no balancer runs under the name for the old one to follow).
    for handle in [&current, &old] {
        let report = handle.stop().await;
        assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
        assert!(report.took >= Duration::from_millis(250), "{report:?}");
        assert!(handle.members().is_empty(), "no frozen member list");
    }
    // Its member actor has stopped with the drain and left pg.
    eventually("no member of this node is left in pg", || {
        ractor::pg::get_scoped_members(&SCOPE.to_string(), &"work".to_string())
            .iter()
            .all(|cell| !cell.get_id().is_local())
    })
    .await;
    let observer = cluster.nodes[0].node().to_string();
    let deadline = Instant::now() + BOUND;
    loop {
        let seen = members_seen_by(&me, &observer).await.unwrap_or_default();
        if !seen.contains(&here) {
            break;
        }
        assert!(Instant::now() < deadline, "{observer} still lists {here}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop_and_wait(None, Some(BOUND)).await.unwrap();
    // Nothing of the killed balancers is left in the node's registry for the shutdown to stop.
    assert_eq!(me.shutdown().await, vec![]);
    late.kill().await;
}
