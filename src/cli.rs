//! Command-line definitions of `rpclb` (clap). Flags and `--json` fields are a public
//! interface: add, never rename or remove.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use rpc_load_balancer::algorithm::{LeastCpuOptions, BUILT_IN};
use rpc_load_balancer::cpu::CpuSampler;
use rpc_load_balancer::{Algorithm, Error, LeastCpu, NodeConfig, NodeFilter, TlsConfig};

/// Names `--algorithm` accepts where `all` is allowed too.
fn algorithms_or_all() -> Vec<&'static str> {
    BUILT_IN.iter().copied().chain(["all"]).collect()
}

/// Parses a `--node-match-regex` value (the regex must compile).
fn node_filter_regex(pattern: &str) -> Result<NodeFilter, String> {
    NodeFilter::regex(pattern).map_err(|e| e.to_string())
}

/// `rpclb`: run rpc_load_balancer cluster nodes and talk to them.
#[derive(Debug, Parser)]
#[command(name = "rpclb", version, about)]
pub struct Cli {
    /// Tokio worker threads of a `--runtime multi-thread` process (default 1: nodes sharing
    /// few cores answer faster on one worker).
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Tokio runtime flavor of this process: `current-thread` (the default: every task and the
    /// I/O driver on one thread; `--worker-threads` is ignored) or `multi-thread`
    /// (`--worker-threads` workers). Both keep a blocking pool for CPU-heavy work.
    /// bench/README.md compares them: on 2 shared cores current-thread served 8–22 % more calls
    /// per second at the same sequential latency, and 2 workers were slower than 1.
    #[arg(long, global = true, value_enum, default_value_t = RuntimeFlavor::CurrentThread)]
    pub runtime: RuntimeFlavor,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

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

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a cluster node serving the demo functions until SIGTERM, SIGINT or SIGHUP.
    ///
    /// Prints one JSON object per line on stdout:
    /// `{"event":"ready","node":..,"listen":..,"pid":..,"balancers":[..],"peers":[..]}`
    /// once serving (`peers`: those already connected when it started watching), then
    /// `{"event":"node_up"|"node_down"|"node_leaving","node":..}` (one `node_up` per peer that
    /// comes up, those in `peers` included), `{"event":"node_refused","node":..,"reason":..}`,
    /// `{"event":"events_lagged","missed":N,"peers":[..]}` if it fell behind the node's events,
    /// and finally `{"event":"stopped","node":..}`. Logs go to stderr (RUST_LOG).
    Node(NodeArgs),
    /// Start a cluster of `rpclb node` children on 127.0.0.1, route calls through a balancer
    /// with each algorithm, print a table per algorithm, stop the children.
    Demo(DemoArgs),
    /// Join a cluster as a client node, make one call (to a node or through a balancer), print
    /// the reply.
    Call(CallArgs),
    /// Join a cluster as a client node and stream calls through a balancer; print calls per
    /// node, errors by kind and latency percentiles.
    Load(LoadArgs),
    /// Measure end-to-end call latency and throughput against the raw ractor_cluster floor:
    /// start 3 `rpclb node` children on 127.0.0.1, join as a 4th node, and run the cases raw,
    /// direct, balanced and local interleaved in rounds for each payload size.
    Bench(BenchArgs),
    /// Join a cluster as a client node and send one control request (ping, nodes, functions,
    /// stats, cpu_reading, cpu_readings, crash_poller, stop_balancer) to a node.
    Control(ControlArgs),
    /// One caller process of `rpclb demo --scenario` (internal: the demo starts it).
    #[command(hide = true)]
    DemoCaller(DemoCallerArgs),
    /// The balancing lab: run scenarios (a cluster, its traffic and faults) in a deterministic
    /// simulation that drives each algorithm's real selector in virtual time, and print per
    /// scenario, load and algorithm the latency percentiles, error rate, goodput, members'
    /// shares and how long a faulty member kept being picked (medians over the seeds).
    Lab(LabArgs),
}

/// The cookie of every `rpclb` command not given `--cookie` or `$RPCLB_COOKIE`: for
/// development only, since anyone can read it here. `rpclb node` warns at start when it runs
/// with it.
pub const DEV_COOKIE: &str = "rpclb-dev-cookie";

/// Options shared by every command that joins a cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The cluster's shared secret.
    #[arg(long, env = "RPCLB_COOKIE", default_value = DEV_COOKIE)]
    pub cookie: String,
    /// TLS: this node's certificate chain, a PEM file (its certificate first, then any
    /// intermediates). With --tls-key and --tls-ca (all three or none), every session is
    /// mutual TLS 1.3: the node presents this certificate and accepts only peers whose
    /// certificate the CA signed, so plaintext nodes and nodes of another CA cannot connect;
    /// the cookie still applies. A dialled peer's certificate must name the host dialled (IP
    /// address or DNS SAN), unless --tls-server-name is given.
    #[arg(
        long,
        env = "RPCLB_TLS_CERT",
        value_name = "PEM_FILE",
        requires_all = ["tls_key", "tls_ca"]
    )]
    pub tls_cert: Option<PathBuf>,
    /// TLS: this node's private key, a PEM file (PKCS#8, PKCS#1 or SEC1), matching --tls-cert.
    #[arg(
        long,
        env = "RPCLB_TLS_KEY",
        value_name = "PEM_FILE",
        requires_all = ["tls_cert", "tls_ca"]
    )]
    pub tls_key: Option<PathBuf>,
    /// TLS: the CA certificate(s) every peer's certificate must be signed by, a PEM file.
    #[arg(
        long,
        env = "RPCLB_TLS_CA",
        value_name = "PEM_FILE",
        requires_all = ["tls_cert", "tls_key"]
    )]
    pub tls_ca: Option<PathBuf>,
    /// TLS: the name every dialled peer's certificate must carry (DNS name or IP address),
    /// instead of the host part of the address dialled. Needs --tls-cert.
    #[arg(
        long,
        env = "RPCLB_TLS_SERVER_NAME",
        value_name = "NAME",
        requires = "tls_cert"
    )]
    pub tls_server_name: Option<String>,
}

