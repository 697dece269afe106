//! The OpenAPI schema the API server publishes for a custom resource version (upstream
//! `pkg/controller/openapi/builder` and `openapi/v2/conversion.go`), which `kubectl
//! explain` and client-side validation read.

use serde_json::{Map, Value, json};

use super::structural::{self, Generic, NestedValueValidation, Structural, ValueValidation};

/// Which OpenAPI document the schema is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenApiVersion {
    /// `/openapi/v2` (swagger): `$ref`s under `#/definitions/`, no `nullable`, no junctors.
    V2,
    /// `/openapi/v3`: `$ref`s under `#/components/schemas/`.
    V3,
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation \
     of an object. Servers should convert recognized schemas to the latest internal value, and \
     may reject unrecognized values. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object \
     represents. Servers may infer this from the endpoint the client submits requests to. Cannot \
     be updated. In CamelCase. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DOC: &str = "apiVersion defines the versioned schema of this \
     representation of an object. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DOC: &str = "kind is a string value representing the type of this object. \
     In CamelCase. More info: \
     https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

fn reference(name: &str, version: OpenApiVersion, description: &str) -> Value {
    match version {
        OpenApiVersion::V2 => {
            json!({"$ref": format!("#/definitions/{name}"), "description": description})
        }
        OpenApiVersion::V3 => json!({
            "allOf": [{"$ref": format!("#/components/schemas/{name}")}],
            "description": description,
        }),
    }
}

/// The definition of kind `group/version.kind` for a version's structural schema
/// (`None` when the version has none): the schema as published (int-or-string unfolded;
/// for v2 also without `nullable`, `allOf`/`anyOf`/`oneOf`/`not` and the properties of
/// preserve-unknown-fields levels), with `apiVersion`, `kind` and `metadata` (a reference
/// to ObjectMeta) added at the root and to embedded resources, and
/// `x-kubernetes-group-version-kind`. For v2 a root that preserves unknown fields is
/// published as a bare `{"type": "object"}` so kubectl does not reject unknown fields.
pub fn openapi_schema(
    schema: Option<&Structural>,
    group: &str,
    version: &str,
    kind: &str,
    openapi: OpenApiVersion,
) -> Value {
    let gvk = json!([{"group": group, "version": version, "kind": kind}]);
    let mut out = match schema {
        Some(s) if !(openapi == OpenApiVersion::V2 && s.extensions.preserve_unknown_fields) => {
            let mut s = s.clone();
            structural::unfold(&mut s);
            if openapi == OpenApiVersion::V2 {
                to_v2(&mut s);
            }
            let mut out = to_openapi(&s);
            if let Value::Object(map) = &mut out {
                let props = map
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(props) = props {
                    props.insert(
                        "metadata".to_owned(),
                        reference(OBJECT_META, openapi, METADATA_DOC),
                    );
                    props.insert(
                        "apiVersion".to_owned(),
                        json!({"type": "string", "description": API_VERSION_DOC}),
                    );
                    props.insert(
                        "kind".to_owned(),
                        json!({"type": "string", "description": KIND_DOC}),
                    );
                }
            }
            add_embedded(&mut out, openapi);
            out
        }
        _ => json!({"type": "object"}),
    };
    if let Value::Object(map) = &mut out {
        map.insert("x-kubernetes-group-version-kind".to_owned(), gvk);
    }
    out
}

/// The list kind's definition (`<Kind>List`), as upstream's `buildListSchema`.
pub fn openapi_list_schema(
    group: &str,
    version: &str,
    kind: &str,
    list_kind: &str,
    plural: &str,
    openapi: OpenApiVersion,
) -> Value {
    let item_name = format!("{}.{version}.{kind}", rest_friendly_group(group));
    let item_ref = match openapi {
        OpenApiVersion::V2 => format!("#/definitions/{item_name}"),
        OpenApiVersion::V3 => format!("#/components/schemas/{item_name}"),
    };
    json!({
        "type": "object",
        "description": format!("{list_kind} is a list of {kind}"),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "kind": {"type": "string", "description": KIND_DOC},
            "items": {
                "type": "array",
                "description": format!(
                    "List of {plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
                ),
                "items": {"$ref": item_ref},
            },
            "metadata": reference(LIST_META, openapi, LIST_METADATA_DOC),
        },
        "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": list_kind}],
    })
}

