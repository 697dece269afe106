//! The OpenAPI v2 document in protobuf: gnostic's `openapi.v2.Document`
//! (github.com/google/gnostic-models `openapiv2/OpenAPIv2.proto`), which client-go's
//! `OpenAPISchema()` requests (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
//! and kubectl parses for client-side validation, `explain` (v2) and client-side `apply`.
//!
//! The messages are written here with prost's derive, with gnostic's field numbers, and
//! only the fields Skiff's document uses. gnostic's `oneof`s are written as optional
//! fields: on the wire a oneof member is an ordinary field, and only one is ever set.
//! Extension and default values are `Any { yaml }`, YAML text as gnostic stores them.
//!
//! [`encode`] converts the JSON form of the document (the one served as JSON), so the two
//! forms cannot differ.

use serde_json::{Map, Value};

/// `openapi.v2.Any`: a value as YAML text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "2")]
    pub yaml: String,
}

/// `openapi.v2.NamedAny`: one vendor extension (`x-kubernetes-...`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedAny {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Document {
    #[prost(string, tag = "1")]
    pub swagger: String,
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    #[prost(string, tag = "3")]
    pub host: String,
    #[prost(string, tag = "4")]
    pub base_path: String,
    #[prost(string, repeated, tag = "5")]
    pub schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "12")]
    pub security: Vec<SecurityRequirement>,
    #[prost(message, optional, tag = "13")]
    pub security_definitions: Option<SecurityDefinitions>,
    #[prost(message, repeated, tag = "16")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Info {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(message, repeated, tag = "7")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<PathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathItem {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(message, optional, tag = "2")]
    pub get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    pub options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    pub head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub tags: Vec<String>,
    #[prost(string, tag = "2")]
    pub summary: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "5")]
    pub operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    pub schemes: Vec<String>,
    #[prost(bool, tag = "11")]
    pub deprecated: bool,
    #[prost(message, repeated, tag = "13")]
    pub vendor_extension: Vec<NamedAny>,
}

/// gnostic's `oneof { Parameter parameter = 1; JsonReference json_reference = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    pub parameter: Option<Parameter>,
    #[prost(message, optional, tag = "2")]
    pub json_reference: Option<JsonReference>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct JsonReference {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub description: String,
}

/// gnostic's `oneof { BodyParameter body_parameter = 1; NonBodyParameter
/// non_body_parameter = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Parameter {
    #[prost(message, optional, tag = "1")]
    pub body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    pub non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BodyParameter {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub r#in: String,
    #[prost(bool, tag = "4")]
    pub required: bool,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
}

/// gnostic's oneof of header (1), form data (2), query (3) and path (4) parameters; the
/// query and path forms are used.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    pub query_parameter_sub_schema: Option<QueryParameterSubSchema>,
    #[prost(message, optional, tag = "4")]
    pub path_parameter_sub_schema: Option<PathParameterSubSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "6")]
    pub r#type: String,
    #[prost(string, tag = "7")]
    pub format: String,
    #[prost(bool, tag = "20")]
    pub unique_items: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "5")]
    pub r#type: String,
    #[prost(string, tag = "6")]
    pub format: String,
    #[prost(bool, tag = "19")]
    pub unique_items: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<ResponseValue>,
}

/// gnostic's `oneof { Response response = 1; JsonReference json_reference = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    #[prost(string, tag = "1")]
    pub description: String,
    #[prost(message, optional, tag = "2")]
    pub schema: Option<SchemaItem>,
}

/// gnostic's `oneof { Schema schema = 1; FileSchema file_schema = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    pub schema: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedSchema {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Schema>,
}

/// `openapi.v2.Schema`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Schema {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub format: String,
    #[prost(string, tag = "3")]
    pub title: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    #[prost(double, tag = "6")]
    pub multiple_of: f64,
    #[prost(double, tag = "7")]
    pub maximum: f64,
    #[prost(bool, tag = "8")]
    pub exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub minimum: f64,
    #[prost(bool, tag = "10")]
    pub exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub max_length: i64,
    #[prost(int64, tag = "12")]
    pub min_length: i64,
    #[prost(string, tag = "13")]
    pub pattern: String,
    #[prost(int64, tag = "14")]
    pub max_items: i64,
    #[prost(int64, tag = "15")]
    pub min_items: i64,
    #[prost(bool, tag = "16")]
    pub unique_items: bool,
    #[prost(int64, tag = "17")]
    pub max_properties: i64,
    #[prost(int64, tag = "18")]
    pub min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    pub additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    #[prost(string, tag = "26")]
    pub discriminator: String,
    #[prost(bool, tag = "27")]
    pub read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

