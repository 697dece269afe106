//! What every core kind's table shares (upstream `pkg/printers/internalversion`): the Name
//! and Age columns, ages as `duration.HumanDuration` prints them, label lists.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::registry::TableColumn;

/// ObjectMeta's description of `name`, upstream's Name column description.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// ObjectMeta's description of `creationTimestamp`, upstream's Age column description.
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The Name column (format `name`).
pub fn name_column() -> TableColumn {
    TableColumn {
        name: "Name",
        type_: "string",
        format: "name",
        description: NAME_DESCRIPTION,
        priority: 0,
    }
}

/// The Age column.
pub fn age_column() -> TableColumn {
    column("Age", "string", AGE_DESCRIPTION)
}

/// A column shown by default.
pub fn column(name: &'static str, type_: &'static str, description: &'static str) -> TableColumn {
    TableColumn {
        name,
        type_,
        format: "",
        description,
        priority: 0,
    }
}

/// A column shown with `-o wide` only.
pub fn wide(name: &'static str, type_: &'static str, description: &'static str) -> TableColumn {
    TableColumn {
        priority: 1,
        ..column(name, type_, description)
    }
}

/// The object's name, `""` when unset.
pub fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// The current time (jiff's clock is not built in: the time comes from the system clock).
pub fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Timestamp::from_nanosecond(i128::try_from(nanos).unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The Age cell of an object (upstream `translateTimestampSince(creationTimestamp)`).
pub fn age(meta: &ObjectMeta) -> String {
    since(meta.creation_timestamp.as_ref())
}

/// How long ago `time` was, as upstream prints it; `<unknown>` when unset.
pub fn since(time: Option<&Time>) -> String {
    since_timestamp(time.map(|t| t.0))
}

/// [`since`] for a bare timestamp.
pub fn since_timestamp(time: Option<Timestamp>) -> String {
    match time {
        None => "<unknown>".to_owned(),
        Some(t) => human_duration(now().duration_since(t)),
    }
}

/// Upstream `duration.HumanDuration`: `45s`, `3m20s`, `15m`, `5h12m`, `2d3h`, `400d`,
/// `2y30d`; up to a second in the future reads `0s`, further `<invalid>`.
pub fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
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
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{dy}d")
        };
    }
    format!("{years}y")
}

/// Upstream `labels.FormatLabels`: `a=b,c=d` (sorted), `<none>` when empty.
pub fn format_labels(labels: Option<&BTreeMap<String, String>>) -> String {
    match labels {
        Some(labels) if !labels.is_empty() => labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".to_owned(),
    }
}

/// `value`, or `none` (`<none>`, `<unknown>`) when empty.
pub fn or(value: Option<&str>, none: &str) -> String {
    value.filter(|v| !v.is_empty()).unwrap_or(none).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_as_upstream() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (15 * 60, "15m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 12 * 60, "5h12m"),
            (30 * 3600, "30h"),
            (51 * 3600, "2d3h"),
            (72 * 3600, "3d"),
            (400 * 86400, "400d"),
            (760 * 86400, "2y30d"),
            (365 * 3 * 86400, "3y"),
            (365 * 10 * 86400, "10y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(secs)),
                want,
                "{secs}s"
            );
        }
    }

    #[test]
    fn labels_and_placeholders() {
        let labels = BTreeMap::from([
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(format_labels(Some(&labels)), "a=1,b=2");
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(or(Some(""), "<none>"), "<none>");
        assert_eq!(since(None), "<unknown>");
    }
}
