//! Where a pod's streams are: the container a request means and the kubelet of the pod's
//! node (upstream `pkg/registry/core/pod/strategy.go` `LogLocation`, `streamLocation`,
//! and the node's connection info).

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, GroupResource};
use crate::registry::Context;

/// The kubelet port when a Node does not report one (upstream `ports.KubeletPort`).
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// Reads `resource`'s object `name` as `T`.
async fn get<T: DeserializeOwned>(
    ctx: &Context<'_>,
    resource: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<T, ApiError> {
    let value = ctx
        .objects
        .get(&GroupResource::new("", resource), namespace, name)
        .await?;
    serde_json::from_value(value).map_err(ApiError::internal)
}

/// The pod `namespace/name`. Errors: 404.
pub async fn pod(ctx: &Context<'_>, namespace: Option<&str>, name: &str) -> Result<Pod, ApiError> {
    get(ctx, "pods", namespace, name).await
}

fn names(containers: &[Container]) -> String {
    containers
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The container a request means: `requested` if the pod has it (a container or an init
/// container), else the pod's only container. Errors (400) as upstream's.
pub fn container(pod: &Pod, requested: Option<&str>) -> Result<String, ApiError> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let init = spec.init_containers.unwrap_or_default();
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if spec.containers.iter().chain(&init).any(|x| x.name == c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => match spec.containers.as_slice() {
            [only] => Ok(only.name.clone()),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            all => {
                let mut message = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names(all)
                );
                if !init.is_empty() {
                    message.push_str(&format!(
                        " or one of the init containers: [{}]",
                        names(&init)
                    ));
                }
                Err(ApiError::bad_request(message))
            }
        },
    }
}

/// The host and port of `node`'s kubelet: its InternalIP address (else its Hostname,
/// else any address) and `status.daemonEndpoints.kubeletEndpoint.Port` (default 10250).
/// Errors: 404 for an unknown node, 400 for a node without addresses.
pub async fn kubelet(ctx: &Context<'_>, node_name: &str) -> Result<(String, u16), ApiError> {
    let node: Node = get(ctx, "nodes", None, node_name).await?;
    kubelet_address(&node)
        .ok_or_else(|| ApiError::bad_request(format!("node {node_name} has no addresses")))
}

fn kubelet_address(node: &Node) -> Option<(String, u16)> {
    let status = node.status.as_ref()?;
    let addresses = status.addresses.as_deref().unwrap_or_default();
    let by_type = |t: &str| addresses.iter().find(|a| a.type_ == t);
    let address = by_type("InternalIP")
        .or_else(|| by_type("Hostname"))
        .or_else(|| addresses.first())?;
    let port = status
        .daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .and_then(|e| u16::try_from(e.port).ok())
        .filter(|p| *p != 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Some((address.address.clone(), port))
}

/// The pod's node, or 400 `pod x does not have a host assigned`.
pub fn node_name(pod: &Pod) -> Result<String, ApiError> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "pod {} does not have a host assigned",
                pod.metadata.name.as_deref().unwrap_or_default()
            ))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(containers: &[&str], init: &[&str]) -> Pod {
        let list = |names: &[&str]| names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>();
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"containers": list(containers), "initContainers": list(init)},
        }))
        .unwrap()
    }

    #[test]
    fn picks_the_container_as_upstream() {
        assert_eq!(container(&pod(&["a"], &[]), None).unwrap(), "a");
        assert_eq!(
            container(&pod(&["a", "b"], &["i"]), Some("i")).unwrap(),
            "i"
        );
        let err = container(&pod(&["a", "b"], &[]), None).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "a container name must be specified for pod web, choose one of: [a b]"
        );
        let err = container(&pod(&["a", "b"], &["i"]), None).unwrap_err();
        assert_eq!(
            err.message,
            "a container name must be specified for pod web, choose one of: [a b] or one of the init containers: [i]"
        );
        let err = container(&pod(&["a"], &[]), Some("x")).unwrap_err();
        assert_eq!(err.message, "container x is not valid for pod web");
    }

    #[test]
    fn kubelet_address_prefers_internal_ip_and_reported_port() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "n1"},
                    {"type": "InternalIP", "address": "192.0.2.7"},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10260}},
            },
        }))
        .unwrap();
        assert_eq!(kubelet_address(&node), Some(("192.0.2.7".into(), 10260)));
        let bare: Node = serde_json::from_value(json!({
            "metadata": {"name": "n2"},
            "status": {"addresses": [{"type": "Hostname", "address": "n2"}]},
        }))
        .unwrap();
        assert_eq!(kubelet_address(&bare), Some(("n2".into(), 10250)));
        assert_eq!(kubelet_address(&Node::default()), None);
    }

    #[test]
    fn unscheduled_pod_has_no_host() {
        let err = node_name(&pod(&["a"], &[])).unwrap_err();
        assert_eq!(err.message, "pod web does not have a host assigned");
    }
}
