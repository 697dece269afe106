//! `skiff bench controllers`: the node simulator of `skiff bench scheduler` (fake Nodes)
//! playing the kubelets too: every pod bound to a fake node is marked Running and Ready.
//! It creates one Deployment of `--replicas` and reports, from the Deployment's creation,
//! when all its pods exist, when all are bound, and when the Deployment's status says they
//! are available, with the controller manager's RSS before and after; then deletes what it
//! created.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

use super::memory::rss_kib;
use super::scheduler::{RUN_LABEL, create_node, rand_suffix};
use crate::cli::BenchControllersArgs;

/// Status patches the simulated kubelets send at once.
const KUBELET_CONCURRENCY: usize = 32;

/// Runs the benchmark against the cluster of `--kubeconfig`.
pub async fn run(args: BenchControllersArgs) -> anyhow::Result<()> {
    let client = skiff_client::from_kubeconfig(&args.kubeconfig, -1.0, 0)
        .await
        .context("connecting to the API server")?;
    let run_id = format!("{:x}", std::process::id() ^ rand_suffix());
    let ns_name = format!("bench-controllers-{run_id}");
    let nodes: Api<Node> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    println!(
        "controllers benchmark: a Deployment of {} replicas on {} fake nodes, run {run_id}",
        args.replicas, args.nodes
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
    let result = measure(&args, &client, &run_id, &ns_name, &nodes).await;
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns_name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns_name);
    let cleanup = async {
        deployments
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        pods.delete_collection(&now, &ListParams::default()).await?;
        nodes
            .delete_collection(
                &now,
                &ListParams::default().labels(&format!("{RUN_LABEL}={run_id}")),
            )
            .await?;
        namespaces
            .delete(&ns_name, &DeleteParams::default())
            .await?;
        anyhow::Ok(())
    };
    let cleaned = cleanup.await.context("deleting the benchmark's objects");
    result.and(cleaned)
}

fn print_rss(label: &str, what: &str, pid: Option<u32>) {
    if let Some(pid) = pid {
        match rss_kib(pid) {
            Some(kib) => println!("{label} RSS {what}: {:.1} MiB", kib as f64 / 1024.0),
            None => println!("{label} RSS: pid {pid} not readable"),
        }
    }
}

async fn measure(
    args: &BenchControllersArgs,
    client: &kube::Client,
    run_id: &str,
    ns_name: &str,
    nodes: &Api<Node>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    futures::stream::iter(0..args.nodes)
        .map(|i| create_node(nodes, run_id, i))
        .buffer_unordered(32)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    println!(
        "nodes: {} created in {:.1} s",
        args.nodes,
        started.elapsed().as_secs_f64()
    );
    print_rss(&args.process_label, "idle", args.controller_manager_pid);

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns_name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns_name);
    let total = args.replicas;
    let created = Arc::new(AtomicUsize::new(0));
    let bound = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (milestone_tx, mut milestones) = tokio::sync::mpsc::unbounded_channel();
    let kubelets = tokio::spawn(simulate(
        pods.clone(),
        total,
        Arc::clone(&created),
        Arc::clone(&bound),
        ready_tx,
        milestone_tx,
    ));
    ready_rx
        .await
        .context("the pod watch ended before it started")?;

    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {
            "replicas": total,
            "selector": {"matchLabels": {"app": "bench"}},
            "template": {
                "metadata": {"labels": {"app": "bench", RUN_LABEL: run_id}},
                "spec": {
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }))?;
    let t0 = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .context("creating the Deployment")?;
    let available = async {
        let stream = watcher::watcher(
            deployments.clone(),
            watcher::Config::default().fields("metadata.name=bench"),
        );
        futures::pin_mut!(stream);
        while let Some(event) = stream.try_next().await? {
            if let Event::Apply(d) | Event::InitApply(d) = event {
                let n = d.status.and_then(|s| s.available_replicas).unwrap_or(0);
                if usize::try_from(n).unwrap_or(0) >= total {
                    return anyhow::Ok(t0.elapsed());
                }
            }
        }
        bail!("the Deployment watch ended")
    };
    let available = match tokio::time::timeout(args.timeout, available).await {
        Ok(done) => done?,
        Err(_) => bail!(
            "not available within {:?}: {} pods created, {} bound",
            args.timeout,
            created.load(Ordering::Relaxed),
            bound.load(Ordering::Relaxed)
        ),
    };
    kubelets.abort();
    let mut exist = None;
    let mut all_bound = None;
    while let Ok((what, at)) = milestones.try_recv() {
        match what {
            Milestone::Created => exist = Some(at.saturating_duration_since(t0)),
            Milestone::Bound => all_bound = Some(at.saturating_duration_since(t0)),
        }
    }
    let secs =
        |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    println!(
        "deployment of {total}: all pods exist after {}, all bound after {}, available after {:.2} s",
        secs(exist),
        secs(all_bound),
        available.as_secs_f64()
    );
    if let Some(d) = exist {
        println!(
            "pod creation: {:.0} pods/s",
            total as f64 / d.as_secs_f64().max(1e-9)
        );
    }
    print_rss(
        &args.process_label,
        &format!("with {total} pods"),
        args.controller_manager_pid,
    );
    Ok(())
}

/// When the last pod was first seen, and first seen bound.
#[derive(Debug, Clone, Copy)]
enum Milestone {
    Created,
    Bound,
}

/// The simulated kubelets: watches the namespace's pods, counts them as they appear
/// and as they are bound, and marks each bound pod Running and Ready.
async fn simulate(
    pods: Api<Pod>,
    total: usize,
    created: Arc<AtomicUsize>,
    bound: Arc<AtomicUsize>,
    ready: tokio::sync::oneshot::Sender<()>,
    milestones: tokio::sync::mpsc::UnboundedSender<(Milestone, Instant)>,
) -> anyhow::Result<()> {
    let mut ready = Some(ready);
    let mut seen = std::collections::HashSet::new();
    let mut placed = std::collections::HashSet::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(KUBELET_CONCURRENCY));
    let mut patches = tokio::task::JoinSet::new();
    let stream = watcher::watcher(pods.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    while let Some(event) = stream.try_next().await? {
        let pod = match event {
            Event::Init | Event::InitApply(_) => continue,
            Event::InitDone => {
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                continue;
            }
            Event::Apply(p) => p,
            Event::Delete(_) => continue,
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        if seen.insert(name.clone()) {
            let n = created.fetch_add(1, Ordering::Relaxed) + 1;
            if n == total {
                let _ = milestones.send((Milestone::Created, Instant::now()));
            }
        }
        let on_node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if on_node && placed.insert(name.clone()) {
            let n = bound.fetch_add(1, Ordering::Relaxed) + 1;
            if n == total {
                let _ = milestones.send((Milestone::Bound, Instant::now()));
            }
            let slot = Arc::clone(&slots).acquire_owned().await?;
            let pods = pods.clone();
            patches.spawn(async move {
                let status = json!({"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "ContainersReady", "status": "True"},
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True"}]}});
                let _ = pods
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await;
                drop(slot);
            });
            while patches.try_join_next().is_some() {}
        }
    }
    Ok(())
}
