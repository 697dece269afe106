//! The StatefulSet controller end to end: pods that stay unscheduled (deleted at once)
//! and are marked Running and Ready by the test; every order is checked on a watch.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::events::v1::Event;

use super::*;

fn stateful_set(name: &str, replicas: i32, policy: &str, extra: serde_json::Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas,
        "podManagementPolicy": policy,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
        },
        "volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }],
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a StatefulSet")
}

fn running_and_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod appearing (`added`) or going, and which pods were there just before, Running
/// and Ready or not.
#[derive(Debug, Clone)]
struct Seen {
    added: bool,
    name: String,
    before: BTreeMap<String, bool>,
}

/// What [`trace_pods`] has seen so far.
type Trace = tokio::sync::watch::Receiver<Vec<Seen>>;

/// Records, from a watch, every pod labelled `app=<app>` that appears or goes.
fn trace_pods(pods: Api<Pod>, app: &str) -> (Trace, tokio::task::JoinHandle<()>) {
    let (out, trace) = tokio::sync::watch::channel(Vec::new());
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let task = tokio::spawn(async move {
        let stream = watcher::watcher(pods, config);
        futures::pin_mut!(stream);
        let mut seen: BTreeMap<String, Pod> = BTreeMap::new();
        while let Ok(Some(ev)) = stream.try_next().await {
            let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
            let before = |seen: &BTreeMap<String, Pod>| {
                seen.iter()
                    .map(|(n, p)| (n.clone(), running_and_ready(p)))
                    .collect()
            };
            match ev {
                WatchEvent::InitApply(p) => {
                    seen.insert(name(&p), p);
                }
                WatchEvent::Apply(p) => {
                    if !seen.contains_key(&name(&p)) {
                        let s = Seen {
                            added: true,
                            name: name(&p),
                            before: before(&seen),
                        };
                        out.send_modify(|v| v.push(s));
                    }
                    seen.insert(name(&p), p);
                }
                WatchEvent::Delete(p) => {
                    let s = Seen {
                        added: false,
                        name: name(&p),
                        before: before(&seen),
                    };
                    out.send_modify(|v| v.push(s));
                    seen.remove(&name(&p));
                }
                WatchEvent::Init | WatchEvent::InitDone => {}
            }
        }
    });
    (trace, task)
}

