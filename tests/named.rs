//! Named balancers (`NamedBalancer`, `named_balancer!`): the original's `use RpcLoadBalancer`
//! module (reference §2.5, §11.9), with the name fixed (§13 #22) and typed errors for a
//! balancer that is not started here (§13 #15).
//!
//! One `Node` per process: nextest runs each test alone.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{
    named_balancer, Balancer, BalancerConfig, CallDirect, Error, FunctionError, HashRing,
    NamedBalancer, Node, NodeConfig, RemoteFunction, RoundRobin,
};
use rpclb::functions::{register_all, Sleep, Whoami};
use tokio::sync::mpsc;

/// Sends its argument to the test: shows that a cast ran.
struct Note(mpsc::UnboundedSender<String>);

impl RemoteFunction for Note {
    const NAME: &'static str = "named_test.note";
    type Args = String;
    type Reply = ();
    async fn call(&self, text: String) -> Result<(), FunctionError> {
        self.0
            .send(text)
            .map_err(|_| FunctionError::new("test gone"))
    }
}

/// Starts this process's node with the demo functions and `Note`; returns the notes.
async fn node(name: &str) -> (Node, mpsc::UnboundedReceiver<String>) {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let (notes, received) = mpsc::unbounded_channel();
    node.register(Note(notes)).unwrap();
    (node, received)
}

async fn noted(received: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(1), received.recv())
        .await
        .expect("the cast ran within 1 s")
        .unwrap()
}

fn is_unknown<T>(outcome: Result<T, Error>, name: &str) {
    match outcome {
        Err(Error::UnknownBalancer { balancer }) => assert_eq!(balancer, name),
        Err(other) => panic!("expected UnknownBalancer {name}: {other:?}"),
        Ok(_) => panic!("expected UnknownBalancer {name}: Ok"),
    }
}

/// As the original's test module: `use RpcLoadBalancer, selection_algorithm: CallDirect`.
struct Direct;
impl NamedBalancer for Direct {
    const NAME: &'static str = "named_direct";
    fn config() -> BalancerConfig {
        BalancerConfig::new(Self::NAME).algorithm(CallDirect)
    }
}

named_balancer!(
    /// The default algorithm (Random).
    Plain = "named_plain"
);
named_balancer!(pub(crate) Rotating = "named_rotating", RoundRobin::new(),);
named_balancer!(Keyed = "named_keyed", HashRing::new());

/// Tries to rename itself in `config()`.
struct Renamed;
impl NamedBalancer for Renamed {
    const NAME: &'static str = "named_fixed";
    fn config() -> BalancerConfig {
        BalancerConfig::new("named_other").algorithm(RoundRobin::new())
    }
}

/// §11.9 2-5, with CallDirect as in the original.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_named_balancer_routes_like_the_original_use_module() {
    let (node, mut notes) = node("named_direct").await;
    let started = Direct::start().await.unwrap();
    assert_eq!(started.name(), "named_direct");
    assert_eq!(started.algorithm_name(), "call_direct");

    let handle = Direct::handle().unwrap();
    assert_eq!(handle.name(), Direct::NAME);
    assert!(
        Balancer::lookup("named_direct").is_ok(),
        "the plain API sees it"
    );
    assert_eq!(
        Direct::members().unwrap().nodes(),
        vec![node.name().to_string()]
    );
    assert_eq!(Direct::select_node(None).unwrap(), node.name());
    assert_eq!(
        Direct::call::<Whoami>(()).unwrap().await.unwrap(),
        node.name()
    );
    Direct::cast::<Note>("direct".into())
        .unwrap()
        .await
        .unwrap();
    assert_eq!(noted(&mut notes).await, "direct");

    // §11.9 6-7: `""` matches every node, this one included, so it runs here.
    assert_eq!(
        Direct::call_on_random_node::<Whoami>("", ())
            .unwrap()
            .await
            .unwrap(),
        node.name()
    );
    Direct::cast_on_random_node::<Note>("", "random".into())
        .unwrap()
        .await
        .unwrap();
    assert_eq!(noted(&mut notes).await, "random");

    Direct::stop().await.unwrap();
    node.shutdown().await;
}

