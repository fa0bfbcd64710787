//! The call header: which function, for which balancer, with how much time left.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{
    encoded_len, push_trailer,
    section::{decode_trailer, split_trailer},
    split_version, stamp_version, start_message, value_len, version_len, DecodeError, TRAILER_LEN,
    VERSION_LEN,
};
use crate::payload::{self, Payload, PAYLOAD_TAIL_ROOM};

/// The postcard header behind the arguments of every call and cast.
///
/// Its serialized fields are those of wire version 2 and never change; a later release adds a
/// field by appending it after them, with a default, and reading it from the [`Tail`] that
/// [`decode_call`] reads (see [`super::section`]). Appended so far: [`trace`](Self::trace).
///
/// [`Tail`]: super::section::Tail
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CallHeader<'a> {
    /// The remote function's `NAME`.
    #[serde(borrow)]
    pub(crate) function: &'a str,
    /// The balancer that routed the call, if any (used for per-balancer counting).
    #[serde(borrow)]
    pub(crate) balancer: Option<&'a str>,
    /// The caller's remaining budget in ms when it sent the call; 0 means none (casts). Relative,
    /// because clocks of different machines disagree.
    pub(crate) deadline_ms: u64,
    /// Caller-unique id for tracing.
    pub(crate) call_id: u64,
    /// The arguments are a [`Payload`]'s bytes, not postcard: a function whose `Args` is
    /// `Payload` takes only such calls, and any other function only postcard ones, so a caller
    /// and a server that disagree about it get `BadRequest` instead of a run on garbage. Set by
    /// the encoders from the arguments' type.
    pub(crate) raw_args: bool,
    /// Appended field 1 (issue 20): the caller's trace context, written only when there is
    /// one (`None`: nothing is appended, so the header's bytes are those of version 2). Not
    /// part of the derived encoding: [`Section`] appends it, [`decode_call`] reads it from
    /// the section's tail.
    #[serde(skip)]
    pub(crate) trace: Option<WireTrace<'a>>,
}

/// The trace context appended to a call header, borrowed from the message: a W3C
/// `traceparent` and `tracestate` (empty: none), as the caller's propagator made them. On the
/// wire it is an `Option` of the two strings, so a field appended after it can write `None`.
/// Not checked here: the serving side's telemetry checks it, and only when a trace
/// propagator is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireTrace<'a> {
    /// The W3C `traceparent` header value.
    #[serde(borrow)]
    pub(crate) traceparent: &'a str,
    /// The W3C `tracestate` header value; empty when there is none.
    #[serde(borrow)]
    pub(crate) tracestate: &'a str,
}

/// A call header as its section holds it: the fields of version 2, then the appended trace
/// context when there is one.
struct Section<'h, 'a>(&'h CallHeader<'a>);

impl Serialize for Section<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.trace {
            None => self.0.serialize(serializer),
            // (postcard writes a tuple as its elements one after the other.)
            Some(trace) => (self.0, Some(trace)).serialize(serializer),
        }
    }
}

/// Encodes `args` and `header` into one message: `[version][args][header][header length]`.
/// A [`Payload`] is copied in as it is; use [`encode_call_owned`] to send one without a copy.
pub(crate) fn encode_call<A: Serialize + 'static>(
    header: &CallHeader<'_>,
    args: &A,
) -> Result<Vec<u8>, postcard::Error> {
    let header = &CallHeader {
        raw_args: payload::is_payload::<A>(),
        ..header.clone()
    };
    let header_len = encoded_len(&Section(header)) + TRAILER_LEN;
    let out = match payload::as_payload(args) {
        Some(payload) => {
            let mut out = start_message(VERSION_LEN + payload.len() + header_len);
            out.extend_from_slice(payload);
            out
        }
        None => {
            let out = start_message(VERSION_LEN + encoded_len(args) + header_len);
            postcard::to_extend(args, out)?
        }
    };
    push_trailer(out, &Section(header))
}

