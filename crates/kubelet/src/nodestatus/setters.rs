//! The node status setters (upstream `pkg/kubelet/nodestatus/setters.go`), run in
//! upstream's order by [`set_node_status`]: addresses, machine info (capacity and
//! allocatable), versions, daemon endpoints, images, OS and architecture, runtime handlers
//! and features, then the MemoryPressure, DiskPressure, PIDPressure and Ready conditions.
//! `volumesInUse` is left alone: upstream reports only attachable and device-mountable
//! volumes there, and none of Skiff's volume plugins is one.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_cri::v1::{Image, RuntimeFeatures, RuntimeHandler};
use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeFeatures, NodeRuntimeHandler, NodeRuntimeHandlerFeatures, NodeStatus, NodeSwapStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use skiff_api::quantity::format_binary_si;

use super::machine::MachineInfo;
use crate::cm::allocatable::HUGEPAGES_PREFIX;
use crate::cm::resources::ResourceAmounts;
use crate::events::EventType;
use crate::eviction::NodeConditions;

/// Images reported at most (upstream `nodeStatusMaxImages` default, 50), the largest first.
pub(crate) const MAX_IMAGES_IN_NODE_STATUS: usize = 50;
/// Names reported per image at most (upstream `MaxNamesPerImageInNodeStatus`).
pub(crate) const MAX_NAMES_PER_IMAGE_IN_NODE_STATUS: usize = 5;
/// `status.nodeInfo.operatingSystem` and the `kubernetes.io/os` label (Go's `GOOS`).
pub(crate) const OPERATING_SYSTEM: &str = "linux";

/// The resources whose capacity the node needs to be Ready (upstream `ReadyCondition`
/// with local storage capacity isolation, on by default).
const REQUIRED_CAPACITIES: [&str; 4] = ["cpu", "memory", "pods", "ephemeral-storage"];

/// `status.nodeInfo.architecture` and the `kubernetes.io/arch` label: Go's `GOARCH` name
/// of the architecture this kubelet runs on (`amd64`, `arm64`, ...).
pub(crate) fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// An event a setter records on the Node (upstream's `recordEventFunc`): its type
/// (`Normal`, `Warning`), reason (`NodeReady`, `NodeHasSufficientMemory`, ...) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeEvent {
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
}

/// What stays the same for the kubelet's life: the node's name, IP and settings, the
/// container manager's capacity and allocatable, the machine and the runtime.
#[derive(Debug, Clone)]
pub(crate) struct NodeFacts {
    /// The node name, also its hostname address and label (no hostname override).
    pub node_name: String,
    /// The InternalIP address.
    pub node_ip: IpAddr,
    /// `pods` capacity (`maxPods`).
    pub max_pods: i32,
    /// `daemonEndpoints.kubeletEndpoint.Port` (`port`).
    pub port: u16,
    /// The machine capacity ([`crate::cm::ContainerManager::capacity`]).
    pub capacity: ResourceAmounts,
    /// The node allocatable ([`crate::cm::ContainerManager::node_allocatable`]).
    pub allocatable: ResourceAmounts,
    /// Machine facts of `nodeInfo`.
    pub machine: MachineInfo,
    /// `<runtime name>://<runtime version>` from CRI Version.
    pub container_runtime_version: String,
    /// `nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
}

/// What the kubelet observed for this status: the runtime's and network's errors, the
/// runtime's handlers and features, the image list and the eviction manager's pressure.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    /// Runtime errors, the PLEG's included (see `RuntimeState::runtime_errors`).
    pub runtime_errors: Vec<String>,
    /// The pod network's errors.
    pub network_errors: Vec<String>,
    /// The runtime handlers of the last ready CRI Status.
    pub handlers: Vec<RuntimeHandler>,
    /// The runtime features of the last ready CRI Status.
    pub features: Option<RuntimeFeatures>,
    /// CRI ListImages, or why it failed.
    pub images: Result<Vec<Image>, tonic::Status>,
    /// MemoryPressure / DiskPressure from the eviction manager (no PID signal: never
    /// PIDPressure).
    pub pressure: NodeConditions,
}

