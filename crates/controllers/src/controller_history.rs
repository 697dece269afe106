//! ControllerRevisions, the template history of DaemonSets and StatefulSets (upstream
//! `pkg/controller/history/controller_history.go`, with what the DaemonSet's `update.go`
//! and the StatefulSet's `stateful_set_utils.go` repeat of it): each pod template a
//! parent had is a revision whose data is the patch that puts the template back
//! ([`revision_patch`], upstream `getPatch`), named `<parent>-<hash>`, labelled with the
//! template's labels and its hash, controlled by the parent and numbered in order. A name
//! taken by a revision with other data is a hash collision, which the parent's
//! `status.collisionCount` resolves.

use std::cmp::Ordering;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::Error;
use crate::controller_utils::controller_ref;
use crate::deployment::util::compute_hash;

/// The revisions a parent keeps when `revisionHistoryLimit` is unset (the API's default
/// for DaemonSets and StatefulSets).
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// How many names [`create_controller_revision`] tries before giving up on hash
/// collisions.
const MAX_COLLISIONS: usize = 16;

/// The owner of revisions: a DaemonSet or a StatefulSet, its template and the label its
/// revisions carry their hash in.
#[derive(Debug, Clone, Copy)]
pub struct Parent<'a> {
    /// The parent's metadata (name, namespace, uid, annotations).
    pub meta: &'a ObjectMeta,
    /// `apps/v1`.
    pub api_version: &'a str,
    /// `DaemonSet` or `StatefulSet`.
    pub kind: &'a str,
    /// The parent's pod template.
    pub template: &'a PodTemplateSpec,
    /// The label of the revision's hash: upstream `history.ControllerRevisionHashLabel`
    /// (`controller.kubernetes.io/hash`) for StatefulSets, `controller-revision-hash`
    /// for DaemonSets.
    pub hash_label: &'a str,
}

impl Parent<'_> {
    /// The revision `name` numbered `number` holding the parent's template (upstream
    /// `NewControllerRevision`, the hash given): the template's labels plus the hash,
    /// the parent's annotations, a controller reference to the parent.
    pub fn new_revision(&self, name: String, hash: String, number: i64) -> ControllerRevision {
        let mut labels = self
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(self.hash_label.to_owned(), hash);
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.namespace().to_owned()),
                labels: Some(labels),
                annotations: self.meta.annotations.clone(),
                owner_references: Some(vec![controller_ref(
                    self.meta,
                    self.api_version,
                    self.kind,
                )]),
                ..Default::default()
            },
            data: RawExtension(revision_patch(self.template)),
            revision: Some(number),
        }
    }

    fn namespace(&self) -> &str {
        self.meta.namespace.as_deref().unwrap_or("")
    }

    fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or("")
    }
}

/// `<prefix>-<hash>`, the prefix cut to 223 bytes so that the name stays a valid
/// subdomain (upstream `ControllerRevisionName`).
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(223);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &prefix[..end])
}

/// The data of a revision of `template` (upstream `getPatch`, the DaemonSet's and the
/// StatefulSet's): a strategic merge patch that replaces the parent's `spec.template`,
/// which is what `kubectl rollout undo` applies to go back to it.
pub fn revision_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(m) = t.as_object_mut() {
        m.insert("$patch".to_owned(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// Revisions oldest first: by number, then creation, then name (upstream
/// `SortControllerRevisions`).
pub fn sort_controller_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(by_revision);
}

fn by_revision(a: &ControllerRevision, b: &ControllerRevision) -> Ordering {
    (a.revision, &a.metadata.creation_timestamp, &a.metadata.name).cmp(&(
        b.revision,
        &b.metadata.creation_timestamp,
        &b.metadata.name,
    ))
}

/// Creates `revision`; a revision of that name already there is taken if it holds the
/// same data (upstream `EqualRevision`), else it is a hash collision: `None`.
pub async fn create_or_existing(
    api: &Api<ControllerRevision>,
    revision: &ControllerRevision,
) -> Result<Option<ControllerRevision>, Error> {
    match api.create(&PostParams::default(), revision).await {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = revision.metadata.name.as_deref().unwrap_or("");
            let existing = api.get(name).await?;
            Ok((existing.data.0 == revision.data.0).then_some(existing))
        }
        Err(e) => Err(e.into()),
    }
}

/// Creates the parent's revision numbered `number` (upstream `CreateControllerRevision`
/// after `NewControllerRevision`): named [`revision_name`] of the hash of the template
/// with `collisions`; a collision raises `collisions` and tries the next name.
pub async fn create_controller_revision(
    client: &kube::Client,
    parent: &Parent<'_>,
    number: i64,
    collisions: &mut i32,
) -> Result<ControllerRevision, Error> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), parent.namespace());
    for _ in 0..MAX_COLLISIONS {
        let hash = compute_hash(parent.template, Some(*collisions));
        let name = revision_name(parent.name(), &hash);
        let revision = parent.new_revision(name, hash, number);
        match create_or_existing(&api, &revision).await? {
            Some(created) => return Ok(created),
            None => *collisions = collisions.saturating_add(1),
        }
    }
    Err(Error::Invalid(format!(
        "{} {}/{}: {MAX_COLLISIONS} revision hash collisions in a row",
        parent.kind,
        parent.namespace(),
        parent.name()
    )))
}

