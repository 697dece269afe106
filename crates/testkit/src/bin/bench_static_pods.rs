//! Static pod benchmark: `skiff kubelet` on its embedded runtime versus `skiff kubelet` on
//! Debian's containerd 1.6, in one run.
//!
//! `skiff-bench-static-pods --skiff PATH [--sequential N] [--batch N] [--only RUNTIME]
//! [--log-dir DIR]` starts a local
//! registry with the busybox image, then for each runtime a node ([`Node`]) on which it
//! pre-pulls the image with one warm-up pod and measures:
//!
//! - start latency, from a manifest's write to its container's state `running` in
//!   `/pods` (polled every 20 ms): N pods written one after the other, each once the
//!   previous one runs (default 20), then N pods written at once (default 30) —
//!   min / median / p90 / max;
//! - memory at 0 pods and with the batch running (after 2 s to settle): RSS and PSS of
//!   the kubelet, of containerd, and of the per-pod processes (shims, pause and monitor
//!   processes; not the pods' own `sleep`), as `skiff bench cri` counts them
//!   (`crates/skiff/src/bench/memory.rs`, included here).
//!
//! `--only embedded|containerd` measures one runtime. `--log-dir DIR` keeps each node's
//! kubelet log as `DIR/kubelet-<runtime>.log`; with `SKIFF_NODE_RUST_LOG=info,skiff::cri=trace`
//! it holds every CRI call with its duration.
//!
//! Everything it starts is removed at exit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use skiff_testkit::{Node, NodeOptions, NodeRuntime, Registry};

// Shared with `skiff bench cri`; this binary uses the per-process part.
#[allow(dead_code)]
#[path = "../../../skiff/src/bench/memory.rs"]
mod memory;

use memory::{CONTAINER_COMMAND, Memory};

const POLL: Duration = Duration::from_millis(20);
const WARMUP_TIMEOUT: Duration = Duration::from_secs(180);
const SETTLE: Duration = Duration::from_secs(2);

struct Args {
    skiff: PathBuf,
    sequential: usize,
    batch: usize,
    only: Option<String>,
    log_dir: Option<PathBuf>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut skiff = None;
    let (mut sequential, mut batch) = (20, 30);
    let (mut only, mut log_dir) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--sequential" => {
                sequential = value()?.parse().context("--sequential must be a number")?
            }
            "--batch" => batch = value()?.parse().context("--batch must be a number")?,
            "--only" => match value()?.as_str() {
                runtime @ ("embedded" | "containerd") => only = Some(runtime.to_string()),
                other => bail!("--only takes embedded or containerd, not {other:?}"),
            },
            "--log-dir" => log_dir = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!(
                    "usage: skiff-bench-static-pods --skiff PATH [--sequential N (default 20)] [--batch N (default 30)] [--only embedded|containerd] [--log-dir DIR]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    if sequential == 0 || batch == 0 {
        bail!("--sequential and --batch must be at least 1");
    }
    Ok(Args {
        skiff,
        sequential,
        batch,
        only,
        log_dir,
    })
}

/// What one runtime measured.
struct Results {
    runtime: &'static str,
    sequential: Vec<f64>,
    batch: Vec<f64>,
    idle: Usage,
    busy: Usage,
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let registry = Registry::start()?;
    let image = skiff_testkit::busybox()?;
    let reference = skiff_testkit::push(registry.host(), "bench/busybox", "latest", &image)?;
    let runtimes = [
        ("embedded", NodeRuntime::Embedded),
        (
            "containerd",
            NodeRuntime::Containerd {
                registry: registry.host().to_string(),
            },
        ),
    ];
    let mut results = Vec::new();
    for (label, runtime) in runtimes {
        if args.only.as_deref().is_some_and(|only| only != label) {
            continue;
        }
        eprintln!("measuring skiff kubelet on {label}...");
        let node = Node::start(NodeOptions {
            skiff_bin: args.skiff.clone(),
            extra_args: Vec::new(),
            runtime,
        })?;
        let measured = measure(&args, &node, label, &reference);
        if let Some(dir) = &args.log_dir {
            std::fs::create_dir_all(dir)?;
            let kept = dir.join(format!("kubelet-{label}.log"));
            std::fs::copy(node.dir().join("kubelet.log"), &kept)
                .with_context(|| format!("keeping the kubelet log as {}", kept.display()))?;
        }
        results.push(measured?);
    }
    report(&args, &results);
    Ok(())
}

