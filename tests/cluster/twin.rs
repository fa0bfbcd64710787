//! The real-process twin of the lab (`rpclb demo --scenario`) and its `work` function: a node
//! run with `--cpu-from-work` reports the work's utilization as its CPU reading; a short
//! slow-member twin sends the slow member a smaller share under LeastConnections than under
//! RoundRobin, and its `--json` has every field of the lab's summaries and runs; a short
//! paused-member twin reports the fault-window fields (goodput during the pause, calls to the
//! paused member) as the lab does.

use std::time::Duration;

use rpc_load_balancer::cpu::CpuReading;
use rpc_load_balancer::{ControlReply, ControlRequest, FunctionError, Node, RemoteFunction};
use rpclb::harness::Cluster;
use serde_json::Value;

use crate::commands::rpclb;
use crate::{BIN, MESH_TIMEOUT};

/// The node's `work`, as a caller sees it.
struct Work;
impl RemoteFunction for Work {
    const NAME: &'static str = "work";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        unreachable!("called remotely")
    }
}

/// Asks `target` for its reading until `ok` holds (≤ 10 s); the last answer, or why not.
async fn reading_until(
    me: &Node,
    target: &str,
    ok: impl Fn(f64) -> bool,
) -> Result<CpuReading, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        match me.control(target, ControlRequest::CpuReading).await {
            Ok(ControlReply::CpuReading(Some(reading))) if ok(reading.cpu) => return Ok(reading),
            Ok(ControlReply::CpuReading(reading)) => last = reading,
            other => return Err(format!("{target} answered {other:?}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{target}: last reading {last:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_node_reads_its_utilization_as_cpu() {
    // Capacity 2 and 30 s service times: two calls keep it full; a third waits.
    let work: &[&str] = &[
        "--cpu-from-work",
        "--cpu-sample-interval-ms",
        "100",
        "--work-capacity",
        "2",
        "--work-median-ms",
        "30000",
        "--work-sigma",
        "0",
    ];
    let cluster = Cluster::start_each(BIN, &[work]).await.unwrap();
    let name = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    // Idle: 0 %, not the machine's load.
    let idle = reading_until(&me, &name, |cpu| cpu == 0.0).await.unwrap();
    assert_eq!(idle.cpu, 0.0);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let me = me.clone();
            let name = name.clone();
            tokio::spawn(async move {
                me.call::<Work>(name, ())
                    .timeout(Duration::from_secs(20))
                    .await
            })
        })
        .collect();
    // Full: 100 % (a sample is the mean over its interval: the first may be partial).
    let full = reading_until(&me, &name, |cpu| cpu >= 99.0).await.unwrap();
    assert!(full.cpu <= 100.0, "{full:?}");
    for call in calls {
        call.abort();
    }
    // The calls given up (cancelled on the node): idle again.
    reading_until(&me, &name, |cpu| cpu == 0.0).await.unwrap();
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slow_member_twin_sheds_the_slow_member_under_least_connections() {
    let (code, stdout) = rpclb(
        &[
            "demo",
            "--scenario",
            "slow-member",
            "--algorithms",
            "round_robin,least_connections",
            "--duration-s",
            "4",
            "--warmup-s",
            "1",
            "--json",
        ],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["interrupted"], false, "{report}");
    assert_eq!(report["scenario"]["name"], "slow-member", "{report}");
    assert_eq!(report["nodes"].as_array().unwrap().len(), 4, "{report}");
    assert!(report["rate_per_s"].as_f64().unwrap() > 0.0, "{report}");
    let summaries = report["summaries"].as_array().unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!((summaries.len(), runs.len()), (2, 2), "{report}");
    for summary in summaries {
        for field in [
            "scenario",
            "load",
            "algorithm",
            "runs",
            "p50_ms",
            "p99_ms",
            "p999_ms",
            "error_rate",
            "goodput_per_s",
            "shares",
            "faulty_member",
            "shed_ms",
            "never_shed",
            "little_max_error",
        ] {
            assert!(summary.get(field).is_some(), "{field} missing: {summary}");
        }
        let (p50, p99, p999) = (
            summary["p50_ms"].as_f64().unwrap(),
            summary["p99_ms"].as_f64().unwrap(),
            summary["p999_ms"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{summary}");
        assert_eq!(summary["faulty_member"], 0, "{summary}");
        assert_eq!(summary["shares"].as_array().unwrap().len(), 4, "{summary}");
    }
    for run in runs {
        assert!(run["calls"].as_u64().unwrap() > 0, "{run}");
        assert_eq!(
            run["calls"].as_u64().unwrap(),
            run["ok"].as_u64().unwrap() + run["errors"].as_u64().unwrap(),
            "{run}"
        );
    }
    let slow_share = |algorithm: &str| {
        let summary = summaries
            .iter()
            .find(|s| s["algorithm"] == algorithm)
            .unwrap_or_else(|| panic!("{algorithm} missing: {report}"));
        summary["shares"][0].as_f64().unwrap()
    };
    // RoundRobin gives every member its turn; LeastConnections sees the slow member's calls
    // pile up and sends it fewer.
    let (round_robin, least_connections) =
        (slow_share("round_robin"), slow_share("least_connections"));
    assert!((0.2..0.3).contains(&round_robin), "{report}");
    assert!(least_connections < round_robin * 0.75, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_paused_member_twin_reports_the_calls_around_the_pause() {
    // 1 s warm-up + 3 s: the pause from 1.5 s to the run's end (2.5 s), compared with the
    // 1.5 s before it. RoundRobin keeps sending m0 its turn until the heartbeat drops it (3 s
    // after the pause began, after this run), so each caller sends it calls throughout.
    let (code, stdout) = rpclb(
        &[
            "demo",
            "--scenario",
            "paused-member",
            "--algorithms",
            "round_robin",
            "--service-ms",
            "40",
            "--duration-s",
            "3",
            "--warmup-s",
            "1",
            "--json",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let run = &report["runs"][0];
    assert_eq!(run["faulty_member"], 0, "{run}");
    let ratio = run["fault_goodput_ratio"].as_f64().unwrap_or(-1.0);
    assert!(0.0 < ratio && ratio <= 2.0, "{run}");
    let picks = run["faulty_picks_per_caller"].as_u64().unwrap_or(0);
    assert!(picks > 0, "{run}");
    let last = run["last_faulty_pick_ms"].as_f64().unwrap_or(-1.0);
    assert!((0.0..2_500.0).contains(&last), "{run}");
    let summary = &report["summaries"][0];
    assert_eq!(
        summary["faulty_picks_per_caller"].as_f64(),
        Some(picks as f64)
    );
    assert_eq!(
        summary["last_faulty_pick_ms"].as_f64(),
        Some(last),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_twin_says_it_measured_nothing_instead_of_an_empty_table() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let mut demo = tokio::process::Command::new(BIN)
        .args([
            "demo",
            "--scenario",
            "slow-member",
            "--algorithms",
            "random",
        ])
        .args(["--duration-s", "2", "--warmup-s", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = demo.id().unwrap();
    let mut stderr = BufReader::new(demo.stderr.take().unwrap()).lines();
    // Its first line comes once it listens for signals, before its members have started.
    let first = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
        .await
        .expect("a first line within 30 s")
        .unwrap()
        .unwrap_or_default();
    assert!(first.starts_with("slow-member: "), "{first}");
    // SAFETY: kill(2) has no memory effects; the pid is our own running child's.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
    let mut stdout = demo.stdout.take().unwrap();
    let rest = async {
        let mut out = String::new();
        stdout.read_to_string(&mut out).await.unwrap();
        let mut err = Vec::new();
        while let Some(line) = stderr.next_line().await.unwrap() {
            err.push(line);
        }
        (out, err, demo.wait().await.unwrap())
    };
    let (out, err, status) = tokio::time::timeout(Duration::from_secs(60), rest)
        .await
        .expect("the demo exits within 60 s of SIGTERM");
    assert_eq!(status.code(), Some(130), "{out}\n{err:#?}");
    assert!(
        out.starts_with("interrupted, nothing measured"),
        "{out}\n{err:#?}"
    );
    assert!(!out.contains("algorithm"), "no empty table: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_named_twice_is_a_usage_error_not_a_merged_row() {
    let (code, stdout) = rpclb(
        &[
            "demo",
            "--scenario",
            "paused-member",
            "--algorithms",
            "random,peak_ewma,random",
            "--json",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("random is named twice"), "{stdout}");
}
