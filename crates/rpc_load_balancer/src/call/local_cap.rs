//! The payload cap on a call run in this process — on a local member, by `CallDirect` or
//! `call_directly`, or sent to this node's own name — so that a call gets the same outcome
//! whoever serves it.
//!
//! A call to another node is refused before it is sent when its encoded message (wire version,
//! arguments, header and header length) is over this node's `max_payload_bytes`, and the
//! serving node answers `PayloadTooLarge` instead of a reply whose encoding (version, value,
//! status and status length) is over its cap. A local run encodes neither, so it measures
//! both: the same bytes, computed without encoding (postcard's size flavor, a
//! [`Payload`](crate::Payload)'s length), and refused with the same error values.

use std::sync::Arc;
use std::time::Duration;

use super::{call_local, check_payload, header};
use crate::error::{PayloadDirection, RemoteFailure};
use crate::function::{RemoteFunction, Signal};
use crate::node::shared::NodeShared;
use crate::wire::header::call_len;
use crate::wire::reply::ok_len;
use crate::Error;

/// Runs `function` in this process as [`call_local`] does, under the payload cap a call of `F`
/// routed by `balancer` (`None`: direct) meets when another node serves it.
///
/// Errors: [`Error::PayloadTooLarge`] (`Argument`, the function not run) when the call as it
/// would be encoded is over `max_payload_bytes`, [`Error::Codec`] when the arguments cannot be
/// encoded; then those of [`call_local`]; then [`Error::PayloadTooLarge`] (`Reply`) when the
/// reply as it would be encoded is over the cap, [`Error::Remote`] (`Failed`) when it cannot
/// be encoded.
pub(crate) async fn call_local_capped<F: RemoteFunction, G: Send + 'static>(
    shared: &Arc<NodeShared>,
    balancer: Option<&str>,
    function: Arc<F>,
    args: F::Args,
    timeout: Duration,
    counted: G,
    abandoned: &Arc<Signal>,
) -> Result<F::Reply, Error> {
    check_args::<F>(shared, balancer, &args, timeout)?;
    let reply = call_local(shared, function, args, timeout, counted, abandoned).await?;
    check_reply::<F>(shared, &reply)?;
    Ok(reply)
}

/// The argument cap, measured as the caller of a remote call measures it (the header with a
/// fresh call id, as the call would carry).
fn check_args<F: RemoteFunction>(
    shared: &NodeShared,
    balancer: Option<&str>,
    args: &F::Args,
    timeout: Duration,
) -> Result<(), Error> {
    let header = header::<F>(shared, balancer, timeout);
    let size = call_len(&header, args).map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    check_payload(
        size,
        shared.config.max_payload_bytes,
        PayloadDirection::Argument,
    )
}

/// The reply cap, measured as the serving node of a remote call measures it.
fn check_reply<F: RemoteFunction>(shared: &NodeShared, reply: &F::Reply) -> Result<(), Error> {
    match ok_len(reply) {
        Ok(size) => check_payload(
            size,
            shared.config.max_payload_bytes,
            PayloadDirection::Reply,
        ),
        Err(e) => Err(Error::Remote {
            node: shared.name.clone(),
            function: F::NAME.to_string(),
            failure: RemoteFailure::Failed,
            message: format!("reply could not be encoded: {e}"),
        }),
    }
}
