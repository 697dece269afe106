//! A StatefulSet's ControllerRevisions (upstream `getStatefulSetRevisions`,
//! `truncateHistory` and `pkg/controller/history`): each template the set had is a
//! revision `<set>-<hash>` whose data is the patch that puts the template back, labelled
//! with the template's labels and `controller.kubernetes.io/hash`; pods name theirs in
//! `controller-revision-hash`.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, PostParams};

use super::utils::{REVISION_HASH_LABEL, SET_API_VERSION, SET_KIND, pod_revision, revision_patch};
use super::{StatefulSetController, is_status, names};
use crate::Error;
use crate::controller_utils::controller_ref;
use crate::deployment::util::compute_hash;

/// The revisions a set keeps when `revisionHistoryLimit` is unset.
const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// How many names a new revision tries before giving up on hash collisions.
const MAX_COLLISIONS: usize = 16;

/// `<set>-<hash>`, the set's name cut to 223 bytes (upstream `ControllerRevisionName`).
pub(crate) fn revision_name(set: &str, hash: &str) -> String {
    let mut end = set.len().min(223);
    while !set.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &set[..end])
}

/// The old revisions to delete (upstream `truncateHistory`): of `revisions` (sorted,
/// oldest first), those neither `live` nor among the newest `limit` of the rest; none
/// with a negative limit.
pub(crate) fn revisions_to_delete<'a>(
    revisions: &'a [ControllerRevision],
    live: &HashSet<&str>,
    limit: i32,
) -> Vec<&'a ControllerRevision> {
    let history: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or("")))
        .collect();
    let Ok(limit) = usize::try_from(limit) else {
        return Vec::new();
    };
    let excess = history.len().saturating_sub(limit);
    history.into_iter().take(excess).collect()
}

impl StatefulSetController {
    /// The current and update revisions and the collision count (upstream
    /// `getStatefulSetRevisions`), from `revisions` sorted oldest first. The update
    /// revision holds the set's template: the newest revision if it does, else an older
    /// one that does, renumbered as the newest (a rollback), else a new one. The current
    /// revision is the one `status.currentRevision` names, else the update revision.
    pub(super) async fn revisions_of(
        &self,
        set: &StatefulSet,
        revisions: &[ControllerRevision],
    ) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
        let mut collisions = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let data = revision_patch(&set.spec.template);
        let next = revisions.last().and_then(|r| r.revision).unwrap_or(0) + 1;
        let equal = revisions.iter().rev().find(|r| r.data.0 == data);
        let update = match equal {
            Some(r) if revisions.last().is_some_and(|last| last.data.0 == data) => r.clone(),
            Some(r) => self.renumber(r, next).await?,
            None => self.create_revision(set, next, &mut collisions).await?,
        };
        let wanted = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref());
        let current = revisions
            .iter()
            .find(|r| wanted.is_some() && r.metadata.name.as_deref() == wanted)
            .cloned()
            .unwrap_or_else(|| update.clone());
        Ok((current, update, collisions))
    }

    /// Gives the revision the number `revision` (upstream `UpdateControllerRevision`),
    /// retrying a conflict once on the revision read afresh.
    async fn renumber(
        &self,
        revision: &ControllerRevision,
        number: i64,
    ) -> Result<ControllerRevision, Error> {
        if revision.revision == Some(number) {
            return Ok(revision.clone());
        }
        let (ns, name) = names(&revision.metadata);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        let mut r = revision.clone();
        r.revision = Some(number);
        match api.replace(name, &PostParams::default(), &r).await {
            Ok(r) => Ok(r),
            Err(e) if is_status(&e, 409) => {
                let mut fresh = api.get(name).await?;
                fresh.revision = Some(number);
                Ok(api.replace(name, &PostParams::default(), &fresh).await?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the revision of the set's template numbered `number` (upstream
    /// `newRevision` and `CreateControllerRevision`): a name taken by a revision with
    /// other data is a hash collision, which raises `collisions` and tries the next name.
    async fn create_revision(
        &self,
        set: &StatefulSet,
        number: i64,
        collisions: &mut i32,
    ) -> Result<ControllerRevision, Error> {
        let (ns, set_name) = names(&set.metadata);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        let data = revision_patch(&set.spec.template);
        for _ in 0..MAX_COLLISIONS {
            let hash = compute_hash(&set.spec.template, Some(*collisions));
            let name = revision_name(set_name, &hash);
            let mut labels = set
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(REVISION_HASH_LABEL.to_owned(), hash);
            let revision = ControllerRevision {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.to_owned()),
                    labels: Some(labels),
                    annotations: set.metadata.annotations.clone(),
                    owner_references: Some(vec![controller_ref(
                        &set.metadata,
                        SET_API_VERSION,
                        SET_KIND,
                    )]),
                    ..Default::default()
                },
                data: RawExtension(data.clone()),
                revision: Some(number),
            };
            match api.create(&PostParams::default(), &revision).await {
                Ok(created) => return Ok(created),
                Err(e) if is_status(&e, 409) => {
                    let existing = api.get(&name).await?;
                    if existing.data.0 == data {
                        return Ok(existing);
                    }
                    *collisions = collisions.saturating_add(1);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Invalid(format!(
            "StatefulSet {ns}/{set_name}: {MAX_COLLISIONS} revision hash collisions in a row"
        )))
    }

    /// Deletes the oldest revisions beyond `revisionHistoryLimit` that are neither the
    /// current nor the update revision nor any pod's (upstream `truncateHistory`).
    pub(super) async fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[ControllerRevision],
        current: &str,
        update: &str,
    ) -> Result<(), Error> {
        let mut live: HashSet<&str> = pods.iter().map(|p| pod_revision(p)).collect();
        live.insert(current);
        live.insert(update);
        let limit = set
            .spec
            .revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT);
        let (ns, _) = names(&set.metadata);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), ns);
        for r in revisions_to_delete(revisions, &live, limit) {
            let name = r.metadata.name.as_deref().unwrap_or("");
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 404) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(name: &str, number: i64) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            revision: Some(number),
            ..Default::default()
        }
    }

    #[test]
    fn history_keeps_live_revisions_and_the_newest_old_ones() {
        let revisions: Vec<_> = (1..=5).map(|i| rev(&format!("web-{i}"), i)).collect();
        let live: HashSet<&str> = ["web-2", "web-5"].into();
        let names = |v: Vec<&ControllerRevision>| -> Vec<String> {
            v.iter().map(|r| r.metadata.name.clone().unwrap()).collect()
        };
        assert_eq!(
            names(revisions_to_delete(&revisions, &live, 1)),
            ["web-1", "web-3"]
        );
        assert!(revisions_to_delete(&revisions, &live, 3).is_empty());
        assert_eq!(revisions_to_delete(&revisions, &live, 0).len(), 3);
        assert!(revisions_to_delete(&revisions, &live, -1).is_empty());
    }

    #[test]
    fn revision_names_cut_long_sets() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "h").len(), 225);
    }
}
