//! `NodeConfig`: how a node is named, where it listens, whom it dials, and the process-wide
//! defaults every call on it uses.
//!
//! This module is the builder: the struct, its defaults and the node's identity (name, host,
//! cookie, peers, client). The setters of each other concern are in their own module
//! (`config/admission.rs`, `timing.rs`, `calls.rs`, `concurrency.rs`, `cpu.rs`,
//! `test_hooks.rs`); the checks
//! every option gets at start are in `config/validate.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cpu::CpuSampler;
// Named by the doc links (the checks that return it are in `validate.rs`) and the tests.
#[cfg(any(doc, test))]
use crate::Error;

mod admission;
mod calls;
mod concurrency;
mod cpu;
#[cfg(any(test, feature = "test-hooks"))]
mod test_hooks;
mod timing;
mod validate;

pub(crate) use validate::ValidConfig;

/// Default cap on one encoded call or reply: 8 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 8 << 20;

/// Default of [`NodeConfig::max_dials_in_flight`]: 4 dials of this node in their handshake at
/// once.
pub const DEFAULT_MAX_DIALS_IN_FLIGHT: usize = 4;

/// Largest allowed payload cap: ractor_cluster's 16 MiB inbound frame limit less 64 KiB of room
/// for the frame's own envelope. A frame over the receiver's limit tears down the whole session.
pub const MAX_PAYLOAD_CAP_BYTES: usize = (16 << 20) - (64 << 10);

/// Settings of one node (one OS process). Build with [`NodeConfig::new`] and the setters; the
/// values are checked by [`Node::start`](crate::Node::start), which fails with
/// [`Error::InvalidConfig`] naming the option.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::NodeConfig;
///
/// let config = NodeConfig::new("worker_a", "127.0.0.1:0")
///     .cookie("secret")
///     .peers(["127.0.0.1:4101"])
///     .call_timeout(Duration::from_secs(5));
/// assert_eq!(config.full_name(), "worker_a@127.0.0.1");
/// ```
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub(crate) name: String,
    pub(crate) listen: String,
    pub(crate) advertise_host: Option<String>,
    pub(crate) cookie: String,
    pub(crate) peers: Vec<String>,
    pub(crate) max_payload_bytes: usize,
    pub(crate) call_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) heartbeat_timeout: Duration,
    pub(crate) dial_backoff_max: Duration,
    pub(crate) remote_admin: bool,
    pub(crate) retry: crate::Retry,
    pub(crate) call_directly: bool,
    pub(crate) cpu_sampler: CpuSampler,
    pub(crate) cpu_sample_interval: Duration,
    pub(crate) cpu_reply_garbage: bool,
    pub(crate) cpu_reply_error: bool,
    pub(crate) excluded_node_patterns: Vec<String>,
    pub(crate) reconnect_give_up: Duration,
    pub(crate) client: bool,
    pub(crate) sparse_mesh: bool,
    pub(crate) wire_version: u16,
    pub(crate) tls: Option<super::TlsConfig>,
    pub(crate) max_handshakes: usize,
    pub(crate) max_dials_in_flight: usize,
    pub(crate) handshake_frame_limit: usize,
    pub(crate) max_concurrent_calls: Option<usize>,
    pub(crate) function_max_concurrent_calls: Vec<(String, usize)>,
    pub(crate) labels: super::Labels,
}

impl NodeConfig {
    /// A node called `name` (no `@`; the full name becomes `name@<advertised host>`) listening
    /// on `listen`, an `ip:port` address. Port 0 lets the OS pick a free port, which
    /// [`Node::listen_addr`](crate::Node::listen_addr) then reports.
    ///
    /// Defaults: advertised host = the listen IP, no cookie (must be set), no peers,
    /// `max_payload_bytes` 8 MiB, `call_timeout` 10 s, `connect_timeout` 5 s,
    /// `dial_backoff_max` 2 s, `reconnect_give_up` 60 s, `heartbeat_interval` 1 s,
    /// `heartbeat_timeout` 3 s, `remote_admin` off, `cpu_sampler` [`CpuSampler::System`],
    /// `cpu_sample_interval` 1,000 ms, no `excluded_node_patterns`,
    /// no `tls` (plain TCP), not a `client`, no `sparse_mesh` (a full mesh), `max_handshakes` 1,024
    /// ([`DEFAULT_MAX_HANDSHAKES`](crate::DEFAULT_MAX_HANDSHAKES)), `handshake_frame_limit`
    /// 16 KiB ([`DEFAULT_HANDSHAKE_FRAME_LIMIT`](crate::DEFAULT_HANDSHAKE_FRAME_LIMIT)),
    /// `max_dials_in_flight` 4 ([`DEFAULT_MAX_DIALS_IN_FLIGHT`]), no
    /// `max_concurrent_calls` nor `function_max_concurrent_calls` cap.
    pub fn new(name: impl Into<String>, listen: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            listen: listen.into(),
            advertise_host: None,
            cookie: String::new(),
            peers: Vec::new(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            call_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(3),
            dial_backoff_max: Duration::from_secs(2),
            remote_admin: false,
            retry: crate::Retry::default(),
            call_directly: false,
            cpu_sampler: CpuSampler::System,
            cpu_sample_interval: Duration::from_millis(1_000),
            cpu_reply_garbage: false,
            cpu_reply_error: false,
            excluded_node_patterns: Vec::new(),
            reconnect_give_up: Duration::from_secs(60),
            client: false,
            sparse_mesh: false,
            wire_version: crate::wire::WIRE_VERSION,
            tls: None,
            max_handshakes: super::preauth::DEFAULT_MAX_HANDSHAKES,
            max_dials_in_flight: DEFAULT_MAX_DIALS_IN_FLIGHT,
            handshake_frame_limit: super::preauth::DEFAULT_HANDSHAKE_FRAME_LIMIT,
            max_concurrent_calls: None,
            function_max_concurrent_calls: Vec::new(),
            labels: super::Labels::new(),
        }
    }

