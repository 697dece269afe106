//! The volume binder of the VolumeBinding plugin (upstream
//! `framework/plugins/volumebinding/binder.go`, `component-helpers/storage/volume`):
//! sorts a pod's claims into bound, immediate and delayed ones, finds PVs for the delayed
//! claims on a node (static binding) or decides to provision them (dynamic
//! provisioning), assumes the choice in the [`AssumeCache`]s and, in PreBind, writes it
//! to the API server and waits until the claims are bound.
//!
//! Differences from upstream: in-tree volumes are not translated to CSI (no CSI
//! migration), CSIStorageCapacity is not consulted (a class with a provisioner always
//! has enough space), and the wait for the binding does not check that the pod still
//! exists (the scheduler has no pod lister here).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use skiff_api::core::scheduling_predicates::node_affinity::match_node_selector_terms;
use skiff_api::selector::LabelSelector;

use super::assume_cache::{AssumeCache, object_version};
use crate::framework::status::Status;
use crate::informers::Listers;

/// Set on a PVC by the PV controller once it is bound (upstream `AnnBindCompleted`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a PV bound by a controller rather than pre-bound by a user (upstream
/// `AnnBoundByController`).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a claim to provision (upstream `AnnSelectedNode`).
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The beta storage class annotation, which wins over `storageClassName`.
pub const ANN_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The provisioner of classes that cannot provision (upstream `NotSupportedProvisioner`).
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The `volumeBindingMode` that delays binding until a pod is scheduled.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// Why a node does not fit the pod's volumes (upstream `ConflictReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictReason {
    /// A bound PV's node affinity does not match the node.
    NodeConflict,
    /// No PV can be bound to (nor provisioned for) a delayed claim on the node.
    BindConflict,
    /// Not enough storage capacity on the node (never returned: CSIStorageCapacity is
    /// not consulted).
    NotEnoughSpace,
    /// A bound claim's PV does not exist.
    PvNotExist,
}

impl ConflictReason {
    /// The reason shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeConflict => "node(s) had volume node affinity conflict",
            Self::BindConflict => "node(s) didn't find available persistent volumes to bind",
            Self::NotEnoughSpace => "node(s) did not have enough free storage",
            Self::PvNotExist => {
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
            }
        }
    }
}

