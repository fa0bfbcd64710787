//! The program of the getting-started tutorial (docs/tutorials/getting-started.md), shown
//! there step by step. One binary, run once per node, in three terminals:
//!
//! ```text
//! cargo run --example getting_started -- serve a 4100
//! cargo run --example getting_started -- serve b 4101 127.0.0.1:4100
//! cargo run --example getting_started -- call c 4102 127.0.0.1:4100
//! ```
//!
//! `tests/cluster/tutorial.rs` runs it the same way and checks that the tutorial's code blocks
//! are this file.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, Node, NodeConfig, RemoteFunction, RoundRobin,
};
use serde::{Deserialize, Serialize};
use tracing_subscriber::EnvFilter;

/// Every node of the cluster uses this cookie; a node with another cookie is refused.
const COOKIE: &str = "getting-started";

/// The balancer every node starts and, by starting it, becomes a member of.
const BALANCER: &str = "shouters";

/// What a caller sends to `Shout`: any type serde can encode.
#[derive(Debug, Serialize, Deserialize)]
struct ShoutArgs {
    text: String,
}

/// What `Shout` sends back.
#[derive(Debug, Serialize, Deserialize)]
struct ShoutReply {
    text: String,
    /// How many calls the serving node has served, this one included.
    served_here: u64,
}

/// Upper-cases text. A node registers one value of this type; it serves every call there.
struct Shout {
    served: AtomicU64,
}

impl RemoteFunction for Shout {
    const NAME: &'static str = "tutorial.shout";
    type Args = ShoutArgs;
    type Reply = ShoutReply;

    async fn call(&self, args: ShoutArgs) -> Result<ShoutReply, FunctionError> {
        let served_here = self.served.fetch_add(1, Ordering::Relaxed) + 1;
        println!("serving shout #{served_here}: {:?}", args.text);
        Ok(ShoutReply {
            text: args.text.to_uppercase(),
            served_here,
        })
    }
}

/// A function no node registers, as if the other nodes ran an older build.
struct Whisper;

impl RemoteFunction for Whisper {
    const NAME: &'static str = "tutorial.whisper";
    type Args = ShoutArgs;
    type Reply = ShoutReply;

    async fn call(&self, _args: ShoutArgs) -> Result<ShoutReply, FunctionError> {
        Err(FunctionError::new("never registered, so never run"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's warnings (an unreachable peer, a refused connection) on stderr.
    // RUST_LOG sets the level: RUST_LOG=error quiets them, RUST_LOG=debug shows more.
    // Colours only when stderr is a terminal (not in a file or a pipe).
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("warn,ractor_cluster=error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // serve|call NAME PORT [PEER_ADDRESS]
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, name, port, peer) = match args.as_slice() {
        [mode, name, port] => (mode, name, port, None),
        [mode, name, port, peer] => (mode, name, port, Some(peer)),
        _ => return Err("usage: serve|call NAME PORT [PEER_ADDRESS]".into()),
    };
    if mode != "serve" && mode != "call" {
        return Err(format!("unknown mode {mode:?}: use serve or call").into());
    }

    let mut config = NodeConfig::new(name.as_str(), format!("127.0.0.1:{port}")).cookie(COOKIE);
    if let Some(peer) = peer {
        config = config.peers([peer.as_str()]);
    }
    let node = Node::start(config).await?;
    node.register(Shout {
        served: AtomicU64::new(0),
    })?;
    let shouters =
        Balancer::start(BalancerConfig::new(BALANCER).algorithm(RoundRobin::new())).await?;
    println!("{} listening on {}", node.name(), node.listen_addr());

    if mode == "call" {
        call_through(&shouters).await?;
    } else {
        println!("serving; stop with Ctrl-C");
        tokio::signal::ctrl_c().await?;
    }
    node.shutdown().await;
    println!("{} stopped", node.name());
    Ok(())
}

async fn call_through(shouters: &Balancer) -> Result<(), Error> {
    // Members show up as the sessions to the other nodes come up: wait for all three.
    let members = shouters
        .wait_for_members(3, Duration::from_secs(10))
        .await?;
    println!("members of {BALANCER}: {}", members.nodes().join(", "));

    let mut calls_per_node = BTreeMap::new();
    for i in 1..=6 {
        let args = ShoutArgs {
            text: format!("hello {i}"),
        };
        let (reply, node) = shouters
            .call::<Shout>(args)
            .timeout(Duration::from_secs(2))
            .with_node()
            .await?;
        println!(
            "call {i}: {:?} from {node} (its shout #{})",
            reply.text, reply.served_here
        );
        *calls_per_node.entry(node).or_insert(0) += 1;
    }
    let counts: Vec<String> = calls_per_node
        .iter()
        .map(|(node, calls)| format!("{node}={calls}"))
        .collect();
    println!("calls per node: {}", counts.join(", "));

    let args = ShoutArgs {
        text: "psst".to_string(),
    };
    match shouters.call::<Whisper>(args).await {
        Err(Error::BadRequest { node, message }) => {
            println!("whisper -> Error::BadRequest from {node}: {message}");
        }
        Err(other) => println!("whisper -> another error ({}): {other}", other.kind()),
        Ok(reply) => println!("whisper -> answered {reply:?}"),
    }
    Ok(())
}
