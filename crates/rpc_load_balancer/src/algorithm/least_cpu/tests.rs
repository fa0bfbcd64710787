//! The band rule and options of LeastCpu (reference §5.8, §11.20), over the real process-wide
//! cache. Node names are unique per test: the cache is shared by the whole test process.

use std::collections::BTreeSet;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::*;
use crate::wire::RpcMessage;

struct Idle;
impl Actor for Idle {
    type Msg = RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RpcMessage>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// Members `<test>-<node>@h` for `nodes`, with readings `cpu` (None = no reading) stored
/// `age_ms` ago.
async fn members(test: &str, readings: &[(&str, Option<f64>, u64)]) -> Vec<Member> {
    let (actor, _) = Actor::spawn(None, Idle, ()).await.unwrap();
    readings
        .iter()
        .map(|(node, cpu, age)| {
            let name = format!("{test}-{node}@h");
            if let Some(cpu) = cpu {
                cpu::cache().store(&name, *cpu, *age);
            }
            Member::for_test(&name, actor.clone())
        })
        .collect()
}

/// Announces `members` as snapshot 1 (as the balancer does) and returns its request.
fn snapshot(algorithm: &LeastCpu, members: &[Member]) -> SelectionRequest<'static> {
    let joined: Vec<Arc<str>> = members.iter().map(|m| Arc::clone(m.node_arc())).collect();
    algorithm.on_node_change(&NodeChange {
        balancer: "b",
        joined: &joined,
        left: &[],
        members,
        version: 1,
    });
    SelectionRequest {
        balancer: "b",
        key: None,
        version: 1,
    }
}

/// The short names (before `-`… `@`) picked over `n` selections.
fn picks(
    algorithm: &LeastCpu,
    list: &[Member],
    request: &SelectionRequest<'_>,
    n: usize,
) -> BTreeSet<String> {
    (0..n)
        .map(|_| {
            let node = list[algorithm.choose_from_nodes(list, request).unwrap()].node();
            node.split(['-', '@']).nth(1).unwrap().to_string()
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn the_least_loaded_member_wins() {
    let list = members(
        "least",
        &[
            ("a", Some(80.0), 0),
            ("b", Some(20.0), 0),
            ("c", Some(50.0), 0),
        ],
    )
    .await;
    let lc = LeastCpu::seeded(1);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 50), set(&["b"]));
}

#[tokio::test]
async fn the_band_is_inclusive_and_picked_at_random() {
    // The seed's example: 22, 25, 48 with threshold 5 → 22 or 25.
    let list = members(
        "seed",
        &[
            ("a", Some(22.0), 0),
            ("b", Some(25.0), 0),
            ("c", Some(48.0), 0),
        ],
    )
    .await;
    let lc = LeastCpu::seeded(2);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 200), set(&["a", "b"]));
    // Threshold 2.0 with 22, 23.5, 25: a and b, never c.
    let list = members(
        "two",
        &[
            ("a", Some(22.0), 0),
            ("b", Some(23.5), 0),
            ("c", Some(25.0), 0),
        ],
    )
    .await;
    let lc = LeastCpu::seeded(3).cpu_threshold(2.0);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 200), set(&["a", "b"]));
    // Exactly at the band's edge counts (inclusive): 20 and 25 with threshold 5.
    let list = members("edge", &[("a", Some(20.0), 0), ("b", Some(25.0), 0)]).await;
    let lc = LeastCpu::seeded(4);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 200), set(&["a", "b"]));
    // Threshold 0.5 with 20 and 22: only a.
    let list = members("half", &[("a", Some(20.0), 0), ("b", Some(22.0), 0)]).await;
    let lc = LeastCpu::seeded(5).cpu_threshold(0.5);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 100), set(&["a"]));
}

#[tokio::test]
async fn missing_and_stale_readings_count_as_fifty() {
    // a = 60, b missing (50) → b.
    let list = members("missing", &[("a", Some(60.0), 0), ("b", None, 0)]).await;
    let lc = LeastCpu::seeded(6);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 50), set(&["b"]));
    // Stale a = 20 (older than the 1 s TTL at its source) vs fresh b = 30 → b; both entries
    // unchanged afterwards (no refresh, no deletion).
    let list = members("stale", &[("a", Some(20.0), 5_000), ("b", Some(30.0), 0)]).await;
    let lc = LeastCpu::seeded(7).cpu_cache_ttl(Duration::from_millis(1_000));
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 50), set(&["b"]));
    let a = cpu::cache().get("stale-a@h").unwrap();
    assert_eq!(a.cpu, 20.0);
    assert!(a.age_ms >= 5_000, "{a:?}");
    assert_eq!(cpu::cache().get("stale-b@h").unwrap().cpu, 30.0);
}

#[tokio::test]
async fn one_member_is_picked_without_reading_and_unannounced_lists_work() {
    let list = members("one", &[("a", None, 0)]).await;
    assert_eq!(
        LeastCpu::new()
            .choose_from_nodes(&list, &REQUEST_UNCACHED)
            .unwrap(),
        0
    );
    // A list that is not the announced snapshot (a re-selection) reads the cache directly.
    let list = members("uncached", &[("a", Some(70.0), 0), ("b", Some(10.0), 0)]).await;
    let lc = LeastCpu::seeded(8);
    assert_eq!(picks(&lc, &list, &REQUEST_UNCACHED, 20), set(&["b"]));
}

