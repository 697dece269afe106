//! The DaemonSet controller (upstream `pkg/controller/daemon/daemon_controller.go`):
//! runs one pod of each DaemonSet on every node that should run it, and reports
//! `status.desiredNumberScheduled`, `currentNumberScheduled`, `numberMisscheduled`,
//! `numberReady`, `updatedNumberScheduled`, `numberAvailable`, `numberUnavailable` and
//! `observedGeneration`.
//!
//! - A node should run a daemon pod (`util::node_should_run`) when it matches the
//!   template's node selector and required node affinity and has no taint the pod does
//!   not tolerate; every daemon pod tolerates the node problem taints upstream lists.
//!   An untolerated NoSchedule taint keeps new pods off but lets a running one stay.
//! - Pods are created for a node with a required node affinity that selects that node
//!   by `matchFields` `metadata.name`, so that the scheduler binds them there; until
//!   then the affinity tells which node a pod is for. One pod per node: surplus pods go,
//!   oldest kept; failed pods are deleted with a backoff per node (1 s doubling to
//!   15 min); unbound pods of nodes that are gone are deleted.
//! - Every template the DaemonSet had is a ControllerRevision (`update.rs`,
//!   `constructHistory`): pods carry the `controller-revision-hash` of theirs;
//!   `kubectl rollout history` and `kubectl rollout undo` read and apply them.
//! - RollingUpdate replaces old pods within maxUnavailable, or with maxSurge starts the
//!   new pod beside the old one first; OnDelete replaces only the pods users delete.
//!
//! Expectations hold a DaemonSet back until the watch has shown the pods of its last
//! sync. Events: `SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`, `FailedDelete`,
//! `FailedDaemonPod`, `SucceededDaemonPod`, `SelectingAll`, from `daemonset-controller`.
//!
//! Pods bound to a node that no longer exists are the pod garbage collector's to
//! delete, as upstream; unbound pods meant for it are deleted here. Unlike upstream, a
//! deleted node queues every DaemonSet at once (upstream waits for a resync or the pod
//! garbage collector's delete).

mod update;
mod util;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use skiff_api::core::pod::conditions::{is_pod_available, is_pod_ready, pod_phase};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use self::util::{
    FailedPodsBackoff, REVISION_HASH_LABEL, allows_surge, by_age, create_pod_template,
    failed_pods_backoff_key, is_pod_updated, is_rolling_update, node_should_run,
    replace_node_affinity, target_node_name, template_generation,
};
use crate::Error;
use crate::controller_utils::{
    Expectations, SLOW_START_INITIAL_BATCH_SIZE, claim_for, controller_ref, pod_from_template,
    pod_key, run_controller, slow_start_batch, update_status_retrying,
};
use crate::owner_handlers::OwnerHandlers;

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "daemonset-controller";

/// The most pods one sync creates or deletes (upstream's DaemonSet `BurstReplicas`,
/// lower than the ReplicaSet's).
const BURST_REPLICAS: usize = 250;

/// A DaemonSet's pods by the node they are for.
type NodePods = BTreeMap<String, Vec<Arc<Pod>>>;

/// The DaemonSet controller; see the module doc.
pub struct DaemonSetController {
    client: kube::Client,
    daemon_sets: Arc<SharedInformer<DaemonSet>>,
    pods: Arc<SharedInformer<Pod>>,
    nodes: Arc<SharedInformer<Node>>,
    revisions: Arc<SharedInformer<ControllerRevision>>,
    queue: Arc<WorkQueue<String>>,
    expectations: Arc<Expectations>,
    backoff: FailedPodsBackoff,
    recorder: EventRecorder,
}

impl std::fmt::Debug for DaemonSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetController")
            .finish_non_exhaustive()
    }
}

/// Upstream `addNode` and `updateNode`: the DaemonSets whose decision for the node
/// may have changed (an update that changed neither labels nor taints changes none).
/// A deleted node queues every DaemonSet, whose pods there must go.
fn on_node(h: &OwnerHandlers<DaemonSet>, delta: &Delta<Node>) {
    let sets = h.owners.store().list();
    match delta {
        Delta::Added(node) => {
            for ds in sets {
                if node_should_run(node, &ds).0 {
                    h.queue.add(object_key(ds.as_ref()));
                }
            }
        }
        Delta::Updated(old, new) => {
            let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone());
            if old.metadata.labels == new.metadata.labels && taints(old) == taints(new) {
                return;
            }
            for ds in sets {
                if node_should_run(old, &ds) != node_should_run(new, &ds) {
                    h.queue.add(object_key(ds.as_ref()));
                }
            }
        }
        Delta::Deleted(_) => {
            for ds in sets {
                h.queue.add(object_key(ds.as_ref()));
            }
        }
    }
}

