//! The kinds the API server serves and how each behaves: upstream's per-resource REST
//! storage and strategy packages (`pkg/registry/<group>/<resource>`).
//!
//! A kind is written once as a typed [`Strategy`] over its k8s-openapi type (defaulting,
//! validation, status and scale rules, selectable fields, table columns, custom
//! subresources); [`Adapter`] erases it into a [`Kind`] that the REST layer drives with
//! JSON values. [`Registry`] holds every kind, looked up by group, version and resource.

mod adapter;
pub mod core;
pub mod printers;

mod admissionregistration;
pub(crate) mod apiextensions;
mod apiregistration;
mod apps;
mod authentication;
mod authorization;
mod autoscaling;
mod batch;
mod certificates;
mod coordination;
mod discovery;
mod events;
mod flowcontrol;
mod networking;
mod node;
mod policy;
mod rbac;
mod scheduling;
mod storage;
#[cfg(test)]
pub(crate) mod testing;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use skiff_api::field::ErrorList;

use crate::authn::UserInfo;
use crate::error::{ApiError, GroupResource};

pub use adapter::Adapter;

/// The names of a kind, as discovery shows them (`APIResource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The URL segment, `deployments`.
    pub plural: &'static str,
    pub namespaced: bool,
    /// `kubectl get po`.
    pub short_names: &'static [&'static str],
    /// `kubectl get all` lists the kinds in category `all`.
    pub categories: &'static [&'static str],
    /// The key segment: `/registry/<storage>/...`. Upstream shares some (core and
    /// events.k8s.io events) and renames others (nodes are `minions`); Skiff uses the plural
    /// unless two kinds share objects.
    pub storage: &'static str,
}

impl ResourceInfo {
    /// The names of `K` from its k8s-openapi constants, with no short names or categories.
    pub fn of<K: k8s_openapi::Resource<Scope: 'static>>() -> Self {
        ResourceInfo {
            group: K::GROUP,
            version: K::VERSION,
            kind: K::KIND,
            plural: K::URL_PATH_SEGMENT,
            namespaced: std::any::TypeId::of::<K::Scope>()
                == std::any::TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
            short_names: &[],
            categories: &[],
            storage: K::URL_PATH_SEGMENT,
        }
    }

    /// `apps/v1`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The lower-case kind, as upstream's singular name.
    pub fn singular(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    /// `deployments.apps`, as errors name the resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group, self.plural)
    }
}

/// A served kind's names at run time (upstream's `metav1.APIResource` without the verbs):
/// built from a built-in kind's [`ResourceInfo`] once at start, or from a
/// CustomResourceDefinition's `spec.names` while the server runs. This is what the REST
/// layer, discovery and OpenAPI read, through [`Kind::info`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// API group, `""` for core.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The URL segment, `deployments`.
    pub plural: String,
    /// `deployment`: the lower-case kind for built-in kinds, `spec.names.singular` for
    /// custom resources.
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// The key segment: `/registry/<storage>/...` (see [`ResourceInfo::storage`]).
    pub storage: String,
}

impl ApiResource {
    /// `apps/v1`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, as errors name the resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }
}

impl From<ResourceInfo> for ApiResource {
    fn from(info: ResourceInfo) -> Self {
        let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        ApiResource {
            group: info.group.to_owned(),
            version: info.version.to_owned(),
            kind: info.kind.to_owned(),
            plural: info.plural.to_owned(),
            singular: info.singular(),
            namespaced: info.namespaced,
            short_names: owned(info.short_names),
            categories: owned(info.categories),
            storage: info.storage.to_owned(),
        }
    }
}

/// Where a kind keeps its replica counts, for the `scale` subresource (autoscaling/v1
/// Scale). Paths are JSON pointers into the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    /// `/spec/replicas`.
    pub spec_replicas: Cow<'static, str>,
    /// `/status/replicas`.
    pub status_replicas: Cow<'static, str>,
    /// The label selector (`/spec/selector`, a metav1.LabelSelector) printed into
    /// `Scale.status.selector`; custom resources keep it already in query form
    /// (`labelSelectorPath`), and may have none.
    pub selector: Option<Cow<'static, str>>,
}

