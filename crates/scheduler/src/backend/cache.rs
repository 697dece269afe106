//! The scheduler cache (upstream `backend/cache/cache.go` and `node_tree.go`): the nodes,
//! the pods assigned to them and the pods the scheduler assumed there between its
//! decision and the binding's confirmation by the informer.
//!
//! Every change of a node's [`NodeInfo`] takes a new value of one global generation
//! counter; [`Cache::update_snapshot`] copies into the cycle's [`Snapshot`] only the nodes
//! whose generation is newer than the snapshot's, and rebuilds its lists only when a node
//! came or went (in node-tree order: zones interleaved) or when a node started or
//! stopped holding pods with affinity terms or PVCs.
//!
//! A pod may arrive before its node: it is kept on a node entry without a Node object,
//! which the snapshot omits until the node arrives. A removed node whose pods are still
//! there stays the same way (upstream's ghost nodes) until its last pod goes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::framework::snapshot::Snapshot;
use crate::framework::types::{ImageStateSummary, NodeInfo, PodInfo, pod_key, pod_node_name};

/// How long an assumed pod whose binding finished may wait for its confirmation by the
/// informer before the cache drops it: upstream's `durationToExpireAssumedPod`, 0 since
/// 1.23, meaning never.
pub const DEFAULT_ASSUMED_POD_TTL: Duration = Duration::ZERO;
/// How often [`Cache::run`] drops expired assumed pods (upstream `cleanAssumedPeriod`).
pub const CLEAN_ASSUMED_PERIOD: Duration = Duration::from_secs(1);

/// The region label, and its deprecated beta name.
const REGION_LABELS: [&str; 2] = [
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
];
/// The zone label, and its deprecated beta name.
const ZONE_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
];

/// The zone key of a node (upstream `utilnode.GetZoneKey`): `region:\0:zone`, or "" when
/// the node has neither label.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |keys: [&str; 2]| {
        keys.iter()
            .find_map(|k| labels.and_then(|l| l.get(*k)).cloned())
            .unwrap_or_default()
    };
    let (region, zone) = (get(REGION_LABELS), get(ZONE_LABELS));
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\x00:{zone}")
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The node names by zone, zones in the order they appeared (upstream `nodeTree`).
#[derive(Debug, Default, Clone)]
pub struct NodeTree {
    tree: HashMap<String, Vec<String>>,
    zones: Vec<String>,
    num_nodes: usize,
}

impl NodeTree {
    /// Adds the node to its zone (a node already there is not added twice).
    pub fn add_node(&mut self, node: &Node) {
        let zone = zone_key(node);
        let name = node_name(node).to_owned();
        match self.tree.get_mut(&zone) {
            Some(names) => {
                if names.contains(&name) {
                    return;
                }
                names.push(name);
            }
            None => {
                self.zones.push(zone.clone());
                self.tree.insert(zone, vec![name]);
            }
        }
        self.num_nodes += 1;
    }

    /// Removes the node from its zone; a zone left empty is removed. Errors: the node
    /// is not in the tree.
    pub fn remove_node(&mut self, node: &Node) -> Result<(), Error> {
        let zone = zone_key(node);
        let name = node_name(node);
        if let Some(names) = self.tree.get_mut(&zone)
            && let Some(i) = names.iter().position(|n| n == name)
        {
            names.remove(i);
            if names.is_empty() {
                self.tree.remove(&zone);
                self.zones.retain(|z| z != &zone);
            }
            self.num_nodes -= 1;
            return Ok(());
        }
        Err(Error::Cache(format!(
            "node {name:?} in group {zone:?} was not found"
        )))
    }

    /// Moves the node when its zone changed.
    pub fn update_node(&mut self, old: Option<&Node>, new: &Node) {
        if let Some(old) = old {
            if zone_key(old) == zone_key(new) {
                return;
            }
            let _ = self.remove_node(old);
        }
        self.add_node(new);
    }

    /// The node names, one of each zone in turn (upstream `nodeTree.list`).
    pub fn list(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.num_nodes);
        let zones: Vec<&Vec<String>> = self.zones.iter().filter_map(|z| self.tree.get(z)).collect();
        let longest = zones.iter().map(|z| z.len()).max().unwrap_or(0);
        for i in 0..longest {
            for z in &zones {
                if let Some(n) = z.get(i) {
                    out.push(n.clone());
                }
            }
        }
        out
    }

    /// The number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }
}

#[derive(Debug)]
struct PodState {
    pod_info: Arc<PodInfo>,
    /// When an assumed pod expires (set once its binding finished, with a TTL).
    deadline: Option<Instant>,
    binding_finished: bool,
}

#[derive(Debug)]
struct CacheNode {
    info: NodeInfo,
    /// False while the Node object is not known (pods before their node, ghost nodes).
    has_node: bool,
}

#[derive(Debug)]
struct ImageState {
    size: i64,
    nodes: HashSet<String>,
}

