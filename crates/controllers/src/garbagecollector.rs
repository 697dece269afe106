//! The garbage collector (upstream `pkg/controller/garbagecollector`): it watches every
//! resource the API server lists, watches and deletes, keeps the graph of
//! `metadata.ownerReferences`, and
//!
//! - deletes an object whose owners are all gone (a dangling reference: the owner is
//!   not found, or another object now has its name): background cascading deletion;
//! - for an owner deleted with `propagationPolicy: Foreground` (finalizer
//!   `foregroundDeletion`), deletes its dependents (foreground too), and removes the
//!   finalizer once no dependent with `blockOwnerDeletion` is left;
//! - for an owner deleted with `propagationPolicy: Orphan` (finalizer `orphan`), removes
//!   the owner's reference from each dependent, then the finalizer;
//! - removes, from an object that still has a live owner, the references to owners that
//!   are gone.
//!
//! Resources are found with discovery when the collector starts; objects are verified
//! with a live read before anything is deleted (`attemptToDeleteItem`), so a cache that
//! lags never deletes what still has an owner.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::run_workers;

/// The controller's name (`--controllers`).
pub const NAME: &str = "garbage-collector-controller";

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// One object of the graph.
#[derive(Debug, Clone)]
struct Node {
    resource: usize,
    namespace: Option<String>,
    name: String,
    owners: Vec<OwnerReference>,
    deleting: bool,
    finalizers: Vec<String>,
}

#[derive(Debug, Default)]
struct Graph {
    nodes: HashMap<String, Node>,
    /// Owner uid → the uids of the objects that name it.
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for o in &node.owners {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        Some(node)
    }

    fn insert(&mut self, uid: String, node: Node) {
        self.remove(&uid);
        for o in &node.owners {
            self.dependents
                .entry(o.uid.clone())
                .or_default()
                .insert(uid.clone());
        }
        self.nodes.insert(uid, node);
    }
}

/// The garbage collector; see the module doc.
pub struct GarbageCollector {
    client: kube::Client,
    resources: Vec<ApiResource>,
    discovery: Discovery,
    graph: Mutex<Graph>,
    /// Uids of objects to check: delete them if dangling, finish their foreground or
    /// orphan deletion if they are owners.
    queue: Arc<WorkQueue<String>>,
}

impl std::fmt::Debug for GarbageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollector")
            .field("resources", &self.resources.len())
            .finish_non_exhaustive()
    }
}

/// Whether the collector watches the resource: listable, watchable and deletable, not
/// a subresource, and not Events (upstream ignores `events` too).
fn collectable(ar: &ApiResource, caps: &ApiCapabilities) -> bool {
    [verbs::LIST, verbs::WATCH, verbs::DELETE]
        .iter()
        .all(|v| caps.supports_operation(v))
        && !ar.plural.contains('/')
        && ar.plural != "events"
}

