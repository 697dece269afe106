//! Pods from the API server: a pod bound to the node runs, its status reaches the API,
//! `kubectl delete` stops it with its grace period and the kubelet removes it; a static
//! pod has a mirror pod, which kubectl can delete without stopping the static pod.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{find_pod, http_get};
use crate::joined::Joined;

/// How long a pod may take to start or go.
const WAIT: Duration = Duration::from_secs(90);

fn condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// A pod created with kubectl and bound to the node runs, serves HTTP on its IP, and its
/// status reaches the API server; `kubectl delete` waits for the kubelet, which stops it
/// and removes it.
pub fn api_pod_runs_and_is_deleted(joined: &Joined) {
    let node = joined.node_name();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "httpd",
                "image": joined.cluster.image,
                "command": ["sh", "-c", "mkdir -p /srv && echo hello-api > /srv/index.html && exec httpd -f -p 8080 -h /srv"],
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
            }],
        },
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    let running = joined.eventually("web Running and Ready in the API", WAIT, || {
        joined.get(&["pod", "web"]).filter(|p| {
            p["status"]["phase"] == "Running" && condition(p, "Ready")["status"] == "True"
        })
    });
    let ip = running["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!ip.is_empty(), "{running}");
    assert_eq!(
        running["status"]["hostIP"].as_str().map(str::is_empty),
        Some(false)
    );
    assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
    assert_eq!(condition(&running, "PodScheduled")["status"], "True");
    assert_eq!(http_get(&ip, 8080, "/index.html").trim(), "hello-api");
    // The kubelet runs it as a pod from the API source.
    let kubelet_pods = joined.cluster.wait_for("web on the kubelet", WAIT, |pods| {
        find_pod(pods, "web").is_some()
    });
    let on_kubelet = find_pod(&kubelet_pods, "web").cloned().unwrap_or_default();
    assert_eq!(
        on_kubelet["metadata"]["annotations"]["kubernetes.io/config.source"],
        "api"
    );

    // `kubectl delete` returns once the kubelet stopped the pod and deleted it.
    let started = Instant::now();
    joined.kubectl(&["delete", "pod", "web", "--timeout=60s"]);
    assert!(
        joined.get(&["pod", "web"]).is_none(),
        "web is still in the API"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "deleting took {:?}",
        started.elapsed()
    );
    joined.cluster.wait_gone("web");
}

/// A static pod has a mirror pod with the static pod's status; deleting the mirror pod
/// does not stop the static pod and the mirror comes back; removing the manifest removes
/// the mirror pod.
pub fn static_pod_has_a_mirror_pod(joined: &Joined) {
    let cluster = &joined.cluster;
    cluster.write_manifest(
        "mirrored.yaml",
        &crate::common::sleep_pod("mirrored", &cluster.image, "1"),
    );
    let name = cluster.static_name("mirrored");
    let mirror = joined.eventually("the mirror pod Running", WAIT, || {
        joined
            .get(&["pod", &name])
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let annotations = &mirror["metadata"]["annotations"];
    assert!(
        annotations["kubernetes.io/config.mirror"].is_string(),
        "{mirror}"
    );
    assert_eq!(mirror["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(mirror["spec"]["nodeName"], joined.node_name().as_str());
    let container =
        cluster.wait_running(&name)["status"]["containerStatuses"][0]["containerID"].clone();

    joined.kubectl(&["delete", "pod", &name, "--wait=false"]);
    let old_uid = mirror["metadata"]["uid"].clone();
    joined.eventually("a new mirror pod", WAIT, || {
        joined.get(&["pod", &name]).filter(|p| {
            p["metadata"]["uid"] != old_uid && p["metadata"]["deletionTimestamp"].is_null()
        })
    });
    let still = cluster.wait_running(&name);
    assert_eq!(
        still["status"]["containerStatuses"][0]["containerID"],
        container
    );
    assert_eq!(still["status"]["containerStatuses"][0]["restartCount"], 0);

    cluster.remove_manifest("mirrored.yaml");
    joined.eventually("the mirror pod gone", WAIT, || {
        joined.get(&["pod", &name]).is_none().then_some(())
    });
    cluster.wait_gone(&name);
}
