//! The StatefulSet controller's pure helpers (upstream
//! `pkg/controller/statefulset/stateful_set_utils.go`): ordinals and pod names, the
//! identity and storage a pod must have, the claims made from `volumeClaimTemplates`
//! and the owner references the retention policy puts on them, the pods' revisions,
//! and the health tests the ordered policy waits on.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use skiff_api::core::pod::conditions::{is_pod_available, is_pod_ready, pod_phase};
use skiff_api::validation::scaled_value;

use crate::controller_utils::{controller_ref, pod_from_template};

/// The label naming a pod after itself, for per-pod Services (upstream
/// `StatefulSetPodNameLabel`).
pub(crate) const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a pod's ordinal (upstream `PodIndexLabel`, on since 1.32).
pub(crate) const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The label holding the name of a pod's ControllerRevision (upstream
/// `StatefulSetRevisionLabel`).
pub(crate) const REVISION_LABEL: &str = "controller-revision-hash";
/// The label holding a ControllerRevision's hash (upstream
/// `history.ControllerRevisionHashLabel`).
pub(crate) const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The API version and kind of the owner references to a StatefulSet.
pub(crate) const SET_API_VERSION: &str = "apps/v1";
/// See [`SET_API_VERSION`].
pub(crate) const SET_KIND: &str = "StatefulSet";

/// The claims of a namespace from the cache, by name.
pub(crate) type Claims = BTreeMap<String, Arc<PersistentVolumeClaim>>;

/// The parent name and ordinal a pod name spells, `<parent>-<ordinal>` (upstream
/// `getParentNameAndOrdinal`): no parent without a `-<digits>` suffix; ordinal -1
/// without a suffix or when it does not fit 32 bits.
pub(crate) fn parent_and_ordinal(name: &str) -> (Option<&str>, i32) {
    let Some((parent, digits)) = name.rsplit_once('-') else {
        return (None, -1);
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return (None, -1);
    }
    (Some(parent), digits.parse().unwrap_or(-1))
}

/// The pod's ordinal, -1 when its name has none (upstream `getOrdinal`).
pub(crate) fn ordinal(pod: &Pod) -> i32 {
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or("")).1
}

/// True when the pod's name makes it a member of the set (upstream `isMemberOf`).
pub(crate) fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    let (parent, _) = parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or(""));
    parent.is_some() && parent == set.metadata.name.as_deref()
}

/// `spec.replicas` (1 when unset, as the API server defaults it), never negative.
pub(crate) fn replicas(set: &StatefulSet) -> i32 {
    set.spec.replicas.unwrap_or(1).max(0)
}

/// The first ordinal, `spec.ordinals.start` (upstream `getStartOrdinal`; 0 when unset).
pub(crate) fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .ordinals
        .as_ref()
        .and_then(|o| o.start)
        .unwrap_or(0)
        .max(0)
}

/// True when `ordinal` is within `[start, start + replicas)` (upstream
/// `podInOrdinalRange`).
pub(crate) fn in_ordinal_range(set: &StatefulSet, ordinal: i32) -> bool {
    let start = start_ordinal(set);
    ordinal >= start && i64::from(ordinal) < i64::from(start) + i64::from(replicas(set))
}

/// `<set>-<ordinal>` (upstream `getPodName`).
pub(crate) fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.metadata.name.as_deref().unwrap_or(""))
}

/// `<template>-<set>-<ordinal>` (upstream `getPersistentVolumeClaimName`).
pub(crate) fn claim_name(
    set: &StatefulSet,
    template: &PersistentVolumeClaim,
    ordinal: i32,
) -> String {
    format!(
        "{}-{}-{ordinal}",
        template.metadata.name.as_deref().unwrap_or(""),
        set.metadata.name.as_deref().unwrap_or("")
    )
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// True when the pod has the name, namespace and identity labels of its ordinal in the
/// set (upstream `identityMatches`, with the pod-index label).
pub(crate) fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let (parent, ordinal) = parent_and_ordinal(name);
    ordinal >= 0
        && parent == set.metadata.name.as_deref()
        && name == pod_name(set, ordinal)
        && pod.metadata.namespace == set.metadata.namespace
        && label(pod, POD_NAME_LABEL) == Some(name)
        && label(pod, POD_INDEX_LABEL) == Some(ordinal.to_string().as_str())
}

