//! Field paths and sets of them (upstream `sigs.k8s.io/structured-merge-diff/fieldpath`):
//! the unit of field ownership, and their `FieldsV1` JSON form as stored in
//! `metadata.managedFields[].fieldsV1`.
//!
//! A [`Set`] is a trie: `members` are the paths that end at this node, `children` the
//! subtrees under one more path element. In `FieldsV1`, each key is a path element
//! (`f:<field>`, `k:<key fields as JSON>`, `v:<value as JSON>`, `i:<index>`) whose value
//! is the child set, an empty object for a member without children, and `".": {}` marks a
//! node that is a member and has children too.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// A JSON value with upstream's total order (`value.Compare`): numbers (compared
/// numerically) < strings < booleans < lists < maps < null.
#[derive(Debug, Clone, PartialEq)]
pub struct OrdValue(pub Value);

impl Eq for OrdValue {}

impl PartialOrd for OrdValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdValue {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

fn rank(value: &Value) -> u8 {
    match value {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((lk, lv), (rk, rv)) in x.iter().zip(y) {
                let c = lk.cmp(rk).then_with(|| compare_values(lv, rv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Upstream's `value.ToString` of a scalar in a path: strings quoted, others as JSON.
fn value_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", value_string(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// One step of a path. The variant order is upstream's: field names before keys before
/// values before indexes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A field of a struct or a key of a map: `f:<name>`.
    Field(String),
    /// An item of an associative list by its key fields, sorted by name:
    /// `k:{"name":"web"}`.
    Key(Vec<(String, OrdValue)>),
    /// An item of a set: `v:<value>`.
    Value(OrdValue),
    /// An item of an atomic list by position: `i:<index>`.
    Index(i64),
}

impl PathElement {
    /// A field element.
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.to_owned())
    }

    /// A key element from `(name, value)` pairs (sorted here).
    pub fn key(mut fields: Vec<(String, Value)>) -> Self {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields.into_iter().map(|(k, v)| (k, OrdValue(v))).collect())
    }

    /// The `FieldsV1` key of this element.
    pub fn to_fields_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let map: Map<String, Value> = fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.0.clone()))
                    .collect();
                format!("k:{}", Value::Object(map))
            }
            PathElement::Value(v) => format!("v:{}", v.0),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key. Errors: a message naming the key.
    pub fn from_fields_key(key: &str) -> Result<Self, String> {
        let bad = || format!("unknown PathElementType in {key:?}");
        let (prefix, rest) = key.split_once(':').ok_or_else(bad)?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => {
                let parsed: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                let Value::Object(map) = parsed else {
                    return Err(format!("key {rest:?} is not a JSON object"));
                };
                Ok(PathElement::key(map.into_iter().collect()))
            }
            "v" => {
                let parsed: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                Ok(PathElement::Value(OrdValue(parsed)))
            }
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|e| format!("{key:?}: {e}")),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_string(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object's root: `.spec.template.spec.containers[name="web"].image`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of field names.
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }

    /// This path with one more element.
    pub fn child(&self, element: PathElement) -> Self {
        let mut elements = self.0.clone();
        elements.push(element);
        Path(elements)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|e| write!(f, "{e}"))
    }
}

