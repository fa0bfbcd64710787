//! Actor groups on a real local node: several actors of one node in a pg group of a custom
//! scope, balanced with the library's algorithms.

use std::collections::HashMap;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::{ActorGroup, ActorGroupConfig};
use crate::{Error, HashRing, LeastConnections, Node, NodeConfig, RoundRobin, Unavailable};

const BOUND: Duration = Duration::from_secs(5);

/// A worker's message: answers with its pid, after `delay_ms`; `Hang` never answers.
#[derive(ractor_cluster::RactorMessage)]
enum Work {
    Who(u64, RpcReplyPort<u64>),
    Hang(RpcReplyPort<u64>),
    Count,
}

struct Worker {
    scope: &'static str,
    group: &'static str,
}

impl Actor for Worker {
    type Msg = Work;
    type State = Vec<RpcReplyPort<u64>>;
    type Arguments = ();

    async fn pre_start(
        &self,
        me: ActorRef<Work>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join_scoped(self.scope.into(), self.group.into(), vec![me.get_cell()]);
        Ok(Vec::new())
    }

    async fn handle(
        &self,
        me: ActorRef<Work>,
        message: Work,
        hung: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            Work::Who(delay_ms, reply) => {
                if delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                }
                let _ = reply.send(me.get_id().pid());
            }
            Work::Hang(reply) => hung.push(reply),
            Work::Count => {}
        }
        Ok(())
    }
}

async fn start_node(name: &str) -> Node {
    Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("group"))
        .await
        .unwrap()
}

async fn workers(scope: &'static str, group: &'static str, n: usize) -> Vec<ActorRef<Work>> {
    let mut actors = Vec::new();
    for _ in 0..n {
        let (actor, _) = Actor::spawn(None, Worker { scope, group }, ())
            .await
            .unwrap();
        actors.push(actor);
    }
    actors
}

/// A node, `n` workers in group `group` of scope `group_tests`, and an actor group over them
/// configured by `config` (started, with all `n` members).
struct Setup {
    node: Node,
    actors: Vec<ActorRef<Work>>,
    group: ActorGroup<Work>,
}

async fn setup(
    node: &str,
    group: &'static str,
    n: usize,
    config: impl FnOnce(ActorGroupConfig) -> ActorGroupConfig,
) -> Setup {
    let node = start_node(node).await;
    let actors = workers("group_tests", group, n).await;
    let group = ActorGroup::<Work>::start(config(ActorGroupConfig::new("group_tests", group)))
        .await
        .unwrap();
    group.wait_for_members(n, BOUND).await.unwrap();
    Setup {
        node,
        actors,
        group,
    }
}

impl Setup {
    /// Stops the group, the workers and the node.
    async fn end(self) {
        self.group.stop().await;
        for actor in self.actors {
            actor.stop(None);
        }
        self.node.shutdown().await;
    }
}

