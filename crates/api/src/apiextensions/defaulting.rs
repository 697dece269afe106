//! Defaulting and pruning of custom resources (upstream `schema/defaulting/algorithm.go`,
//! `prunenulls.go` and `schema/pruning/algorithm.go`).

use serde_json::Value;

use super::structural::Structural;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Applies the schema's defaults to `value` as the API server does when it decodes a
/// custom resource: first nulls that the schema does not allow (`nullable` unset) and that
/// have no default are dropped (`PruneNonNullableNullsWithoutDefaults`), then every
/// missing field with a `default` gets a copy of it, and so does every non-nullable null
/// (`Default`), recursively into objects, list items and `additionalProperties` maps.
/// Defaults are applied top-down, so a defaulted object gets its own fields' defaults.
pub fn apply_defaults(s: &Structural, value: &mut Value) {
    prune_non_nullable_nulls(value, Some(s));
    default_value(value, s);
}

fn non_nullable_null(x: &Value, s: Option<&Structural>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.generic.nullable)
}

fn prune_non_nullable_nulls(x: &mut Value, s: Option<&Structural>) {
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let schema = s.and_then(|s| s.field_schema(&key));
                let drop = map.get(&key).is_some_and(|v| {
                    non_nullable_null(v, schema)
                        && schema.is_some_and(|s| s.generic.default.is_none())
                });
                if drop {
                    map.remove(&key);
                } else if let Some(child) = map.get_mut(&key) {
                    prune_non_nullable_nulls(child, schema);
                }
            }
        }
        Value::Array(items) => {
            let schema = s.and_then(|s| s.items.as_deref());
            for item in items {
                prune_non_nullable_nulls(item, schema);
            }
        }
        _ => {}
    }
}

fn default_value(x: &mut Value, s: &Structural) {
    match x {
        Value::Object(map) => {
            for (name, prop) in &s.properties {
                let Some(default) = &prop.generic.default else {
                    continue;
                };
                let missing = map
                    .get(name)
                    .is_none_or(|v| non_nullable_null(v, Some(prop)));
                if missing {
                    map.insert(name.clone(), default.clone());
                }
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let Some(child) = map.get_mut(&key) else {
                    continue;
                };
                if let Some(prop) = s.properties.get(&key) {
                    default_value(child, prop);
                } else if let Some(additional) = s.additional_properties_schema() {
                    if non_nullable_null(child, Some(additional)) {
                        *child = additional.generic.default.clone().unwrap_or(Value::Null);
                    }
                    default_value(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for item in items {
                    if non_nullable_null(item, Some(item_schema)) {
                        *item = item_schema.generic.default.clone().unwrap_or(Value::Null);
                    }
                    default_value(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Drops the fields of a custom resource that the schema does not specify, unless a
/// level says `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind` and
/// `metadata` of the root and of embedded resources are kept (upstream `Prune` with
/// `isResourceRoot`). Returns the dropped fields' paths, sorted, as upstream reports them
/// for `fieldValidation` (`spec.foo`, `spec.ports[0].bar`; the warning reads
/// `unknown field "spec.foo"`).
pub fn prune(s: &Structural, value: &mut Value) -> Vec<String> {
    let root = s.as_resource_root();
    let mut pruned = Vec::new();
    prune_level(value, Some(&root), "", &mut pruned);
    pruned.sort();
    pruned
}

/// [`prune`] of a value that is not a resource root (for defaults): no meta fields kept
/// unless `s` is an embedded resource.
pub(crate) fn prune_plain(s: &Structural, value: &mut Value) {
    let mut pruned = Vec::new();
    prune_level(value, Some(s), "", &mut pruned);
}

fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn prune_level(x: &mut Value, s: Option<&Structural>, path: &str, pruned: &mut Vec<String>) {
    if let Some(schema) = s
        && schema.extensions.preserve_unknown_fields
    {
        skip_prune(x, schema, path, pruned);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                for key in map.keys() {
                    pruned.push(join_key(path, key));
                }
                map.clear();
                return;
            };
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if s.extensions.embedded_resource && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                let child_path = join_key(path, &key);
                if let Some(prop) = s.properties.get(&key) {
                    if let Some(child) = map.get_mut(&key) {
                        prune_level(child, Some(prop), &child_path, pruned);
                    }
                } else if let Some(additional) = &s.generic.additional_properties {
                    if let Some(child) = map.get_mut(&key) {
                        prune_level(child, additional.structural.as_deref(), &child_path, pruned);
                    }
                } else {
                    if !META_FIELDS.contains(&key.as_str()) || !path.is_empty() {
                        pruned.push(child_path);
                    }
                    map.remove(&key);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune_level(item, item_schema, &format!("{path}[{i}]"), pruned);
            }
        }
        _ => {}
    }
}

fn skip_prune(x: &mut Value, s: &Structural, path: &str, pruned: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if s.extensions.embedded_resource && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                let child_path = join_key(path, key);
                if let Some(prop) = s.properties.get(key) {
                    prune_level(child, Some(prop), &child_path, pruned);
                } else if let Some(additional) = &s.generic.additional_properties {
                    prune_level(child, additional.structural.as_deref(), &child_path, pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use serde_json::json;

    fn schema(v: Value) -> Structural {
        let props: JSONSchemaProps = serde_json::from_value(v).expect("schema");
        Structural::new(&props).expect("structural")
    }

    #[test]
    fn defaults_fill_missing_fields_items_maps_and_non_nullable_nulls() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "mode": {"type": "string", "default": "auto"},
                        "note": {"type": "string", "nullable": true, "default": "x"},
                        "gone": {"type": "string"},
                        "ports": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
                        "limits": {"type": "object", "additionalProperties": {
                            "type": "object",
                            "properties": {"unit": {"type": "string", "default": "Mi"}}}}
                    }
                }
            }
        }));
        let mut empty = json!({});
        apply_defaults(&s, &mut empty);
        assert_eq!(
            empty,
            json!({"spec": {"replicas": 1, "mode": "auto", "note": "x"}})
        );

        let mut obj = json!({"spec": {"mode": null, "note": null, "gone": null,
            "ports": [{"name": "http"}], "limits": {"mem": {}}}});
        apply_defaults(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 1, "mode": "auto", "note": null,
                "ports": [{"name": "http", "protocol": "TCP"}],
                "limits": {"mem": {"unit": "Mi"}}}})
        );
    }

    #[test]
    fn prune_drops_unknown_fields_and_reports_their_paths() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "items": {"type": "object",
                        "properties": {"name": {"type": "string"}}}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "properties": {"spec": {"type": "object"}}}
                }}
            }
        }));
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"foo": 1, "ports": [{"name": "a", "bar": 2}], "extra": {"anything": true},
                     "template": {"kind": "Pod", "metadata": {}, "status": {}}},
            "status": {}
        });
        let pruned = prune(&s, &mut obj);
        assert_eq!(
            pruned,
            vec![
                "spec.foo",
                "spec.ports[0].bar",
                "spec.template.status",
                "status"
            ]
        );
        assert_eq!(
            obj,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"ports": [{"name": "a"}], "extra": {"anything": true},
                         "template": {"kind": "Pod", "metadata": {}}}})
        );
    }
}
