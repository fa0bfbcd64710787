//! The getting-started tutorial (docs/tutorials/getting-started.md) as its reader follows it:
//! its Rust blocks are `examples/getting_started.rs`, and that program, run as three OS
//! processes on 127.0.0.1, prints what the tutorial says it prints.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::terminal::{example_binary, listen_address, repo_file, Terminal};

const TUTORIAL: &str = "docs/tutorials/getting-started.md";
const EXAMPLE: &str = "examples/getting_started.rs";

/// Bound for one node to print a line it is expected to print (debug build, 2 shared cores).
const LINE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for the caller's whole run: it waits up to 10 s for members, then makes 7 calls.
const CALLER_TIMEOUT: Duration = Duration::from_secs(60);

/// The non-blank lines of every block of `markdown` whose info string starts with `rust`, in
/// order.
fn rust_block_lines(markdown: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_rust = None::<bool>;
    for line in markdown.lines() {
        let fence = line.trim_start();
        match in_rust {
            None if fence.starts_with("```") => {
                in_rust = Some(fence.trim_start_matches('`').starts_with("rust"));
            }
            Some(_) if fence.starts_with("```") => in_rust = None,
            Some(true) if !line.trim().is_empty() => lines.push(line.trim_end().to_string()),
            _ => {}
        }
    }
    lines
}

#[test]
fn the_tutorial_blocks_are_the_example() {
    let tutorial = rust_block_lines(&repo_file(TUTORIAL));
    let example: Vec<String> = repo_file(EXAMPLE)
        .lines()
        .skip_while(|l| l.starts_with("//!"))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim_end().to_string())
        .collect();
    assert!(!tutorial.is_empty(), "{TUTORIAL} has no rust blocks");
    if let Some(i) =
        (0..tutorial.len().max(example.len())).find(|&i| tutorial.get(i) != example.get(i))
    {
        panic!(
            "{TUTORIAL}'s rust blocks, in order, must be {EXAMPLE} (after its //! header; blank \
             lines ignored). First difference at non-blank line {}:\n  tutorial: {:?}\n  \
             example:  {:?}",
            i + 1,
            tutorial.get(i),
            example.get(i)
        );
    }
}

