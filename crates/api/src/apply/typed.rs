//! Typed operations on JSON objects (upstream `sigs.k8s.io/structured-merge-diff/typed`):
//! the field set of a value, the comparison of two values, the apply merge, and the
//! removal of a set of fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldpath::{OrdValue, Path, PathElement, Set};
use super::types::{ListKind, Shape, Type, effective_shape};

/// What changed between two values (upstream `typed.Comparison`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Leaves and items only in the new value.
    pub added: Set,
    /// Leaves that differ.
    pub modified: Set,
    /// Leaves and items only in the old value.
    pub removed: Set,
}

impl Comparison {
    /// Drops the paths under `ignored` (upstream `FilterFields`).
    pub fn filter(&mut self, ignored: &Set) {
        if ignored.is_empty() {
            return;
        }
        self.added = self.added.recursive_difference(ignored);
        self.modified = self.modified.recursive_difference(ignored);
        self.removed = self.removed.recursive_difference(ignored);
    }
}

/// The path element of list item `index`. Errors (for keyed lists): upstream's messages
/// for null items, items that are no objects, and missing keys without defaults.
pub fn item_element(
    kind: &ListKind,
    items: &Type<'_>,
    index: usize,
    item: &Value,
) -> Result<PathElement, String> {
    match kind {
        ListKind::Atomic => Ok(PathElement::Index(index as i64)),
        ListKind::Set => Ok(PathElement::Value(OrdValue(item.clone()))),
        ListKind::Map(keys) if keys.is_empty() => Ok(PathElement::Value(OrdValue(item.clone()))),
        ListKind::Map(keys) => {
            let fields = match item {
                Value::Null => {
                    return Err("associative list with keys may not have a null element".into());
                }
                Value::Object(fields) => fields,
                _ => {
                    return Err("associative list with keys may not have non-map elements".into());
                }
            };
            let mut key = Vec::with_capacity(keys.len());
            for name in keys {
                let value = fields
                    .get(name)
                    .or_else(|| items.default_of(name))
                    .ok_or_else(|| {
                        format!(
                            "associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                        )
                    })?;
                key.push((name.clone(), value.clone()));
            }
            Ok(PathElement::key(key))
        }
    }
}

/// The element of an item of a live object: as [`item_element`], by position when the
/// item has no valid key.
fn lenient_element(kind: &ListKind, items: &Type<'_>, index: usize, item: &Value) -> PathElement {
    item_element(kind, items, index, item).unwrap_or(PathElement::Index(index as i64))
}

fn element_type<'a>(ty: &Type<'a>, element: &PathElement) -> Type<'a> {
    match element {
        PathElement::Field(name) => ty.field_or_deduced(name),
        _ => match ty.shape() {
            Shape::List { items, .. } => items,
            _ => Type::deduced(),
        },
    }
}

/// Checks an applied configuration against its type: fields a struct does not declare,
/// list items without their keys, and duplicate keys. Errors: upstream's message with
/// the path (`.spec.foo: field not declared in schema`).
pub fn validate(value: &Value, ty: &Type<'_>) -> Result<(), String> {
    validate_at(value, ty, &Path::default())
}

