//! What became of a sent call: ractor's outcome and our reply envelope mapped onto the reply
//! or an [`Error`].

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::MessagingErr;

use crate::error::{PayloadDirection, RemoteFailure};
use crate::wire::reply::{self, Refusal, ReplyStatus};
use crate::wire::{DecodeError, RpcMessage};
use crate::{Error, Unavailable};

/// Maps what ractor's `call` returned onto the reply bytes or our error.
pub(crate) fn outcome_to_reply(
    node: &str,
    timeout: Duration,
    outcome: Result<CallResult<Vec<u8>>, MessagingErr<RpcMessage>>,
) -> Result<Vec<u8>, Error> {
    let unavailable = |reason| Error::ServiceUnavailable {
        node: node.to_string(),
        reason,
    };
    match outcome {
        Ok(CallResult::Success(reply)) => Ok(reply),
        Ok(CallResult::Timeout) => Err(Error::RequestTimeout {
            node: node.to_string(),
            timeout,
        }),
        Ok(CallResult::SenderError) => Err(unavailable(Unavailable::ConnectionLost)),
        Err(MessagingErr::SendErr(_)) | Err(MessagingErr::ChannelClosed) => {
            Err(unavailable(Unavailable::Disconnected))
        }
        Err(MessagingErr::InvalidActorType) => Err(unavailable(Unavailable::NoEndpoint)),
    }
}

/// Decodes a reply envelope from `node` into `T` or the error it carries. Takes the reply: a
/// [`Payload`](crate::Payload) value is the reply itself.
///
/// `timeout` is the caller's, reported when the serving node says the call's deadline passed.
pub(crate) fn decode_reply<T: serde::de::DeserializeOwned + 'static>(
    node: &str,
    function: &str,
    bytes: Vec<u8>,
    timeout: Duration,
) -> Result<T, Error> {
    let (status, value) = match reply::decode_range(&bytes) {
        Ok(decoded) => decoded,
        Err(DecodeError::Version(remote)) => {
            return Err(Error::WireVersion {
                node: node.to_string(),
                local: crate::wire::local_version(),
                remote,
            })
        }
        Err(DecodeError::Malformed(why)) => {
            return Err(Error::Codec {
                function: function.to_string(),
                message: format!("reply from {node}: {why}"),
            })
        }
    };
    let remote = |failure, message: &str| Error::Remote {
        node: node.to_string(),
        function: function.to_string(),
        failure,
        message: message.to_string(),
    };
    match status {
        ReplyStatus::Ok | ReplyStatus::OkPayload => {
            let raw = status == ReplyStatus::OkPayload;
            reply::take_value(bytes, value, raw).map_err(|e| Error::Codec {
                function: function.to_string(),
                message: format!("reply from {node} does not decode as the expected type: {e}"),
            })
        }
        ReplyStatus::BadRequest(message) => Err(Error::BadRequest {
            node: node.to_string(),
            message: message.to_string(),
        }),
        ReplyStatus::Failed(message) => Err(remote(RemoteFailure::Failed, message)),
        ReplyStatus::Panicked(message) => Err(remote(RemoteFailure::Panicked, message)),
        ReplyStatus::WireVersion { remote } => {
            // The node reads our version as `remote`; it answered in ours, so it speaks both.
            Err(Error::WireVersion {
                node: node.to_string(),
                local: crate::wire::local_version(),
                remote,
            })
        }
        ReplyStatus::PayloadTooLarge { size, limit } => Err(Error::PayloadTooLarge {
            direction: PayloadDirection::Reply,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        }),
        ReplyStatus::DeadlineExceeded => Err(Error::RequestTimeout {
            node: node.to_string(),
            timeout,
        }),
        ReplyStatus::Leaving => Err(refused(node, &bytes)),
    }
}

/// The error of a `Leaving` reply from `node` (`bytes`): its call was refused unrun because
/// the member is leaving, or because the node is at a concurrency cap (the reason the reply
/// carries after its load report; none is `Leaving`).
pub(crate) fn refused(node: &str, bytes: &[u8]) -> Error {
    let refusal =
        reply::decode_with_report(bytes).map_or(Refusal::Leaving, |(_, _, f)| f.refusal());
    refusal_error(node, refusal)
}

