//! The node IPAM controller with upstream's range allocator
//! (`pkg/controller/nodeipam`, `ipam/range_allocator.go`): with `--allocate-node-cidrs`,
//! each Node without `spec.podCIDRs` gets the next free node CIDR of each
//! `--cluster-cidr` (one per family, dual-stack with two), written to `spec.podCIDR` and
//! `spec.podCIDRs`.
//!
//! - Node CIDRs are `/24` for IPv4 and `/64` for IPv6 unless `--node-cidr-mask-size`
//!   (single-stack only) or `--node-cidr-mask-size-ipv4` / `-ipv6` say otherwise.
//! - What `--service-cluster-ip-range` overlaps is never handed out.
//! - Nodes that already have CIDRs mark them used when the controller starts (and when
//!   seen later); a deleted Node's CIDRs are free again. Allocation goes round the range,
//!   so a freed CIDR is reused once the ones after it are taken.
//! - When a range is full, the Node gets the Warning event `CIDRNotAvailable` ("Node
//!   <name> status is now: CIDRNotAvailable") and is retried with backoff; upstream's
//!   range allocator sets no node condition (`NetworkUnavailable` is the cloud
//!   allocator's). A failed update gives `CIDRAssignmentFailed`.
//!
//! Without `--allocate-node-cidrs` the controller does nothing, as upstream.

mod cidrset;

use std::sync::{Arc, Mutex, PoisonError};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{run_workers, wait_for_cache_sync};
use cidrset::CidrSet;

/// The controller's name (`--controllers`; upstream's alias `nodeipam`).
pub const NAME: &str = "node-ipam-controller";
/// The alias upstream's `--controllers` also accepts.
pub const ALIAS: &str = "nodeipam";
/// IPv4 node CIDRs' default mask size.
pub const DEFAULT_NODE_MASK_IPV4: u8 = 24;
/// IPv6 node CIDRs' default mask size.
pub const DEFAULT_NODE_MASK_IPV6: u8 = 64;
/// Workers updating Nodes (upstream `cidrUpdateWorkers`).
const WORKERS: usize = 30;

/// The flags of node CIDR allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `--allocate-node-cidrs` (default false): without it the controller does nothing.
    pub allocate_node_cidrs: bool,
    /// `--cluster-cidr`: one CIDR, or an IPv4 and an IPv6 one (dual-stack).
    pub cluster_cidrs: Vec<IpNet>,
    /// `--node-cidr-mask-size` (single-stack only).
    pub node_cidr_mask_size: Option<u8>,
    /// `--node-cidr-mask-size-ipv4` (default 24).
    pub node_cidr_mask_size_ipv4: Option<u8>,
    /// `--node-cidr-mask-size-ipv6` (default 64).
    pub node_cidr_mask_size_ipv6: Option<u8>,
    /// `--service-cluster-ip-range`: one or two CIDRs never handed out.
    pub service_cidrs: Vec<IpNet>,
}

