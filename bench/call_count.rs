//! Instructions per call (callgrind): `call_count MODE N` makes N + 1 calls to a function
//! on this node; count (Ir(N) - Ir(0)) / N. MODE `local`: the registered type, run in-process
//! (as the `local_call` bench); `wire`: another type of the same name, so the call goes
//! through the endpoint actor with the full wire path (encode header and arguments, decode
//! them, encode the reply and its status, decode them). `local-payload` and `wire-payload`:
//! the same with a [`Payload`] echo (no serde for its bytes: a `Vec<u8>` is encoded and
//! decoded one byte at a time), so the library's own share shows. `raw`: the same 100 bytes to
//! `rpclb bench`'s raw floor actor on this node (a plain ractor call served on a task, with
//! ractor's own timeout): the floor `wire-payload` adds the library's layer to. A third argument
//! `prometheus` installs the Prometheus exporter's recorder first (no listener): the calls are
//! then recorded as a deployment records them.

use std::time::Duration;

use rpc_load_balancer::{FunctionError, Node, NodeConfig, Payload, RemoteFunction};

/// Defines `$name`, a function `$function` that returns its argument of type `$bytes`.
macro_rules! echo {
    ($(#[$doc:meta])* $name:ident, $function:literal, $bytes:ty) => {
        $(#[$doc])*
        struct $name;
        impl RemoteFunction for $name {
            const NAME: &'static str = $function;
            type Args = $bytes;
            type Reply = $bytes;
            async fn call(&self, args: $bytes) -> Result<$bytes, FunctionError> {
                Ok(args)
            }
        }
    };
}

echo!(
    /// The registered `echo`: run in-process by `local`.
    Echo, "echo", Vec<u8>
);
echo!(
    /// `echo` as another type: not the registered one, so never run in-process (`wire`).
    EchoOverTheWire, "echo", Vec<u8>
);
echo!(
    /// A [`Payload`] echo, registered: run in-process by `local-payload`.
    PayloadEcho, "echo.payload", Payload
);
echo!(
    /// `echo.payload` as another type: sent over the wire path by `wire-payload`.
    PayloadEchoOverTheWire, "echo.payload", Payload
);

/// One call of `F` to the node itself with a one-second timeout.
async fn call<F: RemoteFunction>(node: &Node, args: F::Args) -> F::Reply {
    node.call::<F>(node.name(), args)
        .timeout(Duration::from_secs(1))
        .await
        .unwrap()
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let n: u64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    if std::env::args().nth(3).as_deref() == Some("prometheus") {
        let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .unwrap();
        // Kept for the whole run (the recorder lives in the global; the handle renders).
        std::mem::forget(handle);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let node = Node::start(NodeConfig::new("bench", "127.0.0.1:0").cookie("bench"))
            .await
            .unwrap();
        node.register(Echo).unwrap();
        node.register(PayloadEcho).unwrap();
        let raw = rpclb::raw_floor::start(node.name()).await.unwrap();
        let payload = vec![7u8; 100];
        for _ in 0..n + 1 {
            match mode.as_str() {
                "wire" => drop(std::hint::black_box(
                    call::<EchoOverTheWire>(&node, payload.clone()).await,
                )),
                "local-payload" => drop(std::hint::black_box(
                    call::<PayloadEcho>(&node, Payload::from_slice(&payload)).await,
                )),
                "raw" => drop(std::hint::black_box(
                    rpclb::raw_floor::call(&raw, payload.clone(), Duration::from_secs(1))
                        .await
                        .unwrap(),
                )),
                "wire-payload" => drop(std::hint::black_box(
                    call::<PayloadEchoOverTheWire>(&node, Payload::from_slice(&payload)).await,
                )),
                _ => drop(std::hint::black_box(
                    call::<Echo>(&node, payload.clone()).await,
                )),
            }
        }
        raw.stop(None);
        node.shutdown().await;
    });
}
