//! A StatefulSet's ControllerRevisions (upstream `getStatefulSetRevisions` and
//! `truncateHistory`, over [`crate::controller_history`]): each template the set had is a
//! revision `<set>-<hash>` whose data is the patch that puts the template back, labelled
//! with the template's labels and `controller.kubernetes.io/hash`; pods name theirs in
//! `controller-revision-hash`.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::utils::{REVISION_HASH_LABEL, SET_API_VERSION, SET_KIND, pod_revision};
use super::{StatefulSetController, names};
use crate::Error;
use crate::controller_history::{
    DEFAULT_REVISION_HISTORY_LIMIT, Parent, create_controller_revision,
    delete_controller_revisions, revision_patch, update_controller_revision,
};

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
            Some(r) => update_controller_revision(&self.client, r, next).await?,
            None => {
                let parent = Parent {
                    meta: &set.metadata,
                    api_version: SET_API_VERSION,
                    kind: SET_KIND,
                    template: &set.spec.template,
                    hash_label: REVISION_HASH_LABEL,
                };
                create_controller_revision(&self.client, &parent, next, &mut collisions).await?
            }
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
        delete_controller_revisions(&api, revisions_to_delete(revisions, &live, limit)).await
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
}
