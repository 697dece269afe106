//! The OpenAPI schemas of the served kinds, with upstream's `x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type` and
//! `x-kubernetes-list-map-keys` extensions that strategic merge patch and client-side
//! `kubectl apply` rely on.
//!
//! The definitions come from the k8s-openapi types (their `JsonSchema` impls, through
//! schemars), which carry no patch extensions: [`Schemas::new`] adds them from a table of
//! upstream's struct tags (`patchStrategy` / `patchMergeKey` in `k8s.io/api`), and rewrites
//! every `$ref` to the OpenAPI v2 form `#/definitions/<name>`.

use serde_json::{Map, Value};

/// Extension naming a field's patch strategies (`merge`, `replace`, `retainKeys`,
/// comma-separated).
pub const PATCH_STRATEGY: &str = "x-kubernetes-patch-strategy";
/// Extension naming the key that identifies the elements of a merged list of objects.
pub const PATCH_MERGE_KEY: &str = "x-kubernetes-patch-merge-key";
/// Extension naming a list's type (`atomic`, `set`, `map`).
pub const LIST_TYPE: &str = "x-kubernetes-list-type";
/// Extension naming the keys of a `map` list.
pub const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";

/// One upstream struct tag: `definition.property` has `strategy` (and `merge_key`), and
/// optionally a list type with map keys.
struct PatchTag {
    definition: &'static str,
    property: &'static str,
    strategy: &'static str,
    merge_key: Option<&'static str>,
    list_type: Option<&'static str>,
    list_map_keys: &'static [&'static str],
}

const fn tag(
    definition: &'static str,
    property: &'static str,
    strategy: &'static str,
    merge_key: Option<&'static str>,
) -> PatchTag {
    PatchTag {
        definition,
        property,
        strategy,
        merge_key,
        list_type: None,
        list_map_keys: &[],
    }
}

const fn map_list(
    definition: &'static str,
    property: &'static str,
    strategy: &'static str,
    merge_key: &'static str,
    list_map_keys: &'static [&'static str],
) -> PatchTag {
    PatchTag {
        definition,
        property,
        strategy,
        merge_key: Some(merge_key),
        list_type: Some("map"),
        list_map_keys,
    }
}