impl Default for Observed {
    /// A healthy runtime without images or pressure.
    fn default() -> Self {
        Self {
            runtime_errors: Vec::new(),
            network_errors: Vec::new(),
            handlers: Vec::new(),
            features: None,
            images: Ok(Vec::new()),
            pressure: NodeConditions::default(),
        }
    }
}

/// Runs every setter on `node` at `now` (upstream `setNodeStatus`); returns the events
/// they record.
pub(crate) fn set_node_status(
    facts: &NodeFacts,
    observed: &Observed,
    node: &mut Node,
    now: Timestamp,
) -> Vec<NodeEvent> {
    let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.get_or_insert_with(NodeStatus::default);
    let mut events = Vec::new();
    node_address(facts, status);
    machine_info(facts, status, &name, &mut events);
    version_info(facts, status);
    daemon_endpoints(facts, status);
    images(&observed.images, status);
    go_runtime(status);
    runtime_handlers(&observed.handlers, status);
    node_features(observed.features, status);
    for kind in [PressureKind::Memory, PressureKind::Disk, PressureKind::Pid] {
        let pressure = match kind {
            PressureKind::Memory => observed.pressure.memory_pressure,
            PressureKind::Disk => observed.pressure.disk_pressure,
            PressureKind::Pid => false,
        };
        pressure_condition(kind, pressure, status, &now, &name, &mut events);
    }
    ready_condition(observed, status, &now, &name, &mut events);
    events
}

/// Upstream `NodeAddress` without a cloud provider: the node IP as InternalIP and the
/// hostname.
fn node_address(facts: &NodeFacts, status: &mut NodeStatus) {
    status.addresses = Some(vec![
        NodeAddress {
            type_: "InternalIP".into(),
            address: facts.node_ip.to_string(),
        },
        NodeAddress {
            type_: "Hostname".into(),
            address: facts.node_name.clone(),
        },
    ]);
}

/// A resource amount as the quantity upstream reports: cpu in canonical decimal SI
/// (`4`, `3500m`), pods as a count, bytes in canonical binary SI (`16283952Ki`).
fn quantity(name: &str, amount: i64) -> Quantity {
    Quantity(match name {
        "cpu" if amount % 1000 == 0 => (amount / 1000).to_string(),
        "cpu" => format!("{amount}m"),
        "pods" => amount.to_string(),
        _ => format_binary_si(amount),
    })
}

/// Whether a capacity resource is reported in the node status: cpu, memory,
/// ephemeral-storage and the huge page pools (the container manager's `pid` is not).
fn reported(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with(HUGEPAGES_PREFIX)
}

/// Upstream `MachineInfo`: capacity (the machine's and `pods` = maxPods) and allocatable
/// (the container manager's node allocatable), the boot ID and a `Rebooted` event when it
/// changed. Capacity entries the kubelet does not own (extended resources advertised by
/// others) stay, with allocatable equal to their capacity; extended resources gone from
/// capacity leave allocatable.
fn machine_info(
    facts: &NodeFacts,
    status: &mut NodeStatus,
    name: &str,
    events: &mut Vec<NodeEvent>,
) {
    let capacity = status.capacity.get_or_insert_with(BTreeMap::new);
    for (resource, amount) in &facts.capacity {
        if reported(resource) {
            capacity.insert(resource.clone(), quantity(resource, *amount));
        }
    }
    capacity.insert("pods".into(), quantity("pods", i64::from(facts.max_pods)));
    let allocatable = status.allocatable.get_or_insert_with(BTreeMap::new);
    allocatable
        .retain(|resource, _| capacity.contains_key(resource) || !is_extended_resource(resource));
    for (resource, value) in capacity.iter() {
        let own = facts
            .allocatable
            .get(resource)
            .filter(|_| reported(resource))
            .map(|amount| quantity(resource, *amount));
        allocatable.insert(resource.clone(), own.unwrap_or_else(|| value.clone()));
    }
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    if !info.boot_id.is_empty() && info.boot_id != facts.machine.boot_id {
        events.push(NodeEvent {
            event_type: EventType::Warning,
            reason: "Rebooted",
            message: format!(
                "Node {name} has been rebooted, boot id: {}",
                facts.machine.boot_id
            ),
        });
    }
    info.machine_id.clone_from(&facts.machine.machine_id);
    info.system_uuid.clone_from(&facts.machine.system_uuid);
    info.boot_id.clone_from(&facts.machine.boot_id);
    info.swap = Some(NodeSwapStatus {
        capacity: Some(facts.machine.swap_capacity.unwrap_or(0)),
    });
}

