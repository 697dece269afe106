//! Structural schemas (upstream `pkg/apiserver/schema`: `structural.go`, `convert.go`,
//! `validation.go`, `complete.go`): the typed skeleton of a CRD's OpenAPI v3 schema that
//! pruning, defaulting and validation walk, and the check that a schema is structural.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};

/// A structural schema: every level says its type (or is int-or-string / preserves
/// unknown fields), and value validations (`allOf`, `anyOf`, ...) only restrict what the
/// skeleton already specifies. Upstream's `schema.Structural`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Structural {
    /// `type`, `description`, `default`, `nullable`, `additionalProperties`, ...
    pub generic: Generic,
    /// The `x-kubernetes-*` vendor extensions.
    pub extensions: Extensions,
    /// `items` (arrays).
    pub items: Option<Box<Structural>>,
    /// `properties` (objects with known fields).
    pub properties: BTreeMap<String, Structural>,
    /// Value validations (`minimum`, `pattern`, `allOf`, ...); `None` only for schemas built
    /// by hand.
    pub validation: Option<Box<ValueValidation>>,
    /// `x-kubernetes-validations` (CEL rules), kept for the CEL evaluator.
    pub x_validations: Vec<ValidationRule>,
}

/// The generic fields of a schema (upstream `schema.Generic`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generic {
    /// `type`: one of `object`, `array`, `string`, `integer`, `number`, `boolean`, or empty.
    pub type_: String,
    pub description: String,
    pub title: String,
    /// `default`, `None` when unset (a JSON `null` default is unset, as upstream reads it).
    pub default: Option<Value>,
    pub nullable: bool,
    /// `additionalProperties`: a schema or a boolean.
    pub additional_properties: Option<StructuralOrBool>,
}

/// `additionalProperties` as upstream keeps it: a schema (which implies `true`) or a bare
/// boolean.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuralOrBool {
    pub structural: Option<Box<Structural>>,
    pub allows: bool,
}

/// The Kubernetes vendor extensions (upstream `schema.Extensions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extensions {
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub int_or_string: bool,
    pub list_map_keys: Vec<String>,
    pub list_type: Option<String>,
    pub map_type: Option<String>,
}

/// Value validations (upstream `schema.ValueValidation`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueValidation {
    pub format: String,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub all_of: Vec<NestedValueValidation>,
    pub one_of: Vec<NestedValueValidation>,
    pub any_of: Vec<NestedValueValidation>,
    pub not: Option<Box<NestedValueValidation>>,
}

impl ValueValidation {
    fn is_empty(&self) -> bool {
        *self == ValueValidation::default()
    }
}

/// A value validation under a junctor (`allOf`, `anyOf`, `oneOf`, `not`). Anything
/// structural found there is kept in the `forbidden_*` fields so that the structural check
/// can reject it (upstream `schema.NestedValueValidation`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedValueValidation {
    pub validation: ValueValidation,
    pub items: Option<Box<NestedValueValidation>>,
    pub properties: BTreeMap<String, NestedValueValidation>,
    pub additional_properties: Option<Box<NestedValueValidation>>,
    pub x_validations: Vec<ValidationRule>,
    pub forbidden_generics: Generic,
    pub forbidden_extensions: Extensions,
}

/// The fields `NewStructural` refuses, with upstream's error text.
fn unsupported_fields(s: &JSONSchemaProps) -> Result<(), String> {
    let set = |name: &str| Err(format!("OpenAPIV3Schema '{name}' is not supported"));
    if s.id.as_deref().is_some_and(|id| !id.is_empty()) {
        return set("id");
    }
    if s.schema.as_deref().is_some_and(|v| !v.is_empty()) {
        return set("schema");
    }
    if s.ref_path.as_deref().is_some_and(|v| !v.is_empty()) {
        return set("$ref");
    }
    if s.pattern_properties.as_ref().is_some_and(|m| !m.is_empty()) {
        return set("patternProperties");
    }
    if s.dependencies.as_ref().is_some_and(|m| !m.is_empty()) {
        return set("dependencies");
    }
    if s.additional_items.is_some() {
        return set("additionalItems");
    }
    if s.definitions.as_ref().is_some_and(|m| !m.is_empty()) {
        return set("definitions");
    }
    Ok(())
}

