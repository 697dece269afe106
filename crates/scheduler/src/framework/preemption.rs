//! The generic preemption logic shared by preemption plugins (upstream
//! `pkg/scheduler/framework/preemption/preemption.go`, v1.33): the [`Evaluator`] finds the
//! nodes where removing lower-priority pods makes the preemptor fit (a dry run on copies
//! of the nodes and of the cycle state), picks one by upstream's ordered criteria, then
//! evicts the victims through the API and clears the nominations of lower-priority pods
//! nominated to that node. The plugin-specific parts (eligibility, how many nodes to try,
//! which victims on a node) come from an [`Interface`], as upstream's
//! `preemption.Interface`; `DefaultPreemption` is the in-tree one.
//!
//! Differences from upstream, by design: the dry run checks nodes one after the other
//! (upstream runs them in parallel and stops once enough candidates are found; the set
//! of nodes checked is the same: from a random offset, until enough candidates), victims
//! are evicted synchronously (upstream v1.33's `SchedulerAsyncPreemption` evicts them in
//! the background), there are no extenders and no waiting (Permit) pods to reject, and
//! the preemptor is taken as given rather than re-read from the pod lister.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

use super::cycle_state::CycleState;
use super::fit_error::{Diagnosis, FitError};
use super::interface::{NodeToStatus, PostFilterResult};
use super::runtime::{Framework, Handle};
use super::snapshot::Snapshot;
use super::status::{Code, Status};
use super::types::{NodeInfo, PodInfo, pod_key, pod_priority, pod_uid};

/// The status of the nodes the dry run did not evaluate, in the "no candidate" message
/// (upstream's absent-nodes status in `Preempt`).
pub const PREEMPTION_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// The pod condition type set on victims before they are deleted (upstream
/// `v1.DisruptionTarget`).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// The reason of the victims' [`DISRUPTION_TARGET`] condition (upstream
/// `v1.PodReasonPreemptionByScheduler`).
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// The pods to evict on one node for the preemptor to fit there, ordered from the most
/// to the least important, and how many of them are evicted against a
/// PodDisruptionBudget (upstream `extenderv1.Victims`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Victims {
    /// The victims, most important first.
    pub pods: Vec<Arc<Pod>>,
    /// How many victims violate a PodDisruptionBudget.
    pub num_pdb_violations: i64,
}

/// A node the preemptor can be nominated to, with the victims to evict there (upstream
/// `preemption.Candidate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The node's name.
    pub name: String,
    /// The pods to evict.
    pub victims: Victims,
}

/// Scores a candidate node by name for [`pick_one_node_for_preemption`]: the highest
/// score wins, ties go to the next function.
pub type ScoreFn<'a> = Box<dyn Fn(&str) -> i64 + 'a>;

/// The plugin-specific parts of preemption (upstream `preemption.Interface`).
pub trait Interface: Send + Sync {
    /// A random offset into `num_nodes` potential nodes where the dry run starts, and
    /// the number of candidates to find (at most `num_nodes`).
    fn get_offset_and_num_candidates(&self, num_nodes: usize) -> (usize, usize);

    /// Why `pod` may not preempt other pods (the status message), or None when it may.
    /// `nominated_node_status` is the Filter status of the pod's nominated node.
    fn pod_eligible_to_preempt_others(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        nominated_node_status: &Status,
    ) -> Option<String>;

    /// The fewest pods to evict from `node_info` for `pod` to fit, most important first,
    /// with the number of them that violate a PodDisruptionBudget. `state` and
    /// `node_info` are copies the implementation may change. A non-success status says
    /// why the node is not a candidate.
    fn select_victims_on_node(
        &self,
        framework: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        node_info: &mut NodeInfo,
        pdbs: &[Arc<PodDisruptionBudget>],
    ) -> (Vec<Arc<Pod>>, usize, Status);

    /// The ordered score functions to choose among several candidates; empty (the
    /// default) for upstream's criteria (see [`pick_one_node_for_preemption`]).
    fn ordered_score_funcs<'a>(&self, _candidates: &'a [Candidate]) -> Vec<ScoreFn<'a>> {
        Vec::new()
    }
}

