//! A call's bytes: its header (deadline, id, the routing balancer), the encoded arguments, the
//! payload cap applied before anything is sent, and the arguments taken back out of a call a
//! member refused unrun.

use std::time::Duration;

use crate::error::PayloadDirection;
use crate::function::RemoteFunction;
use crate::telemetry::TraceContext;
use crate::transport::Transport;
use crate::wire::header::{decode_call, encode_call, encode_call_owned, restamp_call, take_args};
use crate::wire::header::{CallHeader, WireTrace};
use crate::Error;

/// Encodes header and arguments and enforces the payload cap before anything is sent; the
/// bytes and the call's id. `trace`: the caller's trace context, appended to the header. A
/// [`Payload`](crate::Payload) argument is copied: see [`encode_owned`].
pub(crate) fn encode<F: RemoteFunction>(
    transport: &Transport,
    balancer: Option<&str>,
    args: &F::Args,
    timeout: Duration,
    trace: Option<&TraceContext>,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(transport, balancer, timeout, trace);
    finish_encoding::<F>(transport, encode_call(&header, args), header.call_id)
}

/// [`encode`] taking the arguments: a [`Payload`](crate::Payload)'s buffer becomes the call.
pub(crate) fn encode_owned<F: RemoteFunction>(
    transport: &Transport,
    balancer: Option<&str>,
    args: F::Args,
    timeout: Duration,
    trace: Option<&TraceContext>,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(transport, balancer, timeout, trace);
    finish_encoding::<F>(transport, encode_call_owned(&header, args), header.call_id)
}

/// An encoded call of `F` (refused unrun by a member) readied to be sent again: a new id and
/// the time left (and the same trace context).
pub(crate) fn reencode<F: RemoteFunction>(
    transport: &Transport,
    balancer: Option<&str>,
    bytes: Vec<u8>,
    timeout: Duration,
    trace: Option<&TraceContext>,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(transport, balancer, timeout, trace);
    let bytes = restamp_call(bytes, &header).map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    Ok((bytes, header.call_id))
}

/// The arguments inside an encoded call of `F` (one a leaving member handed back, now to be
/// served on this node).
pub(crate) fn decode_args<F: RemoteFunction>(bytes: Vec<u8>) -> Result<F::Args, Error> {
    let codec = |message: String| Error::Codec {
        function: F::NAME.to_string(),
        message,
    };
    let (header, args) = decode_call(&bytes).map_err(|e| codec(e.to_string()))?;
    let raw = header.raw_args;
    take_args(bytes, args, raw).map_err(codec)
}

/// The error for a call whose arguments were sent and not handed back (not reached: a call is
/// sent again only with its bytes or its arguments).
pub(crate) fn args_gone<F: RemoteFunction>() -> Error {
    Error::Codec {
        function: F::NAME.to_string(),
        message: "the call's arguments were already sent".into(),
    }
}

/// The header of a new call of `F`, carrying `trace`. Its deadline is the timeout in whole
/// ms, rounded up (a call's deadline is never 0, which would mean "none").
pub(super) fn header<'a, F: RemoteFunction>(
    transport: &Transport,
    balancer: Option<&'a str>,
    timeout: Duration,
    trace: Option<&'a TraceContext>,
) -> CallHeader<'a> {
    CallHeader {
        function: F::NAME,
        balancer,
        deadline_ms: deadline_ms(timeout),
        call_id: transport.calls.next_id(),
        raw_args: crate::payload::is_payload::<F::Args>(),
        trace: trace.map(|context| WireTrace {
            traceparent: context.traceparent(),
            tracestate: context.tracestate().unwrap_or(""),
        }),
    }
}

/// `timeout` in whole ms for a call's header: rounded up, so a sub-millisecond timeout is a
/// 1 ms deadline (0 means "no deadline", for casts).
fn deadline_ms(timeout: Duration) -> u64 {
    if timeout.is_zero() {
        return 0;
    }
    let ms = timeout.as_millis() + u128::from(!timeout.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// The encoded call, its size checked against the payload cap.
fn finish_encoding<F: RemoteFunction>(
    transport: &Transport,
    encoded: Result<Vec<u8>, postcard::Error>,
    id: u64,
) -> Result<(Vec<u8>, u64), Error> {
    let bytes = encoded.map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    check_payload(
        bytes.len(),
        transport.config.max_payload_bytes,
        PayloadDirection::Argument,
    )?;
    Ok((bytes, id))
}

/// `Err(InvalidConfig)` for a zero timeout: a call that may not wait cannot succeed.
pub(crate) fn check_timeout(timeout: Duration) -> Result<(), Error> {
    if timeout.is_zero() {
        return Err(Error::InvalidConfig {
            option: "timeout",
            reason: "must be greater than 0".into(),
        });
    }
    Ok(())
}

/// `Err(PayloadTooLarge)` when `size` is over `limit`.
pub(crate) fn check_payload(
    size: usize,
    limit: usize,
    direction: PayloadDirection,
) -> Result<(), Error> {
    if size > limit {
        return Err(Error::PayloadTooLarge {
            direction,
            size,
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_deadline_is_its_timeout_in_ms_rounded_up() {
        assert_eq!(deadline_ms(Duration::from_nanos(1)), 1);
        assert_eq!(deadline_ms(Duration::from_micros(1_500)), 2);
        assert_eq!(deadline_ms(Duration::from_millis(250)), 250);
        assert_eq!(deadline_ms(Duration::ZERO), 0);
        assert_eq!(deadline_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn payload_cap_is_inclusive() {
        assert!(check_payload(8, 8, PayloadDirection::Argument).is_ok());
        assert_eq!(
            check_payload(9, 8, PayloadDirection::Argument).unwrap_err(),
            Error::PayloadTooLarge {
                direction: PayloadDirection::Argument,
                size: 9,
                limit: 8
            }
        );
    }
}
