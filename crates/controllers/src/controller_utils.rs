//! What the workload controllers share (upstream `pkg/controller/controller_utils.go`
//! and `controller_ref_manager.go`): expectations, pods made from a template, adoption
//! and release of pods by their controller reference, the order in which surplus pods
//! are deleted, slow-start batches, status writes retried once on a conflict, and the
//! start of a controller: the wait for its informers' caches and the worker loop.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use skiff_api::core::pod::conditions::{is_pod_ready, pod_phase, ready_condition};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{SharedInformer, Store, Watchable};
use skiff_client::workqueue::WorkQueue;
use tokio_util::sync::CancellationToken;

use crate::Error;

/// How long expectations may stay unmet before a sync goes ahead anyway (upstream
/// `ExpectationsTimeout`): a watch event that never came must not stall a controller.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The most pods one sync creates or deletes (upstream `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// The first batch of a slow start (upstream `SlowStartInitialBatchSize`).
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// The annotation whose integer value ranks pods for deletion, lower first (upstream
/// `PodDeletionCost`, beta and on since 1.22).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

#[derive(Debug, Clone)]
struct Expectation {
    add: i64,
    del: i64,
    /// The keys (`namespace/name`) of the pods whose deletion is awaited.
    deleting: HashSet<String>,
    at: Instant,
}

/// The creates and deletes a controller issued and whose watch events it has not seen
/// yet, per controller key (upstream `UIDTrackingControllerExpectations`). A controller
/// syncs a key only once they are met (or older than [`EXPECTATIONS_TIMEOUT`]), so that
/// it never creates the same pods twice while its own creates are in flight.
#[derive(Debug, Default)]
pub struct Expectations {
    by_key: Mutex<HashMap<String, Expectation>>,
}

impl Expectations {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Expectation>> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True when `key` may sync: no expectations, all met, or expired (upstream
    /// `SatisfiedExpectations`).
    pub fn satisfied(&self, key: &str) -> bool {
        self.lock()
            .get(key)
            .is_none_or(|e| (e.add <= 0 && e.del <= 0) || e.at.elapsed() > EXPECTATIONS_TIMEOUT)
    }

    /// Expects `n` creations for `key`, replacing what was expected.
    pub fn expect_creations(&self, key: &str, n: usize) {
        self.lock().insert(
            key.to_owned(),
            Expectation {
                add: i64::try_from(n).unwrap_or(i64::MAX),
                del: 0,
                deleting: HashSet::new(),
                at: Instant::now(),
            },
        );
    }

    /// Expects the deletion of the pods `pod_keys` for `key`, replacing what was
    /// expected.
    pub fn expect_deletions(&self, key: &str, pod_keys: Vec<String>) {
        self.lock().insert(
            key.to_owned(),
            Expectation {
                add: 0,
                del: i64::try_from(pod_keys.len()).unwrap_or(i64::MAX),
                deleting: pod_keys.into_iter().collect(),
                at: Instant::now(),
            },
        );
    }

    /// Expects `adds` creations and the deletion of the pods `pod_keys` for `key` at
    /// once, replacing what was expected (upstream `SetExpectations`).
    pub fn expect(&self, key: &str, adds: usize, pod_keys: Vec<String>) {
        self.lock().insert(
            key.to_owned(),
            Expectation {
                add: i64::try_from(adds).unwrap_or(i64::MAX),
                del: i64::try_from(pod_keys.len()).unwrap_or(i64::MAX),
                deleting: pod_keys.into_iter().collect(),
                at: Instant::now(),
            },
        );
    }

    /// A pod of `key` was seen created (or its create will never be seen).
    pub fn creation_observed(&self, key: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.add -= 1;
        }
    }

    /// The pod `pod_key` of `key` was seen deleted (or its delete will never be seen);
    /// only a pod whose deletion was expected counts.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        if let Some(e) = self.lock().get_mut(key)
            && e.deleting.remove(pod_key)
        {
            e.del -= 1;
        }
    }

    /// Forgets `key` (its object was deleted).
    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The controller reference among `meta`'s owner references (upstream