/// The error of a call `node` refused unrun for `refusal` (read from its reply already).
pub(crate) fn refusal_error(node: &str, refusal: Refusal) -> Error {
    Error::ServiceUnavailable {
        node: node.to_string(),
        reason: match refusal {
            Refusal::Leaving => Unavailable::Leaving,
            Refusal::Overloaded => Unavailable::Overloaded,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WIRE_VERSION;

    const NODE: &str = "b@127.0.0.1";
    /// The caller's timeout in these tests.
    const T: Duration = Duration::from_millis(250);

    #[test]
    fn a_deadline_passed_on_the_serving_node_reports_the_callers_timeout() {
        let late = reply::encode_status(&ReplyStatus::DeadlineExceeded);
        let error = decode_reply::<u8>(NODE, "f", late, T).unwrap_err();
        assert_eq!(
            error,
            Error::RequestTimeout {
                node: NODE.into(),
                timeout: T
            }
        );
        assert_eq!(
            error.to_string(),
            "request to b@127.0.0.1 timed out after 250 ms"
        );
    }

    #[test]
    fn ractor_outcomes_map_to_the_original_codes() {
        let t = Duration::from_millis(100);
        let timeout = outcome_to_reply(NODE, t, Ok(CallResult::Timeout)).unwrap_err();
        assert_eq!(
            timeout,
            Error::RequestTimeout {
                node: NODE.into(),
                timeout: t
            }
        );
        let lost = outcome_to_reply(NODE, t, Ok(CallResult::SenderError)).unwrap_err();
        assert_eq!(
            lost,
            Error::ServiceUnavailable {
                node: NODE.into(),
                reason: Unavailable::ConnectionLost
            }
        );
        let closed = outcome_to_reply(NODE, t, Err(MessagingErr::ChannelClosed)).unwrap_err();
        assert_eq!(closed.code().as_str(), "service_unavailable");
        assert_eq!(
            outcome_to_reply(NODE, t, Ok(CallResult::Success(vec![1]))).unwrap(),
            vec![1]
        );
    }

    #[test]
    fn reply_statuses_map_to_errors() {
        let ok = reply::encode_ok(&7u8).unwrap();
        assert_eq!(decode_reply::<u8>(NODE, "f", ok, T).unwrap(), 7);
        let wrong_type =
            decode_reply::<String>(NODE, "f", reply::encode_ok(&vec![0xffu8]).unwrap(), T);
        assert_eq!(wrong_type.unwrap_err().kind(), "codec");
        let bad = reply::encode_status(&ReplyStatus::BadRequest("unknown function `g`"));
        assert_eq!(
            decode_reply::<u8>(NODE, "g", bad, T).unwrap_err(),
            Error::BadRequest {
                node: NODE.into(),
                message: "unknown function `g`".into()
            }
        );
        let panicked = reply::encode_status(&ReplyStatus::Panicked("boom"));
        match decode_reply::<u8>(NODE, "f", panicked, T).unwrap_err() {
            Error::Remote {
                failure,
                message,
                node,
                function,
            } => {
                assert_eq!(
                    (failure, message.as_str(), node.as_str(), function.as_str()),
                    (RemoteFailure::Panicked, "boom", NODE, "f")
                );
            }
            other => panic!("{other:?}"),
        }
        let big = reply::encode_status(&ReplyStatus::PayloadTooLarge { size: 9, limit: 4 });
        assert_eq!(
            decode_reply::<u8>(NODE, "f", big, T).unwrap_err(),
            Error::PayloadTooLarge {
                direction: PayloadDirection::Reply,
                size: 9,
                limit: 4
            }
        );
    }

    #[test]
    fn a_reply_in_another_wire_version_is_a_typed_error() {
        let mut bytes = postcard::to_allocvec(&(WIRE_VERSION + 3)).unwrap();
        bytes.push(0);
        assert_eq!(
            decode_reply::<u8>(NODE, "f", bytes, T).unwrap_err(),
            Error::WireVersion {
                node: NODE.into(),
                local: WIRE_VERSION,
                remote: WIRE_VERSION + 3
            }
        );
        assert_eq!(
            decode_reply::<u8>(NODE, "f", Vec::new(), T)
                .unwrap_err()
                .kind(),
            "codec"
        );
    }

    #[test]
    fn a_refusal_says_whether_the_member_is_leaving_or_overloaded() {
        let report = crate::load::LoadReport::default();
        for (refusal, reason) in [
            (Refusal::Leaving, Unavailable::Leaving),
            (Refusal::Overloaded, Unavailable::Overloaded),
        ] {
            let bytes =
                reply::encode_refused(vec![WIRE_VERSION as u8, 1, 0, 0, 0, 0], &report, refusal);
            let error = decode_reply::<u8>(NODE, "f", bytes, T).unwrap_err();
            assert_eq!(
                error,
                Error::ServiceUnavailable {
                    node: NODE.into(),
                    reason: reason.clone()
                }
            );
            assert_eq!(error.code().as_str(), "service_unavailable");
        }
        let bare = reply::encode_status(&ReplyStatus::Leaving);
        assert_eq!(
            refused(NODE, &bare),
            Error::ServiceUnavailable {
                node: NODE.into(),
                reason: Unavailable::Leaving
            }
        );
    }
}