fn validate_at(value: &Value, ty: &Type<'_>, path: &Path) -> Result<(), String> {
    match (effective_shape(ty, Some(value)), value) {
        (Shape::Map { .. }, Value::Object(fields)) => {
            for (name, child) in fields {
                let child_path = path.child(PathElement::field(name));
                let Some(child_ty) = ty.field(name) else {
                    return Err(format!("{child_path}: field not declared in schema"));
                };
                validate_at(child, &child_ty, &child_path)?;
            }
            Ok(())
        }
        (Shape::List { kind, items }, Value::Array(list)) if kind != ListKind::Atomic => {
            let mut seen = Vec::with_capacity(list.len());
            for (index, item) in list.iter().enumerate() {
                let element = item_element(&kind, &items, index, item)
                    .map_err(|e| format!("{path}: element {index}: {e}"))?;
                if seen.contains(&element) {
                    return Err(format!("{path}: duplicate entries for key {element}"));
                }
                validate_at(item, &items, &path.child(element.clone()))?;
                seen.push(element);
            }
            Ok(())
        }
        (Shape::List { items, .. }, Value::Array(list)) => {
            for (index, item) in list.iter().enumerate() {
                validate_at(item, &items, &path.child(PathElement::Index(index as i64)))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The set of fields `value` sets (upstream `ToFieldSet`): leaves, list items, map
/// entries, null or empty fields, and atomic structs and lists as a whole.
pub fn to_field_set(value: &Value, ty: &Type<'_>) -> Set {
    let mut set = Set::new();
    collect_fields(value, ty, &Path::default(), &mut set);
    set
}

fn collect_fields(value: &Value, ty: &Type<'_>, path: &Path, set: &mut Set) {
    match effective_shape(ty, Some(value)) {
        Shape::Scalar | Shape::Deduced => set.insert(path),
        Shape::Map { atomic: true }
        | Shape::List {
            kind: ListKind::Atomic,
            ..
        } => set.insert(path),
        Shape::Map { atomic: false } => match value {
            Value::Object(fields) => {
                for (name, child) in fields {
                    let child_path = path.child(PathElement::field(name));
                    collect_fields(child, &ty.field_or_deduced(name), &child_path, set);
                    let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                    if empty || !ty.declares(name) {
                        set.insert(&child_path);
                    }
                }
            }
            Value::Null => {}
            _ => set.insert(path),
        },
        Shape::List { kind, items } => match value {
            Value::Array(list) => {
                for (index, item) in list.iter().enumerate() {
                    let child_path = path.child(lenient_element(&kind, &items, index, item));
                    collect_fields(item, &items, &child_path, set);
                    set.insert(&child_path);
                }
            }
            Value::Null => {}
            _ => set.insert(path),
        },
    }
}

fn is_empty_map(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(_) => false,
    }
}

fn is_empty_list(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(list)) => list.is_empty(),
        Some(_) => false,
    }
}

fn wrong_type(value: Option<&Value>, object: bool) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Object(_)) => !object,
        Some(Value::Array(_)) => object,
        Some(_) => true,
    }
}

/// Whether `lhs` and `rhs` are compared and merged as one leaf at this type.
fn is_leaf(shape: &Shape<'_>, lhs: Option<&Value>, rhs: Option<&Value>) -> bool {
    match shape {
        Shape::Scalar | Shape::Deduced => true,
        Shape::Map { atomic } => {
            *atomic
                || (is_empty_map(lhs) && is_empty_map(rhs))
                || wrong_type(lhs, true)
                || wrong_type(rhs, true)
        }
        Shape::List { kind, .. } => {
            *kind == ListKind::Atomic
                || (is_empty_list(lhs) && is_empty_list(rhs))
                || wrong_type(lhs, false)
                || wrong_type(rhs, false)
        }
    }
}

/// The items of a list by path element, in order (duplicates keep their first item).
fn indexed<'v>(
    kind: &ListKind,
    items: &Type<'_>,
    list: Option<&'v Value>,
) -> (Vec<PathElement>, BTreeMap<PathElement, &'v Value>) {
    let mut order = Vec::new();
    let mut by_element = BTreeMap::new();
    if let Some(Value::Array(values)) = list {
        for (index, item) in values.iter().enumerate() {
            let element = lenient_element(kind, items, index, item);
            by_element.entry(element.clone()).or_insert(item);
            order.push(element);
        }
    }
    (order, by_element)
}

/// Compares `lhs` (old) with `rhs` (new) (upstream `TypedValue.Compare`).
pub fn compare(lhs: &Value, rhs: &Value, ty: &Type<'_>) -> Comparison {
    let mut out = Comparison::default();
    compare_at(Some(lhs), Some(rhs), ty, &Path::default(), &mut out);
    out
}