const ITEMS_ARRAY: &str = "OpenAPIV3Schema 'items' must be a schema, but is an array";

fn new_generics(s: &JSONSchemaProps) -> Result<Generic, String> {
    let additional_properties = match &s.additional_properties {
        None => None,
        Some(JSONSchemaPropsOrBool::Schema(schema)) => Some(StructuralOrBool {
            structural: Some(Box::new(Structural::new(schema)?)),
            allows: true,
        }),
        Some(JSONSchemaPropsOrBool::Bool(allows)) => Some(StructuralOrBool {
            structural: None,
            allows: *allows,
        }),
    };
    Ok(Generic {
        type_: s.type_.clone().unwrap_or_default(),
        description: s.description.clone().unwrap_or_default(),
        title: s.title.clone().unwrap_or_default(),
        default: s
            .default
            .as_ref()
            .map(|d| d.0.clone())
            .filter(|d| !d.is_null()),
        nullable: s.nullable.unwrap_or(false),
        additional_properties,
    })
}

fn new_extensions(s: &JSONSchemaProps) -> Result<Extensions, String> {
    if s.x_kubernetes_preserve_unknown_fields == Some(false) {
        return Err(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .to_owned(),
        );
    }
    Ok(Extensions {
        preserve_unknown_fields: s.x_kubernetes_preserve_unknown_fields == Some(true),
        embedded_resource: s.x_kubernetes_embedded_resource.unwrap_or(false),
        int_or_string: s.x_kubernetes_int_or_string.unwrap_or(false),
        list_map_keys: s.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
        list_type: s.x_kubernetes_list_type.clone(),
        map_type: s.x_kubernetes_map_type.clone(),
    })
}

fn new_value_validation(s: &JSONSchemaProps) -> Result<ValueValidation, String> {
    let nested = |list: &Option<Vec<JSONSchemaProps>>| -> Result<Vec<_>, String> {
        list.iter()
            .flatten()
            .map(NestedValueValidation::new)
            .collect()
    };
    Ok(ValueValidation {
        format: s.format.clone().unwrap_or_default(),
        maximum: s.maximum,
        exclusive_maximum: s.exclusive_maximum.unwrap_or(false),
        minimum: s.minimum,
        exclusive_minimum: s.exclusive_minimum.unwrap_or(false),
        max_length: s.max_length,
        min_length: s.min_length,
        pattern: s.pattern.clone().unwrap_or_default(),
        max_items: s.max_items,
        min_items: s.min_items,
        unique_items: s.unique_items.unwrap_or(false),
        multiple_of: s.multiple_of,
        enum_: s.enum_.iter().flatten().map(|e| e.0.clone()).collect(),
        max_properties: s.max_properties,
        min_properties: s.min_properties,
        required: s.required.clone().unwrap_or_default(),
        all_of: nested(&s.all_of)?,
        one_of: nested(&s.one_of)?,
        any_of: nested(&s.any_of)?,
        not: match &s.not {
            Some(not) => Some(Box::new(NestedValueValidation::new(not)?)),
            None => None,
        },
    })
}

impl NestedValueValidation {
    fn new(s: &JSONSchemaProps) -> Result<Self, String> {
        unsupported_fields(s)?;
        let items = match &s.items {
            None => None,
            Some(JSONSchemaPropsOrArray::Schemas(_)) => return Err(ITEMS_ARRAY.to_owned()),
            Some(JSONSchemaPropsOrArray::Schema(item)) => {
                Some(Box::new(NestedValueValidation::new(item)?))
            }
        };
        let mut properties = BTreeMap::new();
        for (name, prop) in s.properties.iter().flatten() {
            properties.insert(name.clone(), NestedValueValidation::new(prop)?);
        }
        let additional_properties = match &s.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(schema)) => {
                Some(Box::new(NestedValueValidation::new(schema)?))
            }
            Some(JSONSchemaPropsOrBool::Bool(_)) => Some(Box::default()),
            None => None,
        };
        let mut forbidden_generics = new_generics(s)?;
        forbidden_generics.additional_properties = None;
        Ok(NestedValueValidation {
            validation: new_value_validation(s)?,
            items,
            properties,
            additional_properties,
            x_validations: s.x_kubernetes_validations.clone().unwrap_or_default(),
            forbidden_generics,
            forbidden_extensions: new_extensions(s)?,
        })
    }
}