/// An extended resource name (upstream `IsExtendedResourceName`): namespaced outside
/// `kubernetes.io/`, e.g. `example.com/gpu`.
fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Upstream `VersionInfo`: kernel, OS image, container runtime and kubelet versions.
fn version_info(facts: &NodeFacts, status: &mut NodeStatus) {
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    info.kernel_version
        .clone_from(&facts.machine.kernel_version);
    info.os_image.clone_from(&facts.machine.os_image);
    info.container_runtime_version
        .clone_from(&facts.container_runtime_version);
    info.kubelet_version.clone_from(&facts.kubelet_version);
}

/// Upstream `DaemonEndpoints`: the kubelet's port.
fn daemon_endpoints(facts: &NodeFacts, status: &mut NodeStatus) {
    status.daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: i32::from(facts.port),
        }),
    });
}

/// Upstream `Images`: the [`MAX_IMAGES_IN_NODE_STATUS`] largest images, each named by its
/// repo digests then repo tags (at most [`MAX_NAMES_PER_IMAGE_IN_NODE_STATUS`] names). A
/// failed image list empties the field.
fn images(list: &Result<Vec<Image>, tonic::Status>, status: &mut NodeStatus) {
    let Ok(list) = list else {
        status.images = None;
        return;
    };
    let mut sorted: Vec<&Image> = list.iter().collect();
    sorted.sort_by_key(|image| std::cmp::Reverse(image.size));
    let images: Vec<ContainerImage> = sorted
        .into_iter()
        .take(MAX_IMAGES_IN_NODE_STATUS)
        .map(|image| ContainerImage {
            names: Some(
                image
                    .repo_digests
                    .iter()
                    .chain(&image.repo_tags)
                    .take(MAX_NAMES_PER_IMAGE_IN_NODE_STATUS)
                    .cloned()
                    .collect(),
            ),
            size_bytes: Some(i64::try_from(image.size).unwrap_or(i64::MAX)),
        })
        .collect();
    status.images = (!images.is_empty()).then_some(images);
}

/// Upstream `GoRuntime`: the operating system and architecture.
fn go_runtime(status: &mut NodeStatus) {
    let info = status.node_info.get_or_insert_with(NodeSystemInfo::default);
    info.operating_system = OPERATING_SYSTEM.into();
    info.architecture = go_arch().into();
}

/// Upstream `RuntimeHandlers`: the runtime's handlers and their features.
fn runtime_handlers(handlers: &[RuntimeHandler], status: &mut NodeStatus) {
    let handlers: Vec<NodeRuntimeHandler> = handlers
        .iter()
        .map(|h| {
            let features = h.features.unwrap_or_default();
            NodeRuntimeHandler {
                name: Some(h.name.clone()),
                features: Some(NodeRuntimeHandlerFeatures {
                    recursive_read_only_mounts: Some(features.recursive_read_only_mounts),
                    user_namespaces: Some(features.user_namespaces),
                }),
            }
        })
        .collect();
    status.runtime_handlers = (!handlers.is_empty()).then_some(handlers);
}