impl ClusterArgs {
    /// The TLS settings of `--tls-cert`, `--tls-key` and `--tls-ca` (and
    /// `--tls-server-name`); `None` without them (plain TCP).
    pub fn tls(&self) -> Option<TlsConfig> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca)
        else {
            return None;
        };
        let tls = TlsConfig::from_pem_files(cert, key, ca);
        Some(match &self.tls_server_name {
            Some(name) => tls.server_name(name),
            None => tls,
        })
    }

    /// Logs a warning when the cookie is [`DEV_COOKIE`] (call once, at start).
    pub fn warn_if_dev_cookie(&self) {
        if self.cookie == DEV_COOKIE {
            tracing::warn!(
                cookie = DEV_COOKIE,
                "this node uses the default development cookie: any process that knows it can \
                 join the cluster and call every function; set --cookie or RPCLB_COOKIE to the \
                 cluster's own secret"
            );
        }
    }

    /// `config` with this cookie and, if given, TLS.
    pub fn apply(&self, config: NodeConfig) -> NodeConfig {
        let config = config.cookie(&self.cookie);
        match self.tls() {
            Some(tls) => config.tls(tls),
            None => config,
        }
    }
}

/// `rpclb node`.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Node name without host (the full name is NAME@ADVERTISE_HOST).
    #[arg(long)]
    pub name: String,
    /// Address to listen on, ip:port (port 0 = any free port, reported in the ready line).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Host other nodes dial to reach this one (default: the listen IP).
    #[arg(long)]
    pub advertise: Option<String>,
    /// A peer to dial (host:port); repeat for several. Re-dialled with backoff while down.
    #[arg(long = "peer")]
    pub peers: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Added to every demo function call, in ms (test flag).
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Cap on one encoded call or reply, in bytes.
    #[arg(long, default_value_t = rpc_load_balancer::DEFAULT_MAX_PAYLOAD_BYTES)]
    pub max_payload_bytes: usize,
    /// Start a balancer of this name on the node (repeat for several), after registering the
    /// demo functions.
    #[arg(long = "balancer")]
    pub balancers: Vec<String>,
    /// The algorithm of the balancers started with --balancer.
    #[arg(long, default_value = "random", value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    /// node_match_list of the balancers started with --balancer: this node is their member only
    /// if its full name (NAME@HOST) contains SUBSTRING (repeat for several; with
    /// --node-match-regex, any one matching is enough). Without either flag the node is a
    /// member. Subject to --exclude-pattern.
    #[arg(long = "node-match", value_name = "SUBSTRING")]
    pub node_match: Vec<String>,
    /// Like --node-match with a regex found anywhere in the full name, e.g. `^feed@` for the
    /// node named exactly `feed` (repeat for several).
    #[arg(long = "node-match-regex", value_name = "REGEX", value_parser = node_filter_regex)]
    pub node_match_regex: Vec<NodeFilter>,
    /// A name part that keeps this node out of balancers whose node_match_list does not name
    /// it (repeat for several): with `_qa`, node `feed_qa` is not a member of balancers matched
    /// on `feed`, but is of those matched on `feed_qa`. Balancers without a node_match_list
    /// take every node.
    #[arg(long = "exclude-pattern", value_name = "PATTERN")]
    pub exclude_patterns: Vec<String>,
    /// Refuse remote admin requests (start/stop balancers, kill a LoadBalancer, crash a
    /// Poller); by default this node accepts them from any node holding the cookie.
    #[arg(long)]
    pub no_remote_admin: bool,
    /// How often this node pings each connected peer, in ms: from 50 to a third of
    /// --heartbeat-timeout-ms (refused at start otherwise).
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 1_000
    )]
    pub heartbeat_interval_ms: u64,
    /// A peer that leaves a ping unanswered this long (ms) has its session closed: its
    /// members leave the balancers here and calls in flight to it fail. From 300 to 3600000
    /// (1 hour; refused at start otherwise): shorter, ordinary delays would drop healthy peers.
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 3_000
    )]
    pub heartbeat_timeout_ms: u64,
    /// Longest pause between two dials of a peer that is down, in ms (the backoff starts at
    /// 100 ms and doubles, jittered ±20 %): from 100 to 3600000 (1 hour; refused at start
    /// otherwise).
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 2_000
    )]
    pub dial_backoff_max_ms: u64,
    /// How long to keep redialling a peer found through the mesh (not a --peer) after its
    /// session was lost without it saying it was leaving (killed, cut off, hung), in ms; 0
    /// turns this off. --peer addresses are redialled for as long as the node runs.
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 60_000
    )]
    pub reconnect_give_up_ms: u64,
    /// Test hook: speak this wire version instead of the library's (compatibility tests).
    #[arg(long, value_name = "N", hide = true)]
    pub wire_version: Option<u16>,
    /// Test flag: append a field no release knows to every call header, reply status and
    /// control request this node sends, as a node of a newer release would (compatibility
    /// tests).
    #[arg(long)]
    pub wire_extra_field: bool,
    /// Test flag: start the `--balancer`s under a parent actor whose `post_stop` is empty
    /// (as an app's supervisor that does not stop its balancers), which the test hook
    /// `ControlRequest::EndBalancerParent` stops or kills, instead of standalone.
    #[arg(long)]
    pub balancer_parent: bool,
    /// After leaving a balancer at stop or SIGTERM, how long this node still serves calls
    /// selected before others saw it leave, in ms (later ones go to other members).
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 500
    )]
    pub leave_grace_ms: u64,
    /// Longest wait at stop or SIGTERM for the calls this node routes and serves to finish,
    /// in ms (grace included); then it stops anyway.
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 15_000
    )]
    pub drain_timeout_ms: u64,
    /// How this node measures the CPU load it reports to LeastCpu balancers: `system` (the
    /// whole machine), `process` (this process, over the cores it may use), `runtime` (busy
    /// share of its tokio workers), or the test samplers `const:N` (always N %), `panic` (every
    /// sample fails) and `const-then-panic:N:AFTER_MS` (N %, then failing from AFTER_MS after
    /// start; test flags of the `test-hooks` feature, on by default); N is 0–100 (else the node
    /// does not start).
    #[arg(long, value_name = "SPEC", default_value = "system")]
    pub cpu_sampler: CpuSampler,
    /// How often the node samples its CPU, in ms (0 is refused at start).
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        default_value_t = 1_000
    )]
    pub cpu_sample_interval_ms: u64,
    /// `garbage` answers CPU-reading requests with bytes that don't decode (test flag: the
    /// asking node gets a codec error, a LeastCpu Poller a `bad_reply`); `error` answers them
    /// with an error (the asker gets a remote error, a Poller a `remote_error`). Needs the
    /// `test-hooks` feature (on by default).
    #[arg(long, value_name = "MODE", default_value = "normal", value_parser = PossibleValuesParser::new(["normal", "garbage", "error"]))]
    pub cpu_reply: String,
    /// Threads that spin (busy loop) for the node's whole life, to load its CPU (test and
    /// demo flag; 0 = none).
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    pub burn_threads: u32,
    #[command(flatten)]
    pub least_cpu: LeastCpuArgs,
    /// Exit when stdin reaches end of file (a test harness holds the pipe; when the harness
    /// dies the node exits too).
    #[arg(long)]
    pub exit_with_stdin: bool,
    #[command(flatten)]
    pub work: Box<WorkArgs>,
}

