//! End-to-end: `skiff controller-manager` against `skiff apiserver` (SQLite), with no
//! kubelet: pods stay unscheduled (deleted at once, as upstream deletes a pod no node
//! holds), and the test marks them Ready itself. Every wait watches; nothing sleeps.

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
}

impl ControllerManager {
    fn start(api: &ApiServer, args: &[&str]) -> ControllerManager {
        let log = api.data_dir().join("controller-manager.log");
        let file = std::fs::File::create(&log).expect("create the log");
        let child = Command::new(env!("CARGO_BIN_EXE_skiff"))
            .arg("controller-manager")
            .arg("--kubeconfig")
            .arg(api.kubeconfig())
            .args(args)
            .env("RUST_LOG", "info,skiff_controllers=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn skiff controller-manager");
        ControllerManager { child, log }
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
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let stream = watcher::watcher(pods.clone(), config);
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<String, Pod> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Pod>> = None;
    let wait = async {
        while let Some(ev) = stream.try_next().await.expect("watch pods") {
            match ev {
                WatchEvent::Init => listing = Some(BTreeMap::new()),
                WatchEvent::InitApply(p) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(p.metadata.name.clone().unwrap_or_default(), p);
                    }
                }
                WatchEvent::InitDone => seen = listing.take().unwrap_or_default(),
                WatchEvent::Apply(p) => {
                    seen.insert(p.metadata.name.clone().unwrap_or_default(), p);
                }
                WatchEvent::Delete(p) => {
                    seen.remove(p.metadata.name.as_deref().unwrap_or_default());
                }
            }
            if listing.is_none() && done(&seen) {
                return seen.clone();
            }
        }
        panic!("the pod watch ended");
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}; pods: {:?}", seen.keys()))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_creates_adopts_scales_and_releases() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");

    // An orphan that matches the selector exists before the ReplicaSet: it is adopted,
    // so only two pods are created.
    let orphan: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    let rs = sets
        .create(&PostParams::default(), &replica_set("web", 3, 0))
        .await
        .expect("create the ReplicaSet");
    let uid = rs.metadata.uid.clone().expect("uid");
    let owned = |m: &BTreeMap<String, Pod>, n: usize| {
        m.len() == n
            && m.values()
                .all(|p| owner_uid(p).as_deref() == Some(uid.as_str()))
    };
    let got = wait_pods(&pods, "web", "3 owned pods", |m| owned(m, 3)).await;
    assert!(
        got.contains_key("orphan"),
        "the orphan was adopted: {:?}",
        got.keys()
    );
    for (name, p) in &got {
        if name != "orphan" {
            assert!(name.starts_with("web-"), "{name}");
            assert_eq!(
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("tier"))
                    .map(String::as_str),
                Some("front")
            );
            let r = &p.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (r.kind.as_str(), r.block_owner_deletion),
                ("ReplicaSet", Some(true))
            );
        }
    }
    wait_rs(&sets, "web", "replicas 3", |rs| {
        let s = rs.status.clone().unwrap_or_default();
        // The orphan lacks the template's `tier` label: not fully labelled.
        s.replicas == 3 && s.fully_labeled_replicas == Some(2) && s.observed_generation == Some(1)
    })
    .await;

    // Two pods become Ready: ready and available (minReadySeconds 0).
    let names: Vec<String> = got.keys().filter(|n| *n != "orphan").cloned().collect();
    for n in &names {
        set_ready(&pods, n).await;
    }
    wait_rs(&sets, "web", "2 ready", |rs| {
        let s = rs.status.clone().unwrap_or_default();
        s.ready_replicas == Some(2) && s.available_replicas == Some(2)
    })
    .await;

    // Scaled to 2: the pod that is not ready goes first.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale down");
    let left = wait_pods(&pods, "web", "2 pods", |m| owned(m, 2)).await;
    let mut kept: Vec<&String> = left.keys().collect();
    kept.sort();
    let mut ready: Vec<&String> = names.iter().collect();
    ready.sort();
    assert_eq!(kept, ready, "the ready pods are kept");

    // A pod relabelled out of the selector is released and replaced.
    let released = names[0].clone();
    pods.patch(
        &released,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .expect("relabel");
    wait_pods(&pods, "web", "a replacement", |m| {
        owned(m, 2) && !m.contains_key(&released)
    })
    .await;
    let freed = pods.get(&released).await.expect("still there");
    assert_eq!(
        owner_uid(&freed),
        None,
        "released: {:?}",
        freed.metadata.owner_references
    );

    // Events from the controller, written in the background: watched for.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let stream = watcher::watcher(events, watcher::Config::default());
    futures::pin_mut!(stream);
    let mut reasons = std::collections::BTreeSet::new();
    let want = ["SuccessfulCreate", "SuccessfulDelete"];
    let seen_all = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            if let WatchEvent::Apply(e) | WatchEvent::InitApply(e) = ev
                && e.involved_object.name.as_deref() == Some("web")
                && let Some(r) = e.reason
            {
                reasons.insert(r);
            }
            if want.iter().all(|w| reasons.contains(*w)) {
                return;
            }
        }
    })
    .await;
    assert!(seen_all.is_ok(), "events {reasons:?}; log:\n{}", cm.log());
}
