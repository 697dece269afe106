//! Which objects a list or watch returns (upstream `storage.SelectionPredicate`): the
//! `labelSelector` and `fieldSelector` parameters, with the fields every kind supports
//! (`metadata.name`, `metadata.namespace`) and the kind's selectable fields.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;
use skiff_api::selector::{FieldSelector, LabelSelector};

use super::object::{labels, meta_string};
use crate::error::ApiError;
use crate::registry::Kind;

/// A parsed label and field selector.
#[derive(Debug, Clone, Default)]
pub struct Predicate {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Predicate {
    /// Parses the selectors of a request. The field selector's labels go through the
    /// kind's field label conversion (see [`Conversion`]). Errors: 400 for a
    /// malformed selector or a field the kind cannot select on, with upstream's message.
    pub fn new(
        kind: &dyn Kind,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let labels = label_selector
            .map(|text| LabelSelector::parse(text).map_err(ApiError::bad_request))
            .transpose()?;
        let fields = field_selector
            .map(|text| FieldSelector::parse(text).map_err(ApiError::bad_request))
            .transpose()?;
        let fields = match fields {
            Some(fields) => {
                let conversion = Conversion::of(kind);
                let converted = fields
                    .transform(|label, value| {
                        let field = conversion.convert(label)?;
                        Ok(Some((field.into_owned(), value.to_owned())))
                    })
                    .map_err(ApiError::bad_request)?;
                Some(converted)
            }
            None => None,
        };
        Ok(Predicate { labels, fields })
    }

    /// Whether every object matches (no selector).
    pub fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    /// Whether the selectors read nothing but `metadata.labels`, `metadata.name` and
    /// `metadata.namespace`, so that [`Predicate::matches_metadata`] decides alone.
    pub fn needs_only_metadata(&self) -> bool {
        self.fields.as_ref().is_none_or(|selector| {
            selector
                .fields()
                .iter()
                .all(|f| *f == "metadata.name" || *f == "metadata.namespace")
        })
    }

    /// [`Predicate::matches`] for an object with these labels, name and namespace, when
    /// [`Predicate::needs_only_metadata`].
    pub fn matches_metadata(
        &self,
        labels: &BTreeMap<String, String>,
        name: &str,
        namespace: &str,
    ) -> bool {
        if let Some(selector) = &self.labels
            && !selector.matches(labels)
        {
            return false;
        }
        self.fields.as_ref().is_none_or(|selector| {
            selector.matches(&|field: &str| match field {
                "metadata.name" => Some(name.to_owned()),
                "metadata.namespace" => Some(namespace.to_owned()),
                _ => None,
            })
        })
    }

