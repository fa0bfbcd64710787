//! Spans, events and metrics, seen through metrics-util's debugging recorder and a capturing
//! `tracing` layer, across real processes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use rpc_load_balancer::telemetry::{describe, SeriesKind};
use rpc_load_balancer::{Balancer, BalancerConfig, RoundRobin};
use rpclb::harness::Cluster;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::{Echo, Fail, Sleep, Whoami, BIN, MESH_TIMEOUT};

type Fields = BTreeMap<String, String>;

/// A recorded value, copied out of the debugging recorder's snapshot.
#[derive(Debug)]
enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

#[derive(Default)]
struct FieldMap(Fields);

impl Visit for FieldMap {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

/// Closed `rpc_load_balancer.rpc` spans and selection events, with their fields.
#[derive(Default, Clone)]
struct Captured {
    spans: Arc<Mutex<Vec<Fields>>>,
    events: Arc<Mutex<Vec<Fields>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Captured {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() == "rpc_load_balancer.rpc" {
            let mut fields = FieldMap::default();
            attrs.record(&mut fields);
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(fields);
            }
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<FieldMap>() {
                values.record(fields);
            }
        }
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(fields) = span.extensions_mut().remove::<FieldMap>() {
                self.spans.lock().unwrap().push(fields.0);
            }
        }
    }
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == "rpc_load_balancer::selection" {
            let mut fields = FieldMap::default();
            event.record(&mut fields);
            self.events.lock().unwrap().push(fields.0);
        }
    }
}