/// The storage class of a claim: the beta annotation, else `spec.storageClassName`, else
/// "" (upstream `GetPersistentVolumeClaimClass`).
pub fn pvc_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(c) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
    {
        return c.clone();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// The storage class of a volume, as [`pvc_class`] (upstream `GetPersistentVolumeClass`).
pub fn pv_class(pv: &PersistentVolume) -> String {
    if let Some(c) = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_STORAGE_CLASS))
    {
        return c.clone();
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// Whether the PV's required node affinity matches a node with `labels` (upstream
/// `CheckNodeAffinity`, which matches labels only: `matchFields` never match). A PV
/// without node affinity matches every node.
pub fn check_node_affinity(pv: &PersistentVolume, labels: &BTreeMap<String, String>) -> bool {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    let node = Node {
        metadata: ObjectMeta {
            labels: Some(labels.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    matches!(match_node_selector_terms(&node, required), Ok(true))
}

/// The `namespace/name` key of a claim in the listers.
pub fn pvc_key(pvc: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The claim of a pod volume, `(name, is_ephemeral)`: a `persistentVolumeClaim`'s
/// `claimName`, or `<pod>-<volume>` for a generic ephemeral volume (upstream
/// `ephemeral.VolumeClaimName`); None for other volumes.
pub fn volume_claim_name(pod: &Pod, vol: &Volume) -> Option<(String, bool)> {
    if let Some(pvc) = vol.persistent_volume_claim.as_ref() {
        return Some((pvc.claim_name.clone(), false));
    }
    vol.ephemeral.as_ref().map(|_| {
        (
            format!(
                "{}-{}",
                pod.metadata.name.as_deref().unwrap_or_default(),
                vol.name
            ),
            true,
        )
    })
}

/// Why the claim of a generic ephemeral volume may not be used by `pod`: it is not
/// controlled by the pod (upstream `ephemeral.VolumeIsForPod`); None when it is.
pub fn ephemeral_ownership_error(pod: &Pod, pvc: &PersistentVolumeClaim) -> Option<String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let owned = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid);
    if owned {
        return None;
    }
    Some(format!(
        "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    ))
}

/// The claim's `resources.requests.storage` in bytes (0 when unset).
pub fn storage_request(pvc: &PersistentVolumeClaim) -> i64 {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(skiff_api::quantity::value)
        .unwrap_or(0)
}

fn pv_capacity(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(skiff_api::quantity::value)
        .unwrap_or(0)
}

/// Whether the claim is bound: `spec.volumeName` set and the PV controller's
/// `pv.kubernetes.io/bind-completed` annotation (upstream `isPVCFullyBound`), or, as
/// Skiff's addition, `status.phase: Bound`.
pub fn is_pvc_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    let volume_name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    if volume_name.is_empty() {
        return false;
    }
    let annotated = pvc
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED));
    let phase_bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    annotated || phase_bound
}

/// Whether the PV's `claimRef` names this claim (upstream `IsVolumeBoundToClaim`): same
/// namespace and name, and the same uid when the reference has one.
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref() != pvc.metadata.name.as_deref()
        || r.namespace.as_deref() != pvc.metadata.namespace.as_deref()
    {
        return false;
    }
    match r.uid.as_deref() {
        None | Some("") => true,
        Some(uid) => pvc.metadata.uid.as_deref() == Some(uid),
    }
}

/// Whether the StorageClass binds its claims only once a pod uses them (upstream
/// `IsDelayBindingMode`): false for claims without a class or with an unknown class.
/// Errors when the class has no `volumeBindingMode`.
fn is_delay_binding_mode(pvc: &PersistentVolumeClaim, listers: &Listers) -> Result<bool, Status> {
    let class_name = pvc_class(pvc);
    if class_name.is_empty() {
        return Ok(false);
    }
    let Some(class) = listers.storage_classes.get(&class_name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(Status::error(format!(
            "VolumeBindingMode not set for StorageClass {class_name:?}"
        ))),
        Some(mode) => Ok(mode == WAIT_FOR_FIRST_CONSUMER),
    }
}

/// Whether `labels` match one of the class's `allowedTopologies` terms (upstream
/// `MatchTopologySelectorTerms`): no terms match every node; a term ANDs its
/// expressions, each `key In values`.
fn match_topology(class: &StorageClass, labels: &BTreeMap<String, String>) -> bool {
    let terms = class.allowed_topologies.as_deref().unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|t| {
        let exprs = t.match_label_expressions.as_deref().unwrap_or_default();
        !exprs.is_empty()
            && exprs.iter().all(|e| {
                !e.values.is_empty() && labels.get(&e.key).is_some_and(|v| e.values.contains(v))
            })
    })
}

/// A PV chosen for a claim (upstream `BindingInfo`).
#[derive(Debug, Clone)]
pub struct BindingInfo {
    /// The volume (after Reserve: with its `claimRef` set to the claim).
    pub pv: Arc<PersistentVolume>,
    /// The claim.
    pub pvc: Arc<PersistentVolumeClaim>,
}

/// What the pod's volumes need on one node (upstream `PodVolumes`).
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// Delayed claims matched with an available PV.
    pub static_bindings: Vec<BindingInfo>,
    /// Delayed claims to provision (after Reserve: with the selected-node annotation).
    pub dynamic_provisions: Vec<Arc<PersistentVolumeClaim>>,
    /// The node as Filter saw it (its labels are checked again while waiting for the
    /// binding).
    pub node: Option<Arc<Node>>,
}

/// The pod's claims sorted by state (upstream `PodVolumeClaims`).
#[derive(Debug, Clone, Default)]
pub struct PodVolumeClaims {
    /// Fully bound claims.
    pub bound_claims: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of classes with `WaitForFirstConsumer`.
    pub unbound_claims_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims that the PV controller should have bound already.
    pub unbound_claims_immediate: Vec<Arc<PersistentVolumeClaim>>,
    /// The PVs (latest, assumed included) of each delayed claim's class.
    pub unbound_volumes_delay_binding: HashMap<String, Vec<Arc<PersistentVolume>>>,
}

