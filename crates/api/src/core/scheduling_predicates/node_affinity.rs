//! Node selectors and required node affinity (upstream
//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: `GetRequiredNodeAffinity`,
//! `LazyErrorNodeSelector`; `corev1.MatchNodeSelectorTerms`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, Pod};

use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// The only node field a `matchFields` requirement can see.
const NODE_NAME_FIELD: &str = "metadata.name";

/// A pod's hard node constraints: `spec.nodeSelector` and
/// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`
/// (upstream `RequiredNodeAffinity`).
#[derive(Debug, Clone, Copy)]
pub struct RequiredNodeAffinity<'a> {
    label_selector: Option<&'a BTreeMap<String, String>>,
    node_selector: Option<&'a NodeSelector>,
}

/// The required node affinity of `pod` (upstream `GetRequiredNodeAffinity`).
pub fn get_required_node_affinity(pod: &Pod) -> RequiredNodeAffinity<'_> {
    let spec = pod.spec.as_ref();
    RequiredNodeAffinity {
        label_selector: spec
            .and_then(|s| s.node_selector.as_ref())
            .filter(|s| !s.is_empty()),
        node_selector: spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
    }
}

impl RequiredNodeAffinity<'_> {
    /// Whether `node` satisfies the node selector (every label equal) and the required
    /// node selector terms (see [`match_node_selector_terms`]).
    ///
    /// Errors, when nothing matched, with the parse errors of malformed terms (which match
    /// nothing).
    pub fn matches(&self, node: &Node) -> Result<bool, ErrorList> {
        if let Some(selector) = self.label_selector {
            let labels = node.metadata.labels.as_ref();
            let all_equal = selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !all_equal {
                return Ok(false);
            }
        }
        match self.node_selector {
            Some(selector) => match_node_selector_terms(node, selector),
            None => Ok(true),
        }
    }
}

/// Whether `node` matches any of the selector's terms, ORed (upstream
/// `MatchNodeSelectorTerms`). A term ANDs its `matchExpressions` on the node labels
/// (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`) and its `matchFields` on
/// `metadata.name` (`In`, `NotIn` with one value); an empty term matches nothing, and so
/// does a selector without terms.
///
/// Errors, when no term matched, with the parse errors of the malformed terms (an unknown
/// operator, a bad key or value, a non-integer `Gt` / `Lt` value), which match nothing.
pub fn match_node_selector_terms(node: &Node, selector: &NodeSelector) -> Result<bool, ErrorList> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let mut errs = ErrorList::new();
    let path = Path::new("nodeSelectorTerms");
    for (i, term) in selector.node_selector_terms.iter().enumerate() {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            continue;
        }
        let term_path = path.index(i);
        let label_match =
            match_expressions(expressions, &labels, &term_path.child("matchExpressions"));
        let field_match = match_fields(fields, node_name, &term_path.child("matchFields"));
        match (label_match, field_match) {
            (Ok(true), Ok(true)) => return Ok(true),
            (Ok(_), Ok(_)) => {}
            (l, f) => {
                errs.extend(l.err().unwrap_or_default());
                errs.extend(f.err().unwrap_or_default());
            }
        }
    }
    if errs.is_empty() {
        Ok(false)
    } else {
        Err(errs)
    }
}

