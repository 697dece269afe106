//! End-to-end: `skiff controller-manager` against `skiff apiserver` (SQLite), with no
//! kubelet: pods stay unscheduled (deleted at once, as upstream deletes a pod no node
//! holds), and the test marks them Ready itself. Every wait watches; nothing sleeps.

#[path = "controllers/bad_input.rs"]
mod bad_input;
#[path = "controllers/certificates.rs"]
mod certificates;
#[path = "controllers/cluster.rs"]
mod cluster;
#[path = "controllers/cronjob.rs"]
mod cronjob;
#[path = "controllers/daemonset.rs"]
mod daemonset;
#[path = "controllers/deployment.rs"]
mod deployment;
#[path = "controllers/disruption.rs"]
mod disruption;
#[path = "controllers/endpoints.rs"]
mod endpoints;
#[path = "controllers/failover.rs"]
mod failover;
#[path = "controllers/garbagecollector.rs"]
mod garbagecollector;
#[path = "controllers/job.rs"]
mod job;
#[path = "controllers/namespace.rs"]
mod namespace;
#[path = "controllers/nodelifecycle.rs"]
mod nodelifecycle;
#[path = "controllers/replicaset.rs"]
mod replicaset;
#[path = "controllers/server.rs"]
mod server;
#[path = "controllers/statefulset.rs"]
mod statefulset;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event as WatchEvent};
use serde_json::json;
use skiff_testkit::{ApiServer, ApiServerOptions, Backend};

/// How long the controller may take to reach a state.
const WAIT: Duration = Duration::from_secs(30);

/// `skiff controller-manager`, killed on drop; its log is kept for failures.
struct ControllerManager {
    child: Child,
    log: std::path::PathBuf,
    /// The HTTPS port of /healthz and /metrics.
    port: u16,
}

impl ControllerManager {
    fn start(api: &ApiServer, args: &[&str]) -> ControllerManager {
        let log = api.data_dir().join("controller-manager.log");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let file = std::fs::File::create(&log).expect("create the log");
        let child = Command::new(env!("CARGO_BIN_EXE_skiff"))
            .arg("controller-manager")
            .arg("--kubeconfig")
            .arg(api.kubeconfig())
            .arg(format!("--secure-port={port}"))
            .args(args)
            .env("RUST_LOG", "info,skiff_controllers=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn skiff controller-manager");
        ControllerManager { child, log, port }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replica_set(name: &str, replicas: i32, min_ready: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "front"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
            },
        },
    }))
    .expect("a ReplicaSet")
}

/// Waits, by watching, until the pods labelled `app=<app>` satisfy `done`; the pods then.
async fn wait_pods(
    pods: &Api<Pod>,
    app: &str,
    what: &str,
    done: impl Fn(&BTreeMap<String, Pod>) -> bool,
) -> BTreeMap<String, Pod> {
    wait_objects(pods, app, what, done).await
}

/// Waits, by watching, until the objects of `api` labelled `app=<app>` satisfy `done`.
async fn wait_objects<K>(
    api: &Api<K>,
    app: &str,
    what: &str,
    done: impl Fn(&BTreeMap<String, K>) -> bool,
) -> BTreeMap<String, K>
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let stream = watcher::watcher(api.clone(), config);
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<String, K> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, K>> = None;
    let wait = async {
        while let Some(ev) = stream.try_next().await.expect("watch") {
            let name = |o: &K| o.meta().name.clone().unwrap_or_default();
            match ev {
                WatchEvent::Init => listing = Some(BTreeMap::new()),
                WatchEvent::InitApply(p) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(name(&p), p);
                    }
                }
                WatchEvent::InitDone => seen = listing.take().unwrap_or_default(),
                WatchEvent::Apply(p) => {
                    seen.insert(name(&p), p);
                }
                WatchEvent::Delete(p) => {
                    seen.remove(&name(&p));
                }
            }
            if listing.is_none() && done(&seen) {
                return seen.clone();
            }
        }
        panic!("the watch ended");
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}; objects: {:?}", seen.keys()))
}

/// Waits, by watching, until the ReplicaSet satisfies `done`.
async fn wait_rs(
    api: &Api<ReplicaSet>,
    name: &str,
    what: &str,
    done: impl Fn(&ReplicaSet) -> bool,
) {
    let cond = move |rs: Option<&ReplicaSet>| rs.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    match res {
        Ok(Ok(_)) => {}
        other => {
            let now = api.get(name).await.ok().and_then(|r| r.status);
            panic!("timed out waiting for {what}: {other:?}; status now {now:?}");
        }
    }
}

fn owner_uid(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

async fn set_ready(pods: &Api<Pod>, name: &str) {
    let patch = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("mark the pod Ready");
}

/// Plays the kubelets: every pod that appears is marked Running and Ready at once, but
/// those labelled `hold`.
fn simulate_kubelets(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let stream = watcher::watcher(pods.clone(), watcher::Config::default());
        futures::pin_mut!(stream);
        while let Ok(Some(ev)) = stream.try_next().await {
            let (WatchEvent::Apply(p) | WatchEvent::InitApply(p)) = ev else {
                continue;
            };
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let held = p
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("hold"));
            if ready || held || p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let patch = json!({"status": {"phase": "Running", "conditions": [{
                "type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]}});
            let name = p.metadata.name.clone().unwrap_or_default();
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await;
        }
    })
}

fn kubectl(api: &ApiServer, args: &[&str]) -> String {
    let out = api.kubectl(33, args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The largest value `measure` takes over the objects of `api` labelled `app=web`, from
/// the first complete list until `stop`.
async fn watch_extreme<K>(
    api: Api<K>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    measure: impl Fn(&BTreeMap<String, K>) -> usize + Send + 'static,
) -> (usize, Vec<String>)
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static
        + k8s_openapi::serde::Serialize,
{
    let stream = watcher::watcher(api, watcher::Config::default().labels("app=web"));
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<String, K> = BTreeMap::new();
    let mut synced = false;
    let mut worst = 0;
    let mut trace = Vec::new();
    loop {
        let ev = tokio::select! {
            _ = stop.changed() => return (worst, trace),
            ev = stream.try_next() => ev,
        };
        let Ok(Some(ev)) = ev else {
            return (worst, trace);
        };
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        if let WatchEvent::Apply(o) | WatchEvent::Delete(o) = &ev {
            trace.push(format!(
                "{} rv {:?} {:?}",
                name(o),
                o.meta().resource_version,
                serde_json::to_value(o)
                    .ok()
                    .and_then(|v| v.pointer("/spec/replicas").cloned())
            ));
        }
        match ev {
            WatchEvent::Init => seen.clear(),
            WatchEvent::InitApply(o) | WatchEvent::Apply(o) => {
                seen.insert(name(&o), o);
            }
            WatchEvent::InitDone => synced = true,
            WatchEvent::Delete(o) => {
                seen.remove(&name(&o));
            }
        }
        if synced {
            let m = measure(&seen);
            trace.push(format!("  -> {m}"));
            worst = worst.max(m);
        }
    }
}

fn images(pods: &BTreeMap<String, Pod>) -> Vec<String> {
    let mut v: Vec<String> = pods
        .values()
        .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
        .collect();
    v.sort();
    v
}

fn deployment_manifest(name: &str, replicas: i32) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
            },
        },
    }))
    .expect("a Deployment")
}
