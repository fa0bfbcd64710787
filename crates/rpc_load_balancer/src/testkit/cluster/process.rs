//! One child process started by the harness: its stdout lines, its stderr, its signals and
//! its end.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::ClusterError;

/// How long [`ChildProcess::kill`] and dropping a child wait for it to be reaped after SIGKILL.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of a child's stderr an [`ClusterError::Exited`] carries.
const STDERR_TAIL_BYTES: usize = 4096;

/// Where a child's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StderrMode {
    /// To this process's stderr, as is (nothing kept: [`ChildProcess::stderr`] is empty).
    Inherit,
    /// Kept for [`ChildProcess::stderr`] and the [`ClusterError::Exited`] tail, not shown.
    Capture,
    /// Kept, and each line written to this process's stderr prefixed with `[label] ` (through
    /// `eprintln!`, so a test's output capture holds it until the test fails).
    Echo,
}

/// A child process started by the harness (Unix only).
///
/// What it guarantees:
/// - the child runs in its own process group (a Ctrl-C at the terminal reaches this process,
///   not the child);
/// - this process holds the write end of the child's stdin, so the child sees end of file
///   when this process dies, even by SIGKILL (a child that exits on it leaves no orphan);
/// - its stdout is read line by line without end (never a full pipe that blocks the child);
/// - dropping it SIGKILLs the child and reaps it (waits ≤ 5 s, blocking the thread: no
///   zombie);
/// - signals go to this child only, and never after it was reaped (so never to a reused pid).
#[derive(Debug)]
pub struct ChildProcess {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    /// The task reading a captured stderr, until its end.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    pid: u32,
}

