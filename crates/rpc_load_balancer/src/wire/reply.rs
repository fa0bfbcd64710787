//! The reply envelope: the version, the encoded reply value when the status is `Ok` (or the
//! refused call's bytes when it is `Leaving`), then the status and its length.
//!
//! A call refused unrun — its member is leaving, or the serving node is at a concurrency cap
//! (pushback) — is a `Leaving` reply whose status section carries, after the status, the
//! serving node's load report and then the [`Refusal`] reason ([`encode_refused`]); a caller
//! of the release before reads only `Leaving`, and sends the call to another member, which is
//! right for both reasons.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{
    encoded_len, push_trailer,
    section::{decode_trailer, split_trailer},
    split_version, stamp_version, start_message, value_len, version_len, DecodeError, TRAILER_LEN,
    VERSION_LEN,
};
use crate::load::{LoadReport, WireReport};
use crate::payload;
#[cfg(test)]
use crate::payload::Payload;

/// What happened to a call on the serving node.
///
/// The fields appended after the status in its section (see [`super::section`]), in order:
/// the serving node's [`LoadReport`] (a [`WireReport`], every reply to a call this release
/// serves; [`with_report`]), then, on a `Leaving` reply, why the call was refused (a
/// [`Refusal`] as a `u8`; [`encode_refused`]). [`decode_range`] skips them;
/// [`decode_with_report`] reads both. A new variant is a new wire version: an older caller
/// cannot decode it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ReplyStatus<'a> {
    /// The function returned a value; its encoding follows the status.
    Ok,
    /// Unknown function, undecodable arguments or malformed header.
    BadRequest(#[serde(borrow)] &'a str),
    /// The function returned an error with this message.
    Failed(#[serde(borrow)] &'a str),
    /// The function panicked with this message.
    Panicked(#[serde(borrow)] &'a str),
    /// The caller speaks wire version `remote`, which this node does not.
    WireVersion { remote: u16 },
    /// The reply was `size` bytes, over this node's `limit`.
    PayloadTooLarge { size: u64, limit: u64 },
    /// The call's deadline passed while it ran on the serving node.
    DeadlineExceeded,
    /// The call was refused without running, so the caller may send it to another member:
    /// the member is leaving its balancer, or (with the [`Refusal`] field saying so) the
    /// serving node is at a concurrency cap. The value is the call's bytes after its version.
    Leaving,
    /// As `Ok`, the value being a [`Payload`](crate::Payload)'s bytes rather than postcard.
    OkPayload,
}

impl ReplyStatus<'_> {
    /// Whether the function returned a value (`Ok` or `OkPayload`).
    pub(crate) fn is_ok(&self) -> bool {
        matches!(self, Self::Ok | Self::OkPayload)
    }
}

/// Why a `Leaving` reply refused its call: the `u8` appended after the load report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The member is leaving its balancer (code 0; also what a `Leaving` reply without the
    /// field, from the release before, means).
    Leaving,
    /// The serving node is at its node-wide or the function's concurrency cap (code 1).
    Overloaded,
}

impl Refusal {
    /// The reason's code on the wire.
    fn code(self) -> u8 {
        match self {
            Refusal::Leaving => 0,
            Refusal::Overloaded => 1,
        }
    }

    /// The reason a code gives: a code this release does not know (a newer reason) is read as
    /// `Leaving`, what a `Leaving` reply meant before there were reasons.
    fn of(code: u8) -> Refusal {
        match code {
            1 => Refusal::Overloaded,
            _ => Refusal::Leaving,
        }
    }
}

/// The fields a reply's status section carries after the status, as [`decode_with_report`]
/// reads them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Appended {
    /// The serving node's load report (`None`: the sender is of a release before reports, or
    /// the report does not decode).
    pub(crate) report: Option<LoadReport>,
    /// Why a `Leaving` reply refused its call (`None`: no reason sent, i.e. leaving).
    pub(crate) refusal: Option<Refusal>,
}

impl Appended {
    /// Why a `Leaving` reply refused its call, the field absent being `Leaving`.
    pub(crate) fn refusal(&self) -> Refusal {
        self.refusal.unwrap_or(Refusal::Leaving)
    }
}

/// Room a reply keeps for the fields the serving node appends to its status (the load
/// report and a refusal reason), so appending them does not grow the buffer.
const APPENDED_ROOM: usize = crate::load::MAX_WIRE_LEN + 1;