fn measure(
    args: &Args,
    node: &Node,
    runtime: &'static str,
    reference: &str,
) -> anyhow::Result<Results> {
    run_and_remove(node, &[("warmup".to_owned(), Instant::now())], reference)?;
    std::thread::sleep(SETTLE);
    let idle = Usage::measure(node)?;

    let mut sequential = Vec::new();
    let names: Vec<String> = (0..args.sequential).map(|i| format!("seq-{i}")).collect();
    for name in &names {
        node.write_manifest(&format!("{name}.yaml"), &manifest(name, reference))?;
        let written = [(name.clone(), Instant::now())];
        sequential.extend(wait_running(node, &written, WARMUP_TIMEOUT)?);
    }
    remove_all(node, &names)?;

    let mut written = Vec::new();
    for i in 0..args.batch {
        let name = format!("batch-{i}");
        node.write_manifest(&format!("{name}.yaml"), &manifest(&name, reference))?;
        written.push((name, Instant::now()));
    }
    let timeout = Duration::from_secs(120 + 10 * args.batch as u64);
    let batch = wait_running(node, &written, timeout)?;
    std::thread::sleep(SETTLE);
    let busy = Usage::measure(node)?;
    let names: Vec<String> = written.into_iter().map(|(name, _)| name).collect();
    remove_all(node, &names)?;
    Ok(Results {
        runtime,
        sequential,
        batch,
        idle,
        busy,
    })
}

/// Writes the pods, waits until they run, removes them and waits until the node is clean.
fn run_and_remove(node: &Node, pods: &[(String, Instant)], image: &str) -> anyhow::Result<()> {
    for (name, _) in pods {
        node.write_manifest(&format!("{name}.yaml"), &manifest(name, image))?;
    }
    wait_running(node, pods, WARMUP_TIMEOUT)?;
    let names: Vec<String> = pods.iter().map(|(name, _)| name.clone()).collect();
    remove_all(node, &names)
}

/// Removes the manifests of `names`, waits until `/pods` is empty and the teardown (shim
/// exit, CNI DEL, unmounts), which ends after the pods leave `/pods`, is done.
fn remove_all(node: &Node, names: &[String]) -> anyhow::Result<()> {
    for name in names {
        node.remove_manifest(&format!("{name}.yaml"))?;
    }
    node.wait_for("the pods to be gone", WARMUP_TIMEOUT, |list| {
        pods(list).next().is_none()
    })?;
    node.wait_clean(WARMUP_TIMEOUT)
}

/// Polls `/pods` until every pod in `written` (`(pod name, manifest written at)`) runs;
/// returns the milliseconds from write to running, in the order of `written`.
fn wait_running(
    node: &Node,
    written: &[(String, Instant)],
    timeout: Duration,
) -> anyhow::Result<Vec<f64>> {
    let full = |name: &str| format!("{name}-{}", node.node_name());
    let deadline = Instant::now() + timeout;
    let mut started: BTreeMap<String, f64> = BTreeMap::new();
    while started.len() < written.len() {
        if Instant::now() > deadline {
            bail!(
                "only {}/{} pods running after {timeout:?}; kubelet.log is in {}",
                started.len(),
                written.len(),
                node.dir().display()
            );
        }
        if let Ok(list) = node.pods() {
            let now = Instant::now();
            let running: Vec<&str> = pods(&list).filter(|p| running(p)).map(name).collect();
            for (short, at) in written {
                if !started.contains_key(short) && running.contains(&full(short).as_str()) {
                    started.insert(short.clone(), now.duration_since(*at).as_secs_f64() * 1e3);
                }
            }
        }
        std::thread::sleep(POLL);
    }
    Ok(written
        .iter()
        .filter_map(|(short, _)| started.get(short).copied())
        .collect())
}

