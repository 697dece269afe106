//! The field manager of one kind (upstream `managedfields.NewDefaultFieldManager`): the
//! ownership update of every write and the server-side apply merge, with upstream's
//! layers — the version check, the client-side-apply upgrade (`lastappliedmanager`,
//! `lastappliedupdater`), `before-first-apply` (`skipnonapplied`), the cap on update
//! managers (`capmanagers`), manager identities (`buildmanagerinfo`), times
//! (`managedfieldsupdater`), metadata stripping (`stripmeta`) and the merge itself
//! (`structuredmerge`, SMD's `merge.Updater`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::fieldpath::{Path, Set};
use super::managed::{Managed, ManagerId, Operation, VersionedSet, is_reset};
use super::typed::{self, Comparison};
use super::types::TypeSource;

/// Upstream's `DefaultMaxUpdateManagers`: update entries beyond this are merged into
/// `ancient-changes` buckets, oldest first.
pub const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager of the fields an object had before its first apply.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The bucket manager of capped update entries.
pub const ANCIENT_CHANGES: &str = "ancient-changes";
/// kubectl's client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The field manager of `kubectl apply --server-side`, the only one whose applies upgrade
/// client-side-applied objects.
pub const KUBECTL: &str = "kubectl";

/// One apply conflict: a field `manager` owns that the apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: ManagerId,
    pub path: Path,
}

