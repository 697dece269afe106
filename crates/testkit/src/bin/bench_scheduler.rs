//! Scheduler benchmark: `skiff scheduler` against `skiff apiserver` (SQLite), driven by
//! `skiff bench scheduler` (the node simulator: fake Nodes, pods of mixed shapes).
//!
//! `skiff-bench-scheduler --skiff PATH [--nodes 1000,5000] [--pods 10000]
//! [--shapes plain,spread] [--log-dir DIR]` runs, for each number of nodes and each
//! shape, a fresh API server and scheduler (client QPS and burst 5,000, as upstream's
//! scheduler_perf sets them) and `skiff bench scheduler`, which prints the scheduled
//! pods per second, the creation-to-binding latencies and the scheduler's RSS.
//! `--log-dir DIR` keeps the logs as `DIR/<nodes>-<shape>-{apiserver,scheduler}.log`.
//!
//! Everything it starts is stopped at exit, also on error.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use skiff_testkit::{ApiServer, ApiServerOptions, Backend, Scheduler};

struct Args {
    skiff: PathBuf,
    nodes: Vec<usize>,
    pods: usize,
    shapes: Vec<String>,
    log_dir: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        skiff: PathBuf::new(),
        nodes: vec![1000, 5000],
        pods: 10_000,
        shapes: vec!["plain".into(), "spread".into()],
        log_dir: None,
    };
    let mut skiff = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--nodes" => {
                args.nodes = value()?
                    .split(',')
                    .map(|n| n.parse().context("--nodes takes numbers"))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--pods" => args.pods = value()?.parse().context("--pods takes a number")?,
            "--shapes" => args.shapes = value()?.split(',').map(str::to_owned).collect(),
            "--log-dir" => args.log_dir = Some(PathBuf::from(value()?)),
            other => bail!(
                "unknown argument {other}; usage: skiff-bench-scheduler --skiff PATH \
                 [--nodes 1000,5000] [--pods 10000] [--shapes plain,spread] [--log-dir DIR]"
            ),
        }
    }
    args.skiff = skiff.context("--skiff PATH is required")?;
    Ok(args)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    for &nodes in &args.nodes {
        for shape in &args.shapes {
            let api = ApiServer::start(ApiServerOptions::new(&args.skiff, Backend::Sqlite))?;
            let sched = Scheduler::start(
                &args.skiff,
                &api.kubeconfig(),
                &[
                    "--leader-elect=false",
                    "--kube-api-qps=5000",
                    "--kube-api-burst=5000",
                ],
            )?;
            let pid = sched.pid().context("the scheduler is not running")?;
            println!();
            let status = Command::new(&args.skiff)
                .args(["bench", "scheduler", "--kubeconfig"])
                .arg(api.kubeconfig())
                .args([
                    "--nodes",
                    &nodes.to_string(),
                    "--pods",
                    &args.pods.to_string(),
                ])
                .args(["--shape", shape, "--scheduler-pid", &pid.to_string()])
                .status()
                .context("running skiff bench scheduler")?;
            if let Some(dir) = &args.log_dir {
                std::fs::create_dir_all(dir)?;
                std::fs::write(
                    dir.join(format!("{nodes}-{shape}-apiserver.log")),
                    api.log(),
                )?;
                std::fs::write(
                    dir.join(format!("{nodes}-{shape}-scheduler.log")),
                    sched.log(),
                )?;
            }
            if !status.success() {
                bail!(
                    "skiff bench scheduler failed ({status}); scheduler log (tail):\n{}",
                    sched.log_tail()
                );
            }
        }
    }
    Ok(())
}
