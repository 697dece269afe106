//! Validation of CustomResourceDefinitions (upstream
//! `pkg/apis/apiextensions/validation/validation.go`), run on the internal form that the
//! v1 object converts to: per-version schemas, subresources, printer columns and selectable
//! fields that are identical in every version are hoisted to the spec (so their errors
//! read `spec.validation.openAPIV3Schema...`, `spec.subresources...`,
//! `spec.additionalPrinterColumns[0]...`), and the conversion webhook is
//! `spec.conversion.webhookClientConfig` / `spec.conversion.conversionReviewVersions`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceConversion, CustomResourceDefinition,
    CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool, SelectableField,
};
use serde_json::Value;

use super::defaulting;
use super::structural::{self, Structural};
use super::validate::{schema_errors, validate_embedded};
use crate::admissionregistration::webhooks::{validate_webhook_service, validate_webhook_url};
use crate::field::{ErrorList, ErrorType, FieldError, Path};
use crate::meta::validate_immutable_field;
use crate::names::{is_dns1035_label, is_dns1123_subdomain};
use crate::validation::json;

const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const PRINTER_COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
const OPENAPI_V3_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const MAX_SELECTABLE_FIELDS: usize = 8;
const ACCEPTED_CONVERSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];
const ALLOWED_AT_ROOT: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum \
     ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf \
     Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";
/// The annotation protected groups (`*.k8s.io`, `*.kubernetes.io`) must carry.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

/// What validation requires; relaxed on update when the old object already broke a rule
/// (upstream `validationOptions`), so that stored objects stay updatable.
#[derive(Clone, Copy)]
struct Options {
    require_recognized_conversion_review_version: bool,
    require_immutable_names: bool,
    require_openapi_schema: bool,
    require_valid_property_type: bool,
    require_pruned_defaults: bool,
    require_atomic_set_type: bool,
    require_map_list_keys_map_set_validation: bool,
}

impl Options {
    fn create() -> Self {
        Options {
            require_recognized_conversion_review_version: true,
            require_immutable_names: false,
            require_openapi_schema: true,
            require_valid_property_type: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
        }
    }
}

/// A version as the internal type holds it: the fields hoisted to the spec are `None`.
struct Version<'a> {
    v: &'a CustomResourceDefinitionVersion,
    schema: Option<&'a CustomResourceValidation>,
    subresources: Option<&'a CustomResourceSubresources>,
    columns: &'a [CustomResourceColumnDefinition],
    selectable: &'a [SelectableField],
}

/// The internal spec (upstream `Convert_v1_CustomResourceDefinitionSpec_To_apiextensions`).
struct Internal<'a> {
    spec: &'a CustomResourceDefinitionSpec,
    validation: Option<&'a CustomResourceValidation>,
    subresources: Option<&'a CustomResourceSubresources>,
    columns: &'a [CustomResourceColumnDefinition],
    selectable: &'a [SelectableField],
    versions: Vec<Version<'a>>,
}

fn hoist<'a, T: PartialEq + ?Sized>(
    versions: &'a [CustomResourceDefinitionVersion],
    get: impl Fn(&'a CustomResourceDefinitionVersion) -> &'a T,
) -> Option<&'a T> {
    let first = get(versions.first()?);
    versions.iter().all(|v| get(v) == first).then_some(first)
}

impl<'a> Internal<'a> {
    fn new(spec: &'a CustomResourceDefinitionSpec) -> Self {
        let versions = &spec.versions;
        let schema = hoist(versions, |v| &v.schema);
        let subresources = hoist(versions, |v| &v.subresources);
        let columns = hoist(versions, |v| {
            v.additional_printer_columns.as_deref().unwrap_or_default()
        });
        let selectable = hoist(versions, |v| {
            v.selectable_fields.as_deref().unwrap_or_default()
        });
        Internal {
            spec,
            validation: schema.and_then(Option::as_ref),
            subresources: subresources.and_then(Option::as_ref),
            columns: columns.unwrap_or_default(),
            selectable: selectable.unwrap_or_default(),
            versions: versions
                .iter()
                .map(|v| Version {
                    v,
                    schema: if schema.is_some() {
                        None
                    } else {
                        v.schema.as_ref()
                    },
                    subresources: if subresources.is_some() {
                        None
                    } else {
                        v.subresources.as_ref()
                    },
                    columns: if columns.is_some() {
                        &[]
                    } else {
                        v.additional_printer_columns.as_deref().unwrap_or_default()
                    },
                    selectable: if selectable.is_some() {
                        &[]
                    } else {
                        v.selectable_fields.as_deref().unwrap_or_default()
                    },
                })
                .collect(),
        }
    }

    fn preserve_unknown_fields(&self) -> bool {
        self.spec.preserve_unknown_fields == Some(true)
    }

    fn schemas(&self) -> impl Iterator<Item = &'a JSONSchemaProps> + '_ {
        self.validation
            .into_iter()
            .chain(self.versions.iter().filter_map(|v| v.schema))
            .filter_map(|s| s.open_api_v3_schema.as_ref())
    }

    fn any_status(&self) -> bool {
        has_status(self.subresources) || self.versions.iter().any(|v| has_status(v.subresources))
    }
}

fn has_status(s: Option<&CustomResourceSubresources>) -> bool {
    s.is_some_and(|s| s.status.is_some())
}

/// The `metadata.name` rule: a DNS subdomain equal to `<plural>.<group>`.
fn name_errors(crd: &CustomResourceDefinition) -> ErrorList {
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Vec::new();
    }
    let required = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
    if name == required {
        return Vec::new();
    }
    vec![FieldError::invalid(
        &Path::new("metadata").child("name"),
        name,
        r#"must be spec.names.plural+"."+spec.group"#,
    )]
}

/// `ValidateCustomResourceDefinition`: the name rule (`must be
/// spec.names.plural+"."+spec.group` at `metadata.name`), the spec, the accepted names in
/// the status, the stored versions, the API-approval annotation of protected groups and
/// `spec.preserveUnknownFields` (must not be true). The rest of the metadata (DNS
/// subdomain name, labels, ...) is the registry's generic check. Run after
/// [`super::defaults`] and [`super::prepare_for_create`], as upstream does (the stored
/// versions are set there).
pub fn validate_crd(crd: &CustomResourceDefinition) -> ErrorList {
    let mut errs = name_errors(crd);
    errs.extend(validate_spec(&crd.spec, Options::create()));
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    errs.extend(validate_preserve_unknown_fields(crd, None));
    errs
}