impl Conflict {
    /// The cause message: `conflict with "kubectl-client-side-apply" using apps/v1`.
    pub fn message(&self) -> String {
        format!("conflict with {}", self.manager.describe())
    }
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyError {
    /// Fields other managers own would change (409 Conflict unless forced).
    Conflicts(Vec<Conflict>),
    /// A malformed apply request (400).
    BadRequest(String),
    /// The configuration does not fit the type (upstream answers 500).
    Internal(String),
}

impl ApplyError {
    /// Upstream's message: `Apply failed with 1 conflict: conflict with "x": .spec.replicas`,
    /// or for several, per manager (sorted): `Apply failed with 2 conflicts: conflicts with
    /// "x":\n- .a\n- .b`.
    pub fn message(&self) -> String {
        match self {
            ApplyError::Conflicts(conflicts) => conflict_message(conflicts),
            ApplyError::BadRequest(m) | ApplyError::Internal(m) => m.clone(),
        }
    }
}

fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: {}: {}",
            only.message(),
            only.path
        );
    }
    let mut by_manager: BTreeMap<String, Vec<&Path>> = BTreeMap::new();
    for conflict in conflicts {
        by_manager
            .entry(conflict.manager.describe())
            .or_default()
            .push(&conflict.path);
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.iter().map(|p| format!("- {p}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The field manager of one kind at one version, for the main resource or a subresource.
#[derive(Debug, Clone)]
pub struct FieldManager<'a> {
    types: TypeSource<'a>,
    api_version: String,
    kind: String,
    subresource: String,
    reset: Set,
}

/// The manager of the temporary entry an update is first recorded under.
fn current_operation() -> ManagerId {
    ManagerId {
        manager: "current-operation".into(),
        operation: Operation::Update,
        api_version: String::new(),
        subresource: String::new(),
    }
}

/// Paths no manager ever owns (upstream `stripmeta`).
fn strip_set() -> Set {
    let meta = |name: &str| Path::fields(&["metadata", name]);
    Set::from_paths([
        Path::fields(&["apiVersion"]),
        Path::fields(&["kind"]),
        Path::fields(&["metadata"]),
        meta("name"),
        meta("namespace"),
        meta("creationTimestamp"),
        meta("selfLink"),
        meta("uid"),
        meta("clusterName"),
        meta("generation"),
        meta("managedFields"),
        meta("resourceVersion"),
    ])
}

fn timestamp(now: DateTime<Utc>) -> String {
    now.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn managed_fields_of(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

fn set_managed_fields(object: &mut Value, managed: &Managed) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(metadata) = metadata.as_object_mut() {
        match managed.encode() {
            Some(entries) => metadata.insert("managedFields".into(), entries),
            None => metadata.remove("managedFields"),
        };
    }
}

fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    strip_managed_fields(&mut copy);
    copy
}

/// Removes `metadata.managedFields` from `object`.
fn strip_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

impl<'a> FieldManager<'a> {
    /// The manager of objects of `kind` at `api_version` (`apps/v1`), typed by `types`.
    pub fn new(types: TypeSource<'a>, api_version: &str, kind: &str) -> Self {
        FieldManager {
            types,
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            subresource: String::new(),
            reset: Set::new(),
        }
    }

    /// For writes through `subresource` (`status`, `scale`).
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = subresource.to_owned();
        self
    }

    /// Fields the write resets whatever the client sends (upstream's strategies'
    /// `GetResetFields`: `status` for the main resource of kinds with a status
    /// subresource, `spec` for the status subresource); nobody gains ownership of them.
    pub fn reset_fields(mut self, reset: Set) -> Self {
        self.reset = reset;
        self
    }

    /// A new, empty object of the kind: what a create is compared with. Built-in kinds
    /// have their `spec` and `status` structs even when empty, as upstream's Go types.
    pub fn empty_object(&self) -> Value {
        let mut object = Map::new();
        object.insert("apiVersion".into(), self.api_version.clone().into());
        object.insert("kind".into(), self.kind.clone().into());
        object.insert("metadata".into(), Value::Object(Map::new()));
        let mut object = Value::Object(object);
        self.add_top_structs(&mut object);
        object
    }

    /// Compares as upstream compares Go objects: the `spec` and `status` structs of
    /// built-in kinds are there even when empty. They are added to `old` and `new` for the
    /// comparison and removed again, so both are left as they were (no copies).
    fn compare(&self, old: &mut Value, new: &mut Value) -> Comparison {
        let added_old = self.add_top_structs(old);
        let added_new = self.add_top_structs(new);
        let mut comparison = typed::compare(old, new, &self.types.root());
        comparison.filter(&self.reset);
        for (object, added) in [(old, added_old), (new, added_new)] {
            if let Some(map) = object.as_object_mut() {
                for part in added {
                    map.remove(part);
                }
            }
        }
        comparison
    }

    /// Adds the kind's empty `spec` and `status` structs that `object` lacks; returns the
    /// names of those it added.
    fn add_top_structs(&self, object: &mut Value) -> Vec<&'static str> {
        let mut added = Vec::new();
        let Some(map) = object.as_object_mut() else {
            return added;
        };
        if matches!(self.types, TypeSource::Definition { .. }) {
            let root = self.types.root();
            for part in ["spec", "status"] {
                if root.declares(part) && !map.contains_key(part) {
                    map.insert(part.into(), Value::Object(Map::new()));
                    added.push(part);
                }
            }
        }
        added
    }

    /// SMD's `Updater.update`: other managers lose the fields that changed (they would
    /// conflict; with `force` they lose them) and those removed. Errors: the conflicts.
    fn take_ownership(
        &self,
        comparison: &Comparison,
        managed: &mut Managed,
        workflow: &ManagerId,
        force: bool,
    ) -> Result<(), Vec<Conflict>> {
        let changed = comparison.modified.union(&comparison.added);
        let mut conflicts = Vec::new();
        let mut losses = Vec::new();
        for (id, versioned) in &managed.fields {
            if id == workflow {
                continue;
            }
            let conflicting = versioned.set.intersection(&changed);
            if !conflicting.is_empty() {
                conflicts.extend(conflicting.paths().into_iter().map(|path| Conflict {
                    manager: id.clone(),
                    path,
                }));
            }
            let lost = conflicting.union(&comparison.removed);
            if !lost.is_empty() {
                losses.push((id.clone(), lost));
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(conflicts);
        }
        for (id, lost) in losses {
            if let Some(versioned) = managed.fields.get_mut(&id) {
                versioned.set = versioned.set.difference(&lost);
            }
        }
        managed.fields.retain(|_, v| !v.set.is_empty());
        Ok(())
    }

    fn strip(&self, managed: &mut Managed, id: &ManagerId) {
        if let Some(versioned) = managed.fields.get_mut(id) {
            versioned.set = versioned.set.difference(&strip_set());
            if versioned.set.is_empty() {
                managed.fields.remove(id);
            }
        }
    }

    /// The ownership update of a non-apply write (`managedfieldsupdater`, `stripmeta`,
    /// SMD's `Updater.Update`), then the cap on update managers.
    fn record_update(
        &self,
        live: &mut Value,
        new: &mut Value,
        managed: &mut Managed,
        manager: &ManagerId,
        now: &str,
    ) {
        let current = current_operation();
        let comparison = self.compare(live, new);
        // Forced: an update never conflicts.
        let _ = self.take_ownership(&comparison, managed, &current, true);
        let owned = managed
            .fields
            .get(&current)
            .map(|v| v.set.clone())
            .unwrap_or_default()
            .difference(&comparison.removed)
            .union(&comparison.modified)
            .union(&comparison.added)
            .recursive_difference(&self.reset);
        managed.fields.insert(
            current.clone(),
            VersionedSet {
                set: owned,
                api_version: self.api_version.clone(),
                applied: false,
            },
        );
        self.strip(managed, &current);
        if let Some(recorded) = managed.fields.remove(&current)
            && !recorded.set.is_empty()
        {
            let set = match managed.fields.get(manager) {
                Some(previous) => recorded.set.union(&previous.set),
                None => recorded.set,
            };
            managed.fields.insert(
                manager.clone(),
                VersionedSet {
                    set,
                    api_version: recorded.api_version,
                    applied: false,
                },
            );
            managed.times.insert(manager.clone(), now.to_owned());
        }
        self.cap_update_managers(managed);
    }

    /// Upstream `capmanagers`: beyond [`MAX_UPDATE_MANAGERS`] update entries, the oldest
    /// are merged into one `ancient-changes` entry per version.
    fn cap_update_managers(&self, managed: &mut Managed) {
        let mut updaters: Vec<ManagerId> = managed
            .fields
            .iter()
            .filter(|(_, v)| !v.applied)
            .map(|(id, _)| id.clone())
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        let seconds = |id: &ManagerId| {
            managed
                .times
                .get(id)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp())
                .unwrap_or(0)
        };
        updaters.sort_by(|a, b| seconds(a).cmp(&seconds(b)).then_with(|| a.cmp(b)));
        let mut first_of_version: BTreeMap<String, ManagerId> = BTreeMap::new();
        let mut count = updaters.len();
        for id in updaters {
            if count <= MAX_UPDATE_MANAGERS {
                break;
            }
            let Some(versioned) = managed.fields.get(&id).cloned() else {
                continue;
            };
            let version = versioned.api_version.clone();
            let bucket = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &version, "");
            match first_of_version.get(&version) {
                Some(first) => {
                    if !managed.fields.contains_key(&bucket)
                        && let Some(moved) = managed.fields.remove(first)
                    {
                        managed.fields.insert(bucket.clone(), moved);
                    }
                    let merged = managed
                        .fields
                        .get(&bucket)
                        .map(|b| versioned.set.union(&b.set))
                        .unwrap_or(versioned.set);
                    managed.fields.insert(
                        bucket.clone(),
                        VersionedSet {
                            set: merged,
                            api_version: version,
                            applied: false,
                        },
                    );
                    managed.fields.remove(&id);
                    match managed.times.remove(&id) {
                        Some(time) => managed.times.insert(bucket, time),
                        None => managed.times.remove(&bucket),
                    };
                    count -= 1;
                }
                None => {
                    first_of_version.insert(version, id);
                }
            }
        }
    }

    /// The managedFields after a create or update by `manager` (upstream
    /// `FieldManager.UpdateNoErrors`): `new` with its `metadata.managedFields` set.
    ///
    /// The client's managedFields are kept when they decode and are not empty (`[]` or
    /// `[{}]` clear them), else the live object's are used (subresources always use the
    /// live object's). An object that is not tracked yet stays untracked on update; a
    /// create (a `live` without uid) starts tracking.
    pub fn update(&self, live: &Value, mut new: Value, manager: &str, now: DateTime<Utc>) -> Value {
        let live_managed = || Managed::decode(managed_fields_of(live)).unwrap_or_default();
        let mut managed = if !self.subresource.is_empty() {
            live_managed()
        } else if is_reset(managed_fields_of(&new)) {
            Managed::default()
        } else {
            match Managed::decode(managed_fields_of(&new)) {
                Ok(m) if !m.fields.is_empty() => m,
                _ => live_managed(),
            }
        };
        let mut live = without_managed_fields(live);
        strip_managed_fields(&mut new);
        let is_create = live
            .get("metadata")
            .and_then(|m| m.get("uid"))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if !managed.fields.is_empty() || is_create {
            let id = ManagerId::new(
                manager,
                Operation::Update,
                &self.api_version,
                &self.subresource,
            );
            self.record_update(&mut live, &mut new, &mut managed, &id, &timestamp(now));
        }
        set_managed_fields(&mut new, &managed);
        new
    }

    /// Server-side apply of `config` by `manager` to `live` (an [`empty_object`] for a
    /// create), upstream `FieldManager.Apply`. Returns the merged object with its
    /// managedFields, to be defaulted, validated and stored as any update.
    ///
    /// Errors: [`ApplyError::BadRequest`] when `config` is of another apiVersion or kind
    /// (`invalid object type: apps/v1, Kind=Deployment`) or carries managedFields;
    /// [`ApplyError::Internal`] when the live managedFields do not decode or `config` does
    /// not fit the type (`.spec.x: field not declared in schema`);
    /// [`ApplyError::Conflicts`] with other managers' fields unless `force`.
    ///
    /// [`empty_object`]: FieldManager::empty_object
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        manager: &str,
        force: bool,
        now: DateTime<Utc>,
    ) -> Result<Value, ApplyError> {
        let managed = Managed::decode(managed_fields_of(live))
            .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
        self.check_version(config)?;
        let now = timestamp(now);
        let result = self.apply_upgrading(live, config, managed, manager, force, &now)?;
        let (mut object, managed) = result;
        if manager == KUBECTL && has_last_applied(&object) {
            set_last_applied(&mut object, config);
        }
        set_managed_fields(&mut object, &managed);
        Ok(object)
    }

    /// Upstream `versioncheck`.
    fn check_version(&self, config: &Value) -> Result<(), ApplyError> {
        let text = |name: &str| config.get(name).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        if api_version == self.api_version && kind == self.kind {
            return Ok(());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Err(ApplyError::BadRequest(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )))
    }

    /// Upstream `lastappliedmanager`: an apply by `kubectl` whose conflicts are all fields
    /// the client-side apply annotation set (with the values the object still has) takes
    /// them over.
    fn apply_upgrading(
        &self,
        live: &Value,
        config: &Value,
        managed: Managed,
        manager: &str,
        force: bool,
        now: &str,
    ) -> Result<(Value, Managed), ApplyError> {
        let conflicts = match self.apply_tracked(live, config, managed.clone(), manager, force, now)
        {
            Err(ApplyError::Conflicts(conflicts)) if manager == KUBECTL => conflicts,
            other => return other,
        };
        let Some(allowed) = self.last_applied_fields(live) else {
            return Err(ApplyError::Conflicts(conflicts));
        };
        let remaining: Vec<Conflict> = conflicts
            .into_iter()
            .filter(|c| !allowed.has(&c.path))
            .collect();
        if !remaining.is_empty() {
            return Err(ApplyError::Conflicts(remaining));
        }
        self.apply_tracked(live, config, managed, manager, true, now)
    }

    /// The fields of the client-side apply annotation that still have the applied values.
    fn last_applied_fields(&self, live: &Value) -> Option<Set> {
        let text = live
            .get("metadata")?
            .get("annotations")?
            .get(LAST_APPLIED)?
            .as_str()
            .filter(|t| !t.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version.as_str()) {
            return None;
        }
        let ty = self.types.root();
        let comparison = typed::compare(&last, &without_managed_fields(live), &ty);
        Some(
            typed::to_field_set(&last, &ty)
                .difference(&comparison.modified)
                .difference(&comparison.added)
                .difference(&comparison.removed),
        )
    }

    /// Upstream `skipnonapplied` (the first apply gives the fields set so far to
    /// `before-first-apply`), then the apply with identities, times and stripping.
    fn apply_tracked(
        &self,
        live: &Value,
        config: &Value,
        mut managed: Managed,
        manager: &str,
        force: bool,
        now: &str,
    ) -> Result<(Value, Managed), ApplyError> {
        let mut live = without_managed_fields(live);
        if managed.fields.is_empty() {
            let before = ManagerId::new(
                BEFORE_FIRST_APPLY,
                Operation::Update,
                &self.api_version,
                &self.subresource,
            );
            self.record_update(
                &mut self.empty_object(),
                &mut live,
                &mut managed,
                &before,
                now,
            );
        }
        let id = ManagerId::new(
            manager,
            Operation::Apply,
            &self.api_version,
            &self.subresource,
        );
        let merged = self.apply_merge(&live, config, &mut managed, &id, force)?;
        let object = match merged {
            Some(object) => {
                managed.times.insert(id.clone(), now.to_owned());
                object
            }
            None => live,
        };
        self.strip(&mut managed, &id);
        Ok((object, managed))
    }

    /// SMD's `Updater.Apply`: merge, the applier's new set, pruning of what it no longer
    /// applies, and the ownership changes. `None` when nothing changed.
    fn apply_merge(
        &self,
        live: &Value,
        config: &Value,
        managed: &mut Managed,
        id: &ManagerId,
        force: bool,
    ) -> Result<Option<Value>, ApplyError> {
        if managed_fields_of(config).is_some_and(|m| !m.is_null()) {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        let ty = self.types.root();
        typed::validate(config, &ty).map_err(|e| {
            ApplyError::Internal(format!(
                "failed to create typed patch object ({}): {e}",
                self.describe(config)
            ))
        })?;
        let merged = typed::merge(live, config, &ty);
        let last = managed.fields.get(id).map(|v| v.set.clone());
        let set = typed::to_field_set(config, &ty).recursive_difference(&self.reset);
        managed.fields.insert(
            id.clone(),
            VersionedSet {
                set,
                api_version: self.api_version.clone(),
                applied: true,
            },
        );
        let mut merged = match last.filter(|l| !l.is_empty()) {
            Some(last) => self.prune(&merged, managed, &last),
            None => merged,
        };
        let comparison = self.compare(&mut live.clone(), &mut merged);
        self.take_ownership(&comparison, managed, id, force)
            .map_err(ApplyError::Conflicts)?;
        Ok((merged != *live).then_some(merged))
    }

    /// SMD's `prune`: removes what the applier set last time and no longer sets, unless
    /// another manager (or the new configuration) owns it.
    fn prune(&self, merged: &Value, managed: &Managed, last: &Set) -> Value {
        let ty = self.types.root();
        let named = |set: &Set| typed::ensure_named_fields_are_members(set, &ty);
        let last = named(last);
        let pruned = typed::remove_items(merged, &last, &ty);
        // Add back what anybody owns.
        let owned = managed
            .fields
            .values()
            .fold(Set::new(), |all, v| all.union(&v.set));
        let merged_set = named(&typed::to_field_set(merged, &ty));
        let pruned_set = named(&typed::to_field_set(&pruned, &ty));
        let unowned = merged_set.difference(&pruned_set.union(&named(&owned)));
        let pruned = typed::remove_items(merged, &unowned, &ty);
        // Remove only what the applier owned.
        let pruned_set = named(&typed::to_field_set(&pruned, &ty));
        let dangling = merged_set.difference(&pruned_set).intersection(&last);
        typed::remove_items(merged, &dangling, &ty)
    }

    /// `namespace/name; group/version, Kind=Kind` as upstream's errors name objects.
    fn describe(&self, object: &Value) -> String {
        let meta = |name: &str| {
            object
                .get("metadata")
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &self.api_version));
        format!(
            "{}/{}; {group}/{version}, Kind={}",
            meta("namespace"),
            meta("name"),
            self.kind
        )
    }
}

fn has_last_applied(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty())
}

/// Upstream `lastappliedupdater`: the annotation becomes the applied configuration
/// (without the annotation itself), as compact JSON.
fn set_last_applied(object: &mut Value, config: &Value) {
    let mut applied = config.clone();
    if let Some(annotations) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
    let text = applied.to_string();
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED.into(), text.into());
    }
}
