//! The actor-pool example (`examples/actor_pool.rs`, docs/how-to/a-ractor-application.md) run
//! as its reader runs it: two worker processes and one app process on 127.0.0.1. The app's
//! jobs reach the actors of both worker processes through its actor group, the function call
//! forwarded into its mailbox is answered by a worker, and every process exits 0.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::terminal::{example_binary, listen_address, repo_file, Terminal};

/// Bound for a process to print a line it is expected to print (debug build, 2 shared cores).
const LINE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for the app's whole run: it waits up to 10 s for the pool, then its calls (10 s each).
const APP_TIMEOUT: Duration = Duration::from_secs(60);
/// Jobs the app sends: 12 at once over 6 actors (LeastConnections spreads calls in flight).
const JOBS: u64 = 12;

/// The worker and its job count in a `NODE#PID served N` line.
fn served(line: &str) -> Option<(&str, u64)> {
    let (worker, jobs) = line.split_once(" served ")?;
    Some((worker, jobs.parse().ok()?))
}

/// The how-to's commands for the three terminals are the example's.
#[test]
fn the_how_to_runs_the_example_as_its_header_says() {
    let how_to = repo_file("docs/how-to/a-ractor-application.md");
    let example = repo_file("examples/actor_pool.rs");
    let commands: Vec<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix("//! cargo run --example actor_pool -- "))
        .collect();
    assert_eq!(
        commands.len(),
        3,
        "the example's header has its three commands"
    );
    for command in commands {
        let line = format!("cargo run --example actor_pool -- {command}");
        assert!(
            how_to.lines().any(|l| l == line),
            "the how-to lacks {line:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actor_pool_example_runs_as_documented() {
    let binary = example_binary("actor_pool");
    // The how-to's ports are 4200-4202; port 0 (free ports) keeps the test off fixed ports.
    let mut a = Terminal::open(&binary, &["worker", "worker_a", "0"]);
    let ready = a.wait_for(" ready: ", LINE_TIMEOUT).await;
    assert!(
        ready.starts_with("worker_a@127.0.0.1 ready: 3 workers in actor_pool/workers"),
        "{ready}"
    );
    let seed = listen_address(&ready);
    assert!(seed.starts_with("127.0.0.1:"), "{seed}");
    let mut b = Terminal::open(&binary, &["worker", "worker_b", "0", &seed]);
    b.wait_for("worker_b@127.0.0.1 ready: ", LINE_TIMEOUT).await;

    let jobs = JOBS.to_string();
    // The app exits 0 once every job and the function call are answered.
    let app = ["app", "app", "0", &seed, &jobs, "2"];
    let out = &Terminal::run(&binary, &app, APP_TIMEOUT).await;
    let [listening, pool, ..] = out.as_slice() else {
        panic!("too few lines: {out:#?}");
    };
    let app_addr = listen_address(listening);
    assert!(app_addr.starts_with("127.0.0.1:"), "{out:#?}");
    // The pool: three actors per worker process, the app's own node has none.
    let want = "pool: 6 workers on worker_a@127.0.0.1, worker_b@127.0.0.1";
    assert_eq!(pool, want, "{out:#?}");

    // The balanced function call, forwarded into the dispatcher's mailbox: a worker served it
    // (the app's node is no member: the balancer takes role=worker nodes only).
    let stamp = out
        .iter()
        .find(|l| l.starts_with("stamp: "))
        .unwrap_or_else(|| panic!("no stamp line: {out:#?}"));
    assert!(
        stamp == "stamp: dispatcher stamped by worker_a@127.0.0.1"
            || stamp == "stamp: dispatcher stamped by worker_b@127.0.0.1",
        "{out:#?}"
    );

    // Every job answered once, by a worker actor; both worker processes served jobs.
    let per_worker: Vec<(&str, u64)> = out.iter().filter_map(|l| served(l)).collect();
    let mut per_node = BTreeMap::new();
    for (worker, jobs) in &per_worker {
        let (node, pid) = worker
            .rsplit_once('#')
            .unwrap_or_else(|| panic!("not a member id: {worker:?} in {out:#?}"));
        assert!(pid.parse::<u64>().is_ok(), "{out:#?}");
        assert!(*jobs > 0, "{out:#?}");
        *per_node.entry(node).or_insert(0) += jobs;
    }
    assert_eq!(
        per_node.keys().copied().collect::<Vec<_>>(),
        ["worker_a@127.0.0.1", "worker_b@127.0.0.1"],
        "both worker processes serve jobs: {out:#?}"
    );
    assert_eq!(per_node.values().sum::<u64>(), JOBS, "{out:#?}");
    let last = format!("all {JOBS} jobs answered by {} workers", per_worker.len());
    assert_eq!(out[out.len() - 2], last, "{out:#?}");
    assert_eq!(out[out.len() - 1], "app@127.0.0.1 stopped", "{out:#?}");

    // The workers stop gracefully: a on Ctrl-D (its stdin closed), b on Ctrl-C.
    a.close_stdin();
    b.interrupt();
    for (node, terminal) in [("worker_a", &mut a), ("worker_b", &mut b)] {
        let status = terminal.finish(LINE_TIMEOUT).await;
        assert!(
            status.success(),
            "{node} exited with {status}: {:#?}",
            terminal.seen
        );
        assert_eq!(
            terminal.seen.last().unwrap(),
            &format!("{node}@127.0.0.1 stopped"),
            "{:#?}",
            terminal.seen
        );
    }
}
