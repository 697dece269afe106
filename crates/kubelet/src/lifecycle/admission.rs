//! Pod admission on the node (upstream `Kubelet.canAdmitPod` over the admit handlers:
//! the sysctl allowlist, then `lifecycle.predicateAdmitHandler`; `HandlePodAdditions`
//! and `rejectPod`). The predicates themselves are skiff-api's
//! (`skiff_api::core::scheduling_predicates`), shared with the scheduler.
//!
//! Not done here: preemption of lower-priority pods for a critical pod (upstream
//! `CriticalPodAdmissionHandler.evictPodsToFreeRequests`): a critical pod that only
//! lacks resources is admitted when upstream would find pods to preempt, without
//! preempting them; the eviction manager's admit handler (pods refused under node
//! pressure); device plugin resources.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeFeatures, NodeStatus, Pod, PodStatus, ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tracing::{info, warn};

use super::sysctl::SysctlAllowlist;
use crate::cm::qos::pod_qos;
use crate::cm::resources::ResourceAmounts;
use crate::config::static_pod::CONFIG_SOURCE_ANNOTATION;
use crate::kubelet_config::KubeletConfig;
use crate::pod_manager::PodManager;
use crate::pod_workers::PodWorkers;
use crate::status::is_terminal;
use skiff_api::core::pod::requests::{PodResourcesOptions, pod_requests};
use skiff_api::core::scheduling_predicates::fit::{PODS, is_extended_resource_name};
use skiff_api::core::scheduling_predicates::taints::TAINT_EFFECT_NO_EXECUTE;
use skiff_api::core::scheduling_predicates::{
    AdmissionResult, ERR_REASON_TAINT_TOLERATION, InsufficientResource, NodeInfo, TAINT_TOLERATION,
    admission_check, find_matching_untolerated_taint,
};

/// Rejection for a pod whose `kubernetes.io/os` label names another OS.
pub const POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH: &str = "PodOSSelectorNodeLabelDoesNotMatch";
/// Rejection for a pod whose `spec.os.name` is another OS.
pub const POD_OS_NOT_SUPPORTED: &str = "PodOSNotSupported";
/// Rejection for `supplementalGroupsPolicy: Strict` on a node without support for it.
pub const SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED: &str = "SupplementalGroupsPolicyNotSupported";
/// Rejection for an internal failure during admission.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";
/// Rejection reasons for missing resources: `OutOf<resource>`.
pub const OUT_OF_CPU: &str = "OutOfcpu";
/// See [`OUT_OF_CPU`].
pub const OUT_OF_MEMORY: &str = "OutOfmemory";
/// See [`OUT_OF_CPU`].
pub const OUT_OF_EPHEMERAL_STORAGE: &str = "OutOfephemeral-storage";
/// See [`OUT_OF_CPU`].
pub const OUT_OF_PODS: &str = "OutOfpods";

/// The operating system this kubelet runs (Go's `runtime.GOOS`).
const GOOS: &str = "linux";
/// The well-known OS label.
const LABEL_OS: &str = "kubernetes.io/os";
/// The annotation that marks a mirror pod.
const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The `config.source` of pods from the API server.
const API_SOURCE: &str = "api";
/// Pods at or above this priority are critical (upstream `scheduling.SystemCriticalPriority`).
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The prefix of a rejected pod's status message (upstream `rejectPod`).
const REJECTED_MESSAGE_PREFIX: &str = "Pod was rejected: ";

/// Why a pod was not admitted: a reason (`OutOfcpu`, `NodeAffinity`, ...) and a message
/// (upstream `PodAdmitResult` with `Admit: false`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodAdmitRejection {
    /// A CamelCase reason, the pod status's `reason`.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

/// The latest Node object, when the kubelet has one from the API server (upstream's node
/// lister); `None` until it is registered, or standalone.
pub type NodeGetter = Arc<dyn Fn() -> Option<Node> + Send + Sync>;

