//! How long things may take: calls, connects, heartbeats, redials.

use std::time::Duration;

use super::NodeConfig;

impl NodeConfig {
    /// Timeout of a call that doesn't set its own; default 10 s, must be > 0.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How long [`Node::connect`](crate::Node::connect) waits for a session to reach the ready
    /// state; default 5 s, from 1 ms to 3,600,000 ms (1 hour).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How often this node sends its heartbeats (default 1,000 ms; at least 50 ms and at most
    /// a third of `heartbeat_timeout`, checked at start): all at once, to each connected peer
    /// whose own heartbeat has not reached this node within the interval and from which
    /// nothing else was read within it either (of two nodes, one heartbeats the other, which
    /// answers; none while other traffic flows).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// How long a peer may go unheard from (no answer to this node's heartbeats, no heartbeat
    /// of its own, nothing read from its session) before its session is stopped, so that a hung peer (e.g. a paused process)
    /// leaves every balancer's members and the calls in flight to it fail instead of waiting
    /// out their timeouts (default 3,000 ms; 300 ms to 3,600,000 ms = 1 hour, checked at
    /// start: shorter, ordinary scheduling delays would drop healthy peers). Two cases get
    /// more: time this node itself did not get to run (its heartbeat timer fired late) is not
    /// counted against the peer, and while the mesh around this node forms (8 sessions up
    /// within this timeout, every node busy with handshakes) a peer may be silent for twice
    /// this.
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.heartbeat_timeout = timeout;
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
}
