//! A CustomResourceDefinition's schemas as the API server uses them: the definition's own
//! defaulting and validation (with its CEL rules compiled, as upstream's CRD validation
//! does), and per served version the structural schema that prunes, defaults and
//! validates the custom resources, and publishes them in OpenAPI. The machinery is
//! `skiff_api::apiextensions` and `skiff_api::cel`; this module puts it together.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    JSONSchemaProps,
};
use serde_json::Value;
use skiff_api::apiextensions::{self, OpenApiVersion, Structural};
use skiff_api::cel;
use skiff_api::field::{ErrorList, Path};

use crate::error::ApiError;

/// Upstream's v1 defaulting of a definition.
pub(crate) fn default_definition(crd: &mut CustomResourceDefinition) {
    apiextensions::defaults(crd);
}

/// The schema of each version with the field path upstream reports its errors under:
/// `spec.validation.openAPIV3Schema` when every version has the same schema (upstream
/// validates the internal form, where a shared schema moves up to the spec), else
/// `spec.versions[i].schema.openAPIV3Schema`.
fn version_schemas(crd: &CustomResourceDefinition) -> Vec<(Path, &JSONSchemaProps)> {
    fn schema(v: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
    }
    let versions = &crd.spec.versions;
    let shared = versions
        .first()
        .is_some_and(|first| versions.iter().all(|v| schema(v) == schema(first)));
    if shared {
        return versions
            .first()
            .and_then(schema)
            .map(|s| {
                (
                    Path::new("spec")
                        .child("validation")
                        .child("openAPIV3Schema"),
                    s,
                )
            })
            .into_iter()
            .collect();
    }
    versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let path = Path::new("spec")
                .child("versions")
                .index(i)
                .child("schema")
                .child("openAPIV3Schema");
            Some((path, schema(v)?))
        })
        .collect()
}

/// Upstream's validation of a definition (a create when `old` is `None`), with the
/// compile errors of its CEL rules when the schemas are otherwise valid.
pub(crate) fn validate_definition(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> ErrorList {
    let mut errors = match old {
        None => apiextensions::validate_crd(crd),
        Some(old) => apiextensions::validate_crd_update(crd, old),
    };
    if errors.is_empty() {
        for (path, schema) in version_schemas(crd) {
            if let Err(cel_errors) = cel::compile(schema, &path) {
                errors.extend(cel_errors);
            }
        }
    }
    errors
}

/// What one served version checks its objects with.
pub(crate) struct VersionSchema {
    /// The version's `openAPIV3Schema` as JSON (server-side apply's types).
    props: Option<Value>,
    structural: Option<Structural>,
    rules: Option<cel::Validator>,
    scale: Option<CustomResourceSubresourceScale>,
    group: String,
    version: String,
    kind: String,
}

impl VersionSchema {
    /// The schema of `version` of `crd`. Errors: 500 when the schema is not structural or
    /// a rule does not compile (the definition's validation refuses both first).
    pub(crate) fn new(
        crd: &CustomResourceDefinition,
        version: &CustomResourceDefinitionVersion,
    ) -> Result<Self, ApiError> {
        let structural =
            apiextensions::schema_for_version(crd, &version.name).map_err(ApiError::internal)?;
        let props = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        let rules = match props {
            Some(props) => Some(
                cel::compile(props, &Path::default())
                    .map_err(|errors| ApiError::internal(skiff_api::field::aggregate(&errors)))?,
            ),
            None => None,
        }
        .filter(|rules| !rules.is_empty());
        Ok(VersionSchema {
            props: props
                .and_then(|p| serde_json::to_value(p).ok())
                .map(with_object_fields),
            structural,
            rules,
            scale: version.subresources.as_ref().and_then(|s| s.scale.clone()),
            group: crd.spec.group.clone(),
            version: version.name.clone(),
            kind: crd.spec.names.kind.clone(),
        })
    }

    /// The version's `openAPIV3Schema` as JSON.
    pub(crate) fn props(&self) -> Option<&Value> {
        self.props.as_ref()
    }

    /// Drops the fields the schema does not know; their paths (`spec.foo`).
    pub(crate) fn prune(&self, object: &mut Value) -> Vec<String> {
        match &self.structural {
            Some(schema) => apiextensions::prune(schema, object),
            None => Vec::new(),
        }
    }

    /// Applies the schema's defaults.
    pub(crate) fn default(&self, object: &mut Value) {
        if let Some(schema) = &self.structural {
            apiextensions::apply_defaults(schema, object);
        }
    }

    /// The schema's validation, the scale paths' and the CEL rules (transition rules only
    /// with `old`). CEL rules run only on an object the schema accepts, as upstream.
    pub(crate) fn validate(&self, object: &Value, old: Option<&Value>) -> ErrorList {
        let mut errors = match &self.structural {
            Some(schema) => apiextensions::validate_object(schema, object, &Path::default()),
            None => Vec::new(),
        };
        if let Some(scale) = &self.scale {
            errors.extend(apiextensions::validate_scale(object, scale));
        }
        if errors.is_empty()
            && let Some(rules) = &self.rules
        {
            errors.extend(rules.validate(object, old, &Path::default()));
        }
        errors
    }

    /// The version's definition for the OpenAPI documents, with references in the
    /// `#/definitions/` form the document builder rewrites for v3.
    pub(crate) fn openapi(&self) -> Value {
        let mut schema = apiextensions::openapi_schema(
            self.structural.as_ref(),
            &self.group,
            &self.version,
            &self.kind,
            OpenApiVersion::V3,
        );
        rewrite_refs(&mut schema);
        schema
    }
}

/// A version's schema with the fields every object has at its root (`apiVersion`, `kind`,
/// `metadata`), as upstream's typed schema of a custom resource has them; metadata's own
/// fields are deduced from their values.
fn with_object_fields(mut schema: Value) -> Value {
    if let Some(root) = schema.as_object_mut() {
        let properties = root
            .entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(properties) = properties.as_object_mut() {
            for field in ["apiVersion", "kind"] {
                properties
                    .entry(field)
                    .or_insert_with(|| serde_json::json!({"type": "string"}));
            }
            properties.entry("metadata").or_insert_with(|| {
                serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
            });
        }
    }
    schema
}

/// `#/components/schemas/X` → `#/definitions/X`, at any depth.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match child {
                    Value::String(target) if key == "$ref" => {
                        if let Some(name) = target.strip_prefix("#/components/schemas/") {
                            *target = format!("#/definitions/{name}");
                        }
                    }
                    other => rewrite_refs(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}
