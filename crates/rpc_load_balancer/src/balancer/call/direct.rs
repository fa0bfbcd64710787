//! Direct calls and casts: [`Node::call`] (a [`Call`] builder) and [`Node::cast`], on the one
//! dispatch path with a node as their target.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;

use super::dispatch;
use super::forward_reply::{forward, ForwardedReply};
use super::options::CallOptions;
use super::target::Target;
use crate::function::RemoteFunction;
use crate::node::shared::NodeShared;
use crate::{Error, Node};

impl Node {
    /// A call of `F` with `args` on the node named `node` (full name, as `&str`, `String`,
    /// `Arc<str>`...; this node's own name calls itself). Await the returned [`Call`]; every
    /// call has a timeout (default `NodeConfig::call_timeout`).
    ///
    /// Errors when awaited: [`Error::ServiceUnavailable`] (unknown or disconnected node, node
    /// lost mid-call), [`Error::RequestTimeout`], [`Error::BadRequest`] (function not registered
    /// there, arguments not decodable), [`Error::Remote`] (the function failed or panicked),
    /// [`Error::PayloadTooLarge`], [`Error::Codec`], [`Error::WireVersion`];
    /// [`Error::InvalidConfig`] (`timeout`) for a zero [`Call::timeout`].
    pub fn call<F: RemoteFunction>(&self, node: impl AsRef<str>, args: F::Args) -> Call<F> {
        let shared = self.shared();
        Call {
            target: Target::Node(shared.transport.node_name(node.as_ref())),
            node: shared,
            options: CallOptions::default(),
            args,
            function: PhantomData,
        }
    }

    /// Sends `F` with `args` to `node` without waiting for it to run. Returns once the cast is
    /// handed to the node's session; what happens there is only logged on that node.
    ///
    /// Errors: [`Error::ServiceUnavailable`] when the node is not connected (the original
    /// silently returned ok), [`Error::PayloadTooLarge`], [`Error::Codec`].
    pub async fn cast<F: RemoteFunction>(&self, node: &str, args: F::Args) -> Result<(), Error> {
        let target = Target::Node(self.state().transport.node_name(node));
        let options = CallOptions::default();
        dispatch::cast::<F>(self.state(), &target, &options, args).await?;
        Ok(())
    }
}

/// A call of `F` on one node, built by [`Node::call`]. Await it (it implements
/// `IntoFuture`); set a timeout first with [`Call::timeout`].
#[must_use = "a call does nothing until awaited"]
pub struct Call<F: RemoteFunction> {
    node: Arc<NodeShared>,
    target: Target,
    options: CallOptions,
    args: F::Args,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> Call<F> {
    /// How long to wait for the reply; default `NodeConfig::call_timeout` (10 s). Past it the
    /// call returns [`Error::RequestTimeout`] (the serving node stops the call at that deadline
    /// too). Zero is refused with [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = Some(timeout);
        self
    }

    /// Runs the call on a task of its own and delivers its outcome to `receiver` as the
    /// message `map(result)`, instead of being awaited; the call is dropped (and so cancelled,
    /// on its serving node too) if `receiver` stops first. As
    /// [`BalancedCall::forward_to`](crate::BalancedCall::forward_to), which shows an example.
    pub fn forward_to<T, M>(self, receiver: &ActorRef<T>, map: M) -> ForwardedReply
    where
        T: ractor::Message,
        M: FnOnce(Result<F::Reply, Error>) -> T + Send + 'static,
    {
        forward(self.into_future(), receiver, map)
    }
}

impl<F: RemoteFunction> IntoFuture for Call<F> {
    type Output = Result<F::Reply, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let (node, target, options) = (&self.node, &self.target, &self.options);
            let (reply, _node) = dispatch::call::<F>(node, target, options, self.args).await?;
            Ok(reply)
        })
    }
}
