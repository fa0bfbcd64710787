//! The functions a node serves, type-erased, read lock-free by the endpoint.

use std::any::Any;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;

use super::{FunctionError, RemoteFunction};
use crate::wire::{header, reply};

/// Output of a served function: the encoded `Ok` reply, or the function's error.
pub(crate) type Served = Result<Vec<u8>, FunctionError>;

/// A registered function with its types erased.
pub(crate) trait ErasedFunction: Send + Sync {
    /// Decodes the arguments (at `args` in the call's `message`, which it takes: a
    /// [`Payload`](crate::Payload) argument is the message itself) and returns the future
    /// that runs the function and encodes its reply. A decode failure is returned at once,
    /// as the serde message.
    fn start(
        &self,
        message: Vec<u8>,
        args: Range<usize>,
        raw: bool,
    ) -> Result<BoxFuture<'static, Served>, String>;

    /// The function itself, for in-process calls that skip serialization.
    fn as_any(&self) -> &dyn Any;
}

struct Erased<F>(Arc<F>);

impl<F: RemoteFunction> ErasedFunction for Erased<F> {
    fn start(
        &self,
        message: Vec<u8>,
        args: Range<usize>,
        raw: bool,
    ) -> Result<BoxFuture<'static, Served>, String> {
        let args: F::Args = header::take_args(message, args, raw)?;
        let function = Arc::clone(&self.0);
        Ok(Box::pin(async move {
            let value = function.call(args).await?;
            reply::encode_ok_owned(value)
                .map_err(|e| FunctionError::new(format!("reply could not be encoded: {e}")))
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Name → function; registration is rare and copies the map, lookups are lock-free (and
/// hashed with foldhash: one per call made or served).
#[derive(Default)]
pub(crate) struct Registry {
    functions: ArcSwap<Functions>,
}

/// The registered functions by name.
type Functions = HashMap<&'static str, Arc<dyn ErasedFunction>, foldhash::fast::RandomState>;

impl Registry {
    /// Adds `function`; `Err(name)` if a function of that name is already registered.
    pub(crate) fn register<F: RemoteFunction>(&self, function: F) -> Result<(), &'static str> {
        let erased: Arc<dyn ErasedFunction> = Arc::new(Erased(Arc::new(function)));
        let mut duplicate = false;
        self.functions.rcu(|current| {
            duplicate = current.contains_key(F::NAME);
            let mut next = Functions::clone(current);
            if !duplicate {
                next.insert(F::NAME, Arc::clone(&erased));
            }
            next
        });
        if duplicate {
            Err(F::NAME)
        } else {
            Ok(())
        }
    }

    /// The function registered under `name`.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn ErasedFunction>> {
        self.functions.load().get(name).cloned()
    }

    /// The function registered under `name`, with the name as registered (`'static`).
    pub(crate) fn get_named(&self, name: &str) -> Option<(&'static str, Arc<dyn ErasedFunction>)> {
        self.functions
            .load()
            .get_key_value(name)
            .map(|(name, function)| (*name, Arc::clone(function)))
    }

    /// The function registered under `F::NAME`, if it is of type `F` (a function of another
    /// type under the same name is served through its encoded form instead).
    pub(crate) fn get_typed<F: RemoteFunction>(&self) -> Option<Arc<F>> {
        let functions = self.functions.load();
        let function = functions.get(F::NAME)?;
        function
            .as_any()
            .downcast_ref::<Erased<F>>()
            .map(|erased| Arc::clone(&erased.0))
    }

    /// Names of all registered functions, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .functions
            .load()
            .keys()
            .map(|n| n.to_string())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reply::{decode, ReplyStatus};

    struct Double;
    impl RemoteFunction for Double {
        const NAME: &'static str = "double";
        type Args = u32;
        type Reply = u64;
        async fn call(&self, args: u32) -> Result<u64, FunctionError> {
            Ok(u64::from(args) * 2)
        }
    }

    #[tokio::test]
    async fn registered_function_runs_from_bytes() {
        let registry = Registry::default();
        registry.register(Double).unwrap();
        assert_eq!(registry.register(Double), Err("double"));
        assert_eq!(registry.names(), vec!["double".to_string()]);
        let function = registry.get("double").unwrap();
        let args = postcard::to_allocvec(&21u32).unwrap();
        let len = args.len();
        let bytes = function.start(args, 0..len, false).unwrap().await.unwrap();
        let (status, value) = decode(&bytes).unwrap();
        assert_eq!(status, ReplyStatus::Ok);
        assert_eq!(postcard::from_bytes::<u64>(value).unwrap(), 42);
        assert!(registry.get("triple").is_none());
        assert!(registry.get_typed::<Double>().is_some());
    }

    #[test]
    fn undecodable_arguments_are_refused_before_running() {
        let registry = Registry::default();
        registry.register(Double).unwrap();
        let function = registry.get("double").unwrap();
        assert!(function.start(Vec::new(), 0..0, false).is_err());
        assert!(function.start(vec![0xff; 6], 0..6, false).is_err());
        // A range outside the message is no arguments, not a panic.
        assert!(function.start(vec![1], 0..9, false).is_err());
        // Bytes left over (the caller's type is another), or raw bytes: refused unrun.
        assert!(function.start(vec![21, 0], 0..2, false).is_err());
        assert!(function.start(vec![21], 0..1, true).is_err());
    }

    #[test]
    fn function_errors_convert_from_std_errors() {
        let parse: Result<u32, _> = "x".parse::<u32>();
        let error = FunctionError::from(parse.unwrap_err());
        assert_eq!(error.message(), "invalid digit found in string");
    }
}
