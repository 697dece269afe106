//! Events (upstream `pkg/registry/core/event`).

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde_json::{Value, json};
use skiff_api::field::{ErrorList, FieldError, Path};

use crate::registry::printers::{NAME, column, since, since_timestamp, wide};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// The events kind.
pub struct Events;

impl Strategy for Events {
    type Object = Event;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ev"],
            ..ResourceInfo::of::<Event>()
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// Upstream `ValidateEventCreate` (the part that applies to core/v1 events): the
    /// involved object lives in the event's namespace.
    fn validate(&self, event: &Event) -> ErrorList {
        let mut errors = Vec::new();
        let namespace = event.metadata.namespace.as_deref().unwrap_or("");
        let involved = event.involved_object.namespace.as_deref().unwrap_or("");
        if !involved.is_empty() && involved != namespace {
            errors.push(FieldError::invalid(
                &Path::new("involvedObject").child("namespace"),
                involved,
                "does not match event.namespace",
            ));
        }
        errors
    }

    /// Upstream `EventToSelectableFields`: `source` falls back to the reporting
    /// controller.
    fn selectable_fields(&self, event: &Event) -> Vec<(&'static str, String)> {
        skiff_api::events::selectable_fields(event)
    }

    /// LAST SEEN TYPE REASON OBJECT MESSAGE, and with `-o wide` SUBOBJECT SOURCE FIRST SEEN
    /// COUNT NAME (upstream's order: the name comes last).
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Last Seen",
                "string",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            column(
                "Type",
                "string",
                "Type of this event (Normal, Warning), new types could be added in the future",
                0,
            ),
            column(
                "Reason",
                "string",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                0,
            ),
            column(
                "Object",
                "string",
                "The object that this event is about.",
                0,
            ),
            wide(
                "Subobject",
                "string",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
            ),
            wide(
                "Source",
                "string",
                "The component reporting this event. Should be a short machine understandable string.",
            ),
            column(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
                0,
            ),
            wide(
                "First Seen",
                "string",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            ),
            wide(
                "Count",
                "string",
                "The number of times this event has occurred.",
            ),
            TableColumn {
                format: "name".into(),
                ..wide("Name", "string", &NAME.description)
            },
        ]
    }

    /// Upstream `printEvent`.
    fn row(&self, event: &Event) -> Vec<Value> {
        let micro = |t: Option<&MicroTime>| since_timestamp(t.map(|t| t.0));
        let first = match &event.first_timestamp {
            Some(t) => since(Some(t)),
            None => micro(event.event_time.as_ref()),
        };
        let mut last = match &event.last_timestamp {
            Some(t) => since(Some(t)),
            None => first.clone(),
        };
        let mut count = event.count.unwrap_or(0);
        if let Some(series) = &event.series {
            last = micro(series.last_observed_time.as_ref());
            count = series.count.unwrap_or(0);
        } else if count == 0 {
            count = 1;
        }
        let o = &event.involved_object;
        let kind = o.kind.clone().unwrap_or_default().to_lowercase();
        let target = match o.name.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => format!("{kind}/{n}"),
            None => kind,
        };
        let source = event.source.clone().unwrap_or_default();
        let (mut component, mut host) = (
            source.component.unwrap_or_default(),
            source.host.unwrap_or_default(),
        );
        if component.is_empty() && host.is_empty() {
            component = event.reporting_component.clone().unwrap_or_default();
            host = event.reporting_instance.clone().unwrap_or_default();
        }
        let source = if host.is_empty() {
            component
        } else {
            format!("{component}, {host}")
        };
        vec![
            json!(last),
            json!(event.type_.clone().unwrap_or_default()),
            json!(event.reason.clone().unwrap_or_default()),
            json!(target),
            json!(o.field_path.clone().unwrap_or_default()),
            json!(source),
            json!(event.message.clone().unwrap_or_default().trim()),
            json!(first),
            json!(count),
            json!(event.metadata.name.clone().unwrap_or_default()),
        ]
    }
}
