//! VolumeBinding (upstream `framework/plugins/volumebinding`): a pod's
//! PersistentVolumeClaims must be bound, or bindable on the node.
//!
//! - PreFilter: the claims must exist and not be lost or being deleted; unbound claims of
//!   classes without `WaitForFirstConsumer` make the pod unschedulable until the PV
//!   controller binds them; Skip for pods without claims.
//! - Filter: bound claims' PVs must match the node's labels; delayed claims need an
//!   available PV there (the smallest that fits) or a class that can provision.
//! - Reserve / Unreserve: the choice is assumed in the binder's assume caches, so that
//!   the next pods do not pick the same PVs.
//! - PreBind: the choice is written (PV `claimRef`, PVC selected-node annotation) and the
//!   claims are waited for until bound, for at most `bindTimeoutSeconds`.
//!
//! No Score: upstream scores only with the StorageCapacityScoring gate, off in 1.33.

pub mod assume_cache;
pub mod binder;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use self::binder::{PodVolumeClaims, PodVolumes, VolumeBinder, volume_claim_name};
use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventResource, FilterPlugin, Plugin, PreBindPlugin,
    PreFilterPlugin, PreFilterResult, ReservePlugin,
};
use crate::framework::plugins::helper::parse_args;
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::{Code, Status};
use crate::framework::types::{NodeInfo, PodInfo};
use crate::informers::Listers;

/// The plugin's name (upstream `names.VolumeBinding`).
pub const NAME: &str = "VolumeBinding";
const STATE_KEY: &str = NAME;
/// The default `bindTimeoutSeconds` (upstream `SetDefaults_VolumeBindingArgs`).
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;
/// The reason of a pod whose immediate claims are not bound yet.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// `VolumeBindingArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for the claims to be bound, in seconds (default 600; 0
    /// fails at once when there is something to wait for).
    pub bind_timeout_seconds: i64,
    /// The score shape of StorageCapacityScoring; must be unset (the gate is off).
    pub shape: Option<serde_json::Value>,
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        Self {
            bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS,
            shape: None,
        }
    }
}

/// Builds the plugin from `VolumeBindingArgs`. Errors ([`Error::Config`]): args that do
/// not decode, a negative `bindTimeoutSeconds`, a `shape`.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    let args: VolumeBindingArgs = parse_args("VolumeBindingArgs", args)?;
    if args.bind_timeout_seconds < 0 {
        return Err(Error::Config(format!(
            "VolumeBindingArgs: bindTimeoutSeconds: Invalid value: {}: invalid BindTimeoutSeconds, should not be a negative value",
            args.bind_timeout_seconds
        )));
    }
    if args.shape.as_ref().is_some_and(|s| !s.is_null()) {
        return Err(Error::Config(
            "VolumeBindingArgs: shape: Invalid value: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring".into(),
        ));
    }
    let timeout = Duration::from_secs(u64::try_from(args.bind_timeout_seconds).unwrap_or(0));
    Ok(Arc::new(VolumeBinding {
        binder: Arc::new(VolumeBinder::new(
            Arc::clone(&handle.listers),
            handle.client.clone(),
            timeout,
        )),
        listers: Arc::clone(&handle.listers),
    }))
}

/// The VolumeBinding plugin (upstream `VolumeBinding`).
#[derive(Debug)]
pub struct VolumeBinding {
    binder: Arc<VolumeBinder>,
    listers: Arc<Listers>,
}

impl VolumeBinding {
    /// The binder, with its assume caches.
    pub fn binder(&self) -> &Arc<VolumeBinder> {
        &self.binder
    }

    /// Whether the pod uses claims, and why it cannot use them (upstream `podHasPVCs`).
    fn pod_has_pvcs(&self, pod: &k8s_openapi::api::core::v1::Pod) -> Result<bool, String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut has = false;
        for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some((name, ephemeral)) = volume_claim_name(pod, vol) else {
                continue;
            };
            has = true;
            let Some(pvc) = self.listers.pvcs.get(&format!("{ns}/{name}")) else {
                return Err(if ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                    )
                } else {
                    format!("persistentvolumeclaim {name:?} not found")
                });
            };
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                let volume = pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.clone())
                    .unwrap_or_default();
                return Err(format!(
                    "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume:?}"
                ));
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
            }
            if ephemeral && let Some(e) = binder::ephemeral_ownership_error(pod, &pvc) {
                return Err(e);
            }
        }
        Ok(has)
    }
}