/// Upstream `NodeFeatures` (SupplementalGroupsPolicy, on by default in 1.33): whether the
/// runtime supports `supplementalGroupsPolicy`.
fn node_features(features: Option<RuntimeFeatures>, status: &mut NodeStatus) {
    if let Some(features) = features {
        status
            .features
            .get_or_insert_with(NodeFeatures::default)
            .supplemental_groups_policy = Some(features.supplemental_groups_policy);
    }
}

/// The three pressure conditions.
#[derive(Debug, Clone, Copy)]
enum PressureKind {
    Memory,
    Disk,
    Pid,
}

/// A pressure condition's type and its (reason, message, event) under and without
/// pressure, as upstream words them.
struct PressureWords {
    condition: &'static str,
    pressure: (&'static str, &'static str, &'static str),
    no_pressure: (&'static str, &'static str, &'static str),
}

impl PressureKind {
    fn words(self) -> PressureWords {
        match self {
            PressureKind::Memory => PressureWords {
                condition: "MemoryPressure",
                pressure: (
                    "KubeletHasInsufficientMemory",
                    "kubelet has insufficient memory available",
                    "NodeHasInsufficientMemory",
                ),
                no_pressure: (
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    "NodeHasSufficientMemory",
                ),
            },
            PressureKind::Disk => PressureWords {
                condition: "DiskPressure",
                pressure: (
                    "KubeletHasDiskPressure",
                    "kubelet has disk pressure",
                    "NodeHasDiskPressure",
                ),
                no_pressure: (
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    "NodeHasNoDiskPressure",
                ),
            },
            PressureKind::Pid => PressureWords {
                condition: "PIDPressure",
                pressure: (
                    "KubeletHasInsufficientPID",
                    "kubelet has insufficient PID available",
                    "NodeHasInsufficientPID",
                ),
                no_pressure: (
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    "NodeHasSufficientPID",
                ),
            },
        }
    }
}

/// The `Normal` event upstream's `recordNodeStatusEvent` records.
fn status_event(name: &str, reason: &'static str) -> NodeEvent {
    NodeEvent {
        event_type: EventType::Normal,
        reason,
        message: format!("Node {name} status is now: {reason}"),
    }
}

/// Upstream `MemoryPressureCondition`, `DiskPressureCondition`, `PIDPressureCondition`:
/// the heartbeat is always renewed; status, reason, message and transition time change
/// only when the pressure does (a new condition starts Unknown, so it always transitions).
fn pressure_condition(
    kind: PressureKind,
    pressure: bool,
    status: &mut NodeStatus,
    now: &Time,
    name: &str,
    events: &mut Vec<NodeEvent>,
) {
    let words = kind.words();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let index = match conditions.iter().position(|c| c.type_ == words.condition) {
        Some(i) => i,
        None => {
            conditions.push(NodeCondition {
                type_: words.condition.into(),
                status: "Unknown".into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    condition.last_heartbeat_time = Some(now.clone());
    let (wanted, (reason, message, event)) = if pressure {
        ("True", words.pressure)
    } else {
        ("False", words.no_pressure)
    };
    if condition.status != wanted {
        condition.status = wanted.into();
        condition.reason = Some(reason.into());
        condition.message = Some(message.into());
        condition.last_transition_time = Some(now.clone());
        events.push(status_event(name, event));
    }
}

/// Errors as upstream's `errors.NewAggregate(...).Error()` prints them (flattened, each
/// message once): one plain, several as `[a, b]`; `None` without any.
fn aggregate(errors: &[String]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => None,
        [one] => Some((*one).to_owned()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// Upstream `ReadyCondition`: True (`KubeletReady`) unless the runtime, the PLEG or the
/// network report errors or a required capacity is missing (`KubeletNotReady` with the
/// aggregated errors). The transition time is kept while the status holds; a change
/// records `NodeReady` / `NodeNotReady`. Ready stays the last condition.
fn ready_condition(
    observed: &Observed,
    status: &mut NodeStatus,
    now: &Time,
    name: &str,
    events: &mut Vec<NodeEvent>,
) {
    let mut errors: Vec<String> = observed
        .runtime_errors
        .iter()
        .chain(&observed.network_errors)
        .cloned()
        .collect();
    let capacity = status.capacity.as_ref();
    let missing: Vec<&str> = REQUIRED_CAPACITIES
        .into_iter()
        .filter(|r| !capacity.is_some_and(|c| c.contains_key(*r)))
        .collect();
    if !missing.is_empty() {
        errors.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    let mut ready = match aggregate(&errors) {
        None => NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: None,
        },
        Some(message) => NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("KubeletNotReady".into()),
            message: Some(message),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: None,
        },
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == "Ready") {
        Some(existing) => {
            if existing.status == ready.status {
                ready.last_transition_time = existing.last_transition_time.clone();
            } else {
                ready.last_transition_time = Some(now.clone());
                let event = if ready.status == "True" {
                    "NodeReady"
                } else {
                    "NodeNotReady"
                };
                events.push(status_event(name, event));
            }
            *existing = ready;
        }
        None => {
            ready.last_transition_time = Some(now.clone());
            conditions.push(ready);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::allocatable::PIDS;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::net::Ipv4Addr;

    pub(crate) fn facts() -> NodeFacts {
        NodeFacts {
            node_name: "node1".into(),
            node_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)),
            max_pods: 110,
            port: 10250,
            capacity: [
                ("cpu".to_owned(), 4000),
                ("memory".to_owned(), 8 << 30),
                ("ephemeral-storage".to_owned(), 100 << 30),
                ("hugepages-2Mi".to_owned(), 0),
                (PIDS.to_owned(), 4_194_304),
            ]
            .into(),
            allocatable: [
                ("cpu".to_owned(), 3500),
                ("memory".to_owned(), (8 << 30) - (100 << 20)),
                ("ephemeral-storage".to_owned(), 96_636_764_160),
                ("hugepages-2Mi".to_owned(), 0),
                (PIDS.to_owned(), 4_194_304),
            ]
            .into(),
            machine: MachineInfo {
                machine_id: "mid".into(),
                system_uuid: "uuid".into(),
                boot_id: "boot-1".into(),
                kernel_version: "6.1.0".into(),
                os_image: "Debian GNU/Linux 12 (bookworm)".into(),
                swap_capacity: Some(0),
            },
            container_runtime_version: "skiff://0.1.0".into(),
            kubelet_version: "v1.37.0+skiff".into(),
        }
    }

    fn healthy() -> Observed {
        Observed {
            images: Ok(Vec::new()),
            ..Default::default()
        }
    }

    fn node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node1".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn condition<'a>(node: &'a Node, kind: &str) -> &'a NodeCondition {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind))
            .unwrap_or_else(|| panic!("no {kind} condition"))
    }

    fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn capacity_allocatable_addresses_and_info() {
        let mut node = node();
        set_node_status(&facts(), &healthy(), &mut node, at(0));
        let status = node.status.as_ref().unwrap();
        assert_eq!(
            status.capacity.as_ref().unwrap(),
            &quantities(&[
                ("cpu", "4"),
                ("ephemeral-storage", "100Gi"),
                ("hugepages-2Mi", "0"),
                ("memory", "8Gi"),
                ("pods", "110"),
            ])
        );
        assert_eq!(
            status.allocatable.as_ref().unwrap(),
            &quantities(&[
                ("cpu", "3500m"),
                ("ephemeral-storage", "90Gi"),
                ("hugepages-2Mi", "0"),
                ("memory", "8092Mi"),
                ("pods", "110"),
            ])
        );
        let addresses: Vec<(&str, &str)> = status
            .addresses
            .iter()
            .flatten()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            addresses,
            [("InternalIP", "10.0.0.5"), ("Hostname", "node1")]
        );
        let info = status.node_info.as_ref().unwrap();
        assert_eq!(info.machine_id, "mid");
        assert_eq!(info.system_uuid, "uuid");
        assert_eq!(info.boot_id, "boot-1");
        assert_eq!(info.kernel_version, "6.1.0");
        assert_eq!(info.os_image, "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.architecture, go_arch());
        assert_eq!(info.container_runtime_version, "skiff://0.1.0");
        assert_eq!(info.kubelet_version, "v1.37.0+skiff");
        assert_eq!(
            status.daemon_endpoints.as_ref().unwrap().kubelet_endpoint,
            Some(DaemonEndpoint { port: 10250 })
        );
        assert_eq!(status.volumes_in_use, None);
    }

    #[test]
    fn extended_resources_of_others_are_kept() {
        let mut node = node();
        node.status = Some(NodeStatus {
            capacity: Some(quantities(&[("example.com/dongle", "4")])),
            allocatable: Some(quantities(&[
                ("example.com/dongle", "2"),
                ("example.com/gone", "1"),
            ])),
            ..Default::default()
        });
        set_node_status(&facts(), &healthy(), &mut node, at(0));
        let status = node.status.as_ref().unwrap();
        assert_eq!(
            status.capacity.as_ref().unwrap()["example.com/dongle"].0,
            "4"
        );
        let allocatable = status.allocatable.as_ref().unwrap();
        assert_eq!(allocatable["example.com/dongle"].0, "4");
        assert!(!allocatable.contains_key("example.com/gone"));
        assert_eq!(allocatable["cpu"].0, "3500m");
    }

    #[test]
    fn conditions_transition_as_upstream() {
        let mut node = node();
        let events = set_node_status(&facts(), &healthy(), &mut node, at(0));
        // New conditions start Unknown: each records its first event, Ready is last.
        let types: Vec<&str> = node
            .status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            types,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            [
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID"
            ]
        );
        assert_eq!(
            events[0].message,
            "Node node1 status is now: NodeHasSufficientMemory"
        );
        let ready = condition(&node, "Ready");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("kubelet is posting ready status")
        );
        assert_eq!(ready.last_transition_time, Some(Time(at(0))));
        let memory = condition(&node, "MemoryPressure");
        assert_eq!(
            (
                memory.status.as_str(),
                memory.reason.as_deref(),
                memory.message.as_deref()
            ),
            (
                "False",
                Some("KubeletHasSufficientMemory"),
                Some("kubelet has sufficient memory available")
            )
        );

        // Unchanged: only the heartbeats move.
        let events = set_node_status(&facts(), &healthy(), &mut node, at(10));
        assert!(events.is_empty());
        assert_eq!(
            condition(&node, "Ready").last_transition_time,
            Some(Time(at(0)))
        );
        assert_eq!(
            condition(&node, "Ready").last_heartbeat_time,
            Some(Time(at(10)))
        );
        assert_eq!(
            condition(&node, "DiskPressure").last_heartbeat_time,
            Some(Time(at(10)))
        );

        // Memory pressure and a broken network.
        let observed = Observed {
            pressure: NodeConditions {
                memory_pressure: true,
                disk_pressure: false,
            },
            network_errors: vec!["container runtime network not ready: <nil>".into()],
            runtime_errors: vec!["PLEG is not healthy: pleg has yet to be successful".into()],
            ..healthy()
        };
        let events = set_node_status(&facts(), &observed, &mut node, at(20));
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["NodeHasInsufficientMemory", "NodeNotReady"]);
        let memory = condition(&node, "MemoryPressure");
        assert_eq!(memory.status, "True");
        assert_eq!(
            memory.reason.as_deref(),
            Some("KubeletHasInsufficientMemory")
        );
        assert_eq!(
            memory.message.as_deref(),
            Some("kubelet has insufficient memory available")
        );
        assert_eq!(memory.last_transition_time, Some(Time(at(20))));
        let ready = condition(&node, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some(
                "[PLEG is not healthy: pleg has yet to be successful, container runtime \
                 network not ready: <nil>]"
            )
        );
        assert_eq!(ready.last_transition_time, Some(Time(at(20))));

        // Back to ready.
        let events = set_node_status(&facts(), &healthy(), &mut node, at(30));
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["NodeHasSufficientMemory", "NodeReady"]);
        assert_eq!(
            condition(&node, "Ready").last_transition_time,
            Some(Time(at(30)))
        );
    }

    #[test]
    fn missing_capacity_and_reboot() {
        let mut facts = facts();
        facts.capacity.remove("memory");
        let mut node = node();
        node.status = Some(NodeStatus {
            node_info: Some(NodeSystemInfo {
                boot_id: "boot-0".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let events = set_node_status(&facts, &healthy(), &mut node, at(0));
        assert_eq!(
            condition(&node, "Ready").message.as_deref(),
            Some("missing node capacity for resources: memory")
        );
        let rebooted = events.iter().find(|e| e.reason == "Rebooted").unwrap();
        assert_eq!(rebooted.event_type, EventType::Warning);
        assert_eq!(
            rebooted.message,
            "Node node1 has been rebooted, boot id: boot-1"
        );
    }

    #[test]
    fn images_are_the_fifty_largest_with_five_names() {
        let list: Vec<Image> = (0..60u64)
            .map(|i| Image {
                id: format!("sha256:{i}"),
                repo_tags: (0..4).map(|t| format!("img{i}:t{t}")).collect(),
                repo_digests: vec![
                    format!("img{i}@sha256:{i}"),
                    format!("mirror/img{i}@sha256:{i}"),
                ],
                size: i * 1000,
                ..Default::default()
            })
            .collect();
        let mut node = node();
        let observed = Observed {
            images: Ok(list),
            ..healthy()
        };
        set_node_status(&facts(), &observed, &mut node, at(0));
        let images = node.status.as_ref().unwrap().images.as_ref().unwrap();
        assert_eq!(images.len(), 50);
        assert_eq!(images[0].size_bytes, Some(59_000));
        assert_eq!(images[49].size_bytes, Some(10_000));
        assert_eq!(
            images[0].names.as_deref().unwrap(),
            [
                "img59@sha256:59",
                "mirror/img59@sha256:59",
                "img59:t0",
                "img59:t1",
                "img59:t2"
            ]
        );
        let failed = Observed {
            images: Err(tonic::Status::unknown("rpc error")),
            ..healthy()
        };
        set_node_status(&facts(), &failed, &mut node, at(10));
        assert_eq!(node.status.as_ref().unwrap().images, None);
    }

    #[test]
    fn runtime_handlers_and_features() {
        let observed = Observed {
            handlers: vec![RuntimeHandler {
                name: "runc".into(),
                features: Some(k8s_cri::v1::RuntimeHandlerFeatures {
                    recursive_read_only_mounts: true,
                    user_namespaces: false,
                }),
            }],
            features: Some(RuntimeFeatures {
                supplemental_groups_policy: true,
            }),
            ..healthy()
        };
        let mut node = node();
        set_node_status(&facts(), &observed, &mut node, at(0));
        let status = node.status.as_ref().unwrap();
        let handler = &status.runtime_handlers.as_ref().unwrap()[0];
        assert_eq!(handler.name.as_deref(), Some("runc"));
        assert_eq!(
            handler.features,
            Some(NodeRuntimeHandlerFeatures {
                recursive_read_only_mounts: Some(true),
                user_namespaces: Some(false),
            })
        );
        assert_eq!(
            status.features.as_ref().unwrap().supplemental_groups_policy,
            Some(true)
        );
    }
}
