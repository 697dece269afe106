//! What the informers do with each change (upstream `pkg/scheduler/eventhandlers.go`):
//! assigned pods and nodes go to the cache, pending pods of this scheduler's profiles to
//! the queue, everything else to the listers; every change that may make pending pods
//! schedulable is passed to the queue as a [`ClusterEvent`].

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::Api;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::cache::Cache;
use crate::backend::queue::SchedulingQueue;
use crate::framework::interface::{ActionType, ClusterEvent, EventObject, EventResource};
use crate::framework::types::pod_node_name;
use crate::informers::Listers;
use skiff_client::cache::Store;
use skiff_client::cache::{Delta, object_key, reflector};

/// The scheduler name of a pod (`spec.schedulerName`, `default-scheduler` when unset).
pub fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or("default-scheduler")
}

/// True for a pod that is Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn assigned(pod: &Pod) -> bool {
    !pod_node_name(pod).is_empty()
}

/// The events an update of a node stands for (upstream `nodeSchedulingPropertiesChange`).
pub fn node_scheduling_properties_change(old: &Node, new: &Node) -> Vec<ClusterEvent> {
    let event = |action, label| ClusterEvent {
        resource: EventResource::Node,
        action,
        label,
    };
    let mut out = Vec::new();
    let unschedulable = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    };
    if unschedulable(old) != unschedulable(new) {
        out.push(event(
            ActionType::UPDATE_NODE_TAINT,
            "NodeSpecUnschedulableChange",
        ));
    }
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    if allocatable(old) != allocatable(new) {
        out.push(event(
            ActionType::UPDATE_NODE_ALLOCATABLE,
            "NodeAllocatableChange",
        ));
    }
    if old.metadata.labels != new.metadata.labels {
        out.push(event(ActionType::UPDATE_NODE_LABEL, "NodeLabelChange"));
    }
    let taints = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
    };
    if taints(old) != taints(new) {
        out.push(event(ActionType::UPDATE_NODE_TAINT, "NodeTaintChange"));
    }
    let conditions = |n: &Node| -> BTreeSet<(String, String)> {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    };
    if conditions(old) != conditions(new) {
        out.push(event(
            ActionType::UPDATE_NODE_CONDITION,
            "NodeConditionChange",
        ));
    }
    if old.metadata.annotations != new.metadata.annotations {
        out.push(event(
            ActionType::UPDATE_NODE_ANNOTATION,
            "NodeAnnotationChange",
        ));
    }
    out
}

/// A node was added (upstream `EventNodeAdd`).
pub const NODE_ADD: ClusterEvent = ClusterEvent {
    resource: EventResource::Node,
    action: ActionType::ADD,
    label: "NodeAdd",
};

/// The objects the handlers write to.
#[derive(Clone)]
pub struct Handlers {
    /// Nodes and assigned pods.
    pub cache: Arc<Cache>,
    /// Pending pods.
    pub queue: Arc<SchedulingQueue>,
    /// The other kinds.
    pub listers: Arc<Listers>,
    /// Every non-terminal pod, by `namespace/name`, as last seen.
    pub pods: Arc<Store<Pod>>,
    /// The schedulerNames of this scheduler's profiles.
    pub scheduler_names: Arc<BTreeSet<String>>,
}

impl Handlers {
    fn responsible(&self, pod: &Pod) -> bool {
        self.scheduler_names.contains(scheduler_name(pod))
    }

    /// A pod's change (upstream `addPodToCache`, `addPodToSchedulingQueue` and their
    /// update and delete counterparts).
    pub fn on_pod(&self, delta: Delta<Pod>) {
        match delta {
            Delta::Added(pod) => {
                if is_terminal(&pod) {
                    return;
                }
                self.pods.insert(object_key(pod.as_ref()), Arc::clone(&pod));
                self.add_pod(pod);
            }
            Delta::Updated(old, new) => {
                if is_terminal(&new) {
                    self.pods.remove(&object_key(new.as_ref()));
                    self.delete_pod(&old);
                    return;
                }
                self.pods.insert(object_key(new.as_ref()), Arc::clone(&new));
                match (assigned(&old), assigned(&new)) {
                    (true, true) => {
                        if let Err(e) = self.cache.update_pod(&old, Arc::clone(&new)) {
                            tracing::error!(error = %e, "updating a pod in the scheduler cache");
                        }
                        for event in
                            crate::backend::queue::pod_scheduling_properties_change(&old, &new)
                        {
                            self.queue.assigned_pod_updated(&old, &new, event);
                        }
                    }
                    (false, true) => {
                        if self.responsible(&old) {
                            self.queue.delete(&old);
                        }
                        self.add_pod(new);
                    }
                    (false, false) => {
                        if self.responsible(&new) {
                            self.queue.update(&old, new);
                        }
                    }
                    // spec.nodeName cannot be unset; treat it as a new pod.
                    (true, false) => {
                        self.delete_pod(&old);
                        self.add_pod(new);
                    }
                }
            }
            Delta::Deleted(pod) => {
                self.pods.remove(&object_key(pod.as_ref()));
                self.delete_pod(&pod);
            }
        }
    }

    fn add_pod(&self, pod: Arc<Pod>) {
        if assigned(&pod) {
            if let Err(e) = self.cache.add_pod(Arc::clone(&pod)) {
                tracing::error!(error = %e, "adding a pod to the scheduler cache");
            }
            self.queue.assigned_pod_added(&pod);
        } else if self.responsible(&pod) {
            self.queue.add(pod);
        } else {
            tracing::info!(
                pod = %object_key(pod.as_ref()),
                scheduler_name = scheduler_name(&pod),
                "pod is for another scheduler; leaving it"
            );
        }
    }