fn pods(list: &Value) -> impl Iterator<Item = &Value> {
    list["items"].as_array().into_iter().flatten()
}

fn name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

/// Whether every container status of `pod` is in state `running` (and there is one).
fn running(pod: &Value) -> bool {
    let statuses = pod["status"]["containerStatuses"].as_array();
    statuses.is_some_and(|s| !s.is_empty() && s.iter().all(|c| c["state"]["running"].is_object()))
}

/// A pod running [`CONTAINER_COMMAND`] (so the memory code leaves its process out).
fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: {command:?}\n",
        command = CONTAINER_COMMAND
    )
}

/// Memory of a node: the kubelet, containerd (zero for the embedded runtime, which is in
/// the kubelet), and the per-pod processes.
struct Usage {
    kubelet: Memory,
    containerd: Memory,
    per_pod_processes: usize,
    per_pod: Memory,
}

impl Usage {
    fn measure(node: &Node) -> anyhow::Result<Usage> {
        let kubelet_pid = node.pid().context("the kubelet is not running")?;
        let runtime_pids: Vec<u32> = std::iter::once(kubelet_pid)
            .chain(node.runtime_pid())
            .collect();
        let chosen = memory::per_pod_processes(node.dir(), &runtime_pids);
        let mut per_pod = Memory::default();
        for pid in &chosen {
            per_pod += memory::memory_of(*pid);
        }
        Ok(Usage {
            kubelet: memory::memory_of(kubelet_pid),
            containerd: node
                .runtime_pid()
                .map(memory::memory_of)
                .unwrap_or_default(),
            per_pod_processes: chosen.len(),
            per_pod,
        })
    }

    fn total(&self) -> Memory {
        let mut total = self.kubelet;
        total += self.containerd;
        total += self.per_pod;
        total
    }
}

/// Nearest-rank percentile of sorted `values` (`p` in 0..=100).
fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn report(args: &Args, results: &[Results]) {
    println!(
        "skiff kubelet static pods (busybox `{}`, image cached), {}",
        CONTAINER_COMMAND.join(" "),
        args.skiff.display()
    );
    println!();
    println!("manifest write -> container running (ms)");
    println!(
        "{:<12} {:<16} {:>9} {:>9} {:>9} {:>9}",
        "runtime", "pods", "min", "median", "p90", "max"
    );
    for r in results {
        for (label, values) in [
            (format!("{} sequential", args.sequential), &r.sequential),
            (format!("{} at once", args.batch), &r.batch),
        ] {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            println!(
                "{:<12} {label:<16} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                r.runtime,
                percentile(&sorted, 0),
                percentile(&sorted, 50),
                percentile(&sorted, 90),
                percentile(&sorted, 100)
            );
        }
    }
    println!();
    println!("memory (MiB; RSS / PSS)");
    println!(
        "{:<12} {:>5} {:>15} {:>15} {:>6} {:>15} {:>15}",
        "runtime", "pods", "kubelet", "containerd", "procs", "per-pod", "total"
    );
    for r in results {
        for (pods, usage) in [(0, &r.idle), (args.batch, &r.busy)] {
            let pair = |m: Memory| format!("{:.1} / {:.1}", mib(m.rss_kib), mib(m.pss_kib));
            println!(
                "{:<12} {pods:>5} {:>15} {:>15} {:>6} {:>15} {:>15}",
                r.runtime,
                pair(usage.kubelet),
                pair(usage.containerd),
                usage.per_pod_processes,
                pair(usage.per_pod),
                pair(usage.total())
            );
        }
    }
}