fn span_with<'a>(spans: &'a [Fields], pairs: &[(&str, &str)]) -> Option<&'a Fields> {
    spans.iter().find(|s| {
        pairs
            .iter()
            .all(|(k, v)| s.get(*k).map(String::as_str) == Some(*v))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_events_and_metrics_carry_the_documented_names_and_labels() {
    // Recorder and subscriber first: handles are registered as balancers build snapshots.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let captured = Captured::default();
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("rpc_load_balancer", tracing::Level::TRACE);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(captured.clone().with_filter(filter)),
    )
    .unwrap();

    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    rpclb::functions::register_all(&me, Duration::ZERO).unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();

    for _ in 0..4 {
        work.call::<Whoami>(()).await.unwrap();
    }
    work.call::<Sleep>(2_000)
        .timeout(Duration::from_millis(200))
        .await
        .unwrap_err();
    work.call::<Fail>("no".into()).await.unwrap_err();
    work.cast::<Echo>("cast".into()).await.unwrap();
    assert_eq!(
        me.call::<Echo>(me.name(), "local".into()).await.unwrap(),
        "local"
    );
    me.call::<Whoami>(names[0].clone(), ()).await.unwrap();
    let nobody =
        Balancer::start(BalancerConfig::new("nobody").node_match_list(Vec::<String>::new()))
            .await
            .unwrap();
    nobody
        .call::<Whoami>(())
        .retry(rpc_load_balancer::Retry::never())
        .await
        .unwrap_err();

    // Metrics: the emitted set is the described set, with the described labels.
    let snapshot = snapshotter.snapshot().into_vec();
    // (LeastCpu's Poller series appear only with a LeastCpu balancer: least_cpu.rs checks them;
    // ejection's, slow start's and pushback's only with those options: outlier.rs, pushback.rs.)
    let described: BTreeMap<&str, _> = describe()
        .into_iter()
        .filter(|s| !crate::optional(s.name))
        .map(|s| (s.name, s))
        .collect();
    let emitted: BTreeSet<&str> = snapshot.iter().map(|(key, ..)| key.key().name()).collect();
    assert_eq!(emitted, described.keys().copied().collect::<BTreeSet<_>>());
    let mut rows: Vec<(String, BTreeMap<String, String>, Value)> = Vec::new();
    for (key, _unit, _desc, value) in &snapshot {
        let name = key.key().name();
        let series = &described[name];
        let kind = match key.kind() {
            MetricKind::Counter => SeriesKind::Counter,
            MetricKind::Gauge => SeriesKind::Gauge,
            MetricKind::Histogram => SeriesKind::Histogram,
        };
        assert_eq!(kind, series.kind, "{name}");
        let labels: BTreeMap<String, String> = key
            .key()
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        let keys: BTreeSet<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            series.labels.iter().copied().collect::<BTreeSet<_>>(),
            "{name} labels"
        );
        let value = match value {
            DebugValue::Counter(c) => Value::Counter(*c),
            DebugValue::Gauge(g) => Value::Gauge(g.into_inner()),
            DebugValue::Histogram(samples) => {
                Value::Histogram(samples.iter().map(|s| s.into_inner()).collect())
            }
        };
        rows.push((name.to_string(), labels, value));
    }
    let counter = |name: &str, pairs: &[(&str, &str)]| -> u64 {
        rows.iter()
            .filter(|(n, labels, _)| {
                n == name
                    && pairs
                        .iter()
                        .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, value)| match value {
                Value::Counter(c) => *c,
                _ => 0,
            })
            .sum()
    };
    use rpc_load_balancer::telemetry::{
        NODE_SELECTED, NODE_SELECTED_EMPTY, RPC_DURATION, RPC_IN_FLIGHT, RPC_START, RPC_STOP,
    };
    let ok_whoami = [
        ("function", "whoami"),
        ("load_balancer", "work"),
        ("status", "ok"),
        ("type", "call"),
    ];
    assert_eq!(counter(RPC_STOP, &ok_whoami), 4);
    for node in &names {
        let on_node = [
            ("function", "whoami"),
            ("load_balancer", "work"),
            ("node", node.as_str()),
        ];
        assert_eq!(
            counter(RPC_START, &on_node),
            2,
            "round robin: 2 of 4 on {node}"
        );
        let selected = [
            ("algorithm", "round_robin"),
            ("load_balancer", "work"),
            ("node", node.as_str()),
        ];
        assert!(counter(NODE_SELECTED, &selected) >= 2);
    }
    assert_eq!(
        counter(
            RPC_STOP,
            &[("function", "sleep"), ("status", "request_timeout")]
        ),
        1
    );
    assert_eq!(
        counter(
            RPC_STOP,
            &[("function", "fail"), ("status", "service_unavailable")]
        ),
        1
    );
    assert_eq!(
        counter(
            RPC_STOP,
            &[
                ("function", "echo"),
                ("type", "cast"),
                ("load_balancer", "work")
            ]
        ),
        1
    );
    let local = [
        ("function", "echo"),
        ("type", "call"),
        ("load_balancer", ""),
        ("node", me.name()),
        ("status", "ok"),
    ];
    assert_eq!(counter(RPC_STOP, &local), 1, "direct local call");
    assert_eq!(
        counter(
            RPC_START,
            &[
                ("function", "whoami"),
                ("load_balancer", ""),
                ("node", names[0].as_str())
            ]
        ),
        1
    );
    assert_eq!(
        counter(
            NODE_SELECTED_EMPTY,
            &[("algorithm", "random"), ("load_balancer", "nobody")]
        ),
        1
    );
    assert_eq!(
        counter(
            RPC_STOP,
            &[
                ("load_balancer", "nobody"),
                ("node", ""),
                ("status", "service_unavailable")
            ]
        ),
        1
    );
    let durations = rows
        .iter()
        .filter(|(n, labels, _)| n == RPC_DURATION && labels["status"] == "request_timeout");
    for (_, _, value) in durations {
        match value {
            Value::Histogram(samples) => {
                assert!(
                    samples.iter().all(|ms| (150.0..1500.0).contains(ms)),
                    "{samples:?}"
                )
            }
            other => panic!("duration is {other:?}"),
        }
    }

    let in_flight = rows
        .iter()
        .find(|(n, labels, _)| n == RPC_IN_FLIGHT && labels["load_balancer"] == "work");
    match in_flight {
        Some((_, _, Value::Gauge(now))) => assert_eq!(*now, 0.0, "every selection was released"),
        other => panic!("in-flight gauge: {other:?}"),
    }

    // Spans: one per call and cast, with the target node and the outcome.
    let spans = captured.spans.lock().unwrap().clone();
    let timeout = span_with(
        &spans,
        &[
            ("function", "sleep"),
            ("status", "request_timeout"),
            ("type", "call"),
        ],
    )
    .unwrap();
    assert!(
        names.contains(&timeout["node"]),
        "the span names the target, not the caller: {timeout:?}"
    );
    assert_eq!(timeout["load_balancer"], "work");
    assert!(span_with(
        &spans,
        &[("function", "echo"), ("type", "cast"), ("status", "ok")]
    )
    .is_some());
    let local = span_with(&spans, &[("function", "echo"), ("type", "call")]).unwrap();
    assert_eq!(
        (local["node"].as_str(), local["load_balancer"].as_str()),
        (me.name(), "")
    );
    assert!(span_with(
        &spans,
        &[
            ("load_balancer", "nobody"),
            ("status", "service_unavailable")
        ]
    )
    .is_some());

    // Selection events: TRACE per pick and for an empty pool, DEBUG explanation.
    let events = captured.events.lock().unwrap().clone();
    let picks: Vec<_> = events
        .iter()
        .filter(|e| e.get("message").map(String::as_str) == Some("node selected"))
        .collect();
    assert!(picks.len() >= 4);
    assert!(picks.iter().all(|e| e["algorithm"] == "round_robin"
        && e["load_balancer"] == "work"
        && e["pool_size"] == "2"));
    assert!(events.iter().any(
        |e| e.get("message").map(String::as_str) == Some("no members")
            && e["load_balancer"] == "nobody"
    ));
    assert!(events
        .iter()
        .any(|e| e.get("rule").is_some_and(|r| r.starts_with("round robin"))));
    me.shutdown().await;
}

