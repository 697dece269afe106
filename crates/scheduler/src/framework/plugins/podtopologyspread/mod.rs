//! PodTopologySpread (upstream `framework/plugins/podtopologyspread`): spreads pods over
//! topology domains by `spec.topologySpreadConstraints`, or by the cluster's default
//! constraints over the pods of the same Services and controllers. `DoNotSchedule`
//! constraints filter ([`filtering`]), `ScheduleAnyway` constraints score ([`scoring`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint as ApiConstraint};
use serde::Deserialize;

use crate::error::Error;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreScorePlugin, QueueingHint, ScorePlugin,
};
use crate::framework::runtime::Handle;
use crate::informers::Listers;

pub mod common;
pub mod filtering;
pub mod scoring;

use common::{
    Constraint, DO_NOT_SCHEDULE, LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, NodeInclusionPolicy,
    SCHEDULE_ANYWAY, default_selector, filter_constraints, node_labels_match_spread_constraints,
    pod_labels_match_spread_constraints,
};

/// The plugin's name.
pub const NAME: &str = "PodTopologySpread";

/// `defaultingType: System`: the built-in default constraints.
pub const SYSTEM_DEFAULTING: &str = "System";
/// `defaultingType: List`: `defaultConstraints` of the args.
pub const LIST_DEFAULTING: &str = "List";

/// The plugin's arguments (upstream `PodTopologySpreadArgs`, `kind` and `apiVersion`
/// ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    /// The constraints of pods without their own, with `defaultingType: List`; their
    /// selector is computed from each pod's Services and controllers.
    #[serde(default)]
    pub default_constraints: Vec<ApiConstraint>,
    /// `System` (the default) or `List`.
    #[serde(default = "default_defaulting_type")]
    pub defaulting_type: String,
}

fn default_defaulting_type() -> String {
    SYSTEM_DEFAULTING.to_owned()
}

impl Default for PodTopologySpreadArgs {
    fn default() -> Self {
        Self {
            default_constraints: Vec::new(),
            defaulting_type: default_defaulting_type(),
        }
    }
}

impl PodTopologySpreadArgs {
    /// Decodes and validates `args` (None: the defaults) as upstream's
    /// `ValidatePodTopologySpreadArgs`. Errors: [`Error::Config`] listing every problem.
    pub fn parse(args: Option<&serde_json::Value>) -> Result<Self, Error> {
        let parsed: Self = match args {
            None | Some(serde_json::Value::Null) => Self::default(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::Config(format!("decoding PodTopologySpreadArgs: {e}")))?,
        };
        let mut errs = Vec::new();
        match parsed.defaulting_type.as_str() {
            SYSTEM_DEFAULTING if !parsed.default_constraints.is_empty() => errs.push(format!(
                "defaultingType: Invalid value: {:?}: when .defaultConstraints are not empty",
                parsed.defaulting_type
            )),
            SYSTEM_DEFAULTING | LIST_DEFAULTING => {}
            other => errs.push(format!(
                "defaultingType: Unsupported value: {other:?}: supported values: \"System\", \"List\""
            )),
        }
        for (i, c) in parsed.default_constraints.iter().enumerate() {
            let p = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                errs.push(format!(
                    "{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)",
                    c.max_skew
                ));
            }
            if c.topology_key.is_empty() {
                errs.push(format!("{p}.topologyKey: Required value: can not be empty"));
            }
            if c.when_unsatisfiable != DO_NOT_SCHEDULE && c.when_unsatisfiable != SCHEDULE_ANYWAY {
                errs.push(format!(
                    "{p}.whenUnsatisfiable: Unsupported value: {:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                    c.when_unsatisfiable
                ));
            }
            if c.label_selector.is_some() {
                errs.push(format!(
                    "{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
                ));
            }
            if parsed.default_constraints[..i].iter().any(|o| {
                o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
            }) {
                errs.push(format!(
                    "{p}: Duplicate value: \"{{{}, {}}}\"",
                    c.topology_key, c.when_unsatisfiable
                ));
            }
        }
        match errs.len() {
            0 => Ok(parsed),
            1 => Err(Error::Config(errs.join(""))),
            _ => Err(Error::Config(format!("[{}]", errs.join(", ")))),
        }
    }
}

