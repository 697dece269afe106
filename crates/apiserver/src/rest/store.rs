//! The generic store of one kind (upstream `k8s.io/apiserver/pkg/registry/generic/registry`
//! `Store`): keys, reads, and the create, update and delete paths with the metadata rules,
//! the kind's hooks, optimistic concurrency, finalizers and graceful deletion. The HTTP
//! handlers and [`super::objects`] both go through it, so that every write follows the
//! same rules.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;
use serde_json::Value;
use skiff_api::field::ErrorList;

use super::State;
use super::managed::{self, Ownership};
use super::meta;
use super::object::{self, meta_get, meta_str, meta_string, set_meta};
use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Conversion, Kind};
use crate::storage::{KeyValue, Revision, StorageError};

/// How often a write is retried after a conflict it may retry (upstream's
/// GuaranteedUpdate loops until done; a bound keeps a hot key from spinning forever).
const MAX_ATTEMPTS: usize = 32;

/// How often a generated name is drawn again after a collision (upstream's
/// RetryGenerateName).
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// The finalizer of `propagationPolicy: Orphan`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer of `propagationPolicy: Foreground`.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// Which part of an object an update may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The main resource: everything but the status (for kinds with `/status`).
    Main,
    /// `/status`: the status only.
    Status,
    /// Everything as given, without the kind's update hooks or validation (upstream's
    /// direct GuaranteedUpdate of subresources like `pods/binding`).
    Raw,
    /// A part subresource of the kind ([`Kind::part_subresources`], `pods/resize`): the
    /// part it may change, with its own rules; metadata and status stay.
    Part(&'static str),
}

/// An update's new object, built from the current one (`None` when absent).
pub type Build<'f> = dyn FnMut(Option<&Value>) -> Result<Value, ApiError> + Send + 'f;

/// `DeleteOptions` as the store uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    /// `Orphan`, `Foreground` or `Background`.
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
}

/// The outcome of a delete.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// Removed from the store; the last stored state.
    Now(Value),
    /// Marked for deletion (deletionTimestamp set), waiting for finalizers or the grace
    /// period; the object as stored.
    Pending(Value),
}

/// The store of one kind.
pub struct Store<'a> {
    pub state: &'a State,
    pub kind: Arc<dyn Kind>,
    /// The kind's warnings of the writes so far (upstream's warning recorder of the
    /// request), each once.
    warnings: std::sync::Mutex<Vec<String>>,
    /// Whom writes record in managedFields (none by default).
    pub ownership: Ownership,
}

impl<'a> Store<'a> {
    pub fn new(state: &'a State, kind: Arc<dyn Kind>) -> Self {
        Store {
            state,
            kind,
            warnings: std::sync::Mutex::new(Vec::new()),
            ownership: Ownership::default(),
        }
    }

    /// The store recording its writes' fields for `ownership`.
    pub fn owned_by(mut self, ownership: Ownership) -> Self {
        self.ownership = ownership;
        self
    }

    /// Records the fields `new` changes from `live` (upstream `UpdateNoErrors` of the
    /// write's field manager), unless the write records none or is an apply (whose
    /// managedFields are made already).
    fn track_fields(&self, live: Option<&Value>, new: Value) -> Value {
        let Some(manager) = self.ownership.manager.as_deref() else {
            return new;
        };
        if self.ownership.applied {
            return new;
        }
        let definition = self.kind.schema_name();
        let subresource = self.ownership.subresource.as_deref();
        let fm = managed::field_manager(&self.state.schemas, &definition, &*self.kind, subresource);
        let live = live.cloned().unwrap_or_else(|| fm.empty_object());
        fm.update(&live, new, manager, chrono::Utc::now())
    }

    /// The warnings the kind gave for this store's writes ([`Kind::warnings_on_create`],
    /// [`Kind::warnings_on_update`]), for the response's `Warning` headers; drained.
    pub fn take_warnings(&self) -> Vec<String> {
        match self.warnings.lock() {
            Ok(mut warnings) => std::mem::take(&mut *warnings),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    /// Records `found`, each text once.
    fn warn(&self, found: Vec<String>) {
        if found.is_empty() {
            return;
        }
        let mut warnings = match self.warnings.lock() {
            Ok(warnings) => warnings,
            Err(poisoned) => poisoned.into_inner(),
        };
        for text in found {
            if !warnings.contains(&text) {
                warnings.push(text);
            }
        }
    }

    /// `pods`, `deployments.apps`, as errors name the kind.
    pub fn resource(&self) -> GroupResource {
        self.kind.info().group_resource()
    }

    /// `/registry/<storage>/<namespace>/<name>` (cluster-scoped: without namespace).
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.prefix(namespace))
    }

