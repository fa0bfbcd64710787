//! Client nodes (`NodeConfig::client`) are listed by no peer: a node that comes up sends a join
//! notice to one peer, which passes it on to its clients, and they dial the node
//! (`node/mesh.rs`). A client calls a newly joined node, and a
//! node that drained and came back under its name and port, within a second or so of that
//! node's `ready` (before: 7–11 s, the client's peer-list refresh, which also ignores a node
//! that left less than 5 s ago) — and is told once per join, though every server sees the
//! newcomer (the client counts the `join notice` DEBUG events it logs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::algorithm::RoundRobin;
use rpc_load_balancer::{Balancer, BalancerConfig, NodeConfig};
use rpclb::harness::{Cluster, NodeSpec};
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// How long after a node's `ready` the client may take to call it. The goal is 1 s; the bound
/// leaves room for a loaded 2-core machine and stays well under the 7 s of the refresh.
const BOUND: Duration = Duration::from_secs(3);

/// `join notice` events this process logged, by the `node` that dialled.
#[derive(Default, Clone)]
struct Notices(Arc<Mutex<BTreeMap<String, usize>>>);

#[derive(Default)]
struct Fields {
    message: String,
    node: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "node" => self.node = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for Notices {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.starts_with("join notice") {
            *self.0.lock().unwrap().entry(fields.node).or_default() += 1;
        }
    }
}

impl Notices {
    /// Installs the subscriber (process-wide: one per test process).
    fn install() -> Self {
        let notices = Self::default();
        let filter = tracing_subscriber::filter::Targets::new()
            .with_target("rpc_load_balancer::node", tracing::Level::DEBUG);
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(notices.clone().with_filter(filter)),
        )
        .unwrap();
        notices
    }

    fn of(&self, node: &str) -> usize {
        self.0.lock().unwrap().get(node).copied().unwrap_or(0)
    }
}

/// How long after `ready` a call through `work` first reached `node` (panics past [`BOUND`]).
async fn first_call_to(work: &Balancer, node: &str, ready: Instant) -> Duration {
    loop {
        let reached = work
            .call::<Whoami>(())
            .timeout(Duration::from_millis(500))
            .await;
        if reached.as_deref() == Ok(node) {
            return ready.elapsed();
        }
        assert!(
            ready.elapsed() < BOUND,
            "the client sent {node} no call within {BOUND:?} of its ready (last: {reached:?}, \
             members {:?})",
            work.members().nodes()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_node_calls_a_joined_or_restarted_node_at_once_told_once() {
    let notices = Notices::install();
    let mut cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let hub = cluster.nodes[0].addr().to_string();
    let me = cluster
        .join_with(
            NodeConfig::new("tester", "127.0.0.1:0").client(true),
            MESH_TIMEOUT,
        )
        .await
        .unwrap();
    let joined = Instant::now();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(["n"]),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();

    // A new node n2, dialling n0 only, once the client's first questions to its peers are over
    // (the last 4.3 s after each came up; the next come 10 s later): only a notice can tell
    // the client in time. n0 and n1 both list the client to n2.
    tokio::time::sleep_until(joined + Duration::from_secs(5)).await;
    let newcomer = NodeSpec::new("n2", cluster.cookie())
        .peer(&hub)
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();
    let new_took = first_call_to(&work, newcomer.node(), Instant::now()).await;

    // n1 drains (telling its peers, the client included, it is leaving) and comes back under
    // its name and port, dialling n0 only.
    let (restarted_name, restarted_addr) = (names[1].clone(), cluster.nodes[1].addr().to_string());
    cluster.nodes[1].signal(libc::SIGTERM);
    let status = cluster.nodes[1]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("n1 exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    let mut nodes = me.watch_nodes();
    tokio::time::timeout(
        Duration::from_secs(5),
        nodes.wait_for(|n| !n.contains(&restarted_name)),
    )
    .await
    .expect("the client sees n1 go")
    .unwrap();
    // n1 may have told the client once already: they came up together.
    let before_restart = notices.of(&restarted_name);
    assert!(before_restart <= 1, "{:?}", notices.0.lock().unwrap());
    let restarted = NodeSpec::new("n1", cluster.cookie())
        .listen(&restarted_addr)
        .peer(&hub)
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();
    let restart_took = first_call_to(&work, &restarted_name, Instant::now()).await;
    assert_eq!(restarted.addr(), restarted_addr);
    cluster.nodes[1] = restarted;
    cluster.nodes.push(newcomer);
    eprintln!(
        "client's first call after ready: new node {} ms, restarted node {} ms",
        new_took.as_millis(),
        restart_took.as_millis()
    );

    // Late duplicates would come within the same second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        notices.of(&names[1]) - before_restart,
        1,
        "notices of the restarted node: {:?}",
        notices.0.lock().unwrap()
    );
    assert_eq!(
        notices.of("n2@127.0.0.1"),
        1,
        "notices of the new node: {:?}",
        notices.0.lock().unwrap()
    );
    // n0 was up before the client, which dialled it: at most one notice (if n0 asked n1 for
    // its clients before the client's own session to n0 was ready).
    assert!(
        notices.of(&names[0]) <= 1,
        "{:?}",
        notices.0.lock().unwrap()
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
