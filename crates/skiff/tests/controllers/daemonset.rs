//! The DaemonSet controller end to end: Node objects without kubelets, pods that stay
//! unscheduled (pinned to their node by node affinity) and are marked Ready by the test.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;

use super::*;

/// The daemon tolerations every pod gets (no host network: no network-unavailable).
const DAEMON_TOLERATIONS: [&str; 6] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/unschedulable",
];

fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("a Node")
}

fn daemon_set(name: &str, pod_spec: serde_json::Value) -> DaemonSet {
    let mut spec = json!({"containers": [{"name": "c", "image": "registry.example/web:1"}]});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), pod_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }))
    .expect("a DaemonSet")
}

/// The node a pod is pinned to by its `matchFields` `metadata.name In [node]` term.
fn pinned_node(p: &Pod) -> Option<String> {
    let terms = &p
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let [field] = term.match_fields.as_deref()? else {
        return None;
    };
    let ok = field.key == "metadata.name" && field.operator == "In";
    match field.values.as_deref() {
        Some([n]) if ok => Some(n.clone()),
        _ => None,
    }
}

fn nodes_of(pods: &BTreeMap<String, Pod>) -> BTreeSet<String> {
    pods.values().filter_map(pinned_node).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn is_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One pod on each of `nodes`, all Ready and running `image`.
fn settled(pods: &BTreeMap<String, Pod>, nodes: &[&str], image: &str) -> bool {
    pods.len() == nodes.len()
        && nodes_of(pods) == set(nodes)
        && pods.values().all(is_ready)
        && images(pods).iter().all(|i| i == image)
}

/// Waits, by watching, until the DaemonSet satisfies `done`.
async fn wait_ds(api: &Api<DaemonSet>, name: &str, what: &str, done: impl Fn(&DaemonSet) -> bool) {
    let cond = move |ds: Option<&DaemonSet>| ds.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    if !matches!(res, Ok(Ok(_))) {
        let now = api.get(name).await.ok().and_then(|d| d.status);
        panic!("timed out waiting for {what}: {res:?}; status now {now:?}");
    }
}

/// The most of `nodes` that lacked a Ready pod labelled `app=<app>` at any point of the
/// watch, from its first complete list until `stop`.
async fn worst_unavailable(
    pods: Api<Pod>,
    app: String,
    nodes: BTreeSet<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> usize {
    let stream = watcher::watcher(
        pods,
        watcher::Config::default().labels(&format!("app={app}")),
    );
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<String, Pod> = BTreeMap::new();
    let mut synced = false;
    let mut worst = 0;
    loop {
        let ev = tokio::select! {
            _ = stop.changed() => return worst,
            ev = stream.try_next() => ev,
        };
        let Ok(Some(ev)) = ev else { return worst };
        let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
        match ev {
            WatchEvent::Init => seen.clear(),
            WatchEvent::InitApply(p) | WatchEvent::Apply(p) => {
                seen.insert(name(&p), p);
            }
            WatchEvent::InitDone => synced = true,
            WatchEvent::Delete(p) => {
                seen.remove(&name(&p));
            }
        }
        if synced {
            let ready: BTreeSet<String> = seen
                .values()
                .filter(|p| is_ready(p))
                .filter_map(pinned_node)
                .collect();
            worst = worst.max(nodes.difference(&ready).count());
        }
    }
}

/// The revision numbers `kubectl rollout history` lists.
fn history(api: &ApiServer, ds: &str) -> Vec<u32> {
    kubectl(api, &["rollout", "history", &format!("daemonset/{ds}")])
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_set_places_rolls_back_and_follows_nodes() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");

    // Three nodes: dsn-b is tainted dedicated=x:NoSchedule; dsn-b has an SSD, dsn-c not.
    let no_taints = json!([]);
    let tainted = json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]);
    for n in [
        node("dsn-a", json!({}), no_taints.clone()),
        node("dsn-b", json!({"disk": "ssd"}), tainted),
        node("dsn-c", json!({"disk": "hdd"}), no_taints.clone()),
    ] {
        nodes
            .create(&PostParams::default(), &n)
            .await
            .expect("create a node");
    }
    let web = sets
        .create(&PostParams::default(), &daemon_set("ds-web", json!({})))
        .await
        .expect("create ds-web");
    // Only on SSD nodes, and tolerating the dedicated taint.
    let ssd_spec = json!({
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{
            "key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule",
        }],
    });
    sets.create(&PostParams::default(), &daemon_set("ds-ssd", ssd_spec))
        .await
        .expect("create ds-ssd");

    // ds-web: one pod on each untainted node, pinned there, with the daemon tolerations.
    let uid = web.metadata.uid.clone().expect("uid");
    let got = wait_pods(&pods, "ds-web", "pods on dsn-a and dsn-c", |m| {
        m.len() == 2 && nodes_of(m) == set(&["dsn-a", "dsn-c"])
    })
    .await;
    for (name, p) in &got {
        assert!(name.starts_with("ds-web-"), "{name}");
        assert_eq!(owner_uid(p).as_deref(), Some(uid.as_str()), "{name}");
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (r.kind.as_str(), r.block_owner_deletion),
            ("DaemonSet", Some(true))
        );
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert!(
            labels.contains_key("controller-revision-hash"),
            "{labels:?}"
        );
        let tolerations = p
            .spec
            .as_ref()
            .unwrap()
            .tolerations
            .clone()
            .unwrap_or_default();
        for key in DAEMON_TOLERATIONS {
            let t = tolerations
                .iter()
                .find(|t| t.key.as_deref() == Some(key))
                .unwrap_or_else(|| panic!("{name} lacks the toleration {key}: {tolerations:?}"));
            assert_eq!(t.operator.as_deref(), Some("Exists"));
            assert_eq!(t.toleration_seconds, None);
        }
        assert!(
            !tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("dedicated")),
            "{tolerations:?}"
        );
    }
    // ds-ssd: only on dsn-b, whose taint it tolerates.
    wait_pods(&pods, "ds-ssd", "a pod on dsn-b", |m| {
        m.len() == 1 && nodes_of(m) == set(&["dsn-b"])
    })
    .await;

    // A node added later gets a pod; then all pods become Ready.
    nodes
        .create(&PostParams::default(), &node("dsn-d", json!({}), no_taints))
        .await
        .expect("create dsn-d");
    let kubelets = simulate_kubelets(pods.clone());
    let all = ["dsn-a", "dsn-c", "dsn-d"];
    let image1 = "registry.example/web:1";
    wait_pods(&pods, "ds-web", "3 ready pods", |m| {
        settled(m, &all, image1)
    })
    .await;
    wait_ds(&sets, "ds-web", "3 scheduled and available", |ds| {
        let s = ds.status.clone().unwrap_or_default();
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
        ) == (3, 3, 3)
            && s.number_available == Some(3)
            && s.updated_number_scheduled == Some(3)
            && s.number_misscheduled == 0
    })
    .await;

    // A new image rolls node by node: never more than maxUnavailable (1) node without a
    // Ready pod.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let watch = tokio::spawn(worst_unavailable(
        pods.clone(),
        "ds-web".into(),
        set(&all),
        stop_rx,
    ));
    kubectl(
        &api,
        &["set", "image", "ds/ds-web", "c=registry.example/web:2"],
    );
    let image2 = "registry.example/web:2";
    wait_pods(&pods, "ds-web", "3 ready pods of web:2", |m| {
        settled(m, &all, image2)
    })
    .await;
    let _ = stop_tx.send(true);
    let worst = watch.await.expect("join the watch");
    assert!(worst <= 1, "{worst} nodes at once lacked a ready pod");
    wait_ds(&sets, "ds-web", "all updated", |ds| {
        let s = ds.status.clone().unwrap_or_default();
        s.desired_number_scheduled == 3
            && s.updated_number_scheduled == Some(3)
            && s.number_available == Some(3)
            && s.observed_generation == ds.metadata.generation
    })
    .await;

    // Two revisions; undo goes back to the first template, as revision 3.
    assert_eq!(history(&api, "ds-web"), [1, 2], "log:\n{}", cm.log());
    kubectl(&api, &["rollout", "undo", "daemonset/ds-web"]);
    wait_pods(&pods, "ds-web", "3 ready pods of web:1 again", |m| {
        settled(m, &all, image1)
    })
    .await;
    assert_eq!(history(&api, "ds-web"), [2, 3]);

    // A deleted node loses its pod.
    nodes
        .delete("dsn-d", &Default::default())
        .await
        .expect("delete dsn-d");
    wait_pods(&pods, "ds-web", "pods on dsn-a and dsn-c only", |m| {
        settled(m, &["dsn-a", "dsn-c"], image1)
    })
    .await;
    wait_ds(&sets, "ds-web", "2 desired", |ds| {
        let s = ds.status.clone().unwrap_or_default();
        s.desired_number_scheduled == 2 && s.number_available == Some(2)
    })
    .await;
    kubelets.abort();
}