/// The node mask size of each cluster CIDR (upstream `setNodeCIDRMaskSizes`). Errors:
/// `--node-cidr-mask-size` with dual-stack or with the per-family flags, or a family
/// flag for the other family of a single-stack cluster.
pub(crate) fn mask_sizes(cfg: &Config) -> Result<Vec<u8>, Error> {
    let sizes = |v4: u8, v6: u8| {
        cfg.cluster_cidrs
            .iter()
            .map(|c| if matches!(c, IpNet::V6(_)) { v6 } else { v4 })
            .collect::<Vec<_>>()
    };
    let v4 = cfg.node_cidr_mask_size_ipv4;
    let v6 = cfg.node_cidr_mask_size_ipv6;
    if cfg.cluster_cidrs.len() > 1 {
        if cfg.node_cidr_mask_size.is_some() {
            return Err(Error::Config(
                "usage of --node-cidr-mask-size is not allowed with dual-stack clusters".into(),
            ));
        }
        return Ok(sizes(
            v4.unwrap_or(DEFAULT_NODE_MASK_IPV4),
            v6.unwrap_or(DEFAULT_NODE_MASK_IPV6),
        ));
    }
    if let Some(mask) = cfg.node_cidr_mask_size {
        if v4.is_some() || v6.is_some() {
            return Err(Error::Config(
                "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set"
                    .into(),
            ));
        }
        return Ok(sizes(mask, mask));
    }
    let ipv6_only = matches!(cfg.cluster_cidrs.first(), Some(IpNet::V6(_)));
    if v4.is_some() && ipv6_only {
        return Err(Error::Config(
            "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster"
                .into(),
        ));
    }
    if v6.is_some() && !ipv6_only {
        return Err(Error::Config(
            "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster"
                .into(),
        ));
    }
    Ok(sizes(
        v4.unwrap_or(DEFAULT_NODE_MASK_IPV4),
        v6.unwrap_or(DEFAULT_NODE_MASK_IPV6),
    ))
}

/// The node CIDRs of every cluster CIDR, by index as in `spec.podCIDRs`.
#[derive(Debug, Clone)]
pub(crate) struct RangeAllocator {
    sets: Vec<CidrSet>,
}

impl RangeAllocator {
    /// The allocator of `cfg`, with the service ranges taken out (upstream
    /// `NewCIDRRangeAllocator`, `filterOutServiceRange`). Errors: no cluster CIDR, more
    /// than two, two of one family, or bad mask sizes.
    pub(crate) fn new(cfg: &Config) -> Result<Self, Error> {
        match cfg.cluster_cidrs.as_slice() {
            [] => {
                return Err(Error::Config(
                    "--cluster-cidr is required with --allocate-node-cidrs".into(),
                ));
            }
            [_] => {}
            [a, b] if matches!(a, IpNet::V4(_)) != matches!(b, IpNet::V4(_)) => {}
            [_, _] => {
                return Err(Error::Config(
                    "--cluster-cidr: two CIDRs must be one IPv4 and one IPv6 (dual-stack)".into(),
                ));
            }
            more => {
                return Err(Error::Config(format!(
                    "--cluster-cidr: {} CIDRs given, at most 2 are allowed",
                    more.len()
                )));
            }
        }
        let masks = mask_sizes(cfg)?;
        let mut sets = Vec::new();
        for (cidr, mask) in cfg.cluster_cidrs.iter().zip(masks) {
            sets.push(
                CidrSet::new(*cidr, mask)
                    .map_err(|e| Error::Config(format!("--cluster-cidr {cidr}: {e}")))?,
            );
        }
        for service in &cfg.service_cidrs {
            for set in &mut sets {
                // Only the ranges that overlap are filtered; others fail and are ignored.
                let _ = set.occupy(*service);
            }
        }
        Ok(Self { sets })
    }

