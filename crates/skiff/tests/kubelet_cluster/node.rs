//! The Node and its Lease: the kubelet registers its Node, which becomes Ready with the
//! machine's capacity, its addresses and versions, renews its Lease in
//! `kube-node-lease` and creates its CSINode.

use std::time::Duration;

use serde_json::Value;

use crate::joined::{Joined, tail};

/// How long the Node may take to be Ready.
const READY_WAIT: Duration = Duration::from_secs(30);
/// How long a Lease renewal may take (renewed every 10 s, with jitter).
const RENEW_WAIT: Duration = Duration::from_secs(30);

fn condition<'a>(node: &'a Value, kind: &str) -> &'a Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition in {node:#}"))
}

/// The Node is registered and Ready with the machine's capacity, an InternalIP and the
/// versions; its Lease is held by the node, owned by the Node and renewed.
pub fn node_registers_and_renews_its_lease(joined: &Joined) {
    let name = joined.cluster.node.node_name();

    let node = joined.eventually("the Node to be Ready", READY_WAIT, || {
        let node = joined.get(&["node", &name])?;
        (condition(&node, "Ready")["status"] == "True").then_some(node)
    });
    let ready = condition(&node, "Ready");
    assert_eq!(ready["reason"], "KubeletReady");
    assert_eq!(ready["message"], "kubelet is posting ready status");
    for (kind, reason) in [
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    ] {
        let c = condition(&node, kind);
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some(reason)),
            "{kind}"
        );
    }

    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], name.as_str());
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert!(
        labels["kubernetes.io/arch"]
            .as_str()
            .is_some_and(|a| !a.is_empty())
    );

    // Real capacity: this machine's CPUs and memory, maxPods, and allocatable below it.
    let status = &node["status"];
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let capacity_cpu: usize = status["capacity"]["cpu"].as_str().unwrap().parse().unwrap();
    assert!(
        capacity_cpu >= cpus,
        "cpu capacity {capacity_cpu} < {cpus} CPUs"
    );
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(
        status["capacity"]["memory"],
        format!("{mem_kib}Ki").as_str()
    );
    assert_eq!(status["capacity"]["pods"], "110");
    for resource in ["ephemeral-storage", "memory", "cpu", "pods"] {
        assert!(
            status["allocatable"][resource].is_string(),
            "allocatable {resource}: {status:#}"
        );
    }

    let addresses = status["addresses"].as_array().unwrap();
    let internal = addresses
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .expect("an InternalIP");
    assert!(
        internal["address"]
            .as_str()
            .unwrap()
            .parse::<std::net::IpAddr>()
            .is_ok()
    );
    assert!(
        addresses
            .iter()
            .any(|a| a["type"] == "Hostname" && a["address"] == name.as_str())
    );

    let info = &status["nodeInfo"];
    let server: Value = serde_json::from_str(&joined.kubectl(&["version", "-o", "json"])).unwrap();
    assert_eq!(
        info["kubeletVersion"],
        server["serverVersion"]["gitVersion"]
    );
    assert!(
        info["containerRuntimeVersion"]
            .as_str()
            .unwrap()
            .contains("://"),
        "containerRuntimeVersion: {info:#}"
    );
    assert_eq!(info["operatingSystem"], "linux");
    assert!(!info["bootID"].as_str().unwrap().is_empty());
    assert!(!info["kernelVersion"].as_str().unwrap().is_empty());
    assert_eq!(
        status["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        u64::from(joined.cluster.node.main_port())
    );

    // `kubectl get nodes -o wide` shows it Ready with its address and versions.
    let wide = joined.kubectl(&["get", "nodes", "-o", "wide"]);
    let row = wide
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{wide}"));
    assert!(row.contains(" Ready "), "{wide}");
    assert!(
        row.contains(internal["address"].as_str().unwrap()),
        "{wide}"
    );
    assert!(
        row.contains(info["kubeletVersion"].as_str().unwrap()),
        "{wide}"
    );

    // The kubelet's events on the Node, in `default` as upstream's: it started, and the
    // pressure conditions were set (a Node registered Ready has no `NodeReady` event: as
    // upstream, that is recorded only when Ready changes).
    for reason in [
        "Starting",
        "NodeHasSufficientMemory",
        "NodeHasNoDiskPressure",
        "NodeHasSufficientPID",
    ] {
        joined.eventually(&format!("the Node's {reason} event"), READY_WAIT, || {
            let events = joined.get(&[
                "events",
                "-n",
                "default",
                "--field-selector",
                &format!("involvedObject.kind=Node,involvedObject.name={name},reason={reason}"),
            ])?;
            let event = events["items"].as_array()?.first()?.clone();
            (event["source"]["component"] == "kubelet" && event["type"] == "Normal").then_some(())
        });
    }

    // The Lease: held by the node for 40 s, owned by the Node, renewed.
    let lease_args = ["lease", "-n", "kube-node-lease", name.as_str()];
    let lease = joined.eventually("the node Lease", RENEW_WAIT, || joined.get(&lease_args));
    assert_eq!(lease["spec"]["holderIdentity"], name.as_str());
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
    let owner = &lease["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("Node"), Some(name.as_str()))
    );
    assert_eq!(owner["uid"], node["metadata"]["uid"]);
    let first = lease["spec"]["renewTime"].as_str().unwrap().to_owned();
    joined.eventually("the Lease to be renewed", RENEW_WAIT, || {
        let lease = joined.get(&lease_args)?;
        let renewed = lease["spec"]["renewTime"].as_str()?;
        (renewed > first.as_str()).then_some(())
    });

    // The CSINode: owned by the Node, no drivers, the CSI-migrated in-tree plugins of 1.33.
    let csinode = joined.eventually("the CSINode", READY_WAIT, || {
        joined.get(&["csinode", &name])
    });
    assert_eq!(
        csinode["metadata"]["ownerReferences"],
        serde_json::json!([{
            "apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]
        }])
    );
    assert_eq!(
        csinode["metadata"]["annotations"]["storage.alpha.kubernetes.io/migrated-plugins"],
        "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,\
         kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,\
         kubernetes.io/vsphere-volume"
    );
    assert_eq!(csinode["spec"]["drivers"], serde_json::json!([]));

    // Neither the status updates nor the renewals failed on the way.
    let log = joined.cluster.node.log();
    for failure in [
        "Error updating node status",
        "Unable to update node status",
        "Unable to register node",
        "Failed to update lease",
        "Failed to ensure lease exists",
        "Failed to initialize CSINode",
    ] {
        assert!(!log.contains(failure), "{failure}:\n{}", tail(&log));
    }
}
