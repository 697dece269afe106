//! End-to-end: `skiff scheduler` against `skiff apiserver` (SQLite), with fake Nodes
//! (nothing runs their pods). Each scenario gets its own API server and scheduler, as
//! Nodes are cluster-wide: [`placement`] (pods land where upstream's default profile
//! puts them, or get its exact Unschedulable message), [`preemption`] (DefaultPreemption
//! with a PodDisruptionBudget; the volume plugins: VolumeBinding with a local
//! PersistentVolume, VolumeZone, NodeVolumeLimits, VolumeRestrictions) and
//! [`resilience`] (SIGKILL amid 500 pods, leader election, bad input).

#[path = "scheduler/cluster.rs"]
mod cluster;
#[path = "scheduler/placement.rs"]
mod placement;
#[path = "scheduler/preemption.rs"]
mod preemption;
#[path = "scheduler/resilience.rs"]
mod resilience;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_fit_and_least_allocated() {
    placement::resources_fit_and_least_allocated().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_allocated_from_config() {
    placement::most_allocated_from_config().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_and_tolerations() {
    placement::taints_and_tolerations().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_affinity() {
    placement::node_affinity().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_ports_and_cordon() {
    placement::host_ports_and_cordon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_locality() {
    placement::image_locality().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inter_pod_affinity() {
    placement::inter_pod_affinity().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_spread() {
    placement::topology_spread().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_and_other_schedulers() {
    placement::gates_and_other_schedulers().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_respects_pdbs() {
    preemption::preemption_respects_pdbs().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_volume_binding() {
    preemption::local_volume_binding().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_zones_limits_and_restrictions() {
    preemption::volume_zones_limits_and_restrictions().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_amid_500_pods() {
    resilience::sigkill_amid_500_pods().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_fails_over() {
    resilience::leader_election_fails_over().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_does_not_stop_the_scheduler() {
    resilience::bad_input_does_not_stop_the_scheduler().await;
}