/// The definition name of a group, reversed as kube-openapi names CRD definitions
/// (`stable.example.com` becomes `com.example.stable`).
pub fn rest_friendly_group(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

fn add_embedded(s: &mut Value, openapi: OpenApiVersion) {
    let Value::Object(map) = s else {
        return;
    };
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for prop in props.values_mut() {
            add_embedded(prop, openapi);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            add_embedded(child, openapi);
        }
    }
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserve && openapi == OpenApiVersion::V2 {
        return;
    }
    if map.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        let props = map
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert(
                "apiVersion".to_owned(),
                json!({"type": "string", "description": EMBEDDED_API_VERSION_DOC}),
            );
            props.insert(
                "kind".to_owned(),
                json!({"type": "string", "description": EMBEDDED_KIND_DOC}),
            );
            props.insert(
                "metadata".to_owned(),
                reference(OBJECT_META, openapi, METADATA_DOC),
            );
        }
        let required = map
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(required) = required {
            for field in ["kind", "apiVersion"] {
                if !required.iter().any(|r| r == field) {
                    required.push(Value::from(field));
                }
            }
        }
    }
}

/// Upstream `ToStructuralOpenAPIV2`: drops junctors and `nullable` (a nullable level loses
/// its type, items and properties; its name leaves the parent's `required`), and the items
/// and properties of levels that preserve unknown fields; arrays without items lose their
/// type.
fn to_v2(s: &mut Structural) {
    if let Some(v) = s.validation.as_deref_mut() {
        v.all_of.clear();
        v.one_of.clear();
        v.any_of.clear();
        v.not = None;
    }
    if s.generic.nullable {
        s.generic.type_.clear();
        s.generic.nullable = false;
        s.items = None;
        s.properties.clear();
    }
    if s.extensions.preserve_unknown_fields {
        s.items = None;
        s.properties.clear();
    }
    if s.items.is_none() && s.generic.type_ == "array" {
        s.generic.type_.clear();
    }
    let nullable_fields: Vec<String> = s
        .properties
        .iter()
        .filter(|(_, p)| p.generic.nullable)
        .map(|(k, _)| k.clone())
        .collect();
    let nullable_additional = s
        .additional_properties_schema()
        .is_some_and(|a| a.generic.nullable);
    if let Some(v) = s.validation.as_deref_mut() {
        v.required.retain(|r| !nullable_fields.contains(r));
        if nullable_additional {
            v.required.clear();
        }
    }
    if let Some(items) = s.items.as_deref_mut() {
        to_v2(items);
    }
    for prop in s.properties.values_mut() {
        to_v2(prop);
    }
    if let Some(a) = s.generic.additional_properties.as_mut()
        && let Some(schema) = a.structural.as_deref_mut()
    {
        to_v2(schema);
    }
}

fn put_generic(out: &mut Map<String, Value>, g: &Generic) {
    if !g.type_.is_empty() {
        out.insert("type".to_owned(), Value::from(g.type_.as_str()));
    }
    if !g.description.is_empty() {
        out.insert(
            "description".to_owned(),
            Value::from(g.description.as_str()),
        );
    }
    if !g.title.is_empty() {
        out.insert("title".to_owned(), Value::from(g.title.as_str()));
    }
    if let Some(default) = &g.default {
        out.insert("default".to_owned(), default.clone());
    }
    if g.nullable {
        out.insert("nullable".to_owned(), Value::Bool(true));
    }
}

