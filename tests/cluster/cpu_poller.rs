//! The LeastCpu Poller across real processes: each kind of failed reading (`timeout`,
//! `unreachable`, `remote_error`, `bad_reply`) is counted and logged at WARN while the Poller
//! keeps running, and a Poller that keeps crashing is restarted alone, later each time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use ractor::ActorId;
use rpc_load_balancer::telemetry::LEAST_CPU_POLL_FAILURES;
use rpc_load_balancer::{ControlReply, ControlRequest, Node};
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use crate::least_cpu::{
    all_fresh, caller, caller_with, cluster, held, member, readings_until, spread, tester, TTL_MS,
};

type Fields = BTreeMap<String, String>;

/// The registered name of balancer `work`'s Poller.
const POLLER: &str = "rpc_load_balancer/work/cpu_poller";

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

/// Events with their level (field `level`), as the test process's subscriber saw them.
#[derive(Default, Clone)]
struct Events(Arc<Mutex<Vec<Fields>>>);

impl<S: Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = FieldMap::default();
        event.record(&mut fields);
        fields
            .0
            .insert("level".into(), event.metadata().level().to_string());
        self.0.lock().unwrap().push(fields.0);
    }
}

/// This test process's metrics and events: the Poller's WARNs (and, for `explained`, the
/// DEBUG `selection explained` events).
struct Telemetry {
    snapshotter: Snapshotter,
    events: Events,
    /// Poll failures counted so far, by `(node, kind)` (a snapshot drains the recorder's
    /// counters: they are added up here).
    failures: Mutex<BTreeMap<(String, String), u64>>,
}

impl Telemetry {
    /// Installs the recorder and the subscriber (process-wide: one per test process).
    fn install(explained: bool) -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        let events = Events::default();
        let mut filter = tracing_subscriber::filter::Targets::new()
            .with_target("rpc_load_balancer::cpu", tracing::Level::WARN);
        if explained {
            filter = filter.with_target("rpc_load_balancer::selection", tracing::Level::DEBUG);
        }
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(events.clone().with_filter(filter)),
        )
        .unwrap();
        Self {
            snapshotter,
            events,
            failures: Mutex::default(),
        }
    }

    /// Poll failures of `node` of `kind` counted so far (metric `LEAST_CPU_POLL_FAILURES`,
    /// labels `load_balancer` = work, `node`, `kind`).
    fn counted(&self, node: &str, kind: &str) -> u64 {
        let mut failures = self.failures.lock().unwrap();
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            if key.name() != LEAST_CPU_POLL_FAILURES {
                continue;
            }
            let label = |name: &str| {
                key.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_string())
                    .unwrap_or_default()
            };
            assert_eq!(label("load_balancer"), "work", "{key:?}");
            if let DebugValue::Counter(n) = value {
                *failures.entry((label("node"), label("kind"))).or_default() += n;
            }
        }
        failures
            .get(&(node.to_string(), kind.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The WARN events `cpu reading failed` about `node` with `kind`.
    fn warned(&self, node: &str, kind: &str) -> Vec<Fields> {
        self.events
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                e.get("message").map(String::as_str) == Some("cpu reading failed")
                    && e.get("node").map(String::as_str) == Some(node)
                    && e.get("kind").map(String::as_str) == Some(kind)
            })
            .cloned()
            .collect()
    }

    /// Waits (≤ `bound`) until `times` failures of `node` of `kind` are counted and as many
    /// WARN events logged; the time it took. Each event names balancer `work` and the error.
    async fn failed(&self, node: &str, kind: &str, times: u64, bound: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let (counted, warned) = (self.counted(node, kind), self.warned(node, kind));
            if counted >= times && warned.len() as u64 >= times {
                for event in &warned {
                    assert_eq!(event["level"], "WARN", "{event:?}");
                    assert_eq!(event["load_balancer"], "work", "{event:?}");
                    assert!(!event["error"].is_empty(), "{event:?}");
                }
                return start.elapsed();
            }
            assert!(
                start.elapsed() < bound,
                "{node}: {counted} {kind} counted and {} logged in {bound:?}; all counts {:?}",
                warned.len(),
                self.failures.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The DEBUG `selection explained` events of balancer `work`.
    fn explained(&self) -> Vec<Fields> {
        self.events
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.get("message").map(String::as_str) == Some("selection explained"))
            .cloned()
            .collect()
    }
}

