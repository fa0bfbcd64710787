//! Checking a [`NodeConfig`] once, at start: every option's range and form, the first bad one
//! named in [`Error::InvalidConfig`]; and the parts of it that need parsing ([`ValidConfig`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{NodeConfig, MAX_PAYLOAD_CAP_BYTES};
use crate::Error;

/// Range of [`NodeConfig::max_handshakes`].
const MAX_HANDSHAKES_RANGE: std::ops::RangeInclusive<usize> = 1..=65_536;

/// Range of [`NodeConfig::max_dials_in_flight`].
const MAX_DIALS_IN_FLIGHT_RANGE: std::ops::RangeInclusive<usize> = 1..=1_024;

/// Range of [`NodeConfig::handshake_frame_limit`], bytes: 1 KiB to 1 MiB.
const HANDSHAKE_FRAME_LIMIT_RANGE: std::ops::RangeInclusive<usize> = 1_024..=(1 << 20);

impl NodeConfig {
    /// Checks every option; the first bad one is named in the error.
    /// For [`Node::attach`](crate::Node::attach) the listen address and cookie belong to the
    /// app's own NodeServer and are not checked (`attached = true`).
    pub(crate) fn validate(&self, attached: bool) -> Result<ValidConfig, Error> {
        let invalid =
            |option: &'static str, reason: String| Error::InvalidConfig { option, reason };
        if self.name.is_empty() || self.name.contains(['@', ' ', '/']) {
            return Err(invalid(
                "name",
                format!(
                    "{:?} must be non-empty without '@', '/' or spaces (the host is added)",
                    self.name
                ),
            ));
        }
        let listen: SocketAddr = match self.listen.parse() {
            Ok(listen) => listen,
            Err(_) if attached => SocketAddr::from(([127, 0, 0, 1], 0)),
            Err(e) => {
                return Err(invalid(
                    "listen",
                    format!("{:?} is not an ip:port address: {e}", self.listen),
                ))
            }
        };
        let host = self.host();
        if host.is_empty()
            || host.contains(['@', ' ', '/'])
            || (host.contains(':') && !host.starts_with('['))
        {
            return Err(invalid(
                "advertise_host",
                format!("{host:?} is not a host name or IPv4 address (bracket IPv6: [::1])"),
            ));
        }
        if listen.ip().is_unspecified() && self.advertise_host.is_none() {
            return Err(invalid(
                "advertise_host",
                format!("listening on {listen} needs an advertise_host other nodes can dial"),
            ));
        }
        if self.sparse_mesh && attached {
            return Err(invalid(
                "sparse_mesh",
                "not for Node::attach: an attached node has no address of its own to put in the \
                 node directory, so no peer could dial it as a subset member or count it as a \
                 caller"
                    .into(),
            ));
        }
        if self.cookie.is_empty() && !attached {
            return Err(invalid(
                "cookie",
                "must be set to the cluster's shared secret".into(),
            ));
        }
        for peer in &self.peers {
            if !peer.contains(':') {
                return Err(invalid(
                    "peers",
                    format!("{peer:?} is not a host:port address"),
                ));
            }
        }
        if self.max_payload_bytes == 0 || self.max_payload_bytes > MAX_PAYLOAD_CAP_BYTES {
            return Err(invalid(
                "max_payload_bytes",
                format!(
                    "{} must be between 1 and {MAX_PAYLOAD_CAP_BYTES} (below ractor_cluster's 16 MiB frame limit)",
                    self.max_payload_bytes
                ),
            ));
        }
        if self.call_timeout.is_zero() {
            return Err(invalid("call_timeout", "must be greater than 0".into()));
        }
        // Bounds of the time options: below the minimums a node flaps with the whole cluster
        // (a heartbeat missed under ordinary scheduling delay drops the peer); above an hour a
        // value is a mistake (`u64::MAX` ms), not a setting.
        const MAX_TIME_OPTION: Duration = Duration::from_secs(3_600);
        const MIN_HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(300);
        const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(50);
        const MIN_DIAL_BACKOFF_MAX: Duration = Duration::from_millis(100);
        let ms = |d: Duration| d.as_millis();
        if self.connect_timeout.is_zero() || self.connect_timeout > MAX_TIME_OPTION {
            return Err(invalid(
                "connect_timeout",
                format!(
                    "{} ms must be between 1 ms and {} ms (1 hour)",
                    ms(self.connect_timeout),
                    ms(MAX_TIME_OPTION)
                ),
            ));
        }
        if self.heartbeat_timeout < MIN_HEARTBEAT_TIMEOUT
            || self.heartbeat_timeout > MAX_TIME_OPTION
        {
            return Err(invalid(
                "heartbeat_timeout",
                format!(
                    "{} ms must be between {} ms and {} ms (1 hour)",
                    ms(self.heartbeat_timeout),
                    ms(MIN_HEARTBEAT_TIMEOUT),
                    ms(MAX_TIME_OPTION)
                ),
            ));
        }
        // (heartbeat_timeout ≤ 1 hour, so a third of it is too.)
        let beyond_a_third = self
            .heartbeat_interval
            .checked_mul(3)
            .is_none_or(|three| three > self.heartbeat_timeout);
        if self.heartbeat_interval < MIN_HEARTBEAT_INTERVAL || beyond_a_third {
            return Err(invalid(
                "heartbeat_interval",
                format!(
                    "{} ms must be between {} ms and a third of heartbeat_timeout ({} ms, so at \
                     most {} ms)",
                    ms(self.heartbeat_interval),
                    ms(MIN_HEARTBEAT_INTERVAL),
                    ms(self.heartbeat_timeout),
                    ms(self.heartbeat_timeout / 3)
                ),
            ));
        }
        if self.dial_backoff_max < MIN_DIAL_BACKOFF_MAX || self.dial_backoff_max > MAX_TIME_OPTION {
            return Err(invalid(
                "dial_backoff_max",
                format!(
                    "{} ms must be between {} ms and {} ms (1 hour)",
                    ms(self.dial_backoff_max),
                    ms(MIN_DIAL_BACKOFF_MAX),
                    ms(MAX_TIME_OPTION)
                ),
            ));
        }
        if self.cpu_sample_interval.is_zero() {
            return Err(invalid("cpu_sample_interval", "must be above 0 ms".into()));
        }
        if !MAX_HANDSHAKES_RANGE.contains(&self.max_handshakes) {
            return Err(invalid(
                "max_handshakes",
                format!(
                    "{} must be between {} and {} connections",
                    self.max_handshakes,
                    MAX_HANDSHAKES_RANGE.start(),
                    MAX_HANDSHAKES_RANGE.end()
                ),
            ));
        }
        if !MAX_DIALS_IN_FLIGHT_RANGE.contains(&self.max_dials_in_flight) {
            return Err(invalid(
                "max_dials_in_flight",
                format!(
                    "{} must be between {} and {} dials",
                    self.max_dials_in_flight,
                    MAX_DIALS_IN_FLIGHT_RANGE.start(),
                    MAX_DIALS_IN_FLIGHT_RANGE.end()
                ),
            ));
        }
        if !HANDSHAKE_FRAME_LIMIT_RANGE.contains(&self.handshake_frame_limit) {
            return Err(invalid(
                "handshake_frame_limit",
                format!(
                    "{} must be between {} and {} bytes",
                    self.handshake_frame_limit,
                    HANDSHAKE_FRAME_LIMIT_RANGE.start(),
                    HANDSHAKE_FRAME_LIMIT_RANGE.end()
                ),
            ));
        }
        if self.excluded_node_patterns.iter().any(String::is_empty) {
            return Err(invalid(
                "excluded_node_patterns",
                "an empty pattern is contained in every name".into(),
            ));
        }
        if self.max_concurrent_calls == Some(0) {
            return Err(invalid(
                "max_concurrent_calls",
                "0 would refuse every call (leave it unset for no cap)".into(),
            ));
        }
        for (function, cap) in &self.function_max_concurrent_calls {
            if function.is_empty() || *cap == 0 {
                return Err(invalid(
                    "function_max_concurrent_calls",
                    format!("{function:?}: {cap} needs a function name and a cap of at least 1"),
                ));
            }
        }
        self.labels.validate()?;
        Ok(ValidConfig {
            bind_ip: listen.ip(),
            port: listen.port(),
            host,
        })
    }
}