/// Bytes `status` takes behind a value: its encoding and its length.
fn status_bytes(status: &ReplyStatus<'_>) -> usize {
    encoded_len(status) + TRAILER_LEN
}

/// The capacity a reply keeps for `status` behind a value: its bytes, and room for the
/// fields appended to it.
fn status_len(status: &ReplyStatus<'_>) -> usize {
    status_bytes(status) + APPENDED_ROOM
}

/// Encodes a complete reply carrying `status` and no value.
pub(crate) fn encode_status(status: &ReplyStatus<'_>) -> Vec<u8> {
    // Extending a Vec with a status cannot fail (a message over 4 GiB is cut short).
    push_trailer(start_message(VERSION_LEN + status_len(status)), status)
        .unwrap_or_else(|_| encode_status(&ReplyStatus::Failed("status too long")))
}

/// Encodes an `Ok` reply carrying `value` (a [`Payload`] copied in as it is).
pub(crate) fn encode_ok<T: Serialize + 'static>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    let tail = status_len(&ReplyStatus::Ok);
    let out = match payload::as_payload(value) {
        Some(payload) => {
            let mut out = start_message(VERSION_LEN + payload.len() + tail);
            out.extend_from_slice(payload);
            return push_trailer(out, &ReplyStatus::OkPayload);
        }
        None => postcard::to_extend(
            value,
            start_message(VERSION_LEN + encoded_len(value) + tail),
        )?,
    };
    push_trailer(out, &ReplyStatus::Ok)
}

/// The length of the `Ok` reply [`encode_ok`] (or [`encode_ok_owned`]) makes of `value`,
/// computed without encoding it: what the serving node's payload cap measures of a reply.
/// Postcard's error when `value` cannot be encoded.
pub(crate) fn ok_len<T: Serialize + 'static>(value: &T) -> Result<usize, postcard::Error> {
    let status = if payload::is_payload::<T>() {
        ReplyStatus::OkPayload
    } else {
        ReplyStatus::Ok
    };
    Ok(version_len() + value_len(value)? + status_bytes(&status))
}

/// [`encode_ok`] taking the value: a [`Payload`]'s own buffer becomes the reply.
pub(crate) fn encode_ok_owned<T: Serialize + 'static>(
    value: T,
) -> Result<Vec<u8>, postcard::Error> {
    match payload::downcast(value) {
        Ok(payload) => push_trailer(
            stamp_version(payload.into_message()),
            &ReplyStatus::OkPayload,
        ),
        Err(value) => encode_ok(&value),
    }
}

/// The `Leaving` reply to `call`: the call's own bytes, then the status.
pub(crate) fn encode_leaving(call: Vec<u8>) -> Vec<u8> {
    if split_version(&call).is_err() {
        // Not a call this node can hand back as its own: refuse without the bytes.
        return encode_status(&ReplyStatus::Leaving);
    }
    push_trailer(call, &ReplyStatus::Leaving)
        .unwrap_or_else(|_| encode_status(&ReplyStatus::Leaving))
}

/// The reply refusing `call` unrun for `reason`: the call's own bytes (as [`encode_leaving`]),
/// the `Leaving` status, then the serving node's `report` and the reason's code, before any
/// field the test hook appends.
pub(crate) fn encode_refused(call: Vec<u8>, report: &LoadReport, reason: Refusal) -> Vec<u8> {
    let mut fields = [0u8; crate::load::MAX_WIRE_LEN + 1];
    let Ok(len) = postcard::to_slice(&report.to_wire(), &mut fields).map(|f| f.len()) else {
        return encode_leaving(call);
    };
    fields[len] = reason.code();
    append_fields(encode_leaving(call), &fields[..=len])
}

/// Decodes a reply: the status and the bytes of the value after the version.
pub(crate) fn decode(bytes: &[u8]) -> Result<(ReplyStatus<'_>, &[u8]), DecodeError> {
    let (status, value) = decode_range(bytes)?;
    Ok((status, &bytes[value]))
}

/// Decodes a reply: the status and where the value is.
pub(crate) fn decode_range(bytes: &[u8]) -> Result<(ReplyStatus<'_>, Range<usize>), DecodeError> {
    let body = split_version(bytes)?;
    let at = bytes.len() - body.len();
    let (value, trailer) = split_trailer(body, "reply status")?;
    // Fields a newer release appended are skipped (none is read yet: see `section`).
    let (status, _newer) = decode_trailer(trailer, "reply status")?;
    Ok((status, at..at + value.len()))
}

