//! Property test through the real balancer: random interleavings of selections, releases
//! (guard drops), members joining and leaving keep every member's in-flight count equal to the
//! number of live guards on it, and all counts end at exactly zero — for LeastConnections and
//! PowerOfTwo (both read the counts the guards keep).
//!
//! Runs a `Node` in this process (one per process: nextest runs each test alone). Members
//! other than this node are local stand-in actors joined to the balancer's pg group under
//! member names, so joins and leaves are real pg changes the balancer sees.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use ractor::ActorRef;
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, LeastConnections, Node, NodeConfig, PowerOfTwo,
    RpcMessage, SelectionGuard,
};
use rpclb::harness::{join_stand_ins, stand_in_node};

#[derive(Debug, Clone)]
enum Op {
    Select,
    Drop(usize),
    Join(u8),
    Leave(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Select),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => (0u8..4).prop_map(Op::Join),
        1 => (0u8..4).prop_map(Op::Leave),
    ]
}

#[test]
fn least_connections_counts_track_live_guards_and_end_at_zero() {
    counts_track_live_guards("props-lc", LeastConnections::new());
}

#[test]
fn power_of_two_counts_track_live_guards_and_end_at_zero() {
    counts_track_live_guards("props-p2c", PowerOfTwo::new());
}

/// Runs the property on balancer `name` with `algorithm`, on a node of its own.
fn counts_track_live_guards(name: &str, algorithm: impl Algorithm) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _node = runtime
        .block_on(Node::start(
            NodeConfig::new(name, "127.0.0.1:0").cookie("props"),
        ))
        .unwrap();
    let config = BalancerConfig::new(name).algorithm(algorithm);
    let balancer = runtime.block_on(Balancer::start(config)).unwrap();
    let stand_ins: RefCell<HashMap<u8, ActorRef<RpcMessage>>> = RefCell::default();

    proptest!(ProptestConfig::with_cases(48), |(ops in proptest::collection::vec(op(), 1..40))| {
        let mut guards: Vec<SelectionGuard> = Vec::new();
        for op in ops {
            match op {
                Op::Select => guards.push(balancer.select_node(None).unwrap()),
                Op::Drop(i) if !guards.is_empty() => drop(guards.swap_remove(i % guards.len())),
                Op::Drop(_) => {}
                Op::Join(n) if !stand_ins.borrow().contains_key(&n) => {
                    let actor = runtime.block_on(join_stand_ins(name, [usize::from(n)])).unwrap().remove(0);
                    stand_ins.borrow_mut().insert(n, actor);
                    let want = stand_ins.borrow().len() + 1;
                    runtime.block_on(balancer.wait_for_members(want, Duration::from_secs(5))).unwrap();
                }
                Op::Leave(n) => {
                    let removed = stand_ins.borrow_mut().remove(&n);
                    if let Some(actor) = removed {
                        runtime.block_on(actor.stop_and_wait(None, Some(Duration::from_secs(5)))).unwrap();
                        let node = stand_in_node(usize::from(n));
                        let mut watch = balancer.watch_members();
                        runtime.block_on(async {
                            tokio::time::timeout(Duration::from_secs(5), watch.wait_for(|m| !m.contains(&node))).await
                        }).unwrap().unwrap();
                    }
                }
                Op::Join(_) => {}
            }
            // Every current member counts exactly its live guards of the current membership:
            // guards from before a leave and rejoin count on the old counter, not the new one.
            let members = balancer.members();
            for member in members.as_slice() {
                let live = guards.iter().filter(|g| g.node() == member.node() && g.member().id() == member.id()).count();
                prop_assert_eq!(member.in_flight(), live, "{} counts {} for {} live guards", member.node(), member.in_flight(), live);
            }
            prop_assert_eq!(balancer.in_flight(), guards.len(), "balancer total");
        }
        drop(guards);
        for member in balancer.members().as_slice() {
            prop_assert_eq!(member.in_flight(), 0, "{} still counts", member.node());
        }
        prop_assert_eq!(balancer.in_flight(), 0, "balancer total");
    });
    runtime.block_on(balancer.stop());
}

/// Algorithms that don't read member counts (Random here) leave them at 0, but the balancer's
/// total still counts every live guard, also when guards drop on other threads.
#[test]
fn non_counting_algorithms_keep_only_the_balancer_total() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _node = runtime
        .block_on(Node::start(
            NodeConfig::new("totals", "127.0.0.1:0").cookie("totals"),
        ))
        .unwrap();
    let balancer = runtime
        .block_on(Balancer::start(
            BalancerConfig::new("totals").algorithm(rpc_load_balancer::Random::new()),
        ))
        .unwrap();
    runtime.block_on(join_stand_ins("totals", 1..4)).unwrap();
    runtime
        .block_on(balancer.wait_for_members(4, Duration::from_secs(5)))
        .unwrap();
    let mut guards: Vec<SelectionGuard> = (0..40)
        .map(|_| balancer.select_node(None).unwrap())
        .collect();
    assert_eq!(balancer.in_flight(), 40);
    for member in balancer.members().as_slice() {
        assert_eq!(member.in_flight(), 0, "{} counted", member.node());
    }
    // Half released on other threads.
    std::thread::scope(|scope| {
        for guard in guards.drain(..20) {
            scope.spawn(move || drop(guard));
        }
    });
    assert_eq!(balancer.in_flight(), 20);
    // Another thread's selection adds to the total and its release takes it away.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let guard = balancer.select_node(None).unwrap();
            assert_eq!(balancer.in_flight(), 21);
            drop(guard);
        });
    });
    assert_eq!(balancer.in_flight(), 20);
    drop(guards);
    assert_eq!(balancer.in_flight(), 0);
    runtime.block_on(balancer.stop());
}
