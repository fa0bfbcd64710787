//! The library's layers, checked (issue 17 item 1; docs/explanation/architecture.md).
//!
//! Reads the library's source (`src/**.rs`, following `mod` declarations from `lib.rs` the way
//! rustc does) and finds every reference from one module to another: `use` trees (including
//! `pub use` re-exports), `crate::…` and `$crate::…` paths, `super::…` climbing out of a module,
//! `self::…`, and paths starting with a child module's name. Comments, strings and doc comments
//! (intra-doc links) are not references; code inside macro invocations is. Test code counts:
//! a unit test of a lower layer that names a higher one is still a dependency.
//!
//! Each module is mapped to a layer by [`LAYERS`] (longest matching module path wins, so a
//! file can sit in another layer than its parent). The test fails on
//! - a module that is in no layer ("add module X to the layer table"), or a table entry that
//!   names no module;
//! - an edge from a lower layer to a higher one that is not in [`KNOWN_VIOLATIONS`];
//! - a cycle among the edges not in [`KNOWN_VIOLATIONS`] (two modules of one layer that name
//!   each other, for instance);
//! - a [`KNOWN_VIOLATIONS`] entry that is no longer a violation (the edge is gone, or it now
//!   goes down and is on no cycle): the list only shrinks.
//!
//! Every failure names the offending edges with `file:line` of each reference.
//! The reading is in `read.rs`, the graph and its checks in `graph.rs`, tests of the check
//! itself in `checks.rs`.
//! `LAYERS_PRINT=1 cargo test -p rpc_load_balancer --test layers -- --nocapture` prints the
//! whole module graph.

mod checks;
mod graph;
mod read;

use std::path::Path;

use graph::{Graph, Rules};

/// The layers, bottom to top, and the modules in each (`"a"` a top-level module, `"a::b"` one
/// of its sub-modules). A module may name modules of its own layer or of a lower one, never a
/// higher one. `lib` is the crate root (`lib.rs`). A new module goes in here (one line); where
/// issue 17 expects its new modules: `routing` and `testkit` in "routing", a `load` source in
/// "node", a `membership` module in "membership".
const LAYERS: &[(&str, &[&str])] = &[
    // Leaf types every layer may use: errors, deadlines, the payload type, spans and metrics.
    (
        "foundation",
        &["error", "deadline", "panic", "payload", "telemetry", "load"],
    ),
    // The wire and control protocol.
    ("protocol", &["wire", "control"]),
    // The client side of a call, and the serving side (endpoint, registered functions), over
    // the transport state they share (`transport`: limits, registry, call table, and what
    // the node gives them: peers' endpoints, CPU readings).
    ("transport", &["transport", "call", "endpoint", "function"]),
    // The node: peers, mesh, heartbeat, config, the CPU sampler and Poller (its load source).
    // `filter`: which nodes a balancer or a random-node call takes, by name. `retry`: the
    // `Retry` policy value (how long a routed or random-node call waits for somebody to send
    // to), a plain value over `deadline` and `error` that `NodeConfig` carries as the default;
    // the waiting itself is done by the balancer's calls and random-node calls.
    ("node", &["node", "cpu", "filter", "retry"]),
    // Membership: pg groups per balancer name (a layer of its own once issue 17 moves it out
    // of `balancer`).
    ("membership", &[]),
    // The routing core: selection algorithms over a member view, no I/O.
    ("routing", &["routing", "algorithm", "testkit"]),
    // The balancer: its actors, drain, and the call pipeline (`balancer::call`: the options,
    // targets, dispatch and retry loop of direct, routed and random-node calls).
    // (`balancer::cpu_poller` is the LeastCpu balancer's load source: an actor its supervisor
    // runs beside the selector, filling the CPU slots the member views read.)
    ("balancer", &["balancer"]),
    // The public facade: the crate root and the entry points built on everything below
    // (`entry`: `Node::start`/`Node::attach`, which give the node the balancer layer's admin
    // handler). `group`: actor groups, users' own pg groups balanced by the balancer layer's
    // selection, counting and retry.
    // `__fuzz` and `wire::fuzz` (proptests) serve hostile bytes through a whole node.
    (
        "facade",
        &[
            "lib",
            "entry",
            "named",
            "random_node",
            "guides",
            "group",
            "__fuzz",
            "wire::fuzz",
        ],
    ),
];

/// Edges that break the layering, `(from, to)` as module names of [`LAYERS`]: none since the
/// transport stopped naming the node (issue 17). A new violation fails the test, and so does
/// an entry here that no longer is one (remove it); an entry says why it exists and what
/// removes it.
const KNOWN_VIOLATIONS: &[(&str, &str)] = &[];

const RULES: Rules = Rules {
    layers: LAYERS,
    known: KNOWN_VIOLATIONS,
};

#[test]
fn no_cycle_and_no_edge_up_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src, &RULES);
    if std::env::var_os("LAYERS_PRINT").is_some() {
        println!("{}", graph.describe());
    }
    let problems = graph.problems();
    assert!(
        problems.is_empty(),
        "the module layering is broken (crates/rpc_load_balancer/tests/layers/main.rs):\n\n{}\n\
         Remove each edge named above (a lower layer must not name a higher one: move the code, \
         or pass the lower layer what it needs, e.g. a handler or a plain value), or, for a \
         step on the way, list it in KNOWN_VIOLATIONS with what removes it. \
         `LAYERS_PRINT=1 cargo test -p rpc_load_balancer --test layers -- --nocapture` prints \
         the whole module graph.",
        problems.join("\n")
    );
}