/// What admission knows of the node when there is no Node object (upstream
/// `initialNode`), built by `run()`; the Node object, when [`Self::node_getter`] gives one,
/// replaces all of it (upstream `getNodeAnyWay`).
#[derive(Clone)]
pub struct AdmissionNode {
    /// The node name.
    pub node_name: String,
    /// The kubelet's own labels: `kubernetes.io/hostname`, `kubernetes.io/os`,
    /// `kubernetes.io/arch` and `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// The node allocatable (the container manager's `node_allocatable`; cpu in
    /// millicores, bytes otherwise); other names than resources are ignored.
    pub allocatable: ResourceAmounts,
    /// `maxPods`: the node's `pods` allocatable.
    pub max_pods: i64,
    /// Whether the runtime supports `supplementalGroupsPolicy: Strict` (the node's
    /// `status.features`); `None` when unknown, and then the check is skipped.
    pub supplemental_groups_policy: Option<bool>,
    /// The Node object from the API server, when there is one.
    pub node_getter: Option<NodeGetter>,
}

impl AdmissionNode {
    /// The node as the kubelet's settings describe it: the `kubernetes.io/hostname`,
    /// `kubernetes.io/os` and `kubernetes.io/arch` labels with `--node-labels` over them,
    /// `--register-with-taints`, `maxPods`, and `allocatable` (the container manager's
    /// node allocatable). No Node object until [`Self::node_getter`] is set.
    pub fn from_config(config: &KubeletConfig, allocatable: ResourceAmounts) -> Self {
        let mut labels: BTreeMap<String, String> = [
            ("kubernetes.io/hostname", config.node_name.to_lowercase()),
            (LABEL_OS, GOOS.to_owned()),
            ("kubernetes.io/arch", go_arch().to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        labels.extend(config.node_labels.clone());
        Self {
            node_name: config.node_name.clone(),
            labels,
            taints: config.register_with_taints.clone(),
            allocatable,
            max_pods: i64::from(config.max_pods),
            supplemental_groups_policy: None,
            node_getter: None,
        }
    }

    /// The node to admit against (upstream `getNodeAnyWay`): the Node object when the
    /// kubelet has one, else one built from the kubelet's own settings.
    pub fn node(&self) -> Node {
        if let Some(node) = self.node_getter.as_ref().and_then(|get| get()) {
            return node;
        }
        let mut allocatable: BTreeMap<String, Quantity> = self
            .allocatable
            .iter()
            .filter(|(name, _)| is_node_resource(name))
            .map(|(name, amount)| {
                let q = if name == "cpu" {
                    format!("{amount}m")
                } else {
                    amount.to_string()
                };
                (name.clone(), Quantity(q))
            })
            .collect();
        allocatable.insert(PODS.to_owned(), Quantity(self.max_pods.to_string()));
        Node {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                labels: Some(self.labels.clone()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                taints: Some(self.taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(allocatable),
                features: self.supplemental_groups_policy.map(|s| NodeFeatures {
                    supplemental_groups_policy: Some(s),
                }),
                ..Default::default()
            }),
        }
    }
}

/// Go's `GOARCH` name of this machine's architecture.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The resources a node reports (the kubelet's `pid` capacity is not one).
fn is_node_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name.starts_with("hugepages-")
        || name.contains('/')
}

/// The kubelet's pod admission: its admit handlers and the pods it rejected.
pub struct PodAdmission {
    node: AdmissionNode,
    sysctls: SysctlAllowlist,
    rejected: HashSet<String>,
}

impl PodAdmission {
    /// Admission against `node`, with the safe sysctls of the running kernel.
    pub fn new(node: AdmissionNode) -> Self {
        Self {
            node,
            sysctls: SysctlAllowlist::safe(super::sysctl::kernel_version()),
            rejected: HashSet::new(),
        }
    }

    /// Whether pod `uid` was rejected; it is never started.
    pub fn is_rejected(&self, uid: &str) -> bool {
        self.rejected.contains(uid)
    }

    /// Forgets pod `uid` (removed by its source).
    pub fn forget(&mut self, uid: &str) {
        self.rejected.remove(uid);
    }

