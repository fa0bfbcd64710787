//! `rpclb`: run rpc_load_balancer cluster nodes and talk to them. See `rpclb --help`.

use rpclb::cli::{Cli, Command};
use tracing_subscriber::EnvFilter;

fn main() {
    let cli = Cli::parse_checked();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new(rpclb::DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let settings = rpclb::cli::RuntimeSettings::of(&cli);
    let runtime = match settings.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    // demo and bench print one JSON document even when they fail (call/load/control print
    // their own).
    let json_failures = match &cli.command {
        Command::Demo(args) => args.shape.json,
        Command::Bench(args) => args.shape.json,
        _ => false,
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Node(args) => rpclb::node_cmd::run(args).await.map(|()| 0),
            Command::Demo(args) => rpclb::demo_cmd::run(args).await,
            Command::DemoCaller(args) => rpclb::twin::caller::run(args).await,
            Command::Call(args) => rpclb::client_cmd::call(args).await,
            Command::Load(args) => rpclb::client_cmd::load(args).await,
            Command::Control(args) => rpclb::control_cmd::control(args).await,
            Command::Bench(args) => rpclb::bench_cmd::run(args, settings).await,
            // CPU-bound and synchronous: it runs its own threads (`--jobs`).
            Command::Lab(args) => rpclb::lab_cmd::run_lab(args),
        }
    });
    let code = match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            if json_failures {
                println!("{}", rpclb::client_cmd::failure_document(error.as_ref()));
            }
            1
        }
    };
    // A blocking stdin read (--exit-with-stdin) cannot be cancelled: do not wait for it.
    runtime.shutdown_background();
    std::process::exit(code);
}
