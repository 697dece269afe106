//! What one sync of a StatefulSet does, decided without I/O (upstream
//! `pkg/controller/statefulset/stateful_set_control.go`, `updateStatefulSet`): the pods
//! in the ordinal range are made, repaired or replaced; those beyond it are condemned;
//! then the rolling update deletes pods of old revisions. With OrderedReady (monotonic)
//! the plan stops at the first pod that is missing, unhealthy or being deleted; with
//! Parallel (burst) it goes on past them.

use std::cmp::Reverse;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use skiff_api::core::pod::conditions::pod_phase;

use super::utils::{
    Claims, Revisions, allows_burst, claim_is_stale, claims_match_retention, claims_missing,
    condemned_claims_match_retention, identity_matches, in_ordinal_range, is_created,
    is_rolling_update, is_running_and_available, is_running_and_ready, is_terminating,
    is_unavailable, max_unavailable, new_versioned_pod, ordinal, pod_name, pod_revision, replicas,
    start_ordinal, storage_matches,
};

/// One thing a sync does, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Delete a pod that ended (`failed`: Failed, else Succeeded); it is made again once
    /// it is gone.
    DeleteEnded {
        /// The pod's name.
        name: String,
        /// Failed rather than Succeeded.
        failed: bool,
    },
    /// Create the pod's claims, then the pod.
    Create(Box<Pod>),
    /// Create the missing claims of a Pending pod.
    CreateClaims(Arc<Pod>),
    /// Repair the pod's identity and storage and its claims' owner references (upstream
    /// `UpdateStatefulPod`).
    Update(Arc<Pod>),
    /// Set the owner references of a condemned pod's claims (whenScaled).
    FixClaims(Arc<Pod>),
    /// Delete a pod beyond the ordinal range (scale down).
    Condemn(String),
    /// Delete a pod of an old revision (rolling update); it is made again at the update
    /// revision.
    Replace(String),
}

/// The replica counts of a set's status (upstream `replicaStatus`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Pods the API server has.
    pub(crate) replicas: i32,
    /// Running and Ready.
    pub(crate) ready: i32,
    /// Ready for minReadySeconds.
    pub(crate) available: i32,
    /// At the current revision, not being deleted.
    pub(crate) current: i32,
    /// At the update revision, not being deleted.
    pub(crate) updated: i32,
}

/// A sync's steps and the counts of the status it leaves.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// What to do, in order; the first failure stops the rest.
    pub(crate) steps: Vec<Step>,
    /// The status counts, pods the rolling update deletes no longer current.
    pub(crate) counts: Counts,
}

impl Plan {
    /// The number of pods created and the keys (`namespace/name`) of the pods deleted.
    pub(crate) fn expected(&self, namespace: &str) -> (usize, Vec<String>) {
        let mut adds = 0;
        let mut dels = Vec::new();
        for s in &self.steps {
            match s {
                Step::Create(_) => adds += 1,
                Step::DeleteEnded { name, .. } | Step::Condemn(name) | Step::Replace(name) => {
                    dels.push(format!("{namespace}/{name}"));
                }
                _ => {}
            }
        }
        (adds, dels)
    }
}

/// Counts the pods (upstream `computeReplicaStatus`).
fn count<'a>(
    pods: impl Iterator<Item = &'a Arc<Pod>>,
    min_ready: i32,
    rev: &Revisions<'_>,
    now: Timestamp,
) -> Counts {
    let mut c = Counts::default();
    for pod in pods {
        if is_created(pod) {
            c.replicas += 1;
        }
        if is_running_and_ready(pod) {
            c.ready += 1;
            if is_running_and_available(pod, min_ready, now) {
                c.available += 1;
            }
        }
        if is_created(pod) && !is_terminating(pod) {
            let r = pod_revision(pod);
            if r == rev.current {
                c.current += 1;
            }
            if r == rev.update {
                c.updated += 1;
            }
        }
    }
    c
}