/// The plugin's cycle state, shared by the copies of the cycle state (upstream's
/// `stateData` is a pointer, cloned as itself).
#[derive(Clone, Default)]
struct StateData(Arc<Mutex<StateInner>>);

#[derive(Default)]
struct StateInner {
    all_bound: bool,
    pod_volumes_by_node: HashMap<String, PodVolumes>,
    claims: Arc<PodVolumeClaims>,
}

impl StateData {
    fn lock(&self) -> std::sync::MutexGuard<'_, StateInner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn read_state(state: &CycleState) -> Result<StateData, Status> {
    state
        .read::<StateData>(STATE_KEY)
        .cloned()
        .ok_or_else(|| Status::error(format!("reading {STATE_KEY:?} from cycleState: not found")))
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn crate::framework::interface::PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn crate::framework::interface::ScorePlugin> {
        Some(self)
    }
    /// As upstream 1.33 with queueing hints on; the hints of PVC, StorageClass, CSINode,
    /// CSIDriver and CSIStorageCapacity events are not applied (the events carry no
    /// object here), so those events always queue.
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        use ActionType as A;
        use EventResource as R;
        Some(vec![
            ClusterEventWithHint::always(R::StorageClass, A::ADD | A::UPDATE),
            ClusterEventWithHint::always(R::PersistentVolumeClaim, A::ADD | A::UPDATE),
            ClusterEventWithHint::always(R::PersistentVolume, A::ADD | A::UPDATE),
            ClusterEventWithHint::always(R::Node, A::ADD | A::UPDATE_NODE_LABEL),
            ClusterEventWithHint::always(R::CsiNode, A::ADD | A::UPDATE),
            ClusterEventWithHint::always(R::CsiDriver, A::UPDATE),
            ClusterEventWithHint::always(R::CsiStorageCapacity, A::ADD | A::UPDATE),
        ])
    }
}

/// Upstream scores volumes only with the StorageCapacityScoring gate (off in 1.33): its
/// PreScore skips, so Score never runs.
impl crate::framework::interface::PreScorePlugin for VolumeBinding {
    fn pre_score(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        Status::skip()
    }
}

impl crate::framework::interface::ScorePlugin for VolumeBinding {
    fn score(&self, _state: &CycleState, _pod: &PodInfo, _node_info: &NodeInfo) -> (i64, Status) {
        (0, Status::success())
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pod_has_pvcs(&pod.pod) {
            Err(msg) => return (None, Status::unresolvable(msg)),
            Ok(false) => {
                state.write(STATE_KEY, StateData::default());
                return (None, Status::skip());
            }
            Ok(true) => {}
        }
        let claims = match self.binder.get_pod_volume_claims(&pod.pod) {
            Ok(c) => c,
            Err(s) => return (None, s),
        };
        if !claims.unbound_claims_immediate.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
        }
        let data = StateData::default();
        data.lock().claims = Arc::new(claims);
        state.write(STATE_KEY, data);
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let claims = Arc::clone(&data.lock().claims);
        let (volumes, reasons) = match self.binder.find_pod_volumes(&claims, node_info.node_arc()) {
            Ok(r) => r,
            Err(s) => return s,
        };
        if !reasons.is_empty() {
            return Status::new(
                Code::UnschedulableAndUnresolvable,
                reasons.iter().map(|r| r.as_str()),
            );
        }
        data.lock()
            .pod_volumes_by_node
            .insert(node_info.name().to_owned(), volumes);
        Status::success()
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let mut inner = data.lock();
        let all_bound = match inner.pod_volumes_by_node.get_mut(node) {
            Some(volumes) => match self.binder.assume_pod_volumes(&pod.pod, node, volumes) {
                Ok(b) => b,
                Err(s) => return s,
            },
            None => true,
        };
        inner.all_bound = all_bound;
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) {
        let Ok(data) = read_state(state) else {
            return;
        };
        let inner = data.lock();
        if let Some(volumes) = inner.pod_volumes_by_node.get(node) {
            self.binder.revert_assumed_pod_volumes(volumes);
        }
    }
}

