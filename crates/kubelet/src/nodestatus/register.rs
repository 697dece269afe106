//! Node registration (upstream `kubelet_node_status.go`: `initialNode`,
//! `tryRegisterWithAPIServer` and the reconciliation of an existing Node).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tracing::{error, info, warn};

use super::patch::node_status_patch;
use super::setters::{OPERATING_SYSTEM, go_arch};
use crate::cm::allocatable::HUGEPAGES_PREFIX;

/// The annotation that hands attach/detach of the node's volumes to the controller
/// (upstream `volumeutil.ControllerManagedAttachAnnotation`).
pub(crate) const CONTROLLER_MANAGED_ATTACH_ANNOTATION: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
/// `kubernetes.io/hostname`.
pub(crate) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `kubernetes.io/os`.
pub(crate) const LABEL_OS: &str = "kubernetes.io/os";
/// `kubernetes.io/arch`.
pub(crate) const LABEL_ARCH: &str = "kubernetes.io/arch";
/// The deprecated `beta.kubernetes.io/os`, still set by upstream's kubelet.
const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
/// The deprecated `beta.kubernetes.io/arch`, still set by upstream's kubelet.
const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";

/// The labels the kubelet owns on its Node (upstream `updateDefaultLabels`): on an
/// existing Node, those the kubelet sets are brought to its values.
const DEFAULT_LABELS: [&str; 12] = [
    LABEL_HOSTNAME,
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    LABEL_OS,
    LABEL_ARCH,
    "node.kubernetes.io/windows-build",
    LABEL_OS_BETA,
    LABEL_ARCH_BETA,
];