    /// The key prefix of a namespace's objects, or of all objects when `None`.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        let storage = &self.kind.info().storage;
        match namespace.filter(|_| self.kind.info().namespaced) {
            Some(ns) => format!("/registry/{storage}/{ns}/"),
            None => format!("/registry/{storage}/"),
        }
    }

    /// A stored value as stored, with `metadata.resourceVersion`.
    fn parse(kv: &KeyValue) -> Result<Value, ApiError> {
        let mut value: Value = serde_json::from_slice(&kv.value).map_err(ApiError::internal)?;
        set_meta(
            &mut value,
            "resourceVersion",
            Some(kv.mod_revision.to_string().into()),
        );
        Ok(value)
    }

    /// A stored value as the kind's object, with `metadata.resourceVersion`. Errors: 500
    /// for an unreadable value, the kind's conversion errors (a conversion webhook's).
    pub async fn decode(&self, kv: &KeyValue) -> Result<Value, ApiError> {
        match self.kind.decode_from_storage_now(Self::parse(kv)?) {
            Conversion::Done(object) => object,
            Conversion::Await(stored) => self.kind.decode_from_storage(stored).await,
        }
    }

    /// [`Store::decode`] when the kind converts without waiting; `None` when the
    /// conversion must be awaited (then [`Store::decode`] does it).
    pub fn decode_now(&self, kv: &KeyValue) -> Option<Result<Value, ApiError>> {
        let stored = match Self::parse(kv) {
            Ok(stored) => stored,
            Err(e) => return Some(Err(e)),
        };
        match self.kind.decode_from_storage_now(stored) {
            Conversion::Done(object) => Some(object),
            Conversion::Await(_) => None,
        }
    }

    /// [`Store::decode`] of a list's values, in order. The objects whose conversion must
    /// be awaited go to the kind together ([`Kind::decode_many`]: one conversion webhook
    /// call for a list, as upstream); the others are converted at once.
    pub async fn decode_all(&self, kvs: &[KeyValue]) -> Result<Vec<Value>, ApiError> {
        let mut objects = Vec::with_capacity(kvs.len());
        let mut waiting = Vec::new();
        for kv in kvs {
            match self.kind.decode_from_storage_now(Self::parse(kv)?) {
                Conversion::Done(object) => objects.push(object?),
                Conversion::Await(stored) => {
                    waiting.push(objects.len());
                    objects.push(stored);
                }
            }
        }
        if waiting.is_empty() {
            return Ok(objects);
        }
        let stored = waiting
            .iter()
            .map(|&i| std::mem::take(&mut objects[i]))
            .collect();
        let converted = self.kind.decode_many(stored).await?;
        if converted.len() != waiting.len() {
            return Err(ApiError::internal(format!(
                "converted {} objects of {}",
                converted.len(),
                waiting.len()
            )));
        }
        for (i, object) in waiting.into_iter().zip(converted) {
            objects[i] = object;
        }
        Ok(objects)
    }

    /// The stored form of an object (without `resourceVersion`). Errors: the kind's
    /// conversion errors; nothing is written then.
    async fn encode(&self, object: &Value) -> Result<Vec<u8>, ApiError> {
        let mut stored = match self.kind.encode_for_storage_now(object.clone()) {
            Conversion::Done(stored) => stored?,
            Conversion::Await(object) => self.kind.encode_for_storage(object).await?,
        };
        set_meta(&mut stored, "resourceVersion", None);
        serde_json::to_vec(&stored).map_err(ApiError::internal)
    }

    /// Maps a store error to upstream's API error for object `name`.
    pub fn error(&self, err: StorageError, name: &str) -> ApiError {
        storage_error(err, &self.resource(), name)
    }

    async fn read(&self, key: &str, name: &str) -> Result<Option<KeyValue>, ApiError> {
        self.state
            .storage
            .get(key)
            .await
            .map_err(|e| self.error(e, name))
    }

    /// The object `name`. Errors: 404.
    pub async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Value, ApiError> {
        match self.read(&self.key(namespace, name), name).await? {
            Some(kv) => self.decode(&kv).await,
            None => Err(ApiError::not_found(&self.resource(), name)),
        }
    }

    fn invalid(&self, object: &Value, errors: &ErrorList) -> ApiError {
        let info = self.kind.info();
        ApiError::invalid(
            &info.group,
            &info.kind,
            &meta_string(object, "name"),
            errors,
        )
    }

    /// Creates `object` in `namespace` (upstream's create handler and Store.Create with
    /// BeforeCreate): namespace checks, defaulting, metadata, mutating admission,
    /// `prepare_for_create`, validation (422), validating admission and allocation, then
    /// the write (skipped on dry run). Errors: 404 for a missing namespace, 409 when the name
    /// is taken.
    pub async fn create(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        meta::set_identity(self.kind.as_ref(), &mut object, namespace)?;
        if let Some(ns) = namespace.filter(|_| self.kind.info().namespaced) {
            self.check_namespace(ns, &object).await?;
        }
        self.kind.default(&mut object)?;
        // Only a name the server generated may be generated again on a collision: a
        // request naming `web-1` with generateName `web-` gets 409, as upstream.
        let name_generated = meta_string(&object, "name").is_empty();
        meta::prepare_create(self.kind.as_ref(), &mut object)?;
        // Managed fields record the request's object, not what admission adds (upstream
        // tracks them in the handler before admission).
        object = self.track_fields(None, object);
        self.kind.mutate_create(ctx, &mut object).await?;
        let (kind_errors, warnings) = self.kind.prepare_and_validate_create(&mut object)?;
        let mut errors = meta::validate(self.kind.as_ref(), &object)?;
        errors.extend(kind_errors);
        if !errors.is_empty() {
            return Err(self.invalid(&object, &errors));
        }
        self.warn(warnings);
        self.kind.admit_create(ctx, &mut object).await?;
        if ctx.dry_run {
            // Upstream's dry-run storage still refuses a taken name (409 AlreadyExists).
            let name = meta_string(&object, "name");
            let key = self.key(namespace, &name);
            if self.read(&key, &name).await?.is_some() {
                return Err(self.error(StorageError::AlreadyExists(key), &name));
            }
            return Ok(object);
        }
        for attempt in 1..=GENERATE_NAME_ATTEMPTS {
            let name = meta_string(&object, "name");
            let key = self.key(namespace, &name);
            match self
                .state
                .storage
                .create(&key, self.encode(&object).await?)
                .await
            {
                Ok(kv) => {
                    set_meta(
                        &mut object,
                        "resourceVersion",
                        Some(kv.mod_revision.to_string().into()),
                    );
                    return Ok(object);
                }
                Err(StorageError::AlreadyExists(_))
                    if name_generated && attempt < GENERATE_NAME_ATTEMPTS =>
                {
                    let prefix = meta_string(&object, "generateName");
                    set_meta(
                        &mut object,
                        "name",
                        Some(meta::generate_name(&prefix).into()),
                    );
                }
                Err(e) => return Err(self.error(e, &name)),
            }
        }
        Err(ApiError::internal("no free generated name"))
    }

    /// Upstream's NamespaceLifecycle admission: the namespace must exist and not be
    /// terminating (403 `configmaps "x" is forbidden: unable to create new content in
    /// namespace <ns> because it is being terminated`, with a `NamespaceTerminating` cause).
    /// Skipped when the registry serves no namespaces (tests).
    async fn check_namespace(&self, namespace: &str, object: &Value) -> Result<(), ApiError> {
        let Some(kind) = self
            .state
            .registry
            .current()
            .by_resource(&GroupResource::new("", "namespaces"))
            .cloned()
        else {
            return Ok(());
        };
        let namespaces = Store::new(self.state, kind);
        let found = namespaces.get(None, namespace).await?;
        let terminating =
            found.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating");
        if !terminating && meta_get(&found, "deletionTimestamp").is_none() {
            return Ok(());
        }
        // Upstream names the object by its generateName before a name is generated.
        let name = Some(meta_string(object, "name"))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| meta_string(object, "generateName"));
        let mut error = ApiError::forbidden(
            &self.resource(),
            &name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        );
        if let Some(details) = error.details.as_mut() {
            details.causes = Some(vec![StatusCause {
                reason: Some("NamespaceTerminating".to_owned()),
                message: Some(format!("namespace {namespace} is being terminated")),
                field: Some("metadata.namespace".to_owned()),
            }]);
        }
        Err(error)
    }

    /// Updates object `name` with the object `build` makes from the current one
    /// (upstream Store.Update over GuaranteedUpdate). A `resourceVersion` in the new
    /// object is a precondition (409 when stale); without one the update is unconditional
    /// and retried on conflicts, as it is when `retry` is set (patches). A new object equal
    /// to the stored one is not written. Returns the object and whether it was created
    /// (PUT of a missing object, for kinds that allow it).
    pub async fn update(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        target: Target,
        build: &mut Build<'_>,
        retry: bool,
    ) -> Result<(Value, bool), ApiError> {
        let key = self.key(namespace, name);
        for _ in 0..MAX_ATTEMPTS {
            let Some(kv) = self.read(&key, name).await? else {
                if target == Target::Main
                    && (self.kind.allow_create_on_update() || self.ownership.applied)
                {
                    let mut object = build(None)?;
                    if meta_str(&object, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
                        return Err(ApiError::not_found(&self.resource(), name));
                    }
                    check_name(&mut object, name)?;
                    return Ok((self.create(ctx, namespace, object).await?, true));
                }
                return Err(ApiError::not_found(&self.resource(), name));
            };
            let old = self.decode(&kv).await?;
            let mut new = build(Some(&old))?;
            check_name(&mut new, name)?;
            meta::set_identity(self.kind.as_ref(), &mut new, namespace)?;
            let requested = meta_string(&new, "resourceVersion");
            let current = kv.mod_revision.to_string();
            if !requested.is_empty() && requested != current {
                return Err(ApiError::modified(&self.resource(), name));
            }
            let uid = meta_string(&new, "uid");
            let old_uid = meta_string(&old, "uid");
            if !uid.is_empty() && uid != old_uid {
                return Err(ApiError::conflict(
                    &self.resource(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
                    ),
                ));
            }
            set_meta(&mut new, "resourceVersion", Some(current.clone().into()));
            self.apply_update_rules(target, &mut new, &old)?;
            if target != Target::Raw {
                self.kind.admit_update(ctx, &mut new, &old).await?;
            }
            if new == old {
                return Ok((old, false));
            }
            if should_delete_during_update(&new, &old)
                && !self.kind.hold_deletion(&new, &mut new.clone())?
            {
                if ctx.dry_run {
                    return Ok((new, false));
                }
                match self.state.storage.delete(&key, Some(kv.mod_revision)).await {
                    Ok(_) => return Ok((new, false)),
                    Err(StorageError::Conflict { .. } | StorageError::NotFound(_)) => continue,
                    Err(e) => return Err(self.error(e, name)),
                }
            }
            if ctx.dry_run {
                return Ok((new, false));
            }
            match self
                .state
                .storage
                .update(&key, self.encode(&new).await?, kv.mod_revision)
                .await
            {
                Ok(written) => {
                    set_meta(
                        &mut new,
                        "resourceVersion",
                        Some(written.mod_revision.to_string().into()),
                    );
                    return Ok((new, false));
                }
                Err(StorageError::Conflict { .. }) if retry || requested.is_empty() => continue,
                Err(StorageError::Conflict { .. }) => {
                    return Err(ApiError::modified(&self.resource(), name));
                }
                Err(StorageError::NotFound(_)) => continue,
                Err(e) => return Err(self.error(e, name)),
            }
        }
        Err(ApiError::modified(&self.resource(), name))
    }

    /// The main resource's and `/status`'s rules (upstream BeforeUpdate, the strategy's
    /// PrepareForUpdate and ResetObjectMetaForStatus) and validation (422).
    fn apply_update_rules(
        &self,
        target: Target,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        // The Main target's kind checks, made with its preparation on one decoding.
        let mut main_checked = None;
        match target {
            Target::Raw => return Ok(()),
            Target::Main => {
                self.kind.default(new)?;
                if self.kind.status_subresource() {
                    copy_status(old, new);
                }
                *new = self.track_fields(Some(old), std::mem::take(new));
                meta::prepare_update(self.kind.as_ref(), new, old);
                main_checked = Some(self.kind.prepare_and_validate_update(new, old)?);
            }
            Target::Status => {
                let mut updated = old.clone();
                copy_status(new, &mut updated);
                for field in self.kind.status_meta_fields() {
                    set_meta(&mut updated, field, meta_get(new, field).cloned());
                }
                set_meta(
                    &mut updated,
                    "resourceVersion",
                    meta_get(new, "resourceVersion").cloned(),
                );
                *new = self.track_fields(Some(old), updated);
                self.kind.default(new)?;
                self.kind.prepare_for_status_update(new, old)?;
            }
            Target::Part(subresource) => {
                self.kind.default(new)?;
                self.kind.prepare_for_part_update(subresource, new, old)?;
                // Upstream's ResetObjectMetaForStatus: the stored metadata, with the
                // request's resourceVersion precondition.
                let version = meta_get(new, "resourceVersion").cloned();
                if let (Some(map), Some(metadata)) = (new.as_object_mut(), old.get("metadata")) {
                    map.insert("metadata".into(), metadata.clone());
                }
                set_meta(new, "resourceVersion", version);
                *new = self.track_fields(Some(old), std::mem::take(new));
                meta::prepare_update(self.kind.as_ref(), new, old);
            }
        }
        let mut errors = meta::validate_update(new, old)?;
        let mut warnings = Vec::new();
        match (target, main_checked) {
            (_, Some((kind_errors, kind_warnings))) => {
                errors.extend(kind_errors);
                warnings = kind_warnings;
            }
            (Target::Part(subresource), None) => {
                errors.extend(self.kind.validate_part_update(subresource, new, old)?);
            }
            (_, None) => errors.extend(self.kind.validate_update(new, old)?),
        }
        if !errors.is_empty() {
            return Err(self.invalid(new, &errors));
        }
        self.warn(warnings);
        Ok(())
    }

    /// Deletes object `name` (upstream Store.Delete with BeforeDelete): preconditions,
    /// propagation-policy finalizers, graceful deletion; an object with finalizers, a
    /// grace period or the kind's hold ([`Kind::hold_deletion`]) is marked
    /// (deletionTimestamp) instead of removed.
    pub async fn delete(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let key = self.key(namespace, name);
        for _ in 0..MAX_ATTEMPTS {
            let Some(kv) = self.read(&key, name).await? else {
                return Err(ApiError::not_found(&self.resource(), name));
            };
            let old = self.decode(&kv).await?;
            self.check_preconditions(&old, name, options)?;
            self.kind.before_delete(ctx, &old).await?;
            let mut marked = self.mark_for_deletion(&old, options)?;
            let held = self.kind.hold_deletion(&old, &mut marked)?;
            if held && meta_get(&marked, "deletionTimestamp").is_none() {
                let now = object::timestamp(chrono::Utc::now());
                set_meta(&mut marked, "deletionTimestamp", Some(now.into()));
            }
            let grace = meta_get(&marked, "deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if !held && object::finalizers(&marked).is_empty() && grace == 0 {
                if ctx.dry_run {
                    return Ok(Deleted::Now(old));
                }
                match self.state.storage.delete(&key, Some(kv.mod_revision)).await {
                    Ok(_) => return Ok(Deleted::Now(old)),
                    Err(StorageError::Conflict { .. } | StorageError::NotFound(_)) => continue,
                    Err(e) => return Err(self.error(e, name)),
                }
            }
            if marked == old || ctx.dry_run {
                return Ok(Deleted::Pending(marked));
            }
            match self
                .state
                .storage
                .update(&key, self.encode(&marked).await?, kv.mod_revision)
                .await
            {
                Ok(written) => {
                    let mut marked = marked;
                    set_meta(
                        &mut marked,
                        "resourceVersion",
                        Some(written.mod_revision.to_string().into()),
                    );
                    return Ok(Deleted::Pending(marked));
                }
                Err(StorageError::Conflict { .. } | StorageError::NotFound(_)) => continue,
                Err(e) => return Err(self.error(e, name)),
            }
        }
        Err(ApiError::modified(&self.resource(), name))
    }

    /// A DELETE's preconditions, with upstream's messages (`rest.BeforeDelete`, which names
    /// the resource by its kind: `Deployment.apps`). Errors: 409 Conflict.
    fn check_preconditions(
        &self,
        old: &Value,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let checks = [
            (
                "UID",
                "uid",
                &options.uid,
                "The object might have been deleted and then recreated",
            ),
            (
                "ResourceVersion",
                "resourceVersion",
                &options.resource_version,
                "The object might have been modified",
            ),
        ];
        for (label, field, wanted, hint) in checks {
            let Some(wanted) = wanted else { continue };
            let found = meta_string(old, field);
            if *wanted != found {
                let info = self.kind.info();
                return Err(ApiError::conflict(
                    &GroupResource::new(&info.group, &info.kind),
                    name,
                    &format!(
                        "the {label} in the precondition ({wanted}) does not match the {label} in record ({found}). {hint}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The object as a delete leaves it when it cannot go at once: finalizers of the
    /// propagation policy, deletionTimestamp and deletionGracePeriodSeconds (shortened by a
    /// later delete with a smaller grace period), generation + 1.
    fn mark_for_deletion(&self, old: &Value, options: &DeleteOptions) -> Result<Value, ApiError> {
        let mut object = old.clone();
        let mut finalizers = object::finalizers(old);
        propagation_finalizers(&mut finalizers, options, self.kind.orphans_by_default())?;
        object::set_finalizers(&mut object, &finalizers);
        let requested = self
            .kind
            .graceful_delete(old, options.grace_period_seconds)?
            .unwrap_or(0)
            .max(0);
        let now = chrono::Utc::now();
        match meta_str(old, "deletionTimestamp") {
            None => {
                if requested > 0 || !finalizers.is_empty() {
                    let at = now + chrono::Duration::seconds(requested);
                    set_meta(
                        &mut object,
                        "deletionTimestamp",
                        Some(object::timestamp(at).into()),
                    );
                    set_meta(
                        &mut object,
                        "deletionGracePeriodSeconds",
                        Some(requested.into()),
                    );
                    let generation = object::generation(old);
                    if generation > 0 {
                        set_meta(&mut object, "generation", Some((generation + 1).into()));
                    }
                }
            }
            Some(since) => {
                let current = meta_get(old, "deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if requested < current {
                    let started = chrono::DateTime::parse_from_rfc3339(since)
                        .map(|t| t.with_timezone(&chrono::Utc) - chrono::Duration::seconds(current))
                        .unwrap_or(now);
                    let at = started + chrono::Duration::seconds(requested);
                    set_meta(
                        &mut object,
                        "deletionTimestamp",
                        Some(object::timestamp(at).into()),
                    );
                    set_meta(
                        &mut object,
                        "deletionGracePeriodSeconds",
                        Some(requested.into()),
                    );
                }
            }
        }
        Ok(object)
    }
}

/// Whether an update deletes the object (upstream `ShouldDeleteDuringUpdate`): it leaves
/// no finalizers on an object already being deleted without a grace period (the kind may
/// still hold it: [`crate::registry::Kind::hold_deletion`]).
fn should_delete_during_update(new: &Value, old: &Value) -> bool {
    object::finalizers(new).is_empty()
        && meta_get(old, "deletionTimestamp").is_some()
        && meta_get(old, "deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
}

/// Sets `metadata.name` from the URL when absent. Errors: 400 when it differs (upstream's
/// `the name of the object (x) does not match the name on the URL (y)`).
fn check_name(object: &mut Value, name: &str) -> Result<(), ApiError> {
    match meta_str(object, "name").unwrap_or_default() {
        "" => set_meta(object, "name", Some(name.into())),
        found if found != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({found}) does not match the name on the URL ({name})"
            )));
        }
        _ => {}
    }
    Ok(())
}

/// Copies `from.status` into `to` (removing it when `from` has none).
fn copy_status(from: &Value, to: &mut Value) {
    let map = object::as_map(to);
    match from.get("status") {
        Some(status) => {
            map.insert("status".into(), status.clone());
        }
        None => {
            map.remove("status");
        }
    }
}

/// Adds or removes the `orphan` and `foregroundDeletion` finalizers as the delete's
/// propagation policy asks (upstream `deletionFinalizersForGarbageCollection`). Without a
/// policy, the object's own GC finalizers stay, else `orphan_by_default` (the kind's
/// [`Kind::orphans_by_default`]) adds `orphan`. Errors: 422-like 400 for an unknown policy
/// or both policy and orphanDependents set.
fn propagation_finalizers(
    finalizers: &mut Vec<String>,
    options: &DeleteOptions,
    orphan_by_default: bool,
) -> Result<(), ApiError> {
    let has_gc_finalizer = finalizers
        .iter()
        .any(|f| f == FINALIZER_ORPHAN || f == FINALIZER_FOREGROUND);
    let policy = match (
        options.propagation_policy.as_deref(),
        options.orphan_dependents,
    ) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "propagationPolicy: Invalid value: \"\": orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        (Some(policy), None) => Some(policy),
        (None, Some(true)) => Some("Orphan"),
        (None, Some(false)) => Some("Background"),
        (None, None) if orphan_by_default && !has_gc_finalizer => Some("Orphan"),
        (None, None) => None,
    };
    let (add, remove): (Option<&str>, &[&str]) = match policy {
        None => return Ok(()),
        Some("Orphan") => (Some(FINALIZER_ORPHAN), &[FINALIZER_FOREGROUND]),
        Some("Foreground") => (Some(FINALIZER_FOREGROUND), &[FINALIZER_ORPHAN]),
        Some("Background") => (None, &[FINALIZER_ORPHAN, FINALIZER_FOREGROUND]),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    finalizers.retain(|f| !remove.contains(&f.as_str()));
    if let Some(add) = add
        && !finalizers.iter().any(|f| f == add)
    {
        finalizers.push(add.to_owned());
    }
    Ok(())
}

/// Upstream's mapping of storage errors (`storage/errors`), for object `name` of
/// `resource`.
pub fn storage_error(err: StorageError, resource: &GroupResource, name: &str) -> ApiError {
    match err {
        StorageError::NotFound(_) => ApiError::not_found(resource, name),
        StorageError::AlreadyExists(_) => ApiError::already_exists(resource, name),
        StorageError::Conflict { .. } => ApiError::modified(resource, name),
        StorageError::Compacted {
            requested,
            compacted,
        } => too_old(requested, compacted),
        StorageError::TooLarge { size, limit } => ApiError::too_large(format!(
            "Request entity too large: object of {size} bytes is larger than the limit of {limit} bytes"
        )),
        StorageError::Unavailable(why) => ApiError::unavailable(why),
    }
}

/// 410 `too old resource version: 5 (200)`.
pub fn too_old(requested: Revision, compacted: Revision) -> ApiError {
    ApiError::gone(format!(
        "too old resource version: {requested} ({compacted})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_policies_set_gc_finalizers() {
        let opts = |policy: &str| DeleteOptions {
            propagation_policy: Some(policy.into()),
            ..Default::default()
        };
        let mut f = vec!["a".to_owned(), FINALIZER_ORPHAN.to_owned()];
        propagation_finalizers(&mut f, &opts("Foreground"), false).unwrap();
        assert_eq!(f, ["a", FINALIZER_FOREGROUND]);
        propagation_finalizers(&mut f, &opts("Orphan"), false).unwrap();
        assert_eq!(f, ["a", FINALIZER_ORPHAN]);
        propagation_finalizers(&mut f, &opts("Background"), false).unwrap();
        assert_eq!(f, ["a"]);
        assert!(propagation_finalizers(&mut f, &opts("Sideways"), false).is_err());
    }

    #[test]
    fn kinds_that_orphan_by_default_get_the_orphan_finalizer_without_a_policy() {
        let none = DeleteOptions::default();
        let mut f = vec!["a".to_owned()];
        propagation_finalizers(&mut f, &none, false).unwrap();
        assert_eq!(f, ["a"]);
        propagation_finalizers(&mut f, &none, true).unwrap();
        assert_eq!(f, ["a", FINALIZER_ORPHAN]);
        // The object's own GC finalizer, or an explicit policy, wins over the default.
        let mut foreground = vec![FINALIZER_FOREGROUND.to_owned()];
        propagation_finalizers(&mut foreground, &none, true).unwrap();
        assert_eq!(foreground, [FINALIZER_FOREGROUND]);
        let background = DeleteOptions {
            propagation_policy: Some("Background".into()),
            ..Default::default()
        };
        let mut f = Vec::new();
        propagation_finalizers(&mut f, &background, true).unwrap();
        assert!(f.is_empty());
    }
}
