//! The `rpclb` commands a new user runs: `demo`, `call`, `load` and `control`.

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::WIRE_VERSION;
use rpclb::harness::{Cluster, NodeSpec};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use crate::BIN;

/// Runs `rpclb ARGS` to completion (≤ `bound`); its exit code and stdout.
pub(crate) async fn rpclb(args: &[&str], bound: Duration) -> (i32, String) {
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(bound, child.wait_with_output())
        .await
        .expect("rpclb finished in time")
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_every_algorithm_across_every_node() {
    let (code, stdout) = rpclb(
        &["demo", "--calls", "3000", "--json"],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["interrupted"], false, "{report}");
    let nodes: Vec<&str> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3);
    let runs = report["algorithms"].as_array().unwrap();
    assert_eq!(runs.len(), rpc_load_balancer::algorithm::BUILT_IN.len());
    for run in runs {
        let name = run["algorithm"].as_str().unwrap();
        assert_eq!(run["calls"], 3000, "{name}");
        assert_eq!(run["ok"], 3000, "{name}: {run}");
        assert_eq!(run["interrupted"], false, "{name}: {run}");
        if name == "call_direct" {
            // Runs on the calling node: reported as that node; every child is listed with 0.
            let per_node = run["per_node"].as_object().unwrap();
            let (here, n) = per_node
                .iter()
                .find(|(node, _)| node.starts_with("rpclb-demo@"))
                .unwrap_or_else(|| panic!("the demo node is missing: {run}"));
            assert_eq!(n, 3000, "{here}: {run}");
            assert_eq!(per_node.len(), nodes.len() + 1, "{run}");
            for node in &nodes {
                assert_eq!(per_node.get(*node), Some(&json!(0)), "{node}: {run}");
                assert_eq!(run["share"][node], 0.0, "{node}: {run}");
            }
            continue;
        }
        let total: u64 = nodes
            .iter()
            .map(|node| run["per_node"][node].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            total, 3000,
            "{name}: every call lands on a demo node: {run}"
        );
        assert!(
            run["latency_us"]["p99"].as_u64().unwrap()
                >= run["latency_us"]["p50"].as_u64().unwrap()
        );
        if name == "least_cpu" {
            // Follows the nodes' real CPU readings: on a busy machine one node can read the
            // highest for the whole run and rightly get no call (checked with pinned readings
            // by the burning test below).
            continue;
        }
        for node in &nodes {
            assert!(
                run["per_node"][node].as_u64().unwrap_or(0) > 0,
                "{name}: {node} got no calls: {run}"
            );
        }
    }
}

/// Real load, in its own nextest group (`burning`: it runs alone). The burning node's reading
/// is pinned at 100 % (`--burn-sampler`), so the routing does not depend on how busy the
/// machine is (the others sample their process: together at most 100 % of the cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_sends_a_burning_node_no_least_cpu_calls_and_lists_it_with_zero() {
    let (code, stdout) = rpclb(
        &[
            "demo",
            "--algorithm",
            "least_cpu",
            "--burn",
            "2",
            "--burn-sampler",
            "const:100",
            "--calls",
            "2000",
            "--json",
        ],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let nodes: Vec<&str> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3, "{report}");
    // `--burn 2` is the second node.
    let burning = nodes[1];
    assert_eq!(report["burning"], burning, "{report}");
    let runs = report["algorithms"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    assert_eq!(run["algorithm"], "least_cpu", "{run}");
    assert_eq!(run["ok"], 2000, "{run}");
    // Listed, with no call: 100 is never within LeastCpu's 5 points of the coolest node.
    assert_eq!(run["per_node"][burning], 0, "{run}");
    let calls = |node: &str| run["per_node"][node].as_u64().unwrap_or(0);
    for node in nodes.iter().filter(|n| **n != burning) {
        assert!(calls(node) > 0, "{node}: {run}");
    }
    // The readings LeastCpu chose by: every node's, the burning one's the highest.
    let readings = run["cpu_readings"].as_object().unwrap();
    let cpu = |node: &str| readings[node]["cpu"].as_f64().unwrap();
    for node in &nodes {
        assert!(readings[*node]["age_ms"].as_u64().is_some(), "{run}");
        if *node != burning {
            assert!(cpu(burning) > cpu(node), "{node}: {run}");
        }
    }
}

