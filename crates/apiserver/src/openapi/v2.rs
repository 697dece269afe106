//! The OpenAPI v2 (Swagger 2.0) document of `/openapi/v2`: every endpoint and every
//! definition, in upstream's shape (path-level `name`/`namespace`/`pretty` parameters,
//! `body` parameters, `x-kubernetes-action` and `x-kubernetes-group-version-kind` on
//! operations).

use serde_json::{Map, Value, json};

use super::endpoints::{Endpoint, Method, Operation, PATCH_TYPES, PRETTY, Param, Payload};
use super::schemas::{Catalog, V2_REF_PREFIX};
use crate::discovery::GIT_VERSION;

/// The media types replies come in.
const PRODUCES: [&str; 2] = ["application/json", "application/yaml"];
/// A list also streams watch events.
const PRODUCES_LIST: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

/// The bearer token scheme every operation accepts (client certificates are TLS-level).
pub(crate) fn security_scheme() -> Value {
    json!({
        "BearerToken": {
            "type": "apiKey",
            "name": "authorization",
            "in": "header",
            "description": "Bearer Token authentication",
        }
    })
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{V2_REF_PREFIX}{name}")})
}

fn payload_schema(payload: &Payload) -> Value {
    match payload {
        Payload::Schema(name) => schema_ref(name),
        Payload::Text => json!({"type": "string"}),
    }
}

fn query(param: &Param) -> Value {
    json!({
        "name": param.name,
        "in": "query",
        "description": param.description,
        "type": param.type_,
        "uniqueItems": true,
    })
}

/// The reason phrase of a reply code.
pub(crate) fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        _ => "Unauthorized",
    }
}

fn operation(op: &Operation<'_>, tag: &str) -> Value {
    let mut parameters = Vec::new();
    if let Some(body) = &op.body {
        parameters.push(json!({
            "name": "body",
            "in": "body",
            "required": op.method != Method::Delete,
            "schema": schema_ref(body),
        }));
    }
    parameters.extend(op.params.iter().map(query));

    let mut responses = Map::new();
    for code in std::iter::once(200).chain(op.also.iter().copied()) {
        responses.insert(
            code.to_string(),
            json!({"description": reason(code), "schema": payload_schema(&op.reply)}),
        );
    }
    responses.insert("401".to_owned(), json!({"description": reason(401)}));

    let consumes: Vec<&str> = if op.is_patch() {
        PATCH_TYPES.to_vec()
    } else {
        vec!["*/*"]
    };
    let produces: Vec<&str> = match (&op.reply, op.action) {
        (Payload::Text, _) => vec!["*/*"],
        (_, "list") => PRODUCES_LIST.to_vec(),
        _ => PRODUCES.to_vec(),
    };
    let mut out = json!({
        "description": op.description,
        "operationId": op.id,
        "tags": [tag],
        "consumes": consumes,
        "produces": produces,
        "schemes": ["https"],
        "parameters": parameters,
        "responses": responses,
        "x-kubernetes-action": op.action,
    });
    if let (Some(gvk), Value::Object(map)) = (op.gvk, &mut out) {
        map.insert("x-kubernetes-group-version-kind".to_owned(), gvk.to_json());
    }
    out
}

fn path_item(endpoint: &Endpoint) -> Value {
    let mut item = Map::new();
    let mut parameters: Vec<Value> = endpoint
        .path_params
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "in": "path",
                "description": p.description,
                "required": true,
                "type": "string",
                "uniqueItems": true,
            })
        })
        .collect();
    parameters.push(query(&PRETTY));
    item.insert("parameters".to_owned(), Value::Array(parameters));
    for op in &endpoint.operations {
        item.insert(op.method.key().to_owned(), operation(op, &endpoint.tag));
    }
    Value::Object(item)
}

/// The whole OpenAPI v2 document.
pub(crate) fn document(endpoints: &[Endpoint<'_>], catalog: &Catalog<'_>) -> Value {
    let paths: Map<String, Value> = endpoints
        .iter()
        .map(|e| (e.path.clone(), path_item(e)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "definitions": catalog.definitions,
        "securityDefinitions": security_scheme(),
        "security": [{"BearerToken": []}],
    })
}
