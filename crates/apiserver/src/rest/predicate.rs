//! Which objects a list or watch returns (upstream `storage.SelectionPredicate`): the
//! `labelSelector` and `fieldSelector` parameters, with the fields every kind supports
//! (`metadata.name`, `metadata.namespace`) and the kind's selectable fields.

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
    /// Parses the selectors of a request. Errors: 400 for a malformed selector or a field
    /// the kind cannot select on (`field label not supported: spec.foo`).
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
        if let Some(fields) = &fields {
            let supported = supported_fields(kind);
            if let Some(unknown) = fields.fields().into_iter().find(|f| !supported.contains(f)) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {unknown}"
                )));
            }
        }
        Ok(Predicate { labels, fields })
    }

    /// Whether every object matches (no selector).
    pub fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    /// Whether `object` matches both selectors.
    pub fn matches(&self, kind: &dyn Kind, object: &Value) -> Result<bool, ApiError> {
        if let Some(selector) = &self.labels {
            if !selector.matches(&labels(object)) {
                return Ok(false);
            }
        }
        let Some(selector) = &self.fields else {
            return Ok(true);
        };
        let mut values = vec![
            ("metadata.name", meta_string(object, "name")),
            ("metadata.namespace", meta_string(object, "namespace")),
        ];
        values.extend(kind.selectable_fields(object)?);
        Ok(selector.matches(&|field: &str| {
            values
                .iter()
                .find(|(name, _)| *name == field)
                .map(|(_, value)| value.clone())
        }))
    }
}

/// The fields a field selector may use for `kind`. The kind's selectable fields are found
/// by asking it about an empty object.
fn supported_fields(kind: &dyn Kind) -> Vec<&'static str> {
    let mut fields = vec!["metadata.name", "metadata.namespace"];
    let info = kind.info();
    let probe = serde_json::json!({
        "apiVersion": info.api_version(),
        "kind": info.kind,
        "metadata": {},
    });
    if let Ok(extra) = kind.selectable_fields(&probe) {
        fields.extend(extra.into_iter().map(|(name, _)| name));
    }
    fields
}