/// A random-node call through a named balancer counts in its in-flight total while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_node_calls_are_counted_in_the_named_balancer() {
    let (node, _notes) = node("named_random").await;
    Plain::start().await.unwrap();
    let call = Plain::call_on_random_node::<Sleep>("named_random", 400).unwrap();
    let call = tokio::spawn(call.into_future());
    let deadline = Instant::now() + Duration::from_secs(2);
    while Plain::in_flight().unwrap() == 0 {
        assert!(Instant::now() < deadline, "the call was never counted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    call.await.unwrap().unwrap();
    assert_eq!(Plain::in_flight().unwrap(), 0);
    Plain::stop().await.unwrap();
    node.shutdown().await;
}

/// §11.8/§11.9 with the default algorithm: every operation goes through the routed path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_algorithm_routes_calls_and_casts_to_this_node() {
    let (node, mut notes) = node("named_plain").await;
    assert_eq!(Plain::start().await.unwrap().algorithm_name(), "random");
    let me = node.name().to_string();

    let members = Plain::wait_for_members(1, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(members.nodes(), vec![me.clone()]);
    assert_eq!(Plain::select_node(Some(b"k")).unwrap(), me);
    assert_eq!(Plain::select_nodes(3, None).unwrap(), vec![me.clone()]);
    let (reply, served_by) = Plain::call::<Whoami>(())
        .unwrap()
        .timeout(Duration::from_secs(2))
        .with_node()
        .await
        .unwrap();
    assert_eq!((reply, &*served_by), (me.clone(), me.as_str()));
    Plain::cast::<Note>("routed".into())
        .unwrap()
        .key("k")
        .await
        .unwrap();
    assert_eq!(noted(&mut notes).await, "routed");
    // Nothing stays counted: select_node releases its selection before returning, and the
    // cast stops being served once its handler returns (just after it sent the note).
    assert_eq!(Plain::in_flight().unwrap(), 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while Plain::served().unwrap() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the served cast is still counted"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A held selection through the handle is counted until dropped.
    let handle = Plain::handle().unwrap();
    let guard = handle.select_node(None).unwrap();
    assert_eq!(guard.node(), me);
    assert_eq!(Plain::in_flight().unwrap(), 1);
    drop(guard);
    assert_eq!(Plain::in_flight().unwrap(), 0);
    // Asking for more members than exist times out with NoMembers.
    match Plain::wait_for_members(2, Duration::from_millis(50)).await {
        Err(Error::NoMembers { balancer }) => assert_eq!(balancer, Plain::NAME),
        other => panic!("{other:?}"),
    }

    Plain::stop().await.unwrap();
    node.shutdown().await;
}

/// §13 #22: the name can't be overridden — a `config()` naming another balancer is refused by
/// `start` and `spawn_linked`, and nothing starts under either name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_naming_another_balancer_is_refused_naming_name() {
    let (node, _notes) = node("named_renamed").await;
    let refused = |outcome: Result<Balancer, Error>| match outcome {
        Err(error @ Error::InvalidConfig { option: "name", .. }) => {
            let text = error.to_string();
            assert!(
                text.contains("named_fixed") && text.contains("named_other"),
                "{text}"
            );
        }
        other => panic!("expected InvalidConfig name: {other:?}"),
    };
    refused(Renamed::start().await);
    let (parent, _) = Actor::spawn(None, Idle, ()).await.unwrap();
    refused(Renamed::spawn_linked(parent.get_cell()).await);
    assert!(parent.get_cell().get_children().is_empty());
    is_unknown(Renamed::handle(), "named_fixed");
    is_unknown(Balancer::lookup("named_other"), "named_other");

    // A NAME the balancer rules refuse is refused the same way (by the config's checks).
    struct Slashed;
    impl NamedBalancer for Slashed {
        const NAME: &'static str = "a/b";
    }
    assert!(matches!(
        Slashed::start().await,
        Err(Error::InvalidConfig { option: "name", .. })
    ));

    parent.stop(None);
    node.shutdown().await;
}

/// §13 #15: every operation through a named balancer that is not started here fails at once
/// with UnknownBalancer — before the start and after the stop; without a node, NodeNotRunning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_balancer_before_start_and_after_stop() {
    assert!(matches!(Plain::handle(), Err(Error::NodeNotRunning)));
    assert!(matches!(Plain::start().await, Err(Error::NodeNotRunning)));
    let (node, _notes) = node("named_unknown").await;

    async fn all_unknown() {
        let name = Rotating::NAME;
        is_unknown(Rotating::handle(), name);
        is_unknown(Rotating::call::<Whoami>(()), name);
        is_unknown(Rotating::cast::<Whoami>(()), name);
        is_unknown(Rotating::call_on_random_node::<Whoami>("", ()), name);
        is_unknown(Rotating::cast_on_random_node::<Whoami>("", ()), name);
        is_unknown(Rotating::select_node(None), name);
        is_unknown(Rotating::select_nodes(1, None), name);
        is_unknown(Rotating::members(), name);
        is_unknown(Rotating::in_flight(), name);
        is_unknown(Rotating::served(), name);
        let waited = tokio::time::timeout(
            Duration::from_millis(500),
            Rotating::wait_for_members(1, Duration::from_secs(30)),
        )
        .await
        .expect("fails at once, without waiting");
        is_unknown(waited, name);
        is_unknown(Rotating::stop().await, name);
    }

    all_unknown().await;
    let started = Rotating::start().await.unwrap();
    assert_eq!(started.algorithm_name(), "round_robin");
    // One instance per name and node.
    assert!(matches!(
        Rotating::start().await,
        Err(Error::BalancerAlreadyStarted { .. })
    ));
    assert_eq!(
        Rotating::call::<Whoami>(()).unwrap().await.unwrap(),
        node.name()
    );
    Rotating::stop().await.unwrap();
    assert!(!started.is_running());
    all_unknown().await;
    // A call built before the stop fails when awaited, as Balancer::call's would.
    Rotating::start().await.unwrap();
    let built = Rotating::call::<Whoami>(()).unwrap();
    Rotating::stop().await.unwrap();
    is_unknown(built.await, Rotating::NAME);
    // Started again after a stop: the name is free.
    Rotating::start().await.unwrap();
    assert_eq!(Rotating::select_node(None).unwrap(), node.name());
    Rotating::stop().await.unwrap();
    node.shutdown().await;
}

