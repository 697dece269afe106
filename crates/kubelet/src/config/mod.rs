//! Pod sources and their merge into pod updates (upstream `pkg/kubelet/config`).
//!
//! A source sends full snapshots of its pods; [`PodConfig`] turns each snapshot into
//! incremental [`PodUpdate`]s (ADD / UPDATE / REMOVE) for the SyncLoop.

pub mod file;
pub mod kubelet_configuration;
pub mod static_pod;
pub mod validation;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Pod;

/// What happened to the pods of an update (upstream `kubetypes.PodOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOperation {
    /// Pods new to the kubelet.
    Add,
    /// Pods whose definition changed (same UID).
    Update,
    /// Pods no longer desired.
    Remove,
}

/// A batch of pods from one source with one operation (upstream `kubetypes.PodUpdate`).
#[derive(Debug, Clone, PartialEq)]
pub struct PodUpdate {
    /// The operation applied to all `pods`.
    pub op: PodOperation,
    /// The pods concerned.
    pub pods: Vec<Pod>,
    /// The source name (`file`).
    pub source: String,
}

/// Set once every configured source has delivered its first snapshot and the updates it
/// produced were queued for the SyncLoop (upstream `SeenAllSources`); housekeeping must
/// not remove pods before that.
#[derive(Clone, Default)]
pub struct SourcesReady(Arc<AtomicBool>);

impl SourcesReady {
    /// True once all sources have been seen.
    pub fn all_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    /// Marks all sources seen. Call it only after the updates of the snapshot that
    /// completed the set are queued, so the SyncLoop can apply them before it trusts it.
    pub fn mark_ready(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Merges source snapshots into pod updates (upstream `podStorage` in `config.go`).
pub struct PodConfig {
    sources: HashSet<String>,
    seen: HashSet<String>,
    /// Pods by source, then UID.
    pods: HashMap<String, BTreeMap<String, Pod>>,
}

impl PodConfig {
    /// A merger expecting snapshots from `sources`.
    pub fn new(sources: &[&str]) -> Self {
        Self {
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            seen: HashSet::new(),
            pods: HashMap::new(),
        }
    }

    /// Replaces the pods of `source` with `snapshot`, returning the non-empty updates in
    /// the order REMOVE, ADD, UPDATE. Pods without UID are ignored. Once every source was
    /// merged, [`PodConfig::all_sources_seen`] is true; the caller marks [`SourcesReady`]
    /// after queuing the updates.
    pub fn merge(&mut self, source: &str, snapshot: Vec<Pod>) -> Vec<PodUpdate> {
        let old = self.pods.remove(source).unwrap_or_default();
        let mut new = BTreeMap::new();
        for pod in snapshot {
            if let Some(uid) = pod.metadata.uid.clone() {
                new.insert(uid, pod);
            }
        }
        let removed: Vec<Pod> = old
            .iter()
            .filter(|(uid, _)| !new.contains_key(*uid))
            .map(|(_, p)| p.clone())
            .collect();
        let mut added = Vec::new();
        let mut updated = Vec::new();
        for (uid, pod) in &new {
            match old.get(uid) {
                None => added.push(pod.clone()),
                Some(previous) if previous != pod => updated.push(pod.clone()),
                Some(_) => {}
            }
        }
        self.pods.insert(source.to_owned(), new);
        self.seen.insert(source.to_owned());
        [
            (PodOperation::Remove, removed),
            (PodOperation::Add, added),
            (PodOperation::Update, updated),
        ]
        .into_iter()
        .filter(|(_, pods)| !pods.is_empty())
        .map(|(op, pods)| PodUpdate {
            op,
            pods,
            source: source.to_owned(),
        })
        .collect()
    }

    /// True once every configured source has sent a snapshot.
    pub fn all_sources_seen(&self) -> bool {
        self.sources.is_subset(&self.seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str, restart: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(restart.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn ops(updates: &[PodUpdate]) -> Vec<(PodOperation, Vec<String>)> {
        updates
            .iter()
            .map(|u| {
                (
                    u.op,
                    u.pods
                        .iter()
                        .filter_map(|p| p.metadata.uid.clone())
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn snapshots_become_add_update_remove() {
        let mut config = PodConfig::new(&["file"]);
        assert!(!config.all_sources_seen());
        assert!(config.merge("file", vec![]).is_empty());
        assert!(config.all_sources_seen());

        let u = config.merge("file", vec![pod("a", "Always"), pod("b", "Always")]);
        assert_eq!(
            ops(&u),
            vec![(PodOperation::Add, vec!["a".into(), "b".into()])]
        );
        assert!(
            config
                .merge("file", vec![pod("a", "Always"), pod("b", "Always")])
                .is_empty()
        );

        let u = config.merge("file", vec![pod("a", "Never"), pod("c", "Always")]);
        assert_eq!(
            ops(&u),
            vec![
                (PodOperation::Remove, vec!["b".into()]),
                (PodOperation::Add, vec!["c".into()]),
                (PodOperation::Update, vec!["a".into()]),
            ]
        );
        let u = config.merge("file", vec![]);
        assert_eq!(
            ops(&u),
            vec![(PodOperation::Remove, vec!["a".into(), "c".into()])]
        );
    }

    #[test]
    fn edited_manifest_removes_old_uid_and_adds_new() {
        let mut config = PodConfig::new(&["file"]);
        config.merge("file", vec![pod("old", "Always")]);
        let u = config.merge("file", vec![pod("new", "Always")]);
        assert_eq!(
            ops(&u),
            vec![
                (PodOperation::Remove, vec!["old".into()]),
                (PodOperation::Add, vec!["new".into()])
            ]
        );
    }
}