/// Finds, assumes and binds the volumes of pods (upstream `volumeBinder`).
pub struct VolumeBinder {
    listers: Arc<Listers>,
    client: Option<kube::Client>,
    bind_timeout: Duration,
    /// Assumed PersistentVolumes, by name.
    pub pv_cache: AssumeCache<PersistentVolume>,
    /// Assumed PersistentVolumeClaims, by `namespace/name`.
    pub pvc_cache: AssumeCache<PersistentVolumeClaim>,
}

impl std::fmt::Debug for VolumeBinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeBinder")
            .field("bind_timeout", &self.bind_timeout)
            .field("has_client", &self.client.is_some())
            .finish()
    }
}

fn pv_name(pv: &PersistentVolume) -> String {
    pv.metadata.name.clone().unwrap_or_default()
}

impl VolumeBinder {
    /// A binder over the informer caches; `client` writes the bindings (None: PreBind
    /// fails when there is something to write); `bind_timeout` bounds the wait for the
    /// claims to be bound.
    pub fn new(
        listers: Arc<Listers>,
        client: Option<kube::Client>,
        bind_timeout: Duration,
    ) -> Self {
        Self {
            listers,
            client,
            bind_timeout,
            pv_cache: AssumeCache::new("PersistentVolume"),
            pvc_cache: AssumeCache::new("PersistentVolumeClaim"),
        }
    }

    fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.pv_cache.get(&self.listers.pvs, name)
    }

    fn pvc(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.pvc_cache.get(&self.listers.pvcs, key)
    }

    /// The latest PVs of `class` (upstream `PVAssumeCache.ListPVs`), by name.
    pub fn list_pvs(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        let mut pvs: Vec<_> = self
            .pv_cache
            .list(&self.listers.pvs, pv_name)
            .into_iter()
            .filter(|pv| pv_class(pv) == class)
            .collect();
        pvs.sort_by_key(|pv| pv_name(pv));
        pvs
    }

    /// Sorts the pod's claims (upstream `GetPodVolumeClaims`). Errors (Error status): a
    /// claim missing from the cache, a class without `volumeBindingMode`.
    pub fn get_pod_volume_claims(&self, pod: &Pod) -> Result<PodVolumeClaims, Status> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut claims = PodVolumeClaims::default();
        for vol in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some((name, _)) = volume_claim_name(pod, vol) else {
                continue;
            };
            let key = format!("{ns}/{name}");
            let Some(pvc) = self.pvc(&key) else {
                return Err(Status::error(format!(
                    "error getting PVC {key:?}: persistentvolumeclaim {name:?} not found"
                )));
            };
            if is_pvc_fully_bound(&pvc) {
                claims.bound_claims.push(pvc);
                continue;
            }
            let delay = is_delay_binding_mode(&pvc, &self.listers)?;
            let volume_name_set = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .is_some_and(|v| !v.is_empty());
            if delay && !volume_name_set {
                claims.unbound_claims_delay_binding.push(pvc);
            } else {
                claims.unbound_claims_immediate.push(pvc);
            }
        }
        for pvc in &claims.unbound_claims_delay_binding {
            let class = pvc_class(pvc);
            if let std::collections::hash_map::Entry::Vacant(e) =
                claims.unbound_volumes_delay_binding.entry(class)
            {
                let pvs = self.list_pvs(e.key());
                e.insert(pvs);
            }
        }
        Ok(claims)
    }

    /// Whether the pod's volumes fit `node` and how (upstream `FindPodVolumes`): the
    /// volumes to bind or provision there, and the reasons the node does not fit (in
    /// upstream's order). Errors (Error status): a delayed claim without a class or with
    /// an unknown class to provision from.
    pub fn find_pod_volumes(
        &self,
        claims: &PodVolumeClaims,
        node: &Arc<Node>,
    ) -> Result<(PodVolumes, Vec<ConflictReason>), Status> {
        let mut volumes = PodVolumes {
            node: Some(Arc::clone(node)),
            ..Default::default()
        };
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let mut bound_satisfied = true;
        let mut bound_pvs_found = true;
        let mut unbound_satisfied = true;
        let sufficient_storage = true;

        for pvc in &claims.bound_claims {
            let name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or_default();
            let Some(pv) = self.pv(name) else {
                bound_pvs_found = false;
                break;
            };
            if !check_node_affinity(&pv, labels) {
                bound_satisfied = false;
                break;
            }
        }

        if !claims.unbound_claims_delay_binding.is_empty() {
            let mut to_match = Vec::new();
            let mut to_provision = Vec::new();
            let mut fast_fail = false;
            for pvc in &claims.unbound_claims_delay_binding {
                match pvc
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANN_SELECTED_NODE))
                {
                    Some(selected) if selected != node_name => {
                        fast_fail = true;
                        break;
                    }
                    Some(_) => to_provision.push(Arc::clone(pvc)),
                    None => to_match.push(Arc::clone(pvc)),
                }
            }
            if fast_fail {
                unbound_satisfied = false;
            } else {
                if !to_match.is_empty() {
                    let (found, bindings, unmatched) = find_matching_volumes(
                        to_match,
                        &claims.unbound_volumes_delay_binding,
                        labels,
                    );
                    unbound_satisfied = found;
                    volumes.static_bindings = bindings;
                    to_provision.extend(unmatched);
                }
                if !to_provision.is_empty() {
                    match self.check_volume_provisions(&to_provision, labels)? {
                        Some(provisions) => {
                            unbound_satisfied = true;
                            volumes.dynamic_provisions = provisions;
                        }
                        None => unbound_satisfied = false,
                    }
                }
            }
        }

        let mut reasons = Vec::new();
        if !bound_satisfied {
            reasons.push(ConflictReason::NodeConflict);
        }
        if !unbound_satisfied {
            reasons.push(ConflictReason::BindConflict);
        }
        if !sufficient_storage {
            reasons.push(ConflictReason::NotEnoughSpace);
        }
        if !bound_pvs_found {
            reasons.push(ConflictReason::PvNotExist);
        }
        Ok((volumes, reasons))
    }

    /// The claims to provision on a node with `labels` (upstream `checkVolumeProvisions`);
    /// None when one of them cannot be provisioned there (no provisioner, or the class's
    /// `allowedTopologies` exclude the node). CSIStorageCapacity is not consulted.
    fn check_volume_provisions(
        &self,
        claims: &[Arc<PersistentVolumeClaim>],
        labels: &BTreeMap<String, String>,
    ) -> Result<Option<Vec<Arc<PersistentVolumeClaim>>>, Status> {
        let mut out = Vec::new();
        for pvc in claims {
            let class_name = pvc_class(pvc);
            if class_name.is_empty() {
                return Err(Status::error(format!(
                    "no class for claim {:?}",
                    pvc_key(pvc)
                )));
            }
            let Some(class) = self.listers.storage_classes.get(&class_name) else {
                return Err(Status::error(format!(
                    "failed to find storage class {class_name:?}"
                )));
            };
            if class.provisioner.is_empty() || class.provisioner == NOT_SUPPORTED_PROVISIONER {
                return Ok(None);
            }
            if !match_topology(&class, labels) {
                return Ok(None);
            }
            out.push(Arc::clone(pvc));
        }
        Ok(Some(out))
    }

    /// Whether every claim of the pod is fully bound, assumptions included (upstream
    /// `arePodVolumesBound`).
    fn are_pod_volumes_bound(&self, pod: &Pod) -> bool {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| volume_claim_name(pod, v))
            .all(|(name, _)| {
                self.pvc(&format!("{ns}/{name}"))
                    .is_some_and(|pvc| is_pvc_fully_bound(&pvc))
            })
    }

    /// Assumes the node's choice for the pod (upstream `AssumePodVolumes`): each chosen PV
    /// gets the claim as `claimRef` (and `bound-by-controller`), each claim to provision
    /// the selected-node annotation, in the assume caches; `volumes` is updated to the
    /// assumed objects. True when every claim is already bound (nothing to do in PreBind).
    /// On error, what was assumed is reverted.
    pub fn assume_pod_volumes(
        &self,
        pod: &Pod,
        node_name: &str,
        volumes: &mut PodVolumes,
    ) -> Result<bool, Status> {
        if self.are_pod_volumes_bound(pod) {
            return Ok(true);
        }
        let mut new_bindings: Vec<BindingInfo> = Vec::new();
        for b in &volumes.static_bindings {
            let (new_pv, dirty) = bind_volume_to_claim(&b.pv, &b.pvc);
            if dirty {
                let name = pv_name(&new_pv);
                if let Err(e) = self
                    .pv_cache
                    .assume(&self.listers.pvs, &name, new_pv.clone())
                {
                    self.revert_pvs(&new_bindings);
                    return Err(e);
                }
            }
            new_bindings.push(BindingInfo {
                pv: Arc::new(new_pv),
                pvc: Arc::clone(&b.pvc),
            });
        }
        let mut new_provisions: Vec<Arc<PersistentVolumeClaim>> = Vec::new();
        for pvc in &volumes.dynamic_provisions {
            let mut clone = (**pvc).clone();
            clone
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(ANN_SELECTED_NODE.to_owned(), node_name.to_owned());
            if let Err(e) =
                self.pvc_cache
                    .assume(&self.listers.pvcs, &pvc_key(&clone), clone.clone())
            {
                self.revert_pvs(&new_bindings);
                self.revert_pvcs(&new_provisions);
                return Err(e);
            }
            new_provisions.push(Arc::new(clone));
        }
        volumes.static_bindings = new_bindings;
        volumes.dynamic_provisions = new_provisions;
        Ok(false)
    }

    fn revert_pvs(&self, bindings: &[BindingInfo]) {
        for b in bindings {
            self.pv_cache.restore(&pv_name(&b.pv));
        }
    }

    fn revert_pvcs(&self, claims: &[Arc<PersistentVolumeClaim>]) {
        for c in claims {
            self.pvc_cache.restore(&pvc_key(c));
        }
    }

    /// Drops the assumptions of `volumes` (upstream `RevertAssumedPodVolumes`).
    pub fn revert_assumed_pod_volumes(&self, volumes: &PodVolumes) {
        self.revert_pvs(&volumes.static_bindings);
        self.revert_pvcs(&volumes.dynamic_provisions);
    }

    /// Writes the assumed bindings through the API (each PV's `claimRef`, each claim's
    /// selected node) and waits until the claims are bound (upstream `BindPodVolumes`):
    /// the check runs at once, then whenever the PV or PVC informer changes, and at least
    /// every second, for at most the bind timeout. Errors (Error status): no API client,
    /// an API update failed, the binding was undone (`ClaimRef got reset for pv ...`,
    /// `provisioning failed for PVC ...`), or the timeout passed (`binding volumes:
    /// context deadline exceeded`).
    pub async fn bind_pod_volumes(
        &self,
        node_name: &str,
        volumes: &PodVolumes,
    ) -> Result<(), Status> {
        let mut bindings = volumes.static_bindings.clone();
        let mut provisions = volumes.dynamic_provisions.clone();
        self.bind_api_update(&mut bindings, &mut provisions).await?;
        let labels = volumes
            .node
            .as_ref()
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default();
        self.wait_for_bindings(node_name, &labels, &bindings, &provisions)
            .await
    }

    /// The wait of [`bind_pod_volumes`](Self::bind_pod_volumes) once the API updates
    /// are written (upstream's poll of `checkBindings`), on a node with `labels`.
    pub(crate) async fn wait_for_bindings(
        &self,
        node_name: &str,
        labels: &BTreeMap<String, String>,
        bindings: &[BindingInfo],
        provisions: &[Arc<PersistentVolumeClaim>],
    ) -> Result<(), Status> {
        let wait = async {
            loop {
                let pvcs_changed = self.listers.pvcs.changed().notified();
                let pvs_changed = self.listers.pvs.changed().notified();
                tokio::pin!(pvcs_changed, pvs_changed);
                pvcs_changed.as_mut().enable();
                pvs_changed.as_mut().enable();
                if self.check_bindings(node_name, labels, bindings, provisions)? {
                    return Ok::<(), Status>(());
                }
                tokio::select! {
                    () = &mut pvcs_changed => {}
                    () = &mut pvs_changed => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        };
        match tokio::time::timeout(self.bind_timeout, wait).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(s)) => Err(Status::error(format!("binding volumes: {}", s.message()))),
            Err(_) => Err(Status::error("binding volumes: context deadline exceeded")),
        }
    }

    /// The API updates of [`bind_pod_volumes`](Self::bind_pod_volumes) (upstream
    /// `bindAPIUpdate`); the bindings and claims not written are reverted from the
    /// assume caches on error; the written ones are replaced by the API's answer.
    async fn bind_api_update(
        &self,
        bindings: &mut [BindingInfo],
        provisions: &mut [Arc<PersistentVolumeClaim>],
    ) -> Result<(), Status> {
        if bindings.is_empty() && provisions.is_empty() {
            return Ok(());
        }
        let Some(client) = self.client.clone() else {
            self.revert_pvs(bindings);
            self.revert_pvcs(provisions);
            return Err(Status::error(
                "no API client: cannot bind the pod's volumes",
            ));
        };
        let params = kube::api::PostParams::default();
        let pv_api: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
        for i in 0..bindings.len() {
            let Some(b) = bindings.get(i).cloned() else {
                break;
            };
            match pv_api.replace(&pv_name(&b.pv), &params, &b.pv).await {
                Ok(new_pv) => {
                    if let Some(slot) = bindings.get_mut(i) {
                        slot.pv = Arc::new(new_pv);
                    }
                }
                Err(e) => {
                    self.revert_pvs(bindings.get(i..).unwrap_or_default());
                    self.revert_pvcs(provisions);
                    return Err(Status::error(e));
                }
            }
        }
        for i in 0..provisions.len() {
            let Some(claim) = provisions.get(i).cloned() else {
                break;
            };
            let ns = claim.metadata.namespace.clone().unwrap_or_default();
            let api: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client.clone(), &ns);
            let name = claim.metadata.name.clone().unwrap_or_default();
            match api.replace(&name, &params, &claim).await {
                Ok(new_claim) => {
                    if let Some(slot) = provisions.get_mut(i) {
                        *slot = Arc::new(new_claim);
                    }
                }
                Err(e) => {
                    self.revert_pvcs(provisions.get(i..).unwrap_or_default());
                    return Err(Status::error(e));
                }
            }
        }
        Ok(())
    }

    /// Whether the written bindings are complete (upstream `checkBindings`): Ok(false) to
    /// keep waiting, an error when the binding was undone.
    fn check_bindings(
        &self,
        node_name: &str,
        labels: &BTreeMap<String, String>,
        bindings: &[BindingInfo],
        provisions: &[Arc<PersistentVolumeClaim>],
    ) -> Result<bool, Status> {
        for b in bindings {
            let name = pv_name(&b.pv);
            let Some(pv) = self.pv_cache.get_api(&self.listers.pvs, &name) else {
                return Err(Status::error(format!(
                    "failed to check binding: PersistentVolume {name:?} not found"
                )));
            };
            let key = pvc_key(&b.pvc);
            let Some(pvc) = self.pvc_cache.get_api(&self.listers.pvcs, &key) else {
                return Err(Status::error(format!(
                    "failed to check binding: PersistentVolumeClaim {key:?} not found"
                )));
            };
            if object_version(b.pv.as_ref()) > object_version(pv.as_ref()) {
                return Ok(false);
            }
            if !check_node_affinity(&pv, labels) {
                return Err(Status::error(format!(
                    "pv {name:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
                )));
            }
            let claim_uid = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.uid.as_deref())
                .unwrap_or_default();
            if claim_uid.is_empty() {
                return Err(Status::error(format!("ClaimRef got reset for pv {name:?}")));
            }
            if !is_pvc_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        for claim in provisions {
            let key = pvc_key(claim);
            let Some(pvc) = self.pvc_cache.get_api(&self.listers.pvcs, &key) else {
                return Err(Status::error(format!(
                    "failed to check provisioning pvc: PersistentVolumeClaim {key:?} not found"
                )));
            };
            if object_version(claim.as_ref()) > object_version(pvc.as_ref()) {
                return Ok(false);
            }
            let name = pvc.metadata.name.clone().unwrap_or_default();
            let Some(annotations) = pvc.metadata.annotations.as_ref() else {
                return Err(Status::error(format!(
                    "selectedNode annotation reset for PVC {name:?}"
                )));
            };
            if annotations.get(ANN_SELECTED_NODE).map(String::as_str) != Some(node_name) {
                return Err(Status::error(format!(
                    "provisioning failed for PVC {name:?}"
                )));
            }
            let volume_name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or_default();
            if !volume_name.is_empty() {
                let Some(pv) = self.pv_cache.get_api(&self.listers.pvs, volume_name) else {
                    return Ok(false);
                };
                if !check_node_affinity(&pv, labels) {
                    return Err(Status::error(format!(
                        "pv {volume_name:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
                    )));
                }
            }
            if !is_pvc_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The PV with `claimRef` set to the claim and `bound-by-controller` when it was not
/// pre-bound, and whether anything changed (upstream `GetBindVolumeToClaim`).
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> (PersistentVolume, bool) {
    let mut clone = pv.clone();
    let mut dirty = false;
    let pre_bound = is_volume_bound_to_claim(pv, pvc);
    let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let same = r.is_some_and(|r| {
        r.name == pvc.metadata.name
            && r.namespace == pvc.metadata.namespace
            && r.uid.as_deref().unwrap_or_default()
                == pvc.metadata.uid.as_deref().unwrap_or_default()
    });
    if !same {
        clone.spec.get_or_insert_with(Default::default).claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            name: pvc.metadata.name.clone(),
            namespace: pvc.metadata.namespace.clone(),
            uid: pvc.metadata.uid.clone(),
            resource_version: pvc.metadata.resource_version.clone(),
            field_path: None,
        });
        dirty = true;
    }
    let annotations = clone.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if !pre_bound && !annotations.contains_key(ANN_BOUND_BY_CONTROLLER) {
        annotations.insert(ANN_BOUND_BY_CONTROLLER.to_owned(), "yes".to_owned());
        dirty = true;
    }
    if annotations.is_empty() {
        clone.metadata.annotations = None;
    }
    (clone, dirty)
}