/// Puts the pod's name, namespace and identity labels in line with its ordinal (upstream
/// `updateIdentity`).
pub(crate) fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let ordinal = ordinal(pod);
    let name = pod_name(set, ordinal);
    pod.metadata.namespace.clone_from(&set.metadata.namespace);
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.to_owned(), name.clone());
    labels.insert(POD_INDEX_LABEL.to_owned(), ordinal.to_string());
    pod.metadata.name = Some(name);
}

/// [`update_identity`] and, as only a new pod may get them, `spec.hostname` (the pod's
/// name) and `spec.subdomain` (`spec.serviceName`) (upstream `initIdentity`).
fn init_identity(set: &StatefulSet, pod: &mut Pod) {
    update_identity(set, pod);
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.hostname.clone_from(&pod.metadata.name);
    spec.subdomain = set.spec.service_name.clone().filter(|s| !s.is_empty());
}

/// The claims of the pod of `ordinal`, one per `volumeClaimTemplates` entry and keyed by
/// the template's name (upstream `getPersistentVolumeClaims`): named by [`claim_name`],
/// in the set's namespace, with the template's labels and the selector's `matchLabels`.
pub(crate) fn claims_for(
    set: &StatefulSet,
    ordinal: i32,
) -> BTreeMap<String, PersistentVolumeClaim> {
    let match_labels = set.spec.selector.match_labels.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    for template in set.spec.volume_claim_templates.iter().flatten() {
        let mut claim = template.clone();
        claim.metadata = ObjectMeta {
            name: Some(claim_name(set, template, ordinal)),
            namespace: set.metadata.namespace.clone(),
            labels: template.metadata.labels.clone(),
            annotations: template.metadata.annotations.clone(),
            finalizers: template.metadata.finalizers.clone(),
            ..Default::default()
        };
        let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.extend(match_labels.clone());
        claim.status = None;
        out.insert(template.metadata.name.clone().unwrap_or_default(), claim);
    }
    out
}

/// True when the pod mounts each of the set's claims under the template's name (upstream
/// `storageMatches`).
pub(crate) fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal(pod);
    if ordinal < 0 {
        return false;
    }
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    set.spec.volume_claim_templates.iter().flatten().all(|t| {
        volumes
            .iter()
            .find(|v| Some(&v.name) == t.metadata.name.as_ref())
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .is_some_and(|c| c.claim_name == claim_name(set, t, ordinal))
    })
}

/// Points the pod's volumes named after the claim templates at its claims, adding those
/// missing and keeping the others (upstream `updateStorage`).
pub(crate) fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = claims_for(set, ordinal(pod));
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(name, claim)| Volume {
            name: name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| !claims.contains_key(&v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
}

/// The pod's revision, the name of a ControllerRevision ("" without one; upstream
/// `getPodRevision`).
pub(crate) fn pod_revision(pod: &Pod) -> &str {
    label(pod, REVISION_LABEL).unwrap_or("")
}

/// A new pod of the set for `ordinal` from `template` (upstream `newStatefulSetPod`):
/// the template's metadata and spec, a controller reference to the set, the identity of
/// the ordinal and the volumes of its claims.
pub(crate) fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32) -> Pod {
    let name = pod_name(set, ordinal);
    let ns = set.metadata.namespace.as_deref().unwrap_or("");
    let owner = controller_ref(&set.metadata, SET_API_VERSION, SET_KIND);
    let mut pod = pod_from_template(
        template,
        ns,
        set.metadata.name.as_deref().unwrap_or(""),
        owner,
    );
    pod.metadata.name = Some(name);
    // A set's pod has its name only (upstream's has no generateName).
    pod.metadata.generate_name = None;
    init_identity(set, &mut pod);
    update_storage(set, &mut pod);
    pod
}