const CORE: &str = "io.k8s.api.core.v1.";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// Upstream's patch struct tags of the built-in types (from `k8s.io/api` and
/// `k8s.io/apimachinery/pkg/apis/meta/v1`), by definition name without its package prefix
/// where the prefix is [`CORE`] or [`META`].
const PATCH_TAGS: &[PatchTag] = &[
    // metav1.ObjectMeta
    PatchTag {
        definition: "ObjectMeta",
        property: "finalizers",
        strategy: "merge",
        merge_key: None,
        list_type: Some("set"),
        list_map_keys: &[],
    },
    map_list("ObjectMeta", "ownerReferences", "merge", "uid", &["uid"]),
    // core/v1 PodSpec
    map_list("PodSpec", "containers", "merge", "name", &["name"]),
    map_list("PodSpec", "initContainers", "merge", "name", &["name"]),
    map_list("PodSpec", "ephemeralContainers", "merge", "name", &["name"]),
    map_list("PodSpec", "volumes", "merge,retainKeys", "name", &["name"]),
    map_list("PodSpec", "imagePullSecrets", "merge", "name", &["name"]),
    map_list("PodSpec", "hostAliases", "merge", "ip", &["ip"]),
    map_list(
        "PodSpec",
        "topologySpreadConstraints",
        "merge",
        "topologyKey",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    map_list("PodSpec", "schedulingGates", "merge", "name", &["name"]),
    map_list(
        "PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        "name",
        &["name"],
    ),
    // core/v1 Container and EphemeralContainer
    map_list(
        "Container",
        "ports",
        "merge",
        "containerPort",
        &["containerPort", "protocol"],
    ),
    map_list("Container", "env", "merge", "name", &["name"]),
    map_list(
        "Container",
        "volumeMounts",
        "merge",
        "mountPath",
        &["mountPath"],
    ),
    map_list(
        "Container",
        "volumeDevices",
        "merge",
        "devicePath",
        &["devicePath"],
    ),
    map_list(
        "EphemeralContainer",
        "ports",
        "merge",
        "containerPort",
        &["containerPort", "protocol"],
    ),
    map_list("EphemeralContainer", "env", "merge", "name", &["name"]),
    map_list(
        "EphemeralContainer",
        "volumeMounts",
        "merge",
        "mountPath",
        &["mountPath"],
    ),
    map_list(
        "EphemeralContainer",
        "volumeDevices",
        "merge",
        "devicePath",
        &["devicePath"],
    ),
    // core/v1 statuses
    map_list("PodStatus", "conditions", "merge", "type", &["type"]),
    map_list("PodStatus", "podIPs", "merge", "ip", &["ip"]),
    tag("PodStatus", "hostIPs", "merge", Some("ip")),
    map_list(
        "PodStatus",
        "resourceClaimStatuses",
        "merge,retainKeys",
        "name",
        &["name"],
    ),
    tag(
        "ContainerStatus",
        "allocatedResourcesStatus",
        "merge",
        Some("name"),
    ),
    tag("NodeStatus", "addresses", "merge", Some("type")),
    tag("NodeStatus", "conditions", "merge", Some("type")),
    tag("NodeSpec", "podCIDRs", "merge", None),
    tag("NamespaceStatus", "conditions", "merge", Some("type")),
    tag(
        "PersistentVolumeClaimStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    tag(
        "ReplicationControllerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    tag("ComponentStatus", "conditions", "merge", Some("type")),
    map_list(
        "ServiceSpec",
        "ports",
        "merge",
        "port",
        &["port", "protocol"],
    ),
    map_list("ServiceStatus", "conditions", "merge", "type", &["type"]),
    tag("ServiceAccount", "secrets", "merge", Some("name")),
    // apps/v1
    tag(
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        "retainKeys",
        None,
    ),
    tag(
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    tag(
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    tag(
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    tag(
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    // batch/v1
    tag(
        "io.k8s.api.batch.v1.JobStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    // policy/v1
    tag(
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "selector",
        "replace",
        None,
    ),
    map_list(
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        "merge",
        "type",
        &["type"],
    ),
    // autoscaling/v2
    tag(
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
];

/// Extension making a struct or map atomic for server-side apply.
pub const MAP_TYPE: &str = "x-kubernetes-map-type";

/// Upstream's `+structType=atomic` structs (`x-kubernetes-map-type: atomic` in its
/// OpenAPI), replaced as a whole by server-side apply.
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.autoscaling.v1.CrossVersionObjectReference",
    "io.k8s.api.autoscaling.v2.CrossVersionObjectReference",
];

/// Upstream's OpenAPI defaults of list-map keys (`+default="TCP"`), which server-side
/// apply uses for items that omit the key.
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

impl PatchTag {
    /// The full definition name (`io.k8s.api.core.v1.PodSpec`).
    fn definition_name(&self) -> String {
        if self.definition.starts_with("io.k8s.") {
            self.definition.to_owned()
        } else if self.definition == "ObjectMeta" {
            format!("{META}{}", self.definition)
        } else {
            format!("{CORE}{}", self.definition)
        }
    }
}

/// A field's patch metadata: its strategies and, for merged lists of objects, the merge key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchMeta {
    /// `merge`, `replace`, `retainKeys` (empty: maps merge, lists replace).
    pub strategies: Vec<String>,
    /// The field that identifies list elements (`name` for containers).
    pub merge_key: Option<String>,
}

impl PatchMeta {
    /// Reads the extensions of a property schema.
    fn of(property: &Value) -> Self {
        let strategies = property
            .get(PATCH_STRATEGY)
            .and_then(Value::as_str)
            .map(|s| s.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        let merge_key = property
            .get(PATCH_MERGE_KEY)
            .and_then(Value::as_str)
            .map(str::to_owned);
        PatchMeta {
            strategies,
            merge_key,
        }
    }

    /// Lists merge (by merge key, or as a set of primitives) instead of being replaced.
    pub fn merges(&self) -> bool {
        self.strategies.iter().any(|s| s == "merge")
    }

    /// Maps are replaced instead of merged.
    pub fn replaces(&self) -> bool {
        self.strategies.iter().any(|s| s == "replace")
    }

    /// A `$retainKeys` directive may clear the fields it does not list (unions such as a
    /// volume's source or a deployment's strategy).
    pub fn retains_keys(&self) -> bool {
        self.strategies.iter().any(|s| s == "retainKeys")
    }
}

/// One field of an object schema, as strategic merge patch walks it.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The field's schema, `$ref` followed.
    pub schema: &'a Value,
    /// For a list, its elements' schema, `$ref` followed.
    pub items: Option<&'a Value>,
    /// The field's own extensions.
    meta: &'a Value,
}

impl Field<'_> {
    /// The field's patch strategies and merge key.
    pub fn patch_meta(&self) -> PatchMeta {
        PatchMeta::of(self.meta)
    }
}

/// OpenAPI definitions by name (`io.k8s.api.core.v1.Pod` → JSON schema with `$ref`s of
/// the form `#/definitions/<name>`), decorated with the patch extensions.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    definitions: Map<String, Value>,
}

/// Rewrites `#/$defs/X` and `#/components/schemas/X` references to `#/definitions/X`.
fn normalize_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get_mut("$ref") {
                for prefix in ["#/$defs/", "#/components/schemas/"] {
                    if let Some(name) = reference.strip_prefix(prefix) {
                        *reference = format!("#/definitions/{name}");
                    }
                }
            }
            map.values_mut().for_each(normalize_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_refs),
        _ => {}
    }
}

impl Schemas {
    /// Takes the definitions (as generated from the k8s-openapi types) and adds upstream's
    /// patch extensions; `$ref`s become `#/definitions/<name>`. With schemars:
    ///
    /// ```ignore
    /// let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    /// generator.subschema_for::<k8s_openapi::api::apps::v1::Deployment>(); // every served kind
    /// let schemas = Schemas::new(generator.take_definitions(true));
    /// ```
    pub fn new(mut definitions: Map<String, Value>) -> Self {
        definitions.values_mut().for_each(normalize_refs);
        for tag in PATCH_TAGS {
            let property = definitions
                .get_mut(&tag.definition_name())
                .and_then(|d| d.get_mut("properties"))
                .and_then(|p| p.get_mut(tag.property))
                .and_then(Value::as_object_mut);
            let Some(property) = property else { continue };
            property.insert(PATCH_STRATEGY.into(), tag.strategy.into());
            if let Some(key) = tag.merge_key {
                property.insert(PATCH_MERGE_KEY.into(), key.into());
            }
            if let Some(list_type) = tag.list_type {
                property.insert(LIST_TYPE.into(), list_type.into());
                if !tag.list_map_keys.is_empty() {
                    property.insert(LIST_MAP_KEYS.into(), tag.list_map_keys.into());
                }
            }
        }
        for name in ATOMIC_STRUCTS {
            if let Some(definition) = definitions.get_mut(*name).and_then(Value::as_object_mut) {
                definition.insert(MAP_TYPE.into(), "atomic".into());
            }
        }
        for (name, property, default) in KEY_DEFAULTS {
            let property = definitions
                .get_mut(*name)
                .and_then(|d| d.get_mut("properties"))
                .and_then(|p| p.get_mut(*property))
                .and_then(Value::as_object_mut);
            if let Some(property) = property {
                property.insert("default".into(), (*default).into());
            }
        }
        Schemas { definitions }
    }

    /// Every definition.
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.definitions
    }

    /// One definition by name (`io.k8s.api.apps.v1.Deployment`).
    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.definitions.get(name)
    }

    /// Follows a `$ref` (also one wrapped in a single-element `allOf`), up to a few levels;
    /// a schema without one is returned as is, a dangling one as `None`.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> Option<&'a Value> {
        let mut current = schema;
        for _ in 0..8 {
            let reference = current.get("$ref").and_then(Value::as_str).or_else(|| {
                match current
                    .get("allOf")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                {
                    Some([only]) => only.get("$ref").and_then(Value::as_str),
                    _ => None,
                }
            });
            let Some(reference) = reference else {
                return Some(current);
            };
            let name = reference.strip_prefix("#/definitions/")?;
            current = self.definitions.get(name)?;
        }
        None
    }

    /// The field `name` of an object schema: a declared property, or the value schema of a
    /// map (`additionalProperties`). `None` for unknown fields.
    pub fn field<'a>(&'a self, schema: &'a Value, name: &str) -> Option<Field<'a>> {
        let object = self.resolve(schema)?;
        let property = object
            .get("properties")
            .and_then(|p| p.get(name))
            .or_else(|| object.get("additionalProperties").filter(|a| a.is_object()))?;
        let resolved = self.resolve(property)?;
        let items = resolved.get("items").and_then(|i| self.resolve(i));
        Some(Field {
            schema: resolved,
            items,
            meta: property,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{Node, Pod, Service, ServiceAccount};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use schemars::generate::SchemaSettings;

    /// A generator that has seen the kinds whose definitions the patch table names.
    fn generator() -> schemars::SchemaGenerator {
        use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
        use k8s_openapi::api::core::v1::{
            ComponentStatus, Namespace, PersistentVolumeClaim, ReplicationController,
        };
        let mut generator = SchemaSettings::draft2020_12().into_generator();
        generator.subschema_for::<Deployment>();
        generator.subschema_for::<ReplicaSet>();
        generator.subschema_for::<DaemonSet>();
        generator.subschema_for::<StatefulSet>();
        generator.subschema_for::<Job>();
        generator.subschema_for::<Pod>();
        generator.subschema_for::<Node>();
        generator.subschema_for::<Service>();
        generator.subschema_for::<ServiceAccount>();
        generator.subschema_for::<PodDisruptionBudget>();
        generator.subschema_for::<Namespace>();
        generator.subschema_for::<PersistentVolumeClaim>();
        generator.subschema_for::<ReplicationController>();
        generator.subschema_for::<ComponentStatus>();
        generator.subschema_for::<HorizontalPodAutoscaler>();
        generator
    }

    /// Schemas of the built-in kinds the tests patch, generated as the server does (draft
    /// 2020-12 refs).
    pub(crate) fn builtin() -> Schemas {
        Schemas::new(generator().take_definitions(true))
    }

    fn all_refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| all_refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| all_refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn refs_are_normalized_and_resolvable() {
        let schemas = builtin();
        let mut refs = Vec::new();
        schemas
            .definitions()
            .values()
            .for_each(|d| all_refs(d, &mut refs));
        assert!(refs.len() > 100);
        for r in &refs {
            let name = r.strip_prefix("#/definitions/").expect("normalized ref");
            assert!(schemas.definition(name).is_some(), "{r}");
        }
        let mut openapi3 = SchemaSettings::openapi3().into_generator();
        openapi3.subschema_for::<Pod>();
        let schemas = Schemas::new(openapi3.take_definitions(true));
        let pod = schemas.definition("io.k8s.api.core.v1.Pod").expect("pod");
        // OpenAPI 3.0 forbids siblings of `$ref`: schemars wraps it in `allOf`.
        assert_eq!(
            pod["properties"]["spec"]["allOf"][0]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
        assert_eq!(
            schemas.resolve(&pod["properties"]["spec"]),
            schemas.definition("io.k8s.api.core.v1.PodSpec")
        );
    }

    #[test]
    fn walks_fields_with_patch_meta() {
        let schemas = builtin();
        let deployment = schemas
            .definition("io.k8s.api.apps.v1.Deployment")
            .expect("deployment");
        let spec = schemas.field(deployment, "spec").expect("spec");
        let strategy = schemas.field(spec.schema, "strategy").expect("strategy");
        assert!(strategy.patch_meta().retains_keys());
        assert!(!strategy.patch_meta().merges());
        let template = schemas.field(spec.schema, "template").expect("template");
        let pod_spec = schemas.field(template.schema, "spec").expect("pod spec");
        let containers = schemas
            .field(pod_spec.schema, "containers")
            .expect("containers");
        assert_eq!(
            containers.patch_meta(),
            PatchMeta {
                strategies: vec!["merge".into()],
                merge_key: Some("name".into())
            }
        );
        let container = containers.items.expect("container schema");
        let ports = schemas.field(container, "ports").expect("ports");
        assert_eq!(
            ports.patch_meta().merge_key.as_deref(),
            Some("containerPort")
        );
        assert_eq!(
            ports.meta[LIST_MAP_KEYS],
            serde_json::json!(["containerPort", "protocol"])
        );
        let volumes = schemas.field(pod_spec.schema, "volumes").expect("volumes");
        assert!(volumes.patch_meta().merges() && volumes.patch_meta().retains_keys());
        let tolerations = schemas
            .field(pod_spec.schema, "tolerations")
            .expect("tolerations");
        assert_eq!(tolerations.patch_meta(), PatchMeta::default());
        assert!(schemas.field(pod_spec.schema, "nonsense").is_none());

        let metadata = schemas.field(deployment, "metadata").expect("metadata");
        let labels = schemas.field(metadata.schema, "labels").expect("labels");
        let any_label = schemas.field(labels.schema, "app").expect("label value");
        assert_eq!(any_label.schema["type"], "string");
        let finalizers = schemas
            .field(metadata.schema, "finalizers")
            .expect("finalizers");
        assert!(finalizers.patch_meta().merges());
        assert_eq!(finalizers.patch_meta().merge_key, None);

        let pdb_spec = schemas
            .definition("io.k8s.api.policy.v1.PodDisruptionBudgetSpec")
            .expect("pdb spec");
        let selector = schemas.field(pdb_spec, "selector").expect("selector");
        assert!(selector.patch_meta().replaces());
    }

    #[test]
    fn every_tag_names_an_existing_property() {
        let definitions = generator().take_definitions(true);
        for tag in PATCH_TAGS {
            let name = tag.definition_name();
            let property = definitions
                .get(&name)
                .and_then(|d| d.get("properties"))
                .and_then(|p| p.get(tag.property));
            assert!(property.is_some(), "{name}.{}", tag.property);
        }
    }
}
