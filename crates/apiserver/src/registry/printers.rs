//! Cells and columns of Table responses shared by the kinds' printers, as upstream's
//! `pkg/printers/internalversion/printers.go` writes them: the Name and Age columns, ages
//! as `HumanDuration` (`k8s.io/apimachinery/pkg/util/duration`), label selectors and
//! label sets as `kubectl get` shows them, a pod template's containers and images, and
//! the placeholders (`<none>`, `<unknown>`, `<unset>`) of empty cells.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::TableColumn;

/// A column with no format.
pub const fn column(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: i32,
) -> TableColumn {
    TableColumn {
        name: Cow::Borrowed(name),
        type_: Cow::Borrowed(type_),
        format: Cow::Borrowed(""),
        description: Cow::Borrowed(description),
        priority,
    }
}

/// A column shown with `-o wide` only (priority 1).
pub const fn wide(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
) -> TableColumn {
    column(name, type_, description, 1)
}

/// Upstream's Name column (its description is ObjectMeta.name's).
pub const NAME: TableColumn = TableColumn {
    name: Cow::Borrowed("Name"),
    type_: Cow::Borrowed("string"),
    format: Cow::Borrowed("name"),
    description: Cow::Borrowed(
        "Name must be unique within a namespace. Is required when creating resources, \
                  although some resources may allow a client to request the generation of an \
                  appropriate name automatically. Name is primarily intended for creation \
                  idempotence and configuration definition. Cannot be updated. More info: \
                  https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    ),
    priority: 0,
};

/// Upstream's Age column (its description is ObjectMeta.creationTimestamp's).
pub const AGE: TableColumn = column(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was \
     created. It is not guaranteed to be set in happens-before order across separate \
     operations. Clients may not set this value. It is represented in RFC3339 form and is in \
     UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    0,
);

/// The wide Containers, Images and Selector columns of the workload printers.
pub const CONTAINERS: TableColumn = column(
    "Containers",
    "string",
    "Names of each container in the template.",
    1,
);
pub const IMAGES: TableColumn = column(
    "Images",
    "string",
    "Images referenced by each container in the template.",
    1,
);
pub const SELECTOR: TableColumn = column(
    "Selector",
    "string",
    "Selector is a label query over pods that should match the replica count.",
    1,
);

/// A duration in seconds as upstream's `HumanDuration`: `45s`, `2m30s`, `15m`, `5h10m`,
/// `30h`, `3d4h`, `90d`, `2y45d`, `10y`; `<invalid>` below -1 s.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The current time from the system clock (k8s-openapi's jiff is built without its own).
pub fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Timestamp::from_nanosecond(i128::try_from(nanos).unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The time since `time` as [`human_duration`], `<unknown>` without one (upstream's
/// `translateTimestampSince`).
pub fn since(time: Option<&Time>) -> String {
    since_timestamp(time.map(|t| t.0))
}

/// [`since`] for a bare timestamp (a MicroTime's, for instance).
pub fn since_timestamp(time: Option<Timestamp>) -> String {
    match time {
        Some(time) => human_duration(now().duration_since(time).as_secs()),
        None => "<unknown>".to_owned(),
    }
}

/// The Age cell of an object.
pub fn age(metadata: &ObjectMeta) -> Value {
    Value::from(since(metadata.creation_timestamp.as_ref()))
}

/// The object's name (`""` when unset), its Name cell.
pub fn name(metadata: &ObjectMeta) -> String {
    metadata.name.clone().unwrap_or_default()
}

/// `value`, or the placeholder `none` (`<none>`, `<unknown>`) when it is unset or empty.
pub fn or(value: Option<&str>, none: &str) -> String {
    value.filter(|v| !v.is_empty()).unwrap_or(none).to_owned()
}

/// A label selector as `labels.Selector.String()` (requirements sorted by key:
/// `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`); empty for an empty selector,
/// `<error>` for one that cannot be built.
pub fn selector_string(selector: &LabelSelector) -> String {
    skiff_api::selector::LabelSelector::from_meta(selector)
        .map_or_else(|_| "<error>".to_owned(), |s| s.to_string())
}

/// `metav1.FormatLabelSelector`: [`selector_string`], `<none>` when empty.
pub fn format_label_selector(selector: Option<&LabelSelector>) -> String {
    let text = selector.map(selector_string).unwrap_or_default();
    if text.is_empty() {
        "<none>".to_owned()
    } else {
        text
    }
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted, `<none>` when empty.
pub fn format_labels(labels: Option<&BTreeMap<String, String>>) -> String {
    let pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// The Containers and Images cells of a pod template: names and images joined by `,`.
pub fn containers_and_images(spec: Option<&PodSpec>) -> [Value; 2] {
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""))
        .collect();
    [Value::from(names.join(",")), Value::from(images.join(","))]
}

/// An optional boolean as upstream's `printBoolPtr`: `True`, `False`, `<unset>`.
pub fn bool_ptr(value: Option<bool>) -> Value {
    Value::from(match value {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn human_durations_match_upstream() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (150, "2m30s"),
            (180, "3m"),
            (15 * 60, "15m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 10 * 60, "5h10m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (4 * 86400, "4d"),
            (90 * 86400, "90d"),
            (730 * 86400, "2y"),
            (775 * 86400, "2y45d"),
            (10 * 365 * 86400, "10y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn selectors_print_sorted() {
        let selector = LabelSelector {
            match_labels: Some([("tier".to_owned(), "web".to_owned())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "In".into(),
                    values: Some(vec!["prod".into(), "dev".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        assert_eq!(
            selector_string(&selector),
            "!canary,env in (dev,prod),tier=web"
        );
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(
            format_label_selector(Some(&LabelSelector::default())),
            "<none>"
        );
        assert_eq!(format_labels(None), "<none>");
    }

    #[test]
    fn placeholders_fill_empty_cells() {
        assert_eq!(or(Some(""), "<none>"), "<none>");
        assert_eq!(or(None, "<unknown>"), "<unknown>");
        assert_eq!(or(Some("x"), "<none>"), "x");
        assert_eq!(since(None), "<unknown>");
        let an_hour_ago = now() - k8s_openapi::jiff::SignedDuration::from_secs(3600);
        assert_eq!(since_timestamp(Some(an_hour_ago)), "60m");
    }
}
