//! ServiceAccounts (upstream `pkg/registry/core/serviceaccount`).

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{Value, json};

use super::printers::{age, age_column, column, name, name_column};
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

    /// `token` (TokenRequest).
    fn subresources(&self) -> Vec<std::sync::Arc<dyn Subresource>> {
        vec![crate::authn::token_request::subresource()]
    }

    /// NAME SECRETS AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            name_column(),
            column(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_column(),
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
