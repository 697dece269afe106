//! Strategic merge patch as the API server applies it (upstream
//! `strategicpatch.StrategicMergeMapPatch`, with parallel lists merged and unmatched nulls
//! ignored):
//!
//! - maps merge recursively, `null` deletes a key; a field with patch strategy `replace` is
//!   replaced;
//! - lists with patch strategy `merge` merge: lists of objects by their merge key, lists of
//!   primitives as a set; other lists are replaced;
//! - directives: `$patch: replace | delete` in a map, `$patch: replace` and
//!   `{<key>: v, $patch: delete}` in a merged list, `$setElementOrder/<field>` (the order of
//!   the merged list), `$deleteFromPrimitiveList/<field>` (items to remove from a primitive
//!   list), `$retainKeys` (fields of a union to keep);
//! - the order of a merged list: the patch's items in the patch's (or
//!   `$setElementOrder`'s) order, the server's other items interleaved by their order in the
//!   live list.

use serde_json::{Map, Value};

use super::PatchError;
use super::messages::{BAD_PRIMITIVE_LIST, BAD_RETAIN_KEYS, BAD_SET_ELEMENT_ORDER, NOT_AN_OBJECT};
use crate::schema::{PatchMeta, Schemas};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

type Result<T> = std::result::Result<T, PatchError>;

fn error(message: impl Into<String>) -> PatchError {
    PatchError(message.into())
}

/// Applies a strategic merge patch to an object of OpenAPI type `definition`
/// (`io.k8s.api.apps.v1.Deployment`). Fields the schemas do not describe merge as plain
/// maps and replace as plain values.
pub fn strategic_merge_patch(
    schemas: &Schemas,
    definition: &str,
    target: &Value,
    patch: &Value,
) -> Result<Value> {
    let Value::Object(patch) = patch else {
        return Err(error(format!(
            "{NOT_AN_OBJECT} {} into Go value of type map[string]interface {{}}",
            super::go_kind(patch)
        )));
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => return Err(error(super::messages::BAD_JSON_DOC)),
    };
    let merger = Merger { schemas };
    let schema = schemas.definition(definition);
    merger
        .merge_map(original, patch.clone(), schema)
        .map(Value::Object)
}

/// A JSON value printed as Go's `%v` prints its decoded form (`map[k:v]`, `[a b]`), as
/// upstream's patch errors show values.
struct GoFmt<'a>(&'a Value);

impl std::fmt::Display for GoFmt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Value::Null => f.write_str("<nil>"),
            Value::String(s) => f.write_str(s),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{}", GoFmt(item))?;
                }
                f.write_str("]")
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                f.write_str("map[")?;
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{key}:{}", GoFmt(&map[key]))?;
                }
                f.write_str("]")
            }
        }
    }
}

/// The kind of list elements: lists must not mix kinds or nest lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    String,
    Number,
    Bool,
    Null,
}

fn element_kind<'a>(lists: impl IntoIterator<Item = &'a [Value]>) -> Result<Kind> {
    let mut kind = None;
    for list in lists {
        for value in list {
            let this = match value {
                Value::Object(_) => Kind::Object,
                Value::String(_) => Kind::String,
                Value::Number(_) => Kind::Number,
                Value::Bool(_) => Kind::Bool,
                Value::Null => Kind::Null,
                Value::Array(_) => return Err(error("lists of lists are not supported")),
            };
            match kind {
                None => kind = Some(this),
                Some(previous) if previous != this => {
                    return Err(error("list element types are not identical"));
                }
                Some(_) => {}
            }
        }
    }
    kind.ok_or_else(|| error("no elements in any of the given slices"))
}

fn no_merge_key(item: &Value, key: &str) -> PatchError {
    error(format!(
        "map: {} does not contain declared merge key: {key}",
        GoFmt(item)
    ))
}

/// The identity of a list element: its merge key's value for objects, itself otherwise.
fn identity<'a>(item: &'a Value, merge_key: Option<&str>) -> Option<&'a Value> {
    match merge_key {
        Some(key) => item.get(key),
        None => Some(item),
    }
}

/// Where `item` sits in `list`, by identity.
fn position(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    let wanted = identity(item, merge_key)?;
    list.iter()
        .position(|v| identity(v, merge_key) == Some(wanted))
}

/// Splits `items` into those present in `by` and the others (objects need the merge key).
fn partition(
    items: Vec<Value>,
    by: &[Value],
    merge_key: Option<&str>,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for item in items {
        if let Some(key) = merge_key
            && item.get(key).is_none()
        {
            return Err(no_merge_key(&item, key));
        }
        if position(by, &item, merge_key).is_some() {
            present.push(item);
        } else {
            absent.push(item);
        }
    }
    Ok((present, absent))
}

