//! VolumeRestrictions (upstream `framework/plugins/volumerestrictions`): volumes that
//! cannot be shared.
//!
//! - GCE PD, AWS EBS, RBD and ISCSI volumes conflict with the same disk used by another
//!   pod on the node (unless both mount read-only, where the kind allows it): "node(s) had
//!   no available disk".
//! - A PersistentVolumeClaim with the `ReadWriteOncePod` access mode already used by a
//!   scheduled or assumed pod: "node has pod using PersistentVolumeClaim with the same
//!   name and ReadWriteOncePod access mode". Both are Unschedulable: preemption of the
//!   other pod may help.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterExtensions, PreFilterPlugin, PreFilterResult, QueueingHint,
};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};
use crate::informers::Listers;

/// The plugin's name (upstream `names.VolumeRestrictions`).
pub const NAME: &str = "VolumeRestrictions";
const STATE_KEY: &str = "PreFilterVolumeRestrictions";
/// The reason for a conflicting disk (upstream `ErrReasonDiskConflict`).
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// The reason for a ReadWriteOncePod claim in use (upstream 1.33
/// `ErrReasonReadWriteOncePodConflict`).
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

/// Builds the plugin; takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(VolumeRestrictions {
        listers: Arc::clone(&handle.listers),
    }))
}

/// The VolumeRestrictions plugin.
#[derive(Debug)]
pub struct VolumeRestrictions {
    listers: Arc<Listers>,
}

/// The pod's ReadWriteOncePod claims and how many scheduled pods use them (upstream
/// `preFilterState`).
#[derive(Debug, Clone, Default)]
struct PreFilterState {
    namespace: String,
    read_write_once_pod_pvcs: BTreeSet<String>,
    conflicting_pvc_ref_count: i64,
}

impl PreFilterState {
    /// The references of `pod` to the claims (same namespace, same claim name).
    fn conflicts_of(&self, pod: &Pod) -> i64 {
        if pod.metadata.namespace.as_deref().unwrap_or_default() != self.namespace {
            return 0;
        }
        let n = volumes(pod)
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter(|c| self.read_write_once_pod_pvcs.contains(&c.claim_name))
            .count();
        i64::try_from(n).unwrap_or(i64::MAX)
    }
}

fn volumes(pod: &Pod) -> impl Iterator<Item = &Volume> {
    pod.spec.iter().flat_map(|s| s.volumes.iter().flatten())
}

/// Whether the volume is of a kind this plugin checks (upstream `needsRestrictionsCheck`).
fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

/// Whether `volume` conflicts with a volume of `pod` (upstream `isVolumeConflict`): the
/// same GCE PD name unless both read-only; the same EBS volume id; the same ISCSI IQN
/// unless both read-only; an RBD image with a shared monitor, the same pool and image,
/// unless both read-only.
fn is_volume_conflict(volume: &Volume, pod: &Pod) -> bool {
    volumes(pod).any(|existing| {
        if let (Some(d), Some(e)) = (&volume.gce_persistent_disk, &existing.gce_persistent_disk)
            && d.pd_name == e.pd_name
            && !(d.read_only == Some(true) && e.read_only == Some(true))
        {
            return true;
        }
        if let (Some(d), Some(e)) = (
            &volume.aws_elastic_block_store,
            &existing.aws_elastic_block_store,
        ) && d.volume_id == e.volume_id
        {
            return true;
        }
        if let (Some(d), Some(e)) = (&volume.iscsi, &existing.iscsi)
            && d.iqn == e.iqn
            && !(d.read_only == Some(true) && e.read_only == Some(true))
        {
            return true;
        }
        if let (Some(d), Some(e)) = (&volume.rbd, &existing.rbd) {
            let overlap = d.monitors.iter().any(|m| e.monitors.contains(m));
            if overlap
                && d.pool.as_deref().unwrap_or_default() == e.pool.as_deref().unwrap_or_default()
                && d.image == e.image
                && !(d.read_only == Some(true) && e.read_only == Some(true))
            {
                return true;
            }
        }
        false
    })
}

