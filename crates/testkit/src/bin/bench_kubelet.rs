//! Kubelet benchmark: `skiff kubelet` on its embedded runtime, joined to `skiff apiserver`
//! (SQLite) with the admin kubeconfig, next to the figures of upstream's kubelet.
//!
//! `skiff-bench-kubelet --skiff PATH [--starts N] [--runs N] [--batch N] [--log-dir DIR]`
//! starts a local registry with the busybox image, the API server and a node ([`Node`]
//! with `--kubeconfig`), then measures, with kube-rs watches opened before each step:
//!
//! - kubelet start until its Node is Ready: from spawning `skiff kubelet` until a watch
//!   of Nodes sees the Ready condition True; the first start, then `--starts - 1`
//!   restarts (default 5 starts in all), each after stopping the kubelet and deleting its
//!   Node — min / median / max;
//! - one pod (busybox `sleep 3600`, image cached by a warm-up pod) POSTed with `nodeName`
//!   until a watch of pods sees it in phase Running, `--runs` times (default 10), each
//!   deleted with grace period 0 and its teardown awaited before the next —
//!   min / median / max;
//! - `--batch` such pods (default 30) POSTed at once (concurrently), until the watch saw
//!   all of them Running: the wall time from the first POST, with the kubelet's default
//!   API QPS (`kubeAPIQPS` 50, burst 100);
//! - VmRSS of the kubelet (`/proc/<pid>/status`; the runtime is inside it) with no pod
//!   and with the batch running, each 2 s after the pods settled.
//!
//! `--log-dir DIR` keeps the kubelet's log as `DIR/kubelet.log` and the API server's as
//! `DIR/apiserver.log`.
//!
//! Everything it starts (pods, kubelet, API server, registry, directories) is removed
//! at exit, also on error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node as NodeObject, Pod};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use skiff_testkit::{
    ApiServer, ApiServerOptions, Backend, Node, NodeOptions, NodeRuntime, rss_kib,
};
use skiff_testkit::{Registry, push};
use tokio::runtime::Runtime;

/// How long the pods may take to settle before memory is read.
const SETTLE: Duration = Duration::from_secs(2);
/// How long one step (a start, a pod, the batch, a teardown) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(180);
/// The namespace of the benchmark's pods.
const NAMESPACE: &str = "default";
/// The pods' command.
const COMMAND: [&str; 2] = ["sleep", "3600"];

struct Args {
    skiff: PathBuf,
    starts: usize,
    runs: usize,
    batch: usize,
    log_dir: Option<PathBuf>,
}

