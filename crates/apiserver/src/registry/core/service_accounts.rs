//! ServiceAccounts (upstream `pkg/registry/core/serviceaccount`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{Value, json};

use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{ResourceInfo, Strategy, Subresource, TableColumn};

/// The serviceaccounts kind.
pub struct ServiceAccounts;

impl Strategy for ServiceAccounts {
    type Object = ServiceAccount;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["sa"],
            ..ResourceInfo::of::<ServiceAccount>()
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    /// `token` (TokenRequest).
    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        vec![crate::authn::token_request::subresource()]
    }

    /// NAME SECRETS AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &ServiceAccount) -> Vec<Value> {
        vec![
            json!(name(&object.metadata)),
            json!(object.secrets.as_ref().map_or(0, |s| s.len())),
            json!(age(&object.metadata)),
        ]
    }
}
