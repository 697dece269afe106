//! scheduling.k8s.io/v1 priorityclasses (upstream `pkg/registry/scheduling/priorityclass`
//! and the Priority admission plugin's one-global-default rule).

use async_trait::async_trait;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::scheduling;

use super::printers::{self, AGE, NAME, column};
use super::{Context, Registry, ResourceInfo, Strategy, TableColumn};
use crate::error::ApiError;

/// Adds priorityclasses.
pub fn add(registry: &mut Registry) {
    registry.add(PriorityClasses);
}

/// `pc`; cluster-scoped; at most one global default.
pub struct PriorityClasses;

impl PriorityClasses {
    /// 403 when `class` is a global default and another class already is (upstream's
    /// Priority admission plugin).
    async fn check_single_default(
        &self,
        ctx: &Context<'_>,
        class: &PriorityClass,
    ) -> Result<(), ApiError> {
        if class.global_default != Some(true) {
            return Ok(());
        }
        let info = self.info();
        let name = class.metadata.name.as_deref().unwrap_or("");
        for other in ctx.objects.list(&info.group_resource(), None).await? {
            let other_name = other["metadata"]["name"].as_str().unwrap_or("");
            if other["globalDefault"] == Value::Bool(true) && other_name != name {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "{}.{} {name:?} is forbidden: PriorityClass {other_name} is already \
                         marked as default. Only one default can exist",
                        info.plural, info.group
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Strategy for PriorityClasses {
    type Object = PriorityClass;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["pc"],
            ..ResourceInfo::of::<PriorityClass>()
        }
    }

    fn default(&self, object: &mut PriorityClass) {
        scheduling::default(object);
    }

    fn validate(&self, object: &PriorityClass) -> ErrorList {
        scheduling::validate(object)
    }

    fn validate_update(&self, new: &PriorityClass, old: &PriorityClass) -> ErrorList {
        let mut errors = scheduling::validate(new);
        errors.extend(scheduling::validate_update(new, old));
        errors
    }

    async fn admit_create(
        &self,
        ctx: &Context<'_>,
        object: &mut PriorityClass,
    ) -> Result<(), ApiError> {
        self.check_single_default(ctx, object).await
    }

    async fn admit_update(
        &self,
        ctx: &Context<'_>,
        new: &mut PriorityClass,
        _old: &PriorityClass,
    ) -> Result<(), ApiError> {
        self.check_single_default(ctx, new).await
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Value",
                "integer",
                "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
                0,
            ),
            column(
                "Global-Default",
                "boolean",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
                0,
            ),
            AGE,
            column(
                "PreemptionPolicy",
                "string",
                "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
                0,
            ),
        ]
    }

    fn row(&self, object: &PriorityClass) -> Vec<Value> {
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(object.value.unwrap_or(0)),
            Value::from(object.global_default.unwrap_or(false)),
            printers::age(&object.metadata),
            Value::from(object.preemption_policy.clone().unwrap_or_default()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let class = &skiff_api::scheduling::system_priority_classes()[0];
        assert_eq!(
            PriorityClasses.row(class),
            [
                json!("system-node-critical"),
                json!(2_000_001_000),
                json!(false),
                json!("<unknown>"),
                json!("PreemptLowerPriority"),
            ]
        );
    }
}
