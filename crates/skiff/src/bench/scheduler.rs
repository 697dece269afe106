//! `skiff bench scheduler`: a node simulator for scale, as kwok is for upstream. It
//! creates `--nodes` fake Node objects (capacities, zone labels, every tenth node tainted)
//! and `--pods` pods of mixed shapes in a running cluster, waits until a scheduler has
//! bound them all, and reports scheduled pods per second and the creation-to-binding
//! latencies, then deletes what it created. Nothing runs the pods: no kubelet serves
//! the fake nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use super::memory::rss_kib;
use crate::cli::BenchSchedulerArgs;

/// The label every object of a run carries, with the run's id as value.
pub(crate) const RUN_LABEL: &str = "bench.skiff.dev/run";
/// The taint on every tenth node.
const TAINT_KEY: &str = "bench.skiff.dev/dedicated";
/// Zones the nodes are spread over.
const ZONES: usize = 10;
/// Label groups of the `spread` pods.
const APPS: usize = 100;

/// Runs the benchmark against the cluster of `--kubeconfig`.
pub async fn run(args: BenchSchedulerArgs) -> anyhow::Result<()> {
    let client = skiff_client::from_kubeconfig(&args.kubeconfig, -1.0, 0)
        .await
        .context("connecting to the API server")?;
    let run_id = format!("{:x}", std::process::id() ^ rand_suffix());
    let ns_name = format!("bench-scheduler-{run_id}");
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns_name);
    println!(
        "scheduler benchmark: {} nodes, {} pods ({}), run {run_id}",
        args.nodes, args.pods, args.shape
    );
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": ns_name, "labels": {RUN_LABEL: run_id}}
            }))?,
        )
        .await
        .context("creating the benchmark namespace")?;
    let result = measure(&args, &run_id, &nodes, &pods).await;
    let cleanup = Instant::now();
    let deleted = cleanup_run(&run_id, &ns_name, &nodes, &namespaces, &pods).await;
    println!("cleanup: {:.1} s", cleanup.elapsed().as_secs_f64());
    result.and(deleted)
}

pub(crate) fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