/// Whether `pod`'s checked volumes are free of conflicts with the pods of `node_pods`
/// (upstream `satisfyVolumeConflicts`).
fn satisfy_volume_conflicts<'a>(
    pod: &Pod,
    node_pods: impl Iterator<Item = &'a Pod> + Clone,
) -> bool {
    volumes(pod)
        .filter(|v| needs_restrictions_check(v))
        .all(|v| node_pods.clone().all(|p| !is_volume_conflict(v, p)))
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    /// Assigned pod deletions (with a hint), node additions, PVC additions (always: the
    /// event carries no claim here).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                is_schedulable_after_pod_deleted,
            ),
            ClusterEventWithHint::always(EventResource::Node, ActionType::ADD),
            ClusterEventWithHint::always(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ])
    }
}

/// Queues `pod` when the deleted pod, in its namespace, had a conflicting disk or one of
/// its claims (upstream `isSchedulableAfterPodDeleted`).
fn is_schedulable_after_pod_deleted(
    pod: &Pod,
    old: EventObject<'_>,
    _new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Pod(deleted) = old else {
        return QueueingHint::Queue;
    };
    if deleted.metadata.namespace != pod.metadata.namespace {
        return QueueingHint::QueueSkip;
    }
    if !satisfy_volume_conflicts(pod, std::iter::once(deleted)) {
        return QueueingHint::Queue;
    }
    let claims: BTreeSet<&str> = volumes(pod)
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    if volumes(deleted)
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .any(|c| claims.contains(c.claim_name.as_str()))
    {
        return QueueingHint::Queue;
    }
    QueueingHint::QueueSkip
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let needs_check = volumes(&pod.pod).any(needs_restrictions_check);
        let ns = pod.pod.metadata.namespace.clone().unwrap_or_default();
        let mut pvcs = BTreeSet::new();
        for claim in volumes(&pod.pod).filter_map(|v| v.persistent_volume_claim.as_ref()) {
            let Some(pvc) = self.listers.pvcs.get(&format!("{ns}/{}", claim.claim_name)) else {
                return (
                    None,
                    Status::unresolvable(format!(
                        "persistentvolumeclaim {:?} not found",
                        claim.claim_name
                    )),
                );
            };
            let rwop = pvc
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteOncePod"));
            if rwop {
                pvcs.insert(claim.claim_name.clone());
            }
        }
        let conflicting = pvcs
            .iter()
            .filter(|c| snapshot.is_pvc_used_by_pods(&format!("{ns}/{c}")))
            .count();
        let s = PreFilterState {
            namespace: ns,
            read_write_once_pod_pvcs: pvcs,
            conflicting_pvc_ref_count: i64::try_from(conflicting).unwrap_or(i64::MAX),
        };
        if !needs_check && s.conflicting_pvc_ref_count == 0 {
            return (None, Status::skip());
        }
        state.write(STATE_KEY, s);
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

fn update_state(state: &mut CycleState, pod: &Pod, multiplier: i64) -> Status {
    match state.read_mut::<PreFilterState>(STATE_KEY) {
        Some(s) => {
            s.conflicting_pvc_ref_count += multiplier * s.conflicts_of(pod);
            Status::success()
        }
        None => Status::error(format!("cannot read {STATE_KEY:?} from cycleState")),
    }
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(
        &self,
        state: &mut CycleState,
        _: &Pod,
        pod_to_add: &PodInfo,
        _: &NodeInfo,
    ) -> Status {
        update_state(state, &pod_to_add.pod, 1)
    }
    fn remove_pod(
        &self,
        state: &mut CycleState,
        _: &Pod,
        pod_to_remove: &PodInfo,
        _: &NodeInfo,
    ) -> Status {
        update_state(state, &pod_to_remove.pod, -1)
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if !satisfy_volume_conflicts(&pod.pod, node_info.pods().iter().map(|p| p.pod.as_ref())) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.read::<PreFilterState>(STATE_KEY) else {
            return Status::error(format!("cannot read {STATE_KEY:?} from cycleState"));
        };
        if s.conflicting_pvc_ref_count > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource, ISCSIVolumeSource, Node,
        PodSpec, RBDVolumeSource,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::framework::plugins::volumebinding::testing::{handle, listers, pod, pvc};
    use crate::framework::status::Code;

    fn vol_pod(name: &str, volumes: Vec<Volume>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(volumes),
                node_name: Some("n1".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn gce(pd: &str, ro: bool) -> Volume {
        Volume {
            name: "v".into(),
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: pd.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ebs(id: &str) -> Volume {
        Volume {
            name: "v".into(),
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn iscsi(iqn: &str, ro: bool) -> Volume {
        Volume {
            name: "v".into(),
            iscsi: Some(ISCSIVolumeSource {
                iqn: iqn.into(),
                target_portal: "127.0.0.1:3260".into(),
                lun: 0,
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rbd(mons: &[&str], pool: &str, image: &str, ro: bool) -> Volume {
        Volume {
            name: "v".into(),
            rbd: Some(RBDVolumeSource {
                monitors: mons.iter().map(|m| (*m).to_owned()).collect(),
                pool: Some(pool.into()),
                image: image.into(),
                read_only: Some(ro),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn node_with(pods: &[Pod]) -> NodeInfo {
        let mut n = NodeInfo::new(Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        for p in pods {
            n.add_pod(Arc::new(PodInfo::new(p.clone())));
        }
        n
    }

    fn run(pl: &VolumeRestrictions, pod: &Pod, node: NodeInfo) -> Status {
        let snapshot = Snapshot::from_node_infos(vec![node.clone()]);
        let mut state = CycleState::new();
        let pi = PodInfo::new(pod.clone());
        let (_, s) = pl.pre_filter(&mut state, &pi, &snapshot);
        if !s.is_success() {
            return s;
        }
        pl.filter(&state, &pi, &node)
    }

    fn plugin() -> VolumeRestrictions {
        let mut rwop = pvc("ns", "rwop", "", "1Gi");
        rwop.spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteOncePod".into()]);
        VolumeRestrictions {
            listers: Arc::clone(
                &handle(listers(
                    vec![rwop, pvc("ns", "rwo", "", "1Gi")],
                    vec![],
                    vec![],
                ))
                .listers,
            ),
        }
    }

    #[test]
    fn disk_conflicts() {
        let pl = plugin();
        let cases: Vec<(&str, Volume, Volume, bool)> = vec![
            ("gce same disk", gce("foo", false), gce("foo", false), true),
            (
                "gce both read-only",
                gce("foo", true),
                gce("foo", true),
                false,
            ),
            (
                "gce one read-only",
                gce("foo", true),
                gce("foo", false),
                true,
            ),
            (
                "gce other disk",
                gce("foo", false),
                gce("bar", false),
                false,
            ),
            ("ebs same id", ebs("foo"), ebs("foo"), true),
            ("ebs other id", ebs("foo"), ebs("bar"), false),
            (
                "iscsi same iqn",
                iscsi("iqn.a", false),
                iscsi("iqn.a", false),
                true,
            ),
            (
                "iscsi both ro",
                iscsi("iqn.a", true),
                iscsi("iqn.a", true),
                false,
            ),
            (
                "iscsi other iqn",
                iscsi("iqn.a", false),
                iscsi("iqn.b", false),
                false,
            ),
            (
                "rbd shared monitor",
                rbd(&["a", "b"], "p", "img", false),
                rbd(&["b", "c"], "p", "img", false),
                true,
            ),
            (
                "rbd no shared monitor",
                rbd(&["a"], "p", "img", false),
                rbd(&["c"], "p", "img", false),
                false,
            ),
            (
                "rbd other image",
                rbd(&["a"], "p", "img", false),
                rbd(&["a"], "p", "img2", false),
                false,
            ),
            (
                "rbd both ro",
                rbd(&["a"], "p", "img", true),
                rbd(&["a"], "p", "img", true),
                false,
            ),
        ];
        for (name, new, existing, conflict) in cases {
            let s = run(
                &pl,
                &vol_pod("new", vec![new]),
                node_with(&[vol_pod("old", vec![existing])]),
            );
            if conflict {
                assert_eq!(s.code(), Code::Unschedulable, "{name}");
                assert_eq!(s.message(), ERR_REASON_DISK_CONFLICT, "{name}");
            } else {
                assert!(s.is_success(), "{name}: {s}");
            }
        }
        // No checked volumes and no claims: Skip.
        let s = run(&pl, &vol_pod("new", vec![]), node_with(&[]));
        assert_eq!(s.code(), Code::Skip);
    }

    #[test]
    fn read_write_once_pod() {
        let pl = plugin();
        let user = |name: &str, claim: &str| {
            let mut p = pod("ns", name, &[claim]);
            p.spec.as_mut().unwrap().node_name = Some("n1".into());
            p
        };
        // Used by a pod: rejected, on every node.
        let s = run(
            &pl,
            &pod("ns", "new", &["rwop"]),
            node_with(&[user("old", "rwop")]),
        );
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(s.message(), ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        // Unused, or ReadWriteOnce: Skip.
        let s = run(&pl, &pod("ns", "new", &["rwop"]), node_with(&[]));
        assert_eq!(s.code(), Code::Skip);
        let s = run(
            &pl,
            &pod("ns", "new", &["rwo"]),
            node_with(&[user("old", "rwo")]),
        );
        assert_eq!(s.code(), Code::Skip);
        // Missing claim.
        let s = run(&pl, &pod("ns", "new", &["nope"]), node_with(&[]));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "persistentvolumeclaim \"nope\" not found");
    }

    #[test]
    fn pre_filter_extensions_track_the_victim() {
        let pl = plugin();
        let mut old = pod("ns", "old", &["rwop"]);
        old.spec.as_mut().unwrap().node_name = Some("n1".into());
        let node = node_with(&[old.clone()]);
        let snapshot = Snapshot::from_node_infos(vec![node.clone()]);
        let new_pod = pod("ns", "new", &["rwop"]);
        let pi = PodInfo::new(new_pod.clone());
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &pi, &snapshot).1.is_success());
        let old_info = PodInfo::new(old.clone());
        let ext = pl.pre_filter_extensions().unwrap();
        assert!(
            ext.remove_pod(&mut state, &new_pod, &old_info, &node)
                .is_success()
        );
        assert!(pl.filter(&state, &pi, &node_with(&[])).is_success());
        assert!(
            ext.add_pod(&mut state, &new_pod, &old_info, &node)
                .is_success()
        );
        assert_eq!(pl.filter(&state, &pi, &node).code(), Code::Unschedulable);
        // A pod of another namespace with a claim of the same name does not count.
        let mut other = pod("other", "x", &["rwop"]);
        other.spec.as_mut().unwrap().node_name = Some("n1".into());
        assert!(
            ext.remove_pod(&mut state, &new_pod, &old_info, &node)
                .is_success()
        );
        assert!(
            ext.add_pod(&mut state, &new_pod, &PodInfo::new(other), &node)
                .is_success()
        );
        assert!(pl.filter(&state, &pi, &node_with(&[])).is_success());
    }

    #[test]
    fn pod_deleted_hint() {
        let target = pod("ns", "t", &["c1"]);
        let cases = [
            (pod("ns", "d", &["c1"]), QueueingHint::Queue),
            (pod("ns", "d", &["c2"]), QueueingHint::QueueSkip),
            (pod("other", "d", &["c1"]), QueueingHint::QueueSkip),
        ];
        for (deleted, want) in cases {
            assert_eq!(
                is_schedulable_after_pod_deleted(
                    &target,
                    EventObject::Pod(&deleted),
                    EventObject::None
                ),
                want
            );
        }
        let t = vol_pod("t", vec![gce("foo", false)]);
        let d = vol_pod("d", vec![gce("foo", false)]);
        assert_eq!(
            is_schedulable_after_pod_deleted(&t, EventObject::Pod(&d), EventObject::None),
            QueueingHint::Queue
        );
    }
}
