//! VolumeZone (upstream `framework/plugins/volumezone`): the zone and region labels of the
//! PVs of a pod's bound claims must match the node's.
//!
//! A PV label value may list several zones separated by `__`. A node without any
//! zone or region label fits (single-zone clusters); a beta label on the PV is also
//! matched against the node's GA label.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventResource, FilterPlugin, Plugin, PreFilterPlugin,
    PreFilterResult,
};
use crate::framework::plugins::volumebinding::binder::{WAIT_FOR_FIRST_CONSUMER, pvc_class};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};
use crate::informers::Listers;

/// The plugin's name (upstream `names.VolumeZone`).
pub const NAME: &str = "VolumeZone";
const STATE_KEY: &str = "PreFilterVolumeZone";
/// The reason for a zone conflict (upstream `ErrReasonConflict`).
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
/// The topology labels compared, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// Builds the plugin; takes no args.
pub fn new(
    _args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(VolumeZone {
        listers: Arc::clone(&handle.listers),
    }))
}

/// The VolumeZone plugin.
#[derive(Debug)]
pub struct VolumeZone {
    listers: Arc<Listers>,
}

/// One topology label of a PV and its values (upstream `pvTopology`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

/// The zones of a label value: split on `__` and `,`, trimmed (upstream
/// `LabelZonesToSet`); None when a zone is empty.
fn label_zones(value: &str) -> Option<BTreeSet<String>> {
    value
        .replace("__", ",")
        .split(',')
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_owned())
        })
        .collect()
}

fn pv_topologies(pv: &PersistentVolume) -> Vec<PvTopology> {
    let Some(labels) = pv.metadata.labels.as_ref() else {
        return Vec::new();
    };
    TOPOLOGY_LABELS
        .iter()
        .filter_map(|key| {
            let values = label_zones(labels.get(*key)?)?;
            Some(PvTopology { key, values })
        })
        .collect()
}

