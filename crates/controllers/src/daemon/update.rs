//! A DaemonSet's revisions and rolling updates (upstream
//! `pkg/controller/daemon/update.go`, over [`crate::controller_history`]): each template
//! the DaemonSet had is a ControllerRevision named `<daemonset>-<hash>`, whose data is
//! the patch that puts the template back; pods carry the hash of their revision. RollingUpdate replaces the pods
//! of older revisions within maxUnavailable, or, with maxSurge, starts the new pod
//! beside the old one and deletes the old one once the new one is available.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_api::core::pod::conditions::is_pod_available;
use skiff_api::selector::LabelSelector;

use super::util::{
    REVISION_HASH_LABEL, is_pod_updated, node_should_run, revision_matches, surge_count,
    template_generation, unavailable_count,
};
use super::{DaemonSetController, NodePods};
use crate::Error;
use crate::controller_history::{
    DEFAULT_REVISION_HISTORY_LIMIT, Parent, create_or_existing, delete_controller_revisions,
};
use crate::deployment::util::compute_hash;

/// What a rolling update step does: the pods to delete and the nodes to create a pod on.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Step {
    /// Names of the pods to delete.
    pub(super) delete: Vec<String>,
    /// Names of the nodes that get a new pod.
    pub(super) create: Vec<String>,
}

/// The pod of the current revision and the old pod on a node, each if any.
type NewAndOld<'a> = (Option<&'a Arc<Pod>>, Option<&'a Arc<Pod>>);

/// The one new and one old pod on a node, of those not being deleted (upstream
/// `findUpdatedPodsOnNode`); None when there are more of either, which manage prunes.
fn updated_pods_on_node<'a>(
    ds: &DaemonSet,
    pods: &'a [Arc<Pod>],
    hash: &str,
) -> Option<NewAndOld<'a>> {
    let generation = template_generation(ds);
    let (mut new, mut old) = (None, None);
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if is_pod_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// One step of a rolling update (upstream `rollingUpdate` with
/// `updatedDesiredNodeCounts`). maxSurge and maxUnavailable count out of the nodes that
/// should run the DaemonSet (both 0: maxUnavailable 1).
///
/// - Without surge, old pods are deleted (manage then creates their replacements) while
///   the nodes without an available pod of the current revision, those being replaced
///   included, stay within maxUnavailable; old pods not available go at once.
/// - With surge, a new pod is started beside the old one on up to maxSurge nodes at
///   once (at once where the old one is not available), and the old pod is deleted once
///   the new one is available; an old pod on a node that should no longer run it goes
///   only while more pods are available than are desired.
///
/// Errors: maxSurge or maxUnavailable is no valid int-or-percent; with surge, a pod's
/// node is unknown.
pub(super) fn rolling_update_step(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    mut node_pods: NodePods,
    hash: &str,
    now: Timestamp,
) -> Result<Step, Error> {
    let mut desired = 0;
    for node in nodes {
        if node_should_run(node, ds).0 {
            desired += 1;
            node_pods
                .entry(node.metadata.name.clone().unwrap_or_default())
                .or_default();
        }
    }
    let invalid = |what: &str, e: String| Error::Invalid(format!("invalid value for {what}: {e}"));
    let mut max_unavailable =
        unavailable_count(ds, desired).map_err(|e| invalid("MaxUnavailable", e))?;
    let max_surge = surge_count(ds, desired).map_err(|e| invalid("MaxSurge", e))?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        max_unavailable = 1;
    }
    let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
    let available = |p: &Pod| is_pod_available(p, min_ready, now);
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let mut step = Step::default();

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace_now = Vec::new();
        let mut candidates = Vec::new();
        for pods in node_pods.values() {
            let Some(found) = updated_pods_on_node(ds, pods, hash) else {
                // Excess pods: manage prunes them first; the node counts as unavailable.
                unavailable += 1;
                continue;
            };
            match found {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        replace_now.push(name(old));
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(name(old));
                    }
                }
            }
        }
        let room = usize::try_from(max_unavailable - unavailable).unwrap_or(0);
        step.delete = replace_now;
        step.delete.extend(candidates.into_iter().take(room));
        return Ok(step);
    }

    let known: BTreeMap<&str, &Arc<Node>> = nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect();
    let should_run = |node: &str| -> Result<bool, Error> {
        let n = known
            .get(node)
            .ok_or_else(|| Error::Invalid(format!("couldn't get node for nodeName {node:?}")))?;
        Ok(node_should_run(n, ds).0)
    };
    let mut surging = 0;
    let mut available_nodes = 0;
    let mut allowed_new = Vec::new();
    let mut candidate_new = Vec::new();
    let mut should_not_run = Vec::new();
    for (node, pods) in &node_pods {
        let Some((new, old)) = updated_pods_on_node(ds, pods, hash) else {
            surging += 1;
            continue;
        };
        if old.or(new).is_some_and(|p| available(p)) {
            available_nodes += 1;
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(old) {
                    if should_run(node)? {
                        allowed_new.push(node.clone());
                    } else {
                        step.delete.push(name(old));
                    }
                } else if !should_run(node)? {
                    should_not_run.push(name(old));
                } else if surging < max_surge {
                    candidate_new.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    step.delete.push(name(old));
                } else {
                    surging += 1;
                }
            }
        }
    }
    // With surge, full availability is expected: an old pod on a node that should not
    // run it goes only while the pods elsewhere make up for it.
    let deletable = usize::try_from(available_nodes - desired).unwrap_or(0);
    step.delete
        .extend(should_not_run.into_iter().take(deletable));
    let room = usize::try_from(max_surge - surging).unwrap_or(0);
    step.create = allowed_new;
    step.create.extend(candidate_new.into_iter().take(room));
    Ok(step)
}

