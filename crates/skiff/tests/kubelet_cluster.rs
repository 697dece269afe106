//! End-to-end: `skiff kubelet --kubeconfig` in a cluster with `skiff apiserver`, checked with
//! kubectl 1.33. One API server and one kubelet ([`joined`]) serve every step, in order:
//! [`node`] (registration, node status, the node Lease), then [`pods`] (pods from the
//! API, their status and deletion, mirror pods), then [`config_objects`] (ConfigMap,
//! Secret and projected volumes, environment from the API), then [`service_account`] (the
//! admission's token volume authenticates), then [`kubelet_api`] (authentication
//! and authorization of the kubelet port; kubectl logs, exec, cp, port-forward and
//! attach), then [`resilience`] (pods the node refuses, an API server outage, a SIGKILLed
//! kubelet). [`faulty_api`] runs beside it: a kubelet whose API server answers errors and
//! garbage. Run as root.

mod common;
#[path = "kubelet_cluster/config_objects.rs"]
mod config_objects;
#[path = "kubelet_cluster/faulty_api.rs"]
mod faulty_api;
#[path = "kubelet_cluster/joined.rs"]
mod joined;
#[path = "kubelet_cluster/kubelet_api.rs"]
mod kubelet_api;
#[path = "kubelet_cluster/node.rs"]
mod node;
#[path = "kubelet_cluster/pods.rs"]
mod pods;
#[path = "kubelet_cluster/resilience.rs"]
mod resilience;
#[path = "kubelet_cluster/service_account.rs"]
mod service_account;

#[test]
fn kubelet_in_a_cluster() {
    let mut joined = joined::Joined::start();
    node::node_registers_and_renews_its_lease(&joined);
    pods::api_pod_runs_and_is_deleted(&joined);
    pods::static_pod_has_a_mirror_pod(&joined);
    config_objects::volumes_and_env_come_from_the_api(&joined);
    config_objects::missing_config_map_keys_keep_pods_waiting(&joined);
    config_objects::secret_too_large_for_its_volume_is_refused(&joined);
    config_objects::claim_of_a_host_path_volume_is_mounted(&joined);
    service_account::automounted_token_authenticates(&joined);
    kubelet_api::main_port_authenticates_and_authorizes(&joined);
    kubelet_api::kubectl_streams_through_the_api_server(&joined);
    resilience::pods_the_node_refuses_fail_with_upstream_reasons(&joined);
    resilience::api_server_outage_restarts_nothing(&mut joined);
    resilience::kubelet_sigkill_restarts_nothing(&mut joined);
}
