//! `rpclb node`: a cluster node serving the demo functions.

use clap::builder::PossibleValuesParser;
use clap::Args;
use rpc_load_balancer::algorithm::BUILT_IN;
use rpc_load_balancer::cpu::CpuSampler;
use rpc_load_balancer::NodeFilter;

use super::{ClusterArgs, LeastCpuArgs, WorkArgs};

/// Parses a `--node-match-regex` value (the regex must compile).
fn node_filter_regex(pattern: &str) -> Result<NodeFilter, String> {
    NodeFilter::regex(pattern).map_err(|e| e.to_string())
}

/// Parses a `--label` or `--node-match-label` value, `KEY=VALUE` (split at the first `=`;
/// the value may be empty or hold `=`), checked by the library's label rules so that a bad
/// one is refused naming its flag.
fn label_pair(value: &str) -> Result<(String, String), String> {
    let (key, value) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} is not KEY=VALUE"))?;
    rpc_load_balancer::Labels::check(key, value).map_err(|error| match error {
        rpc_load_balancer::Error::InvalidConfig { reason, .. } => reason,
        other => other.to_string(),
    })?;
    Ok((key.to_string(), value.to_string()))
}

/// Parses a `--function-max-concurrent-calls` value, `NAME=N`.
fn function_cap(value: &str) -> Result<(String, usize), String> {
    let (name, cap) = value
        .rsplit_once('=')
        .ok_or_else(|| format!("{value:?} is not NAME=N"))?;
    let cap = cap
        .parse()
        .map_err(|e| format!("{value:?}: the cap {cap:?} is not a count: {e}"))?;
    Ok((name.to_string(), cap))
}

/// A library subsetting scheme by name (`aperture`, `rounds`, `rendezvous`).
fn subset_scheme(name: &str) -> Result<rpc_load_balancer::routing::SubsetScheme, String> {
    use rpc_load_balancer::routing::SubsetScheme;
    SubsetScheme::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = SubsetScheme::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown subset scheme {name:?}; known: {}",
            known.join(", ")
        )
    })
}

/// The labels of `rpclb node`, and which nodes the balancers it starts take (their
/// node_match_list and locality).
#[derive(Debug, Clone, Args)]
pub struct LabelArgs {
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
    /// Like --node-match with a label: the node is a member when its label KEY is exactly
    /// VALUE, e.g. `version=2` (repeat for several).
    #[arg(long = "node-match-label", value_name = "KEY=VALUE", value_parser = label_pair)]
    pub node_match_label: Vec<(String, String)>,
    /// A label of this node, e.g. `zone=eu-1` or `version=2` (repeat for several; a later
    /// value of a key replaces an earlier one): known to every peer, matched by label filters
    /// and by balancers' locality. At most 32 keys; KEY 1-64 bytes of letters, digits, `.`,
    /// `_`, `/`, `-`; VALUE at most 256 bytes (refused otherwise, naming --label).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label_pair)]
    pub labels: Vec<(String, String)>,
    /// The balancers started with --balancer prefer the members whose label KEY (e.g. `zone`)
    /// is this node's while one of them can take the call (locality; off by default).
    #[arg(long = "locality", value_name = "KEY")]
    pub locality: Option<String>,
}

impl LabelArgs {
    /// Checks what a single `--label` value cannot show: at most
    /// [`MAX_LABELS`](rpc_load_balancer::MAX_LABELS) distinct keys (a later value of a key
    /// replaces an earlier one, so repeats of a key count once). The library refuses more at
    /// start naming its option, `labels`; this says it as the flag the user typed.
    ///
    /// Errors: the message, naming `--label`.
    pub fn check(&self) -> Result<(), String> {
        let keys: std::collections::BTreeSet<&str> =
            self.labels.iter().map(|(key, _)| key.as_str()).collect();
        if keys.len() > rpc_load_balancer::MAX_LABELS {
            return Err(format!(
                "--label given for {} keys: at most {} (a repeated key counts once)",
                keys.len(),
                rpc_load_balancer::MAX_LABELS
            ));
        }
        Ok(())
    }
}

