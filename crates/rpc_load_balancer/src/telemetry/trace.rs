//! Traces across nodes: the caller's trace context travels in the call header, and the serving
//! node's `rpc_load_balancer.serve` span is given it, so that one trace shows both sides.
//!
//! The library knows no tracing system: it carries an opaque W3C trace context
//! ([`TraceContext`]: a `traceparent` and an optional `tracestate`) and leaves making and
//! applying it to a [`TracePropagator`] the application installs once per process with
//! [`set_trace_propagator`] — with OpenTelemetry, one that reads the context of a span with
//! `tracing_opentelemetry::OpenTelemetrySpanExt::context` and sets it as the parent of the
//! serving span with `set_parent` (the how-to `docs/how-to/tracing-across-nodes.md` has one).
//!
//! Without a propagator nothing of this runs: a call's path checks one pointer (a `OnceLock`
//! read) and its header's bytes are those of a release without trace contexts.

use std::sync::OnceLock;

use tracing::Span;

use crate::Error;

/// The most bytes a trace context may have, `traceparent` and `tracestate` together. A longer
/// one is dropped, on either side: never an error. (W3C's own limit for `tracestate` alone
/// is 512 characters; a context at this bound costs a call about 520 bytes.)
pub const MAX_TRACE_CONTEXT_LEN: usize = 512;

/// A caller's trace context as it travels in a call header: a W3C Trace Context
/// `traceparent` (`version-trace_id-parent_id-flags`, lowercase hex, e.g.
/// `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`) and an optional `tracestate`
/// (vendor data, opaque here). Made by a [`TracePropagator`]'s `inject` on the calling node,
/// handed to its `extract` on the serving node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceContext {
    traceparent: String,
    tracestate: String,
}

impl TraceContext {
    /// A trace context of `traceparent` and `tracestate` (`None` or empty: none), or `None`
    /// when it is not one: a `traceparent` that is not W3C's form (two lowercase hex digits of
    /// version other than `ff`, a 32-digit trace id and a 16-digit parent id that are not all
    /// zeros, two digits of flags, separated by `-`; versions after `00` may have more after
    /// a further `-`), a `tracestate` with a character outside printable ASCII, or both
    /// together longer than [`MAX_TRACE_CONTEXT_LEN`] bytes.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let tracestate = tracestate.unwrap_or("");
        valid(traceparent, tracestate).then(|| Self {
            traceparent: traceparent.to_owned(),
            tracestate: tracestate.to_owned(),
        })
    }

    /// The W3C `traceparent` value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The W3C `tracestate` value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        (!self.tracestate.is_empty()).then_some(self.tracestate.as_str())
    }

    /// The trace id: the 32 lowercase hex digits of the `traceparent` after its version.
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The parent (span) id: the 16 lowercase hex digits after the trace id — on the serving
    /// side, the id of the caller's span.
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }
}

/// Whether `traceparent` and `tracestate` make a trace context (see [`TraceContext::new`]).
fn valid(traceparent: &str, tracestate: &str) -> bool {
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    let p = traceparent;
    if traceparent.len() + tracestate.len() > MAX_TRACE_CONTEXT_LEN || p.len() < 55 {
        return false;
    }
    let (Some(version), Some(trace_id), Some(parent_id), Some(flags)) =
        (p.get(0..2), p.get(3..35), p.get(36..52), p.get(53..55))
    else {
        return false;
    };
    let dashes = [2, 35, 52].iter().all(|&i| p.as_bytes()[i] == b'-');
    let rest_ok = match version {
        "00" => p.len() == 55,
        _ => p.len() == 55 || p.as_bytes()[55] == b'-',
    };
    dashes
        && rest_ok
        && version != "ff"
        && [version, trace_id, parent_id, flags].into_iter().all(hex)
        && nonzero(trace_id)
        && nonzero(parent_id)
        && tracestate.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// Makes and applies trace contexts for the library: installed once per process with
/// [`set_trace_propagator`]. Both methods run on the call's path, so keep them short; they
/// must not panic (a panic in `inject` fails the caller's call like a panic of its own code).
pub trait TracePropagator: Send + Sync + 'static {
    /// The trace context of `span` to send with a call or cast, or `None` to send none (e.g.
    /// the span is disabled or not sampled). Called once per call or cast that leaves this
    /// process (a routed call, a cast, a direct call — whatever its target), on its first
    /// send, with its `rpc_load_balancer.rpc` span; a call sent again to another member keeps
    /// the context. Not called for a call run in this process (nothing is encoded). A
    /// context longer than [`MAX_TRACE_CONTEXT_LEN`] is not sent (logged at DEBUG).
    fn inject(&self, span: &Span) -> Option<TraceContext>;

    /// Applies the `context` a caller sent to `span`, the serving node's
    /// `rpc_load_balancer.serve` span, right after it is created and before the function
    /// runs in it: set it as the parent, or add a link. Called once per served call or cast
    /// that carries a valid context; never for one that carries none (a caller without a
    /// propagator, or of an older release) or an invalid one (dropped, logged at DEBUG).
    fn extract(&self, context: &TraceContext, span: &Span);
}

/// The process's propagator, once installed.
static PROPAGATOR: OnceLock<Box<dyn TracePropagator>> = OnceLock::new();

/// Installs `propagator` for this process: from now on, calls and casts that leave this
/// process carry the trace context it makes, and calls served here give theirs to it. Install
/// it before starting the node, once; it stays for the life of the process.
///
/// Errors: [`Error::InvalidConfig`] (`option`: `trace_propagator`) when one is installed
/// already; `propagator` is dropped.
pub fn set_trace_propagator(propagator: impl TracePropagator) -> Result<(), Error> {
    PROPAGATOR
        .set(Box::new(propagator))
        .map_err(|_| Error::InvalidConfig {
            option: "trace_propagator",
            reason: "a trace propagator is installed already (one per process)".into(),
        })
}

