//! Hostile input: decoding arbitrary bytes as a call, a reply or a control request never
//! panics — every outcome is a value or a typed error — and serving such bytes as a call
//! always produces a reply that decodes.

use proptest::prelude::*;

mod seeds;

use super::header::decode_call;
use super::reply;
use crate::control::ControlRequest;
use seeds::corpus_seeds;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_call(&bytes);
        let _ = reply::decode(&bytes);
        if let Ok(body) = super::split_version(&bytes) {
            let _ = super::decode_control::<ControlRequest>(body);
        }
    }

    #[test]
    fn a_valid_prefix_with_garbage_after_it_is_still_handled(
        garbage in proptest::collection::vec(any::<u8>(), 0..64),
        cut in 0usize..64,
    ) {
        let header = super::header::CallHeader {
            function: "echo",
            balancer: Some("b"),
            deadline_ms: 1_000,
            call_id: 7,
            raw_args: false,
            trace: None,
        };
        let mut bytes = super::header::encode_call(&header, &"x".to_string()).unwrap();
        bytes.truncate(cut.min(bytes.len()));
        bytes.extend_from_slice(&garbage);
        let _ = decode_call(&bytes);
        let _ = reply::decode(&bytes);
    }
}

#[tokio::test]
async fn serving_garbage_always_replies_with_a_decodable_status() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let config = crate::NodeConfig::new("fuzz", "127.0.0.1:0").cookie("c");
    let shared = crate::node::shared::NodeShared::new(
        "fuzz@127.0.0.1".into(),
        "127.0.0.1:0".into(),
        None,
        &config,
    );
    let mut runner = TestRunner::deterministic();
    let strategy = proptest::collection::vec(any::<u8>(), 0..128);
    for _ in 0..2_000 {
        let bytes = strategy.new_tree(&mut runner).unwrap().current();
        let answer = crate::endpoint::serve_call(&shared.transport, bytes.clone()).await;
        assert!(
            reply::decode(&answer).is_ok(),
            "undecodable reply to {bytes:?}"
        );
    }
}

// ---- The kept corpus (`fuzz/corpus/wire/`): replayed here, as CI runs it. ----

/// Where the `wire` fuzz target's corpus lives.
fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wire")
}

/// Every file of the kept corpus (deliberate `seed-*` inputs and the fuzzer's minimized
/// findings) goes through the fuzz target's own check: no decoder panics, and serving it as a
/// call and as a control request replies with bytes that decode.
#[test]
fn corpus_replays_without_a_panic_and_every_reply_decodes() {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", corpus_dir().display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 50,
        "the corpus has only {} files: is {} there?",
        files.len(),
        corpus_dir().display()
    );
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let replayed = std::panic::catch_unwind(|| crate::__fuzz::wire(&bytes));
        assert!(replayed.is_ok(), "corpus file {} failed", path.display());
    }
}

/// The `seed-*` files on disk are the ones [`corpus_seeds`] makes (`seeds.rs`): a change of the wire format
/// shows up here. Regenerate them with
/// `cargo test -p rpc_load_balancer --lib write_corpus_seeds -- --ignored`.
#[test]
fn corpus_seeds_are_current() {
    for (name, bytes) in corpus_seeds() {
        let path = corpus_dir().join(&name);
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert_eq!(
            on_disk, bytes,
            "{name} is missing or stale: run `cargo test -p rpc_load_balancer --lib \
             write_corpus_seeds -- --ignored`"
        );
    }
}

/// Rewrites the deliberate `seed-*` files of the corpus (leaves the fuzzer's findings alone).
#[test]
#[ignore = "writes into the source tree; run by hand to regenerate the seeds"]
fn write_corpus_seeds() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let is_seed = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-"));
        if is_seed {
            std::fs::remove_file(path).unwrap();
        }
    }
    for (name, bytes) in corpus_seeds() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
