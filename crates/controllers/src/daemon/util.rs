//! The DaemonSet controller's pure helpers (upstream
//! `pkg/controller/daemon/util/daemonset_util.go` and the predicates of
//! `daemon_controller.go`): the tolerations every daemon pod gets, the node affinity that
//! pins a pod to its node, whether a node should run a daemon pod, the revision a pod
//! belongs to, maxSurge and maxUnavailable, and the backoff on failed pods.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skiff_api::core::scheduling_predicates::taints::{
    TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE,
};
use skiff_api::core::scheduling_predicates::{
    find_matching_untolerated_taint, get_required_node_affinity,
};
use skiff_api::validation::scaled_value;

use crate::controller_history::revision_patch;

/// The label holding the hash of a pod's (and a ControllerRevision's) revision (upstream
/// `apps.ControllerRevisionHashLabelKey`, alias `DefaultDaemonSetUniqueLabelKey`).
pub(crate) const REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// The label holding the template generation a pod was made from (upstream
/// `extensions.DaemonSetTemplateGenerationKey`), kept for pods of old controllers.
pub(crate) const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// The annotation in which the API server counts a DaemonSet's template changes.
pub(crate) const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// The node field that `matchFields` selects on.
const NODE_NAME_FIELD: &str = "metadata.name";