/// `GetControllerOf`).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The object of `store` that controls `meta` (upstream `resolveControllerRef`): the
/// controller reference's kind is `K`'s, and the cached object of that name in `meta`'s
/// namespace has the referenced UID (not a newer object of the same name).
pub fn resolve_controller_ref<K: Resource<DynamicType = ()>>(
    store: &Store<K>,
    meta: &ObjectMeta,
) -> Option<Arc<K>> {
    let r = controller_of(meta)?;
    if r.kind != K::kind(&()) {
        return None;
    }
    let ns = meta.namespace.as_deref().unwrap_or("");
    let owner = store.get(&format!("{ns}/{}", r.name))?;
    (owner.meta().uid.as_deref() == Some(r.uid.as_str())).then_some(owner)
}

/// A controller reference to the owner (`controller` and `blockOwnerDeletion` set, as
/// upstream `NewControllerRef`).
pub fn controller_ref(owner: &ObjectMeta, api_version: &str, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A new pod from `template` in `namespace`, named `<prefix>-<random>` and controlled
/// by `owner` (upstream `GetPodFromTemplate`): the template's labels, annotations,
/// finalizers and spec.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    prefix: &str,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: Some(namespace.to_owned()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The owner in a claim: its metadata and its `apiVersion` and `kind`.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// The owner's metadata (name, namespace, uid, deletionTimestamp).
    pub meta: &'a ObjectMeta,
    /// `apps/v1`, `batch/v1`, ...
    pub api_version: &'a str,
    /// `ReplicaSet`, `Deployment`, ...
    pub kind: &'a str,
    /// A finalizer an adopted object gets with its controller reference (the Job
    /// controller's `batch.kubernetes.io/job-tracking`; upstream
    /// `NewPodControllerRefManager`'s `finalizers`).
    pub adopt_finalizer: Option<&'a str>,
}

