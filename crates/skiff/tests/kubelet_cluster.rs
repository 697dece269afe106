//! End-to-end: `skiff kubelet --kubeconfig` in a cluster with `skiff apiserver`, checked with
//! kubectl 1.33. One API server and one kubelet ([`joined`]) serve every step, in order:
//! [`node`] (registration, node status, the node Lease), then [`pods`] (pods from the
//! API, their status and deletion, mirror pods). Run as root.

mod common;
#[path = "kubelet_cluster/joined.rs"]
mod joined;
#[path = "kubelet_cluster/node.rs"]
mod node;
#[path = "kubelet_cluster/pods.rs"]
mod pods;

#[test]
fn kubelet_in_a_cluster() {
    let joined = joined::Joined::start();
    node::node_registers_and_renews_its_lease(&joined);
    pods::api_pod_runs_and_is_deleted(&joined);
    pods::static_pod_has_a_mirror_pod(&joined);
}
