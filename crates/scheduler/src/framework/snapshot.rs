//! A consistent view of the cluster for one scheduling cycle (upstream
//! `internal/cache.Snapshot` and the framework's `SharedLister`).
//!
//! The cache updates its snapshot before each cycle, copying only the nodes whose
//! generation changed. Plugins read nodes and the pods on them here, never from the cache.

use std::collections::HashMap;
use std::sync::Arc;

use super::types::NodeInfo;

/// Every node the scheduler knows, in a stable order (zones interleaved, as upstream's
/// node tree), with indexes of the nodes that hold pods with affinity terms.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub(crate) node_infos: HashMap<String, Arc<NodeInfo>>,
    pub(crate) node_info_list: Vec<Arc<NodeInfo>>,
    pub(crate) have_pods_with_affinity: Vec<Arc<NodeInfo>>,
    pub(crate) have_pods_with_required_anti_affinity: Vec<Arc<NodeInfo>>,
    /// `namespace/claim` of every PVC used by a scheduled or assumed pod.
    pub(crate) used_pvcs: std::collections::HashSet<String>,
    pub(crate) generation: u64,
    /// The position of each node in `node_info_list` (the cache patches changed nodes in
    /// place).
    pub(crate) node_index: HashMap<String, usize>,
}

impl Snapshot {
    /// A snapshot of the given nodes (for tests and simulations): each gets the pods
    /// already in it.
    pub fn from_node_infos(nodes: Vec<NodeInfo>) -> Self {
        let mut s = Self::default();
        for n in nodes {
            for p in n.pods() {
                for c in super::types::pvc_keys(&p.pod) {
                    s.used_pvcs.insert(c);
                }
            }
            let n = Arc::new(n);
            s.node_infos.insert(n.name().to_owned(), Arc::clone(&n));
            s.node_index
                .insert(n.name().to_owned(), s.node_info_list.len());
            s.node_info_list.push(n);
        }
        s.rebuild_affinity_lists();
        s
    }

    pub(crate) fn rebuild_affinity_lists(&mut self) {
        self.have_pods_with_affinity = self
            .node_info_list
            .iter()
            .filter(|n| n.has_pods_with_affinity())
            .cloned()
            .collect();
        self.have_pods_with_required_anti_affinity = self
            .node_info_list
            .iter()
            .filter(|n| n.has_pods_with_required_anti_affinity())
            .cloned()
            .collect();
    }

    /// Every node, in the scheduler's order.
    pub fn list(&self) -> &[Arc<NodeInfo>] {
        &self.node_info_list
    }

    /// The nodes that hold pods with affinity or anti-affinity terms.
    pub fn have_pods_with_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_affinity
    }

    /// The nodes that hold pods with required anti-affinity terms.
    pub fn have_pods_with_required_anti_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_required_anti_affinity
    }

    /// The node named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.node_infos.get(name)
    }

    /// The number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_info_list.len()
    }

    /// Whether a scheduled or assumed pod uses the PVC `namespace/claim`.
    pub fn is_pvc_used_by_pods(&self, key: &str) -> bool {
        self.used_pvcs.contains(key)
    }
}
