//! Events in both shapes: core/v1 (the stored one) and events.k8s.io/v1, converted as
//! upstream's `pkg/apis/events/v1/conversion.go` (regarding ↔ involvedObject, note ↔
//! message, reportingController ↔ reportingComponent, deprecatedSource ↔ source,
//! deprecatedFirstTimestamp/deprecatedLastTimestamp/deprecatedCount ↔
//! firstTimestamp/lastTimestamp/count), and validated as upstream's
//! `pkg/apis/core/validation/events.go` for either API.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;

use crate::field::{ErrorList, FieldError, Path};
use crate::names;
use crate::validation::{immutable, json};

/// The API a request came through: core/v1 keeps the legacy rules, events.k8s.io/v1 adds
/// the strict ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestVersion {
    CoreV1,
    EventsV1,
}

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// An events.k8s.io/v1 Event as a core/v1 Event.
pub fn to_core(event: events::Event) -> core::Event {
    core::Event {
        metadata: event.metadata,
        involved_object: event.regarding.unwrap_or_default(),
        reason: event.reason,
        message: event.note,
        source: event.deprecated_source,
        first_timestamp: event.deprecated_first_timestamp,
        last_timestamp: event.deprecated_last_timestamp,
        count: event.deprecated_count,
        type_: event.type_,
        event_time: event.event_time,
        series: event.series.map(|s| core::EventSeries {
            count: Some(s.count),
            last_observed_time: Some(s.last_observed_time),
        }),
        action: event.action,
        related: event.related,
        reporting_component: event.reporting_controller,
        reporting_instance: event.reporting_instance,
    }
}

/// A core/v1 Event as an events.k8s.io/v1 Event.
pub fn from_core(event: core::Event) -> events::Event {
    let regarding = event.involved_object;
    events::Event {
        metadata: event.metadata,
        regarding: (regarding != Default::default()).then_some(regarding),
        reason: event.reason,
        note: event.message,
        deprecated_source: event.source,
        deprecated_first_timestamp: event.first_timestamp,
        deprecated_last_timestamp: event.last_timestamp,
        deprecated_count: event.count,
        type_: event.type_,
        event_time: event.event_time,
        // events.k8s.io requires the time of a series; a core series without one is dropped.
        series: event.series.and_then(|s| {
            Some(events::EventSeries {
                count: s.count.unwrap_or_default(),
                last_observed_time: s.last_observed_time?,
            })
        }),
        action: event.action,
        related: event.related,
        reporting_controller: event.reporting_component,
        reporting_instance: event.reporting_instance,
    }
}