fn is_delete_directive(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Sorts `items` by their position in `order` (stable; unknown ones last), then drops the
/// ones `order` marks `$patch: delete`.
fn sort_by_order(
    mut items: Vec<Value>,
    order: &[Value],
    merge_key: Option<&str>,
) -> Result<Vec<Value>> {
    if let Some(key) = merge_key
        && let Some(item) = items.iter().chain(order).find(|v| v.get(key).is_none())
    {
        return Err(no_merge_key(item, key));
    }
    items.sort_by_key(|item| position(order, item, merge_key).unwrap_or(usize::MAX));
    if merge_key.is_some() {
        let deleted: Vec<&Value> = order.iter().filter(|v| is_delete_directive(v)).collect();
        items.retain(|item| {
            !deleted
                .iter()
                .any(|d| identity(d, merge_key) == identity(item, merge_key))
        });
    }
    Ok(items)
}

/// Interleaves the server-only items (`left`) into the patch items (`right`): a server item
/// goes before a patch item when both are in the live list and it comes first there.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => return out,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, merge_key), position(server_order, r, merge_key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
}

/// Orders a merged list: patch items by `patch_order`, server-only items by
/// `server_order`, interleaved.
fn normalize_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Result<Vec<Value>> {
    let patch_items = sort_by_order(patch_items, patch_order, merge_key)?;
    let server_only = sort_by_order(server_only, server_order, merge_key)?;
    Ok(merge_sorted(
        server_only,
        patch_items,
        server_order,
        merge_key,
    ))
}

/// Removes `null` values from a value taken from the patch as is.
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// `$prefix/field` → `field`.
fn directive_field<'k>(key: &'k str, prefix: &str, malformed: &str) -> Result<&'k str> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field),
        _ => Err(error(malformed)),
    }
}

struct Merger<'a> {
    schemas: &'a Schemas,
}

/// The schema and patch metadata of a field of an object schema.
struct FieldInfo<'a> {
    schema: Option<&'a Value>,
    items: Option<&'a Value>,
    meta: PatchMeta,
}

