//! apiextensions.k8s.io/v1 CustomResourceDefinitions without I/O, as upstream 1.33's
//! `k8s.io/apiextensions-apiserver` does them:
//!
//! - the CRD kind itself: [`defaults`] (`SetDefaults_CustomResourceDefinition`),
//!   [`prepare_for_create`] / [`prepare_for_update`] / [`prepare_for_status_update`] (the
//!   registry strategy), [`validate_crd`] / [`validate_crd_update`] /
//!   [`validate_crd_status_update`] (`pkg/apis/apiextensions/validation`);
//! - a version's schema: [`Structural`] ([`Structural::new`] from the CRD's
//!   `JSONSchemaProps`, [`schema_for_version`]) and [`validate_structural`];
//! - custom resources of a version: [`apply_defaults`], [`prune`] and [`validate_object`]
//!   (in that order, as the API server decodes, then validates), and [`validate_scale`]
//!   for the scale subresource's replicas;
//! - publishing: [`openapi_schema`] / [`openapi_list_schema`] for `/openapi/v2` and
//!   `/openapi/v3` (what `kubectl explain` reads).
//!
//! Left to the CEL module: compiling and running `x-kubernetes-validations` rules (only
//! their static checks are here).

mod crd;
mod defaulting;
mod formats;
mod openapi;
mod structural;
mod validate;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionStatus, CustomResourceSubresourceScale,
};
use serde_json::Value;

pub use crd::{
    API_APPROVED_ANNOTATION, is_established, validate_crd, validate_crd_status_update,
    validate_crd_update,
};
pub use defaulting::{apply_defaults, prune};
pub use openapi::{
    OpenApiVersion, openapi_list_schema, openapi_schema, rest_friendly_group, to_openapi,
};
pub use structural::{
    Extensions, Generic, NestedValueValidation, Structural, StructuralOrBool, ValueValidation,
    unfold, validate_structural,
};
pub use validate::validate_object;

use crate::field::{ErrorList, FieldError, Path};

/// Upstream's v1 defaulting: `names.singular` is the lower-cased kind, `names.listKind` is
/// `<Kind>List`, `conversion` is `{strategy: None}`, a conversion webhook service's port is
/// 443, and `status.storedVersions` starts with the storage version when empty.
pub fn defaults(crd: &mut CustomResourceDefinition) {
    let names = &mut crd.spec.names;
    if names.singular.as_deref().is_none_or(str::is_empty) {
        names.singular = Some(names.kind.to_lowercase());
    }
    if names.list_kind.as_deref().is_none_or(str::is_empty) && !names.kind.is_empty() {
        names.list_kind = Some(format!("{}List", names.kind));
    }
    let conversion = crd
        .spec
        .conversion
        .get_or_insert_with(|| CustomResourceConversion {
            strategy: "None".to_owned(),
            webhook: None,
        });
    if let Some(service) = conversion
        .webhook
        .as_mut()
        .and_then(|w| w.client_config.as_mut())
        .and_then(|c| c.service.as_mut())
    {
        service.port.get_or_insert(443);
    }
    let storage = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone());
    let status = crd.status.get_or_insert_with(Default::default);
    if status.stored_versions.as_ref().is_none_or(Vec::is_empty)
        && let Some(storage) = storage
    {
        status.stored_versions = Some(vec![storage]);
    }
}

fn record_storage_version(crd: &mut CustomResourceDefinition) {
    let Some(storage) = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
    else {
        return;
    };
    let status = crd.status.get_or_insert_with(Default::default);
    let stored = status.stored_versions.get_or_insert_with(Vec::new);
    if !stored.contains(&storage) {
        stored.push(storage);
    }
}

/// The strategy's `PrepareForCreate`: the status is reset (empty accepted names, no
/// conditions) with the storage version as the only stored version, and the generation
/// is 1.
pub fn prepare_for_create(crd: &mut CustomResourceDefinition) {
    crd.status = Some(CustomResourceDefinitionStatus {
        accepted_names: Some(CustomResourceDefinitionNames::default()),
        ..Default::default()
    });
    crd.metadata.generation = Some(1);
    record_storage_version(crd);
}

/// The strategy's `PrepareForUpdate`: the status stays the old one (the status
/// subresource changes it), the generation goes up when the spec changed, and a new
/// storage version is added to the stored versions.
pub fn prepare_for_update(new: &mut CustomResourceDefinition, old: &CustomResourceDefinition) {
    new.status = old.status.clone();
    if new.spec != old.spec {
        new.metadata.generation = Some(old.metadata.generation.unwrap_or(0) + 1);
    }
    record_storage_version(new);
}

/// The status strategy's `PrepareForUpdate`: the spec stays the old one.
pub fn prepare_for_status_update(
    new: &mut CustomResourceDefinition,
    old: &CustomResourceDefinition,
) {
    new.spec = old.spec.clone();
}

/// The structural schema of `version` of `crd` (`None` when the version has no schema
/// or does not exist); `Err` with upstream's message for a schema that cannot be
/// structural (validation rejects those CRDs).
pub fn schema_for_version(
    crd: &CustomResourceDefinition,
    version: &str,
) -> Result<Option<Structural>, String> {
    let schema = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref());
    schema.map(Structural::new).transpose()
}

/// The custom resource validator's scale checks (upstream `ValidateScaleSpec` /
/// `ValidateScaleStatus`): the value at `specReplicasPath` (and at `statusReplicasPath`,
/// when present) must be an integer from 0 to 2147483647. Errors are at the JSON path
/// itself (`.spec.replicas`), as upstream reports them.
pub fn validate_scale(object: &Value, scale: &CustomResourceSubresourceScale) -> ErrorList {
    let mut errs = Vec::new();
    for json_path in [
        scale.spec_replicas_path.as_str(),
        scale.status_replicas_path.as_str(),
    ] {
        let fields: Vec<&str> = json_path.trim_start_matches('.').split('.').collect();
        let mut current = Some(object);
        for field in &fields {
            current = current.and_then(|v| v.get(field));
        }
        let path = Path::new(json_path);
        match current {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.is_i64() => {
                let replicas = n.as_i64().unwrap_or_default();
                if replicas < 0 {
                    errs.push(FieldError::invalid(
                        &path,
                        replicas,
                        "should be a non-negative integer",
                    ));
                } else if replicas > i64::from(i32::MAX) {
                    errs.push(FieldError::invalid(
                        &path,
                        replicas,
                        format!("should be less than or equal to {}", i32::MAX),
                    ));
                }
            }
            Some(other) => {
                let go_type = match other {
                    Value::String(_) => "string",
                    Value::Bool(_) => "bool",
                    Value::Number(_) => "float64",
                    Value::Array(_) => "[]interface {}",
                    _ => "map[string]interface {}",
                };
                let shown = match other {
                    Value::String(text) => text.clone(),
                    _ => other.to_string(),
                };
                errs.push(FieldError::invalid(
                    &path,
                    0,
                    format!(
                        "{json_path} accessor error: {shown} is of the type {go_type}, expected \
                         int64"
                    ),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests;
