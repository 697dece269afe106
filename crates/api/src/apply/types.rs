//! Type information for server-side apply, read from OpenAPI schemas with upstream's
//! `x-kubernetes-*` extensions, following upstream's conversion of OpenAPI to
//! structured-merge-diff schemas (`k8s.io/kube-openapi/pkg/schemaconv`):
//!
//! - an object with `properties` is a struct, one with `additionalProperties` a map; both
//!   are granular unless `x-kubernetes-map-type: atomic`;
//! - an array is a list: `x-kubernetes-list-type: map` with `x-kubernetes-list-map-keys`
//!   is associative by those keys, `set` a set; without a list type,
//!   `x-kubernetes-patch-strategy: merge` makes it associative by
//!   `x-kubernetes-patch-merge-key`, or a set without one; other lists are atomic;
//! - `x-kubernetes-int-or-string` and the other types are scalars;
//! - a schema without a type (or none at all) is deduced from the value: maps granular,
//!   lists atomic.
//!
//! The same walker serves the built-in kinds (OpenAPI v2 definitions with `$ref`s, from
//! [`Schemas`]) and custom resources (a CRD version's `openAPIV3Schema`, inline).

use serde_json::Value;

use crate::schema::{LIST_MAP_KEYS, LIST_TYPE, MAP_TYPE, PATCH_MERGE_KEY, PATCH_STRATEGY, Schemas};

/// Where the type information of one kind comes from.
#[derive(Debug, Clone, Copy)]
pub enum TypeSource<'a> {
    /// A built-in kind: definition `definition` (`io.k8s.api.apps.v1.Deployment`) of
    /// `schemas`, whose `$ref`s are resolved there.
    Definition {
        schemas: &'a Schemas,
        definition: &'a str,
    },
    /// A custom resource: the version's `openAPIV3Schema` (no `$ref`s).
    Structural(&'a Value),
    /// No schema: every field is deduced from its value.
    Deduced,
}

impl<'a> TypeSource<'a> {
    /// The type of the object's root. A definition missing from `schemas` is deduced.
    pub fn root(&self) -> Type<'a> {
        match *self {
            TypeSource::Definition {
                schemas,
                definition,
            } => Type {
                schema: schemas.definition(definition),
                ext: None,
                schemas: Some(schemas),
            },
            TypeSource::Structural(schema) => Type {
                schema: Some(schema),
                ext: None,
                schemas: None,
            },
            TypeSource::Deduced => Type::deduced(),
        }
    }
}

/// How the elements of a list are identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Scalars identified by value.
    Set,
    /// Objects identified by these key fields.
    Map(Vec<String>),
}

/// What a type is, as the apply algorithms walk it.
#[derive(Debug, Clone)]
pub enum Shape<'a> {
    /// A leaf.
    Scalar,
    /// A struct or a map.
    Map { atomic: bool },
    /// A list of `items`.
    List { kind: ListKind, items: Type<'a> },
    /// No type: decided by the value (maps granular, lists atomic, others scalars).
    Deduced,
}

/// One node's type: its schema (resolved), the schema as the parent declares it (where
/// the list and map extensions of built-in kinds sit), and the definitions to resolve
/// `$ref`s in.
#[derive(Debug, Clone, Copy)]
pub struct Type<'a> {
    schema: Option<&'a Value>,
    ext: Option<&'a Value>,
    schemas: Option<&'a Schemas>,
}

impl<'a> Type<'a> {
    /// The type of values without a schema.
    pub fn deduced() -> Self {
        Type {
            schema: None,
            ext: None,
            schemas: None,
        }
    }

