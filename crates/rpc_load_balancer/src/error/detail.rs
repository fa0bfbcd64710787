//! What some errors carry to say more: which side of a call a too-large payload was on, why a
//! node could not be reached, and whether a remote function failed or panicked.

/// Which side of a call a too-large payload was on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadDirection {
    /// The encoded call (header plus arguments) the caller was about to send.
    Argument,
    /// The encoded reply the serving node produced.
    Reply,
}

impl std::fmt::Display for PayloadDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Argument => "argument",
            Self::Reply => "reply",
        })
    }
}

/// Why a node could not be reached ([`Error::ServiceUnavailable`](super::Error::ServiceUnavailable)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unavailable {
    /// No session to a node of that name is up (never connected, or disconnected earlier).
    UnknownNode,
    /// The node is connected but serves no rpc endpoint (it is not an rpc_load_balancer node,
    /// or it is shutting down).
    NoEndpoint,
    /// The message could not be handed to the node: its session closed before the send.
    Disconnected,
    /// The call was sent, then the connection was lost (node killed or session closed) before
    /// a reply arrived. The call may or may not have run.
    ConnectionLost,
    /// The local node is not running (it was shut down).
    NodeStopped,
    /// The member is leaving its balancer (draining) and refused the call unrun.
    Leaving,
    /// The serving node is at its concurrency cap — node-wide
    /// (`NodeConfig::max_concurrent_calls`) or the function's
    /// (`NodeConfig::function_max_concurrent_calls`) — and refused the call unrun (pushback).
    /// A routed call gets it only when no other member could take the call within its
    /// deadline (each refusing member was tried once, at most 3 more after the first); a
    /// direct call gets it at once. A load signal, not a failure: learning selectors and
    /// outlier ejection do not count it. Safe to retry later: the call did not run.
    Overloaded,
}

impl Unavailable {
    /// A short stable name of the reason, in snake case (`"unknown_node"`, `"no_endpoint"`,
    /// `"disconnected"`, `"connection_lost"`, `"node_stopped"`, `"leaving"`,
    /// `"overloaded"`), for logs, labels and JSON output.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::UnknownNode => "unknown_node",
            Self::NoEndpoint => "no_endpoint",
            Self::Disconnected => "disconnected",
            Self::ConnectionLost => "connection_lost",
            Self::NodeStopped => "node_stopped",
            Self::Leaving => "leaving",
            Self::Overloaded => "overloaded",
        }
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::UnknownNode => "no connection to a node of that name",
            Self::NoEndpoint => "node serves no rpc endpoint",
            Self::Disconnected => "node disconnected before the call was sent",
            Self::ConnectionLost => "connection lost while the call was in flight",
            Self::NodeStopped => "the local node is stopped",
            Self::Leaving => "the member is leaving the balancer and did not run the call",
            Self::Overloaded => {
                "the node is at its concurrency cap and did not run the call (pushback)"
            }
        })
    }
}

/// Whether a remote failure was an error the function returned or a panic in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteFailure {
    /// The function body returned `Err(FunctionError)`.
    Failed,
    /// The function body panicked; the serving node caught it and kept serving.
    Panicked,
}
