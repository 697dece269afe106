//! Validation of where a pod may be placed: `spec.nodeSelector`, `spec.affinity` and
//! `spec.topologySpreadConstraints` (upstream `pkg/apis/core/validation/validation.go`:
//! `validateAffinity`, `ValidateNodeSelector`, `validatePodAffinityTerm`,
//! `validateTopologySpreadConstraints`), with upstream's paths and messages.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
    PreferredSchedulingTerm, TopologySpreadConstraint, WeightedPodAffinityTerm,
};

use crate::core::{invalid_each, one_of};
use crate::field::{ErrorList, FieldError, Path};
use crate::meta::{validate_label_name, validate_label_selector, validate_labels};
use crate::names;

/// Upstream's `isNotPositiveErrorMsg`.
const NOT_POSITIVE: &str = "must be greater than zero";

/// `spec.nodeSelector`: its keys and values are labels.
pub fn validate_node_selector_labels(
    errors: &mut ErrorList,
    path: &Path,
    selector: &BTreeMap<String, String>,
) {
    errors.extend(validate_labels(selector, path));
}

/// Upstream `validateAffinity`: node affinity's selector terms and weights, and the terms
/// of pod affinity and anti-affinity.
pub fn validate_affinity(errors: &mut ErrorList, path: &Path, affinity: &Affinity) {
    if let Some(node) = &affinity.node_affinity {
        let path = path.child("nodeAffinity");
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            validate_node_selector(
                errors,
                &path.child("requiredDuringSchedulingIgnoredDuringExecution"),
                required,
            );
        }
        if let Some(preferred) = &node.preferred_during_scheduling_ignored_during_execution {
            validate_preferred_scheduling_terms(
                errors,
                &path.child("preferredDuringSchedulingIgnoredDuringExecution"),
                preferred,
            );
        }
    }
    for (field, required, preferred) in pod_affinity_terms(affinity) {
        let path = path.child(field);
        let required_path = path.child("requiredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in required.iter().enumerate() {
            validate_pod_affinity_term(errors, &required_path.index(i), term);
        }
        let preferred_path = path.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in preferred.iter().enumerate() {
            validate_weighted_pod_affinity_term(errors, &preferred_path.index(i), term);
        }
    }
}