impl GarbageCollector {
    /// Discovers the resources to watch. Errors: discovery fails.
    pub async fn new(
        client: kube::Client,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Result<Arc<Self>, Error> {
        let discovery = Discovery::new(client.clone()).run().await?;
        let mut resources = Vec::new();
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if collectable(&ar, &caps) {
                    resources.push(ar);
                }
            }
        }
        Ok(Arc::new(Self {
            client,
            resources,
            discovery,
            graph: Mutex::new(Graph::default()),
            queue: Arc::new(
                WorkQueue::new("garbage_collector_attempt_to_delete").with_metrics(queue_metrics),
            ),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches every resource and works the queue with `workers` workers until
    /// `cancel` (`--concurrent-gc-syncs`, default 20).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let mut synced = Vec::new();
        for i in 0..self.resources.len() {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            synced.push(rx);
            tokio::spawn(Arc::clone(&self).watch(i, tx, cancel.clone()));
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = futures::future::join_all(synced) => {}
        }
        tracing::info!(resources = self.resources.len(), "garbage collector synced");
        // Everything seen before the sync is checked once.
        let uids: Vec<String> = self.lock().nodes.keys().cloned().collect();
        for uid in uids {
            self.queue.add(uid);
        }
        let this = Arc::clone(&self);
        run_workers(NAME, Arc::clone(&self.queue), workers, cancel, move |uid| {
            let this = Arc::clone(&this);
            async move { this.attempt(&uid).await }
        })
        .await;
    }

    /// One resource's watch, feeding the graph.
    async fn watch(
        self: Arc<Self>,
        resource: usize,
        synced: tokio::sync::oneshot::Sender<()>,
        cancel: CancellationToken,
    ) {
        let ar = self.resources[resource].clone();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let stream = watcher::watcher(api, watcher::Config::default().any_semantic());
        futures::pin_mut!(stream);
        let mut synced = Some(synced);
        // The uids a (re)list delivered: what it did not deliver was deleted while the
        // watch was down (upstream's informer turns those into deletes on `Replace`).
        let mut listed: HashSet<String> = HashSet::new();
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => return,
                n = stream.next() => n,
            };
            match next {
                None => return,
                Some(Err(e)) => {
                    tracing::debug!(resource = %ar.plural, error = %e, "watch failed; retrying");
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(s) = synced.take() {
                        let _ = s.send(());
                    }
                    let gone: Vec<String> = self
                        .lock()
                        .nodes
                        .iter()
                        .filter(|(uid, n)| n.resource == resource && !listed.contains(*uid))
                        .map(|(uid, _)| uid.clone())
                        .collect();
                    listed.clear();
                    for uid in gone {
                        self.forget(&uid);
                    }
                }
                Some(Ok(Event::Init)) => listed.clear(),
                Some(Ok(Event::InitApply(o))) => {
                    if let Some(uid) = &o.metadata.uid {
                        listed.insert(uid.clone());
                    }
                    self.observe(resource, &o, synced.is_none());
                }
                Some(Ok(Event::Apply(o))) => self.observe(resource, &o, synced.is_none()),
                Some(Ok(Event::Delete(o))) => {
                    if let Some(uid) = &o.metadata.uid {
                        self.forget(uid);
                    }
                }
            }
        }
    }

    /// Upstream `processGraphChanges` for an add or update.
    fn observe(&self, resource: usize, o: &DynamicObject, live: bool) {
        let Some(uid) = o.metadata.uid.clone() else {
            return;
        };
        let node = Node {
            resource,
            namespace: o.metadata.namespace.clone(),
            name: o.metadata.name.clone().unwrap_or_default(),
            owners: o.metadata.owner_references.clone().unwrap_or_default(),
            deleting: o.metadata.deletion_timestamp.is_some(),
            finalizers: o.metadata.finalizers.clone().unwrap_or_default(),
        };
        let mut graph = self.lock();
        let missing_owner = node
            .owners
            .iter()
            .any(|r| !graph.nodes.contains_key(&r.uid));
        let finishing = node.deleting
            && node
                .finalizers
                .iter()
                .any(|f| f == FOREGROUND || f == ORPHAN);
        let old_owners: Vec<String> = graph
            .nodes
            .get(&uid)
            .map(|n| n.owners.iter().map(|r| r.uid.clone()).collect())
            .unwrap_or_default();
        graph.insert(uid.clone(), node);
        // An owner whose dependent let go of it may now finish a foreground deletion.
        let released: Vec<String> = old_owners
            .into_iter()
            .filter(|o| graph.nodes.get(o).is_some_and(|n| n.deleting))
            .collect();
        drop(graph);
        if !live {
            return;
        }
        if missing_owner || finishing {
            self.queue.add(uid);
        }
        for o in released {
            self.queue.add(o);
        }
    }

