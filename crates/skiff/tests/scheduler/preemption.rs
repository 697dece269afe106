//! DefaultPreemption with a PodDisruptionBudget, and VolumeBinding with a local
//! PersistentVolume bound when the pod's node is chosen (WaitForFirstConsumer).

use futures::TryStreamExt as _;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event as WatchEvent};
use serde_json::json;

use super::cluster::{Cluster, WAIT};
use super::placement::{Expect, expect};

/// A high-priority pod preempts on the node where no PodDisruptionBudget is violated.
pub async fn preemption_respects_pdbs() {
    let c = Cluster::start(&[]).await;
    for (name, value) in [("low", 10), ("high", 1000)] {
        c.kubectl_create(
            &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}),
        );
    }
    c.node("a", "2", "8Gi", "10", &[], json!([])).await;
    c.node("b", "2", "8Gi", "10", &[], json!([])).await;
    // Every pod on `a` is protected by a budget that allows no disruption.
    c.kubectl_create(
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "protect-a", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "a"}}}}),
    );
    for node in ["a", "b"] {
        for i in 1..=2 {
            let pod = json!({"metadata": {"name": format!("{node}{i}"), "labels": {"app": node}},
                "spec": {"priorityClassName": "low", "terminationGracePeriodSeconds": 0,
                         "nodeSelector": {"kubernetes.io/hostname": node}},
                "requests": {"cpu": "1"}});
            let name = format!("{node}{i}");
            c.pod(pod).await;
            assert_eq!(c.wait_bound(&name).await, node);
        }
    }
    let high = json!({"metadata": {"name": "urgent"},
        "spec": {"priorityClassName": "high"}, "requests": {"cpu": "1"}});
    expect(&c, high, Expect::Node("b")).await;
    let placements = c.placements().await;
    let left_on_b: Vec<&String> = placements
        .iter()
        .filter(|(name, node)| *node == "b" && name.starts_with('b'))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        left_on_b.len(),
        1,
        "exactly one victim on b: {placements:?}"
    );
    assert_eq!(placements.get("a1").map(String::as_str), Some("a"));
    assert_eq!(placements.get("a2").map(String::as_str), Some("a"));
    let victim = if left_on_b[0] == "b1" { "b2" } else { "b1" };
    let note = c.wait_event(victim, "Preempted").await;
    assert!(note.starts_with("Preempted by pod "), "{note}");
    assert!(note.ends_with(" on node b"), "{note}");
    let urgent = c.pods().get("urgent").await.expect("get the preemptor");
    assert_eq!(
        urgent.status.and_then(|s| s.nominated_node_name).as_deref(),
        Some("b"),
        "the preemptor was nominated to b"
    );
    // Upstream's preemption metrics: attempts counted, one victim per chosen node.
    let (_, metrics) = c.sched.get("/metrics").expect("GET /metrics");
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{metrics}"))
    };
    assert!(value("scheduler_preemption_attempts_total") >= 1.0);
    let victims = value("scheduler_preemption_victims_count");
    assert!(victims >= 1.0, "no preemption observed");
    assert_eq!(value("scheduler_preemption_victims_sum"), victims);
}

