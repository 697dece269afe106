//! The OpenAPI v3 documents of `/openapi/v3/<api/v1 | apis/group/version>`: one per group
//! version, with its endpoints and the schemas they reach under `components.schemas`, in
//! upstream's v3 shape (a `$ref` with siblings becomes `allOf: [{$ref}]`, union types are
//! `oneOf`s). `kubectl explain` reads these, and kubectl's field-validation check and
//! 1.27+ client-side apply look up operations by `x-kubernetes-group-version-kind`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::endpoints::{Endpoint, Method, Operation, PATCH_TYPES, PRETTY, Param, Payload};
use super::schemas::{Catalog, INT_OR_STRING, QUANTITY, V2_REF_PREFIX, refs};
use super::v2::{reason, security_scheme};
use crate::discovery::GIT_VERSION;

/// Where refs point in OpenAPI v3.
const V3_REF_PREFIX: &str = "#/components/schemas/";

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{V3_REF_PREFIX}{name}")})
}

fn payload_schema(payload: &Payload) -> Value {
    match payload {
        Payload::Schema(name) => schema_ref(name),
        Payload::Text => json!({"type": "string"}),
    }
}

fn parameter(name: &str, in_: &str, description: &str, type_: &str, required: bool) -> Value {
    let mut param = json!({
        "name": name,
        "in": in_,
        "description": description,
        "schema": {"type": type_, "uniqueItems": true},
    });
    if required && let Value::Object(map) = &mut param {
        map.insert("required".to_owned(), Value::Bool(true));
    }
    param
}

fn query(param: &Param) -> Value {
    parameter(param.name, "query", param.description, param.type_, false)
}

fn content(media_types: &[&str], schema: &Value) -> Value {
    Value::Object(
        media_types
            .iter()
            .map(|m| (m.to_string(), json!({"schema": schema})))
            .collect(),
    )
}

fn operation(op: &Operation<'_>, tag: &str) -> Value {
    let mut out = Map::new();
    out.insert("description".to_owned(), json!(op.description));
    out.insert("operationId".to_owned(), json!(op.id));
    out.insert("tags".to_owned(), json!([tag]));
    if !op.params.is_empty() {
        out.insert(
            "parameters".to_owned(),
            Value::Array(op.params.iter().map(query).collect()),
        );
    }
    if let Some(body) = &op.body {
        let types: &[&str] = if op.is_patch() {
            &PATCH_TYPES
        } else {
            &["*/*"]
        };
        let mut request = json!({"content": content(types, &schema_ref(body))});
        if op.method != Method::Delete
            && let Value::Object(map) = &mut request
        {
            map.insert("required".to_owned(), Value::Bool(true));
        }
        out.insert("requestBody".to_owned(), request);
    }
    let reply_types: &[&str] = match (&op.reply, op.action) {
        (Payload::Text, _) => &["*/*"],
        (_, "list") => &[
            "application/json",
            "application/yaml",
            "application/json;stream=watch",
        ],
        _ => &["application/json", "application/yaml"],
    };
    let schema = payload_schema(&op.reply);
    let mut responses = Map::new();
    for code in std::iter::once(200).chain(op.also.iter().copied()) {
        responses.insert(
            code.to_string(),
            json!({"description": reason(code), "content": content(reply_types, &schema)}),
        );
    }
    responses.insert("401".to_owned(), json!({"description": reason(401)}));
    out.insert("responses".to_owned(), Value::Object(responses));
    out.insert("x-kubernetes-action".to_owned(), json!(op.action));
    if let Some(gvk) = op.gvk {
        out.insert("x-kubernetes-group-version-kind".to_owned(), gvk.to_json());
    }
    Value::Object(out)
}

fn path_item(endpoint: &Endpoint) -> Value {
    let mut item = Map::new();
    let mut parameters: Vec<Value> = endpoint
        .path_params
        .iter()
        .map(|p| parameter(p.name, "path", &p.description, "string", true))
        .collect();
    parameters.push(query(&PRETTY));
    item.insert("parameters".to_owned(), Value::Array(parameters));
    for op in &endpoint.operations {
        item.insert(op.method.key().to_owned(), operation(op, &endpoint.tag));
    }
    Value::Object(item)
}