/// The fields a field selector may use on events besides metadata (upstream's
/// `event.ToSelectableFields`, in core/v1 names for both APIs); `source` falls back to the
/// reporting controller.
pub fn selectable_fields(event: &core::Event) -> Vec<(&'static str, String)> {
    let object = &event.involved_object;
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let component = event
        .source
        .as_ref()
        .map(|s| value(&s.component))
        .unwrap_or_default();
    let source = if component.is_empty() {
        value(&event.reporting_component)
    } else {
        component
    };
    vec![
        ("involvedObject.kind", value(&object.kind)),
        ("involvedObject.namespace", value(&object.namespace)),
        ("involvedObject.name", value(&object.name)),
        ("involvedObject.uid", value(&object.uid)),
        ("involvedObject.apiVersion", value(&object.api_version)),
        (
            "involvedObject.resourceVersion",
            value(&object.resource_version),
        ),
        ("involvedObject.fieldPath", value(&object.field_path)),
        ("reason", value(&event.reason)),
        ("reportingComponent", value(&event.reporting_component)),
        ("source", source),
        ("type", value(&event.type_)),
    ]
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// `field: Invalid value: "": can have at most N characters` (upstream hides the value).
fn at_most(path: &str, value: &Option<String>, limit: usize) -> Option<FieldError> {
    (text(value).len() > limit).then(|| {
        FieldError::invalid(
            &Path::new(path),
            "",
            format!("can have at most {limit} characters"),
        )
    })
}

/// `legacyValidateEvent`: namespaces agree; events with an eventTime need a reporting
/// controller, instance, action and reason within their limits.
fn validate_legacy(event: &core::Event, version: RequestVersion) -> ErrorList {
    let mut errors = Vec::new();
    let namespace = event.metadata.namespace.as_deref().unwrap_or("");
    let involved_namespace = event.involved_object.namespace.as_deref().unwrap_or("");
    let mismatch = || {
        FieldError::invalid(
            &Path::new("involvedObject").child("namespace"),
            involved_namespace,
            "does not match event.namespace",
        )
    };
    if event.event_time.is_none() {
        let agrees = if involved_namespace.is_empty() {
            matches!(namespace, "" | "default")
        } else {
            namespace == involved_namespace
        };
        if !agrees {
            errors.push(mismatch());
        }
    } else {
        if involved_namespace.is_empty() && !matches!(namespace, "default" | "kube-system") {
            errors.push(mismatch());
        }
        let controller_field = match version {
            RequestVersion::CoreV1 => "reportingComponent",
            RequestVersion::EventsV1 => "reportingController",
        };
        let controller = text(&event.reporting_component);
        let controller_path = Path::new(controller_field);
        if controller.is_empty() {
            errors.push(FieldError::required(&controller_path, ""));
        }
        errors.extend(
            names::is_qualified_name(controller)
                .into_iter()
                .map(|m| FieldError::invalid(&controller_path, controller, m)),
        );
        for (name, value, limit) in [
            (
                "reportingInstance",
                &event.reporting_instance,
                REPORTING_INSTANCE_LIMIT,
            ),
            ("action", &event.action, ACTION_LIMIT),
            ("reason", &event.reason, REASON_LIMIT),
        ] {
            if text(value).is_empty() {
                errors.push(FieldError::required(&Path::new(name), ""));
            }
            errors.extend(at_most(name, value, limit));
        }
        errors.extend(at_most("message", &event.message, NOTE_LIMIT));
    }
    errors.extend(
        names::is_dns1123_subdomain(namespace)
            .into_iter()
            .map(|m| FieldError::invalid(&Path::new("namespace"), namespace, m)),
    );
    errors
}

/// `validateV1EventSeries`.
fn validate_series(event: &core::Event) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(series) = &event.series {
        if series.count.unwrap_or(0) < 2 {
            errors.push(FieldError::invalid(
                &Path::new("series.count"),
                "",
                "should be at least 2",
            ));
        }
        if series.last_observed_time.is_none() {
            errors.push(FieldError::required(
                &Path::new("series.lastObservedTime"),
                "",
            ));
        }
    }
    errors
}

/// `ValidateEventCreate`: the legacy rules, and for events.k8s.io/v1 a series of 2 or
/// more, an eventTime, type Normal or Warning, and no deprecated fields.
pub fn validate_create(event: &core::Event, version: RequestVersion) -> ErrorList {
    let mut errors = validate_legacy(event, version);
    if version == RequestVersion::CoreV1 {
        return errors;
    }
    errors.extend(validate_series(event));
    if event.event_time.is_none() {
        errors.push(FieldError::required(&Path::new("eventTime"), ""));
    }
    let kind = text(&event.type_);
    if !matches!(kind, "Normal" | "Warning") {
        errors.push(FieldError::invalid(
            &Path::new("type"),
            "",
            format!("has invalid value: {kind}"),
        ));
    }
    let unset = |path: &str| FieldError::invalid(&Path::new(path), "", "needs to be unset");
    if event.first_timestamp.is_some() {
        errors.push(unset("deprecatedFirstTimestamp"));
    }
    if event.last_timestamp.is_some() {
        errors.push(unset("deprecatedLastTimestamp"));
    }
    if event.count.unwrap_or(0) != 0 {
        errors.push(unset("deprecatedCount"));
    }
    if event
        .source
        .as_ref()
        .is_some_and(|s| !text(&s.component).is_empty() || !text(&s.host).is_empty())
    {
        errors.push(unset("deprecatedSource"));
    }
    errors
}