    /// Parses a node's `spec.podCIDRs`, checking each against its cluster CIDR's index.
    fn node_cidrs(&self, pod_cidrs: &[String]) -> Result<Vec<IpNet>, String> {
        if pod_cidrs.len() > self.sets.len() {
            return Err(format!(
                "the node has {} pod CIDRs but the cluster has {} cluster CIDRs",
                pod_cidrs.len(),
                self.sets.len()
            ));
        }
        pod_cidrs
            .iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .map_err(|e| format!("failed to parse CIDR {c}: {e}"))
            })
            .collect()
    }

    /// Marks a node's CIDRs used (upstream `occupyCIDRs`). Errors: a CIDR that does not
    /// parse or lies outside its cluster CIDR.
    pub(crate) fn occupy(&mut self, pod_cidrs: &[String]) -> Result<(), String> {
        let cidrs = self.node_cidrs(pod_cidrs)?;
        for (set, cidr) in self.sets.iter_mut().zip(cidrs) {
            set.occupy(cidr)?;
        }
        Ok(())
    }

    /// Marks a node's CIDRs free (upstream `ReleaseCIDR`). Errors: as [`Self::occupy`].
    pub(crate) fn release(&mut self, pod_cidrs: &[String]) -> Result<(), String> {
        let cidrs = self.node_cidrs(pod_cidrs)?;
        for (set, cidr) in self.sets.iter_mut().zip(cidrs) {
            set.release(cidr)?;
        }
        Ok(())
    }

    /// The next free CIDR of each cluster CIDR. Errors: one is full (what was taken
    /// from the others is given back).
    pub(crate) fn allocate(&mut self) -> Result<Vec<IpNet>, String> {
        let mut taken = Vec::new();
        for (idx, set) in self.sets.iter_mut().enumerate() {
            match set.allocate_next() {
                Ok(cidr) => taken.push(cidr),
                Err(e) => {
                    for (set, cidr) in self.sets.iter_mut().zip(&taken) {
                        let _ = set.release(*cidr);
                    }
                    return Err(format!(
                        "failed to allocate cidr from cluster cidr at idx:{idx}: {e}"
                    ));
                }
            }
        }
        Ok(taken)
    }

    /// Gives back CIDRs just taken by [`Self::allocate`].
    fn give_back(&mut self, cidrs: &[IpNet]) {
        for (set, cidr) in self.sets.iter_mut().zip(cidrs) {
            if let Err(e) = set.release(*cidr) {
                tracing::error!(cidr = %cidr, cluster = %set.cluster(), error = %e, "error releasing a CIDR");
            }
        }
    }
}

/// A node's `spec.podCIDRs`, or its `spec.podCIDR` alone.
fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.as_ref();
    match spec.and_then(|s| s.pod_cidrs.clone()) {
        Some(list) if !list.is_empty() => list,
        _ => spec
            .and_then(|s| s.pod_cidr.clone())
            .filter(|c| !c.is_empty())
            .into_iter()
            .collect(),
    }
}

/// The node IPAM controller; see the module doc.
pub struct NodeIpamController {
    client: kube::Client,
    nodes: Arc<SharedInformer<Node>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
    allocator: Arc<Mutex<RangeAllocator>>,
}

impl std::fmt::Debug for NodeIpamController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeIpamController").finish_non_exhaustive()
    }
}

