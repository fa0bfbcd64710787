//! The original's error codes ([`ErrorCode`]), which [`Error::code`](super::Error::code) maps
//! every error to.

/// The original's error codes (`ErrorMessage.code`), HTTP-flavoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `:request_timeout`: no reply within the call's timeout.
    RequestTimeout,
    /// `:service_unavailable`: no connection, no members, or the remote function failed
    /// (the original reports remote exceptions with this code).
    ServiceUnavailable,
    /// `:bad_request`: the request itself is wrong (unknown function, undecodable or oversized
    /// payload, invalid option).
    BadRequest,
    /// Not in the original: a local misuse or startup failure (e.g. a second `Node` in one
    /// process, a port that cannot be bound).
    InternalError,
}

impl ErrorCode {
    /// The code as the original spells it: `"request_timeout"`, `"service_unavailable"`,
    /// `"bad_request"` or `"internal_error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestTimeout => "request_timeout",
            Self::ServiceUnavailable => "service_unavailable",
            Self::BadRequest => "bad_request",
            Self::InternalError => "internal_error",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