const REQUEST_UNCACHED: SelectionRequest<'static> = SelectionRequest {
    balancer: "b",
    key: None,
    version: SelectionRequest::UNCACHED,
};

#[tokio::test]
async fn membership_changes_leave_the_shared_readings_alone() {
    let list = members("churn", &[("a", Some(10.0), 0), ("b", Some(20.0), 0)]).await;
    let lc = LeastCpu::seeded(9);
    snapshot(&lc, &list);
    // a leaves, x joins.
    let after = members("churn", &[("b", None, 0), ("x", None, 0)]).await;
    let left: Vec<Arc<str>> = vec![Arc::clone(list[0].node_arc())];
    lc.on_node_change(&NodeChange {
        balancer: "b",
        joined: &[Arc::clone(after[1].node_arc())],
        left: &left,
        members: &after,
        version: 2,
    });
    assert_eq!(cpu::cache().get("churn-a@h").unwrap().cpu, 10.0);
    assert_eq!(cpu::cache().get("churn-b@h").unwrap().cpu, 20.0);
    assert_eq!(cpu::cache().get("churn-x@h"), None);
    // The new snapshot reads b = 20 against x missing (50).
    let request = SelectionRequest {
        balancer: "b",
        key: None,
        version: 2,
    };
    assert_eq!(picks(&lc, &after, &request, 30), set(&["b"]));
}

#[tokio::test]
async fn readings_written_after_the_snapshot_are_seen() {
    let list = members("live", &[("a", Some(10.0), 0), ("b", Some(90.0), 0)]).await;
    let lc = LeastCpu::seeded(10);
    let request = snapshot(&lc, &list);
    assert_eq!(picks(&lc, &list, &request, 20), set(&["a"]));
    cpu::cache().store("live-a@h", 99.0, 0);
    assert_eq!(picks(&lc, &list, &request, 20), set(&["b"]));
}

#[tokio::test]
async fn the_explanation_gives_each_members_reading_age_and_value() {
    let list = members(
        "explain",
        &[
            ("a", Some(30.0), 200),
            ("b", Some(20.0), 5_000),
            ("c", None, 0),
        ],
    )
    .await;
    let lc = LeastCpu::seeded(11).cpu_cache_ttl(Duration::from_millis(1_000));
    let request = snapshot(&lc, &list);
    let chosen = lc.choose_from_nodes(&list, &request).unwrap();
    assert_eq!(chosen, 0, "30 beats stale 20 (= 50) and missing (= 50)");
    let explanation = lc.explain(&list, chosen, &request);
    // The value each member counted as: fresh a its reading, stale b and missing c 50.
    assert_eq!(
        explanation.scores,
        [
            ("explain-a@h".to_string(), 30.0),
            ("explain-b@h".to_string(), NEUTRAL_CPU),
            ("explain-c@h".to_string(), NEUTRAL_CPU),
        ]
    );
    // The rule names the band, the TTL and the pick, and each member's reading with its age.
    let rule = &explanation.rule;
    assert!(rule.starts_with("uniform random within 5 points"), "{rule}");
    assert!(rule.contains("older than 1000 ms = 50"), "{rule}");
    assert!(rule.contains("picked explain-a@h"), "{rule}");
    let age = |node: &str, cpu: &str| -> u64 {
        let prefix = format!("{node}: {cpu} % ");
        let at = rule
            .find(&prefix)
            .unwrap_or_else(|| panic!("{prefix:?} in {rule}"));
        let rest = &rule[at + prefix.len()..];
        rest[..rest.find(" ms old").unwrap()].parse().unwrap()
    };
    // Ages are as of the explanation: at least as old as stored, and not much older.
    assert!((200..10_000).contains(&age("explain-a@h", "30")), "{rule}");
    assert!(
        (5_000..15_000).contains(&age("explain-b@h", "20")),
        "{rule}"
    );
    assert!(rule.contains("explain-c@h: no reading"), "{rule}");
}

#[test]
fn invalid_options_fail_naming_the_option() {
    let option = |lc: LeastCpu, sample: Option<Duration>| match lc.validate(sample) {
        Err(Error::InvalidConfig { option, .. }) => option,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    assert_eq!(
        option(LeastCpu::new().poll_interval(Duration::ZERO), None),
        "poll_interval"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_cache_ttl(Duration::ZERO), None),
        "cpu_cache_ttl"
    );
    assert_eq!(
        option(
            LeastCpu::new().cpu_cache_ttl(Duration::from_millis(1_000)),
            Some(Duration::from_millis(1_000))
        ),
        "cpu_cache_ttl",
        "a TTL not above the sample interval"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_threshold(-1.0), None),
        "cpu_threshold"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_threshold(f64::NAN), None),
        "cpu_threshold"
    );
    assert!(LeastCpu::new()
        .validate(Some(Duration::from_millis(1_000)))
        .is_ok());
    assert!(LeastCpu::new()
        .poll_startup_jitter(Duration::ZERO)
        .cpu_threshold(0.0)
        .validate(None)
        .is_ok());
}