/// The revisions a sync works with: the current one (what pods below the partition run)
/// and the update one (the set's template now), by name and template.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Revisions<'a> {
    /// `status.currentRevision` as it will be.
    pub(crate) current: &'a str,
    /// The current revision's template.
    pub(crate) current_template: &'a PodTemplateSpec,
    /// `status.updateRevision`.
    pub(crate) update: &'a str,
    /// The update revision's template.
    pub(crate) update_template: &'a PodTemplateSpec,
}

/// True for the RollingUpdate strategy (the default).
pub(crate) fn is_rolling_update(set: &StatefulSet) -> bool {
    set.spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// `rollingUpdate.partition`, if the strategy has a `rollingUpdate`.
pub(crate) fn partition(set: &StatefulSet) -> Option<i32> {
    let r = set.spec.update_strategy.as_ref()?.rolling_update.as_ref()?;
    Some(r.partition.unwrap_or(0))
}

/// The pod of `ordinal` at the revision it should have (upstream
/// `newVersionedStatefulSetPod`): the current revision below the partition (or, with
/// RollingUpdate and no `rollingUpdate`, below `status.currentReplicas`), else the
/// update revision; its `controller-revision-hash` label names the revision.
pub(crate) fn new_versioned_pod(set: &StatefulSet, rev: &Revisions<'_>, ordinal: i32) -> Pod {
    let start = i64::from(start_ordinal(set));
    let ord = i64::from(ordinal);
    let current_replicas = set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    let at_current = match partition(set) {
        Some(p) => ord < start + i64::from(p),
        None => is_rolling_update(set) && ord < start + i64::from(current_replicas),
    };
    let (template, revision) = if at_current {
        (rev.current_template, rev.current)
    } else {
        (rev.update_template, rev.update)
    };
    let mut pod = new_pod(set, template, ordinal);
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_LABEL.to_owned(), revision.to_owned());
    pod
}

/// True for a pod the API server has (its phase is set; upstream `isCreated`).
pub(crate) fn is_created(pod: &Pod) -> bool {
    !pod_phase(pod).is_empty()
}

/// True for a pod being deleted (upstream `isTerminating`).
pub(crate) fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Running and Ready (upstream `isRunningAndReady`).
pub(crate) fn is_running_and_ready(pod: &Pod) -> bool {
    pod_phase(pod) == "Running" && is_pod_ready(pod)
}

/// Ready for `min_ready_seconds` at `now` (upstream `isRunningAndAvailable`).
pub(crate) fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    is_pod_available(pod, min_ready_seconds, now)
}

/// Not Running and Ready, being deleted, or not yet available (upstream `isUnavailable`).
pub(crate) fn is_unavailable(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    !is_running_and_ready(pod)
        || is_terminating(pod)
        || !is_running_and_available(pod, min_ready_seconds, now)
}

/// True for the Parallel pod management policy (upstream `allowsBurst`).
pub(crate) fn allows_burst(set: &StatefulSet) -> bool {
    set.spec.pod_management_policy.as_deref() == Some("Parallel")
}

/// `rollingUpdate.maxUnavailable` as a number of pods out of `replicas` (upstream
/// `getStatefulSetMaxUnavailable`): 1 when unset, a percent rounded down, at least 1.
/// Errors: a string that is no percent.
pub(crate) fn max_unavailable(set: &StatefulSet, replicas: i32) -> Result<i32, String> {
    let one = IntOrString::Int(1);
    let value = set
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&one);
    Ok(scaled_value(value, replicas, false)?.max(1))
}

/// The template a revision holds (upstream `ApplyRevision`, for the one field revisions
/// hold). Errors: the revision's data holds no pod template.
pub(crate) fn revision_template(revision: &ControllerRevision) -> Result<PodTemplateSpec, String> {
    let mut t = revision
        .data
        .0
        .pointer("/spec/template")
        .cloned()
        .ok_or_else(|| "the revision holds no spec.template".to_owned())?;
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    serde_json::from_value(t).map_err(|e| format!("the revision's spec.template: {e}"))
}