/// The parts of a checked config that need parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidConfig {
    pub(crate) bind_ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) host: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> NodeConfig {
        NodeConfig::new("a", "127.0.0.1:0").cookie("c")
    }

    fn option_of(config: NodeConfig) -> &'static str {
        match config.validate(false) {
            Err(Error::InvalidConfig { option, .. }) => option,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_option_is_named() {
        assert_eq!(
            option_of(NodeConfig::new("", "127.0.0.1:0").cookie("c")),
            "name"
        );
        assert_eq!(
            option_of(NodeConfig::new("a@b", "127.0.0.1:0").cookie("c")),
            "name"
        );
        assert_eq!(
            option_of(NodeConfig::new("a", "localhost").cookie("c")),
            "listen"
        );
        assert_eq!(
            option_of(NodeConfig::new("a", "0.0.0.0:1").cookie("c")),
            "advertise_host"
        );
        assert_eq!(option_of(ok().advertise_host("x@y")), "advertise_host");
        assert_eq!(option_of(NodeConfig::new("a", "127.0.0.1:0")), "cookie");
        assert_eq!(option_of(ok().peers(["nohost"])), "peers");
        assert_eq!(option_of(ok().max_payload_bytes(0)), "max_payload_bytes");
        assert_eq!(
            option_of(ok().max_payload_bytes(16 << 20)),
            "max_payload_bytes"
        );
        assert_eq!(option_of(ok().call_timeout(Duration::ZERO)), "call_timeout");
        assert_eq!(
            option_of(ok().connect_timeout(Duration::ZERO)),
            "connect_timeout"
        );
        assert_eq!(
            option_of(ok().dial_backoff_max(Duration::from_millis(5))),
            "dial_backoff_max"
        );
        assert_eq!(
            option_of(ok().cpu_sample_interval(Duration::ZERO)),
            "cpu_sample_interval"
        );
        assert_eq!(
            option_of(ok().excluded_node_patterns(["_qa", ""])),
            "excluded_node_patterns"
        );
        assert_eq!(option_of(ok().max_handshakes(0)), "max_handshakes");
        assert_eq!(
            option_of(ok().max_concurrent_calls(0)),
            "max_concurrent_calls"
        );
        assert_eq!(
            option_of(ok().function_max_concurrent_calls("f", 0)),
            "function_max_concurrent_calls"
        );
        assert_eq!(
            option_of(ok().function_max_concurrent_calls("", 3)),
            "function_max_concurrent_calls"
        );
        assert!(ok()
            .max_concurrent_calls(1)
            .function_max_concurrent_calls("f", 1)
            .validate(false)
            .is_ok());
        assert_eq!(option_of(ok().max_handshakes(65_537)), "max_handshakes");
        assert!(ok().max_handshakes(1).validate(false).is_ok());
        assert_eq!(
            option_of(ok().max_dials_in_flight(0)),
            "max_dials_in_flight"
        );
        assert_eq!(
            option_of(ok().max_dials_in_flight(1_025)),
            "max_dials_in_flight"
        );
        assert!(ok().max_dials_in_flight(1).validate(false).is_ok());
        assert!(ok().max_dials_in_flight(1_024).validate(false).is_ok());
        assert_eq!(
            option_of(ok().handshake_frame_limit(1_023)),
            "handshake_frame_limit"
        );
        assert_eq!(
            option_of(ok().handshake_frame_limit((1 << 20) + 1)),
            "handshake_frame_limit"
        );
        assert!(ok()
            .handshake_frame_limit(1 << 20)
            .max_handshakes(65_536)
            .validate(false)
            .is_ok());
        assert_eq!(
            option_of(ok().heartbeat_timeout(Duration::ZERO)),
            "heartbeat_timeout"
        );
        assert_eq!(
            option_of(ok().heartbeat_interval(Duration::from_millis(1_001))),
            "heartbeat_interval",
            "more than a third of the 3 s timeout"
        );
        assert_eq!(
            option_of(ok().heartbeat_interval(Duration::ZERO)),
            "heartbeat_interval"
        );
        assert!(ok()
            .heartbeat_interval(Duration::from_millis(100))
            .heartbeat_timeout(Duration::from_millis(300))
            .validate(false)
            .is_ok());
        // Tiny heartbeats make a node flap with the whole cluster.
        assert_eq!(
            option_of(
                ok().heartbeat_interval(Duration::from_millis(1))
                    .heartbeat_timeout(Duration::from_millis(3))
            ),
            "heartbeat_timeout"
        );
        assert_eq!(
            option_of(ok().heartbeat_timeout(Duration::from_millis(299))),
            "heartbeat_timeout"
        );
        assert_eq!(
            option_of(
                ok().heartbeat_interval(Duration::from_millis(49))
                    .heartbeat_timeout(Duration::from_millis(300))
            ),
            "heartbeat_interval"
        );
        assert!(ok()
            .heartbeat_interval(Duration::from_millis(50))
            .heartbeat_timeout(Duration::from_millis(300))
            .validate(false)
            .is_ok());
        // Absurdly long values (u64::MAX ms, what a negative flag wraps to) are refused too;
        // 1 hour is the longest.
        let hour = Duration::from_secs(3_600);
        let forever = Duration::from_millis(u64::MAX);
        assert_eq!(
            option_of(ok().heartbeat_timeout(forever)),
            "heartbeat_timeout"
        );
        assert_eq!(
            option_of(ok().heartbeat_timeout(hour + Duration::from_millis(1))),
            "heartbeat_timeout"
        );
        assert_eq!(
            option_of(ok().heartbeat_interval(forever).heartbeat_timeout(hour)),
            "heartbeat_interval"
        );
        assert_eq!(
            option_of(ok().heartbeat_interval(Duration::MAX)),
            "heartbeat_interval",
            "no overflow checking a third"
        );
        assert_eq!(
            option_of(ok().dial_backoff_max(forever)),
            "dial_backoff_max"
        );
        assert_eq!(option_of(ok().connect_timeout(forever)), "connect_timeout");
        assert_eq!(
            option_of(ok().connect_timeout(hour + Duration::from_millis(1))),
            "connect_timeout"
        );
        assert!(ok()
            .heartbeat_timeout(hour)
            .heartbeat_interval(hour / 3)
            .dial_backoff_max(hour)
            .connect_timeout(hour)
            .validate(false)
            .is_ok());
    }

    #[test]
    fn out_of_range_errors_state_the_range() {
        let reason_of = |config: NodeConfig| match config.validate(false) {
            Err(Error::InvalidConfig { reason, .. }) => reason,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        let forever = Duration::from_millis(u64::MAX);
        assert_eq!(
            reason_of(ok().heartbeat_timeout(Duration::from_millis(3))),
            "3 ms must be between 300 ms and 3600000 ms (1 hour)"
        );
        assert_eq!(
            reason_of(ok().heartbeat_interval(Duration::from_millis(1))),
            "1 ms must be between 50 ms and a third of heartbeat_timeout (3000 ms, so at most \
             1000 ms)"
        );
        assert_eq!(
            reason_of(ok().dial_backoff_max(forever)),
            format!(
                "{} ms must be between 100 ms and 3600000 ms (1 hour)",
                u64::MAX
            )
        );
        assert_eq!(
            reason_of(ok().connect_timeout(Duration::ZERO)),
            "0 ms must be between 1 ms and 3600000 ms (1 hour)"
        );
        let shown = Error::InvalidConfig {
            option: "heartbeat_timeout",
            reason: reason_of(ok().heartbeat_timeout(forever)),
        }
        .to_string();
        assert!(
            shown.starts_with("invalid option `heartbeat_timeout`: ") && shown.contains("300 ms"),
            "{shown}"
        );
    }
}