/// `ValidateEventUpdate`: the legacy rules, and for events.k8s.io/v1 a valid new series
/// and every other field immutable (named as core/v1 names them, as upstream).
pub fn validate_update(new: &core::Event, old: &core::Event, version: RequestVersion) -> ErrorList {
    let mut errors = validate_legacy(new, version);
    if version == RequestVersion::CoreV1 {
        return errors;
    }
    if new.series != old.series {
        errors.extend(validate_series(new));
    }
    let fields = [
        (
            "involvedObject",
            json(&new.involved_object),
            json(&old.involved_object),
        ),
        ("reason", json(&new.reason), json(&old.reason)),
        ("message", json(&new.message), json(&old.message)),
        ("source", json(&new.source), json(&old.source)),
        (
            "firstTimestamp",
            json(&new.first_timestamp),
            json(&old.first_timestamp),
        ),
        (
            "lastTimestamp",
            json(&new.last_timestamp),
            json(&old.last_timestamp),
        ),
        ("count", json(&new.count), json(&old.count)),
        ("type", json(&new.type_), json(&old.type_)),
        ("eventTime", json(&new.event_time), json(&old.event_time)),
        ("action", json(&new.action), json(&old.action)),
        ("related", json(&new.related), json(&old.related)),
        (
            "reportingController",
            json(&new.reporting_component),
            json(&old.reporting_component),
        ),
        (
            "reportingInstance",
            json(&new.reporting_instance),
            json(&old.reporting_instance),
        ),
    ];
    for (name, new_value, old_value) in fields {
        errors.extend(immutable(&new_value, &old_value, &Path::new(name)));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_event() -> events::Event {
        serde_json::from_value(json!({
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-02T03:04:05.000006Z",
            "regarding": {"kind": "Pod", "name": "web", "namespace": "default"},
            "note": "pulled",
            "reason": "Pulled",
            "action": "Pull",
            "type": "Normal",
            "reportingController": "skiff.io/kubelet",
            "reportingInstance": "node-1",
            "series": {"count": 3, "lastObservedTime": "2026-01-02T03:04:09.000000Z"},
            "deprecatedSource": {"component": "kubelet"},
        }))
        .unwrap()
    }

    #[test]
    fn conversion_renames_fields_both_ways() {
        let core = to_core(new_event());
        let value = serde_json::to_value(&core).unwrap();
        assert_eq!(value["involvedObject"]["name"], "web");
        assert_eq!(value["message"], "pulled");
        assert_eq!(value["reportingComponent"], "skiff.io/kubelet");
        assert_eq!(value["source"]["component"], "kubelet");
        assert_eq!(value["series"]["count"], 3);
        assert_eq!(from_core(core), new_event());
    }

    #[test]
    fn strict_rules_for_events_v1() {
        let mut event = new_event();
        event.deprecated_source = None;
        assert!(validate_create(&to_core(event.clone()), RequestVersion::EventsV1).is_empty());
        event.type_ = Some("Info".into());
        event.reporting_controller = None;
        event.deprecated_count = Some(2);
        event.series.as_mut().unwrap().count = 1;
        let errors: Vec<String> = validate_create(&to_core(event), RequestVersion::EventsV1)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors[0], "reportingController: Required value");
        assert!(
            errors.contains(&r#"series.count: Invalid value: "": should be at least 2"#.to_owned())
        );
        assert!(errors.contains(&r#"type: Invalid value: "": has invalid value: Info"#.to_owned()));
        assert!(
            errors.contains(&r#"deprecatedCount: Invalid value: "": needs to be unset"#.to_owned())
        );
    }

    #[test]
    fn updates_keep_fields() {
        let old = to_core(new_event());
        let mut new = old.clone();
        new.reason = Some("Other".into());
        let errors = validate_update(&new, &old, RequestVersion::EventsV1);
        assert_eq!(
            errors[0].to_string(),
            r#"reason: Invalid value: "Other": field is immutable"#
        );
        assert!(validate_update(&new, &old, RequestVersion::CoreV1).is_empty());
    }
}
