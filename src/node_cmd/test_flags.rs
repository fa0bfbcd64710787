//! The test flags of `rpclb node` (`--cpu-reply`, `--wire-version`, `--wire-extra-field`,
//! `--balancer-parent`, the test CPU samplers): the library's test hooks, refused without the
//! `test-hooks` feature.

use rpc_load_balancer::NodeConfig;

use crate::cli::NodeArgs;
use crate::CmdResult;

/// The test flags `--cpu-reply`, `--wire-version` and `--wire-extra-field` (the library's test
/// hooks).
#[cfg(feature = "test-hooks")]
pub(super) fn apply_test_flags(config: NodeConfig, args: &NodeArgs) -> CmdResult<NodeConfig> {
    let config = config
        .cpu_reply_garbage(args.cpu_reply == "garbage")
        .cpu_reply_error(args.cpu_reply == "error");
    rpc_load_balancer::send_newer_wire_fields(args.wire_extra_field);
    Ok(match args.wire_version {
        Some(version) => config.wire_version(version),
        None => config,
    })
}

/// Without the `test-hooks` feature the test flags `--cpu-reply`, `--wire-version`,
/// `--wire-extra-field`, `--balancer-parent` and `--trace-record` are refused (the node does
/// not start) rather than ignored.
#[cfg(not(feature = "test-hooks"))]
pub(super) fn apply_test_flags(config: NodeConfig, args: &NodeArgs) -> CmdResult<NodeConfig> {
    if args.cpu_reply != "normal"
        || args.wire_version.is_some()
        || args.wire_extra_field
        || args.balancer_parent
        || args.trace_record
    {
        return Err(
            "--cpu-reply, --wire-version, --wire-extra-field, --balancer-parent and \
             --trace-record are test flags: this rpclb was built without its `test-hooks` feature"
                .into(),
        );
    }
    Ok(config)
}

/// The parent of `--balancer-parent`: an app's supervisor whose `post_stop` is empty, so it
/// stops (or is killed) without stopping its balancers; the test hook
/// `ControlRequest::EndBalancerParent` ends it.
pub(super) struct TestParent;

impl ractor::Actor for TestParent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// Keeps the deliberate panics of the `panic` and `const-then-panic` test samplers off stderr
/// (each is logged as a failed sample at WARN anyway); every other panic is reported as usual.
#[cfg(feature = "test-hooks")]
pub(super) fn quiet_test_sampler_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        let deliberate = message.starts_with("the `panic` test sampler")
            || message.starts_with("the `const-then-panic` test sampler");
        if !deliberate {
            report(info);
        }
    }));
}