#[derive(Debug, Default)]
struct Inner {
    nodes: HashMap<String, CacheNode>,
    /// Node names by the generation of their last change (the most recent last):
    /// upstream's doubly linked list of NodeInfos.
    recency: BTreeMap<u64, String>,
    generation: u64,
    node_tree: NodeTree,
    pod_states: HashMap<String, PodState>,
    assumed: HashSet<String>,
    image_states: HashMap<String, ImageState>,
}

fn placeholder(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_owned());
    n
}

impl Inner {
    /// Gives the node a new generation and puts it at the head (upstream
    /// `moveNodeInfoToHead`).
    fn touch(&mut self, name: &str) {
        self.generation += 1;
        let generation = self.generation;
        if let Some(n) = self.nodes.get_mut(name) {
            let old = n.info.generation;
            n.info.generation = generation;
            if self.recency.get(&old).is_some_and(|x| x == name) {
                self.recency.remove(&old);
            }
            self.recency.insert(generation, name.to_owned());
        }
    }

    fn remove_node_entry(&mut self, name: &str) {
        if let Some(n) = self.nodes.remove(name)
            && self
                .recency
                .get(&n.info.generation)
                .is_some_and(|x| x == name)
        {
            self.recency.remove(&n.info.generation);
        }
    }

    fn node_entry(&mut self, name: &str) -> &mut CacheNode {
        self.nodes
            .entry(name.to_owned())
            .or_insert_with(|| CacheNode {
                info: NodeInfo::new(placeholder(name)),
                has_node: false,
            })
    }

    fn add_pod(&mut self, pi: Arc<PodInfo>, assumed: bool) {
        let node = pod_node_name(&pi.pod).to_owned();
        let uid = pi.uid().to_owned();
        self.node_entry(&node).info.add_pod(Arc::clone(&pi));
        self.touch(&node);
        self.pod_states.insert(
            uid.clone(),
            PodState {
                pod_info: pi,
                deadline: None,
                binding_finished: false,
            },
        );
        if assumed {
            self.assumed.insert(uid);
        }
    }

    /// Removes the pod from its node and the bookkeeping; a node entry without Node
    /// object and without pods goes.
    fn remove_pod(&mut self, uid: &str) -> Result<(), Error> {
        let Some(state) = self.pod_states.get(uid) else {
            return Err(Error::Cache(format!(
                "pod {uid} is not found in scheduler cache"
            )));
        };
        let node = pod_node_name(&state.pod_info.pod).to_owned();
        let key = state.pod_info.key();
        match self.nodes.get_mut(&node) {
            None => tracing::error!(node, pod = %key, "node not found when trying to remove pod"),
            Some(n) => {
                if !n.info.remove_pod(uid) {
                    return Err(Error::Cache(format!(
                        "no corresponding pod {key} in pods of node {node}"
                    )));
                }
                if n.info.pods().is_empty() && !n.has_node {
                    self.remove_node_entry(&node);
                } else {
                    self.touch(&node);
                }
            }
        }
        self.pod_states.remove(uid);
        self.assumed.remove(uid);
        Ok(())
    }

    fn add_node_image_states(&mut self, node: &Node) -> HashMap<String, ImageStateSummary> {
        let name = node_name(node);
        let mut out = HashMap::new();
        for image in node.status.iter().flat_map(|s| s.images.iter().flatten()) {
            let size = image.size_bytes.unwrap_or_default();
            for image_name in image.names.iter().flatten() {
                let state = self
                    .image_states
                    .entry(image_name.clone())
                    .or_insert_with(|| ImageState {
                        size,
                        nodes: HashSet::new(),
                    });
                state.nodes.insert(name.to_owned());
                out.insert(
                    image_name.clone(),
                    ImageStateSummary {
                        size: state.size,
                        num_nodes: state.nodes.len(),
                    },
                );
            }
        }
        out
    }

    fn remove_node_image_states(&mut self, node: &Node) {
        let name = node_name(node);
        for image in node.status.iter().flat_map(|s| s.images.iter().flatten()) {
            for image_name in image.names.iter().flatten() {
                if let Some(state) = self.image_states.get_mut(image_name) {
                    state.nodes.remove(name);
                    if state.nodes.is_empty() {
                        self.image_states.remove(image_name);
                    }
                }
            }
        }
    }

    /// The NodeInfo as the snapshot gets it: image spreads counted now (upstream
    /// `ImageStateSummary.Snapshot`).
    fn snapshot_of(&self, n: &CacheNode) -> NodeInfo {
        let mut info = n.info.clone();
        for (name, summary) in info.image_states.iter_mut() {
            if let Some(s) = self.image_states.get(name) {
                summary.num_nodes = s.nodes.len();
            }
        }
        info
    }
}

/// What [`Cache::dump`] shows: every node (ghosts included) with the keys of its pods,
/// and the uids of the assumed pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// Node name -> `namespace/name` of its pods, sorted.
    pub nodes: BTreeMap<String, Vec<String>>,
    /// The uids of the assumed pods.
    pub assumed_pods: BTreeSet<String>,
}