/// Adopts the orphans among `candidates` that `selector` matches and releases the
/// objects `owner` controls that it no longer matches (upstream
/// `ControllerRefManager.ClaimObject`); the objects the owner controls afterwards.
/// Adoption first re-reads the owner with `recheck` (once), and adopts nothing if it
/// is gone, replaced (another UID) or being deleted (`RecheckDeletionTimestamp`); an
/// owner being deleted releases nothing either. Objects already gone are skipped.
///
/// Errors: the first failed patch or recheck, after all candidates were tried.
pub async fn claim<K, F, Fut>(
    client: &kube::Client,
    owner: &Owner<'_>,
    selector: &LabelSelector,
    candidates: Vec<Arc<K>>,
    recheck: F,
) -> Result<Vec<Arc<K>>, Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<ObjectMeta, Error>>,
{
    let uid = owner.meta.uid.clone().unwrap_or_default();
    let deleting = owner.meta.deletion_timestamp.is_some();
    let mut claimed = Vec::new();
    let mut recheck = Some(recheck);
    let mut can_adopt: Option<Result<(), String>> = None;
    let mut errors = Vec::new();
    for obj in candidates {
        let meta = obj.meta();
        let labels = meta.labels.clone().unwrap_or_default();
        let matches = !selector.is_empty() && selector.matches(&labels);
        match controller_of(meta) {
            Some(r) if r.uid != uid => {}
            Some(_) => {
                if matches {
                    claimed.push(obj);
                } else if !deleting {
                    let patch = json!({"metadata": {
                        "ownerReferences": [{"$patch": "delete", "uid": uid}],
                        "uid": meta.uid,
                    }});
                    if let Err(e) = patch_object::<K>(client, meta, patch).await {
                        errors.push(e);
                    }
                }
            }
            None => {
                if deleting || !matches || meta.deletion_timestamp.is_some() {
                    continue;
                }
                if can_adopt.is_none()
                    && let Some(f) = recheck.take()
                {
                    can_adopt = Some(match f().await {
                        Err(e) => Err(e.to_string()),
                        Ok(fresh) if fresh.uid != owner.meta.uid => Err(format!(
                            "original {} {}/{} is gone: got uid {}, wanted {uid}",
                            owner.kind,
                            owner.meta.namespace.as_deref().unwrap_or(""),
                            owner.meta.name.as_deref().unwrap_or(""),
                            fresh.uid.unwrap_or_default(),
                        )),
                        Ok(fresh) if fresh.deletion_timestamp.is_some() => Err(format!(
                            "{}/{} has just been deleted",
                            owner.meta.namespace.as_deref().unwrap_or(""),
                            owner.meta.name.as_deref().unwrap_or("")
                        )),
                        Ok(_) => Ok(()),
                    });
                }
                if let Some(Err(e)) = &can_adopt {
                    errors.push(Error::Invalid(e.clone()));
                    continue;
                }
                let r = controller_ref(owner.meta, owner.api_version, owner.kind);
                let mut patch = json!({"metadata": {"ownerReferences": [r], "uid": meta.uid}});
                if let Some(f) = owner.adopt_finalizer {
                    patch["metadata"]["finalizers"] = json!([f]);
                }
                match patch_object::<K>(client, meta, patch).await {
                    Ok(Some(adopted)) => claimed.push(Arc::new(adopted)),
                    Ok(None) => {}
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(claimed),
    }
}

/// [`claim`] for the owner `O` (its `apiVersion` and `kind` from its type), with the
/// recheck reading it live from the API server: what the ReplicaSet, Deployment,
/// DaemonSet, StatefulSet and Job controllers do.
///
/// Errors: as [`claim`].
pub async fn claim_for<O, K>(
    client: &kube::Client,
    owner: &O,
    adopt_finalizer: Option<&str>,
    selector: &LabelSelector,
    candidates: Vec<Arc<K>>,
) -> Result<Vec<Arc<K>>, Error>
where
    O: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let (api_version, kind) = (O::api_version(&()), O::kind(&()));
    let meta = owner.meta();
    let owner_ref = Owner {
        meta,
        api_version: &api_version,
        kind: &kind,
        adopt_finalizer,
    };
    let api: Api<O> = Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or(""));
    let name = meta.name.clone().unwrap_or_default();
    claim(client, &owner_ref, selector, candidates, || async {
        Ok(api.get(&name).await?.meta().clone())
    })
    .await
}

/// A strategic merge patch of the object `meta` names; one already gone (404) or
/// replaced (the `uid` precondition fails: 422) is no error (None).
async fn patch_object<K>(
    client: &kube::Client,
    meta: &ObjectMeta,
    patch: serde_json::Value,
) -> Result<Option<K>, Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or(""));
    let name = meta.name.as_deref().unwrap_or("");
    match api
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(o) => Ok(Some(o)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 422 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// Runs `f` for `count` items in batches of 1, 2, 4, ... run concurrently, stopping
/// after the first batch with a failure (upstream `slowStartBatch`): a template the API
/// server refuses costs one request, not hundreds. The number of successes, and the
/// first error.
pub async fn slow_start_batch<F, Fut>(count: usize, initial: usize, f: F) -> (usize, Option<Error>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = remaining.min(initial.max(1));
    while batch > 0 {
        let results = futures::future::join_all((0..batch).map(|_| f())).await;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(()) => successes += 1,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if first_err.is_some() {
            return (successes, first_err);
        }
        remaining -= batch;
        batch = (batch * 2).min(remaining);
    }
    (successes, None)
}

/// The order in which surplus pods are deleted, first to last (upstream
/// `ActivePodsWithRanks.Less` with LogarithmicScaleDown and PodDeletionCost on):
/// unassigned before assigned; Pending before Unknown before Running; not ready before
/// ready; lower `pod-deletion-cost`; more pods of the same owner on its node; ready for
/// less time (by powers of two); more container restarts; created later (by powers of
/// two); then by UID. `rank` is the number of related pods on each pod's node.
pub fn deletion_order(a: (&Pod, usize), b: (&Pod, usize), now: Timestamp) -> Ordering {
    let ((pa, ra), (pb, rb)) = (a, b);
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("")
            .is_empty()
    };
    // true (unassigned) first.
    if node(pa) != node(pb) {
        return if node(pa) {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    let phase = |p: &Pod| match pod_phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    };
    match phase(pa).cmp(&phase(pb)) {
        Ordering::Equal => {}
        o => return o,
    }
    match is_pod_ready(pa).cmp(&is_pod_ready(pb)) {
        Ordering::Equal => {}
        o => return o,
    }
    match deletion_cost(pa).cmp(&deletion_cost(pb)) {
        Ordering::Equal => {}
        o => return o,
    }
    match rb.cmp(&ra) {
        Ordering::Equal => {}
        o => return o,
    }
    // From here on the order is lexicographic over buckets, so that it is total (Rust's
    // sort panics on an inconsistent order). Upstream compares two pods ready or created
    // at different times in one bucket by UID at once, which is not transitive: pods A and
    // C in one bucket, B with more restarts gave B < A, A < C and C < B.
    if is_pod_ready(pa) && is_pod_ready(pb) {
        let ready_at = |p: &Pod| {
            ready_condition(p)
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0)
        };
        match log_rank(ready_at(pa), now).cmp(&log_rank(ready_at(pb), now)) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    match max_restarts(pb).cmp(&max_restarts(pa)) {
        Ordering::Equal => {}
        o => return o,
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match log_rank(created(pa), now).cmp(&log_rank(created(pb), now)) {
        Ordering::Equal => {}
        o => return o,
    }
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    uid(pa).cmp(&uid(pb))
}

/// `floor(log2(now - t))` in nanoseconds; -1 for no time or a time not in the past
/// (upstream `logarithmicRankDiff`'s buckets).
fn log_rank(t: Option<Timestamp>, now: Timestamp) -> i64 {
    let Some(t) = t else { return -1 };
    let nanos = now.as_nanosecond() - t.as_nanosecond();
    if nanos <= 0 {
        return -1;
    }
    i64::from(127 - nanos.leading_zeros())
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// The `count` pods of `pods` to delete first at `now`, by [`deletion_order`] with the
/// number of `related` pods on each pod's node as its rank (upstream `getPodsToDelete`).
pub fn pods_to_delete<'a>(
    pods: &[&'a Pod],
    related: &[&Pod],
    count: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let mut on_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in related {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && !n.is_empty()
        {
            *on_node.entry(n).or_default() += 1;
        }
    }
    let rank = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| on_node.get(n))
            .copied()
            .unwrap_or(0)
    };
    let mut ranked: Vec<(&Pod, usize)> = pods.iter().map(|p| (*p, rank(p))).collect();
    if count < ranked.len() {
        ranked.sort_by(|a, b| deletion_order(*a, *b, now));
    }
    ranked.into_iter().take(count).map(|(p, _)| p).collect()
}

/// Writes the status `set_status` gives `obj` through the `status` subresource; on a
/// conflict (the cache was behind: a scale, a label) once more on the object read afresh,
/// unless it was replaced meanwhile (another UID). The object as written. Upstream's
/// status writers retry the same way, each its own: `updateReplicaSetStatus` and
/// `storeDaemonSetStatus` (`statusUpdateRetries`), `updateStatefulSetStatus`, the
/// CronJob controller's `UpdateStatus`.
pub async fn update_status_retrying<K>(
    client: &kube::Client,
    obj: &K,
    set_status: impl Fn(&mut K),
) -> Result<K, Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let meta = obj.meta();
    let ns = meta.namespace.as_deref().unwrap_or("");
    let name = meta.name.as_deref().unwrap_or("");
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let mut updated = obj.clone();
    set_status(&mut updated);
    match api
        .replace_status(name, &PostParams::default(), &updated)
        .await
    {
        Ok(written) => Ok(written),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let mut fresh = api.get(name).await?;
            if fresh.meta().uid != meta.uid {
                return Err(Error::Invalid(format!("{ns}/{name} was replaced")));
            }
            set_status(&mut fresh);
            Ok(api
                .replace_status(name, &PostParams::default(), &fresh)
                .await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// What a successful sync asks of the work queue (controller-runtime's
/// `reconcile.Result`; upstream's workers call `queue.AddAfter` for it, as the namespace
/// controller's `workerFunc` does with the deleter's estimate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Requeue {
    /// Nothing: the key comes back when an event queues it again.
    #[default]
    Done,
    /// Look at the key again after the delay, without counting it as a failure.
    After(Duration),
}

impl From<()> for Requeue {
    fn from((): ()) -> Self {
        Requeue::Done
    }
}

/// An informer whose first LIST can be awaited (upstream `cache.InformerSynced`).
pub trait InformerSynced: Send + Sync {
    /// Resolves once the informer's cache has synced.
    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl<K: Watchable> InformerSynced for SharedInformer<K> {
    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.wait_for_sync())
    }
}

/// Waits until every one of `informers` has synced (upstream
/// `cache.WaitForNamedCacheSync`). False when `cancel` came first: the controller must
/// not start.
pub async fn wait_for_cache_sync(
    cancel: &CancellationToken,
    informers: &[&dyn InformerSynced],
) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = async {
            for informer in informers {
                informer.synced().await;
            }
        } => true,
    }
}

