//! policy/v1 poddisruptionbudgets (upstream `pkg/registry/policy/poddisruptionbudget`).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::policy;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};

/// Adds poddisruptionbudgets.
pub fn add(registry: &mut Registry) {
    registry.add(PodDisruptionBudgets);
}

/// `pdb`; status subresource.
pub struct PodDisruptionBudgets;

fn int_or_string_cell(value: Option<&IntOrString>) -> Value {
    Value::from(match value {
        Some(IntOrString::Int(i)) => i.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
        None => "N/A".to_owned(),
    })
}

impl Strategy for PodDisruptionBudgets {
    type Object = PodDisruptionBudget;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["pdb"],
            ..ResourceInfo::of::<PodDisruptionBudget>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, object: &mut PodDisruptionBudget) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &PodDisruptionBudget) -> ErrorList {
        policy::validate(object)
    }

    fn validate_update(&self, new: &PodDisruptionBudget, old: &PodDisruptionBudget) -> ErrorList {
        policy::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Min Available",
                "string",
                "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                0,
            ),
            column(
                "Max Unavailable",
                "string",
                "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                0,
            ),
            column(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &PodDisruptionBudget) -> Vec<Value> {
        let spec = object.spec.clone().unwrap_or_default();
        let allowed = object
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0);
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            int_or_string_cell(spec.min_available.as_ref()),
            int_or_string_cell(spec.max_unavailable.as_ref()),
            Value::from(allowed),
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"minAvailable": "50%"},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2},
        }))
        .unwrap();
        assert_eq!(
            PodDisruptionBudgets.row(&pdb)[..4],
            [json!("web"), json!("50%"), json!("N/A"), json!(1)]
        );
    }
}