#[async_trait]
impl PreBindPlugin for VolumeBinding {
    async fn pre_bind(&self, state: &CycleState, _pod: &PodInfo, node: &str) -> Status {
        let volumes = {
            let data = match read_state(state) {
                Ok(d) => d,
                Err(s) => return s,
            };
            let inner = data.lock();
            if inner.all_bound {
                return Status::success();
            }
            match inner.pod_volumes_by_node.get(node) {
                Some(v) => v.clone(),
                None => {
                    return Status::error(format!("no pod volumes found for node {node:?}"));
                }
            }
        };
        match self.binder.bind_pod_volumes(node, &volumes).await {
            Ok(()) => Status::success(),
            Err(s) => s,
        }
    }
}

/// Builders of volume objects for the volume plugins' tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        EphemeralVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, PersistentVolumeStatus, Pod,
        PodSpec, Volume, VolumeNodeAffinity, VolumeResourceRequirements,
    };
    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use crate::framework::runtime::{Handle, LogRecorder, Nominator};
    use crate::framework::types::PodInfo;
    use crate::informers::Listers;

    struct NoNominator;

    impl Nominator for NoNominator {
        fn nominated_pods_for_node(&self, _: &str) -> Vec<Arc<PodInfo>> {
            Vec::new()
        }
        fn add_nominated_pod(&self, _: Arc<PodInfo>, _: &str) {}
        fn delete_nominated_pod(&self, _: &str) {}
    }

    /// A handle without a client over `listers`.
    pub fn handle(listers: Listers) -> Arc<Handle> {
        Arc::new(Handle::new(
            None,
            Arc::new(listers),
            Arc::new(NoNominator),
            Arc::new(LogRecorder),
        ))
    }

    /// A claim `ns/name` of `class` ("" for none) requesting `size`, ReadWriteOnce.
    pub fn pvc(ns: &str, name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: (!class.is_empty()).then(|| class.into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The claim bound to `volume` (volumeName, bind-completed, phase Bound).
    pub fn bound(mut pvc: PersistentVolumeClaim, volume: &str) -> PersistentVolumeClaim {
        pvc.spec.get_or_insert_with(Default::default).volume_name = Some(volume.into());
        pvc.metadata.annotations = Some(BTreeMap::from([(
            super::binder::ANN_BIND_COMPLETED.to_owned(),
            "yes".to_owned(),
        )]));
        pvc.status = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        pvc
    }

    /// An Available volume of `class` with `size`, ReadWriteOnce, limited to nodes with
    /// `kubernetes.io/hostname` in `hosts` (all nodes when empty).
    pub fn pv(name: &str, class: &str, size: &str, hosts: &[&str]) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                capacity: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
                storage_class_name: (!class.is_empty()).then(|| class.into()),
                node_affinity: (!hosts.is_empty()).then(|| VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "kubernetes.io/hostname".into(),
                                operator: "In".into(),
                                values: Some(hosts.iter().map(|h| (*h).to_owned()).collect()),
                            }]),
                            match_fields: None,
                        }],
                    }),
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some("Available".into()),
                ..Default::default()
            }),
        }
    }

    /// A class with `mode` and `provisioner`.
    pub fn class(name: &str, mode: &str, provisioner: &str) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some(mode.into()),
            ..Default::default()
        }
    }

    /// A pod in `ns` using the claims `claims` (volumes `v0`, `v1`, ...).
    pub fn pod(ns: &str, name: &str, claims: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(
                    claims
                        .iter()
                        .enumerate()
                        .map(|(i, c)| Volume {
                            name: format!("v{i}"),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: (*c).into(),
                                read_only: None,
                            }),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The pod with a generic ephemeral volume named `volume` added.
    pub fn with_ephemeral(mut pod: Pod, volume: &str) -> Pod {
        pod.spec
            .get_or_insert_with(Default::default)
            .volumes
            .get_or_insert_with(Vec::new)
            .push(Volume {
                name: volume.into(),
                ephemeral: Some(EphemeralVolumeSource::default()),
                ..Default::default()
            });
        pod
    }

    /// Listers holding the given objects.
    pub fn listers(
        pvcs: Vec<PersistentVolumeClaim>,
        pvs: Vec<PersistentVolume>,
        classes: Vec<StorageClass>,
    ) -> Listers {
        let l = Listers::default();
        for c in pvcs {
            l.pvcs.insert(super::binder::pvc_key(&c), Arc::new(c));
        }
        for v in pvs {
            l.pvs
                .insert(v.metadata.name.clone().unwrap_or_default(), Arc::new(v));
        }
        for c in classes {
            l.storage_classes
                .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Node, PersistentVolume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    use super::binder::{ANN_SELECTED_NODE, BindingInfo, NOT_SUPPORTED_PROVISIONER};
    use super::testing::*;
    use super::*;

    const WFFC: &str = "WaitForFirstConsumer";

    fn node(name: &str) -> NodeInfo {
        NodeInfo::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_owned(),
                    name.to_owned(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn plugin(listers: Listers) -> (Arc<Handle>, VolumeBinding) {
        let h = handle(listers);
        let binder = Arc::new(VolumeBinder::new(
            Arc::clone(&h.listers),
            None,
            Duration::from_secs(600),
        ));
        let pl = VolumeBinding {
            binder,
            listers: Arc::clone(&h.listers),
        };
        (h, pl)
    }

    fn pre_filter(pl: &VolumeBinding, pod: &Pod) -> (CycleState, Status) {
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, &PodInfo::new(pod.clone()), &Snapshot::default());
        (state, s)
    }

    use k8s_openapi::api::core::v1::Pod;

    /// Runs PreFilter and Filter on `nodes`; the Filter status of each.
    fn run(pl: &VolumeBinding, pod: &Pod, nodes: &[&str]) -> (CycleState, Vec<Status>) {
        let (state, s) = pre_filter(pl, pod);
        assert_eq!(s.code(), Code::Success, "{s}");
        let pi = PodInfo::new(pod.clone());
        let statuses = nodes
            .iter()
            .map(|n| pl.filter(&state, &pi, &node(n)))
            .collect();
        (state, statuses)
    }

    fn chosen(state: &CycleState, node: &str) -> Vec<String> {
        let data = read_state(state).unwrap();
        let inner = data.lock();
        inner.pod_volumes_by_node[node]
            .static_bindings
            .iter()
            .map(|b: &BindingInfo| b.pv.metadata.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn args_defaults_and_validation() {
        let h = handle(Listers::default());
        assert!(new(None, &h).is_ok());
        assert_eq!(VolumeBindingArgs::default().bind_timeout_seconds, 600);
        let Err(err) = new(Some(&serde_json::json!({"bindTimeoutSeconds": -1})), &h) else {
            panic!("negative timeout accepted");
        };
        assert_eq!(
            err.to_string(),
            "invalid configuration: VolumeBindingArgs: bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"
        );
        assert!(matches!(
            new(Some(&serde_json::json!({"bindTimeoutSeconds": "x"})), &h),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            new(
                Some(&serde_json::json!({"shape": [{"utilization": 0, "score": 0}]})),
                &h
            ),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn pre_filter_statuses() {
        let mut deleting = pvc("ns", "deleting", "", "1Gi");
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        let mut lost = pvc("ns", "lost", "", "1Gi");
        lost.spec.as_mut().unwrap().volume_name = Some("gone".into());
        lost.status = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
            phase: Some("Lost".into()),
            ..Default::default()
        });
        let mut foreign = pvc("ns", "p-eph", "wffc", "1Gi");
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            controller: Some(true),
            uid: "someone-else".into(),
            ..Default::default()
        }]);
        let listers = listers(
            vec![
                deleting,
                lost,
                pvc("ns", "immediate", "fast", "1Gi"),
                pvc("ns", "noclass", "", "1Gi"),
                foreign,
                bound(pvc("ns", "done", "", "1Gi"), "pv-done"),
            ],
            vec![],
            vec![class("fast", "Immediate", "csi.example.com")],
        );
        let (_, pl) = plugin(listers);
        let u = Code::UnschedulableAndUnresolvable;
        let cases: Vec<(Pod, Code, &str)> = vec![
            (pod("ns", "p", &[]), Code::Skip, ""),
            (
                pod("ns", "p", &["missing"]),
                u,
                "persistentvolumeclaim \"missing\" not found",
            ),
            (
                with_ephemeral(pod("ns", "p", &[]), "scratch"),
                u,
                "waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-scratch\"",
            ),
            (
                with_ephemeral(pod("ns", "p", &[]), "eph"),
                u,
                "PVC ns/p-eph was not created for pod ns/p (pod is not owner)",
            ),
            (
                pod("ns", "p", &["deleting"]),
                u,
                "persistentvolumeclaim \"deleting\" is being deleted",
            ),
            (
                pod("ns", "p", &["lost"]),
                u,
                "persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"gone\"",
            ),
            (
                pod("ns", "p", &["immediate"]),
                u,
                ERR_REASON_UNBOUND_IMMEDIATE,
            ),
            (
                pod("ns", "p", &["noclass"]),
                u,
                ERR_REASON_UNBOUND_IMMEDIATE,
            ),
            (pod("ns", "p", &["done"]), Code::Success, ""),
        ];
        for (pod, code, msg) in cases {
            let (state, s) = pre_filter(&pl, &pod);
            assert_eq!(s.code(), code, "{s}");
            assert_eq!(s.message(), msg);
            if code == Code::Skip {
                // Reserve and PreBind then have nothing to do.
                let mut state = state;
                let pi = PodInfo::new(pod.clone());
                assert!(pl.reserve(&mut state, &pi, "n1").is_success());
                assert!(read_state(&state).unwrap().lock().all_bound);
            }
        }
    }

    #[test]
    fn filter_bound_claims() {
        let listers = listers(
            vec![
                bound(pvc("ns", "local", "", "1Gi"), "pv-local"),
                bound(pvc("ns", "dangling", "", "1Gi"), "pv-missing"),
            ],
            vec![pv("pv-local", "", "1Gi", &["n1"])],
            vec![],
        );
        let (_, pl) = plugin(listers);
        let (_, st) = run(&pl, &pod("ns", "p", &["local"]), &["n1", "n2"]);
        assert!(st[0].is_success());
        assert_eq!(st[1].code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(st[1].message(), "node(s) had volume node affinity conflict");
        let (_, st) = run(&pl, &pod("ns", "p", &["dangling"]), &["n1"]);
        assert_eq!(st[0].code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            st[0].message(),
            "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
        );
    }

    #[test]
    fn filter_static_binding_picks_smallest_fitting() {
        let mut block = pv("pv-block", "wffc", "5Gi", &[]);
        block.spec.as_mut().unwrap().volume_mode = Some("Block".into());
        let mut rwx = pv("pv-rwx-only", "wffc", "5Gi", &[]);
        rwx.spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteMany".into()]);
        let mut released = pv("pv-released", "wffc", "5Gi", &[]);
        released.status.as_mut().unwrap().phase = Some("Released".into());
        let mut claimed = pv("pv-claimed", "wffc", "5Gi", &[]);
        claimed.spec.as_mut().unwrap().claim_ref =
            Some(k8s_openapi::api::core::v1::ObjectReference {
                namespace: Some("ns".into()),
                name: Some("other".into()),
                ..Default::default()
            });
        let listers = listers(
            vec![pvc("ns", "data", "wffc", "4Gi")],
            vec![
                pv("pv-small", "wffc", "1Gi", &[]),
                pv("pv-big", "wffc", "100Gi", &[]),
                pv("pv-mid", "wffc", "10Gi", &[]),
                pv("pv-n2", "wffc", "5Gi", &["n2"]),
                pv("pv-other-class", "other", "5Gi", &[]),
                block,
                rwx,
                released,
                claimed,
            ],
            vec![class("wffc", WFFC, NOT_SUPPORTED_PROVISIONER)],
        );
        let (_, pl) = plugin(listers);
        let (state, st) = run(&pl, &pod("ns", "p", &["data"]), &["n1", "n2"]);
        assert!(st[0].is_success() && st[1].is_success());
        assert_eq!(chosen(&state, "n1"), ["pv-mid"]);
        assert_eq!(chosen(&state, "n2"), ["pv-n2"]);
    }

    #[test]
    fn filter_prebound_and_unbindable_claims() {
        let mut prebound = pv("pv-pre", "wffc", "5Gi", &["n2"]);
        prebound.spec.as_mut().unwrap().claim_ref =
            Some(k8s_openapi::api::core::v1::ObjectReference {
                namespace: Some("ns".into()),
                name: Some("data".into()),
                ..Default::default()
            });
        prebound.status.as_mut().unwrap().phase = Some("Pending".into());
        let listers = listers(
            vec![
                pvc("ns", "data", "wffc", "4Gi"),
                pvc("ns", "big", "wffc", "1Ti"),
            ],
            vec![pv("pv-mid", "wffc", "10Gi", &[]), prebound],
            vec![class("wffc", WFFC, NOT_SUPPORTED_PROVISIONER)],
        );
        let (_, pl) = plugin(listers);
        // The PV pre-bound to the claim wins over the available one, but only on its nodes:
        // elsewhere the claim cannot be bound.
        let (state, st) = run(&pl, &pod("ns", "p", &["data"]), &["n1", "n2"]);
        assert_eq!(st[0].code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            st[0].message(),
            "node(s) didn't find available persistent volumes to bind"
        );
        assert!(st[1].is_success());
        assert_eq!(chosen(&state, "n2"), ["pv-pre"]);
        let (_, st) = run(&pl, &pod("ns", "p", &["big"]), &["n1"]);
        assert_eq!(
            st[0].message(),
            "node(s) didn't find available persistent volumes to bind"
        );
    }

    #[test]
    fn filter_dynamic_provisioning() {
        let mut zonal = class("zonal", WFFC, "csi.example.com");
        zonal.allowed_topologies = Some(vec![k8s_openapi::api::core::v1::TopologySelectorTerm {
            match_label_expressions: Some(vec![
                k8s_openapi::api::core::v1::TopologySelectorLabelRequirement {
                    key: "kubernetes.io/hostname".into(),
                    values: vec!["n1".into()],
                },
            ]),
        }]);
        let mut selected = pvc("ns", "selected", "dyn", "1Gi");
        selected.metadata.annotations = Some(BTreeMap::from([(
            ANN_SELECTED_NODE.to_owned(),
            "n2".to_owned(),
        )]));
        let listers = listers(
            vec![
                pvc("ns", "data", "dyn", "1Gi"),
                pvc("ns", "z", "zonal", "1Gi"),
                selected,
            ],
            vec![],
            vec![class("dyn", WFFC, "csi.example.com"), zonal],
        );
        let (_, pl) = plugin(listers);
        let (state, st) = run(&pl, &pod("ns", "p", &["data"]), &["n1"]);
        assert!(st[0].is_success());
        let data = read_state(&state).unwrap();
        let provisions: Vec<String> = data.lock().pod_volumes_by_node["n1"]
            .dynamic_provisions
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(provisions, ["data"]);
        let (_, st) = run(&pl, &pod("ns", "p", &["z"]), &["n1", "n2"]);
        assert!(st[0].is_success());
        assert_eq!(
            st[1].message(),
            "node(s) didn't find available persistent volumes to bind"
        );
        let (_, st) = run(&pl, &pod("ns", "p", &["selected"]), &["n1", "n2"]);
        assert_eq!(st[0].code(), Code::UnschedulableAndUnresolvable);
        assert!(st[1].is_success());
    }

    fn claim_ref_name(pv: &PersistentVolume) -> Option<String> {
        pv.spec.as_ref()?.claim_ref.as_ref()?.name.clone()
    }

    #[test]
    fn reserve_assumes_and_unreserve_reverts() {
        let listers = listers(
            vec![pvc("ns", "a", "wffc", "1Gi"), pvc("ns", "b", "wffc", "1Gi")],
            vec![
                pv("pv-1", "wffc", "1Gi", &[]),
                pv("pv-2", "wffc", "2Gi", &[]),
            ],
            vec![class("wffc", WFFC, NOT_SUPPORTED_PROVISIONER)],
        );
        let (h, pl) = plugin(listers);
        let pod_a = pod("ns", "pa", &["a"]);
        let (mut state_a, st) = run(&pl, &pod_a, &["n1"]);
        assert!(st[0].is_success());
        assert_eq!(chosen(&state_a, "n1"), ["pv-1"]);
        let pa = PodInfo::new(pod_a.clone());
        assert!(pl.reserve(&mut state_a, &pa, "n1").is_success());
        assert!(!read_state(&state_a).unwrap().lock().all_bound);
        let assumed = pl.binder.pv_cache.get(&h.listers.pvs, "pv-1").unwrap();
        assert_eq!(claim_ref_name(&assumed).as_deref(), Some("a"));
        assert_eq!(
            assumed.metadata.annotations.as_ref().unwrap()["pv.kubernetes.io/bound-by-controller"],
            "yes"
        );
        // The informer still has the unbound PV.
        assert_eq!(claim_ref_name(&h.listers.pvs.get("pv-1").unwrap()), None);

        // The next pod does not get pv-1.
        let pod_b = pod("ns", "pb", &["b"]);
        let (_, st) = run(&pl, &pod_b, &["n1"]);
        assert!(st[0].is_success());
        let (state_b, _) = run(&pl, &pod_b, &["n1"]);
        assert_eq!(chosen(&state_b, "n1"), ["pv-2"]);

        pl.unreserve(&mut state_a, &pa, "n1");
        pl.unreserve(&mut state_a, &pa, "n1");
        assert!(!pl.binder.pv_cache.is_assumed("pv-1"));
        let (state_b, _) = run(&pl, &pod_b, &["n1"]);
        assert_eq!(chosen(&state_b, "n1"), ["pv-1"]);
    }

    #[test]
    fn reserve_assumes_selected_node_for_provisioning() {
        let listers = listers(
            vec![pvc("ns", "data", "dyn", "1Gi")],
            vec![],
            vec![class("dyn", WFFC, "csi.example.com")],
        );
        let (h, pl) = plugin(listers);
        let p = pod("ns", "p", &["data"]);
        let (mut state, _) = run(&pl, &p, &["n1"]);
        assert!(
            pl.reserve(&mut state, &PodInfo::new(p.clone()), "n1")
                .is_success()
        );
        let assumed = pl.binder.pvc_cache.get(&h.listers.pvcs, "ns/data").unwrap();
        assert_eq!(
            assumed.metadata.annotations.as_ref().unwrap()[ANN_SELECTED_NODE],
            "n1"
        );
        // A second pod sharing the claim is now held to n1.
        let (_, st) = run(&pl, &pod("ns", "q", &["data"]), &["n1", "n2"]);
        assert!(st[0].is_success());
        assert_eq!(st[1].code(), Code::UnschedulableAndUnresolvable);
    }

    #[tokio::test]
    async fn pre_bind_without_client_is_an_error_and_reverts() {
        let listers = listers(
            vec![pvc("ns", "a", "wffc", "1Gi")],
            vec![pv("pv-1", "wffc", "1Gi", &[])],
            vec![class("wffc", WFFC, NOT_SUPPORTED_PROVISIONER)],
        );
        let (_, pl) = plugin(listers);
        let p = pod("ns", "pa", &["a"]);
        let pi = PodInfo::new(p.clone());
        let (mut state, _) = run(&pl, &p, &["n1"]);
        assert!(pl.reserve(&mut state, &pi, "n1").is_success());
        assert!(pl.binder.pv_cache.is_assumed("pv-1"));
        let s = pl.pre_bind(&state, &pi, "n1").await;
        assert_eq!(s.code(), Code::Error);
        assert_eq!(s.message(), "no API client: cannot bind the pod's volumes");
        assert!(!pl.binder.pv_cache.is_assumed("pv-1"));
        // A node without a Filter result.
        let s = pl.pre_bind(&state, &pi, "n9").await;
        assert_eq!(s.message(), "no pod volumes found for node \"n9\"");
    }

    #[tokio::test]
    async fn pre_bind_all_bound_is_success_without_client() {
        let listers = listers(
            vec![bound(pvc("ns", "done", "", "1Gi"), "pv-done")],
            vec![pv("pv-done", "", "1Gi", &[])],
            vec![],
        );
        let (_, pl) = plugin(listers);
        let p = pod("ns", "p", &["done"]);
        let pi = PodInfo::new(p.clone());
        let (mut state, st) = run(&pl, &p, &["n1"]);
        assert!(st[0].is_success());
        assert!(pl.reserve(&mut state, &pi, "n1").is_success());
        assert!(pl.pre_bind(&state, &pi, "n1").await.is_success());
    }

    fn written_binding(listers: &Listers) -> BindingInfo {
        // What the API would hold after PreBind's update: pv-1 claimed by ns/a.
        let claim = listers.pvcs.get("ns/a").unwrap();
        let (mut new_pv, _) =
            binder::bind_volume_to_claim(&listers.pvs.get("pv-1").unwrap(), &claim);
        new_pv.metadata.resource_version = Some("2".into());
        listers.pvs.insert("pv-1".into(), Arc::new(new_pv.clone()));
        BindingInfo {
            pv: Arc::new(new_pv),
            pvc: claim,
        }
    }

    #[tokio::test]
    async fn wait_returns_when_the_lister_shows_the_claim_bound() {
        let listers = Arc::new(listers(
            vec![pvc("ns", "a", "wffc", "1Gi")],
            vec![pv("pv-1", "wffc", "1Gi", &[])],
            vec![],
        ));
        let binder = VolumeBinder::new(Arc::clone(&listers), None, Duration::from_secs(30));
        let b = written_binding(&listers);
        let l2 = Arc::clone(&listers);
        let start = std::time::Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut done = bound(pvc("ns", "a", "wffc", "1Gi"), "pv-1");
            done.metadata.resource_version = Some("3".into());
            l2.pvcs.insert("ns/a".into(), Arc::new(done));
        });
        let r = binder
            .wait_for_bindings("n1", &BTreeMap::new(), &[b], &[])
            .await;
        assert!(r.is_ok(), "{r:?}");
        assert!(
            start.elapsed() < Duration::from_millis(900),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn wait_times_out_and_detects_reset_claim_ref() {
        let listers = Arc::new(listers(
            vec![pvc("ns", "a", "wffc", "1Gi")],
            vec![pv("pv-1", "wffc", "1Gi", &[])],
            vec![],
        ));
        let binder = VolumeBinder::new(Arc::clone(&listers), None, Duration::from_millis(50));
        let b = written_binding(&listers);
        let r = binder
            .wait_for_bindings("n1", &BTreeMap::new(), std::slice::from_ref(&b), &[])
            .await;
        assert_eq!(
            r.unwrap_err().message(),
            "binding volumes: context deadline exceeded"
        );
        // The PV controller dropped the claimRef.
        let mut reset = (*b.pv).clone();
        reset.spec.as_mut().unwrap().claim_ref = None;
        reset.metadata.resource_version = Some("3".into());
        listers.pvs.insert("pv-1".into(), Arc::new(reset));
        let r = binder
            .wait_for_bindings("n1", &BTreeMap::new(), &[b], &[])
            .await;
        assert_eq!(
            r.unwrap_err().message(),
            "binding volumes: ClaimRef got reset for pv \"pv-1\""
        );
    }

    #[tokio::test]
    async fn wait_for_provisioning() {
        let mut claim = pvc("ns", "d", "dyn", "1Gi");
        claim.metadata.annotations = Some(BTreeMap::from([(
            ANN_SELECTED_NODE.to_owned(),
            "n1".to_owned(),
        )]));
        let listers = Arc::new(listers(vec![claim.clone()], vec![], vec![]));
        let binder = VolumeBinder::new(Arc::clone(&listers), None, Duration::from_secs(5));
        let mut done = bound(claim.clone(), "pvc-d");
        done.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANN_SELECTED_NODE.into(), "n1".into());
        done.metadata.resource_version = Some("2".into());
        listers.pvcs.insert("ns/d".into(), Arc::new(done));
        listers
            .pvs
            .insert("pvc-d".into(), Arc::new(pv("pvc-d", "dyn", "1Gi", &["n1"])));
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_owned(), "n1".to_owned())]);
        let r = binder
            .wait_for_bindings("n1", &labels, &[], &[Arc::new(claim.clone())])
            .await;
        assert!(r.is_ok(), "{r:?}");
        // The provisioner gave up: the annotation is gone.
        let mut failed = claim.clone();
        failed.metadata.annotations = Some(BTreeMap::new());
        failed.metadata.resource_version = Some("4".into());
        listers.pvcs.insert("ns/d".into(), Arc::new(failed));
        let r = binder
            .wait_for_bindings("n1", &labels, &[], &[Arc::new(claim)])
            .await;
        assert_eq!(
            r.unwrap_err().message(),
            "binding volumes: provisioning failed for PVC \"d\""
        );
    }

    #[test]
    fn events() {
        let (_, pl) = plugin(Listers::default());
        let ev = pl.events_to_register().unwrap();
        let got: Vec<(EventResource, u32)> = ev
            .iter()
            .map(|e| (e.event.resource, e.event.action.0))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    EventResource::StorageClass,
                    (ActionType::ADD | ActionType::UPDATE).0
                ),
                (
                    EventResource::PersistentVolumeClaim,
                    (ActionType::ADD | ActionType::UPDATE).0
                ),
                (
                    EventResource::PersistentVolume,
                    (ActionType::ADD | ActionType::UPDATE).0
                ),
                (
                    EventResource::Node,
                    (ActionType::ADD | ActionType::UPDATE_NODE_LABEL).0
                ),
                (
                    EventResource::CsiNode,
                    (ActionType::ADD | ActionType::UPDATE).0
                ),
                (EventResource::CsiDriver, ActionType::UPDATE.0),
                (
                    EventResource::CsiStorageCapacity,
                    (ActionType::ADD | ActionType::UPDATE).0
                ),
            ]
        );
    }
}