/// The scheduler cache (upstream `cacheImpl`). Thread-safe.
#[derive(Debug)]
pub struct Cache {
    inner: Mutex<Inner>,
    ttl: Duration,
}

impl Default for Cache {
    fn default() -> Self {
        Self::new(DEFAULT_ASSUMED_POD_TTL)
    }
}

impl Cache {
    /// An empty cache whose assumed pods expire `ttl` after their binding finished (0:
    /// never).
    pub fn new(ttl: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            ttl,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the pod to the node of its `spec.nodeName` as assumed (upstream
    /// `AssumePod`). Errors: the pod is already in the cache.
    pub fn assume_pod(&self, pod_info: Arc<PodInfo>) -> Result<(), Error> {
        let mut inner = self.lock();
        let uid = pod_info.uid().to_owned();
        if inner.pod_states.contains_key(&uid) {
            return Err(Error::Cache(format!(
                "pod {uid}({}) is in the cache, so can't be assumed",
                pod_info.key()
            )));
        }
        inner.add_pod(pod_info, true);
        Ok(())
    }

    /// The binding of an assumed pod finished: its expiry clock starts now (upstream
    /// `FinishBinding`). Nothing happens for a pod that is not assumed.
    pub fn finish_binding(&self, uid: &str) {
        self.finish_binding_at(uid, Instant::now());
    }

    /// [`finish_binding`](Self::finish_binding) at `now`.
    pub fn finish_binding_at(&self, uid: &str, now: Instant) {
        let mut inner = self.lock();
        if !inner.assumed.contains(uid) {
            return;
        }
        let ttl = self.ttl;
        if let Some(state) = inner.pod_states.get_mut(uid) {
            state.deadline = (!ttl.is_zero()).then(|| now + ttl);
            state.binding_finished = true;
        }
    }

    /// Removes an assumed pod (upstream `ForgetPod`): its scheduling or binding failed.
    /// Errors: the pod is not assumed.
    pub fn forget_pod(&self, uid: &str) -> Result<(), Error> {
        let mut inner = self.lock();
        if !inner.assumed.contains(uid) {
            let pod = inner
                .pod_states
                .get(uid)
                .map(|s| format!("{uid}({})", s.pod_info.key()))
                .unwrap_or_else(|| uid.to_owned());
            return Err(Error::Cache(format!(
                "pod {pod} wasn't assumed so cannot be forgotten"
            )));
        }
        inner.remove_pod(uid)
    }

    /// Whether the pod with `uid` is assumed (not yet confirmed by the informer).
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.lock().assumed.contains(uid)
    }

    /// The cached copy of the pod with `uid` (assumed or added).
    pub fn get_pod(&self, uid: &str) -> Option<Arc<Pod>> {
        self.lock()
            .pod_states
            .get(uid)
            .map(|s| Arc::clone(&s.pod_info.pod))
    }

    /// An assigned pod seen by the informer (upstream `AddPod`): confirms an assumed pod
    /// (replacing the assumed copy, on the node the pod is really on), re-adds an expired
    /// one. Errors: the pod was already added.
    pub fn add_pod(&self, pod: Arc<Pod>) -> Result<(), Error> {
        let pi = Arc::new(PodInfo::new(pod));
        let uid = pi.uid().to_owned();
        let mut inner = self.lock();
        match inner.pod_states.get(&uid) {
            Some(state) if inner.assumed.contains(&uid) => {
                let assumed_node = pod_node_name(&state.pod_info.pod).to_owned();
                if assumed_node != pod_node_name(&pi.pod) {
                    tracing::info!(
                        pod = %pi.key(),
                        assumed_node,
                        current_node = pod_node_name(&pi.pod),
                        "pod was added to a different node than it was assumed"
                    );
                }
                inner.remove_pod(&uid)?;
                inner.add_pod(pi, false);
                Ok(())
            }
            Some(_) => Err(Error::Cache(format!(
                "pod {uid}({}) was already in added state",
                pi.key()
            ))),
            None => {
                inner.add_pod(pi, false);
                Ok(())
            }
        }
    }

    /// An assigned pod changed (upstream `UpdatePod`). Errors: the pod is not in the
    /// cache, or is assumed (an assumed pod gets its Add before any Update).
    pub fn update_pod(&self, old: &Pod, new: Arc<Pod>) -> Result<(), Error> {
        let uid = crate::framework::types::pod_uid(old).to_owned();
        let key = pod_key(old);
        let mut inner = self.lock();
        let Some(state) = inner.pod_states.get(&uid) else {
            return Err(Error::Cache(format!(
                "pod {uid}({key}) is not added to scheduler cache, so cannot be updated"
            )));
        };
        if inner.assumed.contains(&uid) {
            return Err(Error::Cache(format!(
                "assumed pod {uid}({key}) should not be updated"
            )));
        }
        if pod_node_name(&state.pod_info.pod) != pod_node_name(&new) {
            tracing::error!(
                pod = %key,
                "pod updated on a different node than previously added to; scheduler cache is corrupted and can badly affect scheduling decisions"
            );
        }
        inner.remove_pod(&uid)?;
        inner.add_pod(Arc::new(PodInfo::new(new)), false);
        Ok(())
    }

    /// An assigned pod was deleted (upstream `RemovePod`): the cached copy goes from the
    /// node it is on. Errors: the pod is not in the cache.
    pub fn remove_pod(&self, pod: &Pod) -> Result<(), Error> {
        let uid = crate::framework::types::pod_uid(pod);
        let mut inner = self.lock();
        let Some(state) = inner.pod_states.get(uid) else {
            return Err(Error::Cache(format!(
                "pod {uid}({}) is not found in scheduler cache, so cannot be removed from it",
                pod_key(pod)
            )));
        };
        let cached_node = pod_node_name(&state.pod_info.pod);
        if cached_node != pod_node_name(pod) && !pod_node_name(pod).is_empty() {
            tracing::error!(
                pod = %pod_key(pod),
                cached_node,
                "pod was added to a different node than it was assumed; scheduler cache is corrupted"
            );
        }
        inner.remove_pod(uid)
    }

    /// Drops the assumed pods whose binding finished and whose deadline passed at `now`
    /// (upstream `cleanupAssumedPods`); nothing with a TTL of 0. The uids dropped.
    pub fn cleanup_expired_assumed_pods(&self, now: Instant) -> Vec<String> {
        let mut inner = self.lock();
        if self.ttl.is_zero() {
            return Vec::new();
        }
        let expired: Vec<String> = inner
            .assumed
            .iter()
            .filter(|uid| {
                inner
                    .pod_states
                    .get(*uid)
                    .is_some_and(|s| s.binding_finished && s.deadline.is_some_and(|d| now > d))
            })
            .cloned()
            .collect();
        for uid in &expired {
            if let Some(s) = inner.pod_states.get(uid) {
                tracing::info!(pod = %s.pod_info.key(), "pod expired");
            }
            if let Err(e) = inner.remove_pod(uid) {
                tracing::error!("expiring pod {uid}: {e}");
            }
        }
        expired
    }

    /// Drops expired assumed pods every second until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(CLEAN_ASSUMED_PERIOD);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = tick.tick() => {
                    self.cleanup_expired_assumed_pods(Instant::now());
                }
            }
        }
    }

    /// A node was added (upstream `AddNode`): pods that arrived before it are kept.
    pub fn add_node(&self, node: Arc<Node>) {
        let name = node_name(&node).to_owned();
        let mut inner = self.lock();
        if let Some(n) = inner.nodes.get(&name)
            && n.has_node
        {
            // Seen again (a relist): the node may have changed zone.
            let old = Arc::clone(n.info.node_arc());
            inner.remove_node_image_states(&old);
            inner.node_tree.update_node(Some(&old), &node);
        } else {
            inner.node_tree.add_node(&node);
        }
        let images = inner.add_node_image_states(&node);
        let n = inner.node_entry(&name);
        n.info.set_node(node);
        n.info.image_states = images;
        n.has_node = true;
        inner.touch(&name);
    }

    /// A node changed (upstream `UpdateNode`).
    pub fn update_node(&self, old: &Node, new: Arc<Node>) {
        let name = node_name(&new).to_owned();
        let mut inner = self.lock();
        match inner.nodes.get(&name) {
            Some(n) if n.has_node => {
                let cached = Arc::clone(n.info.node_arc());
                inner.remove_node_image_states(&cached);
                inner.node_tree.update_node(Some(old), &new);
            }
            _ => inner.node_tree.add_node(&new),
        }
        let images = inner.add_node_image_states(&new);
        let n = inner.node_entry(&name);
        n.info.set_node(new);
        n.info.image_states = images;
        n.has_node = true;
        inner.touch(&name);
    }

    /// A node was deleted (upstream `RemoveNode`): its entry stays, without Node, while
    /// pods remain on it. Errors: the node is unknown.
    pub fn remove_node(&self, node: &Node) -> Result<(), Error> {
        let name = node_name(node).to_owned();
        let mut inner = self.lock();
        let Some(n) = inner.nodes.get_mut(&name) else {
            return Err(Error::Cache(format!("node {name} is not found")));
        };
        n.has_node = false;
        let no_pods = n.info.pods().is_empty();
        if no_pods {
            inner.remove_node_entry(&name);
        } else {
            inner.touch(&name);
        }
        inner.node_tree.remove_node(node)?;
        inner.remove_node_image_states(node);
        Ok(())
    }

    /// The number of node entries (ghosts and pods-before-node entries included).
    pub fn node_count(&self) -> usize {
        self.lock().nodes.len()
    }

    /// The number of pods on all node entries, assumed ones included.
    pub fn pod_count(&self) -> usize {
        self.lock()
            .nodes
            .values()
            .map(|n| n.info.pods().len())
            .sum()
    }

    /// `(nodes, pods, assumed pods)`: the `scheduler_scheduler_cache_size` gauge's values
    /// (upstream `updateMetrics`).
    pub fn sizes(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        (
            inner.nodes.len(),
            inner.pod_states.len(),
            inner.assumed.len(),
        )
    }

    /// The nodes, their pods and the assumed pods (for debugging; upstream `Dump`).
    pub fn dump(&self) -> Dump {
        let inner = self.lock();
        let nodes = inner
            .nodes
            .iter()
            .map(|(name, n)| {
                let mut pods: Vec<String> = n.info.pods().iter().map(|p| p.key()).collect();
                pods.sort();
                (name.clone(), pods)
            })
            .collect();
        Dump {
            nodes,
            assumed_pods: inner.assumed.iter().cloned().collect(),
        }
    }

    /// Brings `snapshot` up to date (upstream `UpdateSnapshot`): only the nodes changed
    /// since its generation are copied; the node list (in node-tree order) is rebuilt
    /// when a node came or went, the affinity lists when a node started or stopped
    /// holding such pods, the used PVCs when a node's set of PVCs changed; otherwise
    /// changed nodes are replaced in place. Errors: the snapshot did not match the node
    /// tree (it is rebuilt whole for the next cycle).
    pub fn update_snapshot(&self, snapshot: &mut Snapshot) -> Result<(), Error> {
        let inner = self.lock();
        let since = snapshot.generation;
        let mut update_all = false;
        let mut update_affinity = false;
        let mut update_pvcs = false;
        let mut changed: Vec<Arc<NodeInfo>> = Vec::new();
        for (generation, name) in inner.recency.iter().rev() {
            if *generation <= since {
                break;
            }
            let Some(n) = inner.nodes.get(name) else {
                continue;
            };
            if !n.has_node {
                continue;
            }
            let clone = Arc::new(inner.snapshot_of(n));
            match snapshot.node_infos.insert(name.clone(), Arc::clone(&clone)) {
                None => update_all = true,
                Some(old) => {
                    if old.has_pods_with_affinity() != clone.has_pods_with_affinity()
                        || old.has_pods_with_required_anti_affinity()
                            != clone.has_pods_with_required_anti_affinity()
                    {
                        update_affinity = true;
                    }
                    if old.pvc_ref_counts.len() != clone.pvc_ref_counts.len()
                        || clone
                            .pvc_ref_counts
                            .keys()
                            .any(|k| !old.pvc_ref_counts.contains_key(k))
                    {
                        update_pvcs = true;
                    }
                    changed.push(clone);
                }
            }
        }
        if let Some((&generation, _)) = inner.recency.iter().next_back() {
            snapshot.generation = generation;
        }
        if snapshot.node_infos.len() > inner.node_tree.num_nodes() {
            snapshot
                .node_infos
                .retain(|name, _| inner.nodes.get(name).is_some_and(|n| n.has_node));
            update_all = true;
        }
        if update_all {
            rebuild_lists(&inner, snapshot);
        } else if !changed.is_empty() {
            for clone in &changed {
                if let Some(slot) = snapshot
                    .node_index
                    .get(clone.name())
                    .and_then(|&i| snapshot.node_info_list.get_mut(i))
                {
                    *slot = Arc::clone(clone);
                }
            }
            if update_affinity {
                snapshot.rebuild_affinity_lists();
            } else {
                let by_name: HashMap<&str, &Arc<NodeInfo>> =
                    changed.iter().map(|c| (c.name(), c)).collect();
                for list in [
                    &mut snapshot.have_pods_with_affinity,
                    &mut snapshot.have_pods_with_required_anti_affinity,
                ] {
                    for slot in list.iter_mut() {
                        if let Some(c) = by_name.get(slot.name()) {
                            *slot = Arc::clone(c);
                        }
                    }
                }
            }
            if update_pvcs {
                rebuild_used_pvcs(snapshot);
            }
        }
        if snapshot.node_info_list.len() != inner.node_tree.num_nodes() {
            let msg = format!(
                "snapshot state is not consistent, length of NodeInfoList={} not equal to length of nodes in tree={} , length of NodeInfoMap={}, length of nodes in cache={}, trying to recover",
                snapshot.node_info_list.len(),
                inner.node_tree.num_nodes(),
                snapshot.node_infos.len(),
                inner.nodes.len()
            );
            tracing::error!("{msg}");
            snapshot.node_infos = inner
                .nodes
                .iter()
                .filter(|(_, n)| n.has_node)
                .map(|(name, n)| (name.clone(), Arc::new(inner.snapshot_of(n))))
                .collect();
            rebuild_lists(&inner, snapshot);
            return Err(Error::Cache(msg));
        }
        Ok(())
    }
}

