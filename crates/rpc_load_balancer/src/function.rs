//! Remote functions: the Rust form of the original's `{Module, :fun, args}`.
//!
//! A remote function is a type with a stable [`RemoteFunction::NAME`], serde `Args` and `Reply`
//! types and an async body. A node serves only the functions registered on it
//! ([`Node::register`](crate::Node::register)); a call to any other name is answered with
//! [`Error::BadRequest`](crate::Error::BadRequest).
//!
//! ```
//! use rpc_load_balancer::{FunctionError, RemoteFunction};
//! use serde::{Deserialize, Serialize};
//!
//! /// Adds two numbers on whichever node serves it.
//! struct Add;
//!
//! #[derive(Serialize, Deserialize)]
//! struct AddArgs { a: i64, b: i64 }
//!
//! impl RemoteFunction for Add {
//!     const NAME: &'static str = "math.add";
//!     type Args = AddArgs;
//!     type Reply = i64;
//!     async fn call(&self, args: AddArgs) -> Result<i64, FunctionError> {
//!         args.a.checked_add(args.b).ok_or_else(|| FunctionError::new("overflow"))
//!     }
//! }
//! ```

use std::future::Future;

use serde::de::DeserializeOwned;
use serde::Serialize;

mod registry;

pub(crate) use registry::Registry;

/// A function that other nodes can call on this node.
///
/// * `NAME` identifies the function on the wire; keep it stable across releases (renaming it
///   breaks callers running the old name).
/// * `Args` and `Reply` are encoded with postcard; both sides must use compatible types. A
///   [`Payload`](crate::Payload) as the whole `Args` or `Reply` is not encoded: its bytes are
///   sent without a copy (docs/how-to/large-payloads.md).
/// * `call` runs on its own tokio task per call. Returning `Err` gives the caller
///   [`Error::Remote`](crate::Error::Remote) with [`RemoteFailure::Failed`](crate::RemoteFailure)
///   and the message; a panic is caught, reported as
///   [`RemoteFailure::Panicked`](crate::RemoteFailure), and the node keeps serving.
///
/// The value registered is shared by all calls (`&self`), so it can hold state such as a
/// connection pool.
pub trait RemoteFunction: Send + Sync + 'static {
    /// The function's name on the wire, e.g. `"reports.generate"`.
    const NAME: &'static str;
    /// The arguments, sent by the caller.
    type Args: Serialize + DeserializeOwned + Send + 'static;
    /// The reply, sent back to the caller.
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// Runs the function for one call: `args` decoded from the caller's message; the `Ok`
    /// value is the caller's reply.
    ///
    /// Errors: return `Err(FunctionError)` to fail the call; the caller gets
    /// [`Error::Remote`](crate::Error::Remote) with [`RemoteFailure::Failed`](crate::RemoteFailure)
    /// and the error's message. A call still running at the caller's timeout is stopped, and
    /// the caller gets [`Error::RequestTimeout`](crate::Error::RequestTimeout).
    fn call(
        &self,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Reply, FunctionError>> + Send;
}

/// The error a remote function returns; its message reaches the caller in
/// [`Error::Remote`](crate::Error::Remote).
///
/// Any `std::error::Error` converts into it, so `?` works in function bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    message: String,
}

impl FunctionError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message given to the caller.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for FunctionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for FunctionError {
    fn from(error: E) -> Self {
        Self {
            message: error.to_string(),
        }
    }
}
