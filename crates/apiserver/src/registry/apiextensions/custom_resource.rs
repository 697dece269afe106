//! One served version of a CustomResourceDefinition, as a [`Kind`] (upstream's
//! `customresource` registry package and the per-version parts of the CRD handler's
//! `crdInfo`): names from `spec.names`, the version's schema for pruning, defaulting and
//! validation (with its CEL rules), its `status` and `scale` subresources, printer
//! columns and selectable fields. Objects are stored in the storage version under
//! `/registry/<group>/<plural>/`; with the `None` conversion strategy a version change
//! only rewrites `apiVersion`, with `Webhook` the definition's conversion webhook converts
//! ([`Converter`]): an object already in the wanted version is not sent, a list's objects
//! go in one call, and what comes back is pruned and defaulted by the target version's
//! schema, as upstream.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::{Value, json};
use skiff_api::field::{ErrorList, FieldError, Path};
use skiff_api::jsonpath::{self, JsonPath};

use super::conversion::{Converter, gvk};
use super::schema::VersionSchema;
use crate::error::ApiError;
use crate::registry::{
    ALL_VERBS, ApiResource, Context, Conversion, Kind, ScaleSpec, Subresource, TableColumn,
    Unstored, printers,
};

/// A printer column of the version: its definition and the parsed path.
struct Column {
    definition: TableColumn,
    path: Option<JsonPath>,
}

/// A served version of a custom resource.
pub(crate) struct CustomResource {
    info: ApiResource,
    /// `<group>/<version>`: this kind's `apiVersion`.
    api_version: String,
    /// `<group>/<storage version>`: the `apiVersion` objects are stored with.
    storage_api_version: String,
    /// The definition's converter, shared by its versions.
    converter: Arc<Converter>,
    /// The storage version's schema, which prunes and defaults what a conversion webhook
    /// makes of an object to store; `None` without a webhook or when this version is the
    /// storage version.
    storage_schema: Option<Arc<VersionSchema>>,
    /// The CRD's `metadata.name`, `<plural>.<group>`.
    crd_name: String,
    status: bool,
    scale: Option<ScaleSpec>,
    columns: Vec<Column>,
    /// Selectable fields: `spec.color` with its path.
    selectable: Vec<(String, JsonPath)>,
    schema: Arc<VersionSchema>,
    /// The definition is being deleted: no new objects.
    terminating: bool,
}

/// `.spec.replicas` as the JSON pointer `/spec/replicas`.
fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut out, part| {
            out.push('/');
            out.push_str(&part.replace('~', "~0").replace('/', "~1"));
            out
        })
}