fn rebuild_used_pvcs(snapshot: &mut Snapshot) {
    snapshot.used_pvcs = snapshot
        .node_info_list
        .iter()
        .flat_map(|n| n.pvc_ref_counts.keys().cloned())
        .collect();
}

/// Rebuilds the node list in node-tree order, its index, the affinity lists and the used
/// PVCs.
fn rebuild_lists(inner: &Inner, snapshot: &mut Snapshot) {
    snapshot.node_info_list.clear();
    snapshot.node_index.clear();
    for name in inner.node_tree.list() {
        match snapshot.node_infos.get(&name) {
            Some(n) => {
                snapshot
                    .node_index
                    .insert(name, snapshot.node_info_list.len());
                snapshot.node_info_list.push(Arc::clone(n));
            }
            None => tracing::error!(
                node = name,
                "node exists in nodeTree but not in NodeInfoMap, this should not happen"
            ),
        }
    }
    snapshot.rebuild_affinity_lists();
    rebuild_used_pvcs(snapshot);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, ContainerImage, NodeStatus, PersistentVolumeClaimVolumeSource,
        PodAffinity, PodAffinityTerm, PodSpec, ResourceRequirements, Volume,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;

    fn pod(name: &str, node: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.spec = Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_owned()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_owned(), Quantity("100m".into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        p
    }

    fn info(name: &str, node: &str) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(pod(name, node)))
    }

    fn node(name: &str, zone: &str) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        if !zone.is_empty() {
            n.metadata.labels = Some(
                [
                    ("topology.kubernetes.io/region".to_owned(), "r".to_owned()),
                    ("topology.kubernetes.io/zone".to_owned(), zone.to_owned()),
                ]
                .into(),
            );
        }
        Arc::new(n)
    }

    fn with_images(name: &str, images: &[(&[&str], i64)]) -> Arc<Node> {
        let mut n = (*node(name, "")).clone();
        n.status = Some(NodeStatus {
            images: Some(
                images
                    .iter()
                    .map(|(names, size)| ContainerImage {
                        names: Some(names.iter().map(|s| (*s).to_owned()).collect()),
                        size_bytes: Some(*size),
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        Arc::new(n)
    }

    fn names(s: &Snapshot) -> Vec<&str> {
        s.list().iter().map(|n| n.name()).collect()
    }

    fn pods_on(s: &Snapshot, node: &str) -> Vec<String> {
        let mut v: Vec<String> = s
            .get(node)
            .map(|n| n.pods().iter().map(|p| p.key()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn assume_confirm_and_forget() {
        let c = Cache::default();
        c.add_node(node("n1", ""));
        c.add_node(node("n2", ""));
        c.assume_pod(info("a", "n1")).expect("assume");
        assert!(c.is_assumed("uid-a"));
        assert_eq!(c.pod_count(), 1);
        let err = c.assume_pod(info("a", "n1")).expect_err("twice");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-a(default/a) is in the cache, so can't be assumed"
        );
        // The informer sees it bound to n2: the assumed copy on n1 goes.
        c.add_pod(Arc::new(pod("a", "n2"))).expect("confirm");
        assert!(!c.is_assumed("uid-a"));
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(pods_on(&s, "n1"), Vec::<String>::new());
        assert_eq!(pods_on(&s, "n2"), ["default/a"]);
        assert_eq!(
            s.get("n2").map(|n| n.requested().get("cpu").copied()),
            Some(Some(100))
        );
        let err = c.add_pod(Arc::new(pod("a", "n2"))).expect_err("again");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-a(default/a) was already in added state"
        );
        let err = c.forget_pod("uid-a").expect_err("not assumed");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-a(default/a) wasn't assumed so cannot be forgotten"
        );
        c.assume_pod(info("b", "n1")).expect("assume b");
        assert_eq!(c.sizes(), (2, 2, 1));
        c.forget_pod("uid-b").expect("forget");
        assert!(c.get_pod("uid-b").is_none());
        assert_eq!(c.pod_count(), 1);
        let err = c.forget_pod("uid-b").expect_err("gone");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-b wasn't assumed so cannot be forgotten"
        );
    }

    #[test]
    fn assumed_pods_expire_only_after_binding_and_ttl() {
        let t0 = Instant::now();
        let c = Cache::new(Duration::from_secs(30));
        c.add_node(node("n1", ""));
        c.assume_pod(info("a", "n1")).expect("assume");
        assert!(
            c.cleanup_expired_assumed_pods(t0 + Duration::from_secs(100))
                .is_empty()
        );
        c.finish_binding_at("uid-a", t0);
        assert!(
            c.cleanup_expired_assumed_pods(t0 + Duration::from_secs(30))
                .is_empty()
        );
        assert_eq!(
            c.cleanup_expired_assumed_pods(t0 + Duration::from_secs(31)),
            ["uid-a"]
        );
        assert_eq!(c.pod_count(), 0);
        // An expired pod that the informer then reports is added back.
        c.add_pod(Arc::new(pod("a", "n1"))).expect("re-add");
        assert_eq!(c.pod_count(), 1);

        // Upstream's default TTL of 0: never expires.
        let c = Cache::default();
        c.add_node(node("n1", ""));
        c.assume_pod(info("a", "n1")).expect("assume");
        c.finish_binding_at("uid-a", t0);
        assert!(
            c.cleanup_expired_assumed_pods(t0 + Duration::from_secs(3600))
                .is_empty()
        );
        assert!(c.is_assumed("uid-a"));
    }

    #[test]
    fn update_and_remove_pods() {
        let c = Cache::default();
        c.add_node(node("n1", ""));
        c.assume_pod(info("a", "n1")).expect("assume");
        let err = c
            .update_pod(&pod("a", "n1"), Arc::new(pod("a", "n1")))
            .expect_err("assumed");
        assert_eq!(
            err.to_string(),
            "scheduler cache: assumed pod uid-a(default/a) should not be updated"
        );
        let err = c
            .update_pod(&pod("x", "n1"), Arc::new(pod("x", "n1")))
            .expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-x(default/x) is not added to scheduler cache, so cannot be updated"
        );
        c.add_pod(Arc::new(pod("a", "n1"))).expect("confirm");
        let mut bigger = pod("a", "n1");
        if let Some(r) = bigger
            .spec
            .as_mut()
            .and_then(|s| s.containers.first_mut())
            .and_then(|c| c.resources.as_mut())
        {
            r.requests = Some([("cpu".to_owned(), Quantity("1".into()))].into());
        }
        c.update_pod(&pod("a", "n1"), Arc::new(bigger))
            .expect("update");
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(
            s.get("n1").and_then(|n| n.requested().get("cpu").copied()),
            Some(1000)
        );
        c.remove_pod(&pod("a", "n1")).expect("remove");
        let err = c.remove_pod(&pod("a", "n1")).expect_err("gone");
        assert_eq!(
            err.to_string(),
            "scheduler cache: pod uid-a(default/a) is not found in scheduler cache, so cannot be removed from it"
        );
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(
            s.get("n1").and_then(|n| n.requested().get("cpu").copied()),
            Some(0)
        );
    }

    #[test]
    fn pods_before_their_node_and_ghost_nodes() {
        let c = Cache::default();
        c.add_pod(Arc::new(pod("early", "n1"))).expect("add");
        assert_eq!(c.node_count(), 1);
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(s.num_nodes(), 0);
        c.add_node(node("n1", ""));
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["n1"]);
        assert_eq!(pods_on(&s, "n1"), ["default/early"]);
        // Removing the node keeps a ghost while its pod remains; the snapshot omits it.
        c.remove_node(&node("n1", "")).expect("remove");
        assert_eq!(c.node_count(), 1);
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(s.num_nodes(), 0);
        assert!(s.get("n1").is_none());
        c.remove_pod(&pod("early", "n1")).expect("remove pod");
        assert_eq!(c.node_count(), 0);
        let err = c.remove_node(&node("n1", "")).expect_err("unknown");
        assert_eq!(err.to_string(), "scheduler cache: node n1 is not found");
        assert_eq!(
            c.dump(),
            Dump {
                nodes: BTreeMap::new(),
                assumed_pods: BTreeSet::new()
            }
        );
    }

    fn affinity_pod(name: &str, node: &str) -> Pod {
        let mut p = pod(name, node);
        if let Some(s) = p.spec.as_mut() {
            s.affinity = Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(MetaSelector::default()),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        p
    }

    #[test]
    fn snapshot_copies_only_changed_nodes() {
        let c = Cache::default();
        for n in ["n1", "n2", "n3"] {
            c.add_node(node(n, ""));
        }
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["n1", "n2", "n3"]);
        let before: Vec<Arc<NodeInfo>> = s.list().to_vec();
        // Nothing changed: nothing is copied.
        c.update_snapshot(&mut s).expect("snapshot");
        for (a, b) in before.iter().zip(s.list()) {
            assert!(Arc::ptr_eq(a, b));
        }
        c.add_pod(Arc::new(pod("a", "n2"))).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["n1", "n2", "n3"]);
        let (l, m) = (s.list(), &s.node_infos);
        assert!(Arc::ptr_eq(&before[0], &l[0]) && Arc::ptr_eq(&before[0], &m["n1"]));
        assert!(!Arc::ptr_eq(&before[1], &l[1]));
        assert!(Arc::ptr_eq(&l[1], &m["n2"]));
        assert!(Arc::ptr_eq(&before[2], &l[2]));
        assert_eq!(pods_on(&s, "n2"), ["default/a"]);
        assert!(s.have_pods_with_affinity().is_empty());
        // A pod with affinity on n3: the affinity list is rebuilt.
        c.add_pod(Arc::new(affinity_pod("aff", "n3"))).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        let aff: Vec<&str> = s
            .have_pods_with_affinity()
            .iter()
            .map(|n| n.name())
            .collect();
        assert_eq!(aff, ["n3"]);
        // Another change on n3 keeps its membership: the entry is replaced in place.
        c.add_pod(Arc::new(pod("b", "n3"))).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        assert!(Arc::ptr_eq(
            &s.have_pods_with_affinity()[0],
            &s.node_infos["n3"]
        ));
        assert_eq!(s.have_pods_with_affinity()[0].pods().len(), 2);
        assert!(Arc::ptr_eq(&s.list()[2], &s.node_infos["n3"]));
        // A new node rebuilds the list; a removed node leaves it.
        c.add_node(node("n4", ""));
        c.remove_node(&node("n1", "")).expect("remove");
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["n2", "n3", "n4"]);
        assert_eq!(s.node_infos.len(), 3);
        // A fresh snapshot gets everything.
        let mut fresh = Snapshot::default();
        c.update_snapshot(&mut fresh).expect("snapshot");
        assert_eq!(names(&fresh), ["n2", "n3", "n4"]);
        assert_eq!(fresh.generation, s.generation);
    }

    #[test]
    fn used_pvcs_follow_the_pods() {
        let c = Cache::default();
        c.add_node(node("n1", ""));
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        let mut p = pod("db", "n1");
        if let Some(spec) = p.spec.as_mut() {
            spec.volumes = Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: "claim".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        }
        c.add_pod(Arc::new(p.clone())).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        assert!(s.is_pvc_used_by_pods("default/claim"));
        c.remove_pod(&p).expect("remove");
        c.update_snapshot(&mut s).expect("snapshot");
        assert!(!s.is_pvc_used_by_pods("default/claim"));
    }

    #[test]
    fn zones_are_interleaved() {
        let c = Cache::default();
        for (n, z) in [
            ("a1", "A"),
            ("a2", "A"),
            ("a3", "A"),
            ("b1", "B"),
            ("c1", "C"),
            ("c2", "C"),
        ] {
            c.add_node(node(n, z));
        }
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["a1", "b1", "c1", "a2", "c2", "a3"]);
        c.remove_node(&node("b1", "B")).expect("remove");
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(names(&s), ["a1", "c1", "a2", "c2", "a3"]);
        // a1 moves to zone C: it goes to the end of C.
        c.update_node(&node("a1", "A"), node("a1", "C"));
        let mut fresh = Snapshot::default();
        c.update_snapshot(&mut fresh).expect("snapshot");
        assert_eq!(names(&fresh), ["a2", "c1", "a3", "c2", "a1"]);
        assert_eq!(zone_key(&node("x", "Z")), "r:\x00:Z");
        // A node added again (a relist) in another zone moves; it is not counted twice.
        c.add_node(node("a1", "A"));
        let mut fresh = Snapshot::default();
        c.update_snapshot(&mut fresh).expect("snapshot");
        // A: a2 a3 a1; C: c1 c2.
        assert_eq!(names(&fresh), ["a2", "c1", "a3", "c2", "a1"]);
        assert_eq!(c.lock().node_tree.num_nodes(), 5);
        assert_eq!(
            c.lock().node_tree.tree.get("r:\x00:A").map(Vec::len),
            Some(3)
        );
        assert_eq!(zone_key(&node("x", "")), "");
    }

    #[test]
    fn image_states_count_nodes_across_the_cluster() {
        let c = Cache::default();
        c.add_node(with_images("n1", &[(&["nginx:1", "nginx@sha256:1"], 100)]));
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s).expect("snapshot");
        let state =
            |s: &Snapshot, n: &str, i: &str| s.get(n).and_then(|n| n.image_states.get(i).copied());
        assert_eq!(
            state(&s, "n1", "nginx@sha256:1"),
            Some(ImageStateSummary {
                size: 100,
                num_nodes: 1
            })
        );
        c.add_node(with_images(
            "n2",
            &[(&["nginx:1"], 100), (&["redis:7"], 50)],
        ));
        c.add_node(node("n3", ""));
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(
            state(&s, "n2", "nginx:1"),
            Some(ImageStateSummary {
                size: 100,
                num_nodes: 2
            })
        );
        assert_eq!(
            state(&s, "n2", "redis:7"),
            Some(ImageStateSummary {
                size: 50,
                num_nodes: 1
            })
        );
        assert_eq!(state(&s, "n3", "nginx:1"), None);
        // As upstream, an unchanged node keeps the spread it was copied with...
        assert_eq!(
            state(&s, "n1", "nginx:1"),
            Some(ImageStateSummary {
                size: 100,
                num_nodes: 1
            })
        );
        // ...until it changes.
        c.add_pod(Arc::new(pod("p", "n1"))).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(
            state(&s, "n1", "nginx:1"),
            Some(ImageStateSummary {
                size: 100,
                num_nodes: 2
            })
        );
        // The image leaves n2 with its node: counts go down for nodes copied after.
        c.remove_node(&with_images(
            "n2",
            &[(&["nginx:1"], 100), (&["redis:7"], 50)],
        ))
        .expect("remove");
        c.add_pod(Arc::new(pod("q", "n1"))).expect("add");
        c.update_snapshot(&mut s).expect("snapshot");
        assert_eq!(
            state(&s, "n1", "nginx:1"),
            Some(ImageStateSummary {
                size: 100,
                num_nodes: 1
            })
        );
        assert!(!c.lock().image_states.contains_key("redis:7"));
    }
}
