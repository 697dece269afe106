//! Label and field selectors (`k8s.io/apimachinery/pkg/labels`, `pkg/fields`): parsed from
//! the `labelSelector` / `fieldSelector` query parameters or from a `metav1.LabelSelector`.
//!
//! STUB: the machinery helper replaces the bodies; the signatures are the contract.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaLabelSelector;

/// A parsed label selector (`a=b,c!=d,e in (f,g),!h`). Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {}

impl LabelSelector {
    /// Parses the query-parameter syntax. Errors carry upstream's message.
    pub fn parse(_text: &str) -> Result<Self, String> {
        Err("label selectors are not implemented yet".into())
    }

    /// From a `metav1.LabelSelector` (matchLabels and matchExpressions).
    pub fn from_meta(_selector: &MetaLabelSelector) -> Result<Self, String> {
        Err("label selectors are not implemented yet".into())
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, _labels: &BTreeMap<String, String>) -> bool {
        true
    }
}

/// A parsed field selector (`metadata.name=x,status.phase!=Running`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {}

impl FieldSelector {
    /// Parses the query-parameter syntax (`=`, `==`, `!=`; `\` escapes).
    pub fn parse(_text: &str) -> Result<Self, String> {
        Err("field selectors are not implemented yet".into())
    }

    /// The field names used, so the server can reject unsupported ones
    /// (`field label not supported: spec.foo`).
    pub fn fields(&self) -> Vec<&str> {
        Vec::new()
    }

    /// Whether the object's fields (`field(name)` gives a field's value) satisfy every
    /// requirement.
    pub fn matches(&self, _field: &dyn Fn(&str) -> Option<String>) -> bool {
        true
    }
}
