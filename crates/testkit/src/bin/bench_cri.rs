//! Skiff and containerd side by side under `skiff bench cri`.
//!
//! `skiff-bench-cri --skiff PATH [--count N] [--pods 0,10,50]` starts a Skiff runtime and
//! a containerd 1.6 with the CRI harness (`skiff_testkit::cri`: private directories, CNI
//! bridge, the local registry with the busybox image), then runs `skiff bench cri` against
//! each endpoint in turn with the same arguments and prints both reports. Everything it
//! starts is removed at exit.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use skiff_testkit::cri::{CriRuntime, Flavor};

struct Args {
    skiff: PathBuf,
    count: String,
    pods: String,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut skiff = None;
    let mut count = "10".to_string();
    let mut pods = "0,10,50".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--count" => count = value()?,
            "--pods" => pods = value()?,
            "-h" | "--help" => {
                println!(
                    "usage: skiff-bench-cri --skiff PATH [--count N (default 10)] [--pods LIST (default 0,10,50)]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    Ok(Args { skiff, count, pods })
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

async fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    skiff_testkit::cri::set_skiff_binary(&args.skiff);
    for flavor in [Flavor::Skiff, Flavor::Containerd] {
        let rt = CriRuntime::start(flavor).await?;
        println!("==== {flavor} ====");
        let status = Command::new(&args.skiff)
            .args(["bench", "cri", "--endpoint"])
            .arg(format!("unix://{}", rt.socket().display()))
            .args(["--image", &rt.busybox(), "--count", &args.count])
            .args(["--pods", &args.pods])
            .env("RUST_LOG", "warn")
            .status()
            .context("running skiff bench cri")?;
        if !status.success() {
            bail!(
                "skiff bench cri against {flavor} failed ({status}); {flavor} log (tail):\n{}",
                rt.log_tail()
            );
        }
        println!();
    }
    Ok(())
}
