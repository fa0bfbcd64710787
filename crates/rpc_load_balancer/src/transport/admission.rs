//! Admission: the serving node's concurrency caps (pushback). A call over a cap is refused at
//! once, unrun, and its caller sends it to another member (issue 19 item 6).
//!
//! Two caps, both off by default: the node's (`NodeConfig::max_concurrent_calls`: calls
//! running here, every function) and a function's
//! (`NodeConfig::function_max_concurrent_calls`: calls of that function running here). A call
//! is admitted when it is under both; it then holds a [`Permit`] until it has ended, however
//! it ends. What is counted: the **calls** this node serves — sent by another node (to its
//! endpoint or a balancer member) and run here in-process (a local member, `call_directly`,
//! `CallDirect`, a call to this node's own name). **Casts** are neither counted nor refused:
//! a cast has no reply to carry a refusal, so refusing one would lose it silently.
//!
//! A cap is a count compared with a limit (`fetch_add`, then undone when over): no queue, no
//! lock, no allocation; with no cap set, admission is one branch. Envoy's cluster circuit
//! breaker `max_requests` and Finagle's server-side admission control are the same idea; the
//! refusal's reply is what gRPC calls pushback (see docs/how-to/deadlines-and-overload.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::wire::header::decode_call;

/// One cap: the calls it admitted that have not ended, and its limit.
#[derive(Debug)]
struct Cap {
    limit: usize,
    running: AtomicUsize,
}

impl Cap {
    fn new(limit: usize) -> Arc<Cap> {
        Arc::new(Cap {
            limit,
            running: AtomicUsize::new(0),
        })
    }

    /// Counts one call if it is under the limit; whether it was.
    fn enter(&self) -> bool {
        if self.running.fetch_add(1, Ordering::AcqRel) < self.limit {
            return true;
        }
        self.running.fetch_sub(1, Ordering::AcqRel);
        false
    }

    fn exit(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Which cap refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The node's cap (`max_concurrent_calls`) of `limit` calls.
    Node { limit: usize },
    /// The function's cap (`function_max_concurrent_calls`) of `limit` calls.
    Function { limit: usize },
}

impl Refused {
    /// The `cap` label of the refusal's metric: `node` or `function`.
    pub(crate) fn cap(self) -> &'static str {
        match self {
            Refused::Node { .. } => "node",
            Refused::Function { .. } => "function",
        }
    }

    /// The limit that was reached.
    pub(crate) fn limit(self) -> usize {
        match self {
            Refused::Node { limit } | Refused::Function { limit } => limit,
        }
    }
}

/// An admitted call's place under the caps, given back when dropped (the call has ended).
/// Owned, so a run here can hold it in its task.
#[derive(Debug, Default)]
pub(crate) struct Permit {
    node: Option<Arc<Cap>>,
    function: Option<Arc<Cap>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(cap) = &self.node {
            cap.exit();
        }
        if let Some(cap) = &self.function {
            cap.exit();
        }
    }
}

/// The node's caps, fixed at start.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    node: Option<Arc<Cap>>,
    functions: HashMap<Box<str>, Arc<Cap>, foldhash::fast::RandomState>,
}

impl Admission {
    /// Caps of `node` calls at once (`None`: no cap) and of `functions` (name and calls at
    /// once; a name given twice keeps its last cap). Limits are validated by the node's config
    /// (at least 1).
    pub(crate) fn new(node: Option<usize>, functions: &[(String, usize)]) -> Self {
        Self {
            node: node.map(Cap::new),
            functions: functions
                .iter()
                .map(|(name, limit)| (Box::from(name.as_str()), Cap::new(*limit)))
                .collect(),
        }
    }

    /// Admits a call of `function`, or says which cap refused it.
    #[inline]
    pub(crate) fn admit(&self, function: &str) -> Result<Permit, Refused> {
        if self.node.is_none() && self.functions.is_empty() {
            return Ok(Permit::default());
        }
        self.admit_capped(Some(function))
    }