/// The concurrency caps of `rpclb node` (pushback).
#[derive(Debug, Clone, Args)]
pub struct ConcurrencyArgs {
    /// Most calls this node serves at once, every function together (default: no cap; 0 is
    /// refused at start). A call over it is refused at once without running, and its caller
    /// sends it to another member (pushback); casts are not counted.
    #[arg(long, value_name = "N")]
    pub max_concurrent_calls: Option<usize>,
    /// Most calls of one function this node serves at once, as NAME=N, e.g. `sleep=4`
    /// (repeat for several functions; a cap of 0 is refused at start). Refused as over
    /// --max-concurrent-calls.
    #[arg(long = "function-max-concurrent-calls", value_name = "NAME=N", value_parser = function_cap)]
    pub function_max_concurrent_calls: Vec<(String, usize)>,
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
    #[command(flatten)]
    pub concurrency: Box<ConcurrencyArgs>,
    /// Start a balancer of this name on the node (repeat for several), after registering the
    /// demo functions.
    #[arg(long = "balancer")]
    pub balancers: Vec<String>,
    /// The algorithm of the balancers started with --balancer.
    #[arg(long, default_value = "random", value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    /// Run in the sparse mesh: dial only the --peer seeds and the members of this node's
    /// subsets, not every node learnt of; what the node knows of the rest comes from the node
    /// directory it exchanges with its peers (NodeConfig::sparse_mesh). Every node of the
    /// cluster should run with it.
    #[arg(long)]
    pub sparse_mesh: bool,
    /// The balancers started with --balancer call only K of their members, chosen by
    /// deterministic subsetting (BalancerConfig::subsetting; needs --sparse-mesh; refused
    /// with hash_ring and call_direct). Give it to the caller nodes only: a node started
    /// with it counts as a caller of its --balancers. With K or fewer members the subset is
    /// every member (not refused: members come and go); an INFO log line
    /// (`RUST_LOG=rpc_load_balancer=info`) says so when the first members are known and each
    /// time that changes.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub subset_size: Option<u64>,
    /// The subsetting scheme of --subset-size: `aperture` (default), `rounds` or
    /// `rendezvous`.
    #[arg(long, value_name = "SCHEME", default_value = "aperture", value_parser = subset_scheme, requires = "subset_size")]
    pub subset_scheme: rpc_load_balancer::routing::SubsetScheme,
    #[command(flatten)]
    pub label_args: Box<LabelArgs>,
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
    /// Most dials of this node in their handshake at once (TCP connect to ready): further
    /// dials wait for a slot, so a node joining a large cluster does not dial every member at
    /// once. From 1 to 1024 (refused at start otherwise).
    #[arg(long, value_name = "N", default_value_t = rpc_load_balancer::DEFAULT_MAX_DIALS_IN_FLIGHT)]
    pub max_dials_in_flight: usize,
    /// Test hook: speak this wire version instead of the library's (compatibility tests).
    #[arg(long, value_name = "N", hide = true)]
    pub wire_version: Option<u16>,
    /// Test flag: append a field no release knows to every call header, reply status and
    /// control request this node sends, as a node of a newer release would (compatibility
    /// tests).
    #[arg(long)]
    pub wire_extra_field: bool,
    #[command(flatten)]
    pub group_workers: Box<GroupWorkerArgs>,
    /// Test flag: start the `--balancer`s under a parent actor whose `post_stop` is empty
    /// (as an app's supervisor that does not stop its balancers), which the test hook
    /// `ControlRequest::EndBalancerParent` stops or kills, instead of standalone.
    #[arg(long)]
    pub balancer_parent: bool,
    /// Test flag: record every trace context this node is handed with a served call or cast,
    /// and serve them with the function `traces_seen` (tests of traces across nodes).
    #[arg(long, hide = true)]
    pub trace_record: bool,
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
    pub least_cpu: Box<LeastCpuArgs>,
    /// Exit when stdin reaches end of file (a test harness holds the pipe; when the harness
    /// dies the node exits too).
    #[arg(long)]
    pub exit_with_stdin: bool,
    #[command(flatten)]
    pub work: Box<WorkArgs>,
}

/// The hidden test flags of actor-group tests: worker actors in a pg group.
#[derive(clap::Args, Debug, Clone)]
pub struct GroupWorkerArgs {
    /// Test flag: spawn this many worker actors joined to the pg group `--group-name` of
    /// scope `--group-scope`, answering `GroupWork::Who` (actor-group tests).
    #[arg(
        long = "group-workers",
        value_name = "N",
        hide = true,
        default_value_t = 0
    )]
    pub count: usize,
    /// Test flag: the pg scope of the `--group-workers`.
    #[arg(
        long = "group-scope",
        value_name = "SCOPE",
        hide = true,
        default_value = "rpclb_test"
    )]
    pub scope: String,
    /// Test flag: the pg group of the `--group-workers`.
    #[arg(
        long = "group-name",
        value_name = "GROUP",
        hide = true,
        default_value = "workers"
    )]
    pub group: String,
}

impl NodeArgs {
    /// The node_match_list of the balancers started with --balancer (`--node-match` then
    /// `--node-match-regex`); `None` when neither is given (every node is a member).
    pub fn node_match_list(&self) -> Option<Vec<NodeFilter>> {
        let filters = &self.label_args;
        if filters.node_match.is_empty()
            && filters.node_match_regex.is_empty()
            && self.label_args.node_match_label.is_empty()
        {
            return None;
        }
        let substrings = filters.node_match.iter().map(NodeFilter::from);
        let labels = self
            .label_args
            .node_match_label
            .iter()
            .map(|(key, value)| NodeFilter::label(key, value));
        Some(
            substrings
                .chain(filters.node_match_regex.iter().cloned())
                .chain(labels)
                .collect(),
        )
    }
}

