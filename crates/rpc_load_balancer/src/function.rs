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

mod context;
mod registry;

pub use context::CallContext;
pub(crate) use context::Signal;
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
///   and the message, or [`Error::BadRequest`](crate::Error::BadRequest) for an error made
///   with [`FunctionError::bad_request`]; a panic is caught, reported as
///   [`RemoteFailure::Panicked`](crate::RemoteFailure), and the node keeps serving.
/// * [`CallContext::current`] inside `call` gives the call's deadline, the time left and its
///   cancellation. A call that ends early (deadline, the caller's cancel or timeout, a drain
///   that gives up) has its future dropped at its next `.await`; work that does not await —
///   a busy loop, a closure on [`tokio::task::spawn_blocking`] — should poll
///   [`CallContext::is_cancelled`], or it runs on after its caller got
///   [`Error::RequestTimeout`](crate::Error::RequestTimeout).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{CallContext, FunctionError, RemoteFunction};
///
/// /// Sums 0..n on the blocking pool, stopping when the call is cancelled.
/// struct SumTo;
/// impl RemoteFunction for SumTo {
///     const NAME: &'static str = "math.sum_to";
///     type Args = u64;
///     type Reply = u64;
///     async fn call(&self, n: u64) -> Result<u64, FunctionError> {
///         if n > 1 << 40 {
///             // The caller gets Error::BadRequest.
///             return Err(FunctionError::bad_request("n is over 2^40"));
///         }
///         let context = CallContext::current();
///         let sum = tokio::task::spawn_blocking(move || {
///             let mut sum = 0u64;
///             for i in 0..n {
///                 if i % 65_536 == 0 && context.is_cancelled() {
///                     return None;
///                 }
///                 sum = sum.wrapping_add(i);
///             }
///             Some(sum)
///         });
///         match sum.await {
///             Ok(Some(sum)) => Ok(sum),
///             // Cancelled: nobody reads this reply.
///             Ok(None) => Err(FunctionError::new("cancelled")),
///             Err(e) => Err(FunctionError::new(e.to_string())),
///         }
///     }
/// }
/// ```
///
/// The value registered is shared by all calls (`&self`), so it can hold state such as a
/// connection pool.
pub trait RemoteFunction: Send + Sync + 'static {
    /// The function's name on the wire, e.g. `"reports.generate"`.
    const NAME: &'static str;
    /// Whether running a call of it twice has the effect of running it once (a read, a put
    /// of a whole value, a write keyed by a request id). Default `false`: **not idempotent**.
    ///
    /// Nothing in the library ever sends a call of a function that is not idempotent twice:
    /// once it may have run (the connection was lost while it was in flight, a timeout), its
    /// caller gets the error. A call of an idempotent function may be sent again, to another
    /// member of its balancer, after a failure of the retryable kind (the connection was
    /// lost, the member was unreachable, it refused the call at a concurrency cap), as the
    /// balancer's [`RetryBudget`](crate::RetryBudget) allows and within the call's deadline
    /// (docs/how-to/retries.md). Only the caller's declaration counts (the serving node's is
    /// not asked); a call may override it with
    /// [`BalancedCall::idempotent`](crate::BalancedCall::idempotent).
    ///
    /// ```
    /// use rpc_load_balancer::{FunctionError, RemoteFunction};
    ///
    /// /// Reads a balance: safe to run twice.
    /// struct Balance;
    /// impl RemoteFunction for Balance {
    ///     const NAME: &'static str = "ledger.balance";
    ///     const IDEMPOTENT: bool = true;
    ///     type Args = u64;
    ///     type Reply = i64;
    ///     async fn call(&self, _account: u64) -> Result<i64, FunctionError> {
    ///         Ok(0)
    ///     }
    /// }
    /// ```
    const IDEMPOTENT: bool = false;
    /// The arguments, sent by the caller.
    type Args: Serialize + DeserializeOwned + Send + 'static;
    /// The reply, sent back to the caller.
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// Runs the function for one call: `args` decoded from the caller's message; the `Ok`
    /// value is the caller's reply.
    ///
    /// Errors: return `Err(FunctionError)` to fail the call; the caller gets
    /// [`Error::Remote`](crate::Error::Remote) with [`RemoteFailure::Failed`](crate::RemoteFailure)
    /// and the error's message, or [`Error::BadRequest`](crate::Error::BadRequest) for
    /// [`FunctionError::bad_request`] (arguments the function refuses). A call still running
    /// at the caller's timeout is stopped, and the caller gets
    /// [`Error::RequestTimeout`](crate::Error::RequestTimeout); see [`CallContext`] for work
    /// that must notice it.
    fn call(
        &self,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Reply, FunctionError>> + Send;
}

/// The error a remote function returns; its message reaches the caller in
/// [`Error::Remote`](crate::Error::Remote) ([`FunctionError::new`]), or in
/// [`Error::BadRequest`](crate::Error::BadRequest) when the function refuses its arguments
/// ([`FunctionError::bad_request`]).
///
/// Any `std::error::Error` converts into it (as a failure), so `?` works in function bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    message: String,
    bad_request: bool,
}

impl FunctionError {
    /// A failure with this message: the caller gets [`Error::Remote`](crate::Error::Remote)
    /// with [`RemoteFailure::Failed`](crate::RemoteFailure) (code `service_unavailable`).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            bad_request: false,
        }
    }

    /// A refusal of the call's arguments (out of range, too large for this node's caps, ...):
    /// the caller gets [`Error::BadRequest`](crate::Error::BadRequest) with this message (code
    /// `bad_request`), on a remote node and on this one alike. Refuse before doing the work.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            bad_request: true,
        }
    }

    /// Whether this error refuses the arguments ([`FunctionError::bad_request`]).
    pub fn is_bad_request(&self) -> bool {
        self.bad_request
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
        Self::new(error.to_string())
    }
}