/// The processes whose parent is `pid` (from /proc), with their command lines.
fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split after its `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if ppid == Some(pid) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            children.push((child, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    children
}

/// Whether process `pid` exists (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s != "Z"))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_on_ctrl_c_prints_what_ran_exits_130_and_stops_its_nodes() {
    let calls = 30_000;
    let mut demo = Command::new(BIN)
        .args(["demo", "--calls", &calls.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = demo.id().unwrap();
    let mut stdout = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut stderr = demo.stderr.take().unwrap();
    // The first run's table (random) is its first result; round_robin runs next.
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let first = line.starts_with("random: ");
            seen.push(line);
            if first {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no first result within 120 s: {seen:#?}"));
    assert!(
        seen.last()
            .unwrap()
            .starts_with(&format!("random: {calls} calls in ")),
        "{seen:#?}"
    );
    let nodes = children_of(pid);
    assert_eq!(
        nodes
            .iter()
            .filter(|(_, cmd)| cmd.contains(" node "))
            .count(),
        3,
        "{nodes:?}"
    );
    // SAFETY: kill(2) has no memory effects; the pid is our own running child's.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let rest = async {
        let mut rest = Vec::new();
        while let Some(line) = stdout.next_line().await.unwrap() {
            rest.push(line);
        }
        let mut err = String::new();
        stderr.read_to_string(&mut err).await.unwrap();
        (rest, err, demo.wait().await.unwrap())
    };
    let (rest, err, status) = tokio::time::timeout(Duration::from_secs(30), rest)
        .await
        .expect("the demo exited within 30 s of Ctrl-C");
    assert_eq!(status.code(), Some(130), "{rest:#?}\n{err}");
    // The cut run's report: the calls that ended, on every node.
    let cut = rest
        .iter()
        .position(|l| l.starts_with("round_robin: interrupted after "))
        .unwrap_or_else(|| panic!("no partial report: {rest:#?}\n{err}"));
    let made: u64 = rest[cut]
        .trim_start_matches("round_robin: interrupted after ")
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", rest[cut]));
    assert!(made < calls, "{rest:#?}");
    assert!(
        rest[cut + 1].starts_with(&format!("round_robin: {made} calls in ")),
        "{rest:#?}"
    );
    for node in ["n0@127.0.0.1", "n1@127.0.0.1", "n2@127.0.0.1"] {
        assert!(
            rest[cut..].iter().any(|l| l.trim_start().starts_with(node)),
            "{node} is not in the partial report: {rest:#?}"
        );
    }
    assert!(
        rest.iter()
            .all(|l| !l.starts_with("weighted_round_robin: ")),
        "the next algorithm did not run: {rest:#?}"
    );
    assert!(err.contains("interrupted"), "{err}");
    // No node outlives the demo.
    let left = survivors(&nodes).await;
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Waits (≤ 5 s) until none of `nodes` runs; those still running then.
async fn survivors(nodes: &[(u32, String)]) -> Vec<&(u32, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while nodes.iter().any(|(pid, _)| alive(*pid)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nodes.iter().filter(|(pid, _)| alive(*pid)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_json_on_ctrl_c_is_one_document_of_what_ran() {
    let calls = 10_000_000u64;
    let demo = Command::new(BIN)
        .args(["demo", "--algorithm", "round_robin", "--json"])
        .args(["--calls", &calls.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = demo.id().unwrap();
    // Its 3 nodes are up; then let it call for a while (whenever the signal comes, the
    // document says what ran: the assertions below hold at any point).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let nodes = loop {
        let nodes: Vec<(u32, String)> = children_of(pid)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(" node "))
            .collect();
        if nodes.len() == 3 {
            break nodes;
        }
        assert!(tokio::time::Instant::now() < deadline, "{nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    // SAFETY: kill(2) has no memory effects; the pid is our own running child's.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let output = tokio::time::timeout(Duration::from_secs(30), demo.wait_with_output())
        .await
        .expect("the demo exited within 30 s of Ctrl-C")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stdout}");
    let report = one_document(&stdout);
    assert_eq!(report["interrupted"], true, "{report}");
    let names = report["nodes"].as_array().unwrap();
    let runs = report["algorithms"].as_array().unwrap();
    assert!(runs.len() <= 1, "{report}");
    if let Some(run) = runs.first() {
        assert_eq!(names.len(), 3, "{report}");
        assert_eq!(run["algorithm"], "round_robin", "{run}");
        assert_eq!(run["interrupted"], true, "{run}");
        assert!(run["calls"].as_u64().unwrap() < calls, "{run}");
        for node in names {
            assert!(run["per_node"][node.as_str().unwrap()].is_u64(), "{run}");
        }
    }
    let left = survivors(&nodes).await;
    assert!(left.is_empty(), "still running: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_and_load_work_against_a_running_cluster() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let peer = cluster.nodes[0].addr().to_string();
    let cookie = cluster.cookie().to_string();
    let names = cluster.names();

    let (code, stdout) = rpclb(
        &[
            "call",
            "--peer",
            &peer,
            "--cookie",
            &cookie,
            "--balancer",
            "work",
            "--json",
            "whoami",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let reply: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(reply["ok"], true);
    assert_eq!(reply["reply"], reply["node"]);
    assert!(
        names.contains(&reply["node"].as_str().unwrap().to_string()),
        "{reply}"
    );

    let (code, stdout) = rpclb(
        &[
            "call", "--peer", &peer, "--cookie", &cookie, "--node", &names[1], "fail", "nope",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(code, 1, "a failed call exits 1: {stdout}");

    // bytes_echo takes its Payload as a JSON list of bytes and answers the same list.
    let (code, stdout) = rpclb(
        &[
            "call",
            "--peer",
            &peer,
            "--cookie",
            &cookie,
            "--node",
            &names[1],
            "--json",
            "bytes_echo",
            "[1,2,255]",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let reply: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(reply["reply"], serde_json::json!([1, 2, 255]), "{reply}");

    let (code, stdout) = rpclb(
        &[
            "load",
            "--peer",
            &peer,
            "--cookie",
            &cookie,
            "--balancer",
            "work",
            "--algorithm",
            "round_robin",
            "--calls",
            "500",
            "--concurrency",
            "8",
            "--json",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["balancer"], "work");
    assert_eq!(report["algorithm"], "round_robin");
    assert_eq!(report["calls"], 500);
    assert_eq!(report["ok"], 500);
    assert!(report["error"].is_null(), "{report}");
    for node in &names {
        assert_eq!(report["per_node"][node], 250, "{report}");
    }
    // The percentiles of the latency histogram, µs, in order and up to the exact max.
    let latency = |p: &str| report["latency_us"][p].as_u64().unwrap();
    assert!(latency("p50") > 0, "{report}");
    assert!(
        latency("p50") <= latency("p90")
            && latency("p90") <= latency("p99")
            && latency("p99") <= latency("max"),
        "{report}"
    );
}

/// Parses `stdout` as exactly one JSON document.
fn one_document(stdout: &str) -> Value {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stdout: {stdout:?}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

/// Asserts `error` is the error object of `kind` (with `code`) whose message contains
/// `message`.
fn assert_error(error: &Value, kind: &str, code: &str, message: &str) {
    assert_eq!(error["kind"], kind, "{error}");
    assert_eq!(error["code"], code, "{error}");
    let text = error["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{error}"));
    assert!(text.contains(message), "{error}");
    assert!(error.as_object().unwrap().contains_key("node"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_failures_print_one_document_with_the_error() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "w"]).await.unwrap();
    let peer = cluster.nodes[0].addr().to_string();
    let n0 = cluster.names()[0].clone();
    let bound = Duration::from_secs(30);
    let wrong = ["--peer", &peer, "--cookie", "wrong"];
    let connect_failed = |error: &Value| {
        assert_error(
            error,
            "connect_failed",
            "service_unavailable",
            "wrong cookie",
        );
        assert!(error["node"].is_null(), "{error}");
    };

    // Joining fails: call (through a balancer, and to a node), control, load.
    let args = [&wrong[..], &["--balancer", "w", "--json", "whoami"][..]].concat();
    let (code, stdout) = rpclb(&[&["call"][..], &args[..]].concat(), bound).await;
    assert_eq!(code, 1, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    assert!(line["node"].is_null(), "{line}");
    assert_eq!(line["balancer"], "w", "{line}");
    assert!(line["latency_us"].is_null(), "no call was made: {line}");
    connect_failed(&line["error"]);

    let args = [&wrong[..], &["--node", &n0, "--json", "whoami"][..]].concat();
    let (code, stdout) = rpclb(&[&["call"][..], &args[..]].concat(), bound).await;
    assert_eq!(code, 1, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    assert_eq!(line["node"], n0.as_str(), "{line}");
    assert!(line["balancer"].is_null(), "{line}");
    connect_failed(&line["error"]);

    let args = [&wrong[..], &["--node", &n0, "--json", "ping"][..]].concat();
    let (code, stdout) = rpclb(&[&["control"][..], &args[..]].concat(), bound).await;
    assert_eq!(code, 1, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    assert_eq!(line["node"], n0.as_str(), "{line}");
    connect_failed(&line["error"]);

    let load = [
        "--balancer",
        "w",
        "--calls",
        "10",
        "--concurrency",
        "2",
        "--json",
    ];
    let args = [&wrong[..], &load[..]].concat();
    let (code, stdout) = rpclb(&[&["load"][..], &args[..]].concat(), bound).await;
    assert_eq!(code, 1, "{stdout}");
    let report = one_document(&stdout);
    assert_eq!(report["balancer"], "w", "{report}");
    assert_eq!(report["algorithm"], "random", "{report}");
    assert_eq!(report["concurrency"], 2, "{report}");
    assert_eq!((&report["calls"], &report["ok"]), (&0.into(), &0.into()));
    assert!(report["errors"].as_object().unwrap().is_empty(), "{report}");
    connect_failed(&report["error"]);

    // Usage errors found after parsing: exit status 2, kind `usage`.
    let right = ["--peer", &peer, "--cookie", cluster.cookie(), "--json"];
    let usage = |line: &Value, message: &str| {
        assert_error(&line["error"], "usage", "bad_request", message);
        assert!(line["error"]["node"].is_null(), "{line}");
    };
    let args = [&["call"][..], &right[..], &["--node", &n0, "nosuch"][..]].concat();
    let (code, stdout) = rpclb(&args, bound).await;
    assert_eq!(code, 2, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    usage(&line, "unknown demo function");
    let args = [
        &["call"][..],
        &right[..],
        &["--node", &n0, "sleep", "soon"][..],
    ]
    .concat();
    let (code, stdout) = rpclb(&args, bound).await;
    assert_eq!(code, 2, "{stdout}");
    usage(&one_document(&stdout), "not a number");
    let args = [&["control"][..], &right[..], &["--node", &n0, "nosuch"][..]].concat();
    let (code, stdout) = rpclb(&args, bound).await;
    assert_eq!(code, 2, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    usage(&line, "unknown control request");
    // (Durations that are not a number of seconds, or absurd, are usage errors too.)
    for duration in ["0", "1e300", "NaN", "inf"] {
        let args = [
            &["load"][..],
            &right[..],
            &["--balancer", "w", "--duration", duration][..],
        ]
        .concat();
        let (code, stdout) = rpclb(&args, bound).await;
        assert_eq!(code, 2, "{duration}: {stdout}");
        let report = one_document(&stdout);
        assert_eq!(report["calls"], 0, "{report}");
        usage(&report, "--duration");
    }

    // A call that fails keeps its shape: the error and the latency.
    let args = [
        &["call"][..],
        &right[..],
        &["--node", &n0, "fail", "nope"][..],
    ]
    .concat();
    let (code, stdout) = rpclb(&args, bound).await;
    assert_eq!(code, 1, "{stdout}");
    let line = one_document(&stdout);
    assert_error(&line["error"], "remote", "service_unavailable", "nope");
    assert!(line["latency_us"].is_u64(), "{line}");

    // A peer of another wire version: the typed error, naming it.
    let other = WIRE_VERSION + 1;
    let future = NodeSpec::new("future", cluster.cookie())
        .arg("--wire-version")
        .arg(other.to_string())
        .start(BIN)
        .await
        .unwrap();
    let right = [
        "--peer",
        future.addr(),
        "--cookie",
        cluster.cookie(),
        "--json",
    ];
    let args = [
        &["call"][..],
        &right[..],
        &["--node", future.node(), "whoami"][..],
    ]
    .concat();
    let (code, stdout) = rpclb(&args, bound).await;
    assert_eq!(code, 1, "{stdout}");
    let line = one_document(&stdout);
    assert_eq!(line["ok"], false, "{line}");
    assert_error(
        &line["error"],
        "wire_version",
        "service_unavailable",
        &format!("wire version {other}"),
    );
    assert_eq!(line["error"]["node"], future.node(), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_prints_the_metrics_it_recorded() {
    let args = [
        "demo",
        "--calls",
        "300",
        "--algorithm",
        "round_robin",
        "--metrics",
        "--json",
    ];
    let (code, stdout) = rpclb(&args, Duration::from_secs(120)).await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let metrics = report["metrics"].as_str().expect("a metrics field");
    let stops: u64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("rpc_load_balancer_rpc_request_stop_count{")
                && l.contains(r#"status="ok""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(stops, 300, "{metrics}");
    assert!(
        metrics.contains(r#"le="60000""#),
        "duration buckets from describe()"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_custom_algorithm_example_runs() {
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join("custom_algorithm");
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(example)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the example finishes")
    .expect("examples/custom_algorithm is built with the tests");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("releases counted by the selector: 3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_measures_every_case_and_leaves_no_child() {
    let (code, stdout) = rpclb(
        &[
            "bench",
            "--json",
            "--sizes",
            "100,64KiB",
            "--calls",
            "200",
            "--rounds",
            "2",
            "--warmup",
            "20",
            "--secs",
            "0.4",
            "--warmup-secs",
            "0.1",
            "--concurrency",
            "8",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["errors"], 0);
    assert_eq!(report["nodes"].as_array().unwrap().len(), 3);
    let targets: Vec<&str> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(targets.len(), 2);
    let bench_node = report["bench_node"].as_str().unwrap();
    assert_eq!(report["settings"]["calls_per_round"], 100);
    assert_eq!(report["settings"]["concurrency"], 8);
    let sizes = report["sizes"].as_array().unwrap();
    assert_eq!(
        sizes
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [100, 65536]
    );
    for size in sizes {
        for phase in ["sequential", "throughput"] {
            let cases = size[phase]["cases"].as_object().unwrap();
            let names: Vec<&String> = cases.keys().collect();
            assert_eq!(names, ["balanced", "direct", "local", "raw"], "{phase}");
            for (name, case) in cases {
                let what = format!("{} B {phase} {name}: {case}", size["bytes"]);
                let calls = case["calls"].as_u64().unwrap();
                assert!(calls > 0, "{what}");
                assert_eq!(case["ok"].as_u64().unwrap(), calls, "{what}");
                assert!(case["errors"].as_object().unwrap().is_empty(), "{what}");
                let latency = &case["latency_us"];
                assert!(latency["p50"].as_u64().unwrap() <= latency["p99"].as_u64().unwrap());
                assert!(case["calls_per_sec"].as_f64().unwrap() > 0.0, "{what}");
                let served: Vec<&String> = case["per_node"].as_object().unwrap().keys().collect();
                if name == "local" {
                    assert_eq!(served, [bench_node], "{what}");
                } else {
                    assert_eq!(served, targets, "{what}");
                }
                if phase == "sequential" {
                    assert_eq!(calls, 200, "{what}");
                }
            }
            for warmup in size[phase]["warmup"].as_object().unwrap().values() {
                assert!(warmup["errors"].as_object().unwrap().is_empty(), "{warmup}");
            }
            for ratio in ["direct_over_raw", "balanced_over_raw"] {
                for figure in ["p50", "p99", "calls_per_sec"] {
                    let stats = &size[phase]["ratios"][ratio][figure];
                    assert_eq!(stats["per_round"].as_array().unwrap().len(), 2, "{stats}");
                    let (min, max) = (
                        stats["min"].as_f64().unwrap(),
                        stats["max"].as_f64().unwrap(),
                    );
                    let median = stats["median"].as_f64().unwrap();
                    assert!(0.0 < min && min <= median && median <= max, "{stats}");
                }
            }
        }
    }
    // The children were killed and reaped before the command exited.
    for pid in report["node_pids"].as_array().unwrap() {
        let pid = pid.as_u64().unwrap();
        assert!(pid > 0);
        // (A reused pid would belong to another program.)
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains("rpclb"),
            "child {pid} outlived rpclb bench"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_refuses_heartbeats_out_of_range_naming_the_flag() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--heartbeat-interval-ms",
                "1",
                "--heartbeat-timeout-ms",
                "3",
            ],
            "heartbeat_timeout",
        ),
        (&["--heartbeat-interval-ms", "10"], "heartbeat_interval"),
        (
            &["--dial-backoff-max-ms", "18446744073709551615"],
            "dial_backoff_max",
        ),
    ];
    for (flags, option) in cases {
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            Command::new(BIN)
                .args(["node", "--name", "bad", "--cookie", "c"])
                .args(flags)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("rpclb node exits at once")
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid option `{option}`")) && stderr.contains(" ms"),
            "{flags:?}: {stderr}"
        );
    }
}