    /// [`Self::admit`] for an encoded call (its header names the function). A call whose
    /// header does not decode is admitted: serving it answers `BadRequest` at once.
    #[inline]
    pub(crate) fn admit_encoded(&self, call: &[u8]) -> Result<Permit, Refused> {
        if self.node.is_none() && self.functions.is_empty() {
            return Ok(Permit::default());
        }
        if self.functions.is_empty() {
            return self.admit_capped(None);
        }
        match decode_call(call) {
            Ok((header, _)) => self.admit_capped(Some(header.function)),
            Err(_) => Ok(Permit::default()),
        }
    }

    #[cold]
    fn admit_capped(&self, function: Option<&str>) -> Result<Permit, Refused> {
        let mut permit = Permit::default();
        if let Some(cap) = &self.node {
            if !cap.enter() {
                return Err(Refused::Node { limit: cap.limit });
            }
            permit.node = Some(Arc::clone(cap));
        }
        if let Some(cap) = function.and_then(|f| self.functions.get(f)) {
            if !cap.enter() {
                // (Dropping the permit gives back the node's place.)
                return Err(Refused::Function { limit: cap.limit });
            }
            permit.function = Some(Arc::clone(cap));
        }
        Ok(permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(admission: &Admission) -> usize {
        admission
            .node
            .as_ref()
            .map_or(0, |cap| cap.running.load(Ordering::Relaxed))
    }

    #[test]
    fn no_cap_admits_everything() {
        let admission = Admission::new(None, &[]);
        let permits: Vec<_> = (0..1000).map(|_| admission.admit("f").unwrap()).collect();
        assert_eq!(permits.len(), 1000);
        assert!(admission.admit_encoded(&[0xff]).is_ok());
    }

    #[test]
    fn the_node_cap_refuses_the_call_over_it_and_frees_a_place_when_one_ends() {
        let admission = Admission::new(Some(2), &[]);
        let a = admission.admit("f").unwrap();
        let _b = admission.admit("g").unwrap();
        assert_eq!(
            admission.admit("f").unwrap_err(),
            Refused::Node { limit: 2 }
        );
        assert_eq!(
            running(&admission),
            2,
            "a refusal leaves the count as it was"
        );
        drop(a);
        let _c = admission.admit("h").unwrap();
        assert_eq!(admission.admit("f").unwrap_err().cap(), "node");
    }

    #[test]
    fn a_function_cap_counts_that_function_only_and_gives_back_the_nodes_place() {
        let admission = Admission::new(Some(3), &[("slow".into(), 9), ("slow".into(), 1)]);
        let slow = admission.admit("slow").unwrap();
        let refused = admission.admit("slow").unwrap_err();
        assert_eq!(
            (refused, refused.cap(), refused.limit()),
            (Refused::Function { limit: 1 }, "function", 1)
        );
        assert_eq!(running(&admission), 1, "the node's place was given back");
        let _fast = admission.admit("fast").unwrap();
        let _fast2 = admission.admit("fast").unwrap();
        assert_eq!(
            admission.admit("fast").unwrap_err(),
            Refused::Node { limit: 3 }
        );
        drop(slow);
        assert!(admission.admit("slow").is_ok());
    }

    #[test]
    fn an_encoded_call_is_admitted_by_its_headers_function() {
        let admission = Admission::new(None, &[("f".into(), 1)]);
        let header = crate::wire::header::CallHeader {
            function: "f",
            balancer: None,
            deadline_ms: 5,
            call_id: 1,
            raw_args: false,
            trace: None,
        };
        let call = crate::wire::header::encode_call(&header, &1u8).unwrap();
        let permit = admission.admit_encoded(&call).unwrap();
        assert_eq!(
            admission.admit_encoded(&call).unwrap_err(),
            Refused::Function { limit: 1 }
        );
        // Garbage is admitted: serving it answers BadRequest.
        assert!(admission.admit_encoded(&[1, 2, 3]).is_ok());
        drop(permit);
        assert!(admission.admit_encoded(&call).is_ok());
    }
}
