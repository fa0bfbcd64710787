//! Node filters across real processes (the original's §11.2, restated): a balancer's
//! `node_match_list` decides on each node whether that node is a member, so calls routed
//! through a regex-filtered balancer land only on the node the regex names, while a substring
//! filter takes every node containing it; excluded patterns keep a node out of filters that
//! don't name them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, ErrorCode, Node, NodeConfig,
    NodeFilter, Retry, RoundRobin,
};
use rpclb::harness::{random_cookie, NodeProcess, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// Bound for a membership change to reach this node.
const MEMBERSHIP_BOUND: Duration = Duration::from_secs(5);

/// The regex naming exactly the node called `options_feed`, on any host.
const EXACT: &str = "^options_feed@";

/// Starts child `name` with `args` added, dialling `peer` if given.
async fn child(name: &str, cookie: &str, peer: Option<&str>, args: &[&str]) -> NodeProcess {
    let mut spec = NodeSpec::new(name, cookie);
    if let Some(peer) = peer {
        spec = spec.peer(peer);
    }
    for arg in args {
        spec = spec.arg(*arg);
    }
    spec.start(BIN)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// This process's node, `rpc_load_balancer_primary` (as in the original's test), connected
/// to `first` and waiting for `peers` peers.
async fn join(cookie: &str, first: &NodeProcess, peers: usize) -> Node {
    let me =
        Node::start(NodeConfig::new("rpc_load_balancer_primary", "127.0.0.1:0").cookie(cookie))
            .await
            .unwrap();
    me.connect(first.addr()).await.unwrap();
    me.wait_for_peers(peers, MESH_TIMEOUT).await.unwrap();
    me
}

/// A round-robin balancer `name` on this node with `filters` and no retry; this node's name
/// matches none of the filters, so it is a caller only.
async fn caller(name: &str, filters: Vec<NodeFilter>) -> Balancer {
    let balancer = Balancer::start(
        BalancerConfig::new(name)
            .algorithm(RoundRobin::new())
            .node_match_list(filters)
            .retry(Retry::never()),
    )
    .await
    .unwrap();
    assert!(!balancer.is_member(), "{name}: the caller is not a member");
    balancer
}

/// Waits until `balancer` has exactly the members `expected` (sorted full names).
async fn wait_members(balancer: &Balancer, expected: &[String]) {
    let mut watch = balancer.watch_members();
    let reached =
        tokio::time::timeout(MEMBERSHIP_BOUND, watch.wait_for(|m| m.nodes() == expected)).await;
    assert!(
        reached.is_ok(),
        "{}: members {:?}, expected {expected:?}",
        balancer.name(),
        balancer.members().nodes()
    );
}

/// Starts balancer `name` on `node` (admin control) with substring `node_match_list`.
async fn start_on(me: &Node, node: &str, name: &str, node_match_list: Option<Vec<String>>) {
    let start = ControlRequest::StartBalancer {
        name: name.into(),
        algorithm: "round_robin".into(),
        node_match_list,
    };
    assert_eq!(me.control(node, start).await.unwrap(), ControlReply::Done);
}

/// `node`'s own view of `balancer`'s members.
async fn members_seen_by(me: &Node, node: &str, balancer: &str) -> Option<Vec<String>> {
    match me
        .control(node, ControlRequest::Members(balancer.into()))
        .await
        .unwrap()
    {
        ControlReply::Members(members) => members,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Who served each of `calls` calls through `balancer`.
async fn served_by(balancer: &Balancer, calls: usize) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for _ in 0..calls {
        let node = balancer.call::<Whoami>(()).await.unwrap();
        *per_node.entry(node).or_insert(0) += 1;
    }
    per_node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchored_regex_routes_only_to_the_node_it_names() {
    let cookie = random_cookie();
    // `rpclb node --node-match-regex`: each child decides by the regex whether it is a member.
    let exact_args = ["--balancer", "feed_exact", "--node-match-regex", EXACT];
    let kurt = child("options_feed_kurt", &cookie, None, &exact_args).await;
    let me = join(&cookie, &kurt, 1).await;
    let exact = caller("feed_exact", vec![NodeFilter::regex(EXACT).unwrap()]).await;
    let any = caller("feed_any", vec![NodeFilter::from("options_feed")]).await;
    start_on(
        &me,
        kurt.node(),
        "feed_any",
        Some(vec!["options_feed".into()]),
    )
    .await;

    // 1. Only options_feed_kurt connected: the anchored regex matches no node.
    wait_members(&any, &[kurt.node().to_string()]).await;
    // kurt decided before its ready line and the groups it joined reached us together, so the
    // regex balancer's empty pool is settled, not pending.
    assert_eq!(
        members_seen_by(&me, kurt.node(), "feed_exact").await,
        Some(vec![])
    );
    assert!(exact.members().is_empty());
    match exact.call::<Whoami>(()).await {
        Err(error @ Error::NoMembers { .. }) => {
            assert_eq!(error.code(), ErrorCode::ServiceUnavailable)
        }
        other => panic!("a regex matching no node gave {other:?}"),
    }
    // 2. Same cluster: the substring "options_feed" matches options_feed_kurt.
    assert_eq!(any.call::<Whoami>(()).await.unwrap(), kurt.node());

    // 3. options_feed joins: the regex now routes there, and only there.
    let feed = child("options_feed", &cookie, Some(kurt.addr()), &exact_args).await;
    me.wait_for_peers(2, MESH_TIMEOUT).await.unwrap();
    start_on(
        &me,
        feed.node(),
        "feed_any",
        Some(vec!["options_feed".into()]),
    )
    .await;
    let feed_only = vec![feed.node().to_string()];
    let both = vec![feed.node().to_string(), kurt.node().to_string()];
    wait_members(&exact, &feed_only).await;
    wait_members(&any, &both).await;
    let per_node = served_by(&exact, 40).await;
    assert_eq!(per_node, BTreeMap::from([(feed.node().to_string(), 40)]));
    let per_node = served_by(&any, 40).await;
    assert_eq!(
        per_node,
        BTreeMap::from([(feed.node().to_string(), 20), (kurt.node().to_string(), 20)]),
        "the substring matches both nodes"
    );
    // Every node sees the same members: membership is decided by each member for itself.
    let deadline = Instant::now() + MEMBERSHIP_BOUND;
    for node in [kurt.node(), feed.node()] {
        while members_seen_by(&me, node, "feed_exact").await.as_ref() != Some(&feed_only) {
            assert!(Instant::now() < deadline, "{node} never saw {feed_only:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_patterns_keep_a_node_out_unless_the_filter_names_them() {
    let cookie = random_cookie();
    // Both children: `--exclude-pattern _qa`, balancer `feeds` on the substring "options_feed".
    let args = [
        "--exclude-pattern",
        "_qa",
        "--balancer",
        "feeds",
        "--node-match",
        "options_feed",
    ];
    let feed = child("options_feed", &cookie, None, &args).await;
    let qa = child("options_feed_qa", &cookie, Some(feed.addr()), &args).await;
    let me = join(&cookie, &feed, 2).await;
    let feeds = caller("feeds", vec!["options_feed".into()]).await;
    let qa_feeds = caller("qa_feeds", vec!["options_feed_qa".into()]).await;
    let everyone = Balancer::start(
        BalancerConfig::new("everyone")
            .algorithm(RoundRobin::new())
            .retry(Retry::never()),
    )
    .await
    .unwrap();
    for node in [feed.node(), qa.node()] {
        start_on(&me, node, "qa_feeds", Some(vec!["options_feed_qa".into()])).await;
        start_on(&me, node, "everyone", None).await;
    }

    // "options_feed" matches both names, but `_qa` is in options_feed_qa's short name and
    // not in the filter: excluded.
    wait_members(&feeds, &[feed.node().to_string()]).await;
    // A filter naming `_qa` asks for it.
    wait_members(&qa_feeds, &[qa.node().to_string()]).await;
    // Without a node_match_list every node is a member, this one included.
    let mut all = vec![
        feed.node().to_string(),
        qa.node().to_string(),
        me.name().to_string(),
    ];
    all.sort();
    wait_members(&everyone, &all).await;
    assert_eq!(
        members_seen_by(&me, qa.node(), "feeds").await,
        Some(vec![feed.node().to_string()]),
        "the excluded node itself agrees"
    );
    assert_eq!(
        served_by(&feeds, 10).await,
        BTreeMap::from([(feed.node().to_string(), 10)])
    );
    assert_eq!(
        served_by(&qa_feeds, 10).await,
        BTreeMap::from([(qa.node().to_string(), 10)])
    );
    everyone.stop().await;
    me.shutdown().await;
}