/// The length of the message [`encode_call`] (or [`encode_call_owned`]) makes of `header` and
/// `args`, computed without encoding them: what the payload cap measures of a call. Postcard's
/// error when `args` cannot be encoded.
pub(crate) fn call_len<A: Serialize + 'static>(
    header: &CallHeader<'_>,
    args: &A,
) -> Result<usize, postcard::Error> {
    let header = &CallHeader {
        raw_args: payload::is_payload::<A>(),
        ..header.clone()
    };
    Ok(version_len() + value_len(args)? + encoded_len(&Section(header)) + TRAILER_LEN)
}

/// [`encode_call`] taking the arguments: a [`Payload`]'s own buffer becomes the message.
pub(crate) fn encode_call_owned<A: Serialize + 'static>(
    header: &CallHeader<'_>,
    args: A,
) -> Result<Vec<u8>, postcard::Error> {
    match payload::downcast(args) {
        Ok(payload) => {
            let header = &CallHeader {
                raw_args: true,
                ..header.clone()
            };
            let mut message = stamp_version(payload.into_message());
            let header_len = encoded_len(&Section(header)) + TRAILER_LEN;
            if message.capacity() - message.len() < header_len {
                message.reserve(header_len.max(PAYLOAD_TAIL_ROOM));
            }
            push_trailer(message, &Section(header))
        }
        Err(args) => encode_call(header, &args),
    }
}

/// Replaces the header of an encoded call (e.g. with the time left when it is sent again).
pub(crate) fn restamp_call(
    mut message: Vec<u8>,
    header: &CallHeader<'_>,
) -> Result<Vec<u8>, DecodeError> {
    let (_, args) = decode_call(&message)?;
    message.truncate(args.end);
    push_trailer(message, &Section(header)).map_err(|e| DecodeError::Malformed(e.to_string()))
}

/// Decodes the version and header; returns the header and where the encoded arguments are.
pub(crate) fn decode_call(bytes: &[u8]) -> Result<(CallHeader<'_>, Range<usize>), DecodeError> {
    let body = split_version(bytes)?;
    let at = bytes.len() - body.len();
    let (args, trailer) = split_trailer(body, "call header")?;
    let (mut header, mut newer) = decode_trailer::<CallHeader<'_>>(trailer, "call header")?;
    // The trace context: a hint, never worth refusing a call over, so one that does not
    // decode is dropped (the call is still served). Fields after it are skipped.
    header.trace = newer
        .next_if_sent::<Option<WireTrace<'_>>>()
        .ok()
        .flatten()
        .flatten();
    Ok((header, at..at + args.len()))
}

/// The arguments of a call as `A`: decoded with postcard (every byte used), or — for a
/// [`Payload`] — the message itself cut down to them (no copy when the version took one byte).
/// `raw` says which the caller sent (the header's `raw_args`); a mismatch is an error.
pub(crate) fn take_args<A: serde::de::DeserializeOwned + 'static>(
    message: Vec<u8>,
    args: Range<usize>,
    raw: bool,
) -> Result<A, String> {
    take_value(message, args, raw)
}