/// How the node's `work` demo function serves (`rpclb demo --scenario` runs its nodes with
/// these): at most `--work-capacity` calls at once, lognormal service times, and the faults
/// of the lab's scenarios. Out-of-range values are refused at start, naming the setting.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {
    /// work: calls in service at once (1–10000); more wait in a FIFO queue.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub work_capacity: u32,
    /// work: the median service time, ms (> 0; sleep-based: tokio's timer has 1 ms
    /// resolution, so keep it ≥ 5).
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub work_median_ms: f64,
    /// work: the lognormal shape σ of the service time (0–3).
    #[arg(long, value_name = "SIGMA", default_value_t = 0.5)]
    pub work_sigma: f64,
    /// work: the seed of the service-time RNG.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub work_seed: u64,
    /// work: service times are this many times longer (1–1000), from start (lab fault
    /// `slow`).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub work_slow_factor: f64,
    /// work: --work-slow-factor lasts only this long after start, in ms (lab `join` with a
    /// factor); absent: for ever.
    #[arg(long, value_name = "MS")]
    pub work_slow_for_ms: Option<u64>,
    /// work: this fraction of calls (0–1) fails at once, unserved (lab fault `fail`).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub work_fail_fraction: f64,
    /// The node's CPU reading (for LeastCpu) is the work function's utilization — mean calls
    /// in service ÷ --work-capacity since the previous sample, in % — instead of
    /// --cpu-sampler's (sleeping burns no CPU).
    #[arg(long)]
    pub cpu_from_work: bool,
}

impl WorkArgs {
    /// The `work` settings these flags give.
    pub fn settings(&self) -> crate::work::WorkSettings {
        crate::work::WorkSettings {
            capacity: self.work_capacity,
            median_ms: self.work_median_ms,
            sigma: self.work_sigma,
            seed: self.work_seed,
            slow_factor: self.work_slow_factor,
            slow_for: self.work_slow_for_ms.map(Duration::from_millis),
            fail_fraction: self.work_fail_fraction,
        }
    }
}

impl NodeArgs {
    /// The node_match_list of the balancers started with --balancer (`--node-match` then
    /// `--node-match-regex`); `None` when neither is given (every node is a member).
    pub fn node_match_list(&self) -> Option<Vec<NodeFilter>> {
        if self.node_match.is_empty() && self.node_match_regex.is_empty() {
            return None;
        }
        let substrings = self.node_match.iter().map(NodeFilter::from);
        Some(
            substrings
                .chain(self.node_match_regex.iter().cloned())
                .collect(),
        )
    }
}

/// `rpclb call`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["node", "balancer"])))]
pub struct CallArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Full name of the node to call (e.g. a@127.0.0.1).
    #[arg(long)]
    pub node: Option<String>,
    /// Call through this balancer instead (this client is not a member).
    #[arg(long)]
    pub balancer: Option<String>,
    /// Call timeout in ms (≥ 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Print one JSON object instead of text: `{"ok":true,"node":..,"balancer":..,"reply":..,
    /// "latency_us":..}`, or on any failure (joining the cluster, a usage error, the call)
    /// `{"ok":false,"node":..,"balancer":..,"error":{"kind","code","message","node"},
    /// "latency_us":..}` (`latency_us` null when no call was made; kind `usage` for a usage
    /// error, exit status 2).
    #[arg(long)]
    pub json: bool,
    /// Demo function: echo, sleep, burn, whoami, fail, panic, blob, call_whoami or bytes_echo.
    pub function: String,
    /// The function's argument (text for echo/fail/panic, ms for sleep/burn, bytes for blob,
    /// a full node name for call_whoami; a JSON list of byte values for bytes_echo).
    pub arg: Option<String>,
}

