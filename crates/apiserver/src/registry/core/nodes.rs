//! Nodes (upstream `pkg/registry/core/node`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use skiff_api::core::node::{default_node, validate_node, validate_node_update};
use skiff_api::field::ErrorList;

use crate::registry::printers::{AGE, NAME, age, column, name, or, wide};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// The label prefix that gives a node a role (`node-role.kubernetes.io/control-plane`).
const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// The older role label (`kubernetes.io/role: master`).
const ROLE_LABEL: &str = "kubernetes.io/role";

/// The nodes kind.
pub struct Nodes;

impl Strategy for Nodes {
    type Object = Node;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["no"],
            ..ResourceInfo::of::<Node>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn status_meta_fields(&self) -> &'static [&'static str] {
        &["labels", "annotations"]
    }

    /// `proxy` (upstream `ProxyREST`): requests sent on to the node's kubelet.
    fn subresources(&self) -> Vec<std::sync::Arc<dyn crate::registry::Subresource>> {
        vec![std::sync::Arc::new(crate::proxy::ResourceProxy(
            crate::proxy::Proxied::Nodes,
        ))]
    }

    fn default(&self, node: &mut Node) {
        default_node(node);
    }

    fn validate(&self, node: &Node) -> ErrorList {
        validate_node(node)
    }

    fn validate_update(&self, new: &Node, old: &Node) -> ErrorList {
        validate_node_update(new, old)
    }

    /// Upstream `NodeToSelectableFields`.
    fn selectable_fields(&self, node: &Node) -> Vec<(&'static str, String)> {
        let unschedulable = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        vec![("spec.unschedulable", unschedulable.to_string())]
    }

    /// NAME STATUS ROLES AGE VERSION, and with `-o wide` INTERNAL-IP EXTERNAL-IP OS-IMAGE
    /// KERNEL-VERSION CONTAINER-RUNTIME.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Status", "string", "The status of the node", 0),
            column("Roles", "string", "The roles of the node", 0),
            AGE,
            column(
                "Version",
                "string",
                "Kubelet Version reported by the node.",
                0,
            ),
            wide(
                "Internal-IP",
                "string",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            wide(
                "External-IP",
                "string",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            wide(
                "OS-Image",
                "string",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            wide(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            wide(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ]
    }

    /// Upstream `printNode`.
    fn row(&self, node: &Node) -> Vec<Value> {
        let status = node.status.clone().unwrap_or_default();
        let mut states: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .take(1)
            .map(|c| {
                if c.status == "True" {
                    "Ready".to_owned()
                } else {
                    "NotReady".to_owned()
                }
            })
            .collect();
        if states.is_empty() {
            states.push("Unknown".to_owned());
        }
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            states.push("SchedulingDisabled".to_owned());
        }
        let roles = roles(node);
        let address = |type_: &str| {
            let addresses = status.addresses.iter().flatten();
            addresses
                .clone()
                .find(|a| a.type_ == type_)
                .map(|a| a.address.clone())
        };
        let info = status.node_info.clone().unwrap_or_default();
        vec![
            json!(name(&node.metadata)),
            json!(states.join(",")),
            json!(if roles.is_empty() {
                "<none>".to_owned()
            } else {
                roles
            }),
            json!(age(&node.metadata)),
            json!(info.kubelet_version),
            json!(or(address("InternalIP").as_deref(), "<none>")),
            json!(or(address("ExternalIP").as_deref(), "<none>")),
            json!(or(Some(&info.os_image), "<unknown>")),
            json!(or(Some(&info.kernel_version), "<unknown>")),
            json!(or(Some(&info.container_runtime_version), "<unknown>")),
        ]
    }
}

/// Upstream `findNodeRoles`: `node-role.kubernetes.io/<role>` labels and the
/// `kubernetes.io/role` label, sorted, comma-separated.
fn roles(node: &Node) -> String {
    let mut roles = BTreeSet::new();
    for (key, value) in node.metadata.labels.iter().flatten() {
        if let Some(role) = key.strip_prefix(ROLE_PREFIX).filter(|r| !r.is_empty()) {
            roles.insert(role.to_owned());
        } else if key == ROLE_LABEL && !value.is_empty() {
            roles.insert(value.clone());
        }
    }
    roles.into_iter().collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_rows_as_upstream() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                       "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "Debian", "kernelVersion": "", "containerRuntimeVersion": "skiff://1",
                                    "architecture": "", "bootID": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "", "systemUUID": ""}}
        }))
        .unwrap_or_default();
        let row = Nodes.row(&node);
        assert_eq!(row[1], "NotReady,SchedulingDisabled");
        assert_eq!(row[2], "control-plane,master");
        assert_eq!(row[4], "v1.37.0");
        assert_eq!(row[5], "10.0.0.5");
        assert_eq!(row[6], "<none>");
        assert_eq!(row[8], "<unknown>");
        assert_eq!(Nodes.columns().len(), row.len());
    }
}