/// What one run measured, in ms and KiB.
struct Results {
    starts_ms: Vec<f64>,
    single_ms: Vec<f64>,
    batch_ms: f64,
    idle_rss_kib: u64,
    busy_rss_kib: u64,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut skiff = None;
    let (mut starts, mut runs, mut batch, mut log_dir) = (5, 10, 30, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        let number = |v: String| {
            v.parse::<usize>()
                .with_context(|| format!("{arg} must be a number"))
        };
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--starts" => starts = number(value()?)?,
            "--runs" => runs = number(value()?)?,
            "--batch" => batch = number(value()?)?,
            "--log-dir" => log_dir = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!(
                    "usage: skiff-bench-kubelet --skiff PATH [--starts N (default 5)] [--runs N (default 10)] [--batch N (default 30)] [--log-dir DIR]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let skiff = skiff.context("--skiff PATH is required")?;
    if starts == 0 || runs == 0 || batch == 0 {
        bail!("--starts, --runs and --batch must be at least 1");
    }
    Ok(Args {
        skiff,
        starts,
        runs,
        batch,
        log_dir,
    })
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Dropped in reverse order: the node (its pods) first, then the server, the registry.
    let registry = Registry::start()?;
    let image = skiff_testkit::busybox()?;
    let reference = push(registry.host(), "bench/busybox", "latest", &image)?;
    let server = ApiServer::start(ApiServerOptions::new(&args.skiff, Backend::Sqlite))?;
    let client = rt.block_on(server.client())?;
    let mut node = None;
    let measured = measure(&args, &rt, &client, &server, &reference, &mut node);
    // Whatever happened, the API pods go before the node, whose drop waits for its pods.
    if let Err(e) = rt.block_on(delete_all_pods(&client)) {
        eprintln!("removing the benchmark's pods: {e:#}");
    }
    if let Some(dir) = &args.log_dir {
        keep_logs(dir, node.as_ref(), &server)?;
    }
    if let Some(node) = &node
        && let Err(e) = node.wait_clean(STEP_TIMEOUT)
    {
        eprintln!("the node is not clean: {e:#}");
    }
    drop(node);
    drop(server);
    drop(registry);
    report(&args, &measured?);
    Ok(())
}

fn keep_logs(dir: &std::path::Path, node: Option<&Node>, server: &ApiServer) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    if let Some(node) = node {
        std::fs::write(dir.join("kubelet.log"), node.log())?;
    }
    std::fs::write(dir.join("apiserver.log"), server.log())?;
    Ok(())
}

fn measure(
    args: &Args,
    rt: &Runtime,
    client: &kube::Client,
    server: &ApiServer,
    reference: &str,
    slot: &mut Option<Node>,
) -> anyhow::Result<Results> {
    let nodes = Api::<NodeObject>::all(client.clone());
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let options = NodeOptions {
        skiff_bin: args.skiff.clone(),
        extra_args: vec![
            "--kubeconfig".into(),
            server.kubeconfig().display().to_string(),
        ],
        runtime: NodeRuntime::Embedded,
    };

    eprintln!("kubelet start -> Node Ready ({} starts)...", args.starts);
    let mut starts_ms = Vec::new();
    let ready = rt.block_on(watch_node_ready(&nodes))?;
    let started = Instant::now();
    let node = slot.insert(Node::start(options)?);
    let (name, at) = rt.block_on(ready)??;
    starts_ms.push(ms(at - started));
    for _ in 1..args.starts {
        node.stop()?;
        rt.block_on(delete_node(&nodes, &name))?;
        let ready = rt.block_on(watch_node_ready(&nodes))?;
        let started = Instant::now();
        node.restart()?;
        let (_, at) = rt.block_on(ready)??;
        starts_ms.push(ms(at - started));
    }

    eprintln!("warm-up pod (image pull)...");
    rt.block_on(run_pods(&pods, &name, reference, &["warmup".to_owned()]))?;
    rt.block_on(delete_all_pods(client))?;
    node.wait_clean(STEP_TIMEOUT)?;
    std::thread::sleep(SETTLE);
    let pid = node.pid().context("the kubelet is not running")?;
    let idle_rss_kib = rss_kib(pid)?;

    eprintln!("pod POST -> Running ({} runs)...", args.runs);
    let mut single_ms = Vec::new();
    for i in 0..args.runs {
        let pod = format!("single-{i}");
        let (elapsed, _) = rt.block_on(run_pods(&pods, &name, reference, &[pod]))?;
        single_ms.push(elapsed);
        rt.block_on(delete_all_pods(client))?;
        node.wait_clean(STEP_TIMEOUT)?;
    }

    eprintln!("{} pods POSTed at once -> all Running...", args.batch);
    let names: Vec<String> = (0..args.batch).map(|i| format!("batch-{i}")).collect();
    let (batch_ms, _) = rt.block_on(run_pods(&pods, &name, reference, &names))?;
    std::thread::sleep(SETTLE);
    let busy_rss_kib = rss_kib(pid)?;
    rt.block_on(delete_all_pods(client))?;
    node.wait_clean(STEP_TIMEOUT)?;
    Ok(Results {
        starts_ms,
        single_ms,
        batch_ms,
        idle_rss_kib,
        busy_rss_kib,
    })
}

/// A watch of `api` from its current resourceVersion, open when this returns.
async fn watch_from_now<K>(
    api: &Api<K>,
) -> anyhow::Result<BoxStream<'static, kube::Result<WatchEvent<K>>>>
where
    K: Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let version = api
        .list_metadata(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .context("the list has no resourceVersion")?;
    let timeout = u32::try_from(STEP_TIMEOUT.as_secs()).unwrap_or(290);
    Ok(api
        .watch(&WatchParams::default().timeout(timeout), &version)
        .await?
        .boxed())
}

/// Opens a watch of Nodes and returns the task that ends when a Node's Ready condition
/// is True: its name and the instant the event arrived.
async fn watch_node_ready(
    nodes: &Api<NodeObject>,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<(String, Instant)>>> {
    let mut events = watch_from_now(nodes).await?;
    Ok(tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        loop {
            let event = tokio::time::timeout_at(deadline, events.try_next())
                .await
                .context("no Node became Ready in time")??;
            match event {
                Some(WatchEvent::Added(node) | WatchEvent::Modified(node)) => {
                    let ready = node
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    if ready {
                        return Ok((node.metadata.name.unwrap_or_default(), Instant::now()));
                    }
                }
                Some(WatchEvent::Error(e)) => bail!("watch of Nodes failed: {e}"),
                Some(_) => {}
                None => bail!("the watch of Nodes ended"),
            }
        }
    }))
}

