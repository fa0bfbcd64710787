//! Test hook (feature `test-hooks`, the `rpclb node --wire-extra-field` flag): this process
//! writes, after the fields of every section it sends (call headers, reply statuses) and after
//! every control request, one field that no release knows — as a newer release appending a
//! field would. Nodes of this release and later skip it (see [`super::section`]).

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process appends [`NEWER_FIELD`]; off unless a test turns it on.
static SEND: AtomicBool = AtomicBool::new(false);

/// The field appended: an `Option<(u64, &str)>` with a value, as a load report or a trace
/// context of a later release might be.
const NEWER_FIELD: Option<(u64, &str)> = Some((42, "a field of a newer release"));

/// **Test hook**: makes this process write an unknown trailing field (an optional pair of a
/// number and a string, 29 bytes) after every call header, reply status and control request it
/// sends, as a node of a newer release that appended a field would (`on = true`), or stop
/// (`false`). Process-wide, like the wire version; nodes of this release skip the field.
/// Hidden from the docs: not for production use.
#[doc(hidden)]
pub fn send_newer_wire_fields(on: bool) {
    SEND.store(on, Ordering::Relaxed);
}

/// `out` with [`NEWER_FIELD`] appended when the hook is on. Inlined into every encoder: off,
/// it costs a relaxed load and a branch.
#[inline]
pub(crate) fn append(out: Vec<u8>) -> Vec<u8> {
    if SEND.load(Ordering::Relaxed) {
        append_field(out)
    } else {
        out
    }
}

/// [`append`] when the hook is on.
#[cold]
#[inline(never)]
fn append_field(mut out: Vec<u8>) -> Vec<u8> {
    // Encoding a number and a string cannot fail; nothing is appended if it did.
    if let Ok(field) = postcard::to_allocvec(&NEWER_FIELD) {
        out.extend_from_slice(&field);
    }
    out
}

/// The bytes [`append`] adds to a section now: the field's length when the hook is on, else
/// 0 — so a field this release appends later (a reply's load report) goes before it, as a
/// newer release's field would follow this release's.
pub(crate) fn appended_len() -> usize {
    if SEND.load(Ordering::Relaxed) {
        postcard::to_allocvec(&NEWER_FIELD).map_or(0, |field| field.len())
    } else {
        0
    }
}