/// The outcome of a dry run (upstream `DryRunPreemption`'s results).
#[derive(Debug, Clone, Default)]
pub struct DryRunResult {
    /// The candidates: those without PodDisruptionBudget violations first.
    pub candidates: Vec<Candidate>,
    /// Why each evaluated node that is not a candidate is not one.
    pub node_to_status: NodeToStatus,
    /// The messages of the nodes that failed with an error.
    pub errors: Vec<String>,
}

/// Runs preemption for one pod (upstream `preemption.Evaluator`).
pub struct Evaluator<'a> {
    /// The name of the preemption plugin (for logs).
    pub plugin_name: &'static str,
    /// The plugin's handle: the framework, the API client, the listers, the nominator
    /// and the recorder.
    pub handle: &'a Handle,
    /// The plugin-specific parts.
    pub interface: &'a dyn Interface,
}

/// Upstream's aggregate of error messages: the message alone, or `[a, b]`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl Evaluator<'_> {
    /// Preempts for `pod` (upstream `Evaluator.Preempt`), given the Filter statuses of
    /// the nodes in `m`:
    ///
    /// - `(None, Unschedulable)`: the pod may not preempt (its nomination stays);
    /// - `(None, Error)`: something failed, to be retried;
    /// - `(Some(result without node), Unschedulable)`: no node can be made to fit; the
    ///   message is `0/N nodes are available: <histogram>.` and the pod's nomination is
    ///   to be cleared;
    /// - `(Some(result with node), Success)`: the victims are being evicted and the pod
    ///   is to be nominated to the node.
    pub async fn preempt(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        m: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // 1) Whether the pod may preempt at all.
        let nominated = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .unwrap_or_default();
        let nominated_status = m.get(nominated);
        if let Some(msg) =
            self.interface
                .pod_eligible_to_preempt_others(&pod.pod, snapshot, &nominated_status)
        {
            tracing::debug!(pod = %pod.key(), reason = %msg, "pod is not eligible for preemption");
            return (None, Status::unschedulable(msg));
        }
        let Some(framework) = self.handle.framework() else {
            return (
                None,
                Status::error("the scheduling framework is not available"),
            );
        };

        // 2) The candidates.
        let all_nodes = snapshot.num_nodes();
        let dry_run = match self.find_candidates(&framework, state, pod, snapshot, m) {
            Ok(r) => r,
            Err(s) => return (None, s),
        };
        if !dry_run.errors.is_empty() && dry_run.candidates.is_empty() {
            return (None, Status::error(aggregate(&dry_run.errors)));
        }
        if dry_run.candidates.is_empty() {
            tracing::debug!(
                pod = %pod.key(),
                "no preemption candidate is found; preemption is not helpful for scheduling"
            );
            let mut node_to_status = dry_run.node_to_status;
            node_to_status.absent = Some(Status::unresolvable(PREEMPTION_NOT_HELPFUL));
            let fit_error = FitError {
                num_all_nodes: all_nodes,
                diagnosis: Diagnosis {
                    node_to_status,
                    ..Diagnosis::default()
                },
            };
            return (
                Some(PostFilterResult {
                    nominated_node_name: None,
                }),
                Status::unschedulable(fit_error.to_string()),
            );
        }

        // 3) The best candidate.
        let Some(best) = self.select_candidate(&dry_run.candidates) else {
            return (
                None,
                Status::unschedulable("no candidate node for preemption"),
            );
        };
        if best.name.is_empty() {
            return (
                None,
                Status::unschedulable("no candidate node for preemption"),
            );
        }
        tracing::info!(
            pod = %pod.key(),
            node = %best.name,
            victims = best.victims.pods.len(),
            "the target node for the preemption is determined"
        );
        self.handle
            .observer
            .preemption_victims(best.victims.pods.len());

        // 4) Evict the victims.
        let s = self.prepare_candidate(best, pod).await;
        if !s.is_success() {
            return (None, s);
        }
        (
            Some(PostFilterResult {
                nominated_node_name: Some(best.name.clone()),
            }),
            Status::success(),
        )
    }

    /// The nodes where preemption may help, those Filter found Unschedulable (not
    /// UnschedulableAndUnresolvable), dry-run from a random offset (upstream
    /// `findCandidates`). Errors: no nodes at all.
    pub fn find_candidates(
        &self,
        framework: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        m: &NodeToStatus,
    ) -> Result<DryRunResult, Status> {
        if snapshot.num_nodes() == 0 {
            return Err(Status::error("no nodes available"));
        }
        let potential: Vec<Arc<NodeInfo>> = snapshot
            .list()
            .iter()
            .filter(|n| m.get(n.name()).code() == Code::Unschedulable)
            .cloned()
            .collect();
        if potential.is_empty() {
            tracing::debug!(pod = %pod.key(), "preemption will not help schedule pod on any node");
            return Ok(DryRunResult::default());
        }
        let pdbs = self.handle.listers.pdbs.list();
        let (offset, num_candidates) = self
            .interface
            .get_offset_and_num_candidates(potential.len());
        Ok(self.dry_run_preemption(
            framework,
            state,
            pod,
            &potential,
            &pdbs,
            offset,
            num_candidates,
        ))
    }

    /// Simulates preemption on `potential_nodes` from `offset` (wrapping around) until
    /// `num_candidates` candidates, at least one without PodDisruptionBudget violations,
    /// are found (upstream `DryRunPreemption`). Each node is evaluated on copies of the
    /// node and of `state`.
    #[allow(clippy::too_many_arguments)]
    pub fn dry_run_preemption(
        &self,
        framework: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        potential_nodes: &[Arc<NodeInfo>],
        pdbs: &[Arc<PodDisruptionBudget>],
        offset: usize,
        num_candidates: usize,
    ) -> DryRunResult {
        let mut non_violating: Vec<Candidate> = Vec::new();
        let mut violating: Vec<Candidate> = Vec::new();
        let mut result = DryRunResult::default();
        let len = potential_nodes.len();
        for i in 0..len {
            if !non_violating.is_empty() && non_violating.len() + violating.len() >= num_candidates
            {
                break;
            }
            let Some(node) = potential_nodes.get((offset + i) % len) else {
                continue;
            };
            let mut node_copy = (**node).clone();
            let mut state_copy = state.clone();
            let (pods, violations, status) = self.interface.select_victims_on_node(
                framework,
                &mut state_copy,
                pod,
                &mut node_copy,
                pdbs,
            );
            let name = node.name().to_owned();
            let status = if status.is_success() && pods.is_empty() {
                Status::error(format!("expected at least one victim pod on node {name:?}"))
            } else {
                status
            };
            if status.is_success() {
                let c = Candidate {
                    name,
                    victims: Victims {
                        pods,
                        num_pdb_violations: i64::try_from(violations).unwrap_or(i64::MAX),
                    },
                };
                let list = if violations == 0 {
                    &mut non_violating
                } else {
                    &mut violating
                };
                if list.len() < num_candidates {
                    list.push(c);
                }
                continue;
            }
            if status.code() == Code::Error {
                result.errors.push(status.message());
            }
            result.node_to_status.statuses.insert(name, status);
        }
        non_violating.extend(violating);
        result.candidates = non_violating;
        result
    }

    /// The best of `candidates` (upstream `SelectCandidate`): the only one, or the one
    /// [`pick_one_node_for_preemption`] chooses with the interface's score functions.
    pub fn select_candidate<'c>(&self, candidates: &'c [Candidate]) -> Option<&'c Candidate> {
        if candidates.len() <= 1 {
            return candidates.first();
        }
        let funcs = self.interface.ordered_score_funcs(candidates);
        let i = pick_one_node_for_preemption(candidates, funcs)?;
        candidates.get(i).or_else(|| candidates.first())
    }

    /// Evicts the victims of `c` and clears the nomination of the lower-priority pods
    /// nominated to its node (upstream `prepareCandidate`). Victims already terminating
    /// are left alone. Each other victim gets the `DisruptionTarget` condition (a status
    /// patch), is deleted with its own grace period and gets a `Preempted` event. Error:
    /// no API client, or a patch or delete that failed (other than NotFound).
    pub async fn prepare_candidate(&self, c: &Candidate, pod: &PodInfo) -> Status {
        let Some(client) = self.handle.client.clone() else {
            return Status::error("no API client to preempt pods with");
        };
        let scheduler_name = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .or_else(|| {
                self.handle
                    .framework()
                    .map(|f| f.scheduler_name().to_owned())
            })
            .unwrap_or_default();
        let evictions = c
            .victims
            .pods
            .iter()
            .filter(|v| {
                let terminating = v.metadata.deletion_timestamp.is_some();
                if terminating {
                    tracing::debug!(
                        preemptor = %pod.key(),
                        victim = %pod_key(v),
                        node = %c.name,
                        "victim pod is already being deleted, skipping the API call for it"
                    );
                }
                !terminating
            })
            .map(|v| self.preempt_pod(client.clone(), c, &pod.pod, v, &scheduler_name));
        if let Err(e) = futures::future::try_join_all(evictions).await {
            return Status::error(e);
        }

        // Lower-priority pods nominated to the node may no longer fit: clear their
        // nomination so that they are rescheduled sooner (failures are not critical).
        let priority = pod_priority(&pod.pod);
        for p in self.handle.nominator.nominated_pods_for_node(&c.name) {
            if pod_priority(&p.pod) >= priority {
                continue;
            }
            if let Err(e) = clear_nominated_node_name(&client, &p.pod).await {
                tracing::warn!(pod = %p.key(), error = %e, "cannot clear 'NominatedNodeName' field");
            }
        }
        Status::success()
    }

    /// Evicts one victim (upstream `Evaluator.PreemptPod`): the `DisruptionTarget`
    /// condition, the deletion, the `Preempted` event. A victim already gone is not an
    /// error.
    async fn preempt_pod(
        &self,
        client: kube::Client,
        c: &Candidate,
        preemptor: &Pod,
        victim: &Pod,
        scheduler_name: &str,
    ) -> Result<(), kube::Error> {
        let namespace = victim.metadata.namespace.as_deref().unwrap_or_default();
        let name = victim.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client, namespace);
        if let Some(condition) = disruption_condition(victim, scheduler_name, Timestamp::now()) {
            let patch = serde_json::json!({ "status": { "conditions": [condition] } });
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    tracing::debug!(victim = %pod_key(victim), node = %c.name, "victim pod is already deleted");
                    return Ok(());
                }
                Err(e) => {
                    tracing::error!(
                        preemptor = %pod_key(preemptor),
                        victim = %pod_key(victim),
                        error = %e,
                        "could not add DisruptionTarget condition due to preemption"
                    );
                    return Err(e);
                }
            }
        }
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                tracing::debug!(victim = %pod_key(victim), node = %c.name, "victim pod is already deleted");
                return Ok(());
            }
            Err(e) => {
                tracing::error!(
                    preemptor = %pod_key(preemptor),
                    victim = %pod_key(victim),
                    error = %e,
                    "tried to preempt pod"
                );
                return Err(e);
            }
        }
        tracing::info!(
            preemptor = %pod_key(preemptor),
            victim = %pod_key(victim),
            node = %c.name,
            "preemptor pod preempted victim pod"
        );
        self.handle.recorder.event(
            victim,
            None,
            "Normal",
            "Preempted",
            "Preempting",
            &preempted_note(preemptor, &c.name),
        );
        Ok(())
    }
}