/// The plan for the set and its pods (members claimed by it) at `now`.
///
/// - In range, in ordinal order: an ended pod is deleted; a missing one is created at
///   its revision (not while a claim of an earlier pod of its name lingers); a Pending
///   pod gets its missing claims; a pod whose identity, storage or claims drifted is
///   repaired. OrderedReady stops after a create or delete and at a pod being deleted,
///   not Running and Ready, or not yet available.
/// - Beyond the range: the claims get the retention policy's owner references, then the
///   pods are deleted from the highest ordinal, OrderedReady one at a time and only once
///   the others are healthy (the first unhealthy pod may go).
/// - RollingUpdate: with no more than maxUnavailable pods in range unavailable, pods of
///   an old revision at or above the partition are deleted, highest first, to make up
///   maxUnavailable; OnDelete leaves them.
///
/// A set being deleted gets only its counts.
pub(crate) fn plan(
    set: &StatefulSet,
    pods: &[Arc<Pod>],
    claims: &Claims,
    rev: &Revisions<'_>,
    now: Timestamp,
) -> Plan {
    let start = start_ordinal(set);
    let count_in_range = usize::try_from(replicas(set)).unwrap_or(0);
    let min_ready = set.spec.min_ready_seconds.unwrap_or(0);
    let mut slots: Vec<Option<&Arc<Pod>>> = vec![None; count_in_range];
    let mut condemned: Vec<&Arc<Pod>> = Vec::new();
    for pod in pods {
        let ord = ordinal(pod);
        if ord < 0 {
            continue;
        }
        if in_ordinal_range(set, ord) {
            if let Some(slot) = usize::try_from(ord - start)
                .ok()
                .and_then(|i| slots.get_mut(i))
            {
                *slot = Some(pod);
            }
        } else {
            condemned.push(pod);
        }
    }
    condemned.sort_by_key(|p| Reverse(ordinal(p)));
    let counts = count(
        slots
            .iter()
            .flatten()
            .copied()
            .chain(condemned.iter().copied()),
        min_ready,
        rev,
        now,
    );
    let mut plan = Plan {
        steps: Vec::new(),
        counts,
    };
    if set.metadata.deletion_timestamp.is_some() {
        return plan;
    }
    let unavailable = |p: &Pod| is_unavailable(p, min_ready, now);
    // The first unhealthy pod: in range from the lowest ordinal (a missing one counts),
    // else beyond it from the lowest.
    let first_unhealthy: Option<String> = slots
        .iter()
        .enumerate()
        .find(|(_, s)| s.is_none_or(|p| unavailable(p)))
        .map(|(i, _)| {
            pod_name(
                set,
                start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX)),
            )
        })
        .or_else(|| {
            condemned
                .iter()
                .rev()
                .find(|p| unavailable(p))
                .and_then(|p| p.metadata.name.clone())
        });
    let monotonic = !allows_burst(set);

    for (i, slot) in slots.iter().enumerate() {
        let ord = start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX));
        let stop = match slot {
            None => {
                let pod = new_versioned_pod(set, rev, ord);
                // A lingering claim holds the pod back; a create ends an ordered sync.
                if !claim_is_stale(set, &pod, claims) {
                    plan.steps.push(Step::Create(Box::new(pod)));
                }
                true
            }
            Some(pod) => replica_step(set, pod, claims, monotonic, min_ready, now, &mut plan),
        };
        if stop && monotonic {
            return plan;
        }
    }

    for pod in &condemned {
        if !condemned_claims_match_retention(set, pod, claims) {
            plan.steps.push(Step::FixClaims(Arc::clone(pod)));
        }
    }
    for pod in &condemned {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if is_terminating(pod) {
            if monotonic {
                return plan;
            }
            continue;
        }
        let first = first_unhealthy.as_deref() == Some(name.as_str());
        if monotonic && !first && unavailable(pod) {
            return plan;
        }
        plan.steps.push(Step::Condemn(name));
        if monotonic {
            return plan;
        }
    }

    if !is_rolling_update(set) {
        return plan;
    }
    let max = max_unavailable(set, replicas(set)).unwrap_or(1);
    let down = slots
        .iter()
        .filter(|s| s.is_none_or(|p| unavailable(p)))
        .count();
    let down = i32::try_from(down).unwrap_or(i32::MAX);
    if down > max {
        return plan;
    }
    let mut room = max - down;
    let partition = super::utils::partition(set).unwrap_or(0).max(0);
    let lowest = usize::try_from(partition).unwrap_or(usize::MAX);
    for i in (0..slots.len()).rev() {
        if i < lowest || room <= 0 {
            break;
        }
        let Some(pod) = slots[i] else { continue };
        if pod_revision(pod) != rev.update && !is_terminating(pod) {
            plan.steps
                .push(Step::Replace(pod.metadata.name.clone().unwrap_or_default()));
            plan.counts.current -= 1;
            room -= 1;
        }
    }
    plan
}

