//! What PodTopologySpread's filter and score share (upstream `podtopologyspread/common.go`
//! and `helper.DefaultSelector`): the parsed constraints, the node inclusion policies, the
//! default selector of a pod's owners and the counting of matching pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, TopologySpreadConstraint as ApiConstraint};
use skiff_api::core::scheduling_predicates::find_matching_untolerated_taint;
use skiff_api::core::scheduling_predicates::node_affinity::RequiredNodeAffinity;
use skiff_api::selector::LabelSelector;

use crate::framework::types::PodInfo;
use crate::informers::Listers;

/// `whenUnsatisfiable: DoNotSchedule`: a hard constraint (Filter).
pub const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable: ScheduleAnyway`: a soft constraint (Score).
pub const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";
/// The node label of the per-node topology (`kubernetes.io/hostname`).
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The node label of zones (`topology.kubernetes.io/zone`).
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

/// Whether a node inclusion policy takes the pod's node affinity or the node's taints into
/// account when counting domains (upstream `NodeInclusionPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeInclusionPolicy {
    /// Only nodes that satisfy the pod's node affinity / tolerate the taints count.
    Honor,
    /// Every node counts.
    Ignore,
}

impl NodeInclusionPolicy {
    fn parse(v: Option<&str>, default: Self) -> Self {
        match v {
            Some("Honor") => Self::Honor,
            Some("Ignore") => Self::Ignore,
            _ => default,
        }
    }
}

/// A parsed topology spread constraint (upstream `topologySpreadConstraint`).
#[derive(Debug, Clone)]
pub struct Constraint {
    /// The largest allowed difference between a domain's count and the global minimum.
    pub max_skew: i32,
    /// The node label defining the domains.
    pub topology_key: String,
    /// The pods counted (`labelSelector` merged with `matchLabelKeys`).
    pub selector: LabelSelector,
    /// Below this many eligible domains, the global minimum is taken as 0 (default 1).
    pub min_domains: i32,
    /// `nodeAffinityPolicy` (default Honor).
    pub node_affinity_policy: NodeInclusionPolicy,
    /// `nodeTaintsPolicy` (default Ignore).
    pub node_taints_policy: NodeInclusionPolicy,
}

impl Constraint {
    /// Whether `node` counts for this constraint under its inclusion policies (upstream
    /// `matchNodeInclusionPolicies`); node affinity parse errors count as no match.
    pub fn match_node_inclusion_policies(
        &self,
        pod: &Pod,
        node: &Node,
        required: &RequiredNodeAffinity<'_>,
    ) -> bool {
        if self.node_affinity_policy == NodeInclusionPolicy::Honor
            && !required.matches(node).unwrap_or(false)
        {
            return false;
        }
        if self.node_taints_policy == NodeInclusionPolicy::Honor {
            let taints = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .unwrap_or_default();
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default();
            if find_matching_untolerated_taint(taints, tolerations, |t| {
                t.effect == "NoSchedule" || t.effect == "NoExecute"
            })
            .is_some()
            {
                return false;
            }
        }
        true
    }
}

/// The constraints of `constraints` with `whenUnsatisfiable == action`, parsed (upstream
/// `filterTopologySpreadConstraints`): the values of `matchLabelKeys` in `pod_labels` are
/// added to the selector. Errors with the selector's parse error.
pub fn filter_constraints(
    constraints: &[ApiConstraint],
    pod_labels: &BTreeMap<String, String>,
    action: &str,
) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    for c in constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
    {
        let mut selector = LabelSelector::from_meta_option(c.label_selector.as_ref())?;
        let match_labels: BTreeMap<String, String> = c
            .match_label_keys
            .iter()
            .flatten()
            .filter_map(|k| pod_labels.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        // A selector of nothing stays so (upstream `mergeLabelSetWithSelector`).
        let is_nothing = !selector.is_empty() && selector.requirements().is_empty();
        if !match_labels.is_empty() && !is_nothing {
            let mut merged = LabelSelector::from_labels(&match_labels);
            for r in selector.requirements() {
                merged.add(r.clone());
            }
            selector = merged;
        }
        out.push(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            node_affinity_policy: NodeInclusionPolicy::parse(
                c.node_affinity_policy.as_deref(),
                NodeInclusionPolicy::Honor,
            ),
            node_taints_policy: NodeInclusionPolicy::parse(
                c.node_taints_policy.as_deref(),
                NodeInclusionPolicy::Ignore,
            ),
        });
    }
    Ok(out)
}