impl<'a> Merger<'a> {
    fn field(&self, schema: Option<&'a Value>, name: &str) -> FieldInfo<'a> {
        match schema.and_then(|s| self.schemas.field(s, name)) {
            Some(field) => FieldInfo {
                schema: Some(field.schema),
                items: field.items,
                meta: field.patch_meta(),
            },
            None => FieldInfo {
                schema: None,
                items: None,
                meta: PatchMeta::default(),
            },
        }
    }

    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        schema: Option<&'a Value>,
    ) -> Result<Map<String, Value>> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some("replace") => {
                    patch.remove(DIRECTIVE);
                    Ok(patch)
                }
                Some("delete") => Ok(Map::new()),
                _ => Err(error(format!(
                    "unknown patch type: {} in map: {}",
                    GoFmt(directive),
                    GoFmt(&Value::Object(patch.clone()))
                ))),
            };
        }
        apply_retain_keys(&mut original, &mut patch)?;
        self.merge_element_orders(&mut original, &mut patch, schema)?;

        for (key, mut value) in patch {
            let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                let field = directive_field(&key, DELETE_FROM_PRIMITIVE_LIST, BAD_PRIMITIVE_LIST)?;
                (field.to_owned(), true)
            } else {
                (key, false)
            };
            if value.is_null() {
                original.remove(&key);
                continue;
            }
            let Some(slot) = original.get_mut(&key) else {
                if !is_delete_list {
                    discard_nulls(&mut value);
                    original.insert(key, value);
                }
                continue;
            };
            *slot = match (std::mem::take(slot), value) {
                (Value::Object(current), Value::Object(value)) => {
                    let field = self.field(schema, &key);
                    if field.meta.replaces() {
                        Value::Object(value)
                    } else {
                        Value::Object(self.merge_map(current, value, field.schema)?)
                    }
                }
                (Value::Array(current), Value::Array(value)) => {
                    let field = self.field(schema, &key);
                    if field.meta.merges() || is_delete_list {
                        let key_name = field.meta.merge_key.as_deref();
                        Value::Array(self.merge_list(
                            current,
                            value,
                            field.items,
                            key_name,
                            is_delete_list,
                        )?)
                    } else {
                        Value::Array(value)
                    }
                }
                (current, mut value) => {
                    if is_delete_list {
                        current
                    } else {
                        discard_nulls(&mut value);
                        value
                    }
                }
            };
        }
        Ok(original)
    }

    /// Merges two lists of a field with patch strategy `merge`.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        items: Option<&'a Value>,
        merge_key: Option<&str>,
        is_delete_list: bool,
    ) -> Result<Vec<Value>> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = element_kind([original.as_slice(), patch.as_slice()])?;
        if kind != Kind::Object {
            if is_delete_list {
                return Ok(original
                    .into_iter()
                    .filter(|v| !patch.contains(v))
                    .collect());
            }
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for item in original.iter().chain(&patch) {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            let (patch_items, server_only) = partition(merged, &patch, None)?;
            return normalize_order(patch_items, server_only, &patch, &original, None);
        }
        let Some(key) = merge_key else {
            return Err(error("cannot merge lists without merge key for type map"));
        };
        let (original, patch) = split_special_elements(original, patch, key)?;
        let server_order = original.clone();
        let mut merged = original;
        for item in &patch {
            let Some(wanted) = item.get(key) else {
                return Err(no_merge_key(item, key));
            };
            let found = merged.iter().position(|v| v.get(key) == Some(wanted));
            match (found, item) {
                (Some(index), Value::Object(item)) => {
                    let current = match std::mem::take(&mut merged[index]) {
                        Value::Object(map) => map,
                        _ => Map::new(),
                    };
                    merged[index] = Value::Object(self.merge_map(current, item.clone(), items)?);
                }
                _ => merged.push(item.clone()),
            }
        }
        let (patch_items, server_only) = partition(merged, &patch, Some(key))?;
        normalize_order(patch_items, server_only, &patch, &server_order, Some(key))
    }

    /// Applies every `$setElementOrder/<field>` of the patch: merges the field's list and
    /// orders it as the directive says; the field is then done.
    fn merge_element_orders(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        schema: Option<&'a Value>,
    ) -> Result<()> {
        let directives: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for directive in directives {
            let Some(Value::Array(order)) = patch.remove(&directive) else {
                return Err(error(BAD_SET_ELEMENT_ORDER));
            };
            let field_name =
                directive_field(&directive, SET_ELEMENT_ORDER, BAD_SET_ELEMENT_ORDER)?.to_owned();
            let current = match original.get(&field_name) {
                None => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(_) => return Err(error(BAD_SET_ELEMENT_ORDER)),
            };
            let patched = match patch.get(&field_name) {
                None => None,
                Some(Value::Array(list)) => Some(list.clone()),
                Some(_) => return Err(error(BAD_SET_ELEMENT_ORDER)),
            };
            let field = self.field(schema, &field_name);
            let merge_key = field.meta.merge_key.clone();
            let merge_key = merge_key.as_deref();
            check_order(patched.as_deref().unwrap_or_default(), &order, merge_key)?;
            let merged = match (&current, &patched) {
                (Some(current), None) => current.clone(),
                (None, Some(patched)) => patched.clone(),
                (Some(current), Some(patched)) if field.meta.merges() => self.merge_list(
                    current.clone(),
                    patched.clone(),
                    field.items,
                    merge_key,
                    false,
                )?,
                (Some(_), Some(patched)) => patched.clone(),
                (None, None) => continue,
            };
            let (patch_items, server_only) = partition(merged, &order, merge_key)?;
            let current = current.unwrap_or_default();
            element_kind([current.as_slice(), patched.as_deref().unwrap_or_default()])?;
            let ordered = normalize_order(patch_items, server_only, &order, &current, merge_key)?;
            original.insert(field_name.clone(), Value::Array(ordered));
            patch.remove(&field_name);
        }
        Ok(())
    }
}

/// In a merged list of objects: `$patch: delete` items remove the matching original,
/// `$patch: replace` makes the patch's other items the whole list. Returns the original and
/// the patch without these items.
fn split_special_elements(
    original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut original = original;
    let mut plain = Vec::new();
    let mut replace = false;
    for item in patch {
        match item.get(DIRECTIVE) {
            None => plain.push(item),
            Some(directive) => match directive.as_str() {
                Some("delete") => {
                    // One directive removes one entry, so duplicates can be cleaned up.
                    let Some(wanted) = item.get(key) else {
                        return Err(no_merge_key(&item, key));
                    };
                    if let Some(index) = original.iter().position(|v| v.get(key) == Some(wanted)) {
                        original.remove(index);
                    }
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(error("merging lists cannot yet be specified in the patch"));
                }
                _ => {
                    return Err(error(format!(
                        "unknown patch type: {} in map: {}",
                        GoFmt(directive),
                        GoFmt(&item)
                    )));
                }
            },
        }
    }
    if replace {
        Ok((plain, Vec::new()))
    } else {
        Ok((original, plain))
    }
}

