//! apps/v1 (upstream `pkg/registry/apps`): deployments, replicasets, daemonsets,
//! statefulsets and controllerrevisions.

mod controller_revisions;
mod daemon_sets;
mod deployments;
mod replica_sets;
mod stateful_sets;

use super::{REPLICAS_SCALE, Registry};

/// Adds the apps/v1 kinds in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(controller_revisions::ControllerRevisions);
    registry.add(daemon_sets::DaemonSets);
    registry.add(deployments::Deployments);
    registry.add(replica_sets::ReplicaSets);
    registry.add(stateful_sets::StatefulSets);
}