/// What the Node is registered with (from `KubeletConfig`).
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// The node name, also the `kubernetes.io/hostname` label.
    pub node_name: String,
    /// `--node-labels`, applied over the well-known labels.
    pub node_labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--provider-id`.
    pub provider_id: Option<String>,
    /// `enableControllerAttachDetach` (upstream default true; not configurable here).
    pub controller_attach_detach: bool,
}

/// The Node the kubelet registers, before its status is set (upstream `initialNode`
/// without a cloud provider: no instance type or zone labels, which are not known).
pub(crate) fn initial_node(registration: &Registration) -> Node {
    let mut labels: BTreeMap<String, String> = [
        (LABEL_HOSTNAME, registration.node_name.as_str()),
        (LABEL_OS, OPERATING_SYSTEM),
        (LABEL_ARCH, go_arch()),
        (LABEL_OS_BETA, OPERATING_SYSTEM),
        (LABEL_ARCH_BETA, go_arch()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (key, value) in &registration.node_labels {
        if let Some(default) = labels.get(key) {
            warn!(label = %key, value = %value, default = %default, "the node label will overwrite default setting");
        }
        labels.insert(key.clone(), value.clone());
    }
    let annotations = registration.controller_attach_detach.then(|| {
        BTreeMap::from([(
            CONTROLLER_MANAGED_ATTACH_ANNOTATION.to_owned(),
            "true".to_owned(),
        )])
    });
    Node {
        metadata: ObjectMeta {
            name: Some(registration.node_name.clone()),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!registration.taints.is_empty()).then(|| registration.taints.clone()),
            provider_id: registration.provider_id.clone(),
            ..Default::default()
        }),
        status: Some(NodeStatus::default()),
    }
}

/// One registration attempt (upstream `tryRegisterWithAPIServer`): creates `node`; when
/// it exists already, reconciles the existing Node with it (the attach-detach annotation,
/// the default labels, the huge page resources) through a status patch. True when the
/// node is registered.
pub(crate) async fn try_register_with_api_server(nodes: &Api<Node>, node: &Node) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    match nodes.create(&PostParams::default(), node).await {
        Ok(_) => return true,
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => {
            error!(node = name, error = %e, "Unable to register node with API server");
            return false;
        }
    }
    let original = match nodes.get(name).await {
        Ok(existing) => existing,
        Err(e) => {
            error!(node = name, error = %e, "Unable to register node with API server, error getting existing node");
            return false;
        }
    };
    info!(node = name, "Node was previously registered");
    let mut existing = original.clone();
    let mut requires_update = reconcile_cmad_annotation(node, &mut existing);
    requires_update = update_default_labels(node, &mut existing) || requires_update;
    requires_update = reconcile_hugepage_resource(node, &mut existing) || requires_update;
    if !requires_update {
        return true;
    }
    let patch = match node_status_patch(&original, &existing) {
        Ok(patch) => patch,
        Err(e) => {
            error!(node = name, error = %e, "Unable to reconcile node with API server, error updating node");
            return false;
        }
    };
    match nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => true,
        Err(e) => {
            error!(node = name, error = %e, "Unable to reconcile node with API server, error updating node");
            false
        }
    }
}

/// Upstream `reconcileCMADAnnotationWithExistingNode`: the existing Node gets the new
/// Node's controller-managed attach-detach annotation (or loses it). True when it changed.
pub(crate) fn reconcile_cmad_annotation(node: &Node, existing: &mut Node) -> bool {
    let wanted = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_ANNOTATION));
    let current = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_ANNOTATION));
    if wanted.map(String::as_str).unwrap_or_default()
        == current.map(String::as_str).unwrap_or_default()
    {
        return false;
    }
    let annotations = existing
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    match wanted {
        None => {
            info!("Controller attach-detach setting changed to false; updating existing Node");
            annotations.remove(CONTROLLER_MANAGED_ATTACH_ANNOTATION);
        }
        Some(value) => {
            info!("Controller attach-detach setting changed to true; updating existing Node");
            annotations.insert(
                CONTROLLER_MANAGED_ATTACH_ANNOTATION.to_owned(),
                value.clone(),
            );
        }
    }
    true
}

/// Upstream `updateDefaultLabels`: each default label the new Node has is set to its
/// value on the existing Node (an empty value removes it). True when a label changed.
pub(crate) fn update_default_labels(node: &Node, existing: &mut Node) -> bool {
    let wanted = node.metadata.labels.clone().unwrap_or_default();
    let labels = existing.metadata.labels.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for label in DEFAULT_LABELS {
        let Some(value) = wanted.get(label) else {
            continue;
        };
        if labels.get(label) != Some(value) {
            labels.insert(label.to_owned(), value.clone());
            changed = true;
        }
        if labels.get(label).is_some_and(String::is_empty) {
            labels.remove(label);
        }
    }
    changed
}

/// Upstream `reconcileHugePageResource` (with `updateDefaultResources`): an existing Node
/// without capacity or allocatable takes the new Node's; huge page sizes the machine has
/// are set to its values, sizes it no longer has are removed. True when anything changed.
pub(crate) fn reconcile_hugepage_resource(node: &Node, existing: &mut Node) -> bool {
    let initial = node.status.clone().unwrap_or_default();
    let status = existing.status.get_or_insert_with(NodeStatus::default);
    let mut changed = false;
    if status.capacity.is_none() {
        changed |= initial.capacity.is_some();
        status.capacity = Some(initial.capacity.clone().unwrap_or_default());
    }
    if status.allocatable.is_none() {
        changed |= initial.allocatable.is_some();
        status.allocatable = Some(initial.allocatable.clone().unwrap_or_default());
    }
    let capacity = status.capacity.get_or_insert_with(BTreeMap::new);
    let allocatable = status.allocatable.get_or_insert_with(BTreeMap::new);
    let initial_capacity = initial.capacity.unwrap_or_default();
    let initial_allocatable = initial.allocatable.unwrap_or_default();
    let mut supported = BTreeSet::new();
    for (resource, value) in &initial_capacity {
        if !resource.starts_with(HUGEPAGES_PREFIX) {
            continue;
        }
        supported.insert(resource.clone());
        let known = capacity.contains_key(resource);
        if !known || !same_quantity(capacity.get(resource), Some(value)) {
            capacity.insert(resource.clone(), value.clone());
            changed = true;
        }
        let wanted = initial_allocatable.get(resource);
        if !known || !same_quantity(allocatable.get(resource), wanted) {
            if let Some(wanted) = wanted {
                allocatable.insert(resource.clone(), wanted.clone());
            }
            changed = true;
        }
    }
    let stale: Vec<String> = capacity
        .keys()
        .filter(|r| r.starts_with(HUGEPAGES_PREFIX) && !supported.contains(*r))
        .cloned()
        .collect();
    for resource in stale {
        info!(resource_name = %resource, "Removing huge page resource which is no longer supported");
        capacity.remove(&resource);
        allocatable.remove(&resource);
        changed = true;
    }
    changed
}

/// Quantities equal by value (upstream `Quantity.Cmp`).
fn same_quantity(
    a: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    b: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> bool {
    let value = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.and_then(skiff_api::quantity::parse).unwrap_or(0.0)
    };
    value(a) == value(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn registration() -> Registration {
        Registration {
            node_name: "node1".into(),
            node_labels: BTreeMap::from([
                ("node-role.kubernetes.io/worker".to_owned(), String::new()),
                (LABEL_OS.to_owned(), "linux".to_owned()),
            ]),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("gpu".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }],
            provider_id: Some("skiff://node1".into()),
            controller_attach_detach: true,
        }
    }

    #[test]
    fn initial_node_has_the_well_known_labels_taints_and_provider() {
        let node = initial_node(&registration());
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_HOSTNAME], "node1");
        assert_eq!(labels[LABEL_OS], "linux");
        assert_eq!(labels[LABEL_ARCH], go_arch());
        assert_eq!(labels[LABEL_OS_BETA], "linux");
        assert_eq!(labels[LABEL_ARCH_BETA], go_arch());
        assert_eq!(labels["node-role.kubernetes.io/worker"], "");
        assert!(!labels.contains_key("node.kubernetes.io/instance-type"));
        assert_eq!(
            node.metadata.annotations.as_ref().unwrap()[CONTROLLER_MANAGED_ATTACH_ANNOTATION],
            "true"
        );
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(spec.taints.as_ref().unwrap()[0].key, "dedicated");
        assert_eq!(spec.provider_id.as_deref(), Some("skiff://node1"));
        assert_eq!(spec.unschedulable, None);
    }

    #[test]
    fn existing_node_is_reconciled() {
        let node = initial_node(&registration());
        let mut existing = Node {
            metadata: ObjectMeta {
                name: Some("node1".into()),
                labels: Some(BTreeMap::from([
                    (LABEL_HOSTNAME.to_owned(), "old-name".to_owned()),
                    ("team".to_owned(), "a".to_owned()),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(reconcile_cmad_annotation(&node, &mut existing));
        assert!(!reconcile_cmad_annotation(&node, &mut existing));
        assert!(update_default_labels(&node, &mut existing));
        let labels = existing.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[LABEL_HOSTNAME], "node1");
        assert_eq!(labels[LABEL_ARCH], go_arch());
        assert_eq!(labels["team"], "a", "labels the kubelet does not own stay");
        assert!(!labels.contains_key("node-role.kubernetes.io/worker"));
        assert!(!update_default_labels(&node, &mut existing));

        let mut without = Node::default();
        without.metadata.annotations = Some(BTreeMap::from([(
            CONTROLLER_MANAGED_ATTACH_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
        let disabled = initial_node(&Registration {
            controller_attach_detach: false,
            ..registration()
        });
        assert!(reconcile_cmad_annotation(&disabled, &mut without));
        assert!(without.metadata.annotations.as_ref().unwrap().is_empty());
    }

    #[test]
    fn hugepages_follow_the_machine() {
        let q = |s: &str| Quantity(s.to_owned());
        let mut node = initial_node(&registration());
        node.status = Some(NodeStatus {
            capacity: Some(BTreeMap::from([
                ("cpu".to_owned(), q("4")),
                ("hugepages-2Mi".to_owned(), q("20Mi")),
            ])),
            allocatable: Some(BTreeMap::from([
                ("cpu".to_owned(), q("4")),
                ("hugepages-2Mi".to_owned(), q("20Mi")),
            ])),
            ..Default::default()
        });
        let mut existing = Node::default();
        assert!(reconcile_hugepage_resource(&node, &mut existing));
        assert_eq!(
            existing.status, node.status,
            "an empty Node takes the capacity"
        );
        let status = existing.status.as_mut().unwrap();
        status
            .capacity
            .as_mut()
            .unwrap()
            .insert("hugepages-1Gi".into(), q("1Gi"));
        status
            .capacity
            .as_mut()
            .unwrap()
            .insert("hugepages-2Mi".into(), q("0"));
        assert!(reconcile_hugepage_resource(&node, &mut existing));
        let capacity = existing.status.as_ref().unwrap().capacity.as_ref().unwrap();
        assert!(!capacity.contains_key("hugepages-1Gi"));
        assert_eq!(capacity["hugepages-2Mi"], q("20Mi"));
        assert!(!reconcile_hugepage_resource(&node, &mut existing));
    }
}
