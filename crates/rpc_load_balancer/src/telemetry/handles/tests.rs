//! Handle sets: made once per label set, made again for another recorder, not kept for a
//! thread-local recorder, bounded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

use super::{RecorderId, Table};
use crate::telemetry::{RpcTelemetry, RPC_DURATION, RPC_START, RPC_STOP};

/// One series: name, labels, value.
type Series = (String, Vec<(String, String)>, Arc<Value>);

/// A recorder that counts each series' increments (and histogram samples) by name and
/// labels.
#[derive(Default)]
struct Counting {
    series: Mutex<Vec<Series>>,
}

#[derive(Default)]
struct Value(AtomicU64);

impl CounterFn for Value {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

impl HistogramFn for Value {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Counting {
    fn value(&self, key: &Key) -> Arc<Value> {
        let labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        let mut series = self.series.lock().unwrap();
        if let Some((.., v)) = series
            .iter()
            .find(|(n, l, _)| n == key.name() && *l == labels)
        {
            return Arc::clone(v);
        }
        let value = Arc::new(Value::default());
        series.push((key.name().to_string(), labels, Arc::clone(&value)));
        value
    }

    /// The count of the series `name` whose labels include `pairs`.
    fn count(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.series
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, labels, _)| {
                n == name
                    && pairs
                        .iter()
                        .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(.., v)| v.0.load(Ordering::Relaxed))
            .sum()
    }
}

impl Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.value(key))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.value(key))
    }
}

fn direct() -> SharedString {
    SharedString::const_str("")
}

#[test]
fn a_label_set_is_made_once_and_found_again() {
    let table = Table::new(16);
    let a = table.get("call", "found_again", &direct(), "a@h");
    let again = table.get("call", "found_again", &direct(), "a@h");
    assert!(Arc::ptr_eq(&a, &again), "made twice");
    let others = [
        table.get("cast", "found_again", &direct(), "a@h"),
        table.get("call", "found_again", &SharedString::const_str("b"), "a@h"),
        table.get("call", "found_again", &direct(), "b@h"),
        table.get("call", "found_again2", &direct(), "a@h"),
    ];
    for other in &others {
        assert!(
            !Arc::ptr_eq(&a, other),
            "another label set shares the handles"
        );
    }
    assert_eq!(table.len(), 5);
    assert_eq!(&**a.node(), "a@h");
}

#[test]
fn the_table_keeps_at_most_its_capacity() {
    let table = Table::new(8);
    for i in 0..20 {
        let node = format!("n{i}@h");
        let handles = table.get("call", "capacity", &direct(), &node);
        assert_eq!(&**handles.node(), node, "a full table still gives handles");
    }
    assert_eq!(table.len(), 8);
    let first = table.get("call", "capacity", &direct(), "n0@h");
    assert!(Arc::ptr_eq(
        &first,
        &table.get("call", "capacity", &direct(), "n0@h")
    ));
    let past = table.get("call", "capacity", &direct(), "n19@h");
    assert!(!Arc::ptr_eq(
        &past,
        &table.get("call", "capacity", &direct(), "n19@h")
    ));
}

#[test]
fn handles_follow_a_recorder_installed_after_they_were_made() {
    let table = Table::new(16);
    let before = table.get("call", "follow", &direct(), "a@h");
    before.started();
    let recorder = Counting::default();
    metrics::with_local_recorder(&recorder, || {
        assert_ne!(RecorderId::current(), before.recorder);
        let after = table.get("call", "follow", &direct(), "a@h");
        assert!(!Arc::ptr_eq(&before, &after), "kept the no-op handles");
        after.started();
        after.stopped("ok", 1.0);
        after.stopped("request_timeout", 2.0);
        // A thread-local recorder's handles are not kept (another one may take its address).
        let again = table.get("call", "follow", &direct(), "a@h");
        assert!(
            !Arc::ptr_eq(&after, &again),
            "kept a local recorder's handles"
        );
    });
    assert_eq!(table.len(), 1, "only the no-op recorder's set is kept");
    let labels = [("function", "follow"), ("node", "a@h"), ("type", "call")];
    assert_eq!(recorder.count(RPC_START, &labels), 1);
    assert_eq!(
        recorder.count(RPC_STOP, &[&labels[..], &[("status", "ok")]].concat()),
        1
    );
    assert_eq!(
        recorder.count(
            RPC_STOP,
            &[&labels[..], &[("status", "request_timeout")]].concat()
        ),
        1
    );
    assert_eq!(recorder.count(RPC_DURATION, &labels), 2);
}

/// A call tracked before a recorder exists and one after: the second is counted, with the
/// documented labels, though its label set was first made with no recorder.
#[cfg(feature = "telemetry")]
#[test]
fn a_call_after_a_recorder_is_installed_is_counted() {
    let balancer: Arc<str> = Arc::from("follow_bal");
    let call = |telemetry_ok: bool| {
        let mut telemetry = RpcTelemetry::start("call", "follow_call", Some(&balancer));
        telemetry.target("m@h");
        if telemetry_ok {
            telemetry.finish::<()>(&Ok(()));
        }
    };
    call(true);
    let recorder = Counting::default();
    metrics::with_local_recorder(&recorder, || {
        call(true);
        call(false);
    });
    let labels = [
        ("node", "m@h"),
        ("function", "follow_call"),
        ("type", "call"),
        ("load_balancer", "follow_bal"),
    ];
    assert_eq!(recorder.count(RPC_START, &labels), 2);
    let status = |s| [&labels[..], &[("status", s)]].concat();
    assert_eq!(recorder.count(RPC_STOP, &status("ok")), 1);
    assert_eq!(recorder.count(RPC_STOP, &status("cancelled")), 1);
}

/// Thread-local recorders made one after another at the same address (a test's loop): each
/// counts its own call, not the handles of the one before.
#[test]
fn local_recorders_at_one_address_each_count_their_calls() {
    let table = Table::new(16);
    let mut slot: Option<Counting> = None;
    let mut counts = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..3 {
        let recorder = slot.insert(Counting::default());
        addresses.push(std::ptr::from_ref(recorder) as usize);
        metrics::with_local_recorder(&*recorder, || {
            table.get("call", "reused", &direct(), "a@h").started();
        });
        counts.push(recorder.count(RPC_START, &[("function", "reused")]));
        slot = None;
    }
    assert!(
        addresses.iter().all(|a| *a == addresses[0]),
        "{addresses:?}"
    );
    assert_eq!(counts, [1, 1, 1]);
}

/// The global recorder's handles are made once per label set and found again.
#[test]
fn a_global_recorders_handles_are_kept() {
    let recorder = Arc::new(Counting::default());
    if metrics::set_global_recorder(Arc::clone(&recorder)).is_err() {
        panic!("a global recorder is installed already in this test process");
    }
    let table = Table::new(16);
    let first = table.get("call", "global", &direct(), "a@h");
    let again = table.get("call", "global", &direct(), "a@h");
    assert!(Arc::ptr_eq(&first, &again), "made twice");
    first.started();
    again.started();
    assert_eq!(recorder.count(RPC_START, &[("function", "global")]), 2);
    // A thread-local recorder on top of it is not kept, and gets its own counts.
    let local = Counting::default();
    metrics::with_local_recorder(&local, || {
        let mine = table.get("call", "global", &direct(), "a@h");
        assert!(!Arc::ptr_eq(&first, &mine));
        mine.started();
    });
    assert_eq!(local.count(RPC_START, &[("function", "global")]), 1);
    assert!(Arc::ptr_eq(
        &first,
        &table.get("call", "global", &direct(), "a@h")
    ));
    assert_eq!(table.len(), 1);
}