/// The sum of the counters named `name` whose labels include `pairs`.
fn counted(snapshot: &[(String, Fields, u64)], name: &str, pairs: &[(&str, &str)]) -> u64 {
    snapshot
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && pairs
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(.., count)| count)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_node_calls_are_instrumented_like_direct_calls() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let captured = Captured::default();
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("rpc_load_balancer", tracing::Level::TRACE);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(captured.clone().with_filter(filter)),
    )
    .unwrap();

    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    rpclb::functions::register_all(&me, Duration::ZERO).unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    // Only n1 matches: one plain call, one tracked by `work`, one failing, one cast; and one
    // run here (this node matches its own name).
    let n1 = format!("{}@", names[1].split('@').next().unwrap());
    me.call_on_random_node::<Whoami>(n1.as_str(), ())
        .await
        .unwrap();
    me.call_on_random_node::<Whoami>(n1.as_str(), ())
        .load_balancer("work")
        .await
        .unwrap();
    me.call_on_random_node::<Fail>(n1.as_str(), "no".into())
        .await
        .unwrap_err();
    me.cast_on_random_node::<Echo>(n1.as_str(), "cast".into())
        .await
        .unwrap();
    me.call_on_random_node::<Echo>("tester@", "here".into())
        .await
        .unwrap();
    // No node matches: it fails before it has a node, and is still counted (node empty).
    let nowhere = me
        .call_on_random_node::<Whoami>("nobody-is-called-this@", ())
        .retry(rpc_load_balancer::Retry::never())
        .await
        .unwrap_err();
    assert!(
        matches!(nowhere, rpc_load_balancer::Error::NoMatchingNodes { .. }),
        "{nowhere:?}"
    );

    let snapshot: Vec<(String, Fields, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(count) => Some((
                key.key().name().to_string(),
                key.key()
                    .labels()
                    .map(|l| (l.key().to_string(), l.value().to_string()))
                    .collect(),
                count,
            )),
            _ => None,
        })
        .collect();
    use rpc_load_balancer::telemetry::{RPC_START, RPC_STOP};
    // The direct path's series: `node` = the node that ran it, no balancer label value (also
    // for the call tracked by `work`, which only counts in its drain).
    let on_n1 = |function, kind, status: Option<&'static str>| {
        let mut pairs = vec![
            ("function", function),
            ("type", kind),
            ("load_balancer", ""),
            ("node", names[1].as_str()),
        ];
        pairs.extend(status.map(|s| ("status", s)));
        pairs
    };
    assert_eq!(
        counted(&snapshot, RPC_START, &on_n1("whoami", "call", None)),
        2
    );
    assert_eq!(
        counted(&snapshot, RPC_STOP, &on_n1("whoami", "call", Some("ok"))),
        2
    );
    assert_eq!(
        counted(
            &snapshot,
            RPC_STOP,
            &on_n1("fail", "call", Some("service_unavailable"))
        ),
        1
    );
    assert_eq!(
        counted(&snapshot, RPC_STOP, &on_n1("echo", "cast", Some("ok"))),
        1
    );
    let here = [
        ("function", "echo"),
        ("type", "call"),
        ("load_balancer", ""),
        ("node", me.name()),
        ("status", "ok"),
    ];
    assert_eq!(counted(&snapshot, RPC_STOP, &here), 1);
    let unmatched = [
        ("function", "whoami"),
        ("type", "call"),
        ("load_balancer", ""),
        ("node", ""),
    ];
    assert_eq!(counted(&snapshot, RPC_START, &unmatched), 1);
    let failed = [unmatched.as_slice(), &[("status", "service_unavailable")]].concat();
    assert_eq!(counted(&snapshot, RPC_STOP, &failed), 1);
    assert_eq!(
        counted(&snapshot, RPC_START, &[("load_balancer", "work")]),
        0,
        "no call went through the balancer's path"
    );

    // One `rpc_load_balancer.rpc` span per call, naming its target and outcome.
    let spans = captured.spans.lock().unwrap().clone();
    let on = |function: &str, kind: &str, node: &str| {
        spans
            .iter()
            .filter(|s| {
                s.get("function").map(String::as_str) == Some(function)
                    && s.get("type").map(String::as_str) == Some(kind)
                    && s.get("node").map(String::as_str) == Some(node)
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let whoami = on("whoami", "call", &names[1]);
    assert_eq!(whoami.len(), 2, "{spans:?}");
    assert!(whoami
        .iter()
        .all(|s| s["status"] == "ok" && s["load_balancer"].is_empty()));
    assert_eq!(
        on("fail", "call", &names[1])[0]["status"],
        "service_unavailable"
    );
    assert_eq!(on("echo", "cast", &names[1]).len(), 1, "{spans:?}");
    assert_eq!(on("echo", "call", me.name())[0]["status"], "ok");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
