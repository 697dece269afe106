//! The CSI volume limits (upstream `nodevolumelimits/csi.go`, plugin `NodeVolumeLimits`).
//!
//! The limit of a driver on a node is the CSINode's `spec.drivers[].allocatable.count`
//! (no limit when the CSINode or the count is missing). The volumes counted are the
//! unique `driver/volumeHandle` pairs of the PVs of the claims (and generic ephemeral
//! claims) of the pods on the node plus the new pod; an unbound claim counts as one
//! volume of its StorageClass's provisioner.
//!
//! Differences from upstream: in-tree volumes are not translated to CSI (CSI migration
//! is ignored: only PVs with a `csi` source count), and VolumeAttachment deletions are
//! not registered as events (the framework has no such resource).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use rand::Rng;

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreFilterResult, QueueingHint,
};
use crate::framework::plugins::volumebinding::binder::{
    ephemeral_ownership_error, pvc_class, volume_claim_name,
};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};
use crate::informers::Listers;

/// The plugin's name (upstream `names.NodeVolumeLimits`).
pub const NAME: &str = "NodeVolumeLimits";
/// The reason of a node over a driver's limit (upstream `ErrReasonMaxVolumeCountExceeded`).
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Builds the plugin; takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(CsiLimits::with_listers(Arc::clone(
        &handle.listers,
    ))))
}

/// The NodeVolumeLimits plugin (upstream `CSILimits`).
#[derive(Debug)]
pub struct CsiLimits {
    listers: Arc<Listers>,
    /// Prefixes the placeholder handles of unbound claims, so that they never equal a
    /// real volume handle.
    random_volume_id_prefix: String,
}

/// Why a pod's volumes could not be listed.
enum LookupError {
    /// A claim of the new pod does not exist: the pod cannot run until it does.
    NotFound(String),
    /// Anything else.
    Other(String),
}

impl CsiLimits {
    /// The plugin over `listers`.
    pub fn with_listers(listers: Arc<Listers>) -> Self {
        let prefix: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(32)
            .map(char::from)
            .collect();
        Self {
            listers,
            random_volume_id_prefix: prefix,
        }
    }

    /// Adds the `driver/handle -> driver` of the pod's CSI volumes to `result` (upstream
    /// `filterAttachableVolumes`). Claims that do not exist fail for the new pod and are
    /// skipped for the pods already on the node.
    fn filter_attachable_volumes(
        &self,
        pod: &Pod,
        new_pod: bool,
        result: &mut HashMap<String, String>,
    ) -> Result<(), LookupError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some((name, ephemeral)) = volume_claim_name(pod, vol) else {
                continue;
            };
            if name.is_empty() {
                return Err(LookupError::Other(
                    "PersistentVolumeClaim had no name".into(),
                ));
            }
            let Some(pvc) = self.listers.pvcs.get(&format!("{ns}/{name}")) else {
                if new_pod {
                    return Err(LookupError::NotFound(format!(
                        "looking up PVC {ns}/{name}: persistentvolumeclaim {name:?} not found"
                    )));
                }
                continue;
            };
            if ephemeral && let Some(e) = ephemeral_ownership_error(pod, &pvc) {
                return Err(LookupError::Other(e));
            }
            let Some((driver, handle)) = self.csi_driver_info(&pvc) else {
                continue;
            };
            result.insert(format!("{driver}/{handle}"), driver);
        }
        Ok(())
    }

    /// The driver and volume handle of a claim (upstream `getCSIDriverInfo`): its PV's
    /// `csi` source; for an unbound claim (or a missing PV), its class's provisioner and a
    /// placeholder handle.
    fn csi_driver_info(&self, pvc: &PersistentVolumeClaim) -> Option<(String, String)> {
        let pv_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default();
        if pv_name.is_empty() {
            return self.csi_driver_info_from_class(pvc);
        }
        let Some(pv) = self.listers.pvs.get(pv_name) else {
            return self.csi_driver_info_from_class(pvc);
        };
        let csi = pv.spec.as_ref()?.csi.as_ref()?;
        if csi.driver.is_empty() || csi.volume_handle.is_empty() {
            return None;
        }
        Some((csi.driver.clone(), csi.volume_handle.clone()))
    }

    /// Upstream `getCSIDriverInfoFromSC`.
    fn csi_driver_info_from_class(&self, pvc: &PersistentVolumeClaim) -> Option<(String, String)> {
        let class_name = pvc_class(pvc);
        if class_name.is_empty() {
            return None;
        }
        let class = self.listers.storage_classes.get(&class_name)?;
        if class.provisioner.is_empty() {
            return None;
        }
        let handle = format!(
            "{}-{}/{}",
            self.random_volume_id_prefix,
            pvc.metadata.namespace.as_deref().unwrap_or_default(),
            pvc.metadata.name.as_deref().unwrap_or_default()
        );
        Some((class.provisioner.clone(), handle))
    }
}

fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
}

/// Queues the pod when a deleted pod that was on (or nominated to) a node used claims
/// (upstream `isSchedulableAfterPodDeleted`).
fn is_schedulable_after_pod_deleted(
    _pod: &Pod,
    old: EventObject<'_>,
    _new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Pod(deleted) = old else {
        return QueueingHint::Queue;
    };
    let node = deleted
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    let nominated = deleted
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or_default();
    if node.is_empty() && nominated.is_empty() {
        return QueueingHint::QueueSkip;
    }
    if uses_claims(deleted) {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

impl Plugin for CsiLimits {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    /// CSINode additions, pod deletions (with a hint), PVC additions (always: the event
    /// carries no claim here).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::always(EventResource::CsiNode, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                is_schedulable_after_pod_deleted,
            ),
            ClusterEventWithHint::always(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ])
    }
}

impl PreFilterPlugin for CsiLimits {
    /// Skip for pods without claims.
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if uses_claims(&pod.pod) {
            (None, Status::success())
        } else {
            (None, Status::skip())
        }
    }
}

impl FilterPlugin for CsiLimits {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_none_or(Vec::is_empty)
        {
            return Status::success();
        }
        let csi_node = self.listers.csi_nodes.get(node_info.name());
        let mut new_volumes = HashMap::new();
        match self.filter_attachable_volumes(&pod.pod, true, &mut new_volumes) {
            Ok(()) => {}
            Err(LookupError::NotFound(msg)) => return Status::unresolvable(msg),
            Err(LookupError::Other(msg)) => return Status::error(msg),
        }
        if new_volumes.is_empty() {
            return Status::success();
        }
        let limits: HashMap<&str, i64> = csi_node
            .as_ref()
            .map(|c| {
                c.spec
                    .drivers
                    .iter()
                    .filter_map(|d| {
                        let count = d.allocatable.as_ref()?.count?;
                        Some((d.name.as_str(), i64::from(count)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = HashMap::new();
        for existing in node_info.pods() {
            if let Err(LookupError::NotFound(msg) | LookupError::Other(msg)) =
                self.filter_attachable_volumes(&existing.pod, false, &mut attached)
            {
                return Status::error(msg);
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for (unique, driver) in &attached {
            new_volumes.remove(unique);
            *attached_count.entry(driver.as_str()).or_default() += 1;
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for driver in new_volumes.values() {
            *new_count.entry(driver.as_str()).or_default() += 1;
        }
        for (driver, count) in new_count {
            if let Some(limit) = limits.get(driver)
                && attached_count.get(driver).copied().unwrap_or(0) + count > *limit
            {
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, Node, PersistentVolume};
    use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::framework::plugins::volumebinding::testing::{bound, class, listers, pod, pv, pvc};
    use crate::framework::status::Code;

    fn csi_pv(name: &str, driver: &str, handle: &str) -> PersistentVolume {
        let mut p = pv(name, "", "1Gi", &[]);
        p.spec.as_mut().unwrap().csi = Some(CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: handle.into(),
            ..Default::default()
        });
        p
    }

    fn csi_node(name: &str, limits: &[(&str, Option<i32>)]) -> CSINode {
        CSINode {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: CSINodeSpec {
                drivers: limits
                    .iter()
                    .map(|(d, c)| CSINodeDriver {
                        name: (*d).into(),
                        node_id: name.into(),
                        allocatable: c.map(|count| VolumeNodeResources { count: Some(count) }),
                        topology_keys: None,
                    })
                    .collect(),
            },
            status: Default::default(),
        }
    }

    fn plugin() -> CsiLimits {
        let l = listers(
            vec![
                bound(pvc("ns", "a1", "", "1Gi"), "pv-a1"),
                bound(pvc("ns", "a2", "", "1Gi"), "pv-a2"),
                bound(pvc("ns", "a3", "", "1Gi"), "pv-a3"),
                bound(pvc("ns", "a1-again", "", "1Gi"), "pv-a1-copy"),
                bound(pvc("ns", "b1", "", "1Gi"), "pv-b1"),
                bound(pvc("ns", "plain", "", "1Gi"), "pv-plain"),
                pvc("ns", "unbound-a", "class-a", "1Gi"),
            ],
            vec![
                csi_pv("pv-a1", "a.csi", "h1"),
                csi_pv("pv-a2", "a.csi", "h2"),
                csi_pv("pv-a3", "a.csi", "h3"),
                csi_pv("pv-a1-copy", "a.csi", "h1"),
                csi_pv("pv-b1", "b.csi", "h1"),
                pv("pv-plain", "", "1Gi", &[]),
            ],
            vec![class("class-a", "WaitForFirstConsumer", "a.csi")],
        );
        l.csi_nodes.insert(
            "n1".into(),
            Arc::new(csi_node("n1", &[("a.csi", Some(2)), ("b.csi", None)])),
        );
        CsiLimits::with_listers(Arc::new(l))
    }

    fn node(name: &str, pods: &[Pod]) -> NodeInfo {
        let mut n = NodeInfo::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        });
        for p in pods {
            n.add_pod(Arc::new(PodInfo::new(p.clone())));
        }
        n
    }

    fn run(pl: &CsiLimits, claims: &[&str], node_info: &NodeInfo) -> Status {
        let mut state = CycleState::new();
        let pi = PodInfo::new(pod("ns", "new", claims));
        let (_, s) = pl.pre_filter(&mut state, &pi, &Snapshot::default());
        if !s.is_success() {
            return s;
        }
        pl.filter(&state, &pi, node_info)
    }

    #[test]
    fn limits_table() {
        let pl = plugin();
        let full = node(
            "n1",
            &[pod("ns", "old1", &["a1"]), pod("ns", "old2", &["a2"])],
        );
        let half = node("n1", &[pod("ns", "old1", &["a1"])]);
        let unlimited = node(
            "n2",
            &[pod("ns", "old1", &["a1"]), pod("ns", "old2", &["a2"])],
        );
        let u = Code::Unschedulable;
        let cases: Vec<(&[&str], &NodeInfo, Code)> = vec![
            (&["a3"], &full, u),
            (&["a3"], &half, Code::Success),
            (&["a3", "a1"], &half, Code::Success),
            (&["a3", "a2"], &half, u),
            // The same handle on another PV is the same volume.
            (&["a1-again"], &full, Code::Success),
            (&["a1"], &full, Code::Success),
            // An unbound claim counts as one more volume of its provisioner.
            (&["unbound-a"], &full, u),
            (&["unbound-a"], &half, Code::Success),
            (&["unbound-a", "a3"], &half, u),
            // Drivers without a count, non-CSI PVs and nodes without CSINode: no limit.
            (&["b1"], &full, Code::Success),
            (&["plain"], &full, Code::Success),
            (&["a3"], &unlimited, Code::Success),
        ];
        for (claims, n, code) in cases {
            let s = run(&pl, claims, n);
            assert_eq!(s.code(), code, "{claims:?}: {s}");
            if code == u {
                assert_eq!(s.message(), ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
    }

    #[test]
    fn pre_filter_and_missing_claims() {
        let pl = plugin();
        let s = run(&pl, &[], &node("n1", &[]));
        assert_eq!(s.code(), Code::Skip);
        let s = run(&pl, &["nope"], &node("n1", &[]));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "looking up PVC ns/nope: persistentvolumeclaim \"nope\" not found"
        );
        // Missing claims of pods already on the node are not counted.
        let n = node("n1", &[pod("ns", "old", &["gone", "a1"])]);
        assert!(run(&pl, &["a3"], &n).is_success());
    }

    #[test]
    fn pod_deleted_hint() {
        let target = pod("ns", "t", &["a1"]);
        let mut on_node = pod("ns", "d", &["a1"]);
        on_node.spec.as_mut().unwrap().node_name = Some("n1".into());
        let pending = pod("ns", "d", &["a1"]);
        let mut no_claims = pod("ns", "d", &[]);
        no_claims.spec.as_mut().unwrap().node_name = Some("n1".into());
        let hint = |d: &Pod| {
            is_schedulable_after_pod_deleted(&target, EventObject::Pod(d), EventObject::None)
        };
        assert_eq!(hint(&on_node), QueueingHint::Queue);
        assert_eq!(hint(&pending), QueueingHint::QueueSkip);
        assert_eq!(hint(&no_claims), QueueingHint::QueueSkip);
    }
}