/// gnostic's `oneof { Schema schema = 1; bool boolean = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AdditionalPropertiesItem {
    #[prost(message, optional, boxed, tag = "1")]
    pub schema: Option<Box<Schema>>,
    #[prost(bool, optional, tag = "2")]
    pub boolean: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityRequirement {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedStringArray>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedStringArray {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<StringArray>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringArray {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityDefinitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedSecurityDefinitionsItem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<SecurityDefinitionsItem>,
}

/// gnostic's oneof of security schemes; the API key scheme (2) is used.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityDefinitionsItem {
    #[prost(message, optional, tag = "2")]
    pub api_key_security: Option<ApiKeySecurity>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ApiKeySecurity {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub r#in: String,
    #[prost(string, tag = "4")]
    pub description: String,
}

/// The protobuf encoding of the OpenAPI v2 `document` (JSON form).
pub fn encode(document: &Value) -> Vec<u8> {
    prost::Message::encode_to_vec(&convert::document(document))
}

/// JSON (OpenAPI v2) to gnostic messages. Fields the messages do not carry are dropped.
mod convert {
    use super::*;

    fn string(map: &Map<String, Value>, key: &str) -> String {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    fn strings(map: &Map<String, Value>, key: &str) -> Vec<String> {
        match map.get(key) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }

    fn boolean(map: &Map<String, Value>, key: &str) -> bool {
        map.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    fn float(map: &Map<String, Value>, key: &str) -> f64 {
        map.get(key).and_then(Value::as_f64).unwrap_or(0.0)
    }

    fn int(map: &Map<String, Value>, key: &str) -> i64 {
        map.get(key).and_then(Value::as_i64).unwrap_or(0)
    }

    fn object(value: &Value) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        value
            .as_object()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// A value as YAML text (JSON when YAML cannot hold it).
    fn any(value: &Value) -> Any {
        Any {
            yaml: serde_yaml_ng::to_string(value).unwrap_or_else(|_| value.to_string()),
        }
    }

    fn extensions(map: &Map<String, Value>) -> Vec<NamedAny> {
        map.iter()
            .filter(|(key, _)| key.starts_with("x-"))
            .map(|(key, value)| NamedAny {
                name: key.clone(),
                value: Some(any(value)),
            })
            .collect()
    }

    pub fn schema(value: &Value) -> Schema {
        let map = object(value);
        Schema {
            r#ref: string(map, "$ref"),
            format: string(map, "format"),
            title: string(map, "title"),
            description: string(map, "description"),
            default: map.get("default").map(any),
            multiple_of: float(map, "multipleOf"),
            maximum: float(map, "maximum"),
            exclusive_maximum: boolean(map, "exclusiveMaximum"),
            minimum: float(map, "minimum"),
            exclusive_minimum: boolean(map, "exclusiveMinimum"),
            max_length: int(map, "maxLength"),
            min_length: int(map, "minLength"),
            pattern: string(map, "pattern"),
            max_items: int(map, "maxItems"),
            min_items: int(map, "minItems"),
            unique_items: boolean(map, "uniqueItems"),
            max_properties: int(map, "maxProperties"),
            min_properties: int(map, "minProperties"),
            required: strings(map, "required"),
            r#enum: match map.get("enum") {
                Some(Value::Array(values)) => values.iter().map(any).collect(),
                _ => Vec::new(),
            },
            additional_properties: map.get("additionalProperties").map(|v| match v {
                Value::Bool(b) => AdditionalPropertiesItem {
                    schema: None,
                    boolean: Some(*b),
                },
                other => AdditionalPropertiesItem {
                    schema: Some(Box::new(schema(other))),
                    boolean: None,
                },
            }),
            r#type: map.contains_key("type").then(|| TypeItem {
                value: strings(map, "type"),
            }),
            items: map.get("items").map(|items| ItemsItem {
                schema: match items {
                    Value::Array(list) => list.iter().map(schema).collect(),
                    single => vec![schema(single)],
                },
            }),
            all_of: match map.get("allOf") {
                Some(Value::Array(list)) => list.iter().map(schema).collect(),
                _ => Vec::new(),
            },
            properties: map.get("properties").map(|p| Properties {
                additional_properties: named_schemas(p),
            }),
            discriminator: string(map, "discriminator"),
            read_only: boolean(map, "readOnly"),
            example: map.get("example").map(any),
            vendor_extension: extensions(map),
        }
    }

    fn named_schemas(value: &Value) -> Vec<NamedSchema> {
        object(value)
            .iter()
            .map(|(name, value)| NamedSchema {
                name: name.clone(),
                value: Some(schema(value)),
            })
            .collect()
    }

    fn parameter(value: &Value) -> ParametersItem {
        let map = object(value);
        if map.contains_key("$ref") {
            return ParametersItem {
                parameter: None,
                json_reference: Some(JsonReference {
                    r#ref: string(map, "$ref"),
                    description: string(map, "description"),
                }),
            };
        }
        let (body, non_body) = match map.get("in").and_then(Value::as_str) {
            Some("body") => (
                Some(BodyParameter {
                    description: string(map, "description"),
                    name: string(map, "name"),
                    r#in: "body".to_owned(),
                    required: boolean(map, "required"),
                    schema: map.get("schema").map(schema),
                }),
                None,
            ),
            Some("path") => (
                None,
                Some(NonBodyParameter {
                    query_parameter_sub_schema: None,
                    path_parameter_sub_schema: Some(PathParameterSubSchema {
                        required: boolean(map, "required"),
                        r#in: "path".to_owned(),
                        description: string(map, "description"),
                        name: string(map, "name"),
                        r#type: string(map, "type"),
                        format: string(map, "format"),
                        unique_items: boolean(map, "uniqueItems"),
                    }),
                }),
            ),
            _ => (
                None,
                Some(NonBodyParameter {
                    query_parameter_sub_schema: Some(QueryParameterSubSchema {
                        required: boolean(map, "required"),
                        r#in: "query".to_owned(),
                        description: string(map, "description"),
                        name: string(map, "name"),
                        r#type: string(map, "type"),
                        format: string(map, "format"),
                        unique_items: boolean(map, "uniqueItems"),
                    }),
                    path_parameter_sub_schema: None,
                }),
            ),
        };
        ParametersItem {
            parameter: Some(Parameter {
                body_parameter: body,
                non_body_parameter: non_body,
            }),
            json_reference: None,
        }
    }

    fn parameters(map: &Map<String, Value>) -> Vec<ParametersItem> {
        match map.get("parameters") {
            Some(Value::Array(list)) => list.iter().map(parameter).collect(),
            _ => Vec::new(),
        }
    }

    fn operation(value: &Value) -> Operation {
        let map = object(value);
        Operation {
            tags: strings(map, "tags"),
            summary: string(map, "summary"),
            description: string(map, "description"),
            operation_id: string(map, "operationId"),
            produces: strings(map, "produces"),
            consumes: strings(map, "consumes"),
            parameters: parameters(map),
            responses: map.get("responses").map(|responses| Responses {
                response_code: object(responses)
                    .iter()
                    .map(|(code, response)| {
                        let response = object(response);
                        NamedResponseValue {
                            name: code.clone(),
                            value: Some(ResponseValue {
                                response: Some(Response {
                                    description: string(response, "description"),
                                    schema: response.get("schema").map(|s| SchemaItem {
                                        schema: Some(schema(s)),
                                    }),
                                }),
                            }),
                        }
                    })
                    .collect(),
            }),
            schemes: strings(map, "schemes"),
            deprecated: boolean(map, "deprecated"),
            vendor_extension: extensions(map),
        }
    }

    fn path_item(value: &Value) -> PathItem {
        let map = object(value);
        let op = |key: &str| map.get(key).map(operation);
        PathItem {
            r#ref: string(map, "$ref"),
            get: op("get"),
            put: op("put"),
            post: op("post"),
            delete: op("delete"),
            options: op("options"),
            head: op("head"),
            patch: op("patch"),
            parameters: parameters(map),
            vendor_extension: extensions(map),
        }
    }

    pub fn document(value: &Value) -> Document {
        let map = object(value);
        let info = map.get("info").map(object);
        Document {
            swagger: string(map, "swagger"),
            info: info.map(|info| Info {
                title: string(info, "title"),
                version: string(info, "version"),
                description: string(info, "description"),
                vendor_extension: extensions(info),
            }),
            host: string(map, "host"),
            base_path: string(map, "basePath"),
            schemes: strings(map, "schemes"),
            consumes: strings(map, "consumes"),
            produces: strings(map, "produces"),
            paths: map.get("paths").map(|paths| Paths {
                vendor_extension: Vec::new(),
                path: object(paths)
                    .iter()
                    .map(|(name, item)| NamedPathItem {
                        name: name.clone(),
                        value: Some(path_item(item)),
                    })
                    .collect(),
            }),
            definitions: map.get("definitions").map(|d| Definitions {
                additional_properties: named_schemas(d),
            }),
            security: match map.get("security") {
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|requirement| SecurityRequirement {
                        additional_properties: object(requirement)
                            .iter()
                            .map(|(name, scopes)| NamedStringArray {
                                name: name.clone(),
                                value: Some(StringArray {
                                    value: scopes
                                        .as_array()
                                        .into_iter()
                                        .flatten()
                                        .filter_map(|s| s.as_str().map(str::to_owned))
                                        .collect(),
                                }),
                            })
                            .collect(),
                    })
                    .collect(),
                _ => Vec::new(),
            },
            security_definitions: map.get("securityDefinitions").map(|defs| {
                SecurityDefinitions {
                    additional_properties: object(defs)
                        .iter()
                        .map(|(name, scheme)| {
                            let scheme = object(scheme);
                            NamedSecurityDefinitionsItem {
                                name: name.clone(),
                                value: Some(SecurityDefinitionsItem {
                                    api_key_security: Some(ApiKeySecurity {
                                        r#type: string(scheme, "type"),
                                        name: string(scheme, "name"),
                                        r#in: string(scheme, "in"),
                                        description: string(scheme, "description"),
                                    }),
                                }),
                            }
                        })
                        .collect(),
                }
            }),
            vendor_extension: extensions(map),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    #[test]
    fn schemas_keep_refs_types_items_maps_and_extensions() {
        let document = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.37.0+skiff"},
            "definitions": {
                "a.Pod": {
                    "type": "object",
                    "properties": {
                        "spec": {"$ref": "#/definitions/a.PodSpec", "description": "The spec."},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "containers": {
                            "type": "array",
                            "items": {"$ref": "#/definitions/a.Container"},
                            "x-kubernetes-patch-merge-key": "name",
                        },
                    },
                    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
                },
            },
            "paths": {"/api/v1/pods": {"get": {
                "operationId": "listCoreV1PodForAllNamespaces",
                "parameters": [{"name": "watch", "in": "query", "type": "boolean", "uniqueItems": true}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/a.PodList"}}},
                "x-kubernetes-action": "list",
            }}},
        });
        let bytes = encode(&document);
        let decoded = Document::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.swagger, "2.0");
        let pod = &decoded.definitions.unwrap().additional_properties[0];
        assert_eq!(pod.name, "a.Pod");
        let pod = pod.value.as_ref().unwrap();
        assert_eq!(pod.r#type.as_ref().unwrap().value, ["object"]);
        let ext = &pod.vendor_extension[0];
        assert_eq!(ext.name, "x-kubernetes-group-version-kind");
        let gvk: Value = serde_yaml_ng::from_str(&ext.value.as_ref().unwrap().yaml).unwrap();
        assert_eq!(gvk, json!([{"group": "", "kind": "Pod", "version": "v1"}]));
        let props = &pod.properties.as_ref().unwrap().additional_properties;
        let prop = |name: &str| {
            props
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.value.clone())
                .unwrap()
        };
        assert_eq!(prop("spec").r#ref, "#/definitions/a.PodSpec");
        assert_eq!(prop("spec").description, "The spec.");
        assert!(prop("spec").r#type.is_none());
        assert_eq!(
            prop("labels")
                .additional_properties
                .unwrap()
                .schema
                .unwrap()
                .r#type
                .unwrap()
                .value,
            ["string"]
        );
        assert_eq!(
            prop("containers").items.unwrap().schema[0].r#ref,
            "#/definitions/a.Container"
        );
        let path = &decoded.paths.unwrap().path[0];
        let get = path.value.as_ref().unwrap().get.as_ref().unwrap();
        let query = get.parameters[0]
            .parameter
            .as_ref()
            .unwrap()
            .non_body_parameter
            .as_ref()
            .unwrap()
            .query_parameter_sub_schema
            .as_ref()
            .unwrap();
        assert_eq!((query.name.as_str(), query.r#type.as_str()), ("watch", "boolean"));
        assert_eq!(get.vendor_extension[0].name, "x-kubernetes-action");
    }

    #[test]
    fn oneof_members_are_plain_fields_on_the_wire() {
        // AdditionalPropertiesItem { boolean: false } must still be sent (oneof presence).
        let item = AdditionalPropertiesItem {
            schema: None,
            boolean: Some(false),
        };
        assert_eq!(item.encode_to_vec(), [0x10, 0x00]);
    }
}
