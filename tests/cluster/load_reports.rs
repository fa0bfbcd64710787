//! Load reports across real processes (issue 19): every reply carries the serving node's
//! load — its calls in flight, its calls and errors in the last whole second, its CPU — and
//! the caller keeps the latest per member, which selectors read.

use std::time::Duration;

use rpc_load_balancer::routing::{Clock, ReportReading};
use rpc_load_balancer::{Balancer, BalancerConfig, RoundRobin};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::{Fail, Sleep, Whoami, BIN, MESH_TIMEOUT};

/// `member`'s latest report as the caller's balancer `work` holds it.
fn report_of(work: &Balancer, member: &str) -> Option<ReportReading> {
    let members = work.members();
    let view = members.get(member)?.view();
    view.report(Clock::system().now_ms())
}

/// Balanced `Whoami` calls until one reached `member` (≤ 40 tries).
async fn reach(work: &Balancer, member: &str) {
    for _ in 0..40 {
        if work.call::<Whoami>(()).await.unwrap() == member {
            return;
        }
    }
    panic!("no call reached {member}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_carry_the_serving_nodes_load_and_the_caller_keeps_it() {
    let flags = |cpu: &'static str| {
        vec![
            "--balancer",
            "work",
            "--cpu-sampler",
            cpu,
            "--cpu-sample-interval-ms",
            "100",
        ]
    };
    let (a, b) = (flags("const:40"), flags("const:70"));
    let cluster = Cluster::start_each(BIN, &[&a, &b]).await.unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    assert!(report_of(&work, &names[0]).is_none(), "no reply yet");

    // Six slow calls made directly to the first member run while a balanced call reaches it:
    // its reply reports them (and not itself).
    let slow: Vec<_> = (0..6)
        .map(|_| {
            let (me, node) = (me.clone(), names[0].clone());
            tokio::spawn(async move { me.call::<Sleep>(&node, 1_500).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    reach(&work, &names[0]).await;
    let reading = report_of(&work, &names[0]).expect("a report");
    assert_eq!(reading.report.node_in_flight, 6, "{reading:?}");
    assert_eq!(
        reading.report.in_flight, 0,
        "none of work's calls ran there"
    );
    assert_eq!(reading.report.cpu, Some(40.0));
    assert_eq!(reading.report.utilization, None);
    assert!(reading.age_ms < 1_000, "{reading:?}");
    for call in slow {
        call.await.unwrap().unwrap();
    }

    // Calls for 1.2 s, then errors for 1.2 s: a reply reports the last whole second's counts.
    let until = Instant::now() + Duration::from_millis(1_200);
    while Instant::now() < until {
        work.call::<Whoami>(()).await.unwrap();
    }
    reach(&work, &names[1]).await;
    let reading = report_of(&work, &names[1]).expect("a report");
    assert!(reading.report.qps >= 2, "{reading:?}");
    assert_eq!(reading.report.eps, 0, "{reading:?}");
    assert_eq!(reading.report.cpu, Some(70.0));
    let until = Instant::now() + Duration::from_millis(1_200);
    while Instant::now() < until {
        let failed = work.call::<Fail>("no".into()).await;
        assert!(failed.is_err());
    }
    let _ = work.call::<Fail>("last".into()).await;
    let reports: Vec<_> = names.iter().map(|n| report_of(&work, n).unwrap()).collect();
    assert!(
        reports
            .iter()
            .any(|r| r.report.eps >= 1 && r.report.eps <= r.report.qps),
        "{reports:?}"
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
