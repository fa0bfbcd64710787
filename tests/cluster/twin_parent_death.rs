//! A SIGKILLed `rpclb demo --scenario` leaves no child running: its members (`rpclb node
//! --exit-with-stdin`) and its caller processes (`rpclb demo-caller --exit-with-stdin`) see
//! their stdin close when the demo dies, and exit. The test finds the demo's children in
//! /proc (by parent pid), records each with its start time (so a reused pid is not taken for
//! it), kills the demo once its callers run, and waits a bounded time for every one to end.

use std::time::Duration;

use tokio::time::Instant;

use crate::BIN;

/// A process of /proc: its pid and start time (clock ticks since boot), which together name
/// it even if the pid is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: u32,
    start: u64,
}

/// The fields of /proc/`pid`/stat after the command name: state, ppid, ... (`None` once the
/// process is gone).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The running (not zombie) process `pid` with its start time, if any.
fn running(pid: u32) -> Option<Proc> {
    let fields = stat_fields(pid)?;
    // fields[0] = state (field 3 of stat), fields[1] = ppid, fields[19] = starttime (field 22).
    if fields.first()? == "Z" {
        return None;
    }
    Some(Proc {
        pid,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// The running children of `parent`, each with whether its command line is a demo caller's.
fn children_of(parent: u32) -> Vec<(Proc, bool)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            stat_fields(pid)
                .is_some_and(|f| f.get(1).map(String::as_str) == Some(&*parent.to_string()))
        })
        .filter_map(|pid| {
            let proc = running(pid)?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let caller = cmdline.split(|&b| b == 0).any(|arg| arg == b"demo-caller");
            Some((proc, caller))
        })
        .collect()
}

/// Whether `proc` still runs (the same process: same pid and start time, not a zombie).
fn still_runs(proc: Proc) -> bool {
    running(proc.pid) == Some(proc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_twin_leaves_none_of_its_members_and_callers_running() {
    let mut demo = tokio::process::Command::new(BIN)
        .args([
            "demo",
            "--scenario",
            "slow-member",
            "--algorithms",
            "random",
        ])
        // Long enough that the callers would outlive the demo by far if nothing ended them.
        .args(["--duration-s", "120", "--warmup-s", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = demo.id().unwrap();
    // Its members start first, then its 2 callers (the default --callers).
    let deadline = Instant::now() + Duration::from_secs(60);
    let children = loop {
        let children = children_of(pid);
        if children.iter().filter(|(_, caller)| *caller).count() == 2 {
            break children;
        }
        assert!(
            Instant::now() < deadline,
            "the demo's 2 callers did not start within 60 s: {children:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        children.iter().any(|(_, caller)| !caller),
        "no member among the demo's children: {children:?}"
    );
    // Let the callers join and start their run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    demo.start_kill().unwrap();
    demo.wait().await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left: Vec<(Proc, bool)> = children;
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|(proc, _)| still_runs(*proc));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Our own (grand)children: end them before failing, so none outlives the test.
    for (proc, _) in left.iter().filter(|(proc, _)| still_runs(*proc)) {
        // SAFETY: kill(2) has no memory effects; the process (same pid and start time) is
        // one the demo this test started has started.
        unsafe {
            libc::kill(proc.pid as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(
        left.is_empty(),
        "still running 20 s after the demo was SIGKILLed (pid, start, is a caller): {left:?}"
    );
}