/// Matches delayed claims, smallest request first, with available PVs on a node with
/// `labels` (upstream `findMatchingVolumes`): whether all matched, the bindings, and the
/// claims left without a PV.
fn find_matching_volumes(
    mut claims: Vec<Arc<PersistentVolumeClaim>>,
    pvs_by_class: &HashMap<String, Vec<Arc<PersistentVolume>>>,
    labels: &BTreeMap<String, String>,
) -> (bool, Vec<BindingInfo>, Vec<Arc<PersistentVolumeClaim>>) {
    claims.sort_by_key(|c| storage_request(c));
    let mut chosen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut bindings = Vec::new();
    let mut unmatched = Vec::new();
    let mut found = true;
    for pvc in claims {
        let pvs = pvs_by_class
            .get(&pvc_class(&pvc))
            .map(Vec::as_slice)
            .unwrap_or_default();
        match find_matching_volume(&pvc, pvs, labels, &chosen) {
            Some(pv) => {
                chosen.insert(pv_name(&pv));
                bindings.push(BindingInfo { pv, pvc });
            }
            None => {
                unmatched.push(pvc);
                found = false;
            }
        }
    }
    (found, bindings, unmatched)
}

/// The PV for a claim on a node with `labels` (upstream `FindMatchingVolume` on the
/// scheduler's path, with the VolumeAttributesClass gate off): the PV pre-bound to the
/// claim if there is one (None if its node affinity does not match), else the smallest
/// available PV of the claim's class with enough capacity, the claim's access modes and
/// volume mode, matching the claim's selector and the node, not yet claimed nor in
/// `excluded`.
pub fn find_matching_volume(
    pvc: &PersistentVolumeClaim,
    pvs: &[Arc<PersistentVolume>],
    labels: &BTreeMap<String, String>,
    excluded: &std::collections::HashSet<String>,
) -> Option<Arc<PersistentVolume>> {
    let spec = pvc.spec.clone().unwrap_or_default();
    if spec
        .volume_attributes_class_name
        .as_deref()
        .is_some_and(|v| !v.is_empty())
    {
        return None;
    }
    let requested = storage_request(pvc);
    let class = pvc_class(pvc);
    let selector = match spec.selector.as_ref() {
        Some(s) => Some(LabelSelector::from_meta(s).ok()?),
        None => None,
    };
    let claim_mode = spec
        .volume_mode
        .clone()
        .unwrap_or_else(|| "Filesystem".into());
    let mut smallest: Option<(i64, &Arc<PersistentVolume>)> = None;
    for pv in pvs {
        if excluded.contains(&pv_name(pv)) {
            continue;
        }
        let Some(pv_spec) = pv.spec.as_ref() else {
            continue;
        };
        if pv_spec.claim_ref.is_some() && !is_volume_bound_to_claim(pv, pvc) {
            continue;
        }
        let capacity = pv_capacity(pv);
        if capacity < requested {
            continue;
        }
        if pv_spec.volume_mode.as_deref().unwrap_or("Filesystem") != claim_mode {
            continue;
        }
        if pv_spec
            .volume_attributes_class_name
            .as_deref()
            .is_some_and(|v| !v.is_empty())
        {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = check_node_affinity(pv, labels);
        if is_volume_bound_to_claim(pv, pvc) {
            return affinity_ok.then(|| Arc::clone(pv));
        }
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        let empty = BTreeMap::new();
        if let Some(sel) = selector.as_ref()
            && !sel.matches(pv.metadata.labels.as_ref().unwrap_or(&empty))
        {
            continue;
        }
        if pv_class(pv) != class || !affinity_ok {
            continue;
        }
        let pv_modes = pv_spec.access_modes.as_deref().unwrap_or_default();
        if !spec
            .access_modes
            .iter()
            .flatten()
            .all(|m| pv_modes.contains(m))
        {
            continue;
        }
        if smallest.is_none_or(|(size, _)| size > capacity) {
            smallest = Some((capacity, pv));
        }
    }
    smallest.map(|(_, pv)| Arc::clone(pv))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{TopologySelectorLabelRequirement, TopologySelectorTerm};

    use super::super::testing::{class, pv, pvc};
    use super::*;

    #[test]
    fn class_annotation_wins() {
        let mut c = pvc("ns", "c", "spec-class", "1Gi");
        assert_eq!(pvc_class(&c), "spec-class");
        c.metadata.annotations = Some(BTreeMap::from([(
            ANN_STORAGE_CLASS.to_owned(),
            "beta-class".to_owned(),
        )]));
        assert_eq!(pvc_class(&c), "beta-class");
        assert_eq!(pv_class(&pv("p", "", "1Gi", &[])), "");
    }

    #[test]
    fn bind_volume_to_claim_sets_claim_ref_once() {
        let claim = pvc("ns", "c", "x", "1Gi");
        let (bound_pv, dirty) = bind_volume_to_claim(&pv("p", "x", "1Gi", &[]), &claim);
        assert!(dirty);
        let r = bound_pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(
            (
                r.kind.as_deref(),
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.uid.as_deref()
            ),
            (
                Some("PersistentVolumeClaim"),
                Some("ns"),
                Some("c"),
                Some("uid-c")
            )
        );
        assert_eq!(
            bound_pv.metadata.annotations.as_ref().unwrap()[ANN_BOUND_BY_CONTROLLER],
            "yes"
        );
        assert!(is_volume_bound_to_claim(&bound_pv, &claim));
        let (_, dirty) = bind_volume_to_claim(&bound_pv, &claim);
        assert!(!dirty);
        // Pre-bound by the user (no uid): gets the uid, not bound-by-controller.
        let mut user = pv("p", "x", "1Gi", &[]);
        user.spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
            namespace: Some("ns".into()),
            name: Some("c".into()),
            ..Default::default()
        });
        let (out, dirty) = bind_volume_to_claim(&user, &claim);
        assert!(dirty);
        assert!(out.metadata.annotations.is_none());
    }

    #[test]
    fn allowed_topologies() {
        let mut c = class("c", WAIT_FOR_FIRST_CONSUMER, "p");
        let labels = BTreeMap::from([("zone".to_owned(), "a".to_owned())]);
        assert!(match_topology(&c, &labels));
        let term = |values: &[&str]| TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: "zone".into(),
                values: values.iter().map(|v| (*v).to_owned()).collect(),
            }]),
        };
        c.allowed_topologies = Some(vec![term(&["b"])]);
        assert!(!match_topology(&c, &labels));
        c.allowed_topologies = Some(vec![term(&["b"]), term(&["a", "c"])]);
        assert!(match_topology(&c, &labels));
        c.allowed_topologies = Some(vec![TopologySelectorTerm::default()]);
        assert!(!match_topology(&c, &labels));
    }
}