/// `ValidateCustomResourceDefinitionUpdate`: [`validate_crd`]'s checks (relaxed where the
/// old object already broke them), plus immutability: `spec.group` and
/// `spec.names.plural` always, `spec.scope` and `spec.names.kind` once the CRD is
/// Established (`field is immutable`).
pub fn validate_crd_update(
    new: &CustomResourceDefinition,
    old: &CustomResourceDefinition,
) -> ErrorList {
    let old_internal = Internal::new(&old.spec);
    let old_schemas: Vec<&JSONSchemaProps> = old_internal.schemas().collect();
    let all_versions_have_schema = old_internal
        .validation
        .is_some_and(|v| v.open_api_v3_schema.is_some())
        || old.spec.versions.iter().all(|v| {
            v.schema
                .as_ref()
                .is_some_and(|s| s.open_api_v3_schema.is_some())
        });
    let options = Options {
        require_recognized_conversion_review_version: old
            .spec
            .conversion
            .as_ref()
            .and_then(|c| c.webhook.as_ref())
            .is_none_or(|w| {
                w.conversion_review_versions.is_empty()
                    || w.conversion_review_versions
                        .iter()
                        .any(|v| ACCEPTED_CONVERSION_REVIEW_VERSIONS.contains(&v.as_str()))
            }),
        require_immutable_names: is_established(old),
        require_openapi_schema: all_versions_have_schema,
        require_valid_property_type: !old_schemas.iter().any(|s| {
            schema_has(s, &|s| {
                s.type_
                    .as_deref()
                    .is_some_and(|t| !t.is_empty() && !OPENAPI_V3_TYPES.contains(&t))
            })
        }),
        require_pruned_defaults: !old_schemas.iter().any(|s| has_unpruned_defaults(s)),
        require_atomic_set_type: !old_schemas.iter().any(|s| schema_has(s, &non_atomic_set)),
        require_map_list_keys_map_set_validation: !old_schemas.iter().any(|s| {
            schema_has(s, &|s| {
                !map_list_keys_map_set(s, &Path::default()).is_empty()
            })
        }),
    };
    let mut errs = validate_spec(&new.spec, options);
    let spec = Path::new("spec");
    if options.require_immutable_names {
        errs.extend(validate_immutable_field(
            new.spec.scope.as_str(),
            &Value::from(old.spec.scope.as_str()),
            &spec.child("scope"),
        ));
        errs.extend(validate_immutable_field(
            new.spec.names.kind.as_str(),
            &Value::from(old.spec.names.kind.as_str()),
            &spec.child("names").child("kind"),
        ));
    }
    errs.extend(validate_immutable_field(
        new.spec.group.as_str(),
        &Value::from(old.spec.group.as_str()),
        &spec.child("group"),
    ));
    errs.extend(validate_immutable_field(
        new.spec.names.plural.as_str(),
        &Value::from(old.spec.names.plural.as_str()),
        &spec.child("names").child("plural"),
    ));
    errs.extend(validate_status(new));
    errs.extend(validate_stored_versions(new));
    errs.extend(validate_api_approval(new, Some(old)));
    errs.extend(validate_preserve_unknown_fields(new, Some(old)));
    errs
}

/// `ValidateUpdateCustomResourceDefinitionStatus`: the accepted names (the status
/// subresource; metadata is the registry's).
pub fn validate_crd_status_update(
    new: &CustomResourceDefinition,
    _old: &CustomResourceDefinition,
) -> ErrorList {
    validate_status(new)
}

/// Whether the CRD's `Established` condition is `True`.
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

fn validate_status(crd: &CustomResourceDefinition) -> ErrorList {
    match crd.status.as_ref().and_then(|s| s.accepted_names.as_ref()) {
        Some(names) => validate_names(names, &Path::new("status").child("acceptedNames")),
        None => Vec::new(),
    }
}

fn validate_stored_versions(crd: &CustomResourceDefinition) -> ErrorList {
    let path = Path::new("status").child("storedVersions");
    let stored: Vec<String> = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    if stored.is_empty() {
        return vec![FieldError::invalid(
            &path,
            Value::Array(Vec::new()),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    let mut remaining: BTreeMap<&str, usize> = stored
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), i))
        .collect();
    for v in &crd.spec.versions {
        let found = remaining.remove(v.name.as_str()).is_some();
        if v.storage && !found {
            errs.push(FieldError::invalid(
                &path,
                json(&stored),
                format!("must have the storage version {}", v.name),
            ));
        }
    }
    let mut missing: Vec<(usize, &str)> = remaining.into_iter().map(|(v, i)| (i, v)).collect();
    missing.sort();
    for (i, v) in missing {
        errs.push(FieldError::invalid(
            &path.index(i),
            v,
            format!(
                "missing from spec.versions; {v} was previously a storage version, and must \
                 remain in spec.versions until a storage migration ensures no data remains \
                 persisted in {v} and removes {v} from status.storedVersions"
            ),
        ));
    }
    errs
}

fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Approval {
    Invalid,
    Missing,
    Approved,
    Bypassed,
}

