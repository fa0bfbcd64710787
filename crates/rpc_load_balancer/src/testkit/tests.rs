use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::routing::{Change, Outcome, OutcomeKind};

/// Picks the first member; records outcomes and releases.
#[derive(Default)]
struct Recording(Arc<Mutex<Vec<String>>>);

struct RecordingSelector(Arc<Mutex<Vec<String>>>);

impl Algorithm for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        assert!(context.clock.is_manual() && context.cpu_sample_interval.is_none());
        Ok(Box::new(RecordingSelector(Arc::clone(&self.0))))
    }
    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
}

impl Selector for RecordingSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn members_changed(&self, change: &Change<'_>) {
        self.0.lock().unwrap().push(format!(
            "v{} +{:?} -{:?}",
            change.version, change.joined, change.left
        ));
    }
    fn learns(&self) -> bool {
        true
    }
    fn observe(&self, outcome: &Outcome<'_>) {
        self.0.lock().unwrap().push(format!(
            "{} {:?} {:?}",
            outcome.member.node(),
            outcome.kind,
            outcome.latency
        ));
    }
    fn released(&self, member: &MemberView) {
        self.0
            .lock()
            .unwrap()
            .push(format!("released {}", member.node()));
    }
}

#[test]
fn changes_picks_outcomes_and_releases_reach_the_selector_in_order() {
    let recording = Recording::default();
    let log = Arc::clone(&recording.0);
    let mut kit = SelectorKit::new(&recording).unwrap();
    assert!(matches!(kit.pick(None), Err(Error::NoMembers { .. })));
    kit.join(["b@h", "a@h"]);
    kit.join(["a@h"]);
    assert_eq!(kit.nodes(), ["a@h", "b@h"]);
    assert_eq!(kit.version(), 2, "every join or leave is a new list");
    let pick = kit.pick(None).unwrap();
    assert_eq!((pick.index, pick.node()), (0, "a@h"));
    assert_eq!(
        kit.in_flight("a@h"),
        Some(1),
        "counted: the algorithm needs it"
    );
    kit.clock().advance(Duration::from_millis(7));
    kit.release(pick);
    let pick = kit.pick(None).unwrap();
    kit.complete(pick, Duration::from_millis(3), OutcomeKind::Timeout);
    kit.leave(["a@h", "x@h"]);
    assert_eq!(kit.in_flight("a@h"), None);
    assert_eq!(
        *log.lock().unwrap(),
        [
            r#"v1 +["a@h", "b@h"] -[]"#,
            "v2 +[] -[]",
            "a@h Cancelled 7ms",
            "released a@h",
            "a@h Timeout 3ms",
            "released a@h",
            r#"v3 +[] -["a@h"]"#,
        ]
    );
}

#[test]
fn explain_of_an_index_past_the_members_is_none_not_a_panic() {
    let mut kit = SelectorKit::new(&Recording::default()).unwrap();
    assert!(kit.explain(0, Some(b"k")).is_none(), "no members");
    kit.join(["a@h"]);
    assert!(kit.explain(0, Some(b"k")).is_some());
    assert!(kit.explain(1, Some(b"k")).is_none());
    assert!(kit.explain(usize::MAX, None).is_none());
}