/// `rpclb control`.
#[derive(Debug, Clone, Args)]
pub struct ControlArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Full name of the node to ask.
    #[arg(long)]
    pub node: String,
    /// Print one JSON object instead of text: `{"ok":true,"node":..,"reply":{..}}` or, on any
    /// failure (joining the cluster, a usage error — kind `usage`, exit status 2 — or the
    /// request), `{"ok":false,"node":..,"error":{"kind","code","message","node"}}`. `reply` is
    /// ping `{"node","wire_version"}`, nodes `{"nodes":[..]}`, functions `{"functions":[..]}`,
    /// stats `{"served_in_flight","served_total"}`, cpu_reading `{"cpu","age_ms"}` (% and ms;
    /// both null without a reading), cpu_readings `{"readings":[{"node","cpu","age_ms"}],
    /// "selection":[{"balancer","members":[{"node","cpu"}]}]}` (`selection`: per LeastCpu
    /// balancer on the node, the value it routes each member by — 50 when missing or older
    /// than its cpu_cache_ttl; null from a node too old to say), crash_poller `{"done":true}`,
    /// stop_balancer `{"balancer","outcome","routed_in_flight","served_in_flight","took_ms"}`
    /// (`outcome`: drained, timed_out — calls still running at the drain timeout were cut —
    /// or killed; from a node too old to report, `{"done":true}`).
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the answer, in ms (≥ 1). Default: 60,000 for stop_balancer (it
    /// answers when the drain has ended, up to the node's --drain-timeout-ms, 15,000 by
    /// default), 10,000 for every other request.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: Option<u64>,
    /// ping, nodes, functions, stats, cpu_reading (the node's own CPU reading and its age),
    /// cpu_readings (every CPU reading the node holds, and what its LeastCpu balancers route
    /// each member by), crash_poller BALANCER (make that LeastCpu balancer's Poller fail;
    /// needs remote admin on the node) or stop_balancer BALANCER (drain and stop the node's
    /// member of that balancer and report how it went; needs remote admin on the node).
    pub request: String,
    /// The request's argument: the balancer name of crash_poller and stop_balancer.
    pub arg: Option<String>,
}

/// Options of a load run, shared by `rpclb load`, `rpclb demo` and `rpclb bench`.
#[derive(Debug, Clone, Args)]
pub struct LoadShape {
    /// Concurrent callers.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: u32,
    /// Timeout of each call, in ms (≥ 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Print one JSON object on stdout instead of tables (`rpclb load`: also when it fails
    /// before any call, with no calls counted and the `error` object).
    #[arg(long)]
    pub json: bool,
}

/// `rpclb demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Number of `rpclb node` children.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub nodes: u32,
    /// Calls per algorithm (≥ 1).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub calls: u64,
    /// An algorithm's name, or `all`.
    #[arg(long, default_value = "all", value_parser = PossibleValuesParser::new(algorithms_or_all()))]
    pub algorithm: String,
    /// Record the library's metrics and print them (Prometheus text) at the end; with
    /// --json they are the `metrics` field.
    #[arg(long)]
    pub metrics: bool,
    /// Node N (1 = the first node, n0) runs `--burn-threads <cores>` to load its CPU. LeastCpu
    /// (`--algorithm least_cpu`, or `all`) then sends it few calls; other algorithms ignore
    /// CPU load and keep sending it its share. With --json the burning node is the `burning`
    /// field.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub burn: Option<u32>,
    /// How the burning node samples its CPU instead of `process` (`rpclb node
    /// --cpu-sampler`), e.g. `const:100` to pin its reading: a test flag that makes
    /// LeastCpu's choice independent of how busy the machine is. Needs --burn.
    #[arg(long, value_name = "SPEC", requires = "burn")]
    pub burn_sampler: Option<CpuSampler>,
    /// Run the real-process twin of a lab scenario instead: `slow-member`, `paused-member`,
    /// `failing-member` or `new-member`. Its members are `rpclb node`s serving the
    /// capacity-limited `work` function (--service-ms, --capacity; their utilization is their
    /// CPU reading), --callers caller processes call it open loop at --load of the cluster's
    /// capacity, the scenario's fault is played on the processes, and the lab's table is
    /// printed (`rpclb lab`'s columns). --nodes, --calls, --concurrency, --timeout-ms, --burn
    /// and --metrics do not apply (the call timeout is the lab's, 1 s).
    #[arg(long, value_name = "NAME", value_parser = PossibleValuesParser::new(crate::twin::plan::TWIN_SCENARIOS))]
    pub scenario: Option<String>,
    /// --scenario: the algorithms to run, comma-separated (default: --algorithm's).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = PossibleValuesParser::new(BUILT_IN), requires = "scenario")]
    pub algorithms: Vec<String>,
    /// --scenario: measured seconds per algorithm (after --warmup-s); the fault's timeline
    /// is the lab's scaled to it.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, requires = "scenario", value_parser = crate::twin::plan::parse_duration_s)]
    pub duration_s: f64,
    /// --scenario: unmeasured seconds per algorithm before the measured ones.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, requires = "scenario", value_parser = crate::twin::plan::parse_warmup_s)]
    pub warmup_s: f64,
    /// --scenario: the members' median service time, ms (lognormal, σ 0.5; sleep-based, so
    /// ≥ 5 keeps tokio's 1 ms timer resolution small against it).
    #[arg(long, value_name = "MS", default_value_t = 10.0, requires = "scenario")]
    pub service_ms: f64,
    /// --scenario: calls a member serves at once (more wait).
    #[arg(long, value_name = "N", default_value_t = 8, requires = "scenario", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub capacity: u32,
    /// --scenario: caller processes (each with its own balancer, as the lab's callers).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16), requires = "scenario")]
    pub callers: u32,
    /// --scenario: the open-loop load, a fraction of the uniform cluster's capacity
    /// (members × capacity ÷ mean service time), split evenly over the callers.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.5,
        requires = "scenario"
    )]
    pub load: f64,
    /// --scenario: run everything --runs times and the lab on the same plan (seeds 1–10),
    /// and print for each algorithm p99 ÷ Random's p99 on both sides (`agreement` in
    /// --json). Needs random among the algorithms.
    #[arg(long, requires = "scenario")]
    pub compare: bool,
    /// --compare: how many real runs (the twin's figures are their medians).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20), requires = "compare")]
    pub runs: u32,
    #[command(flatten)]
    pub shape: LoadShape,
}

