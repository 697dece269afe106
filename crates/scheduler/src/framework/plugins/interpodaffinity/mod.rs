//! InterPodAffinity (upstream `framework/plugins/interpodaffinity`): the pod's required
//! pod affinity and anti-affinity, and the required anti-affinity of the pods already
//! scheduled, as a filter ([`filtering`]); the preferred terms of both sides as a score
//! ([`scoring`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;

use crate::error::Error;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreScorePlugin, QueueingHint, ScorePlugin,
};
use crate::framework::runtime::Handle;
use crate::framework::types::{AffinityTerm, PodInfo, pod_node_name};
use crate::informers::Listers;

pub mod filtering;
pub mod scoring;

/// The plugin's name.
pub const NAME: &str = "InterPodAffinity";

/// The lowest `hardPodAffinityWeight` accepted.
const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
/// The highest `hardPodAffinityWeight` accepted.
const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

fn default_hard_pod_affinity_weight() -> i32 {
    1
}

/// The plugin's arguments (upstream `InterPodAffinityArgs`, `kind` and `apiVersion`
/// ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    /// The score an existing pod's required affinity term gives to the nodes of its
    /// topology domain when the incoming pod matches it (0..=100, default 1).
    #[serde(default = "default_hard_pod_affinity_weight")]
    pub hard_pod_affinity_weight: i32,
    /// When true, the preferred terms of existing pods are not scored for an incoming pod
    /// without preferred terms of its own (default false).
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: default_hard_pod_affinity_weight(),
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

impl InterPodAffinityArgs {
    /// Decodes and validates `args` (None: the defaults). Errors: [`Error::Config`] when
    /// the object does not decode or `hardPodAffinityWeight` is outside `0..=100`
    /// (upstream `ValidateInterPodAffinityArgs`).
    pub fn parse(args: Option<&serde_json::Value>) -> Result<Self, Error> {
        let parsed: Self = match args {
            None | Some(serde_json::Value::Null) => Self::default(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::Config(format!("decoding InterPodAffinityArgs: {e}")))?,
        };
        let w = parsed.hard_pod_affinity_weight;
        if !(MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
            return Err(Error::Config(format!(
                "hardPodAffinityWeight: Invalid value: {w}: not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
            )));
        }
        Ok(parsed)
    }
}

/// The InterPodAffinity plugin: PreFilter (with extensions), Filter, PreScore and Score.
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
    listers: Arc<Listers>,
}

impl std::fmt::Debug for InterPodAffinity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterPodAffinity")
            .field("args", &self.args)
            .finish()
    }
}

/// Builds the plugin from its `args` (upstream `New`). Errors: [`Error::Config`] for bad
/// args.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(InterPodAffinity::with_args(
        InterPodAffinityArgs::parse(args)?,
        Arc::clone(&handle.listers),
    )))
}

impl InterPodAffinity {
    /// The plugin with parsed `args`, reading namespaces from `listers`.
    pub fn with_args(args: InterPodAffinityArgs, listers: Arc<Listers>) -> Self {
        Self { args, listers }
    }

    /// Resolves a term's namespace selector into its namespace set, as upstream's
    /// `mergeAffinityTermNamespacesIfNotEmpty`: an empty selector (all namespaces) is
    /// kept; any other is replaced by the names of the namespaces it matches now and then
    /// by a selector of nothing.
    fn merge_affinity_term_namespaces(&self, term: &mut AffinityTerm) {
        if term.namespace_selector.is_empty() {
            return;
        }
        for ns in self.listers.namespaces.list() {
            let labels = ns.metadata.labels.clone().unwrap_or_default();
            if term.namespace_selector.matches(&labels)
                && let Some(name) = ns.metadata.name.as_ref()
            {
                term.namespaces.insert(name.clone());
            }
        }
        term.namespace_selector = skiff_api::selector::LabelSelector::nothing();
    }

    /// The labels of namespace `ns` (empty when unknown; upstream
    /// `GetNamespaceLabelsSnapshot`).
    fn namespace_labels(&self, ns: &str) -> BTreeMap<String, String> {
        self.listers
            .namespaces
            .get(ns)
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }

    /// Assigned pods added, relabelled or deleted, and nodes added or relabelled
    /// (upstream `EventsToRegister` with queueing hints enabled).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                is_schedulable_after_node_change,
            ),
        ])
    }
}

