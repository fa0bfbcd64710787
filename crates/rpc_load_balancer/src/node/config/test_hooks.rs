//! Test hooks of `NodeConfig` (feature `test-hooks`, hidden from the docs): fault injection
//! and another wire version, for tests. Not for production.

use super::NodeConfig;
#[cfg(doc)]
use crate::Error;

impl NodeConfig {
    /// Test hook (feature `test-hooks`, hidden from the docs): the wire version this node
    /// speaks (default [`WIRE_VERSION`](crate::WIRE_VERSION)), to run a node of "another
    /// version" in compatibility tests. It is process-wide, like the node. Not for production.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    pub fn wire_version(mut self, version: u16) -> Self {
        self.wire_version = version;
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
}