impl CustomResource {
    /// The kind of `version` of `crd`, with the names it was accepted with
    /// (`status.acceptedNames`, else `spec.names`), converting with `converter` (the
    /// definition's, see [`Converter::new`]). Errors: the version's schema does not
    /// compile (the CRD's own validation refuses such a CRD first).
    pub(crate) fn new(
        crd: &CustomResourceDefinition,
        version: &CustomResourceDefinitionVersion,
        terminating: bool,
        converter: Arc<Converter>,
    ) -> Result<Self, ApiError> {
        let spec = &crd.spec;
        let names = crd
            .status
            .as_ref()
            .and_then(|s| s.accepted_names.clone())
            .filter(|n| !n.plural.is_empty())
            .unwrap_or_else(|| spec.names.clone());
        let singular = names
            .singular
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| names.kind.to_ascii_lowercase());
        let info = ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
            singular,
            namespaced: spec.scope == "Namespaced",
            short_names: names.short_names.clone().unwrap_or_default(),
            categories: names.categories.clone().unwrap_or_default(),
            storage: format!("{}/{}", spec.group, names.plural),
        };
        let storage_version = spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map_or(version.name.as_str(), |v| v.name.as_str());
        let subresources = version.subresources.as_ref();
        let scale = subresources
            .and_then(|s| s.scale.as_ref())
            .map(|scale| ScaleSpec {
                spec_replicas: pointer(&scale.spec_replicas_path).into(),
                status_replicas: pointer(&scale.status_replicas_path).into(),
                selector: scale
                    .label_selector_path
                    .as_deref()
                    .map(|p| Cow::Owned(pointer(p))),
            });
        let columns = columns(version);
        let selectable = version
            .selectable_fields
            .iter()
            .flatten()
            .filter_map(|field| {
                let path = JsonPath::parse(&field.json_path).ok()?;
                Some((path.field_label()?, path))
            })
            .collect();
        let schema = VersionSchema::new(crd, version)?;
        let storage_schema = match (&*converter, spec.versions.iter().find(|v| v.storage)) {
            (Converter::Webhook(_), Some(stored)) if stored.name != version.name => {
                Some(Arc::new(VersionSchema::new(crd, stored)?))
            }
            _ => None,
        };
        Ok(CustomResource {
            api_version: format!("{}/{}", spec.group, version.name),
            storage_api_version: format!("{}/{storage_version}", spec.group),
            converter,
            storage_schema,
            crd_name: crd.metadata.name.clone().unwrap_or_default(),
            status: subresources.is_some_and(|s| s.status.is_some()),
            scale,
            columns,
            selectable,
            schema: Arc::new(schema),
            terminating,
            info,
        })
    }

    fn with_api_version(mut object: Value, api_version: &str) -> Value {
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".to_owned(), api_version.into());
        }
        object
    }

    /// `object` in `api_version` when that takes no webhook call (the `None` strategy, or
    /// the object is in that version already), else `object` back.
    fn convert_now(&self, object: Value, api_version: &str) -> Conversion {
        let current = object.get("apiVersion").and_then(Value::as_str);
        match &*self.converter {
            Converter::Webhook(_) if current != Some(api_version) => Conversion::Await(object),
            _ => Conversion::Done(Ok(Self::with_api_version(object, api_version))),
        }
    }

    /// The objects of `objects` not in `desired` converted by the webhook in one call
    /// (the others kept), then pruned and defaulted by `schema` (upstream prunes and
    /// defaults what a conversion webhook returns). `subject` names the input in errors.
    async fn convert(
        &self,
        subject: impl FnOnce(&[Value]) -> String,
        mut objects: Vec<Value>,
        desired: &str,
        list: bool,
        schema: &VersionSchema,
    ) -> Result<Vec<Value>, ApiError> {
        let Converter::Webhook(webhook) = &*self.converter else {
            return Ok(objects
                .into_iter()
                .map(|o| Self::with_api_version(o, desired))
                .collect());
        };
        let sent: Vec<usize> = (0..objects.len())
            .filter(|&i| objects[i].get("apiVersion").and_then(Value::as_str) != Some(desired))
            .collect();
        if sent.is_empty() {
            return Ok(objects);
        }
        let subject = subject(&objects);
        let batch = sent
            .iter()
            .map(|&i| std::mem::take(&mut objects[i]))
            .collect();
        let converted = webhook.convert(&subject, batch, desired, list).await?;
        for (i, mut object) in sent.into_iter().zip(converted) {
            schema.prune(&mut object);
            schema.default(&mut object);
            objects[i] = object;
        }
        Ok(objects)
    }

    /// Upstream's name of an object's group, version and kind in conversion errors.
    fn subject_of(objects: &[Value]) -> String {
        let object = objects.first().unwrap_or(&Value::Null);
        gvk(
            object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(""),
            object.get("kind").and_then(Value::as_str).unwrap_or(""),
        )
    }
}

/// The version's printer columns after upstream's Name column; a version without any
/// gets upstream's default Age column (`serveDefaultColumnsIfEmpty`).
fn columns(version: &CustomResourceDefinitionVersion) -> Vec<Column> {
    let defined = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|column| Column {
            definition: TableColumn {
                name: column.name.clone().into(),
                type_: column.type_.clone().into(),
                format: column.format.clone().unwrap_or_default().into(),
                description: column
                    .description
                    .clone()
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| {
                        format!(
                            "Custom resource definition column (in JSONPath format): {}",
                            column.json_path
                        )
                    })
                    .into(),
                priority: column.priority.unwrap_or(0),
            },
            path: JsonPath::parse(&column.json_path).ok(),
        })
        .collect::<Vec<_>>();
    if !defined.is_empty() {
        return defined;
    }
    vec![Column {
        definition: printers::AGE,
        path: JsonPath::parse(".metadata.creationTimestamp").ok(),
    }]
}

