//! Reading and writing the common fields of an object held as JSON (`metadata.*`,
//! `apiVersion`, `kind`), as upstream's `meta.Accessor` does for typed objects.

use serde_json::{Map, Value};

/// `metadata.<field>` as a string, when present and a string.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// `metadata.<field>` as a string, `""` when absent.
pub fn meta_string(object: &Value, field: &str) -> String {
    meta_str(object, field).unwrap_or_default().to_owned()
}

/// `metadata.<field>`, when present and not null.
pub fn meta_get<'a>(object: &'a Value, field: &str) -> Option<&'a Value> {
    object.get("metadata")?.get(field).filter(|v| !v.is_null())
}

/// The `metadata` map, created when absent (or not a map). `object` must be a JSON
/// object; other values are replaced by one.
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    let map = as_map(object);
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    as_map(metadata)
}

/// Sets `metadata.<field>`, or removes it when `value` is `None`.
pub fn set_meta(object: &mut Value, field: &str, value: Option<Value>) {
    let metadata = meta_mut(object);
    match value {
        Some(v) => {
            metadata.insert(field.to_owned(), v);
        }
        None => {
            metadata.remove(field);
        }
    }
}

/// `value` as a map, replacing a non-object by an empty one.
pub fn as_map(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("replaced by an object above"),
    }
}

/// `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    meta_get(object, "finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `metadata.finalizers` (removed when empty).
pub fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    let value = (!finalizers.is_empty()).then(|| Value::from(finalizers.to_vec()));
    set_meta(object, "finalizers", value);
}

/// `metadata.labels` as a sorted map (non-string values skipped).
pub fn labels(object: &Value) -> std::collections::BTreeMap<String, String> {
    meta_get(object, "labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.generation`, 0 when absent.
pub fn generation(object: &Value) -> i64 {
    meta_get(object, "generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The object without `metadata` and `status`: what a change of bumps `generation`.
pub fn spec_part(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

/// The current time as upstream writes timestamps (RFC 3339, seconds, UTC).
pub fn now() -> String {
    timestamp(chrono::Utc::now())
}

/// `time` as upstream writes timestamps (`2026-01-02T03:04:05Z`).
pub fn timestamp(time: chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random RFC 4122 version 4 UUID, as upstream's `metadata.uid`.
pub fn new_uid() -> String {
    skiff_api::uuid::format_v4(rand::random())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_is_read_and_written() {
        let mut object = json!({"kind": "ConfigMap"});
        assert_eq!(meta_str(&object, "name"), None);
        set_meta(&mut object, "name", Some("a".into()));
        set_finalizers(&mut object, &["x".to_owned()]);
        assert_eq!(meta_string(&object, "name"), "a");
        assert_eq!(finalizers(&object), ["x"]);
        set_finalizers(&mut object, &[]);
        assert_eq!(
            object,
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}})
        );
    }

    #[test]
    fn uids_are_version_4() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert_ne!(uid, new_uid());
    }
}
