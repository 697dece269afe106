//! Whether a pod fits a node (upstream `pkg/scheduler/framework` `NodeInfo`,
//! `plugins/noderesources/fit.go` `Fits`, `plugins/nodeports` `Fits`,
//! `plugins/nodename` `Fits`), and the resource name classes of
//! `pkg/apis/core/v1/helper` (`IsExtendedResourceName`, `IsScalarResourceName`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerPort, Node, Pod};

use super::super::pod::requests::{
    PodResourcesOptions, ResourceAmounts, add_amounts, is_restartable_init_container, pod_requests,
    resource_amounts,
};
use crate::names;

/// The resources with a field of their own in upstream's `framework.Resource`; every
/// other scalar resource is compared the same way, by name.
const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The `pods` resource: how many pods the node takes.
pub const PODS: &str = "pods";
/// The host IP a port without `hostIP` binds (upstream `DefaultBindAllHostIP`).
const BIND_ALL_HOST_IP: &str = "0.0.0.0";

/// True for `hugepages-<size>` (upstream `IsHugePageResourceName`).
pub fn is_hugepage_resource_name(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// True for a native resource: no domain, or a `kubernetes.io/` one (upstream
/// `IsNativeResource`).
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// True for an extended resource (`example.com/gpu`): not native, not `requests.`-prefixed,
/// and a qualified name once prefixed with `requests.` (upstream `IsExtendedResourceName`).
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    names::is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// True for the resources the scheduler compares by name (upstream
/// `IsScalarResourceName`): extended, hugepages, `kubernetes.io/`-prefixed native and
/// `attachable-volumes-*` resources.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || is_hugepage_resource_name(name)
        || (name.contains('/') && name.contains("kubernetes.io/"))
        || name.starts_with("attachable-volumes-")
}

/// A resource a node does not have enough of (upstream `InsufficientResource`). Amounts
/// are in millicores for `cpu`, else units; for `pods`, pod counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    /// The resource name (`cpu`, `memory`, `pods`, `example.com/gpu`, ...).
    pub resource_name: String,
    /// The scheduler's reason: `Too many pods`, `Insufficient <resource>`.
    pub reason: String,
    /// What the pod requests.
    pub requested: i64,
    /// What the pods already on the node request.
    pub used: i64,
    /// The node's allocatable amount.
    pub capacity: i64,
}

/// A host port in use: protocol and port, per host IP (upstream `HostPortInfo`).
#[derive(Debug, Clone, Default)]
pub struct HostPortInfo(BTreeMap<String, BTreeSet<(String, i32)>>);

fn sanitize<'a>(ip: Option<&'a str>, protocol: Option<&'a str>) -> (&'a str, &'a str) {
    (
        ip.filter(|ip| !ip.is_empty()).unwrap_or(BIND_ALL_HOST_IP),
        protocol.filter(|p| !p.is_empty()).unwrap_or("TCP"),
    )
}

impl HostPortInfo {
    /// Forgets one use of `port` (a pod leaving the node); ports without `hostPort`
    /// are ignored.
    pub fn remove(&mut self, port: &ContainerPort) {
        let Some(host_port) = port.host_port.filter(|p| *p > 0) else {
            return;
        };
        let (ip, protocol) = sanitize(port.host_ip.as_deref(), port.protocol.as_deref());
        if let Some(used) = self.0.get_mut(ip) {
            used.remove(&(protocol.to_owned(), host_port));
            if used.is_empty() {
                self.0.remove(ip);
            }
        }
    }

    /// Records `port` as used; ports without `hostPort` are ignored.
    pub fn add(&mut self, port: &ContainerPort) {
        let Some(host_port) = port.host_port.filter(|p| *p > 0) else {
            return;
        };
        let (ip, protocol) = sanitize(port.host_ip.as_deref(), port.protocol.as_deref());
        self.0
            .entry(ip.to_owned())
            .or_default()
            .insert((protocol.to_owned(), host_port));
    }

    /// Whether `port` clashes with a used one (upstream `CheckConflict`): on `0.0.0.0`
    /// with the same protocol and port on any IP, else on the same IP or `0.0.0.0`.
    pub fn check_conflict(&self, port: &ContainerPort) -> bool {
        let Some(host_port) = port.host_port.filter(|p| *p > 0) else {
            return false;
        };
        let (ip, protocol) = sanitize(port.host_ip.as_deref(), port.protocol.as_deref());
        let key = (protocol.to_owned(), host_port);
        if ip == BIND_ALL_HOST_IP {
            return self.0.values().any(|used| used.contains(&key));
        }
        [BIND_ALL_HOST_IP, ip]
            .iter()
            .any(|ip| self.0.get(*ip).is_some_and(|used| used.contains(&key)))
    }
}