impl Structural {
    /// Converts a CRD's OpenAPI v3 schema (upstream `NewStructural`). Fails, with upstream's
    /// message, on what a structural schema cannot express (`$ref`, `patternProperties`,
    /// `items` as an array, ...); CRD validation reports those fields first.
    pub fn new(s: &JSONSchemaProps) -> Result<Self, String> {
        unsupported_fields(s)?;
        let items = match &s.items {
            None => None,
            Some(JSONSchemaPropsOrArray::Schemas(_)) => return Err(ITEMS_ARRAY.to_owned()),
            Some(JSONSchemaPropsOrArray::Schema(item)) => Some(Box::new(Structural::new(item)?)),
        };
        let mut properties = BTreeMap::new();
        for (name, prop) in s.properties.iter().flatten() {
            properties.insert(name.clone(), Structural::new(prop)?);
        }
        Ok(Structural {
            generic: new_generics(s)?,
            extensions: new_extensions(s)?,
            items,
            properties,
            validation: Some(Box::new(new_value_validation(s)?)),
            x_validations: s.x_kubernetes_validations.clone().unwrap_or_default(),
        })
    }

    /// The schema of `additionalProperties`, when it is a schema.
    pub fn additional_properties_schema(&self) -> Option<&Structural> {
        self.generic
            .additional_properties
            .as_ref()
            .and_then(|a| a.structural.as_deref())
    }

    /// The value validations, empty when unset.
    pub fn value_validation(&self) -> &ValueValidation {
        static EMPTY: std::sync::OnceLock<ValueValidation> = std::sync::OnceLock::new();
        self.validation
            .as_deref()
            .unwrap_or_else(|| EMPTY.get_or_init(ValueValidation::default))
    }

    /// The schema of field `name` of an object: its property, else `additionalProperties`.
    pub fn field_schema(&self, name: &str) -> Option<&Structural> {
        self.properties
            .get(name)
            .or_else(|| self.additional_properties_schema())
    }