/// A controller's `Run` (upstream's shape: `WaitForNamedCacheSync` over its informers,
/// then `wait.UntilWithContext(worker)` for each of `workers` workers): waits for
/// `informers`, then syncs the keys of `queue` with `sync(this, key)` through
/// [`run_workers`] until `cancel`. Returns at once if `cancel` comes before the caches
/// synced.
pub async fn run_controller<T, S, Fut, R>(
    name: &'static str,
    informers: &[&dyn InformerSynced],
    queue: &Arc<WorkQueue<String>>,
    workers: usize,
    cancel: CancellationToken,
    this: &Arc<T>,
    sync: S,
) where
    T: Send + Sync + 'static,
    S: Fn(Arc<T>, String) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<R, Error>> + Send,
    R: Into<Requeue>,
{
    if !wait_for_cache_sync(&cancel, informers).await {
        return;
    }
    let this = Arc::clone(this);
    run_workers(name, Arc::clone(queue), workers, cancel, move |key| {
        sync(Arc::clone(&this), key)
    })
    .await;
}

/// Runs `workers` workers over `queue` until `cancel` (upstream `Run` with
/// `wait.UntilWithContext(worker)` and the usual `processNextWorkItem`): each takes a
/// key and syncs it; on success the key's failures are forgotten and, for
/// [`Requeue::After`], the key is queued again after the delay (upstream `AddAfter`); on
/// failure the key is re-added with backoff. The queue is shut down at `cancel`. A sync
/// may return `Ok(())` (done) or `Ok(Requeue)`.
pub async fn run_workers<S, Fut, R>(
    name: &'static str,
    queue: Arc<WorkQueue<String>>,
    workers: usize,
    cancel: CancellationToken,
    sync: S,
) where
    S: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<R, Error>> + Send,
    R: Into<Requeue>,
{
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let queue = Arc::clone(&queue);
        let sync = sync.clone();
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                match sync(key.clone()).await.map(Into::into) {
                    Ok(Requeue::Done) => queue.forget(&key),
                    Ok(Requeue::After(delay)) => {
                        queue.forget(&key);
                        queue.add_after(key.clone(), delay);
                    }
                    Err(e) if e.is_conflict() => {
                        tracing::debug!(controller = name, key, error = %e, "sync conflicted; retrying");
                        queue.add_rate_limited(key.clone());
                    }
                    Err(e) => {
                        tracing::warn!(controller = name, key, error = %e, "sync failed; retrying");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        });
    }
    cancel.cancelled().await;
    queue.shut_down();
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    #[test]
    fn expectations_gate_syncs_until_observed() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs"));
        e.expect_creations("ns/rs", 2);
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(e.satisfied("ns/rs"));
        e.expect_deletions("ns/rs", vec!["ns/a".into(), "ns/b".into()]);
        assert!(!e.satisfied("ns/rs"));
        // A pod whose deletion was not expected does not count, nor does a repeat.
        e.deletion_observed("ns/rs", "ns/x");
        e.deletion_observed("ns/rs", "ns/a");
        e.deletion_observed("ns/rs", "ns/a");
        assert!(!e.satisfied("ns/rs"));
        e.deletion_observed("ns/rs", "ns/b");
        assert!(e.satisfied("ns/rs"));
        e.expect_creations("ns/rs", 1);
        e.delete("ns/rs");
        assert!(e.satisfied("ns/rs"));
        // Creations and deletions at once: both must be seen.
        e.expect("ns/ds", 1, vec!["ns/c".into()]);
        e.creation_observed("ns/ds");
        assert!(!e.satisfied("ns/ds"));
        e.deletion_observed("ns/ds", "ns/c");
        assert!(e.satisfied("ns/ds"));
    }

    #[tokio::test]
    async fn slow_start_doubles_and_stops_at_the_first_failing_batch() {
        let calls = Arc::new(Mutex::new(0usize));
        let c = Arc::clone(&calls);
        let (ok, err) = slow_start_batch(10, 1, || {
            let c = Arc::clone(&c);
            async move {
                *c.lock().unwrap() += 1;
                Ok(())
            }
        })
        .await;
        assert_eq!((ok, err.is_none()), (10, true));
        assert_eq!(*calls.lock().unwrap(), 10);
        // Batches 1, 2, 4: the 5th call fails, so the batch of 4 ends the run.
        let n = Arc::new(Mutex::new(0usize));
        let (ok, err) = slow_start_batch(100, 1, || {
            let n = Arc::clone(&n);
            async move {
                let mut n = n.lock().unwrap();
                *n += 1;
                if *n == 5 {
                    Err(Error::Invalid("refused".into()))
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert_eq!(ok, 6);
        assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("refused"));
        assert_eq!(*n.lock().unwrap(), 7);
    }

    #[tokio::test]
    async fn a_sync_may_ask_to_be_looked_at_again_later() {
        let queue = Arc::new(WorkQueue::new("test"));
        let cancel = CancellationToken::new();
        let calls: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let c = Arc::clone(&calls);
        let workers = tokio::spawn(run_workers(
            "test",
            Arc::clone(&queue),
            1,
            cancel.clone(),
            move |_key| {
                let c = Arc::clone(&c);
                async move {
                    let mut c = c.lock().unwrap();
                    c.push(Instant::now());
                    Ok(match c.len() {
                        1 => Requeue::After(Duration::from_millis(50)),
                        _ => Requeue::Done,
                    })
                }
            },
        ));
        queue.add("ns/a".to_owned());
        tokio::time::timeout(Duration::from_secs(5), async {
            while calls.lock().unwrap().len() < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the key came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
        workers.await.unwrap();
        let calls = calls.lock().unwrap();
        // Once more after the delay, and not as a failure; then no more.
        assert_eq!(calls.len(), 2);
        assert!(calls[1] - calls[0] >= Duration::from_millis(50));
        assert_eq!(queue.num_requeues(&"ns/a".to_owned()), 0);
    }

    fn pod(name: &str, node: &str, phase: &str, ready_at: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.to_owned()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(t.parse().unwrap())),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn surplus_pods_are_deleted_in_upstreams_order() {
        let unassigned = pod("unassigned", "", "Pending", None);
        let pending = pod("pending", "n1", "Pending", None);
        let running = pod("running", "n1", "Running", None);
        let ready_new = pod("ready-new", "n2", "Running", Some("2026-01-01T00:59:00Z"));
        let ready_old = pod("ready-old", "n3", "Running", Some("2026-01-01T00:01:00Z"));
        let mut costly = pod("costly", "n3", "Running", Some("2026-01-01T00:01:00Z"));
        costly.metadata.annotations =
            Some([(POD_DELETION_COST.to_owned(), "100".to_owned())].into());
        let mut restarted = pod("restarted", "n4", "Running", Some("2026-01-01T00:01:00Z"));
        restarted.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
            restart_count: 3,
            ..Default::default()
        }]);
        let all = [
            &costly,
            &ready_old,
            &restarted,
            &ready_new,
            &running,
            &pending,
            &unassigned,
        ];
        let names = |ps: Vec<&Pod>| -> Vec<String> {
            ps.iter()
                .map(|p| p.metadata.name.clone().unwrap())
                .collect()
        };
        let now = "2026-01-01T01:00:00Z".parse().unwrap();
        // n3 holds two related pods, so ready-old goes before the pods alone on their
        // node; of those, the one ready for less time goes first; the costly pod last.
        let got = names(pods_to_delete(&all, &all, 6, now));
        assert_eq!(
            got,
            [
                "unassigned",
                "pending",
                "running",
                "ready-old",
                "ready-new",
                "restarted"
            ]
        );
        // Deleting them all needs no order.
        assert_eq!(pods_to_delete(&all, &all, 7, now).len(), 7);
    }

    #[test]
    fn pods_from_a_template_belong_to_their_owner() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec::default()),
        };
        let owner = ObjectMeta {
            name: Some("web-1".into()),
            uid: Some("u1".into()),
            ..Default::default()
        };
        let p = pod_from_template(
            &template,
            "ns",
            "web-1",
            controller_ref(&owner, "apps/v1", "ReplicaSet"),
        );
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-1-"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        let r = controller_of(&p.metadata).expect("controller");
        assert_eq!(
            (r.kind.as_str(), r.uid.as_str(), r.block_owner_deletion),
            ("ReplicaSet", "u1", Some(true))
        );
    }
}