/// The first delay before a failed daemon pod on a node is deleted again (upstream
/// `failedPodsBackoff` initial duration).
pub(crate) const FAILED_PODS_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest such delay.
pub(crate) const FAILED_PODS_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// The tolerations upstream adds to every daemon pod (`AddOrUpdateDaemonPodTolerations`):
/// key and effect, all with operator `Exists` and no `tolerationSeconds`. The last one,
/// `network-unavailable`, only for pods on the host network.
const DAEMON_TOLERATIONS: [(&str, &str); 7] = [
    ("node.kubernetes.io/not-ready", TAINT_EFFECT_NO_EXECUTE),
    ("node.kubernetes.io/unreachable", TAINT_EFFECT_NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", TAINT_EFFECT_NO_SCHEDULE),
    (
        "node.kubernetes.io/memory-pressure",
        TAINT_EFFECT_NO_SCHEDULE,
    ),
    ("node.kubernetes.io/pid-pressure", TAINT_EFFECT_NO_SCHEDULE),
    ("node.kubernetes.io/unschedulable", TAINT_EFFECT_NO_SCHEDULE),
    (
        "node.kubernetes.io/network-unavailable",
        TAINT_EFFECT_NO_SCHEDULE,
    ),
];

/// Adds `toleration` to the spec, replacing one with the same key, operator, value and
/// effect (upstream `AddOrUpdateTolerationInPodSpec`; `tolerationSeconds` is not
/// compared, so a bounded toleration becomes the unbounded one).
fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) {
    let same = |a: &Toleration, b: &Toleration| {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        s(&a.key) == s(&b.key)
            && s(&a.operator) == s(&b.operator)
            && s(&a.value) == s(&b.value)
            && s(&a.effect) == s(&b.effect)
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    match tolerations.iter_mut().find(|t| same(t, &toleration)) {
        Some(existing) => *existing = toleration,
        None => tolerations.push(toleration),
    }
}

/// Adds the tolerations every daemon pod has (upstream
/// `AddOrUpdateDaemonPodTolerations`): `not-ready` and `unreachable` NoExecute, so that
/// node problems never evict it; `disk-pressure`, `memory-pressure`, `pid-pressure` and
/// `unschedulable` NoSchedule; `network-unavailable` NoSchedule for host-network pods.
pub(crate) fn add_daemon_tolerations(spec: &mut PodSpec) {
    let host_network = spec.host_network == Some(true);
    for (i, (key, effect)) in DAEMON_TOLERATIONS.iter().enumerate() {
        if i == DAEMON_TOLERATIONS.len() - 1 && !host_network {
            continue;
        }
        add_or_update_toleration(
            spec,
            Toleration {
                key: Some((*key).to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some((*effect).to_owned()),
                ..Default::default()
            },
        );
    }
}

/// The affinity with its required node selector replaced by one term that selects the
/// node `node_name` by `matchFields` `metadata.name In [node_name]` (upstream
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`): the scheduler can bind the pod nowhere
/// else. The other parts of the affinity are kept; the replaced terms were already
/// checked against the node by [`node_should_run`].
pub(crate) fn replace_node_affinity(affinity: Option<Affinity>, node_name: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node_name.to_owned()]),
            }]),
            ..Default::default()
        }],
    };
    let mut affinity = affinity.unwrap_or_default();
    affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution = Some(selector);
    affinity
}

/// The node a daemon pod is for (upstream `GetTargetNodeName`): `spec.nodeName`, or for
/// a pod not bound yet the one value of its `matchFields` `metadata.name In` term.
/// Errors: no node name found, or such a term with not exactly one value.
pub(crate) fn target_node_name(pod: &Pod) -> Result<String, String> {
    let spec = pod.spec.as_ref();
    if let Some(n) = spec.and_then(|s| s.node_name.as_deref())
        && !n.is_empty()
    {
        return Ok(n.to_owned());
    }
    let terms = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.as_slice())
        .unwrap_or_default();
    for term in terms {
        for req in term.match_fields.iter().flatten() {
            if req.key == NODE_NAME_FIELD && req.operator == "In" {
                return match req.values.as_deref() {
                    Some([one]) => Ok(one.clone()),
                    _ => {
                        Err("the matchFields term on metadata.name needs exactly one value".into())
                    }
                };
            }
        }
    }
    Err("no node name in spec.nodeName nor in the required node affinity".into())
}

/// The pod the DaemonSet would run on `node_name`, for the predicates (upstream
/// `NewPod`): the template's metadata and spec, bound to the node, with the daemon
/// tolerations.
pub(crate) fn new_pod(ds: &DaemonSet, node_name: &str) -> Pod {
    let template = &ds.spec.template;
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.node_name = Some(node_name.to_owned());
    add_daemon_tolerations(&mut spec);
    let mut metadata = template.metadata.clone().unwrap_or_default();
    metadata.namespace.clone_from(&ds.metadata.namespace);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// Whether the DaemonSet should run a pod on `node`, and whether a pod already there
/// should keep running (upstream `NodeShouldRunDaemonPod`): no when the template names
/// another node or the node does not match the node selector and required node affinity
/// (a malformed term matches nothing); a taint the pod does not tolerate keeps new pods
/// off, and evicts existing ones only if its effect is NoExecute. Resources and ports
/// are not checked: the scheduler and the kubelet do that.
pub(crate) fn node_should_run(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let wanted = ds
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("");
    if !wanted.is_empty() && wanted != node_name {
        return (false, false);
    }
    let pod = new_pod(ds, node_name);
    if !get_required_node_affinity(&pod)
        .matches(node)
        .unwrap_or(false)
    {
        return (false, false);
    }
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
    let untolerated = |effects: &[&str]| {
        find_matching_untolerated_taint(taints, tolerations, |t| {
            effects.contains(&t.effect.as_str())
        })
        .is_some()
    };
    if untolerated(&[TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE]) {
        return (false, !untolerated(&[TAINT_EFFECT_NO_EXECUTE]));
    }
    (true, true)
}

/// The DaemonSet's template generation (the API server's annotation), if it parses.
pub(crate) fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// The template new pods are made from (upstream `CreatePodTemplate`): the DaemonSet's,
/// with the daemon tolerations, the `controller-revision-hash` label of the current
/// revision and the `pod-template-generation` label.
pub(crate) fn create_pod_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut t = template.clone();
    add_daemon_tolerations(t.spec.get_or_insert_with(PodSpec::default));
    let labels = t
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default);
    if let Some(g) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.to_owned(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    }
    t
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// True for a pod of the current revision (upstream `IsPodUpdated`): its
/// `controller-revision-hash` is `hash`, or its `pod-template-generation` is the
/// DaemonSet's template generation.
pub(crate) fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let hash_matches = !hash.is_empty() && label(pod, REVISION_HASH_LABEL) == Some(hash);
    let generation_matches = generation
        .is_some_and(|g| label(pod, TEMPLATE_GENERATION_LABEL) == Some(g.to_string().as_str()));
    hash_matches || generation_matches
}

/// True for the RollingUpdate strategy (the default).
pub(crate) fn is_rolling_update(ds: &DaemonSet) -> bool {
    ds.spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// maxSurge as a number of pods out of `desired` (upstream `SurgeCount`): 0 unless
/// RollingUpdate with maxSurge set; a percent is rounded up. Errors: not a percent.
pub(crate) fn surge_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    if !is_rolling_update(ds) {
        return Ok(0);
    }
    let surge = ds
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.as_ref());
    surge.map_or(Ok(0), |v| scaled_value(v, desired, true))
}

/// maxUnavailable as a number of pods out of `desired` (upstream `UnavailableCount`):
/// 0 unless RollingUpdate; 1 when unset (the API server's default); a percent is rounded
/// up. Errors: not a percent.
pub(crate) fn unavailable_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    if !is_rolling_update(ds) {
        return Ok(0);
    }
    let one = IntOrString::Int(1);
    let unavailable = ds
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&one);
    scaled_value(unavailable, desired, true)
}

/// True when a node may hold an old and a new pod at once (upstream `AllowsSurge`).
pub(crate) fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|s| s > 0)
}

/// Upstream `podByCreationTimestampAndPhase`: pods bound to a node first, then the
/// oldest, then by name.
pub(crate) fn by_age(a: &Pod, b: &Pod) -> Ordering {
    let unbound = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
    };
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    unbound(a)
        .cmp(&unbound(b))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// True when the revision holds the DaemonSet's template (upstream `Match`).
pub(crate) fn revision_matches(ds: &DaemonSet, revision: &ControllerRevision) -> bool {
    revision.data.0 == revision_patch(&ds.spec.template)
}

/// Backoff per DaemonSet and node on deleting failed pods (upstream `failedPodsBackoff`,
/// a `flowcontrol.Backoff` of 1 s doubling to 15 min, without jitter): the kubelet may
/// reject a daemon pod over and over, and the controller must not fight it in a hot
/// loop. An entry untouched for twice the maximum is forgotten.
#[derive(Debug, Default)]
pub(crate) struct FailedPodsBackoff {
    /// Key -> (current delay, last update).
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl FailedPodsBackoff {
    fn expired(now: Instant, last: Instant) -> bool {
        now.saturating_duration_since(last) > FAILED_PODS_BACKOFF_MAX * 2
    }

    /// The current delay of `key` if it is still waiting at `now` (upstream
    /// `IsInBackOffSinceUpdate` and `Get`).
    pub(crate) fn in_backoff(&self, key: &str, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (delay, last) = *entries.get(key)?;
        (!Self::expired(now, last) && now.saturating_duration_since(last) < delay).then_some(delay)
    }

    /// Starts or doubles the delay of `key` at `now` (upstream `Next`), and forgets the
    /// expired entries (upstream `GC`).
    pub(crate) fn next(&self, key: &str, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let delay = match entries.get(key) {
            Some((d, last)) if !Self::expired(now, *last) => (*d * 2).min(FAILED_PODS_BACKOFF_MAX),
            _ => FAILED_PODS_BACKOFF_INITIAL,
        };
        entries.insert(key.to_owned(), (delay, now));
        entries.retain(|_, (_, last)| !Self::expired(now, *last));
    }
}

/// The backoff key of the DaemonSet's failed pods on `node` (upstream
/// `failedPodsBackoffKey`: uid, observed generation, node).
pub(crate) fn failed_pods_backoff_key(ds: &DaemonSet, node: &str) -> String {
    format!(
        "{}/{}/{node}",
        ds.metadata.uid.as_deref().unwrap_or(""),
        ds.status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::apps::v1::{
        DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
    };
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use serde_json::json;

    use super::*;

    pub(crate) fn daemon_set(spec: PodSpec) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("ds".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_owned(), "d".to_owned())].into()),
                        ..Default::default()
                    }),
                    spec: Some(spec),
                },
                ..Default::default()
            },
            status: None,
        }
    }

    pub(crate) fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: (*k).into(),
                            effect: (*e).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn keys(spec: &PodSpec) -> Vec<(String, String)> {
        spec.tolerations
            .iter()
            .flatten()
            .map(|t| (t.key.clone().unwrap(), t.effect.clone().unwrap()))
            .collect()
    }

    #[test]
    fn daemon_pods_tolerate_node_problems() {
        let mut spec = PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("node.kubernetes.io/not-ready".into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                ..Default::default()
            }]),
            ..Default::default()
        };
        add_daemon_tolerations(&mut spec);
        let got = keys(&spec);
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(got[0].0, "node.kubernetes.io/not-ready");
        // The bounded toleration became the unbounded one.
        let first = &spec.tolerations.as_ref().unwrap()[0];
        assert_eq!(first.toleration_seconds, None);
        assert!(
            got.iter()
                .all(|(k, _)| k != "node.kubernetes.io/network-unavailable")
        );
        // Again: nothing changes.
        let before = spec.clone();
        add_daemon_tolerations(&mut spec);
        assert_eq!(spec, before);
        let mut host = PodSpec {
            host_network: Some(true),
            ..Default::default()
        };
        add_daemon_tolerations(&mut host);
        assert!(keys(&host).contains(&(
            "node.kubernetes.io/network-unavailable".into(),
            "NoSchedule".into()
        )));
    }

    #[test]
    fn should_run_follows_selector_affinity_and_taints() {
        let plain = daemon_set(PodSpec::default());
        assert_eq!(node_should_run(&node("n1", &[], &[]), &plain), (true, true));
        // An untolerated NoSchedule taint: no new pod, an existing one stays.
        let tainted = node("n2", &[], &[("dedicated", "NoSchedule")]);
        assert_eq!(node_should_run(&tainted, &plain), (false, true));
        // NoExecute evicts; PreferNoSchedule is ignored.
        let evicting = node("n3", &[], &[("dedicated", "NoExecute")]);
        assert_eq!(node_should_run(&evicting, &plain), (false, false));
        let prefer = node("n4", &[], &[("dedicated", "PreferNoSchedule")]);
        assert_eq!(node_should_run(&prefer, &plain), (true, true));
        // The daemon tolerations: an unschedulable or not-ready node still runs it.
        let cordoned = node(
            "n5",
            &[],
            &[
                ("node.kubernetes.io/unschedulable", "NoSchedule"),
                ("node.kubernetes.io/not-ready", "NoExecute"),
            ],
        );
        assert_eq!(node_should_run(&cordoned, &plain), (true, true));
        // A tolerated taint.
        let tolerant = daemon_set(PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(node_should_run(&evicting, &tolerant), (true, true));
        // nodeSelector.
        let selective = daemon_set(PodSpec {
            node_selector: Some([("disk".to_owned(), "ssd".to_owned())].into()),
            ..Default::default()
        });
        assert_eq!(
            node_should_run(&node("n6", &[("disk", "ssd")], &[]), &selective),
            (true, true)
        );
        assert_eq!(
            node_should_run(&node("n7", &[("disk", "hdd")], &[]), &selective),
            (false, false)
        );
        // Required node affinity, and a template bound to another node.
        let affine = daemon_set(PodSpec {
            affinity: Some(Affinity {
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
            }),
            ..Default::default()
        });
        assert!(node_should_run(&node("n8", &[("zone", "a")], &[]), &affine).0);
        assert!(!node_should_run(&node("n9", &[("zone", "b")], &[]), &affine).1);
        let bound = daemon_set(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        assert_eq!(
            node_should_run(&node("n2", &[], &[]), &bound),
            (false, false)
        );
        assert_eq!(node_should_run(&node("n1", &[], &[]), &bound), (true, true));
    }

    #[test]
    fn pods_are_pinned_to_their_node_by_match_fields() {
        let mut existing = Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm::default(); 2],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        existing.pod_anti_affinity = Some(Default::default());
        for before in [None, Some(Affinity::default()), Some(existing)] {
            let had_anti = before
                .as_ref()
                .is_some_and(|a| a.pod_anti_affinity.is_some());
            let a = replace_node_affinity(before, "n1");
            assert_eq!(a.pod_anti_affinity.is_some(), had_anti);
            let terms = &a
                .node_affinity
                .unwrap()
                .required_during_scheduling_ignored_during_execution
                .unwrap()
                .node_selector_terms;
            assert_eq!(terms.len(), 1);
            let f = &terms[0].match_fields.as_ref().unwrap()[0];
            assert_eq!(
                (f.key.as_str(), f.operator.as_str(), f.values.clone()),
                ("metadata.name", "In", Some(vec!["n1".to_owned()]))
            );
            assert_eq!(terms[0].match_expressions, None);
        }
        let pod = Pod {
            spec: Some(PodSpec {
                affinity: Some(replace_node_affinity(None, "n7")),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(target_node_name(&pod).as_deref(), Ok("n7"));
        let mut bound = pod.clone();
        bound.spec.as_mut().unwrap().node_name = Some("n8".into());
        assert_eq!(target_node_name(&bound).as_deref(), Ok("n8"));
        assert!(target_node_name(&Pod::default()).is_err());
    }

    #[test]
    fn templates_carry_the_revision_and_pods_are_matched_to_it() {
        let ds = daemon_set(PodSpec::default());
        let t = create_pod_template(&ds.spec.template, Some(3), "abc");
        let labels = t.metadata.as_ref().unwrap().labels.clone().unwrap();
        assert_eq!(labels.get("app").map(String::as_str), Some("d"));
        assert_eq!(
            labels.get(REVISION_HASH_LABEL).map(String::as_str),
            Some("abc")
        );
        assert_eq!(
            labels.get(TEMPLATE_GENERATION_LABEL).map(String::as_str),
            Some("3")
        );
        assert_eq!(keys(t.spec.as_ref().unwrap()).len(), 6);
        let pod = Pod {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(is_pod_updated(&pod, "abc", None));
        assert!(is_pod_updated(&pod, "xyz", Some(3)));
        assert!(!is_pod_updated(&pod, "xyz", Some(4)));
        assert!(!is_pod_updated(&pod, "", None));
    }

    #[test]
    fn surge_and_unavailable_round_up() {
        let mut ds = daemon_set(PodSpec::default());
        assert_eq!(unavailable_count(&ds, 10), Ok(1));
        assert_eq!(surge_count(&ds, 10), Ok(0));
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: Some(IntOrString::String("25%".into())),
                max_unavailable: Some(IntOrString::String("10%".into())),
            }),
        });
        assert_eq!(surge_count(&ds, 10), Ok(3));
        assert_eq!(unavailable_count(&ds, 3), Ok(1));
        assert!(allows_surge(&ds));
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        assert_eq!(
            (surge_count(&ds, 10), unavailable_count(&ds, 10)),
            (Ok(0), Ok(0))
        );
        assert!(!allows_surge(&ds));
    }

    #[test]
    fn bound_and_older_pods_sort_first() {
        let pod = |name: &str, node: &str, at: &str| Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(at.parse().unwrap())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.to_owned()),
                ..Default::default()
            }),
            status: None,
        };
        let mut pods = [
            pod("c", "", "2026-01-01T00:00:00Z"),
            pod("b", "n1", "2026-01-02T00:00:00Z"),
            pod("a", "n1", "2026-01-02T00:00:00Z"),
            pod("d", "n1", "2026-01-01T00:00:00Z"),
        ];
        pods.sort_by(by_age);
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["d", "a", "b", "c"]);
    }

    #[test]
    fn revisions_replace_the_template() {
        let ds = daemon_set(PodSpec::default());
        let patch = revision_patch(&ds.spec.template);
        assert_eq!(
            patch.pointer("/spec/template/$patch"),
            Some(&json!("replace"))
        );
        assert_eq!(
            patch.pointer("/spec/template/metadata/labels/app"),
            Some(&json!("d"))
        );
        let mut rev = ControllerRevision::default();
        rev.data.0 = patch;
        assert!(revision_matches(&ds, &rev));
        let mut other = ds.clone();
        other.spec.template.spec.as_mut().unwrap().host_network = Some(true);
        assert!(!revision_matches(&other, &rev));
    }

    #[test]
    fn failed_pod_backoff_doubles_and_expires() {
        let b = FailedPodsBackoff::default();
        let t0 = Instant::now();
        assert_eq!(b.in_backoff("k", t0), None);
        b.next("k", t0);
        assert_eq!(b.in_backoff("k", t0), Some(Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(b.in_backoff("k", t1), None);
        b.next("k", t1);
        assert_eq!(b.in_backoff("k", t1), Some(Duration::from_secs(2)));
        // Forgotten after twice the maximum.
        let late = t1 + FAILED_PODS_BACKOFF_MAX * 3;
        b.next("k", late);
        assert_eq!(b.in_backoff("k", late), Some(Duration::from_secs(1)));
    }
}
