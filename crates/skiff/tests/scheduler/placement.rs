//! Placement tables: in each scenario, pods created in order land on the node upstream's
//! kube-scheduler (default profile) would choose, or are reported with its exact
//! `Unschedulable` message.

use serde_json::{Value, json};

use super::cluster::Cluster;

/// Where a pod must end up.
pub enum Expect {
    /// Bound to this node.
    Node(&'static str),
    /// Bound to any node other than these.
    NotOn(&'static [&'static str]),
    /// `PodScheduled=False`, reason `Unschedulable`, with this message.
    Unschedulable(&'static str),
}

/// Creates `pod` (see [`Cluster::pod`]) and checks where it goes; the node it went to.
pub async fn expect(c: &Cluster, pod: Value, expect: Expect) -> String {
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    c.pod(pod).await;
    match expect {
        Expect::Node(node) => {
            let got = c.wait_bound(&name).await;
            assert_eq!(got, node, "pod {name} went to {got}, expected {node}");
            got
        }
        Expect::NotOn(nodes) => {
            let got = c.wait_bound(&name).await;
            assert!(!nodes.contains(&got.as_str()), "pod {name} went to {got}");
            got
        }
        Expect::Unschedulable(message) => {
            c.wait_unschedulable(&name, message).await;
            String::new()
        }
    }
}

/// A pod named `name` requesting `cpu`.
pub fn cpu_pod(name: &str, cpu: &str) -> Value {
    json!({"metadata": {"name": name}, "requests": {"cpu": cpu}})
}

/// NodeResourcesFit (LeastAllocated) and its messages, resolvable and not.
pub async fn resources_fit_and_least_allocated() {
    let c = Cluster::start(&[]).await;
    c.node("small", "2", "8Gi", "10", &[], json!([])).await;
    c.node("large", "4", "8Gi", "10", &[], json!([])).await;
    expect(&c, cpu_pod("big", "3"), Expect::Node("large")).await;
    // LeastAllocated: `small` is the emptier node.
    expect(&c, cpu_pod("one", "1"), Expect::Node("small")).await;
    // 2.5 CPUs exceed `small`'s allocatable (unresolvable) and `large`'s free CPU.
    expect(
        &c,
        cpu_pod("too-big", "2500m"),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: \
             1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
    let msg = c.wait_event("too-big", "FailedScheduling").await;
    assert!(
        msg.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{msg}"
    );
    let scheduled = c.wait_event("big", "Scheduled").await;
    assert_eq!(scheduled, "Successfully assigned default/big to large");
    // Deleting a pod makes room: the pending pod is retried on the AssignedPodDelete event.
    c.delete_pod("big").await;
    assert_eq!(c.wait_bound("too-big").await, "large");
    // kubectl describe shows the scheduler's events.
    let describe = c.kubectl(&["describe", "pod", "too-big"]);
    assert!(describe.contains("FailedScheduling"), "{describe}");
    assert!(describe.contains("default-scheduler"), "{describe}");
}

/// MostAllocated, from a KubeSchedulerConfiguration file.
pub async fn most_allocated_from_config() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("scheduler.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\n\
         kind: KubeSchedulerConfiguration\n\
         profiles:\n\
         - schedulerName: default-scheduler\n\
         \x20 pluginConfig:\n\
         \x20 - name: NodeResourcesFit\n\
         \x20   args:\n\
         \x20     scoringStrategy:\n\
         \x20       type: MostAllocated\n\
         \x20       resources:\n\
         \x20       - {name: cpu, weight: 1}\n\
         \x20       - {name: memory, weight: 1}\n\
         \x20 plugins:\n\
         \x20   score:\n\
         \x20     disabled:\n\
         \x20     - name: NodeResourcesBalancedAllocation\n",
    )
    .expect("write the scheduler config");
    let path = config.display().to_string();
    let c = Cluster::start(&["--config", &path]).await;
    c.node("a", "4", "8Gi", "10", &[], json!([])).await;
    c.node("b", "4", "8Gi", "10", &[], json!([])).await;
    let first = expect(&c, cpu_pod("first", "2"), Expect::NotOn(&[])).await;
    let second = c.pod(cpu_pod("second", "1")).await;
    let name = second.metadata.name.unwrap_or_default();
    assert_eq!(c.wait_bound(&name).await, first, "MostAllocated packs pods");
}

/// TaintToleration with the three effects, and `kubectl taint` taking effect.
pub async fn taints_and_tolerations() {
    let c = Cluster::start(&[]).await;
    c.node(
        "cp",
        "4",
        "8Gi",
        "10",
        &[],
        json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
    )
    .await;
    c.node(
        "w1",
        "4",
        "8Gi",
        "10",
        &[],
        json!([{"key": "foo", "value": "bar", "effect": "NoExecute"}]),
    )
    .await;
    expect(
        &c,
        json!({"metadata": {"name": "plain"}}),
        Expect::Unschedulable(
            "0/2 nodes are available: 1 node(s) had untolerated taint {foo: bar}, 1 node(s) had \
             untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/2 nodes \
             are available: 2 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
    let tolerant = json!({"metadata": {"name": "tolerant"}, "spec": {"tolerations": [
        {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoExecute"}]}});
    expect(&c, tolerant, Expect::Node("w1")).await;
    // PreferNoSchedule only lowers the score.
    c.node(
        "w2",
        "4",
        "8Gi",
        "10",
        &[],
        json!([{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
    )
    .await;
    let everything = json!({"metadata": {"name": "everything"}, "spec": {"tolerations": [
        {"operator": "Exists", "effect": "NoExecute"}]}});
    // w1 already runs a pod, w2 is empty but has an intolerable PreferNoSchedule taint
    // (TaintToleration weighs 3): `plain` is still pending, so it goes to w2 first.
    assert_eq!(c.wait_bound("plain").await, "w2");
    expect(&c, everything, Expect::NotOn(&["cp"])).await;
    // `kubectl taint --all key-` removes the control-plane taint where it is.
    let out = c.api.kubectl(
        33,
        &[
            "taint",
            "nodes",
            "--all",
            "node-role.kubernetes.io/control-plane-",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("node/cp untainted"), "{text}");
    c.kubectl(&["taint", "nodes", "w1", "w2", "busy=yes:NoSchedule"]);
    expect(
        &c,
        json!({"metadata": {"name": "after"}}),
        Expect::Node("cp"),
    )
    .await;
}

/// NodeAffinity: nodeSelector, required and preferred terms.
pub async fn node_affinity() {
    let c = Cluster::start(&[]).await;
    c.node(
        "a",
        "4",
        "8Gi",
        "10",
        &[("zone", "z1"), ("disk", "ssd")],
        json!([]),
    )
    .await;
    c.node("b", "4", "8Gi", "10", &[("zone", "z2")], json!([]))
        .await;
    let selector = json!({"metadata": {"name": "ssd"}, "spec": {"nodeSelector": {"disk": "ssd"}}});
    expect(&c, selector, Expect::Node("a")).await;
    let required = json!({"metadata": {"name": "z1"}, "spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}});
    expect(&c, required, Expect::Node("a")).await;
    let preferred = json!({"metadata": {"name": "pref"}, "spec": {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference":
            {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]}}}});
    // `a` runs two pods already; the preference (weight 2 × 100) still wins.
    expect(&c, preferred, Expect::Node("a")).await;
    let none = json!({"metadata": {"name": "hdd"}, "spec": {"nodeSelector": {"disk": "hdd"}}});
    expect(
        &c,
        none,
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. \
             preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
    // Labelling a node (UpdateNodeLabel) makes the pending pod schedulable.
    c.kubectl(&["label", "node", "b", "disk=hdd"]);
    assert_eq!(c.wait_bound("hdd").await, "b");
}

/// NodePorts and NodeUnschedulable (cordon).
pub async fn host_ports_and_cordon() {
    let c = Cluster::start(&[]).await;
    c.node("a", "4", "8Gi", "10", &[], json!([])).await;
    c.node("b", "4", "8Gi", "10", &[], json!([])).await;
    let port = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c",
            "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}})
    };
    let first = expect(&c, port("p1"), Expect::NotOn(&[])).await;
    let other = if first == "a" { "b" } else { "a" };
    let second = c.pod(port("p2")).await;
    assert_eq!(
        c.wait_bound(second.metadata.name.as_deref().unwrap_or_default())
            .await,
        other
    );
    expect(
        &c,
        port("p3"),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod \
             ports. preemption: 0/2 nodes are available: 2 No preemption victims found for \
             incoming pod.",
        ),
    )
    .await;
    c.kubectl(&["cordon", "a", "b"]);
    expect(
        &c,
        json!({"metadata": {"name": "cordoned"}}),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are \
             available: 2 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
    c.kubectl(&["uncordon", "b"]);
    assert_eq!(c.wait_bound("cordoned").await, "b");
}

/// ImageLocality: the node that has the image wins a tie.
pub async fn image_locality() {
    let c = Cluster::start(&[]).await;
    let images =
        json!({"images": [{"names": ["example.com/big:1"], "sizeBytes": 800_000_000_i64}]});
    c.node("plain", "4", "8Gi", "10", &[], json!([])).await;
    c.node_with("cached", "4", "8Gi", "10", &[], json!([]), images)
        .await;
    // The scheduler watches nodes and pods on separate streams: a pod created now could be
    // scheduled before the status with the images arrives. One pinned pod per node, bound
    // through the scheduler, shows that it has seen both nodes' statuses (and loads both
    // nodes alike).
    for node in ["plain", "cached"] {
        let pin = json!({"metadata": {"name": format!("pin-{node}")},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}}});
        expect(&c, pin, Expect::Node(node)).await;
    }
    let pod = json!({"metadata": {"name": "big"}, "spec": {"containers": [
        {"name": "c", "image": "example.com/big:1"}]}});
    expect(&c, pod, Expect::Node("cached")).await;
}

/// InterPodAffinity: required affinity and anti-affinity.
pub async fn inter_pod_affinity() {
    let c = Cluster::start(&[]).await;
    c.node(
        "a",
        "4",
        "8Gi",
        "10",
        &[("topology.kubernetes.io/zone", "z1")],
        json!([]),
    )
    .await;
    c.node(
        "b",
        "4",
        "8Gi",
        "10",
        &[("topology.kubernetes.io/zone", "z2")],
        json!([]),
    )
    .await;
    let db = json!({"metadata": {"name": "db", "labels": {"app": "db"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "a"}}});
    expect(&c, db, Expect::Node("a")).await;
    let term = |app: &str, key: &str| json!([{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]);
    let web = json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("db", "kubernetes.io/hostname")}}}});
    expect(&c, web, Expect::Node("a")).await;
    let cache = json!({"metadata": {"name": "cache", "labels": {"app": "cache"}}, "spec": {"affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("db", "topology.kubernetes.io/zone")}}}});
    expect(&c, cache, Expect::Node("b")).await;
    let lonely = json!({"metadata": {"name": "lonely"}, "spec": {"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("missing", "kubernetes.io/hostname")}}}});
    expect(
        &c,
        lonely,
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match pod affinity rules. preemption: \
             0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
    // `cache` repels pods of app=db from zone z2, and `db` is in z1's only node with its
    // anti-affinity partner: a second db pod must avoid z2.
    let db2 = json!({"metadata": {"name": "db2", "labels": {"app": "db"}}});
    expect(&c, db2, Expect::Node("a")).await;
}

/// PodTopologySpread: maxSkew over zones, and a missing topology key.
pub async fn topology_spread() {
    let c = Cluster::start(&[]).await;
    c.node(
        "a",
        "4",
        "8Gi",
        "10",
        &[("topology.kubernetes.io/zone", "z1")],
        json!([]),
    )
    .await;
    c.node(
        "b",
        "4",
        "8Gi",
        "10",
        &[("topology.kubernetes.io/zone", "z2")],
        json!([]),
    )
    .await;
    let spread = |name: &str, key: &str| {
        json!({"metadata": {"name": name, "labels": {"app": "s"}}, "spec": {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "s"}}}]}})
    };
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..4 {
        let node = expect(
            &c,
            spread(&format!("s{i}"), "topology.kubernetes.io/zone"),
            Expect::NotOn(&[]),
        )
        .await;
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node, [("a".to_owned(), 2), ("b".to_owned(), 2)].into());
    expect(
        &c,
        spread("rack", "rack"),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints \
             (missing required label). preemption: 0/2 nodes are available: 2 Preemption is \
             not helpful for scheduling.",
        ),
    )
    .await;
}

/// SchedulingGates, and `schedulerName` of another scheduler.
pub async fn gates_and_other_schedulers() {
    let c = Cluster::start(&[]).await;
    c.node("a", "4", "8Gi", "10", &[], json!([])).await;
    let gated = json!({"metadata": {"name": "gated"}, "spec": {"schedulingGates": [{"name": "example.com/wait"}]}});
    c.pod(gated).await;
    c.pod(json!({"metadata": {"name": "elsewhere"}, "spec": {"schedulerName": "other-scheduler"}}))
        .await;
    // A pod created after both is bound: the two before it were seen and left alone.
    expect(
        &c,
        json!({"metadata": {"name": "after"}}),
        Expect::Node("a"),
    )
    .await;
    let placements = c.placements().await;
    assert_eq!(placements["gated"], "");
    assert_eq!(placements["elsewhere"], "");
    let elsewhere = c.pods().get("elsewhere").await.expect("get the pod");
    assert!(
        elsewhere
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .is_empty(),
        "a pod of another scheduler got conditions"
    );
    assert!(c.events_of("elsewhere").await.is_empty());
    c.kubectl(&[
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
    ]);
    assert_eq!(c.wait_bound("gated").await, "a");
}
