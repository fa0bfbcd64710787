//! The smallest useful program: start a node, serve a function, call it.
//!
//! Run one process alone (`cargo run --example hello_node`): it calls itself, then keeps
//! serving and prints its address. Run a second one pointing at the first (`cargo run
//! --example hello_node -- 127.0.0.1:PORT`): it calls the first node's `greet` by name and
//! exits.

use std::time::Duration;

use rpc_load_balancer::{Error, FunctionError, Node, NodeConfig, RemoteFunction};
use tracing_subscriber::EnvFilter;

/// Greets whoever asks, naming the node that answered.
struct Greet {
    node: String,
}

impl RemoteFunction for Greet {
    const NAME: &'static str = "greet";
    type Args = String;
    type Reply = String;
    async fn call(&self, who: String) -> Result<String, FunctionError> {
        Ok(format!("hello {who}, from {}", self.node))
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // The library's warnings (an unreachable peer, a refused connection) on stderr.
    // RUST_LOG sets the level: RUST_LOG=error quiets them, RUST_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("warn,ractor_cluster=error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let peer = std::env::args().nth(1);
    let name = format!("hello-{}", std::process::id());
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("hello-cookie")).await?;
    node.register(Greet {
        node: node.name().to_string(),
    })?;
    println!("{} listening on {}", node.name(), node.listen_addr());

    let target = match &peer {
        Some(addr) => node.connect(addr).await?,
        None => node.name().to_string(),
    };
    let reply = node
        .call::<Greet>(target, "world".to_string())
        .timeout(Duration::from_secs(2))
        .await?;
    println!("{reply}");
    if peer.is_none() {
        // Stay up so a second process can call this one.
        println!(
            "serving; in another terminal: cargo run --example hello_node -- {}",
            node.listen_addr()
        );
        println!("stop with Ctrl-C");
        let _ = tokio::signal::ctrl_c().await;
    }
    node.shutdown().await;
    Ok(())
}