    /// Admits a pod being added against the pods already admitted and still active
    /// (`others`; the pod itself and rejected pods are skipped), recording a rejection
    /// (upstream `canAdmitPod`: the sysctl allowlist, then the predicates).
    pub fn admit(&mut self, pod: &Pod, others: &[Arc<Pod>]) -> Result<(), PodAdmitRejection> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let others: Vec<&Pod> = others
            .iter()
            .map(Arc::as_ref)
            .filter(|p| {
                let other = p.metadata.uid.as_deref().unwrap_or("");
                other != uid && !self.rejected.contains(other)
            })
            .collect();
        let result = self
            .sysctls
            .admit(pod)
            .and_then(|()| predicate_admit(&self.node.node(), pod, &others));
        if let Err(rejection) = &result {
            info!(
                pod = pod.metadata.name.as_deref().unwrap_or(""),
                uid,
                reason = %rejection.reason,
                message = %rejection.message,
                "pod admission denied"
            );
            self.rejected.insert(uid.to_owned());
        }
        result
    }
}

impl PodAdmission {
    /// Upstream `HandlePodAdditions`' admission of one added pod (already in
    /// `pod_manager`): true when the pod may be started. A pod rejected before, whose
    /// termination was requested or whose phase is terminal is not admitted again: the
    /// first two are not started, the last is left to its worker. Others are admitted
    /// against the active pods (not rejected, not terminated, not in a terminal phase
    /// unless still terminating); a rejected pod gets its Failed status through the
    /// status manager (upstream `rejectPod`) and is never started.
    pub fn handle_pod_addition(
        &mut self,
        pod: &Pod,
        pod_manager: &PodManager,
        pod_workers: &PodWorkers,
    ) -> bool {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        if self.is_rejected(uid) {
            return false;
        }
        let status_manager = &pod_workers.kubelet().status_manager;
        let terminal = |p: &Pod| {
            let uid = p.metadata.uid.as_deref().unwrap_or("");
            status_manager
                .get_pod_status(uid)
                .as_ref()
                .or(p.status.as_ref())
                .is_some_and(is_terminal)
        };
        if pod_workers.is_terminating(uid) || pod.status.as_ref().is_some_and(is_terminal) {
            return true;
        }
        let active: Vec<Arc<Pod>> = pod_manager
            .pods()
            .into_iter()
            .filter(|p| {
                let other = p.metadata.uid.as_deref().unwrap_or("");
                !pod_workers.states().is_terminated(other)
                    && (!terminal(p) || pod_workers.is_terminating(other))
            })
            .collect();
        match self.admit(pod, &active) {
            Ok(()) => true,
            Err(rejection) => {
                // Upstream `rejectPod`: a Warning event with the reason and message, then
                // the Failed status.
                pod_workers.kubelet().runtime.recorder().pod_event(
                    pod,
                    crate::events::EventType::Warning,
                    &rejection.reason,
                    &rejection.message,
                );
                status_manager.set_pod_status(uid, rejected_pod_status(pod, &rejection));
                false
            }
        }
    }
}

/// The status of a rejected pod (upstream `rejectPod`): Failed, with the rejection's
/// reason, the message prefixed with `Pod was rejected: `, and the QoS class.
pub fn rejected_pod_status(pod: &Pod, rejection: &PodAdmitRejection) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_owned()),
        reason: Some(rejection.reason.clone()),
        message: Some(format!("{REJECTED_MESSAGE_PREFIX}{}", rejection.message)),
        qos_class: Some(pod_qos(pod).as_str().to_owned()),
        ..Default::default()
    }
}

/// Orders the pods of one addition by creation time, oldest first (upstream
/// `PodsByCreationTime`), so that older pods are admitted first.
pub fn sort_by_creation_time(pods: &mut [Pod]) {
    pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
}

/// True for static pods: from a source other than the API server (upstream
/// `IsStaticPod`).
fn is_static_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| source != API_SOURCE)
}

/// True for static, mirror and system-critical-priority pods (upstream `IsCriticalPod`).
fn is_critical_pod(pod: &Pod) -> bool {
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONFIG_MIRROR_ANNOTATION));
    is_static_pod(pod)
        || mirror
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// Whether `preemptor` may preempt `preemptee` (upstream `Preemptable`).
fn preemptable(preemptor: &Pod, preemptee: &Pod) -> bool {
    if is_critical_pod(preemptor) && !is_critical_pod(preemptee) {
        return true;
    }
    let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority);
    matches!((priority(preemptor), priority(preemptee)), (Some(a), Some(b)) if a > b)
}

