//! Defaults of the calls made on this node and what it lets others do: the payload cap, the
//! retry of routed calls, running calls locally, remote admin, and the node patterns kept out
//! of balancers.

use super::NodeConfig;
#[cfg(doc)]
use super::{DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_CAP_BYTES};
#[cfg(doc)]
use crate::Error;

impl NodeConfig {
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
}