fn compare_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: &Type<'_>,
    path: &Path,
    out: &mut Comparison,
) {
    let shape = effective_shape(ty, rhs.or(lhs));
    if is_leaf(&shape, lhs, rhs) {
        match (lhs, rhs) {
            (None, _) => out.added.insert(path),
            (_, None) => out.removed.insert(path),
            (Some(l), Some(r)) if l != r => out.modified.insert(path),
            _ => {}
        }
        return;
    }
    match shape {
        Shape::Map { .. } => {
            let empty = Map::new();
            let left = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let right = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let names = left
                .keys()
                .chain(right.keys().filter(|k| !left.contains_key(*k)));
            for name in names {
                let child_path = path.child(PathElement::field(name));
                let child_ty = ty.field_or_deduced(name);
                compare_at(left.get(name), right.get(name), &child_ty, &child_path, out);
            }
        }
        Shape::List { kind, items } => {
            let (left_order, left) = indexed(&kind, &items, lhs);
            let (right_order, right) = indexed(&kind, &items, rhs);
            let mut done = std::collections::BTreeSet::new();
            for element in left_order.iter().chain(right_order.iter()) {
                if !done.insert(element.clone()) {
                    continue;
                }
                let child_path = path.child(element.clone());
                let (l, r) = (left.get(element).copied(), right.get(element).copied());
                compare_at(l, r, &items, &child_path, out);
            }
        }
        Shape::Scalar | Shape::Deduced => {}
    }
    match (lhs, rhs) {
        (None, _) => out.added.insert(path),
        (_, None) => out.removed.insert(path),
        _ => {}
    }
}

/// Merges an applied configuration `rhs` into `lhs` (upstream `TypedValue.Merge`):
/// granular maps and lists merge item by item, everything else is taken from `rhs`.
pub fn merge(lhs: &Value, rhs: &Value, ty: &Type<'_>) -> Value {
    merge_at(Some(lhs), Some(rhs), ty).unwrap_or(Value::Null)
}

fn merge_at(lhs: Option<&Value>, rhs: Option<&Value>, ty: &Type<'_>) -> Option<Value> {
    let (l, r) = match (lhs, rhs) {
        (l, None) => return l.cloned(),
        (None, r) => return r.cloned(),
        (Some(l), Some(r)) => (l, r),
    };
    let shape = effective_shape(ty, Some(r));
    if is_leaf(&shape, Some(l), Some(r)) {
        return Some(r.clone());
    }
    match shape {
        Shape::Map { .. } => {
            let empty = Map::new();
            let left = l.as_object().unwrap_or(&empty);
            let right = r.as_object().unwrap_or(&empty);
            let mut out = Map::new();
            for (name, value) in left {
                let child_ty = ty.field_or_deduced(name);
                if let Some(merged) = merge_at(Some(value), right.get(name), &child_ty) {
                    out.insert(name.clone(), merged);
                }
            }
            for (name, value) in right.iter().filter(|(k, _)| !left.contains_key(*k)) {
                out.insert(name.clone(), value.clone());
            }
            Some(Value::Object(out))
        }
        Shape::List { kind, items } => Some(Value::Array(merge_list(&kind, &items, l, r))),
        Shape::Scalar | Shape::Deduced => Some(r.clone()),
    }
}