/// What one node needs (upstream `podsShouldBeOnNode`).
#[derive(Debug, Default, PartialEq)]
struct NodeActions {
    /// A pod must be created there.
    create: bool,
    /// The names of the pods to delete there.
    delete: Vec<String>,
    /// The names of the failed pods among them, for the `FailedDaemonPod` events.
    failed: Vec<String>,
    /// The names of the succeeded pods among them, for the `SucceededDaemonPod` events.
    succeeded: Vec<String>,
    /// A failed pod waits out its backoff: sync again after this long.
    retry_after: Option<Duration>,
}

/// The pods to create and delete on `node` (upstream `podsShouldBeOnNode`): a pod where
/// one should run and none is; none where none should continue; failed pods (outside
/// their backoff) and succeeded ones deleted; of several running pods the oldest kept,
/// or with surge the oldest of the current revision and, while that one is not yet
/// available and the old one ready, the oldest old one.
fn pods_should_be_on_node(
    node: &Node,
    pods: Option<&Vec<Arc<Pod>>>,
    ds: &DaemonSet,
    hash: &str,
    backoff: &FailedPodsBackoff,
    clock: Instant,
    now: Timestamp,
) -> NodeActions {
    let node_name = node.metadata.name.as_deref().unwrap_or("");
    let (should_run, should_continue) = node_should_run(node, ds);
    let mut out = NodeActions::default();
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let Some(pods) = pods.filter(|p| !p.is_empty()) else {
        out.create = should_run;
        return out;
    };
    if !should_continue {
        out.delete = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| name(p))
            .collect();
        return out;
    }
    let mut running: Vec<&Arc<Pod>> = Vec::new();
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match pod_phase(pod) {
            "Failed" => {
                let key = failed_pods_backoff_key(ds, node_name);
                if let Some(delay) = backoff.in_backoff(&key, clock) {
                    out.retry_after = Some(out.retry_after.map_or(delay, |d| d.min(delay)));
                    continue;
                }
                backoff.next(&key, clock);
                out.failed.push(name(pod));
                out.delete.push(name(pod));
            }
            "Succeeded" => {
                out.succeeded.push(name(pod));
                out.delete.push(name(pod));
            }
            _ => running.push(pod),
        }
    }
    running.sort_by(|a, b| by_age(a, b));
    if !allows_surge(ds) {
        out.delete.extend(running.iter().skip(1).map(|p| name(p)));
        return out;
    }
    if running.len() <= 1 {
        // Surging: the node needs one pod that is not being deleted.
        out.create = running.is_empty() && should_run;
        return out;
    }
    // Two pods may stay only while the oldest of the current revision is not available
    // and the oldest old one is ready; otherwise the current one alone.
    let (mut newest, mut oldest): (Option<&Arc<Pod>>, Option<&Arc<Pod>>) = (None, None);
    for pod in running {
        let current = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_HASH_LABEL))
            .is_some_and(|h| h == hash);
        let slot = if current { &mut newest } else { &mut oldest };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            out.delete.push(name(pod));
        }
    }
    if let (Some(new), Some(old)) = (newest, oldest) {
        let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
        if !is_pod_ready(old) || is_pod_available(new, min_ready, now) {
            out.delete.push(name(old));
        }
    }
    out
}

/// Groups the pods by the node they are for (upstream `getNodesToDaemonPods`); pods
/// that ended and are being deleted only with `include_deleted_terminal`; pods whose
/// node cannot be told are left out.
fn group_by_node(pods: Vec<Arc<Pod>>, include_deleted_terminal: bool) -> NodePods {
    let mut out = NodePods::new();
    for pod in pods {
        let terminal = matches!(pod_phase(&pod), "Succeeded" | "Failed");
        if !include_deleted_terminal && terminal && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match target_node_name(&pod) {
            Ok(node) => out.entry(node).or_default().push(pod),
            Err(e) => tracing::debug!(pod = pod_key(&pod), error = e, "no target node"),
        }
    }
    out
}

/// The counts of a DaemonSet's status (upstream `updateDaemonSetStatus`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    desired: i32,
    current: i32,
    misscheduled: i32,
    ready: i32,
    updated: i32,
    available: i32,
}