    fn delete_pod(&self, pod: &Pod) {
        if assigned(pod) {
            if let Err(e) = self.cache.remove_pod(pod) {
                tracing::debug!(error = %e, "removing a pod from the scheduler cache");
            }
            self.queue.assigned_pod_deleted(pod);
        } else if self.responsible(pod) {
            self.queue.delete(pod);
        }
    }

    /// A node's change (upstream `addNodeToCache`, `updateNodeInCache`,
    /// `deleteNodeFromCache`).
    pub fn on_node(&self, delta: Delta<Node>) {
        match delta {
            Delta::Added(node) => {
                self.cache.add_node(Arc::clone(&node));
                self.queue.move_all_to_active_or_backoff_queue(
                    NODE_ADD,
                    EventObject::None,
                    EventObject::Node(&node),
                );
            }
            Delta::Updated(old, new) => {
                self.cache.update_node(&old, Arc::clone(&new));
                for event in node_scheduling_properties_change(&old, &new) {
                    self.queue.move_all_to_active_or_backoff_queue(
                        event,
                        EventObject::Node(&old),
                        EventObject::Node(&new),
                    );
                }
            }
            Delta::Deleted(node) => {
                if let Err(e) = self.cache.remove_node(&node) {
                    tracing::debug!(error = %e, "removing a node from the scheduler cache");
                }
            }
        }
    }

    /// A change of a kind kept in a lister: stored, and passed to the queue as an event
    /// of `resource` when `resource` is given.
    fn on_other<K: Send + Sync + 'static>(
        &self,
        store: &Store<K>,
        resource: Option<EventResource>,
        delta: Delta<K>,
        key: impl Fn(&K) -> String,
    ) {
        let (action, label) = match &delta {
            Delta::Added(o) => {
                store.insert(key(o), Arc::clone(o));
                (ActionType::ADD, "Add")
            }
            Delta::Updated(_, n) => {
                store.insert(key(n), Arc::clone(n));
                (ActionType::UPDATE_OTHER, "Update")
            }
            Delta::Deleted(o) => {
                store.remove(&key(o));
                (ActionType::DELETE, "Delete")
            }
        };
        if let Some(resource) = resource {
            self.queue.move_all_to_active_or_backoff_queue(
                ClusterEvent {
                    resource,
                    action,
                    label,
                },
                EventObject::Other,
                EventObject::Other,
            );
        }
    }
}

/// Starts one informer per kind the scheduler reads, feeding `handlers`; the returned
/// future resolves once every informer has listed once. The informers stop at `cancel`.
pub fn start_informers(
    client: &kube::Client,
    handlers: &Handlers,
    cancel: &CancellationToken,
) -> impl Future<Output = ()> + use<> {
    let (synced_tx, mut synced_rx) = mpsc::unbounded_channel::<&'static str>();
    let mut kinds = 0usize;
    let mut spawn = |fut: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>| {
        kinds += 1;
        tokio::spawn(fut);
    };
    let pods_config = watcher::Config::default()
        .fields("status.phase!=Succeeded,status.phase!=Failed")
        .any_semantic();
    {
        let h = handlers.clone();
        let tx = synced_tx.clone();
        spawn(Box::pin(reflector::run(
            Api::<Pod>::all(client.clone()),
            pods_config,
            cancel.clone(),
            move |d| h.on_pod(d),
            move || {
                let _ = tx.send("pods");
            },
        )));
    }
    {
        let h = handlers.clone();
        let tx = synced_tx.clone();
        spawn(Box::pin(reflector::run(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            cancel.clone(),
            move |d| h.on_node(d),
            move || {
                let _ = tx.send("nodes");
            },
        )));
    }
    macro_rules! other {
        ($kind:ty, $field:ident, $resource:expr) => {{
            let h = handlers.clone();
            let tx = synced_tx.clone();
            spawn(Box::pin(reflector::run(
                Api::<$kind>::all(client.clone()),
                watcher::Config::default().any_semantic(),
                cancel.clone(),
                move |d| {
                    let listers = Arc::clone(&h.listers);
                    h.on_other(&listers.$field, $resource, d, object_key::<$kind>)
                },
                move || {
                    let _ = tx.send(stringify!($field));
                },
            )));
        }};
    }
    other!(
        PersistentVolumeClaim,
        pvcs,
        Some(EventResource::PersistentVolumeClaim)
    );
    other!(PersistentVolume, pvs, Some(EventResource::PersistentVolume));
    other!(
        StorageClass,
        storage_classes,
        Some(EventResource::StorageClass)
    );
    other!(CSINode, csi_nodes, Some(EventResource::CsiNode));
    other!(CSIDriver, csi_drivers, Some(EventResource::CsiDriver));
    other!(Namespace, namespaces, None);
    other!(PodDisruptionBudget, pdbs, None);
    other!(Service, services, None);
    other!(ReplicaSet, replica_sets, None);
    other!(StatefulSet, stateful_sets, None);
    other!(ReplicationController, replication_controllers, None);
    drop(synced_tx);
    async move {
        let mut seen = 0;
        while seen < kinds {
            if synced_rx.recv().await.is_none() {
                return;
            }
            seen += 1;
        }
    }
}
