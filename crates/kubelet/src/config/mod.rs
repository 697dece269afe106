//! Pod sources and their merge into pod updates (upstream `pkg/kubelet/config`).
//!
//! A source ([`file`], [`http`]) sends full snapshots of its pods; [`PodConfig`] turns
//! each snapshot into incremental [`PodUpdate`]s (ADD / UPDATE / REMOVE / DELETE /
//! RECONCILE) for the SyncLoop, and [`run`] does so for all sources of a kubelet.

pub mod apiserver;
pub mod file;
pub mod http;
pub mod kubelet_configuration;
pub mod static_pod;
pub mod validation;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use static_pod::{CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

/// Annotations the kubelet sets itself; they never make two pods differ (upstream
/// `localAnnotations`).
const LOCAL_ANNOTATIONS: &[&str] = &[
    CONFIG_SOURCE_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    "kubernetes.io/config.mirror",
];

/// What happened to the pods of an update (upstream `kubetypes.PodOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOperation {
    /// Pods new to the kubelet.
    Add,
    /// Pods whose spec, labels or annotations changed (same UID).
    Update,
    /// Pods no longer listed by their source: stop them.
    Remove,
    /// Pods that got a `deletionTimestamp`: terminate them gracefully (their
    /// `deletionGracePeriodSeconds`, else `terminationGracePeriodSeconds`).
    Delete,
    /// Pods whose status alone changed: update the stored pod, touch no container.
    Reconcile,
}

/// A batch of pods from one source with one operation (upstream `kubetypes.PodUpdate`).
#[derive(Debug, Clone, PartialEq)]
pub struct PodUpdate {
    /// The operation applied to all `pods`.
    pub op: PodOperation,
    /// The pods concerned.
    pub pods: Vec<Pod>,
    /// The source name (`file`, `http`).
    pub source: String,
}

/// The full set of pods of one source at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The source name (`file`, `http`).
    pub source: &'static str,
    /// Every pod the source lists.
    pub pods: Vec<Pod>,
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