/// One failed general predicate (upstream `PredicateFailureReason`).
#[derive(Debug)]
enum PredicateFailure {
    InsufficientResource(InsufficientResource),
    Predicate {
        name: &'static str,
        reason: &'static str,
    },
}

/// The checks upstream's `generalFilter` runs: resources, node affinity, node name, host
/// ports, and NoExecute taints (not for static pods).
fn general_filter(pod: &Pod, node_info: &NodeInfo) -> Vec<PredicateFailure> {
    let mut reasons: Vec<PredicateFailure> = admission_check(pod, node_info, true)
        .into_iter()
        .map(|r| match r {
            AdmissionResult::InsufficientResource(r) => PredicateFailure::InsufficientResource(r),
            AdmissionResult::Predicate { name, reason } => {
                PredicateFailure::Predicate { name, reason }
            }
        })
        .collect();
    if !is_static_pod(pod) {
        let taints = node_info
            .node()
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let untolerated = find_matching_untolerated_taint(taints, tolerations, |t| {
            t.effect == TAINT_EFFECT_NO_EXECUTE
        });
        if untolerated.is_some() {
            reasons.push(PredicateFailure::Predicate {
                name: TAINT_TOLERATION,
                reason: ERR_REASON_TAINT_TOLERATION,
            });
        }
    }
    reasons
}

/// The pod without requests of extended resources the node does not have: those are
/// cluster-level resources (upstream `removeMissingExtendedResources`).
fn remove_missing_extended_resources(pod: &Pod, node_info: &NodeInfo) -> Pod {
    let mut copy = pod.clone();
    if let Some(spec) = copy.spec.as_mut() {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            if let Some(ResourceRequirements {
                requests: Some(requests),
                ..
            }) = c.resources.as_mut()
            {
                requests.retain(|name, _| {
                    !is_extended_resource_name(name) || node_info.allocatable().contains_key(name)
                });
            }
        }
    }
    copy
}

/// Upstream `rejectPodAdmissionBasedOnOSSelector`: the pod's `kubernetes.io/os` label
/// (its labels, as upstream reads them) must name this kubelet's OS.
fn reject_based_on_os_selector(pod: &Pod, node: &Node) -> bool {
    let node_os = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_OS))
        .filter(|os| *os == GOOS)
        .map_or(GOOS, String::as_str);
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_OS))
        .is_some_and(|os| os != node_os)
}

/// Upstream `rejectPodAdmissionBasedOnSupplementalGroupsPolicy` (the feature is beta in
/// v1.33): `Strict` needs the node's support.
fn reject_based_on_supplemental_groups_policy(pod: &Pod, node: &Node) -> bool {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.supplemental_groups_policy.as_deref());
    let supported = node
        .status
        .as_ref()
        .and_then(|s| s.features.as_ref())
        .and_then(|f| f.supplemental_groups_policy);
    // Skiff: unknown support (no Node object, runtime features not known) admits.
    policy == Some("Strict") && supported == Some(false)
}