/// Two named balancers side by side, each with its own algorithm; stopping one leaves the
/// other running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_named_balancers_side_by_side() {
    let (node, mut notes) = node("named_pair").await;
    let me = node.name().to_string();
    let rotating = Rotating::start().await.unwrap();
    let keyed = Keyed::start().await.unwrap();
    assert_eq!(rotating.algorithm_name(), "round_robin");
    assert_eq!(keyed.algorithm_name(), "hash_ring");
    assert_eq!(Rotating::handle().unwrap().name(), "named_rotating");
    assert_eq!(Keyed::handle().unwrap().name(), "named_keyed");
    for balancer in [Rotating::members(), Keyed::members()] {
        assert_eq!(balancer.unwrap().nodes(), vec![me.clone()]);
    }
    assert_eq!(
        Keyed::call::<Whoami>(())
            .unwrap()
            .key("user-7")
            .await
            .unwrap(),
        me
    );
    assert_eq!(
        Keyed::select_nodes(2, Some(b"user-7")).unwrap(),
        vec![me.clone()]
    );
    Rotating::cast::<Note>("rotating".into())
        .unwrap()
        .await
        .unwrap();
    assert_eq!(noted(&mut notes).await, "rotating");

    Rotating::stop().await.unwrap();
    is_unknown(Rotating::members(), Rotating::NAME);
    assert!(keyed.is_running());
    assert_eq!(Keyed::call::<Whoami>(()).unwrap().await.unwrap(), me);
    Keyed::stop().await.unwrap();
    node.shutdown().await;
}

/// An actor that does nothing (a parent to link to).
struct Idle;

impl Actor for Idle {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// An app supervisor that owns a named balancer (the original's child spec): starts it
/// linked, and stops it — draining — in `post_stop`.
struct App;

impl Actor for App {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, myself: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Direct::spawn_linked(myself.get_cell()).await?;
        Ok(())
    }

    async fn post_stop(&self, _: ActorRef<()>, _: &mut ()) -> Result<(), ActorProcessingErr> {
        Direct::stop().await?;
        Ok(())
    }
}

/// §11.9 1: under a parent actor — linked to it, usable by name, stopped with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_linked_under_a_parent_actor() {
    let (node, mut notes) = node("named_linked").await;
    let (app, _) = Actor::spawn(None, App, ()).await.unwrap();
    let balancer = Direct::handle().unwrap();
    let children = app.get_cell().get_children();
    assert!(
        children
            .iter()
            .any(|child| child.get_id() == balancer.actor().get_id()),
        "the balancer's supervisor is linked under the app"
    );
    assert_eq!(
        Direct::call::<Whoami>(()).unwrap().await.unwrap(),
        node.name()
    );
    Direct::cast::<Note>("linked".into())
        .unwrap()
        .await
        .unwrap();
    assert_eq!(noted(&mut notes).await, "linked");
    // A second instance of the same name is refused, linked or not.
    let (other, _) = Actor::spawn(None, Idle, ()).await.unwrap();
    assert!(matches!(
        Direct::spawn_linked(other.get_cell()).await,
        Err(Error::BalancerAlreadyStarted { .. })
    ));
    other.stop(None);

    app.stop_and_wait(None, Some(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(!balancer.is_running());
    is_unknown(Direct::handle(), Direct::NAME);
    node.shutdown().await;
}