    fn resolve(&self, schema: &'a Value) -> Option<&'a Value> {
        match self.schemas {
            Some(schemas) => schemas.resolve(schema),
            None => Some(schema),
        }
    }

    fn child(&self, declared: &'a Value) -> Type<'a> {
        Type {
            schema: self.resolve(declared),
            ext: Some(declared),
            schemas: self.schemas,
        }
    }

    fn extension(&self, name: &str) -> Option<&'a Value> {
        self.ext
            .and_then(|e| e.get(name))
            .or_else(|| self.schema.and_then(|s| s.get(name)))
    }

    /// The node's shape.
    pub fn shape(&self) -> Shape<'a> {
        let Some(schema) = self.schema else {
            return Shape::Deduced;
        };
        if schema.get("x-kubernetes-int-or-string").is_some() {
            return Shape::Scalar;
        }
        let type_name = schema.get("type").and_then(Value::as_str);
        let is_object = type_name == Some("object")
            || schema.get("properties").is_some()
            || schema
                .get("additionalProperties")
                .is_some_and(Value::is_object);
        if is_object {
            let atomic = self.extension(MAP_TYPE).and_then(Value::as_str) == Some("atomic");
            return Shape::Map { atomic };
        }
        if type_name == Some("array") {
            let items = schema
                .get("items")
                .map(|i| self.child(i))
                .unwrap_or_else(Type::deduced);
            return Shape::List {
                kind: self.list_kind(),
                items,
            };
        }
        match type_name {
            Some(_) => Shape::Scalar,
            None => Shape::Deduced,
        }
    }

    fn list_kind(&self) -> ListKind {
        match self.extension(LIST_TYPE).and_then(Value::as_str) {
            Some("set") => return ListKind::Set,
            Some("map") => {
                let keys = self
                    .extension(LIST_MAP_KEYS)
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                return ListKind::Map(keys);
            }
            Some(_) => return ListKind::Atomic,
            None => {}
        }
        let strategy = self
            .extension(PATCH_STRATEGY)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if strategy.split(',').any(|s| s == "merge") {
            match self.extension(PATCH_MERGE_KEY).and_then(Value::as_str) {
                Some(key) => ListKind::Map(vec![key.to_owned()]),
                None => ListKind::Set,
            }
        } else {
            ListKind::Atomic
        }
    }

    /// The type of field `name` of a struct or map; `None` for a field a struct does not
    /// declare (and that no `additionalProperties` or `x-kubernetes-preserve-unknown-fields`
    /// allows).
    pub fn field(&self, name: &str) -> Option<Type<'a>> {
        let Some(schema) = self.schema else {
            return Some(Type::deduced());
        };
        if let Some(declared) = schema.get("properties").and_then(|p| p.get(name)) {
            return Some(self.child(declared));
        }
        match schema.get("additionalProperties") {
            Some(Value::Object(_)) => schema.get("additionalProperties").map(|a| self.child(a)),
            Some(Value::Bool(true)) => Some(Type::deduced()),
            _ if schema.get("properties").is_none()
                || schema.get("x-kubernetes-preserve-unknown-fields")
                    == Some(&Value::Bool(true)) =>
            {
                Some(Type::deduced())
            }
            _ => None,
        }
    }

    /// The type of field `name`, deduced when undeclared.
    pub fn field_or_deduced(&self, name: &str) -> Type<'a> {
        self.field(name).unwrap_or_else(Type::deduced)
    }

    /// Whether `name` is a declared property (a struct field, not a map key).
    pub fn declares(&self, name: &str) -> bool {
        self.schema
            .and_then(|s| s.get("properties"))
            .is_some_and(|p| p.get(name).is_some())
    }

    /// The default of property `name`, for a list key that an item omits.
    pub fn default_of(&self, name: &str) -> Option<&'a Value> {
        let declared = self.schema?.get("properties")?.get(name)?;
        declared
            .get("default")
            .or_else(|| self.resolve(declared)?.get("default"))
    }
}

/// The shape of `value` as `ty` says, deduced types decided by the value.
pub(crate) fn effective_shape<'a>(ty: &Type<'a>, value: Option<&Value>) -> Shape<'a> {
    match ty.shape() {
        Shape::Deduced => match value {
            Some(Value::Object(_)) => Shape::Map { atomic: false },
            Some(Value::Array(_)) => Shape::List {
                kind: ListKind::Atomic,
                items: Type::deduced(),
            },
            _ => Shape::Scalar,
        },
        shape => shape,
    }
}