/// The note of the `Preempted` event on a victim: `Preempted by pod <uid> on node <node>`.
pub fn preempted_note(preemptor: &Pod, node: &str) -> String {
    format!("Preempted by pod {} on node {node}", pod_uid(preemptor))
}

/// The `DisruptionTarget` condition to set on `victim` at `now` (status True, reason
/// `PreemptionByScheduler`, message `<scheduler>: preempting to accommodate a higher
/// priority pod`), or None when the pod already has it unchanged (upstream
/// `UpdatePodCondition`: the transition time is kept when the status does not change).
pub fn disruption_condition(
    victim: &Pod,
    scheduler_name: &str,
    now: Timestamp,
) -> Option<PodCondition> {
    let mut condition = PodCondition {
        type_: DISRUPTION_TARGET.to_owned(),
        status: "True".to_owned(),
        reason: Some(REASON_PREEMPTION_BY_SCHEDULER.to_owned()),
        message: Some(format!(
            "{scheduler_name}: preempting to accommodate a higher priority pod"
        )),
        last_transition_time: Some(Time(now)),
        ..PodCondition::default()
    };
    let old = victim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_TARGET));
    let Some(old) = old else {
        return Some(condition);
    };
    if old.status == condition.status {
        condition
            .last_transition_time
            .clone_from(&old.last_transition_time);
    }
    let equal = old.status == condition.status
        && old.reason == condition.reason
        && old.message == condition.message
        && old.last_probe_time == condition.last_probe_time
        && old.last_transition_time == condition.last_transition_time;
    (!equal).then_some(condition)
}