async fn who(group: &ActorGroup<Work>) -> Result<u64, Error> {
    group.call(|port| Work::Who(0, port)).timeout(BOUND).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_actors_ordered_by_node_and_pid_and_round_robin_spreads_over_them() {
    let setup = setup("group_rr", "rr", 3, |c| c.algorithm(RoundRobin::new())).await;
    let group = &setup.group;
    let members = group.members();
    let mut pids: Vec<u64> = setup.actors.iter().map(|a| a.get_id().pid()).collect();
    pids.sort();
    let ids: Vec<String> = members.views().iter().map(|v| v.id().to_string()).collect();
    let expected: Vec<String> = pids
        .iter()
        .map(|p| format!("{}#{p}", setup.node.name()))
        .collect();
    assert_eq!(ids, expected, "one member per actor, by (node, pid)");
    assert!(members
        .as_slice()
        .iter()
        .all(|m| m.node() == setup.node.name()));
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for _ in 0..30 {
        *seen.entry(who(group).await.unwrap()).or_default() += 1;
    }
    assert_eq!(seen.len(), 3, "every actor answered: {seen:?}");
    assert!(seen.values().all(|&n| n == 10), "round robin: {seen:?}");
    group.stop().await;
    assert!(matches!(
        who(group).await,
        Err(Error::UnknownBalancer { .. })
    ));
    setup.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_counts_in_flight_and_least_connections_prefers_the_idle_actor() {
    let setup = setup("group_lc", "lc", 2, |c| {
        c.algorithm(LeastConnections::new())
    })
    .await;
    let group = &setup.group;
    let busy = group.select(None).unwrap();
    assert_eq!(group.in_flight(), 1);
    let busy_pid = busy.actor().get_id().pid();
    assert!(busy.member_id().ends_with(&format!("#{busy_pid}")));
    for _ in 0..10 {
        let idle = who(group).await.unwrap();
        assert_ne!(idle, busy_pid, "the busy actor is not picked");
    }
    // The selected actor is the user's, typed: a message reaches it.
    busy.actor().cast(Work::Count).unwrap();
    drop(busy);
    assert_eq!(group.in_flight(), 0, "released on drop");
    setup.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_and_a_stopped_actor_give_typed_errors_and_the_group_drops_the_member() {
    let setup = setup("group_errors", "errors", 2, |c| {
        c.algorithm(RoundRobin::new())
    })
    .await;
    let group = &setup.group;
    let hung = group
        .call(Work::Hang)
        .timeout(Duration::from_millis(50))
        .await;
    assert!(
        matches!(hung, Err(Error::RequestTimeout { .. })),
        "{hung:?}"
    );
    assert_eq!(group.in_flight(), 0);
    // A stopped actor leaves the group; the other still answers.
    let gone = setup.actors[0].get_id().pid();
    setup.actors[0]
        .stop_and_wait(None, Some(BOUND))
        .await
        .unwrap();
    let mut members = group.watch_members();
    let left = members.wait_for(|m| m.len() == 1);
    tokio::time::timeout(BOUND, left).await.unwrap().unwrap();
    for _ in 0..4 {
        assert_eq!(who(group).await.unwrap(), setup.actors[1].get_id().pid());
    }
    assert_ne!(gone, setup.actors[1].get_id().pid());
    // An actor that stops while selected: its send fails typed, nothing hangs.
    let chosen = group.select(None).unwrap();
    setup.actors[1]
        .stop_and_wait(None, Some(BOUND))
        .await
        .unwrap();
    let sent = ractor::call_t!(chosen.actor(), Work::Who, 100, 0);
    assert!(sent.is_err());
    drop(chosen);
    let empty = group
        .call(|port| Work::Who(0, port))
        .timeout(Duration::from_millis(100))
        .await;
    assert!(
        matches!(
            empty,
            Err(Error::NoMembers { .. })
                | Err(Error::ServiceUnavailable {
                    reason: Unavailable::Disconnected,
                    ..
                })
        ),
        "{empty:?}"
    );
    setup.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_ring_with_a_key_is_stable_and_casts_and_filters_apply() {
    let setup = setup("group_ring", "ring", 4, |c| c.algorithm(HashRing::new())).await;
    let group = &setup.group;
    let mut by_key = HashMap::new();
    for key in ["a", "b", "c", "d", "e", "f"] {
        let first = group
            .call(|port| Work::Who(0, port))
            .key(key)
            .await
            .unwrap();
        for _ in 0..5 {
            let again = group
                .call(|port| Work::Who(0, port))
                .key(key)
                .await
                .unwrap();
            assert_eq!(again, first, "key {key} stays on one actor");
        }
        by_key.insert(key, first);
    }
    group.cast(Work::Count).key("a").await.unwrap();
    // A filter no node matches: no members.
    let none = ActorGroup::<Work>::start(
        ActorGroupConfig::new("group_tests", "ring").node_match_list(["no_such_node"]),
    )
    .await
    .unwrap();
    assert!(none.members().is_empty());
    match none.select(None) {
        Err(error @ Error::NoMembers { .. }) => assert_eq!(
            error.to_string(),
            "no members registered for actor group group_tests/ring"
        ),
        other => panic!("{other:?}"),
    }
    let some = ActorGroup::<Work>::start(
        ActorGroupConfig::new("group_tests", "ring").node_match_list(["group_ring"]),
    )
    .await
    .unwrap();
    assert_eq!(some.wait_for_members(4, BOUND).await.unwrap().len(), 4);
    for g in [none, some] {
        g.stop().await;
    }
    setup.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_options_are_refused_at_start() {
    let node = start_node("group_config").await;
    let start = |config| async move { ActorGroup::<Work>::start(config).await.map(|_| ()) };
    let option = |result: Result<(), Error>| match result {
        Err(Error::InvalidConfig { option, .. }) => option,
        other => panic!("{other:?}"),
    };
    assert_eq!(option(start(ActorGroupConfig::new("", "g")).await), "scope");
    assert_eq!(option(start(ActorGroupConfig::new("s", "")).await), "group");
    let direct = ActorGroupConfig::new("s", "g").algorithm(crate::CallDirect::new());
    assert_eq!(option(start(direct).await), "algorithm");
    let capped = ActorGroupConfig::new("s", "g").max_in_flight_per_member(0);
    assert_eq!(option(start(capped).await), "max_in_flight_per_member");
    let empty = ActorGroupConfig::new("s", "g").node_match_list([""]);
    assert_eq!(option(start(empty).await), "node_match_list");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_wait_for_a_member_within_their_timeout() {
    let node = start_node("group_wait").await;
    let group = ActorGroup::<Work>::start(ActorGroupConfig::new("group_tests", "late"))
        .await
        .unwrap();
    let call = tokio::spawn({
        let group = group.clone();
        async move { who(&group).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let actors = workers("group_tests", "late", 1).await;
    let answered = tokio::time::timeout(BOUND * 2, call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered.unwrap(), actors[0].get_id().pid());
    group.stop().await;
    actors[0].stop(None);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_but_call_direct_balances_a_group_and_learning_ones_see_outcomes() {
    use crate::routing::Algorithm;
    use crate::{
        LeastCpu, LoadWeighted, OutlierEjection, PeakEwma, PowerOfTwo, Random, SlowStart,
        WeightedRoundRobin,
    };
    let node = start_node("group_all").await;
    let actors = workers("group_tests", "all", 3).await;
    let algorithms: Vec<std::sync::Arc<dyn Algorithm>> = vec![
        std::sync::Arc::new(Random::new()),
        std::sync::Arc::new(RoundRobin::new()),
        std::sync::Arc::new(WeightedRoundRobin::new()),
        std::sync::Arc::new(LeastConnections::new()),
        std::sync::Arc::new(PowerOfTwo::new()),
        std::sync::Arc::new(PeakEwma::new()),
        std::sync::Arc::new(LoadWeighted::new()),
        std::sync::Arc::new(HashRing::new()),
        std::sync::Arc::new(LeastCpu::new()),
    ];
    for algorithm in algorithms {
        let name = algorithm.name();
        let group = ActorGroup::<Work>::start(
            ActorGroupConfig::new("group_tests", "all").algorithm_arc(algorithm),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        group.wait_for_members(3, BOUND).await.unwrap();
        for _ in 0..20 {
            let pid = who(&group).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(actors.iter().any(|a| a.get_id().pid() == pid), "{name}");
        }
        assert_eq!(group.in_flight(), 0, "{name}");
        group.stop().await;
    }
    // The wrappers: slow start and ejection over a group.
    let wrapped = ActorGroup::<Work>::start(
        ActorGroupConfig::new("group_tests", "all")
            .algorithm(PeakEwma::new())
            .slow_start(SlowStart::default())
            .outlier_ejection(OutlierEjection::default()),
    )
    .await
    .unwrap();
    wrapped.wait_for_members(3, BOUND).await.unwrap();
    for _ in 0..20 {
        who(&wrapped).await.unwrap();
    }
    assert!(wrapped.ejection_stats().is_some());
    wrapped.stop().await;
    for actor in actors {
        actor.stop(None);
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_forwarded_to_an_actor_and_the_cap_refuses_when_all_are_full() {
    let setup = setup("group_forward", "fwd", 1, |c| c.max_in_flight_per_member(1)).await;
    let group = &setup.group;
    let (actor, mut got) = crate::node::forward::tests::collector().await;
    let _forwarding = group.forward_members_to(actor.clone(), |members| {
        Some(crate::node::forward::tests::Got(members.len().to_string()))
    });
    assert_eq!(crate::node::forward::tests::next(&mut got).await, "1");
    // A selection holds the only member at the cap: a call is refused at once.
    let held = group.select(None).unwrap();
    assert_eq!(held.guard().member().in_flight(), 1);
    let refused = who(group).await;
    assert!(
        matches!(refused, Err(Error::Overloaded { limit: 1, .. })),
        "{refused:?}"
    );
    drop(held);
    who(group).await.unwrap();
    // A call that times out releases its count too.
    let hung = group
        .call(Work::Hang)
        .timeout(Duration::from_millis(50))
        .await;
    assert!(
        matches!(hung, Err(Error::RequestTimeout { .. })),
        "{hung:?}"
    );
    who(group).await.unwrap();
    setup.actors[0].stop(None);
    assert_eq!(crate::node::forward::tests::next(&mut got).await, "0");
    actor.stop(None);
    setup.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_the_watcher_and_a_selection_outlives_it() {
    let setup = setup("group_drop", "drop", 2, |c| c).await;
    let group = setup.group.clone();
    let watcher = group.inner.watcher.clone();
    let chosen = group.select(None).unwrap();
    drop(group);
    assert!(setup.group.is_running(), "a clone still holds it");
    let Setup {
        node,
        actors,
        group,
    } = setup;
    drop(group);
    let stopped = tokio::time::timeout(BOUND, async {
        while watcher.get_status() != ractor::ActorStatus::Stopped {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "the watcher stops with the last handle");
    chosen.actor().cast(Work::Count).unwrap();
    drop(chosen);
    for actor in actors {
        actor.stop(None);
    }
    node.shutdown().await;
}

/// Passes the outcomes forwarded to it on to the test.
struct Inbox;

#[derive(ractor_cluster::RactorMessage)]
struct Got(Result<u64, Error>);

impl Actor for Inbox {
    type Msg = Got;
    type State = tokio::sync::mpsc::UnboundedSender<Result<u64, Error>>;
    type Arguments = tokio::sync::mpsc::UnboundedSender<Result<u64, Error>>;

    async fn pre_start(
        &self,
        _: ActorRef<Got>,
        out: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(out)
    }

    async fn handle(
        &self,
        _: ActorRef<Got>,
        Got(outcome): Got,
        out: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = out.send(outcome);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_group_call_arrives_as_a_message_and_a_stopped_receiver_releases_it() {
    let s = setup("group_forward", "forwarded", 2, |c| c).await;
    let (out, mut got) = tokio::sync::mpsc::unbounded_channel();
    let (inbox, _) = Actor::spawn(None, Inbox, out).await.unwrap();
    let pids: Vec<u64> = s.actors.iter().map(|a| a.get_id().pid()).collect();

    let forwarding = s
        .group
        .call(|port| Work::Who(0, port))
        .timeout(BOUND)
        .forward_to(&inbox, Got);
    assert_eq!(forwarding.outcome().await, crate::ForwardOutcome::Delivered);
    let pid = tokio::time::timeout(BOUND, got.recv()).await.unwrap();
    assert!(pids.contains(&pid.unwrap().unwrap()));

    // A call no member answers, then the receiver stops: the call is dropped, its selection
    // released, nothing delivered.
    let hanging = s
        .group
        .call(Work::Hang)
        .timeout(Duration::from_secs(60))
        .forward_to(&inbox, Got);
    let deadline = tokio::time::Instant::now() + BOUND;
    while s.group.in_flight() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    inbox.stop_and_wait(None, None).await.unwrap();
    let outcome = tokio::time::timeout(BOUND, hanging.outcome())
        .await
        .unwrap();
    assert_eq!(outcome, crate::ForwardOutcome::ReceiverStopped);
    assert_eq!(s.group.in_flight(), 0);
    s.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_filter_takes_the_actors_of_nodes_with_the_label() {
    let node = Node::start(
        NodeConfig::new("group_labels", "127.0.0.1:0")
            .cookie("group")
            .label("zone", "a"),
    )
    .await
    .unwrap();
    let actors = workers("group_tests", "labelled", 2).await;
    let zone_a = ActorGroup::<Work>::start(
        ActorGroupConfig::new("group_tests", "labelled")
            .node_match_list([crate::NodeFilter::label("zone", "a")]),
    )
    .await
    .unwrap();
    zone_a.wait_for_members(2, BOUND).await.unwrap();
    let zone_b = ActorGroup::<Work>::start(
        ActorGroupConfig::new("group_tests", "labelled")
            .node_match_list([crate::NodeFilter::label("zone", "b")]),
    )
    .await
    .unwrap();
    assert!(zone_b.members().is_empty(), "zone b took this zone-a node");
    zone_a.stop().await;
    zone_b.stop().await;
    for actor in actors {
        actor.stop(None);
    }
    node.shutdown().await;
}

/// Makes `actor` refuse every message while it stays in the group: busy in a slow handler,
/// then draining (ractor keeps it in pg until it stops; its mailbox refuses new messages).
async fn refusing(actor: &ActorRef<Work>) {
    let busy = actor.clone();
    tokio::spawn(async move {
        let _ = ractor::call!(busy, |port| Work::Who(3_000, port));
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    actor.drain().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_skipped_at_the_cap_do_not_use_up_the_resends() {
    let s = setup("group_resends", "resends", 10, |c| {
        c.algorithm(RoundRobin::new()).max_in_flight_per_member(1)
    })
    .await;
    // 8 members held at their cap, one refusing, one free.
    let mut held = Vec::new();
    while held.len() < 8 {
        let selection = s.group.select(None).unwrap();
        if !held
            .iter()
            .any(|h: &super::GroupSelection<Work>| h.member_id() == selection.member_id())
        {
            held.push(selection);
        }
    }
    let free: Vec<ActorRef<Work>> = s
        .actors
        .iter()
        .filter(|a| !held.iter().any(|h| h.actor().get_id() == a.get_id()))
        .cloned()
        .collect();
    assert_eq!(free.len(), 2);
    refusing(&free[0]).await;
    for _ in 0..10 {
        let pid = who(&s.group).await.expect("a free member was there");
        assert_eq!(pid, free[1].get_id().pid());
    }
    drop(held);
    s.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_refusing_member_fails_disconnected_at_once() {
    let s = setup("group_lone", "lone", 1, |c| c).await;
    refusing(&s.actors[0]).await;
    let started = std::time::Instant::now();
    let refused = s
        .group
        .call(|port| Work::Who(0, port))
        .timeout(Duration::from_secs(30))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::ServiceUnavailable {
                reason: Unavailable::Disconnected,
                ..
            })
        ),
        "{refused:?}"
    );
    // Told at once, not at the timeout: well under the 30 s it had.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "waited for the timeout"
    );
    let cast = s.group.cast(Work::Count).await;
    assert!(
        matches!(
            cast,
            Err(Error::ServiceUnavailable {
                reason: Unavailable::Disconnected,
                ..
            })
        ),
        "{cast:?}"
    );
    s.end().await;
}