/// The empty label set upstream passes as `nil` namespace labels: an empty namespace
/// selector matches it.
pub(crate) fn no_labels() -> &'static BTreeMap<String, String> {
    static EMPTY: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(BTreeMap::new)
}

/// True when `pod` matches every term of a non-empty `terms` (upstream
/// `podMatchesAllAffinityTerms`, namespace labels not looked up).
pub(crate) fn pod_matches_all_affinity_terms(terms: &[AffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, Some(no_labels())))
}

fn node_label<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.labels.as_ref().and_then(|l| l.get(key))
}

fn as_pod(o: EventObject<'_>) -> Option<&Pod> {
    match o {
        EventObject::Pod(p) => Some(p),
        _ => None,
    }
}

fn as_node(o: EventObject<'_>) -> Option<&Node> {
    match o {
        EventObject::Node(n) => Some(n),
        _ => None,
    }
}

/// Queueing hint for assigned pod events (upstream `isSchedulableAfterPodChange`).
fn is_schedulable_after_pod_change(
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let (original, modified) = (as_pod(old), as_pod(new));
    if modified.is_some_and(|p| pod_node_name(p).is_empty())
        || original.is_some_and(|p| pod_node_name(p).is_empty())
    {
        return QueueingHint::QueueSkip;
    }
    let info = PodInfo::new(pod.clone());
    if info.parse_error.is_some() {
        return QueueingHint::Queue;
    }
    let terms = &info.required_affinity_terms;
    let anti_terms = &info.required_anti_affinity_terms;
    match (original, modified) {
        (Some(o), Some(m)) => {
            if !pod_matches_all_affinity_terms(terms, o) && pod_matches_all_affinity_terms(terms, m)
            {
                return QueueingHint::Queue;
            }
            if pod_matches_all_affinity_terms(anti_terms, o)
                && !pod_matches_all_affinity_terms(anti_terms, m)
            {
                return QueueingHint::Queue;
            }
            QueueingHint::QueueSkip
        }
        (None, Some(m)) => {
            if pod_matches_all_affinity_terms(terms, m) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (Some(o), None) => {
            if pod_matches_all_affinity_terms(anti_terms, o) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (None, None) => QueueingHint::Queue,
    }
}

/// Queueing hint for node events (upstream `isSchedulableAfterNodeChange`): a node that
/// gains (or changes) a topology key of the pod's affinity, or, for anti-affinity, any new
/// node or a node that loses or changes one.
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let (original, Some(modified)) = (as_node(old), as_node(new)) else {
        return QueueingHint::Queue;
    };
    let info = PodInfo::new(pod.clone());
    if info.parse_error.is_some() {
        return QueueingHint::Queue;
    }
    for term in &info.required_affinity_terms {
        let key = term.topology_key.as_str();
        match original {
            None => {
                if node_label(modified, key).is_some() {
                    return QueueingHint::Queue;
                }
            }
            Some(o) => match (node_label(o, key), node_label(modified, key)) {
                (Some(a), Some(b)) if a != b => return QueueingHint::Queue,
                (None, Some(_)) => return QueueingHint::Queue,
                _ => {}
            },
        }
    }
    for term in &info.required_anti_affinity_terms {
        let Some(o) = original else {
            return QueueingHint::Queue;
        };
        let key = term.topology_key.as_str();
        match (node_label(o, key), node_label(modified, key)) {
            (Some(a), Some(b)) if a != b => return QueueingHint::Queue,
            (Some(_), None) => return QueueingHint::Queue,
            _ => {}
        }
    }
    QueueingHint::QueueSkip
}

/// Builders shared by the plugin's tests.
#[cfg(test)]
pub(crate) mod testutil {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Affinity, Node, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
        WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, LabelSelectorRequirement, ObjectMeta,
    };

    use crate::framework::runtime::{Handle, LogRecorder, Nominator};
    use crate::framework::types::{NodeInfo, PodInfo};
    use crate::informers::Listers;

    struct NoNominator;

    impl Nominator for NoNominator {
        fn nominated_pods_for_node(&self, _: &str) -> Vec<Arc<PodInfo>> {
            Vec::new()
        }
        fn add_nominated_pod(&self, _: Arc<PodInfo>, _: &str) {}
        fn delete_nominated_pod(&self, _: &str) {}
    }

    /// A handle without a client over `listers`.
    pub fn handle(listers: Listers) -> Arc<Handle> {
        Arc::new(Handle::new(
            None,
            Arc::new(listers),
            Arc::new(NoNominator),
            Arc::new(LogRecorder),
        ))
    }

    pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    pub fn node(name: &str, l: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels(l)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A pod `<ns>/<name>` (uid `<name>`) with labels.
    pub fn pod(name: &str, ns: &str, l: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                uid: Some(name.into()),
                labels: Some(labels(l)),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            ..Default::default()
        }
    }

    pub fn on(mut p: Pod, node: &str) -> Pod {
        if let Some(s) = p.spec.as_mut() {
            s.node_name = Some(node.into());
        }
        p
    }

    /// A term with one match expression `key op values` over `topology_key`.
    pub fn term(key: &str, op: &str, values: &[&str], topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: key.into(),
                    operator: op.into(),
                    values: (!values.is_empty())
                        .then(|| values.iter().map(|v| (*v).to_owned()).collect()),
                }]),
                ..Default::default()
            }),
            topology_key: topology_key.into(),
            ..Default::default()
        }
    }

    /// A term ANDing `(key, operator, values)` expressions over `topology_key`.
    pub fn term_multi(exprs: &[(&str, &str, &[&str])], topology_key: &str) -> PodAffinityTerm {
        let mut t = term("x", "Exists", &[], topology_key);
        if let Some(sel) = t.label_selector.as_mut() {
            sel.match_expressions = Some(
                exprs
                    .iter()
                    .map(|(k, op, vs)| LabelSelectorRequirement {
                        key: (*k).into(),
                        operator: (*op).into(),
                        values: (!vs.is_empty())
                            .then(|| vs.iter().map(|v| (*v).to_owned()).collect()),
                    })
                    .collect(),
            );
        }
        t
    }

    pub fn weighted(weight: i32, t: PodAffinityTerm) -> WeightedPodAffinityTerm {
        WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: t,
        }
    }

    /// `p` with required and preferred affinity and anti-affinity terms.
    pub fn with_affinity(
        mut p: Pod,
        req: Vec<PodAffinityTerm>,
        req_anti: Vec<PodAffinityTerm>,
        pref: Vec<WeightedPodAffinityTerm>,
        pref_anti: Vec<WeightedPodAffinityTerm>,
    ) -> Pod {
        let some = |v: Vec<PodAffinityTerm>| (!v.is_empty()).then_some(v);
        let some_w = |v: Vec<WeightedPodAffinityTerm>| (!v.is_empty()).then_some(v);
        let aff = Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: some(req),
                preferred_during_scheduling_ignored_during_execution: some_w(pref),
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: some(req_anti),
                preferred_during_scheduling_ignored_during_execution: some_w(pref_anti),
            }),
            ..Default::default()
        };
        if let Some(s) = p.spec.as_mut() {
            s.affinity = Some(aff);
        }
        p
    }

    /// NodeInfos of `nodes` holding the `pods` whose `spec.nodeName` names them.
    pub fn node_infos(nodes: &[Node], pods: &[Pod]) -> Vec<NodeInfo> {
        nodes
            .iter()
            .map(|n| {
                let mut ni = NodeInfo::new(n.clone());
                for p in pods {
                    if crate::framework::types::pod_node_name(p)
                        == n.metadata.name.as_deref().unwrap_or_default()
                    {
                        ni.add_pod(Arc::new(PodInfo::new(p.clone())));
                    }
                }
                ni
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn args_defaults_and_validation() {
        let a = InterPodAffinityArgs::parse(None).unwrap();
        assert_eq!(a.hard_pod_affinity_weight, 1);
        assert!(!a.ignore_preferred_terms_of_existing_pods);
        let v = serde_json::json!({"kind": "InterPodAffinityArgs", "hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": true});
        let a = InterPodAffinityArgs::parse(Some(&v)).unwrap();
        assert_eq!(a.hard_pod_affinity_weight, 5);
        assert!(a.ignore_preferred_terms_of_existing_pods);
        let bad = serde_json::json!({"hardPodAffinityWeight": 101});
        let err = InterPodAffinityArgs::parse(Some(&bad)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"
        );
        let bad = serde_json::json!({"hardPodAffinityWeight": "x"});
        assert!(matches!(
            InterPodAffinityArgs::parse(Some(&bad)),
            Err(Error::Config(_))
        ));
        let h = handle(Listers::default());
        assert_eq!(new(None, &h).unwrap().name(), "InterPodAffinity");
    }

    #[test]
    fn events() {
        let pl = InterPodAffinity::with_args(
            InterPodAffinityArgs::default(),
            Arc::new(Listers::default()),
        );
        let events = pl.events_to_register().unwrap_or_default();
        let got: Vec<(EventResource, ActionType)> = events
            .iter()
            .map(|e| (e.event.resource, e.event.action))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    EventResource::Pod,
                    ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE
                ),
                (
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_LABEL
                ),
            ]
        );
        assert!(events.iter().all(|e| e.hint.is_some()));
    }

    #[test]
    fn pod_change_hints() {
        let target = with_affinity(
            pod("p", "default", &[]),
            vec![term("aaa", "In", &["a"], "zone")],
            vec![term("bbb", "In", &["b"], "zone")],
            vec![],
            vec![],
        );
        let matching = on(pod("x", "default", &[("aaa", "a")]), "n1");
        let plain = on(pod("x", "default", &[]), "n1");
        let anti = on(pod("x", "default", &[("bbb", "b")]), "n1");
        let unscheduled = pod("x", "default", &[("aaa", "a")]);
        let cases: Vec<(&str, EventObject<'_>, EventObject<'_>, QueueingHint)> = vec![
            (
                "add matching",
                EventObject::None,
                EventObject::Pod(&matching),
                QueueingHint::Queue,
            ),
            (
                "add non matching",
                EventObject::None,
                EventObject::Pod(&plain),
                QueueingHint::QueueSkip,
            ),
            (
                "add unscheduled",
                EventObject::None,
                EventObject::Pod(&unscheduled),
                QueueingHint::QueueSkip,
            ),
            (
                "label now matches",
                EventObject::Pod(&plain),
                EventObject::Pod(&matching),
                QueueingHint::Queue,
            ),
            (
                "label no longer anti",
                EventObject::Pod(&anti),
                EventObject::Pod(&plain),
                QueueingHint::Queue,
            ),
            (
                "label to anti",
                EventObject::Pod(&plain),
                EventObject::Pod(&anti),
                QueueingHint::QueueSkip,
            ),
            (
                "delete anti",
                EventObject::Pod(&anti),
                EventObject::None,
                QueueingHint::Queue,
            ),
            (
                "delete plain",
                EventObject::Pod(&plain),
                EventObject::None,
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                is_schedulable_after_pod_change(&target, old, new),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn node_change_hints() {
        let aff = with_affinity(
            pod("p", "default", &[]),
            vec![term("aaa", "In", &["a"], "zone")],
            vec![],
            vec![],
            vec![],
        );
        let anti = with_affinity(
            pod("p", "default", &[]),
            vec![],
            vec![term("aaa", "In", &["a"], "zone")],
            vec![],
            vec![],
        );
        let none = node("n", &[]);
        let z1 = node("n", &[("zone", "z1")]);
        let z2 = node("n", &[("zone", "z2")]);
        let cases: Vec<(&str, &Pod, Option<&Node>, &Node, QueueingHint)> = vec![
            (
                "affinity: add with key",
                &aff,
                None,
                &z1,
                QueueingHint::Queue,
            ),
            (
                "affinity: add without key",
                &aff,
                None,
                &none,
                QueueingHint::QueueSkip,
            ),
            (
                "affinity: key gained",
                &aff,
                Some(&none),
                &z1,
                QueueingHint::Queue,
            ),
            (
                "affinity: key changed",
                &aff,
                Some(&z1),
                &z2,
                QueueingHint::Queue,
            ),
            (
                "affinity: key lost",
                &aff,
                Some(&z1),
                &none,
                QueueingHint::QueueSkip,
            ),
            ("anti: any add", &anti, None, &none, QueueingHint::Queue),
            (
                "anti: key lost",
                &anti,
                Some(&z1),
                &none,
                QueueingHint::Queue,
            ),
            (
                "anti: key changed",
                &anti,
                Some(&z1),
                &z2,
                QueueingHint::Queue,
            ),
            (
                "anti: key gained",
                &anti,
                Some(&none),
                &z1,
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, p, old, new, want) in cases {
            let old = old.map_or(EventObject::None, EventObject::Node);
            assert_eq!(
                is_schedulable_after_node_change(p, old, EventObject::Node(new)),
                want,
                "{name}"
            );
        }
    }
}