/// The constraints of pods without their own under `defaultingType: System` (upstream
/// `systemDefaultConstraints`).
fn system_default_constraints() -> Vec<ApiConstraint> {
    vec![
        ApiConstraint {
            topology_key: LABEL_HOSTNAME.into(),
            when_unsatisfiable: SCHEDULE_ANYWAY.into(),
            max_skew: 3,
            ..Default::default()
        },
        ApiConstraint {
            topology_key: LABEL_TOPOLOGY_ZONE.into(),
            when_unsatisfiable: SCHEDULE_ANYWAY.into(),
            max_skew: 5,
            ..Default::default()
        },
    ]
}

/// What the plugin and its queueing hints share.
#[derive(Debug)]
pub(crate) struct Inner {
    default_constraints: Vec<ApiConstraint>,
    system_defaulted: bool,
    listers: Arc<Listers>,
}

impl Inner {
    /// The default constraints with `action`, all with the pod's default selector; none
    /// when that selector is empty (upstream `buildDefaultConstraints`).
    fn build_default_constraints(
        &self,
        pod: &Pod,
        action: &str,
    ) -> Result<Vec<Constraint>, String> {
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let mut constraints = filter_constraints(&self.default_constraints, labels, action)?;
        if constraints.is_empty() {
            return Ok(constraints);
        }
        let selector = default_selector(pod, &self.listers);
        if selector.is_empty() {
            return Ok(Vec::new());
        }
        for c in &mut constraints {
            c.selector = selector.clone();
        }
        Ok(constraints)
    }

    /// The pod's constraints with `action`: its own, else the defaults.
    fn constraints(&self, pod: &Pod, action: &str) -> Result<Vec<Constraint>, String> {
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        let hard = action == DO_NOT_SCHEDULE;
        if own.is_empty() {
            self.build_default_constraints(pod, action).map_err(|e| {
                let which = if hard { "hard" } else { "soft" };
                format!("setting default {which} topology spread constraints: {e}")
            })
        } else {
            let empty = BTreeMap::new();
            let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
            filter_constraints(own, labels, action).map_err(|e| {
                let which = if hard { "hard" } else { "soft" };
                format!("obtaining pod's {which} topology spread constraints: {e}")
            })
        }
    }
}

/// The PodTopologySpread plugin: PreFilter (with extensions), Filter, PreScore and Score.
#[derive(Debug)]
pub struct PodTopologySpread {
    inner: Arc<Inner>,
}

/// Builds the plugin from its `args` (upstream `New`). Errors: [`Error::Config`] for bad
/// args.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(PodTopologySpread::with_args(
        PodTopologySpreadArgs::parse(args)?,
        Arc::clone(&handle.listers),
    )))
}

impl PodTopologySpread {
    /// The plugin with validated `args`, reading Services and controllers from `listers`.
    pub fn with_args(args: PodTopologySpreadArgs, listers: Arc<Listers>) -> Self {
        let system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING;
        let default_constraints = if system_defaulted {
            system_default_constraints()
        } else {
            args.default_constraints
        };
        Self {
            inner: Arc::new(Inner {
                default_constraints,
                system_defaulted,
                listers,
            }),
        }
    }
}

impl Plugin for PodTopologySpread {
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

    /// Assigned pods added, relabelled or deleted; the pod's own label and toleration
    /// updates (upstream's `Pod` resource also covers unscheduled pods); nodes added,
    /// deleted, relabelled or retainted (upstream `EventsToRegister` with queueing hints
    /// enabled).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        let pod_hint = {
            let inner = Arc::clone(&self.inner);
            move |pod: &Pod, old: EventObject<'_>, new: EventObject<'_>| {
                is_schedulable_after_pod_change(&inner, pod, old, new)
            }
        };
        let node_inner = Arc::clone(&self.inner);
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                pod_hint.clone(),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_LABEL | ActionType::UPDATE_POD_TOLERATIONS,
                pod_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::DELETE
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_TAINT,
                move |pod: &Pod, old: EventObject<'_>, new: EventObject<'_>| {
                    is_schedulable_after_node_change(&node_inner, pod, old, new)
                },
            ),
        ])
    }
}

