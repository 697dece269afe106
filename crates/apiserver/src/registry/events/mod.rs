//! events.k8s.io/v1 events (upstream `pkg/registry/core/event` serves both APIs): stored
//! as core/v1 Events under the same key, converted on the way in and out.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1::Event;
use serde_json::Value;
use skiff_api::events::{self, RequestVersion};
use skiff_api::field::ErrorList;

use super::{Registry, ResourceInfo, Strategy};
use crate::error::ApiError;

/// Adds events.k8s.io/v1 events.
pub fn add(registry: &mut Registry) {
    registry.add(Events);
}

/// `ev`, sharing storage `events` with core/v1; a PUT of a missing event creates it.
pub struct Events;

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(ApiError::internal)
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

impl Strategy for Events {
    type Object = Event;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ev"],
            storage: "events",
            ..ResourceInfo::of::<Event>()
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn validate(&self, object: &Event) -> ErrorList {
        events::validate_create(&events::to_core(object.clone()), RequestVersion::EventsV1)
    }

    fn validate_update(&self, new: &Event, old: &Event) -> ErrorList {
        events::validate_update(
            &events::to_core(new.clone()),
            &events::to_core(old.clone()),
            RequestVersion::EventsV1,
        )
    }

    fn selectable_fields(&self, object: &Event) -> Vec<(&'static str, String)> {
        events::selectable_fields(&events::to_core(object.clone()))
    }

    fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError> {
        encode(&events::to_core(decode::<Event>(object)?))
    }

    fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError> {
        encode(&events::from_core(decode::<core::Event>(stored)?))
    }

    /// Stored as core/v1 Events: every read converts.
    fn stored_as_served(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_as_core_events_and_back() {
        let event = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default", "resourceVersion": "7"},
            "eventTime": "2026-01-02T03:04:05.000006Z",
            "regarding": {"kind": "Pod", "name": "web", "namespace": "default"},
            "note": "pulled",
            "reason": "Pulled",
            "reportingController": "kubelet",
        });
        let stored = Events.encode_for_storage(event.clone()).unwrap();
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], "pulled");
        assert_eq!(stored["reportingComponent"], "kubelet");
        assert_eq!(Events.decode_from_storage(stored).unwrap(), event);
        assert_eq!(Events.info().storage, "events");
    }
}
