//! Running a program of `examples/` as a reader does, once per terminal: its binary (which
//! cargo builds with the tests), one OS process per run on 127.0.0.1, its printed lines read
//! with a bound. Shared by the tests of the examples (`tutorial`, `actor_pool`).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The text of `path`, relative to the repository's root.
pub fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {}: {e}", full.display()))
}

/// `target/<profile>/examples/<name>`, which cargo builds with the tests; fails if it is
/// missing or older than `examples/<name>.rs`.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = profile_dir.join("examples").join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.rs"));
    let built = std::fs::metadata(&binary).and_then(|m| m.modified());
    let edited = std::fs::metadata(&source).and_then(|m| m.modified());
    match (built, edited) {
        (Err(_), _) => panic!(
            "{} is missing: build the example first (`cargo build --example {name}`; a \
             whole-workspace `cargo nextest run` or `cargo test` builds it)",
            binary.display()
        ),
        (Ok(built), Ok(edited)) if edited > built => panic!(
            "{} is older than {}: rebuild it (`cargo build --example {name}`)",
            binary.display(),
            source.display()
        ),
        _ => binary,
    }
}

/// One run of an example, as in one of a reader's terminals. Killed when dropped.
pub struct Terminal {
    child: Child,
    /// Its standard input, open until [`Terminal::close_stdin`] (Ctrl-D).
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every line printed so far.
    pub seen: Vec<String>,
}

impl Terminal {
    /// Starts `binary` with `args`; its stderr goes to the test's.
    pub fn open(binary: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {} {args:?}: {e}", binary.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
            seen: Vec::new(),
        }
    }

    /// Runs `binary` with `args` to its end (≤ `bound`); every line it printed. Fails unless
    /// it exits 0.
    pub async fn run(binary: &Path, args: &[&str], bound: Duration) -> Vec<String> {
        let mut terminal = Self::open(binary, args);
        let status = terminal.finish(bound).await;
        let out = terminal.seen;
        assert!(status.success(), "{args:?} exited with {status}: {out:#?}");
        out
    }

    /// Reads lines until one contains `text` (≤ `bound`); that line.
    pub async fn wait_for(&mut self, text: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Ok(_) => panic!("exited before printing {text:?}; printed {:#?}", self.seen),
                Err(_) => panic!(
                    "no line with {text:?} within {} ms; printed {:#?}",
                    bound.as_millis(),
                    self.seen
                ),
            }
        }
    }

    /// Reads the rest of the output and waits for the exit (≤ `bound`).
    pub async fn finish(&mut self, bound: Duration) -> ExitStatus {
        let rest = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                self.seen.push(line);
            }
            self.child.wait().await
        };
        match tokio::time::timeout(bound, rest).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "did not exit within {} ms; printed {:#?}",
                bound.as_millis(),
                self.seen
            ),
        }
    }

    /// Ctrl-C.
    pub fn interrupt(&self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) has no memory effects; the pid is our own running child's.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGINT);
            }
        }
    }

    /// Ctrl-D: closes its standard input.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }
}

/// The address in a `... listening on ADDRESS` line.
pub fn listen_address(line: &str) -> String {
    line.rsplit_once(" listening on ")
        .map(|(_, addr)| addr.trim().to_string())
        .unwrap_or_else(|| panic!("not a listening line: {line:?}"))
}