/// The retention policy: (claims deleted when scaled down, claims deleted with the set)
/// (upstream `getPersistentVolumeClaimRetentionPolicy`; anything but `Delete` retains).
pub(crate) fn retention(set: &StatefulSet) -> (bool, bool) {
    let p = set.spec.persistent_volume_claim_retention_policy.as_ref();
    let delete = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    (
        delete(p.and_then(|p| p.when_scaled.as_ref())),
        delete(p.and_then(|p| p.when_deleted.as_ref())),
    )
}

/// What an owner reference may point at: the set or one of its pods.
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
}

impl<'a> Target<'a> {
    fn set(set: &'a StatefulSet) -> Self {
        Target {
            api_version: SET_API_VERSION,
            kind: SET_KIND,
            name: set.metadata.name.as_deref().unwrap_or(""),
            uid: set.metadata.uid.as_deref().unwrap_or(""),
        }
    }

    fn pod(pod: &'a Pod) -> Self {
        Target {
            api_version: "v1",
            kind: "Pod",
            name: pod.metadata.name.as_deref().unwrap_or(""),
            uid: pod.metadata.uid.as_deref().unwrap_or(""),
        }
    }

    /// Same API version, kind and name, whatever the UID (upstream `matchesRef`).
    fn matches(&self, r: &OwnerReference) -> bool {
        r.api_version == self.api_version && r.kind == self.kind && r.name == self.name
    }

    fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.to_owned(),
            kind: self.kind.to_owned(),
            name: self.name.to_owned(),
            uid: self.uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

fn refs(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
}

/// A reference to the target's name with another UID (upstream `hasStaleOwnerRef`).
fn has_stale_ref(claim: &PersistentVolumeClaim, target: Target<'_>) -> bool {
    refs(claim)
        .iter()
        .find(|r| target.matches(r))
        .is_some_and(|r| r.uid != target.uid)
}

/// A reference to the target's UID (upstream `hasOwnerRef`).
fn has_ref(claim: &PersistentVolumeClaim, target: Target<'_>) -> bool {
    refs(claim).iter().any(|r| r.uid == target.uid)
}

/// With a Delete policy, a controller of the claim other than the set and the pod, or a
/// reference to either with another UID (upstream `hasUnexpectedController`).
pub(crate) fn has_unexpected_controller(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    if retention(set) == (false, false) {
        return false;
    }
    let (s, p) = (Target::set(set), Target::pod(pod));
    refs(claim).iter().any(|r| {
        if s.matches(r) {
            r.uid != s.uid
        } else if p.matches(r) {
            r.uid != p.uid
        } else {
            r.controller == Some(true)
        }
    })
}

/// A reference to the set or the pod that is not a controller reference (upstream
/// `hasNonControllerOwner`).
fn has_non_controller_owner(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let (s, p) = (Target::set(set), Target::pod(pod));
    refs(claim)
        .iter()
        .any(|r| (r.uid == s.uid || r.uid == p.uid) && r.controller != Some(true))
}

/// True when the claim's owner references follow the set's retention policy for `pod`
/// (upstream `isClaimOwnerUpToDate`): Retain/Retain, no reference to the set or pod;
/// whenDeleted Delete, one to the set while the pod is in range; whenScaled Delete, one
/// to the pod once it is scaled down (and none to the set then). A claim with stale
/// references, or held by another controller and not by the set or pod, is left as it
/// is (true).
pub(crate) fn claim_owner_up_to_date(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let (s, p) = (Target::set(set), Target::pod(pod));
    if has_stale_ref(claim, s) || has_stale_ref(claim, p) {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_ref(claim, s) || has_ref(claim, p));
    }
    if has_non_controller_owner(claim, set, pod) {
        return false;
    }
    let scaled_down = !in_ordinal_range(set, ordinal(pod));
    let (want_set, want_pod) = match retention(set) {
        (false, false) => (false, false),
        (false, true) => (true, false),
        (true, false) => (false, scaled_down),
        (true, true) => (!scaled_down, scaled_down),
    };
    has_ref(claim, s) == want_set && has_ref(claim, p) == want_pod
}