fn put_validation(out: &mut Map<String, Value>, v: &ValueValidation) {
    let mut put = |key: &str, value: Value| {
        out.insert(key.to_owned(), value);
    };
    if !v.format.is_empty() {
        put("format", Value::from(v.format.as_str()));
    }
    if let Some(m) = v.maximum {
        put("maximum", json!(m));
    }
    if v.exclusive_maximum {
        put("exclusiveMaximum", Value::Bool(true));
    }
    if let Some(m) = v.minimum {
        put("minimum", json!(m));
    }
    if v.exclusive_minimum {
        put("exclusiveMinimum", Value::Bool(true));
    }
    for (key, value) in [
        ("maxLength", v.max_length),
        ("minLength", v.min_length),
        ("maxItems", v.max_items),
        ("minItems", v.min_items),
        ("maxProperties", v.max_properties),
        ("minProperties", v.min_properties),
    ] {
        if let Some(value) = value {
            put(key, Value::from(value));
        }
    }
    if !v.pattern.is_empty() {
        put("pattern", Value::from(v.pattern.as_str()));
    }
    if v.unique_items {
        put("uniqueItems", Value::Bool(true));
    }
    if let Some(m) = v.multiple_of {
        put("multipleOf", json!(m));
    }
    if !v.enum_.is_empty() {
        put("enum", Value::Array(v.enum_.clone()));
    }
    if !v.required.is_empty() {
        put("required", json!(v.required));
    }
    for (key, list) in [
        ("allOf", &v.all_of),
        ("oneOf", &v.one_of),
        ("anyOf", &v.any_of),
    ] {
        if !list.is_empty() {
            put(
                key,
                Value::Array(list.iter().map(nested_to_openapi).collect()),
            );
        }
    }
    if let Some(not) = &v.not {
        put("not", nested_to_openapi(not));
    }
}

fn nested_to_openapi(n: &NestedValueValidation) -> Value {
    let mut out = Map::new();
    put_generic(&mut out, &n.forbidden_generics);
    put_validation(&mut out, &n.validation);
    if let Some(items) = &n.items {
        out.insert("items".to_owned(), nested_to_openapi(items));
    }
    if !n.properties.is_empty() {
        let props = n
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), nested_to_openapi(v)))
            .collect();
        out.insert("properties".to_owned(), Value::Object(props));
    }
    Value::Object(out)
}

/// Upstream `Structural.ToKubeOpenAPI`: the schema as OpenAPI JSON, with the
/// `x-kubernetes-*` extensions.
pub fn to_openapi(s: &Structural) -> Value {
    let mut out = Map::new();
    put_generic(&mut out, &s.generic);
    if let Some(additional) = &s.generic.additional_properties {
        let value = match &additional.structural {
            Some(schema) => to_openapi(schema),
            None => Value::Bool(additional.allows),
        };
        out.insert("additionalProperties".to_owned(), value);
    }
    put_validation(&mut out, s.value_validation());
    if let Some(items) = &s.items {
        out.insert("items".to_owned(), to_openapi(items));
    }
    if !s.properties.is_empty() {
        let props = s
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), to_openapi(v)))
            .collect();
        out.insert("properties".to_owned(), Value::Object(props));
    }
    let x = &s.extensions;
    if x.preserve_unknown_fields {
        out.insert(
            "x-kubernetes-preserve-unknown-fields".to_owned(),
            Value::Bool(true),
        );
    }
    if x.embedded_resource {
        out.insert(
            "x-kubernetes-embedded-resource".to_owned(),
            Value::Bool(true),
        );
    }
    if x.int_or_string {
        out.insert("x-kubernetes-int-or-string".to_owned(), Value::Bool(true));
    }
    if !x.list_map_keys.is_empty() {
        out.insert(
            "x-kubernetes-list-map-keys".to_owned(),
            json!(x.list_map_keys),
        );
    }
    if let Some(t) = &x.list_type {
        out.insert("x-kubernetes-list-type".to_owned(), Value::from(t.as_str()));
    }
    if let Some(t) = &x.map_type {
        out.insert("x-kubernetes-map-type".to_owned(), Value::from(t.as_str()));
    }
    if !s.x_validations.is_empty() {
        out.insert(
            "x-kubernetes-validations".to_owned(),
            serde_json::to_value(&s.x_validations).unwrap_or(Value::Null),
        );
    }
    Value::Object(out)
}
