//! Cost of one selection: the algorithm's raw pick versus the balancer's full selection
//! (snapshot load, pick, selection counter, TRACE event check, in-flight gauge, guard and its
//! release), with no metrics recorder and no tracing subscriber installed. The difference is
//! what instrumentation and the guard add.
//!
//! Members are 8 local actors joined to the balancer's pg group under member names, so no
//! other process is needed.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{
    Balancer, BalancerConfig, Node, NodeConfig, Random, RoundRobin, RpcMessage, SelectionAlgorithm,
    SelectionRequest, SCOPE,
};

/// Builds a fresh algorithm.
type MakeAlgorithm = fn() -> Box<dyn SelectionAlgorithm>;

/// Stands in for a member on another node.
struct Idle;
impl Actor for Idle {
    type Msg = RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RpcMessage>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

fn selection(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("bench", "127.0.0.1:0").cookie("bench"),
        ))
        .unwrap();
    let mut group = c.benchmark_group("selection_8_members");
    let algorithms: Vec<(&str, MakeAlgorithm)> = vec![
        ("random", || Box::new(Random::new())),
        ("round_robin", || Box::new(RoundRobin::new())),
    ];
    for (name, make) in algorithms {
        let balancer_name = format!("bench-{name}");
        let balancer = runtime
            .block_on(Balancer::start(
                BalancerConfig::new(&balancer_name).algorithm_arc(make().into()),
            ))
            .unwrap();
        for i in 1..8 {
            let member = format!("rpc_load_balancer/{balancer_name}/fake{i}@127.0.0.1");
            let (actor, _) = runtime
                .block_on(Actor::spawn(Some(member), Idle, ()))
                .unwrap();
            ractor::pg::join_scoped(
                SCOPE.to_string(),
                balancer_name.clone(),
                vec![actor.get_cell()],
            );
        }
        runtime
            .block_on(balancer.wait_for_members(8, Duration::from_secs(5)))
            .unwrap();
        let members = balancer.members();
        let raw = make();
        let request = SelectionRequest {
            version: SelectionRequest::UNCACHED,
            balancer: &balancer_name,
            key: None,
        };
        group.bench_function(format!("{name}/raw_pick"), |b| {
            b.iter(|| {
                raw.choose_from_nodes(std::hint::black_box(members.as_slice()), &request)
                    .unwrap()
            })
        });
        group.bench_function(format!("{name}/balancer_select_and_release"), |b| {
            b.iter(|| drop(std::hint::black_box(balancer.select_node(None).unwrap())))
        });
    }
    group.finish();
    runtime.block_on(node.shutdown());
}

criterion_group!(benches, selection);
criterion_main!(benches);