/// `rpclb load`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("amount").required(true).args(["calls", "duration"])))]
pub struct LoadArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The balancer to call through (this client is not a member).
    #[arg(long)]
    pub balancer: String,
    /// Selection algorithm on this client.
    #[arg(long, default_value = "random", value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    #[command(flatten)]
    pub least_cpu: LeastCpuArgs,
    /// Demo function: whoami, echo, sleep or burn.
    #[arg(long, default_value = "whoami", value_parser = PossibleValuesParser::new(["whoami", "echo", "sleep", "burn"]))]
    pub function: String,
    /// The function's argument (text for echo, ms for sleep and burn).
    #[arg(long)]
    pub arg: Option<String>,
    /// Number of calls (≥ 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub calls: Option<u64>,
    /// Run for this many seconds instead (> 0, at most 86,400).
    #[arg(long)]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub shape: LoadShape,
}

/// Parses a payload size: bytes, or a number with a `KiB` or `MiB` suffix (`1KiB` = 1024);
/// 1 B to 4 MiB.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let multiplier = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        other => return Err(format!("unknown unit {other:?} (B, KiB or MiB)")),
    };
    let number: usize = digits
        .parse()
        .map_err(|e| format!("{text:?} is not a size: {e}"))?;
    match number.checked_mul(multiplier) {
        Some(size) if (1..=MAX_BENCH_PAYLOAD).contains(&size) => Ok(size),
        _ => Err(format!("{text:?} is outside 1 B..=4 MiB")),
    }
}

/// The largest `rpclb bench` payload: well under the nodes' default payload cap (8 MiB).
pub const MAX_BENCH_PAYLOAD: usize = 4 * 1024 * 1024;

/// Parses a number of seconds ≥ 0 (finite).
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        Ok(_) => Err(format!("{text:?} is outside 0..=86400 seconds")),
        Err(e) => Err(format!("{text:?} is not a number of seconds: {e}")),
    }
}

/// Parses a number of seconds > 0 (finite).
fn positive_seconds(text: &str) -> Result<f64, String> {
    let secs = seconds(text)?;
    if secs > 0.0 {
        Ok(secs)
    } else {
        Err("must be more than 0 seconds".to_string())
    }
}

/// `rpclb bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Payload sizes, comma-separated: bytes, or with a `KiB`/`MiB` suffix (1 B..=4 MiB).
    #[arg(long, value_delimiter = ',', default_value = "100,1KiB,64KiB", value_parser = parse_size)]
    pub sizes: Vec<usize>,
    /// Timed sequential calls per case and payload size, split evenly over the rounds (each
    /// round's batch is rounded up, so at least this many are timed).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub calls: u64,
    /// Untimed sequential calls per case and payload size before its first round (the
    /// throughput phase has --warmup-secs).
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub warmup: u64,
    /// Rounds per payload size and phase; a round runs every case once, the order rotated by
    /// one each round (raw, direct, balanced, local; then direct, balanced, local, raw; ...).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub rounds: u32,
    /// Measured seconds of the throughput phase per case and payload size, split evenly over
    /// the rounds (> 0).
    #[arg(long, default_value_t = 5.0, value_parser = positive_seconds)]
    pub secs: f64,
    /// Unmeasured seconds of throughput per case and payload size before its first round.
    #[arg(long, default_value_t = 0.5, value_parser = seconds)]
    pub warmup_secs: f64,
    /// Tokio worker threads of each `rpclb node` child (their `--worker-threads`; this
    /// process's own are the global `--worker-threads`).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub node_worker_threads: u16,
    /// Tokio runtime flavor of each `rpclb node` child (their `--runtime`; default: this
    /// process's `--runtime`).
    #[arg(long, value_name = "FLAVOR", value_enum)]
    pub node_runtime: Option<RuntimeFlavor>,
    /// One more argument for every `rpclb node` child, passed as is (repeat for several), e.g.
    /// `--node-arg=--cpu-sample-interval-ms=5000`.
    #[arg(long = "node-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub node_args: Vec<String>,
    #[command(flatten)]
    pub shape: LoadShape,
}