impl DaemonSetController {
    /// One rolling update step (see [`rolling_update_step`]), carried out.
    pub(super) async fn rolling_update(
        &self,
        key: &str,
        ds: &DaemonSet,
        selector: &LabelSelector,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<(), Error> {
        let node_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let step = rolling_update_step(ds, nodes, node_pods, hash, Timestamp::now())?;
        if !step.delete.is_empty() || !step.create.is_empty() {
            tracing::debug!(daemonset = key, ?step, "rolling update");
        }
        self.sync_nodes(key, ds, step.delete, step.create, hash)
            .await
    }

    /// The revisions the DaemonSet controls, orphans matching its selector adopted
    /// (upstream `controlledHistories`).
    async fn controlled_revisions(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
    ) -> Result<Vec<Arc<ControllerRevision>>, Error> {
        let ns = ds.metadata.namespace.as_deref();
        let candidates = self
            .revisions
            .store()
            .list()
            .into_iter()
            .filter(|r| r.metadata.namespace.as_deref() == ns)
            .collect();
        self.claim(ds, selector, candidates).await
    }

    /// The DaemonSet's current revision and its old ones (upstream `constructHistory`):
    /// the revision holding the template now, created if there is none, its number
    /// raised above the old ones' if it was an old one (a rollback); duplicates of it
    /// merged into the newest.
    pub(super) async fn construct_history(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
    ) -> Result<(ControllerRevision, Vec<ControllerRevision>), Error> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or("");
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        let mut current = Vec::new();
        let mut old = Vec::new();
        for revision in self.controlled_revisions(ds, selector).await? {
            let mut revision = (*revision).clone();
            let labels = revision.metadata.labels.get_or_insert_with(BTreeMap::new);
            if !labels.contains_key(REVISION_HASH_LABEL) {
                // The name tells revisions apart as well as a hash would.
                let name = revision.metadata.name.clone().unwrap_or_default();
                labels.insert(REVISION_HASH_LABEL.to_owned(), name.clone());
                revision = api
                    .replace(&name, &PostParams::default(), &revision)
                    .await?;
            }
            if revision_matches(ds, &revision) {
                current.push(revision);
            } else {
                old.push(revision);
            }
        }
        let next = old
            .iter()
            .map(|r| r.revision.unwrap_or(0))
            .max()
            .unwrap_or(0)
            + 1;
        let current = if current.is_empty() {
            self.snapshot(ds, next).await?
        } else {
            let mut keep = self.dedup_current(ds, selector, current).await?;
            if keep.revision.unwrap_or(0) < next {
                keep.revision = Some(next);
                let name = keep.metadata.name.clone().unwrap_or_default();
                keep = api.replace(&name, &PostParams::default(), &keep).await?;
            }
            keep
        };
        Ok((current, old))
    }

