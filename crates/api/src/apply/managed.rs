//! `metadata.managedFields` decoded and encoded (upstream
//! `k8s.io/apimachinery/pkg/util/managedfields/internal/managedfields.go`): one entry per
//! manager identity (manager, operation, apiVersion for updates, subresource), each with
//! its field set and the time of its last change.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::fieldpath::Set;

/// `operation` of a managedFields entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    /// `Apply` or `Update`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who manages a set of fields (upstream's manager identifier: the entry without its
/// fields and time, and without the apiVersion for appliers, so that an applier keeps one
/// entry across versions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagerId {
    pub manager: String,
    pub operation: Operation,
    /// Empty for [`Operation::Apply`].
    pub api_version: String,
    /// `status`, `scale`, or empty for the main resource.
    pub subresource: String,
}

impl ManagerId {
    /// The identity of `manager` doing `operation` through `api_version` and
    /// `subresource` (upstream `buildManagerInfo`: an empty manager is `unknown`).
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        let manager = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        ManagerId {
            manager: manager.to_owned(),
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_owned(),
            },
            subresource: subresource.to_owned(),
        }
    }

    /// How conflict messages name the manager (upstream `printManager`):
    /// `"kubectl"`, `"kubectl-edit" using apps/v1`, `"x" with subresource "status"`.
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedSet {
    pub set: Set,
    /// The version the paths are in.
    pub api_version: String,
    /// Whether they came from an apply.
    pub applied: bool,
}

/// Every manager's fields, with the time each last changed something (RFC 3339).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed {
    pub fields: BTreeMap<ManagerId, VersionedSet>,
    pub times: BTreeMap<ManagerId, String>,
}

impl Managed {
    /// Reads `metadata.managedFields` (absent or null: empty). Errors: upstream's
    /// messages for an unknown operation, an empty apiVersion, a missing or unknown
    /// fieldsType, and undecodable fieldsV1.
    pub fn decode(entries: Option<&Value>) -> Result<Managed, String> {
        let mut managed = Managed::default();
        let entries = match entries {
            None | Some(Value::Null) => return Ok(managed),
            Some(Value::Array(entries)) => entries,
            Some(other) => return Err(format!("managedFields must be a list, got {other}")),
        };
        for (i, entry) in entries.iter().enumerate() {
            let text = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or_default();
            let operation = match text("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            let api_version = text("apiVersion");
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match text("fieldsType") {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => {
                    return Err(format!(
                        "invalid fieldsType {other:?} in managed fields entry {i}"
                    ));
                }
            }
            let set = match entry.get("fieldsV1") {
                None | Some(Value::Null) => Set::new(),
                Some(fields) => Set::from_fields_v1(fields)
                    .map_err(|e| format!("error decoding versioned set: {e}"))?,
            };
            let id = ManagerId {
                manager: text("manager").to_owned(),
                operation,
                api_version: match operation {
                    Operation::Apply => String::new(),
                    Operation::Update => api_version.to_owned(),
                },
                subresource: text("subresource").to_owned(),
            };
            let versioned = VersionedSet {
                set,
                api_version: api_version.to_owned(),
                applied: operation == Operation::Apply,
            };
            match entry.get("time").and_then(Value::as_str) {
                Some(time) => managed.times.insert(id.clone(), time.to_owned()),
                None => managed.times.remove(&id),
            };
            managed.fields.insert(id, versioned);
        }
        Ok(managed)
    }

    /// The `metadata.managedFields` list, `None` when no manager is left; entries sorted
    /// as upstream sorts them (operation, time, manager, apiVersion, subresource).
    pub fn encode(&self) -> Option<Value> {
        if self.fields.is_empty() {
            return None;
        }
        let seconds = |id: &ManagerId| {
            self.times
                .get(id)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp())
                .unwrap_or(0)
        };
        let mut ids: Vec<&ManagerId> = self.fields.keys().collect();
        ids.sort_by(|a, b| {
            let (va, vb) = (&self.fields[*a].api_version, &self.fields[*b].api_version);
            a.operation
                .cmp(&b.operation)
                .then_with(|| seconds(a).cmp(&seconds(b)))
                .then_with(|| a.manager.cmp(&b.manager))
                .then_with(|| va.cmp(vb))
                .then_with(|| a.subresource.cmp(&b.subresource))
        });
        let entries = ids
            .into_iter()
            .map(|id| {
                let versioned = &self.fields[id];
                let mut entry = Map::new();
                if !id.manager.is_empty() {
                    entry.insert("manager".into(), id.manager.clone().into());
                }
                let operation = if versioned.applied {
                    Operation::Apply
                } else {
                    id.operation
                };
                entry.insert("operation".into(), operation.as_str().into());
                entry.insert("apiVersion".into(), versioned.api_version.clone().into());
                if let Some(time) = self.times.get(id) {
                    entry.insert("time".into(), time.clone().into());
                }
                entry.insert("fieldsType".into(), "FieldsV1".into());
                entry.insert("fieldsV1".into(), versioned.set.to_fields_v1());
                if !id.subresource.is_empty() {
                    entry.insert("subresource".into(), id.subresource.clone().into());
                }
                Value::Object(entry)
            })
            .collect();
        Some(Value::Array(entries))
    }
}

/// Whether a client's `managedFields` ask to reset them (upstream
/// `isResetManagedFields`): an empty list, or a list of one empty entry.
pub fn is_reset(entries: Option<&Value>) -> bool {
    match entries {
        Some(Value::Array(list)) => match list.as_slice() {
            [] => true,
            [only] => only == &json!({}),
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fieldpath::Path;

    #[test]
    fn entries_round_trip_sorted() {
        let entries = json!([
            {"manager": "b", "operation": "Update", "apiVersion": "apps/v1",
             "time": "2024-01-01T00:00:02Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": "apps/v1",
             "time": "2024-01-01T00:00:01Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}, "subresource": "status"},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
             "time": "2024-01-01T00:00:03Z", "fieldsType": "FieldsV1", "fieldsV1": {}},
        ]);
        let managed = Managed::decode(Some(&entries)).unwrap();
        let applier = ManagerId::new("kubectl", Operation::Apply, "apps/v1", "");
        assert!(managed.fields[&applier].applied);
        assert_eq!(applier.describe(), r#""kubectl""#);
        let status = ManagerId::new("a", Operation::Update, "apps/v1", "status");
        assert_eq!(
            status.describe(),
            r#""a" with subresource "status" using apps/v1"#
        );
        assert!(
            managed.fields[&status]
                .set
                .has(&Path::fields(&["metadata", "labels", "x"]))
        );
        let encoded = managed.encode().unwrap();
        let order: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["kubectl", "a", "b"]);
        assert_eq!(encoded[1], entries[1]);
    }

    #[test]
    fn bad_entries_are_refused_with_upstream_messages() {
        let decode = |e: Value| Managed::decode(Some(&json!([e]))).unwrap_err();
        assert_eq!(decode(json!({})), "operation must be `Apply` or `Update`");
        assert_eq!(
            decode(json!({"operation": "Apply"})),
            "apiVersion must not be empty"
        );
        assert_eq!(
            decode(json!({"operation": "Apply", "apiVersion": "v1"})),
            "missing fieldsType in managed fields entry 0"
        );
        assert!(is_reset(Some(&json!([{}]))) && is_reset(Some(&json!([]))));
        assert!(!is_reset(None) && !is_reset(Some(&json!([{"manager": "x"}]))));
    }
}