/// A cell of a column of `type_`, as upstream's CRD table convertor makes it: strings as
/// the JSONPath printer writes them, numbers and booleans typed, dates as ages, and
/// `null` for a missing or mistyped value.
fn cell(type_: &str, value: Option<&Value>) -> Value {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match (type_, value) {
        ("string", value) => jsonpath::print(value).into(),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(text)) => match text.parse::<k8s_openapi::jiff::Timestamp>() {
            Ok(time) => printers::since_timestamp(Some(time)).into(),
            Err(_) => "<invalid>".into(),
        },
        _ => Value::Null,
    }
}

#[async_trait]
impl Kind for CustomResource {
    fn info(&self) -> &ApiResource {
        &self.info
    }

    fn definition(&self) -> Option<&str> {
        Some(&self.crd_name)
    }

    fn structural_schema(&self) -> Option<&Value> {
        self.schema.props()
    }

    fn status_subresource(&self) -> bool {
        self.status
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<&ScaleSpec> {
        self.scale.as_ref()
    }

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::name_is_dns_subdomain
    }

    fn allow_create_on_update(&self) -> bool {
        false
    }

    fn verbs(&self) -> &'static [&'static str] {
        ALL_VERBS
    }

    fn return_deleted_object(&self) -> bool {
        false
    }

    fn subresources(&self) -> &[Arc<dyn Subresource>] {
        &[]
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        None
    }

    /// Prunes the fields the schema does not know (upstream's structural pruning); their
    /// paths are the unknown fields of `fieldValidation`.
    fn decode(&self, mut object: Value) -> Result<(Value, Vec<String>), ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request(format!(
                "unable to decode {} {}: the object is not a JSON object",
                self.info.api_version(),
                self.info.kind
            )));
        }
        let pruned = self.schema.prune(&mut object);
        Ok((object, pruned))
    }

    fn default(&self, object: &mut Value) -> Result<(), ApiError> {
        self.schema.default(object);
        Ok(())
    }

    fn prepare_for_create(&self, object: &mut Value) -> Result<(), ApiError> {
        if self.status
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        Ok(())
    }

    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        Ok(())
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        let mut errors = self.kind_errors(object);
        errors.extend(self.schema.validate(object, None));
        Ok(errors)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        let mut errors = self.kind_errors(new);
        errors.extend(self.schema.validate(new, Some(old)));
        Ok(errors)
    }

    fn warnings_on_create(&self, _object: &Value) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }

    fn warnings_on_update(&self, _new: &Value, _old: &Value) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }

    fn part_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    fn prepare_for_part_update(
        &self,
        _subresource: &str,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    fn validate_part_update(
        &self,
        _subresource: &str,
        _new: &Value,
        _old: &Value,
    ) -> Result<ErrorList, ApiError> {
        Ok(Vec::new())
    }

    /// Upstream's CRD handler refuses creates while the definition is deleted.
    async fn admit_create(&self, _ctx: &Context<'_>, _object: &mut Value) -> Result<(), ApiError> {
        if self.terminating {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            ));
        }
        Ok(())
    }

    async fn admit_update(
        &self,
        _ctx: &Context<'_>,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    async fn before_delete(&self, _ctx: &Context<'_>, _object: &Value) -> Result<(), ApiError> {
        Ok(())
    }

    fn selectable_fields(
        &self,
        object: &Value,
    ) -> Result<Vec<(Cow<'static, str>, String)>, ApiError> {
        Ok(self
            .selectable
            .iter()
            .map(|(label, path)| {
                let value = path.first(object).map(jsonpath::print).unwrap_or_default();
                (Cow::Owned(label.clone()), value)
            })
            .collect())
    }

    fn columns(&self) -> Vec<TableColumn> {
        let mut columns = vec![printers::NAME];
        columns.extend(self.columns.iter().map(|c| c.definition.clone()));
        columns
    }

    fn row(&self, object: &Value) -> Result<Vec<Value>, ApiError> {
        let name = object
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or_default();
        let mut row = vec![name];
        row.extend(self.columns.iter().map(|column| {
            let value = column.path.as_ref().and_then(|p| p.first(object));
            cell(&column.definition.type_, value)
        }));
        Ok(row)
    }

    fn graceful_delete(
        &self,
        _object: &Value,
        _requested: Option<i64>,
    ) -> Result<Option<i64>, ApiError> {
        Ok(None)
    }

    fn hold_deletion(&self, _old: &Value, _marked: &mut Value) -> Result<bool, ApiError> {
        Ok(false)
    }

    fn orphans_by_default(&self) -> bool {
        false
    }

    /// The storage version without a webhook call: see [`CustomResource::convert_now`].
    fn encode_for_storage_now(&self, object: Value) -> Conversion {
        self.convert_now(object, &self.storage_api_version)
    }

    fn decode_from_storage_now(&self, stored: Value) -> Conversion {
        self.convert_now(stored, &self.api_version)
    }

    /// Stores the object in the storage version, through the conversion webhook.
    async fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError> {
        let schema = self.storage_schema.as_deref().unwrap_or(&self.schema);
        let desired = &self.storage_api_version;
        let objects = self
            .convert(Self::subject_of, vec![object], desired, false, schema)
            .await?;
        objects
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("conversion returned no object"))
    }

    async fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError> {
        let objects = self
            .convert(
                Self::subject_of,
                vec![stored],
                &self.api_version,
                false,
                &self.schema,
            )
            .await?;
        objects
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("conversion returned no object"))
    }

    /// Objects stored in this version are served as stored: neither the `None` strategy
    /// nor a webhook converts them (see [`CustomResource::convert_now`]).
    fn serves_stored(&self, stored_api_version: Option<&str>) -> bool {
        stored_api_version == Some(self.api_version.as_str())
    }

    /// A list's objects in one webhook call; errors name the list
    /// (`stable.example.com/v2, Kind=CronTabList`), as upstream converts the list.
    async fn decode_many(&self, stored: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let subject = |_: &[Value]| gvk(&self.api_version, &format!("{}List", self.info.kind));
        self.convert(subject, stored, &self.api_version, true, &self.schema)
            .await
    }

    /// Upstream's definition name of a custom resource: the group reversed, the version
    /// and the kind (`com.example.stable.v1.CronTab`).
    fn schema_name(&self) -> String {
        let group: Vec<&str> = self.info.group.split('.').rev().collect();
        format!(
            "{}.{}.{}",
            group.join("."),
            self.info.version,
            self.info.kind
        )
    }

    fn json_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let name = self.schema_name();
        // The definition refers to ObjectMeta's, which must be among the definitions.
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
        let definition = self.schema.openapi();
        generator.definitions_mut().insert(name.clone(), definition);
        let prefix = generator.settings().definitions_path.clone();
        schemars::Schema::from(
            json!({ "$ref": format!("#{prefix}/{name}") })
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    }
}