fn approval_state(crd: &CustomResourceDefinition) -> (Approval, String) {
    let value = crd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .map(String::as_str)
        .unwrap_or_default();
    if value.is_empty() {
        return (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?}, \
                 see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    if value.starts_with("unapproved") {
        return (Approval::Bypassed, format!("not approved: {value:?}"));
    }
    let url_like = value.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !rest.split('/').next().unwrap_or_default().is_empty()
    });
    if url_like {
        return (Approval::Approved, format!("approved in {value}"));
    }
    (
        Approval::Invalid,
        format!(
            "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?} with \
             either a URL or a reason starting with \"unapproved\", see \
             https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

fn validate_api_approval(
    new: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> ErrorList {
    if !is_protected_group(&new.spec.group) {
        return Vec::new();
    }
    let (state, reason) = approval_state(new);
    if old.is_some_and(|old| approval_state(old).0 == state) {
        return Vec::new();
    }
    let path = Path::new("metadata")
        .child("annotations")
        .key(API_APPROVED_ANNOTATION);
    let value = new
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    match state {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![FieldError::required(&path, reason)],
        Approval::Invalid => vec![FieldError::invalid(&path, value, reason)],
    }
}

fn validate_preserve_unknown_fields(
    new: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> ErrorList {
    if old.is_some_and(|o| o.spec.preserve_unknown_fields == Some(true)) {
        return Vec::new();
    }
    if new.spec.preserve_unknown_fields == Some(true) {
        return vec![FieldError::invalid(
            &Path::new("spec").child("preserveUnknownFields"),
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in \
             spec.versions[*].schema instead",
        )];
    }
    Vec::new()
}

fn join_errors(errs: Vec<String>) -> String {
    errs.join(",")
}

fn validate_spec(spec: &CustomResourceDefinitionSpec, opts: Options) -> ErrorList {
    let internal = Internal::new(spec);
    let path = Path::new("spec");
    let mut errs = Vec::new();

    let group = spec.group.as_str();
    if group.is_empty() {
        errs.push(FieldError::required(&path.child("group"), ""));
    } else {
        let problems = is_dns1123_subdomain(group);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("group"),
                group,
                join_errors(problems),
            ));
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                &path.child("group"),
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    errs.extend(enum_strings(
        &path.child("scope"),
        &spec.scope,
        &["Cluster", "Namespaced"],
    ));

    if opts.require_openapi_schema
        && internal
            .validation
            .is_none_or(|v| v.open_api_v3_schema.is_none())
    {
        for (i, v) in internal.versions.iter().enumerate() {
            if v.schema.is_none_or(|s| s.open_api_v3_schema.is_none()) {
                errs.push(FieldError::required(
                    &path
                        .child("versions")
                        .index(i)
                        .child("schema")
                        .child("openAPIV3Schema"),
                    "schemas are required",
                ));
            }
        }
    }
    if internal
        .schemas()
        .any(|s| schema_has(s, &|s| s.default.is_some()))
        && internal.preserve_unknown_fields()
    {
        errs.push(FieldError::invalid(
            &path.child("preserveUnknownFields"),
            true,
            "must be false in order to use defaults in the schema",
        ));
    }

    let mut storage = 0;
    let mut seen = BTreeSet::new();
    let mut unique = true;
    for (i, version) in internal.versions.iter().enumerate() {
        let v = version.v;
        if v.storage {
            storage += 1;
        }
        if !seen.insert(v.name.as_str()) {
            unique = false;
        }
        let at = path.child("versions").index(i);
        let problems = is_dns1035_label(&v.name);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                &at.child("name"),
                v.name.as_str(),
                join_errors(problems),
            ));
        }
        let status = has_status(version.subresources.or(internal.subresources));
        errs.extend(validate_version(version, &at, status, opts));
    }
    if !unique {
        errs.push(FieldError::invalid(
            &path.child("versions"),
            json(&spec.versions),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            &path.child("versions"),
            json(&spec.versions),
            "must have exactly one version marked as storage version",
        ));
    }
    if let Some(first) = spec.versions.first() {
        let problems = is_dns1035_label(&first.name);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("version"),
                first.name.as_str(),
                join_errors(problems),
            ));
        }
    }

    let names = &spec.names;
    let names_path = path.child("names");
    for (field, value) in [
        ("plural", names.plural.as_str()),
        ("singular", names.singular.as_deref().unwrap_or_default()),
        ("kind", names.kind.as_str()),
        ("listKind", names.list_kind.as_deref().unwrap_or_default()),
    ] {
        if value.is_empty() {
            errs.push(FieldError::required(&names_path.child(field), ""));
        }
    }
    errs.extend(validate_names(names, &names_path));

    errs.extend(validate_schema(
        internal.validation,
        internal.any_status(),
        opts,
        &path.child("validation"),
    ));
    errs.extend(validate_subresources(
        internal.subresources,
        &path.child("subresources"),
    ));
    for (i, column) in internal.columns.iter().enumerate() {
        errs.extend(validate_column(
            column,
            &path.child("additionalPrinterColumns").index(i),
        ));
    }
    if !internal.selectable.is_empty() {
        match internal
            .validation
            .and_then(|v| v.open_api_v3_schema.as_ref())
        {
            None => errs.push(FieldError::invalid(
                &path.child("selectableFields"),
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(schema) => errs.extend(selectable_fields_of(
                schema,
                internal.selectable,
                &path.child("schema.openAPIV3Schema"),
                &path.child("selectableFields"),
            )),
        }
    }

    if let Some(conversion) = &spec.conversion
        && conversion.strategy != "None"
        && internal.preserve_unknown_fields()
    {
        errs.push(FieldError::invalid(
            &path.child("conversion").child("strategy"),
            conversion.strategy.as_str(),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    if let Some(conversion) = &spec.conversion {
        errs.extend(validate_conversion(
            conversion,
            opts,
            &path.child("conversion"),
        ));
    }
    errs
}

fn selectable_fields_of(
    schema: &JSONSchemaProps,
    fields: &[SelectableField],
    schema_path: &Path,
    path: &Path,
) -> ErrorList {
    match Structural::new(schema) {
        Ok(s) => validate_selectable_fields(fields, Some(&s), path),
        Err(why) => {
            let mut errs = vec![FieldError::invalid(schema_path, "", why)];
            errs.extend(validate_selectable_fields(fields, None, path));
            errs
        }
    }
}

fn enum_strings(path: &Path, value: &str, accepted: &[&str]) -> ErrorList {
    if value.is_empty() {
        vec![FieldError::required(path, "")]
    } else if accepted.contains(&value) {
        Vec::new()
    } else {
        vec![FieldError::not_supported(path, value, accepted)]
    }
}

fn validate_version(version: &Version<'_>, path: &Path, status: bool, opts: Options) -> ErrorList {
    let v = version.v;
    let mut errs = Vec::new();
    let deprecated = v.deprecated.unwrap_or(false);
    if let Some(warning) = &v.deprecation_warning {
        let mut problems = Vec::new();
        if !deprecated {
            problems.push("can only be set for deprecated versions".to_owned());
        } else {
            if warning.len() > 256 {
                problems.push("must be <= 256 characters long".to_owned());
            }
            if warning.is_empty() {
                problems.push("must not be an empty string".to_owned());
            }
            if let Some((i, _)) = warning.char_indices().find(|(_, c)| c.is_control()) {
                problems.push(format!(
                    "must only contain printable UTF-8 characters; control character found at \
                     index {i}"
                ));
            }
        }
        for problem in problems {
            errs.push(FieldError::invalid(
                &path.child("deprecationWarning"),
                warning.as_str(),
                problem,
            ));
        }
    }
    errs.extend(validate_schema(
        version.schema,
        status,
        opts,
        &path.child("schema"),
    ));
    errs.extend(validate_subresources(
        version.subresources,
        &path.child("subresources"),
    ));
    for (i, column) in version.columns.iter().enumerate() {
        errs.extend(validate_column(
            column,
            &path.child("additionalPrinterColumns").index(i),
        ));
    }
    if !version.selectable.is_empty() {
        match version.schema.and_then(|s| s.open_api_v3_schema.as_ref()) {
            None => errs.push(FieldError::invalid(
                &path.child("selectableFields"),
                "",
                "selectableFields may only be set when version.schema.openAPIV3Schema is not \
                 included",
            )),
            Some(schema) => errs.extend(selectable_fields_of(
                schema,
                version.selectable,
                &path.child("schema.openAPIV3Schema"),
                &path.child("selectableFields"),
            )),
        }
    }
    errs
}

/// `ValidateCustomResourceDefinitionNames`: DNS-1035 labels, kinds in CamelCase.
fn validate_names(names: &CustomResourceDefinitionNames, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for (field, value) in [
        ("plural", names.plural.as_str()),
        ("singular", names.singular.as_deref().unwrap_or_default()),
    ] {
        let problems = is_dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child(field),
                value,
                join_errors(problems),
            ));
        }
    }
    for (field, value) in [
        ("kind", names.kind.as_str()),
        ("listKind", names.list_kind.as_deref().unwrap_or_default()),
    ] {
        let problems = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child(field),
                value,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    join_errors(problems)
                ),
            ));
        }
    }
    for (i, short) in names.short_names.iter().flatten().enumerate() {
        let problems = is_dns1035_label(short);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("shortNames").index(i),
                short.as_str(),
                join_errors(problems),
            ));
        }
    }
    let list_kind = names.list_kind.as_deref().unwrap_or_default();
    if !names.kind.is_empty() && names.kind == list_kind {
        errs.push(FieldError::invalid(
            &path.child("listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in names.categories.iter().flatten().enumerate() {
        let problems = is_dns1035_label(category);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("categories").index(i),
                category.as_str(),
                join_errors(problems),
            ));
        }
    }
    errs
}