fn ordinal_of(set: &str, pod: &str) -> i32 {
    pod.strip_prefix(set)
        .and_then(|s| s.strip_prefix('-'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{pod} is no pod of {set}"))
}

/// Waits until the trace satisfies `done`; the trace then.
async fn wait_trace(trace: &mut Trace, what: &str, done: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
    let got = match tokio::time::timeout(WAIT, trace.wait_for(|v| done(v))).await {
        Ok(Ok(v)) => Some(v.clone()),
        _ => None,
    };
    got.unwrap_or_else(|| panic!("timed out waiting for {what}: {:#?}", *trace.borrow()))
}

/// Every pod of `set` appeared only once all lower ordinals were Running and Ready.
fn assert_ordered_creation(set: &str, trace: &[Seen]) {
    for s in trace.iter().filter(|s| s.added) {
        let n = ordinal_of(set, &s.name);
        for k in 0..n {
            let lower = format!("{set}-{k}");
            assert_eq!(
                s.before.get(&lower),
                Some(&true),
                "{} appeared while {lower} was not Running and Ready; trace: {trace:#?}",
                s.name
            );
        }
    }
}

/// Waits, by watching, until the StatefulSet satisfies `done`.
async fn wait_sts(
    api: &Api<StatefulSet>,
    name: &str,
    what: &str,
    done: impl Fn(&StatefulSet) -> bool,
) {
    let cond = move |s: Option<&StatefulSet>| s.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    if !matches!(res, Ok(Ok(_))) {
        let now = api.get(name).await.ok().and_then(|s| s.status);
        panic!("timed out waiting for {what}: {res:?}; status now {now:?}");
    }
}

/// Waits, by watching, for an event about `regarding` with `reason` and `note`.
async fn wait_event(events: &Api<Event>, regarding: &str, reason: &str, note: &str) {
    let stream = watcher::watcher(events.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    let wait = async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            let (WatchEvent::Apply(e) | WatchEvent::InitApply(e)) = ev else {
                continue;
            };
            let about = e.regarding.as_ref().and_then(|r| r.name.as_deref());
            if about == Some(regarding)
                && e.reason.as_deref() == Some(reason)
                && e.note.as_deref() == Some(note)
            {
                return;
            }
        }
        panic!("the watch ended");
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {reason} {note:?} about {regarding}"));
}

fn names(m: &BTreeMap<String, impl Sized>) -> Vec<&str> {
    m.keys().map(String::as_str).collect()
}

fn image_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or("")
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The revision numbers `kubectl rollout history` lists.
fn history(api: &ApiServer, set: &str) -> Vec<u32> {
    kubectl(api, &["rollout", "history", &format!("statefulset/{set}")])
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// `n` pods of `set`, all Running and Ready, each of the image `images[ordinal]`.
fn settled(m: &BTreeMap<String, Pod>, set: &str, images: &[&str]) -> bool {
    m.len() == images.len()
        && images.iter().enumerate().all(|(i, image)| {
            m.get(&format!("{set}-{i}"))
                .is_some_and(|p| running_and_ready(p) && image_of(p) == *image)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_set_creates_in_order_scales_and_updates_by_partition() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let name = "sts-web";
    let (mut trace, tracer) = trace_pods(pods.clone(), name);

    let created = sets
        .create(
            &PostParams::default(),
            &stateful_set(name, 3, "OrderedReady", json!({})),
        )
        .await
        .expect("create the StatefulSet");
    let uid = created.metadata.uid.clone().expect("uid");

    // web-0 alone, with its claim, until it is Running and Ready.
    let got = wait_pods(&pods, name, "sts-web-0", |m| m.contains_key("sts-web-0")).await;
    assert_eq!(names(&got), ["sts-web-0"], "log:\n{}", cm.log());
    let p0 = &got["sts-web-0"];
    assert_eq!(owner_uid(p0).as_deref(), Some(uid.as_str()));
    assert_eq!(
        label(p0, "statefulset.kubernetes.io/pod-name"),
        Some("sts-web-0")
    );
    assert_eq!(label(p0, "apps.kubernetes.io/pod-index"), Some("0"));
    assert!(
        label(p0, "controller-revision-hash").is_some_and(|r| r.starts_with("sts-web-")),
        "{:?}",
        p0.metadata.labels
    );
    let spec = p0.spec.as_ref().expect("spec");
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("sts-web-0"), Some("sts-web"))
    );
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "data")
        .expect("the data volume");
    assert_eq!(
        volume
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("data-sts-web-0")
    );
    wait_objects(&claims, name, "the claim of sts-web-0", |m| {
        m.contains_key("data-sts-web-0")
    })
    .await;
    wait_event(
        &events,
        name,
        "SuccessfulCreate",
        "create Pod sts-web-0 in StatefulSet sts-web successful",
    )
    .await;
    wait_event(
        &events,
        name,
        "SuccessfulCreate",
        "create Claim data-sts-web-0 Pod sts-web-0 in StatefulSet sts-web success",
    )
    .await;

    // Marked Running and Ready one by one: web-1, then web-2 come.
    let kubelets = simulate_kubelets(pods.clone());
    let image1 = "registry.example/web:1";
    let image2 = "registry.example/web:2";
    wait_pods(&pods, name, "3 ready pods", |m| {
        settled(m, name, &[image1; 3])
    })
    .await;
    let got = wait_objects(&claims, name, "3 claims", |m| m.len() == 3).await;
    assert_eq!(
        names(&got),
        ["data-sts-web-0", "data-sts-web-1", "data-sts-web-2"]
    );
    wait_sts(&sets, name, "3 ready, current and updated", |s| {
        let st = s.status.clone().unwrap_or_default();
        st.replicas == 3
            && st.ready_replicas == Some(3)
            && st.available_replicas == Some(3)
            && st.current_replicas == Some(3)
            && st.updated_replicas == Some(3)
            && st.current_revision.is_some()
            && st.current_revision == st.update_revision
            && st.observed_generation == s.metadata.generation
    })
    .await;
    kubectl(
        &api,
        &["rollout", "status", "statefulset/sts-web", "--timeout=30s"],
    );

    // Scaled to 1: web-2 goes, then web-1; the claims stay (Retain).
    let mark = trace.borrow().len();
    kubectl(&api, &["scale", "statefulset/sts-web", "--replicas=1"]);
    wait_pods(&pods, name, "sts-web-0 alone", |m| m.len() == 1).await;
    let gone = wait_trace(&mut trace, "2 deletions", |v| {
        v.iter().skip(mark).filter(|s| !s.added).count() >= 2
    })
    .await
    .split_off(mark);
    let deleted: Vec<&str> = gone
        .iter()
        .filter(|s| !s.added)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(deleted, ["sts-web-2", "sts-web-1"], "{gone:#?}");
    assert!(!gone[1].before.contains_key("sts-web-2"), "{gone:#?}");
    let got = wait_objects(&claims, name, "3 claims", |m| m.len() == 3).await;
    assert_eq!(got.len(), 3);
    wait_event(
        &events,
        name,
        "SuccessfulDelete",
        "delete Pod sts-web-2 in StatefulSet sts-web successful",
    )
    .await;

    // Back to 3, in order again.
    kubectl(&api, &["scale", "statefulset/sts-web", "--replicas=3"]);
    wait_pods(&pods, name, "3 ready pods again", |m| {
        settled(m, name, &[image1; 3])
    })
    .await;

    // Partition 1: a new image reaches web-2 then web-1, never web-0.
    kubectl(
        &api,
        &[
            "patch",
            "statefulset/sts-web",
            "-p",
            r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":1}}}}"#,
        ],
    );
    kubectl(
        &api,
        &[
            "set",
            "image",
            "statefulset/sts-web",
            "c=registry.example/web:2",
        ],
    );
    wait_pods(&pods, name, "web:2 on ordinals 1 and 2", |m| {
        settled(m, name, &[image1, image2, image2])
    })
    .await;
    wait_sts(&sets, name, "2 updated, 1 current", |s| {
        let st = s.status.clone().unwrap_or_default();
        st.updated_replicas == Some(2)
            && st.current_replicas == Some(1)
            && st.ready_replicas == Some(3)
            && st.current_revision != st.update_revision
            && st.observed_generation == s.metadata.generation
    })
    .await;
    let out = kubectl(
        &api,
        &["rollout", "status", "statefulset/sts-web", "--timeout=30s"],
    );
    assert!(out.contains("partitioned roll out complete"), "{out}");
    let got = wait_pods(&pods, name, "3 pods", |m| m.len() == 3).await;
    let update = sets
        .get(name)
        .await
        .expect("get")
        .status
        .and_then(|s| s.update_revision)
        .expect("updateRevision");
    for i in 1..=2 {
        let p = &got[&format!("sts-web-{i}")];
        assert_eq!(label(p, "controller-revision-hash"), Some(update.as_str()));
    }

    // Two revisions; undo brings web:1 back to ordinals 1 and 2, as revision 3.
    assert_eq!(history(&api, name), [1, 2], "log:\n{}", cm.log());
    kubectl(&api, &["rollout", "undo", "statefulset/sts-web"]);
    wait_pods(&pods, name, "web:1 everywhere", |m| {
        settled(m, name, &[image1; 3])
    })
    .await;
    wait_sts(&sets, name, "the rollback complete", |s| {
        let st = s.status.clone().unwrap_or_default();
        st.updated_replicas == Some(3) && st.current_revision == st.update_revision
    })
    .await;
    assert_eq!(history(&api, name), [2, 3]);

    // Ordered creation held throughout, updates and re-creations included.
    let all = trace.borrow().clone();
    assert_ordered_creation(name, &all);
    let recreated: BTreeSet<&str> = all
        .iter()
        .filter(|s| s.added)
        .map(|s| s.name.as_str())
        .collect();
    assert!(recreated.contains("sts-web-2"));
    assert!(
        !all.iter().skip(mark).any(|s| s.name == "sts-web-0"),
        "sts-web-0 was never replaced: {all:#?}"
    );
    kubelets.abort();
    tracer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_set_creates_at_once_and_deletes_scaled_down_claims() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let name = "sts-par";
    let retention = json!({
        "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Retain"},
    });
    sets.create(
        &PostParams::default(),
        &stateful_set(name, 3, "Parallel", retention),
    )
    .await
    .expect("create the StatefulSet");

    // No pod ever becomes Ready, yet all three are made, each with its claim.
    let got = wait_pods(&pods, name, "3 pods at once", |m| m.len() == 3).await;
    assert_eq!(
        names(&got),
        ["sts-par-0", "sts-par-1", "sts-par-2"],
        "log:\n{}",
        cm.log()
    );
    assert!(got.values().all(|p| !running_and_ready(p)));
    let got = wait_objects(&claims, name, "3 claims", |m| m.len() == 3).await;
    assert!(
        got.values().all(|c| c
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .is_empty()),
        "in range, whenScaled Delete puts no owner on a claim: {got:?}"
    );

    // Scaled to 1 while nothing is ready: both go at once, and their claims with them
    // (owned by their pods, then garbage collected).
    kubectl(&api, &["scale", "statefulset/sts-par", "--replicas=1"]);
    wait_pods(&pods, name, "sts-par-0 alone", |m| {
        names(m) == ["sts-par-0"]
    })
    .await;
    let alone = tokio::time::timeout(
        WAIT.saturating_sub(Duration::from_secs(2)),
        wait_objects(&claims, name, "the claim of sts-par-0 alone", |m| {
            names(m) == ["data-sts-par-0"]
        }),
    )
    .await;
    let Ok(got) = alone else {
        let now: Vec<_> = claims
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.metadata.name, c.metadata.owner_references))
            .collect();
        let log = cm.log();
        let said: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("garbage") || l.contains("sts-par") || l.contains("claim"))
            .collect();
        panic!("the scaled-down claims stay: {now:#?}\n{}", said.join("\n"));
    };
    assert!(got.contains_key("data-sts-par-0"), "log:\n{}", cm.log());
    wait_sts(&sets, name, "1 replica", |s| {
        let st = s.status.clone().unwrap_or_default();
        st.replicas == 1 && st.observed_generation == s.metadata.generation
    })
    .await;

    // Scaled up again: new claims for the new pods.
    kubectl(&api, &["scale", "statefulset/sts-par", "--replicas=2"]);
    wait_pods(&pods, name, "2 pods", |m| m.len() == 2).await;
    wait_objects(&claims, name, "2 claims", |m| {
        names(m) == ["data-sts-par-0", "data-sts-par-1"]
    })
    .await;
}