/// ANDs label requirements (upstream `nodeSelectorRequirementsAsSelector` and
/// `labels.Requirement.Matches`); all are parsed before any is matched.
fn match_expressions(
    requirements: &[NodeSelectorRequirement],
    labels: &BTreeMap<String, String>,
    path: &Path,
) -> Result<bool, ErrorList> {
    let mut errs = ErrorList::new();
    for (i, r) in requirements.iter().enumerate() {
        errs.extend(validate_label_requirement(r, &path.index(i)));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(requirements
        .iter()
        .all(|r| label_requirement_matches(r, labels)))
}

fn values(r: &NodeSelectorRequirement) -> &[String] {
    r.values.as_deref().unwrap_or_default()
}

/// The checks of upstream `labels.NewRequirement` for node selector operators.
fn validate_label_requirement(r: &NodeSelectorRequirement, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let values_path = path.child("values");
    let vals = values(r);
    match r.operator.as_str() {
        "In" | "NotIn" => {
            if vals.is_empty() {
                errs.push(FieldError::invalid(
                    &values_path,
                    vals.to_vec(),
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
        }
        "Exists" | "DoesNotExist" => {
            if !vals.is_empty() {
                errs.push(FieldError::invalid(
                    &values_path,
                    vals.to_vec(),
                    "values set must be empty for exists and does not exist",
                ));
            }
        }
        "Gt" | "Lt" => {
            if vals.len() != 1 {
                errs.push(FieldError::invalid(
                    &values_path,
                    vals.to_vec(),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (i, v) in vals.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(FieldError::invalid(
                        &values_path.index(i),
                        v.clone(),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
        other => {
            errs.push(FieldError::not_supported(
                &path.child("operator"),
                other.to_owned(),
                &[],
            ));
            return errs;
        }
    }
    for msg in names::is_qualified_name(&r.key) {
        errs.push(FieldError::invalid(&path.child("key"), r.key.clone(), msg));
    }
    for (i, v) in vals.iter().enumerate() {
        for msg in names::is_valid_label_value(v) {
            errs.push(FieldError::invalid(&values_path.index(i), v.clone(), msg));
        }
    }
    errs
}

/// Upstream `labels.Requirement.Matches` for a validated requirement.
fn label_requirement_matches(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let value = labels.get(&r.key);
    let vals = values(r);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| vals.contains(v)),
        "NotIn" => value.is_none_or(|v| !vals.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(label), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                vals.first().and_then(|v| v.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if op == "Gt" {
                label > bound
            } else {
                label < bound
            }
        }
        _ => false,
    }
}

/// ANDs field requirements on the node's `metadata.name` (upstream
/// `nodeSelectorRequirementsAsFieldSelector`): `In` and `NotIn` with exactly one value;
/// any other field reads as empty.
fn match_fields(
    requirements: &[NodeSelectorRequirement],
    node_name: &str,
    path: &Path,
) -> Result<bool, ErrorList> {
    let mut errs = ErrorList::new();
    for (i, r) in requirements.iter().enumerate() {
        let p = path.index(i);
        match r.operator.as_str() {
            "In" | "NotIn" if values(r).len() != 1 => errs.push(FieldError::invalid(
                &p.child("values"),
                values(r).to_vec(),
                "must have one element",
            )),
            "In" | "NotIn" => {}
            other => errs.push(FieldError::not_supported(
                &p.child("operator"),
                other.to_owned(),
                &["In", "NotIn"],
            )),
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    // Upstream only applies field requirements when the node has fields (a name).
    if requirements.is_empty() || node_name.is_empty() {
        return Ok(true);
    }
    Ok(requirements.iter().all(|r| {
        let field = if r.key == NODE_NAME_FIELD {
            node_name
        } else {
            ""
        };
        let equal = values(r).first().is_some_and(|v| v == field);
        if r.operator == "In" { equal } else { !equal }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelectorTerm, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
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
            ..Default::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn term(
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: Some(fields),
        }
    }

    fn selector(terms: Vec<NodeSelectorTerm>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms,
        }
    }

    #[test]
    fn operators_table() {
        let n = node("n1", &[("zone", "a"), ("cores", "8"), ("gpu", "")]);
        let cases: Vec<(&str, NodeSelectorRequirement, bool)> = vec![
            ("In matches", req("zone", "In", &["b", "a"]), true),
            ("In other value", req("zone", "In", &["b"]), false),
            ("In missing label", req("region", "In", &["a"]), false),
            ("NotIn other value", req("zone", "NotIn", &["b"]), true),
            ("NotIn same value", req("zone", "NotIn", &["a"]), false),
            ("NotIn missing label", req("region", "NotIn", &["a"]), true),
            ("Exists", req("gpu", "Exists", &[]), true),
            ("Exists missing", req("region", "Exists", &[]), false),
            ("DoesNotExist", req("region", "DoesNotExist", &[]), true),
            (
                "DoesNotExist present",
                req("zone", "DoesNotExist", &[]),
                false,
            ),
            ("Gt smaller bound", req("cores", "Gt", &["4"]), true),
            ("Gt equal bound", req("cores", "Gt", &["8"]), false),
            ("Lt larger bound", req("cores", "Lt", &["16"]), true),
            ("Lt smaller bound", req("cores", "Lt", &["2"]), false),
            ("Gt non-integer label", req("zone", "Gt", &["1"]), false),
            ("Gt missing label", req("region", "Gt", &["1"]), false),
        ];
        for (name, r, want) in cases {
            let s = selector(vec![term(vec![r], vec![])]);
            assert_eq!(match_node_selector_terms(&n, &s), Ok(want), "{name}");
        }
    }

    #[test]
    fn malformed_requirements_match_nothing_and_report_errors() {
        let n = node("n1", &[("zone", "a"), ("cores", "8")]);
        let bad = [
            req("cores", "Gt", &["eight"]),
            req("cores", "Gt", &["1", "2"]),
            req("zone", "In", &[]),
            req("zone", "Exists", &["a"]),
            req("zone", "Equals", &["a"]),
            req("bad key!", "Exists", &[]),
            req("zone", "In", &["not a label value"]),
        ];
        for r in bad {
            let s = selector(vec![term(vec![r.clone()], vec![])]);
            let got = match_node_selector_terms(&n, &s);
            assert!(got.as_ref().is_err_and(|e| !e.is_empty()), "{r:?}: {got:?}");
        }
        // A valid term still matches beside a malformed one.
        let s = selector(vec![
            term(vec![req("zone", "Equals", &["a"])], vec![]),
            term(vec![req("zone", "In", &["a"])], vec![]),
        ]);
        assert_eq!(match_node_selector_terms(&n, &s), Ok(true));
    }

    #[test]
    fn terms_are_ored_and_requirements_anded() {
        let n = node("n1", &[("zone", "a"), ("disk", "ssd")]);
        let and = term(
            vec![req("zone", "In", &["a"]), req("disk", "In", &["hdd"])],
            vec![],
        );
        assert_eq!(
            match_node_selector_terms(&n, &selector(vec![and.clone()])),
            Ok(false)
        );
        let or = selector(vec![and, term(vec![req("disk", "In", &["ssd"])], vec![])]);
        assert_eq!(match_node_selector_terms(&n, &or), Ok(true));
        // No terms, or only empty terms: nothing matches.
        assert_eq!(match_node_selector_terms(&n, &selector(vec![])), Ok(false));
        let empty = selector(vec![NodeSelectorTerm::default(), term(vec![], vec![])]);
        assert_eq!(match_node_selector_terms(&n, &empty), Ok(false));
    }

    #[test]
    fn match_fields_on_node_name() {
        let n = node("n1", &[("zone", "a")]);
        let cases: Vec<(&str, NodeSelectorTerm, Result<bool, ()>)> = vec![
            (
                "In own name",
                term(vec![], vec![req("metadata.name", "In", &["n1"])]),
                Ok(true),
            ),
            (
                "In other name",
                term(vec![], vec![req("metadata.name", "In", &["n2"])]),
                Ok(false),
            ),
            (
                "NotIn other name",
                term(vec![], vec![req("metadata.name", "NotIn", &["n2"])]),
                Ok(true),
            ),
            (
                "NotIn own name",
                term(vec![], vec![req("metadata.name", "NotIn", &["n1"])]),
                Ok(false),
            ),
            (
                "two values",
                term(vec![], vec![req("metadata.name", "In", &["n1", "n2"])]),
                Err(()),
            ),
            (
                "Exists unsupported",
                term(vec![], vec![req("metadata.name", "Exists", &[])]),
                Err(()),
            ),
            (
                "fields and labels ANDed",
                term(
                    vec![req("zone", "In", &["b"])],
                    vec![req("metadata.name", "In", &["n1"])],
                ),
                Ok(false),
            ),
        ];
        for (name, t, want) in cases {
            let got = match_node_selector_terms(&n, &selector(vec![t])).map_err(|_| ());
            assert_eq!(got, want, "{name}");
        }
    }

    fn pod(node_selector: &[(&str, &str)], required: Option<NodeSelector>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_selector: Some(
                    node_selector
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                affinity: required.map(|r| Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(r),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn required_node_affinity_combines_selector_and_affinity() {
        let n = node("n1", &[("zone", "a"), ("kubernetes.io/os", "linux")]);
        let matches = |p: &Pod| get_required_node_affinity(p).matches(&n).unwrap_or(false);
        assert!(matches(&Pod::default()));
        assert!(matches(&pod(&[], None)));
        assert!(matches(&pod(&[("kubernetes.io/os", "linux")], None)));
        assert!(!matches(&pod(&[("kubernetes.io/os", "windows")], None)));
        assert!(!matches(&pod(&[("missing", "x")], None)));
        let zone_a = selector(vec![term(vec![req("zone", "In", &["a"])], vec![])]);
        let zone_b = selector(vec![term(vec![req("zone", "In", &["b"])], vec![])]);
        assert!(matches(&pod(
            &[("kubernetes.io/os", "linux")],
            Some(zone_a.clone())
        )));
        assert!(!matches(&pod(
            &[("kubernetes.io/os", "windows")],
            Some(zone_a)
        )));
        assert!(!matches(&pod(&[], Some(zone_b))));
        // A required affinity without terms matches no node.
        assert!(!matches(&pod(&[], Some(selector(vec![])))));
    }
}
