//! ConfigMaps and Secrets (upstream `pkg/registry/core/configmap`, `secret`).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::{Value, json};
use skiff_api::core::config::{
    default_secret, validate_config_map, validate_config_map_update, validate_secret,
    validate_secret_update,
};
use skiff_api::field::ErrorList;

use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// The configmaps kind.
pub struct ConfigMaps;

impl Strategy for ConfigMaps {
    type Object = ConfigMap;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["cm"],
            ..ResourceInfo::of::<ConfigMap>()
        }
    }

    fn validate(&self, object: &ConfigMap) -> ErrorList {
        validate_config_map(object)
    }

    fn validate_update(&self, new: &ConfigMap, old: &ConfigMap) -> ErrorList {
        validate_config_map_update(new, old)
    }

    /// NAME DATA AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Data", "string", "Data contains the configuration data.", 0),
            AGE,
        ]
    }

    fn row(&self, object: &ConfigMap) -> Vec<Value> {
        let data = object.data.as_ref().map_or(0, |d| d.len())
            + object.binary_data.as_ref().map_or(0, |d| d.len());
        vec![
            json!(name(&object.metadata)),
            json!(data),
            json!(age(&object.metadata)),
        ]
    }
}

/// The secrets kind.
pub struct Secrets;

impl Strategy for Secrets {
    type Object = Secret;

    fn default(&self, object: &mut Secret) {
        default_secret(object);
    }

    fn validate(&self, object: &Secret) -> ErrorList {
        validate_secret(object)
    }

    fn validate_update(&self, new: &Secret, old: &Secret) -> ErrorList {
        validate_secret_update(new, old)
    }

    /// Upstream `SecretToSelectableFields`.
    fn selectable_fields(&self, object: &Secret) -> Vec<(&'static str, String)> {
        vec![("type", object.type_.clone().unwrap_or_default())]
    }

    /// NAME TYPE DATA AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data.",
                0,
            ),
            column("Data", "string", "Data contains the secret data.", 0),
            AGE,
        ]
    }

    fn row(&self, object: &Secret) -> Vec<Value> {
        vec![
            json!(name(&object.metadata)),
            json!(object.type_.clone().unwrap_or_default()),
            json!(object.data.as_ref().map_or(0, |d| d.len())),
            json!(age(&object.metadata)),
        ]
    }
}