    /// The host other nodes dial and the host part of the node's name. Defaults to the listen
    /// IP; set it when listening on `0.0.0.0` or behind an address other machines can't use.
    /// [`Node::start`](crate::Node::start) fails with [`Error::InvalidConfig`] naming
    /// `advertise_host` when it is empty, holds `@`, `/` or a space, is an IPv6 address without
    /// brackets, or is unset while the listen IP is unspecified (`0.0.0.0`, `::`).
    pub fn advertise_host(mut self, host: impl Into<String>) -> Self {
        self.advertise_host = Some(host.into());
        self
    }

    /// The shared secret every node of the cluster must use (required, non-empty). A peer with
    /// another cookie is rejected during the handshake.
    pub fn cookie(mut self, cookie: impl Into<String>) -> Self {
        self.cookie = cookie.into();
        self
    }

    /// Addresses (`host:port`) dialled in the background at start and re-dialled with capped
    /// backoff while no session to them is up (default none). A down peer never fails
    /// `Node::start`; an address without a `:` does ([`Error::InvalidConfig`] naming `peers`).
    pub fn peers<I, S>(mut self, peers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.peers = peers.into_iter().map(Into::into).collect();
        self
    }

    /// Makes this a client node (default off): one that joins the cluster to make calls and
    /// may go away at any time, like `rpclb call`. Its peers do not redial it when its session
    /// is lost, however it ends, and do not introduce it to nodes that join later (it dials the
    /// nodes it learns of itself, and only dials out): a node that comes up, or comes back
    /// under its name, sends a join notice through one of its peers to the client nodes
    /// connected to that peer, which dial it at once. It still serves calls made to it and can
    /// start balancers.
    pub fn client(mut self, client: bool) -> Self {
        self.client = client;
        self
    }

    /// Runs the node in the sparse mesh (default off: a full mesh, where a node dials every
    /// node it learns of). A sparse-mesh node dials only its configured
    /// [`peers`](Self::peers) (its seeds) and the members of the subsets of its subsetting
    /// balancers ([`BalancerConfig::subsetting`](crate::BalancerConfig::subsetting)), and
    /// redials only those; it still accepts every session dialled to it. What it knows of the
    /// rest of the cluster comes from the node directory it exchanges with its connected peers
    /// once per second (name, address, the balancers each node serves and calls with
    /// subsetting; entries unheard of for 15 s are dropped). Sessions it dialled for a subset
    /// and no longer needs are closed after 2 s. Every node of a cluster should use the same
    /// mode: a full-mesh node still dials every node it learns of, sparse or not.
    ///
    /// [`Node::attach`](crate::Node::attach) refuses it ([`Error::InvalidConfig`] naming
    /// `sparse_mesh`): an attached node advertises no address for the directory.
    ///
    /// Seeds stay connected (they are redialled for as long as the node runs): give each
    /// node one or two seeds, not one seed for all, so that no node carries a session per
    /// node of the cluster (docs/how-to/running-across-machines.md, "Subsetting").
    pub fn sparse_mesh(mut self, sparse: bool) -> Self {
        self.sparse_mesh = sparse;
        self
    }

