//! The scheduler's view of pods and nodes (upstream `pkg/scheduler/framework/types.go`):
//! [`PodInfo`] (a pod with its requests and parsed affinity terms, computed once) and
//! [`NodeInfo`] (a node with the pods on it, what they request and the images it has).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};
use skiff_api::core::pod::requests::{
    DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, PodResourcesOptions, ResourceAmounts,
    pod_requests,
};
use skiff_api::core::scheduling_predicates::NodeInfo as ResourceInfo;
use skiff_api::selector::{LabelSelector, Operator, Requirement};

/// The highest score a Score plugin may give after normalization (upstream
/// `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest score (upstream `MinNodeScore`).
pub const MIN_NODE_SCORE: i64 = 0;

/// `namespace/name` of a pod or a namespaced object.
pub fn namespaced_key(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    namespaced_key(
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    )
}

/// The pod's uid ("" when unset).
pub fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The pod's `spec.nodeName` ("" when unset).
pub fn pod_node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The pod's priority (`spec.priority`, 0 when unset; upstream `corev1helpers.PodPriority`).
pub fn pod_priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// A pod affinity or anti-affinity term with its selectors parsed (upstream
/// `framework.AffinityTerm`): it matches a pod whose namespace is in `namespaces` or
/// matches `namespace_selector`, and whose labels match `selector`.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    /// The namespaces named by the term; the pod's own when neither `namespaces` nor
    /// `namespaceSelector` is set.
    pub namespaces: BTreeSet<String>,
    /// The label selector over pods (`labelSelector`, merged with `matchLabelKeys` /
    /// `mismatchLabelKeys` of the owning pod's labels).
    pub selector: LabelSelector,
    /// The node label whose value defines the topology domain.
    pub topology_key: String,
    /// The selector over namespace labels (`namespaceSelector`); matches nothing when
    /// unset.
    pub namespace_selector: LabelSelector,
}

impl AffinityTerm {
    /// Whether `pod` (with `ns_labels`, the labels of its namespace) matches the term
    /// (upstream `AffinityTerm.Matches`).
    pub fn matches(&self, pod: &Pod, ns_labels: Option<&BTreeMap<String, String>>) -> bool {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        if self.namespaces.contains(ns)
            || ns_labels.is_some_and(|l| self.namespace_selector.matches(l))
        {
            return self.selector.matches(labels);
        }
        false
    }
}

/// An [`AffinityTerm`] with its `weight` (1..=100), for preferred terms.
#[derive(Debug, Clone)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight.
    pub weight: i32,
}

/// A pod and what the scheduler derives from it once (upstream `framework.PodInfo`).
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Its effective requests, as for fit (upstream `PodRequests`).
    pub requests: ResourceAmounts,
    /// Its requests with the scheduler's defaults for containers without cpu or memory
    /// requests (100m, 200 MiB): what the scorers count (upstream `NonZeroRequested`).
    pub non_zero_requests: ResourceAmounts,
    /// `spec.affinity.podAffinity.requiredDuringScheduling...`.
    pub required_affinity_terms: Vec<AffinityTerm>,
    /// `spec.affinity.podAntiAffinity.requiredDuringScheduling...`.
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    /// `spec.affinity.podAffinity.preferredDuringScheduling...`.
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    /// `spec.affinity.podAntiAffinity.preferredDuringScheduling...`.
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Why a term could not be parsed (a bad selector): the pod is then unschedulable
    /// with this message, as upstream's PreFilter reports a parse error.
    pub parse_error: Option<String>,
}

/// The options the scheduler computes requests with (kept equal to the kubelet's
/// admission: overhead counted, pod-level resources honoured).
pub fn resource_options() -> PodResourcesOptions {
    PodResourcesOptions::default()
}

fn non_zero_options() -> PodResourcesOptions {
    PodResourcesOptions {
        non_missing_container_requests: [
            ("cpu".to_owned(), DEFAULT_MILLI_CPU_REQUEST),
            ("memory".to_owned(), DEFAULT_MEMORY_REQUEST),
        ]
        .into(),
        ..resource_options()
    }
}