    /// A copy whose root is treated as a resource (`x-kubernetes-embedded-resource`), as
    /// upstream does for the root of a custom resource.
    pub(crate) fn as_resource_root(&self) -> std::borrow::Cow<'_, Structural> {
        if self.extensions.embedded_resource {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut clone = self.clone();
            clone.extensions.embedded_resource = true;
            std::borrow::Cow::Owned(clone)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn int_or_string_pair(list: &[NestedValueValidation]) -> bool {
    let only_type = |n: &NestedValueValidation, t: &str| {
        let expected = NestedValueValidation {
            forbidden_generics: Generic {
                type_: t.to_owned(),
                ..Generic::default()
            },
            ..NestedValueValidation::default()
        };
        *n == expected
    };
    list.len() == 2 && only_type(&list[0], "integer") && only_type(&list[1], "string")
}

fn is_int_or_string_any_of(s: &Structural) -> bool {
    s.validation
        .as_deref()
        .is_some_and(|v| int_or_string_pair(&v.any_of))
}

fn is_int_or_string_all_of(s: &Structural) -> bool {
    s.validation.as_deref().is_some_and(|v| {
        v.all_of
            .first()
            .is_some_and(|a| int_or_string_pair(&a.validation.any_of))
    })
}

/// Upstream `ValidateStructural`: the invariants of a structural schema, the completeness
/// of value validations and the metadata restrictions, as field errors under `path`
/// (e.g. `spec.versions[0].schema.openAPIV3Schema`), sorted by their text as upstream
/// sorts them.
pub fn validate_structural(path: &Path, s: &Structural) -> ErrorList {
    let mut errs = invariants(s, Level::Root, path);
    if let Some(v) = s.validation.as_deref() {
        errs.extend(completeness(v, s, path, path));
    }
    errs.sort_by_key(ToString::to_string);
    errs
}

fn invariants(s: &Structural, level: Level, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if s.generic.type_ == "array" && s.items.is_none() {
        errs.push(FieldError::required(
            &path.child("items"),
            "must be specified",
        ));
    }
    if let Some(items) = &s.items {
        errs.extend(invariants(items, Level::Item, &path.child("items")));
    }
    for (name, prop) in &s.properties {
        errs.extend(invariants(
            prop,
            Level::Field,
            &path.child("properties").key(name),
        ));
    }
    if let Some(additional) = &s.generic.additional_properties {
        if level == Level::Root {
            errs.push(FieldError::forbidden(
                &path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(schema) = &additional.structural {
            errs.extend(invariants(
                schema,
                Level::Field,
                &path.child("additionalProperties"),
            ));
        }
    }
    let x = &s.extensions;
    if x.int_or_string && x.preserve_unknown_fields {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if x.int_or_string && x.embedded_resource {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if let Some(v) = s.validation.as_deref() {
        errs.extend(value_validation(
            v,
            is_int_or_string_any_of(s),
            is_int_or_string_all_of(s),
            path,
        ));
    }
    let check_metadata = level == Level::Root || x.embedded_resource;
    let type_ = s.generic.type_.as_str();
    if x.embedded_resource && type_ != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if type_.is_empty() {
            FieldError::required(&path.child("type"), detail)
        } else {
            FieldError::invalid(&path.child("type"), type_, detail)
        });
    } else if type_.is_empty() && !x.int_or_string && !x.preserve_unknown_fields {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(&path.child("type"), detail));
    }
    if x.embedded_resource && s.generic.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !type_.is_empty() && type_ != "object" {
        errs.push(FieldError::invalid(
            &path.child("type"),
            type_,
            "must be object at the root",
        ));
    }
    for meta_field in ["kind", "apiVersion"] {
        if let Some(prop) = s.properties.get(meta_field)
            && check_metadata
            && prop.generic.type_ != "string"
        {
            errs.push(FieldError::invalid(
                &path.child("properties").key(meta_field).child("type"),
                prop.generic.type_.as_str(),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = s.properties.get("metadata") {
        errs.extend(metadata_invariants(
            metadata,
            check_metadata,
            level,
            &path.child("properties").key("metadata"),
        ));
    }
    if x.embedded_resource && !x.preserve_unknown_fields && s.properties.is_empty() {
        errs.push(FieldError::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without \
             x-kubernetes-preserve-unknown-fields",
        ));
    }
    errs
}

fn metadata_invariants(s: &Structural, check: bool, level: Level, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if check && s.generic.type_ != "object" {
        errs.push(FieldError::invalid(
            &path.child("type"),
            s.generic.type_.as_str(),
            "must be object",
        ));
    }
    if level == Level::Root {
        // Only name and generateName may be restricted; the type and default are checked
        // elsewhere.
        let mut rest = s.clone();
        let name = rest.properties.contains_key("name");
        let generate_name = rest.properties.contains_key("generateName");
        let only_names = (name && generate_name && rest.properties.len() == 2)
            || ((name || generate_name) && rest.properties.len() == 1);
        if only_names {
            rest.properties.clear();
        }
        rest.generic.type_.clear();
        rest.generic.default = None;
        let validation_empty = rest
            .validation
            .as_deref()
            .is_none_or(ValueValidation::is_empty);
        rest.validation = None;
        if !validation_empty || rest != Structural::default() {
            errs.push(FieldError::forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is \
                 implicitly specified",
            ));
        }
    }
    errs
}

fn value_validation(
    v: &ValueValidation,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            errs.extend(nested_value_validation(
                n,
                false,
                &path.child("anyOf").index(i),
                false,
            ));
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        errs.extend(nested_value_validation(
            n,
            skip,
            &path.child("allOf").index(i),
            true,
        ));
    }
    for (i, n) in v.one_of.iter().enumerate() {
        errs.extend(nested_value_validation(
            n,
            false,
            &path.child("oneOf").index(i),
            false,
        ));
    }
    if let Some(not) = &v.not {
        errs.extend(nested_value_validation(
            not,
            false,
            &path.child("not"),
            false,
        ));
    }
    if !v.pattern.is_empty()
        && let Err(why) = super::formats::compile_check(&v.pattern)
    {
        errs.push(FieldError::invalid(
            &path.child("pattern"),
            v.pattern.as_str(),
            format!("must be a valid regular expression, but isn't: {why}"),
        ));
    }
    errs
}

fn nested_value_validation(
    v: &NestedValueValidation,
    skip_any_of: bool,
    path: &Path,
    _all_of: bool,
) -> ErrorList {
    let mut errs = value_validation(&v.validation, skip_any_of, false, path);
    if let Some(items) = &v.items {
        errs.extend(nested_value_validation(
            items,
            false,
            &path.child("items"),
            false,
        ));
    }
    for (name, prop) in &v.properties {
        errs.extend(nested_value_validation(
            prop,
            false,
            &path.child("properties").key(name),
            false,
        ));
    }
    let g = &v.forbidden_generics;
    let x = &v.forbidden_extensions;
    if !g.type_.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("type"),
            "must be empty to be structural",
        ));
    }
    if v.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if g.default.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("default"),
            "must be undefined to be structural",
        ));
    }
    if !g.title.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("title"),
            "must be empty to be structural",
        ));
    }
    if !g.description.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("description"),
            "must be empty to be structural",
        ));
    }
    if g.nullable {
        errs.push(FieldError::forbidden(
            &path.child("nullable"),
            "must be false to be structural",
        ));
    }
    if x.preserve_unknown_fields {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            "must be false to be structural",
        ));
    }
    if x.embedded_resource {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-embedded-resource"),
            "must be false to be structural",
        ));
    }
    if x.int_or_string {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-int-or-string"),
            "must be false to be structural",
        ));
    }
    if !x.list_map_keys.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    if x.list_type.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-list-type"),
            "must be undefined to be structural",
        ));
    }
    if x.map_type.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-map-type"),
            "must be undefined to be structural",
        ));
    }
    if !v.x_validations.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if v.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
    errs
}