/// Gives the revision the number `number` (upstream `UpdateControllerRevision`),
/// retrying a conflict once on the revision read afresh.
pub async fn update_controller_revision(
    client: &kube::Client,
    revision: &ControllerRevision,
    number: i64,
) -> Result<ControllerRevision, Error> {
    if revision.revision == Some(number) {
        return Ok(revision.clone());
    }
    let ns = revision.metadata.namespace.as_deref().unwrap_or("");
    let name = revision.metadata.name.as_deref().unwrap_or("");
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    let mut r = revision.clone();
    r.revision = Some(number);
    match api.replace(name, &PostParams::default(), &r).await {
        Ok(r) => Ok(r),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let mut fresh = api.get(name).await?;
            fresh.revision = Some(number);
            Ok(api.replace(name, &PostParams::default(), &fresh).await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes `revisions` in order (upstream `DeleteControllerRevision`, as the history
/// truncations call it); those already gone are skipped. Errors: the first failed
/// delete, which stops the rest.
pub async fn delete_controller_revisions<'a>(
    api: &Api<ControllerRevision>,
    revisions: impl IntoIterator<Item = &'a ControllerRevision>,
) -> Result<(), Error> {
    for r in revisions {
        let name = r.metadata.name.as_deref().unwrap_or("");
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    #[test]
    fn revision_names_cut_long_parents() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "h").len(), 225);
    }

    #[test]
    fn new_revisions_carry_the_template_and_its_hash() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            }),
            spec: None,
        };
        let meta = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("u1".into()),
            ..Default::default()
        };
        let parent = Parent {
            meta: &meta,
            api_version: "apps/v1",
            kind: "StatefulSet",
            template: &template,
            hash_label: "controller.kubernetes.io/hash",
        };
        let r = parent.new_revision("web-abc".into(), "abc".into(), 3);
        assert_eq!(r.metadata.namespace.as_deref(), Some("ns"));
        let labels = r.metadata.labels.unwrap();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels["controller.kubernetes.io/hash"], "abc");
        assert_eq!(r.revision, Some(3));
        assert_eq!(r.data.0, revision_patch(&template));
        assert_eq!(
            r.data.0.pointer("/spec/template/$patch"),
            Some(&json!("replace"))
        );
        let owner = &r.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("StatefulSet", "u1")
        );
    }

    #[test]
    fn revisions_sort_by_number_then_age_then_name() {
        let rev = |name: &str, number: i64, created: &str| ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(created.parse().unwrap())),
                ..Default::default()
            },
            revision: Some(number),
            ..Default::default()
        };
        let mut revisions = vec![
            rev("c", 2, "2026-01-01T00:00:00Z"),
            rev("b", 1, "2026-01-02T00:00:00Z"),
            rev("a", 1, "2026-01-02T00:00:00Z"),
            rev("d", 1, "2026-01-01T00:00:00Z"),
        ];
        sort_controller_revisions(&mut revisions);
        let names: Vec<_> = revisions
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["d", "a", "b", "c"]);
    }
}
