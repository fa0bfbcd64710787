//! Every control request (remote admin is off on the fuzzed node: admin ones are refused),
//! and control requests that go wrong.

use super::{control, raw, Seeds, HUGE64};
use crate::control::ControlRequest;

pub(super) fn add(seeds: &mut Seeds) {
    let list = Some(vec!["a@".to_string(), "@h".to_string()]);
    let requests = [
        ("ping", ControlRequest::Ping),
        ("nodes", ControlRequest::Nodes),
        ("functions", ControlRequest::Functions),
        ("stats", ControlRequest::Stats),
        (
            "connection-of",
            ControlRequest::ConnectionOf("a@127.0.0.1".into()),
        ),
        ("peers", ControlRequest::Peers),
        ("members", ControlRequest::Members("reports".into())),
        ("in-flight", ControlRequest::InFlight("reports".into())),
        (
            "start-balancer",
            ControlRequest::StartBalancer {
                name: "reports".into(),
                algorithm: "round_robin".into(),
                node_match_list: None,
            },
        ),
        (
            "start-balancer-match-list",
            ControlRequest::StartBalancer {
                name: "r".into(),
                algorithm: "no such algorithm".into(),
                node_match_list: list,
            },
        ),
        (
            "stop-balancer",
            ControlRequest::StopBalancer("reports".into()),
        ),
        (
            "stop-balancer-report",
            ControlRequest::StopBalancerReport("reports".into()),
        ),
        (
            "kill-load-balancer",
            ControlRequest::KillLoadBalancer("reports".into()),
        ),
        ("cpu-reading", ControlRequest::CpuReading),
        ("cpu-readings", ControlRequest::CpuReadings),
        (
            "crash-poller",
            ControlRequest::CrashPoller("reports".into()),
        ),
        ("served", ControlRequest::Served("reports".into())),
        ("leaving", ControlRequest::Leaving("a@127.0.0.1".into())),
        ("cancel", ControlRequest::Cancel(7)),
        ("cancel-max", ControlRequest::Cancel(u64::MAX)),
        ("cpu-selection", ControlRequest::CpuSelection),
        (
            "joined",
            ControlRequest::Joined {
                node: "a@127.0.0.1".into(),
                addr: "127.0.0.1:1".into(),
            },
        ),
        ("gossip", ControlRequest::Gossip(vec![directory_entry()])),
        ("directory", ControlRequest::Directory),
        (
            "gossip-digest",
            ControlRequest::GossipDigest(vec![crate::control::DigestItem::of(&directory_entry())]),
        ),
        (
            "gossip-entries",
            ControlRequest::GossipEntries(vec![directory_entry()]),
        ),
    ];
    for (name, request) in &requests {
        seeds.add(&format!("control-{name}"), control(request));
    }
    let ping = control(&ControlRequest::Ping);
    seeds.add("control-unknown-variant", raw(&[0x7f]));
    seeds.add("control-unknown-variant-huge", raw(&HUGE64));
    seeds.add(
        "control-trailing-bytes",
        [ping.clone(), vec![0x01, 0x02]].concat(),
    );
    let members = control(&ControlRequest::Members("reports".into()));
    seeds.add(
        "control-members-truncated",
        members[..members.len() - 2].to_vec(),
    );
    seeds.add(
        "control-members-huge-length",
        raw(&[&[0x06][..], &HUGE64].concat()),
    );
    // A directory exchange claiming a huge number of entries (index 24).
    seeds.add(
        "control-gossip-huge-length",
        raw(&[&[0x18][..], &HUGE64].concat()),
    );
}

/// A node directory entry as a sparse-mesh node sends it.
pub(super) fn directory_entry() -> crate::control::DirectoryEntry {
    crate::control::DirectoryEntry {
        node: "a@127.0.0.1".into(),
        addr: "127.0.0.1:1".into(),
        incarnation: 1_764_892_800_000,
        counter: 42,
        serves: vec!["reports".into()],
        calls: vec!["feeds".into()],
    }
}