fn completeness(v: &ValueValidation, s: &Structural, s_path: &Path, v_path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if let Some(not) = &v.not {
        errs.extend(nested_completeness(
            not,
            Some(s),
            s_path,
            &v_path.child("not"),
        ));
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            errs.extend(nested_completeness(
                n,
                Some(s),
                s_path,
                &v_path.child(name).index(i),
            ));
        }
    }
    errs
}

fn nested_completeness(
    v: &NestedValueValidation,
    s: Option<&Structural>,
    s_path: &Path,
    v_path: &Path,
) -> ErrorList {
    let Some(s) = s else {
        return vec![FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        )];
    };
    let mut errs = completeness(&v.validation, s, s_path, v_path);
    if let Some(items) = &v.items {
        errs.extend(nested_completeness(
            items,
            s.items.as_deref(),
            &s_path.child("items"),
            &v_path.child("items"),
        ));
    }
    for (name, prop) in &v.properties {
        let v_prop = v_path.child("properties").key(name);
        match s.properties.get(name) {
            Some(s_prop) => errs.extend(nested_completeness(
                prop,
                Some(s_prop),
                &s_path.child("properties").key(name),
                &v_prop,
            )),
            None => errs.push(FieldError::required(
                &s_path.child("properties").key(name),
                format!("because it is defined in {v_prop}"),
            )),
        }
    }
    errs
}

/// Upstream `Structural.Unfold`: spells out `x-kubernetes-int-or-string` as
/// `anyOf: [{type: integer}, {type: string}]` (or prepends that to `allOf` when `anyOf` is
/// taken), as published OpenAPI does.
pub fn unfold(s: &mut Structural) {
    if s.extensions.int_or_string && !is_int_or_string_any_of(s) && !is_int_or_string_all_of(s) {
        let typed = |t: &str| NestedValueValidation {
            forbidden_generics: Generic {
                type_: t.to_owned(),
                ..Generic::default()
            },
            ..NestedValueValidation::default()
        };
        let pair = vec![typed("integer"), typed("string")];
        let v = s.validation.get_or_insert_with(Box::default);
        if v.any_of.is_empty() {
            v.any_of = pair;
        } else {
            v.all_of.insert(
                0,
                NestedValueValidation {
                    validation: ValueValidation {
                        any_of: pair,
                        ..ValueValidation::default()
                    },
                    ..NestedValueValidation::default()
                },
            );
        }
    }
    if let Some(items) = s.items.as_deref_mut() {
        unfold(items);
    }
    for prop in s.properties.values_mut() {
        unfold(prop);
    }
    if let Some(a) = s.generic.additional_properties.as_mut()
        && let Some(schema) = a.structural.as_deref_mut()
    {
        unfold(schema);
    }
}