    /// Whether `object` matches both selectors.
    pub fn matches(&self, kind: &dyn Kind, object: &Value) -> Result<bool, ApiError> {
        if let Some(selector) = &self.labels
            && !selector.matches(&labels(object))
        {
            return Ok(false);
        }
        let Some(selector) = &self.fields else {
            return Ok(true);
        };
        let mut values = vec![
            (Cow::Borrowed("metadata.name"), meta_string(object, "name")),
            (
                Cow::Borrowed("metadata.namespace"),
                meta_string(object, "namespace"),
            ),
        ];
        values.extend(kind.selectable_fields(object)?);
        Ok(selector.matches(&|field: &str| {
            values
                .iter()
                .find(|(name, _)| name == field)
                .map(|(_, value)| value.clone())
        }))
    }
}

/// How a request's field label maps to the field a kind selects on (upstream: the scheme's
/// `AddFieldLabelConversionFunc` of each group version kind, `pkg/apis/<group>/<version>/
/// conversion.go`, and `runtime.DefaultMetaV1FieldSelectorConversion` for the rest).
#[derive(Debug, Clone)]
enum Conversion {
    /// Only `metadata.name` and `metadata.namespace`; anything else is
    /// `"x" is not a known field selector: only "metadata.name", "metadata.namespace"`.
    MetaOnly,
    /// The listed labels, each with the selectable field it reads; anything else is
    /// refused with `message(label)`.
    Listed {
        labels: Vec<(Cow<'static, str>, Cow<'static, str>)>,
        message: fn(&str) -> String,
    },
}

/// Labels a request may use unchanged.
fn same(labels: &[&'static str]) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    labels
        .iter()
        .map(|l| (Cow::Borrowed(*l), Cow::Borrowed(*l)))
        .collect()
}

/// `field label not supported: x`, the message of most conversions.
fn not_supported(label: &str) -> String {
    format!("field label not supported: {label}")
}

impl Conversion {
    /// The conversion of `kind`, by its group, version and kind as upstream registers them.
    /// A kind without an upstream registration that declares selectable fields (one added
    /// after this table) accepts those, metadata and `field label not supported`.
    fn of(kind: &dyn Kind) -> Self {
        let info = kind.info();
        let listed = |labels: Vec<(Cow<'static, str>, Cow<'static, str>)>| Conversion::Listed {
            labels,
            message: not_supported,
        };
        match (
            info.group.as_str(),
            info.version.as_str(),
            info.kind.as_str(),
        ) {
            ("", "v1", "Pod") => {
                let mut labels = same(&[
                    "metadata.name",
                    "metadata.namespace",
                    "spec.nodeName",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "spec.hostNetwork",
                    "status.phase",
                    "status.podIP",
                    "status.podIPs",
                    "status.nominatedNodeName",
                ]);
                // Old v1 clients name the node `spec.host`.
                labels.push(("spec.host".into(), "spec.nodeName".into()));
                listed(labels)
            }
            ("", "v1", "Node") => listed(same(&["metadata.name", "spec.unschedulable"])),
            ("", "v1", "ReplicationController") => listed(same(&[
                "metadata.name",
                "metadata.namespace",
                "status.replicas",
            ])),
            ("", "v1", "Event") => listed(same(&[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "metadata.namespace",
                "metadata.name",
            ])),
            ("", "v1", "Namespace") => listed(same(&["status.phase", "metadata.name"])),
            ("", "v1", "Secret") => listed(same(&["type", "metadata.namespace", "metadata.name"])),
            ("", "v1", "Service") => listed(same(&[
                "metadata.namespace",
                "metadata.name",
                "spec.clusterIP",
                "spec.type",
            ])),
            // events.k8s.io names map to the core/v1 fields both APIs select on.
            ("events.k8s.io", "v1", "Event") => listed(
                [
                    ("reason", "reason"),
                    ("regarding.kind", "involvedObject.kind"),
                    ("regarding.namespace", "involvedObject.namespace"),
                    ("regarding.name", "involvedObject.name"),
                    ("regarding.uid", "involvedObject.uid"),
                    ("regarding.apiVersion", "involvedObject.apiVersion"),
                    (
                        "regarding.resourceVersion",
                        "involvedObject.resourceVersion",
                    ),
                    ("regarding.fieldPath", "involvedObject.fieldPath"),
                    ("reportingController", "reportingComponent"),
                    ("source", "source"),
                    ("type", "type"),
                    ("metadata.namespace", "metadata.namespace"),
                    ("metadata.name", "metadata.name"),
                ]
                .into_iter()
                .map(|(label, field)| (Cow::Borrowed(label), Cow::Borrowed(field)))
                .collect(),
            ),
            ("batch", "v1", "Job") => Conversion::Listed {
                labels: same(&["metadata.name", "metadata.namespace", "status.successful"]),
                message: |label| format!("field label {label:?} not supported for Job"),
            },
            ("certificates.k8s.io", "v1", "CertificateSigningRequest") => {
                listed(same(&["metadata.name", "spec.signerName"]))
            }
            // apps/v1 registers no conversion: ReplicaSets' `status.replicas` is not
            // selectable through the API although their strategy lists it.
            ("apps", "v1", _) => Conversion::MetaOnly,
            _ => {
                let fields = declared_fields(kind);
                if fields.is_empty() {
                    Conversion::MetaOnly
                } else {
                    let mut labels = same(&["metadata.name", "metadata.namespace"]);
                    labels.extend(fields.into_iter().map(|f| (f.clone(), f)));
                    listed(labels)
                }
            }
        }
    }

    /// The selectable field `label` reads. Errors: upstream's message for a label the
    /// kind does not support.
    fn convert(&self, label: &str) -> Result<Cow<'static, str>, String> {
        match self {
            Conversion::MetaOnly => match label {
                "metadata.name" => Ok(Cow::Borrowed("metadata.name")),
                "metadata.namespace" => Ok(Cow::Borrowed("metadata.namespace")),
                _ => Err(format!(
                    "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )),
            },
            Conversion::Listed { labels, message } => labels
                .iter()
                .find(|(name, _)| name == label)
                .map(|(_, field)| field.clone())
                .ok_or_else(|| message(label)),
        }
    }
}

/// The selectable fields a kind declares, found by asking it about an empty object.
fn declared_fields(kind: &dyn Kind) -> Vec<Cow<'static, str>> {
    let info = kind.info();
    let probe = serde_json::json!({
        "apiVersion": info.api_version(),
        "kind": info.kind,
        "metadata": {},
    });
    kind.selectable_fields(&probe)
        .map(|fields| fields.into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    /// Parses `selector` for the built-in kind at `group/version/plural`.
    fn parse(group: &str, plural: &str, selector: &str) -> Result<Predicate, String> {
        let registry = Registry::builtin();
        let version = "v1";
        let kind = registry
            .lookup(group, version, plural)
            .unwrap_or_else(|| panic!("{group}/{plural} is served"));
        Predicate::new(kind.as_ref(), None, Some(selector)).map_err(|e| {
            assert_eq!(e.code, 400, "{selector}");
            e.message
        })
    }

    #[test]
    fn field_labels_per_kind_as_upstream() {
        let meta_only = |l: &str| {
            format!(
                "{l:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        };
        let unsupported = |l: &str| format!("field label not supported: {l}");
        // (group, plural, labels accepted, labels refused with their message)
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, &str, Vec<&str>, Vec<(&str, String)>)> = vec![
            (
                "",
                "pods",
                vec![
                    "metadata.name",
                    "metadata.namespace",
                    "spec.nodeName",
                    "spec.host",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "spec.hostNetwork",
                    "status.phase",
                    "status.podIP",
                    "status.podIPs",
                    "status.nominatedNodeName",
                ],
                vec![("spec.priority", unsupported("spec.priority"))],
            ),
            (
                "",
                "services",
                vec![
                    "metadata.name",
                    "metadata.namespace",
                    "spec.clusterIP",
                    "spec.type",
                ],
                vec![("spec.ports", unsupported("spec.ports"))],
            ),
            (
                "",
                "events",
                vec![
                    "involvedObject.kind",
                    "involvedObject.namespace",
                    "involvedObject.name",
                    "involvedObject.uid",
                    "involvedObject.apiVersion",
                    "involvedObject.resourceVersion",
                    "involvedObject.fieldPath",
                    "reason",
                    "reportingComponent",
                    "source",
                    "type",
                ],
                vec![("regarding.kind", unsupported("regarding.kind"))],
            ),
            (
                "events.k8s.io",
                "events",
                vec![
                    "regarding.kind",
                    "regarding.name",
                    "reportingController",
                    "type",
                ],
                vec![("involvedObject.kind", unsupported("involvedObject.kind"))],
            ),
            (
                "",
                "secrets",
                vec!["type", "metadata.name", "metadata.namespace"],
                vec![("data", unsupported("data"))],
            ),
            (
                "",
                "namespaces",
                vec!["status.phase", "metadata.name"],
                vec![
                    ("metadata.namespace", unsupported("metadata.namespace")),
                    ("name", unsupported("name")),
                ],
            ),
            (
                "",
                "nodes",
                vec!["metadata.name", "spec.unschedulable"],
                vec![("metadata.namespace", unsupported("metadata.namespace"))],
            ),
            (
                "",
                "replicationcontrollers",
                vec!["metadata.name", "metadata.namespace", "status.replicas"],
                vec![("spec.replicas", unsupported("spec.replicas"))],
            ),
            (
                "",
                "configmaps",
                vec!["metadata.name", "metadata.namespace"],
                vec![("spec.foo", meta_only("spec.foo"))],
            ),
            (
                "",
                "persistentvolumes",
                vec!["metadata.name", "metadata.namespace"],
                vec![("name", meta_only("name"))],
            ),
            (
                "apps",
                "replicasets",
                vec!["metadata.name", "metadata.namespace"],
                vec![("status.replicas", meta_only("status.replicas"))],
            ),
            (
                "batch",
                "jobs",
                vec!["metadata.name", "metadata.namespace", "status.successful"],
                vec![(
                    "status.active",
                    "field label \"status.active\" not supported for Job".to_owned(),
                )],
            ),
            (
                "certificates.k8s.io",
                "certificatesigningrequests",
                vec!["metadata.name", "spec.signerName"],
                vec![("metadata.namespace", unsupported("metadata.namespace"))],
            ),
        ];
        for (group, plural, accepted, refused) in cases {
            for label in accepted {
                let selector = format!("{label}=x");
                assert!(
                    parse(group, plural, &selector).is_ok(),
                    "{group}/{plural}: {label} is accepted"
                );
            }
            for (label, message) in refused {
                let selector = format!("{label}!=x");
                assert_eq!(
                    parse(group, plural, &selector).err(),
                    Some(message),
                    "{group}/{plural}: {label}"
                );
            }
        }
    }

    #[test]
    fn labels_are_converted_before_matching() {
        let registry = Registry::builtin();
        let pods = registry.lookup("", "v1", "pods").expect("pods");
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"podIPs": [{"ip": "10.0.0.1"}]},
        });
        let matches = |selector: &str| {
            Predicate::new(pods.as_ref(), None, Some(selector))
                .and_then(|p| p.matches(pods.as_ref(), &pod))
                .expect("valid selector")
        };
        assert!(matches("spec.host=n1"));
        assert!(!matches("spec.host=n2"));
        assert!(matches("status.podIP=10.0.0.1"));
        // Accepted but never set, as upstream: it reads as empty.
        assert!(matches("status.podIPs="));
        assert!(!matches("status.podIPs=10.0.0.1"));

        let events = registry
            .lookup("events.k8s.io", "v1", "events")
            .expect("events");
        let event = serde_json::json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-02T03:04:05.000000Z",
            "regarding": {"kind": "Pod", "name": "web"},
            "reportingController": "kubelet",
        });
        let selected = |selector: &str| {
            Predicate::new(events.as_ref(), None, Some(selector))
                .and_then(|p| p.matches(events.as_ref(), &event))
                .expect("valid selector")
        };
        assert!(selected("regarding.kind=Pod,reportingController=kubelet"));
        assert!(selected("source=kubelet"));
        assert!(!selected("regarding.name=db"));
    }
}