/// `$retainKeys`: the patch may only set listed fields; the original keeps only them.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(error(BAD_RETAIN_KEYS));
    };
    let kept = |key: &str| retain.iter().any(|v| v.as_str() == Some(key));
    for (key, value) in patch.iter() {
        let directive =
            key.starts_with(DELETE_FROM_PRIMITIVE_LIST) || key.starts_with(SET_ELEMENT_ORDER);
        if !value.is_null() && !directive && !kept(key) {
            return Err(error(BAD_RETAIN_KEYS));
        }
    }
    original.retain(|key, _| kept(key));
    Ok(())
}

/// The patch list's items (but deletions and directives) must appear in the
/// `$setElementOrder` list, in the same relative order.
fn check_order(patch: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<()> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = patch
        .iter()
        .filter(|v| merge_key.is_none() || !is_delete_directive(v))
        .collect();
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        if items[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        let same = match merge_key {
            None => items[p] == &order[o],
            Some(key) => {
                let left = items[p]
                    .get(key)
                    .ok_or_else(|| no_merge_key(items[p], key))?;
                let right = order[o]
                    .get(key)
                    .ok_or_else(|| no_merge_key(&order[o], key))?;
                left == right
            }
        };
        if same {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(error(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            GoFmt(&Value::Array(patch.to_vec())),
            GoFmt(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::builtin;
    use serde_json::json;

    const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";

    fn apply(target: &Value, patch: Value) -> Value {
        strategic_merge_patch(&builtin(), DEPLOYMENT, target, &patch).expect("patch applies")
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}"},
                "finalizers": ["example.com/a", "example.com/b"]
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {"name": "web", "image": "nginx:1.25",
                             "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443, "protocol": "TCP"}],
                             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}],
                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                            {"name": "log", "image": "busybox", "args": ["-a", "-b"]}
                        ],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                        "tolerations": [{"key": "a", "operator": "Exists"}]
                    }
                }
            }
        })
    }

    fn containers(value: &Value) -> &Value {
        &value["spec"]["template"]["spec"]["containers"]
    }

    #[test]
    fn kubectl_set_image_patch() {
        // `kubectl set image deployment/web web=nginx:1.27`
        let patched = apply(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}),
        );
        let c = containers(&patched);
        assert_eq!(c[0]["image"], "nginx:1.27");
        assert_eq!(
            c[0]["env"],
            deployment()["spec"]["template"]["spec"]["containers"][0]["env"]
        );
        assert_eq!(c[1]["name"], "log");
        assert_eq!(c.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn kubectl_apply_removes_an_env_var_with_set_element_order() {
        // `kubectl apply` after deleting env B from the manifest and changing A.
        let patch = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}"}},
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "web"}, {"name": "log"}],
                "containers": [{
                    "name": "web",
                    "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                    "env": [{"name": "A", "value": "10"}, {"$patch": "delete", "name": "B"}]
                }]
            }}}
        });
        let patched = apply(&deployment(), patch);
        assert_eq!(
            containers(&patched)[0]["env"],
            json!([{"name": "A", "value": "10"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(
            patched["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"new\":true}"
        );
        assert_eq!(containers(&patched)[1]["name"], "log");
    }

    #[test]
    fn kubectl_apply_changes_ports_and_reorders() {
        // Ports become [8080, 80]: 443 deleted, 8080 added first.
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "log"}],
            "containers": [{
                "name": "web",
                "$setElementOrder/ports": [{"containerPort": 8080}, {"containerPort": 80}],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"$patch": "delete", "containerPort": 443}]
            }]
        }}}});
        let patched = apply(&deployment(), patch);
        assert_eq!(
            containers(&patched)[0]["ports"],
            json!([{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 80, "protocol": "TCP"}])
        );
        // Reordering containers alone.
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "log"}, {"name": "web"}]
        }}}});
        let patched = apply(&deployment(), patch);
        assert_eq!(containers(&patched)[0]["name"], "log");
        assert_eq!(containers(&patched)[1]["name"], "web");
    }

    #[test]
    fn new_items_without_order_go_first_as_upstream() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}});
        let patched = apply(&deployment(), patch);
        let names: Vec<&Value> = containers(&patched)
            .as_array()
            .expect("list")
            .iter()
            .map(|c| &c["name"])
            .collect();
        assert_eq!(names, [&json!("sidecar"), &json!("web"), &json!("log")]);
    }

    #[test]
    fn nulls_delete_and_non_merge_lists_replace() {
        let patch = json!({
            "metadata": {"labels": {"app": null, "tier": "fe"}, "annotations": null},
            "spec": {"template": {"spec": {
                "tolerations": [{"key": "b", "operator": "Exists"}],
                "containers": [{"name": "log", "args": ["-c"], "image": null}]
            }}}
        });
        let patched = apply(&deployment(), patch);
        assert_eq!(patched["metadata"]["labels"], json!({"tier": "fe"}));
        assert!(patched["metadata"].get("annotations").is_none());
        assert_eq!(
            patched["spec"]["template"]["spec"]["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
        assert_eq!(
            containers(&patched)[1],
            json!({"name": "log", "args": ["-c"]})
        );
    }

    #[test]
    fn retain_keys_clears_the_other_union_members() {
        // `kubectl apply` switching the strategy to Recreate.
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
        let patched = apply(&deployment(), patch);
        assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
        // Volumes: replacing the source of a volume.
        let patch = json!({"spec": {"template": {"spec": {"volumes": [
            {"name": "data", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/srv"}}
        ]}}}});
        let patched = apply(&deployment(), patch);
        assert_eq!(
            patched["spec"]["template"]["spec"]["volumes"],
            json!([{"name": "data", "hostPath": {"path": "/srv"}}])
        );
        let bad = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}});
        let err = strategic_merge_patch(&builtin(), DEPLOYMENT, &deployment(), &bad).unwrap_err();
        assert_eq!(err, PatchError("invalid patch format of retainKeys".into()));
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn primitive_lists_merge_as_sets() {
        // Finalizers merge; the delete list removes; the order directive orders.
        let patch = json!({"metadata": {
            "finalizers": ["example.com/c", "example.com/a"],
        }});
        let patched = apply(&deployment(), patch);
        assert_eq!(
            patched["metadata"]["finalizers"],
            json!(["example.com/c", "example.com/a", "example.com/b"])
        );
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/a"],
            "$setElementOrder/finalizers": ["example.com/b", "example.com/z"],
            "finalizers": ["example.com/z"]
        }});
        let patched = apply(&deployment(), patch);
        assert_eq!(
            patched["metadata"]["finalizers"],
            json!(["example.com/b", "example.com/z"])
        );
        // Non-merge primitive lists (args) are replaced.
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "log", "args": ["-z"]}]}}}});
        assert_eq!(
            containers(&apply(&deployment(), patch))[1]["args"],
            json!(["-z"])
        );
    }

    #[test]
    fn patch_directives() {
        // $patch: replace on a map.
        let patch = json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"x": "y"}}}});
        assert_eq!(
            apply(&deployment(), patch)["spec"]["selector"],
            json!({"matchLabels": {"x": "y"}})
        );
        // $patch: delete on a map.
        let patch = json!({"spec": {"strategy": {"$patch": "delete"}}});
        assert_eq!(apply(&deployment(), patch)["spec"]["strategy"], json!({}));
        // $patch: replace in a list.
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "only", "image": "x"}, {"$patch": "replace"}
        ]}}}});
        assert_eq!(
            *containers(&apply(&deployment(), patch)),
            json!([{"name": "only", "image": "x"}])
        );
        // $patch: delete in a list.
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "log", "$patch": "delete"}]}}}});
        let patched = apply(&deployment(), patch);
        assert_eq!(containers(&patched).as_array().map(Vec::len), Some(1));
        assert_eq!(containers(&patched)[0]["name"], "web");
        // Unknown directives.
        for (patch, message) in [
            (
                json!({"spec": {"strategy": {"$patch": "merge"}}}),
                "unknown patch type: merge in map: map[$patch:merge]",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "x", "$patch": "merge"}]}}}}),
                "merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
                "map: map[image:x] does not contain declared merge key: name",
            ),
        ] {
            let err =
                strategic_merge_patch(&builtin(), DEPLOYMENT, &deployment(), &patch).unwrap_err();
            assert_eq!(err.0, message);
            assert_eq!(err.status_code(), 422);
        }
    }

    #[test]
    fn malformed_patches_are_bad_requests() {
        let cases = [
            (
                json!([1]),
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": "x"}}),
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"metadata": {"$setElementOrder": []}}),
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList": ["x"]}}),
                "invalid patch format of primitive list",
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                "invalid patch format of retainKeys",
            ),
        ];
        for (patch, message) in cases {
            let err =
                strategic_merge_patch(&builtin(), DEPLOYMENT, &deployment(), &patch).unwrap_err();
            assert_eq!(err.0, message);
            assert_eq!(err.status_code(), 400, "{message}");
        }
        let mismatch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{"name": "log", "image": "x"}]
        }}}});
        let err =
            strategic_merge_patch(&builtin(), DEPLOYMENT, &deployment(), &mismatch).unwrap_err();
        assert_eq!(
            err.0,
            "The order in patch list:\n[map[image:x name:log]]\n doesn't match $setElementOrder list:\n[map[name:web]]\n"
        );
    }

    #[test]
    fn kubectl_scale_label_and_annotate_patches() {
        let patched = apply(&deployment(), json!({"spec": {"replicas": 5}}));
        assert_eq!(patched["spec"]["replicas"], 5);
        let patched = apply(
            &deployment(),
            json!({"metadata": {"labels": {"env": "prod"}}}),
        );
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"app": "web", "env": "prod"})
        );
        let patched = apply(
            &deployment(),
            json!({"metadata": {"annotations": {"note": "x"}}}),
        );
        assert_eq!(patched["metadata"]["annotations"]["note"], "x");
        assert_eq!(
            patched["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"old\":true}"
        );
        // New nested values drop their nulls.
        let patched = apply(
            &deployment(),
            json!({"spec": {"paused": true, "template": {"spec": {"securityContext": {"runAsUser": 1, "fsGroup": null}}}}}),
        );
        assert_eq!(
            patched["spec"]["template"]["spec"]["securityContext"],
            json!({"runAsUser": 1})
        );
        assert_eq!(patched["spec"]["paused"], true);
    }

    /// Results of `kubectl patch --local --type strategic` (upstream's strategicpatch) on
    /// [`deployment`]: (patch, JSON pointer of the part compared, expected value).
    #[test]
    fn agrees_with_kubectl_patch_local() {
        let containers = "/spec/template/spec/containers";
        let cases = [
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "log", "image": "b2"}, {"name": "sidecar", "image": "envoy"}]}}}}),
                containers,
                json!([{"name": "web"}, {"name": "log"}, {"name": "sidecar"}]),
            ),
            (
                json!({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "log"}, {"name": "new"}, {"name": "web"}],
                                                    "containers": [{"name": "new", "image": "n"}]}}}}),
                containers,
                json!([{"name": "log"}, {"name": "new"}, {"name": "web"}]),
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "D", "value": "4"}, {"name": "B", "value": "20"}]}]}}}}),
                "/spec/template/spec/containers/0/env",
                json!([{"name": "D", "value": "4"}, {"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]),
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "A", "$patch": "delete"}, {"name": "Z", "value": "z"}]}]}}}}),
                "/spec/template/spec/containers/0/env",
                json!([{"name": "Z", "value": "z"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}]),
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80, "name": "http"}]}]}}}}),
                "/spec/template/spec/containers/0/ports",
                json!([{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443, "protocol": "TCP"}]),
            ),
            (
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                                                                {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/srv"}}]}}}}),
                "/spec/template/spec/volumes",
                json!([{"name": "cfg", "configMap": {"name": "c"}}, {"name": "data", "hostPath": {"path": "/srv"}}]),
            ),
            (
                json!({"metadata": {"finalizers": ["example.com/b", "example.com/c"]}}),
                "/metadata/finalizers",
                json!(["example.com/a", "example.com/b", "example.com/c"]),
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": ["example.com/b", "example.com/a"]}}),
                "/metadata/finalizers",
                json!(["example.com/b", "example.com/a"]),
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "log", "args": null}, {"$patch": "delete", "name": "web"}]}}}}),
                containers,
                json!([{"name": "log", "image": "busybox"}]),
            ),
        ];
        for (patch, pointer, expected) in cases {
            let patched = apply(&deployment(), patch.clone());
            let mut actual = patched.pointer(pointer).cloned().unwrap_or(Value::Null);
            if pointer == containers {
                // Compare containers by name only, except where the case spells them out.
                if let (Value::Array(items), Some(wanted)) = (&mut actual, expected.as_array()) {
                    for (item, want) in items.iter_mut().zip(wanted) {
                        if want.as_object().is_some_and(|w| w.len() == 1) {
                            *item = json!({"name": item["name"].clone()});
                        }
                    }
                }
            }
            assert_eq!(actual, expected, "{patch}");
        }
    }

    /// `kubectl patch --local` results on a Service and a Pod.
    #[test]
    fn agrees_with_kubectl_on_services_and_pods() {
        let schemas = builtin();
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "https", "port": 443, "protocol": "TCP"}]}});
        let patch = json!({"spec": {"ports": [{"port": 8443, "name": "alt"}, {"port": 80, "targetPort": 9090}]}});
        let patched =
            strategic_merge_patch(&schemas, "io.k8s.api.core.v1.Service", &service, &patch)
                .expect("applies");
        assert_eq!(
            patched["spec"]["ports"],
            json!([{"name": "alt", "port": 8443},
                   {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 9090},
                   {"name": "https", "port": 443, "protocol": "TCP"}])
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "a", "uid": "u1"}]},
            "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/a"}]}],
                     "tolerations": [{"key": "k", "operator": "Exists"}],
                     "imagePullSecrets": [{"name": "r1"}],
                     "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["a"]}]}});
        let patch = json!({
            "metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Y", "name": "b", "uid": "u2"}]},
            "spec": {"tolerations": [{"key": "z", "operator": "Exists"}],
                     "imagePullSecrets": [{"name": "r2"}],
                     "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}],
                     "containers": [{"name": "c", "volumeMounts": [{"name": "w", "mountPath": "/b"}]}]}});
        let patched = strategic_merge_patch(&schemas, "io.k8s.api.core.v1.Pod", &pod, &patch)
            .expect("applies");
        assert_eq!(
            patched["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Y", "name": "b", "uid": "u2"},
                   {"apiVersion": "v1", "kind": "X", "name": "a", "uid": "u1"}])
        );
        let spec = &patched["spec"];
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "z", "operator": "Exists"}])
        );
        assert_eq!(
            spec["imagePullSecrets"],
            json!([{"name": "r2"}, {"name": "r1"}])
        );
        assert_eq!(
            spec["hostAliases"],
            json!([{"ip": "1.1.1.1", "hostnames": ["b"]}])
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"],
            json!([{"name": "w", "mountPath": "/b"}, {"name": "v", "mountPath": "/a"}])
        );
    }

    /// Upstream's `mergeItem` test type as OpenAPI definitions.
    fn merge_item_schemas() -> Schemas {
        let merge_list = |strategy: &str| {
            json!({"type": "array", "items": {"$ref": "#/definitions/mergeItem"},
                   "x-kubernetes-patch-strategy": strategy, "x-kubernetes-patch-merge-key": "name"})
        };
        let definitions = json!({
            "mergeItem": {"type": "object", "properties": {
                "name": {"type": "string"}, "value": {"type": "string"}, "other": {"type": "string"},
                "mergingList": merge_list("merge"),
                "nonMergingList": {"type": "array", "items": {"$ref": "#/definitions/mergeItem"}},
                "mergingIntList": {"type": "array", "items": {"type": "integer"}, "x-kubernetes-patch-strategy": "merge"},
                "nonMergingIntList": {"type": "array", "items": {"type": "integer"}},
                "simpleMap": {"type": "object", "additionalProperties": {"type": "string"}},
                "replacingItem": {"type": "object", "x-kubernetes-patch-strategy": "replace"},
                "retainKeysMap": {"$ref": "#/definitions/mergeItem", "x-kubernetes-patch-strategy": "retainKeys"},
                "retainKeysMergingList": merge_list("merge,retainKeys"),
            }}
        });
        match definitions {
            Value::Object(map) => Schemas::new(map),
            _ => unreachable!("literal object"),
        }
    }

    #[test]
    fn upstream_merge_item_cases() {
        // (description, original, patch, result) from upstream's patch_test.go.
        let cases = [
            (
                "unique scalars",
                json!({"mergingIntList": [1, 2]}),
                json!({"mergingIntList": [2, 3]}),
                json!({"mergingIntList": [1, 2, 3]}),
            ),
            (
                "delete nested map",
                json!({"simpleMap": {"key1": "1", "key2": "1"}}),
                json!({"simpleMap": {"$patch": "delete"}}),
                json!({"simpleMap": {}}),
            ),
            (
                "delete all items",
                json!({"mergingList": [{"name": "1"}, {"name": "2"}]}),
                json!({"mergingList": [{"$patch": "replace"}]}),
                json!({"mergingList": []}),
            ),
            (
                "empty lists",
                json!({"mergingList": []}),
                json!({"mergingList": []}),
                json!({"mergingList": []}),
            ),
            (
                "replace all keys",
                json!({"name": "1", "value": "1"}),
                json!({"$patch": "replace"}),
                json!({}),
            ),
            (
                "add key and replace",
                json!({"name": "1", "value": "1"}),
                json!({"other": "a", "$patch": "replace"}),
                json!({"other": "a"}),
            ),
            (
                "de-duplicate",
                json!({"mergingList": [{"name": "1"}, {"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}, {"name": "3"}]}),
                json!({"mergingList": [{"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]}),
                json!({"mergingList": [{"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}]}),
            ),
            (
                "delete all duplicates",
                json!({"mergingList": [{"name": "1"}, {"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}, {"name": "3"}]}),
                json!({"mergingList": [{"name": "1", "$patch": "delete"}, {"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]}),
                json!({"mergingList": [{"name": "2", "value": "a"}]}),
            ),
            (
                "retainKeys map adds",
                json!({"retainKeysMap": {"name": "foo"}}),
                json!({"retainKeysMap": {"value": "bar"}}),
                json!({"retainKeysMap": {"name": "foo", "value": "bar"}}),
            ),
            (
                "retainKeys map deletes",
                json!({"retainKeysMap": {"name": "foo", "value": "a"}}),
                json!({"retainKeysMap": {"value": null}}),
                json!({"retainKeysMap": {"name": "foo"}}),
            ),
            (
                "retainKeys map empty",
                json!({"retainKeysMap": {"name": "foo", "value": "a"}}),
                json!({"retainKeysMap": {}}),
                json!({"retainKeysMap": {"name": "foo", "value": "a"}}),
            ),
            (
                "retainKeys list adds",
                json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo"}]}),
                json!({"retainKeysMergingList": [{"name": "foo", "value": "a"}]}),
                json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a"}]}),
            ),
            (
                "patch order",
                json!({"mergingList": [{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}]}),
                json!({"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}, {"name": "2", "other": "x"}]}),
                json!({"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}, {"name": "2", "value": "b", "other": "x"}]}),
            ),
            (
                "patch order 2",
                json!({"mergingList": [{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}]}),
                json!({"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}]}),
                json!({"mergingList": [{"name": "2", "value": "b"}, {"name": "3", "value": "c"}, {"name": "1", "value": "a"}]}),
            ),
            (
                "int patch order",
                json!({"mergingIntList": [1, 2, 3]}),
                json!({"mergingIntList": [3, 1, 2]}),
                json!({"mergingIntList": [3, 1, 2]}),
            ),
            (
                "int patch order 2",
                json!({"mergingIntList": [1, 2, 3]}),
                json!({"mergingIntList": [3, 1]}),
                json!({"mergingIntList": [2, 3, 1]}),
            ),
            (
                "order lists an absent item",
                json!({"mergingList": [{"name": "1"}, {"name": "3"}]}),
                json!({"$setElementOrder/mergingList": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
                    "mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]}),
                json!({"mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]}),
            ),
            (
                "int order lists an absent item",
                json!({"mergingIntList": [1, 3]}),
                json!({"$setElementOrder/mergingIntList": [3, 2, 1]}),
                json!({"mergingIntList": [3, 1]}),
            ),
            (
                "replacing item",
                json!({"replacingItem": {"a": 1, "b": 2}}),
                json!({"replacingItem": {"c": 3}}),
                json!({"replacingItem": {"c": 3}}),
            ),
            (
                "non-merging list",
                json!({"nonMergingList": [{"name": "1"}, {"name": "2"}]}),
                json!({"nonMergingList": [{"name": "3"}]}),
                json!({"nonMergingList": [{"name": "3"}]}),
            ),
        ];
        let schemas = merge_item_schemas();
        for (description, original, patch, result) in cases {
            let patched = strategic_merge_patch(&schemas, "mergeItem", &original, &patch);
            assert_eq!(patched, Ok(result), "{description}");
        }
        let errors = [
            (
                json!({"mergingList": [{"name": "1"}, {"name": "3"}, {"name": "2"}]}),
                json!({"$setElementOrder/mergingList": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
                    "mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]}),
                "doesn't match",
            ),
            (
                json!({"mergingIntList": [1, 3, 2]}),
                json!({"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3, 1]}),
                "doesn't match",
            ),
            (
                json!({"mergingList": [{"name": "1", "value": "a"}]}),
                json!({"mergingList": [{"value": "b"}]}),
                "does not contain declared merge key",
            ),
        ];
        for (original, patch, message) in errors {
            let err = strategic_merge_patch(&schemas, "mergeItem", &original, &patch).unwrap_err();
            assert!(err.0.contains(message), "{err}");
        }
    }

    #[test]
    fn unknown_definition_merges_maps_and_replaces_lists() {
        let target = json!({"a": {"b": 1, "c": [1, 2]}});
        let patch = json!({"a": {"c": [3], "d": 4}});
        let patched = strategic_merge_patch(&builtin(), "io.example.v1.Unknown", &target, &patch)
            .expect("applies");
        assert_eq!(patched, json!({"a": {"b": 1, "c": [3], "d": 4}}));
    }
}