fn ga_label(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

impl VolumeZone {
    /// The topologies of the PVs of the pod's bound claims (upstream `getPVbyPod`); an
    /// UnschedulableAndUnresolvable status for a missing claim, class or PV and for an
    /// unbound claim that is not `WaitForFirstConsumer`.
    fn pv_topologies_of(&self, pod: &Pod) -> Result<Vec<PvTopology>, Status> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut out = Vec::new();
        let claims = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref());
        for claim in claims {
            let name = &claim.claim_name;
            if name.is_empty() {
                return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
            }
            let Some(pvc) = self.listers.pvcs.get(&format!("{ns}/{name}")) else {
                return Err(Status::unresolvable(format!(
                    "persistentvolumeclaim {name:?} not found"
                )));
            };
            let pv_name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .unwrap_or_default();
            if pv_name.is_empty() {
                let class_name = pvc_class(&pvc);
                if class_name.is_empty() {
                    return Err(Status::unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name",
                    ));
                }
                let Some(class) = self.listers.storage_classes.get(&class_name) else {
                    return Err(Status::unresolvable(format!(
                        "storageclass.storage.k8s.io {class_name:?} not found"
                    )));
                };
                match class.volume_binding_mode.as_deref() {
                    None => {
                        return Err(Status::unresolvable(format!(
                            "VolumeBindingMode not set for StorageClass {class_name:?}"
                        )));
                    }
                    Some(WAIT_FOR_FIRST_CONSUMER) => continue,
                    Some(_) => return Err(Status::unresolvable("PersistentVolume had no name")),
                }
            }
            let Some(pv) = self.listers.pvs.get(&pv_name) else {
                return Err(Status::unresolvable(format!(
                    "persistentvolume {pv_name:?} not found"
                )));
            };
            out.extend(pv_topologies(&pv));
        }
        Ok(out)
    }
}

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    /// As upstream 1.33 with queueing hints on; the StorageClass, PVC and PV hints are
    /// not applied (the events carry no object here).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        use ActionType as A;
        use EventResource as R;
        Some(vec![
            ClusterEventWithHint::always(R::StorageClass, A::ADD),
            ClusterEventWithHint::always(R::Node, A::ADD | A::UPDATE_NODE_LABEL),
            ClusterEventWithHint::always(R::PersistentVolumeClaim, A::ADD | A::UPDATE),
            ClusterEventWithHint::always(R::PersistentVolume, A::ADD | A::UPDATE),
        ])
    }
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pv_topologies_of(&pod.pod) {
            Err(s) => (None, s),
            Ok(t) if t.is_empty() => (None, Status::skip()),
            Ok(t) => {
                state.write(STATE_KEY, t);
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_none_or(Vec::is_empty)
        {
            return Status::success();
        }
        let computed;
        let topologies = match state.read::<Vec<PvTopology>>(STATE_KEY) {
            Some(t) => t,
            None => match self.pv_topologies_of(&pod.pod) {
                Ok(t) => {
                    computed = t;
                    &computed
                }
                Err(s) => return s,
            },
        };
        let Some(labels) = node_info.node().metadata.labels.as_ref() else {
            return Status::success();
        };
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Status::success();
        }
        for t in topologies {
            let value = labels.get(t.key).or_else(|| labels.get(ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::framework::plugins::volumebinding::testing::{
        bound, class, handle, listers, pod, pv, pvc,
    };
    use crate::framework::status::Code;

    fn labeled_pv(name: &str, labels: &[(&str, &str)]) -> PersistentVolume {
        let mut p = pv(name, "", "1Gi", &[]);
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    fn node(labels: &[(&str, &str)]) -> NodeInfo {
        NodeInfo::new(Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn plugin() -> VolumeZone {
        let l = listers(
            vec![
                bound(pvc("ns", "c-zone", "", "1Gi"), "pv-zone"),
                bound(pvc("ns", "c-beta", "", "1Gi"), "pv-beta"),
                bound(pvc("ns", "c-multi", "", "1Gi"), "pv-multi"),
                bound(pvc("ns", "c-region", "", "1Gi"), "pv-region"),
                bound(pvc("ns", "c-plain", "", "1Gi"), "pv-plain"),
                bound(pvc("ns", "c-dangling", "", "1Gi"), "pv-missing"),
                pvc("ns", "c-wffc", "wffc", "1Gi"),
                pvc("ns", "c-immediate", "fast", "1Gi"),
                pvc("ns", "c-noclass", "", "1Gi"),
                pvc("ns", "c-unknownclass", "gone", "1Gi"),
            ],
            vec![
                labeled_pv("pv-zone", &[(ZONE, "z1")]),
                labeled_pv("pv-beta", &[(BETA_ZONE, "z1")]),
                labeled_pv("pv-multi", &[(ZONE, "z1__z2")]),
                labeled_pv("pv-region", &[(REGION, "r1")]),
                labeled_pv("pv-plain", &[]),
            ],
            vec![
                class("wffc", "WaitForFirstConsumer", "csi.example.com"),
                class("fast", "Immediate", "csi.example.com"),
            ],
        );
        VolumeZone {
            listers: Arc::clone(&handle(l).listers),
        }
    }

    fn run(pl: &VolumeZone, claims: &[&str], node_labels: &[(&str, &str)]) -> Status {
        let mut state = CycleState::new();
        let pi = PodInfo::new(pod("ns", "p", claims));
        let (_, s) = pl.pre_filter(&mut state, &pi, &Snapshot::default());
        if !s.is_success() {
            return s;
        }
        pl.filter(&state, &pi, &node(node_labels))
    }

    #[test]
    fn zone_table() {
        let pl = plugin();
        let ok = Code::Success;
        let no = Code::UnschedulableAndUnresolvable;
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], Code);
        let cases: Vec<Case<'_>> = vec![
            (&["c-zone"], &[(ZONE, "z1")], ok),
            (&["c-zone"], &[(ZONE, "z2")], no),
            (&["c-zone"], &[(REGION, "r1")], no),
            (&["c-zone"], &[("other", "x")], ok),
            (&["c-zone"], &[], ok),
            (&["c-beta"], &[(ZONE, "z1")], ok),
            (&["c-beta"], &[(BETA_ZONE, "z2"), (ZONE, "z1")], no),
            (&["c-multi"], &[(ZONE, "z2")], ok),
            (&["c-multi"], &[(ZONE, "z3")], no),
            (&["c-region"], &[(REGION, "r1"), (ZONE, "z9")], ok),
            (&["c-zone", "c-region"], &[(REGION, "r1"), (ZONE, "z9")], no),
            (&["c-zone", "c-region"], &[(REGION, "r1"), (ZONE, "z1")], ok),
        ];
        for (claims, labels, code) in cases {
            let s = run(&pl, claims, labels);
            assert_eq!(s.code(), code, "{claims:?} on {labels:?}: {s}");
            if code == no {
                assert_eq!(s.message(), ERR_REASON_CONFLICT);
            }
        }
    }

    #[test]
    fn pre_filter_statuses() {
        let pl = plugin();
        let no = Code::UnschedulableAndUnresolvable;
        let cases: Vec<(&str, Code, &str)> = vec![
            ("c-plain", Code::Skip, ""),
            ("c-wffc", Code::Skip, ""),
            ("c-immediate", no, "PersistentVolume had no name"),
            (
                "c-noclass",
                no,
                "PersistentVolumeClaim had no pv name and storageClass name",
            ),
            (
                "c-unknownclass",
                no,
                "storageclass.storage.k8s.io \"gone\" not found",
            ),
            (
                "c-dangling",
                no,
                "persistentvolume \"pv-missing\" not found",
            ),
            ("c-nope", no, "persistentvolumeclaim \"c-nope\" not found"),
        ];
        for (claim, code, msg) in cases {
            let s = run(&pl, &[claim], &[(ZONE, "z1")]);
            assert_eq!(s.code(), code, "{claim}: {s}");
            assert_eq!(s.message(), msg, "{claim}");
        }
    }

    #[test]
    fn zones_parse() {
        assert_eq!(
            label_zones("a__b , c"),
            Some(BTreeSet::from([
                "a".to_owned(),
                "b".to_owned(),
                "c".to_owned()
            ]))
        );
        assert_eq!(label_zones("a____b"), None);
    }
}
