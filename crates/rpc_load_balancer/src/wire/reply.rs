//! The reply envelope: a status, then the encoded reply value when the status is `Ok`.

use serde::{Deserialize, Serialize};

use super::{encoded_len, split_version, start_message, DecodeError, VERSION_LEN};

/// What happened to a call on the serving node.
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
    /// The member is leaving its balancer: the call was refused without running, so the
    /// caller may send it to another member.
    Leaving,
}

/// Encodes a complete reply carrying `status` and no value.
pub(crate) fn encode_status(status: &ReplyStatus<'_>) -> Vec<u8> {
    // Extending a Vec with a small enum cannot fail.
    postcard::to_extend(status, start_message(16)).unwrap_or_default()
}

/// Encodes an `Ok` reply carrying `value`.
pub(crate) fn encode_ok<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    // The version, one byte of status, the value.
    let out = start_message(VERSION_LEN + 1 + encoded_len(value));
    let out = postcard::to_extend(&ReplyStatus::Ok, out)?;
    postcard::to_extend(value, out)
}

/// Decodes a reply: the status and, for `Ok`, the encoded value after it.
pub(crate) fn decode(bytes: &[u8]) -> Result<(ReplyStatus<'_>, &[u8]), DecodeError> {
    let rest = split_version(bytes)?;
    postcard::take_from_bytes::<ReplyStatus<'_>>(rest)
        .map_err(|e| DecodeError::Malformed(format!("reply status: {e}")))
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
}