/// Merges the snapshots of `sources` into pod updates for the SyncLoop until either
/// channel closes, marking `ready` once every source was seen. With no source, `ready`
/// is marked at once.
pub async fn run(
    sources: &[&str],
    mut snapshots: mpsc::Receiver<Snapshot>,
    updates: mpsc::Sender<PodUpdate>,
    ready: SourcesReady,
) {
    let mut pod_config = PodConfig::new(sources);
    if pod_config.all_sources_seen() {
        ready.mark_ready();
    }
    while let Some(snapshot) = snapshots.recv().await {
        for update in pod_config.merge(snapshot.source, snapshot.pods) {
            if updates.send(update).await.is_err() {
                return;
            }
        }
        // Only now: the SyncLoop applies queued updates before it trusts this.
        if pod_config.all_sources_seen() {
            ready.mark_ready();
        }
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
    /// upstream's order REMOVE, ADD, UPDATE, DELETE, RECONCILE (upstream
    /// `checkAndUpdatePod`): a pod whose spec, labels, non-local annotations or deletion
    /// fields changed is an UPDATE, or a DELETE once it has a `deletionTimestamp`; a pod
    /// whose status alone changed is a RECONCILE. The kubelet's own annotations
    /// ([`LOCAL_ANNOTATIONS`]) are ignored and the first `config.seen` is kept. Pods
    /// without UID are ignored. Once every source was merged,
    /// [`PodConfig::all_sources_seen`] is true; the caller marks [`SourcesReady`] after
    /// queuing the updates.
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
        let (mut added, mut updated, mut deleted, mut reconciled) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (uid, pod) in new.iter_mut() {
            let Some(existing) = old.get(uid) else {
                added.push(pod.clone());
                continue;
            };
            if !differ_semantically(existing, pod) {
                if existing.status != pod.status {
                    let mut kept = existing.clone();
                    kept.status = pod.status.clone();
                    reconciled.push(kept.clone());
                    *pod = kept;
                } else {
                    *pod = existing.clone();
                }
                continue;
            }
            keep_first_seen(existing, pod);
            if pod.metadata.deletion_timestamp.is_some() {
                deleted.push(pod.clone());
            } else {
                updated.push(pod.clone());
            }
        }
        self.pods.insert(source.to_owned(), new);
        self.seen.insert(source.to_owned());
        [
            (PodOperation::Remove, removed),
            (PodOperation::Add, added),
            (PodOperation::Update, updated),
            (PodOperation::Delete, deleted),
            (PodOperation::Reconcile, reconciled),
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

/// True when the pods differ in what the kubelet acts on (upstream
/// `podsDifferSemantically`): spec, labels, deletion timestamp and grace period, and
/// annotations other than the local ones. Status is not part of it.
fn differ_semantically(a: &Pod, b: &Pod) -> bool {
    let (ma, mb) = (&a.metadata, &b.metadata);
    a.spec != b.spec
        || ma.labels.clone().unwrap_or_default() != mb.labels.clone().unwrap_or_default()
        || ma.deletion_timestamp != mb.deletion_timestamp
        || ma.deletion_grace_period_seconds != mb.deletion_grace_period_seconds
        || shared_annotations(a) != shared_annotations(b)
}

/// The annotations of a pod without the kubelet's local ones.
fn shared_annotations(pod: &Pod) -> BTreeMap<&str, &str> {
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !LOCAL_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Keeps the first-seen time of `existing` on its new version `pod`.
fn keep_first_seen(existing: &Pod, pod: &mut Pod) {
    let first_seen = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SEEN_ANNOTATION));
    if let Some(seen) = first_seen {
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(CONFIG_SEEN_ANNOTATION.to_owned(), seen.clone());
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

    fn annotate(mut pod: Pod, key: &str, value: &str) -> Pod {
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        pod
    }

    #[test]
    fn status_and_local_annotations_reconcile_deletion_deletes() {
        use k8s_openapi::api::core::v1::PodStatus;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut config = PodConfig::new(&["http"]);
        let first = annotate(pod("a", "Always"), CONFIG_SEEN_ANNOTATION, "T1");
        config.merge("http", vec![first.clone()]);

        // A new seen time alone is nothing.
        let reseen = annotate(pod("a", "Always"), CONFIG_SEEN_ANNOTATION, "T2");
        assert!(config.merge("http", vec![reseen.clone()]).is_empty());

        // Status alone: RECONCILE, carrying the new status on the stored pod.
        let mut with_status = reseen.clone();
        with_status.status = Some(PodStatus {
            message: Some("hi".into()),
            ..Default::default()
        });
        let u = config.merge("http", vec![with_status.clone()]);
        assert_eq!(ops(&u), vec![(PodOperation::Reconcile, vec!["a".into()])]);
        assert_eq!(u[0].pods[0].status, with_status.status);
        assert_eq!(
            u[0].pods[0].metadata.annotations,
            first.metadata.annotations
        );

        // A label or a shared annotation: UPDATE, keeping the first seen time.
        let labelled = annotate(with_status.clone(), "team", "x");
        let u = config.merge("http", vec![labelled.clone()]);
        assert_eq!(ops(&u), vec![(PodOperation::Update, vec!["a".into()])]);
        let ann = u[0].pods[0]
            .metadata
            .annotations
            .clone()
            .unwrap_or_default();
        assert_eq!(ann[CONFIG_SEEN_ANNOTATION], "T1");

        // A deletion timestamp: DELETE.
        let mut deleting = labelled.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        deleting.metadata.deletion_grace_period_seconds = Some(3);
        let u = config.merge("http", vec![deleting.clone(), pod("b", "Always")]);
        assert_eq!(
            ops(&u),
            vec![
                (PodOperation::Add, vec!["b".into()]),
                (PodOperation::Delete, vec!["a".into()])
            ]
        );
        assert!(
            config
                .merge("http", vec![deleting, pod("b", "Always")])
                .is_empty()
        );
    }

    #[test]
    fn sources_are_merged_separately() {
        let mut config = PodConfig::new(&["file", "http"]);
        config.merge("file", vec![pod("f", "Always")]);
        assert!(!config.all_sources_seen());
        let u = config.merge("http", vec![pod("h", "Always")]);
        assert_eq!(ops(&u), vec![(PodOperation::Add, vec!["h".into()])]);
        assert!(config.all_sources_seen());
        let u = config.merge("http", vec![]);
        assert_eq!(ops(&u), vec![(PodOperation::Remove, vec!["h".into()])]);
    }

    #[tokio::test]
    async fn run_marks_sources_ready_after_queuing() {
        let (snap_tx, snap_rx) = mpsc::channel(4);
        let (upd_tx, mut upd_rx) = mpsc::channel(4);
        let ready = SourcesReady::default();
        let task = tokio::spawn(run(&["file", "http"], snap_rx, upd_tx, ready.clone()));
        let send = |source, pods| Snapshot { source, pods };
        snap_tx
            .send(send("file", vec![pod("f", "Always")]))
            .await
            .unwrap();
        assert_eq!(upd_rx.recv().await.map(|u| u.op), Some(PodOperation::Add));
        assert!(!ready.all_ready());
        snap_tx.send(send("http", vec![])).await.unwrap();
        drop(snap_tx);
        let _ = task.await;
        assert!(ready.all_ready());

        let ready = SourcesReady::default();
        let (_snap_tx, snap_rx) = mpsc::channel(1);
        let (upd_tx, _upd_rx) = mpsc::channel(1);
        drop(_snap_tx);
        run(&[], snap_rx, upd_tx, ready.clone()).await;
        assert!(ready.all_ready(), "no source: ready at once");
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
