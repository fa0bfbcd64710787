//! How many calls this node serves at once: the node-wide and per-function concurrency caps.
//! A call over a cap is refused at once, unrun, and its caller sends it to another member
//! (pushback; docs/how-to/deadlines-and-overload.md).

use super::NodeConfig;
#[cfg(doc)]
use crate::{Error, Unavailable};

impl NodeConfig {
    /// Most calls this node serves at once, every function together (default: no cap); 0 is
    /// refused at start ([`Error::InvalidConfig`] naming `max_concurrent_calls`).
    ///
    /// Counted: calls sent by other nodes (directly or through a balancer) and calls run here
    /// in-process (a local member, `call_directly`, `CallDirect`), from their arrival to their
    /// reply. Casts are neither counted nor refused (a cast has no reply to say it was
    /// refused). A call that arrives with the cap reached is **refused at once without
    /// running**: its reply hands the call back with the node's load report, and a routed
    /// call's caller sends it to another member within the same deadline (as for a member
    /// that is leaving). A caller gets [`Error::ServiceUnavailable`] with
    /// [`Unavailable::Overloaded`] only when no member could take it, or for a direct call.
    /// The refusal is a load signal: learning selectors and outlier ejection do not count it
    /// as a failure. Set it a little above the concurrency the node sustains within its
    /// callers' deadlines; with it, excess load goes to other members at once instead of
    /// queueing here until it times out.
    pub fn max_concurrent_calls(mut self, cap: usize) -> Self {
        self.max_concurrent_calls = Some(cap);
        self
    }

    /// Most calls of the function named `function` (its [`RemoteFunction::NAME`]) this node
    /// serves at once (default: no cap), counted and refused as for
    /// [`max_concurrent_calls`](Self::max_concurrent_calls), which still applies. Call it once
    /// per function; a name given twice keeps its last cap. A cap of 0 or an empty name is
    /// refused at start ([`Error::InvalidConfig`] naming `function_max_concurrent_calls`); a
    /// name this node never registers caps nothing.
    ///
    /// A cap per function, rather than one per balancer, protects what a function needs that
    /// the node has little of (a pool of database connections, a GPU): its other functions
    /// keep being served. It is set on the node (not on the `RemoteFunction` type) because it
    /// depends on where the function runs — the machine, the pool sizes — not on the code.
    ///
    /// ```
    /// use rpc_load_balancer::NodeConfig;
    ///
    /// let config = NodeConfig::new("worker_a", "127.0.0.1:0")
    ///     .cookie("secret")
    ///     .max_concurrent_calls(256)
    ///     .function_max_concurrent_calls("reports.generate", 8);
    /// # let _ = config;
    /// ```
    ///
    /// [`RemoteFunction::NAME`]: crate::RemoteFunction::NAME
    pub fn function_max_concurrent_calls(
        mut self,
        function: impl Into<String>,
        cap: usize,
    ) -> Self {
        self.function_max_concurrent_calls
            .push((function.into(), cap));
        self
    }
}