/// Rewrites the claim's references to the set and the pod as the retention policy wants
/// them (upstream `updateClaimOwnerRefForSetAndPod`): both removed, then a controller
/// reference added to the set (whenDeleted Delete, pod in range) and to the pod
/// (whenScaled Delete, pod scaled down); none is added while another controller holds
/// the claim.
pub(crate) fn update_claim_owner_refs(
    claim: &mut PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let (s, p) = (Target::set(set), Target::pod(pod));
    let mut refs: Vec<OwnerReference> = refs(claim)
        .iter()
        .filter(|r| !s.matches(r) && !p.matches(r))
        .cloned()
        .collect();
    if !unexpected {
        let scaled_down = !in_ordinal_range(set, ordinal(pod));
        let (when_scaled, when_deleted) = retention(set);
        if when_deleted && !(when_scaled && scaled_down) {
            refs.push(s.controller_ref());
        }
        if when_scaled && scaled_down {
            refs.push(p.controller_ref());
        }
    }
    claim.metadata.owner_references = (!refs.is_empty()).then_some(refs);
}

/// True when a claim of the pod still refers to an earlier pod of its name, which must
/// be gone (garbage collected) before the pod is made again: with whenScaled Delete
/// only (upstream `PodClaimIsStale`).
pub(crate) fn claim_is_stale(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    if !retention(set).0 {
        return false;
    }
    claims_for(set, ordinal(pod)).values().any(|c| {
        let name = c.metadata.name.as_deref().unwrap_or("");
        claims
            .get(name)
            .is_some_and(|existing| has_stale_ref(existing, Target::pod(pod)))
    })
}

/// True when every existing claim of the pod has the owner references the retention
/// policy wants (upstream `ClaimsMatchRetentionPolicy`); missing claims are no mismatch.
pub(crate) fn claims_match_retention(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    claims_for(set, ordinal(pod)).values().all(|c| {
        claims
            .get(c.metadata.name.as_deref().unwrap_or(""))
            .is_none_or(|existing| claim_owner_up_to_date(existing, set, pod))
    })
}

/// For a condemned pod: true when every claim of the pod is in the cache with the owner
/// references the retention policy wants. Unlike [`claims_match_retention`], a claim
/// missing from the cache counts as a mismatch when the policy wants any reference: the
/// pod exists, so its claims were made before it and the cache is behind. The fix step
/// reads such a claim live; deleting the pod first would leave its claim without the
/// owner that garbage collects it (upstream `ClaimsMatchRetentionPolicy` skips it).
pub(crate) fn condemned_claims_match_retention(
    set: &StatefulSet,
    pod: &Pod,
    claims: &Claims,
) -> bool {
    let wants_refs = retention(set) != (false, false);
    claims_for(set, ordinal(pod)).values().all(|c| {
        match claims.get(c.metadata.name.as_deref().unwrap_or("")) {
            Some(existing) => claim_owner_up_to_date(existing, set, pod),
            None => !wants_refs,
        }
    })
}