impl ChildProcess {
    /// Starts `command` as a child labelled `label` (a node name, used in errors and echoed
    /// stderr), with stdin and stdout piped and stderr as `stderr` says. The program, its
    /// arguments, environment and working directory are the command's; its stdio settings
    /// are replaced. Must be called inside a Tokio runtime (tasks read its output).
    ///
    /// Errors: [`ClusterError::Spawn`].
    pub fn spawn(
        command: std::process::Command,
        label: impl Into<String>,
        stderr: StderrMode,
    ) -> Result<Self, ClusterError> {
        let label = label.into();
        let program = command.get_program().to_string_lossy().into_owned();
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match stderr {
                StderrMode::Inherit => Stdio::inherit(),
                StderrMode::Capture | StderrMode::Echo => Stdio::piped(),
            })
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|source| ClusterError::Spawn { program, source })?;
        let pid = child.id().unwrap_or_default();
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(async move {
                let mut reader = BufReader::new(stdout).lines();
                // Read to the end even when nobody listens, so the child never blocks on a
                // full pipe.
                while let Ok(Some(line)) = reader.next_line().await {
                    let _ = tx.send(line);
                }
            });
        }
        let kept = Arc::new(Mutex::new(String::new()));
        let stderr_reader = child.stderr.take().map(|pipe| {
            let kept = Arc::clone(&kept);
            let echo = (stderr == StderrMode::Echo).then(|| label.clone());
            tokio::spawn(async move {
                let mut reader = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if let Some(label) = &echo {
                        eprintln!("[{label}] {line}");
                    }
                    let mut text = kept.lock().unwrap_or_else(|p| p.into_inner());
                    text.push_str(&line);
                    text.push('\n');
                }
            })
        });
        Ok(Self {
            label,
            child,
            stdin,
            lines,
            stderr: kept,
            stderr_reader,
            pid,
        })
    }

    /// The label given at [`spawn`](Self::spawn).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The child's process id (also after it exited).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What the child wrote to stderr so far (empty with [`StderrMode::Inherit`]).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The next stdout line not yet consumed, without its line end; `None` once stdout is
    /// closed and every line consumed. Cancel-safe: use it under a timeout.
    pub async fn next_line(&mut self) -> Option<String> {
        self.lines.recv().await
    }

    /// Waits at most `timeout` for a stdout line that `parse` accepts (returns `Some` for),
    /// consuming the lines before it. `waiting_for` names it in errors, e.g. `its ready line`.
    ///
    /// Errors: [`ClusterError::Exited`] (stdout closed first: the exit status, awaited ≤ 5 s,
    /// and the stderr tail), [`ClusterError::Timeout`].
    pub async fn wait_line<T>(
        &mut self,
        waiting_for: &str,
        timeout: Duration,
        mut parse: impl FnMut(&str) -> Option<T>,
    ) -> Result<T, ClusterError> {
        let found = tokio::time::timeout(timeout, async {
            while let Some(line) = self.lines.recv().await {
                if let Some(found) = parse(&line) {
                    return Some(found);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(found)) => Ok(found),
            Ok(None) => {
                let status = self.wait_exit(REAP_TIMEOUT).await;
                // Its last stderr lines: read until the pipe's end (≤ 1 s, in case a process
                // it started still holds the pipe).
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
                }
                Err(ClusterError::Exited {
                    name: self.label.clone(),
                    waiting_for: waiting_for.to_string(),
                    status,
                    stderr_tail: self.stderr_tail(),
                })
            }
            Err(_) => Err(ClusterError::Timeout {
                name: self.label.clone(),
                waiting_for: waiting_for.to_string(),
                timeout,
            }),
        }
    }

    /// The last whole lines of the captured stderr, at most 4 KiB.
    fn stderr_tail(&self) -> String {
        let text = self.stderr();
        if text.len() <= STDERR_TAIL_BYTES {
            return text;
        }
        let start = text.len() - STDERR_TAIL_BYTES;
        let start = text[start..]
            .find('\n')
            .map_or(start, |at| start + at + 1)
            .min(text.len());
        // `find` returned a char boundary; `start` itself may not be one.
        text.get(start..).unwrap_or_default().to_string()
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to the child, unless it was already reaped.
    ///
    /// Errors: the `kill(2)` error; none for a child already reaped (nothing is sent).
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        // `id()` is `None` once the child was reaped: its pid may belong to another process.
        let Some(pid) = self.child.id() else {
            return Ok(());
        };
        // SAFETY: kill(2) touches no memory of ours; the pid is our own unreaped child's.
        let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
        if sent == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Sends SIGKILL without waiting (e.g. to stop many children at once, then reap each with
    /// [`kill`](Self::kill)).
    pub fn start_kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// SIGKILLs the child (no cleanup on its side) and reaps it, waiting at most 5 s. Returns
    /// its exit status, `None` if it was not reaped in time.
    pub async fn kill(&mut self) -> Option<ExitStatus> {
        let _ = self.child.start_kill();
        self.wait_exit(REAP_TIMEOUT).await
    }

    /// Sends SIGTERM and waits at most `timeout` for the child to exit; past it, SIGKILLs and
    /// reaps it.
    ///
    /// Errors: [`ClusterError::Timeout`] when it did not exit within `timeout` (it is killed);
    /// [`ClusterError::Io`] when the signal could not be sent.
    pub async fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus, ClusterError> {
        self.signal(libc::SIGTERM)
            .map_err(|source| ClusterError::Io {
                what: "sending SIGTERM",
                source,
            })?;
        match self.wait_exit(timeout).await {
            Some(status) => Ok(status),
            None => {
                self.kill().await;
                Err(ClusterError::Timeout {
                    name: self.label.clone(),
                    waiting_for: "its exit after SIGTERM".to_string(),
                    timeout,
                })
            }
        }
    }

    /// Stops the child (SIGSTOP): it runs no code, answers nothing and keeps its sockets open,
    /// as a hung process does, until [`resume`](Self::resume).
    ///
    /// Errors: the `kill(2)` error.
    pub fn pause(&self) -> std::io::Result<()> {
        self.signal(libc::SIGSTOP)
    }

    /// Continues a child stopped by [`pause`](Self::pause) (SIGCONT).
    ///
    /// Errors: the `kill(2)` error.
    pub fn resume(&self) -> std::io::Result<()> {
        self.signal(libc::SIGCONT)
    }

    /// Closes the child's stdin, as the kernel does when this process dies.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits at most `timeout` for the child to exit, and reaps it. Returns its status, `None`
    /// if it is still running at the deadline.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = self.child.start_kill();
        // Reap it here (SIGKILL ends even a stopped process at once): no zombie outlives
        // the handle.
        let deadline = std::time::Instant::now() + REAP_TIMEOUT;
        let mut pause = Duration::from_micros(200);
        while std::time::Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Ok(Some(_)) | Err(_) => return,
            }
        }
    }
}
