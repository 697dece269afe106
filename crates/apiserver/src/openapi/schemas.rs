//! [`Catalog`]: the OpenAPI definitions of everything the server serves, generated from the
//! kinds' k8s-openapi types (schemars), shaped as upstream publishes them in OpenAPI v2:
//! refs `#/definitions/<name>`, `x-kubernetes-group-version-kind` on every kind (kubectl
//! finds a kind's schema by it), a `<Kind>List` per kind, the patch extensions of
//! [`skiff_api::schema::Schemas`], and the `enum` values of upstream's enum fields
//! ([`skiff_api::openapi_enums`]).

use std::collections::BTreeMap;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use skiff_api::schema::Schemas;

use crate::registry::Registry;

/// Where refs point in OpenAPI v2 (`#/definitions/<name>`).
pub(crate) const V2_REF_PREFIX: &str = "#/definitions/";

/// The definition names of the generic types operations refer to.
pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(crate) const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(crate) const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
pub(crate) const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// A group, version and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Gvk<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

impl Gvk<'_> {
    /// `{"group": .., "kind": .., "version": ..}`, as the extension writes it.
    pub fn to_json(self) -> Value {
        json!({"group": self.group, "kind": self.kind, "version": self.version})
    }
}

/// Every definition, and the definition of each kind.
pub(crate) struct Catalog<'a> {
    /// By name, OpenAPI v2 form.
    pub definitions: Map<String, Value>,
    /// The definition name of each kind with a schema (served kinds and the bodies of
    /// subresources); a served kind's list is `<name>List`.
    names: BTreeMap<Gvk<'a>, String>,
}

impl<'a> Catalog<'a> {
    /// The definitions of `registry`'s kinds, of their lists and subresource bodies, and of
    /// the generic types operations use (Status, DeleteOptions, Patch, APIResourceList).
    pub fn build(registry: &'a Registry) -> Self {
        let mut settings = SchemaSettings::draft2020_12();
        settings.definitions_path = "/definitions".into();
        settings.meta_schema = None;
        let mut generator = SchemaGenerator::new(settings);

        let mut names = BTreeMap::new();
        let mut kinds = Vec::new();
        for kind in registry.kinds() {
            let info = kind.info();
            kind.json_schema(&mut generator);
            let gvk = Gvk {
                group: &info.group,
                version: &info.version,
                kind: &info.kind,
            };
            names.insert(gvk, kind.schema_name());
            kinds.push(gvk);
            for sub in crate::discovery::subresources(kind.as_ref()) {
                let body = Gvk {
                    group: sub.group,
                    version: sub.version,
                    kind: sub.kind,
                };
                if let Some(name) = subresource_body(&mut generator, body) {
                    names.entry(body).or_insert(name);
                }
            }
        }
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
        generator.subschema_for::<meta::Status>();
        generator.subschema_for::<meta::DeleteOptions>();
        generator.subschema_for::<meta::Patch>();
        generator.subschema_for::<meta::ListMeta>();
        generator.subschema_for::<meta::APIResourceList>();

        let mut definitions = generator.take_definitions(false);
        for (gvk, name) in &names {
            if let Some(Value::Object(schema)) = definitions.get_mut(name) {
                schema.insert(
                    "x-kubernetes-group-version-kind".to_owned(),
                    json!([gvk.to_json()]),
                );
            }
        }
        for gvk in kinds {
            let Some(name) = names.get(&gvk).cloned() else {
                continue;
            };
            if let Some(Value::Object(schema)) = definitions.get_mut(&name) {
                drop_required_metadata(schema);
            }
            let list = list_definition(&definitions, gvk, &name);
            definitions.insert(format!("{name}List"), list);
        }
        as_upstream_v2(&mut definitions);
        skiff_api::openapi_enums::add_enums(&mut definitions);
        Catalog {
            definitions: Schemas::new(definitions).definitions().clone(),
            names,
        }
    }

    /// The definition name of a kind's schema.
    pub fn name_of(&self, gvk: Gvk<'_>) -> Option<&str> {
        // Keys borrow the registry; `gvk` may borrow less long, so no `get`.
        self.names
            .iter()
            .find(|(key, _)| **key == gvk)
            .map(|(_, name)| name.as_str())
    }
}

