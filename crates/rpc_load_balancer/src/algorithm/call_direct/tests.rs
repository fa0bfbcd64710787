//! CallDirect's rules, on the test kit.

use super::*;
use crate::algorithm::test_support::*;
use crate::algorithm::Random;
use crate::Error;

#[test]
fn call_direct_runs_locally_and_selects_this_node() {
    // §11.19.1: local.
    assert!(CallDirect.is_local());
    assert!(!Random::new().is_local());
    // §11.19.2–3: the local node, whatever the key, wherever it is in the list.
    let mut direct = kit(&CallDirect, &["a@h", "c@h"]);
    direct.join_local("b@h");
    for key in [None, Some(&b"customer-42"[..])] {
        let pick = direct.pick(key).unwrap();
        assert_eq!((pick.index, pick.node()), (1, "b@h"));
        direct.release(pick);
        for count in 0..5 {
            let picked = direct.pick_many(count, key).unwrap();
            assert_eq!(picked.len(), count.min(3), "count {count}");
            if count > 0 {
                assert_eq!(picked[0], "b@h", "this node first");
            }
        }
    }
    // Not a member: no remote node is passed off as this one.
    direct.leave(["b@h"]);
    for outcome in [
        direct.pick(None).map(|p| {
            let node = p.node().to_string();
            direct.release(p);
            vec![node]
        }),
        direct.pick_many(2, None),
    ] {
        match outcome {
            Err(Error::NoEligibleMembers { balancer, reason }) => {
                assert_eq!(balancer, crate::testkit::BALANCER);
                assert!(reason.contains("not a member"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
