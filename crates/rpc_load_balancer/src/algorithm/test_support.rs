//! What the built-in algorithms' tests share: kits over remote members, picks released at
//! once, picks over lists that are no published one, and window checks for rotations.

use proptest::prelude::*;

use std::sync::Arc;
use std::time::Duration;

use crate::routing::{Algorithm, BuildContext, MemberView, Request, Selector, SlowStart};
use crate::testkit::SelectorKit;

/// One second.
pub(super) const S: Duration = Duration::from_secs(1);

/// A kit of `algorithm` with slow start over it — a 100 s window, a straight ramp: factor
/// = seconds since the join ÷ 100, at least 0.1 — seeded with `seed`, whose first list
/// (`first`: they do not ramp) joined.
pub(super) fn slow_start_kit(
    algorithm: Arc<dyn Algorithm>,
    first: &[&str],
    seed: u64,
) -> SelectorKit {
    let algorithm = SlowStart::new().window(100 * S).wrap(algorithm);
    let mut kit = SelectorKit::seeded(&*algorithm, seed).unwrap();
    kit.join(first);
    kit
}

/// [`slow_start_kit`] after `joining` joined, `ramped` ago (25 s: factor 0.25).
pub(super) fn ramping_kit(
    algorithm: Arc<dyn Algorithm>,
    first: &[&str],
    joining: &[&str],
    ramped: Duration,
) -> SelectorKit {
    let mut kit = slow_start_kit(algorithm, first, 3);
    // Past the balancer's start (members joining within slow start's startup grace, 2 s,
    // count as starting members and do not ramp).
    kit.clock().advance(Duration::from_secs(3));
    kit.join(joining);
    kit.clock().advance(ramped);
    kit
}

/// A kit of `algorithm` with remote members on `nodes`.
pub(super) fn kit(algorithm: &dyn Algorithm, nodes: &[&str]) -> SelectorKit {
    let mut kit = SelectorKit::new(algorithm).unwrap();
    kit.join(nodes);
    kit
}

/// The index `kit` picks (released at once).
pub(super) fn pick(kit: &SelectorKit) -> usize {
    let pick = kit.pick(None).unwrap();
    let index = pick.index;
    kit.release(pick);
    index
}

/// The index `selector` picks over `list` (a list that is no published one).
pub(super) fn pick_over(selector: &dyn Selector, list: &[MemberView], key: Option<&[u8]>) -> usize {
    let request = Request::new("b", key, Request::UNCACHED);
    let index = selector.pick(list, &request).unwrap();
    assert!(index < list.len());
    index
}

pub(super) fn views(nodes: &[&str]) -> Vec<MemberView> {
    nodes.iter().map(|n| MemberView::new(*n, false)).collect()
}

pub(super) fn build(algorithm: &dyn Algorithm) -> Box<dyn Selector> {
    algorithm.build(&BuildContext::new("b")).unwrap()
}

/// Every `window` consecutive picks hold member `i` exactly `times[i]` times.
pub(super) fn each_window_holds(
    picks: &[usize],
    window: usize,
    times: &[usize],
) -> Result<(), TestCaseError> {
    for (start, slice) in picks.windows(window).enumerate() {
        for (i, want) in times.iter().enumerate() {
            let seen = slice.iter().filter(|p| **p == i).count();
            prop_assert_eq!(
                seen,
                *want,
                "member {} in picks {}.. of {:?}",
                i,
                start,
                picks
            );
        }
    }
    Ok(())
}

/// `n` picks of `kit`: over its published list, or over a copy that is no published list.
pub(super) fn picks(kit: &SelectorKit, n: usize, published: bool) -> Vec<usize> {
    (0..n)
        .map(|_| {
            if published {
                pick(kit)
            } else {
                pick_over(kit.selector(), kit.members(), None)
            }
        })
        .collect()
}