/// The id of the actor registered as `name`.
fn actor_id(name: &str) -> Option<ActorId> {
    ractor::registry::where_is(name).map(|c| c.get_id())
}

/// Waits (≤ 10 s) until an actor other than `before` is registered as `name`; its id.
async fn replaced(name: &str, before: ActorId) -> ActorId {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match actor_id(name) {
            Some(id) if id != before => return id,
            _ => {}
        }
        assert!(Instant::now() < deadline, "{name} was not restarted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Crashes balancer `work`'s Poller through admin control.
async fn crash_poller(me: &Node) {
    match me
        .control(me.name(), ControlRequest::CrashPoller("work".into()))
        .await
    {
        Ok(ControlReply::Done) => {}
        other => panic!("crash_poller: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_poller_restarts_and_a_garbage_reply_gives_no_reading() {
    let telemetry = Telemetry::install(true);
    let mut garbage = member("const:5");
    garbage.extend(["--cpu-reply".to_string(), "garbage".to_string()]);
    let mut error = member("const:5");
    error.extend(["--cpu-reply".to_string(), "error".to_string()]);
    let cluster = cluster(&[member("const:40"), member("const:60"), garbage, error]).await;
    let names = cluster.names();
    let (garbage, error) = (&names[2], &names[3]);
    let (me, work) = caller(&cluster, 100, 100).await;
    let poller = actor_id(POLLER).expect("the poller runs");
    let good = names[..2].to_vec();
    readings_until(&good, Duration::from_secs(10), all_fresh(&good)).await;
    let mut members = work.watch_members();
    members.mark_unchanged();

    // The garbage node's reply never decodes (bad_reply), the error node's is an error
    // (remote_error): each is counted and logged at every poll, and neither has a reading.
    telemetry
        .failed(garbage, "bad_reply", 3, Duration::from_secs(10))
        .await;
    telemetry
        .failed(error, "remote_error", 3, Duration::from_secs(10))
        .await;
    let refused = telemetry.warned(error, "remote_error");
    assert!(
        refused[0]["error"].contains("cpu_reply_error"),
        "the node's error is passed on: {:?}",
        refused[0]
    );
    assert!(telemetry.warned(garbage, "remote_error").is_empty());
    assert!(telemetry.warned(error, "bad_reply").is_empty());
    let now = held(&names);
    assert!(
        !now.contains_key(garbage) && !now.contains_key(error),
        "{now:?}"
    );
    let cycles_timed = telemetry
        .snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(key, ..)| {
            key.key().name() == rpc_load_balancer::telemetry::LEAST_CPU_POLL_DURATION
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "load_balancer" && l.value() == "work")
        });
    assert!(cycles_timed, "no poll duration recorded");
    // Through all that the Poller kept running: the same actor, and polls keep coming.
    assert_eq!(actor_id(POLLER), Some(poller), "the poller was restarted");
    let before = telemetry.counted(garbage, "bad_reply");
    telemetry
        .failed(garbage, "bad_reply", before + 2, Duration::from_secs(5))
        .await;
    assert_eq!(actor_id(POLLER), Some(poller), "the poller was restarted");

    // 40 (fresh) vs no reading vs 60: a member without a reading counts as the median of the
    // fresh ones (the lower: 40), so the 60 node gets no call and the two without a reading
    // share the calls with the 40 node (their replies then carry their own 5 %).
    let per_node = spread(&work, 200).await;
    assert_eq!(per_node.get(&names[1]), None, "{per_node:?}");
    assert_eq!(per_node.values().sum::<usize>(), 200, "{per_node:?}");
    // The first pick is explained with every member's reading and age, or its lack of one,
    // and the value it counted as.
    let explained = telemetry.explained();
    let first = explained
        .first()
        .expect("selections are explained at DEBUG");
    assert_eq!(first["algorithm"], "least_cpu", "{first:?}");
    let rule = &first["rule"];
    for (node, cpu) in [(&names[0], "40"), (&names[1], "60")] {
        let reading = format!("{node}: {cpu} % ");
        let at = rule
            .find(&reading)
            .unwrap_or_else(|| panic!("{reading:?} in {rule}"));
        let rest = &rule[at + reading.len()..];
        let age: u64 = rest[..rest.find(" ms old").unwrap()].parse().unwrap();
        assert!(age < TTL_MS, "{node} is polled every 100 ms: {rule}");
    }
    for node in [garbage, error] {
        assert!(rule.contains(&format!("{node}: no reading")), "{rule}");
        assert!(
            first["scores"].contains(&format!("(\"{node}\", ")),
            "{first:?}"
        );
    }

    // Crash the Poller through admin control: it is restarted alone, readings resume.
    crash_poller(&me).await;
    replaced(POLLER, poller).await;
    // Past a whole TTL after the restart, readings are still fresh: the new Poller polls.
    tokio::time::sleep(Duration::from_millis(TTL_MS + 300)).await;
    let now = held(&good);
    assert!(
        all_fresh(&good)(&now),
        "readings stopped after the restart: {now:?}"
    );
    assert!(!members.has_changed().unwrap(), "the membership changed");
    assert!(work.is_running());
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_member_times_out_and_a_killed_one_is_unreachable() {
    let telemetry = Telemetry::install(false);
    let mut cluster = cluster(&[member("const:10"), member("const:40")]).await;
    let names = cluster.names();
    let (stopped, other) = (&names[0], &names[1]);
    // This node keeps a paused peer connected (no heartbeat ejection during the test).
    let patient = tester(100)
        .heartbeat_interval(Duration::from_secs(10))
        .heartbeat_timeout(Duration::from_secs(60));
    let (me, work) = caller_with(&cluster, patient, 100).await;
    let poller = actor_id(POLLER).expect("the poller runs");
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;

    // A paused node answers nothing: its reading request times out after 2 s.
    cluster.nodes[0].signal(libc::SIGSTOP);
    let took = telemetry
        .failed(stopped, "timeout", 1, Duration::from_secs(10))
        .await;
    // A request sent just before the pause may have started up to a poll earlier.
    assert!(
        took >= Duration::from_millis(1_800),
        "a timeout after {took:?}, before the 2 s timeout"
    );
    assert_eq!(telemetry.counted(stopped, "unreachable"), 0);
    let now = held(&names);
    assert!(now[stopped].age_ms > TTL_MS, "{now:?}");
    assert!(
        now[other].age_ms < TTL_MS,
        "the other node stays polled: {now:?}"
    );

    // Killed while its next request is outstanding: the connection is lost, unreachable.
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.nodes[0].kill().await;
    telemetry
        .failed(stopped, "unreachable", 1, Duration::from_secs(10))
        .await;
    assert_eq!(telemetry.counted(other, "timeout"), 0);
    assert_eq!(telemetry.counted(other, "unreachable"), 0);
    assert_eq!(actor_id(POLLER), Some(poller), "the poller was restarted");
    assert!(work.is_running());
    readings_until(&names[1..], Duration::from_secs(5), all_fresh(&names[1..])).await;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_poller_backs_off_and_its_balancer_never_restarts() {
    let cluster = cluster(&[member("const:30")]).await;
    let names = cluster.names();
    let (me, work) = caller(&cluster, 100, 100).await;
    // The supervisor starts the Poller before the LoadBalancer: it runs as soon as the
    // balancer has started, and its actor was spawned first (ractor numbers local actors in
    // spawn order).
    let load_balancer = format!("rpc_load_balancer/work/{}", me.name());
    let lb = actor_id(&load_balancer).expect("the load balancer runs");
    let mut poller = actor_id(POLLER).expect("the poller runs with the balancer");
    assert!(
        poller.pid() < lb.pid(),
        "poller {poller} spawned after load balancer {lb}"
    );
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    let mut members = work.watch_members();
    members.mark_unchanged();

    // Crash it as soon as it is back, 5 times: 100, 200, 400, 800, 1,600 ms before each
    // restart (doubling per restart within the supervisor's 10 s window).
    let mut gaps = Vec::new();
    for _ in 0..5 {
        let crashed = Instant::now();
        crash_poller(&me).await;
        poller = replaced(POLLER, poller).await;
        gaps.push(crashed.elapsed());
    }
    for (i, gap) in gaps.iter().enumerate() {
        let backoff = Duration::from_millis(100 << i);
        assert!(
            *gap >= backoff && *gap < backoff + Duration::from_secs(3),
            "restart {i} after {gap:?}, backoff {backoff:?}: {gaps:?}"
        );
    }
    // The balancer was never touched: the same LoadBalancer, the same members, and the
    // restarted Poller polls.
    assert_eq!(
        actor_id(&load_balancer),
        Some(lb),
        "the load balancer restarted"
    );
    assert!(!members.has_changed().unwrap(), "the membership changed");
    assert!(work.is_running());
    tokio::time::sleep(Duration::from_millis(TTL_MS + 300)).await;
    let now = held(&names);
    assert!(all_fresh(&names)(&now), "readings stopped: {now:?}");
    assert_eq!(actor_id(POLLER), Some(poller));
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// LeastCpu reads the CPU that replies report (issue 19): while calls flow to a member, its
/// reading stays fresh from its replies and the Poller does not ask it — here every poll of
/// it fails (`--cpu-reply error`), so a fresh reading can only come from replies, and the
/// failures stop while calls flow, and start again when they stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_heard_from_through_replies_is_not_polled() {
    let telemetry = Telemetry::install(false);
    let mut refusing = member("const:40");
    refusing.extend(["--cpu-reply".to_string(), "error".to_string()]);
    let cluster = cluster(&[refusing]).await;
    let node = cluster.names()[0].clone();
    let (_me, work) = caller(&cluster, 100, 200).await;
    // Idle: polled every 200 ms, each poll fails, no reading.
    telemetry
        .failed(&node, "remote_error", 2, Duration::from_secs(10))
        .await;
    assert!(held(std::slice::from_ref(&node)).is_empty());

    // Calls every 20 ms for 1.5 s: replies bring the reading; polls stop.
    let calls = async {
        let until = Instant::now() + Duration::from_millis(1_500);
        while Instant::now() < until {
            let served = work.call::<crate::Whoami>(()).await.unwrap();
            assert_eq!(served, node);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    // (Let the first replies arrive before counting: a poll may be under way.)
    let warm = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        telemetry.counted(&node, "remote_error")
    };
    let ((), before) = tokio::join!(calls, warm);
    let after = telemetry.counted(&node, "remote_error");
    assert!(
        after <= before + 1,
        "polled while calls flowed: {before} failures after 400 ms, {after} at 1.5 s"
    );
    let reading = held(std::slice::from_ref(&node))
        .remove(&node)
        .expect("a reading from the replies");
    assert_eq!(reading.cpu, 40.0);
    assert!(reading.age_ms < 200, "{reading:?}");

    // Calls stop: the reading ages past the interval and polls (failing) resume.
    telemetry
        .failed(&node, "remote_error", after + 2, Duration::from_secs(10))
        .await;
    work.stop().await;
    cluster.shutdown().await;
}
