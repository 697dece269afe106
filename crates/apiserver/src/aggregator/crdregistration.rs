//! The Local APIServices of custom resources (upstream kube-apiserver's
//! `pkg/controlplane/controller/crdregistration` with the autoregister controller): each
//! group version a CustomResourceDefinition serves gets `<version>.<group>` with
//! `groupPriorityMinimum: 1000` and `versionPriority: 100`, labelled
//! `kube-aggregator.kubernetes.io/automanaged: "true"`; when no definition serves it any
//! more, that APIService is deleted. An APIService of the same name that a user made
//! (without the label) is left alone, as upstream's autoregister leaves it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::builtin::AUTOMANAGED_LABEL;
use crate::error::{ApiError, GroupResource};
use crate::registry::{Objects, Registry};
use crate::rest::State;
use crate::rest::objects::ServerObjects;

/// The priorities upstream gives every custom resource group version ("CRDs should have
/// relatively low priority"; versions sort by their names' Kubernetes order anyway).
const GROUP_PRIORITY_MINIMUM: i32 = 1000;
const VERSION_PRIORITY: i32 = 100;
/// The label value of APIServices kept in sync for as long as they are wanted.
const SYNCED: &str = "true";

fn api_services() -> GroupResource {
    GroupResource::new("apiregistration.k8s.io", "apiservices")
}

/// The `(group, version)`s the custom resources of `registry` serve.
fn wanted(registry: &Registry) -> BTreeSet<(String, String)> {
    registry
        .kinds()
        .iter()
        .filter(|kind| kind.definition().is_some())
        .map(|kind| {
            let info = kind.info();
            (info.group.clone(), info.version.clone())
        })
        .collect()
}

/// Creates the APIServices of the custom resource group versions `registry` serves and
/// deletes the synced ones it no longer serves. Errors: the store's.
pub async fn sync(registry: &Registry, objects: &dyn Objects) -> Result<(), ApiError> {
    let resource = api_services();
    if registry.by_resource(&resource).is_none() {
        return Ok(());
    }
    let wanted = wanted(registry);
    for (group, version) in &wanted {
        let spec = json!({
            "group": group,
            "version": version,
            "groupPriorityMinimum": GROUP_PRIORITY_MINIMUM,
            "versionPriority": VERSION_PRIORITY,
        });
        let name = format!("{version}.{group}");
        super::builtin::ensure_api_service(objects, &name, spec, SYNCED, false).await?;
    }
    for stored in objects.list(&resource, None).await? {
        if !synced(&stored) {
            continue;
        }
        let group = stored["spec"]["group"].as_str().unwrap_or_default();
        let version = stored["spec"]["version"].as_str().unwrap_or_default();
        if wanted.contains(&(group.to_owned(), version.to_owned())) {
            continue;
        }
        let name = stored["metadata"]["name"].as_str().unwrap_or_default();
        match objects.delete(&resource, None, name, None).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn synced(api_service: &Value) -> bool {
    api_service["metadata"]["labels"][AUTOMANAGED_LABEL].as_str() == Some(SYNCED)
}

/// Runs [`sync`] at start and after every change of the served kinds, until the task is
/// aborted. A failed sync is tried again after a second.
pub async fn run(state: Arc<State>) {
    let mut changes = state.registry.subscribe();
    let user = crate::bootstrap::system_user();
    loop {
        let objects = ServerObjects::new(&state, &user, false);
        let registry = state.registry.current();
        match sync(&registry, &objects).await {
            Ok(()) => {
                if changes.changed().await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "custom resource APIServices");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