/// True when a claim of the pod is missing or being deleted (what upstream
/// `createMissingPersistentVolumeClaims` acts on).
pub(crate) fn claims_missing(set: &StatefulSet, pod: &Pod, claims: &Claims) -> bool {
    claims_for(set, ordinal(pod)).values().any(|c| {
        claims
            .get(c.metadata.name.as_deref().unwrap_or(""))
            .is_none_or(|existing| existing.metadata.deletion_timestamp.is_some())
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::apps::v1::{
        StatefulSetOrdinals, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };
    use k8s_openapi::api::core::v1::{Container, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use serde_json::json;

    use super::*;
    use crate::controller_history::revision_patch;

    pub(crate) fn stateful_set(replicas: i32) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some("nginx".into()),
                selector: LabelSelector {
                    match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_owned(), "web".to_owned())].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "c".into(),
                            image: Some("web:1".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("www".into()),
                        labels: Some([("tier".to_owned(), "data".to_owned())].into()),
                        ..Default::default()
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn names_and_ordinals() {
        assert_eq!(parent_and_ordinal("web-0"), (Some("web"), 0));
        assert_eq!(parent_and_ordinal("my-web-12"), (Some("my-web"), 12));
        assert_eq!(parent_and_ordinal("web"), (None, -1));
        assert_eq!(parent_and_ordinal("web-"), (None, -1));
        assert_eq!(parent_and_ordinal("web-1a"), (None, -1));
        assert_eq!(parent_and_ordinal("web-99999999999"), (Some("web"), -1));
        let mut set = stateful_set(3);
        assert_eq!(pod_name(&set, 2), "web-2");
        assert!(in_ordinal_range(&set, 2) && !in_ordinal_range(&set, 3));
        set.spec.ordinals = Some(StatefulSetOrdinals { start: Some(5) });
        assert!(!in_ordinal_range(&set, 4) && in_ordinal_range(&set, 7));
        assert!(!in_ordinal_range(&set, 8));
        let tpl = &set.spec.volume_claim_templates.as_ref().unwrap()[0];
        assert_eq!(claim_name(&set, tpl, 7), "www-web-7");
    }

    #[test]
    fn new_pods_have_identity_and_storage() {
        let set = stateful_set(3);
        let pod = new_pod(&set, &set.spec.template, 1);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[POD_NAME_LABEL], "web-1");
        assert_eq!(labels[POD_INDEX_LABEL], "1");
        assert_eq!(labels["app"], "web");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let v = &spec.volumes.as_ref().unwrap()[0];
        assert_eq!(v.name, "www");
        assert_eq!(
            v.persistent_volume_claim.as_ref().unwrap().claim_name,
            "www-web-1"
        );
        assert!(identity_matches(&set, &pod) && storage_matches(&set, &pod));
        assert!(is_member_of(&set, &pod));
        let r = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (r.kind.as_str(), r.uid.as_str()),
            ("StatefulSet", "set-uid")
        );

        // Drifted identity and storage are repaired; other volumes are kept.
        let mut drifted = pod.clone();
        drifted
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(POD_NAME_LABEL);
        drifted.spec.as_mut().unwrap().volumes = Some(vec![
            Volume {
                name: "www".into(),
                empty_dir: Some(Default::default()),
                ..Default::default()
            },
            Volume {
                name: "cache".into(),
                empty_dir: Some(Default::default()),
                ..Default::default()
            },
        ]);
        assert!(!identity_matches(&set, &drifted) && !storage_matches(&set, &drifted));
        update_identity(&set, &mut drifted);
        update_storage(&set, &mut drifted);
        assert!(identity_matches(&set, &drifted) && storage_matches(&set, &drifted));
        let names: Vec<_> = drifted
            .spec
            .unwrap()
            .volumes
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect();
        assert_eq!(names, ["www", "cache"]);
    }

    #[test]
    fn claims_carry_template_and_selector_labels() {
        let set = stateful_set(1);
        let claims = claims_for(&set, 0);
        let c = &claims["www"];
        assert_eq!(c.metadata.name.as_deref(), Some("www-web-0"));
        assert_eq!(c.metadata.namespace.as_deref(), Some("ns"));
        let labels = c.metadata.labels.clone().unwrap();
        assert_eq!(
            (labels["tier"].as_str(), labels["app"].as_str()),
            ("data", "web")
        );
    }

    #[test]
    fn pods_below_the_partition_keep_the_current_revision() {
        let mut set = stateful_set(3);
        let old = set.spec.template.clone();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].image = Some("web:2".into());
        set.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(
                k8s_openapi::api::apps::v1::RollingUpdateStatefulSetStrategy {
                    partition: Some(2),
                    max_unavailable: None,
                },
            ),
        });
        let rev = Revisions {
            current: "web-a",
            current_template: &old,
            update: "web-b",
            update_template: &new,
        };
        let image = |p: &Pod| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        };
        let p1 = new_versioned_pod(&set, &rev, 1);
        assert_eq!((pod_revision(&p1), image(&p1).as_str()), ("web-a", "web:1"));
        let p2 = new_versioned_pod(&set, &rev, 2);
        assert_eq!((pod_revision(&p2), image(&p2).as_str()), ("web-b", "web:2"));
    }

    fn with_uid(mut pod: Pod, uid: &str) -> Pod {
        pod.metadata.uid = Some(uid.into());
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        pod
    }

    fn policy(set: &mut StatefulSet, scaled: &str, deleted: &str) {
        set.spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_scaled: Some(scaled.into()),
                when_deleted: Some(deleted.into()),
            });
    }

    fn owners(c: &PersistentVolumeClaim) -> Vec<(String, String)> {
        refs(c)
            .iter()
            .map(|r| (r.kind.clone(), r.uid.clone()))
            .collect()
    }

    #[test]
    fn retention_policy_owner_refs() {
        let mut set = stateful_set(1);
        let live = with_uid(new_pod(&set, &set.spec.template, 0), "p0");
        let gone = with_uid(new_pod(&set, &set.spec.template, 1), "p1");
        let mut claim = claims_for(&set, 0)["www"].clone();
        // Retain/Retain: no references wanted.
        assert!(claim_owner_up_to_date(&claim, &set, &live));
        // whenDeleted Delete: the set's.
        policy(&mut set, "Retain", "Delete");
        assert!(!claim_owner_up_to_date(&claim, &set, &live));
        update_claim_owner_refs(&mut claim, &set, &live);
        assert_eq!(owners(&claim), [("StatefulSet".into(), "set-uid".into())]);
        assert!(claim_owner_up_to_date(&claim, &set, &live));
        // Delete/Delete: a scaled-down pod's claim goes with the pod, not the set.
        policy(&mut set, "Delete", "Delete");
        let mut scaled = claims_for(&set, 1)["www"].clone();
        update_claim_owner_refs(&mut scaled, &set, &gone);
        assert_eq!(owners(&scaled), [("Pod".into(), "p1".into())]);
        assert!(claim_owner_up_to_date(&scaled, &set, &gone));
        assert!(claim_owner_up_to_date(&claim, &set, &live));
        // Back to Retain/Retain: the references go.
        policy(&mut set, "Retain", "Retain");
        assert!(!claim_owner_up_to_date(&scaled, &set, &gone));
        update_claim_owner_refs(&mut scaled, &set, &gone);
        assert_eq!(scaled.metadata.owner_references, None);
        // A claim of an earlier pod of the name is stale for a new pod (no UID yet).
        policy(&mut set, "Delete", "Retain");
        let mut old = claims_for(&set, 0)["www"].clone();
        old.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "web-0".into(),
            uid: "earlier".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        let claims: Claims = [("www-web-0".to_owned(), Arc::new(old))].into();
        assert!(claim_is_stale(
            &set,
            &new_pod(&set, &set.spec.template, 0),
            &claims
        ));
        assert!(!claim_is_stale(
            &set,
            &new_pod(&set, &set.spec.template, 1),
            &claims
        ));
        // Another controller: left alone, and the set adds none on top.
        let mut foreign = claims_for(&set, 0)["www"].clone();
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Keeper".into(),
            name: "k".into(),
            uid: "k1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        policy(&mut set, "Retain", "Delete");
        assert!(claim_owner_up_to_date(&foreign, &set, &live));
    }

    #[test]
    fn max_unavailable_rounds_down_to_at_least_one() {
        let mut set = stateful_set(10);
        assert_eq!(max_unavailable(&set, 10), Ok(1));
        set.spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(
                k8s_openapi::api::apps::v1::RollingUpdateStatefulSetStrategy {
                    partition: None,
                    max_unavailable: Some(IntOrString::String("25%".into())),
                },
            ),
        });
        assert_eq!(max_unavailable(&set, 10), Ok(2));
        assert_eq!(max_unavailable(&set, 2), Ok(1));
    }

    #[test]
    fn revisions_round_trip_the_template() {
        let set = stateful_set(1);
        let rev = ControllerRevision {
            data: k8s_openapi::apimachinery::pkg::runtime::RawExtension(revision_patch(
                &set.spec.template,
            )),
            ..Default::default()
        };
        assert_eq!(
            rev.data.0.pointer("/spec/template/$patch"),
            Some(&json!("replace"))
        );
        assert_eq!(revision_template(&rev), Ok(set.spec.template.clone()));
        assert!(revision_template(&ControllerRevision::default()).is_err());
    }
}
