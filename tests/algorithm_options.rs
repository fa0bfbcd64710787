//! Invalid algorithm options refuse the balancer's start with `InvalidConfig` naming the
//! option, through `Balancer::start` (not just the algorithm's `build`): nothing is started and
//! the name stays free for a valid start.

use std::sync::Arc;

use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, CpuPolling, Needs, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, Error, HashRing, MemberView, Node, NodeConfig, Selector,
    WeightedRoundRobin,
};

/// A custom algorithm asking the balancer to poll CPU readings with `polling`.
struct Polling(CpuPolling);

struct First;

impl Selector for First {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
}

impl Algorithm for Polling {
    fn name(&self) -> &'static str {
        "polling"
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(First))
    }
    fn needs(&self) -> Needs {
        Needs::default().cpu(self.0)
    }
}

fn polling(poll_interval_ms: u64, cpu_cache_ttl_ms: u64) -> Polling {
    Polling(CpuPolling {
        poll_interval: Duration::from_millis(poll_interval_ms),
        poll_startup_jitter: Duration::ZERO,
        cpu_cache_ttl: Duration::from_millis(cpu_cache_ttl_ms),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_hash_ring_weighted_round_robin_and_cpu_polling_options_fail_the_start() {
    let node = Node::start(NodeConfig::new("options", "127.0.0.1:0").cookie("options"))
        .await
        .unwrap();
    let me = node.name().to_string();
    let cases: Vec<(&str, Arc<dyn Algorithm>, &str)> = vec![
        ("no points", Arc::new(HashRing::new().weight(0)), "weight"),
        (
            "too many points",
            Arc::new(HashRing::new().weight(HashRing::MAX_WEIGHT + 1)),
            "weight",
        ),
        (
            "a weight over the maximum",
            Arc::new(WeightedRoundRobin::new().weight(&me, WeightedRoundRobin::MAX_WEIGHT + 1)),
            "weights",
        ),
        (
            "a node that is not a full name",
            Arc::new(WeightedRoundRobin::new().weight("options", 2)),
            "weights",
        ),
        (
            "a default weight over the maximum",
            Arc::new(WeightedRoundRobin::new().default_weight(WeightedRoundRobin::MAX_WEIGHT + 1)),
            "default_weight",
        ),
        // A custom algorithm's polling needs are checked too (a zero interval would spin the
        // Poller's tick loop).
        (
            "a custom algorithm polling every 0 ms",
            Arc::new(polling(0, 10_000)),
            "poll_interval",
        ),
        (
            "a custom algorithm counting readings for 0 ms",
            Arc::new(polling(1_000, 0)),
            "cpu_cache_ttl",
        ),
    ];
    for (what, algorithm, option) in cases {
        match Balancer::start(BalancerConfig::new("options").algorithm_arc(algorithm)).await {
            Err(Error::InvalidConfig {
                option: named,
                reason,
            }) => {
                assert_eq!(named, option, "{what}: {reason}");
                assert!(!reason.is_empty(), "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            matches!(
                Balancer::lookup("options"),
                Err(Error::UnknownBalancer { .. })
            ),
            "{what}: nothing was started"
        );
    }
    // Valid options of both start under the same name.
    for algorithm in [
        Arc::new(HashRing::new().weight(HashRing::MAX_WEIGHT)) as Arc<dyn Algorithm>,
        Arc::new(
            WeightedRoundRobin::new()
                .weight(&me, WeightedRoundRobin::MAX_WEIGHT)
                .default_weight(0),
        ),
    ] {
        let balancer = Balancer::start(BalancerConfig::new("options").algorithm_arc(algorithm))
            .await
            .unwrap();
        assert_eq!(balancer.select_node(Some(b"k")).unwrap().node(), me);
        balancer.stop().await;
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_outlier_ejection_options_and_a_second_ejection_fail_the_start() {
    use rpc_load_balancer::{OutlierEjection, RoundRobin};
    let node = Node::start(NodeConfig::new("ejection", "127.0.0.1:0").cookie("ejection"))
        .await
        .unwrap();
    let wrapped = rpc_load_balancer::algorithm::by_name("round_robin+ejection").unwrap();
    let cases: Vec<(&str, BalancerConfig, &str)> = vec![
        (
            "a zero interval",
            BalancerConfig::new("ejection")
                .outlier_ejection(OutlierEjection::new().interval(Duration::ZERO)),
            "interval",
        ),
        (
            "a cap of 0 %",
            BalancerConfig::new("ejection")
                .algorithm(RoundRobin::new())
                .outlier_ejection(OutlierEjection::new().max_ejected_percent(0)),
            "max_ejected_percent",
        ),
        (
            "bad slow start and bad ejection options: slow start's is named first",
            BalancerConfig::new("ejection")
                .algorithm(RoundRobin::new())
                .slow_start(rpc_load_balancer::SlowStart::new().window(Duration::ZERO))
                .outlier_ejection(OutlierEjection::new().interval(Duration::ZERO)),
            "window",
        ),
        (
            "ejection on an algorithm that has it",
            BalancerConfig::new("ejection")
                .algorithm_arc(wrapped)
                .outlier_ejection(OutlierEjection::new()),
            "outlier_ejection",
        ),
    ];
    for (what, config, option) in cases {
        match Balancer::start(config).await {
            Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            matches!(
                Balancer::lookup("ejection"),
                Err(Error::UnknownBalancer { .. })
            ),
            "{what}: nothing was started"
        );
    }
    let balancer = Balancer::start(
        BalancerConfig::new("ejection")
            .algorithm(RoundRobin::new())
            .outlier_ejection(OutlierEjection::new()),
    )
    .await
    .unwrap();
    let stats = balancer.ejection_stats().expect("ejection is on");
    assert_eq!((stats.ejections, stats.ejected), (0, 0));
    balancer.stop().await;
    node.shutdown().await;
}