/// A v2 definition in v3 form: refs into `components/schemas`, a `$ref` with siblings
/// (a description) wrapped in `allOf`, as upstream's v3 documents write them. Values
/// (`default`, `enum`, `example`) and extensions are data, not schemas: kept as they are.
fn to_v3(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let mut reference = None;
    for (key, value) in map {
        match key.as_str() {
            "$ref" => {
                let target = value.as_str().unwrap_or_default();
                let name = target.strip_prefix(V2_REF_PREFIX).unwrap_or(target);
                reference = Some(format!("{V3_REF_PREFIX}{name}"));
            }
            "default" | "enum" | "example" => {
                out.insert(key.clone(), value.clone());
            }
            _ if key.starts_with("x-") => {
                out.insert(key.clone(), value.clone());
            }
            "properties" => {
                let properties = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), to_v3(v))).collect())
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(properties));
            }
            _ => {
                let converted = match value {
                    Value::Array(items) => Value::Array(items.iter().map(to_v3).collect()),
                    other => to_v3(other),
                };
                out.insert(key.clone(), converted);
            }
        }
    }
    match reference {
        Some(reference) if out.is_empty() => json!({"$ref": reference}),
        Some(reference) => {
            out.insert("allOf".to_owned(), json!([{"$ref": reference}]));
            Value::Object(out)
        }
        None => Value::Object(out),
    }
}

/// Upstream's v3 forms of the union types: `IntOrString` is one of an integer or a
/// string (format `int-or-string`), `Quantity` one of a string or a number.
fn union_v3(name: &str, schema: &mut Value) {
    let one_of = match name {
        INT_OR_STRING => json!([{"type": "integer"}, {"type": "string"}]),
        QUANTITY => json!([{"type": "string"}, {"type": "number"}]),
        _ => return,
    };
    if let Value::Object(map) = schema {
        map.remove("type");
        if name == QUANTITY {
            map.remove("format");
        }
        map.insert("oneOf".to_owned(), one_of);
    }
}

/// The definitions `roots` reach, by name.
fn reachable<'a>(catalog: &'a Catalog, roots: Vec<&'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut queue = roots;
    while let Some(name) = queue.pop() {
        if !seen.insert(name) {
            continue;
        }
        if let Some(schema) = catalog.definitions.get(name) {
            refs(schema, V2_REF_PREFIX, &mut queue);
        }
    }
    seen
}

/// The v3 document of every group version, by its index key (`api/v1`, `apis/apps/v1`).
pub(crate) fn documents(
    endpoints: &[Endpoint<'_>],
    catalog: &Catalog<'_>,
) -> BTreeMap<String, Value> {
    let mut by_document: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for endpoint in endpoints {
        by_document
            .entry(endpoint.document.as_str())
            .or_default()
            .push(endpoint);
    }
    by_document
        .into_iter()
        .map(|(key, endpoints)| {
            let roots: Vec<&str> = endpoints
                .iter()
                .flat_map(|e| &e.operations)
                .flat_map(|op| {
                    let reply = match &op.reply {
                        Payload::Schema(name) => Some(name.as_str()),
                        Payload::Text => None,
                    };
                    op.body.as_deref().into_iter().chain(reply)
                })
                .collect();
            let schemas: Map<String, Value> = reachable(catalog, roots)
                .into_iter()
                .filter_map(|name| {
                    let mut schema = to_v3(catalog.definitions.get(name)?);
                    union_v3(name, &mut schema);
                    Some((name.to_owned(), schema))
                })
                .collect();
            let paths: Map<String, Value> = endpoints
                .iter()
                .map(|e| (e.path.clone(), path_item(e)))
                .collect();
            let document = json!({
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": GIT_VERSION},
                "paths": paths,
                "components": {
                    "schemas": schemas,
                    "securitySchemes": security_scheme(),
                },
                "security": [{"BearerToken": []}],
            });
            (key.to_owned(), document)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_with_siblings_become_all_of() {
        let v2 = json!({
            "type": "object",
            "properties": {
                "metadata": {"$ref": "#/definitions/a.ObjectMeta", "description": "meta"},
                "items": {"type": "array", "items": {"$ref": "#/definitions/a.Item"}},
                "labels": {"type": "object", "additionalProperties": {"$ref": "#/definitions/a.Q"}},
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "A", "version": "v1"}],
        });
        let v3 = to_v3(&v2);
        assert_eq!(
            v3["properties"]["metadata"],
            json!({"allOf": [{"$ref": "#/components/schemas/a.ObjectMeta"}], "description": "meta"})
        );
        assert_eq!(
            v3["properties"]["items"]["items"],
            json!({"$ref": "#/components/schemas/a.Item"})
        );
        assert_eq!(
            v3["properties"]["labels"]["additionalProperties"],
            json!({"$ref": "#/components/schemas/a.Q"})
        );
        assert_eq!(
            v3["x-kubernetes-group-version-kind"],
            v2["x-kubernetes-group-version-kind"]
        );
    }
}
