//! The API server's own CustomResourceDefinition controllers (upstream
//! apiextensions-apiserver `pkg/controller/status` NamingConditionController,
//! `pkg/controller/establish` EstablishingController and `pkg/controller/finalizer`
//! CRDFinalizer), driven by a watch on the definitions:
//!
//! - **names**: a definition's names are accepted unless another definition of the same
//!   group accepted them first (`NamesAccepted`, with upstream's reasons and messages);
//! - **establishing**: once its names are accepted, each served version is installed in the
//!   [`LiveRegistry`] and the definition is `Established`;
//! - **finalizing**: a deleted definition (held by the cleanup finalizer) is `Terminating`,
//!   refuses new objects, deletes its objects, then leaves the registry and loses the
//!   finalizer, which lets the store delete it.
//!
//! [`LiveRegistry`]: crate::registry::LiveRegistry

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition, CustomResourceDefinitionNames,
};
use serde_json::Value;

use super::CLEANUP_FINALIZER;
use super::conversion::Converter;
use super::custom_resource::CustomResource;
use crate::error::{ApiError, GroupResource};
use crate::registry::{Kind, Objects};
use crate::rest::State;
use crate::rest::objects::ServerObjects;
use crate::storage::{EventType, Storage, WatchItem};

/// Where the definitions are stored.
const PREFIX: &str = "/registry/customresourcedefinitions/";

/// How long a definition whose objects still have finalizers waits before the next try.
const FINALIZE_RETRY: Duration = Duration::from_secs(2);

fn definitions() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