impl CustomResource {
    /// `apiVersion` and `kind` must name this kind (upstream's CR validator).
    fn kind_errors(&self, object: &Value) -> ErrorList {
        let mut errors = Vec::new();
        let api_version = self.api_version.as_str();
        match object.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => errors.push(FieldError::required(&Path::new("apiVersion"), "")),
            Some(found) if found != api_version => errors.push(FieldError::invalid(
                &Path::new("apiVersion"),
                found,
                format!("must be {api_version}"),
            )),
            Some(_) => {}
        }
        match object.get("kind").and_then(Value::as_str) {
            None | Some("") => errors.push(FieldError::required(&Path::new("kind"), "")),
            Some(found) if found != self.info.kind => errors.push(FieldError::invalid(
                &Path::new("kind"),
                found,
                format!("must be {}", self.info.kind),
            )),
            Some(_) => {}
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_and_cells_follow_upstream() {
        assert_eq!(pointer(".spec.replicas"), "/spec/replicas");
        assert_eq!(pointer(".status.a/b"), "/status/a~1b");
        assert_eq!(cell("integer", Some(&json!(3))), json!(3));
        assert_eq!(cell("integer", Some(&json!("3"))), Value::Null);
        assert_eq!(cell("string", Some(&json!(3))), json!("3"));
        assert_eq!(cell("boolean", Some(&json!(true))), json!(true));
        assert_eq!(cell("date", Some(&json!("bogus"))), json!("<invalid>"));
        assert_eq!(cell("string", None), Value::Null);
    }
}