/// LeastCpu's options for a balancer started with `--algorithm least_cpu` (other algorithms
/// ignore them). Defaults are the library's ([`LeastCpuOptions::default`]).
#[derive(Debug, Clone, Args)]
pub struct LeastCpuArgs {
    /// least_cpu: period of the Poller's polls of the members' CPU readings, in ms (> 0).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().poll_interval.as_millis() as u64)]
    pub poll_interval_ms: u64,
    /// least_cpu: the first poll waits a uniform random delay in [0, this] ms (0 = at once).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().poll_startup_jitter.as_millis() as u64)]
    pub poll_startup_jitter_ms: u64,
    /// least_cpu: oldest reading that counts, in ms (older or missing = 50 %). Must exceed
    /// the CPU sample interval of the node running the balancer (`rpclb load` samples every
    /// half of it, at most 1 s); keep it above the members' --cpu-sample-interval-ms too, or
    /// their readings age out between samples.
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().cpu_cache_ttl.as_millis() as u64)]
    pub cpu_cache_ttl_ms: u64,
    /// least_cpu: calls go uniformly at random to the members within this many percentage
    /// points of the least loaded one (≥ 0).
    #[arg(long, value_name = "POINTS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().cpu_threshold)]
    pub cpu_threshold: f64,
}

impl LeastCpuArgs {
    /// A LeastCpu with these options.
    pub fn least_cpu(&self) -> LeastCpu {
        LeastCpu::new()
            .poll_interval(Duration::from_millis(self.poll_interval_ms))
            .poll_startup_jitter(Duration::from_millis(self.poll_startup_jitter_ms))
            .cpu_cache_ttl(Duration::from_millis(self.cpu_cache_ttl_ms))
            .cpu_threshold(self.cpu_threshold)
    }

    /// The built-in algorithm called `name`: LeastCpu with these options, the others with
    /// their defaults.
    ///
    /// Errors: [`Error::InvalidConfig`] (`algorithm`) for an unknown name. (Bad LeastCpu
    /// options are refused when the balancer starts.)
    pub fn algorithm(&self, name: &str) -> Result<Arc<dyn Algorithm>, Error> {
        if name == "least_cpu" {
            return Ok(Arc::new(self.least_cpu()));
        }
        rpc_load_balancer::algorithm::by_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_args(extra: &[&str]) -> Result<NodeArgs, clap::Error> {
        let args = ["rpclb", "node", "--name", "a"].iter().chain(extra);
        match Cli::try_parse_from(args)?.command {
            Command::Node(args) => Ok(args),
            other => panic!("not a node command: {other:?}"),
        }
    }

    #[test]
    fn node_cpu_flags_have_their_defaults() {
        let args = node_args(&[]).unwrap();
        assert!(matches!(args.cpu_sampler, CpuSampler::System));
        assert_eq!(args.cpu_sample_interval_ms, 1_000);
        assert_eq!(args.cpu_reply, "normal");
        assert_eq!(args.burn_threads, 0);
        let defaults = LeastCpuOptions::default();
        assert_eq!(args.least_cpu.least_cpu().options(), &defaults);
    }

    #[test]
    #[cfg(feature = "test-hooks")]
    fn node_cpu_flags_parse() {
        let args = node_args(&[
            "--cpu-sampler",
            "const-then-panic:20:1500",
            "--cpu-sample-interval-ms",
            "200",
            "--cpu-reply",
            "garbage",
            "--burn-threads",
            "2",
            "--poll-interval-ms",
            "300",
            "--poll-startup-jitter-ms",
            "0",
            "--cpu-cache-ttl-ms",
            "900",
            "--cpu-threshold",
            "2.5",
        ])
        .unwrap();
        assert_eq!(args.cpu_sampler.to_string(), "const-then-panic:20:1500");
        assert_eq!(args.cpu_sample_interval_ms, 200);
        assert_eq!(args.cpu_reply, "garbage");
        assert_eq!(args.burn_threads, 2);
        let options = *args.least_cpu.least_cpu().options();
        assert_eq!(options.poll_interval, Duration::from_millis(300));
        assert_eq!(options.poll_startup_jitter, Duration::ZERO);
        assert_eq!(options.cpu_cache_ttl, Duration::from_millis(900));
        assert_eq!(options.cpu_threshold, 2.5);
        assert_eq!(
            args.least_cpu.algorithm("least_cpu").unwrap().name(),
            "least_cpu"
        );
        assert_eq!(args.least_cpu.algorithm("random").unwrap().name(), "random");
    }

    #[test]
    fn node_work_flags_have_their_defaults_and_parse() {
        let defaults = node_args(&[]).unwrap().work;
        assert_eq!(defaults.settings(), crate::work::WorkSettings::default());
        assert!(!defaults.cpu_from_work);
        let args = node_args(&[
            "--work-capacity",
            "2",
            "--work-median-ms",
            "5",
            "--work-sigma",
            "0",
            "--work-seed",
            "9",
            "--work-slow-factor",
            "5",
            "--work-slow-for-ms",
            "3000",
            "--work-fail-fraction",
            "0.5",
            "--cpu-from-work",
        ])
        .unwrap();
        let settings = args.work.settings();
        assert_eq!(
            (settings.capacity, settings.median_ms, settings.sigma),
            (2, 5.0, 0.0)
        );
        assert_eq!((settings.seed, settings.slow_factor), (9, 5.0));
        assert_eq!(settings.slow_for, Some(Duration::from_secs(3)));
        assert_eq!(settings.fail_fraction, 0.5);
        assert!(args.work.cpu_from_work);
    }

    #[test]
    fn demo_scenario_flags_parse_and_need_a_scenario() {
        let demo = |extra: &[&str]| match Cli::try_parse_from(["rpclb", "demo"].iter().chain(extra))
            .map(|cli| cli.command)
        {
            Ok(Command::Demo(args)) => Ok(args),
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error),
        };
        let args = demo(&[]).unwrap();
        assert_eq!(args.scenario, None);
        assert_eq!(
            (args.duration_s, args.warmup_s, args.service_ms),
            (10.0, 2.0, 10.0)
        );
        assert_eq!(
            (args.capacity, args.callers, args.load, args.runs),
            (8, 2, 0.5, 3)
        );
        let args = demo(&[
            "--scenario",
            "paused-member",
            "--algorithms",
            "random,least_connections",
            "--compare",
            "--runs",
            "1",
        ])
        .unwrap();
        assert_eq!(args.scenario.as_deref(), Some("paused-member"));
        assert_eq!(args.algorithms, ["random", "least_connections"]);
        assert!(args.compare);
        assert!(demo(&["--scenario", "uniform"]).is_err(), "no twin");
        assert!(demo(&["--duration-s", "3"]).is_err(), "needs --scenario");
        assert!(demo(&["--scenario", "slow-member", "--algorithms", "nope"]).is_err());
        assert!(demo(&["--scenario", "slow-member", "--callers", "0"]).is_err());
    }