/// A value at `range` in `message`, as `A`: see [`take_args`] (also used for replies).
pub(crate) fn take_value<A: serde::de::DeserializeOwned + 'static>(
    mut message: Vec<u8>,
    range: Range<usize>,
    raw: bool,
) -> Result<A, String> {
    match (payload::is_payload::<A>(), raw) {
        (true, true) => {
            let payload = if range.start == 1 {
                message.truncate(range.end);
                Payload::from_message(message)
            } else {
                Payload::from_slice(message.get(range).unwrap_or_default())
            };
            payload::upcast(payload).ok_or_else(|| "not a Payload".to_string())
        }
        (false, false) => {
            let bytes = message.get(range).unwrap_or_default();
            match postcard::take_from_bytes::<A>(bytes) {
                Ok((value, [])) => Ok(value),
                Ok((_, rest)) => Err(format!(
                    "{} bytes left over: the sender's type is not this one",
                    rest.len()
                )),
                Err(e) => Err(e.to_string()),
            }
        }
        (true, false) => Err("postcard-encoded, but a Payload (raw bytes) is expected".into()),
        (false, true) => {
            Err("a Payload (raw bytes), but a postcard-encoded value is expected".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WIRE_VERSION;

    fn header() -> CallHeader<'static> {
        CallHeader {
            function: "echo",
            balancer: Some("reports"),
            deadline_ms: 10_000,
            call_id: 42,
            raw_args: false,
            trace: None,
        }
    }

    #[test]
    fn a_call_is_allocated_once_at_its_final_size() {
        let bytes = encode_call(&header(), &vec![7u8; 70_000]).unwrap();
        // At most the version's spare varint bytes are unused: no doubling on the way.
        assert!(
            bytes.capacity() - bytes.len() <= 2,
            "{} for {}",
            bytes.capacity(),
            bytes.len()
        );
        // A reply keeps room for the fields the serving node appends (the load report and a
        // refusal reason): appending them does not grow it either.
        let reply = crate::wire::reply::encode_ok(&vec![7u8; 70_000]).unwrap();
        let room = crate::load::MAX_WIRE_LEN + 1;
        assert!(
            reply.capacity() - reply.len() <= 2 + room,
            "{} for {}",
            reply.capacity(),
            reply.len()
        );
        let full = crate::load::LoadReport {
            in_flight: u32::MAX,
            node_in_flight: u32::MAX,
            qps: u32::MAX,
            eps: u32::MAX,
            cpu: Some(100.0),
            utilization: Some(20.0),
        };
        let capacity = reply.capacity();
        let reported = crate::wire::reply::with_report(reply, &full);
        assert_eq!(reported.capacity(), capacity, "grown for the report");
    }

    #[test]
    fn round_trip_keeps_header_and_args() {
        let bytes = encode_call(&header(), &("hello".to_string(), 7u32)).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, header());
        let (text, n): (String, u32) = postcard::from_bytes(&bytes[args]).unwrap();
        assert_eq!((text.as_str(), n), ("hello", 7));
    }

    #[test]
    fn no_balancer_and_empty_args() {
        let h = CallHeader {
            function: "whoami",
            balancer: None,
            deadline_ms: 0,
            call_id: 0,
            raw_args: false,
            trace: None,
        };
        let bytes = encode_call(&h, &()).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, h);
        assert!(args.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = encode_call(&header(), &()).unwrap();
        for len in 0..bytes.len() {
            assert!(
                decode_call(&bytes[..len]).is_err(),
                "prefix of {len} bytes decoded"
            );
        }
    }

    #[test]
    fn garbage_is_malformed() {
        let v = u8::try_from(WIRE_VERSION).unwrap();
        for garbage in [
            &[v, 0xff, 0xff, 0xff, 0xff, 0xff][..],
            &[v, 0x05, b'a'],
            &[v],
            // a header length past the start of the message
            &[v, 0x00, 0x09, 0x00, 0x00, 0x00],
        ] {
            assert!(
                matches!(decode_call(garbage), Err(DecodeError::Malformed(_))),
                "{garbage:?}"
            );
        }
        // invalid UTF-8 in the function name
        assert!(matches!(
            decode_call(&[v, 0x02, 0xc3, 0x28, 0, 0, 0, 0, 0x07, 0x00, 0x00, 0x00]),
            Err(DecodeError::Malformed(_))
        ));
        // the same header with a valid name decodes, with no arguments
        let valid = [v, 0x02, b'o', b'k', 0, 0, 0, 0, 0x07, 0x00, 0x00, 0x00];
        let (header, args) = decode_call(&valid).unwrap();
        assert_eq!((header.function, args), ("ok", 1..1));
        // a byte after the header's fields is a field of a newer release, skipped (releases
        // before the rule refused it: see `wire::section`)
        let newer = [v, 0x01, b'f', 0, 0, 0, 0, 0x09, 0x07, 0x00, 0x00, 0x00];
        let (header, args) = decode_call(&newer).unwrap();
        assert_eq!((header.function, args), ("f", 1..1));
    }

    #[test]
    fn a_payload_becomes_the_call_without_a_copy_and_back() {
        let mut payload = Payload::with_capacity(70_000);
        payload.extend_from_slice(&[3; 70_000]);
        let at = payload.as_ptr();
        let bytes = encode_call_owned(&header(), payload).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        let raw_header = CallHeader {
            raw_args: true,
            ..header()
        };
        assert_eq!(decoded, raw_header);
        let raw = decoded.raw_args;
        let served: Payload = take_args(bytes, args, raw).unwrap();
        assert_eq!(served.as_ptr(), at, "copied on the way");
        assert!(served.iter().all(|&b| b == 3) && served.len() == 70_000);
        // Typed arguments are untouched by the payload path.
        let bytes = encode_call_owned(&header(), 7u32).unwrap();
        let (_, args) = decode_call(&bytes).unwrap();
        assert_eq!(take_args::<u32>(bytes, args, false).unwrap(), 7);
    }

    #[test]
    fn arguments_of_another_type_are_refused_not_misread() {
        // A `String` sent where a `u64` is expected: postcard would read its length as the
        // number; the bytes left over give it away.
        let bytes = encode_call(&header(), &"hello".to_string()).unwrap();
        let (_, args) = decode_call(&bytes).unwrap();
        let error = take_args::<u64>(bytes, args, false).unwrap_err();
        assert!(error.contains("left over"), "{error}");
        // Raw bytes where postcard is expected, and the other way round.
        let bytes = encode_call(&header(), &Payload::from_slice(b"\x05")).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert!(decoded.raw_args);
        let error = take_args::<u8>(bytes, args, true).unwrap_err();
        assert!(error.contains("Payload"), "{error}");
        let bytes = encode_call(&header(), &vec![1u8, 2, 3]).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert!(!decoded.raw_args);
        assert!(take_args::<Payload>(bytes, args, false).is_err());
    }

    #[test]
    fn a_sub_millisecond_deadline_is_not_no_deadline() {
        // (`call::encode::header` rounds a call's timeout up to whole ms.)
        let bytes = encode_call(
            &CallHeader {
                deadline_ms: 1,
                ..header()
            },
            &(),
        )
        .unwrap();
        assert_eq!(decode_call(&bytes).unwrap().0.deadline_ms, 1);
    }

    #[test]
    fn a_restamped_call_keeps_its_arguments() {
        let bytes = encode_call(&header(), &"args".to_string()).unwrap();
        let later = CallHeader {
            deadline_ms: 3,
            call_id: 43,
            raw_args: false,
            ..header()
        };
        let bytes = restamp_call(bytes, &later).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, later);
        assert_eq!(take_args::<String>(bytes, args, false).unwrap(), "args");
    }

    #[test]
    fn call_len_is_the_encoded_length_without_encoding() {
        let h = header();
        let text = "x".repeat(70_000);
        assert_eq!(
            call_len(&h, &text).unwrap(),
            encode_call(&h, &text).unwrap().len()
        );
        assert_eq!(
            call_len(&h, &()).unwrap(),
            encode_call(&h, &()).unwrap().len()
        );
        let blob = Payload::from_slice(&[7; 1000]);
        let len = call_len(&h, &blob).unwrap();
        assert_eq!(len, encode_call(&h, &blob).unwrap().len());
        assert_eq!(len, encode_call_owned(&h, blob).unwrap().len());
    }

    #[test]
    fn another_version_is_reported_with_its_number() {
        let mut bytes = postcard::to_allocvec(&(WIRE_VERSION + 7)).unwrap();
        bytes.extend_from_slice(&encode_call(&header(), &()).unwrap()[1..]);
        assert_eq!(
            decode_call(&bytes),
            Err(DecodeError::Version(WIRE_VERSION + 7))
        );
    }

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn traced() -> CallHeader<'static> {
        CallHeader {
            trace: Some(WireTrace {
                traceparent: PARENT,
                tracestate: "congo=t61rcWkgMzE",
            }),
            ..header()
        }
    }

    #[test]
    fn a_trace_context_round_trips_behind_the_version_2_fields() {
        let bytes = encode_call(&traced(), &"args".to_string()).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, traced());
        assert_eq!(
            take_args::<String>(bytes.clone(), args, false).unwrap(),
            "args"
        );
        // Appended: the header without it is the same bytes, and the field follows them.
        let plain = encode_call(&header(), &"args".to_string()).unwrap();
        let field = postcard::to_allocvec(&traced().trace).unwrap();
        let plain_section = &plain[..plain.len() - TRAILER_LEN];
        assert_eq!(
            &bytes[..bytes.len() - TRAILER_LEN],
            [plain_section, &field[..]].concat()
        );
        // A payload call, its length and a restamped call keep it too.
        let blob = Payload::from_slice(&[1; 100]);
        assert_eq!(
            call_len(&traced(), &blob).unwrap(),
            encode_call(&traced(), &blob).unwrap().len()
        );
        let owned = encode_call_owned(&traced(), blob).unwrap();
        assert_eq!(decode_call(&owned).unwrap().0.trace, traced().trace);
        let later = CallHeader {
            call_id: 99,
            ..traced()
        };
        let restamped = restamp_call(bytes, &later).unwrap();
        assert_eq!(decode_call(&restamped).unwrap().0, later);
    }

    #[test]
    fn a_header_of_an_older_release_has_no_trace_context() {
        // Version 2's fields alone (no appended field): what a release before issue 20 sends.
        let bytes = encode_call(&header(), &()).unwrap();
        assert_eq!(decode_call(&bytes).unwrap().0.trace, None);
        // An explicit `None` (written when a later field follows) is none too, and the later
        // field is skipped.
        let v2 = postcard::to_allocvec(&header()).unwrap();
        let section = [&v2[..], &[0x00], &[0x01, 0x07]].concat();
        let len = u32::try_from(section.len()).unwrap().to_le_bytes();
        let bytes = [&[2u8][..], &section, &len].concat();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!((decoded, args), (header(), 1..1));
    }

    #[test]
    fn a_trace_context_that_does_not_decode_is_dropped_not_an_error() {
        let v2 = postcard::to_allocvec(&header()).unwrap();
        for field in [
            // cut short: a `Some` tag and a string length past the end
            &[0x01, 0x40, b'0'][..],
            // a bad tag
            &[0x07],
            // bad UTF-8
            &[0x01, 0x02, 0xc3, 0x28, 0x00],
        ] {
            let section = [&v2[..], field].concat();
            let len = u32::try_from(section.len()).unwrap().to_le_bytes();
            let bytes = [&[2u8][..], &section, &len].concat();
            let (decoded, args) = decode_call(&bytes).unwrap();
            assert_eq!((decoded, args), (header(), 1..1), "{field:?}");
        }
        // Decoded but not a W3C context, or oversized: carried as it is (the serving side's
        // telemetry checks it before any propagator sees it).
        let long = "a".repeat(4_000);
        let odd = CallHeader {
            trace: Some(WireTrace {
                traceparent: "not a traceparent",
                tracestate: &long,
            }),
            ..header()
        };
        let bytes = encode_call(&odd, &()).unwrap();
        assert_eq!(decode_call(&bytes).unwrap().0.trace, odd.trace);
    }
}