    /// Adds the label `key=value` to the node (default: no labels), replacing an earlier
    /// value of `key`: its zone, version, role, known to every peer. Node filters can match
    /// labels ([`NodeFilter::label`](crate::NodeFilter::label)) and a balancer can prefer
    /// members in this node's zone ([`Locality`](crate::Locality)).
    /// [`Node::start`](crate::Node::start) fails with [`Error::InvalidConfig`] naming `labels`
    /// for more than [`MAX_LABELS`](crate::MAX_LABELS) (32) labels, a key that is
    /// empty, over 64 bytes or holds other than ASCII letters, digits, `.`, `_`, `/`, `-`, or a
    /// value over 256 bytes or with control characters.
    ///
    /// ```
    /// use rpc_load_balancer::NodeConfig;
    ///
    /// let config = NodeConfig::new("worker_a", "127.0.0.1:0")
    ///     .label("zone", "eu-1")
    ///     .label("version", "2");
    /// assert_eq!(config.node_labels().get("zone"), Some("eu-1"));
    /// ```
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let mut pairs = self.labels.to_pairs();
        let key = key.into();
        pairs.retain(|(k, _)| *k != key);
        pairs.push((key, value.into()));
        self.labels = super::Labels::from_pairs(pairs);
        self
    }

    /// Sets all the node's labels at once (replacing earlier ones): `(key, value)` pairs,
    /// checked as [`label`](Self::label)'s.
    pub fn labels<I, K, V>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.labels = super::Labels::from_pairs(labels);
        self
    }

    /// The labels set so far.
    pub fn node_labels(&self) -> &super::Labels {
        &self.labels
    }

    /// The node's full name, `name@host`, as other nodes see it.
    pub fn full_name(&self) -> String {
        format!("{}@{}", self.name, self.host())
    }

    fn host(&self) -> String {
        match &self.advertise_host {
            Some(host) => host.clone(),
            None => self
                .listen
                .parse::<SocketAddr>()
                .map(|a| match a.ip() {
                    std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                    ip => ip.to_string(),
                })
                .unwrap_or_else(|_| self.listen.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> NodeConfig {
        NodeConfig::new("a", "127.0.0.1:0").cookie("c")
    }

    #[test]
    fn defaults_are_valid_and_named_after_the_listen_ip() {
        let valid = ok().validate(false).unwrap();
        assert_eq!(valid.port, 0);
        assert_eq!(valid.host, "127.0.0.1");
        assert_eq!(ok().full_name(), "a@127.0.0.1");
        assert_eq!(ok().advertise_host("box1").full_name(), "a@box1");
    }

    #[test]
    fn excluded_node_patterns_default_to_none() {
        assert!(ok().excluded_node_patterns.is_empty());
        let set = ok().excluded_node_patterns(vec!["_qa".to_string()]);
        assert_eq!(set.excluded_node_patterns, ["_qa"]);
        assert!(set.validate(false).is_ok());
    }

    #[test]
    fn cpu_options_have_their_defaults_and_are_checked_when_attached_too() {
        let config = ok();
        assert!(matches!(config.cpu_sampler, CpuSampler::System));
        assert_eq!(config.cpu_sample_interval, Duration::from_millis(1_000));
        assert!(!config.cpu_reply_garbage);
        assert!(!config.cpu_reply_error);
        let set = ok()
            .cpu_sampler(CpuSampler::Const(12.0))
            .cpu_sample_interval(Duration::from_millis(1))
            .cpu_reply_garbage(true);
        assert!(set.validate(false).is_ok(), "1 ms is the shortest interval");
        assert!(matches!(set.cpu_sampler, CpuSampler::Const(v) if v == 12.0));
        assert!(set.cpu_reply_garbage);
        let attached = NodeConfig::new("a", "")
            .advertise_host("h")
            .cpu_sample_interval(Duration::ZERO);
        assert!(matches!(
            attached.validate(true),
            Err(Error::InvalidConfig {
                option: "cpu_sample_interval",
                ..
            })
        ));
    }

    #[test]
    fn the_sparse_mesh_is_refused_for_an_attached_node_naming_the_option() {
        assert!(ok().sparse_mesh(true).validate(false).is_ok());
        let attached = NodeConfig::new("a", "")
            .advertise_host("h")
            .sparse_mesh(true);
        assert!(matches!(
            attached.validate(true),
            Err(Error::InvalidConfig {
                option: "sparse_mesh",
                ..
            })
        ));
    }

    #[test]
    fn payload_cap_stays_below_the_frame_limit() {
        assert!(ok()
            .max_payload_bytes(MAX_PAYLOAD_CAP_BYTES)
            .validate(false)
            .is_ok());
        const { assert!(DEFAULT_MAX_PAYLOAD_BYTES < MAX_PAYLOAD_CAP_BYTES) };
        const {
            assert!(MAX_PAYLOAD_CAP_BYTES < ractor_cluster::DEFAULT_MAX_INBOUND_FRAME_SIZE as usize)
        };
    }
}
