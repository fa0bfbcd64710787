//! The demo functions every `rpclb node` serves. Tests and the demo call them; they double as
//! examples of [`RemoteFunction`] implementations.
//!
//! | name | args | reply | does |
//! |---|---|---|---|
//! | `echo` | `String` | `String` | returns its argument |
//! | `sleep` | `u64` ms | `()` | sleeps that long, or until the call's deadline |
//! | `burn` | `u64` ms | `u64` loops | keeps one core busy that long (on tokio's blocking pool), or until the call is cancelled |
//! | `whoami` | `()` | `String` | the serving node's full name |
//! | `fail` | `String` | `()` | returns an error with that message |
//! | `panic` | `String` | `()` | panics with that message |
//! | `blob` | `u64` bytes | `String` | a string of that many `x` (for payload-cap tests); its reply encodes in 7 to 11 bytes more, so the largest that succeeds is a few bytes under the node's `max_payload_bytes` (below) |
//! | `call_whoami` | `String` node | `String` | calls `whoami` on that node from this one |
//! | `routed_whoami` | `String` balancer | `String` | calls `whoami` through this node's balancer of that name and replies the member's name |
//! | `bytes_echo` | [`Payload`] | [`Payload`] | returns its argument (`rpclb bench`'s payload; no copies in the library) |
//!
//! | `work`, `work_fault` | see [`crate::work`] | | the capacity-limited, sleep-based function of `rpclb demo --scenario` (not delayed by `--delay-ms`) |
//!
//! With `rpclb node --delay-ms N`, every function above `work` first sleeps N ms.
//!
//! No argument makes a function allocate or work beyond the node's caps; what is over them is
//! refused unrun with [`FunctionError::bad_request`] (the caller gets `Error::BadRequest`):
//!
//! * `blob` refuses a length over the node's `max_payload_bytes` (its reply could not be sent
//!   anyway), before allocating anything. Within the cap, its reply is encoded in the length
//!   plus 6 bytes plus the length's varint (1 to 4 bytes): one over the cap fails with
//!   `Error::PayloadTooLarge` (reply). At the default cap of 8,388,608 bytes that is 10 bytes,
//!   so 8,388,598 is the largest length that succeeds;
//! * `sleep` and `burn` end at the call's deadline or when its caller gives up, whatever their
//!   argument (`sleep` is dropped then; `burn`, on the blocking pool, polls its
//!   [`CallContext`]); a cast has no deadline, so there they refuse more than [`MAX_CAST_MS`]
//!   (60 s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{CallContext, Error, FunctionError, Node, Payload, RemoteFunction};

/// The longest `sleep` or `burn` runs without a deadline (a cast), in ms; more is refused
/// with [`FunctionError::bad_request`]. Calls have a deadline and end by it.
pub const MAX_CAST_MS: u64 = 60_000;

/// `Err(bad_request)` when `ms` is over [`MAX_CAST_MS`] and the call has no deadline.
fn check_bounded(function: &str, ms: u64, context: &CallContext) -> Result<(), FunctionError> {
    if context.deadline().is_none() && ms > MAX_CAST_MS {
        return Err(FunctionError::bad_request(format!(
            "{function} of {ms} ms without a deadline (a cast) is over the cap of {MAX_CAST_MS} ms; \
             call it with a timeout instead"
        )));
    }
    Ok(())
}

/// What the demo functions know of the node serving them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The serving node (for `whoami` and `call_whoami`).
    pub node: Node,
    /// Added to every call before it runs.
    pub delay: Duration,
}

impl Settings {
    async fn delay(&self) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
    }
}

macro_rules! demo_function {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $args:ty => $reply:ty, |$settings:ident, $arg:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $ty(pub Arc<Settings>);

        impl RemoteFunction for $ty {
            const NAME: &'static str = $name;
            type Args = $args;
            type Reply = $reply;
            async fn call(&self, $arg: $args) -> Result<$reply, FunctionError> {
                let $settings = &self.0;
                $settings.delay().await;
                $body
            }
        }
    };
}

