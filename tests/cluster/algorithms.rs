//! Load-aware algorithms across real processes: they avoid a slow member, and their in-flight
//! counts return to zero whatever happens to the calls.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, ControlReply, ControlRequest, LeastConnections, PowerOfTwo,
};
use rpclb::harness::Cluster;

use crate::{Fail, Sleep, Whoami, BIN, MESH_TIMEOUT};

/// Share of calls (after the first 100) served by the slow node, through `algorithm`.
async fn slow_node_share(cluster: &Cluster, algorithm: Arc<dyn Algorithm>) -> f64 {
    let balancer = Balancer::start(
        BalancerConfig::new("work")
            .algorithm_arc(algorithm)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    balancer.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let served: Arc<Mutex<Vec<String>>> = Arc::default();
    let issued = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut callers = Vec::new();
    for _ in 0..32 {
        let (balancer, served, issued) =
            (balancer.clone(), Arc::clone(&served), Arc::clone(&issued));
        callers.push(tokio::spawn(async move {
            while issued.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 2100 {
                let node = balancer
                    .call::<Whoami>(())
                    .timeout(Duration::from_secs(10))
                    .await
                    .unwrap();
                served.lock().unwrap().push(node);
            }
        }));
    }
    for caller in callers {
        caller.await.unwrap();
    }
    balancer.stop().await;
    let served = std::mem::take(&mut *served.lock().unwrap());
    let counted = &served[100..];
    let slow = cluster.nodes[0].node();
    counted.iter().filter(|n| n.as_str() == slow).count() as f64 / counted.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_connections_and_power_of_two_avoid_a_slow_member() {
    let slow: &[&str] = &["--balancer", "work", "--delay-ms", "50"];
    let fast: &[&str] = &["--balancer", "work", "--delay-ms", "1"];
    let cluster = Cluster::start_each(BIN, &[slow, fast, fast]).await.unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let lc = slow_node_share(&cluster, Arc::new(LeastConnections::new())).await;
    let p2c = slow_node_share(&cluster, Arc::new(PowerOfTwo::new())).await;
    eprintln!(
        "slow node share: least_connections {:.1}%, power_of_two {:.1}%",
        lc * 100.0,
        p2c * 100.0
    );
    assert!(
        lc < 0.15,
        "LeastConnections sent {:.1}% to the slow node",
        lc * 100.0
    );
    assert!(
        p2c < 0.15,
        "PowerOfTwo sent {:.1}% to the slow node",
        p2c * 100.0
    );
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_counts_end_at_zero_whatever_happens_to_the_calls() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(LeastConnections::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    balancer.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let issued = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let outcomes: Arc<Mutex<[u32; 4]>> = Arc::default(); // ok, failed, timed out, cancelled
    let mut callers = Vec::new();
    for _ in 0..32 {
        let (balancer, issued, outcomes) =
            (balancer.clone(), Arc::clone(&issued), Arc::clone(&outcomes));
        callers.push(tokio::spawn(async move {
            loop {
                let n = issued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= 4000 {
                    break;
                }
                let kind = match n % 20 {
                    0..=4 => {
                        assert!(balancer.call::<Fail>("no".into()).await.is_err());
                        1
                    }
                    5..=9 => {
                        let timed_out = balancer
                            .call::<Sleep>(300)
                            .timeout(Duration::from_millis(50))
                            .await;
                        assert!(timed_out.is_err());
                        2
                    }
                    10..=11 => {
                        // Dropped mid-call: the guard must still release.
                        let call = balancer
                            .call::<Sleep>(100)
                            .timeout(Duration::from_secs(5))
                            .into_future();
                        assert!(tokio::time::timeout(Duration::from_millis(2), call)
                            .await
                            .is_err());
                        3
                    }
                    _ => {
                        balancer.call::<Whoami>(()).await.unwrap();
                        0
                    }
                };
                outcomes.lock().unwrap()[kind] += 1;
            }
        }));
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let outcomes = *outcomes.lock().unwrap();
    assert_eq!(outcomes, [1600, 1000, 1000, 400]);
    let members = balancer.members();
    assert_eq!(members.len(), 3);
    for member in members.as_slice() {
        assert_eq!(
            member.in_flight(),
            0,
            "{} still counts calls",
            member.node()
        );
    }
    // Readable through admin control too.
    match me
        .control(me.name(), ControlRequest::InFlight("work".into()))
        .await
        .unwrap()
    {
        ControlReply::InFlight(Some(counts)) => {
            assert_eq!(counts.len(), 3);
            assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");
        }
        other => panic!("{other:?}"),
    }
    balancer.stop().await;
    me.shutdown().await;
}