/// The container ports of `pod` with a `hostPort`: its sidecars' and its containers'
/// (upstream `GetHostPorts`).
pub fn host_ports(pod: &Pod) -> Vec<&ContainerPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .filter(|c| is_restartable_init_container(c))
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
        .collect()
}

/// A node and what its pods use (upstream `framework.NodeInfo`). Cloning is cheap on the
/// node (shared) and proportional to the resources and ports in use.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    node: Arc<Node>,
    allocatable: ResourceAmounts,
    requested: ResourceAmounts,
    pod_count: usize,
    used_ports: HostPortInfo,
    options: PodResourcesOptions,
}

impl NodeInfo {
    /// The node with no pods; its allocatable comes from `status.allocatable` (`pods`
    /// being the number of pods it takes). `options` decides how pod requests are
    /// computed, for the pods added and for [`fits`].
    pub fn new(node: impl Into<Arc<Node>>, options: PodResourcesOptions) -> Self {
        let node = node.into();
        let allocatable =
            resource_amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        Self {
            node,
            allocatable,
            requested: ResourceAmounts::new(),
            pod_count: 0,
            used_ports: HostPortInfo::default(),
            options,
        }
    }

    /// Accounts for `pod` on the node: its requests and its host ports.
    pub fn add_pod(&mut self, pod: &Pod) {
        let requests = pod_requests(pod, &self.options);
        self.add_pod_with_requests(pod, &requests);
    }

    /// [`add_pod`](Self::add_pod) with the pod's requests already computed (with this
    /// node's [`options`](Self::options)).
    pub fn add_pod_with_requests(&mut self, pod: &Pod, requests: &ResourceAmounts) {
        add_amounts(&mut self.requested, requests);
        for port in host_ports(pod) {
            self.used_ports.add(port);
        }
        self.pod_count += 1;
    }

    /// Undoes [`add_pod_with_requests`](Self::add_pod_with_requests) of the same pod and
    /// requests: a pod leaving the node, or a victim removed in a preemption simulation.
    pub fn remove_pod_with_requests(&mut self, pod: &Pod, requests: &ResourceAmounts) {
        for (name, v) in requests {
            if let Some(e) = self.requested.get_mut(name) {
                *e = e.saturating_sub(*v);
            }
        }
        for port in host_ports(pod) {
            self.used_ports.remove(port);
        }
        self.pod_count = self.pod_count.saturating_sub(1);
    }

    /// Replaces the node object (its allocatable is read again); the pods stay.
    pub fn set_node(&mut self, node: impl Into<Arc<Node>>) {
        self.node = node.into();
        self.allocatable = resource_amounts(
            self.node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref()),
        );
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The node, shared.
    pub fn node_arc(&self) -> &Arc<Node> {
        &self.node
    }

    /// The node's allocatable amounts (see [`ResourceAmounts`]).
    pub fn allocatable(&self) -> &ResourceAmounts {
        &self.allocatable
    }

    /// The sum of the requests of the pods added.
    pub fn requested(&self) -> &ResourceAmounts {
        &self.requested
    }

    /// How many pods were added.
    pub fn pod_count(&self) -> usize {
        self.pod_count
    }

    /// The host ports the pods added use.
    pub fn used_ports(&self) -> &HostPortInfo {
        &self.used_ports
    }

    /// The options pod requests are computed with.
    pub fn options(&self) -> &PodResourcesOptions {
        &self.options
    }
}

/// The resources `pod` lacks on the node (upstream `noderesources.Fits`): `pods` when the
/// node is full, then `cpu`, `memory`, `ephemeral-storage` and each scalar resource (by
/// name) whose non-zero request exceeds allocatable minus what the node's pods request.
/// A resource the node does not have is 0. Empty when the pod fits.
pub fn fits(pod: &Pod, node_info: &NodeInfo) -> Vec<InsufficientResource> {
    fits_requests(&pod_requests(pod, &node_info.options), node_info)
}