/// The node in a `call N: "TEXT" from NODE (its shout #K)` line.
fn served_by(line: &str) -> &str {
    line.split_once(" from ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .map(|(node, _)| node)
        .unwrap_or_else(|| panic!("not a call line: {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tutorial_runs_as_written() {
    let binary = example_binary("getting_started");
    // The tutorial's ports are 4100-4102; port 0 (free ports) keeps the test off fixed ports.
    let mut a = Terminal::open(&binary, &["serve", "a", "0"]);
    let a_addr = listen_address(&a.wait_for(" listening on ", LINE_TIMEOUT).await);
    assert!(a_addr.starts_with("127.0.0.1:"), "{a_addr}");
    a.wait_for("serving; stop with Ctrl-C", LINE_TIMEOUT).await;
    let mut b = Terminal::open(&binary, &["serve", "b", "0", &a_addr]);
    b.wait_for("b@127.0.0.1 listening on 127.0.0.1:", LINE_TIMEOUT)
        .await;
    b.wait_for("serving; stop with Ctrl-C", LINE_TIMEOUT).await;

    let out = &Terminal::run(&binary, &["call", "c", "0", &a_addr], CALLER_TIMEOUT).await;
    assert!(
        out[0].starts_with("c@127.0.0.1 listening on 127.0.0.1:"),
        "{out:#?}"
    );
    assert_eq!(
        out[1], "members of shouters: a@127.0.0.1, b@127.0.0.1, c@127.0.0.1",
        "{out:#?}"
    );

    // Six calls, round robin over the three members: each serves two.
    let calls: Vec<&String> = out.iter().filter(|l| l.starts_with("call ")).collect();
    assert_eq!(calls.len(), 6, "{out:#?}");
    let nodes: Vec<&str> = calls.iter().map(|l| served_by(l)).collect();
    for (i, call) in calls.iter().enumerate() {
        let n = i + 1;
        assert!(
            call.starts_with(&format!("call {n}: \"HELLO {n}\" from ")),
            "{out:#?}"
        );
        let its = if i < 3 { 1 } else { 2 };
        assert!(call.ends_with(&format!("(its shout #{its})")), "{out:#?}");
        assert_eq!(nodes[i], nodes[i % 3], "round robin repeats: {out:#?}");
    }
    let mut first_three = nodes[..3].to_vec();
    first_three.sort();
    assert_eq!(
        first_three,
        ["a@127.0.0.1", "b@127.0.0.1", "c@127.0.0.1"],
        "{out:#?}"
    );
    // The calls c served itself printed their lines in its own terminal.
    let own = out
        .iter()
        .filter(|l| l.starts_with("serving shout #"))
        .count();
    assert_eq!(own, 2, "{out:#?}");
    assert!(
        out.contains(&"calls per node: a@127.0.0.1=2, b@127.0.0.1=2, c@127.0.0.1=2".to_string()),
        "{out:#?}"
    );

    // The typed error, from the next member in turn.
    let next = nodes[0];
    let whisper = format!(
        "whisper -> Error::BadRequest from {next}: unknown function `tutorial.whisper` on {next}"
    );
    assert!(out.contains(&whisper), "want {whisper:?} in {out:#?}");
    assert_eq!(out.last().unwrap(), "c@127.0.0.1 stopped", "{out:#?}");

    // a and b each served two calls, then stop on Ctrl-C.
    for (node, terminal) in [("a", &mut a), ("b", &mut b)] {
        terminal
            .wait_for("serving shout #2: \"hello ", LINE_TIMEOUT)
            .await;
        terminal.interrupt();
        let status = terminal.finish(LINE_TIMEOUT).await;
        assert!(status.success(), "{node} exited with {status}");
        assert_eq!(
            terminal.seen.last().unwrap(),
            &format!("{node}@127.0.0.1 stopped"),
            "{:#?}",
            terminal.seen
        );
    }
}

/// A peer that cannot be reached shows on stderr as the library's warning, through the
/// subscriber the program installs (without one, the caller only stops with `NoMembers`
/// after 10 s). That warning is the only one: the balancer the program drops on its error
/// had no call in flight (logged at DEBUG, not WARN). Stderr is a pipe here, so it carries
/// no ANSI colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_peer_shows_as_a_warning() {
    let binary = example_binary("getting_started");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let peer = format!("127.0.0.1:{port}");
    let mut caller = Command::new(&binary)
        .args(["call", "c", "0", &peer])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(caller.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    // It waits 10 s for members, then exits with `NoMembers`.
    let ended = tokio::time::timeout(CALLER_TIMEOUT, async {
        while let Ok(Some(line)) = stderr.next_line().await {
            seen.push(line);
        }
        caller.wait().await
    })
    .await;
    let status = match ended {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = caller.kill().await;
            panic!("the caller did not exit within {CALLER_TIMEOUT:?}: {seen:#?}");
        }
    };
    assert!(!status.success(), "{seen:#?}");
    assert!(
        seen.iter().all(|line| !line.contains('\u{1b}')),
        "ANSI codes on a stderr that is no terminal: {seen:#?}"
    );
    let Some(line) = seen
        .iter()
        .find(|line| line.contains("configured peer not reachable"))
    else {
        panic!("no warning about {peer} on stderr: {seen:#?}");
    };
    assert!(line.contains(" WARN "), "{line}");
    assert!(line.contains(&format!("addr={peer}")), "{line}");
    let warnings: Vec<&String> = seen.iter().filter(|line| line.contains(" WARN ")).collect();
    assert!(
        warnings
            .iter()
            .all(|line| line.contains("configured peer not reachable")),
        "only the unreachable peer is worth a warning: {seen:#?}"
    );
    assert!(
        seen.iter().any(|line| line.contains("NoMembers")),
        "{seen:#?}"
    );
}
