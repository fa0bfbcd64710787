//! The child's side: read the settings the harness passed, print the ready line, and serve
//! until the parent says stop (SIGTERM) or goes away (stdin closed).

use std::future::Future;
use std::io::{Read, Write};
use std::time::Duration;

use super::{ClusterError, ENV_COOKIE, ENV_LISTEN, ENV_NAME, ENV_PEERS, READY_MARKER};
use crate::{Node, NodeConfig};

/// The error a [`run_child`] setup function returns (any error, e.g. [`crate::Error`] through
/// `?`).
pub type SetupError = Box<dyn std::error::Error + Send + Sync>;

/// Whether this process was started by the harness as a child node (its environment holds
/// [`ENV_NAME`]).
pub fn is_child() -> bool {
    std::env::var_os(ENV_NAME).is_some()
}

/// The node configuration the harness passed in the environment: name ([`ENV_NAME`], e.g.
/// `n1`), listen address ([`ENV_LISTEN`], `127.0.0.1:0`), cookie ([`ENV_COOKIE`]) and the
/// peers to dial ([`ENV_PEERS`], comma-separated `ip:port`). Add your own settings to it
/// before [`Node::start`].
///
/// Errors: [`ClusterError::NotAChild`] naming the first variable missing (the process was
/// not started by [`ClusterSpec::start`](super::ClusterSpec::start)).
pub fn child_config() -> Result<NodeConfig, ClusterError> {
    let var = |var: &'static str| std::env::var(var).map_err(|_| ClusterError::NotAChild { var });
    let peers = var(ENV_PEERS)?;
    Ok(NodeConfig::new(var(ENV_NAME)?, var(ENV_LISTEN)?)
        .cookie(var(ENV_COOKIE)?)
        .peers(peers.split(',').filter(|p| !p.is_empty())))
}

/// The ready line of `node`: [`READY_MARKER`], then `name=<full name> address=<ip:port>`.
pub(super) fn ready_line(node: &Node) -> String {
    format!(
        "{READY_MARKER} name={} address={}",
        node.name(),
        node.listen_addr()
    )
}

/// Reads a ready line (anywhere in `line`: a test harness may print before it) into the full
/// node name and address.
pub(super) fn parse_ready_line(line: &str) -> Option<(String, String)> {
    let (_, rest) = line.split_once(READY_MARKER)?;
    let mut name = None;
    let mut address = None;
    for field in rest.split_whitespace() {
        match field.split_once('=') {
            Some(("name", value)) => name = Some(value.to_string()),
            Some(("address", value)) => address = Some(value.to_string()),
            _ => {}
        }
    }
    Some((name?, address?))
}

/// Announces `node` to the parent and serves until told to stop: prints the ready line on
/// stdout (the only thing the library ever prints there), then waits for SIGTERM or the end
/// of stdin (the parent closed it or died), and shuts the node down gracefully
/// ([`Node::shutdown`]: balancers drain). Start `node` from [`child_config`] and register your
/// functions first.
///
/// Errors: [`ClusterError::Io`] when the SIGTERM handler cannot be installed or the ready
/// line cannot be written.
pub async fn serve_child(node: Node) -> Result<(), ClusterError> {
    let io = |what| move |source| ClusterError::Io { what, source };
    // Listening before the ready line: a SIGTERM sent as soon as it is read is a stop request.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io("installing the SIGTERM handler"))?;
    let (closed_tx, closed) = tokio::sync::oneshot::channel::<()>();
    // A plain thread, not Tokio's stdin: a blocking read cannot be cancelled, and a runtime
    // waits for its blocking tasks when it shuts down. This thread never holds the process.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 256];
        while !matches!(stdin.read(&mut buf), Ok(0) | Err(_)) {}
        let _ = closed_tx.send(());
    });
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", ready_line(&node)).map_err(io("writing the ready line"))?;
        stdout.flush().map_err(io("writing the ready line"))?;
    }
    tokio::select! {
        _ = term.recv() => {}
        _ = closed => {}
    }
    node.shutdown().await;
    Ok(())
}

/// The body of a child test: builds a Tokio runtime (multi-thread, 2 workers), starts a node
/// from [`child_config`], runs `setup` on it (register functions, start balancers), then
/// [`serve_child`]. Returns when the parent stops the child.
///
/// ```no_run
/// # use rpc_load_balancer::testkit::cluster::{run_child, ClusterError};
/// #[test]
/// #[ignore = "a child of the cluster tests"]
/// fn child() -> Result<(), ClusterError> {
///     run_child(|node| async move {
///         // node.register(MyFunction)?;
///         Ok(())
///     })
/// }
/// ```
///
/// Errors: as [`child_config`], [`Node::start`] ([`ClusterError::Node`]) and
/// [`serve_child`]; [`ClusterError::Setup`] with `setup`'s error (the node is shut down
/// first); [`ClusterError::Io`] when the runtime cannot be built.
pub fn run_child<F, Fut>(setup: F) -> Result<(), ClusterError>
where
    F: FnOnce(Node) -> Fut,
    Fut: Future<Output = Result<(), SetupError>>,
{
    let config = child_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| ClusterError::Io {
            what: "building the child's runtime",
            source,
        })?;
    let result = runtime.block_on(async move {
        let node = Node::start(config).await?;
        if let Err(error) = setup(node.clone()).await {
            node.shutdown().await;
            return Err(ClusterError::Setup(error));
        }
        serve_child(node).await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}