/// Clears `pod`'s `status.nominatedNodeName` with a status patch, when it is set
/// (upstream `clearNominatedNodeName`).
async fn clear_nominated_node_name(client: &kube::Client, pod: &Pod) -> Result<(), kube::Error> {
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or_default();
    if nominated.is_empty() {
        return Ok(());
    }
    let api: Api<Pod> = Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let patch = serde_json::json!({ "status": { "nominatedNodeName": null } });
    api.patch_status(
        pod.metadata.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await
    .map(|_| ())
}

/// When `pod` started (`status.startTime`), `now` for a pod not started yet (upstream
/// `GetPodStartTime`).
pub fn pod_start_time(pod: &Pod, now: Timestamp) -> Timestamp {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(now, |t| t.0)
}

/// The order of importance (upstream `MoreImportantPod`): higher priority first, then
/// the pod that started earlier (one not started counts as started `now`).
/// `Ordering::Less` when `a` is more important than `b`.
pub fn importance_order(a: &Pod, b: &Pod, now: Timestamp) -> Ordering {
    pod_priority(b)
        .cmp(&pod_priority(a))
        .then_with(|| pod_start_time(a, now).cmp(&pod_start_time(b, now)))
}

/// The earliest start time among the highest-priority pods of `victims` (upstream
/// `GetEarliestPodStartTime`); None without victims.
pub fn earliest_pod_start_time(victims: &Victims, now: Timestamp) -> Option<Timestamp> {
    let max = victims.pods.iter().map(|p| pod_priority(p)).max()?;
    victims
        .pods
        .iter()
        .filter(|p| pod_priority(p) == max)
        .map(|p| pod_start_time(p, now))
        .min()
}

/// Chooses one of `candidates` (upstream `pickOneNodeForPreemption`); its index. Each
/// score function keeps the candidates with the highest score, the next one breaks the
/// ties. Without functions, upstream's criteria apply, in order:
///
/// 1. the fewest PodDisruptionBudget violations;
/// 2. the lowest priority of the most important victim;
/// 3. the smallest sum of the victims' priorities (each shifted by 2^31 to be positive);
/// 4. the fewest victims;
/// 5. the latest start time of the earliest-started highest-priority victim;
/// 6. the first candidate.
pub fn pick_one_node_for_preemption(
    candidates: &[Candidate],
    score_funcs: Vec<ScoreFn<'_>>,
) -> Option<usize> {
    if candidates.is_empty() {
        return None;
    }
    let now = Timestamp::now();
    let victims = |node: &str| {
        candidates
            .iter()
            .find(|c| c.name == node)
            .map(|c| &c.victims)
    };
    let funcs: Vec<ScoreFn<'_>> = if score_funcs.is_empty() {
        vec![
            Box::new(move |n| victims(n).map_or(i64::MIN, |v| -v.num_pdb_violations)),
            Box::new(move |n| {
                victims(n)
                    .and_then(|v| v.pods.first())
                    .map_or(i64::MIN, |p| -i64::from(pod_priority(p)))
            }),
            Box::new(move |n| {
                victims(n).map_or(i64::MIN, |v| {
                    -v.pods
                        .iter()
                        .map(|p| i64::from(pod_priority(p)) + i64::from(i32::MAX) + 1)
                        .sum::<i64>()
                })
            }),
            Box::new(move |n| {
                victims(n).map_or(i64::MIN, |v| {
                    -i64::try_from(v.pods.len()).unwrap_or(i64::MAX)
                })
            }),
            Box::new(move |n| {
                victims(n)
                    .and_then(|v| earliest_pod_start_time(v, now))
                    .map_or(i64::MIN, |t| {
                        i64::try_from(t.as_nanosecond()).unwrap_or(i64::MIN)
                    })
            }),
        ]
    } else {
        score_funcs
    };
    let mut remaining: Vec<usize> = (0..candidates.len()).collect();
    for f in &funcs {
        let scores: Vec<(usize, i64)> = remaining
            .iter()
            .filter_map(|&i| candidates.get(i).map(|c| (i, f(&c.name))))
            .collect();
        let Some(max) = scores.iter().map(|(_, s)| *s).max() else {
            break;
        };
        remaining = scores
            .into_iter()
            .filter(|(_, s)| *s == max)
            .map(|(i, _)| i)
            .collect();
        if remaining.len() == 1 {
            break;
        }
    }
    remaining.first().copied()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(name: &str, priority: i32, start: Option<i64>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                priority: Some(priority),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                start_time: start.map(|s| Time(Timestamp::from_second(s).unwrap())),
                ..PodStatus::default()
            }),
        })
    }

    fn candidate(name: &str, violations: i64, pods: Vec<Arc<Pod>>) -> Candidate {
        Candidate {
            name: name.into(),
            victims: Victims {
                pods,
                num_pdb_violations: violations,
            },
        }
    }

    #[test]
    fn pick_one_node_criteria() {
        let cases: Vec<(&str, Vec<Candidate>, &str)> = vec![
            (
                "fewest PDB violations beats everything else",
                vec![
                    candidate("a", 1, vec![pod("a1", 0, Some(1))]),
                    candidate(
                        "b",
                        0,
                        vec![pod("b1", 100, Some(1)), pod("b2", 100, Some(1))],
                    ),
                ],
                "b",
            ),
            (
                "lowest priority of the most important victim",
                vec![
                    candidate("a", 0, vec![pod("a1", 3, Some(1))]),
                    candidate("b", 0, vec![pod("b1", 2, Some(1)), pod("b2", 2, Some(1))]),
                ],
                "b",
            ),
            (
                "smallest sum of priorities",
                vec![
                    candidate("a", 0, vec![pod("a1", 5, Some(1)), pod("a2", 4, Some(1))]),
                    candidate("b", 0, vec![pod("b1", 5, Some(1)), pod("b2", 3, Some(1))]),
                ],
                "b",
            ),
            (
                "sum with negative priorities counts each victim",
                vec![
                    candidate(
                        "a",
                        0,
                        vec![pod("a1", -10, Some(1)), pod("a2", -10, Some(1))],
                    ),
                    candidate("b", 0, vec![pod("b1", -10, Some(1))]),
                ],
                "b",
            ),
            (
                "fewest victims when the sums are equal",
                vec![
                    candidate("a", 0, vec![pod("a1", 0, Some(1))]),
                    candidate(
                        "b",
                        0,
                        vec![pod("b1", 0, Some(1)), pod("b2", i32::MIN, Some(1))],
                    ),
                ],
                "a",
            ),
            (
                "latest start time of the highest-priority victims",
                vec![
                    candidate(
                        "a",
                        0,
                        vec![pod("a1", 5, Some(300)), pod("a2", 5, Some(100))],
                    ),
                    candidate(
                        "b",
                        0,
                        vec![pod("b1", 5, Some(200)), pod("b2", 5, Some(250))],
                    ),
                ],
                "b",
            ),
            (
                "a victim not started yet counts as started now",
                vec![
                    candidate("a", 0, vec![pod("a1", 5, Some(100))]),
                    candidate("b", 0, vec![pod("b1", 5, None)]),
                ],
                "b",
            ),
            (
                "the first of equal candidates",
                vec![
                    candidate("a", 0, vec![pod("a1", 5, Some(100))]),
                    candidate("b", 0, vec![pod("b1", 5, Some(100))]),
                ],
                "a",
            ),
        ];
        for (name, candidates, want) in cases {
            let i = pick_one_node_for_preemption(&candidates, Vec::new());
            assert_eq!(
                i.and_then(|i| candidates.get(i)).map(|c| c.name.as_str()),
                Some(want),
                "{name}"
            );
        }
        assert_eq!(pick_one_node_for_preemption(&[], Vec::new()), None);
    }

    #[test]
    fn pick_one_node_with_custom_score_functions() {
        let candidates = vec![
            candidate("a", 0, vec![pod("a1", 1, Some(1))]),
            candidate("b", 5, vec![pod("b1", 9, Some(1))]),
            candidate("c", 5, vec![pod("c1", 8, Some(1))]),
        ];
        // Most violations first, then the highest priority: upstream's criteria do not
        // apply once functions are given.
        let funcs: Vec<ScoreFn<'_>> = vec![
            Box::new(|n| if n == "a" { 0 } else { 5 }),
            Box::new(|n| if n == "b" { 9 } else { 8 }),
        ];
        assert_eq!(pick_one_node_for_preemption(&candidates, funcs), Some(1));
    }

    #[test]
    fn importance_and_earliest_start() {
        let now = Timestamp::from_second(1_000).unwrap();
        let high = pod("high", 10, Some(500));
        let old = pod("old", 1, Some(100));
        let young = pod("young", 1, Some(200));
        let pending = pod("pending", 1, None);
        assert_eq!(importance_order(&high, &old, now), Ordering::Less);
        assert_eq!(importance_order(&old, &young, now), Ordering::Less);
        assert_eq!(importance_order(&pending, &young, now), Ordering::Greater);
        let v = Victims {
            pods: vec![Arc::clone(&high), pod("high2", 10, Some(400)), old],
            num_pdb_violations: 0,
        };
        assert_eq!(
            earliest_pod_start_time(&v, now),
            Some(Timestamp::from_second(400).unwrap())
        );
        assert_eq!(earliest_pod_start_time(&Victims::default(), now), None);
    }

    #[test]
    fn disruption_target_condition() {
        let now = Timestamp::from_second(1_000).unwrap();
        let victim = pod("v", 1, Some(1));
        let c = disruption_condition(&victim, "default-scheduler", now).unwrap();
        assert_eq!(c.type_, "DisruptionTarget");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("PreemptionByScheduler"));
        assert_eq!(
            c.message.as_deref(),
            Some("default-scheduler: preempting to accommodate a higher priority pod")
        );
        assert_eq!(c.last_transition_time, Some(Time(now)));

        // Already set the same way: no patch.
        let mut with = (*victim).clone();
        with.status.get_or_insert_default().conditions = Some(vec![c.clone()]);
        let later = Timestamp::from_second(2_000).unwrap();
        assert_eq!(
            disruption_condition(&with, "default-scheduler", later),
            None
        );

        // Set by another scheduler: updated, the transition time kept.
        let changed = disruption_condition(&with, "my-scheduler", later).unwrap();
        assert_eq!(
            changed.message.as_deref(),
            Some("my-scheduler: preempting to accommodate a higher priority pod")
        );
        assert_eq!(changed.last_transition_time, Some(Time(now)));
    }

    #[test]
    fn notes_and_aggregates() {
        assert_eq!(
            preempted_note(&pod("p", 10, None), "node-1"),
            "Preempted by pod uid-p on node node-1"
        );
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
