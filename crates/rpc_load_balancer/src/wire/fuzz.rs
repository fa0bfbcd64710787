//! Hostile input: decoding arbitrary bytes as a call, a reply or a control request never
//! panics — every outcome is a value or a typed error — and serving such bytes as a call
//! always produces a reply that decodes.

use proptest::prelude::*;

use super::header::decode_call;
use super::reply;
use crate::control::ControlRequest;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_call(&bytes);
        let _ = reply::decode(&bytes);
        if let Ok(body) = super::split_version(&bytes) {
            let _ = postcard::from_bytes::<ControlRequest>(body);
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
        let answer = crate::endpoint::serve_call(&shared, &bytes).await;
        assert!(
            reply::decode(&answer).is_ok(),
            "undecodable reply to {bytes:?}"
        );
    }
}