/// Counts, over the nodes that should run the DaemonSet, those that have a pod, whose
/// oldest pod is ready, available, of the current revision; and the nodes that should
/// not but have one.
fn count(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &NodePods,
    hash: &str,
    now: Timestamp,
) -> Counts {
    let mut c = Counts::default();
    let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
    let generation = template_generation(ds);
    for node in nodes {
        let (should_run, _) = node_should_run(node, ds);
        let on_node = pods
            .get(node.metadata.name.as_deref().unwrap_or(""))
            .filter(|p| !p.is_empty());
        if !should_run {
            if on_node.is_some() {
                c.misscheduled += 1;
            }
            continue;
        }
        c.desired += 1;
        let Some(on_node) = on_node else { continue };
        c.current += 1;
        let Some(pod) = on_node.iter().min_by(|a, b| by_age(a, b)) else {
            continue;
        };
        if is_pod_ready(pod) {
            c.ready += 1;
            if is_pod_available(pod, min_ready, now) {
                c.available += 1;
            }
        }
        if is_pod_updated(pod, hash, generation) {
            c.updated += 1;
        }
    }
    c
}

/// `base` with the counts written in (and the generation observed when
/// `observed_generation` is given); other fields (conditions, collisionCount) kept.
fn with_counts(
    base: Option<DaemonSetStatus>,
    c: Counts,
    observed_generation: Option<i64>,
) -> DaemonSetStatus {
    let mut s = base.unwrap_or_default();
    let nonzero = |n: i32| (n != 0).then_some(n);
    if observed_generation.is_some() {
        s.observed_generation = observed_generation;
    }
    s.desired_number_scheduled = c.desired;
    s.current_number_scheduled = c.current;
    s.number_misscheduled = c.misscheduled;
    s.number_ready = c.ready;
    s.updated_number_scheduled = nonzero(c.updated);
    s.number_available = nonzero(c.available);
    s.number_unavailable = nonzero(c.desired - c.available);
    s
}

