//! `NodeConfig`: how a node is named, where it listens, whom it dials, and the process-wide
//! defaults every call on it uses.
//!
//! This module is the builder; the checks every option gets at start are in `config/validate.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cpu::CpuSampler;
// Named by the doc links (the checks that return it are in `validate.rs`) and the tests.
#[cfg(any(doc, test))]
use crate::Error;

mod validate;

pub(crate) use validate::ValidConfig;

/// Default cap on one encoded call or reply: 8 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 8 << 20;

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
    pub(crate) wire_version: u16,
    pub(crate) tls: Option<super::TlsConfig>,
    pub(crate) max_handshakes: usize,
    pub(crate) handshake_frame_limit: usize,
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
    /// no `tls` (plain TCP), not a `client`, `max_handshakes` 1,024
    /// ([`DEFAULT_MAX_HANDSHAKES`](crate::DEFAULT_MAX_HANDSHAKES)), `handshake_frame_limit`
    /// 16 KiB ([`DEFAULT_HANDSHAKE_FRAME_LIMIT`](crate::DEFAULT_HANDSHAKE_FRAME_LIMIT)).
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
            wire_version: crate::wire::WIRE_VERSION,
            tls: None,
            max_handshakes: super::preauth::DEFAULT_MAX_HANDSHAKES,
            handshake_frame_limit: super::preauth::DEFAULT_HANDSHAKE_FRAME_LIMIT,
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

    /// Mutual TLS on every session of this node (see [`TlsConfig`](super::TlsConfig)): it
    /// accepts only TLS connections presenting a certificate signed by the CA, and dials its
    /// peers and the mesh over TLS. Every node of the cluster needs it (a plaintext node and a
    /// TLS node cannot connect); the cookie still applies. Default: none, plain TCP.
    ///
    /// The files are read at [`Node::start`](crate::Node::start), which fails with
    /// [`Error::InvalidConfig`] naming `tls.cert`, `tls.key`, `tls.ca` or `tls.server_name`.
    pub fn tls(mut self, tls: super::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Most connections to this node's listen address at once that have not passed the
    /// handshake yet (TCP accepted, TLS handshake or cookie check under way); default 1,024
    /// ([`DEFAULT_MAX_HANDSHAKES`](crate::DEFAULT_MAX_HANDSHAKES)), from 1 to 65,536 (else
    /// [`Error::InvalidConfig`] naming `max_handshakes` at start). At the limit, a new
    /// connection closes the oldest waiting one: a legitimate handshake takes milliseconds, so
    /// stalled connections do not keep peers out (a flood of more new connections than the
    /// limit within a handshake's time still can). A waiting connection that has a session
    /// costs the node ~50 KiB (ractor_cluster's session actors; less before its first frame,
    /// see [`handshake_frame_limit`](Self::handshake_frame_limit)), so ~50 MiB at the default.
    /// A connection waits at most [`connect_timeout`](Self::connect_timeout) from its accept.
    /// Not applied by [`Node::attach`](crate::Node::attach) (the app's NodeServer accepts its
    /// connections).
    pub fn max_handshakes(mut self, connections: usize) -> Self {
        self.max_handshakes = connections;
        self
    }

    /// Largest frame, in bytes, that a connection to this node may send before its session
    /// has authenticated (passed the cookie check); default 16 KiB
    /// ([`DEFAULT_HANDSHAKE_FRAME_LIMIT`](crate::DEFAULT_HANDSHAKE_FRAME_LIMIT)), from 1,024 to
    /// 1,048,576 (else [`Error::InvalidConfig`] naming `handshake_frame_limit` at start). The
    /// handshake's own messages carry the peer's name and address, a few hundred bytes. A
    /// first frame announcing more closes the connection before it gets a session; a later
    /// one is left unread (in the kernel's socket buffer) until the session authenticates, or
    /// is closed with the connection at `connect_timeout`, so a stranger cannot make the node
    /// buffer more than this per connection. Once authenticated, frames up to
    /// ractor_cluster's 16 MiB pass. Not applied by [`Node::attach`](crate::Node::attach).
    pub fn handshake_frame_limit(mut self, bytes: usize) -> Self {
        self.handshake_frame_limit = bytes;
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

    /// Cap in bytes on one encoded call (header + arguments) or reply; default 8 MiB
    /// ([`DEFAULT_MAX_PAYLOAD_BYTES`]), from 1 byte to [`MAX_PAYLOAD_CAP_BYTES`]
    /// (else [`Error::InvalidConfig`] naming `max_payload_bytes` at start). Use one value for
    /// the whole cluster: a call over the cap fails with [`Error::PayloadTooLarge`] before
    /// anything is sent, and so does one run in this process (a local member, `CallDirect`,
    /// `call_directly`), measured as if it were encoded; a reply over the serving node's cap is
    /// [`Error::PayloadTooLarge`] too, wherever it ran.
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Timeout of a call that doesn't set its own; default 10 s, must be > 0.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How often this node pings each connected peer (default 1,000 ms; at least 50 ms and at
    /// most a third of `heartbeat_timeout`, checked at start).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// How long a peer may leave a ping unanswered before its session is stopped, so that a
    /// hung peer (e.g. a paused process) leaves every balancer's members and the calls in
    /// flight to it fail instead of waiting out their timeouts (default 3,000 ms; 300 ms to
    /// 3,600,000 ms = 1 hour, checked at start: shorter, ordinary scheduling delays would drop
    /// healthy peers).
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.heartbeat_timeout = timeout;
        self
    }

    /// How long [`Node::connect`](crate::Node::connect) waits for a session to reach the ready
    /// state; default 5 s, from 1 ms to 3,600,000 ms (1 hour).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Longest pause between two dials of a peer that is down (a configured peer, or one lost
    /// uncleanly, see [`reconnect_give_up`](Self::reconnect_give_up)); default 2,000 ms. The
    /// backoff starts at 100 ms, doubles up to this cap and is jittered ±20 %. From 100 ms to
    /// 3,600,000 ms (1 hour).
    pub fn dial_backoff_max(mut self, max: Duration) -> Self {
        self.dial_backoff_max = max;
        self
    }

    /// How long this node keeps redialling a peer it was not configured with (found through
    /// the mesh) after losing it uncleanly — its session closed without the peer saying it was
    /// leaving: killed, crashed, cut off, or dropped for missing heartbeats. Default 60 s;
    /// `Duration::ZERO` turns this off. Configured peers ([`peers`](Self::peers)) are redialled
    /// for as long as the node runs, and peers that announced they were leaving (a drained
    /// shutdown) or were refused (another wire version) are not redialled here at all. A
    /// node restarted under the same name at a new address is found again when it dials any
    /// member of the cluster (its configured peers), which then introduces it to the rest.
    pub fn reconnect_give_up(mut self, give_up: Duration) -> Self {
        self.reconnect_give_up = give_up;
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

    /// Test hook (feature `test-hooks`, hidden from the docs): the wire version this node
    /// speaks (default [`WIRE_VERSION`](crate::WIRE_VERSION)), to run a node of "another
    /// version" in compatibility tests. It is process-wide, like the node. Not for production.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn wire_version(mut self, version: u16) -> Self {
        self.wire_version = version;
        self
    }

    /// The default [`Retry`](crate::Retry) of routed calls and casts on this node while their
    /// balancer has no member to send to (default: 5 retries, 5,000 ms apart, ±20 %), unless
    /// the balancer or the call sets its own.
    pub fn retry(mut self, retry: crate::Retry) -> Self {
        self.retry = retry;
        self
    }

    /// `true` makes routed calls and casts on this node run locally by default, ignoring
    /// their balancer's algorithm and members (the original's global `call_directly?`; default
    /// `false`). A call can override it with `call_directly(false)`.
    pub fn call_directly(mut self, directly: bool) -> Self {
        self.call_directly = directly;
        self
    }

    /// Whether other nodes may start and stop balancers here through
    /// [`ControlRequest`](crate::ControlRequest)s (default `false`; read-only requests are always
    /// answered). It also gates the fault-injection requests of the `test-hooks` feature. Anyone holding the cookie can then change this node's
    /// membership: enable it for operators' tools and tests.
    pub fn remote_admin(mut self, enabled: bool) -> Self {
        self.remote_admin = enabled;
        self
    }

    /// How this node measures its CPU load (%, 0–100) for
    /// [`LeastCpu`](crate::LeastCpu) balancers anywhere in the cluster; default
    /// [`CpuSampler::System`] (the whole machine). Every node samples and answers CPU-reading
    /// requests, whatever algorithms its own balancers use. See [`CpuSampler`] for the
    /// choices (whole machine, this process, the tokio runtime, your own function).
    pub fn cpu_sampler(mut self, sampler: CpuSampler) -> Self {
        self.cpu_sampler = sampler;
        self
    }

    /// How often the node samples its CPU; default 1,000 ms, must be > 0 (checked at start:
    /// [`Error::InvalidConfig`] naming `cpu_sample_interval`). Each sample runs on tokio's
    /// blocking pool; a LeastCpu balancer's `cpu_cache_ttl` must be longer than this interval.
    /// The System and Process samplers are coarse below 200 ms (see [`CpuSampler`]).
    pub fn cpu_sample_interval(mut self, interval: Duration) -> Self {
        self.cpu_sample_interval = interval;
        self
    }

    /// Test hook (feature `test-hooks`, hidden from the docs); fault injection, default
    /// `false`: when `true` the node answers
    /// [`ControlRequest::CpuReading`](crate::ControlRequest::CpuReading) with bytes that do not
    /// decode, so the caller gets an [`Error::Codec`] instead of a reading. Its sampling and
    /// every other request are unaffected. Never enable it in production.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn cpu_reply_garbage(mut self, garbage: bool) -> Self {
        self.cpu_reply_garbage = garbage;
        self
    }

    /// Test hook (feature `test-hooks`, hidden from the docs); fault injection, default
    /// `false`: when `true` the node answers
    /// [`ControlRequest::CpuReading`](crate::ControlRequest::CpuReading) with an error, so the
    /// caller gets an [`Error::Remote`] (a LeastCpu Poller counts it as a `remote_error`)
    /// instead of a reading. Its sampling and every other request are unaffected; it takes
    /// precedence over `NodeConfig::cpu_reply_garbage`. Never enable it in production.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn cpu_reply_error(mut self, error: bool) -> Self {
        self.cpu_reply_error = error;
        self
    }

    /// Name parts that keep this node out of the balancers whose `node_match_list` doesn't ask
    /// for them (the original's `excluded_node_patterns`; default none): a filter of
    /// [`BalancerConfig::node_match_list`](crate::BalancerConfig::node_match_list) that matches
    /// this node still rejects it when one of `patterns` is contained in the node's short name
    /// (`name`, without the host) and not in the filter's text. So with `["_qa"]`, node
    /// `worker_qa` joins balancers filtered on `"worker_qa"` but not those filtered on
    /// `"worker"`. Balancers without a `node_match_list` take every node. The full rule is in
    /// [`filter`](crate::filter).
    ///
    /// An empty pattern is refused at start ([`Error::InvalidConfig`] naming
    /// `excluded_node_patterns`).
    ///
    /// ```
    /// use rpc_load_balancer::{BalancerConfig, NodeConfig};
    ///
    /// let node = NodeConfig::new("worker_qa", "127.0.0.1:0")
    ///     .cookie("secret")
    ///     .excluded_node_patterns(["_qa", "_canary"]);
    /// // On that node, a balancer filtered on "worker" leaves it out; one on "worker_qa" takes it.
    /// let excluded = ["_qa".to_string(), "_canary".to_string()];
    /// let workers = BalancerConfig::new("work").node_match_list(["worker"]);
    /// assert!(!workers.matches_excluding(&node.full_name(), &excluded));
    /// let qa = BalancerConfig::new("qa_work").node_match_list(["worker_qa"]);
    /// assert!(qa.matches_excluding(&node.full_name(), &excluded));
    /// ```
    pub fn excluded_node_patterns<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.excluded_node_patterns = patterns.into_iter().map(Into::into).collect();
        self
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