/// Parses one pod affinity term of `pod` (upstream `newAffinityTerm`): namespaces default
/// to the pod's own; `matchLabelKeys` / `mismatchLabelKeys` add `In` / `NotIn`
/// requirements on the pod's values of those labels.
pub fn parse_affinity_term(pod: &Pod, term: &PodAffinityTerm) -> Result<AffinityTerm, String> {
    let own_ns = pod.metadata.namespace.clone().unwrap_or_default();
    let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
    if namespaces.is_empty() && term.namespace_selector.is_none() {
        namespaces.insert(own_ns);
    }
    let mut selector = LabelSelector::from_meta_option(term.label_selector.as_ref())?;
    if term.label_selector.is_some() {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let keys = |keys: Option<&Vec<String>>, op: Operator| -> Result<Vec<Requirement>, String> {
            keys.into_iter()
                .flatten()
                .filter_map(|k| labels.get(k).map(|v| (k, v)))
                .map(|(k, v)| Requirement::new(k, op, vec![v.clone()]))
                .collect()
        };
        for r in keys(term.match_label_keys.as_ref(), Operator::In)?
            .into_iter()
            .chain(keys(term.mismatch_label_keys.as_ref(), Operator::NotIn)?)
        {
            selector.add(r);
        }
    }
    let namespace_selector = match term.namespace_selector.as_ref() {
        Some(s) => LabelSelector::from_meta(s)?,
        None => LabelSelector::nothing(),
    };
    Ok(AffinityTerm {
        namespaces,
        selector,
        topology_key: term.topology_key.clone(),
        namespace_selector,
    })
}

impl PodInfo {
    /// Derives the requests and affinity terms of `pod`. A term that does not parse
    /// leaves [`parse_error`](Self::parse_error) set; the pod is still tracked.
    pub fn new(pod: impl Into<Arc<Pod>>) -> Self {
        let pod = pod.into();
        let requests = pod_requests(&pod, &resource_options());
        let non_zero_requests = pod_requests(&pod, &non_zero_options());
        let mut info = Self {
            pod,
            requests,
            non_zero_requests,
            required_affinity_terms: Vec::new(),
            required_anti_affinity_terms: Vec::new(),
            preferred_affinity_terms: Vec::new(),
            preferred_anti_affinity_terms: Vec::new(),
            parse_error: None,
        };
        info.parse_terms();
        info
    }