/// Upstream's order of a merged associative list: items of `lhs` keep their places,
/// items of both follow `rhs`'s order, new items of `rhs` come where `rhs` puts them.
fn merge_list(kind: &ListKind, items: &Type<'_>, lhs: &Value, rhs: &Value) -> Vec<Value> {
    let (left_order, left) = indexed(kind, items, Some(lhs));
    let (right_order, right) = indexed(kind, items, Some(rhs));
    let left_items: Vec<&Value> = lhs
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut shared = right_order
        .iter()
        .filter(|e| left.contains_key(*e))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter();
    let mut next_shared = shared.next();
    let mut merged_right = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(left_order.len().max(right_order.len()));
    let merge_item = |l: Option<&Value>, r: Option<&Value>| merge_at(l, r, items);
    let (mut li, mut ri) = (0, 0);
    while li < left_order.len() || ri < right_order.len() {
        if li < left_order.len() && ri < right_order.len() {
            let element = &left_order[li];
            if *element == right_order[ri] {
                merged_right.insert(element.clone());
                out.extend(merge_item(
                    left.get(element).copied(),
                    right.get(element).copied(),
                ));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if right.contains_key(element) && next_shared.as_ref().is_some_and(|n| n != element) {
                li += 1;
                continue;
            }
        }
        if li < left_order.len() {
            let element = &left_order[li];
            if !right.contains_key(element) {
                out.extend(merge_item(left_items.get(li).copied(), None));
                li += 1;
                continue;
            }
            if merged_right.contains(element) {
                li += 1;
                continue;
            }
        }
        if ri < right_order.len() {
            let element = &right_order[ri];
            merged_right.insert(element.clone());
            out.extend(merge_item(
                left.get(element).copied(),
                right.get(element).copied(),
            ));
            ri += 1;
            if next_shared.as_ref() == Some(element) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// `value` without the fields, items and entries that are members of `set` (upstream
/// `RemoveItems`). A list left without items becomes null.
pub fn remove_items(value: &Value, set: &Set, ty: &Type<'_>) -> Value {
    if set.is_empty() {
        return value.clone();
    }
    match (effective_shape(ty, Some(value)), value) {
        (Shape::Map { atomic: false }, Value::Object(fields)) if !fields.is_empty() => {
            let mut out = Map::new();
            for (name, child) in fields {
                let element = PathElement::field(name);
                if set.has_member(&element) {
                    continue;
                }
                let child = match set.with_prefix(&element) {
                    Some(sub) => remove_items(child, sub, &ty.field_or_deduced(name)),
                    None => child.clone(),
                };
                out.insert(name.clone(), child);
            }
            Value::Object(out)
        }
        (Shape::List { kind, items }, Value::Array(list))
            if kind != ListKind::Atomic && !list.is_empty() =>
        {
            let mut out = Vec::with_capacity(list.len());
            for (index, item) in list.iter().enumerate() {
                let element = lenient_element(&kind, &items, index, item);
                if set.has_member(&element) {
                    continue;
                }
                out.push(match set.with_prefix(&element) {
                    Some(sub) => remove_items(item, sub, &items),
                    None => item.clone(),
                });
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
        _ => value.clone(),
    }
}

/// `set` with every struct field that has members under it made a member too (upstream
/// `EnsureNamedFieldsAreMembers`); map entries and list items are left as they are.
pub fn ensure_named_fields_are_members(set: &Set, ty: &Type<'_>) -> Set {
    let mut out = Set::new();
    for member in set.members() {
        out.insert_member(member.clone());
    }
    let is_struct = matches!(ty.shape(), Shape::Map { .. });
    for (element, child) in set.children() {
        if let PathElement::Field(name) = element
            && is_struct
            && ty.declares(name)
        {
            out.insert_member(element.clone());
        }
        let child_ty = element_type(ty, element);
        out.set_child(
            element.clone(),
            ensure_named_fields_are_members(child, &child_ty),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::types::TypeSource;
    use serde_json::json;

    fn crd_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "selector": {
                            "type": "object",
                            "x-kubernetes-map-type": "atomic",
                            "properties": {"app": {"type": "string"}},
                        },
                        "args": {"type": "array", "items": {"type": "string"}},
                        "tags": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {"type": "string"},
                        },
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["port", "protocol"],
                            "items": {
                                "type": "object",
                                "properties": {
                                    "port": {"type": "integer"},
                                    "protocol": {"type": "string", "default": "TCP"},
                                    "name": {"type": "string"},
                                },
                            },
                        },
                        "labels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                },
            },
        })
    }

    #[test]
    fn field_sets_follow_the_schema() {
        let schema = crd_schema();
        let ty = TypeSource::Structural(&schema).root();
        let object = json!({
            "spec": {
                "replicas": 2,
                "selector": {"app": "x"},
                "args": ["a", "b"],
                "tags": ["t"],
                "ports": [{"port": 80, "name": "http"}],
                "labels": {"a": "1"},
                "empty": {},
            },
        });
        let set = to_field_set(&object, &ty);
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:spec": {
                "f:args": {},
                "f:empty": {},
                "f:labels": {"f:a": {}},
                "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}},
                "f:replicas": {},
                "f:selector": {},
                "f:tags": {"v:\"t\"": {}},
            }})
        );
        let named = ensure_named_fields_are_members(&set, &ty);
        assert!(named.has(&Path::fields(&["spec"])));
        assert!(!named.has(&Path::fields(&["spec", "labels", "a", "b"])));
        assert!(named.has(&Path::fields(&["spec", "labels"])));
    }

    #[test]
    fn validation_reports_upstream_errors() {
        let schema = crd_schema();
        let ty = TypeSource::Structural(&schema).root();
        let missing = json!({"spec": {"ports": [{"name": "x"}]}});
        assert_eq!(
            validate(&missing, &ty).unwrap_err(),
            r#".spec.ports: element 0: associative list with keys has an element that omits key field "port" (and doesn't have default value)"#
        );
        let unknown = json!({"spec": {"bogus": 1}});
        assert_eq!(
            validate(&unknown, &ty).unwrap_err(),
            ".spec.bogus: field not declared in schema"
        );
        let twice = json!({"spec": {"ports": [{"port": 1}, {"port": 1}]}});
        assert_eq!(
            validate(&twice, &ty).unwrap_err(),
            r#".spec.ports: duplicate entries for key [port=1,protocol="TCP"]"#
        );
    }

    #[test]
    fn compare_merge_and_remove() {
        let schema = crd_schema();
        let ty = TypeSource::Structural(&schema).root();
        let old = json!({"spec": {"replicas": 1, "ports": [{"port": 1}, {"port": 2}], "labels": {"a": "1"}}});
        let new = json!({"spec": {"replicas": 2, "ports": [{"port": 2}], "labels": {"a": "1", "b": "2"}}});
        let c = compare(&old, &new, &ty);
        assert_eq!(
            c.modified,
            Set::from_paths([Path::fields(&["spec", "replicas"])])
        );
        assert_eq!(
            c.added,
            Set::from_paths([Path::fields(&["spec", "labels", "b"])])
        );
        let port1 = PathElement::key(vec![
            ("port".into(), json!(1)),
            ("protocol".into(), json!("TCP")),
        ]);
        assert!(
            c.removed
                .has(&Path::fields(&["spec", "ports"]).child(port1.clone()))
        );
        assert!(
            c.removed.has(
                &Path::fields(&["spec", "ports"])
                    .child(port1.clone())
                    .child(PathElement::field("port"))
            )
        );

        let merged = merge(
            &json!({"spec": {"ports": [{"port": 1}, {"port": 2, "name": "b"}], "args": ["x"]}}),
            &json!({"spec": {"ports": [{"port": 3}, {"port": 2, "name": "c"}], "args": ["y"]}}),
            &ty,
        );
        assert_eq!(
            merged,
            json!({"spec": {"ports": [{"port": 1}, {"port": 3}, {"port": 2, "name": "c"}], "args": ["y"]}})
        );

        let removed = remove_items(
            &merged,
            &Set::from_paths([
                Path::fields(&["spec", "args"]),
                Path::fields(&["spec", "ports"]).child(port1),
            ]),
            &ty,
        );
        assert_eq!(
            removed,
            json!({"spec": {"ports": [{"port": 3}, {"port": 2, "name": "c"}]}})
        );
    }
}