demo_function!(
    /// `echo`: returns its argument.
    Echo, "echo", String => String, |_s, text| Ok(text)
);
demo_function!(
    /// `sleep`: sleeps the given ms; a call ends at its deadline at the latest (the library
    /// drops the sleep then, or when the caller gives up). A cast over [`MAX_CAST_MS`] is
    /// refused.
    Sleep, "sleep", u64 => (), |_s, ms| {
        check_bounded("sleep", ms, &CallContext::current())?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }
);
demo_function!(
    /// `burn`: busy-loops one core for the given ms, or until the call is cancelled (at its
    /// deadline at the latest); replies the loop count, or an error when cut short. A cast
    /// over [`MAX_CAST_MS`] is refused.
    Burn, "burn", u64 => u64, |_s, ms| {
        let context = CallContext::current();
        check_bounded("burn", ms, &context)?;
        let spin = tokio::task::spawn_blocking(move || {
            // (No end of its own past the clock's range: the deadline or a cancel ends it.)
            let until = Instant::now().checked_add(Duration::from_millis(ms));
            let mut loops = 0u64;
            // The blocking pool is not aborted with the call: the loop polls the context.
            while until.is_none_or(|until| Instant::now() < until) {
                if context.is_cancelled() {
                    return Err(loops);
                }
                loops = std::hint::black_box(loops.wrapping_add(1));
            }
            Ok(loops)
        });
        match spin.await {
            Ok(Ok(loops)) => Ok(loops),
            Ok(Err(loops)) => Err(FunctionError::new(format!("burn cancelled after {loops} loops"))),
            Err(e) => Err(FunctionError::new(format!("burn task failed: {e}"))),
        }
    }
);
demo_function!(
    /// `whoami`: the serving node's full name.
    Whoami, "whoami", () => String, |s, _unit| Ok(s.node.name().to_string())
);
demo_function!(
    /// `fail`: returns an error carrying the given message.
    Fail, "fail", String => (), |_s, message| Err(FunctionError::new(message))
);
demo_function!(
    /// `panic`: panics with the given message (the node catches it and keeps serving).
    Panic, "panic", String => (), |_s, message| panic!("{message}")
);
demo_function!(
    /// `blob`: a string of the given number of `x` bytes; a length over the node's
    /// `max_payload_bytes` is refused before anything is allocated. The encoded reply is 7 to
    /// 11 bytes longer than the string (see the module docs): a length within those bytes of
    /// the cap fails with `Error::PayloadTooLarge`.
    Blob, "blob", u64 => String, |s, len| {
        let cap = s.node.max_payload_bytes();
        match usize::try_from(len) {
            Ok(len) if len <= cap => Ok("x".repeat(len)),
            _ => Err(FunctionError::bad_request(format!(
                "blob of {len} bytes is over this node's max_payload_bytes of {cap}"
            ))),
        }
    }
);

demo_function!(
    /// `bytes_echo`: returns its argument, a byte string (the payload of `rpclb bench`).
    BytesEcho, "bytes_echo", Payload => Payload, |_s, bytes| Ok(bytes)
);

demo_function!(
    /// `call_whoami`: calls `whoami` on the named node *from this node* and replies its answer
    /// (tests node-to-node calls).
    CallWhoami, "call_whoami", String => String, |s, target| {
        s.node.call::<Whoami>(target, ()).await.map_err(|e| FunctionError::new(e.to_string()))
    }
);

demo_function!(
    /// `routed_whoami`: calls `whoami` through *this node's* balancer of the given name and
    /// replies the name of the member that served it (tests which members a node's balancer
    /// routes to, e.g. its subset).
    RoutedWhoami, "routed_whoami", String => String, |_s, balancer| {
        let balancer = rpc_load_balancer::Balancer::lookup(&balancer)
            .map_err(|e| FunctionError::new(e.to_string()))?;
        balancer.call::<Whoami>(()).await.map_err(|e| FunctionError::new(e.to_string()))
    }
);

/// Registers every demo function on `node`, each first sleeping `delay`.
///
/// Errors: [`Error::DuplicateFunction`] if one of the names is already registered.
pub fn register_all(node: &Node, delay: Duration) -> Result<(), Error> {
    let settings = Arc::new(Settings {
        node: node.clone(),
        delay,
    });
    node.register(Echo(Arc::clone(&settings)))?;
    node.register(Sleep(Arc::clone(&settings)))?;
    node.register(Burn(Arc::clone(&settings)))?;
    node.register(Whoami(Arc::clone(&settings)))?;
    node.register(Fail(Arc::clone(&settings)))?;
    node.register(Panic(Arc::clone(&settings)))?;
    node.register(Blob(Arc::clone(&settings)))?;
    node.register(BytesEcho(Arc::clone(&settings)))?;
    node.register(CallWhoami(Arc::clone(&settings)))?;
    node.register(RoutedWhoami(settings))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_from_json_as_a_list_of_bytes() {
        // `rpclb call bytes_echo '[1,2]'` gives its arguments as JSON.
        let payload: Payload = serde_json::from_str("[1, 2, 255]").unwrap();
        assert_eq!(&payload[..], &[1, 2, 255]);
        assert_eq!(serde_json::to_string(&payload).unwrap(), "[1,2,255]");
    }
}
