//! Random-node helpers in one process (reference §7.4, §11.9.6–7 restated): a filter that
//! matches this node (the empty one included) runs the call here, `call_directly` does too,
//! a filter matching nobody waits exactly as its `Retry` allows and then fails with
//! `NoMatchingNodes`, and `load_balancer(name)` counts the call in that balancer's drain.
//!
//! One `Node` per process: nextest runs each test alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, Node, NodeConfig, NodeFilter, RemoteFunction,
    Retry, RetryCount, Unavailable,
};
use rpclb::functions::{register_all, Fail, Sleep, Whoami};

/// Runs of [`Record`] in this process.
static RECORDED: AtomicUsize = AtomicUsize::new(0);

/// Counts its runs in [`RECORDED`] (to see a cast run).
struct Record;
impl RemoteFunction for Record {
    const NAME: &'static str = "test.record";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        RECORDED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

async fn start(config: NodeConfig) -> Node {
    let node = Node::start(config.cookie("random-node")).await.unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node.register(Record).unwrap();
    node
}

async fn node(name: &str) -> Node {
    start(NodeConfig::new(name, "127.0.0.1:0")).await
}

/// Waits (≤ 2 s) until [`Record`] ran `count` times.
async fn recorded(count: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while RECORDED.load(Ordering::SeqCst) < count {
        assert!(
            Instant::now() < deadline,
            "recorded {}",
            RECORDED.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn is_no_matching<T: std::fmt::Debug>(outcome: &Result<T, Error>, filter: &str) -> bool {
    matches!(outcome, Err(Error::NoMatchingNodes { filter: f }) if f == filter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_matching_this_node_runs_the_call_here() {
    let node = node("solo_worker").await;
    let me = node.name().to_string();
    // §11.9.6: the empty filter matches every node, this one included.
    assert_eq!(
        node.call_on_random_node::<Whoami>("", ()).await.unwrap(),
        me
    );
    let (reply, served_by) = node
        .call_on_random_node::<Whoami>("", ())
        .with_node()
        .await
        .unwrap();
    assert_eq!((reply.as_str(), &*served_by), (me.as_str(), me.as_str()));
    // A substring and a regex naming this node.
    assert_eq!(
        node.call_on_random_node::<Whoami>("solo", ())
            .await
            .unwrap(),
        me
    );
    let exact = NodeFilter::regex("^solo_worker@").unwrap();
    assert_eq!(
        node.call_on_random_node::<Whoami>(exact.clone(), ())
            .await
            .unwrap(),
        me
    );
    // §11.9.7: a cast runs here too.
    node.cast_on_random_node::<Record>("", ()).await.unwrap();
    recorded(1).await;
    let sent_to = node
        .cast_on_random_node::<Record>(exact, ())
        .with_node()
        .await
        .unwrap();
    assert_eq!(&*sent_to, me);
    recorded(2).await;
    // The remote error contract and the timeout hold for the local run.
    match node
        .call_on_random_node::<Fail>("", "boom".to_string())
        .await
    {
        Err(Error::Remote { node: n, .. }) => assert_eq!(n, me),
        other => panic!("a failing function gave {other:?}"),
    }
    let started = Instant::now();
    let slow = node
        .call_on_random_node::<Sleep>("", 5_000)
        .timeout(Duration::from_millis(100))
        .await;
    assert!(
        matches!(&slow, Err(Error::RequestTimeout { node: n, .. }) if *n == me),
        "{slow:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    let zero = node
        .call_on_random_node::<Whoami>("", ())
        .timeout(Duration::ZERO)
        .await;
    assert!(
        matches!(
            zero,
            Err(Error::InvalidConfig {
                option: "timeout",
                ..
            })
        ),
        "{zero:?}"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_patterns_apply_to_this_node_too() {
    let node =
        start(NodeConfig::new("solo_qa", "127.0.0.1:0").excluded_node_patterns(["_qa"])).await;
    // "solo" is in the name, but `_qa` is excluded unless the filter names it.
    let outcome = node
        .call_on_random_node::<Whoami>("solo", ())
        .retry(Retry::never())
        .await;
    assert!(is_no_matching(&outcome, "\"solo\""), "{outcome:?}");
    assert_eq!(
        node.call_on_random_node::<Whoami>("solo_qa", ())
            .await
            .unwrap(),
        node.name()
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_directly_runs_here_whatever_the_filter() {
    let node = node("direct").await;
    let (reply, served_by) = node
        .call_on_random_node::<Whoami>("elsewhere", ())
        .call_directly(true)
        .retry(Retry::never())
        .with_node()
        .await
        .unwrap();
    assert_eq!((reply.as_str(), &*served_by), (node.name(), node.name()));
    let before = RECORDED.load(Ordering::SeqCst);
    node.cast_on_random_node::<Record>("elsewhere", ())
        .call_directly(true)
        .retry(Retry::never())
        .await
        .unwrap();
    recorded(before + 1).await;
    node.shutdown().await;

    // The node's default, and a call overriding it.
    let node = start(NodeConfig::new("direct_default", "127.0.0.1:0").call_directly(true)).await;
    assert_eq!(
        node.call_on_random_node::<Whoami>("elsewhere", ())
            .await
            .unwrap(),
        node.name()
    );
    let routed = node
        .call_on_random_node::<Whoami>("elsewhere", ())
        .call_directly(false)
        .retry(Retry::never())
        .await;
    assert!(is_no_matching(&routed, "\"elsewhere\""), "{routed:?}");
    node.shutdown().await;
}

/// Counts the library's "no connected node matches; waiting" events (one per wait).
struct CountWaits(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountWaits {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == "rpc_load_balancer::random_node" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_matching_node_fails_after_exactly_the_retrys_attempts() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let waits = Arc::new(AtomicUsize::new(0));
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(CountWaits(Arc::clone(&waits))),
    )
    .unwrap();
    let node = node("lonely").await;
    let took = |started: Instant| started.elapsed();

    // 2 retries, 100 ms apart: 3 looks, 2 waits of 80–120 ms.
    let started = Instant::now();
    let outcome = node
        .call_on_random_node::<Whoami>("nobody", ())
        .retry(Retry::new(RetryCount::Times(2), Duration::from_millis(100)))
        .await;
    let elapsed = took(started);
    assert!(is_no_matching(&outcome, "\"nobody\""), "{outcome:?}");
    assert_eq!(waits.swap(0, Ordering::SeqCst), 2, "waits");
    assert!(
        (Duration::from_millis(150)..Duration::from_secs(1)).contains(&elapsed),
        "{elapsed:?}"
    );
    assert_eq!(
        outcome.unwrap_err().to_string(),
        "no nodes in cluster found with filter \"nobody\""
    );

    // Never: one look, at once. A regex filter is displayed as /…/.
    let started = Instant::now();
    let regex = NodeFilter::regex("^nobody@").unwrap();
    let outcome = node
        .call_on_random_node::<Whoami>(regex, ())
        .retry(Retry::never())
        .await;
    assert!(is_no_matching(&outcome, "/^nobody@/"), "{outcome:?}");
    assert_eq!(waits.swap(0, Ordering::SeqCst), 0, "waits");
    assert!(took(started) < Duration::from_millis(100));

    // Unlimited retries end at the call's timeout, not after the 5 s sleep.
    let started = Instant::now();
    let outcome = node
        .call_on_random_node::<Whoami>("nobody", ())
        .retry(Retry::new(RetryCount::Unlimited, Duration::from_secs(5)))
        .timeout(Duration::from_millis(300))
        .await;
    let elapsed = took(started);
    assert!(is_no_matching(&outcome, "\"nobody\""), "{outcome:?}");
    assert!(
        (Duration::from_millis(300)..Duration::from_secs(1)).contains(&elapsed),
        "{elapsed:?}"
    );
    waits.store(0, Ordering::SeqCst);

    // Casts wait the same way; the node's retry is the default.
    let outcome = node
        .cast_on_random_node::<Record>("nobody", ())
        .retry(Retry::new(RetryCount::Times(1), Duration::from_millis(50)))
        .await;
    assert!(is_no_matching(&outcome, "\"nobody\""), "{outcome:?}");
    assert_eq!(waits.swap(0, Ordering::SeqCst), 1, "waits");
    node.shutdown().await;

    let node = start(
        NodeConfig::new("lonely_default", "127.0.0.1:0")
            .retry(Retry::new(RetryCount::Times(3), Duration::from_millis(20))),
    )
    .await;
    let outcome = node.call_on_random_node::<Whoami>("nobody", ()).await;
    assert!(is_no_matching(&outcome, "\"nobody\""), "{outcome:?}");
    assert_eq!(waits.swap(0, Ordering::SeqCst), 3, "waits");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_balancer_fails_at_once() {
    let node = node("untracked").await;
    let slow = Retry::new(RetryCount::Unlimited, Duration::from_secs(5));
    let started = Instant::now();
    let call = node
        .call_on_random_node::<Whoami>("nobody", ())
        .retry(slow)
        .load_balancer("nope")
        .await;
    assert!(
        matches!(&call, Err(Error::UnknownBalancer { balancer }) if balancer == "nope"),
        "{call:?}"
    );
    // Even when the call would run here.
    let here = node
        .call_on_random_node::<Whoami>("", ())
        .load_balancer("nope")
        .await;
    assert!(
        matches!(here, Err(Error::UnknownBalancer { .. })),
        "{here:?}"
    );
    let cast = node
        .cast_on_random_node::<Record>("nobody", ())
        .retry(slow)
        .load_balancer("nope")
        .await;
    assert!(
        matches!(cast, Err(Error::UnknownBalancer { .. })),
        "{cast:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    // A balancer that was stopped is unknown too.
    let gone = Balancer::start(BalancerConfig::new("gone")).await.unwrap();
    gone.stop().await;
    let started = Instant::now();
    let stopped = node
        .call_on_random_node::<Whoami>("", ())
        .load_balancer("gone")
        .await;
    assert!(
        matches!(stopped, Err(Error::UnknownBalancer { .. })),
        "{stopped:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    node.shutdown().await;
}

/// Waits (≤ 2 s) until `balancer` counts `count` calls in flight.
async fn in_flight(balancer: &Balancer, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while balancer.in_flight() != count {
        assert!(
            Instant::now() < deadline,
            "{} in flight, expected {count}",
            balancer.in_flight()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_call_counts_in_the_balancers_in_flight_and_drain() {
    let node = node("tracked").await;
    let work = Balancer::start(BalancerConfig::new("work").leave_grace(Duration::from_millis(50)))
        .await
        .unwrap();
    assert_eq!(work.in_flight(), 0);

    // Counted while it runs, released when it ends.
    let call = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Sleep>("", 400)
                .load_balancer("work")
                .await
        })
    };
    in_flight(&work, 1).await;
    call.await.unwrap().unwrap();
    assert_eq!(work.in_flight(), 0);

    // Untracked calls are not counted, nor is a tracked call's wait for a matching node.
    let untracked = {
        let node = node.clone();
        tokio::spawn(async move { node.call_on_random_node::<Sleep>("", 300).await })
    };
    let waiting = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Whoami>("nobody", ())
                .retry(Retry::new(RetryCount::Unlimited, Duration::from_secs(5)))
                .timeout(Duration::from_millis(400))
                .load_balancer("work")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(work.in_flight(), 0);
    untracked.await.unwrap().unwrap();
    let waited = waiting.await.unwrap();
    assert!(is_no_matching(&waited, "\"nobody\""), "{waited:?}");

    // The balancer's drain waits for a tracked call.
    let call = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Sleep>("", 1_000)
                .load_balancer("work")
                .await
        })
    };
    in_flight(&work, 1).await;
    let started = Instant::now();
    work.stop().await;
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(700)..Duration::from_secs(5)).contains(&took),
        "stop took {took:?} with a 1 s call in flight"
    );
    assert_eq!(work.in_flight(), 0);
    call.await.unwrap().unwrap();
    // Once stopped, it tracks nothing.
    let after = node
        .call_on_random_node::<Whoami>("", ())
        .load_balancer("work")
        .await;
    assert!(
        matches!(after, Err(Error::UnknownBalancer { .. })),
        "{after:?}"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_ends_when_the_node_shuts_down_or_its_balancer_stops() {
    let node = node("waiter").await;
    let patient = Retry::new(RetryCount::Unlimited, Duration::from_secs(30));
    // Tracked by a balancer that begins to stop: UnknownBalancer at once.
    let track = Balancer::start(BalancerConfig::new("track")).await.unwrap();
    let tracked = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Sleep>("nobody", 1)
                .retry(patient)
                .timeout(Duration::from_secs(10))
                .load_balancer("track")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    track.stop().await;
    let outcome = tokio::time::timeout(Duration::from_secs(2), tracked)
        .await
        .expect("the wait ended with the stop")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::UnknownBalancer { .. })),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // Untracked, while the node shuts down: NodeStopped at once.
    let waiting = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Sleep>("nobody", 1)
                .retry(patient)
                .timeout(Duration::from_secs(10))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let shutting = {
        let node = node.clone();
        tokio::spawn(async move { node.shutdown().await })
    };
    let outcome = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the wait ended with the shutdown")
        .unwrap();
    assert!(
        matches!(
            outcome,
            Err(Error::ServiceUnavailable {
                reason: Unavailable::NodeStopped,
                ..
            })
        ),
        "{outcome:?}"
    );
    shutting.await.unwrap();
}
