//! Warnings about a scenario as `rpclb lab` runs it: a fault the run ends before (a short
//! `--warmup-s` + `--measure-s`: the lab does not scale a scenario's timeline) measures
//! nothing, and says so.

use rpclb_lab::scenario::Action;
use rpclb_lab::Scenario;

/// One warning per event of `scenario` that its run does not measure: one that happens at or
/// after the run's end (warm-up + measured), or one that is over before the measured window
/// starts. Empty when every event falls in the run's window.
pub fn unmeasured_faults(scenario: &Scenario) -> Vec<String> {
    let end = scenario.warmup_s + scenario.measure_s;
    let mut notes = Vec::new();
    for (i, event) in scenario.event.iter().enumerate() {
        let what = format!(
            "scenario {}: event[{i}] ({} of member {} at {} s)",
            scenario.name,
            action(event.action),
            event.member,
            event.at_s
        );
        if event.at_s >= end {
            let whole = match event.for_s {
                Some(length) => format!(" ({} s to measure all of it)", event.at_s + length),
                None => String::new(),
            };
            notes.push(format!(
                "{what} comes after the run's end ({end} s: {} s warm-up + {} s measured): the run measures no fault; run past {} s{whole}",
                scenario.warmup_s, scenario.measure_s, event.at_s
            ));
        } else if let (Some(length), None) = (event.for_s, event.every_s) {
            if event.at_s + length <= scenario.warmup_s {
                notes.push(format!(
                    "{what} is over at {} s, before the measured window starts ({} s): the run measures no fault",
                    event.at_s + length,
                    scenario.warmup_s
                ));
            }
        }
    }
    notes
}

fn action(action: Action) -> &'static str {
    match action {
        Action::Pause => "pause",
        Action::Slow => "slow",
        Action::Fail => "fail",
        Action::Join => "join",
        Action::Leave => "leave",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_shorter_than_the_fault_time_is_warned_about() {
        let mut scenario = Scenario::load("paused-member").unwrap();
        assert!(unmeasured_faults(&scenario).is_empty());
        scenario.warmup_s = 0.5;
        scenario.measure_s = 1.0;
        let notes = unmeasured_faults(&scenario);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("paused-member") && notes[0].contains("at 20 s"),
            "{notes:?}"
        );
        scenario.warmup_s = 30.0;
        let notes = unmeasured_faults(&scenario);
        assert!(notes[0].contains("before the measured window"), "{notes:?}");
    }
}
