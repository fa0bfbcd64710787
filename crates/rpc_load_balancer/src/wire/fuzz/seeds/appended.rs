//! A field of a newer release appended to a header, a status and a control request: skipped.

use super::{control, framed, header, Seeds};
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
    seeds.add(
        "appended-field-control-ping",
        [control(&ControlRequest::Ping), newer.clone()].concat(),
    );
}