impl DaemonSetController {
    /// The controller over the factory's DaemonSet, Pod, Node and ControllerRevision
    /// informers, its handlers registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = OwnerHandlers {
            owners: factory.informer::<DaemonSet>(),
            queue: Arc::new(WorkQueue::new("daemonset").with_metrics(queue_metrics)),
            expectations: Arc::new(Expectations::default()),
        };
        let pods = factory.informer::<Pod>();
        let nodes = factory.informer::<Node>();
        let revisions = factory.informer::<ControllerRevision>();
        let h = handlers.clone();
        handlers
            .owners
            .add_event_handler(Box::new(move |d| h.on_owner(d)));
        let h = handlers.clone();
        pods.add_event_handler(Box::new(move |d| h.on_pod(d)));
        let h = handlers.clone();
        nodes.add_event_handler(Box::new(move |d| on_node(&h, d)));
        let h = handlers.clone();
        revisions.add_event_handler(Box::new(move |d| h.on_revision(d)));
        Arc::new(Self {
            client,
            daemon_sets: handlers.owners,
            pods,
            nodes,
            revisions,
            queue: handlers.queue,
            expectations: handlers.expectations,
            backoff: FailedPodsBackoff::default(),
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-daemonset-syncs`, default 2).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[
                &*self.daemon_sets,
                &*self.pods,
                &*self.nodes,
                &*self.revisions,
            ],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    /// One sync of the DaemonSet `key` (upstream `syncDaemonSet`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(ds) = self.daemon_sets.store().get(key) else {
            self.expectations.delete(key);
            return Ok(());
        };
        let selector = LabelSelector::from_meta(&ds.spec.selector)
            .map_err(|e| Error::Invalid(format!("invalid selector of {key}: {e}")))?;
        if selector.is_empty() {
            self.recorder.event(
                ds.as_ref(),
                "Warning",
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.",
            );
            return Ok(());
        }
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let mut nodes = self.nodes.store().list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let (current, old) = self.construct_history(&ds, &selector).await?;
        let hash = current
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_HASH_LABEL))
            .cloned()
            .unwrap_or_default();
        if !self.expectations.satisfied(key) {
            // Only the status: the generation was not acted on.
            return self
                .update_status(key, &ds, &selector, &nodes, &hash, false)
                .await;
        }
        let synced = self
            .update_daemon_set(key, &ds, &selector, &nodes, &hash, old)
            .await;
        let status = self
            .update_status(key, &ds, &selector, &nodes, &hash, true)
            .await;
        match (synced, status) {
            (Err(e), Err(s)) => {
                tracing::warn!(daemonset = key, error = %s, "status update failed");
                Err(e)
            }
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    /// Upstream `updateDaemonSet`: manage, then the rolling update once the manage's
    /// changes were seen, then the old revisions' cleanup.
    async fn update_daemon_set(
        &self,
        key: &str,
        ds: &DaemonSet,
        selector: &LabelSelector,
        nodes: &[Arc<Node>],
        hash: &str,
        old: Vec<ControllerRevision>,
    ) -> Result<(), Error> {
        self.manage(key, ds, selector, nodes, hash).await?;
        if self.expectations.satisfied(key) && is_rolling_update(ds) {
            self.rolling_update(key, ds, selector, nodes, hash).await?;
        }
        self.cleanup_history(ds, selector, old)
            .await
            .map_err(|e| Error::Invalid(format!("failed to clean up revisions of {key}: {e}")))
    }

    /// The pods the DaemonSet owns after adopting matching orphans and releasing owned
    /// pods that no longer match (upstream `getDaemonPods`), by node.
    async fn nodes_to_daemon_pods(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
        include_deleted_terminal: bool,
    ) -> Result<NodePods, Error> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let candidates: Vec<Arc<Pod>> = self
            .pods
            .store()
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
            .collect();
        let pods = self.claim(ds, selector, candidates).await?;
        Ok(group_by_node(pods, include_deleted_terminal))
    }

    /// Adopts and releases `candidates` for the DaemonSet (upstream
    /// `ControllerRefManager`, with an uncached recheck of the DaemonSet before adopting).
    async fn claim<K>(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
        candidates: Vec<Arc<K>>,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        claim_for(&self.client, ds, None, selector, candidates).await
    }

    /// Creates the missing pods and deletes the surplus, failed and misplaced ones
    /// (upstream `manage`).
    async fn manage(
        &self,
        key: &str,
        ds: &DaemonSet,
        selector: &LabelSelector,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<(), Error> {
        let node_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let ns = ds.metadata.namespace.as_deref().unwrap_or("");
        let (clock, now) = (Instant::now(), Timestamp::now());
        let mut create = Vec::new();
        let mut delete = Vec::new();
        for node in nodes {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let actions = pods_should_be_on_node(
                node,
                node_pods.get(&node_name),
                ds,
                hash,
                &self.backoff,
                clock,
                now,
            );
            for pod in &actions.failed {
                let note = format!(
                    "Found failed daemon pod {ns}/{pod} on node {node_name}, will try to kill it"
                );
                self.recorder.event(ds, "Warning", "FailedDaemonPod", &note);
            }
            for pod in &actions.succeeded {
                let note = format!(
                    "Found succeeded daemon pod {ns}/{pod} on node {node_name}, will try to \
                     delete it"
                );
                self.recorder
                    .event(ds, "Normal", "SucceededDaemonPod", &note);
            }
            if let Some(delay) = actions.retry_after {
                tracing::debug!(
                    daemonset = key,
                    node = node_name,
                    ?delay,
                    "failed pod in backoff"
                );
                self.queue.add_after(key.to_owned(), delay);
            }
            if actions.create {
                create.push(node_name);
            }
            delete.extend(actions.delete);
        }
        // The unbound pods of nodes that are gone (upstream
        // `getUnscheduledPodsWithoutNode`); the bound ones are the pod garbage collector's.
        let known: HashMap<&str, ()> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, ())))
            .collect();
        for (node, pods) in &node_pods {
            if known.contains_key(node.as_str()) {
                continue;
            }
            let unbound = |p: &Pod| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_none_or(str::is_empty)
            };
            delete.extend(
                pods.iter()
                    .filter(|p| unbound(p) && p.metadata.deletion_timestamp.is_none())
                    .filter_map(|p| p.metadata.name.clone()),
            );
        }
        self.sync_nodes(key, ds, delete, create, hash).await
    }

    /// Deletes the pods `delete` and creates one pod for each node of `create`, at most
    /// [`BURST_REPLICAS`] of each, creates in slow-start batches (upstream `syncNodes`).
    async fn sync_nodes(
        &self,
        key: &str,
        ds: &DaemonSet,
        mut delete: Vec<String>,
        mut create: Vec<String>,
        hash: &str,
    ) -> Result<(), Error> {
        create.truncate(BURST_REPLICAS);
        delete.truncate(BURST_REPLICAS);
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let name = ds.metadata.name.clone().unwrap_or_default();
        self.expectations.expect(
            key,
            create.len(),
            delete.iter().map(|p| format!("{ns}/{p}")).collect(),
        );
        if !create.is_empty() || !delete.is_empty() {
            tracing::debug!(
                daemonset = key,
                creating = create.len(),
                deleting = delete.len(),
                "syncing nodes"
            );
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let template = create_pod_template(&ds.spec.template, template_generation(ds), hash);
        let owner = controller_ref(&ds.metadata, "apps/v1", "DaemonSet");
        let next = AtomicUsize::new(0);
        let (created, create_err) =
            slow_start_batch(create.len(), SLOW_START_INITIAL_BATCH_SIZE, || {
                let node = create
                    .get(next.fetch_add(1, Ordering::Relaxed))
                    .cloned()
                    .unwrap_or_default();
                let mut pod = pod_from_template(&template, &ns, &name, owner.clone());
                if let Some(spec) = pod.spec.as_mut() {
                    spec.affinity = Some(replace_node_affinity(spec.affinity.take(), &node));
                }
                let api = api.clone();
                async move {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(p) => {
                            let note = format!(
                                "Created pod: {}",
                                p.metadata.name.as_deref().unwrap_or("")
                            );
                            self.recorder.event(ds, "Normal", "SuccessfulCreate", &note);
                            Ok(())
                        }
                        Err(e) => {
                            let note = format!("Error creating: {e}");
                            self.recorder.event(ds, "Warning", "FailedCreate", &note);
                            Err(e.into())
                        }
                    }
                }
            })
            .await;
        // Failed and skipped creates will never be seen.
        for _ in created..create.len() {
            self.expectations.creation_observed(key);
        }
        let deleted = futures::future::join_all(delete.iter().map(|pname| {
            let api = api.clone();
            let pkey = format!("{ns}/{pname}");
            async move {
                match api.delete(pname, &DeleteParams::default()).await {
                    Ok(_) => {
                        let note = format!("Deleted pod: {pname}");
                        self.recorder.event(ds, "Normal", "SuccessfulDelete", &note);
                        Ok(())
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(key, &pkey);
                        if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                            return Ok(());
                        }
                        let note = format!("Error deleting: {e}");
                        self.recorder.event(ds, "Warning", "FailedDelete", &note);
                        Err(Error::from(e))
                    }
                }
            }
        }))
        .await;
        match create_err.or_else(|| deleted.into_iter().find_map(Result::err)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes the status the pods give unless the DaemonSet has it already (upstream
    /// `updateDaemonSetStatus` and `storeDaemonSetStatus`): one retry on a conflict,
    /// with the DaemonSet read afresh.
    async fn update_status(
        &self,
        key: &str,
        ds: &DaemonSet,
        selector: &LabelSelector,
        nodes: &[Arc<Node>],
        hash: &str,
        observe_generation: bool,
    ) -> Result<(), Error> {
        let node_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let counts = count(ds, nodes, &node_pods, hash, Timestamp::now());
        let generation = ds.metadata.generation.filter(|_| observe_generation);
        let status = with_counts(ds.status.clone(), counts, generation);
        let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
        if min_ready > 0 && counts.ready != counts.available {
            // A last resort against clock skew: the pod handler also looks again.
            self.queue.add_after(
                key.to_owned(),
                Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)),
            );
        }
        if ds.status.as_ref() == Some(&status) {
            return Ok(());
        }
        // The counts are applied to the status the DaemonSet has when it is written.
        update_status_retrying(&self.client, ds, |ds| {
            ds.status = Some(with_counts(ds.status.take(), counts, generation));
        })
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::util::tests::{daemon_set, node};
    use super::*;

    pub(crate) fn pod(name: &str, node: &str, hash: &str, phase: &str, ready: bool) -> Arc<Pod> {
        let created = format!("2026-01-01T00:00:0{}Z", name.len() % 10);
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                creation_timestamp: Some(Time(created.parse().unwrap())),
                labels: Some([(REVISION_HASH_LABEL.to_owned(), hash.to_owned())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                affinity: Some(replace_node_affinity(None, node)),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready.then(|| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        })
    }

    fn surging(ds: &mut DaemonSet) {
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: Some(IntOrString::Int(1)),
                max_unavailable: Some(IntOrString::Int(0)),
            }),
        });
    }

    fn act(n: &Node, pods: &[Arc<Pod>], ds: &DaemonSet, b: &FailedPodsBackoff) -> NodeActions {
        let pods = pods.to_vec();
        let now = "2026-01-02T00:00:00Z".parse().unwrap();
        pods_should_be_on_node(n, Some(&pods), ds, "new", b, Instant::now(), now)
    }

    #[test]
    fn one_pod_per_node_oldest_kept() {
        let ds = daemon_set(PodSpec::default());
        let b = FailedPodsBackoff::default();
        let n1 = node("n1", &[], &[]);
        let none =
            pods_should_be_on_node(&n1, None, &ds, "new", &b, Instant::now(), Timestamp::now());
        assert!(none.create);
        let got = act(
            &n1,
            &[
                pod("young", "n1", "new", "Running", true),
                pod("old", "n1", "new", "Running", true),
            ],
            &ds,
            &b,
        );
        assert_eq!((got.create, got.delete), (false, vec!["young".to_owned()]));
        // A NoExecute taint: every pod goes; NoSchedule: the pod stays.
        let evicting = node("n2", &[], &[("x", "NoExecute")]);
        let got = act(
            &evicting,
            &[pod("a", "n2", "new", "Running", true)],
            &ds,
            &b,
        );
        assert_eq!(got.delete, ["a"]);
        let tainted = node("n3", &[], &[("x", "NoSchedule")]);
        let got = act(&tainted, &[pod("a", "n3", "new", "Running", true)], &ds, &b);
        assert_eq!(got, NodeActions::default());
        let none = pods_should_be_on_node(
            &tainted,
            None,
            &ds,
            "new",
            &b,
            Instant::now(),
            Timestamp::now(),
        );
        assert!(!none.create);
    }

    #[test]
    fn failed_pods_are_deleted_with_backoff() {
        let ds = daemon_set(PodSpec::default());
        let b = FailedPodsBackoff::default();
        let n1 = node("n1", &[], &[]);
        let failed = [pod("f", "n1", "new", "Failed", false)];
        let got = act(&n1, &failed, &ds, &b);
        assert_eq!(
            (got.delete.clone(), got.failed.clone()),
            (vec!["f".to_owned()], vec!["f".to_owned()])
        );
        // Right after: held back, and the sync comes again after the backoff.
        let got = act(&n1, &failed, &ds, &b);
        assert!(got.delete.is_empty());
        assert_eq!(got.retry_after, Some(Duration::from_secs(1)));
    }

    #[test]
    fn surge_keeps_the_old_pod_until_the_new_one_is_available() {
        let mut ds = daemon_set(PodSpec::default());
        surging(&mut ds);
        let b = FailedPodsBackoff::default();
        let n1 = node("n1", &[], &[]);
        let old = pod("old", "n1", "old", "Running", true);
        let got = act(
            &n1,
            &[old.clone(), pod("new", "n1", "new", "Pending", false)],
            &ds,
            &b,
        );
        assert!(got.delete.is_empty(), "{got:?}");
        let got = act(
            &n1,
            &[old.clone(), pod("new", "n1", "new", "Running", true)],
            &ds,
            &b,
        );
        assert_eq!(got.delete, ["old"]);
        // The old one is not ready: it goes at once.
        let got = act(
            &n1,
            &[
                pod("old", "n1", "old", "Running", false),
                pod("new", "n1", "new", "Pending", false),
            ],
            &ds,
            &b,
        );
        assert_eq!(got.delete, ["old"]);
    }

    #[test]
    fn status_counts_nodes() {
        let ds = daemon_set(PodSpec::default());
        let nodes = vec![
            Arc::new(node("n1", &[], &[])),
            Arc::new(node("n2", &[], &[])),
            Arc::new(node("n3", &[], &[("x", "NoSchedule")])),
            Arc::new(node("n4", &[], &[])),
        ];
        let pods = vec![
            pod("a", "n1", "new", "Running", true),
            pod("b", "n2", "old", "Running", false),
            pod("c", "n3", "new", "Running", true),
            pod("d", "gone", "new", "Running", true),
        ];
        let grouped = group_by_node(pods, false);
        assert_eq!(grouped.len(), 4);
        let c = count(&ds, &nodes, &grouped, "new", Timestamp::now());
        assert_eq!(
            c,
            Counts {
                desired: 3,
                current: 2,
                misscheduled: 1,
                ready: 1,
                updated: 1,
                available: 1,
            }
        );
        let s = with_counts(None, c, Some(4));
        assert_eq!(
            (
                s.number_unavailable,
                s.number_available,
                s.observed_generation
            ),
            (Some(2), Some(1), Some(4))
        );
        let kept = with_counts(Some(s.clone()), c, None);
        assert_eq!(kept, s);
    }
}
