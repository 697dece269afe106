//! The deletion of a namespace's content (upstream `pkg/controller/namespace/deletion`,
//! `NamespacedResourcesDeleter`).
//!
//! One step, [`NamespacedResourcesDeleter::delete`]: sets phase `Terminating`; deletes
//! every object of every namespaced resource the API server serves (deletecollection
//! where it can, else one by one, always with Background propagation, so that no kind's
//! default `orphan` policy leaves a finalizer that nothing removes); records what is left
//! in the namespace's five deletion conditions (upstream's reasons and messages); once
//! nothing is left, removes the `kubernetes` finalizer through `namespaces/<name>/finalize`,
//! and the API server removes the namespace when no other `spec.finalizers` hold it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, PropagationPolicy};
use kube::discovery::{ApiResource, Discovery, Scope, verbs};

use crate::Error;

/// The finalizer the namespace controller owns in `spec.finalizers`.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";
/// The phase of a namespace being deleted.
const TERMINATING: &str = "Terminating";
/// How long to wait for objects held by finalizers before looking again (upstream
/// `finalizerEstimateSeconds`).
const FINALIZER_ESTIMATE: Duration = Duration::from_secs(1);
/// Attempts of a change that conflicts with another writer (upstream
/// `retryOnConflictError` retries until the namespace is gone or the change lands).
const CONFLICT_ATTEMPTS: usize = 5;

/// The condition types the deleter keeps, in upstream's order.
const CONDITION_TYPES: [&str; 5] = [
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
];

/// Deletes namespaces' content through the API; see the module doc.
#[derive(Clone)]
pub struct NamespacedResourcesDeleter {
    client: kube::Client,
    namespaces: Api<Namespace>,
}

impl std::fmt::Debug for NamespacedResourcesDeleter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespacedResourcesDeleter")
            .finish_non_exhaustive()
    }
}

/// What deleting a namespace's content left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    /// `pods.` / `deployments.apps` (upstream prints `<resource>.<group>`) → objects left.
    pub remaining: BTreeMap<String, usize>,
    /// Finalizer → objects left that carry it.
    pub finalizers: BTreeMap<String, usize>,
    /// Discovery or deletion failures (upstream `NamespaceDeletionDiscoveryFailure` and
    /// `NamespaceDeletionContentFailure`).
    pub discovery_error: Option<String>,
    /// See `discovery_error`.
    pub errors: Vec<String>,
    /// When to look again: the longest grace period of the pods deleted, at least
    /// [`FINALIZER_ESTIMATE`] while anything is left (upstream's estimate).
    pub estimate: Duration,
}

impl Content {
    /// Nothing left and nothing failed.
    pub fn is_empty(&self) -> bool {
        self.remaining.is_empty() && self.errors.is_empty() && self.discovery_error.is_none()
    }
}