/// [`decode_range`], with the fields appended after the status that this release reads: the
/// serving node's load report, and a refused call's reason. A report that does not decode is
/// ignored, and so is the reason after it (the reply is still good).
pub(crate) fn decode_with_report(
    bytes: &[u8],
) -> Result<(ReplyStatus<'_>, Range<usize>, Appended), DecodeError> {
    let body = split_version(bytes)?;
    let at = bytes.len() - body.len();
    let (value, trailer) = split_trailer(body, "reply status")?;
    let (status, mut newer) = decode_trailer(trailer, "reply status")?;
    let report = newer.next_if_sent::<WireReport>().ok().flatten();
    let refusal = match (&status, report) {
        (ReplyStatus::Leaving, Some(_)) => newer.next_if_sent::<u8>().ok().flatten(),
        _ => None,
    };
    let appended = Appended {
        report: report.map(LoadReport::from_wire),
        refusal: refusal.map(Refusal::of),
    };
    Ok((status, at..at + value.len(), appended))
}

/// `reply` (a complete reply) with `report` appended to its status section, before any field
/// the test hook appends (see [`super::newer_fields`]). A reply too short to be one is
/// returned as it is.
pub(crate) fn with_report(reply: Vec<u8>, report: &LoadReport) -> Vec<u8> {
    let mut field = [0u8; crate::load::MAX_WIRE_LEN];
    match postcard::to_slice(&report.to_wire(), &mut field) {
        Ok(field) => append_fields(reply, field),
        Err(_) => reply,
    }
}

/// `reply` (a complete reply) with `fields` (encoded) appended to its status section, before
/// any field the test hook appends, so that the hook's field stays after every field this
/// release writes, as a newer release's would. A reply too short to be one is returned as it
/// is.
fn append_fields(mut reply: Vec<u8>, fields: &[u8]) -> Vec<u8> {
    let Some(len_at) = reply.len().checked_sub(TRAILER_LEN) else {
        return reply;
    };
    let mut len = [0; TRAILER_LEN];
    len.copy_from_slice(&reply[len_at..]);
    let len = u32::from_le_bytes(len) as usize;
    #[cfg(feature = "test-hooks")]
    let hooked = super::newer_fields::appended_len().min(len);
    #[cfg(not(feature = "test-hooks"))]
    let hooked = 0;
    let Ok(new_len) = u32::try_from(len + fields.len()) else {
        return reply;
    };
    reply.truncate(len_at);
    if hooked == 0 {
        reply.extend_from_slice(fields);
    } else {
        let tail_at = len_at - hooked;
        reply.splice(tail_at..tail_at, fields.iter().copied());
    }
    reply.extend_from_slice(&new_len.to_le_bytes());
    reply
}

/// Whether a complete reply's status says the function returned a value (`Ok` or
/// `OkPayload`), read from the status's first byte without decoding the reply; `false` for
/// bytes that are not a reply.
pub(crate) fn is_ok(reply: &[u8]) -> bool {
    let Some(len_at) = reply.len().checked_sub(TRAILER_LEN) else {
        return false;
    };
    let mut len = [0; TRAILER_LEN];
    len.copy_from_slice(&reply[len_at..]);
    let Some(start) = len_at.checked_sub(u32::from_le_bytes(len) as usize) else {
        return false;
    };
    // The variant indices of `Ok` (0) and `OkPayload` (8), one-byte varints.
    matches!(reply.get(start), Some(0 | 8) if start < len_at)
}

pub(crate) use super::header::take_value;