/// The schema of a subresource's body kind that is not a served kind (`Binding`,
/// `Eviction`, `TokenRequest`, `Scale`), added to `generator`; its definition name.
fn subresource_body(generator: &mut SchemaGenerator, gvk: Gvk<'_>) -> Option<String> {
    use k8s_openapi::api;
    use schemars::JsonSchema;
    fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> Option<String> {
        generator.subschema_for::<T>();
        Some(T::schema_name().into_owned())
    }
    match (gvk.group, gvk.version, gvk.kind) {
        ("", "v1", "Binding") => add::<api::core::v1::Binding>(generator),
        ("policy", "v1", "Eviction") => add::<api::policy::v1::Eviction>(generator),
        ("authentication.k8s.io", "v1", "TokenRequest") => {
            add::<api::authentication::v1::TokenRequest>(generator)
        }
        ("autoscaling", "v1", "Scale") => add::<api::autoscaling::v1::Scale>(generator),
        _ => None,
    }
}

/// k8s-openapi marks a kind's `metadata` required (the Rust field is not optional);
/// upstream does not, and a client validating against the schema must not either.
fn drop_required_metadata(schema: &mut Map<String, Value>) {
    let emptied = match schema.get_mut("required") {
        Some(Value::Array(required)) => {
            required.retain(|field| field != "metadata");
            required.is_empty()
        }
        _ => false,
    };
    if emptied {
        schema.remove("required");
    }
}

/// Upstream's `<Kind>List` definition (`PodList`): `items` of the kind and list metadata.
/// The `apiVersion` and `kind` fields are described as in the kind itself.
fn list_definition(definitions: &Map<String, Value>, gvk: Gvk<'_>, name: &str) -> Value {
    let property = |field: &str| {
        definitions
            .get(name)
            .and_then(|d| d.pointer(&format!("/properties/{field}")))
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}))
    };
    json!({
        "description": format!("{}List is a list of {} objects.", gvk.kind, gvk.kind),
        "type": "object",
        "properties": {
            "apiVersion": property("apiVersion"),
            "items": {
                "description": format!("The {} objects.", gvk.kind),
                "type": "array",
                "items": {"$ref": format!("{V2_REF_PREFIX}{name}")},
            },
            "kind": property("kind"),
            "metadata": {
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "$ref": format!("{V2_REF_PREFIX}{LIST_META}"),
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [{
            "group": gvk.group,
            "kind": format!("{}List", gvk.kind),
            "version": gvk.version,
        }],
    })
}

/// The OpenAPI v2 forms upstream gives the two union types (k8s-openapi leaves their type
/// open): `IntOrString` is a string of format `int-or-string`, `Quantity` a string.
fn as_upstream_v2(definitions: &mut Map<String, Value>) {
    for (name, format) in [(INT_OR_STRING, Some("int-or-string")), (QUANTITY, None)] {
        if let Some(Value::Object(schema)) = definitions.get_mut(name) {
            schema.remove("x-kubernetes-int-or-string");
            schema.insert("type".to_owned(), json!("string"));
            if let Some(format) = format {
                schema.insert("format".to_owned(), json!(format));
            }
        }
    }
}

/// Every definition name `value` refers to (`$ref`s with `prefix`), at any depth.
pub(crate) fn refs<'a>(value: &'a Value, prefix: &str, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix(prefix) {
                            out.push(name);
                        }
                    }
                    _ => refs(child, prefix, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|child| refs(child, prefix, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::testing::registry;

    #[test]
    fn kinds_carry_their_group_version_kind_and_a_list() {
        let registry = registry();
        let catalog = Catalog::build(&registry);
        let pod = &catalog.definitions["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert!(pod.get("required").is_none(), "{:?}", pod.get("required"));
        let list = &catalog.definitions["io.k8s.api.apps.v1.DeploymentList"];
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(
            catalog.name_of(Gvk {
                group: "autoscaling",
                version: "v1",
                kind: "Scale"
            }),
            Some("io.k8s.api.autoscaling.v1.Scale")
        );
        assert_eq!(
            catalog.definitions[INT_OR_STRING]["format"],
            json!("int-or-string")
        );
    }

    #[test]
    fn every_ref_resolves() {
        let registry = registry();
        let catalog = Catalog::build(&registry);
        let mut found = Vec::new();
        for schema in catalog.definitions.values() {
            refs(schema, V2_REF_PREFIX, &mut found);
        }
        assert!(found.len() > 100, "{}", found.len());
        for name in found {
            assert!(catalog.definitions.contains_key(name), "dangling {name}");
        }
        for name in [STATUS, DELETE_OPTIONS, PATCH, API_RESOURCE_LIST, QUANTITY] {
            assert!(catalog.definitions.contains_key(name), "{name}");
        }
    }
}
