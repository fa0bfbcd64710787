//! `rpclb control`: one control request to a node.

use clap::Args;

use super::ClusterArgs;

/// `rpclb control`.
#[derive(Debug, Clone, Args)]
pub struct ControlArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Full name of the node to ask.
    #[arg(long)]
    pub node: String,
    /// Print one JSON object instead of text: `{"ok":true,"node":..,"reply":{..}}` or, on any
    /// failure (joining the cluster, a usage error — kind `usage`, exit status 2 — or the
    /// request), `{"ok":false,"node":..,"error":{"kind","code","message","node"}}`. `reply` is
    /// ping `{"node","wire_version"}`, nodes `{"nodes":[..]}`, functions `{"functions":[..]}`,
    /// stats `{"served_in_flight","served_total"}`, labels `{"labels":{KEY:VALUE,..}}`, cpu_reading `{"cpu","age_ms"}` (% and ms;
    /// both null without a reading), cpu_readings `{"readings":[{"node","cpu","age_ms"}],
    /// "selection":[{"balancer","members":[{"node","cpu"}]}]}` (`selection`: per LeastCpu
    /// balancer on the node, the value it routes each member by — 50 when missing or older
    /// than its cpu_cache_ttl; null from a node too old to say), crash_poller `{"done":true}`,
    /// stop_balancer `{"balancer","outcome","routed_in_flight","served_in_flight","took_ms"}`
    /// (`outcome`: drained, timed_out — calls still running at the drain timeout were cut —
    /// or killed; from a node too old to report, `{"done":true}`).
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the answer, in ms (≥ 1). Default: 60,000 for stop_balancer (it
    /// answers when the drain has ended, up to the node's --drain-timeout-ms, 15,000 by
    /// default), 10,000 for every other request.
    #[arg(long, value_parser = super::values::at_least_one)]
    pub timeout_ms: Option<u64>,
    /// ping, nodes, functions, stats, labels (the node's labels, KEY=VALUE one a line),
    /// cpu_reading (the node's own CPU reading and its age),
    /// cpu_readings (every CPU reading the node holds, and what its LeastCpu balancers route
    /// each member by), crash_poller BALANCER (make that LeastCpu balancer's Poller fail;
    /// needs remote admin on the node) or stop_balancer BALANCER (drain and stop the node's
    /// member of that balancer and report how it went; needs remote admin on the node).
    pub request: String,
    /// The request's argument: the balancer name of crash_poller and stop_balancer.
    pub arg: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    #[test]
    fn help_lists_stop_balancer_and_control_takes_a_timeout() {
        use clap::CommandFactory as _;
        let mut cli = Cli::command();
        let top = cli.render_help().to_string();
        assert!(top.contains("stop_balancer"), "{top}");
        let control = cli.find_subcommand_mut("control").unwrap();
        let help = control.render_long_help().to_string();
        assert!(help.contains("stop_balancer BALANCER"), "{help}");
        assert!(
            help.contains(r#"stop_balancer `{"balancer","outcome""#),
            "{help}"
        );
        assert!(help.contains("--timeout-ms"), "{help}");
        let parsed = |extra: &[&str]| {
            let args = ["rpclb", "control", "--peer", "h:1", "--node", "a@h"];
            match Cli::try_parse_from(args.iter().chain(extra)).map(|cli| cli.command) {
                Ok(Command::Control(args)) => Ok(args.timeout_ms),
                Ok(other) => panic!("{other:?}"),
                Err(error) => Err(error),
            }
        };
        assert_eq!(parsed(&["stop_balancer", "work"]).unwrap(), None);
        assert_eq!(
            parsed(&["--timeout-ms", "90000", "stop_balancer", "work"]).unwrap(),
            Some(90_000)
        );
        assert!(parsed(&["--timeout-ms", "0", "ping"]).is_err());
    }

    #[test]
    fn control_takes_an_argument_and_demo_a_burn_index() {
        let cli = Cli::try_parse_from([
            "rpclb",
            "control",
            "--peer",
            "h:1",
            "--node",
            "a@h",
            "crash_poller",
            "work",
        ])
        .unwrap();
        match cli.command {
            Command::Control(args) => {
                assert_eq!(args.request, "crash_poller");
                assert_eq!(args.arg.as_deref(), Some("work"));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["rpclb", "demo", "--algorithm", "least_cpu", "--burn", "2"])
            .unwrap();
        match cli.command {
            Command::Demo(args) => assert_eq!(args.burn, Some(2)),
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["rpclb", "demo", "--burn", "0"]).is_err());
    }
}