/// The predicate admit handler (upstream `predicateAdmitHandler.Admit`): OS checks,
/// then the general predicates against `node` with `others` on it; the first failure is
/// the rejection. Critical pods short only of resources go through the critical pod
/// handler instead.
fn predicate_admit(node: &Node, pod: &Pod, others: &[&Pod]) -> Result<(), PodAdmitRejection> {
    let reject = |reason: &str, message: String| {
        Err(PodAdmitRejection {
            reason: reason.to_owned(),
            message,
        })
    };
    if reject_based_on_os_selector(pod, node) {
        return reject(
            POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label".into(),
        );
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.os.as_ref())
        .is_some_and(|os| os.name != GOOS)
    {
        return reject(
            POD_OS_NOT_SUPPORTED,
            "Failed to admit pod as the OS field doesn't match node OS".into(),
        );
    }
    if reject_based_on_supplemental_groups_policy(pod, node) {
        return reject(
            SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
            "SupplementalGroupsPolicy=Strict is not supported in this node".into(),
        );
    }
    // Skiff's cgroups honour pod-level resources, so admission counts them too.
    let mut node_info = NodeInfo::new(node.clone(), PodResourcesOptions::default());
    for other in others {
        node_info.add_pod(other);
    }
    let filtered = remove_missing_extended_resources(pod, &node_info);
    let mut reasons = general_filter(&filtered, &node_info);
    if !reasons.is_empty() {
        reasons = handle_admission_failure(pod, reasons, others)
            .or_else(|e| reject(UNEXPECTED_ADMISSION_ERROR, e.to_string()).map(|()| Vec::new()))?;
    }
    match reasons.into_iter().next() {
        None => Ok(()),
        Some(PredicateFailure::Predicate { name, reason }) => {
            reject(name, format!("Predicate {name} failed: {reason}"))
        }
        Some(PredicateFailure::InsufficientResource(r)) => {
            let reason = match r.resource_name.as_str() {
                "cpu" => OUT_OF_CPU.to_owned(),
                "memory" => OUT_OF_MEMORY.to_owned(),
                "ephemeral-storage" => OUT_OF_EPHEMERAL_STORAGE.to_owned(),
                "pods" => OUT_OF_PODS.to_owned(),
                other => format!("OutOf{other}"),
            };
            reject(
                &reason,
                format!(
                    "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                    r.resource_name, r.requested, r.used, r.capacity
                ),
            )
        }
    }
}

