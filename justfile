# Optional shortcuts for the everyday commands: each recipe is a plain cargo (or bash) command
# that works without `just` too. `just` (https://just.systems, `cargo install just`) lists them;
# CI runs .ci/run, not these.

# List the recipes.
default:
    @just --list

# For example `just demo --algorithm least_cpu --burn 2`.
# A 3-node cluster on 127.0.0.1 calling through a balancer (flags: docs/reference/rpclb.md).
demo *args:
    cargo run --release -p rpclb -- demo {{args}}

# Arguments go to nextest, e.g. `just test -E 'test(drain)'`.
# The README's test command: every test (needs cargo-nextest), then the doc tests.
test *args:
    cargo nextest run --workspace {{args}}
    cargo test --workspace --doc

# The guides under docs/ and the README's code blocks, compiled and run as doc tests.
test-docs:
    cargo test --workspace --doc

# The module layering check alone (crates/rpc_load_balancer/tests/layers/main.rs).
layers:
    cargo nextest run -p rpc_load_balancer --test layers

# Print the module graph the layering check sees: every edge with file:line, and the cycles.
layers-graph:
    LAYERS_PRINT=1 cargo test -p rpc_load_balancer --test layers no_cycle -- --nocapture

# Criterion benchmarks (bench/README.md), all or some (e.g. `just bench --bench selection`).
bench *args:
    cargo bench {{args}}

# Instructions per selection + release, with and without telemetry (needs valgrind).
bench-callgrind n="100000":
    bash bench/callgrind_selection.sh {{n}}

# End-to-end calls beside the raw ractor_cluster floor (e.g. `just bench-e2e --sizes 100 --json`).
bench-e2e *args:
    cargo run --release -p rpclb -- bench {{args}}

# New inputs go to /tmp/found; crates/rpc_load_balancer/fuzz/README.md says how to keep them.
# Fuzz the wire for `secs` seconds (needs cargo-fuzz).
fuzz secs="600":
    mkdir -p /tmp/found
    cd crates/rpc_load_balancer && RUSTC_BOOTSTRAP=1 cargo fuzz run wire /tmp/found fuzz/corpus/wire -- -max_total_time={{secs}} -timeout=3

# Replay the kept fuzz corpus, as every test run does.
fuzz-replay:
    cargo nextest run -p rpc_load_balancer -E 'test(corpus)'

# The API docs, warnings as errors, as CI builds them (target/doc/rpc_load_balancer/index.html).
docs:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all

# What CI runs: fmt, clippy, docs, then every test.
ci:
    bash .ci/run