    /// Upstream `processGraphChanges` for a delete: the object's dependents are
    /// checked, and an owner being deleted in the foreground may finish.
    fn forget(&self, uid: &str) {
        let mut graph = self.lock();
        let Some(node) = graph.remove(uid) else {
            return;
        };
        let dependents: Vec<String> = graph
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        let owners: Vec<String> = node
            .owners
            .iter()
            .filter(|r| graph.nodes.get(&r.uid).is_some_and(|n| n.deleting))
            .map(|r| r.uid.clone())
            .collect();
        drop(graph);
        for d in dependents.into_iter().chain(owners) {
            self.queue.add(d);
        }
    }

    fn api_for(&self, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) if !ns.is_empty() => Api::namespaced_with(self.client.clone(), ns, ar),
            _ => Api::all_with(self.client.clone(), ar),
        }
    }

    /// The owner as it is now (None: gone, or replaced by an object of another UID).
    async fn live_owner(
        &self,
        r: &OwnerReference,
        namespace: Option<&str>,
    ) -> Result<Option<DynamicObject>, Error> {
        let (group, version) = match r.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", r.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
        let Some((ar, caps)) = self.discovery.resolve_gvk(&gvk) else {
            // A kind the server does not serve: the owner cannot exist.
            return Ok(None);
        };
        let ns = if caps.scope == Scope::Namespaced {
            namespace
        } else {
            None
        };
        match self.api_for(&ar, ns).get_opt(&r.name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(r.uid.as_str()) => Ok(Some(o)),
            _ => Ok(None),
        }
    }

    /// Upstream `attemptToDeleteItem` and the foreground and orphan finishes.
    async fn attempt(&self, uid: &str) -> Result<(), Error> {
        let Some(node) = self.lock().nodes.get(uid).cloned() else {
            return Ok(());
        };
        let ar = self.resources[node.resource].clone();
        let api = self.api_for(&ar, node.namespace.as_deref());
        let Some(latest) = api.get_opt(&node.name).await? else {
            return Ok(());
        };
        if latest.metadata.uid.as_deref() != Some(uid) {
            return Ok(());
        }
        let finalizers = latest.metadata.finalizers.clone().unwrap_or_default();
        if latest.metadata.deletion_timestamp.is_some() {
            if finalizers.iter().any(|f| f == ORPHAN) {
                return self.orphan_dependents(uid, &api, &latest).await;
            }
            if finalizers.iter().any(|f| f == FOREGROUND) {
                return self.delete_dependents(uid, &api, &latest).await;
            }
            return Ok(());
        }
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let mut solid = Vec::new();
        let mut dangling = Vec::new();
        let mut waiting = Vec::new();
        for r in &owners {
            match self.live_owner(r, node.namespace.as_deref()).await? {
                None => dangling.push(r.clone()),
                Some(o)
                    if o.metadata.deletion_timestamp.is_some()
                        && o.metadata
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| f == FOREGROUND) =>
                {
                    waiting.push(r.clone());
                }
                Some(_) => solid.push(r.clone()),
            }
        }
        if !solid.is_empty() {
            if dangling.is_empty() {
                return Ok(());
            }
            // Keep the live owners, drop the references to those that are gone.
            let keep: Vec<&OwnerReference> = owners
                .iter()
                .filter(|r| !dangling.iter().any(|d| d.uid == r.uid))
                .collect();
            let patch =
                json!({"metadata": {"ownerReferences": owner_references(&keep), "uid": uid}});
            api.patch(&node.name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            return Ok(());
        }
        let policy = if !waiting.is_empty() || finalizers.iter().any(|f| f == FOREGROUND) {
            PropagationPolicy::Foreground
        } else if finalizers.iter().any(|f| f == ORPHAN) {
            PropagationPolicy::Orphan
        } else {
            PropagationPolicy::Background
        };
        tracing::info!(object = %node.name, kind = %ar.kind, ?policy, "deleting an object whose owners are gone");
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&node.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The dependents of `uid`, from the graph.
    fn dependents_of(&self, uid: &str) -> Vec<(String, Node)> {
        let graph = self.lock();
        graph
            .dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|d| graph.nodes.get(d).map(|n| (d.clone(), n.clone())))
            .collect()
    }

    /// An owner deleted in the foreground: its dependents are deleted; once none that
    /// blocks it is left, its `foregroundDeletion` finalizer goes (upstream
    /// `processDeletingDependentsItem`).
    async fn delete_dependents(
        &self,
        uid: &str,
        api: &Api<DynamicObject>,
        owner: &DynamicObject,
    ) -> Result<(), Error> {
        let mut blocking = 0;
        for (d, node) in self.dependents_of(uid) {
            let blocks = node
                .owners
                .iter()
                .any(|r| r.uid == uid && r.block_owner_deletion == Some(true));
            if blocks {
                blocking += 1;
            }
            if !node.deleting {
                self.queue.add(d);
            }
        }
        if blocking > 0 {
            return Ok(());
        }
        self.remove_finalizer(api, owner, FOREGROUND).await
    }

    /// An owner deleted with Orphan: its dependents lose their reference to it, then it
    /// loses its `orphan` finalizer (upstream `orphanDependents`).
    async fn orphan_dependents(
        &self,
        uid: &str,
        api: &Api<DynamicObject>,
        owner: &DynamicObject,
    ) -> Result<(), Error> {
        for (_, node) in self.dependents_of(uid) {
            let keep: Vec<&OwnerReference> = node.owners.iter().filter(|r| r.uid != uid).collect();
            let ar = self.resources[node.resource].clone();
            let dep_api = self.api_for(&ar, node.namespace.as_deref());
            let patch = json!({"metadata": {"ownerReferences": owner_references(&keep)}});
            match dep_api
                .patch(&node.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.remove_finalizer(api, owner, ORPHAN).await
    }

    async fn remove_finalizer(
        &self,
        api: &Api<DynamicObject>,
        o: &DynamicObject,
        finalizer: &str,
    ) -> Result<(), Error> {
        let keep: Vec<&String> = o
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .collect();
        let patch = json!({"metadata": {
            "finalizers": keep,
            "resourceVersion": o.metadata.resource_version,
        }});
        let name = o.metadata.name.as_deref().unwrap_or("");
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The `ownerReferences` of a merge patch that keeps `keep`: `null` when none is left,
/// so that the field goes (upstream's `deleteOwnerRefJSONMergePatch` sends a nil list),
/// rather than an empty list that no upstream writer leaves.
fn owner_references(keep: &[&OwnerReference]) -> serde_json::Value {
    if keep.is_empty() {
        serde_json::Value::Null
    } else {
        json!(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(owners: &[&str]) -> Node {
        Node {
            resource: 0,
            namespace: Some("ns".into()),
            name: "x".into(),
            owners: owners
                .iter()
                .map(|u| OwnerReference {
                    uid: (*u).to_owned(),
                    ..Default::default()
                })
                .collect(),
            deleting: false,
            finalizers: Vec::new(),
        }
    }

    #[test]
    fn graph_indexes_dependents_by_owner_and_forgets_them() {
        let mut g = Graph::default();
        g.insert("rs".into(), node(&["deploy"]));
        g.insert("p1".into(), node(&["rs"]));
        g.insert("p2".into(), node(&["rs", "other"]));
        let deps = |g: &Graph, o: &str| {
            let mut v: Vec<String> = g.dependents.get(o).into_iter().flatten().cloned().collect();
            v.sort();
            v
        };
        assert_eq!(deps(&g, "rs"), ["p1", "p2"]);
        assert_eq!(deps(&g, "other"), ["p2"]);
        // A new version of p2 without the second owner re-indexes it.
        g.insert("p2".into(), node(&["rs"]));
        assert!(deps(&g, "other").is_empty());
        assert!(!g.dependents.contains_key("other"));
        g.remove("p1");
        g.remove("p2");
        assert!(!g.dependents.contains_key("rs"));
        assert_eq!(deps(&g, "deploy"), ["rs"]);
        assert!(g.remove("p1").is_none());
    }
}
