//! The call header: which function, for which balancer, with how much time left.

use serde::{Deserialize, Serialize};

use super::{encoded_len, split_version, start_message, DecodeError, VERSION_LEN};

/// The postcard header at the front of every call and cast.
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
}

/// Encodes `header` and `args` into one message: `[version][header][args]`.
pub(crate) fn encode_call<A: Serialize + ?Sized>(
    header: &CallHeader<'_>,
    args: &A,
) -> Result<Vec<u8>, postcard::Error> {
    let out = start_message(VERSION_LEN + encoded_len(header) + encoded_len(args));
    let out = postcard::to_extend(header, out)?;
    postcard::to_extend(args, out)
}

/// Decodes the version and header; returns the header and the encoded arguments after it.
pub(crate) fn decode_call(bytes: &[u8]) -> Result<(CallHeader<'_>, &[u8]), DecodeError> {
    let rest = split_version(bytes)?;
    postcard::take_from_bytes::<CallHeader<'_>>(rest)
        .map_err(|e| DecodeError::Malformed(format!("call header: {e}")))
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
        let reply = crate::wire::reply::encode_ok(&vec![7u8; 70_000]).unwrap();
        assert!(
            reply.capacity() - reply.len() <= 2,
            "{} for {}",
            reply.capacity(),
            reply.len()
        );
    }

    #[test]
    fn round_trip_keeps_header_and_args() {
        let bytes = encode_call(&header(), &("hello".to_string(), 7u32)).unwrap();
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, header());
        let (text, n): (String, u32) = postcard::from_bytes(args).unwrap();
        assert_eq!((text.as_str(), n), ("hello", 7));
    }

    #[test]
    fn no_balancer_and_empty_args() {
        let h = CallHeader {
            function: "whoami",
            balancer: None,
            deadline_ms: 0,
            call_id: 0,
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
        for garbage in [
            &[0x01, 0xff, 0xff, 0xff, 0xff, 0xff][..],
            &[0x01, 0x05, b'a'],
            &[0x01],
        ] {
            assert!(
                matches!(decode_call(garbage), Err(DecodeError::Malformed(_))),
                "{garbage:?}"
            );
        }
        // invalid UTF-8 in the function name
        assert!(matches!(
            decode_call(&[0x01, 0x02, 0xc3, 0x28, 0, 0, 0]),
            Err(DecodeError::Malformed(_))
        ));
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
}