/// [`fits`] with the pod's requests already computed (once per pod, not per node: the
/// scheduler's PreFilter state).
pub fn fits_requests(
    requests: &ResourceAmounts,
    node_info: &NodeInfo,
) -> Vec<InsufficientResource> {
    let mut insufficient = Vec::new();
    let allowed_pods = node_info.allocatable.get(PODS).copied().unwrap_or(0);
    let pod_count = i64::try_from(node_info.pod_count).unwrap_or(i64::MAX);
    if pod_count.saturating_add(1) > allowed_pods {
        insufficient.push(InsufficientResource {
            resource_name: PODS.to_owned(),
            reason: "Too many pods".to_owned(),
            requested: 1,
            used: pod_count,
            capacity: allowed_pods,
        });
    }
    // cpu, memory and ephemeral-storage first, as upstream checks them, then the scalar
    // resources by name; no allocation unless something is missing (this runs for every
    // node of every scheduling cycle).
    let first = [CPU, MEMORY, EPHEMERAL_STORAGE]
        .into_iter()
        .filter_map(|n| requests.get_key_value(n));
    let rest = requests.iter().filter(|(n, _)| {
        !matches!(n.as_str(), CPU | MEMORY | EPHEMERAL_STORAGE) && is_scalar_resource_name(n)
    });
    for (name, &requested) in first.chain(rest) {
        if requested <= 0 {
            continue;
        }
        let capacity = node_info.allocatable.get(name).copied().unwrap_or(0);
        let used = node_info.requested.get(name).copied().unwrap_or(0);
        if requested > capacity.saturating_sub(used) {
            insufficient.push(InsufficientResource {
                resource_name: name.clone(),
                reason: format!("Insufficient {name}"),
                requested,
                used,
                capacity,
            });
        }
    }
    insufficient
}

/// Whether the pod's `spec.nodeName`, when set, is the node (upstream `nodename.Fits`).
pub fn node_name_fits(pod: &Pod, node: &Node) -> bool {
    let wanted = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("");
    wanted.is_empty() || Some(wanted) == node.metadata.name.as_deref()
}

