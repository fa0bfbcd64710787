//! A field of a newer release appended to a header, a status and a control request: skipped.

use super::{call, control, framed, header, Seeds};
use crate::__fuzz::Echo;
use crate::control::ControlRequest;
use crate::function::RemoteFunction;

pub(super) fn add(seeds: &mut Seeds) {
    // A field of a newer release appended to a header, a status and a control request: skipped.
    let newer = postcard::to_allocvec(&Some((42u64, "a field of a newer release"))).unwrap();
    let x = postcard::to_allocvec("x").unwrap();
    let echo = postcard::to_allocvec(&header(Echo::NAME, Some("b"), 1_000)).unwrap();
    seeds.add(
        "appended-field-call-echo",
        framed(&x, &[&echo[..], &newer].concat()),
    );
    seeds.add(
        "appended-field-call-echo-cut",
        framed(&x, &[&echo[..], &newer[..3]].concat()),
    );
    seeds.add(
        "appended-field-reply-ok",
        framed(&x, &[&[0x00][..], &newer].concat()),
    );
    seeds.add(
        "appended-field-reply-failed",
        framed(&[], &[&[0x02, 0x03][..], b"why", &newer].concat()),
    );
    // The trace context (issue 20) after a header, valid, not a W3C one, or cut short (all
    // served: a bad one is dropped), and followed by a field of a newer release.
    let traced = |traceparent: &'static str| crate::wire::header::CallHeader {
        trace: Some(crate::wire::header::WireTrace {
            traceparent,
            tracestate: "congo=t61rcWkgMzE",
        }),
        ..header(Echo::NAME, Some("b"), 1_000)
    };
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    seeds.add("appended-trace-call-echo", call(&traced(parent), "x"));
    seeds.add(
        "appended-trace-call-echo-invalid",
        call(&traced("00-zz"), "x"),
    );
    let trace = postcard::to_allocvec(&traced(parent).trace).unwrap();
    seeds.add(
        "appended-trace-call-echo-cut",
        framed(&x, &[&echo[..], &trace[..20]].concat()),
    );
    seeds.add(
        "appended-trace-then-newer-field-call-echo",
        framed(&x, &[&echo[..], &trace, &newer].concat()),
    );
    seeds.add(
        "appended-field-control-ping",
        [control(&ControlRequest::Ping), newer.clone()].concat(),
    );
}
