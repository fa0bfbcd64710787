//! LeastCpu's options are checked when a balancer starts: a `cpu_cache_ttl` not above the
//! node's `cpu_sample_interval` is refused, from the library and from `rpclb`.

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Error, LeastCpu, NodeConfig};
use rpclb::harness::Cluster;
use serde_json::Value;
use tokio::process::Command;

use crate::{BIN, MESH_TIMEOUT};

/// Runs `rpclb ARGS` to completion (≤ 30 s): exit code, stdout, stderr.
async fn rpclb(args: &[&str]) -> (Option<i32>, String, String) {
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("rpclb finished in time")
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_not_above_the_sample_interval_is_refused_at_start() {
    // `rpclb node`: the node samples every 1,000 ms, its LeastCpu balancer trusts readings
    // for 1,000 ms: it exits 1 naming the option, before it reports ready.
    let (code, stdout, stderr) = rpclb(&[
        "node",
        "--name",
        "bad-ttl",
        "--listen",
        "127.0.0.1:0",
        "--balancer",
        "work",
        "--algorithm",
        "least_cpu",
        "--cpu-sample-interval-ms",
        "1000",
        "--cpu-cache-ttl-ms",
        "1000",
    ])
    .await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("\"ready\""), "{stdout}");
    assert!(
        stderr.contains("invalid option `cpu_cache_ttl`")
            && stderr.contains("cpu_sample_interval (1000 ms)"),
        "{stderr}"
    );

    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let peer = cluster.nodes[0].addr().to_string();
    // `rpclb load` samples every half of the TTL (at least 1 ms): a 1 ms TTL cannot be above.
    let (code, stdout, stderr) = rpclb(&[
        "load",
        "--peer",
        &peer,
        "--cookie",
        cluster.cookie(),
        "--balancer",
        "work",
        "--algorithm",
        "least_cpu",
        "--cpu-cache-ttl-ms",
        "1",
        "--calls",
        "10",
        "--json",
    ])
    .await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["calls"], 0, "{report}");
    assert_eq!(report["error"]["kind"], "invalid_config", "{report}");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`cpu_cache_ttl`") && message.contains("cpu_sample_interval"),
        "{message}"
    );

    // The library: `Balancer::start` on a node sampling every 500 ms.
    let me = cluster
        .join_with(
            NodeConfig::new("tester", "127.0.0.1:0")
                .cpu_sample_interval(Duration::from_millis(500)),
            MESH_TIMEOUT,
        )
        .await
        .unwrap();
    let start = |ttl_ms: u64| {
        Balancer::start(
            BalancerConfig::new("work")
                .algorithm(LeastCpu::new().cpu_cache_ttl(Duration::from_millis(ttl_ms)))
                .node_match_list(Vec::<String>::new()),
        )
    };
    for ttl_ms in [1, 499, 500] {
        match start(ttl_ms).await {
            Err(Error::InvalidConfig { option, reason }) => {
                assert_eq!(option, "cpu_cache_ttl", "{ttl_ms} ms");
                assert!(reason.contains("500 ms"), "{reason}");
            }
            other => panic!(
                "a {ttl_ms} ms TTL started: {:?}",
                other.map(|b| b.name().to_string())
            ),
        }
        assert!(Balancer::lookup("work").is_err(), "nothing is left running");
    }
    let work = start(501).await.expect("a TTL above the interval starts");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