/// A set of paths (upstream `fieldpath.Set`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Set::default()
    }

    /// A set of these paths.
    pub fn from_paths<I: IntoIterator<Item = Path>>(paths: I) -> Self {
        let mut set = Set::new();
        paths.into_iter().for_each(|p| set.insert(&p));
        set
    }

    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` (the empty path is ignored).
    pub fn insert(&mut self, path: &Path) {
        let Some((last, parents)) = path.0.split_last() else {
            return;
        };
        let mut node = self;
        for element in parents {
            node = node.children.entry(element.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &Path) -> bool {
        let Some((last, parents)) = path.0.split_last() else {
            return false;
        };
        let mut node = self;
        for element in parents {
            match node.children.get(element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// Whether the one-element path `element` is a member.
    pub fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The members directly at this node.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The subtrees of this node.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// The paths under `element`, without it (upstream `WithPrefix`).
    pub fn with_prefix(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element).filter(|s| !s.is_empty())
    }

    /// Paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let common = child.intersection(other.children.get(element)?);
                (!common.is_empty()).then(|| (element.clone(), common))
            })
            .collect();
        Set { members, children }
    }

    /// Paths of this set that are not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let rest = match other.children.get(element) {
                    Some(theirs) => child.difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (element.clone(), rest))
            })
            .collect();
        Set { members, children }
    }

    /// Paths of this set that are neither in `other` nor under one of its members
    /// (upstream `RecursiveDifference`).
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(element, _)| !other.members.contains(*element))
            .filter_map(|(element, child)| {
                let rest = match other.children.get(element) {
                    Some(theirs) => child.recursive_difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (element.clone(), rest))
            })
            .collect();
        Set { members, children }
    }

    /// Every member path, this node's members first, then each subtree in order (upstream
    /// `Iterate`).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Path::default(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for member in &self.members {
            out.push(prefix.child(member.clone()));
        }
        for (element, child) in &self.children {
            prefix.0.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.0.pop();
        }
    }

    /// Adds `element` as a member at this node (for the type-aware helpers).
    pub(crate) fn insert_member(&mut self, element: PathElement) {
        self.members.insert(element);
    }

    /// Replaces the subtree under `element` (dropped when empty).
    pub(crate) fn set_child(&mut self, element: PathElement, child: Set) {
        if child.is_empty() {
            self.children.remove(&element);
        } else {
            self.children.insert(element, child);
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_map(false))
    }

    fn fields_v1_map(&self, include_self: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if include_self {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for member in &self.members {
            if self.children.get(member).is_none_or(Set::is_empty) {
                map.insert(member.to_fields_key(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            if child.is_empty() {
                continue;
            }
            let nested = child.fields_v1_map(self.members.contains(element));
            map.insert(element.to_fields_key(), Value::Object(nested));
        }
        map
    }

    /// Parses `FieldsV1` JSON. Errors: a message for a value that is not an object or a
    /// key that is no path element.
    pub fn from_fields_v1(value: &Value) -> Result<Set, String> {
        let Value::Object(map) = value else {
            return Err(format!("expected an object, got {value}"));
        };
        let mut set = Set::new();
        for (key, child) in map {
            if key == "." {
                continue;
            }
            let element = PathElement::from_fields_key(key)?;
            let Value::Object(inner) = child else {
                return Err(format!("expected an object for {key:?}, got {child}"));
            };
            if inner.is_empty() || inner.contains_key(".") {
                set.members.insert(element.clone());
            }
            let nested = Set::from_fields_v1(child)?;
            if !nested.is_empty() {
                set.children.insert(element, nested);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elements: Vec<PathElement>) -> Path {
        Path(elements)
    }

    #[test]
    fn fields_v1_round_trips_with_self_markers() {
        let container = PathElement::key(vec![("name".into(), json!("web"))]);
        let containers = Path::fields(&["spec", "containers"]);
        let set = Set::from_paths([
            Path::fields(&["spec", "replicas"]),
            containers.child(container.clone()),
            containers
                .child(container.clone())
                .child(PathElement::field("image")),
            Path::fields(&["metadata", "finalizers"])
                .child(PathElement::Value(OrdValue(json!("a")))),
            Path::fields(&["spec", "args"]).child(PathElement::Index(0)),
        ]);
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}},
                "f:spec": {
                    "f:args": {"i:0": {}},
                    "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}},
                    "f:replicas": {},
                },
            })
        );
        assert_eq!(Set::from_fields_v1(&encoded).unwrap(), set);
        assert!(Set::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(Set::from_fields_v1(&json!({"f:a": 1})).is_err());
    }

    #[test]
    fn set_operations_follow_upstream() {
        let a = Path::fields(&["spec", "a"]);
        let b = Path::fields(&["spec", "b"]);
        let spec = Path::fields(&["spec"]);
        let left = Set::from_paths([a.clone(), b.clone()]);
        let right = Set::from_paths([b.clone(), spec.clone()]);
        assert_eq!(left.intersection(&right), Set::from_paths([b.clone()]));
        assert_eq!(left.difference(&right), Set::from_paths([a.clone()]));
        assert_eq!(
            left.union(&right).paths(),
            vec![spec.clone(), a.clone(), b.clone()]
        );
        assert!(left.recursive_difference(&right).is_empty());
        assert!(left.has(&a) && !left.has(&spec));
        assert!(left.difference(&left).is_empty());
    }

    #[test]
    fn paths_print_as_upstream() {
        let path = p(vec![
            PathElement::field("spec"),
            PathElement::field("ports"),
            PathElement::key(vec![
                ("protocol".into(), json!("TCP")),
                ("containerPort".into(), json!(80)),
            ]),
            PathElement::field("name"),
        ]);
        assert_eq!(
            path.to_string(),
            r#".spec.ports[containerPort=80,protocol="TCP"].name"#
        );
        assert_eq!(
            PathElement::Value(OrdValue(json!("x"))).to_string(),
            r#"[="x"]"#
        );
        assert_eq!(PathElement::Index(2).to_string(), "[2]");
        assert_eq!(
            path.0[2].to_fields_key(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
    }
}