impl NamespacedResourcesDeleter {
    /// A deleter acting through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            namespaces: Api::all(client.clone()),
            client,
        }
    }

    /// One step of namespace `name`'s deletion (upstream `Delete`). Returns `None` when
    /// it is done (or the namespace is gone, or not being deleted), `Some(wait)` when
    /// content is left to look at again after `wait`. Errors: the API server refused a
    /// read or write, or some content could not be deleted (retried with backoff).
    pub async fn delete(&self, name: &str) -> Result<Option<Duration>, Error> {
        let Some(namespace) = self.namespaces.get_opt(name).await? else {
            return Ok(None);
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(None);
        }
        let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
        let namespace = if phase == Some(TERMINATING) {
            namespace
        } else {
            let marked = self
                .update_status(namespace, |ns| {
                    ns.status.get_or_insert_with(Default::default).phase =
                        Some(TERMINATING.to_owned());
                })
                .await?;
            let Some(marked) = marked else {
                return Ok(None);
            };
            marked
        };
        if !spec_finalizers(&namespace).any(|f| f == KUBERNETES_FINALIZER) {
            return Ok(None);
        }
        let content = self.delete_all_content(name).await;
        let now = Time(Timestamp::now());
        let Some(namespace) = self
            .update_status(namespace, |ns| {
                let status = ns.status.get_or_insert_with(Default::default);
                let old = status.conditions.take().unwrap_or_default();
                status.conditions = Some(conditions(old, &content, &now));
            })
            .await?
        else {
            return Ok(None);
        };
        if let Some(e) = &content.discovery_error {
            return Err(Error::Invalid(format!("discovery failed: {e}")));
        }
        if !content.errors.is_empty() {
            return Err(Error::Invalid(content.errors.join("; ")));
        }
        if !content.remaining.is_empty() {
            return Ok(Some(content.estimate.max(FINALIZER_ESTIMATE)));
        }
        self.finalize(namespace).await?;
        Ok(None)
    }

    /// Writes `change` to the namespace's status, reading it again on a conflict.
    /// `None`: the namespace is gone.
    async fn update_status(
        &self,
        mut namespace: Namespace,
        change: impl Fn(&mut Namespace),
    ) -> Result<Option<Namespace>, Error> {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        for _ in 0..CONFLICT_ATTEMPTS {
            change(&mut namespace);
            match self
                .namespaces
                .replace_status(&name, &PostParams::default(), &namespace)
                .await
            {
                Ok(updated) => return Ok(Some(updated)),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    match self.namespaces.get_opt(&name).await? {
                        Some(fresh) => namespace = fresh,
                        None => return Ok(None),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Invalid(format!(
            "namespace {name}: the status kept conflicting"
        )))
    }

    /// Removes the `kubernetes` finalizer (upstream `finalizeNamespace`, through the
    /// `finalize` subresource), reading the namespace again on a conflict.
    async fn finalize(&self, mut namespace: Namespace) -> Result<(), Error> {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        for _ in 0..CONFLICT_ATTEMPTS {
            let spec = namespace.spec.get_or_insert_with(Default::default);
            let kept: Vec<String> = spec
                .finalizers
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != KUBERNETES_FINALIZER)
                .collect();
            spec.finalizers = Some(kept);
            match self
                .namespaces
                .replace_subresource("finalize", &name, &PostParams::default(), &namespace)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    match self.namespaces.get_opt(&name).await? {
                        Some(fresh) => namespace = fresh,
                        None => return Ok(()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Invalid(format!(
            "namespace {name}: finalizing kept conflicting"
        )))
    }

    /// Deletes every object of every namespaced resource in `namespace`, then counts
    /// what is left (upstream `deleteAllContent`).
    async fn delete_all_content(&self, namespace: &str) -> Content {
        let mut content = Content::default();
        let discovery = match Discovery::new(self.client.clone()).run().await {
            Ok(d) => d,
            Err(e) => {
                content.discovery_error = Some(e.to_string());
                return content;
            }
        };
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                let deletable = caps.scope == Scope::Namespaced
                    && !ar.plural.contains('/')
                    && caps.supports_operation(verbs::LIST)
                    && (caps.supports_operation(verbs::DELETE)
                        || caps.supports_operation(verbs::DELETE_COLLECTION));
                if !deletable {
                    continue;
                }
                let collection = caps.supports_operation(verbs::DELETE_COLLECTION);
                match self.delete_resource(&ar, namespace, collection).await {
                    Ok((left, estimate)) => {
                        content.estimate = content.estimate.max(estimate);
                        if !left.is_empty() {
                            content.estimate = content.estimate.max(FINALIZER_ESTIMATE);
                            content
                                .remaining
                                .insert(format!("{}.{}", ar.plural, ar.group), left.len());
                        }
                        for finalizer in left.iter().flat_map(|o| o.metadata.finalizers.iter()) {
                            for f in finalizer {
                                *content.finalizers.entry(f.clone()).or_default() += 1;
                            }
                        }
                    }
                    Err(e) => content.errors.push(e.message()),
                }
            }
        }
        content
    }

    /// Deletes the objects of one resource in `namespace` (deletecollection, or one by
    /// one); returns those still there and, for pods, the longest grace period of the
    /// pods not yet terminal (upstream `estimateGracefulTerminationForPods`).
    async fn delete_resource(
        &self,
        ar: &ApiResource,
        namespace: &str,
        collection: bool,
    ) -> Result<(Vec<DynamicObject>, Duration), Error> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, ar);
        let mut estimate = Duration::ZERO;
        if ar.group.is_empty() && ar.plural == "pods" {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            estimate = pods_grace_estimate(&pods.list(&ListParams::default()).await?.items);
        }
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        let mut deleted = false;
        if collection {
            match api.delete_collection(&params, &ListParams::default()).await {
                Ok(_) => deleted = true,
                // Not supported after all: one by one (upstream does the same).
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !deleted {
            for object in api.list(&ListParams::default()).await?.items {
                let name = object.metadata.name.unwrap_or_default();
                match api.delete(&name, &params).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok((api.list(&ListParams::default()).await?.items, estimate))
    }
}

/// The longest `terminationGracePeriodSeconds` of the pods not Succeeded or Failed.
fn pods_grace_estimate(pods: &[Pod]) -> Duration {
    let seconds = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| p.spec.as_ref()?.termination_grace_period_seconds)
        .max()
        .unwrap_or(0);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

fn spec_finalizers(namespace: &Namespace) -> impl Iterator<Item = &String> {
    namespace
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .into_iter()
        .flatten()
}

/// The namespace's conditions after a pass over its content (upstream's
/// `namespaceConditionUpdater`): each of the five types once, true with upstream's
/// failure reason and message when it applies, else false with upstream's success ones.
/// A condition whose status changes gets `now` as `lastTransitionTime`; other conditions
/// in `old` are kept.
pub fn conditions(
    mut old: Vec<NamespaceCondition>,
    content: &Content,
    now: &Time,
) -> Vec<NamespaceCondition> {
    for kind in CONDITION_TYPES {
        let (status, reason, message) = condition(kind, content);
        match old.iter_mut().find(|c| c.type_ == kind) {
            None => old.push(NamespaceCondition {
                type_: kind.to_owned(),
                status: status.to_owned(),
                last_transition_time: Some(now.clone()),
                reason: Some(reason.to_owned()),
                message: Some(message),
            }),
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = Some(now.clone());
                }
                status.clone_into(&mut c.status);
                c.reason = Some(reason.to_owned());
                c.message = Some(message);
            }
        }
    }
    old
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
        "NamespaceDeletionDiscoveryFailure" => match &content.discovery_error {
            Some(e) => (
                "True",
                "DiscoveryFailed",
                format!("Discovery failed for some groups, 1 failing: {e}"),
            ),
            None => (
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered".to_owned(),
            ),
        },
        "NamespaceDeletionGroupVersionParsingFailure" => (
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".to_owned(),
        ),
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
        "NamespaceDeletionContentFailure" => (
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".to_owned(),
        ),
        "NamespaceContentRemaining" if !content.remaining.is_empty() => {
            let message = format!(
                "Some resources are remaining: {}",
                join(&content.remaining, " has ")
            );
            ("True", "SomeResourcesRemain", message)
        }
        "NamespaceContentRemaining" => (
            "False",
            "ContentRemoved",
            "All content successfully removed".to_owned(),
        ),
        _ if !content.finalizers.is_empty() => {
            let message = format!(
                "Some content in the namespace has finalizers remaining: {}",
                join(&content.finalizers, " in ")
            );
            ("True", "SomeFinalizersRemain", message)
        }
        _ => (
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};

    use super::*;

    fn content(remaining: &[(&str, usize)], finalizers: &[(&str, usize)]) -> Content {
        let map =
            |pairs: &[(&str, usize)]| pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
        Content {
            remaining: map(remaining),
            finalizers: map(finalizers),
            ..Content::default()
        }
    }

    fn by_type<'c>(conditions: &'c [NamespaceCondition], kind: &str) -> &'c NamespaceCondition {
        let found = conditions.iter().find(|c| c.type_ == kind);
        found.unwrap_or_else(|| panic!("no {kind} in {conditions:?}"))
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("a time"))
    }

    #[test]
    fn conditions_name_what_remains_as_upstream() {
        let left = content(
            &[("pods.", 2), ("widgets.example.com", 1)],
            &[("example.com/keep", 1)],
        );
        let conditions = conditions(Vec::new(), &left, &at(1));
        assert_eq!(conditions.len(), 5);
        let remaining = by_type(&conditions, "NamespaceContentRemaining");
        assert_eq!(remaining.status, "True");
        assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            remaining.message.as_deref(),
            Some(
                "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances"
            )
        );
        let finalizers = by_type(&conditions, "NamespaceFinalizersRemaining");
        assert_eq!(finalizers.reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            finalizers.message.as_deref(),
            Some(
                "Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances"
            )
        );
        let failure = by_type(&conditions, "NamespaceDeletionContentFailure");
        assert_eq!(
            (failure.status.as_str(), failure.reason.as_deref()),
            ("False", Some("ContentDeleted"))
        );
    }

    #[test]
    fn conditions_change_in_place_and_keep_transition_times_of_unchanged_status() {
        let first = conditions(Vec::new(), &content(&[("pods.", 1)], &[]), &at(1));
        let mut failed = content(&[], &[]);
        failed.errors = vec!["b failed".into(), "a failed".into()];
        let second = conditions(first, &failed, &at(2));
        assert_eq!(second.len(), 5);
        let remaining = by_type(&second, "NamespaceContentRemaining");
        assert_eq!(
            (remaining.status.as_str(), &remaining.last_transition_time),
            ("False", &Some(at(2)))
        );
        let discovery = by_type(&second, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(discovery.last_transition_time, Some(at(1)));
        let failure = by_type(&second, "NamespaceDeletionContentFailure");
        assert_eq!(failure.reason.as_deref(), Some("ContentDeletionFailed"));
        assert_eq!(
            failure.message.as_deref(),
            Some("Failed to delete all resource types, 2 remaining: a failed, b failed")
        );
    }

    #[test]
    fn the_estimate_is_the_longest_grace_of_pods_still_running() {
        let pod = |grace: i64, phase: &str| Pod {
            spec: Some(PodSpec {
                termination_grace_period_seconds: Some(grace),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        let pods = [pod(5, "Running"), pod(60, "Succeeded"), pod(12, "Pending")];
        assert_eq!(pods_grace_estimate(&pods), Duration::from_secs(12));
        assert_eq!(pods_grace_estimate(&[]), Duration::ZERO);
        assert!(content(&[], &[]).is_empty());
        assert!(!content(&[("pods.", 1)], &[]).is_empty());
    }
}
