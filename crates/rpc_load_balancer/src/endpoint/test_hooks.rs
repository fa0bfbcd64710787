//! The control requests that are test hooks (`KillLoadBalancer`, `CrashPoller`,
//! `EndBalancerParent`): they stay in
//! [`ControlRequest`] at their wire indices in every build, so that nodes built with and
//! without the `test-hooks` feature decode each other's requests alike, but only a node built
//! with the feature carries them out. One built without it answers them with `BadRequest`,
//! as a node that does not know a request does.

use crate::control::ControlRequest;

/// Whether this build carries out the test hooks' control requests (feature `test-hooks`;
/// the library's own unit tests always do).
pub(crate) const HONOURED: bool = cfg!(any(test, feature = "test-hooks"));

/// The name of `request` if it is a test hook's control request.
fn hook_name(request: &ControlRequest) -> Option<&'static str> {
    match request {
        ControlRequest::KillLoadBalancer(_) => Some("KillLoadBalancer"),
        ControlRequest::CrashPoller(_) => Some("CrashPoller"),
        ControlRequest::EndBalancerParent { .. } => Some("EndBalancerParent"),
        _ => None,
    }
}

/// Why a node refuses `request`, if it is a test hook and `honoured` is false (the node was
/// built without the `test-hooks` feature): the message of the `BadRequest` it answers.
pub(crate) fn refusal(request: &ControlRequest, honoured: bool) -> Option<String> {
    let name = hook_name(request).filter(|_| !honoured)?;
    Some(format!(
        "{name} is a test hook: this node was built without rpc_load_balancer's `test-hooks` \
         feature and does not carry it out"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hooks_are_refused_and_only_without_the_feature() {
        let kill = ControlRequest::KillLoadBalancer("work".into());
        let crash = ControlRequest::CrashPoller("work".into());
        let parent = ControlRequest::EndBalancerParent {
            name: "work".into(),
            kill: false,
        };
        for hook in [&kill, &crash, &parent] {
            let why = refusal(hook, false).expect("refused without the feature");
            assert!(why.contains("`test-hooks`"), "{why}");
            assert_eq!(refusal(hook, true), None, "carried out with it");
        }
        assert!(refusal(&kill, false)
            .unwrap()
            .starts_with("KillLoadBalancer "));
        assert!(refusal(&crash, false).unwrap().starts_with("CrashPoller "));
        for other in [
            ControlRequest::Ping,
            ControlRequest::StopBalancer("work".into()),
            ControlRequest::CpuReading,
        ] {
            assert_eq!(refusal(&other, false), None, "{other:?}");
        }
    }
}
