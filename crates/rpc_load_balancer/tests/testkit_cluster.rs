//! `testkit::cluster` with real processes: children of this test binary, started, called from
//! the test's own node, killed, terminated, and all gone after the cluster is dropped.
#![cfg(unix)]

use std::time::Duration;

use rpc_load_balancer::testkit::cluster::{is_child, run_child, ClusterError, ClusterSpec};
use rpc_load_balancer::{Error, FunctionError, Node, NodeConfig, RemoteFunction};

/// Returns the full name of the node it runs on.
struct WhoAmI;

impl RemoteFunction for WhoAmI {
    const NAME: &'static str = "testkit_cluster.who_am_i";
    type Args = ();
    type Reply = String;
    async fn call(&self, _: ()) -> Result<String, FunctionError> {
        Node::current()
            .map(|node| node.name().to_string())
            .ok_or_else(|| FunctionError::new("no node"))
    }
}

/// The child of `three_children_called_killed_terminated_and_reaped`. Run directly (e.g.
/// `--include-ignored`), it does nothing.
#[test]
#[ignore = "a child of the testkit cluster tests"]
fn who_am_i_child() -> Result<(), ClusterError> {
    if !is_child() {
        return Ok(());
    }
    run_child(|node| async move {
        node.register(WhoAmI)?;
        Ok(())
    })
}

/// A child that fails before its ready line.
#[test]
#[ignore = "a child of the testkit cluster tests"]
fn failing_child() {
    if is_child() {
        eprintln!("failing on purpose before the ready line");
        std::process::exit(3);
    }
}

/// Whether process `pid` no longer exists (reaped: `kill(pid, 0)` fails with ESRCH).
fn gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks the pid; nothing is sent.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    !alive && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_children_called_killed_terminated_and_reaped() {
    let mut cluster = ClusterSpec::test("who_am_i_child")
        .unwrap()
        .nodes(3)
        .start()
        .await
        .unwrap();
    let pids: Vec<u32> = cluster.children().iter().map(|c| c.pid()).collect();
    assert_eq!(cluster.names().len(), 3);
    let me = cluster
        .join(
            NodeConfig::new("parent", "127.0.0.1:0"),
            Duration::from_secs(30),
        )
        .await
        .unwrap();

    // Each child answers with its own name.
    for name in cluster.names() {
        let reply = me
            .call::<WhoAmI>(&name, ())
            .timeout(Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(reply, name);
    }

    // A killed child: calls to it fail with a typed error (bounded).
    let killed = cluster.child(2).name().to_string();
    let status = cluster.child(2).kill().await.expect("reaped");
    assert!(!status.success());
    let mut failed = None;
    for _ in 0..50 {
        match me
            .call::<WhoAmI>(&killed, ())
            .timeout(Duration::from_secs(2))
            .await
        {
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(error) => {
                failed = Some(error);
                break;
            }
        }
    }
    match failed {
        Some(Error::ServiceUnavailable { .. } | Error::RequestTimeout { .. }) => {}
        other => panic!("calls to the killed child: {other:?}"),
    }

    // A child stopped gracefully exits by itself, with success (its test passed).
    let status = cluster
        .child(1)
        .terminate(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(status.success(), "{status}");

    // The one left still answers, also after a pause.
    cluster.child(0).pause().unwrap();
    cluster.child(0).resume().unwrap();
    let first = cluster.child(0).name().to_string();
    let reply = me.call::<WhoAmI>(&first, ()).await.unwrap();
    assert_eq!(reply, first);

    me.shutdown().await;
    drop(cluster);
    for pid in pids {
        assert!(gone(pid), "child {pid} is still there");
    }
}

#[tokio::test]
async fn a_child_that_exits_before_ready_gives_its_status_and_stderr() {
    let started = ClusterSpec::test("failing_child")
        .unwrap()
        .ready_timeout(Duration::from_secs(60))
        .start()
        .await;
    match started {
        Err(ClusterError::Exited {
            name,
            status,
            stderr_tail,
            ..
        }) => {
            assert_eq!(name, "n0");
            assert_eq!(status.and_then(|s| s.code()), Some(3));
            assert!(
                stderr_tail.contains("failing on purpose"),
                "stderr: {stderr_tail:?}"
            );
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[tokio::test]
async fn a_program_that_does_not_exist_gives_spawn() {
    let command = std::process::Command::new("/nonexistent/rpc_load_balancer-child");
    match ClusterSpec::command(command).start().await {
        Err(ClusterError::Spawn { program, .. }) => assert!(program.contains("nonexistent")),
        other => panic!("expected Spawn, got {other:?}"),
    }
}

#[test]
fn child_config_outside_the_harness_names_the_variable() {
    if is_child() {
        return;
    }
    match rpc_load_balancer::testkit::cluster::child_config() {
        Err(ClusterError::NotAChild { var }) => assert!(var.starts_with("RPC_LOAD_BALANCER")),
        other => panic!("expected NotAChild, got {:?}", other.map(|_| ())),
    }
}

/// The parent's end of a child's stdin closing (as when the parent dies, even by SIGKILL)
/// makes the child shut its node down and exit by itself, with success.
#[tokio::test]
async fn a_child_exits_by_itself_when_its_stdin_closes() {
    let mut cluster = ClusterSpec::test("who_am_i_child")
        .unwrap()
        .start()
        .await
        .unwrap();
    let child = cluster.child(0);
    child.process_mut().close_stdin();
    let status = child.process_mut().wait_exit(Duration::from_secs(30)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