fn as_pod(o: EventObject<'_>) -> Option<&Pod> {
    match o {
        EventObject::Pod(p) => Some(p),
        _ => None,
    }
}

fn as_node(o: EventObject<'_>) -> Option<&k8s_openapi::api::core::v1::Node> {
    match o {
        EventObject::Node(n) => Some(n),
        _ => None,
    }
}

/// Upstream `involvedInTopologySpreading`: the pod itself, or an assigned pod of its
/// namespace.
fn involved_in_topology_spreading(incoming: &Pod, pod_with_spreading: &Pod) -> bool {
    let uid = |p: &Pod| p.metadata.uid.clone();
    uid(incoming) == uid(pod_with_spreading)
        || (!crate::framework::types::pod_node_name(incoming).is_empty()
            && incoming.metadata.namespace == pod_with_spreading.metadata.namespace)
}

/// Queueing hint for pod events (upstream `isSchedulableAfterPodChange`).
fn is_schedulable_after_pod_change(
    inner: &Inner,
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let (original, modified) = (as_pod(old), as_pod(new));
    if modified.is_some_and(|m| !involved_in_topology_spreading(m, pod))
        || original.is_some_and(|o| !involved_in_topology_spreading(o, pod))
    {
        return QueueingHint::QueueSkip;
    }
    let Ok(constraints) = inner.constraints(pod, DO_NOT_SCHEDULE) else {
        return QueueingHint::Queue;
    };
    let empty = BTreeMap::new();
    let labels = |p: &'_ Pod| p.metadata.labels.clone().unwrap_or_default();
    match (original, modified) {
        (Some(o), Some(m)) => {
            let tolerations = |p: &Pod| p.spec.as_ref().and_then(|s| s.tolerations.clone());
            if m.metadata.uid == pod.metadata.uid
                && tolerations(m) != tolerations(o)
                && constraints
                    .iter()
                    .any(|c| c.node_taints_policy == NodeInclusionPolicy::Honor)
            {
                return QueueingHint::Queue;
            }
            let (ol, ml) = (labels(o), labels(m));
            if ol == ml {
                return QueueingHint::QueueSkip;
            }
            if constraints
                .iter()
                .any(|c| c.selector.matches(&ol) != c.selector.matches(&ml))
            {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (o, m) => {
            let Some(p) = m.or(o) else {
                return QueueingHint::Queue;
            };
            let l = p.metadata.labels.as_ref().unwrap_or(&empty);
            if pod_labels_match_spread_constraints(&constraints, l) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
    }
}

/// Queueing hint for node events (upstream `isSchedulableAfterNodeChange`).
fn is_schedulable_after_node_change(
    inner: &Inner,
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let (original, modified) = (as_node(old), as_node(new));
    let Ok(constraints) = inner.constraints(pod, DO_NOT_SCHEDULE) else {
        return QueueingHint::Queue;
    };
    let matching = |n: Option<&k8s_openapi::api::core::v1::Node>| {
        n.is_some_and(|n| {
            node_labels_match_spread_constraints(n.metadata.labels.as_ref(), &constraints)
        })
    };
    let (original_matching, modified_matching) = (matching(original), matching(modified));
    match (original, modified) {
        (Some(o), Some(m)) => {
            if original_matching != modified_matching {
                return QueueingHint::Queue;
            }
            let label =
                |n: &k8s_openapi::api::core::v1::Node, k: &str| common::node_label(n, k).cloned();
            let keys_changed = constraints
                .iter()
                .any(|c| label(o, &c.topology_key) != label(m, &c.topology_key));
            let taints = |n: &k8s_openapi::api::core::v1::Node| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.clone())
                    .unwrap_or_default()
            };
            if modified_matching && (keys_changed || taints(o) != taints(m)) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (None, Some(_)) => {
            if modified_matching {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (Some(_), None) => {
            if original_matching {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        (None, None) => QueueingHint::Queue,
    }
}

/// Builders shared by the plugin's tests.
#[cfg(test)]
pub(crate) mod testutil {
    use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint as ApiConstraint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    /// A constraint over pods with label `foo`.
    pub fn constraint(key: &str, max_skew: i32, action: &str) -> ApiConstraint {
        ApiConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: action.into(),
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "foo".into(),
                    operator: "Exists".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `p` with `constraints`.
    pub fn with_constraints(mut p: Pod, constraints: Vec<ApiConstraint>) -> Pod {
        if let Some(s) = p.spec.as_mut() {
            s.topology_spread_constraints = Some(constraints);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::plugins::interpodaffinity::testutil::{handle, node, on, pod};

    #[test]
    fn args_defaults_and_validation() {
        let a = PodTopologySpreadArgs::parse(None).unwrap();
        assert_eq!(a.defaulting_type, "System");
        assert!(a.default_constraints.is_empty());
        let pl = PodTopologySpread::with_args(a, Arc::new(Listers::default()));
        let keys: Vec<(&str, i32)> = pl
            .inner
            .default_constraints
            .iter()
            .map(|c| (c.topology_key.as_str(), c.max_skew))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("kubernetes.io/hostname", 3),
                ("topology.kubernetes.io/zone", 5)
            ]
        );

        let list = serde_json::json!({
            "kind": "PodTopologySpreadArgs",
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
        });
        let a = PodTopologySpreadArgs::parse(Some(&list)).unwrap();
        assert_eq!(a.default_constraints.len(), 1);

        let cases = [
            (
                serde_json::json!({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
                "invalid configuration: defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty",
            ),
            (
                serde_json::json!({"defaultingType": "Other"}),
                "invalid configuration: defaultingType: Unsupported value: \"Other\": supported values: \"System\", \"List\"",
            ),
            (
                serde_json::json!({"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
                ]}),
                "invalid configuration: [defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), defaultConstraints[1].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod, defaultConstraints[1]: Duplicate value: \"{zone, DoNotSchedule}\"]",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(
                PodTopologySpreadArgs::parse(Some(&v))
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
        assert_eq!(
            new(None, &handle(Listers::default())).unwrap().name(),
            "PodTopologySpread"
        );
    }

    fn spread(mut p: Pod, key: &str, max_skew: i32) -> Pod {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
            LabelSelector, LabelSelectorRequirement,
        };
        let c = ApiConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: DO_NOT_SCHEDULE.into(),
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "foo".into(),
                    operator: "Exists".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(s) = p.spec.as_mut() {
            s.topology_spread_constraints = Some(vec![c]);
        }
        p
    }

    #[test]
    fn pod_change_hints() {
        let inner = PodTopologySpread::with_args(
            PodTopologySpreadArgs::default(),
            Arc::new(Listers::default()),
        )
        .inner;
        let target = spread(pod("p", "default", &[("foo", "")]), "zone", 1);
        let matching = on(pod("x", "default", &[("foo", "a")]), "n1");
        let plain = on(pod("x", "default", &[("bar", "a")]), "n1");
        let other_ns = on(pod("x", "other", &[("foo", "a")]), "n1");
        let unscheduled = pod("x", "default", &[("foo", "a")]);
        let relabelled = on(pod("x", "default", &[("foo", "b")]), "n1");
        let cases: Vec<(&str, EventObject<'_>, EventObject<'_>, QueueingHint)> = vec![
            (
                "add matching",
                EventObject::None,
                EventObject::Pod(&matching),
                QueueingHint::Queue,
            ),
            (
                "add not matching",
                EventObject::None,
                EventObject::Pod(&plain),
                QueueingHint::QueueSkip,
            ),
            (
                "add other namespace",
                EventObject::None,
                EventObject::Pod(&other_ns),
                QueueingHint::QueueSkip,
            ),
            (
                "add unscheduled",
                EventObject::None,
                EventObject::Pod(&unscheduled),
                QueueingHint::QueueSkip,
            ),
            (
                "delete matching",
                EventObject::Pod(&matching),
                EventObject::None,
                QueueingHint::Queue,
            ),
            (
                "label starts matching",
                EventObject::Pod(&plain),
                EventObject::Pod(&matching),
                QueueingHint::Queue,
            ),
            (
                "label value changes, still matching",
                EventObject::Pod(&matching),
                EventObject::Pod(&relabelled),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                is_schedulable_after_pod_change(&inner, &target, old, new),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn own_toleration_update_and_events() {
        use k8s_openapi::api::core::v1::Toleration;
        let pl = PodTopologySpread::with_args(
            PodTopologySpreadArgs::default(),
            Arc::new(Listers::default()),
        );
        let mut c = testutil::constraint("zone", 1, DO_NOT_SCHEDULE);
        let old = testutil::with_constraints(pod("p", "default", &[("foo", "")]), vec![c.clone()]);
        let mut new = old.clone();
        if let Some(s) = new.spec.as_mut() {
            s.tolerations = Some(vec![Toleration {
                key: Some("k".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]);
        }
        // nodeTaintsPolicy Ignore: a new toleration changes nothing.
        let hint = is_schedulable_after_pod_change(
            &pl.inner,
            &old,
            EventObject::Pod(&old),
            EventObject::Pod(&new),
        );
        assert_eq!(hint, QueueingHint::QueueSkip);
        c.node_taints_policy = Some("Honor".into());
        let old = testutil::with_constraints(old, vec![c.clone()]);
        let new = testutil::with_constraints(new, vec![c]);
        let hint = is_schedulable_after_pod_change(
            &pl.inner,
            &old,
            EventObject::Pod(&old),
            EventObject::Pod(&new),
        );
        assert_eq!(hint, QueueingHint::Queue);

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
                    EventResource::UnscheduledPod,
                    ActionType::UPDATE_POD_LABEL | ActionType::UPDATE_POD_TOLERATIONS
                ),
                (
                    EventResource::Node,
                    ActionType::ADD
                        | ActionType::DELETE
                        | ActionType::UPDATE_NODE_LABEL
                        | ActionType::UPDATE_NODE_TAINT
                ),
            ]
        );
        assert!(events.iter().all(|e| e.hint.is_some()));
    }

    #[test]
    fn node_change_hints() {
        let inner = PodTopologySpread::with_args(
            PodTopologySpreadArgs::default(),
            Arc::new(Listers::default()),
        )
        .inner;
        let target = spread(pod("p", "default", &[("foo", "")]), "zone", 1);
        let none = node("n", &[]);
        let z1 = node("n", &[("zone", "z1")]);
        let z2 = node("n", &[("zone", "z2")]);
        let z1_other = node("n", &[("zone", "z1"), ("x", "y")]);
        let cases: Vec<(
            &str,
            Option<&k8s_openapi::api::core::v1::Node>,
            Option<&k8s_openapi::api::core::v1::Node>,
            QueueingHint,
        )> = vec![
            ("add with key", None, Some(&z1), QueueingHint::Queue),
            (
                "add without key",
                None,
                Some(&none),
                QueueingHint::QueueSkip,
            ),
            ("delete with key", Some(&z1), None, QueueingHint::Queue),
            (
                "delete without key",
                Some(&none),
                None,
                QueueingHint::QueueSkip,
            ),
            ("key gained", Some(&none), Some(&z1), QueueingHint::Queue),
            (
                "key value changed",
                Some(&z1),
                Some(&z2),
                QueueingHint::Queue,
            ),
            (
                "unrelated label",
                Some(&z1),
                Some(&z1_other),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            let old = old.map_or(EventObject::None, EventObject::Node);
            let new = new.map_or(EventObject::None, EventObject::Node);
            assert_eq!(
                is_schedulable_after_node_change(&inner, &target, old, new),
                want,
                "{name}"
            );
        }
    }
}