fn validate_column(column: &CustomResourceColumnDefinition, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if column.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
    if column.type_.is_empty() {
        errs.push(FieldError::required(&path.child("type"), types));
    } else if !PRINTER_COLUMN_TYPES.contains(&column.type_.as_str()) {
        errs.push(FieldError::invalid(
            &path.child("type"),
            column.type_.as_str(),
            types,
        ));
    }
    if let Some(format) = column.format.as_deref()
        && !format.is_empty()
        && !PRINTER_COLUMN_FORMATS.contains(&format)
    {
        errs.push(FieldError::invalid(
            &path.child("format"),
            format,
            format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(",")),
        ));
    }
    if column.json_path.is_empty() {
        errs.push(FieldError::required(&path.child("JSONPath"), ""));
    } else {
        errs.extend(simple_json_path(&column.json_path, &path.child("JSONPath")));
    }
    errs
}

fn simple_json_path(s: &str, path: &Path) -> ErrorList {
    if s.is_empty() {
        vec![FieldError::invalid(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateCustomResourceDefinitionSubresources`: the scale subresource's paths.
fn validate_subresources(sub: Option<&CustomResourceSubresources>, path: &Path) -> ErrorList {
    let Some(scale) = sub.and_then(|s| s.scale.as_ref()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    for (field, value, prefix, under) in [
        (
            "scale.specReplicasPath",
            &scale.spec_replicas_path,
            ".spec.",
            ".spec",
        ),
        (
            "scale.statusReplicasPath",
            &scale.status_replicas_path,
            ".status.",
            ".status",
        ),
    ] {
        let at = path.child(field);
        if value.is_empty() {
            errs.push(FieldError::required(&at, ""));
            continue;
        }
        let problems = simple_json_path(value, &at);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !value.starts_with(prefix) {
            errs.push(FieldError::invalid(
                &at,
                value.as_str(),
                format!("should be a json path under {under}"),
            ));
        }
    }
    if let Some(selector) = scale.label_selector_path.as_deref()
        && !selector.is_empty()
    {
        let at = path.child("scale.labelSelectorPath");
        let problems = simple_json_path(selector, &at);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(FieldError::invalid(
                &at,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// Upstream `cel.ValidFieldPath`: a path of `.name` and `['name']` steps through the
/// schema's properties (or `additionalProperties`), with `[0]` into list items when
/// `allow_arrays`. Returns the printed path and the schema found.
pub(crate) fn valid_field_path<'s>(
    json_path: &str,
    schema: &'s Structural,
    allow_arrays: bool,
) -> Result<(Path, &'s Structural), String> {
    let mut tokens = Vec::new();
    let mut rest = json_path;
    while !rest.is_empty() {
        if rest.starts_with('\'') {
            let end = rest[1..]
                .char_indices()
                .find(|(i, c)| *c == '\'' && !rest[..*i + 1].ends_with('\\'))
                .map(|(i, _)| i + 2)
                .unwrap_or(rest.len());
            tokens.push(&rest[..end]);
            rest = &rest[end..];
        } else if rest.starts_with(['.', '[', ']']) {
            tokens.push(&rest[..1]);
            rest = &rest[1..];
        } else {
            let end = rest.find(['.', '[', ']']).unwrap_or(rest.len());
            tokens.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    let mut path = Path::default();
    let mut current = schema;
    let step = |name: &str, path: &mut Path, current: &mut &'s Structural| -> Result<(), String> {
        if !current.properties.is_empty() {
            *path = path.child(name);
            *current = current
                .properties
                .get(name)
                .ok_or_else(|| "does not refer to a valid field".to_owned())?;
        } else if let Some(additional) = &current.generic.additional_properties {
            *path = path.key(name);
            *current = additional
                .structural
                .as_deref()
                .ok_or_else(|| "does not refer to a valid field".to_owned())?;
        } else {
            return Err("does not refer to a valid field".to_owned());
        }
        Ok(())
    };
    let mut tokens = tokens.into_iter();
    while let Some(tok) = tokens.next() {
        match tok {
            "[" => {
                let inner = tokens.next().ok_or("unexpected end of JSON path")?;
                if allow_arrays
                    && let Ok(index) = inner.parse::<usize>()
                    && let Some(items) = current.items.as_deref()
                {
                    path = path.index(index);
                    current = items;
                } else {
                    if inner.len() < 2 || !inner.starts_with('\'') || !inner.ends_with('\'') {
                        return Err(format!("expected single quoted string but got {inner}"));
                    }
                    let unescaped = inner[1..inner.len() - 1].replace("\\'", "'");
                    step(&unescaped, &mut path, &mut current)?;
                }
                match tokens.next() {
                    Some("]") => {}
                    Some(other) => return Err(format!("expected ] but got {other}")),
                    None => return Err("unexpected end of JSON path".to_owned()),
                }
            }
            "." => {
                let name = tokens.next().ok_or("unexpected end of JSON path")?;
                step(name, &mut path, &mut current)?;
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((path, current))
}

/// `ValidateCustomResourceSelectableFields`: paths to string, integer or boolean fields
/// of the schema, not in metadata, unique, at most 8.
fn validate_selectable_fields(
    fields: &[SelectableField],
    schema: Option<&Structural>,
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    let mut unique = BTreeSet::new();
    for (i, field) in fields.iter().enumerate() {
        let at = path.index(i).child("jsonPath");
        if field.json_path.is_empty() {
            errs.push(FieldError::required(&at, ""));
            continue;
        }
        let found = match schema {
            Some(s) => valid_field_path(&field.json_path, s, false),
            None => Err("does not refer to a valid field".to_owned()),
        };
        let (found_path, found_schema) = match found {
            Ok(found) => found,
            Err(why) => {
                errs.push(FieldError::invalid(
                    &at,
                    field.json_path.as_str(),
                    format!("is an invalid path: {why}"),
                ));
                continue;
            }
        };
        let printed = found_path.to_string();
        if printed.split(['.', '[']).next() == Some("metadata") {
            errs.push(FieldError::invalid(
                &at,
                field.json_path.as_str(),
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            found_schema.generic.type_.as_str(),
            "string" | "boolean" | "integer"
        ) {
            errs.push(FieldError::invalid(
                &at,
                field.json_path.as_str(),
                "must point to a field of type string, boolean or integer. Enum string fields \
                 and strings with formats are allowed.",
            ));
        }
        if !unique.insert(printed) {
            errs.push(FieldError::duplicate(&at, field.json_path.as_str()));
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError {
            kind: ErrorType::TooMany,
            field: path.clone(),
            value: Some(Value::from(unique.len())),
            detail: format!("must have at most {MAX_SELECTABLE_FIELDS} items"),
        });
    }
    errs
}

fn validate_conversion(
    conversion: &CustomResourceConversion,
    opts: Options,
    path: &Path,
) -> ErrorList {
    let mut errs = enum_strings(
        &path.child("strategy"),
        &conversion.strategy,
        &["None", "Webhook"],
    );
    let client_config = conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] = conversion
        .webhook
        .as_ref()
        .map(|w| w.conversion_review_versions.as_slice())
        .unwrap_or_default();
    let config_path = path.child("webhookClientConfig");
    if conversion.strategy == "Webhook" {
        match client_config {
            None => errs.push(FieldError::required(
                &config_path,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => match (&cc.url, &cc.service) {
                (Some(url), None) => {
                    errs.extend(validate_webhook_url(url, &config_path.child("url")))
                }
                (None, Some(service)) => errs.extend(validate_webhook_service(
                    &service.namespace,
                    &service.name,
                    service.path.as_deref(),
                    service.port.unwrap_or(443),
                    &config_path.child("service"),
                )),
                _ => errs.push(FieldError::required(
                    &config_path,
                    "exactly one of url or service is required",
                )),
            },
        }
        let versions_path = path.child("conversionReviewVersions");
        if review_versions.is_empty() {
            errs.push(FieldError::required(&versions_path, ""));
        } else {
            let mut seen = BTreeSet::new();
            let mut accepted = false;
            for (i, v) in review_versions.iter().enumerate() {
                if !seen.insert(v.as_str()) {
                    errs.push(FieldError::invalid(
                        &versions_path.index(i),
                        v.as_str(),
                        "duplicate version",
                    ));
                    continue;
                }
                for problem in is_dns1035_label(v) {
                    errs.push(FieldError::invalid(
                        &versions_path.index(i),
                        v.as_str(),
                        problem,
                    ));
                }
                accepted |= ACCEPTED_CONVERSION_REVIEW_VERSIONS.contains(&v.as_str());
            }
            if opts.require_recognized_conversion_review_version && !accepted {
                errs.push(FieldError::invalid(
                    &versions_path,
                    json(&review_versions),
                    format!(
                        "must include at least one of {}",
                        ACCEPTED_CONVERSION_REVIEW_VERSIONS.join(", ")
                    ),
                ));
            }
        }
    } else {
        if client_config.is_some() {
            errs.push(FieldError::forbidden(
                &config_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// Whether `pred` holds anywhere in the schema (upstream `SchemaHas`).
fn schema_has(s: &JSONSchemaProps, pred: &dyn Fn(&JSONSchemaProps) -> bool) -> bool {
    if pred(s) {
        return true;
    }
    let children = children(s);
    children.into_iter().any(|c| schema_has(c, pred))
}

fn children(s: &JSONSchemaProps) -> Vec<&JSONSchemaProps> {
    let mut out: Vec<&JSONSchemaProps> = Vec::new();
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => out.push(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => out.extend(items.iter()),
        None => {}
    }
    for list in [&s.all_of, &s.any_of, &s.one_of] {
        out.extend(list.iter().flatten());
    }
    out.extend(s.not.as_deref());
    out.extend(s.properties.iter().flat_map(|m| m.values()));
    for v in [&s.additional_properties, &s.additional_items] {
        if let Some(JSONSchemaPropsOrBool::Schema(schema)) = v {
            out.push(schema);
        }
    }
    out.extend(s.pattern_properties.iter().flat_map(|m| m.values()));
    out.extend(s.definitions.iter().flat_map(|m| m.values()));
    out
}

fn non_atomic_set(s: &JSONSchemaProps) -> bool {
    if s.x_kubernetes_list_type.as_deref() != Some("set") {
        return false;
    }
    let Some(JSONSchemaPropsOrArray::Schema(items)) = &s.items else {
        return false;
    };
    match items.type_.as_deref() {
        Some("array") => items
            .x_kubernetes_list_type
            .as_deref()
            .is_some_and(|t| t != "atomic"),
        Some("object") => items.x_kubernetes_map_type.as_deref() != Some("atomic"),
        _ => false,
    }
}

fn has_unpruned_defaults(schema: &JSONSchemaProps) -> bool {
    if !schema_has(schema, &|s| s.default.is_some()) {
        return false;
    }
    let Ok(s) = Structural::new(schema) else {
        return false;
    };
    if !structural::validate_structural(&Path::default(), &s).is_empty() {
        return false;
    }
    !validate_defaults(&Path::default(), &s, true)
        .iter()
        .all(|e| e.detail != "must not have unknown fields")
}

/// Upstream `structuraldefaulting.ValidateDefaults` for the root of a CRD schema: every
/// default must validate against its schema and, when `require_pruned`, must not carry
/// fields that pruning would drop (`must not have unknown fields`).
fn validate_defaults(path: &Path, s: &Structural, require_pruned: bool) -> ErrorList {
    let root = s.as_resource_root();
    defaults_level(path, &root, false, require_pruned)
}

fn defaults_level(
    path: &Path,
    s: &Structural,
    inside_meta: bool,
    require_pruned: bool,
) -> ErrorList {
    let inside_meta = inside_meta && !s.extensions.embedded_resource;
    let mut errs = Vec::new();
    if let Some(default) = &s.generic.default {
        let at = path.child("default");
        if inside_meta {
            errs.extend(schema_errors(s, default, &at, false));
        } else {
            if require_pruned {
                let mut pruned = default.clone();
                if s.extensions.embedded_resource {
                    defaulting::prune(s, &mut pruned);
                } else {
                    defaulting::prune_plain(s, &mut pruned);
                }
                if &pruned != default {
                    errs.push(FieldError::invalid(
                        &at,
                        default.clone(),
                        "must not have unknown fields",
                    ));
                }
            }
            let meta_errs = validate_embedded(s, default, &at);
            if meta_errs.is_empty() {
                errs.extend(schema_errors(s, default, &at, false));
            } else {
                errs.extend(meta_errs);
            }
        }
    }
    if let Some(items) = s.items.as_deref() {
        errs.extend(defaults_level(
            &path.child("items"),
            items,
            inside_meta,
            require_pruned,
        ));
    }
    for (name, prop) in &s.properties {
        let meta = s.extensions.embedded_resource
            && matches!(name.as_str(), "metadata" | "apiVersion" | "kind");
        errs.extend(defaults_level(
            &path.child("properties").key(name),
            prop,
            inside_meta || meta,
            require_pruned,
        ));
    }
    errs
}

/// `validateCustomResourceDefinitionValidation` for one schema (top-level or a version's).
fn validate_schema(
    validation: Option<&CustomResourceValidation>,
    status: bool,
    opts: Options,
    path: &Path,
) -> ErrorList {
    let Some(schema) = validation.and_then(|v| v.open_api_v3_schema.as_ref()) else {
        return Vec::new();
    };
    let schema_path = path.child("openAPIV3Schema");
    let mut errs = Vec::new();
    if status {
        errs.extend(root_fields_with_status(schema, path, &schema_path));
    }
    if schema.nullable == Some(true) {
        errs.push(FieldError::forbidden(
            &path.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut init_errs = Vec::new();
    match Structural::new(schema) {
        Err(why) => init_errs.push(FieldError::invalid(&schema_path, "", why)),
        Ok(s) => {
            let structural_errs = structural::validate_structural(&schema_path, &s);
            if !structural_errs.is_empty() {
                errs.extend(structural_errs);
            } else {
                errs.extend(validate_defaults(
                    &schema_path,
                    &s,
                    opts.require_pruned_defaults,
                ));
            }
        }
    }
    let checker = SchemaChecker {
        opts,
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_resource_meta: false,
    };
    errs.extend(checker.check(schema, &schema_path, true));
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

/// The fields of the internal `JSONSchemaProps` that are set, in the Go struct's order.
fn set_fields(s: &JSONSchemaProps) -> Vec<&'static str> {
    let some_str = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let some_vec = |v: bool| v;
    let checks: [(&str, bool); 44] = [
        ("ID", some_str(&s.id)),
        ("Schema", some_str(&s.schema)),
        ("Ref", s.ref_path.is_some()),
        ("Description", some_str(&s.description)),
        ("Type", some_str(&s.type_)),
        ("Nullable", s.nullable == Some(true)),
        ("Format", some_str(&s.format)),
        ("Title", some_str(&s.title)),
        ("Default", s.default.is_some()),
        ("Maximum", s.maximum.is_some()),
        ("ExclusiveMaximum", s.exclusive_maximum == Some(true)),
        ("Minimum", s.minimum.is_some()),
        ("ExclusiveMinimum", s.exclusive_minimum == Some(true)),
        ("MaxLength", s.max_length.is_some()),
        ("MinLength", s.min_length.is_some()),
        ("Pattern", some_str(&s.pattern)),
        ("MaxItems", s.max_items.is_some()),
        ("MinItems", s.min_items.is_some()),
        ("UniqueItems", s.unique_items == Some(true)),
        ("MultipleOf", s.multiple_of.is_some()),
        (
            "Enum",
            some_vec(s.enum_.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("MaxProperties", s.max_properties.is_some()),
        ("MinProperties", s.min_properties.is_some()),
        (
            "Required",
            some_vec(s.required.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("Items", s.items.is_some()),
        (
            "AllOf",
            some_vec(s.all_of.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        (
            "OneOf",
            some_vec(s.one_of.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        (
            "AnyOf",
            some_vec(s.any_of.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("Not", s.not.is_some()),
        (
            "Properties",
            some_vec(s.properties.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("AdditionalProperties", s.additional_properties.is_some()),
        (
            "PatternProperties",
            some_vec(s.pattern_properties.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        (
            "Dependencies",
            some_vec(s.dependencies.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("AdditionalItems", s.additional_items.is_some()),
        (
            "Definitions",
            some_vec(s.definitions.as_ref().is_some_and(|v| !v.is_empty())),
        ),
        ("ExternalDocs", s.external_docs.is_some()),
        ("Example", s.example.is_some()),
        (
            "XPreserveUnknownFields",
            s.x_kubernetes_preserve_unknown_fields.is_some(),
        ),
        (
            "XEmbeddedResource",
            s.x_kubernetes_embedded_resource == Some(true),
        ),
        ("XIntOrString", s.x_kubernetes_int_or_string == Some(true)),
        (
            "XListMapKeys",
            some_vec(
                s.x_kubernetes_list_map_keys
                    .as_ref()
                    .is_some_and(|v| !v.is_empty()),
            ),
        ),
        ("XListType", s.x_kubernetes_list_type.is_some()),
        ("XMapType", s.x_kubernetes_map_type.is_some()),
        (
            "XValidations",
            some_vec(
                s.x_kubernetes_validations
                    .as_ref()
                    .is_some_and(|v| !v.is_empty()),
            ),
        ),
    ];
    checks
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| n)
        .collect()
}

fn root_fields_with_status(schema: &JSONSchemaProps, path: &Path, schema_path: &Path) -> ErrorList {
    const ALLOWED: &[&str] = &[
        "Description",
        "Type",
        "Format",
        "Title",
        "Maximum",
        "ExclusiveMaximum",
        "Minimum",
        "ExclusiveMinimum",
        "MaxLength",
        "MinLength",
        "Pattern",
        "MaxItems",
        "MinItems",
        "UniqueItems",
        "MultipleOf",
        "Required",
        "Items",
        "Properties",
        "ExternalDocs",
        "Example",
        "XPreserveUnknownFields",
        "XValidations",
    ];
    for field in set_fields(schema) {
        if field == "Type" {
            let t = schema.type_.as_deref().unwrap_or_default();
            if t != "object" {
                return vec![FieldError::invalid(
                    &path.child("openAPIV3Schema.type"),
                    t,
                    r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                )];
            }
            continue;
        }
        if !ALLOWED.contains(&field) {
            return vec![FieldError::invalid(
                schema_path,
                json(schema),
                format!(
                    "only {ALLOWED_AT_ROOT} fields are allowed at the root of the schema if the \
                     status subresource is enabled"
                ),
            )];
        }
    }
    Vec::new()
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` with `specStandardValidatorV3`.
#[derive(Clone)]
struct SchemaChecker {
    opts: Options,
    allow_defaults: bool,
    disallow_reason: String,
    inside_resource_meta: bool,
}

impl SchemaChecker {
    fn forbid_defaults(&self, reason: String) -> Self {
        SchemaChecker {
            allow_defaults: false,
            disallow_reason: reason,
            ..self.clone()
        }
    }

    fn standard(&self, s: &JSONSchemaProps, path: &Path) -> ErrorList {
        let mut errs = Vec::new();
        let type_ = s.type_.as_deref().unwrap_or_default();
        if self.opts.require_valid_property_type
            && !type_.is_empty()
            && !OPENAPI_V3_TYPES.contains(&type_)
        {
            errs.push(FieldError::not_supported(
                &path.child("type"),
                type_,
                OPENAPI_V3_TYPES,
            ));
        }
        if s.default.is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_owned();
            if !self.disallow_reason.is_empty() {
                detail.push(' ');
                detail.push_str(&self.disallow_reason);
            }
            errs.push(FieldError::forbidden(&path.child("default"), detail));
        }
        let forbidden = [
            (
                "id",
                s.id.as_deref().is_some_and(|v| !v.is_empty()),
                "id is not supported",
            ),
            (
                "additionalItems",
                s.additional_items.is_some(),
                "additionalItems is not supported",
            ),
            (
                "patternProperties",
                s.pattern_properties.as_ref().is_some_and(|m| !m.is_empty()),
                "patternProperties is not supported",
            ),
            (
                "definitions",
                s.definitions.as_ref().is_some_and(|m| !m.is_empty()),
                "definitions is not supported",
            ),
            (
                "dependencies",
                s.dependencies.is_some(),
                "dependencies is not supported",
            ),
            ("$ref", s.ref_path.is_some(), "$ref is not supported"),
            (
                "type",
                type_ == "null",
                "type cannot be set to null, use nullable as an alternative",
            ),
            (
                "items",
                matches!(s.items, Some(JSONSchemaPropsOrArray::Schemas(_))),
                "items must be a schema object and not an array",
            ),
            (
                "x-kubernetes-embedded-resource",
                self.inside_resource_meta && s.x_kubernetes_embedded_resource == Some(true),
                "must not be used inside of resource meta",
            ),
        ];
        for (field, set, detail) in forbidden {
            if set {
                errs.push(FieldError::forbidden(&path.child(field), detail));
            }
        }
        errs
    }

    fn check(&self, s: &JSONSchemaProps, path: &Path, is_root: bool) -> ErrorList {
        let mut errs = self.standard(s, path);
        if s.unique_items == Some(true) {
            errs.push(FieldError::forbidden(
                &path.child("uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ));
        }
        let has_properties = s.properties.as_ref().is_some_and(|p| !p.is_empty());
        if let Some(additional) = &s.additional_properties {
            let restricts = matches!(
                additional,
                JSONSchemaPropsOrBool::Bool(false) | JSONSchemaPropsOrBool::Schema(_)
            );
            if has_properties && restricts {
                errs.push(FieldError::forbidden(
                    &path.child("additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                ));
            }
            if let JSONSchemaPropsOrBool::Schema(schema) = additional {
                let sub = if self.inside_resource_meta {
                    self.forbid_defaults(
                        "inside additionalProperties applying to object metadata".to_owned(),
                    )
                } else {
                    self.clone()
                };
                errs.extend(sub.check(schema, &path.child("additionalProperties"), false));
            }
        }
        let embedded = s.x_kubernetes_embedded_resource == Some(true);
        for (name, prop) in s.properties.iter().flatten() {
            let mut sub = self.clone();
            if (is_root || embedded) && matches!(name.as_str(), "metadata" | "kind" | "apiVersion")
            {
                sub.inside_resource_meta = true;
                if is_root {
                    sub = sub.forbid_defaults(format!("in top-level {name}"));
                }
            }
            errs.extend(sub.check(prop, &path.child("properties").key(name), false));
        }
        if let Some(not) = &s.not {
            errs.extend(self.check(not, &path.child("not"), false));
        }
        for (field, list) in [
            ("allOf", &s.all_of),
            ("oneOf", &s.one_of),
            ("anyOf", &s.any_of),
        ] {
            for (i, sub) in list.iter().flatten().enumerate() {
                errs.extend(self.check(sub, &path.child(field).index(i), false));
            }
        }
        for (name, def) in s.definitions.iter().flatten() {
            errs.extend(self.check(def, &path.child("definitions").key(name), false));
        }
        match &s.items {
            Some(JSONSchemaPropsOrArray::Schema(item)) => {
                errs.extend(self.check(item, &path.child("items"), false));
            }
            Some(JSONSchemaPropsOrArray::Schemas(items)) => {
                for (i, item) in items.iter().enumerate() {
                    errs.extend(self.check(item, &path.child("items").index(i), false));
                }
            }
            None => {}
        }
        for (name, dep) in s.dependencies.iter().flatten() {
            if let k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrStringArray::Schema(schema) = dep {
                errs.extend(self.check(schema, &path.child("dependencies").key(name), false));
            }
        }
        errs.extend(self.extensions(s, path));
        errs
    }

    fn extensions(&self, s: &JSONSchemaProps, path: &Path) -> ErrorList {
        let mut errs = Vec::new();
        let type_ = s.type_.as_deref().unwrap_or_default();
        if s.x_kubernetes_preserve_unknown_fields == Some(false) {
            errs.push(FieldError::invalid(
                &path.child("x-kubernetes-preserve-unknown-fields"),
                false,
                "must be true or undefined",
            ));
        }
        let type_must_be = |errs: &mut ErrorList, expected: &str, detail: &str| {
            if type_ != expected {
                errs.push(if type_.is_empty() {
                    FieldError::required(&path.child("type"), detail)
                } else {
                    FieldError::invalid(&path.child("type"), type_, detail)
                });
                true
            } else {
                false
            }
        };
        if let Some(map_type) = s.x_kubernetes_map_type.as_deref() {
            type_must_be(
                &mut errs,
                "object",
                "must be object if x-kubernetes-map-type is specified",
            );
            if map_type != "atomic" && map_type != "granular" {
                errs.push(FieldError::not_supported(
                    &path.child("x-kubernetes-map-type"),
                    map_type,
                    &["atomic", "granular"],
                ));
            }
        }
        let list_type = s.x_kubernetes_list_type.as_deref();
        let item = match &s.items {
            Some(JSONSchemaPropsOrArray::Schema(item)) => Some(item.as_ref()),
            _ => None,
        };
        if let Some(lt) = list_type {
            let wrong = type_must_be(
                &mut errs,
                "array",
                "must be array if x-kubernetes-list-type is specified",
            );
            if !wrong
                && self.opts.require_atomic_set_type
                && lt == "set"
                && let Some(item) = item
            {
                match item.type_.as_deref() {
                    Some("array") => {
                        if let Some(inner) = item.x_kubernetes_list_type.as_deref()
                            && inner != "atomic"
                        {
                            errs.push(FieldError::invalid(
                                &path.child("items").child("x-kubernetes-list-type"),
                                inner,
                                "must be atomic as item of a list with x-kubernetes-list-type=set",
                            ));
                        }
                    }
                    Some("object") if item.x_kubernetes_map_type.as_deref() != Some("atomic") => {
                        errs.push(FieldError::invalid(
                            &path.child("items").child("x-kubernetes-map-type"),
                            json(&item.x_kubernetes_list_type),
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                    _ => {}
                }
            }
            if !matches!(lt, "atomic" | "set" | "map") {
                errs.push(FieldError::not_supported(
                    &path.child("x-kubernetes-list-type"),
                    lt,
                    &["atomic", "set", "map"],
                ));
            }
        }
        let keys = s.x_kubernetes_list_map_keys.as_deref().unwrap_or_default();
        if !keys.is_empty() {
            let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
            match list_type {
                None => errs.push(FieldError::required(
                    &path.child("x-kubernetes-list-type"),
                    detail,
                )),
                Some("map") => {}
                Some(other) => errs.push(FieldError::invalid(
                    &path.child("x-kubernetes-list-type"),
                    other,
                    detail,
                )),
            }
        }
        if list_type == Some("map") {
            if keys.is_empty() {
                errs.push(FieldError::required(
                    &path.child("x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            match &s.items {
                None => errs.push(FieldError::required(
                    &path.child("items"),
                    "must have a schema if x-kubernetes-list-type is map",
                )),
                Some(JSONSchemaPropsOrArray::Schemas(items)) => errs.push(FieldError::invalid(
                    &path.child("items"),
                    json(items),
                    "must only have a single schema if x-kubernetes-list-type is map",
                )),
                Some(JSONSchemaPropsOrArray::Schema(item)) => {
                    let item_type = item.type_.as_deref().unwrap_or_default();
                    if item_type != "object" {
                        errs.push(FieldError::invalid(
                            &path.child("items").child("type"),
                            item_type,
                            "must be object if parent array's x-kubernetes-list-type is map",
                        ));
                    } else {
                        let mut seen = BTreeSet::new();
                        for key in keys {
                            match item.properties.as_ref().and_then(|p| p.get(key)) {
                                Some(prop) => {
                                    if matches!(prop.type_.as_deref(), Some("array" | "object")) {
                                        errs.push(FieldError::invalid(
                                            &path.child("items").child("properties").key(key).child("type"),
                                            item_type,
                                            "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                        ));
                                    }
                                }
                                None => errs.push(FieldError::invalid(
                                    &path.child("x-kubernetes-list-map-keys"),
                                    json(&keys),
                                    "entries must all be names of item properties",
                                )),
                            }
                            if !seen.insert(key.as_str()) {
                                errs.push(FieldError::invalid(
                                    &path.child("x-kubernetes-list-map-keys"),
                                    json(&keys),
                                    "must not contain duplicate entries",
                                ));
                            }
                        }
                    }
                }
            }
        }
        if self.opts.require_map_list_keys_map_set_validation {
            errs.extend(map_list_keys_map_set(s, path));
        }
        errs.extend(validation_rules(s, path));
        errs
    }
}

/// `validateMapListKeysMapSet`: set and map items not nullable; map keys required or
/// defaulted, and not nullable.
fn map_list_keys_map_set(s: &JSONSchemaProps, path: &Path) -> ErrorList {
    let Some(JSONSchemaPropsOrArray::Schema(item)) = &s.items else {
        return Vec::new();
    };
    let Some(list_type) = s.x_kubernetes_list_type.as_deref() else {
        return Vec::new();
    };
    if list_type != "set" && list_type != "map" {
        return Vec::new();
    }
    let mut errs = Vec::new();
    if item.nullable == Some(true) {
        errs.push(FieldError::forbidden(
            &path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        let required = item.required.as_deref().unwrap_or_default();
        for key in s.x_kubernetes_list_map_keys.iter().flatten() {
            let Some(prop) = item.properties.as_ref().and_then(|p| p.get(key)) else {
                continue;
            };
            let at = path.child("items").child("properties").key(key);
            if !required.contains(key) && prop.default.is_none() {
                errs.push(FieldError::required(
                    &at.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or \
                     be a required property",
                ));
            }
            if prop.nullable == Some(true) {
                errs.push(FieldError::forbidden(
                    &at.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}

/// The static checks of `x-kubernetes-validations` (rule, message, reason, fieldPath);
/// compiling the CEL rules is the CEL module's.
fn validation_rules(s: &JSONSchemaProps, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let has_newline = |v: &str| v.contains(['\n', '\r']);
    for (i, rule) in s.x_kubernetes_validations.iter().flatten().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let trimmed_rule = rule.rule.trim();
        let message = rule.message.as_deref().unwrap_or_default();
        let trimmed_message = message.trim();
        if trimmed_rule.is_empty() {
            errs.push(FieldError::required(
                &at.child("rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && trimmed_message.is_empty() {
            errs.push(FieldError::invalid(
                &at.child("message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if has_newline(trimmed_message) {
            errs.push(FieldError::invalid(
                &at.child("message"),
                message,
                "message must not contain line breaks",
            ));
        } else if has_newline(trimmed_rule) && trimmed_message.is_empty() {
            errs.push(FieldError::required(
                &at.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = rule.message_expression.as_deref().unwrap_or_default();
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errs.push(FieldError::required(
                &at.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.reason.as_deref()
            && !VALIDATION_REASONS.contains(&reason)
        {
            errs.push(FieldError::not_supported(
                &at.child("reason"),
                reason,
                VALIDATION_REASONS,
            ));
        }
        let field_path = rule.field_path.as_deref().unwrap_or_default();
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newline(field_path) {
            errs.push(FieldError::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
        if !field_path.is_empty()
            && let Ok(structural) = Structural::new(s)
            && valid_field_path(field_path, &structural, true).is_err()
        {
            errs.push(FieldError::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must be a valid path",
            ));
        }
    }
    errs
}
