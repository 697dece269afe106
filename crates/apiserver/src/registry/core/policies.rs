//! LimitRanges and ResourceQuotas (upstream `pkg/registry/core/limitrange`,
//! `resourcequota`). Enforcing them is admission's work, which comes with RBAC and
//! admission plugins later.

use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};
use skiff_api::core::resources::{
    default_limit_range, validate_limit_range, validate_resource_list,
};
use skiff_api::field::{ErrorList, Path};

use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// The limitranges kind.
pub struct LimitRanges;

impl Strategy for LimitRanges {
    type Object = LimitRange;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["limits"],
            ..ResourceInfo::of::<LimitRange>()
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn default(&self, object: &mut LimitRange) {
        default_limit_range(object);
    }

    fn validate(&self, object: &LimitRange) -> ErrorList {
        validate_limit_range(object)
    }

    /// NAME CREATED AT.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Created At",
                "date",
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
                0,
            ),
        ]
    }

    fn row(&self, object: &LimitRange) -> Vec<Value> {
        let created = serde_json::to_value(&object.metadata.creation_timestamp).unwrap_or_default();
        vec![json!(name(&object.metadata)), created]
    }
}

/// The resourcequotas kind.
pub struct ResourceQuotas;

impl Strategy for ResourceQuotas {
    type Object = ResourceQuota;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["quota"],
            ..ResourceInfo::of::<ResourceQuota>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    /// Upstream PrepareForCreate: the status is the quota controller's.
    fn prepare_for_create(&self, object: &mut ResourceQuota) {
        object.status = None;
    }

    /// The hard limits are well-formed quantities; scopes are supported.
    fn validate(&self, object: &ResourceQuota) -> ErrorList {
        let mut errors = Vec::new();
        let spec = object.spec.clone().unwrap_or_default();
        let spec_path = Path::new("spec");
        validate_resource_list(&mut errors, &spec_path.child("hard"), spec.hard.as_ref());
        for scope in spec.scopes.iter().flatten() {
            skiff_api::core::one_of(
                &mut errors,
                &spec_path.child("scopes"),
                Some(scope),
                &[
                    "BestEffort",
                    "CrossNamespacePodAffinity",
                    "NotBestEffort",
                    "NotTerminating",
                    "PriorityClass",
                    "Terminating",
                    "VolumeAttributesClass",
                ],
                true,
            );
        }
        errors
    }

    /// NAME AGE REQUEST LIMIT.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            AGE,
            column(
                "Request",
                "string",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                0,
            ),
            column(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                0,
            ),
        ]
    }

    /// Upstream `printResourceQuota`: `used/hard` per resource of the status, `limits.*`
    /// in the Limit column, the rest in Request.
    fn row(&self, object: &ResourceQuota) -> Vec<Value> {
        let status = object.status.clone().unwrap_or_default();
        let used = status.used.unwrap_or_default();
        let mut request = Vec::new();
        let mut limit = Vec::new();
        for (resource, hard) in status.hard.unwrap_or_default() {
            let used = used
                .get(&resource)
                .cloned()
                .unwrap_or(Quantity("0".to_owned()));
            let cell = format!("{resource}: {}/{}", used.0, hard.0);
            if resource.split('.').next() == Some("limits") && resource.contains('.') {
                limit.push(cell);
            } else {
                request.push(cell);
            }
        }
        vec![
            json!(name(&object.metadata)),
            json!(age(&object.metadata)),
            json!(request.join(", ")),
            json!(limit.join(", ")),
        ]
    }
}