impl NodeIpamController {
    /// The controller over the factory's Node informer, or None without
    /// `--allocate-node-cidrs`. Errors: invalid CIDR flags.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        cfg: &Config,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Result<Option<Arc<Self>>, Error> {
        if !cfg.allocate_node_cidrs {
            return Ok(None);
        }
        let allocator = Arc::new(Mutex::new(RangeAllocator::new(cfg)?));
        let queue = Arc::new(WorkQueue::new("cidrallocator_node").with_metrics(queue_metrics));
        let nodes = factory.informer::<Node>();
        let q = Arc::clone(&queue);
        let a = Arc::clone(&allocator);
        nodes.add_event_handler(Box::new(move |d| match d {
            Delta::Added(n) | Delta::Updated(_, n) => {
                q.add(n.metadata.name.clone().unwrap_or_default());
            }
            Delta::Deleted(n) => {
                let cidrs = pod_cidrs(n);
                if !cidrs.is_empty() {
                    let released = a.lock().unwrap_or_else(PoisonError::into_inner).release(&cidrs);
                    match released {
                        Ok(()) => tracing::info!(node = ?n.metadata.name, ?cidrs, "released the node's CIDRs"),
                        Err(e) => tracing::error!(node = ?n.metadata.name, error = %e, "error while processing CIDR release"),
                    }
                }
                q.add(n.metadata.name.clone().unwrap_or_default());
            }
        }));
        Ok(Some(Arc::new(Self {
            client,
            nodes,
            queue,
            recorder,
            allocator,
        })))
    }

    fn allocator(&self) -> std::sync::MutexGuard<'_, RangeAllocator> {
        self.allocator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the informer, marks the CIDRs of existing Nodes used, then syncs until
    /// `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.nodes]).await {
            return;
        }
        for node in self.nodes.store().list() {
            let cidrs = pod_cidrs(&node);
            if cidrs.is_empty() {
                continue;
            }
            if let Err(e) = self.allocator().occupy(&cidrs) {
                tracing::error!(node = ?node.metadata.name, ?cidrs, error = %e, "the node's CIDRs cannot be marked used");
            }
        }
        tracing::info!("starting range CIDR allocator");
        let this = Arc::clone(&self);
        run_workers(
            NAME,
            Arc::clone(&self.queue),
            WORKERS,
            cancel,
            move |name| {
                let this = Arc::clone(&this);
                async move { this.sync(&name).await }
            },
        )
        .await;
    }

    /// Upstream `syncNode`: release for a deleting Node, occupy for one with CIDRs,
    /// allocate for one without.
    async fn sync(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.nodes.store().get(name) else {
            return Ok(());
        };
        let cidrs = pod_cidrs(&node);
        if node.metadata.deletion_timestamp.is_some() {
            return self.allocator().release(&cidrs).map_err(Error::Invalid);
        }
        if !cidrs.is_empty() {
            return self.allocator().occupy(&cidrs).map_err(Error::Invalid);
        }
        let allocated = self.allocator().allocate();
        let allocated = match allocated {
            Ok(a) => a,
            Err(e) => {
                self.recorder.event(
                    &*node,
                    "Warning",
                    "CIDRNotAvailable",
                    &format!("Node {name} status is now: CIDRNotAvailable"),
                );
                return Err(Error::Invalid(e));
            }
        };
        self.update(name, allocated).await
    }

    /// Upstream `updateCIDRsAllocation`: writes the CIDRs unless the Node got some
    /// meanwhile; gives them back when the update fails.
    async fn update(&self, name: &str, allocated: Vec<IpNet>) -> Result<(), Error> {
        let wanted: Vec<String> = allocated.iter().map(ToString::to_string).collect();
        let Some(node) = self.nodes.store().get(name) else {
            self.allocator().give_back(&allocated);
            return Ok(());
        };
        let current = pod_cidrs(&node);
        if current == wanted {
            return Ok(());
        }
        if !current.is_empty() {
            tracing::error!(
                node = name,
                ?current,
                "the node already has a CIDR allocated; releasing the new one"
            );
            self.allocator().give_back(&allocated);
            return Ok(());
        }
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"spec": {"podCIDR": wanted.first(), "podCIDRs": wanted}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(node = name, pod_cidrs = ?wanted, "set node PodCIDR");
                Ok(())
            }
            Err(e) => {
                self.recorder.event(
                    &*node,
                    "Warning",
                    "CIDRAssignmentFailed",
                    &format!("Node {name} status is now: CIDRAssignmentFailed"),
                );
                let timeout = matches!(&e, kube::Error::Api(s) if s.code == 504);
                if !timeout {
                    self.allocator().give_back(&allocated);
                }
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|c| c.parse().unwrap()).collect()
    }

    fn cfg(cluster: &[&str]) -> Config {
        Config {
            allocate_node_cidrs: true,
            cluster_cidrs: nets(cluster),
            ..Config::default()
        }
    }

    fn strings(cidrs: &[IpNet]) -> Vec<String> {
        cidrs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn allocates_distinct_cidrs_and_reuses_released_ones() {
        let mut a = RangeAllocator::new(&Config {
            node_cidr_mask_size: Some(17),
            ..cfg(&["10.244.0.0/16"])
        })
        .unwrap();
        let n1 = a.allocate().unwrap();
        let n2 = a.allocate().unwrap();
        assert_eq!(strings(&n1), ["10.244.0.0/17"]);
        assert_eq!(strings(&n2), ["10.244.128.0/17"]);
        // Full: the error upstream reports.
        let err = a.allocate().unwrap_err();
        assert!(err.contains("no remaining CIDRs"), "{err}");
        // Released (the node was deleted): the next node gets it.
        a.release(&strings(&n1)).unwrap();
        assert_eq!(a.allocate().unwrap(), n1);
    }

    #[test]
    fn existing_nodes_keep_theirs() {
        let mut a = RangeAllocator::new(&cfg(&["10.244.0.0/16"])).unwrap();
        a.occupy(&["10.244.0.0/24".to_owned()]).unwrap();
        a.occupy(&["10.244.1.0/24".to_owned()]).unwrap();
        assert_eq!(strings(&a.allocate().unwrap()), ["10.244.2.0/24"]);
        assert!(a.occupy(&["192.168.0.0/24".to_owned()]).is_err());
        assert!(a.occupy(&["junk".to_owned()]).is_err());
        assert!(
            a.occupy(&["10.244.3.0/24".to_owned(), "fd00::/64".to_owned()])
                .is_err()
        );
    }

    #[test]
    fn service_range_is_excluded() {
        let mut a = RangeAllocator::new(&Config {
            service_cidrs: nets(&["10.0.0.0/24", "10.96.0.0/12"]),
            ..cfg(&["10.0.0.0/22"])
        })
        .unwrap();
        assert_eq!(strings(&a.allocate().unwrap()), ["10.0.1.0/24"]);
    }

    #[test]
    fn dual_stack_gets_one_per_family() {
        let mut a = RangeAllocator::new(&Config {
            node_cidr_mask_size_ipv6: Some(120),
            ..cfg(&["10.244.0.0/23", "fd00:10:244::/112"])
        })
        .unwrap();
        assert_eq!(
            strings(&a.allocate().unwrap()),
            ["10.244.0.0/24", "fd00:10:244::/120"]
        );
        assert_eq!(
            strings(&a.allocate().unwrap()),
            ["10.244.1.0/24", "fd00:10:244::100/120"]
        );
        // IPv4 is full: the IPv6 CIDR taken meanwhile is given back.
        assert!(a.allocate().is_err());
        a.release(&["10.244.0.0/24".to_owned()]).unwrap();
        assert_eq!(
            strings(&a.allocate().unwrap()),
            ["10.244.0.0/24", "fd00:10:244::200/120"]
        );
    }

    #[test]
    fn flags_as_upstream() {
        assert_eq!(mask_sizes(&cfg(&["10.0.0.0/16"])).unwrap(), [24]);
        assert_eq!(mask_sizes(&cfg(&["fd00::/48"])).unwrap(), [64]);
        assert_eq!(
            mask_sizes(&cfg(&["fd00::/48", "10.0.0.0/16"])).unwrap(),
            [64, 24]
        );
        let dual_with_mask = Config {
            node_cidr_mask_size: Some(24),
            ..cfg(&["10.0.0.0/16", "fd00::/48"])
        };
        assert!(mask_sizes(&dual_with_mask).is_err());
        let v6_flag_on_v4 = Config {
            node_cidr_mask_size_ipv6: Some(64),
            ..cfg(&["10.0.0.0/16"])
        };
        assert!(mask_sizes(&v6_flag_on_v4).is_err());
        assert!(RangeAllocator::new(&cfg(&[])).is_err());
        assert!(RangeAllocator::new(&cfg(&["10.0.0.0/16", "10.1.0.0/16"])).is_err());
        assert!(RangeAllocator::new(&cfg(&["10.0.0.0/25"])).is_err());
    }

    #[test]
    fn pod_cidrs_read_both_fields() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}
        }))
        .unwrap();
        assert_eq!(pod_cidrs(&node), ["10.0.0.0/24"]);
        let none: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert!(pod_cidrs(&none).is_empty());
    }
}