    fn parse_terms(&mut self) {
        let pod = Arc::clone(&self.pod);
        let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
            return;
        };
        let mut errors = Vec::new();
        let mut required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    parse_affinity_term(&pod, t)
                        .map_err(|e| errors.push(e))
                        .ok()
                })
                .collect()
        };
        if let Some(a) = affinity.pod_affinity.as_ref() {
            self.required_affinity_terms = required(
                a.required_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
        if let Some(a) = affinity.pod_anti_affinity.as_ref() {
            self.required_anti_affinity_terms = required(
                a.required_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
        let mut preferred =
            |terms: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
                terms
                    .into_iter()
                    .flatten()
                    .filter_map(|w| {
                        parse_affinity_term(&pod, &w.pod_affinity_term)
                            .map(|term| WeightedAffinityTerm {
                                term,
                                weight: w.weight,
                            })
                            .map_err(|e| errors.push(e))
                            .ok()
                    })
                    .collect::<Vec<_>>()
            };
        if let Some(a) = affinity.pod_affinity.as_ref() {
            self.preferred_affinity_terms = preferred(
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
        if let Some(a) = affinity.pod_anti_affinity.as_ref() {
            self.preferred_anti_affinity_terms = preferred(
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
        if !errors.is_empty() {
            self.parse_error = Some(errors.join("; "));
        }
    }

    /// The pod's `namespace/name`.
    pub fn key(&self) -> String {
        pod_key(&self.pod)
    }

    /// The pod's uid.
    pub fn uid(&self) -> &str {
        pod_uid(&self.pod)
    }

    /// True when the pod has pod affinity or anti-affinity terms (required or preferred).
    pub fn has_affinity(&self) -> bool {
        !self.required_affinity_terms.is_empty()
            || !self.required_anti_affinity_terms.is_empty()
            || !self.preferred_affinity_terms.is_empty()
            || !self.preferred_anti_affinity_terms.is_empty()
    }
}

/// An image on a node and how many nodes of the cluster have it (upstream
/// `ImageStateSummary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageStateSummary {
    /// Its size in bytes.
    pub size: i64,
    /// The number of nodes that have it.
    pub num_nodes: usize,
}

/// A node, the pods assigned or assumed on it and what they use (upstream
/// `framework.NodeInfo`). Cloning shares the node and the pods.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    resources: ResourceInfo,
    pods: Vec<Arc<PodInfo>>,
    pods_with_affinity: usize,
    pods_with_required_anti_affinity: usize,
    non_zero_requested: ResourceAmounts,
    /// The node's images (by every name they have) and their spread over the cluster;
    /// kept by the cache.
    pub image_states: HashMap<String, ImageStateSummary>,
    /// How many pods on the node use each PVC (`namespace/claim`).
    pub pvc_ref_counts: HashMap<String, usize>,
    /// Bumped on every change; the snapshot copies only changed nodes.
    pub generation: u64,
}

impl NodeInfo {
    /// The node with no pods.
    pub fn new(node: impl Into<Arc<Node>>) -> Self {
        Self {
            resources: ResourceInfo::new(node, resource_options()),
            pods: Vec::new(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
            non_zero_requested: ResourceAmounts::new(),
            image_states: HashMap::new(),
            pvc_ref_counts: HashMap::new(),
            generation: 0,
        }
    }

    /// The node.
    pub fn node(&self) -> &Node {
        self.resources.node()
    }

    /// The node, shared.
    pub fn node_arc(&self) -> &Arc<Node> {
        self.resources.node_arc()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.node().metadata.name.as_deref().unwrap_or_default()
    }

    /// Replaces the node object; the pods stay.
    pub fn set_node(&mut self, node: impl Into<Arc<Node>>) {
        self.resources.set_node(node);
    }

    /// The resource view shared with the kubelet's admission (allocatable, requested,
    /// pod count, host ports).
    pub fn resources(&self) -> &ResourceInfo {
        &self.resources
    }

    /// The node's allocatable amounts.
    pub fn allocatable(&self) -> &ResourceAmounts {
        self.resources.allocatable()
    }

    /// The sum of the pods' requests.
    pub fn requested(&self) -> &ResourceAmounts {
        self.resources.requested()
    }

    /// The sum of the pods' non-zero requests (see [`PodInfo::non_zero_requests`]).
    pub fn non_zero_requested(&self) -> &ResourceAmounts {
        &self.non_zero_requested
    }

    /// The pods on the node.
    pub fn pods(&self) -> &[Arc<PodInfo>] {
        &self.pods
    }

    /// The pods on the node with pod affinity or anti-affinity terms.
    pub fn pods_with_affinity(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.pods.iter().filter(|p| p.has_affinity())
    }

    /// The pods on the node with required anti-affinity terms.
    pub fn pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.pods
            .iter()
            .filter(|p| !p.required_anti_affinity_terms.is_empty())
    }

    /// True when a pod on the node has affinity terms.
    pub fn has_pods_with_affinity(&self) -> bool {
        self.pods_with_affinity > 0
    }

    /// True when a pod on the node has required anti-affinity terms.
    pub fn has_pods_with_required_anti_affinity(&self) -> bool {
        self.pods_with_required_anti_affinity > 0
    }

    /// Adds a pod (upstream `AddPodInfo`).
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.resources
            .add_pod_with_requests(&pod.pod, &pod.requests);
        skiff_api::core::pod::requests::add_amounts(
            &mut self.non_zero_requested,
            &pod.non_zero_requests,
        );
        if pod.has_affinity() {
            self.pods_with_affinity += 1;
        }
        if !pod.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        for claim in pvc_keys(&pod.pod) {
            *self.pvc_ref_counts.entry(claim).or_default() += 1;
        }
        self.pods.push(pod);
        self.generation += 1;
    }

    /// Removes the pod with `uid`; false when it is not on the node (upstream
    /// `RemovePod`).
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.uid() == uid) else {
            return false;
        };
        let pod = self.pods.swap_remove(i);
        self.resources
            .remove_pod_with_requests(&pod.pod, &pod.requests);
        for (name, v) in &pod.non_zero_requests {
            if let Some(e) = self.non_zero_requested.get_mut(name) {
                *e = e.saturating_sub(*v);
            }
        }
        if pod.has_affinity() {
            self.pods_with_affinity -= 1;
        }
        if !pod.required_anti_affinity_terms.is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        for claim in pvc_keys(&pod.pod) {
            if let Some(n) = self.pvc_ref_counts.get_mut(&claim) {
                *n -= 1;
                if *n == 0 {
                    self.pvc_ref_counts.remove(&claim);
                }
            }
        }
        self.generation += 1;
        true
    }
}

/// The `namespace/claim` of every PVC a pod uses (its `persistentVolumeClaim` volumes and
/// generic ephemeral volumes, whose claim is `<pod>-<volume>`).
pub fn pvc_keys(pod: &Pod) -> Vec<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            if let Some(pvc) = v.persistent_volume_claim.as_ref() {
                Some(format!("{ns}/{}", pvc.claim_name))
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| format!("{ns}/{name}-{}", v.name))
            }
        })
        .collect()
}

/// A node's name and score (upstream `NodeScore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore {
    /// The node's name.
    pub name: String,
    /// Its score.
    pub score: i64,
}
