//! The namespace controller's deletion of a namespace (upstream
//! `pkg/controller/namespace/deletion`, `NamespacedResourcesDeleter`), run by the API server
//! as a loop until Skiff has a controller manager.
//!
//! For each namespace with a deletionTimestamp, a pass: sets phase `Terminating`; deletes
//! every namespaced object in it as a client would (graceful deletion: a pod on a node gets
//! its grace period, a pod bound to no node goes at once; objects with finalizers stay until
//! their finalizers are removed); records what is left in the namespace's conditions
//! (`NamespaceDeletionContentFailure`, `NamespaceContentRemaining`,
//! `NamespaceFinalizersRemaining`, upstream's reasons and messages); once nothing is left,
//! removes the `kubernetes` finalizer from `spec.finalizers` and deletes the namespace, which
//! goes when no other `spec.finalizers` remain. A namespace with content left is looked at
//! again on the next pass.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use skiff_api::core::namespace::KUBERNETES_FINALIZER;

use super::{TERMINATING, namespaces};
use crate::error::{ApiError, GroupResource};
use crate::registry::Objects;

/// How often the loop looks for namespaces being deleted (upstream requeues a namespace
/// with content left after an estimate of at least a second).
pub const PASS_INTERVAL: Duration = Duration::from_secs(1);

/// The condition types the deleter keeps, in upstream's order.
const CONDITION_TYPES: [&str; 5] = [
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// Runs passes every `interval`, forever (the task is dropped with the server).
pub async fn run(objects: &dyn Objects, interval: Duration) {
    loop {
        if let Err(e) = pass(objects).await {
            tracing::warn!(error = %e.message, "namespace deleter: cannot list namespaces");
        }
        tokio::time::sleep(interval).await;
    }
}

/// One pass over every namespace being deleted. Errors: listing the namespaces failed
/// (a failure on one namespace is logged and the others go on).
pub async fn pass(objects: &dyn Objects) -> Result<(), ApiError> {
    for namespace in objects.list(&namespaces(), None).await? {
        if namespace.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let name = str_at(&namespace, "/metadata/name");
        if let Err(e) = delete(objects, name).await {
            tracing::warn!(namespace = name, error = %e.message, "namespace deleter");
        }
    }
    Ok(())
}

/// Where a namespace's deletion stands after [`delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Not being deleted, or gone.
    Done,
    /// Content is left (being deleted gracefully or held by finalizers): look again later.
    ContentRemaining,
    /// Content and the `kubernetes` finalizer are gone; other `spec.finalizers` hold it.
    FinalizersRemaining,
}

/// One step of namespace `name`'s deletion (upstream `namespacedResourcesDeleter.Delete`).
pub async fn delete(objects: &dyn Objects, name: &str) -> Result<Progress, ApiError> {
    let Some(namespace) = get(objects, name).await? else {
        return Ok(Progress::Done);
    };
    if namespace.pointer("/metadata/deletionTimestamp").is_none() {
        return Ok(Progress::Done);
    }
    if namespace.pointer("/status/phase").and_then(Value::as_str) != Some(TERMINATING) {
        update(objects, name, &mut |ns: &mut Value| {
            ns["status"]["phase"] = json!(TERMINATING);
        })
        .await?;
    }
    if spec_finalizers(&namespace).is_empty() {
        return delete_namespace(objects, name).await;
    }
    let content = delete_content(objects, name).await;
    let now = now();
    update(objects, name, &mut |ns: &mut Value| {
        let old = ns.pointer("/status/conditions").cloned();
        let old = old
            .as_ref()
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        ns["status"]["conditions"] = Value::Array(conditions(old, &content, &now));
    })
    .await?;
    if !content.is_empty() {
        return Ok(Progress::ContentRemaining);
    }
    let finalized = update(objects, name, &mut |ns: &mut Value| {
        let kept: Vec<String> = spec_finalizers(ns)
            .into_iter()
            .filter(|f| f != KUBERNETES_FINALIZER)
            .collect();
        ns["spec"]["finalizers"] = json!(kept);
    })
    .await?;
    match finalized {
        Some(ns) if spec_finalizers(&ns).is_empty() => delete_namespace(objects, name).await,
        Some(_) => Ok(Progress::FinalizersRemaining),
        None => Ok(Progress::Done),
    }
}

