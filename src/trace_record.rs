//! The test flag `rpclb node --trace-record`: a trace propagator that records every trace
//! context this node is handed with a served call or cast, and the function `traces_seen`
//! that returns them — so a multi-process test can check that a caller's context reached the
//! serving node (tests/cluster/trace.rs). It makes no context of its own (`inject` gives
//! `None`). Not an example of a real propagator: see docs/how-to/tracing-across-nodes.md.

use std::sync::Mutex;

use rpc_load_balancer::telemetry::{TraceContext, TracePropagator};
use rpc_load_balancer::{FunctionError, Node, RemoteFunction};
use tracing::Span;

/// The `traceparent`s handed to this process's propagator, oldest first (at most
/// [`KEPT`]).
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How many contexts are kept (the oldest are dropped past it).
pub const KEPT: usize = 10_000;

/// Records the `traceparent` of every context it is given to extract.
struct Recorder;

impl TracePropagator for Recorder {
    fn inject(&self, _span: &Span) -> Option<TraceContext> {
        None
    }
    fn extract(&self, context: &TraceContext, _span: &Span) {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() == KEPT {
            seen.remove(0);
        }
        seen.push(context.traceparent().to_owned());
    }
}

/// `traces_seen`: the `traceparent`s of the trace contexts this node was handed with served
/// calls and casts, oldest first — this call's own included, last, when it carried one.
pub struct TracesSeen;

impl RemoteFunction for TracesSeen {
    const NAME: &'static str = "traces_seen";
    type Args = ();
    type Reply = Vec<String>;
    async fn call(&self, _: ()) -> Result<Vec<String>, FunctionError> {
        Ok(SEEN.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// Installs the recorder as this process's trace propagator and registers `traces_seen` on
/// `node`. Errors: a propagator is installed already, or the name is taken.
pub fn install(node: &Node) -> crate::CmdResult {
    rpc_load_balancer::telemetry::set_trace_propagator(Recorder)?;
    node.register(TracesSeen)?;
    Ok(())
}
