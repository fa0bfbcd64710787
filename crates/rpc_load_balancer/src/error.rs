//! The one error type of the library, and the original's error codes.
//!
//! Every fallible operation returns [`Error`]. Each variant maps to one of the HTTP-flavoured
//! codes the Elixir original used (`request_timeout`, `service_unavailable`, `bad_request`)
//! through [`Error::code`], so dashboards and callers that branch on the original's codes keep
//! working.

mod called;
mod code;
mod detail;

use std::time::Duration;

use called::Called;
pub use code::ErrorCode;
pub use detail::{PayloadDirection, RemoteFailure, Unavailable};

/// Every error the library returns. Match on it, or branch on [`Error::code`] / [`Error::kind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No reply from `node` within `timeout`. The call may still run there.
    #[error("request to {node} timed out after {} ms", timeout.as_millis())]
    RequestTimeout {
        /// Full name (`name@host`) of the node that did not answer.
        node: String,
        /// The timeout that ran out.
        timeout: Duration,
    },
    /// `node` could not be reached, see [`Unavailable`].
    #[error("{node} is unavailable: {reason}")]
    ServiceUnavailable {
        /// Full name of the node.
        node: String,
        /// Why it could not be reached.
        reason: Unavailable,
    },
    /// `node` refused the request: unknown function or undecodable arguments.
    #[error("bad request to {node}: {message}")]
    BadRequest {
        /// Full name of the node that refused it.
        node: String,
        /// What was wrong, as the serving node saw it.
        message: String,
    },
    /// The remote function ran on `node` and failed or panicked.
    #[error("{function} on {node} {}: {message}", match failure { RemoteFailure::Failed => "failed", RemoteFailure::Panicked => "panicked" })]
    Remote {
        /// Full name of the node that ran it.
        node: String,
        /// The function's `NAME`.
        function: String,
        /// Returned error or panic.
        failure: RemoteFailure,
        /// The error's or panic's message.
        message: String,
    },
    /// An encoded call or reply is over the cluster's payload cap. Nothing was sent (argument)
    /// or the serving node sent this error instead of the reply; the session stays up. A call
    /// run in this process (a local member, `CallDirect`, `call_directly`, a call to this
    /// node's own name) is measured as if it were encoded and gets the same error: for an
    /// argument the function did not run, for a reply it did.
    #[error("{direction} payload of {size} bytes exceeds the {limit}-byte cap")]
    PayloadTooLarge {
        /// Which side was too large.
        direction: PayloadDirection,
        /// Encoded size in bytes.
        size: usize,
        /// The cap in bytes (`NodeConfig::max_payload_bytes`).
        limit: usize,
    },
    /// The arguments could not be encoded, or a reply could not be decoded into the caller's
    /// `Reply` type (the two sides disagree on the function's types).
    #[error("codec error for {function}: {message}")]
    Codec {
        /// The function's `NAME`.
        function: String,
        /// The serde error.
        message: String,
    },
    /// The peer speaks another wire version of this library.
    #[error("{node} speaks wire version {remote}, this node speaks {local}")]
    WireVersion {
        /// Full name of the node.
        node: String,
        /// Our wire version.
        local: u16,
        /// The peer's wire version.
        remote: u16,
    },
    /// No session to `addr` reached the ready state within the connect bound.
    #[error("could not connect to {addr}: {reason}")]
    ConnectFailed {
        /// The address dialled.
        addr: String,
        /// What was seen: refused TCP connect, TLS handshake failed (untrusted certificate,
        /// a plaintext peer), handshake rejected (wrong cookie, duplicate node name, TLS on one
        /// side only), or no answer.
        reason: String,
    },
    /// Fewer than `wanted` peers were connected when the wait ran out.
    #[error("only {connected} of {wanted} peers connected within {} ms", timeout.as_millis())]
    PeersNotReady {
        /// Peers asked for.
        wanted: usize,
        /// Peers connected at the deadline.
        connected: usize,
        /// How long it waited.
        timeout: Duration,
    },
    /// A configuration option is invalid; `option` is its builder name.
    #[error("invalid option `{option}`: {reason}")]
    InvalidConfig {
        /// The option's name, e.g. `"max_payload_bytes"`.
        option: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// A function of that name is already registered on this node.
    #[error("a function named {name} is already registered")]
    DuplicateFunction {
        /// The function's `NAME`.
        name: String,
    },
    /// The balancer (or actor group) has no members (the original's `service_unavailable`, "no
    /// members registered"). The message names what was called: `balancer {name}`, or
    /// `actor group {scope}/{group}`.
    #[error("no members registered for {}", Called(balancer))]
    NoMembers {
        /// The balancer's name; for an [actor group](crate::group) `"{scope}/{group}"` (a
        /// balancer's name never holds a `/`).
        balancer: String,
    },
    /// The balancer has members, but the algorithm may pick none of them (e.g. every member
    /// weighs 0 under WeightedRoundRobin).
    #[error("no eligible member for {}: {reason}", Called(balancer))]
    NoEligibleMembers {
        /// The balancer's name; for an actor group `"{scope}/{group}"`.
        balancer: String,
        /// Why none is eligible.
        reason: String,
    },
    /// No connected node (nor this one) matched a random-node call's filter, over every
    /// attempt its retry allowed (the original's "no nodes in cluster found with that
    /// filter").
    #[error("no nodes in cluster found with filter {filter}")]
    NoMatchingNodes {
        /// The filter, as displayed (`"text"` or `/regex/`).
        filter: String,
    },
    /// The chosen member already has `limit` calls in flight from this node (the balancer's
    /// `max_in_flight_per_member`): refused at once instead of queueing.
    #[error(
        "{node} already has {limit} calls in flight from this node for {}",
        Called(balancer)
    )]
    Overloaded {
        /// The balancer's name; for an actor group `"{scope}/{group}"`.
        balancer: String,
        /// Full name of the member.
        node: String,
        /// The cap that was reached.
        limit: usize,
    },
    /// No balancer of that name was started on this node.
    #[error("{} is not started on this node", Called(balancer))]
    UnknownBalancer {
        /// The balancer's name; for a stopped actor group `"{scope}/{group}"`.
        balancer: String,
    },
    /// A balancer of that name is already running on this node.
    #[error("balancer {balancer} is already started on this node")]
    BalancerAlreadyStarted {
        /// The balancer's name.
        balancer: String,
    },
    /// No `Node` runs in this process (start one before balancers).
    #[error("no Node is running in this process")]
    NodeNotRunning,
    /// A `Node` is already running in this process (pg membership is process-wide, so one
    /// process is one node).
    #[error("a Node is already running in this process")]
    NodeAlreadyRunning,
    /// A node or balancer could not start (bind failure, actor spawn failure); the reason
    /// names which.
    #[error("failed to start: {reason}")]
    Startup {
        /// The underlying failure.
        reason: String,
    },
}