/// The `scale` subresource of the kinds with `spec.replicas`, `status.replicas` and
/// `spec.selector`: deployments, replicasets, statefulsets and replicationcontrollers (whose
/// map selector the Scale prints in query form).
pub const REPLICAS_SCALE: ScaleSpec = ScaleSpec {
    spec_replicas: Cow::Borrowed("/spec/replicas"),
    status_replicas: Cow::Borrowed("/status/replicas"),
    selector: Some(Cow::Borrowed("/spec/selector")),
};

/// Every verb a main resource can serve, in upstream's (sorted) discovery order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a kind upstream serves without `deletecollection` (namespaces).
pub const VERBS_WITHOUT_DELETECOLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// One column of a Table response (`meta.k8s.io/v1 TableColumnDefinition`), as upstream's
/// printers define them for `kubectl get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableColumn {
    pub name: Cow<'static, str>,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub type_: Cow<'static, str>,
    /// `name` for the Name column, else empty.
    pub format: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// 0: always shown; 1: shown with `-o wide`.
    pub priority: i32,
}

/// What a [`Strategy`]'s hooks may use of the server: other objects (through the same
/// store and rules as the REST API) and who asks.
pub struct Context<'a> {
    pub objects: &'a dyn Objects,
    pub user: &'a UserInfo,
    /// The request is a dry run: hooks must not change other objects.
    pub dry_run: bool,
    pub config: &'a crate::config::ClusterConfig,
}

/// Access to stored objects by resource, for hooks and subresources (a Service's IP
/// allocation, a pod's binding, an eviction's PodDisruptionBudget check). Values are
/// full objects with `apiVersion`, `kind` and `metadata.resourceVersion`.
#[async_trait]
pub trait Objects: Send + Sync {
    /// Errors: 404 NotFound.
    async fn get(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError>;

    /// Every object of `resource` (in `namespace`, or all namespaces when `None`).
    async fn list(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError>;

    /// Creates `object` with the kind's full create path (defaulting, validation, hooks).
    async fn create(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, ApiError>;

    /// Reads, changes with `mutate` and writes back, retrying on conflicts (upstream's
    /// GuaranteedUpdate); status and metadata changes are kept as `mutate` makes them.
    async fn update(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
        mutate: &mut (dyn for<'v> FnMut(&'v mut Value) -> Result<(), ApiError> + Send),
    ) -> Result<Value, ApiError>;

    /// Deletes with the kind's delete rules; `grace_period_seconds` as DeleteOptions'.
    async fn delete(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ApiError>;
}

/// A subresource with its own handler (`pods/binding`, `pods/eviction`, `pods/log`,
/// `pods/exec`, `serviceaccounts/token`, `certificatesigningrequests/approval`, ...).
/// `status` and `scale` are generic and come from [`Strategy::status_subresource`] and
/// [`Strategy::scale`].
#[async_trait]
pub trait Subresource: Send + Sync {
    /// The path segment, `binding`.
    fn name(&self) -> &'static str;
    /// Discovery verbs, `["create"]`.
    fn verbs(&self) -> &'static [&'static str];
    /// Discovery's group, version and kind of the subresource's body (`("", "v1", "Binding")`),
    /// or `None` for streams (log, exec, ...).
    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)>;
    /// Serves one request for object `name` in `namespace`.
    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError>;
}

/// A kind's own REST code in place of the store, for the kinds upstream serves without a
/// `registry.Store`: `componentstatuses` (get and list, computed on each read) and the
/// legacy `bindings` (create only). The router sends the kind's main-resource requests
/// here once [`Strategy::verbs`] allows them; a method left at its default is 405.
#[async_trait]
pub trait Unstored: Send + Sync {
    /// A warning every response carries (upstream's deprecation warning). Default: none.
    fn warning(&self) -> Option<&'static str> {
        None
    }

    /// Every object a list returns (full objects with `apiVersion` and `kind`), before
    /// selectors.
    async fn list(
        &self,
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        Err(crate::rest::router::method_not_allowed())
    }

    /// One object. Errors: the kind's own answer for a missing one.
    async fn get(
        &self,
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
        _name: &str,
    ) -> Result<Value, ApiError> {
        Err(crate::rest::router::method_not_allowed())
    }

    /// A POST to the collection.
    async fn create(
        &self,
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
        _request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        Err(crate::rest::router::method_not_allowed())
    }
}

