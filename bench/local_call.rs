//! Cost of one call through the full call path (encode, endpoint actor, task, reply, decode)
//! to a function on the calling node itself — the floor under every remote call.
//! Remote calls across processes are measured by `rpclb bench` (see bench/README.md).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use rpc_load_balancer::{FunctionError, Node, NodeConfig, RemoteFunction};

struct Echo;
impl RemoteFunction for Echo {
    const NAME: &'static str = "echo";
    type Args = Vec<u8>;
    type Reply = Vec<u8>;
    async fn call(&self, args: Vec<u8>) -> Result<Vec<u8>, FunctionError> {
        Ok(args)
    }
}

fn local_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime.block_on(async {
        let node = Node::start(NodeConfig::new("bench", "127.0.0.1:0").cookie("bench"))
            .await
            .unwrap();
        node.register(Echo).unwrap();
        node
    });
    let payload = vec![7u8; 100];
    c.bench_function("call_own_node_100B", |b| {
        b.to_async(&runtime).iter(|| async {
            node.call::<Echo>(node.name(), payload.clone())
                .timeout(Duration::from_secs(1))
                .await
                .unwrap()
        })
    });
    runtime.block_on(node.shutdown());
}

criterion_group!(benches, local_call);
criterion_main!(benches);
