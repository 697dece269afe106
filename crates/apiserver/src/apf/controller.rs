//! The configuration consumer (upstream `apf_controller.go`): lists and watches the stored
//! FlowSchemas and PriorityLevelConfigurations, puts each change in force with
//! [`Apf::apply`], and keeps every FlowSchema's `Dangling` condition (whether its priority
//! level exists) as upstream writes it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, FlowSchemaCondition, PriorityLevelConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::Apf;
use crate::error::{ApiError, GroupResource};
use crate::registry::Objects;
use crate::rest::objects::ServerObjects;
use crate::storage::{EventType, WatchItem};

/// Where the FlowSchemas are stored.
const SCHEMAS: &str = "/registry/flowschemas/";
/// Where the PriorityLevelConfigurations are stored.
const LEVELS: &str = "/registry/prioritylevelconfigurations/";

/// Runs until the task is aborted; store errors restart the list and watch after a second.
pub async fn run(apf: Arc<Apf>) {
    let mut consumer = Consumer {
        apf,
        schemas: BTreeMap::new(),
        levels: BTreeMap::new(),
    };
    loop {
        if let Err(e) = consumer.sync_and_watch().await {
            tracing::warn!(error = %e.message, "priority and fairness configuration: watch ended");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

struct Consumer {
    apf: Arc<Apf>,
    schemas: BTreeMap<String, FlowSchema>,
    levels: BTreeMap<String, PriorityLevelConfiguration>,
}

fn decode<T: serde::de::DeserializeOwned>(value: &[u8]) -> Option<T> {
    serde_json::from_slice(value)
        .inspect_err(|e| tracing::warn!(error = %e, "priority and fairness: undecodable object"))
        .ok()
}

fn keyed<
    T: serde::de::DeserializeOwned
        + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    items: &[crate::storage::KeyValue],
) -> BTreeMap<String, T> {
    items
        .iter()
        .filter_map(|kv| decode::<T>(&kv.value))
        .filter_map(|o| Some((o.metadata().name.clone()?, o)))
        .collect()
}

impl Consumer {
    async fn sync_and_watch(&mut self) -> Result<(), ApiError> {
        let storage = self.apf.state.storage.clone();
        let schemas = storage
            .list(SCHEMAS, None, 0, None)
            .await
            .map_err(ApiError::internal)?;
        let levels = storage
            .list(LEVELS, None, 0, None)
            .await
            .map_err(ApiError::internal)?;
        self.schemas = keyed(&schemas.items);
        self.levels = keyed(&levels.items);
        self.reconcile().await;
        let mut schema_events = storage
            .watch(SCHEMAS, schemas.revision)
            .await
            .map_err(ApiError::internal)?;
        let mut level_events = storage
            .watch(LEVELS, levels.revision)
            .await
            .map_err(ApiError::internal)?;
        loop {
            tokio::select! {
                item = schema_events.next() => {
                    let Some(item) = item else { return Ok(()) };
                    let WatchItem::Event(event) = item.map_err(ApiError::internal)? else {
                        continue;
                    };
                    let Some(schema) = decode::<FlowSchema>(&event.kv.value) else { continue };
                    let Some(name) = schema.metadata.name.clone() else { continue };
                    if event.kind == EventType::Deleted {
                        self.schemas.remove(&name);
                    } else {
                        self.schemas.insert(name, schema);
                    }
                }
                item = level_events.next() => {
                    let Some(item) = item else { return Ok(()) };
                    let WatchItem::Event(event) = item.map_err(ApiError::internal)? else {
                        continue;
                    };
                    let Some(level) =
                        decode::<PriorityLevelConfiguration>(&event.kv.value) else { continue };
                    let Some(name) = level.metadata.name.clone() else { continue };
                    if event.kind == EventType::Deleted {
                        self.levels.remove(&name);
                    } else {
                        self.levels.insert(name, level);
                    }
                }
            }
            self.reconcile().await;
        }
    }

    /// Puts the objects in force and brings the `Dangling` conditions up to date.
    async fn reconcile(&mut self) {
        let dangling = self.apf.apply(
            self.schemas.values().cloned().collect(),
            self.levels.values().cloned().collect(),
        );
        let schemas: Vec<FlowSchema> = self
            .schemas
            .values()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        for schema in schemas {
            let name = schema.metadata.name.clone().unwrap_or_default();
            let wanted = dangling_condition(
                dangling.contains(&name),
                &schema.spec.priority_level_configuration.name,
            );
            let current = schema
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Dangling"));
            let same = current.is_some_and(|c| {
                c.status == wanted.status
                    && c.reason == wanted.reason
                    && c.message == wanted.message
            });
            if !same && let Err(e) = self.write_condition(&name, &wanted).await {
                tracing::warn!(flowschema = %name, error = %e.message, "Dangling condition not written");
            }
        }
    }

    async fn write_condition(
        &self,
        name: &str,
        wanted: &FlowSchemaCondition,
    ) -> Result<(), ApiError> {
        let user = crate::bootstrap::system_user();
        let objects = ServerObjects::new(&self.apf.state, &user, false);
        let resource = GroupResource::new("flowcontrol.apiserver.k8s.io", "flowschemas");
        let mut mutate = |value: &mut Value| -> Result<(), ApiError> {
            let mut schema: FlowSchema =
                serde_json::from_value(value.clone()).map_err(ApiError::internal)?;
            let conditions = schema
                .status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Vec::new);
            let mut condition = wanted.clone();
            condition.last_transition_time = Some(Time(crate::registry::printers::now()));
            match conditions.iter_mut().find(|c| c.type_ == "Dangling") {
                Some(existing) => *existing = condition,
                None => conditions.push(condition),
            }
            *value = serde_json::to_value(&schema).map_err(ApiError::internal)?;
            Ok(())
        };
        match objects.update(&resource, None, name, &mut mutate).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Upstream's `Dangling` condition: `True`/`NotFound` when the level is missing, else
/// `False`/`Found`.
pub fn dangling_condition(dangling: bool, level: &str) -> FlowSchemaCondition {
    let (status, reason, message) = if dangling {
        (
            "True",
            "NotFound",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named \
                 {level:?} but there is no such object"
            ),
        )
    } else {
        (
            "False",
            "Found",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named \
                 {level:?} and it exists"
            ),
        )
    };
    FlowSchemaCondition {
        type_: "Dangling".to_owned(),
        status: Some(status.to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_transition_time: None,
    }
}
