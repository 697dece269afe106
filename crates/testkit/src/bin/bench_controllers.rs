//! Controller manager and `skiff server` benchmark.
//!
//! `skiff-bench-controllers --skiff PATH [--replicas 1000] [--nodes 100]
//! [--qps 20,5000] [--server-qps 5000] [--skip-server] [--log-dir DIR]` measures:
//!
//! - **`skiff server`**: from spawning it (a fresh data directory, the busybox test image
//!   in a local registry) until a watch sees its Node Ready, and then until a Deployment
//!   of 3 replicas has 3 Running pods; then the server's idle VmRSS (the whole
//!   single-node cluster: API server, scheduler, controller manager, kubelet and runtime
//!   in one process; the pods' own processes are not counted), 10 s after the pods run
//!   and again 30 s later.
//! - **A Deployment of `--replicas` on fake nodes**, once per `--qps` value: a fresh
//!   `skiff apiserver` (SQLite), `skiff scheduler` (API QPS 5,000) and
//!   `skiff controller-manager` with `--kube-api-qps <qps>` (burst 1.5 × qps, 30 for
//!   upstream's default 20), and `skiff bench controllers`, which creates the nodes,
//!   plays their kubelets and prints when all pods exist, are bound and available, and
//!   the controller manager's RSS idle and with the pods.
//! - **The same Deployment in `skiff server`**, once per `--server-qps` value: the
//!   controller manager and the scheduler inside the server call the API server in
//!   process (`--controller-manager-kube-api-qps <qps>`, the scheduler at 5,000); the
//!   server's own node is cordoned so that every pod goes to a fake node. The RSS lines
//!   are the whole server's.
//!
//! Everything it starts is stopped at exit, also on error.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::TryStreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node as NodeObject, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use skiff_testkit::{
    ApiServer, ApiServerOptions, Backend, Node, NodeOptions, NodeRuntime, Registry, Scheduler,
    push, rss_parts_kib,
};

/// How long one step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(180);

struct Args {
    skiff: PathBuf,
    replicas: usize,
    nodes: usize,
    qps: Vec<u32>,
    server_qps: Vec<u32>,
    server: bool,
    log_dir: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        skiff: PathBuf::new(),
        replicas: 1000,
        nodes: 100,
        qps: vec![20, 5000],
        server_qps: vec![5000],
        server: true,
        log_dir: None,
    };
    let mut skiff = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--skiff" => skiff = Some(PathBuf::from(value()?)),
            "--replicas" => args.replicas = value()?.parse().context("--replicas: a number")?,
            "--nodes" => args.nodes = value()?.parse().context("--nodes: a number")?,
            "--qps" => args.qps = numbers(&value()?).context("--qps")?,
            "--server-qps" => args.server_qps = numbers(&value()?).context("--server-qps")?,
            "--skip-server" => args.server = false,
            "--log-dir" => args.log_dir = Some(PathBuf::from(value()?)),
            other => bail!(
                "unknown argument {other}; usage: skiff-bench-controllers --skiff PATH \
                 [--replicas 1000] [--nodes 100] [--qps 20,5000] [--server-qps 5000] \
                 [--skip-server] [--log-dir DIR]"
            ),
        }
    }
    args.skiff = skiff.context("--skiff PATH is required")?;
    Ok(args)
}

/// A comma-separated list of numbers; empty for none.
fn numbers(list: &str) -> anyhow::Result<Vec<u32>> {
    list.split(',')
        .filter(|q| !q.is_empty())
        .map(|q| q.parse().with_context(|| format!("{q:?} is not a number")))
        .collect()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.server {
        server(&args, &rt)?;
    }
    for &qps in &args.qps {
        scale(&args, qps)?;
    }
    for &qps in &args.server_qps {
        scale_in_server(&args, &rt, qps)?;
    }
    Ok(())
}

