//! Deadlines and overload across processes: a per-member in-flight cap refuses the excess at
//! once; a caller's deadline cancels the handler on the serving node.

use std::time::{Duration, Instant};

use rpc_load_balancer::{Balancer, BalancerConfig, ControlReply, ControlRequest, Error};
use rpclb::harness::Cluster;

use crate::{Sleep, Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_member_refuses_the_excess_at_once() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work", "--delay-ms", "1000"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .node_match_list(Vec::<String>::new())
            .max_in_flight_per_member(4),
    )
    .await
    .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let work = work.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let outcome = work.call::<Whoami>(()).await;
                (outcome, started.elapsed())
            })
        })
        .collect();
    let (mut ok, mut overloaded) = (0, 0);
    for call in calls {
        match call.await.unwrap() {
            (Ok(_), took) => {
                ok += 1;
                assert!(took >= Duration::from_millis(900), "{took:?}");
            }
            (Err(Error::Overloaded { limit, .. }), took) => {
                overloaded += 1;
                assert_eq!(limit, 4);
                assert!(took < Duration::from_millis(300), "refused after {took:?}");
            }
            (other, _) => panic!("{other:?}"),
        }
    }
    assert_eq!((ok, overloaded), (4, 12));
    assert_eq!(work.members().as_slice()[0].in_flight(), 0);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_cancels_the_handler_on_the_serving_node() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let child = cluster.nodes[0].node().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let served = || async {
        match me
            .control(&child, ControlRequest::Served("work".into()))
            .await
        {
            Ok(ControlReply::Served(Some(n))) => n,
            other => panic!("{other:?}"),
        }
    };
    let call = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(5_000)
                .timeout(Duration::from_millis(200))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(served().await, 1, "the call is being served");
    let outcome = call.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::RequestTimeout { .. })),
        "{outcome:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    while served().await != 0 {
        assert!(Instant::now() < deadline, "the handler kept running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_caller_gave_up_on_is_stopped_when_it_arrives_late() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let child = cluster.nodes[0].node().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let stats = || async {
        match me.control(&child, ControlRequest::Stats).await {
            Ok(ControlReply::Stats {
                served_in_flight,
                served_total,
            }) => (served_in_flight, served_total),
            other => panic!("{other:?}"),
        }
    };
    let (_, total_before) = stats().await;
    // The member is paused: the call (and, once the caller gives up, its cancellation) wait
    // in the socket. Without the cancellation it would run for its whole 1.5 s budget when
    // the member resumes.
    cluster.nodes[0].signal(libc::SIGSTOP);
    let outcome = work
        .call::<Sleep>(10_000)
        .timeout(Duration::from_millis(1_500))
        .await;
    assert!(
        matches!(outcome, Err(Error::RequestTimeout { .. })),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.nodes[0].signal(libc::SIGCONT);
    let resumed = Instant::now();
    loop {
        let (in_flight, total) = stats().await;
        if total > total_before && in_flight == 0 {
            break;
        }
        assert!(
            resumed.elapsed() < Duration::from_millis(700),
            "after the pause the call ran on: in flight {in_flight}, total {total}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_is_stopped_on_the_serving_node() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let child = cluster.nodes[0].node().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let served = || async {
        match me
            .control(&child, ControlRequest::Served("work".into()))
            .await
        {
            Ok(ControlReply::Served(Some(n))) => n,
            other => panic!("{other:?}"),
        }
    };
    // A balanced call and a direct one, each dropped by its caller mid-flight.
    let call = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(10_000)
                .timeout(Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(served().await, 1);
    call.abort();
    let deadline = Instant::now() + Duration::from_millis(500);
    while served().await != 0 {
        assert!(
            Instant::now() < deadline,
            "the handler of the dropped call kept running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let direct = {
        let (me, child) = (me.clone(), child.clone());
        tokio::spawn(async move {
            me.call::<Sleep>(&child, 10_000)
                .timeout(Duration::from_secs(20))
                .await
        })
    };
    let in_flight = || async {
        match me.control(&child, ControlRequest::Stats).await {
            Ok(ControlReply::Stats {
                served_in_flight, ..
            }) => served_in_flight,
            other => panic!("{other:?}"),
        }
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(in_flight().await, 1);
    direct.abort();
    let deadline = Instant::now() + Duration::from_millis(500);
    while in_flight().await != 0 {
        assert!(
            Instant::now() < deadline,
            "the handler of the dropped direct call kept running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