/// Deletes Node `name` and waits until it is gone.
async fn delete_node(nodes: &Api<NodeObject>, name: &str) -> anyhow::Result<()> {
    nodes.delete(name, &DeleteParams::default()).await?;
    let deadline = Instant::now() + STEP_TIMEOUT;
    while nodes.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            bail!("Node {name} was not deleted in time");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// POSTs the pods `names` bound to `node` at once and waits until a watch (opened
/// before) saw each in phase Running. Returns the ms from the first POST until the last
/// pod ran, and each pod's ms from the first POST.
async fn run_pods(
    pods: &Api<Pod>,
    node: &str,
    image: &str,
    names: &[String],
) -> anyhow::Result<(f64, BTreeMap<String, f64>)> {
    let mut events = watch_from_now(pods).await?;
    let mut waiting: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let bodies = names
        .iter()
        .map(|name| pod(name, node, image))
        .collect::<anyhow::Result<Vec<Pod>>>()?;
    let params = PostParams::default();
    let started = Instant::now();
    let creates = bodies.iter().map(|body| pods.create(&params, body));
    futures::future::try_join_all(creates)
        .await
        .context("creating the pods")?;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut running = BTreeMap::new();
    while !waiting.is_empty() {
        let event = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .with_context(|| format!("pods not Running in time: {waiting:?}"))??;
        match event {
            Some(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                if phase == Some("Running") && waiting.remove(name) {
                    running.insert(name.to_owned(), ms(started.elapsed()));
                }
            }
            Some(WatchEvent::Error(e)) => bail!("watch of pods failed: {e}"),
            Some(_) => {}
            None => bail!("the watch of pods ended"),
        }
    }
    let last = running.values().copied().fold(0.0, f64::max);
    Ok((last, running))
}

/// Deletes every pod of [`NAMESPACE`] with grace period 0 and waits until none is left
/// in the API.
async fn delete_all_pods(client: &kube::Client) -> anyhow::Result<()> {
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let list = pods.list_metadata(&ListParams::default()).await?;
        if list.items.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{} pods still in the API", list.items.len());
        }
        for item in list.items {
            let Some(name) = item.metadata.name else {
                continue;
            };
            match pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => return Err(e).with_context(|| format!("deleting pod {name}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pod `name` bound to `node` running [`COMMAND`] from `image` (cached).
fn pod(name: &str, node: &str, image: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": COMMAND,
            }],
        },
    }))?)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// (min, median, max) of `values` (the upper median of an even count).
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |i: usize| sorted.get(i).copied().unwrap_or(f64::NAN);
    (
        at(0),
        at(sorted.len() / 2),
        at(sorted.len().saturating_sub(1)),
    )
}

fn report(args: &Args, r: &Results) {
    let triple = |values: &[f64]| {
        let (min, median, max) = spread(values);
        format!("{min:.0} / {median:.0} / {max:.0} ms")
    };
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let rows = [
        (
            format!(
                "kubelet start -> Node Ready, {} starts: min / median / max",
                args.starts
            ),
            triple(&r.starts_ms),
            "1.6 s".to_owned(),
            "<= 0.3 s".to_owned(),
        ),
        (
            format!(
                "pod POST -> Running, {} runs: min / median / max",
                args.runs
            ),
            triple(&r.single_ms),
            "850-916 ms median".to_owned(),
            "<= 180 ms median".to_owned(),
        ),
        (
            format!(
                "{} pods POSTed at once -> all Running (default QPS)",
                args.batch
            ),
            format!("{:.0} ms", r.batch_ms),
            "19.8 s (default QPS) / 4.9 s (QPS 50)".to_owned(),
            "<= 2 s".to_owned(),
        ),
        (
            "kubelet RSS, 0 pods".to_owned(),
            mib(r.idle_rss_kib),
            "-".to_owned(),
            "-".to_owned(),
        ),
        (
            format!("kubelet RSS, {} pods", args.batch),
            mib(r.busy_rss_kib),
            "-".to_owned(),
            "-".to_owned(),
        ),
    ];
    println!(
        "skiff kubelet (embedded runtime) joined to skiff apiserver (SQLite), busybox `{}`, image cached, {}",
        COMMAND.join(" "),
        args.skiff.display()
    );
    println!();
    let width = rows.iter().map(|row| row.0.len()).max().unwrap_or(0);
    let skiff = rows.iter().map(|row| row.1.len()).max().unwrap_or(0).max(5);
    let upstream = rows.iter().map(|row| row.2.len()).max().unwrap_or(0);
    println!(
        "{:width$}  {:>skiff$}  {:<upstream$}  goal",
        "", "skiff", "upstream 1.33"
    );
    for (label, value, reference, goal) in rows {
        println!("{label:width$}  {value:>skiff$}  {reference:<upstream$}  {goal}");
    }
}
