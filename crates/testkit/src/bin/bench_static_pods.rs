//! Static pod start-up benchmark.
//!
//! `skiff-bench-static-pods --skiff PATH [--pods N]` starts a local registry with the
//! busybox image and a `skiff kubelet` node, pre-pulls the image with one warm-up pod,
//! then writes N static pod manifests at once and reports, per pod, the time from its
//! manifest write to its container state `running` in `/pods` (polled every 20 ms),
//! with min / median / p90 / max, and the RSS of the kubelet plus its shims at 0 and N
//! pods. Everything it starts is removed at exit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use skiff_testkit::{Node, NodeOptions, NodeRuntime, Registry};

const POLL: Duration = Duration::from_millis(20);
const WARMUP_TIMEOUT: Duration = Duration::from_secs(180);

struct Args {
    skiff: PathBuf,
    pods: usize,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut skiff = None;
    let mut pods = 20;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--pods" => pods = value()?.parse().context("--pods must be a number")?,
            "-h" | "--help" => {
                println!("usage: skiff-bench-static-pods --skiff PATH [--pods N (default 20)]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    if pods == 0 {
        bail!("--pods must be at least 1");
    }
    Ok(Args { skiff, pods })
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let registry = Registry::start()?;
    let image = skiff_testkit::busybox()?;
    let reference = skiff_testkit::push(registry.host(), "bench/busybox", "latest", &image)?;
    let node = Node::start(NodeOptions {
        skiff_bin: args.skiff.clone(),
        extra_args: Vec::new(),
        runtime: NodeRuntime::Embedded,
    })?;

    warm_up(&node, &reference)?;
    let idle = Rss::measure(&node);

    let mut written = BTreeMap::new();
    for i in 0..args.pods {
        let name = format!("bench-{i}");
        node.write_manifest(&format!("{name}.yaml"), &manifest(&name, &reference))?;
        written.insert(
            format!("{name}-{}", node.node_name()),
            (name, Instant::now()),
        );
    }
    let timeout = Duration::from_secs(120 + 10 * args.pods as u64);
    let started = wait_running(&node, &written, timeout)?;
    let busy = Rss::measure(&node);

    report(&args, &started, &idle, &busy);
    Ok(())
}

/// Runs one pod to completion of its start, so the image is pulled before timing.
fn warm_up(node: &Node, reference: &str) -> anyhow::Result<()> {
    node.write_manifest("warmup.yaml", &manifest("warmup", reference))?;
    let full = format!("warmup-{}", node.node_name());
    node.wait_for("the warm-up pod to run", WARMUP_TIMEOUT, |list| {
        pods(list).any(|p| name(p) == full && running(p))
    })?;
    node.remove_manifest("warmup.yaml")?;
    node.wait_for("the warm-up pod to be gone", WARMUP_TIMEOUT, |list| {
        pods(list).next().is_none()
    })?;
    // Teardown (shim exit, CNI DEL, unmounts) ends after the pod leaves /pods.
    node.wait_clean(WARMUP_TIMEOUT)?;
    Ok(())
}

/// Polls `/pods` until every pod in `written` runs; returns `(pod, ms)` in pod order.
fn wait_running(
    node: &Node,
    written: &BTreeMap<String, (String, Instant)>,
    timeout: Duration,
) -> anyhow::Result<Vec<(String, f64)>> {
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
            for pod in pods(&list).filter(|p| running(p)) {
                if let Some((short, at)) = written.get(name(pod))
                    && !started.contains_key(short)
                {
                    started.insert(short.clone(), now.duration_since(*at).as_secs_f64() * 1e3);
                }
            }
        }
        std::thread::sleep(POLL);
    }
    let mut out: Vec<(String, f64)> = started.into_iter().collect();
    out.sort_by_key(|(n, _)| n.trim_start_matches("bench-").parse::<usize>().unwrap_or(0));
    Ok(out)
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

fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: IfNotPresent\n    command: [\"sleep\", \"3600\"]\n"
    )
}

/// Resident memory of the kubelet plus its shims: RSS counts the pages of the one `skiff`
/// binary once per process; PSS divides shared pages among the processes sharing them.
struct Rss {
    processes: usize,
    kib: u64,
    pss_kib: u64,
}

impl Rss {
    fn measure(node: &Node) -> Rss {
        let mut pids: Vec<u32> = node
            .processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("shim"))
            .map(|(pid, _)| pid)
            .collect();
        pids.extend(node.pid());
        let field = |file: &str, name: &str| -> u64 {
            pids.iter()
                .filter_map(|pid| proc_kib(*pid, file, name))
                .sum()
        };
        Rss {
            processes: pids.len(),
            kib: field("status", "VmRSS:"),
            pss_kib: field("smaps_rollup", "Pss:"),
        }
    }
}

/// The KiB value of line `name` (e.g. `VmRSS:`) in /proc/<pid>/<file>.
fn proc_kib(pid: u32, file: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Nearest-rank percentile of sorted `values` (`p` in 0..=100).
fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn report(args: &Args, started: &[(String, f64)], idle: &Rss, busy: &Rss) {
    println!(
        "skiff static pods: {} pods (busybox `sleep 3600`), {}",
        args.pods,
        args.skiff.display()
    );
    println!();
    println!("{:<12} {:>10}", "pod", "ms");
    for (pod, ms) in started {
        println!("{pod:<12} {ms:>10.1}");
    }
    let mut sorted: Vec<f64> = started.iter().map(|(_, ms)| *ms).collect();
    sorted.sort_by(f64::total_cmp);
    println!();
    println!("manifest write -> container running (ms)");
    println!("{:>10} {:>10} {:>10} {:>10}", "min", "median", "p90", "max");
    println!(
        "{:>10.1} {:>10.1} {:>10.1} {:>10.1}",
        percentile(&sorted, 0),
        percentile(&sorted, 50),
        percentile(&sorted, 90),
        percentile(&sorted, 100)
    );
    println!();
    println!("memory, kubelet + shims");
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>10}",
        "pods", "processes", "RSS KiB", "RSS MiB", "PSS MiB"
    );
    for (pods, rss) in [(0, idle), (args.pods, busy)] {
        println!(
            "{pods:>6} {:>10} {:>10} {:>10.1} {:>10.1}",
            rss.processes,
            rss.kib,
            rss.kib as f64 / 1024.0,
            rss.pss_kib as f64 / 1024.0
        );
    }
}