/// The call a `Leaving` reply hands back: the reply cut down to the call's bytes.
pub(crate) fn refused_call(mut reply: Vec<u8>, value: Range<usize>) -> Option<Vec<u8>> {
    if value.is_empty() {
        return None;
    }
    reply.truncate(value.end);
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_round_trip() {
        let bytes = encode_ok(&vec![1u32, 2, 3]).unwrap();
        let (status, value) = decode(&bytes).unwrap();
        assert_eq!(status, ReplyStatus::Ok);
        assert_eq!(
            postcard::from_bytes::<Vec<u32>>(value).unwrap(),
            vec![1, 2, 3]
        );
    }

    #[test]
    fn every_status_round_trips() {
        let all = [
            ReplyStatus::BadRequest("unknown function `x`"),
            ReplyStatus::Failed("nope"),
            ReplyStatus::Panicked("boom"),
            ReplyStatus::WireVersion { remote: 9 },
            ReplyStatus::PayloadTooLarge { size: 10, limit: 5 },
            ReplyStatus::DeadlineExceeded,
        ];
        for status in all {
            let bytes = encode_status(&status);
            let (decoded, rest) = decode(&bytes).unwrap();
            assert_eq!(decoded, status);
            assert!(rest.is_empty());
        }
    }

    #[test]
    fn truncated_and_garbage_replies_are_errors() {
        let bytes = encode_status(&ReplyStatus::Failed("a message"));
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err());
        }
        assert!(decode(&[0x01, 0x7f]).is_err());
    }

    #[test]
    fn a_payload_reply_is_the_payload_buffer_itself() {
        let mut payload = Payload::with_capacity(70_000);
        payload.extend_from_slice(&[9; 70_000]);
        let at = payload.as_ptr();
        let reply = encode_ok_owned(payload).unwrap();
        let (status, value) = decode_range(&reply).unwrap();
        assert_eq!(status, ReplyStatus::OkPayload);
        let back: Payload = take_value(reply, value, true).unwrap();
        assert_eq!(back.as_ptr(), at, "copied on the way");
        assert_eq!(back.len(), 70_000);
        // The same bytes through the copying encoder decode the same.
        let copied = encode_ok(&back).unwrap();
        let (_, value) = decode_range(&copied).unwrap();
        assert_eq!(take_value::<Payload>(copied, value, true).unwrap(), back);
    }

    #[test]
    fn ok_len_is_the_encoded_length_without_encoding() {
        let text = "x".repeat(70_000);
        assert_eq!(ok_len(&text).unwrap(), encode_ok(&text).unwrap().len());
        assert_eq!(ok_len(&7u8).unwrap(), encode_ok(&7u8).unwrap().len());
        let blob = Payload::from_slice(&[7; 1000]);
        let len = ok_len(&blob).unwrap();
        assert_eq!(len, encode_ok(&blob).unwrap().len());
        assert_eq!(len, encode_ok_owned(blob).unwrap().len());
    }

    #[test]
    fn a_report_rides_after_the_status_and_older_readers_skip_it() {
        let report = LoadReport {
            in_flight: 3,
            qps: 12_345,
            cpu: Some(61.5),
            ..LoadReport::default()
        };
        for bare in [
            encode_ok(&vec![1u32, 2]).unwrap(),
            encode_status(&ReplyStatus::Failed("nope")),
            encode_ok_owned(Payload::from_slice(&[7; 100])).unwrap(),
        ] {
            let (status, value, none) = decode_with_report(&bare).unwrap();
            assert_eq!(none.report, None, "no report appended yet");
            let with = with_report(bare.clone(), &report);
            assert!(with.len() > bare.len() && with.len() <= bare.len() + 16);
            let (status2, value2, got) = decode_with_report(&with).unwrap();
            assert_eq!((status2, value2.clone()), (status.clone(), value.clone()));
            assert_eq!(got.report, Some(report));
            assert_eq!(got.refusal, None, "a reason only on a refusal");
            // A reader of the release before skips it.
            assert_eq!(decode_range(&with).unwrap(), (status, value));
            assert_eq!(is_ok(&with), is_ok(&bare));
        }
        assert!(is_ok(&encode_ok(&1u8).unwrap()));
        assert!(is_ok(&encode_ok_owned(Payload::from_slice(&[1])).unwrap()));
        assert!(!is_ok(&encode_status(&ReplyStatus::DeadlineExceeded)));
        assert!(!is_ok(&[]) && !is_ok(&[1, 0, 0, 0, 9]));
        assert_eq!(with_report(vec![1, 2], &report), vec![1, 2]);
    }

    #[test]
    fn a_report_cut_short_is_ignored_and_the_reply_still_decodes() {
        let report = LoadReport {
            qps: 1 << 20,
            ..LoadReport::default()
        };
        let bare = encode_status(&ReplyStatus::DeadlineExceeded);
        let with = with_report(bare, &report);
        // Drop the report's last byte and fix the section's length.
        let mut cut = with[..with.len() - 5].to_vec();
        let len = u32::from_le_bytes(with[with.len() - 4..].try_into().unwrap()) - 1;
        cut.extend_from_slice(&len.to_le_bytes());
        let (status, _, appended) = decode_with_report(&cut).unwrap();
        assert_eq!(
            (status, appended),
            (ReplyStatus::DeadlineExceeded, Appended::default())
        );
    }

    #[test]
    fn a_leaving_reply_hands_the_call_back() {
        let header = crate::wire::header::CallHeader {
            function: "f",
            balancer: Some("b"),
            deadline_ms: 5,
            call_id: 1,
            raw_args: false,
            trace: None,
        };
        let call = crate::wire::header::encode_call(&header, &"args".to_string()).unwrap();
        let reply = encode_leaving(call.clone());
        let (status, value) = decode_range(&reply).unwrap();
        assert_eq!(status, ReplyStatus::Leaving);
        assert_eq!(refused_call(reply, value).unwrap(), call);
        let bare = encode_status(&ReplyStatus::Leaving);
        let (_, value) = decode_range(&bare).unwrap();
        assert_eq!(refused_call(bare, value), None);
    }

    fn a_call() -> Vec<u8> {
        let header = crate::wire::header::CallHeader {
            function: "f",
            balancer: Some("b"),
            deadline_ms: 5,
            call_id: 1,
            raw_args: false,
            trace: None,
        };
        crate::wire::header::encode_call(&header, &"args".to_string()).unwrap()
    }

    #[test]
    fn a_refusal_carries_the_call_the_report_and_its_reason() {
        let report = LoadReport {
            in_flight: 8,
            node_in_flight: 64,
            cpu: Some(99.0),
            ..LoadReport::default()
        };
        for reason in [Refusal::Leaving, Refusal::Overloaded] {
            let call = a_call();
            let reply = encode_refused(call.clone(), &report, reason);
            // Two appended fields: at most 16 bytes of report, one of reason.
            let bare = encode_leaving(call.clone());
            assert!(reply.len() > bare.len() + 1 && reply.len() <= bare.len() + 17);
            let (status, value, appended) = decode_with_report(&reply).unwrap();
            assert_eq!(status, ReplyStatus::Leaving);
            assert_eq!(appended.report, Some(report));
            assert_eq!(appended.refusal, Some(reason));
            assert_eq!(appended.refusal(), reason);
            // A caller of the release before reads a `Leaving` reply handing the call back.
            assert_eq!(decode_range(&reply).unwrap(), (status, value.clone()));
            assert!(!is_ok(&reply));
            assert_eq!(refused_call(reply, value).unwrap(), call);
        }
    }

    #[test]
    fn a_refusal_without_a_reason_is_leaving_and_an_unknown_reason_too() {
        // The release before: no report, no reason.
        let (_, _, appended) = decode_with_report(&encode_leaving(a_call())).unwrap();
        assert_eq!(
            (appended.refusal, appended.refusal()),
            (None, Refusal::Leaving)
        );
        // A report but no reason.
        let report = LoadReport::default();
        let reply = with_report(encode_leaving(a_call()), &report);
        let (_, _, appended) = decode_with_report(&reply).unwrap();
        assert_eq!(appended.report, Some(report));
        assert_eq!(appended.refusal(), Refusal::Leaving);
        // A reason of a newer release (code 9) is read as leaving: re-sent, not overloaded.
        let reply = encode_refused(a_call(), &report, Refusal::Overloaded);
        let mut newer = reply.clone();
        let reason_at = newer.len() - TRAILER_LEN - 1;
        assert_eq!(newer[reason_at], 1);
        newer[reason_at] = 9;
        let (_, _, appended) = decode_with_report(&newer).unwrap();
        assert_eq!(appended.refusal, Some(Refusal::Leaving));
        // A reason on another status is not read (no status but `Leaving` carries one).
        let failed = encode_status(&ReplyStatus::Failed("x"));
        let odd = append_fields(failed, &[0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(decode_with_report(&odd).unwrap().2.refusal, None);
    }

    #[test]
    fn a_field_of_a_newer_release_after_the_reason_is_skipped() {
        let report = LoadReport::default();
        let reply = encode_refused(a_call(), &report, Refusal::Overloaded);
        // A newer release appends one more field after the reason.
        let newer = postcard::to_allocvec(&Some((42u64, "a field of a newer release"))).unwrap();
        let mut bytes = reply[..reply.len() - TRAILER_LEN].to_vec();
        let len = u32::from_le_bytes(reply[reply.len() - TRAILER_LEN..].try_into().unwrap());
        bytes.extend_from_slice(&newer);
        bytes.extend_from_slice(&(len + newer.len() as u32).to_le_bytes());
        let (status, value, appended) = decode_with_report(&bytes).unwrap();
        assert_eq!(status, ReplyStatus::Leaving);
        assert_eq!(appended.refusal, Some(Refusal::Overloaded));
        assert_eq!(appended.report, Some(report));
        assert_eq!(refused_call(bytes, value).unwrap(), a_call());
    }
}
