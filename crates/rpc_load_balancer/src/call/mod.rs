//! The client side of a call, at the transport level: encode a call (`encode`), send it to an
//! actor and map what comes back (`send`, `reply`), or run it in this process with the same
//! contract (`local`). It knows the node only through its [`Transport`](crate::transport)
//! state; which node or member a call goes to, its options and its retries are decided above,
//! by the call pipeline (`balancer::call`).

mod encode;
mod local;
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) mod lost_reply;
mod reply;
mod send;

pub(crate) use encode::{args_gone, check_timeout, decode_args, encode, encode_owned, reencode};
pub(crate) use local::{run_local, Accounting};
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(unused_imports))]
pub(crate) use reply::decode_reply;
pub(crate) use send::{cast_endpoint, control, send_encoded, Sent};