/// The steps for an existing pod in range (upstream `processReplica`); true when an
/// ordered sync must stop there.
fn replica_step(
    set: &StatefulSet,
    pod: &Arc<Pod>,
    claims: &Claims,
    monotonic: bool,
    min_ready: i32,
    now: Timestamp,
    plan: &mut Plan,
) -> bool {
    let phase = pod_phase(pod);
    if matches!(phase, "Failed" | "Succeeded") {
        if !is_terminating(pod) {
            plan.steps.push(Step::DeleteEnded {
                name: pod.metadata.name.clone().unwrap_or_default(),
                failed: phase == "Failed",
            });
        }
        return true;
    }
    if phase == "Pending" && claims_missing(set, pod, claims) {
        plan.steps.push(Step::CreateClaims(Arc::clone(pod)));
    }
    if monotonic
        && (is_terminating(pod)
            || !is_running_and_ready(pod)
            || !is_running_and_available(pod, min_ready, now))
    {
        return true;
    }
    if !(identity_matches(set, pod)
        && storage_matches(set, pod)
        && claims_match_retention(set, pod, claims))
    {
        plan.steps.push(Step::Update(Arc::clone(pod)));
    }
    false
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{
        RollingUpdateStatefulSetStrategy, StatefulSetPersistentVolumeClaimRetentionPolicy,
        StatefulSetUpdateStrategy,
    };
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::super::utils::tests::stateful_set;
    use super::super::utils::{claims_for, new_pod};
    use super::*;

    const NOW: &str = "2026-01-02T00:00:00Z";

    fn templates(set: &StatefulSet) -> (PodTemplateSpec, PodTemplateSpec) {
        let old = set.spec.template.clone();
        let mut new = old.clone();
        if let Some(spec) = new.spec.as_mut() {
            spec.containers[0].image = Some("web:2".into());
        }
        (old, new)
    }

    /// A pod of the set at `ordinal` and revision `rev` with `phase`, ready or not.
    fn pod(set: &StatefulSet, ordinal: i32, rev: &str, phase: &str, ready: bool) -> Arc<Pod> {
        let mut p = new_pod(set, &set.spec.template, ordinal);
        p.metadata.uid = Some(format!("uid-{ordinal}"));
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("controller-revision-hash".into(), rev.into());
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            conditions: ready.then(|| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        Arc::new(p)
    }

    fn healthy(set: &StatefulSet, ordinal: i32, rev: &str) -> Arc<Pod> {
        pod(set, ordinal, rev, "Running", true)
    }

    /// The plan for `pods` with revisions "old" (current) and "new" (update).
    fn run(set: &StatefulSet, pods: &[Arc<Pod>], claims: &Claims) -> Plan {
        let (old, new) = templates(set);
        let rev = Revisions {
            current: "old",
            current_template: &old,
            update: "new",
            update_template: &new,
        };
        plan(set, pods, claims, &rev, NOW.parse().unwrap())
    }

    /// The steps, briefly: `create web-0@new`, `delete web-2`, ...
    fn brief(plan: &Plan) -> Vec<String> {
        plan.steps
            .iter()
            .map(|s| match s {
                Step::DeleteEnded { name, failed } => format!("ended {name} {failed}"),
                Step::Create(p) => format!(
                    "create {}@{}",
                    p.metadata.name.as_deref().unwrap_or(""),
                    pod_revision(p)
                ),
                Step::CreateClaims(p) => format!("claims {}", p.metadata.name.as_deref().unwrap()),
                Step::Update(p) => format!("update {}", p.metadata.name.as_deref().unwrap()),
                Step::FixClaims(p) => format!("fix {}", p.metadata.name.as_deref().unwrap()),
                Step::Condemn(n) => format!("condemn {n}"),
                Step::Replace(n) => format!("replace {n}"),
            })
            .collect()
    }

    fn parallel(set: &mut StatefulSet) {
        set.spec.pod_management_policy = Some("Parallel".into());
    }

    fn partitioned(set: &mut StatefulSet, partition: i32) {
        set.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(partition),
                max_unavailable: None,
            }),
        });
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time() {
        let set = stateful_set(3);
        let none = Claims::new();
        assert_eq!(brief(&run(&set, &[], &none)), ["create web-0@new"]);
        // web-0 not ready yet: nothing, but for its claims if they are missing.
        let p0 = pod(&set, 0, "new", "Pending", false);
        assert_eq!(
            brief(&run(&set, std::slice::from_ref(&p0), &none)),
            ["claims web-0"]
        );
        let claim = claims_for(&set, 0)["www"].clone();
        let claims: Claims = [("www-web-0".to_owned(), Arc::new(claim))].into();
        assert!(run(&set, &[p0], &claims).steps.is_empty());
        let p0 = pod(&set, 0, "new", "Running", false);
        assert!(run(&set, &[p0], &none).steps.is_empty());
        // Ready: web-1 comes.
        let got = run(&set, &[healthy(&set, 0, "new")], &none);
        assert_eq!(brief(&got), ["create web-1@new"]);
        assert_eq!(
            got.counts,
            Counts {
                replicas: 1,
                ready: 1,
                available: 1,
                current: 0,
                updated: 1
            }
        );
        // A gap is filled first, in ordinal order.
        let got = run(
            &set,
            &[healthy(&set, 0, "new"), healthy(&set, 2, "new")],
            &none,
        );
        assert_eq!(brief(&got), ["create web-1@new"]);
    }

    #[test]
    fn parallel_creates_all_at_once() {
        let mut set = stateful_set(3);
        parallel(&mut set);
        let none = Claims::new();
        let got = run(&set, &[pod(&set, 1, "new", "Pending", false)], &none);
        assert_eq!(
            brief(&got),
            ["create web-0@new", "claims web-1", "create web-2@new"]
        );
    }

    #[test]
    fn min_ready_seconds_holds_the_next_pod() {
        let mut set = stateful_set(2);
        set.spec.min_ready_seconds = Some(86_400 * 2);
        assert!(
            run(&set, &[healthy(&set, 0, "new")], &Claims::new())
                .steps
                .is_empty()
        );
    }

    #[test]
    fn ended_pods_are_deleted_and_waited_for() {
        let set = stateful_set(2);
        let failed = pod(&set, 0, "new", "Failed", false);
        let got = run(&set, &[failed, healthy(&set, 1, "new")], &Claims::new());
        assert_eq!(brief(&got), ["ended web-0 true"]);
        // Being deleted: waited for.
        let mut gone = (*pod(&set, 0, "new", "Failed", false)).clone();
        gone.metadata.deletion_timestamp = Some(Time(NOW.parse().unwrap()));
        let got = run(
            &set,
            &[Arc::new(gone), healthy(&set, 1, "new")],
            &Claims::new(),
        );
        assert!(got.steps.is_empty());
    }

    #[test]
    fn scale_down_goes_from_the_highest_ordinal_one_at_a_time() {
        let set = stateful_set(1);
        let pods = [
            healthy(&set, 0, "new"),
            healthy(&set, 1, "new"),
            healthy(&set, 2, "new"),
        ];
        assert_eq!(brief(&run(&set, &pods, &Claims::new())), ["condemn web-2"]);
        // web-2 terminating: wait.
        let mut t = (*pods[2]).clone();
        t.metadata.deletion_timestamp = Some(Time(NOW.parse().unwrap()));
        let got = run(
            &set,
            &[pods[0].clone(), pods[1].clone(), Arc::new(t)],
            &Claims::new(),
        );
        assert!(got.steps.is_empty());
        // An unhealthy condemned pod goes only if it is the first unhealthy one.
        let sick1 = pod(&set, 1, "new", "Running", false);
        let sick2 = pod(&set, 2, "new", "Running", false);
        let got = run(
            &set,
            &[pods[0].clone(), pods[1].clone(), sick2.clone()],
            &Claims::new(),
        );
        assert_eq!(brief(&got), ["condemn web-2"]);
        let got = run(
            &set,
            &[pods[0].clone(), sick1.clone(), pods[2].clone()],
            &Claims::new(),
        );
        assert_eq!(brief(&got), ["condemn web-2"]);
        let got = run(&set, &[pods[0].clone(), sick1, sick2], &Claims::new());
        assert!(got.steps.is_empty(), "{:?}", brief(&got));
        // Parallel: all at once.
        let mut p = stateful_set(1);
        parallel(&mut p);
        assert_eq!(
            brief(&run(&p, &pods, &Claims::new())),
            ["condemn web-2", "condemn web-1"]
        );
    }

    #[test]
    fn rolling_update_goes_down_to_the_partition() {
        let mut set = stateful_set(3);
        partitioned(&mut set, 1);
        let base = set.clone();
        let old = |o| healthy(&base, o, "old");
        let none = Claims::new();
        let got = run(&set, &[old(0), old(1), old(2)], &none);
        assert_eq!(brief(&got), ["replace web-2"]);
        assert_eq!(got.counts.current, 2);
        // web-2 is being replaced: its new pod is created at the update revision.
        assert_eq!(
            brief(&run(&set, &[old(0), old(1)], &none)),
            ["create web-2@new"]
        );
        // Not ready yet: wait.
        let new2 = pod(&set, 2, "new", "Running", false);
        assert!(run(&set, &[old(0), old(1), new2], &none).steps.is_empty());
        // Ready: web-1 next; web-0 stays below the partition.
        let got = run(&set, &[old(0), old(1), healthy(&set, 2, "new")], &none);
        assert_eq!(brief(&got), ["replace web-1"]);
        let got = run(
            &set,
            &[old(0), healthy(&set, 1, "new"), healthy(&set, 2, "new")],
            &none,
        );
        assert!(got.steps.is_empty());
        // A pod below the partition made again keeps the current revision.
        let got = run(
            &set,
            &[healthy(&set, 1, "new"), healthy(&set, 2, "new")],
            &none,
        );
        assert_eq!(brief(&got), ["create web-0@old"]);
        // OnDelete: nothing is replaced.
        set.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        assert!(run(&set, &[old(0), old(1), old(2)], &none).steps.is_empty());
        assert_eq!(
            brief(&run(&set, &[old(0), old(1)], &none)),
            ["create web-2@new"]
        );
    }

    #[test]
    fn parallel_rolling_update_respects_max_unavailable() {
        let mut set = stateful_set(3);
        parallel(&mut set);
        partitioned(&mut set, 0);
        let none = Claims::new();
        let base = set.clone();
        let old = |o| healthy(&base, o, "old");
        assert_eq!(
            brief(&run(&set, &[old(0), old(1), old(2)], &none)),
            ["replace web-2"]
        );
        // One pod down already: none more.
        let sick = pod(&set, 2, "new", "Running", false);
        assert!(run(&set, &[old(0), old(1), sick], &none).steps.is_empty());
        if let Some(r) = set
            .spec
            .update_strategy
            .as_mut()
            .and_then(|s| s.rolling_update.as_mut())
        {
            r.max_unavailable =
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
        }
        assert_eq!(
            brief(&run(&set, &[old(0), old(1), old(2)], &none)),
            ["replace web-2", "replace web-1"]
        );
    }

    #[test]
    fn identity_drift_is_repaired_and_claims_follow_the_retention_policy() {
        let mut set = stateful_set(1);
        let mut drifted = (*healthy(&set, 0, "new")).clone();
        drifted
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove("statefulset.kubernetes.io/pod-name");
        let got = run(&set, &[Arc::new(drifted)], &Claims::new());
        assert_eq!(brief(&got), ["update web-0"]);

        // whenScaled Delete: the condemned pod's claim gets its owner reference first.
        set.spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_scaled: Some("Delete".into()),
                when_deleted: Some("Retain".into()),
            });
        let claim = claims_for(&set, 1)["www"].clone();
        let claims: Claims = [("www-web-1".to_owned(), Arc::new(claim))].into();
        let pods = [healthy(&set, 0, "new"), healthy(&set, 1, "new")];
        assert_eq!(
            brief(&run(&set, &pods, &claims)),
            ["fix web-1", "condemn web-1"]
        );
        // A claim the cache has not seen yet is read live before its pod goes.
        assert_eq!(
            brief(&run(&set, &pods, &Claims::new())),
            ["fix web-1", "condemn web-1"]
        );
        // A claim still owned by the earlier web-1 holds its re-creation.
        let mut stale = claims_for(&set, 1)["www"].clone();
        stale.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "web-1".into(),
                uid: "uid-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]);
        let claims: Claims = [("www-web-1".to_owned(), Arc::new(stale))].into();
        let mut two = set.clone();
        two.spec.replicas = Some(2);
        assert!(
            run(&two, &[healthy(&two, 0, "new")], &claims)
                .steps
                .is_empty()
        );
    }

    #[test]
    fn a_set_being_deleted_only_counts() {
        let mut set = stateful_set(3);
        set.metadata.deletion_timestamp = Some(Time(NOW.parse().unwrap()));
        let got = run(&set, &[healthy(&set, 0, "old")], &Claims::new());
        assert!(got.steps.is_empty());
        assert_eq!(got.counts.current, 1);
    }

    #[test]
    fn expectations_count_creates_and_deletes() {
        let mut set = stateful_set(2);
        parallel(&mut set);
        let pods = [
            pod(&set, 0, "new", "Failed", false),
            healthy(&set, 3, "new"),
        ];
        let got = run(&set, &pods, &Claims::new());
        assert_eq!(
            brief(&got),
            ["ended web-0 true", "create web-1@new", "condemn web-3"]
        );
        assert_eq!(
            got.expected("ns"),
            (1, vec!["ns/web-0".to_owned(), "ns/web-3".to_owned()])
        );
    }
}
