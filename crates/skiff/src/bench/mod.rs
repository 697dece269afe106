//! `skiff bench cri`: a benchmark client for any CRI v1 endpoint (Skiff, containerd,
//! CRI-O), so runtimes are measured side by side with the same code.
//!
//! It measures, over `--count` iterations of one pod with one container each:
//! each call of a pod's life on its own: RunPodSandbox, CreateContainer, StartContainer,
//! StopContainer (timeout 0, so the runtime's kill path, not a grace period),
//! RemoveContainer, StopPodSandbox, RemovePodSandbox — min, median and p90 in milliseconds. Then it keeps `--pods` levels of pods running (each a
//! sandbox with one `sleep` container) and reports the memory of the runtime and of its
//! per-pod processes at each level ([`memory`] defines them).

pub mod controllers;
mod memory;
mod pods;
pub mod scheduler;
mod stats;

use std::time::Duration;

use anyhow::{Context, bail};
use skiff_kubelet::cri::{Cri, Remote};
use skiff_runtime::k8s_cri::v1::VersionRequest;

use crate::cli::BenchCriArgs;
use pods::Pods;

/// Time given to a runtime to settle (shims started, memory touched) before measuring.
const SETTLE: Duration = Duration::from_secs(2);

pub async fn cri(args: BenchCriArgs) -> anyhow::Result<()> {
    let socket = pods::socket_path(&args.endpoint)?;
    let cri = Remote::connect(&args.endpoint).await?;
    let version = cri.version(VersionRequest::default()).await?;
    let runtime_pid = memory::peer_pid(&socket)
        .with_context(|| format!("finding the process serving {}", socket.display()))?;
    let Some(image) = args.image.clone() else {
        bail!("--image is required: the image each benchmark container runs");
    };
    let mut pods = Pods::new(&cri, &image)?;
    pods.pull().await?;

    println!(
        "CRI endpoint {} — {} {} (pid {runtime_pid}), image {image}",
        args.endpoint, version.runtime_name, version.runtime_version
    );
    let timings = pods.time_cycles(args.count).await?;
    println!();
    println!("{}", stats::timing_table(&timings, args.count));

    let mut levels = args.pods.clone();
    levels.sort_unstable();
    let mut rows = Vec::new();
    for level in levels {
        pods.run_until(level).await?;
        tokio::time::sleep(SETTLE).await;
        rows.push(memory::sample(runtime_pid, &socket, level)?);
    }
    let cleanup = pods.remove_all().await;
    println!("{}", stats::memory_table(&rows));
    cleanup
}
