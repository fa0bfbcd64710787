//! Node-side CPU sampling across processes: every node answers CPU-reading requests with its
//! own sampler's reading and its age, whatever its balancers; failing samplers publish
//! nothing; a garbage reply is a codec error on the caller; a burning node reads high.

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::cpu::CpuReading;
use rpc_load_balancer::{ControlReply, ControlRequest, Error, Node};
use rpclb::harness::{random_cookie, Cluster, NodeSpec};
use serde_json::Value;
use tokio::process::Command;

use crate::{BIN, MESH_TIMEOUT};

/// Asks `target` for its own reading until `ok` holds (≤ 10 s); the last answer.
async fn reading_until(
    me: &Node,
    target: &str,
    ok: impl Fn(&Option<CpuReading>) -> bool,
) -> Result<Option<CpuReading>, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reading = match me.control(target, ControlRequest::CpuReading).await {
            Ok(ControlReply::CpuReading(reading)) => reading,
            other => return Err(format!("{target} answered {other:?}")),
        };
        if ok(&reading) || tokio::time::Instant::now() > deadline {
            return if ok(&reading) {
                Ok(reading)
            } else {
                Err(format!("{target}: last reading {reading:?}"))
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_answers_with_its_own_samplers_reading() {
    let pinned: &[&str] = &[
        "--cpu-sampler",
        "const:25",
        "--cpu-sample-interval-ms",
        "100",
    ];
    let failing: &[&str] = &["--cpu-sampler", "panic", "--cpu-sample-interval-ms", "100"];
    let switching: &[&str] = &[
        "--cpu-sampler",
        "const-then-panic:60:300",
        "--cpu-sample-interval-ms",
        "50",
    ];
    let garbage: &[&str] = &["--cpu-sampler", "const:40", "--cpu-reply", "garbage"];
    let cluster = Cluster::start_each(BIN, &[pinned, failing, switching, garbage])
        .await
        .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // A pinned sampler's value, fresh.
    let reading = reading_until(&me, &names[0], |r| r.is_some())
        .await
        .unwrap();
    let reading = reading.unwrap();
    assert_eq!(reading.cpu, 25.0);
    assert!(reading.age_ms < 2_000, "{reading:?}");

    // A sampler that panics every time never publishes, and the node keeps answering.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        me.control(&names[1], ControlRequest::CpuReading).await,
        Ok(ControlReply::CpuReading(None))
    );
    assert!(matches!(
        me.control(&names[1], ControlRequest::Ping).await,
        Ok(ControlReply::Pong { .. })
    ));

    // After the switch the last reading only ages (its age is measured at the source).
    let aged = reading_until(&me, &names[2], |r| r.is_some_and(|r| r.age_ms >= 500))
        .await
        .unwrap();
    assert_eq!(aged.map(|r| r.cpu), Some(60.0));

    // Garbage: a codec error on the caller, not a panic or a timeout.
    match me.control(&names[3], ControlRequest::CpuReading).await {
        Err(Error::Codec { function, message }) => {
            assert_eq!(function, "control");
            assert!(message.contains(&names[3]), "{message}");
        }
        other => panic!("garbage reply gave {other:?}"),
    }

    // Diagnostics: the readings a node holds include its own.
    match me.control(&names[0], ControlRequest::CpuReadings).await {
        Ok(ControlReply::CpuReadings(readings)) => {
            let own = readings.iter().find(|(node, _)| *node == names[0]);
            assert_eq!(own.map(|(_, r)| r.cpu), Some(25.0), "{readings:?}");
        }
        other => panic!("CpuReadings gave {other:?}"),
    }
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_poller_needs_remote_admin() {
    let closed: &[&str] = &["--no-remote-admin"];
    let cluster = Cluster::start_each(BIN, &[closed, &[]]).await.unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let request = ControlRequest::CrashPoller("work".into());
    match me.control(&names[0], request.clone()).await {
        Err(Error::Remote { message, .. }) => {
            assert!(message.contains("remote_admin"), "{message}")
        }
        other => panic!("a closed node gave {other:?}"),
    }
    // Allowed, but no LeastCpu balancer `work` runs there: the Poller's error.
    match me.control(&names[1], request).await {
        Err(Error::Remote { message, .. }) => assert!(message.contains("work"), "{message}"),
        other => panic!("an open node gave {other:?}"),
    }
    me.shutdown().await;
    cluster.shutdown().await;
}

/// The one test of real CPU sampling (the routing tests pin their readings): it holds on a
/// busy machine. Its spinners share the cores with whatever else runs there (at a load average
/// of 50 a burning node read 5 %), so it asserts no level, only that the burning node reads
/// above the idle one, sampled side by side, retried for up to 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burning_node_reads_higher_than_an_idle_one() {
    let cookie = random_cookie();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // 500 ms samples: Linux counts CPU time in 10 ms ticks, so shorter ones are coarse.
    let burning = NodeSpec::new("burning", &cookie)
        .cpu_sampler("process")
        .cpu_sample_interval_ms(500)
        .burn_threads(cores)
        .start(BIN)
        .await
        .unwrap();
    let idle = NodeSpec::new("idle", &cookie)
        .peer(burning.addr())
        .cpu_sampler("process")
        .cpu_sample_interval_ms(500)
        .start(BIN)
        .await
        .unwrap();
    let me =
        Node::start(rpc_load_balancer::NodeConfig::new("tester", "127.0.0.1:0").cookie(&cookie))
            .await
            .unwrap();
    me.connect(burning.addr()).await.unwrap();
    me.wait_for_peers(2, MESH_TIMEOUT).await.unwrap();
    let read = |target: String| {
        let me = &me;
        async move {
            match me.control(&target, ControlRequest::CpuReading).await {
                Ok(ControlReply::CpuReading(reading)) => reading,
                other => panic!("{target} answered {other:?}"),
            }
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let (hot, cold) = (
            read(burning.node().to_string()).await,
            read(idle.node().to_string()).await,
        );
        if let (Some(hot), Some(cold)) = (hot, cold) {
            seen.push((hot.cpu, cold.cpu));
            if hot.cpu > cold.cpu {
                eprintln!(
                    "burning {} %, idle {} % (after {seen:?})",
                    hot.cpu, cold.cpu
                );
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the burning node never read above the idle one: (burning, idle) {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpclb_control_prints_cpu_readings() {
    // The node also runs a LeastCpu balancer whose only member is itself.
    let pinned: &[&str] = &[
        "--cpu-sampler",
        "const:12.5",
        "--cpu-sample-interval-ms",
        "100",
        "--balancer",
        "work",
        "--algorithm",
        "least_cpu",
        "--cpu-cache-ttl-ms",
        "1000",
    ];
    let cluster = Cluster::start_each(BIN, &[pinned]).await.unwrap();
    let target = cluster.names()[0].clone();
    let control = |request: &'static str| {
        let child = Command::new(BIN)
            .args(["control", "--peer", cluster.nodes[0].addr()])
            .args([
                "--cookie",
                cluster.cookie(),
                "--node",
                &target,
                "--json",
                request,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        async move {
            let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
                .await
                .expect("rpclb control finished in time")
                .unwrap();
            let line: Value = serde_json::from_slice(&output.stdout).unwrap();
            (output.status.code(), line)
        }
    };
    // The first sample is published at once (const samplers withhold nothing).
    let (code, line) = control("cpu_reading").await;
    assert_eq!(code, Some(0), "{line}");
    assert_eq!(line["ok"], true);
    assert_eq!(line["reply"]["cpu"], 12.5, "{line}");
    assert!(line["reply"]["age_ms"].as_u64().is_some(), "{line}");
    let (code, line) = control("cpu_readings").await;
    assert_eq!(code, Some(0), "{line}");
    let readings = line["reply"]["readings"].as_array().unwrap();
    assert!(
        readings
            .iter()
            .any(|r| r["node"] == target.as_str() && r["cpu"] == 12.5),
        "{line}"
    );
    // Beside the raw readings, what its LeastCpu balancer routes each member by.
    assert_eq!(
        line["reply"]["selection"],
        serde_json::json!([{"balancer": "work", "members": [{"node": target, "cpu": 12.5}]}]),
        "{line}"
    );
    cluster.shutdown().await;
}