/// What deleting a namespace's content left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    /// `pods.` / `deployments.apps` → objects left.
    pub remaining: BTreeMap<String, usize>,
    /// Finalizer → objects left that carry it.
    pub finalizers: BTreeMap<String, usize>,
    /// Resources whose objects could not be listed or deleted: the errors.
    pub errors: Vec<String>,
}

impl Content {
    /// Nothing left and nothing failed.
    pub fn is_empty(&self) -> bool {
        self.remaining.is_empty() && self.errors.is_empty()
    }
}

/// Deletes every object of every namespaced resource in `namespace` (graceful deletion,
/// as a client's DELETE), then counts what is left (upstream `deleteAllContent`).
/// Resources that cannot be listed or deleted (405) are skipped.
async fn delete_content(objects: &dyn Objects, namespace: &str) -> Content {
    let mut content = Content::default();
    for resource in objects.namespaced_resources() {
        match delete_resource(objects, &resource, namespace).await {
            Ok(left) => {
                if !left.is_empty() {
                    content.remaining.insert(
                        format!("{}.{}", resource.resource, resource.group),
                        left.len(),
                    );
                }
                for object in &left {
                    let finalizers = object.pointer("/metadata/finalizers");
                    for finalizer in finalizers.and_then(Value::as_array).into_iter().flatten() {
                        if let Some(finalizer) = finalizer.as_str() {
                            *content.finalizers.entry(finalizer.to_owned()).or_default() += 1;
                        }
                    }
                }
            }
            Err(e) if e.code == 405 => {}
            Err(e) => content.errors.push(e.message),
        }
    }
    content
}