/// Upstream `CriticalPodAdmissionHandler.HandleAdmissionFailure`: a non-critical pod keeps
/// its failures; a critical one keeps its non-resource failures, and a shortage of
/// resources alone is no reason to reject it. Upstream then preempts lower-priority pods
/// to free what is missing; Skiff does not preempt (out of scope) and admits the pod when
/// such pods exist. When they cannot cover the shortage, the error message is upstream's.
fn handle_admission_failure(
    pod: &Pod,
    reasons: Vec<PredicateFailure>,
    others: &[&Pod],
) -> crate::error::Result<Vec<PredicateFailure>> {
    if !is_critical_pod(pod) {
        return Ok(reasons);
    }
    let (resources, non_resources): (Vec<_>, Vec<_>) = reasons
        .into_iter()
        .partition(|r| matches!(r, PredicateFailure::InsufficientResource(_)));
    if !non_resources.is_empty() {
        return Ok(non_resources);
    }
    let candidates: Vec<&Pod> = others
        .iter()
        .copied()
        .filter(|o| preemptable(pod, o))
        .collect();
    let mut unmet = String::new();
    for r in resources {
        let PredicateFailure::InsufficientResource(r) = r else {
            continue;
        };
        let mut missing = r.requested - (r.capacity - r.used);
        for candidate in &candidates {
            missing -= if r.resource_name == PODS {
                1
            } else {
                pod_requests(candidate, &PodResourcesOptions::default())
                    .get(&r.resource_name)
                    .copied()
                    .unwrap_or(0)
            };
            if missing <= 0 {
                break;
            }
        }
        if missing > 0 {
            unmet.push_str(&format!("(res: {}, q: {missing}), ", r.resource_name));
        }
    }
    if !unmet.is_empty() {
        return Err(crate::error::Error::Admission(format!(
            "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [{unmet}]"
        )));
    }
    warn!(
        pod = pod.metadata.name.as_deref().unwrap_or(""),
        "admitting a critical pod the node lacks resources for; preemption of lower-priority pods is not implemented"
    );
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PodSecurityContext, PodSpec, Sysctl, Toleration,
    };

    fn admission_node(cpu_milli: i64, max_pods: i64) -> AdmissionNode {
        AdmissionNode {
            node_name: "node1".into(),
            labels: [
                ("kubernetes.io/hostname".to_owned(), "node1".to_owned()),
                ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ("zone".to_owned(), "a".to_owned()),
            ]
            .into(),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("db".into()),
                effect: "NoExecute".into(),
                ..Default::default()
            }],
            allocatable: [
                ("cpu".to_owned(), cpu_milli),
                ("memory".to_owned(), 1 << 30),
                ("pid".to_owned(), 1000),
            ]
            .into(),
            max_pods,
            supplemental_groups_policy: None,
            node_getter: None,
        }
    }

    pub(crate) fn pod(uid: &str, source: &str, cpu: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                namespace: Some("default".into()),
                annotations: Some(
                    [(CONFIG_SOURCE_ANNOTATION.to_owned(), source.to_owned())].into(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_owned(), Quantity(cpu.into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                tolerations: Some(vec![Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rejection(r: Result<(), PodAdmitRejection>) -> Option<(String, String)> {
        r.err().map(|r| (r.reason, r.message))
    }

    fn owned(reason: &str, message: &str) -> Option<(String, String)> {
        Some((reason.to_owned(), message.to_owned()))
    }

    #[test]
    fn out_of_cpu_with_upstream_message_and_no_retry() {
        let mut admission = PodAdmission::new(admission_node(1200, 110));
        let first = Arc::new(pod("a", "api", "500m"));
        assert_eq!(admission.admit(&first, &[]), Ok(()));
        let big = pod("b", "api", "1");
        assert_eq!(
            rejection(admission.admit(&big, std::slice::from_ref(&first))),
            owned(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 1000, used: 500, capacity: 1200"
            )
        );
        assert!(admission.is_rejected("b"));
        // A rejected pod does not count against later ones.
        let fits = pod("c", "api", "700m");
        let all = [first.clone(), Arc::new(big)];
        assert_eq!(admission.admit(&fits, &all), Ok(()));
        let status = rejected_pod_status(
            &pod("b", "api", "1"),
            &PodAdmitRejection {
                reason: OUT_OF_CPU.into(),
                message: "m".into(),
            },
        );
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.message.as_deref(), Some("Pod was rejected: m"));
        assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
        admission.forget("b");
        assert!(!admission.is_rejected("b"));
    }

    #[test]
    fn out_of_pods_comes_first() {
        let mut admission = PodAdmission::new(admission_node(1000, 1));
        let first = Arc::new(pod("a", "api", "0"));
        assert_eq!(
            rejection(admission.admit(&pod("b", "api", "2"), &[first])),
            owned(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"
            )
        );
    }

    #[test]
    fn node_affinity_taints_and_sysctls() {
        let mut admission = PodAdmission::new(admission_node(1000, 110));
        let mut selector = pod("sel", "api", "0");
        if let Some(spec) = selector.spec.as_mut() {
            spec.node_selector = Some([("zone".to_owned(), "b".to_owned())].into());
        }
        assert_eq!(
            rejection(admission.admit(&selector, &[])),
            owned(
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
            )
        );
        let mut affinity = pod("aff", "api", "0");
        if let Some(spec) = affinity.spec.as_mut() {
            spec.affinity = Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "zone".into(),
                                operator: "In".into(),
                                values: Some(vec!["a".into()]),
                            }]),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        assert_eq!(admission.admit(&affinity, &[]), Ok(()));

        let mut intolerant = pod("taint", "api", "0");
        if let Some(spec) = intolerant.spec.as_mut() {
            spec.tolerations = None;
        }
        assert_eq!(
            rejection(admission.admit(&intolerant, &[])),
            owned(
                "TaintToleration",
                "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
            )
        );
        // Static pods are not checked against taints.
        let mut static_pod = intolerant.clone();
        static_pod.metadata.uid = Some("static".into());
        static_pod.metadata.annotations =
            Some([(CONFIG_SOURCE_ANNOTATION.to_owned(), "file".to_owned())].into());
        assert_eq!(admission.admit(&static_pod, &[]), Ok(()));

        let mut sysctl = pod("sysctl", "api", "0");
        if let Some(spec) = sysctl.spec.as_mut() {
            spec.security_context = Some(PodSecurityContext {
                sysctls: Some(vec![Sysctl {
                    name: "kernel.msgmax".into(),
                    value: "1".into(),
                }]),
                ..Default::default()
            });
        }
        assert_eq!(
            rejection(admission.admit(&sysctl, &[])),
            owned(
                "SysctlForbidden",
                "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
            )
        );
    }

    #[test]
    fn os_checks_and_the_node_object() {
        let mut node = admission_node(1000, 110);
        let mut windows = pod("win", "api", "0");
        windows.metadata.labels = Some([(LABEL_OS.to_owned(), "windows".to_owned())].into());
        let mut admission = PodAdmission::new(node.clone());
        assert_eq!(
            rejection(admission.admit(&windows, &[])).map(|r| r.0),
            Some(POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH.to_owned())
        );
        // With a Node object, its labels and allocatable are the ones admitted against.
        let mut api_node = node.node();
        api_node.metadata.labels = Some([("zone".to_owned(), "b".to_owned())].into());
        node.node_getter = Some(Arc::new(move || Some(api_node.clone())));
        let mut admission = PodAdmission::new(node);
        let mut zone_b = pod("zb", "api", "0");
        if let Some(spec) = zone_b.spec.as_mut() {
            spec.node_selector = Some([("zone".to_owned(), "b".to_owned())].into());
        }
        assert_eq!(admission.admit(&zone_b, &[]), Ok(()));
    }

    #[test]
    fn critical_pods_are_not_rejected_for_resources_alone() {
        let mut admission = PodAdmission::new(admission_node(1000, 110));
        // A static pod with nothing to preempt: upstream's preemption error.
        let running = Arc::new(pod("critical-running", "file", "800m"));
        assert_eq!(
            rejection(admission.admit(&pod("s1", "file", "500m"), &[running])),
            owned(
                UNEXPECTED_ADMISSION_ERROR,
                "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 300), ]"
            )
        );
        // With enough lower-priority pods upstream would preempt them; Skiff admits.
        let api_pod = Arc::new(pod("api-running", "api", "800m"));
        assert_eq!(
            admission.admit(&pod("s2", "file", "500m"), std::slice::from_ref(&api_pod)),
            Ok(())
        );
        // A critical pod failing another predicate is still rejected.
        let mut selector = pod("s3", "file", "500m");
        if let Some(spec) = selector.spec.as_mut() {
            spec.node_selector = Some([("zone".to_owned(), "b".to_owned())].into());
        }
        assert_eq!(
            rejection(admission.admit(&selector, &[api_pod])).map(|r| r.0),
            Some("NodeAffinity".to_owned())
        );
    }

    #[test]
    fn missing_extended_resources_are_ignored_and_sorting() {
        let mut admission = PodAdmission::new(admission_node(1000, 110));
        let mut gpu = pod("gpu", "api", "0");
        if let Some(spec) = gpu.spec.as_mut() {
            spec.containers[0].resources = Some(ResourceRequirements {
                requests: Some(
                    [
                        ("example.com/gpu".to_owned(), Quantity("1".into())),
                        ("hugepages-2Mi".to_owned(), Quantity("2Mi".into())),
                    ]
                    .into(),
                ),
                ..Default::default()
            });
        }
        assert_eq!(
            rejection(admission.admit(&gpu, &[])),
            owned(
                "OutOfhugepages-2Mi",
                "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0"
            )
        );

        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at = |uid: &str, secs: i64| {
            let mut p = pod(uid, "api", "0");
            p.metadata.creation_timestamp = Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(secs).unwrap(),
            ));
            p
        };
        let mut pods = vec![at("late", 30), at("early", 10), at("mid", 20)];
        sort_by_creation_time(&mut pods);
        let order: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        assert_eq!(order, ["early", "mid", "late"]);
    }

    /// A kubelet SyncLoop over the fake runtime with admission against a node of 1200
    /// millicores: of two API pods added at once, the older one (500m) runs and the
    /// newer one (1 cpu) ends Failed with OutOfcpu, never reaching the runtime.
    #[tokio::test]
    async fn sync_loop_rejects_the_pod_that_does_not_fit_and_runs_the_other() {
        use crate::cm::ContainerManager;
        use crate::config::{PodOperation, PodUpdate, SourcesReady};
        use crate::cri::fake::FakeCri;
        use crate::kubelet::Kubelet;
        use crate::kuberuntime::{KubeGenericRuntimeManager, RuntimeManagerConfig};
        use crate::pleg::RuntimePods;
        use crate::pod_workers::PodWorkerStates;
        use crate::syncloop::{SyncLoop, SyncLoopInputs};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use std::time::Duration;
        use tokio::sync::mpsc;

        let dir = tempfile::tempdir().unwrap();
        let cri = Arc::new(FakeCri::default());
        let runtime = KubeGenericRuntimeManager::new(
            cri.clone(),
            RuntimeManagerConfig {
                pod_logs_dir: dir.path().to_owned(),
                cgroup_root: "/skiff-unit-test-nonexistent".into(),
                node_ip: "10.0.0.2".into(),
                resolv_conf: "/etc/resolv.conf".into(),
                cluster_dns: Vec::new(),
                cluster_domain: String::new(),
                memory_capacity: 1 << 30,
                pod_dirs: crate::pod_dirs::PodDirs::new(dir.path().join("root")),
                allocatable: Default::default(),
            },
        );
        let (probe_results, probe_updates) = crate::prober::results::ProbeResults::new();
        let kubelet = Arc::new(Kubelet {
            runtime: Arc::new(runtime),
            status_manager: Default::default(),
            reasons: Default::default(),
            node_ip: "10.0.0.2".into(),
            runtime_name: "fake".into(),
            sync_frequency: Duration::from_secs(60),
            container_manager: Arc::new(ContainerManager::disabled()),
            evictions: Default::default(),
            probe_manager: crate::prober::ProbeManager::new(
                Arc::new(crate::prober::Prober::new(cri.clone())),
                Default::default(),
                probe_results.clone(),
            ),
            probe_results,
            volume_manager: Arc::new(crate::volume::VolumeManager::new(
                crate::pod_dirs::PodDirs::new(dir.path().join("root")),
                crate::volume::probe_volume_plugins(Default::default()),
            )),
        });
        let (results_tx, results) = mpsc::unbounded_channel();
        let (updates_tx, updates) = mpsc::channel(4);
        let (_pleg_tx, pleg) = mpsc::channel(4);
        let (_evictions_tx, evictions) = mpsc::channel(4);
        let admission = PodAdmission::new(admission_node(1200, 110));
        let sync_loop = SyncLoop::new(
            Arc::new(PodManager::default()),
            PodWorkers::new(kubelet.clone(), results_tx, PodWorkerStates::default()),
            SourcesReady::default(),
            RuntimePods::default(),
            kubelet.evictions.clone(),
            kubelet.container_manager.clone(),
        )
        .with_admission(admission);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let inputs = SyncLoopInputs {
            updates,
            pleg,
            results,
            probes: probe_updates,
            evictions,
        };
        let running = tokio::spawn(sync_loop.run(inputs, async move {
            let _ = stop_rx.await;
        }));

        let created = |mut p: Pod, secs: i64| {
            if let Some(spec) = p.spec.as_mut() {
                spec.containers[0].image = Some("busybox:1".into());
                spec.containers[0].image_pull_policy = Some("IfNotPresent".into());
            }
            p.metadata.creation_timestamp = Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(secs).unwrap(),
            ));
            p
        };
        // The newer, bigger pod comes first in the update: admission goes by age.
        let update = PodUpdate {
            op: PodOperation::Add,
            pods: vec![
                created(pod("big", "api", "1"), 20),
                created(pod("small", "api", "500m"), 10),
            ],
            source: "api".into(),
        };
        updates_tx.send(update).await.unwrap();

        let container_running = || {
            cri.container_ids()
                .iter()
                .filter_map(|id| cri.container(id))
                .any(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !container_running() {
            assert!(tokio::time::Instant::now() < deadline, "small never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let status = kubelet.status_manager.get_pod_status("big").unwrap();
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
        assert_eq!(
            status.message.as_deref(),
            Some(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 500, capacity: 1200"
            )
        );
        assert_eq!(
            cri.sandbox_count(),
            1,
            "only the pod that fits gets a sandbox"
        );
        assert_eq!(
            kubelet
                .status_manager
                .get_pod_status("small")
                .and_then(|s| s.reason),
            None
        );
        let _ = stop_tx.send(());
        running.await.unwrap();
    }
}
