//! The process's tokio runtime: the global `--runtime` and `--worker-threads` flags.

use clap::ValueEnum;

use super::Cli;

/// Which tokio runtime a process runs on (`--runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeFlavor {
    /// `tokio::runtime::Builder::new_multi_thread` with `--worker-threads` workers.
    MultiThread,
    /// `tokio::runtime::Builder::new_current_thread`: one thread runs every task and the I/O
    /// driver.
    CurrentThread,
}

impl RuntimeFlavor {
    /// The flag value (`multi-thread` or `current-thread`), as in the `--json` reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MultiThread => "multi-thread",
            Self::CurrentThread => "current-thread",
        }
    }
}

/// This process's runtime settings (the global `--runtime` and `--worker-threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// The runtime flavor.
    pub flavor: RuntimeFlavor,
    /// Worker threads of a multi-thread runtime (1 for current-thread).
    pub worker_threads: u16,
}

impl RuntimeSettings {
    /// The settings `cli` asks for.
    pub fn of(cli: &Cli) -> Self {
        Self {
            flavor: cli.runtime,
            worker_threads: match cli.runtime {
                RuntimeFlavor::MultiThread => cli.worker_threads,
                RuntimeFlavor::CurrentThread => 1,
            },
        }
    }

    /// Builds the runtime (I/O and time drivers enabled). Errors: the OS refused a thread or
    /// the I/O driver.
    pub fn build(self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self.flavor {
            RuntimeFlavor::MultiThread => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(usize::from(self.worker_threads));
                builder
            }
            RuntimeFlavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        };
        builder.enable_all().build()
    }
}