/// Deletes the objects of one resource in `namespace`; returns those still there.
async fn delete_resource(
    objects: &dyn Objects,
    resource: &GroupResource,
    namespace: &str,
) -> Result<Vec<Value>, ApiError> {
    for object in objects.list(resource, Some(namespace)).await? {
        let name = str_at(&object, "/metadata/name");
        match objects.delete(resource, Some(namespace), name, None).await {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    objects.list(resource, Some(namespace)).await
}

/// The namespace's conditions after a pass over its content (upstream's
/// `namespaceConditionUpdater`): each of the five types once, true with upstream's
/// failure reason and message when it applies, else false with upstream's success ones.
/// A condition whose status changes gets `now` as `lastTransitionTime`; other conditions
/// in `old` are kept.
pub fn conditions(old: &[Value], content: &Content, now: &str) -> Vec<Value> {
    let mut conditions = old.to_vec();
    for kind in CONDITION_TYPES {
        let (status, reason, message) = condition(kind, content);
        let found = conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
        match found {
            None => conditions.push(json!({
                "type": kind,
                "status": status,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            })),
            Some(condition) => {
                if condition.get("status").and_then(Value::as_str) != Some(status) {
                    condition["lastTransitionTime"] = json!(now);
                }
                condition["status"] = json!(status);
                condition["reason"] = json!(reason);
                condition["message"] = json!(message);
            }
        }
    }
    conditions
}

/// Status, reason and message of one condition type.
fn condition(kind: &str, content: &Content) -> (&'static str, &'static str, String) {
    let join = |counts: &BTreeMap<String, usize>, unit: &str| {
        let parts: Vec<String> = counts
            .iter()
            .map(|(k, n)| format!("{k}{unit}{n} resource instances"))
            .collect();
        parts.join(", ")
    };
    match kind {
        "NamespaceDeletionContentFailure" if !content.errors.is_empty() => {
            let mut errors = content.errors.clone();
            errors.sort();
            let message = format!(
                "Failed to delete all resource types, {} remaining: {}",
                errors.len(),
                errors.join(", ")
            );
            ("True", "ContentDeletionFailed", message)
        }
        "NamespaceContentRemaining" if !content.remaining.is_empty() => {
            let message = format!(
                "Some resources are remaining: {}",
                join(&content.remaining, " has ")
            );
            ("True", "SomeResourcesRemain", message)
        }
        "NamespaceFinalizersRemaining" if !content.finalizers.is_empty() => {
            let message = format!(
                "Some content in the namespace has finalizers remaining: {}",
                join(&content.finalizers, " in ")
            );
            ("True", "SomeFinalizersRemain", message)
        }
        "NamespaceDeletionDiscoveryFailure" => (
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered".to_owned(),
        ),
        "NamespaceDeletionGroupVersionParsingFailure" => (
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".to_owned(),
        ),
        "NamespaceDeletionContentFailure" => (
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".to_owned(),
        ),
        "NamespaceContentRemaining" => (
            "False",
            "ContentRemoved",
            "All content successfully removed".to_owned(),
        ),
        _ => (
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".to_owned(),
        ),
    }
}

/// Deletes the finalized namespace (it goes unless `metadata.finalizers` hold it).
async fn delete_namespace(objects: &dyn Objects, name: &str) -> Result<Progress, ApiError> {
    match objects.delete(&namespaces(), None, name, None).await {
        Ok(()) => Ok(Progress::Done),
        Err(e) if e.code == 404 => Ok(Progress::Done),
        Err(e) => Err(e),
    }
}

/// The namespace, `None` when gone.
async fn get(objects: &dyn Objects, name: &str) -> Result<Option<Value>, ApiError> {
    match objects.get(&namespaces(), None, name).await {
        Ok(namespace) => Ok(Some(namespace)),
        Err(e) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Changes the namespace (retrying on conflicts); `None` when it is gone, also when the
/// change removed it (an emptied `spec.finalizers` on a namespace without
/// `metadata.finalizers`).
async fn update(
    objects: &dyn Objects,
    name: &str,
    change: &mut (dyn FnMut(&mut Value) + Send),
) -> Result<Option<Value>, ApiError> {
    let mut mutate = |ns: &mut Value| {
        change(ns);
        Ok::<(), ApiError>(())
    };
    match objects.update(&namespaces(), None, name, &mut mutate).await {
        Ok(namespace) => Ok(Some(namespace)),
        Err(e) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

fn spec_finalizers(namespace: &Value) -> Vec<String> {
    let finalizers = namespace
        .pointer("/spec/finalizers")
        .and_then(Value::as_array);
    let names = finalizers.into_iter().flatten().filter_map(Value::as_str);
    names.map(str::to_owned).collect()
}

fn str_at<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The current time as upstream's `metav1.Time` (RFC 3339, seconds).
fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(remaining: &[(&str, usize)], finalizers: &[(&str, usize)]) -> Content {
        let map =
            |pairs: &[(&str, usize)]| pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
        Content {
            remaining: map(remaining),
            finalizers: map(finalizers),
            errors: Vec::new(),
        }
    }

    fn by_type<'c>(conditions: &'c [Value], kind: &str) -> &'c Value {
        let found = conditions.iter().find(|c| c["type"] == kind);
        found.unwrap_or_else(|| panic!("no {kind} in {conditions:?}"))
    }

    #[test]
    fn conditions_name_what_remains_as_upstream() {
        let left = content(
            &[("pods.", 2), ("widgets.example.com", 1)],
            &[("example.com/keep", 1)],
        );
        let conditions = conditions(&[], &left, "2026-01-01T00:00:00Z");
        assert_eq!(conditions.len(), 5);
        let remaining = by_type(&conditions, "NamespaceContentRemaining");
        assert_eq!(remaining["status"], "True");
        assert_eq!(remaining["reason"], "SomeResourcesRemain");
        assert_eq!(
            remaining["message"],
            "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances"
        );
        let finalizers = by_type(&conditions, "NamespaceFinalizersRemaining");
        assert_eq!(finalizers["reason"], "SomeFinalizersRemain");
        assert_eq!(
            finalizers["message"],
            "Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances"
        );
        let failure = by_type(&conditions, "NamespaceDeletionContentFailure");
        assert_eq!(
            (&failure["status"], &failure["reason"]),
            (&json!("False"), &json!("ContentDeleted"))
        );
    }

    #[test]
    fn conditions_change_in_place_and_keep_transition_times_of_unchanged_status() {
        let first = conditions(&[], &content(&[("pods.", 1)], &[]), "t1");
        let mut failed = content(&[], &[]);
        failed.errors = vec!["b failed".into(), "a failed".into()];
        let second = conditions(&first, &failed, "t2");
        assert_eq!(second.len(), 5);
        let remaining = by_type(&second, "NamespaceContentRemaining");
        assert_eq!(
            (&remaining["status"], &remaining["lastTransitionTime"]),
            (&json!("False"), &json!("t2"))
        );
        let discovery = by_type(&second, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(discovery["lastTransitionTime"], "t1");
        let failure = by_type(&second, "NamespaceDeletionContentFailure");
        assert_eq!(failure["reason"], "ContentDeletionFailed");
        assert_eq!(
            failure["message"],
            "Failed to delete all resource types, 2 remaining: a failed, b failed"
        );
    }
}