#[cfg(test)]
pub(super) mod tests {
    #[cfg(feature = "test-hooks")]
    use std::time::Duration;

    use rpc_load_balancer::algorithm::LeastCpuOptions;
    use rpc_load_balancer::cpu::CpuSampler;
    use rpc_load_balancer::NodeFilter;

    use clap::Parser as _;

    use crate::cli::{Cli, Command, NodeArgs};

    /// `rpclb node --name a` with `extra` flags, parsed.
    pub(in crate::cli) fn node_args(extra: &[&str]) -> Result<NodeArgs, clap::Error> {
        let args = ["rpclb", "node", "--name", "a"].iter().chain(extra);
        match Cli::try_parse_from(args)?.command {
            Command::Node(args) => Ok(args),
            other => panic!("not a node command: {other:?}"),
        }
    }

    /// 33 label keys are refused naming the flag typed, `--label`, not the library's option
    /// `labels`; 32 keys, or 33 `--label`s with a repeated key, are taken.
    #[test]
    fn too_many_labels_are_refused_naming_the_label_flag() {
        let labels = |keys: usize, extra: &[&str]| {
            let mut args: Vec<String> = (0..keys)
                .flat_map(|i| ["--label".to_string(), format!("k{i}=v")])
                .collect();
            args.extend(extra.iter().map(|a| a.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let cli =
                Cli::try_parse_from(["rpclb", "node", "--name", "a"].iter().chain(&args)).unwrap();
            cli.check().map_err(|e| e.to_string())
        };
        let error = labels(33, &[]).unwrap_err();
        assert!(
            error.contains("--label given for 33 keys: at most 32"),
            "{error}"
        );
        assert!(!error.contains("`labels`"), "{error}");
        assert!(labels(32, &[]).is_ok());
        assert!(labels(32, &["--label", "k0=w"]).is_ok());
    }

    #[test]
    fn node_concurrency_caps_default_to_none_and_parse() {
        let args = node_args(&[]).unwrap();
        assert_eq!(args.concurrency.max_concurrent_calls, None);
        assert!(args.concurrency.function_max_concurrent_calls.is_empty());
        let args = node_args(&[
            "--max-concurrent-calls",
            "8",
            "--function-max-concurrent-calls",
            "sleep=2",
            "--function-max-concurrent-calls",
            "a=b=3",
        ])
        .unwrap();
        assert_eq!(args.concurrency.max_concurrent_calls, Some(8));
        assert_eq!(
            args.concurrency.function_max_concurrent_calls,
            [("sleep".to_string(), 2), ("a=b".to_string(), 3)]
        );
        for bad in ["sleep", "sleep=x", "sleep=-1"] {
            assert!(node_args(&["--function-max-concurrent-calls", bad]).is_err());
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
        let labeled = node_args(&[
            "--label",
            "zone=a",
            "--label",
            "version=2=b",
            "--node-match-label",
            "version=2",
            "--locality",
            "zone",
        ])
        .unwrap();
        assert_eq!(
            labeled.label_args.labels,
            [
                ("zone".to_string(), "a".to_string()),
                ("version".to_string(), "2=b".to_string())
            ]
        );
        assert_eq!(
            labeled.node_match_list().unwrap(),
            [NodeFilter::label("version", "2")]
        );
        assert_eq!(labeled.label_args.locality.as_deref(), Some("zone"));
        assert!(node_args(&["--label", "zone"]).is_err(), "no `=`");
        assert!(node_args(&["--label", "=eu"]).is_err(), "an empty key");
        assert!(
            node_args(&["--node-match-label", "zöne=x"]).is_err(),
            "a key no label has"
        );
        let long = format!("k={}", "v".repeat(257));
        assert!(
            node_args(&["--label", &long]).is_err(),
            "a value past 256 bytes"
        );
        let only_regex = node_args(&["--node-match-regex", "x"]).unwrap();
        assert_eq!(only_regex.node_match_list().unwrap().len(), 1);
        let error = node_args(&["--node-match-regex", "(unclosed"]).unwrap_err();
        assert!(error.to_string().contains("not a valid regex"), "{error}");
    }

    #[test]
    fn a_bad_sampler_spec_is_refused_naming_the_part() {
        let error = node_args(&["--cpu-sampler", "const:abc"]).unwrap_err();
        assert!(error.to_string().contains("\"abc\""), "{error}");
        assert!(node_args(&["--cpu-reply", "junk"]).is_err());
        let error_mode = node_args(&["--cpu-reply", "error"]).unwrap();
        assert_eq!(error_mode.cpu_reply, "error");
    }
}
