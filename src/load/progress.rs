//! The live progress of a run: a bar on stderr and its message (calls, calls/s, errors).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::tally::{lock, Tally};

/// The progress bar style of `rpclb load`, `demo` and `bench` (on stderr; drawn only when it
/// is a terminal): `len` calls, or with `seconds` a run of `len` seconds; the message shows
/// calls, calls/s and errors as they happen ([`progress_message`]).
pub fn progress_bar(
    len: u64,
    seconds: bool,
    prefix: impl Into<std::borrow::Cow<'static, str>>,
) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = if seconds {
        "{prefix:>12} [{bar:40}] {pos}/{len} s {msg}"
    } else {
        "{prefix:>12} [{bar:40}] {pos}/{len} {msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(prefix);
    bar
}

/// The live line of a run's progress: `calls` done so far, the rate of the last interval in
/// calls/s, and the failed calls by kind, e.g. `1200 calls, 950 calls/s, 3 errors
/// (request_timeout 3)`.
pub fn progress_message(calls: u64, calls_per_sec: f64, errors: &BTreeMap<String, u64>) -> String {
    let failed: u64 = errors.values().sum();
    let mut message = format!("{calls} calls, {calls_per_sec:.0} calls/s, {failed} errors");
    if failed > 0 {
        let kinds: Vec<String> = errors
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        message.push_str(&format!(" ({})", kinds.join(", ")));
    }
    message
}

/// How often the progress message is refreshed.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Refreshes `bar`'s message from `tally` every [`PROGRESS_EVERY`] (calls, calls/s over the
/// last interval, errors) until dropped; with a run of `seconds`, its position too.
pub(super) async fn show_progress(
    bar: ProgressBar,
    tally: Arc<Mutex<Tally>>,
    started: Instant,
    seconds: bool,
) {
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut last_calls, mut last_at) = (0, Instant::now());
    loop {
        ticks.tick().await;
        let (calls, errors) = {
            let tally = lock(&tally);
            (tally.calls, tally.errors.clone())
        };
        let now = Instant::now();
        let rate =
            (calls - last_calls) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-3);
        (last_calls, last_at) = (calls, now);
        bar.set_message(progress_message(calls, rate, &errors));
        if seconds {
            bar.set_position(now.duration_since(started).as_secs());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::progress_message;

    #[test]
    fn the_progress_message_names_each_error_kind() {
        let mut errors = BTreeMap::new();
        assert_eq!(
            progress_message(1200, 950.4, &errors),
            "1200 calls, 950 calls/s, 0 errors"
        );
        errors.insert("request_timeout".to_string(), 3);
        errors.insert("node_down".to_string(), 2);
        assert_eq!(
            progress_message(1200, 0.0, &errors),
            "1200 calls, 0 calls/s, 5 errors (node_down 2, request_timeout 3)"
        );
    }
}