/// VolumeBinding: a WaitForFirstConsumer claim is matched with the local volume of the
/// node the pod can go to; a missing claim is reported.
pub async fn local_volume_binding() {
    let c = Cluster::start(&[]).await;
    c.node("a", "4", "8Gi", "10", &[], json!([])).await;
    c.node("b", "4", "8Gi", "10", &[], json!([])).await;
    c.kubectl_create(
        &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    c.kubectl_create(&json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "disk-b"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local", "local": {"path": "/mnt/disk"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": ["b"]}]}]}}}}));
    // No PV controller runs yet: this test makes the volume Available, as it would.
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    pvs.patch_status(
        "disk-b",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Available"}})),
    )
    .await
    .expect("make the volume Available");
    c.kubectl_create(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "resources": {"requests": {"storage": "500Mi"}}}}));
    // No PV controller runs yet: this test completes the binding the scheduler starts.
    let controller = tokio::spawn(complete_pv_binding(c.client.clone(), "disk-b", "data"));
    let pod = json!({"metadata": {"name": "db"}, "spec": {"volumes": [
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}});
    expect(&c, pod, Expect::Node("b")).await;
    controller.await.expect("the binding completer");
    let missing = json!({"metadata": {"name": "orphan"}, "spec": {"volumes": [
        {"name": "d", "persistentVolumeClaim": {"claimName": "nope"}}]}});
    expect(
        &c,
        missing,
        Expect::Unschedulable(
            "0/2 nodes are available: persistentvolumeclaim \"nope\" not found. preemption: \
             0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        ),
    )
    .await;
}

/// Plays the PV controller's part: once the scheduler set `pv`'s claimRef to `claim`,
/// binds the claim to it.
async fn complete_pv_binding(client: kube::Client, pv: &str, claim: &str) {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let config = watcher::Config::default().fields(&format!("metadata.name={pv}"));
    let stream = watcher::watcher(pvs.clone(), config);
    futures::pin_mut!(stream);
    let claimed = tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.try_next().await.expect("watch the PV") {
            if let WatchEvent::Apply(v) | WatchEvent::InitApply(v) = event {
                let claim_ref = v.spec.and_then(|s| s.claim_ref);
                if claim_ref.and_then(|r| r.name).as_deref() == Some(claim) {
                    return true;
                }
            }
        }
        false
    })
    .await;
    assert_eq!(
        claimed.ok(),
        Some(true),
        "the scheduler never set {pv}'s claimRef"
    );
    let params = PatchParams::default();
    pvcs.patch(
        claim,
        &params,
        &Patch::Merge(json!({"spec": {"volumeName": pv},
        "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}})),
    )
    .await
    .expect("set the claim's volumeName");
    pvcs.patch_status(
        claim,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound",
        "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}})),
    )
    .await
    .expect("mark the claim Bound");
    pvs.patch_status(
        pv,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("mark the volume Bound");
}

/// A PersistentVolume bound to the claim `claim` (the PV controller's work, done here:
/// no PV controller runs yet): `spec` is the PV's source and extra spec fields.
async fn bound_volume(
    c: &Cluster,
    pv: &str,
    claim: &str,
    access: &str,
    labels: serde_json::Value,
    spec: serde_json::Value,
) {
    let mut pv_spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": [access],
        "storageClassName": "manual",
        "claimRef": {"namespace": "default", "name": claim}});
    if let (Some(s), Some(extra)) = (pv_spec.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    c.kubectl_create(&json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "labels": labels}, "spec": pv_spec}));
    c.kubectl_create(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": "default",
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": [access], "storageClassName": "manual", "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}}));
    let params = PatchParams::default();
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    pvs.patch_status(
        pv,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("mark the volume Bound");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), "default");
    pvcs.patch_status(
        claim,
        &params,
        &Patch::Merge(json!({"status": {"phase": "Bound",
        "accessModes": [access], "capacity": {"storage": "1Gi"}}})),
    )
    .await
    .expect("mark the claim Bound");
}

fn claim_pod(name: &str, claim: &str) -> serde_json::Value {
    json!({"metadata": {"name": name}, "spec": {"volumes": [
        {"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}})
}

/// VolumeZone, NodeVolumeLimits (CSINode allocatable counts) and VolumeRestrictions
/// (ReadWriteOncePod).
pub async fn volume_zones_limits_and_restrictions() {
    let c = Cluster::start(&[]).await;
    for (node, zone) in [("a", "z1"), ("b", "z2")] {
        c.node(
            node,
            "4",
            "8Gi",
            "10",
            &[("topology.kubernetes.io/zone", zone)],
            json!([]),
        )
        .await;
        c.kubectl_create(
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": node},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": node,
                                  "allocatable": {"count": 1}}]}}),
        );
    }
    // VolumeZone: a volume labelled with zone z2 only fits node b.
    bound_volume(
        &c,
        "zoned",
        "zoned-claim",
        "ReadWriteOnce",
        json!({"topology.kubernetes.io/zone": "z2"}),
        json!({"hostPath": {"path": "/tmp/zoned"}}),
    )
    .await;
    expect(&c, claim_pod("zoned-pod", "zoned-claim"), Expect::Node("b")).await;
    // NodeVolumeLimits: one CSI volume per node.
    for i in 1..=3 {
        bound_volume(
            &c,
            &format!("csi-{i}"),
            &format!("c{i}"),
            "ReadWriteOnce",
            json!({}),
            json!({"csi": {"driver": "csi.example.com", "volumeHandle": format!("h{i}")}}),
        )
        .await;
    }
    let first = expect(&c, claim_pod("csi-pod-1", "c1"), Expect::NotOn(&[])).await;
    let other = if first == "a" { "b" } else { "a" };
    expect(&c, claim_pod("csi-pod-2", "c2"), Expect::Node(other)).await;
    expect(
        &c,
        claim_pod("csi-pod-3", "c3"),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node(s) exceed max volume count. preemption: 0/2 \
             nodes are available: 2 No preemption victims found for incoming pod.",
        ),
    )
    .await;
    // VolumeRestrictions: a ReadWriteOncePod claim serves one pod.
    bound_volume(
        &c,
        "single",
        "single-claim",
        "ReadWriteOncePod",
        json!({}),
        json!({"hostPath": {"path": "/tmp/single"}}),
    )
    .await;
    expect(&c, claim_pod("owner", "single-claim"), Expect::NotOn(&[])).await;
    expect(
        &c,
        claim_pod("second", "single-claim"),
        Expect::Unschedulable(
            "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same \
             name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 No \
             preemption victims found for incoming pod.",
        ),
    )
    .await;
}