async fn measure(
    args: &BenchSchedulerArgs,
    run_id: &str,
    nodes: &Api<Node>,
    pods: &Api<Pod>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let concurrency = args.concurrency.max(1);
    futures::stream::iter(0..args.nodes)
        .map(|i| create_node(nodes, run_id, i))
        .buffer_unordered(concurrency)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    println!(
        "nodes: {} created in {:.1} s",
        args.nodes,
        started.elapsed().as_secs_f64()
    );
    if let Some(settle) = args.settle {
        tokio::time::sleep(settle).await;
    }
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = {
        let pods = pods.clone();
        let bound = Arc::clone(&bound);
        let total = args.pods;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let handle =
            tokio::spawn(async move { watch_bindings(pods, bound, total, ready_tx).await });
        ready_rx
            .await
            .context("the pod watch ended before it started")?;
        handle
    };
    let create_start = Instant::now();
    futures::stream::iter(0..args.pods)
        .map(|i| {
            let sent = Arc::clone(&sent);
            let pod = pod_manifest(&args.shape, run_id, i);
            async move {
                let name = format!("pod-{i:06}");
                sent.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(name, Instant::now());
                let pod: Pod = serde_json::from_value(pod)?;
                pods.create(&PostParams::default(), &pod)
                    .await
                    .context("creating a pod")?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    let created_in = create_start.elapsed();
    println!(
        "pods: {} created in {:.1} s ({:.0}/s)",
        args.pods,
        created_in.as_secs_f64(),
        args.pods as f64 / created_in.as_secs_f64().max(1e-9)
    );
    match tokio::time::timeout(args.timeout, watch).await {
        Ok(joined) => joined.context("the pod watch task failed")??,
        Err(_) => {
            let n = bound.lock().unwrap_or_else(PoisonError::into_inner).len();
            bail!(
                "only {n} of {} pods were bound within {:?}",
                args.pods,
                args.timeout
            );
        }
    }
    report(args, create_start, &sent, &bound)
}

fn report(
    args: &BenchSchedulerArgs,
    create_start: Instant,
    sent: &Mutex<HashMap<String, Instant>>,
    bound: &Mutex<HashMap<String, Instant>>,
) -> anyhow::Result<()> {
    let sent = sent.lock().unwrap_or_else(PoisonError::into_inner);
    let bound = bound.lock().unwrap_or_else(PoisonError::into_inner);
    let mut latencies: Vec<Duration> = bound
        .iter()
        .filter_map(|(name, at)| sent.get(name).map(|s| at.saturating_duration_since(*s)))
        .collect();
    latencies.sort();
    let first = bound.values().min().copied().unwrap_or(create_start);
    let last = bound.values().max().copied().unwrap_or(create_start);
    let n = bound.len() as f64;
    let overall = last.saturating_duration_since(create_start).as_secs_f64();
    let binding = last.saturating_duration_since(first).as_secs_f64();
    println!(
        "scheduled: {} pods; {:.0} pods/s from the first creation to the last binding ({overall:.1} s), \
         {:.0} pods/s from the first to the last binding ({binding:.1} s)",
        bound.len(),
        n / overall.max(1e-9),
        n / binding.max(1e-9),
    );
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies[i.min(latencies.len() - 1)].as_secs_f64() * 1000.0
    };
    println!(
        "creation-to-binding latency: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    if let Some(pid) = args.scheduler_pid {
        match rss_kib(pid) {
            Some(kib) => println!(
                "scheduler RSS (pid {pid}) at {} nodes and {} pods: {:.1} MiB",
                args.nodes,
                args.pods,
                kib as f64 / 1024.0
            ),
            None => println!("scheduler RSS: pid {pid} not readable"),
        }
    }
    Ok(())
}

/// Watches the namespace's pods and records when each is first seen with a node.
async fn watch_bindings(
    pods: Api<Pod>,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
    total: usize,
    ready: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<()> {
    let list = pods
        .list_metadata(&ListParams::default().limit(1))
        .await
        .context("listing the benchmark pods")?;
    let mut version = list.metadata.resource_version.unwrap_or_else(|| "0".into());
    let mut ready = Some(ready);
    loop {
        let params = WatchParams::default().timeout(290);
        let stream = pods
            .watch(&params, &version)
            .await
            .context("watching the benchmark pods")?;
        if let Some(r) = ready.take() {
            let _ = r.send(());
        }
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let pod = match event.context("the pod watch failed")? {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => p,
                WatchEvent::Bookmark(b) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Deleted(_) => continue,
                WatchEvent::Error(e) => bail!("the pod watch failed: {}", e.message),
            };
            if let Some(v) = pod.metadata.resource_version.clone() {
                version = v;
            }
            let assigned = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            if assigned {
                let name = pod.metadata.name.unwrap_or_default();
                let mut bound = bound.lock().unwrap_or_else(PoisonError::into_inner);
                bound.entry(name).or_insert_with(Instant::now);
                if bound.len() >= total {
                    return Ok(());
                }
            }
        }
    }
}

pub(crate) async fn create_node(nodes: &Api<Node>, run_id: &str, i: usize) -> anyhow::Result<()> {
    let name = format!("bench-{run_id}-node-{i:05}");
    let mut taints = Vec::new();
    // Every tenth node of each zone is tainted, so that every zone keeps untainted nodes
    // (a zone of tainted nodes only would stop zone spreading, as upstream's would).
    if (i / ZONES) % 10 == 9 {
        taints.push(json!({"key": TAINT_KEY, "value": "infra", "effect": "NoSchedule"}));
    }
    let resources = json!({
        "cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"
    });
    let status = json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "fake node of skiff bench scheduler"}],
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                     "kubeletVersion": "v1.33.0", "containerRuntimeVersion": "fake://0",
                     "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                     "osImage": "", "kubeProxyVersion": ""},
    });
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                RUN_LABEL: run_id,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": format!("zone-{}", i % ZONES),
                "topology.kubernetes.io/region": "bench",
            },
        },
        "spec": {"taints": taints},
        "status": status,
    }))?;
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("creating node {name}"))?;
    let has_allocatable = created
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_some();
    if !has_allocatable {
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .with_context(|| format!("setting the status of node {name}"))?;
    }
    Ok(())
}

/// The `i`th pod of a run: `plain` pods have mixed requests (80 % 100m/128Mi, 15 %
/// 1/1Gi, 5 % tolerating the tainted nodes); `spread` pods add a zone topology spread
/// constraint (maxSkew 1, DoNotSchedule) and a preferred anti-affinity per hostname over
/// their app label (100 apps).
fn pod_manifest(shape: &str, run_id: &str, i: usize) -> serde_json::Value {
    let (cpu, memory) = if i % 20 < 16 {
        ("100m", "128Mi")
    } else {
        ("1", "1Gi")
    };
    let app = format!("app-{}", i % APPS);
    let mut labels = BTreeMap::from([
        (RUN_LABEL.to_owned(), run_id.to_owned()),
        ("app".to_owned(), app.clone()),
    ]);
    labels.insert("shape".into(), shape.to_owned());
    let mut spec = json!({
        "containers": [{
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu, "memory": memory}},
        }],
        "terminationGracePeriodSeconds": 0,
    });
    if i % 20 == 19 {
        spec["tolerations"] =
            json!([{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]);
    }
    if shape == "spread" {
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }]);
        spec["affinity"] = json!({"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": app}},
                },
            }],
        }});
    }
    json!({
        "metadata": {"name": format!("pod-{i:06}"), "labels": labels},
        "spec": spec,
    })
}

async fn cleanup_run(
    run_id: &str,
    ns_name: &str,
    nodes: &Api<Node>,
    namespaces: &Api<Namespace>,
    pods: &Api<Pod>,
) -> anyhow::Result<()> {
    let selector = format!("{RUN_LABEL}={run_id}");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete_collection(&now, &ListParams::default())
        .await
        .context("deleting the benchmark pods")?;
    nodes
        .delete_collection(&now, &ListParams::default().labels(&selector))
        .await
        .context("deleting the benchmark nodes")?;
    namespaces
        .delete(ns_name, &DeleteParams::default())
        .await
        .context("deleting the benchmark namespace")?;
    Ok(())
}
