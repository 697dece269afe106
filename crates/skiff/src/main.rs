//! `skiff`: Kubernetes in one binary. This crate is CLI wiring only; every role lives in its
//! own crate (see ARCHITECTURE.md).

mod apiserver;
mod bench;
mod cli;
mod controller_manager;
mod image;
mod kubelet;
mod runtime;
mod scavenger;
mod scheduler;
mod server;
mod signals;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The per-container shim forks and daemonizes, so it must run before any thread exists:
    // dispatch it ahead of argument parsing, logging and the tokio runtime.
    let mut args = std::env::args();
    match args.nth(1).as_deref() {
        Some("shim") => std::process::exit(skiff_runtime::shim::main(args.collect())),
        // The holder of a pod's shared PID namespace joins namespaces and forks: same rule.
        Some(skiff_runtime::sandbox::pid::SUBCOMMAND) => {
            std::process::exit(skiff_runtime::sandbox::pid::main(args.collect()))
        }
        _ => {}
    }

    let cli = cli::Cli::parse();
    init_tracing();
    // rustls-based clients (image pulls) need exactly one process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if cli.command.is_daemon() {
        scavenger::start();
    }

    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run(cli.command)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: cli::Command) -> anyhow::Result<()> {
    match command {
        cli::Command::Kubelet(args) => kubelet::run(*args).await,
        cli::Command::Runtime(args) => runtime::run(args).await,
        cli::Command::Apiserver(args) => apiserver::run(args).await,
        cli::Command::Scheduler(args) => scheduler::run(args).await,
        cli::Command::ControllerManager(args) => controller_manager::run(args).await,
        cli::Command::Server(args) => server::run(args).await,
        cli::Command::Image(args) => image::run(args).await,
        cli::Command::Bench(cli::BenchCommand::Cri(args)) => bench::cri(args).await,
        cli::Command::Bench(cli::BenchCommand::Scheduler(args)) => {
            bench::scheduler::run(args).await
        }
        cli::Command::Bench(cli::BenchCommand::Controllers(args)) => {
            bench::controllers::run(args).await
        }
    }
}

/// Logs go to stderr; `RUST_LOG` filters them (default `info`).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