/// The selector of the pods spread with `pod` (upstream `helper.DefaultSelector`): the
/// selectors of the Services of its namespace that select it, merged with the selector of
/// its controlling ReplicationController, ReplicaSet or StatefulSet.
pub fn default_selector(pod: &Pod, listers: &Listers) -> LabelSelector {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let empty = BTreeMap::new();
    let pod_labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let mut label_set: BTreeMap<String, String> = BTreeMap::new();
    for svc in listers.services.list() {
        if svc.metadata.namespace.as_deref().unwrap_or_default() != ns {
            continue;
        }
        // Services with a null selector select nothing.
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        if sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v)) {
            label_set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut selector = LabelSelector::from_labels(&label_set);
    let Some(owner) = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    else {
        return selector;
    };
    let key = format!("{ns}/{}", owner.name);
    let add_requirements =
        |selector: &mut LabelSelector,
         meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector| {
            if let Ok(other) = LabelSelector::from_meta(meta) {
                for r in other.requirements() {
                    selector.add(r.clone());
                }
            }
        };
    match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            if let Some(rc) = listers.replication_controllers.get(&key) {
                if let Some(sel) = rc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
                    label_set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                selector = LabelSelector::from_labels(&label_set);
            }
        }
        ("apps/v1", "ReplicaSet") => {
            if let Some(spec) = listers.replica_sets.get(&key).map(|rs| rs.spec.clone()) {
                add_requirements(&mut selector, &spec.selector);
            }
        }
        ("apps/v1", "StatefulSet") => {
            if let Some(spec) = listers.stateful_sets.get(&key).map(|ss| ss.spec.clone()) {
                add_requirements(&mut selector, &spec.selector);
            }
        }
        _ => {}
    }
    selector
}

/// Whether `labels` has every topology key of `constraints` (upstream
/// `nodeLabelsMatchSpreadConstraints`).
pub fn node_labels_match_spread_constraints(
    labels: Option<&BTreeMap<String, String>>,
    constraints: &[Constraint],
) -> bool {
    constraints
        .iter()
        .all(|c| labels.is_some_and(|l| l.contains_key(&c.topology_key)))
}

/// The pods of `pods` in namespace `ns`, not terminating, matching `selector`; 0 for an
/// empty selector (upstream `countPodsMatchSelector`).
pub fn count_pods_match_selector(
    pods: &[std::sync::Arc<PodInfo>],
    selector: &LabelSelector,
    ns: &str,
) -> i64 {
    if selector.is_empty() {
        return 0;
    }
    let empty = BTreeMap::new();
    pods.iter()
        .filter(|p| {
            p.pod.metadata.deletion_timestamp.is_none()
                && p.pod.metadata.namespace.as_deref().unwrap_or_default() == ns
                && selector.matches(p.pod.metadata.labels.as_ref().unwrap_or(&empty))
        })
        .count() as i64
}

/// Whether `labels` match the selector of any constraint (upstream
/// `podLabelsMatchSpreadConstraints`).
pub fn pod_labels_match_spread_constraints(
    constraints: &[Constraint],
    labels: &BTreeMap<String, String>,
) -> bool {
    constraints.iter().any(|c| c.selector.matches(labels))
}

/// The value of node label `key`.
pub fn node_label<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.labels.as_ref().and_then(|l| l.get(key))
}