/// Whether none of the pod's host ports clashes with the node's pods (upstream
/// `nodeports.Fits`).
pub fn node_ports_fit(pod: &Pod, node_info: &NodeInfo) -> bool {
    host_ports(pod)
        .into_iter()
        .all(|p| !node_info.used_ports.check_conflict(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, NodeStatus, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    pub(crate) fn node(allocatable: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(list(allocatable)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn container(requests: &[(&str, &str)]) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(list(requests)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>, overhead: &[(&str, &str)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                overhead: (!overhead.is_empty()).then(|| list(overhead)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn short(r: &[InsufficientResource]) -> Vec<(String, i64, i64, i64)> {
        r.iter()
            .map(|r| (r.resource_name.clone(), r.requested, r.used, r.capacity))
            .collect()
    }

    fn owned(r: &[(&str, i64, i64, i64)]) -> Vec<(String, i64, i64, i64)> {
        r.iter()
            .map(|(n, a, b, c)| ((*n).to_owned(), *a, *b, *c))
            .collect()
    }

    #[test]
    fn fit_table() {
        let alloc = [
            ("cpu", "1200m"),
            ("memory", "1Gi"),
            ("pods", "3"),
            ("ephemeral-storage", "10Gi"),
            ("example.com/gpu", "2"),
            ("hugepages-2Mi", "8Mi"),
        ];
        let existing = pod(
            vec![container(&[("cpu", "500m"), ("memory", "512Mi")])],
            vec![],
            &[],
        );
        let mut sidecar = container(&[("cpu", "300m")]);
        sidecar.restart_policy = Some("Always".into());
        type Case<'a> = (&'a str, Pod, Vec<(&'a str, i64, i64, i64)>);
        let cases: Vec<Case> = vec![
            (
                "fits",
                pod(vec![container(&[("cpu", "700m")])], vec![], &[]),
                vec![],
            ),
            (
                "cpu",
                pod(vec![container(&[("cpu", "1")])], vec![], &[]),
                vec![("cpu", 1000, 500, 1200)],
            ),
            (
                "init container counts as its max",
                pod(
                    vec![container(&[("cpu", "100m")])],
                    vec![container(&[("cpu", "800m")])],
                    &[],
                ),
                vec![("cpu", 800, 500, 1200)],
            ),
            (
                "sidecar adds to the containers",
                pod(vec![container(&[("cpu", "500m")])], vec![sidecar], &[]),
                vec![("cpu", 800, 500, 1200)],
            ),
            (
                "overhead counts",
                pod(
                    vec![container(&[("cpu", "600m")])],
                    vec![],
                    &[("cpu", "150m")],
                ),
                vec![("cpu", 750, 500, 1200)],
            ),
            (
                "memory and ephemeral storage in order",
                pod(
                    vec![container(&[
                        ("ephemeral-storage", "11Gi"),
                        ("memory", "600Mi"),
                    ])],
                    vec![],
                    &[],
                ),
                vec![
                    ("memory", 600 << 20, 512 << 20, 1 << 30),
                    ("ephemeral-storage", 11 << 30, 0, 10 << 30),
                ],
            ),
            (
                "extended resources and hugepages by name",
                pod(
                    vec![container(&[
                        ("example.com/gpu", "3"),
                        ("hugepages-2Mi", "4Mi"),
                    ])],
                    vec![],
                    &[],
                ),
                vec![("example.com/gpu", 3, 0, 2)],
            ),
            (
                "a resource the node lacks has capacity 0",
                pod(vec![container(&[("hugepages-1Gi", "1Gi")])], vec![], &[]),
                vec![("hugepages-1Gi", 1 << 30, 0, 0)],
            ),
            (
                "zero and unknown requests are ignored",
                pod(vec![container(&[("cpu", "0"), ("pid", "99")])], vec![], &[]),
                vec![],
            ),
        ];
        for (name, p, want) in cases {
            let mut info = NodeInfo::new(node(&alloc), PodResourcesOptions::default());
            info.add_pod(&existing);
            assert_eq!(short(&fits(&p, &info)), owned(&want), "{name}");
        }
    }

    #[test]
    fn pods_count_is_checked_first_even_without_requests() {
        let mut info = NodeInfo::new(node(&[("cpu", "1"), ("pods", "1")]), Default::default());
        let best_effort = pod(vec![container(&[])], vec![], &[]);
        assert!(fits(&best_effort, &info).is_empty());
        info.add_pod(&best_effort);
        let got = fits(&pod(vec![container(&[("cpu", "2")])], vec![], &[]), &info);
        assert_eq!(
            short(&got),
            owned(&[("pods", 1, 1, 1), ("cpu", 2000, 0, 1000)])
        );
        assert_eq!(got[0].reason, "Too many pods");
        assert_eq!(got[1].reason, "Insufficient cpu");
        // A zero request fits an overcommitted node.
        let mut full = NodeInfo::new(node(&[("cpu", "1"), ("pods", "10")]), Default::default());
        full.add_pod(&pod(vec![container(&[("cpu", "2")])], vec![], &[]));
        assert!(fits(&best_effort, &full).is_empty());
    }

    #[test]
    fn resource_name_classes() {
        assert!(is_extended_resource_name("example.com/gpu"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(!is_extended_resource_name("requests.example.com/gpu"));
        assert!(!is_extended_resource_name("example.com/bad name"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("example.com/gpu"));
        assert!(is_scalar_resource_name("attachable-volumes-csi-x"));
        assert!(!is_scalar_resource_name("memory"));
        assert!(!is_scalar_resource_name("pid"));
    }

    fn port(host_ip: &str, protocol: &str, host_port: i32) -> ContainerPort {
        ContainerPort {
            container_port: 80,
            host_port: Some(host_port),
            host_ip: (!host_ip.is_empty()).then(|| host_ip.into()),
            protocol: (!protocol.is_empty()).then(|| protocol.into()),
            ..Default::default()
        }
    }

    #[test]
    fn host_port_conflicts() {
        let mut used = HostPortInfo::default();
        used.add(&port("10.0.0.1", "", 8080));
        used.add(&port("", "UDP", 53));
        let cases = [
            (
                "same ip, default protocol",
                port("10.0.0.1", "TCP", 8080),
                true,
            ),
            ("other ip", port("10.0.0.2", "TCP", 8080), false),
            ("all ips see every ip", port("", "", 8080), true),
            ("other protocol", port("10.0.0.1", "UDP", 8080), false),
            (
                "used on 0.0.0.0 clashes with any ip",
                port("10.0.0.9", "UDP", 53),
                true,
            ),
            ("no host port", port("", "", 0), false),
        ];
        for (name, p, want) in cases {
            assert_eq!(used.check_conflict(&p), want, "{name}");
        }
        let with_ports = |ports: Vec<ContainerPort>| Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(ports),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut info = NodeInfo::new(node(&[("pods", "10")]), Default::default());
        info.add_pod(&with_ports(vec![port("", "", 80)]));
        assert!(!node_ports_fit(&with_ports(vec![port("", "", 80)]), &info));
        assert!(node_ports_fit(&with_ports(vec![port("", "", 81)]), &info));
    }

    #[test]
    fn node_name() {
        let n = node(&[]);
        let named = |name: Option<&str>| Pod {
            spec: Some(PodSpec {
                node_name: name.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(node_name_fits(&named(None), &n));
        assert!(node_name_fits(&named(Some("n1")), &n));
        assert!(!node_name_fits(&named(Some("n2")), &n));
    }
}
