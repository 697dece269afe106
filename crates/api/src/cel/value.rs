//! Custom resource data as CEL values, typed by the schema as upstream's
//! `UnstructuredToVal` types it (`apiextensions-apiserver/pkg/apiserver/schema/cel/model`):
//! objects with properties are maps keyed by their escaped property names (absent fields
//! are absent keys: `has(self.x)`), `additionalProperties` objects are maps keyed by the
//! data's own keys, arrays are lists, `integer` is `int`, `number` is `double` (also for a
//! whole number in the JSON), `x-kubernetes-int-or-string` is either, the string formats
//! `byte`, `duration`, `date` and `date-time` are `bytes`, `duration` and `timestamp`.
//! At a resource root (and an embedded resource) `apiVersion`, `kind`, `metadata.name` and
//! `metadata.generateName` are visible and nothing else of the metadata.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine;
use cel::Value;
use cel::objects::{Key, Map};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value as Json;

/// The CEL view of a schema node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shape {
    /// An object with properties: the CEL field name (escaped) and shape of each visible
    /// property, by its JSON name.
    Object(BTreeMap<String, (String, Shape)>),
    /// An object with `additionalProperties`: string keys and values of one shape.
    Map(Box<Shape>),
    List(Box<Shape>),
    String,
    Bytes,
    Duration,
    Timestamp,
    Integer,
    Number,
    Boolean,
    /// `x-kubernetes-int-or-string`, or a node without a type (preserved unknown fields):
    /// the JSON converted as it is.
    Dynamic,
}

/// CEL's reserved words: a property name is escaped from them as `__name__`, and they
/// are not identifiers.
pub const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as CEL rules spell it (upstream `cel.Escape`): reserved words become
/// `__word__`, and `__`, `.`, `-`, `/` become `__underscores__`, `__dot__`, `__dash__`,
/// `__slash__`. `None` for a name CEL cannot spell (the property is then invisible).
pub(crate) fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
    if !(first.is_ascii_alphabetic() || "_.-/".contains(first)) || !chars.all(allowed) {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = after;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// The item schema of an array node.
pub(crate) fn items_of(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => list.first(),
        None => None,
    }
}

/// The `additionalProperties` schema of an object node (`true` alone has none).
pub(crate) fn additional_of(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s),
        _ => None,
    }
}

impl Shape {
    /// The shape of `schema`; `resource_root` for the root of a resource (the custom
    /// resource itself, or an `x-kubernetes-embedded-resource` object).
    pub(crate) fn of(schema: &JSONSchemaProps, resource_root: bool) -> Shape {
        if schema.x_kubernetes_int_or_string == Some(true) {
            return Shape::Dynamic;
        }
        match schema.type_.as_deref() {
            Some("object") => {
                if let Some(additional) = additional_of(schema) {
                    let embedded = additional.x_kubernetes_embedded_resource == Some(true);
                    return Shape::Map(Box::new(Shape::of(additional, embedded)));
                }
                let mut fields = BTreeMap::new();
                for (name, prop) in schema.properties.iter().flatten() {
                    let Some(escaped) = escape(name) else {
                        continue;
                    };
                    let embedded = prop.x_kubernetes_embedded_resource == Some(true);
                    fields.insert(name.clone(), (escaped, Shape::of(prop, embedded)));
                }
                if resource_root {
                    for name in ["apiVersion", "kind"] {
                        fields.insert(name.to_owned(), (name.to_owned(), Shape::String));
                    }
                    let meta = ["name", "generateName"]
                        .into_iter()
                        .map(|n| (n.to_owned(), (n.to_owned(), Shape::String)))
                        .collect();
                    fields.insert(
                        "metadata".to_owned(),
                        ("metadata".to_owned(), Shape::Object(meta)),
                    );
                }
                if fields.is_empty() && schema.x_kubernetes_preserve_unknown_fields == Some(true) {
                    return Shape::Dynamic;
                }
                Shape::Object(fields)
            }
            Some("array") => {
                let item = items_of(schema).map_or(Shape::Dynamic, |items| {
                    Shape::of(items, items.x_kubernetes_embedded_resource == Some(true))
                });
                Shape::List(Box::new(item))
            }
            Some("string") => match schema.format.as_deref() {
                Some("byte") => Shape::Bytes,
                Some("duration") => Shape::Duration,
                Some("date") | Some("date-time") => Shape::Timestamp,
                _ => Shape::String,
            },
            Some("integer") => Shape::Integer,
            Some("number") => Shape::Number,
            Some("boolean") => Shape::Boolean,
            _ => Shape::Dynamic,
        }
    }
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

/// `json` as a CEL value of `shape`. Data not of the schema's type (which schema validation
/// rejects before the rules run) is converted as it is.
pub(crate) fn to_cel(json: &Json, shape: &Shape) -> Value {
    match (shape, json) {
        (_, Json::Null) => Value::Null,
        (Shape::Object(fields), Json::Object(data)) => {
            let mut map = HashMap::with_capacity(data.len());
            for (name, (escaped, field_shape)) in fields {
                if let Some(v) = data.get(name) {
                    map.insert(
                        Key::String(Arc::new(escaped.clone())),
                        to_cel(v, field_shape),
                    );
                }
            }
            Value::Map(Map { map: Arc::new(map) })
        }
        (Shape::Map(value_shape), Json::Object(data)) => {
            let map = data
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v, value_shape)))
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
        (Shape::List(item), Json::Array(items)) => {
            Value::List(Arc::new(items.iter().map(|v| to_cel(v, item)).collect()))
        }
        (Shape::Integer, Json::Number(n)) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Value::Int(f as i64),
                Some(f) => Value::Float(f),
                None => Value::Null,
            },
        },
        (Shape::Number, Json::Number(n)) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        (Shape::Bytes, Json::String(s)) => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(bytes) => Value::Bytes(Arc::new(bytes)),
                Err(_) => string(s),
            }
        }
        (Shape::Duration, Json::String(s)) => match parse_go_duration(s) {
            Some(d) => Value::Duration(d),
            None => string(s),
        },
        (Shape::Timestamp, Json::String(s)) => match parse_timestamp(s) {
            Some(t) => Value::Timestamp(t),
            None => string(s),
        },
        (_, other) => dynamic(other),
    }
}

/// JSON without a schema: objects as maps, whole numbers as `int`.
fn dynamic(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => match n.as_u64() {
                Some(u) => Value::UInt(u),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
        },
        Json::String(s) => string(s),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(dynamic).collect())),
        Json::Object(data) => {
            let map = data
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), dynamic(v)))
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// `date-time` (RFC 3339) or `date` (`2006-01-02`, midnight UTC).
fn parse_timestamp(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t);
    }
    let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc = chrono::FixedOffset::east_opt(0)?;
    date.and_hms_opt(0, 0, 0)?.and_local_timezone(utc).single()
}

/// A Go duration (`1h2m3.5s`, `300ms`, `-1.5h`).
fn parse_go_duration(s: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += number * scale;
    }
    if nanos > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(nanos as i64);
    Some(if negative { -d } else { d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_durations() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a@b"), None);
        assert_eq!(escape("1a"), None);
        assert_eq!(
            parse_go_duration("1h2m3s4ms"),
            Some(chrono::Duration::milliseconds(3_723_004))
        );
        assert_eq!(parse_go_duration("1d"), None);
    }
}