    #[test]
    fn node_match_flags() {
        let args = node_args(&[]).unwrap();
        assert_eq!(args.node_match_list(), None);
        assert!(args.exclude_patterns.is_empty());
        let args = node_args(&[
            "--node-match",
            "feed",
            "--node-match-regex",
            "^options_feed@",
            "--node-match",
            "web",
            "--exclude-pattern",
            "_qa",
            "--exclude-pattern",
            "_canary",
        ])
        .unwrap();
        assert_eq!(
            args.node_match_list().unwrap(),
            vec![
                NodeFilter::from("feed"),
                NodeFilter::from("web"),
                NodeFilter::regex("^options_feed@").unwrap(),
            ]
        );
        assert_eq!(args.exclude_patterns, ["_qa", "_canary"]);
        let only_regex = node_args(&["--node-match-regex", "x"]).unwrap();
        assert_eq!(only_regex.node_match_list().unwrap().len(), 1);
        let error = node_args(&["--node-match-regex", "(unclosed"]).unwrap_err();
        assert!(error.to_string().contains("not a valid regex"), "{error}");
    }

    #[test]
    fn tls_flags_come_all_three_or_none() {
        assert!(node_args(&[]).unwrap().cluster.tls().is_none());
        let tls = [
            "--tls-cert",
            "n.crt",
            "--tls-key",
            "n.key",
            "--tls-ca",
            "ca.crt",
        ];
        let args = node_args(&tls).unwrap();
        assert_eq!(args.cluster.tls_cert, Some(PathBuf::from("n.crt")));
        assert_eq!(args.cluster.tls_key, Some(PathBuf::from("n.key")));
        assert_eq!(args.cluster.tls_ca, Some(PathBuf::from("ca.crt")));
        let shown = format!("{:?}", args.cluster.tls().unwrap());
        assert!(shown.contains("n.key"), "{shown}");
        let named = node_args(&[&tls[..], &["--tls-server-name", "box"]].concat()).unwrap();
        assert_eq!(named.cluster.tls_server_name.as_deref(), Some("box"));
        for partial in [&tls[..2], &tls[2..4], &tls[4..], &tls[..4], &tls[2..]] {
            let error = node_args(partial).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{partial:?}: {error}"
            );
        }
        assert!(node_args(&["--tls-server-name", "box"]).is_err());
        // Client commands take them too.
        let call = Cli::try_parse_from(
            ["rpclb", "call", "--peer", "h:1", "--node", "a@h", "whoami"]
                .iter()
                .chain(&tls),
        );
        match call.map(|cli| cli.command) {
            Ok(Command::Call(args)) => assert!(args.cluster.tls().is_some()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bench_flags_have_their_defaults_and_parse() {
        let bench = |extra: &[&str]| {
            let args = ["rpclb", "bench"].iter().chain(extra);
            match Cli::try_parse_from(args).map(|cli| cli.command) {
                Ok(Command::Bench(args)) => Ok(args),
                Ok(other) => panic!("not a bench command: {other:?}"),
                Err(error) => Err(error),
            }
        };
        let args = bench(&[]).unwrap();
        assert_eq!(args.sizes, [100, 1024, 65536]);
        assert_eq!((args.calls, args.warmup, args.rounds), (20_000, 2_000, 5));
        assert_eq!((args.secs, args.warmup_secs), (5.0, 0.5));
        assert_eq!(args.shape.concurrency, 32);
        assert_eq!(args.node_worker_threads, 1);
        let args = bench(&[
            "--sizes",
            "7,2KiB,1MiB",
            "--secs",
            "0.5",
            "--node-arg",
            "--cpu-sample-interval-ms=5000",
            "--node-worker-threads",
            "2",
            "--worker-threads",
            "2",
        ])
        .unwrap();
        assert_eq!(args.sizes, [7, 2048, 1 << 20]);
        assert_eq!(args.node_args, ["--cpu-sample-interval-ms=5000"]);
        assert_eq!(args.node_worker_threads, 2);
        for bad in ["0", "5MiB", "3kb", "x"] {
            assert!(bench(&["--sizes", bad]).is_err(), "{bad}");
        }
        assert!(bench(&["--secs", "-1"]).is_err());
        assert!(bench(&["--secs", "inf"]).is_err());
        assert!(bench(&["--secs", "0"]).is_err());
        assert!(bench(&["--warmup-secs", "0"]).is_ok());
        assert!(bench(&["--rounds", "0"]).is_err());
    }

    #[test]
    fn a_bad_sampler_spec_is_refused_naming_the_part() {
        let error = node_args(&["--cpu-sampler", "const:abc"]).unwrap_err();
        assert!(error.to_string().contains("\"abc\""), "{error}");
        assert!(node_args(&["--cpu-reply", "junk"]).is_err());
        let error_mode = node_args(&["--cpu-reply", "error"]).unwrap();
        assert_eq!(error_mode.cpu_reply, "error");
    }

    #[test]
    fn help_lists_stop_balancer_and_control_takes_a_timeout() {
        use clap::CommandFactory as _;
        let mut cli = Cli::command();
        let top = cli.render_help().to_string();
        assert!(top.contains("stop_balancer"), "{top}");
        let control = cli.find_subcommand_mut("control").unwrap();
        let help = control.render_long_help().to_string();
        assert!(help.contains("stop_balancer BALANCER"), "{help}");
        assert!(
            help.contains(r#"stop_balancer `{"balancer","outcome""#),
            "{help}"
        );
        assert!(help.contains("--timeout-ms"), "{help}");
        let parsed = |extra: &[&str]| {
            let args = ["rpclb", "control", "--peer", "h:1", "--node", "a@h"];
            match Cli::try_parse_from(args.iter().chain(extra)).map(|cli| cli.command) {
                Ok(Command::Control(args)) => Ok(args.timeout_ms),
                Ok(other) => panic!("{other:?}"),
                Err(error) => Err(error),
            }
        };
        assert_eq!(parsed(&["stop_balancer", "work"]).unwrap(), None);
        assert_eq!(
            parsed(&["--timeout-ms", "90000", "stop_balancer", "work"]).unwrap(),
            Some(90_000)
        );
        assert!(parsed(&["--timeout-ms", "0", "ping"]).is_err());
    }

    #[test]
    fn control_takes_an_argument_and_demo_a_burn_index() {
        let cli = Cli::try_parse_from([
            "rpclb",
            "control",
            "--peer",
            "h:1",
            "--node",
            "a@h",
            "crash_poller",
            "work",
        ])
        .unwrap();
        match cli.command {
            Command::Control(args) => {
                assert_eq!(args.request, "crash_poller");
                assert_eq!(args.arg.as_deref(), Some("work"));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["rpclb", "demo", "--algorithm", "least_cpu", "--burn", "2"])
            .unwrap();
        match cli.command {
            Command::Demo(args) => assert_eq!(args.burn, Some(2)),
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["rpclb", "demo", "--burn", "0"]).is_err());
    }
}

/// Parses `--seeds`: `A..B` (inclusive, A ≤ B) or one seed `N`.
fn seed_range(text: &str) -> Result<(u64, u64), String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("{s:?} is not a seed: {e}"))
    };
    let (first, last) = match text.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b.trim_start_matches('='))?),
        None => {
            let n = parse(text)?;
            (n, n)
        }
    };
    if first > last {
        return Err(format!("{first} is above {last}"));
    }
    if last - first >= 10_000 {
        return Err("at most 10,000 seeds".into());
    }
    Ok((first, last))
}