/// The pod affinity and pod anti-affinity that `affinity` sets, each as its field name
/// (`podAffinity`, `podAntiAffinity`) with its required and preferred terms (an absent
/// list as empty). Validation and warnings walk both the same way.
pub(crate) fn pod_affinity_terms(
    affinity: &Affinity,
) -> impl Iterator<Item = (&'static str, &[PodAffinityTerm], &[WeightedPodAffinityTerm])> {
    let affinity_terms = affinity.pod_affinity.as_ref().map(|a| {
        (
            "podAffinity",
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    let anti_affinity_terms = affinity.pod_anti_affinity.as_ref().map(|a| {
        (
            "podAntiAffinity",
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    affinity_terms
        .into_iter()
        .chain(anti_affinity_terms)
        .map(|(field, required, preferred)| {
            (
                field,
                required.as_deref().unwrap_or_default(),
                preferred.as_deref().unwrap_or_default(),
            )
        })
}

/// Upstream `ValidateNodeSelector`: at least one term, each term valid. Also used by a
/// PersistentVolume's `spec.nodeAffinity.required`.
pub fn validate_node_selector(errors: &mut ErrorList, path: &Path, selector: &NodeSelector) {
    let terms_path = path.child("nodeSelectorTerms");
    if selector.node_selector_terms.is_empty() {
        errors.push(FieldError::required(
            &terms_path,
            "must have at least one node selector term",
        ));
        return;
    }
    for (i, term) in selector.node_selector_terms.iter().enumerate() {
        validate_node_selector_term(errors, &terms_path.index(i), term);
    }
}

/// Upstream `ValidateNodeSelectorTerm`: its label expressions and field expressions.
fn validate_node_selector_term(errors: &mut ErrorList, path: &Path, term: &NodeSelectorTerm) {
    let expressions_path = path.child("matchExpressions");
    for (i, requirement) in term.match_expressions.iter().flatten().enumerate() {
        validate_node_selector_requirement(errors, &expressions_path.index(i), requirement);
    }
    let fields_path = path.child("matchFields");
    for (i, requirement) in term.match_fields.iter().flatten().enumerate() {
        validate_node_field_selector_requirement(errors, &fields_path.index(i), requirement);
    }
}

/// Upstream `ValidateNodeSelectorRequirement`: In/NotIn need values, Exists/DoesNotExist
/// forbid them, Gt/Lt take exactly one; the key is a label name and the values label
/// values.
fn validate_node_selector_requirement(
    errors: &mut ErrorList,
    path: &Path,
    requirement: &NodeSelectorRequirement,
) {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
            &path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
            &path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errors.push(FieldError::required(
            &path.child("values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errors.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errors.extend(validate_label_name(&requirement.key, &path.child("key")));
    // Since 1.33 (kubernetes#128212) the values must be label values.
    let values_path = path.child("values");
    for (i, value) in values.iter().enumerate() {
        invalid_each(
            errors,
            &values_path.index(i),
            value.as_str(),
            names::is_valid_label_value(value),
        );
    }
}

/// Upstream `ValidateNodeFieldSelectorRequirement`: only `metadata.name`, with In or NotIn
/// and one value that is a node name.
fn validate_node_field_selector_requirement(
    errors: &mut ErrorList,
    path: &Path,
    requirement: &NodeSelectorRequirement,
) {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.len() != 1 => errors.push(FieldError::required(
            &path.child("values"),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )),
        "In" | "NotIn" => {}
        other => errors.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    if requirement.key != "metadata.name" {
        errors.push(FieldError::invalid(
            &path.child("key"),
            requirement.key.as_str(),
            "not a valid field selector key",
        ));
        return;
    }
    let values_path = path.child("values");
    for (i, value) in values.iter().enumerate() {
        invalid_each(
            errors,
            &values_path.index(i),
            value.as_str(),
            names::is_dns1123_subdomain(value),
        );
    }
}

/// Upstream `ValidatePreferredSchedulingTerms`: weights 1–100, each preference valid.
fn validate_preferred_scheduling_terms(
    errors: &mut ErrorList,
    path: &Path,
    terms: &[PreferredSchedulingTerm],
) {
    for (i, term) in terms.iter().enumerate() {
        let path = path.index(i);
        validate_weight(errors, &path.child("weight"), term.weight);
        validate_node_selector_term(errors, &path.child("preference"), &term.preference);
    }
}

/// A preferred term's weight: `must be in the range 1-100`.
fn validate_weight(errors: &mut ErrorList, path: &Path, weight: i32) {
    if !(1..=100).contains(&weight) {
        errors.push(FieldError::invalid(
            path,
            weight,
            "must be in the range 1-100",
        ));
    }
}

/// Upstream `validateWeightedPodAffinityTerms`, one term.
fn validate_weighted_pod_affinity_term(
    errors: &mut ErrorList,
    path: &Path,
    term: &WeightedPodAffinityTerm,
) {
    validate_weight(errors, &path.child("weight"), term.weight);
    validate_pod_affinity_term(
        errors,
        &path.child("podAffinityTerm"),
        &term.pod_affinity_term,
    );
}

/// Upstream `validatePodAffinityTerm`: both selectors, namespace names, label-key lists
/// and a non-empty topologyKey that is a label name.
fn validate_pod_affinity_term(errors: &mut ErrorList, path: &Path, term: &PodAffinityTerm) {
    if let Some(selector) = &term.label_selector {
        errors.extend(validate_label_selector(
            selector,
            &path.child("labelSelector"),
        ));
    }
    if let Some(selector) = &term.namespace_selector {
        errors.extend(validate_label_selector(
            selector,
            &path.child("namespaceSelector"),
        ));
    }
    for name in term.namespaces.iter().flatten() {
        // Upstream reports these at `namespace` (singular).
        invalid_each(
            errors,
            &path.child("namespace"),
            name.as_str(),
            names::name_is_dns_label(name, false),
        );
    }
    validate_match_label_keys_and_mismatch_label_keys(errors, path, term);
    let key_path = path.child("topologyKey");
    if term.topology_key.is_empty() {
        errors.push(FieldError::required(&key_path, "can not be empty"));
    }
    errors.extend(validate_label_name(&term.topology_key, &key_path));
}

/// Upstream `validateMatchLabelKeysAndMismatchLabelKeys` (KEP-3633): either list needs a
/// labelSelector and holds label names, and no key is in both.
fn validate_match_label_keys_and_mismatch_label_keys(
    errors: &mut ErrorList,
    path: &Path,
    term: &PodAffinityTerm,
) {
    let match_keys = term.match_label_keys.as_deref().unwrap_or_default();
    let mismatch_keys = term.mismatch_label_keys.as_deref().unwrap_or_default();
    for (field, keys) in [
        ("matchLabelKeys", match_keys),
        ("mismatchLabelKeys", mismatch_keys),
    ] {
        if keys.is_empty() {
            continue;
        }
        let keys_path = path.child(field);
        if term.label_selector.is_none() {
            errors.push(FieldError::forbidden(
                &keys_path,
                "must not be specified when labelSelector is not set",
            ));
            continue;
        }
        for (i, key) in keys.iter().enumerate() {
            errors.extend(validate_label_name(key, &keys_path.index(i)));
        }
    }
    let mismatched: HashSet<&str> = mismatch_keys.iter().map(String::as_str).collect();
    let keys_path = path.child("matchLabelKeys");
    for (i, key) in match_keys.iter().enumerate() {
        if mismatched.contains(key.as_str()) {
            errors.push(FieldError::invalid(
                &keys_path.index(i),
                key.as_str(),
                "exists in both matchLabelKeys and mismatchLabelKeys",
            ));
        }
    }
}

/// Upstream `validateTopologySpreadConstraints`: maxSkew and minDomains positive, a
/// topologyKey, a supported whenUnsatisfiable, no repeated `{topologyKey,
/// whenUnsatisfiable}`, Honor or Ignore inclusion policies, matchLabelKeys that are label
/// names absent from the selector, and a valid labelSelector.
pub fn validate_topology_spread_constraints(
    errors: &mut ErrorList,
    path: &Path,
    constraints: &[TopologySpreadConstraint],
) {
    for (i, constraint) in constraints.iter().enumerate() {
        let path = path.index(i);
        if constraint.max_skew <= 0 {
            errors.push(FieldError::invalid(
                &path.child("maxSkew"),
                constraint.max_skew,
                NOT_POSITIVE,
            ));
        }
        if constraint.topology_key.is_empty() {
            errors.push(FieldError::required(
                &path.child("topologyKey"),
                "can not be empty",
            ));
        }
        let action = constraint.when_unsatisfiable.as_str();
        one_of(
            errors,
            &path.child("whenUnsatisfiable"),
            Some(action),
            &["DoNotSchedule", "ScheduleAnyway"],
            false,
        );
        // Upstream `ValidateSpreadConstraintNotRepeat` compares with the later
        // constraints, so the earlier of two equal ones is reported.
        let repeated = constraints[i + 1..].iter().any(|later| {
            later.topology_key == constraint.topology_key
                && later.when_unsatisfiable == constraint.when_unsatisfiable
        });
        if repeated {
            errors.push(FieldError::duplicate(
                &path.child("{topologyKey, whenUnsatisfiable}"),
                format!("{{{}, {action}}}", constraint.topology_key),
            ));
        }
        if let Some(min) = constraint.min_domains {
            let min_path = path.child("minDomains");
            if min <= 0 {
                errors.push(FieldError::invalid(&min_path, min, NOT_POSITIVE));
            }
            if action != "DoNotSchedule" {
                errors.push(FieldError::invalid(
                    &min_path,
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
        for (field, policy) in [
            ("nodeAffinityPolicy", &constraint.node_affinity_policy),
            ("nodeTaintsPolicy", &constraint.node_taints_policy),
        ] {
            one_of(
                errors,
                &path.child(field),
                policy.as_deref(),
                &["Honor", "Ignore"],
                false,
            );
        }
        validate_match_label_keys(errors, &path, constraint);
        if let Some(selector) = &constraint.label_selector {
            errors.extend(validate_label_selector(
                selector,
                &path.child("labelSelector"),
            ));
        }
    }
}

/// Upstream `validateMatchLabelKeysInTopologySpread`: no keys without a labelSelector; each
/// key a label name that the selector does not already use.
fn validate_match_label_keys(
    errors: &mut ErrorList,
    path: &Path,
    constraint: &TopologySpreadConstraint,
) {
    let keys = constraint.match_label_keys.as_deref().unwrap_or_default();
    if keys.is_empty() {
        return;
    }
    let keys_path = path.child("matchLabelKeys");
    let Some(selector) = &constraint.label_selector else {
        errors.push(FieldError::forbidden(
            &keys_path,
            "must not be specified when labelSelector is not set",
        ));
        return;
    };
    let used: HashSet<&str> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .chain(
            selector
                .match_expressions
                .iter()
                .flatten()
                .map(|e| e.key.as_str()),
        )
        .collect();
    for (i, key) in keys.iter().enumerate() {
        let key_path = keys_path.index(i);
        let problems = validate_label_name(key, &key_path);
        if !problems.is_empty() {
            errors.extend(problems);
            continue;
        }
        if used.contains(key.as_str()) {
            errors.push(FieldError::invalid(
                &key_path,
                key.as_str(),
                "exists in both matchLabelKeys and labelSelector",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: PodSpec = serde_json::from_value(spec).expect("test spec");
        let path = Path::new("spec");
        let mut errors = Vec::new();
        if let Some(affinity) = &spec.affinity {
            validate_affinity(&mut errors, &path.child("affinity"), affinity);
        }
        validate_topology_spread_constraints(
            &mut errors,
            &path.child("topologySpreadConstraints"),
            spec.topology_spread_constraints
                .as_deref()
                .unwrap_or_default(),
        );
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_affinity_passes() {
        let errs = errors(serde_json::json!({
            "containers": [],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                              {"key": "cores", "operator": "Gt", "values": ["4"]}],
                         "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
                    ]
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                    ],
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "namespaces": ["default"]}}
                    ]
                }
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
                 "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "nodeTaintsPolicy": "Honor"}
            ]
        }));
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn bad_affinity_is_refused_as_upstream() {
        let errs = errors(serde_json::json!({
            "containers": [],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "Bogus"},
                                              {"key": "cores", "operator": "Gt", "values": ["1", "2"]}],
                         "matchFields": [{"key": "spec.nodeName", "operator": "In", "values": ["n"]}]}
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}}
                    ]
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [
                            {"key": "bad key!", "operator": "Exists", "values": ["x"]}]},
                         "topologyKey": ""},
                        {"topologyKey": "zone", "mismatchLabelKeys": ["tier"]},
                        {"topologyKey": "zone", "labelSelector": {}, "matchLabelKeys": ["tier"], "mismatchLabelKeys": ["tier"]}
                    ]
                }
            }
        }));
        let aff = "spec.affinity";
        let node = format!("{aff}.nodeAffinity");
        let req =
            format!("{node}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]");
        let term = format!("{aff}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]");
        let expected = [
            format!(
                "{req}.matchExpressions[0].operator: Invalid value: \"Bogus\": not a valid selector operator"
            ),
            format!(
                "{req}.matchExpressions[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            ),
            format!(
                "{req}.matchFields[0].key: Invalid value: \"spec.nodeName\": not a valid field selector key"
            ),
            format!(
                "{node}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"
            ),
            format!(
                "{term}.labelSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ),
            format!(
                "{node}.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values[0]: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ),
            format!(
                "{aff}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].mismatchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ),
            format!(
                "{aff}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[2].matchLabelKeys[0]: Invalid value: \"tier\": exists in both matchLabelKeys and mismatchLabelKeys"
            ),
        ];
        for e in &expected {
            assert!(errs.contains(e), "missing {e:?} in {errs:#?}");
        }
        assert!(
            errs.iter().any(|e| e.starts_with(&format!(
                "{term}.labelSelector.matchExpressions[0].key: Invalid value: \"bad key!\": name part must consist of"
            ))),
            "{errs:#?}"
        );
        assert!(
            errs.contains(&format!(
                "{term}.topologyKey: Required value: can not be empty"
            )),
            "{errs:#?}"
        );
    }

    #[test]
    fn empty_node_selector_needs_a_term() {
        let mut errs = Vec::new();
        validate_node_selector(
            &mut errs,
            &Path::new("spec").child("required"),
            &NodeSelector::default(),
        );
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "spec.required.nodeSelectorTerms: Required value: must have at least one node selector term"
            ]
        );
    }

    #[test]
    fn bad_topology_spread_is_refused_as_upstream() {
        let errs = errors(serde_json::json!({
            "containers": [],
            "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Sometimes"},
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 0,
                 "nodeAffinityPolicy": "Maybe", "matchLabelKeys": ["app"]},
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]}
            ]
        }));
        let c = "spec.topologySpreadConstraints";
        let expected = [
            format!("{c}[0].maxSkew: Invalid value: 0: must be greater than zero"),
            format!("{c}[0].topologyKey: Required value: can not be empty"),
            format!(
                "{c}[0].whenUnsatisfiable: Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
            ),
            format!("{c}[1].minDomains: Invalid value: 0: must be greater than zero"),
            format!(
                "{c}[1].minDomains: Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
            ),
            format!(
                "{c}[1].nodeAffinityPolicy: Unsupported value: \"Maybe\": supported values: \"Honor\", \"Ignore\""
            ),
            format!(
                "{c}[1].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ),
            format!(
                "{c}[1].{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{zone, ScheduleAnyway}}\""
            ),
            format!(
                "{c}[2].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"
            ),
        ];
        for e in &expected {
            assert!(errs.contains(e), "missing {e:?} in {errs:#?}");
        }
        assert_eq!(errs.len(), expected.len(), "{errs:#?}");
    }
}