/// How one kind behaves (upstream's RESTCreateStrategy, RESTUpdateStrategy,
/// RESTDeleteStrategy and TableConvertor). Every method has upstream's generic behaviour
/// as default; a kind overrides what its upstream strategy does. Metadata rules common to
/// every kind (name, generateName, uid, creationTimestamp, resourceVersion, finalizers,
/// generation) are the REST layer's, not the strategy's.
#[async_trait]
pub trait Strategy: Send + Sync + 'static {
    type Object: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + schemars::JsonSchema
        + Serialize
        + DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static;

    /// The kind's names. Default: [`ResourceInfo::of`].
    fn info(&self) -> ResourceInfo {
        ResourceInfo::of::<Self::Object>()
    }

    /// Whether `/status` is served; then the main resource ignores status changes and
    /// `/status` ignores everything else.
    fn status_subresource(&self) -> bool {
        false
    }

    /// The metadata fields a `/status` write takes from the request besides the status
    /// (upstream status strategies that reset only part of the object: nodes, whose
    /// kubelet patches its labels through `nodes/status`, and pods take `labels` and
    /// `annotations`; Deployments take `annotations`, where the controller writes the
    /// revision). None by default (`ResetObjectMetaForStatus`).
    fn status_meta_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether a change outside metadata and status bumps `metadata.generation` (kinds with
    /// a spec).
    fn bumps_generation(&self) -> bool {
        false
    }

    /// The `scale` subresource, for kinds with replicas.
    fn scale(&self) -> Option<ScaleSpec> {
        None
    }

    /// The rule `metadata.name` (and generateName) must follow, upstream's per-kind
    /// ValidateNameFunc. Default: DNS-1123 subdomain; namespaces use DNS-1123 labels,
    /// services DNS-1035 labels.
    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::name_is_dns_subdomain
    }

    /// The verbs the main resource serves, as discovery lists them, a subset of
    /// [`ALL_VERBS`] in its order. A request for another verb gets 405 MethodNotAllowed, as
    /// upstream answers for a storage without that REST interface (namespaces have no
    /// `deletecollection`). Default: [`ALL_VERBS`].
    fn verbs(&self) -> &'static [&'static str] {
        ALL_VERBS
    }

    /// Whether a PUT of a missing object creates it (upstream's AllowCreateOnUpdate: true
    /// for endpoints, events, leases, limitranges, ...). Default: 404.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether an immediate DELETE answers with the deleted object rather than a Status
    /// (upstream's `ReturnDeletedObject`: pods, serviceaccounts, ...). Default: Status.
    fn return_deleted_object(&self) -> bool {
        false
    }

    /// Subresources with their own handlers.
    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        Vec::new()
    }

    /// The kind's own REST code when it is not stored ([`Unstored`]). Default: stored.
    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        None
    }

    /// Upstream's defaulting (`SetDefaults_*`), run on every create and update.
    fn default(&self, _object: &mut Self::Object) {}

    /// Upstream's PrepareForCreate: drop what a client may not set (usually the status).
    /// As upstream's BeforeCreate guarantees, `metadata.name` (generated if need be),
    /// `metadata.uid` and `metadata.creationTimestamp` are already set (jobs label their
    /// pod template with the uid here).
    fn prepare_for_create(&self, _object: &mut Self::Object) {}

    /// Upstream's PrepareForUpdate of the main resource (the status of `old` is already
    /// kept by the REST layer when [`Strategy::status_subresource`]).
    fn prepare_for_update(&self, _new: &mut Self::Object, _old: &Self::Object) {}

    /// Validation of a new object (metadata excepted: the REST layer checks the name,
    /// labels and annotations).
    fn validate(&self, _object: &Self::Object) -> ErrorList {
        Vec::new()
    }

    /// Validation of an update (immutable fields, ...). Default: [`Strategy::validate`].
    fn validate_update(&self, new: &Self::Object, _old: &Self::Object) -> ErrorList {
        self.validate(new)
    }

    /// Warnings for a valid new object (upstream's `WarningsOnCreate`), sent back as
    /// `Warning: 299 - "<text>"` headers; computed after validation, dry runs included.
    /// Default: none.
    fn warnings_on_create(&self, _object: &Self::Object) -> Vec<String> {
        Vec::new()
    }

    /// Warnings for a valid update of the main resource (upstream's `WarningsOnUpdate`),
    /// given the new object (after [`Strategy::prepare_for_update`], with its generation)
    /// and the stored one. Default: none.
    fn warnings_on_update(&self, _new: &Self::Object, _old: &Self::Object) -> Vec<String> {
        Vec::new()
    }

    /// Subresources that update one part of the object through the store, as `/status`
    /// does but with their own rules (upstream: another REST storage over the same store
    /// with its own strategy, `pods/ephemeralcontainers` and `pods/resize`). Each is served
    /// with get, patch and update; discovery lists them with the kind's own kind. Default:
    /// none.
    fn part_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether [`Strategy::prepare_for_status_update`] does anything (`/status` writes of
    /// the other kinds skip decoding the object for it). Default: false.
    fn prepares_status_update(&self) -> bool {
        false
    }

    /// The PrepareForUpdate of `/status` (upstream's status strategy), given `new` with
    /// the request's status on the stored object and the stored `old`. Called only when
    /// [`Strategy::prepares_status_update`]. Default: nothing.
    fn prepare_for_status_update(&self, _new: &mut Self::Object, _old: &Self::Object) {}

    /// The PrepareForUpdate of part subresource `subresource`: `new` (the object the
    /// client sent) becomes `old` with only what the subresource may change taken from
    /// `new`. Metadata is the REST layer's (upstream's `ResetObjectMetaForStatus`).
    fn prepare_for_part_update(
        &self,
        _subresource: &str,
        _new: &mut Self::Object,
        _old: &Self::Object,
    ) {
    }

    /// The validation of an update through part subresource `subresource` (metadata
    /// excepted). Default: none.
    fn validate_part_update(
        &self,
        _subresource: &str,
        _new: &Self::Object,
        _old: &Self::Object,
    ) -> ErrorList {
        Vec::new()
    }

    /// Mutating admission of a create (upstream's mutating admission plugins, such as
    /// ServiceAccount and Priority for pods): runs on the defaulted object with its name,
    /// before `prepare_for_create` and validation, so what it adds is validated.
    async fn mutate_create(
        &self,
        _ctx: &Context<'_>,
        _object: &mut Self::Object,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Work before a create is stored that needs other objects (a Service's cluster IP and
    /// node ports) and validating admission. Runs after validation.
    async fn admit_create(
        &self,
        _ctx: &Context<'_>,
        _object: &mut Self::Object,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Work before an update is stored that needs other objects.
    async fn admit_update(
        &self,
        _ctx: &Context<'_>,
        _new: &mut Self::Object,
        _old: &Self::Object,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Work when a DELETE request reaches an object, before the REST layer applies graceful
    /// deletion and finalizers (upstream: a kind's own REST Delete); an error refuses the
    /// delete.
    async fn before_delete(
        &self,
        _ctx: &Context<'_>,
        _object: &Self::Object,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Fields a fieldSelector may use besides `metadata.name` and `metadata.namespace`
    /// (upstream's `*ToSelectableFields`): `("spec.nodeName", "node-1")`.
    fn selectable_fields(&self, _object: &Self::Object) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Table columns (upstream `pkg/printers/internalversion`). Default: none, and the
    /// REST layer prints upstream's generic `Name` and `Created At`.
    fn columns(&self) -> Vec<TableColumn> {
        Vec::new()
    }

    /// One table row, a cell per column of [`Strategy::columns`].
    fn row(&self, _object: &Self::Object) -> Vec<Value> {
        Vec::new()
    }

    /// The stored form of an object of this kind, when the kind shares storage with another
    /// (events.k8s.io/v1 Events are stored as core/v1 Events, as upstream). Default: as is.
    fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError> {
        Ok(object)
    }

    /// The inverse of [`Strategy::encode_for_storage`]. Default: as is.
    fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError> {
        Ok(stored)
    }

    /// Whether [`Strategy::decode_from_storage`] gives stored objects back unchanged, so
    /// that a LIST may write the stored bytes as they are (see [`Kind::serves_stored`]).
    /// A strategy whose `decode_from_storage` converts must say `false`. Default: `true`.
    fn stored_as_served(&self) -> bool {
        true
    }

    /// Graceful deletion (upstream's RESTGracefulDeleteStrategy): the grace period in
    /// seconds to delete with, given the request's `gracePeriodSeconds`, or `None` to
    /// delete at once. Default: at once.
    fn graceful_delete(&self, _object: &Self::Object, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether a delete without a propagation policy orphans the object's dependents
    /// (upstream's `DefaultGarbageCollectionPolicy` returning `OrphanDependents`: batch/v1
    /// Jobs, for backwards compatibility). Default: no, dependents go in the background.
    fn orphans_by_default(&self) -> bool {
        false
    }

    /// The kind's own hold on deletion (upstream: the namespace REST Delete and
    /// `ShouldDeleteNamespaceDuringUpdate`). Given an object before a DELETE (`old`) and as
    /// the REST layer marks it for deletion (`marked`), may change `marked` and returns
    /// whether the object stays in the store, marked, although neither
    /// `metadata.finalizers` nor a grace period keep it (a namespace on its first delete,
    /// and while its `spec.finalizers` remain). An update that removes the last
    /// `metadata.finalizers` of a held object leaves it in the store too. Default: no hold.
    fn hold_deletion(&self, _old: &Self::Object, _marked: &mut Self::Object) -> bool {
        false
    }
}

/// A storage conversion of [`Kind::encode_for_storage_now`] or
/// [`Kind::decode_from_storage_now`].
#[derive(Debug)]
pub enum Conversion {
    /// Converted without waiting: the object, or why it cannot be converted.
    Done(Result<Value, ApiError>),
    /// The conversion must be awaited (a webhook call): the object handed back, for the
    /// `async` method.
    Await(Value),
}

/// A kind with its type erased: what the REST layer, discovery and OpenAPI use.
#[async_trait]
pub trait Kind: Send + Sync {
    fn info(&self) -> &ApiResource;
    /// The CustomResourceDefinition a custom resource's kind comes from (its name);
    /// `None` for built-in kinds.
    fn definition(&self) -> Option<&str> {
        None
    }
    /// A custom resource's `openAPIV3Schema` (JSON), which types its fields for
    /// server-side apply; `None` for built-in kinds (typed by their OpenAPI definition).
    fn structural_schema(&self) -> Option<&Value> {
        None
    }
    fn status_subresource(&self) -> bool;
    /// See [`Strategy::status_meta_fields`].
    fn status_meta_fields(&self) -> &'static [&'static str] {
        &[]
    }
    fn bumps_generation(&self) -> bool;
    fn scale(&self) -> Option<&ScaleSpec>;
    fn name_rule(&self) -> skiff_api::names::ValidateNameFn;
    fn allow_create_on_update(&self) -> bool;
    /// See [`Strategy::verbs`].
    fn verbs(&self) -> &'static [&'static str];
    fn return_deleted_object(&self) -> bool;
    fn subresources(&self) -> &[Arc<dyn Subresource>];
    /// See [`Strategy::unstored`].
    fn unstored(&self) -> Option<Arc<dyn Unstored>>;

    /// Reads `object` through the typed form. Returns it re-encoded (fields the type
    /// does not know dropped, as upstream stores it) and the JSON paths of the dropped
    /// fields (for fieldValidation Warn/Strict). Errors: 400 on a type mismatch.
    fn decode(&self, object: Value) -> Result<(Value, Vec<String>), ApiError>;
    fn default(&self, object: &mut Value) -> Result<(), ApiError>;
    fn prepare_for_create(&self, object: &mut Value) -> Result<(), ApiError>;
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError>;
    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError>;
    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError>;
    /// See [`Strategy::warnings_on_create`].
    fn warnings_on_create(&self, object: &Value) -> Result<Vec<String>, ApiError>;
    /// See [`Strategy::warnings_on_update`].
    fn warnings_on_update(&self, new: &Value, old: &Value) -> Result<Vec<String>, ApiError>;
    /// [`Kind::prepare_for_create`], then [`Kind::validate`] and
    /// [`Kind::warnings_on_create`]: the create handler's steps after mutating admission,
    /// on one decoding of the object where the kind is typed. Returns the validation
    /// errors and the warnings. Errors: 400 when the object does not decode.
    fn prepare_and_validate_create(
        &self,
        object: &mut Value,
    ) -> Result<(ErrorList, Vec<String>), ApiError> {
        self.prepare_for_create(object)?;
        Ok((self.validate(object)?, self.warnings_on_create(object)?))
    }
    /// [`Kind::prepare_for_update`], then [`Kind::validate_update`] and
    /// [`Kind::warnings_on_update`] on one decoding of each object; as
    /// [`Kind::prepare_and_validate_create`].
    fn prepare_and_validate_update(
        &self,
        new: &mut Value,
        old: &Value,
    ) -> Result<(ErrorList, Vec<String>), ApiError> {
        self.prepare_for_update(new, old)?;
        Ok((
            self.validate_update(new, old)?,
            self.warnings_on_update(new, old)?,
        ))
    }
    /// See [`Strategy::part_subresources`].
    fn part_subresources(&self) -> &'static [&'static str];
    /// See [`Strategy::prepare_for_status_update`]. Default: nothing.
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// See [`Strategy::prepare_for_part_update`].
    fn prepare_for_part_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError>;
    /// See [`Strategy::validate_part_update`].
    fn validate_part_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Result<ErrorList, ApiError>;
    /// See [`Strategy::mutate_create`].
    async fn mutate_create(&self, _ctx: &Context<'_>, _object: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }
    async fn admit_create(&self, ctx: &Context<'_>, object: &mut Value) -> Result<(), ApiError>;
    async fn admit_update(
        &self,
        ctx: &Context<'_>,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError>;
    async fn before_delete(&self, ctx: &Context<'_>, object: &Value) -> Result<(), ApiError>;
    /// See [`Strategy::selectable_fields`]; custom resources name theirs at run time.
    fn selectable_fields(
        &self,
        object: &Value,
    ) -> Result<Vec<(Cow<'static, str>, String)>, ApiError>;
    fn columns(&self) -> Vec<TableColumn>;
    fn row(&self, object: &Value) -> Result<Vec<Value>, ApiError>;
    fn graceful_delete(
        &self,
        object: &Value,
        requested: Option<i64>,
    ) -> Result<Option<i64>, ApiError>;
    fn hold_deletion(&self, old: &Value, marked: &mut Value) -> Result<bool, ApiError>;
    fn orphans_by_default(&self) -> bool;
    /// [`Kind::encode_for_storage`] when it needs no waiting: every built-in kind (through
    /// [`Strategy::encode_for_storage`]) and custom resources that need no conversion
    /// webhook call. The REST layer tries this first, so that those kinds convert without
    /// the boxed future of an `async` trait method. Default: [`Conversion::Await`].
    fn encode_for_storage_now(&self, object: Value) -> Conversion {
        Conversion::Await(object)
    }
    /// [`Kind::decode_from_storage`] when it needs no waiting (see
    /// [`Kind::encode_for_storage_now`]). Default: [`Conversion::Await`].
    fn decode_from_storage_now(&self, stored: Value) -> Conversion {
        Conversion::Await(stored)
    }
    /// The stored form of an object of this kind (its storage version). May call out: a
    /// custom resource's conversion webhook (upstream's `webhookConverter`). Errors: the
    /// conversion failed; nothing may be stored then.
    async fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError>;
    /// A stored object as this kind's version: the inverse of
    /// [`Kind::encode_for_storage`]. Errors: the conversion failed.
    async fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError>;
    /// [`Kind::decode_from_storage`] of a list's objects, in order: a custom resource
    /// converts them with one webhook call, as upstream converts an `UnstructuredList`.
    /// Default: each object on its own.
    async fn decode_many(&self, stored: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::with_capacity(stored.len());
        for object in stored {
            objects.push(self.decode_from_storage(object).await?);
        }
        Ok(objects)
    }
    /// Whether an object stored with `apiVersion` `stored_api_version` is served exactly
    /// as stored (plus its `metadata.resourceVersion`): [`Kind::decode_from_storage`] is
    /// the identity for it. A LIST then writes the stored bytes without decoding them, as
    /// upstream's watch cache serves lists from the objects it keeps. Default: no.
    fn serves_stored(&self, _stored_api_version: Option<&str>) -> bool {
        false
    }
    /// The OpenAPI name of the type, `io.k8s.api.core.v1.Pod`.
    fn schema_name(&self) -> String;
    /// The type's JSON schema; referenced types are added to `generator`'s definitions.
    fn json_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;
}

/// The kinds served now, changeable while the server runs: the built-in kinds from the
/// start, custom resources as their definitions are established and removed (upstream's
/// apiextensions-apiserver swaps its handler's `crdStorageMap` the same way). A request
/// takes one [`Registry`] snapshot ([`LiveRegistry::current`]) and uses it to the end;
/// a change publishes a new snapshot ([`LiveRegistry::update`]), which discovery and
/// OpenAPI notice as a different `Arc` and re-render for.
pub struct LiveRegistry {
    current: std::sync::RwLock<Arc<Registry>>,
    /// Counts the snapshots published, for those who wait for a change.
    published: tokio::sync::watch::Sender<u64>,
}

impl LiveRegistry {
    /// Serves `registry`'s kinds.
    pub fn new(registry: Registry) -> Self {
        LiveRegistry {
            current: std::sync::RwLock::new(Arc::new(registry)),
            published: tokio::sync::watch::Sender::new(0),
        }
    }

    /// [`LiveRegistry::new`], shared.
    pub fn shared(registry: Registry) -> Arc<Self> {
        Arc::new(LiveRegistry::new(registry))
    }

    /// The kinds served now.
    pub fn current(&self) -> Arc<Registry> {
        // A poisoned lock still holds a whole snapshot: writers only swap the `Arc`.
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Publishes the registry `change` makes of a copy of the current one. Changes are
    /// serialized; readers keep the snapshot they hold.
    pub fn update(&self, change: impl FnOnce(&mut Registry)) {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = Registry::clone(&current);
        change(&mut next);
        *current = Arc::new(next);
        self.published.send_modify(|count| *count += 1);
    }

    /// A receiver that sees each published change ([`tokio::sync::watch::Receiver::changed`]).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// Waits until `ready` holds for the current snapshot (checked at once, then after each
    /// change).
    pub async fn wait_for(&self, mut ready: impl FnMut(&Registry) -> bool) {
        let mut changes = self.subscribe();
        while !ready(&self.current()) {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Every kind the server serves.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: Vec<Arc<dyn Kind>>,
}

impl Registry {
    /// The built-in kinds.
    pub fn builtin() -> Self {
        let mut registry = Registry::default();
        // Each API group's module adds its kinds, in upstream's discovery order.
        core::add(&mut registry);
        apps::add(&mut registry);
        events::add(&mut registry);
        authentication::add(&mut registry);
        authorization::add(&mut registry);
        autoscaling::add(&mut registry);
        batch::add(&mut registry);
        certificates::add(&mut registry);
        networking::add(&mut registry);
        policy::add(&mut registry);
        rbac::add(&mut registry);
        storage::add(&mut registry);
        admissionregistration::add(&mut registry);
        apiextensions::add(&mut registry);
        apiregistration::add(&mut registry);
        scheduling::add(&mut registry);
        coordination::add(&mut registry);
        node::add(&mut registry);
        discovery::add(&mut registry);
        flowcontrol::add(&mut registry);
        registry
    }

    /// Adds a kind.
    pub fn add<S: Strategy>(&mut self, strategy: S) {
        self.kinds.push(Arc::new(Adapter::new(strategy)));
    }

    /// Adds a kind that is not a typed [`Strategy`] (a custom resource's).
    pub fn add_kind(&mut self, kind: Arc<dyn Kind>) {
        self.kinds.push(kind);
    }

    /// Removes the kinds `remove` picks.
    pub fn remove_kinds(&mut self, mut remove: impl FnMut(&dyn Kind) -> bool) {
        self.kinds.retain(|kind| !remove(kind.as_ref()));
    }

    /// Every kind, in the order added.
    pub fn kinds(&self) -> &[Arc<dyn Kind>] {
        &self.kinds
    }

    /// The kind served at `/apis/<group>/<version>/<plural>`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<dyn Kind>> {
        self.kinds.iter().find(|k| {
            let info = k.info();
            info.group == group && info.version == version && info.plural == plural
        })
    }

    /// The kind of a group and resource (any version).
    pub fn by_resource(&self, resource: &GroupResource) -> Option<&Arc<dyn Kind>> {
        self.kinds.iter().find(|k| {
            let info = k.info();
            info.group == resource.group && info.plural == resource.resource
        })
    }
}