/// `skiff server` from start to a Ready node and 3 Running replicas, then idle RSS.
fn server(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let registry = Registry::start()?;
    let image = skiff_testkit::busybox()?;
    let reference = push(registry.host(), "bench/busybox", "latest", &image)?;
    println!("skiff server: start until the node is Ready and 3 replicas Run");
    let start = Instant::now();
    let node = Node::start_server(NodeOptions {
        skiff_bin: args.skiff.clone(),
        extra_args: Vec::new(),
        runtime: NodeRuntime::Embedded,
    })?;
    let kubeconfig = node.kubeconfig().context("the server's kubeconfig")?;
    let measured = rt.block_on(async {
        let client = skiff_testkit::apiserver::client_for(&kubeconfig).await?;
        let nodes: Api<NodeObject> = Api::all(client.clone());
        let name = node.node_name();
        let ready = |n: &NodeObject| {
            n.metadata.name.as_deref() == Some(name.as_str())
                && n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        };
        wait(watcher::watcher(nodes, watcher::Config::default()), ready).await?;
        let ready_after = start.elapsed();
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "bench"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "bench"}},
                "template": {"metadata": {"labels": {"app": "bench"}},
                    "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c",
                        "image": reference, "command": ["sleep", "3600"]}]}}}}))?;
        deployments
            .create(&PostParams::default(), &deployment)
            .await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let mut running = std::collections::BTreeSet::new();
        let stream = watcher::watcher(pods.clone(), watcher::Config::default().labels("app=bench"));
        wait(stream, move |p: &Pod| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if phase == Some("Running") {
                running.insert(p.metadata.name.clone().unwrap_or_default());
            }
            running.len() >= 3
        })
        .await?;
        let running_after = start.elapsed();
        println!(
            "  node Ready after {:.2} s; Deployment of 3 Running after {:.2} s (from the start)",
            ready_after.as_secs_f64(),
            running_after.as_secs_f64()
        );
        for (settle, label) in [(10, "10 s"), (30, "40 s")] {
            tokio::time::sleep(Duration::from_secs(settle)).await;
            let parts = node.pid().map(rss_parts_kib);
            match parts {
                Some(Ok((all, anon, file))) => println!(
                    "  skiff server idle RSS, {label} after the pods ran: {:.1} MiB \
                     (anonymous {:.1}, files {:.1})",
                    all as f64 / 1024.0,
                    anon as f64 / 1024.0,
                    file as f64 / 1024.0
                ),
                Some(Err(e)) => println!("  skiff server RSS: {e:#}"),
                None => println!("  skiff server RSS: not running"),
            }
        }
        deployments
            .delete("bench", &DeleteParams::default())
            .await?;
        let gone = watcher::watcher(pods, watcher::Config::default().labels("app=bench"));
        wait_empty(gone).await?;
        anyhow::Ok(())
    });
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("server.log"), node.log())?;
    }
    if let Err(e) = node.wait_clean(STEP_TIMEOUT) {
        eprintln!("the node is not clean: {e:#}");
    }
    drop(node);
    drop(registry);
    measured
}

/// A Deployment of `--replicas` on fake nodes, with the controller manager at `qps`.
fn scale(args: &Args, qps: u32) -> anyhow::Result<()> {
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
    let burst = burst_for(qps);
    let cm = Scheduler::start_controller_manager(
        &args.skiff,
        &api.kubeconfig(),
        &[
            "--leader-elect=false",
            &format!("--kube-api-qps={qps}"),
            &format!("--kube-api-burst={burst}"),
        ],
    )?;
    let pid = cm.pid().context("the controller manager is not running")?;
    println!();
    println!("controller manager with --kube-api-qps {qps} --kube-api-burst {burst}:");
    let status = bench_controllers(args, &api.kubeconfig(), pid, "controller manager")?;
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("qps{qps}-apiserver.log")), api.log())?;
        std::fs::write(dir.join(format!("qps{qps}-scheduler.log")), sched.log())?;
        std::fs::write(
            dir.join(format!("qps{qps}-controller-manager.log")),
            cm.log(),
        )?;
    }
    if !status.success() {
        bail!(
            "skiff bench controllers failed ({status}); controller manager log (tail):\n{}",
            cm.log_tail()
        );
    }
    Ok(())
}