    /// Keeps the newest of several revisions holding the current template and deletes
    /// the others, relabelling their pods first (upstream `dedupCurHistories`; upstream
    /// relabels every pod of another hash, here only the duplicates' pods).
    async fn dedup_current(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
        mut current: Vec<ControllerRevision>,
    ) -> Result<ControllerRevision, Error> {
        current.sort_by_key(|r| r.revision.unwrap_or(0));
        let Some(keep) = current.pop() else {
            return Err(Error::Invalid("no current revision".into()));
        };
        if current.is_empty() {
            return Ok(keep);
        }
        let hash_of = |r: &ControllerRevision| {
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_HASH_LABEL))
                .cloned()
                .unwrap_or_default()
        };
        let keep_hash = hash_of(&keep);
        let ns = ds.metadata.namespace.as_deref().unwrap_or("");
        let revisions: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let pods: Vec<Arc<Pod>> = self
            .nodes_to_daemon_pods(ds, selector, true)
            .await?
            .into_values()
            .flatten()
            .collect();
        for dup in current {
            let dup_hash = hash_of(&dup);
            for pod in &pods {
                let hash = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_HASH_LABEL));
                if hash != Some(&dup_hash) {
                    continue;
                }
                let patch = json!({"metadata": {"labels": {REVISION_HASH_LABEL: keep_hash}}});
                let name = pod.metadata.name.as_deref().unwrap_or("");
                match pods_api
                    .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            delete_controller_revisions(&revisions, [&dup]).await?;
        }
        Ok(keep)
    }

    /// Creates the revision of the DaemonSet's template, numbered `revision` (upstream
    /// `snapshot`). A revision of that name with other data is a hash collision: the
    /// DaemonSet's `status.collisionCount` is raised (so that the next sync hashes
    /// differently) and an error returned.
    async fn snapshot(&self, ds: &DaemonSet, revision: i64) -> Result<ControllerRevision, Error> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let ds_name = ds.metadata.name.clone().unwrap_or_default();
        let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&ds.spec.template, collisions);
        // Upstream's `ds.Name + "-" + hash`, not `ControllerRevisionName`.
        let name = format!("{ds_name}-{hash}");
        let parent = Parent {
            meta: &ds.metadata,
            api_version: "apps/v1",
            kind: "DaemonSet",
            template: &ds.spec.template,
            hash_label: REVISION_HASH_LABEL,
        };
        let history = parent.new_revision(name.clone(), hash, revision);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &ns);
        match create_or_existing(&api, &history).await? {
            Some(revision) => Ok(revision),
            // A hash collision.
            None => {
                let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), &ns);
                let mut fresh = sets.get(&ds_name).await?;
                let fresh_count = fresh.status.as_ref().and_then(|s| s.collision_count);
                if fresh_count != collisions {
                    return Err(Error::Invalid(format!(
                        "found a stale collision count ({collisions:?}, expected \
                         {fresh_count:?}) of DaemonSet {ds_name:?} while processing; will \
                         retry until it is updated"
                    )));
                }
                let status = fresh.status.get_or_insert_with(Default::default);
                status.collision_count = Some(fresh_count.unwrap_or(0).saturating_add(1));
                sets.replace_status(&ds_name, &PostParams::default(), &fresh)
                    .await?;
                Err(Error::Invalid(format!(
                    "found a hash collision for DaemonSet {ds_name:?} (revision {name:?}); \
                     bumped collisionCount"
                )))
            }
        }
    }

    /// Deletes the oldest old revisions beyond `revisionHistoryLimit` that no pod
    /// (terminated ones included) still belongs to (upstream `cleanupHistory`).
    pub(super) async fn cleanup_history(
        &self,
        ds: &DaemonSet,
        selector: &LabelSelector,
        mut old: Vec<ControllerRevision>,
    ) -> Result<(), Error> {
        let limit = ds
            .spec
            .revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT);
        let excess = old
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        if excess == 0 {
            return Ok(());
        }
        let live: HashSet<String> = self
            .nodes_to_daemon_pods(ds, selector, true)
            .await?
            .into_values()
            .flatten()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get(REVISION_HASH_LABEL)
                    .cloned()
            })
            .collect();
        old.sort_by_key(|r| r.revision.unwrap_or(0));
        let ns = ds.metadata.namespace.as_deref().unwrap_or("");
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        let unused: Vec<&ControllerRevision> = old
            .iter()
            .filter(|r| {
                let hash = r
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_HASH_LABEL));
                !hash.is_some_and(|h| live.contains(h))
            })
            .take(excess)
            .collect();
        delete_controller_revisions(&api, unused).await
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::super::group_by_node;
    use super::super::tests::pod;
    use super::super::util::tests::{daemon_set, node};
    use super::*;

    fn strategy(ds: &mut DaemonSet, surge: i32, unavailable: i32) {
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: Some(IntOrString::Int(surge)),
                max_unavailable: Some(IntOrString::Int(unavailable)),
            }),
        });
    }

    fn nodes(n: usize) -> Vec<Arc<Node>> {
        (1..=n)
            .map(|i| Arc::new(node(&format!("n{i}"), &[], &[])))
            .collect()
    }

    fn step(ds: &DaemonSet, nodes: &[Arc<Node>], pods: Vec<Arc<Pod>>) -> Step {
        let now = "2026-01-02T00:00:00Z".parse().unwrap();
        rolling_update_step(ds, nodes, group_by_node(pods, false), "new", now).unwrap()
    }

    #[test]
    fn without_surge_old_pods_go_within_max_unavailable() {
        let mut ds = daemon_set(PodSpec::default());
        strategy(&mut ds, 0, 2);
        let nodes = nodes(4);
        let old = |n: &str| pod(&format!("old-{n}"), n, "old", "Running", true);
        // All old and available: two go.
        let got = step(
            &ds,
            &nodes,
            vec![old("n1"), old("n2"), old("n3"), old("n4")],
        );
        assert_eq!(got.delete, ["old-n1", "old-n2"]);
        assert!(got.create.is_empty());
        // One node without a pod (being replaced) and one new pod not ready yet: none.
        let got = step(
            &ds,
            &nodes,
            vec![
                pod("new-n2", "n2", "new", "Pending", false),
                old("n3"),
                old("n4"),
            ],
        );
        assert_eq!(got, Step::default());
        // One new pod available: one more old pod may go.
        let got = step(
            &ds,
            &nodes,
            vec![
                pod("new-n2", "n2", "new", "Running", true),
                old("n3"),
                old("n4"),
            ],
        );
        assert_eq!(got.delete, ["old-n3"]);
        // An old pod that is not available is replaced regardless.
        let got = step(
            &ds,
            &nodes,
            vec![
                pod("new-n1", "n1", "new", "Pending", false),
                pod("new-n2", "n2", "new", "Pending", false),
                pod("sick-n3", "n3", "old", "Running", false),
                old("n4"),
            ],
        );
        assert_eq!(got.delete, ["sick-n3"]);
    }

    #[test]
    fn max_unavailable_zero_without_surge_means_one() {
        let mut ds = daemon_set(PodSpec::default());
        strategy(&mut ds, 0, 0);
        let nodes = nodes(2);
        let got = step(
            &ds,
            &nodes,
            vec![
                pod("old-n1", "n1", "old", "Running", true),
                pod("old-n2", "n2", "old", "Running", true),
            ],
        );
        assert_eq!(got.delete, ["old-n1"]);
    }

    #[test]
    fn with_surge_new_pods_start_beside_old_ones() {
        let mut ds = daemon_set(PodSpec::default());
        strategy(&mut ds, 1, 0);
        let nodes = nodes(3);
        let old = |n: &str| pod(&format!("old-{n}"), n, "old", "Running", true);
        let got = step(&ds, &nodes, vec![old("n1"), old("n2"), old("n3")]);
        assert_eq!(
            (got.delete.len(), got.create.clone()),
            (0, vec!["n1".to_owned()])
        );
        // Surging on n1: nothing more until the new pod is available.
        let got = step(
            &ds,
            &nodes,
            vec![
                old("n1"),
                pod("new-n1", "n1", "new", "Pending", false),
                old("n2"),
                old("n3"),
            ],
        );
        assert_eq!(got, Step::default());
        // Available: the old pod goes, and the next node surges.
        let got = step(
            &ds,
            &nodes,
            vec![
                old("n1"),
                pod("new-n1", "n1", "new", "Running", true),
                old("n2"),
                old("n3"),
            ],
        );
        assert_eq!(
            (got.delete, got.create),
            (vec!["old-n1".to_owned()], vec!["n2".to_owned()])
        );
        // An unavailable old pod gets its replacement at once, beyond maxSurge.
        let got = step(
            &ds,
            &nodes,
            vec![
                old("n1"),
                pod("new-n1", "n1", "new", "Pending", false),
                pod("sick-n2", "n2", "old", "Running", false),
                old("n3"),
            ],
        );
        assert_eq!(got.create, ["n2"]);
    }

    #[test]
    fn percentages_scale_with_the_nodes_that_should_run() {
        let mut ds = daemon_set(PodSpec::default());
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: Some(IntOrString::Int(0)),
                max_unavailable: Some(IntOrString::String("50%".into())),
            }),
        });
        let mut nodes = nodes(3);
        // A tainted node does not count: 50% of 3 rounds up to 2.
        nodes.push(Arc::new(node("n4", &[], &[("x", "NoSchedule")])));
        let pods = (1..=3)
            .map(|i| {
                pod(
                    &format!("old-n{i}"),
                    &format!("n{i}"),
                    "old",
                    "Running",
                    true,
                )
            })
            .collect::<Vec<_>>();
        let got = step(&ds, &nodes, pods);
        assert_eq!(got.delete, ["old-n1", "old-n2"]);
    }
}