/// Runs the controllers until the task is aborted. Store errors restart the watch after a
/// second.
pub(crate) async fn run(state: Arc<State>) {
    let mut controller = Controller {
        state,
        definitions: BTreeMap::new(),
    };
    loop {
        if let Err(e) = controller.sync_and_watch().await {
            tracing::warn!(error = %e.message, "custom resource definitions: watch ended");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

struct Controller {
    state: Arc<State>,
    /// The definitions as last seen, by name.
    definitions: BTreeMap<String, CustomResourceDefinition>,
}

fn decode(value: &[u8]) -> Option<CustomResourceDefinition> {
    serde_json::from_slice(value)
        .inspect_err(|e| tracing::warn!(error = %e, "custom resource definitions: undecodable"))
        .ok()
}

impl Controller {
    async fn sync_and_watch(&mut self) -> Result<(), ApiError> {
        let storage = self.state.storage.clone();
        let list = storage
            .list(PREFIX, None, 0, None)
            .await
            .map_err(ApiError::internal)?;
        self.definitions = list
            .items
            .iter()
            .filter_map(|kv| decode(&kv.value))
            .filter_map(|crd| Some((crd.metadata.name.clone()?, crd)))
            .collect();
        self.install_all();
        let names: Vec<String> = self.definitions.keys().cloned().collect();
        for name in names {
            self.reconcile(&name).await;
        }
        let mut events = storage
            .watch(PREFIX, list.revision)
            .await
            .map_err(ApiError::internal)?;
        let mut retry = tokio::time::interval(FINALIZE_RETRY);
        loop {
            tokio::select! {
                item = events.next() => {
                    let Some(item) = item else { return Ok(()) };
                    let WatchItem::Event(event) = item.map_err(ApiError::internal)? else {
                        continue;
                    };
                    let Some(crd) = decode(&event.kv.value) else { continue };
                    let Some(name) = crd.metadata.name.clone() else { continue };
                    if event.kind == EventType::Deleted {
                        self.definitions.remove(&name);
                        self.uninstall(&name);
                        // A name this one held may now be free for another definition.
                        let others: Vec<String> = self.definitions.keys().cloned().collect();
                        for other in others {
                            self.reconcile(&other).await;
                        }
                    } else {
                        self.definitions.insert(name.clone(), crd);
                        self.reconcile(&name).await;
                    }
                }
                _ = retry.tick() => {
                    let terminating: Vec<String> = self
                        .definitions
                        .iter()
                        .filter(|(_, crd)| crd.metadata.deletion_timestamp.is_some())
                        .map(|(name, _)| name.clone())
                        .collect();
                    for name in terminating {
                        self.reconcile(&name).await;
                    }
                }
            }
        }
    }

    /// Installs every established definition's kinds at once (at start).
    fn install_all(&self) {
        let kinds: Vec<Arc<dyn Kind>> = self
            .definitions
            .values()
            .filter(|crd| is_true(crd, "Established"))
            .flat_map(|crd| kinds_of(crd, &self.state.storage))
            .collect();
        let installed = self
            .state
            .registry
            .current()
            .kinds()
            .iter()
            .any(|kind| kind.definition().is_some());
        if kinds.is_empty() && !installed {
            // Nothing to change: a new snapshot would only make discovery and OpenAPI
            // render again.
            return;
        }
        self.state.registry.update(|registry| {
            registry.remove_kinds(|kind| kind.definition().is_some());
            for kind in kinds {
                registry.add_kind(kind);
            }
        });
    }

    fn uninstall(&self, name: &str) {
        self.state
            .registry
            .update(|registry| registry.remove_kinds(|kind| kind.definition() == Some(name)));
    }

    /// Brings one definition's status, kinds and finalizer in line with its spec.
    async fn reconcile(&mut self, name: &str) {
        let Some(crd) = self.definitions.get(name).cloned() else {
            return;
        };
        let result = if crd.metadata.deletion_timestamp.is_some() {
            self.finalize(&crd).await
        } else {
            self.establish(&crd).await
        };
        if let Err(e) = result {
            tracing::warn!(crd = name, error = %e.message, "custom resource definition not reconciled");
        }
    }

    /// NamesAccepted, then Established and the served versions' kinds.
    async fn establish(&mut self, crd: &CustomResourceDefinition) -> Result<(), ApiError> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let (accepted, names_condition) = self.accepted_names(crd);
        let established = accepted.is_some() || is_true(crd, "Established");
        let mut conditions = vec![names_condition];
        if established {
            conditions.push(condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ));
        }
        let updated = self
            .write_status(crd, |status_crd| {
                let status = status_crd.status.get_or_insert_with(Default::default);
                if let Some(names) = accepted.clone() {
                    status.accepted_names = Some(names);
                }
                for wanted in &conditions {
                    set_condition(status.conditions.get_or_insert_with(Vec::new), wanted);
                }
            })
            .await?;
        if established {
            let kinds = kinds_of(&updated, &self.state.storage);
            self.state.registry.update(|registry| {
                registry.remove_kinds(|kind| kind.definition() == Some(name.as_str()));
                for kind in kinds {
                    registry.add_kind(kind);
                }
            });
        }
        self.definitions.insert(name, updated);
        Ok(())
    }

    /// The names `crd` may use, or `None` with the NamesAccepted condition that says why
    /// not (upstream's `calculateNamesAndConditions`): each of plural, singular, short
    /// names, kind and list kind must be free among the other definitions of the group.
    fn accepted_names(
        &self,
        crd: &CustomResourceDefinition,
    ) -> (
        Option<CustomResourceDefinitionNames>,
        CustomResourceDefinitionCondition,
    ) {
        let wanted = &crd.spec.names;
        let me = crd.metadata.name.as_deref();
        let taken: Vec<&CustomResourceDefinitionNames> = self
            .definitions
            .values()
            .filter(|other| {
                other.metadata.name.as_deref() != me && other.spec.group == crd.spec.group
            })
            .filter_map(|other| other.status.as_ref()?.accepted_names.as_ref())
            .collect();
        let used = |pick: &dyn Fn(&CustomResourceDefinitionNames) -> Vec<String>, value: &str| {
            !value.is_empty()
                && taken
                    .iter()
                    .any(|names| pick(names).iter().any(|n| n == value))
        };
        let plural_like = |n: &CustomResourceDefinitionNames| {
            let mut all = vec![n.plural.clone()];
            all.extend(n.singular.clone());
            all.extend(n.short_names.clone().unwrap_or_default());
            all
        };
        let kind_like = |n: &CustomResourceDefinitionNames| {
            let mut all = vec![n.kind.clone()];
            all.extend(n.list_kind.clone());
            all
        };
        let conflict = |reason: &str, value: &str| {
            (
                None,
                condition(
                    "NamesAccepted",
                    "False",
                    reason,
                    &format!("{value:?} is already in use"),
                ),
            )
        };
        if used(&plural_like, &wanted.plural) {
            return conflict("PluralConflict", &wanted.plural);
        }
        if let Some(singular) = &wanted.singular
            && used(&plural_like, singular)
        {
            return conflict("SingularConflict", singular);
        }
        for short in wanted.short_names.iter().flatten() {
            if used(&plural_like, short) {
                return conflict("ShortNamesConflict", short);
            }
        }
        if used(&kind_like, &wanted.kind) {
            return conflict("KindConflict", &wanted.kind);
        }
        if let Some(list_kind) = &wanted.list_kind
            && used(&kind_like, list_kind)
        {
            return conflict("ListKindConflict", list_kind);
        }
        (
            Some(wanted.clone()),
            condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
        )
    }

    /// A deleted definition: Terminating, its objects deleted, then out of the registry and
    /// without the cleanup finalizer.
    async fn finalize(&mut self, crd: &CustomResourceDefinition) -> Result<(), ApiError> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let holds = crd
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == CLEANUP_FINALIZER);
        if !holds {
            return Ok(());
        }
        let crd = self
            .write_status(crd, |status_crd| {
                let status = status_crd.status.get_or_insert_with(Default::default);
                set_condition(
                    status.conditions.get_or_insert_with(Vec::new),
                    &condition(
                        "Terminating",
                        "True",
                        "InstanceDeletionInProgress",
                        "CustomResource deletion is in progress",
                    ),
                );
            })
            .await?;
        // The kinds stay while objects remain, refusing creates.
        let kinds = kinds_of(&crd, &self.state.storage);
        let resource = kinds.first().map(|k| k.info().group_resource());
        self.state.registry.update(|registry| {
            registry.remove_kinds(|kind| kind.definition() == Some(name.as_str()));
            for kind in kinds {
                registry.add_kind(kind);
            }
        });
        if let Some(resource) = resource {
            let user = crate::bootstrap::system_user();
            let objects = ServerObjects::new(&self.state, &user, false);
            for object in objects.list(&resource, None).await? {
                let namespace = object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str);
                let Some(object_name) = object.pointer("/metadata/name").and_then(Value::as_str)
                else {
                    continue;
                };
                match objects
                    .delete(&resource, namespace, object_name, None)
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            if !objects.list(&resource, None).await?.is_empty() {
                // Objects with finalizers of their own: the next tick looks again.
                return Ok(());
            }
        }
        // Without the finalizer the store deletes the definition; its Deleted event takes
        // the kinds out of the registry.
        let user = crate::bootstrap::system_user();
        let objects = ServerObjects::new(&self.state, &user, false);
        let result = objects
            .update(&definitions(), None, &name, &mut |value: &mut Value| {
                if let Some(finalizers) = value
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    finalizers.retain(|f| f != CLEANUP_FINALIZER);
                }
                Ok(())
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes the status `change` makes, unless it changes nothing; returns the
    /// definition as stored.
    async fn write_status(
        &self,
        crd: &CustomResourceDefinition,
        change: impl Fn(&mut CustomResourceDefinition) + Send + Sync,
    ) -> Result<CustomResourceDefinition, ApiError> {
        let mut wanted = crd.clone();
        change(&mut wanted);
        if same_status(&wanted, crd) {
            return Ok(crd.clone());
        }
        let user = crate::bootstrap::system_user();
        let objects = ServerObjects::new(&self.state, &user, false);
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut mutate = |value: &mut Value| -> Result<(), ApiError> {
            let mut current: CustomResourceDefinition =
                serde_json::from_value(value.clone()).map_err(ApiError::internal)?;
            change(&mut current);
            *value = serde_json::to_value(&current).map_err(ApiError::internal)?;
            Ok(())
        };
        let stored = objects
            .update(&definitions(), None, &name, &mut mutate)
            .await?;
        serde_json::from_value(stored).map_err(ApiError::internal)
    }
}

/// Whether two definitions' statuses agree, ignoring conditions' transition times.
fn same_status(a: &CustomResourceDefinition, b: &CustomResourceDefinition) -> bool {
    let strip = |crd: &CustomResourceDefinition| {
        let mut status = crd.status.clone().unwrap_or_default();
        for c in status.conditions.iter_mut().flatten() {
            c.last_transition_time = None;
        }
        status
    };
    strip(a) == strip(b)
}

/// The kinds of `crd`'s served versions (none when a version's schema does not compile,
/// which the definition's validation refuses first).
/// The versions share one converter (its conversion webhook's client reads Services and
/// endpoints from `storage`).
fn kinds_of(crd: &CustomResourceDefinition, storage: &Arc<dyn Storage>) -> Vec<Arc<dyn Kind>> {
    let terminating = crd.metadata.deletion_timestamp.is_some();
    let converter = Arc::new(Converter::new(crd, storage.clone()));
    crd.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .filter_map(|version| {
            let kind = CustomResource::new(crd, version, terminating, converter.clone());
            kind.map_err(|e| {
                tracing::warn!(crd = ?crd.metadata.name, version = %version.name, error = %e.message, "custom resource version not served");
            })
            .ok()
            .map(|kind| Arc::new(kind) as Arc<dyn Kind>)
        })
        .collect()
}

fn is_true(crd: &CustomResourceDefinition, type_: &str) -> bool {
    crd.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == type_ && c.status == "True")
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> CustomResourceDefinitionCondition {
    CustomResourceDefinitionCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: None,
        observed_generation: None,
    }
}

/// Sets a condition as upstream's `SetCRDCondition`: the transition time changes only
/// when the status does.
fn set_condition(
    conditions: &mut Vec<CustomResourceDefinitionCondition>,
    wanted: &CustomResourceDefinitionCondition,
) {
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::registry::printers::now());
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        Some(existing) => {
            if existing.status != wanted.status {
                existing.last_transition_time = Some(now);
            }
            existing.status.clone_from(&wanted.status);
            existing.reason.clone_from(&wanted.reason);
            existing.message.clone_from(&wanted.message);
        }
        None => {
            let mut added = wanted.clone();
            added.last_transition_time = Some(now);
            conditions.push(added);
        }
    }
}
