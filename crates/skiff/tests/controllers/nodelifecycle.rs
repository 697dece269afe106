//! The node lifecycle and taint eviction controllers end to end, with hand-made Nodes and
//! Leases: a Node whose Lease stops is marked Unknown and tainted unreachable, its pods
//! are evicted as their tolerations allow (the admission's 300 s default included), and `kubectl cordon` taints a Node
//! unschedulable.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use super::*;

fn node_manifest(name: &str) -> Node {
    let now = Timestamp::now().to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "lifecycle"}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]},
    }))
    .expect("a Node")
}

fn lease_manifest(name: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
            "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    }))
    .expect("a Lease")
}

fn bound_pod(name: &str, node: &str, tolerations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "evictees"}},
        "spec": {"nodeName": node, "tolerations": tolerations,
            "containers": [{"name": "c", "image": "registry.example/x:1"}]},
    }))
    .expect("a pod")
}

fn taint_keys(n: &Node) -> Vec<String> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_nodes_are_tainted_and_their_pods_evicted() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let client = api.client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for name in ["alive", "silent"] {
        nodes
            .create(&PostParams::default(), &node_manifest(name))
            .await
            .expect("create a node");
        leases
            .create(&PostParams::default(), &lease_manifest(name))
            .await
            .expect("create a lease");
    }
    // The live node's kubelet renews its Lease every 500 ms; the silent one's never.
    let renewer = {
        let leases = leases.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                let now = Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                    .to_string();
                let patch = json!({"spec": {"renewTime": now}});
                let _ = leases
                    .patch("alive", &PatchParams::default(), &Patch::Merge(patch))
                    .await;
            }
        })
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let unreachable = |seconds: Option<i64>| {
        let mut t = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        json!([t])
    };
    for (name, node, tolerations) in [
        ("plain", "silent", json!([])),
        ("patient", "silent", unreachable(Some(3))),
        ("forever", "silent", unreachable(None)),
        ("safe", "alive", json!([])),
    ] {
        pods.create(&PostParams::default(), &bound_pod(name, node, tolerations))
            .await
            .expect("create a pod");
    }
    let cm = ControllerManager::start(
        &api,
        &[
            "--leader-elect=false",
            "--node-monitor-period=1s",
            "--node-monitor-grace-period=3s",
        ],
    );

    // The silent node turns Unknown and gets both unreachable taints.
    let tainted = wait_objects(&nodes, "lifecycle", "the silent node tainted", |m| {
        m.get("silent").is_some_and(|n| {
            let keys = taint_keys(n);
            keys.contains(&"node.kubernetes.io/unreachable:NoExecute".to_owned())
                && keys.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_owned())
        })
    })
    .await;
    let silent = &tainted["silent"];
    let ready = silent
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .cloned()
        .expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("Unknown", Some("NodeStatusUnknown"))
    );
    assert!(
        taint_keys(&tainted["alive"]).is_empty(),
        "{:?}",
        tainted["alive"].spec
    );
    let added = silent
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .and_then(|t| t.iter().find(|t| t.effect == "NoExecute"))
        .and_then(|t| t.time_added.clone())
        .expect("timeAdded on the NoExecute taint");

    // The patient pod goes 3 s after the taint; the one tolerating for ever stays, as
    // does the plain one, which the DefaultTolerationSeconds admission plugin gave 300 s;
    // the pod on the live node is untouched.
    let deleting = |p: &Pod| p.metadata.deletion_timestamp.is_some();
    let evicted = wait_pods(&pods, "evictees", "patient evicted", |m| {
        m.get("patient").is_some_and(deleting)
    })
    .await;
    let plain_seconds = evicted["plain"]
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .and_then(|t| {
            t.iter()
                .find(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable"))
        })
        .and_then(|t| t.toleration_seconds);
    assert_eq!(plain_seconds, Some(300), "{:?}", evicted["plain"].spec);
    let patient_at = evicted["patient"]
        .metadata
        .deletion_timestamp
        .clone()
        .expect("deleted");
    assert!(
        patient_at.0.as_second() >= added.0.as_second() + 3,
        "patient evicted at {patient_at:?}, taint added at {added:?}"
    );
    let disrupted = evicted["patient"]
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "DisruptionTarget"));
    assert!(disrupted, "{:?}", evicted["patient"].status);
    for name in ["plain", "forever", "safe"] {
        assert!(!deleting(&evicted[name]), "{name} was evicted");
    }

    // Cordon and uncordon.
    kubectl(&api, &["cordon", "alive"]);
    wait_objects(&nodes, "lifecycle", "alive cordoned", |m| {
        m.get("alive")
            .is_some_and(|n| taint_keys(n) == ["node.kubernetes.io/unschedulable:NoSchedule"])
    })
    .await;
    kubectl(&api, &["uncordon", "alive"]);
    wait_objects(&nodes, "lifecycle", "alive uncordoned", |m| {
        m.get("alive").is_some_and(|n| taint_keys(n).is_empty())
    })
    .await;
    renewer.abort();
    drop(cm);
}