/// The trace context to send with a call run in `span`: `None` without a propagator (one
/// load, nothing else) or with the `telemetry` feature off.
#[inline]
pub(crate) fn inject(span: &Span) -> Option<TraceContext> {
    if !super::ENABLED {
        return None;
    }
    PROPAGATOR.get().and_then(|p| inject_with(p.as_ref(), span))
}

/// [`inject`] with a propagator: its context, dropped when over the bound.
#[cold]
#[inline(never)]
fn inject_with(propagator: &dyn TracePropagator, span: &Span) -> Option<TraceContext> {
    let context = propagator.inject(span)?;
    if context.traceparent.len() + context.tracestate.len() > MAX_TRACE_CONTEXT_LEN {
        tracing::debug!(
            len = context.traceparent.len() + context.tracestate.len(),
            "trace context over {MAX_TRACE_CONTEXT_LEN} bytes not sent"
        );
        return None;
    }
    Some(context)
}

/// Gives the context a call carried (`(traceparent, tracestate)` as received, unchecked) to
/// the propagator for the serving `span`; nothing without a propagator, a context or the
/// `telemetry` feature. An invalid context is dropped (logged at DEBUG).
#[inline]
pub(crate) fn extract(received: Option<(&str, &str)>, span: &Span) {
    if !super::ENABLED {
        return;
    }
    if let (Some(propagator), Some(received)) = (PROPAGATOR.get(), received) {
        extract_with(propagator.as_ref(), received, span);
    }
}

/// [`extract`] with a propagator and a context.
#[cold]
#[inline(never)]
fn extract_with(propagator: &dyn TracePropagator, (parent, state): (&str, &str), span: &Span) {
    match TraceContext::new(parent, Some(state)) {
        Some(context) => propagator.extract(&context, span),
        None => tracing::debug!(
            len = parent.len() + state.len(),
            "invalid trace context in a call header dropped"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_w3c_traceparent_is_a_context_and_its_ids_are_read() {
        let context = TraceContext::new(PARENT, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.parent_id(), "00f067aa0ba902b7");
        assert_eq!(context.tracestate(), Some("congo=t61rcWkgMzE"));
        assert_eq!(
            TraceContext::new(PARENT, Some("")).unwrap().tracestate(),
            None
        );
        // A later version may carry more after a dash.
        let later = format!("01{}-more", &PARENT[2..]);
        assert!(TraceContext::new(&later, None).is_some());
    }

    #[test]
    fn invalid_or_oversized_contexts_are_none() {
        let zero_trace = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
        let zero_parent = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", "0".repeat(16));
        let long_00 = format!("{PARENT}-x");
        let upper = PARENT.to_uppercase();
        let version_ff = format!("ff{}", &PARENT[2..]);
        let no_dash = PARENT.replace('-', "_");
        for bad in [
            "",
            "00-4bf9",
            &zero_trace,
            &zero_parent,
            &long_00,
            &upper,
            &version_ff,
            &no_dash,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ] {
            assert_eq!(TraceContext::new(bad, None), None, "{bad:?}");
        }
        assert_eq!(TraceContext::new(PARENT, Some("a=\n")), None);
        let at_bound = "a".repeat(MAX_TRACE_CONTEXT_LEN - PARENT.len());
        assert!(TraceContext::new(PARENT, Some(&at_bound)).is_some());
        let over = "a".repeat(MAX_TRACE_CONTEXT_LEN - PARENT.len() + 1);
        assert_eq!(TraceContext::new(PARENT, Some(&over)), None);
    }

    #[test]
    fn without_a_propagator_nothing_is_injected_or_extracted() {
        // (No unit test of this crate installs one: the process has none.)
        assert!(PROPAGATOR.get().is_none());
        assert_eq!(inject(&Span::none()), None);
        extract(Some((PARENT, "")), &Span::none());
    }

    /// Makes `context` (as it is: no check) and counts the contexts it is handed.
    struct Fixed {
        context: TraceContext,
        handed: std::sync::Mutex<Vec<TraceContext>>,
    }

    impl TracePropagator for Fixed {
        fn inject(&self, _: &Span) -> Option<TraceContext> {
            Some(self.context.clone())
        }
        fn extract(&self, context: &TraceContext, _: &Span) {
            self.handed.lock().unwrap().push(context.clone());
        }
    }

    #[test]
    fn oversized_contexts_are_not_sent_and_invalid_ones_not_handed_over() {
        let oversized = TraceContext {
            traceparent: PARENT.into(),
            tracestate: "a".repeat(MAX_TRACE_CONTEXT_LEN),
        };
        let fixed = Fixed {
            context: oversized,
            handed: Default::default(),
        };
        assert_eq!(inject_with(&fixed, &Span::none()), None);
        let fine = TraceContext::new(PARENT, None).unwrap();
        let fixed = Fixed {
            context: fine.clone(),
            handed: Default::default(),
        };
        assert_eq!(inject_with(&fixed, &Span::none()), Some(fine.clone()));
        extract_with(&fixed, ("00-nope", ""), &Span::none());
        extract_with(
            &fixed,
            (PARENT, &"a".repeat(MAX_TRACE_CONTEXT_LEN)),
            &Span::none(),
        );
        assert!(fixed.handed.lock().unwrap().is_empty());
        extract_with(&fixed, (PARENT, ""), &Span::none());
        assert_eq!(*fixed.handed.lock().unwrap(), [fine]);
    }
}
