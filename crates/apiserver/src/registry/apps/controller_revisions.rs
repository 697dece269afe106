//! ControllerRevisions (upstream `pkg/registry/apps/controllerrevision`).

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;
use skiff_api::apps::controller_revision;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, NAME, column};
use crate::registry::{Strategy, TableColumn};

/// No short names, no subresources.
pub struct ControllerRevisions;

/// The Controller cell: the controlling owner as `kind.group/name` in lower case
/// (`daemonset.apps/agent`), `<none>` without one.
fn controller(revision: &ControllerRevision) -> String {
    let owner = revision
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match owner {
        None => "<none>".to_owned(),
        Some(owner) => {
            let group = owner.api_version.rsplit_once('/').map(|(g, _)| g);
            let kind = match group {
                Some(group) if !group.is_empty() => format!("{}.{group}", owner.kind),
                _ => owner.kind.clone(),
            };
            if kind.is_empty() {
                owner.name.clone()
            } else {
                format!("{}/{}", kind.to_lowercase(), owner.name)
            }
        }
    }
}

impl Strategy for ControllerRevisions {
    type Object = ControllerRevision;

    fn validate(&self, object: &ControllerRevision) -> ErrorList {
        controller_revision::validate(object)
    }

    fn validate_update(&self, new: &ControllerRevision, old: &ControllerRevision) -> ErrorList {
        controller_revision::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Controller", "string", "Controller of the object", 0),
            column(
                "Revision",
                "string",
                "Revision indicates the revision of the state represented by Data.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &ControllerRevision) -> Vec<Value> {
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(controller(object)),
            Value::from(object.revision.unwrap_or(0)),
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn controller_cell_names_the_owner_kind() {
        let revision: ControllerRevision = serde_json::from_value(json!({
            "metadata": {"name": "agent-5d8", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": true},
            ]},
            "data": {},
            "revision": 2,
        }))
        .unwrap();
        assert_eq!(
            ControllerRevisions.row(&revision)[..3],
            [json!("agent-5d8"), json!("daemonset.apps/agent"), json!(2)]
        );
    }
}