impl Error {
    /// The original's code for this error (reference: `ErrorMessage.code`).
    ///
    /// Timeouts are `request_timeout`; unreachable nodes and remote failures are
    /// `service_unavailable` (the original reports remote exceptions that way); request
    /// problems are `bad_request`; local misuse is `internal_error`.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::RequestTimeout { .. } => ErrorCode::RequestTimeout,
            Self::ServiceUnavailable { .. }
            | Self::Remote { .. }
            | Self::WireVersion { .. }
            | Self::ConnectFailed { .. }
            | Self::PeersNotReady { .. }
            | Self::NoMembers { .. }
            | Self::NoEligibleMembers { .. }
            | Self::NoMatchingNodes { .. }
            | Self::Overloaded { .. } => ErrorCode::ServiceUnavailable,
            Self::BadRequest { .. }
            | Self::PayloadTooLarge { .. }
            | Self::Codec { .. }
            | Self::InvalidConfig { .. }
            | Self::DuplicateFunction { .. }
            | Self::UnknownBalancer { .. } => ErrorCode::BadRequest,
            Self::NodeAlreadyRunning
            | Self::NodeNotRunning
            | Self::BalancerAlreadyStarted { .. }
            | Self::Startup { .. } => ErrorCode::InternalError,
        }
    }

    /// A short stable name of the variant, in snake case (`"request_timeout"`,
    /// `"service_unavailable"`, `"bad_request"`, `"remote"`, `"payload_too_large"`, `"codec"`,
    /// `"wire_version"`, `"connect_failed"`, `"peers_not_ready"`, `"invalid_config"`,
    /// `"duplicate_function"`, `"no_members"`, `"no_eligible_members"`, `"no_matching_nodes"`,
    /// `"overloaded"`, `"unknown_balancer"`, `"balancer_already_started"`,
    /// `"node_not_running"`, `"node_already_running"`, `"startup"`). Used as a metric label
    /// and in the `rpclb` binary's `--json` output.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RequestTimeout { .. } => "request_timeout",
            Self::ServiceUnavailable { .. } => "service_unavailable",
            Self::BadRequest { .. } => "bad_request",
            Self::Remote { .. } => "remote",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Codec { .. } => "codec",
            Self::WireVersion { .. } => "wire_version",
            Self::ConnectFailed { .. } => "connect_failed",
            Self::PeersNotReady { .. } => "peers_not_ready",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::DuplicateFunction { .. } => "duplicate_function",
            Self::NoMembers { .. } => "no_members",
            Self::NoEligibleMembers { .. } => "no_eligible_members",
            Self::NoMatchingNodes { .. } => "no_matching_nodes",
            Self::Overloaded { .. } => "overloaded",
            Self::UnknownBalancer { .. } => "unknown_balancer",
            Self::BalancerAlreadyStarted { .. } => "balancer_already_started",
            Self::NodeNotRunning => "node_not_running",
            Self::NodeAlreadyRunning => "node_already_running",
            Self::Startup { .. } => "startup",
        }
    }

    /// The node the error is about, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::RequestTimeout { node, .. }
            | Self::ServiceUnavailable { node, .. }
            | Self::BadRequest { node, .. }
            | Self::Remote { node, .. }
            | Self::WireVersion { node, .. }
            | Self::Overloaded { node, .. } => Some(node),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_original() {
        let timeout = Error::RequestTimeout {
            node: "a@h".into(),
            timeout: Duration::from_millis(5),
        };
        assert_eq!(timeout.code(), ErrorCode::RequestTimeout);
        assert_eq!(timeout.code().as_str(), "request_timeout");
        let down = Error::ServiceUnavailable {
            node: "a@h".into(),
            reason: Unavailable::ConnectionLost,
        };
        assert_eq!(down.code().as_str(), "service_unavailable");
        let remote = Error::Remote {
            node: "a@h".into(),
            function: "f".into(),
            failure: RemoteFailure::Panicked,
            message: "boom".into(),
        };
        assert_eq!(remote.code(), ErrorCode::ServiceUnavailable);
        let bad = Error::BadRequest {
            node: "a@h".into(),
            message: "unknown function".into(),
        };
        assert_eq!(bad.code().as_str(), "bad_request");
        let big = Error::PayloadTooLarge {
            direction: PayloadDirection::Reply,
            size: 10,
            limit: 5,
        };
        assert_eq!(big.code(), ErrorCode::BadRequest);
        assert_eq!(Error::NodeAlreadyRunning.code(), ErrorCode::InternalError);
    }

    #[test]
    fn messages_name_the_node_and_limits() {
        let timeout = Error::RequestTimeout {
            node: "b@127.0.0.1".into(),
            timeout: Duration::from_millis(250),
        };
        assert_eq!(
            timeout.to_string(),
            "request to b@127.0.0.1 timed out after 250 ms"
        );
        assert_eq!(timeout.node(), Some("b@127.0.0.1"));
        let big = Error::PayloadTooLarge {
            direction: PayloadDirection::Argument,
            size: 10,
            limit: 5,
        };
        assert_eq!(
            big.to_string(),
            "argument payload of 10 bytes exceeds the 5-byte cap"
        );
        assert_eq!(big.node(), None);
        let cfg = Error::InvalidConfig {
            option: "max_payload_bytes",
            reason: "too big".into(),
        };
        assert!(cfg.to_string().contains("max_payload_bytes"));
        assert_eq!(cfg.kind(), "invalid_config");
    }

    /// Errors of an actor group (its `balancer` field `"{scope}/{group}"`) name the group, and
    /// a balancer's name the balancer; the field keeps the name as it was.
    #[test]
    fn messages_name_an_actor_group_or_a_balancer() {
        let group = Error::NoMembers {
            balancer: "app/doublers".into(),
        };
        assert_eq!(
            group.to_string(),
            "no members registered for actor group app/doublers"
        );
        let balancer = Error::NoMembers {
            balancer: "reports".into(),
        };
        assert_eq!(
            balancer.to_string(),
            "no members registered for balancer reports"
        );
        let stopped = Error::UnknownBalancer {
            balancer: "app/doublers".into(),
        };
        assert_eq!(
            stopped.to_string(),
            "actor group app/doublers is not started on this node"
        );
        let none = Error::NoEligibleMembers {
            balancer: "app/doublers".into(),
            reason: "every weight is 0".into(),
        };
        assert!(none
            .to_string()
            .starts_with("no eligible member for actor group app/doublers"));
        let full = Error::Overloaded {
            balancer: "app/doublers".into(),
            node: "a@h".into(),
            limit: 2,
        };
        assert!(full.to_string().ends_with("for actor group app/doublers"));
    }
}