/// The Deployment of `--replicas` on fake nodes in `skiff server`, its controller
/// manager at `qps`; the server's own node is cordoned.
fn scale_in_server(args: &Args, rt: &tokio::runtime::Runtime, qps: u32) -> anyhow::Result<()> {
    let burst = burst_for(qps);
    let node = Node::start_server(NodeOptions {
        skiff_bin: args.skiff.clone(),
        extra_args: vec![
            format!("--controller-manager-kube-api-qps={qps}"),
            format!("--controller-manager-kube-api-burst={burst}"),
            "--scheduler-kube-api-qps=5000".to_owned(),
            "--scheduler-kube-api-burst=5000".to_owned(),
        ],
        runtime: NodeRuntime::Embedded,
    })?;
    let kubeconfig = node.kubeconfig().context("the server's kubeconfig")?;
    let name = node.node_name();
    rt.block_on(async {
        let client = skiff_testkit::apiserver::client_for(&kubeconfig).await?;
        let nodes: Api<NodeObject> = Api::all(client);
        let registered = |n: &NodeObject| n.metadata.name.as_deref() == Some(name.as_str());
        wait(
            watcher::watcher(nodes.clone(), watcher::Config::default()),
            registered,
        )
        .await?;
        let cordon = json!({"spec": {"unschedulable": true}});
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(cordon))
            .await?;
        anyhow::Ok(())
    })
    .context("cordoning the server's node")?;
    let pid = node.pid().context("skiff server is not running")?;
    println!();
    println!(
        "skiff server, controller manager with --kube-api-qps {qps} --kube-api-burst {burst} \
         (in process):"
    );
    let status = bench_controllers(args, &kubeconfig, pid, "skiff server")?;
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("server-qps{qps}.log")), node.log())?;
    }
    if !status.success() {
        bail!("skiff bench controllers failed against skiff server ({status})");
    }
    if let Err(e) = node.wait_clean(STEP_TIMEOUT) {
        eprintln!("the node is not clean: {e:#}");
    }
    Ok(())
}

/// The client burst that goes with `qps`: upstream's 30 for its default 20, else 1.5 ×.
fn burst_for(qps: u32) -> u32 {
    if qps == 20 { 30 } else { qps + qps / 2 }
}

/// Runs `skiff bench controllers` against the cluster of `kubeconfig`, reporting the RSS
/// of process `pid` under `label`.
fn bench_controllers(
    args: &Args,
    kubeconfig: &std::path::Path,
    pid: u32,
    label: &str,
) -> anyhow::Result<std::process::ExitStatus> {
    Command::new(&args.skiff)
        .args(["bench", "controllers", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--replicas", &args.replicas.to_string()])
        .args(["--controller-manager-pid", &pid.to_string()])
        .args(["--process-label", label])
        .status()
        .context("running skiff bench controllers")
}

/// Waits until `done` holds for an object of the watch.
async fn wait<K, S>(stream: S, mut done: impl FnMut(&K) -> bool) -> anyhow::Result<()>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>>,
{
    futures::pin_mut!(stream);
    let wait = async {
        while let Some(event) = stream.try_next().await? {
            if let Event::Apply(o) | Event::InitApply(o) = event
                && done(&o)
            {
                return anyhow::Ok(());
            }
        }
        bail!("the watch ended")
    };
    tokio::time::timeout(STEP_TIMEOUT, wait)
        .await
        .context("timed out")?
}

/// Waits until the watch's objects are all gone.
async fn wait_empty<K: kube::Resource, S>(stream: S) -> anyhow::Result<()>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>>,
{
    futures::pin_mut!(stream);
    let mut seen = std::collections::BTreeSet::new();
    let mut listing = true;
    let wait = async {
        while let Some(event) = stream.try_next().await? {
            let name = |o: &K| o.meta().name.clone().unwrap_or_default();
            match event {
                Event::Init => seen.clear(),
                Event::InitApply(o) | Event::Apply(o) => {
                    seen.insert(name(&o));
                }
                Event::Delete(o) => {
                    seen.remove(&name(&o));
                }
                Event::InitDone => listing = false,
            }
            if !listing && seen.is_empty() {
                return anyhow::Ok(());
            }
        }
        bail!("the watch ended")
    };
    tokio::time::timeout(STEP_TIMEOUT, wait)
        .await
        .context("timed out")?
}
