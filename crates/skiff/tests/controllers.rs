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

    // The health and metrics endpoint, with client-go's work queue metrics.
    let port = cm.port;
    let (status, body) = tokio::task::spawn_blocking(move || {
        skiff_testkit::scheduler::https_get_insecure(port, "/healthz")
    })
    .await
    .expect("join")
    .expect("GET /healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = tokio::task::spawn_blocking(move || {
        skiff_testkit::scheduler::https_get_insecure(port, "/metrics")
    })
    .await
    .expect("join")
    .expect("GET /metrics");
    assert_eq!(status, 200);
    for line in [
        "workqueue_adds_total{name=\"replicaset\"}",
        "workqueue_work_duration_seconds_count{name=\"replicaset\"}",
    ] {
        assert!(body.contains(line), "{line} missing from {body}");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_rolls_out_undoes_and_scales() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let kubelets = simulate_kubelets(pods.clone());
    let manifest = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
            },
        },
    });
    let path = api.data_dir().join("web.json");
    std::fs::write(&path, manifest.to_string()).expect("write the manifest");
    let path = path.to_string_lossy().into_owned();
    kubectl(&api, &["apply", "-f", &path]);
    let rollout = |what: &str| {
        let out = api.kubectl(
            33,
            &["rollout", "status", "deployment/web", "--timeout=60s"],
        );
        assert!(
            out.status.success(),
            "{what}: {}{}\nlog:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            cm.log()
        );
    };
    rollout("first rollout");
    let first = wait_pods(&pods, "web", "3 pods of web:1", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":1"))
    })
    .await;
    assert_eq!(first.len(), 3);

    // The rolling update never has fewer than 2 ready pods, nor ReplicaSets asking for
    // more than 4 pods in all (a pod being deleted may still be seen as a new one
    // starts, with upstream too).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let ready_floor = tokio::spawn(watch_extreme(
        pods.clone(),
        stop_rx.clone(),
        |seen: &BTreeMap<String, Pod>| {
            let ready = seen
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            usize::MAX - ready
        },
    ));
    let surge_ceiling = tokio::spawn(watch_extreme(
        Api::<ReplicaSet>::namespaced(client.clone(), "default"),
        stop_rx,
        |seen: &BTreeMap<String, ReplicaSet>| {
            seen.values()
                .map(|rs| usize::try_from(rs.spec.replicas.unwrap_or(0)).unwrap_or(0))
                .sum()
        },
    ));
    kubectl(
        &api,
        &["set", "image", "deployment/web", "c=registry.example/web:2"],
    );
    rollout("rollout of web:2");
    let second = wait_pods(&pods, "web", "3 pods of web:2", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":2"))
    })
    .await;
    assert_eq!(second.len(), 3);
    let _ = stop_tx.send(true);
    let min_ready = usize::MAX - ready_floor.await.expect("ready watch").0;
    // (the trace: each ReplicaSet change, `name rv spec.replicas`, and the sum after it)
    let (max_pods, trace) = surge_ceiling.await.expect("ReplicaSet watch");
    assert!(
        min_ready >= 2,
        "maxUnavailable 1 broken: {min_ready} ready pods at worst"
    );
    assert!(
        max_pods <= 4,
        "maxSurge 1 broken: ReplicaSets asked for {max_pods} pods: {trace:#?}\nlog:\n{}",
        cm.log()
    );

    let history = kubectl(&api, &["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    let d: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "default");
    let web = d.get("web").await.expect("get");
    let revision = web
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .cloned();
    assert_eq!(
        revision.as_deref(),
        Some("2"),
        "{:?}",
        web.metadata.annotations
    );
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(sets.lines().count(), 2, "{sets}");

    // Undo: back to web:1, by the old ReplicaSet (now revision 3).
    kubectl(&api, &["rollout", "undo", "deployment/web"]);
    rollout("undo");
    wait_pods(&pods, "web", "3 pods of web:1 again", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":1"))
    })
    .await;
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(
        sets.lines().count(),
        2,
        "no new ReplicaSet for an old template: {sets}\n{}\n{}",
        kubectl(
            &api,
            &["get", "deploy", "web", "-o", "jsonpath={.spec.template}"]
        ),
        kubectl(
            &api,
            &[
                "get",
                "rs",
                "-o",
                "jsonpath={range .items[*]}{.spec.template}{\"\\n\"}{end}"
            ]
        )
    );

    // Scale to 0 and back.
    kubectl(&api, &["scale", "deployment/web", "--replicas=0"]);
    wait_pods(&pods, "web", "no pods", BTreeMap::is_empty).await;
    kubectl(&api, &["scale", "deployment/web", "--replicas=3"]);
    rollout("scaled back");
    wait_pods(&pods, "web", "3 pods", |m| m.len() == 3).await;
    // The status settles on 3 of everything, with upstream's conditions.
    let cond = |c: &k8s_openapi::api::apps::v1::Deployment| {
        let status = c.status.clone().unwrap_or_default();
        let has = |t: &str, st: &str, reason: &str| {
            status.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some(t)
                    && c.status.as_deref() == Some(st)
                    && c.reason.as_deref() == Some(reason)
            })
        };
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas,
        ) == (Some(3), Some(3), Some(3))
            && has("Available", "True", "MinimumReplicasAvailable")
            && has("Progressing", "True", "NewReplicaSetAvailable")
    };
    let settled = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "web",
            move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| o.is_some_and(cond),
        ),
    )
    .await;
    assert!(
        matches!(settled, Ok(Ok(_))),
        "status {:?}; log:\n{}",
        d.get("web").await.ok().and_then(|w| w.status),
        cm.log()
    );

    // Pause: a new template makes no new ReplicaSet until resumed; restart rolls anew.
    kubectl(&api, &["rollout", "pause", "deployment/web"]);
    let paused = move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
        o.and_then(|d| d.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_.as_deref() == Some("Progressing")
                        && c.reason.as_deref() == Some("DeploymentPaused")
                })
            })
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(d.clone(), "web", paused),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "Progressing=DeploymentPaused; log:\n{}",
        cm.log()
    );
    kubectl(
        &api,
        &["set", "image", "deployment/web", "c=registry.example/web:3"],
    );
    // The controller saw the new generation (paused) without a third ReplicaSet.
    let generation = d.get("web").await.expect("get").metadata.generation;
    let observed = move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
        o.and_then(|d| d.status.as_ref())
            .and_then(|s| s.observed_generation)
            >= generation
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(d.clone(), "web", observed),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "observedGeneration; log:\n{}",
        cm.log()
    );
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(sets.lines().count(), 2, "paused: {sets}");
    kubectl(&api, &["rollout", "resume", "deployment/web"]);
    rollout("resumed");
    wait_pods(&pods, "web", "3 pods of web:3", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":3"))
    })
    .await;
    kubectl(&api, &["rollout", "restart", "deployment/web"]);
    rollout("restarted");
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(
        sets.lines().count(),
        4,
        "restart makes a new ReplicaSet: {sets}"
    );

    // A rollout that misses its progress deadline is reported, and revives once its
    // pods become ready.
    let mut slow = deployment_manifest("slow", 1);
    slow.spec.progress_deadline_seconds = Some(2);
    if let Some(m) = slow.spec.template.metadata.as_mut() {
        m.labels
            .get_or_insert_with(Default::default)
            .insert("hold".into(), "1".into());
    }
    d.create(&PostParams::default(), &slow)
        .await
        .expect("create slow");
    let progressing = |reason: &'static str| {
        move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
            o.and_then(|d| d.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_.as_deref() == Some("Progressing")
                            && c.reason.as_deref() == Some(reason)
                    })
                })
        }
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "slow",
            progressing("ProgressDeadlineExceeded"),
        ),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "ProgressDeadlineExceeded; log:\n{}",
        cm.log()
    );
    let held = wait_pods(&pods, "slow", "the held pod", |m| m.len() == 1).await;
    for name in held.keys() {
        set_ready(&pods, name).await;
    }
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "slow",
            progressing("NewReplicaSetAvailable"),
        ),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "revived after the deadline; log:\n{}",
        cm.log()
    );
    kubelets.abort();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collector_cascades_as_upstream() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    for name in ["bg", "fg", "orphan"] {
        deployments
            .create(&PostParams::default(), &deployment_manifest(name, 2))
            .await
            .expect("create");
    }
    for name in ["bg", "fg", "orphan"] {
        wait_pods(&pods, name, "2 pods", |m| m.len() == 2).await;
    }

    // Background (kubectl's default): the Deployment goes at once, then its
    // ReplicaSet, then the pods.
    kubectl(&api, &["delete", "deployment", "bg"]);
    wait_objects(&sets, "bg", "no ReplicaSet of bg", BTreeMap::is_empty).await;
    wait_pods(&pods, "bg", "no pods of bg", BTreeMap::is_empty).await;

    // Foreground: kubectl waits until the Deployment is gone, which is after its
    // ReplicaSet and pods.
    kubectl(
        &api,
        &[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--timeout=30s",
        ],
    );
    assert!(deployments.get_opt("fg").await.expect("get").is_none());
    wait_objects(&sets, "fg", "no ReplicaSet of fg", BTreeMap::is_empty).await;
    wait_pods(&pods, "fg", "no pods of fg", BTreeMap::is_empty).await;

    // Orphan: the ReplicaSet stays, without its owner reference, and keeps its pods.
    kubectl(
        &api,
        &[
            "delete",
            "deployment",
            "orphan",
            "--cascade=orphan",
            "--timeout=30s",
        ],
    );
    let left = wait_objects(&sets, "orphan", "an orphaned ReplicaSet", |m| {
        m.len() == 1
            && m.values().all(|rs| {
                rs.metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(Vec::is_empty)
            })
    })
    .await;
    assert_eq!(left.len(), 1);
    let kept = wait_pods(&pods, "orphan", "the orphan's pods", |m| m.len() == 2).await;
    assert_eq!(kept.len(), 2);

    // A dangling reference: an object whose owner never existed is deleted.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let cm_obj: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dangling", "labels": {"app": "dangling"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}]},
    }))
    .expect("ConfigMap");
    cms.create(&PostParams::default(), &cm_obj)
        .await
        .expect("create");
    wait_objects(
        &cms,
        "dangling",
        "the dangling ConfigMap deleted",
        BTreeMap::is_empty,
    )
    .await;

    // A namespace holding a Job goes away: the namespace deleter deletes the Job with
    // the Job's default propagation, Orphan, and the collector removes the `orphan`
    // finalizer that would otherwise keep the Job, and the namespace, for ever.
    kubectl(&api, &["create", "namespace", "gc-ns"]);
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "gc-ns");
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.example/web:1"}]}}},
    }))
    .expect("Job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create the Job");
    let out = api.kubectl(33, &["delete", "namespace", "gc-ns", "--timeout=30s"]);
    assert!(
        out.status.success(),
        "namespace deletion: {}{}\nlog:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        cm.log()
    );
}