/// `rpclb lab`.
#[derive(Debug, Clone, Args)]
pub struct LabArgs {
    /// A built-in scenario's name (`uniform`, `slow-member`, ...; see docs/explanation/lab.md)
    /// or a scenario file (TOML); repeatable. Default: every built-in scenario.
    #[arg(long, value_name = "NAME|FILE")]
    pub scenario: Vec<String>,
    /// An algorithm's name; repeatable. Default: every built-in algorithm.
    #[arg(long, value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: Vec<String>,
    /// The seeds, `A..B` inclusive, or one seed.
    #[arg(long, default_value = "1..10", value_parser = seed_range)]
    pub seeds: (u64, u64),
    /// Simulated seconds measured, instead of each scenario's own (e.g. a short smoke).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub measure_s: Option<f64>,
    /// Simulated seconds of warm-up, instead of each scenario's own.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub warmup_s: Option<f64>,
    /// Runs at once, on this many threads (each run is single-threaded and deterministic:
    /// the report does not depend on it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// Print one JSON document instead of the tables: `{"scenarios":[{"scenario":{..},
    /// "summaries":[..],"runs":[..]}]}`.
    #[arg(long)]
    pub json: bool,
    /// Also write a picture per scenario and load into this directory (created if missing):
    /// `SCENARIO-LOAD.svg` with each algorithm's latency distribution and, for a scenario
    /// whose faulty member changes over time, its share over time (the first seed's runs).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
}

/// `rpclb demo-caller` (hidden): one caller process of `rpclb demo --scenario`.
#[derive(Debug, Clone, Args)]
pub struct DemoCallerArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// This caller's node name.
    #[arg(long)]
    pub name: String,
    /// The algorithm of its balancer.
    #[arg(long, value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    /// Members to wait for (≤ 15 s) before the start.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub members: u32,
    /// Calls per second (Poisson arrivals; > 0).
    #[arg(long, value_parser = positive_rate)]
    pub rate: f64,
    /// The run's start, ms since the Unix epoch (every caller and the demo agree on it).
    #[arg(long)]
    pub start_at_unix_ms: u64,
    /// Unmeasured ms from the start.
    #[arg(long)]
    pub warmup_ms: u64,
    /// Measured ms after the warm-up.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub measure_ms: u64,
    /// Timeout of each call, ms.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Seed of the arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Parses a rate in calls/s: finite, above 0, at most 1,000,000.
fn positive_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|e| format!("{text:?} is not a number: {e}"))?;
    if rate.is_finite() && rate > 0.0 && rate <= 1_000_000.0 {
        Ok(rate)
    } else {
        Err(format!("{rate} is not in (0, 1000000]"))
    }
}
